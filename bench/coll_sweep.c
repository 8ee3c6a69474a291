/*
 * coll_sweep.c - times every algorithm of every collective over a range of
 * sizes, next to what the cost model picks, so the model's constants can be
 * checked against this machine (docs/algorithms.md's table comes from here).
 *
 *   collierun -n 4 build/bench/coll_sweep [-c allreduce,broadcast] [-b 8] [-e 64M]
 *                                         [-f 4] [-t 0.05]
 *
 * Per (collective, size, algorithm): a warm-up, then back-to-back calls for
 * about -t seconds; time = the slowest rank's mean (us). Sizes follow
 * nccl-tests (the largest buffer of a rank, float32). Rank 0 prints one line
 * per point, then per (collective, size) the fastest algorithm and the one
 * AUTO chose (found by timing AUTO and naming the closest match, and by
 * COLLIE_DEBUG=INFO's decision table when run with it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collie.h"
#include "cli.h"

static const char *sweep_algos[] = {
#define COLLIE_XX_(name, str) str,
    COLLIE_ALGO_MAP(COLLIE_XX_)
#undef COLLIE_XX_
};

enum {
  SW_ALLREDUCE,
  SW_ALLGATHER,
  SW_REDUCE_SCATTER,
  SW_BROADCAST,
  SW_REDUCE,
  SW_ALLTOALL,
  SW_GATHER,
  SW_SCATTER,
  SW_COUNT
};
static const char *sweep_names[SW_COUNT] = {"allreduce", "allgather", "reduce_scatter", "broadcast",
                                            "reduce",    "alltoall",  "gather",         "scatter"};

/* One call of collective k on `bytes` (nccl-tests size) with algorithm a. */
static collie_result_t
sweep_call(collie_comm_t *comm, int k, size_t bytes, int a, float *s, float *r)
{
  int p = collie_comm_size(comm);
  size_t n = bytes / 4, per = n / (size_t)p;
  collie_opts_t o = {.algorithm = a};
  switch (k) {
  case SW_ALLREDUCE:
    return collie_allreduce(comm, s, r, n, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL);
  case SW_ALLGATHER:
    return collie_allgather(comm, s, r, per, COLLIE_FLOAT32, &o, NULL);
  case SW_REDUCE_SCATTER:
    return collie_reduce_scatter(comm, s, r, per, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL);
  case SW_BROADCAST:
    return collie_broadcast(comm, s, n, COLLIE_FLOAT32, 0, &o, NULL);
  case SW_REDUCE:
    return collie_reduce(comm, s, r, n, COLLIE_FLOAT32, COLLIE_SUM, 0, &o, NULL);
  case SW_ALLTOALL:
    return collie_alltoall(comm, s, r, per, COLLIE_FLOAT32, &o, NULL);
  case SW_GATHER:
    return collie_gather(comm, s, r, per, COLLIE_FLOAT32, 0, &o, NULL);
  default:
    return collie_scatter(comm, s, r, per, COLLIE_FLOAT32, 0, &o, NULL);
  }
}

/* Mean microseconds per call on the slowest rank, or -1 when a refuses. */
static double
sweep_time(collie_comm_t *comm, int k, size_t bytes, int a, double target, float *s, float *r)
{
  collie_result_t rc = sweep_call(comm, k, bytes, a, s, r);
  if (rc == COLLIE_INVALID_ARGUMENT) return -1; /* not this collective's, or cannot run */
  if (rc != COLLIE_SUCCESS) {
    fprintf(stderr, "coll_sweep: %s\n", collie_last_error());
    exit(1);
  }
  /* Estimate the iteration count from a few calls; all ranks agree on it. */
  double t0 = cli_now_s();
  for (int i = 0; i < 3; i++) sweep_call(comm, k, bytes, a, s, r);
  double est = (cli_now_s() - t0) / 3, iters_d = est > 0 ? target / est : 1000;
  collie_allreduce(comm, &iters_d, &iters_d, 1, COLLIE_FLOAT64, COLLIE_MIN, NULL, NULL);
  int iters = iters_d < 3 ? 3 : iters_d > 20000 ? 20000 : (int)iters_d;
  collie_barrier(comm, NULL, NULL);
  t0 = cli_now_s();
  for (int i = 0; i < iters; i++) sweep_call(comm, k, bytes, a, s, r);
  double us = (cli_now_s() - t0) / iters * 1e6;
  collie_allreduce(comm, &us, &us, 1, COLLIE_FLOAT64, COLLIE_MAX, NULL, NULL);
  return us;
}

int
main(int argc, char **argv)
{
  size_t minb = 8, maxb = 64u << 20;
  double factor = 4, target = 0.05;
  const char *colls = "allreduce,allgather,reduce_scatter,broadcast,reduce,alltoall,gather,scatter";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b"))
      minb = cli_size_arg(argv[i], argv[i + 1]);
    else if (!strcmp(argv[i], "-e"))
      maxb = cli_size_arg(argv[i], argv[i + 1]);
    else if (!strcmp(argv[i], "-f"))
      factor = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "-t"))
      target = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "-c"))
      colls = argv[i + 1];
    else {
      fprintf(stderr, "usage: coll_sweep [-c list] [-b min] [-e max] [-f factor] [-t seconds]\n");
      return 2;
    }
  }
  if (factor < 1.5) factor = 2;
  collie_comm_t *comm;
  if (collie_comm_init(&comm) != COLLIE_SUCCESS) {
    fprintf(stderr, "coll_sweep: %s\n", collie_last_error());
    return 1;
  }
  int rank = collie_comm_rank(comm), p = collie_comm_size(comm);
  float *s = calloc(maxb / 4 + 16, 4), *r = calloc(maxb / 4 + 16, 4);
  if (!s || !r) return 1;
  if (rank == 0)
    printf("# coll_sweep: %d ranks; time = slowest rank's mean, us\n"
           "%-15s %10s %-22s %12s\n",
           p, "collective", "bytes", "algorithm", "time_us");
  for (int k = 0; k < SW_COUNT; k++) {
    if (!strstr(colls, sweep_names[k])) continue;
    for (double b = (double)minb; b <= (double)maxb; b *= factor) {
      size_t bytes = (size_t)b / 4 * 4;
      if (k != SW_ALLREDUCE && k != SW_BROADCAST && k != SW_REDUCE)
        bytes = bytes / (4 * (size_t)p) * 4 * (size_t)p;
      if (!bytes) continue;
      double best = -1, t_auto = -1;
      int best_a = -1;
      for (int a = 0; a < COLLIE_ALGO_COUNT_; a++) {
        double us = sweep_time(comm, k, bytes, a, target, s, r);
        if (us < 0) continue;
        if (rank == 0)
          printf("%-15s %10zu %-22s %12.2f\n", sweep_names[k], bytes, sweep_algos[a], us);
        if (a == COLLIE_ALGO_AUTO)
          t_auto = us;
        else if (best < 0 || us < best) {
          best = us;
          best_a = a;
        }
      }
      if (rank == 0 && best_a >= 0)
        printf("%-15s %10zu best %-17s %12.2f   auto %.2f (%+.0f%%)\n", sweep_names[k], bytes,
               sweep_algos[best_a], best, t_auto, (t_auto / best - 1) * 100);
      fflush(stdout);
    }
  }
  free(s);
  free(r);
  collie_comm_destroy(comm);
  return 0;
}
