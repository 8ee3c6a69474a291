/* proc.c - what /proc/<pid>/stat says about another process of this host:
 * whether it exited (shm's liveness check) and where it last ran (waits
 * that must not spin against a peer on their own CPU). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

const char *
collie__proc_stat(int pid, char *buf, size_t len, int *gone)
{
  char path[64];
  *gone = 0;
  collie__fmt(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *gone = errno == ENOENT;
    return NULL;
  }
  ssize_t n = read(fd, buf, len - 1);
  close(fd);
  if (n <= 0) return NULL;
  buf[n] = '\0';
  /* The command name may hold spaces and parentheses: the fields start
   * after the last ')'. */
  const char *p = strrchr(buf, ')');
  return p && p[1] == ' ' ? p + 2 : NULL;
}

int
collie__proc_dead(int pid)
{
  char buf[512];
  int gone;
  if (pid <= 0) return 0;
  const char *f = collie__proc_stat(pid, buf, sizeof(buf), &gone);
  return gone || (f && (*f == 'Z' || *f == 'X'));
}

int
collie__proc_cpu(int pid)
{
  char buf[1024];
  int gone;
  const char *f = collie__proc_stat(pid, buf, sizeof(buf), &gone);
  /* Field 39 (processor) is the 37th after the command name (state is 3). */
  for (int i = 0; f && i < 36; i++) {
    f = strchr(f, ' ');
    if (f) f++;
  }
  if (!f || *f < '0' || *f > '9') return -1;
  return (int)strtol(f, NULL, 10);
}
