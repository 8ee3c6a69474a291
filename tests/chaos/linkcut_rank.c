/*
 * linkcut_rank.c - one rank of a job whose host loses its link
 * (scripts/linkcut.sh, issue 20): checked allreduces over the world, one
 * after another, until one fails. It then prints one line,
 *
 *   linkcut_rank: rank R host H failed after S s of silence: MESSAGE
 *
 * (S: from the start of the call that failed to its error), and exits 3;
 * exit 0 if ITERS calls all succeed, 1 on a wrong result or a failed init.
 *
 *   linkcut_rank ITERS
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "collie.h"

static double
linkcut_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int
main(int argc, char **argv)
{
  enum { N = 4096 };
  static double in[N], out[N];
  if (argc != 2) {
    fprintf(stderr, "usage: linkcut_rank ITERS\n");
    return 2;
  }
  long iters = atol(argv[1]);
  const char *host = getenv("TESTBED_HOST");
  collie_comm_t *world = NULL;
  if (collie_comm_init(&world) != COLLIE_SUCCESS) {
    fprintf(stderr, "linkcut_rank: init: %s\n", collie_last_error());
    return 1;
  }
  int r = collie_comm_rank(world), p = collie_comm_size(world);
  for (long i = 0; i < iters; i++) {
    for (int k = 0; k < N; k++) in[k] = (double)(r + 1) * (double)(i % 1000 + k);
    double t0 = linkcut_now();
    if (collie_allreduce(world, in, out, N, COLLIE_FLOAT64, COLLIE_SUM, NULL, NULL) !=
        COLLIE_SUCCESS) {
      printf("linkcut_rank: rank %d host %s failed after %.2f s of silence: %s\n", r,
             host ? host : "?", linkcut_now() - t0, collie_last_error());
      fflush(stdout);
      collie_comm_destroy(world);
      return 3;
    }
    double ranks = (double)p * (p + 1) / 2;
    for (int k = 0; k < N; k++)
      if (out[k] != ranks * (double)(i % 1000 + k)) {
        fprintf(stderr, "linkcut_rank: call %ld: element %d is %g\n", i, k, out[k]);
        return 1;
      }
  }
  collie_comm_destroy(world);
  return 0;
}
