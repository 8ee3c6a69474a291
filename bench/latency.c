/*
 * latency.c - small-message latency of allreduce and barrier, the numbers a
 * step of every small collective is made of. Run it under collierun:
 *
 *   collierun -n 2 build/bench/latency [floats [calls]]    (default 2, 20000)
 *   COLLIE_CHECK=1 collierun -n 2 build/bench/latency 256  (the cost of COLLIE_CHECK)
 *
 * Prints rank 0's mean time per call over `calls` back-to-back calls after
 * 100 warm-up calls (fewer over slow links: scripts/run.sh's test bed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "collie.h"
#include "cli.h"

int
main(int argc, char **argv)
{
  collie_comm_t *c;
  if (collie_comm_init(&c) != COLLIE_SUCCESS) {
    fprintf(stderr, "latency: %s\n", collie_last_error());
    return 1;
  }
  int n = argc > 1 ? atoi(argv[1]) : 2, iters = argc > 2 ? atoi(argv[2]) : 20000;
  if (n < 0 || iters < 1) {
    fprintf(stderr, "usage: latency [floats >= 0 [calls >= 1]]\n");
    return 2;
  }
  float *b = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
  if (!b) return 1;
  for (int i = 0; i < 100; i++)
    collie_allreduce(c, b, b, (size_t)n, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL);
  double t0 = cli_now_s();
  for (int i = 0; i < iters; i++)
    if (collie_allreduce(c, b, b, (size_t)n, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL) !=
        COLLIE_SUCCESS) {
      fprintf(stderr, "latency: %s\n", collie_last_error());
      return 1;
    }
  double ar = (cli_now_s() - t0) / iters * 1e6;
  t0 = cli_now_s();
  for (int i = 0; i < iters; i++) collie_barrier(c, NULL, NULL);
  double ba = (cli_now_s() - t0) / iters * 1e6;
  if (collie_comm_rank(c) == 0)
    printf("%d ranks: allreduce of %d float32: %.2f us, barrier: %.2f us\n", collie_comm_size(c), n,
           ar, ba);
  free(b);
  collie_comm_destroy(c);
  return 0;
}
