/* mismatch_test.c - ranks that disagree about the call (which collective, how
 * many elements) get a clear error instead of a hang or someone else's bytes,
 * and two communicators driven from two threads at once stay correct. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

static double
mm_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Leaves a mark when this rank saw the mismatch diagnosis, for rank 0 to count. */
static void
mm_mark(const char *what)
{
  char path[512];
  snprintf(path, sizeof(path), "%s/%s-%d", test_dir(), what, test_rank());
  FILE *f = fopen(path, "w");
  ASSERT(f);
  fclose(f);
}

static int
mm_count(const char *what)
{
  int n = 0;
  for (int q = 0; q < test_size(); q++) {
    char path[512];
    snprintf(path, sizeof(path), "%s/%s-%d", test_dir(), what, q);
    n += access(path, F_OK) == 0;
  }
  return n;
}

/* No rank hangs past the 5 s deadline; a rank whose call failed says why and is
 * poisoned; a rank whose part of the call matched its peers may succeed (the
 * caller checks its data), and then fails on its next call, because the ranks
 * that saw the mismatch have abandoned the communicator. */
static void
mm_expect_failure(collie_comm_t *comm, collie_result_t rc, double t0)
{
  double dt = mm_now() - t0;
  ASSERTF(dt < 5.5, "took %.2f s to return", dt);
  if (rc == COLLIE_INVALID_USAGE && strstr(collie_last_error(), "mismatched")) mm_mark("saw");
  if (rc != COLLIE_SUCCESS) {
    ASSERT_RC(COLLIE_INVALID_USAGE, "earlier error", collie_barrier(comm, NULL, NULL));
  } else {
    collie_opts_t o = {.timeout_ms = 5000};
    t0 = mm_now();
    ASSERT(collie_barrier(comm, &o, NULL) != COLLIE_SUCCESS);
    ASSERTF(mm_now() - t0 < 5.5, "the next call took %.2f s to fail", mm_now() - t0);
  }
}

TEST_IMPL(mismatch_kind)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  collie_opts_t o = {.timeout_ms = 5000};
  int32_t buf[4096];
  for (int i = 0; i < 4096; i++) buf[i] = r == 0 ? 1000 + i : -7;
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  double t0 = mm_now();
  collie_result_t rc;
  if (r == 1)
    rc = collie_allreduce(comm, buf, buf, 4096, COLLIE_INT32, COLLIE_SUM, &o, NULL);
  else
    rc = collie_broadcast(comm, buf, 4096, COLLIE_INT32, 0, &o, NULL);
  mm_expect_failure(comm, rc, t0);
  /* Broadcast receivers hold the root's data (complete if they succeeded) or
   * their own: never bytes of rank 1's allreduce. */
  if (r >= 2)
    for (int i = 0; i < 4096; i++)
      ASSERTF(rc == COLLIE_SUCCESS ? buf[i] == 1000 + i : (buf[i] == -7 || buf[i] == 1000 + i),
              "buf[%d] = %d (%s)", i, buf[i], collie_result_string(rc));
  if (r == 0) {
    usleep(300000);
    ASSERTF(mm_count("saw") >= 1, "no rank reported the mismatch");
  }
  ASSERT_OK(collie_comm_destroy(comm));
}

TEST_IMPL(mismatch_count)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  collie_opts_t o = {.timeout_ms = 5000};
  static float buf[100000];
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  double t0 = mm_now();
  size_t n = r == 0 ? 99999 : 100000;
  collie_result_t rc = collie_allreduce(comm, buf, buf, n, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL);
  mm_expect_failure(comm, rc, t0);
  if (r == 0) {
    usleep(300000);
    ASSERTF(mm_count("saw") >= 1, "no rank reported the mismatch");
  }
  ASSERT_OK(collie_comm_destroy(comm));
}

struct mm_thread {
  collie_comm_t *comm;
  int iters, failed;
  char msg[512];
};

/* Allreduce of (rank in this comm + i) for many i; checks each result. */
static void *
mm_thread_main(void *arg)
{
  struct mm_thread *t = arg;
  int r = collie_comm_rank(t->comm), p = collie_comm_size(t->comm);
  size_t n = 50000;
  int64_t *v = malloc(n * sizeof(int64_t));
  if (!v) return NULL;
  for (int it = 0; it < t->iters && !t->failed; it++) {
    for (size_t i = 0; i < n; i++) v[i] = r + it + (int64_t)i;
    collie_result_t rc =
        collie_allreduce(t->comm, v, v, it % 2 ? n : 3, COLLIE_INT64, COLLIE_SUM, NULL, NULL);
    if (rc != COLLIE_SUCCESS) {
      t->failed = 1;
      snprintf(t->msg, sizeof(t->msg), "iter %d: %s", it, collie_last_error());
      break;
    }
    size_t m = it % 2 ? n : 3;
    for (size_t i = 0; i < m; i++)
      if (v[i] != (int64_t)p * (it + (int64_t)i) + (int64_t)p * (p - 1) / 2) {
        t->failed = 1;
        snprintf(t->msg, sizeof(t->msg), "iter %d: v[%zu] = %lld", it, i, (long long)v[i]);
        break;
      }
  }
  free(v);
  return NULL;
}

/* Two communicators (even/odd and low/high halves), each driven by its own
 * thread, run collectives at the same time. */
TEST_IMPL(threads_two_comms)
{
  collie_comm_t *comm = test_comm(), *a = NULL, *b = NULL;
  int r = test_rank(), p = test_size();
  ASSERT_OK(collie_comm_split(comm, r % 2, r, &a));
  ASSERT_OK(collie_comm_split(comm, r < p / 2, r, &b));
  struct mm_thread ta = {a, 40, 0, ""}, tb = {b, 40, 0, ""};
  pthread_t th;
  ASSERT(pthread_create(&th, NULL, mm_thread_main, &ta) == 0);
  mm_thread_main(&tb);
  pthread_join(th, NULL);
  ASSERTF(!ta.failed, "comm a: %s", ta.msg);
  ASSERTF(!tb.failed, "comm b: %s", tb.msg);
  ASSERT_OK(collie_comm_destroy(a));
  ASSERT_OK(collie_comm_destroy(b));
  ASSERT_OK(collie_comm_destroy(comm));
}
