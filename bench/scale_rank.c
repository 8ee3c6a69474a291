/*
 * scale_rank.c - one rank of bench/scale_hosts.sh (issue 20, item 7): what
 * a job of many ranks pays around its collectives. It times its own init,
 * one barrier and destroy, reads its peak resident memory and its open
 * descriptors after init, and prints one line:
 *
 *   scale: rank R host H init_ms I barrier_ms B destroy_ms D rss_kib M fds F store_b S
 *
 * Rank 0 serves the job's tcp store, so its descriptors less another rank's
 * are the store's connections (one per rank). store_b is what this rank's
 * connection to the store carried by the end of the barrier, both ways (the
 * kernel's count for the socket whose peer is COLLIE_STORE's port: bytes
 * acknowledged plus bytes received), or -1 where it cannot be read.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include "collie.h"

static double
scale_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static long
scale_hwm_kib(void)
{
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof(line), f))
    if (!strncmp(line, "VmHWM:", 6)) kib = atol(line + 6);
  if (f) fclose(f);
  return kib;
}

static int
scale_fds(void)
{
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  while (d && readdir(d)) n++;
  if (d) closedir(d);
  return n - 3; /* ".", ".." and the directory itself */
}

/* Bytes this process's connection to the tcp store carried, or -1. */
static long long
scale_store_bytes(void)
{
  const char *url = getenv("COLLIE_STORE"), *colon = url ? strrchr(url, ':') : NULL;
  int port = colon ? atoi(colon + 1) : 0;
  if (!url || strncmp(url, "tcp://", 6) != 0 || port <= 0) return -1;
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  long long total = -1;
  while (d && (e = readdir(d))) {
    int fd = atoi(e->d_name);
    struct stat st;
    struct sockaddr_in peer;
    socklen_t plen = sizeof(peer);
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
        getpeername(fd, (struct sockaddr *)&peer, &plen) != 0 || peer.sin_family != AF_INET ||
        ntohs(peer.sin_port) != port)
      continue;
    struct tcp_info ti;
    socklen_t tlen = sizeof(ti);
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tlen) != 0) continue;
    total = (total < 0 ? 0 : total) + (long long)ti.tcpi_bytes_acked +
            (long long)ti.tcpi_bytes_received;
  }
  if (d) closedir(d);
  return total;
}

int
main(void)
{
  collie_comm_t *world = NULL;
  double t0 = scale_ms();
  if (collie_comm_init(&world) != COLLIE_SUCCESS) {
    fprintf(stderr, "scale_rank: init: %s\n", collie_last_error());
    return 1;
  }
  double t1 = scale_ms();
  int fds = scale_fds();
  if (collie_barrier(world, NULL, NULL) != COLLIE_SUCCESS) {
    fprintf(stderr, "scale_rank: barrier: %s\n", collie_last_error());
    return 1;
  }
  double t2 = scale_ms();
  long long store_b = scale_store_bytes();
  int r = collie_comm_rank(world);
  if (collie_comm_destroy(world) != COLLIE_SUCCESS) {
    fprintf(stderr, "scale_rank: destroy: %s\n", collie_last_error());
    return 1;
  }
  double t3 = scale_ms();
  const char *host = getenv("TESTBED_HOST");
  printf("scale: rank %d host %s init_ms %.1f barrier_ms %.2f destroy_ms %.1f rss_kib %ld fds %d "
         "store_b %lld\n",
         r, host ? host : "0", t1 - t0, t2 - t1, t3 - t2, scale_hwm_kib(), fds, store_b);
  return 0;
}
