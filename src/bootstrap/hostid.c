/*
 * hostid.c - the identity of this host, which decides which ranks share
 * memory: two ranks use shm with each other exactly when their identities
 * are equal.
 *
 * Neither part is enough alone: cloned VMs and containers on different
 * machines may share a hostname, and containers on one machine share the boot
 * id but usually not /dev/shm (each has its own hostname too). Together they
 * name one kernel and one UTS namespace, the usual unit that shares /dev/shm.
 * An override (COLLIE_HOST_ID) covers the cases this guess gets wrong, and lets
 * tests fake several hosts on one machine. Launcher hints such as
 * LOCAL_WORLD_SIZE are never used: they say what the launcher meant, not
 * which processes can map the same memory.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"

void
collie__machine_id(char *out, size_t len)
{
  if (!out || len == 0) return;
  out[0] = '\0';
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, out, len - 1);
  close(fd);
  out[n > 0 ? n : 0] = '\0';
  /* Trim the trailing newline and any other whitespace. */
  size_t b = strlen(out);
  while (b > 0 && (out[b - 1] == '\n' || out[b - 1] == ' ' || out[b - 1] == '\r')) b--;
  out[b] = '\0';
}

void
collie__host_id(const char *override, char *out, size_t len)
{
  if (!out || len == 0) return;
  if (override && *override) {
    snprintf(out, len, "%s", override);
    return;
  }
  char host[256] = "";
  if (gethostname(host, sizeof(host) - 1) != 0 || !host[0]) snprintf(host, sizeof(host), "unknown");
  char boot[64];
  collie__machine_id(boot, sizeof(boot));
  if (boot[0])
    snprintf(out, len, "%s/%s", host, boot);
  else
    snprintf(out, len, "%s", host);
}
