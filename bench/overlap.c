/*
 * overlap.c - does async communication really overlap computation? Times,
 * on every rank (the slowest rank counts):
 *   (a) compute: a loop of arithmetic on a private buffer, alone;
 *   (b) comm:    B async allreduces of S bytes of float32 (bucketed, as a
 *                data-parallel trainer issues gradient buckets), waited;
 *   (c) both:    the B issued first, then the compute loop, then the waits.
 * Perfect overlap gives (c) = max(a, b); none gives a + b. It prints the three
 * times, overlap = (a + b - c) / min(a, b) (1: the shorter one fully hidden,
 * 0: none, below 0: running both costs more than running them in turn), and how many allreduces had
 * finished by the end of the compute loop in (c) (collie_test, which never blocks).
 *
 *   collierun -n 2 build/bench/overlap [-b 32] [-s 1M] [-c 300] [-r 5] [-m cpu|sleep]
 *
 * -c is the compute loop's target in ms (calibrated once, the slowest
 * rank's count used by all); -r repetitions of (a), (b), (c) interleaved,
 * the median of each counts (robust to a neighbour's load on a shared box).
 * Note that the comm's worker thread needs a core too: with as many ranks
 * as cores, (c) competes with the compute loop for CPU (and shm's copies and
 * reductions are CPU work themselves). -m sleep replaces the loop by a
 * sleep of the same length (compute offloaded elsewhere, e.g. to a GPU):
 * that shows the overlap the queue allows when a core is free.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collie.h"
#include "cli.h"

#define OVL_CHECK(call)                                                                            \
  do {                                                                                             \
    collie_result_t rc_ = (call);                                                                  \
    if (rc_ != COLLIE_SUCCESS) {                                                                   \
      fprintf(stderr, "overlap: %s: %s\n", #call, collie_last_error());                            \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* The compute: `passes` sweeps of a multiply-add over a 64 KiB buffer (in
 * L2, so it is arithmetic, not memory traffic, and leaves the memory bus to
 * the communication). */
enum { OVL_WORK = 16384 };
static float ovl_work[OVL_WORK];

static int ovl_sleep; /* -m sleep: compute is a nanosleep of ovl_sleep_ns */
static long ovl_sleep_ns;

static void
ovl_compute(long passes)
{
  if (ovl_sleep) {
    struct timespec ts = {.tv_sec = ovl_sleep_ns / 1000000000L,
                          .tv_nsec = ovl_sleep_ns % 1000000000L};
    while (nanosleep(&ts, &ts)) {
    }
    return;
  }
  for (long p = 0; p < passes; p++)
    for (int i = 0; i < OVL_WORK; i++) ovl_work[i] = ovl_work[i] * 0.999f + 0.001f;
}

/* Median of v[0..n) (sorts v). */
static double
ovl_median(double *v, int n)
{
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The slowest rank's value. */
static double
ovl_max(collie_comm_t *comm, double v)
{
  OVL_CHECK(collie_allreduce(comm, &v, &v, 1, COLLIE_FLOAT64, COLLIE_MAX, NULL, NULL));
  return v;
}

static void
ovl_issue(collie_comm_t *comm, float **bufs, int nb, size_t n, collie_work_t **w)
{
  for (int i = 0; i < nb; i++)
    OVL_CHECK(collie_allreduce(comm, bufs[i], bufs[i], n, COLLIE_FLOAT32, COLLIE_SUM, NULL, &w[i]));
}

static void
ovl_wait(collie_work_t **w, int nb)
{
  for (int i = 0; i < nb; i++) {
    OVL_CHECK(collie_wait(w[i], -1));
    collie_work_free(w[i]);
  }
}

int
main(int argc, char **argv)
{
  int nb = 32, reps = 7;
  size_t bytes = 1u << 20;
  double target_ms = 300;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b"))
      nb = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-s"))
      bytes = cli_size_arg(argv[i], argv[i + 1]);
    else if (!strcmp(argv[i], "-c"))
      target_ms = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "-r"))
      reps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-m"))
      ovl_sleep = !strcmp(argv[i + 1], "sleep");
    else {
      fprintf(stderr,
              "usage: overlap [-b buckets] [-s bytes] [-c compute_ms] [-r reps] [-m cpu|sleep]\n");
      return 2;
    }
  }
  if (nb < 1 || reps < 1 || reps > 99 || bytes < 4 || target_ms <= 0) {
    fprintf(stderr, "overlap: bad arguments\n");
    return 2;
  }
  collie_comm_t *comm;
  OVL_CHECK(collie_comm_init(&comm));
  int rank = collie_comm_rank(comm), size = collie_comm_size(comm);
  size_t n = bytes / 4;
  float **bufs = calloc((size_t)nb, sizeof(*bufs));
  collie_work_t **w = calloc((size_t)nb, sizeof(*w));
  if (!bufs || !w) return 1;
  for (int i = 0; i < nb; i++) {
    if (!(bufs[i] = malloc(n * sizeof(float)))) return 1;
    for (size_t k = 0; k < n; k++) bufs[i][k] = 1.0f;
  }

  /* Calibrate: passes for target_ms on this rank (timed over >= 50 ms);
   * all ranks use the largest count. */
  ovl_sleep_ns = (long)(target_ms * 1e6);
  long cal = 64;
  double t0, dt;
  for (;;) {
    int saved = ovl_sleep;
    ovl_sleep = 0;
    t0 = cli_now_s();
    ovl_compute(cal);
    dt = cli_now_s() - t0;
    ovl_sleep = saved;
    if (dt >= 0.05) break;
    cal *= 2;
  }
  long passes = (long)ovl_max(comm, target_ms / 1e3 / (dt / (double)cal));

  /* Warm-up: channels, scratch, the worker thread. */
  ovl_issue(comm, bufs, nb, n, w);
  ovl_wait(w, nb);

  double ta[100], tb[100], tc[100];
  int done_min = nb;
  for (int r = 0; r < reps; r++) {
    OVL_CHECK(collie_barrier(comm, NULL, NULL));
    t0 = cli_now_s();
    ovl_compute(passes);
    double a = ovl_max(comm, cli_now_s() - t0);

    OVL_CHECK(collie_barrier(comm, NULL, NULL));
    t0 = cli_now_s();
    ovl_issue(comm, bufs, nb, n, w);
    ovl_wait(w, nb);
    double b = ovl_max(comm, cli_now_s() - t0);

    OVL_CHECK(collie_barrier(comm, NULL, NULL));
    t0 = cli_now_s();
    ovl_issue(comm, bufs, nb, n, w);
    ovl_compute(passes);
    int done = 0;
    for (int i = 0; i < nb; i++) done += collie_test(w[i]) != COLLIE_IN_PROGRESS;
    ovl_wait(w, nb);
    double c = ovl_max(comm, cli_now_s() - t0);
    double dmin = -ovl_max(comm, -(double)done);

    if (rank == 0)
      printf("rep %d: compute %.1f ms  comm %.1f ms  both %.1f ms  (%d/%d done at compute end)\n",
             r, a * 1e3, b * 1e3, c * 1e3, (int)dmin, nb);
    ta[r] = a;
    tb[r] = b;
    tc[r] = c;
    if ((int)dmin < done_min) done_min = (int)dmin;
  }
  double best_a = ovl_median(ta, reps), best_b = ovl_median(tb, reps),
         best_c = ovl_median(tc, reps);
  if (rank == 0) {
    double shorter = best_a < best_b ? best_a : best_b;
    printf("ranks %d, %d x %zu B float32 allreduce, compute by %s, median of %d\n", size, nb, bytes,
           ovl_sleep ? "sleep" : "cpu", reps);
    printf("compute alone      %8.1f ms\n", best_a * 1e3);
    printf("comm alone         %8.1f ms\n", best_b * 1e3);
    printf("compute + comm     %8.1f ms   (serial would be %.1f, perfect overlap %.1f)\n",
           best_c * 1e3, (best_a + best_b) * 1e3, (best_a > best_b ? best_a : best_b) * 1e3);
    printf("overlap            %8.2f      ((a + b - c) / min(a, b))\n",
           (best_a + best_b - best_c) / shorter);
    printf("finished during compute: at least %d/%d allreduces in every rep\n", done_min, nb);
  }
  OVL_CHECK(collie_comm_destroy(comm));
  for (int i = 0; i < nb; i++) free(bufs[i]);
  free(bufs);
  free(w);
  return 0;
}
