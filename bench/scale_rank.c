/*
 * scale_rank.c - one rank of bench/scale_hosts.sh (issue 20, item 7): what
 * a job of many ranks pays around its collectives. It times its own init,
 * one barrier and destroy, reads its peak resident memory and its open
 * descriptors after init, and prints one line:
 *
 *   scale: rank R host H init_ms I barrier_ms B destroy_ms D rss_kib M fds F
 *
 * Rank 0 serves the job's tcp store, so its descriptors less another rank's
 * are the store's connections (one per rank).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
  int r = collie_comm_rank(world);
  if (collie_comm_destroy(world) != COLLIE_SUCCESS) {
    fprintf(stderr, "scale_rank: destroy: %s\n", collie_last_error());
    return 1;
  }
  double t3 = scale_ms();
  const char *host = getenv("TESTBED_HOST");
  printf("scale: rank %d host %s init_ms %.1f barrier_ms %.2f destroy_ms %.1f rss_kib %ld fds %d\n",
         r, host ? host : "0", t1 - t0, t2 - t1, t3 - t2, scale_hwm_kib(), fds);
  return 0;
}
