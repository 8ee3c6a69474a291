/* async_test.c - operations issued with a work handle: they return at once,
 * the communicator's worker runs them in issue order, handles may be waited,
 * polled or freed early, a blocking call waits behind them, and a failure
 * reaches the waiter with its own message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

static double
async_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 1024 allreduces outstanding at once, each of 4 int32 with values that
 * differ per op and rank, then one blocking allreduce behind them (it must
 * wait its turn and see the same order on every rank), then the waits. */
TEST_IMPL(async_many_thread)
{
  enum { NOPS = 1024, N = 4 };
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  int32_t(*buf)[N] = calloc(NOPS, sizeof(*buf));
  collie_work_t **w = calloc(NOPS, sizeof(*w));
  ASSERT(buf && w);
  for (int i = 0; i < NOPS; i++) {
    for (int k = 0; k < N; k++) buf[i][k] = i * 10 + k + r;
    ASSERT_OK(collie_allreduce(comm, buf[i], buf[i], N, COLLIE_INT32, COLLIE_SUM, NULL, &w[i]));
    ASSERT(w[i] != NULL);
  }
  int32_t b = r + 1;
  ASSERT_OK(collie_allreduce(comm, &b, &b, 1, COLLIE_INT32, COLLIE_SUM, NULL, NULL));
  ASSERT(b == p * (p + 1) / 2);
  /* Wait in reverse: completion does not depend on the order of waits. */
  for (int i = NOPS - 1; i >= 0; i--) {
    ASSERT_OK(collie_wait(w[i], 10000));
    ASSERT_OK(collie_test(w[i])); /* a finished handle keeps its result */
    for (int k = 0; k < N; k++)
      ASSERTF(buf[i][k] == p * (i * 10 + k) + p * (p - 1) / 2, "op %d elem %d: %d", i, k,
              (int)buf[i][k]);
    collie_work_free(w[i]);
  }
  collie_work_free(NULL);
  ASSERT_OK(collie_comm_destroy(comm));
  free(buf);
  free(w);
}

/* Handles freed at once and never waited on: the operations still run (a
 * later blocking call behind them sees their results), and destroy with
 * freed-but-pending work drains it without use-after-free. A handle kept
 * past destroy stays readable. */
TEST_IMPL(async_free_early_thread)
{
  enum { NOPS = 200, N = 1024 };
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  float *buf = calloc((size_t)NOPS * N, sizeof(float));
  ASSERT(buf);
  for (int i = 0; i < NOPS; i++) {
    collie_work_t *w = NULL;
    for (int k = 0; k < N; k++) buf[(size_t)i * N + k] = (float)(i + r);
    ASSERT_OK(collie_allreduce(comm, buf + (size_t)i * N, buf + (size_t)i * N, N, COLLIE_FLOAT32,
                               COLLIE_SUM, NULL, &w));
    collie_work_free(w);
  }
  ASSERT_OK(collie_barrier(comm, NULL, NULL)); /* behind every one of them */
  for (int i = 0; i < NOPS; i++)
    ASSERTF(buf[(size_t)i * N + N - 1] == (float)(p * i + p * (p - 1) / 2), "op %d: %g", i,
            (double)buf[(size_t)i * N + N - 1]);
  collie_work_t *last = NULL;
  for (int i = 0; i < 16; i++) {
    collie_work_t *w = NULL;
    ASSERT_OK(collie_allreduce(comm, buf, buf, N, COLLIE_FLOAT32, COLLIE_MAX, NULL, &w));
    if (i == 15)
      last = w;
    else
      collie_work_free(w);
  }
  ASSERT_OK(collie_comm_destroy(comm)); /* drains the 16 first */
  ASSERT_OK(collie_wait(last, 0));
  collie_work_free(last);
  free(buf);
}

/* collie_test never blocks: poll a 4 MiB allreduce until it is done. */
TEST_IMPL(async_test_poll_thread)
{
  collie_comm_t *comm = test_comm();
  int p = test_size();
  size_t n = 1u << 20;
  float *buf = malloc(n * sizeof(float));
  ASSERT(buf);
  for (size_t i = 0; i < n; i++) buf[i] = 1.0f;
  collie_work_t *w = NULL;
  ASSERT_OK(collie_allreduce(comm, buf, buf, n, COLLIE_FLOAT32, COLLIE_SUM, NULL, &w));
  collie_result_t rc;
  double t0 = async_now();
  while ((rc = collie_test(w)) == COLLIE_IN_PROGRESS) {
    double t = async_now();
    ASSERTF(t - t0 < 20.0, "still in progress after %.1f s", t - t0);
    usleep(200);
  }
  ASSERT_OK(rc);
  ASSERT(buf[0] == (float)p && buf[n - 1] == (float)p);
  ASSERT_OK(collie_wait(w, -1));
  collie_work_free(w);
  /* Argument errors of async calls return at once, hand out no handle, and
   * leave the communicator usable. */
  w = (collie_work_t *)buf;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "dtype",
            collie_allreduce(comm, buf, buf, 1, (collie_dtype_t)99, COLLIE_SUM, NULL, &w));
  ASSERT(w == NULL);
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "work is NULL", collie_wait(NULL, 0));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "work is NULL", collie_test(NULL));
  ASSERT_OK(collie_barrier(comm, NULL, &w));
  ASSERT_OK(collie_wait(w, -1));
  collie_work_free(w);
  ASSERT_OK(collie_comm_destroy(comm));
  free(buf);
}

/* A short wait on an op blocked on a sleeping peer returns TIMEOUT without
 * harming the op or the communicator; a later wait gets its success. */
TEST_IMPL(async_wait_timeout_thread)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  if (r != 0) usleep(600000);
  collie_work_t *w = NULL;
  int32_t v = r == 0 ? 77 : -1;
  ASSERT_OK(collie_broadcast(comm, &v, 1, COLLIE_INT32, 0, NULL, &w));
  /* The root of a broadcast to sleeping peers may finish early on shm
   * (eager send); a barrier behind it may not. */
  collie_work_t *wb = NULL;
  ASSERT_OK(collie_barrier(comm, NULL, &wb));
  if (r == 0) {
    double t0 = async_now();
    ASSERT_RC(COLLIE_TIMEOUT, "still", collie_wait(wb, 50));
    double dt = async_now() - t0;
    ASSERTF(dt >= 0.045 && dt < 0.5, "wait(50 ms) took %.3f s", dt);
    ASSERT(collie_test(wb) == COLLIE_IN_PROGRESS);
  }
  ASSERT_OK(collie_wait(wb, -1));
  collie_work_free(wb);
  ASSERT_OK(collie_wait(w, 10000));
  ASSERT(v == 77);
  collie_work_free(w);
  ASSERT_OK(collie_allreduce(comm, &v, &v, 1, COLLIE_INT32, COLLIE_SUM, NULL, NULL));
  ASSERT(v == 77 * test_size());
  ASSERT_OK(collie_comm_destroy(comm));
}

/* The last rank is SIGKILLed: the others' async allreduce reports
 * REMOTE_ERROR through wait with its own message (naming the op); the op
 * queued behind it fails fast with INVALID_USAGE quoting that error; test
 * gives the same; destroy of the poisoned comm does not wait. */
TEST_IMPL(async_remote_error_thread)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  size_t n = 4u << 20;
  float *buf = calloc(n, sizeof(float));
  ASSERT(buf);
  ASSERT_OK(collie_allreduce(comm, buf, buf, n, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  if (r == p - 1) {
    usleep(100000);
    test_die_by_sigkill();
  }
  collie_work_t *w[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; i++)
    ASSERT_OK(collie_allreduce(comm, buf, buf, n, COLLIE_FLOAT32, COLLIE_SUM, NULL, &w[i]));
  double t0 = async_now();
  collie_result_t rc = collie_wait(w[0], -1);
  int i = 0;
  if (rc == COLLIE_SUCCESS) rc = collie_wait(w[i = 1], -1); /* may finish one before it notices */
  ASSERTF(rc == COLLIE_REMOTE_ERROR, "got %s: %s", collie_result_string(rc), collie_last_error());
  ASSERTF(strstr(collie_last_error(), "allreduce #"), "message lacks the op: %s",
          collie_last_error());
  ASSERTF(async_now() - t0 < 5.0, "took %.2f s", async_now() - t0);
  char first[512];
  snprintf(first, sizeof(first), "%s", collie_last_error());
  ASSERT(collie_test(w[i]) == COLLIE_REMOTE_ERROR);
  ASSERT(!strcmp(collie_last_error(), first));
  ASSERT_RC(COLLIE_INVALID_USAGE, "earlier error", collie_wait(w[2], -1));
  ASSERTF(strstr(collie_last_error(), "queued allreduce"), "%s", collie_last_error());
  ASSERT_RC(COLLIE_INVALID_USAGE, "earlier error", collie_barrier(comm, NULL, NULL));
  collie_work_t *wb = NULL;
  ASSERT_RC(COLLIE_INVALID_USAGE, "earlier error", collie_barrier(comm, NULL, &wb));
  ASSERT(wb == NULL);
  ASSERT_OK(collie_comm_destroy(comm));
  for (int k = 0; k < 3; k++) collie_work_free(w[k]);
  free(buf);
}

/* Async collectives, an async group (ring exchange) and async p2p mixed in
 * one queue; then a blocking group behind them. */
TEST_IMPL(async_group_mix_thread)
{
  enum { N = 300000 };
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  int right = (r + 1) % p, left = (r + p - 1) % p;
  int32_t *a = malloc(N * sizeof(int32_t)), *s = malloc(N * sizeof(int32_t)),
          *d = malloc(N * sizeof(int32_t));
  ASSERT(a && s && d);
  for (int k = 0; k < N; k++) {
    a[k] = r + k;
    s[k] = r * 1000 + k;
    d[k] = -1;
  }
  collie_work_t *w[4];
  ASSERT_OK(collie_allreduce(comm, a, a, N, COLLIE_INT32, COLLIE_SUM, NULL, &w[0]));
  ASSERT_OK(collie_group_start(comm));
  ASSERT_OK(collie_send(comm, s, N, COLLIE_INT32, right, 3, NULL, NULL));
  ASSERT_OK(collie_recv(comm, d, N, COLLIE_INT32, left, 3, NULL, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "inside a group",
            collie_send(comm, s, N, COLLIE_INT32, right, 3, NULL, &w[3]));
  ASSERT_OK(collie_group_end(comm, &w[1]));
  int32_t root_val = r == p - 1 ? 4242 : 0;
  ASSERT_OK(collie_broadcast(comm, &root_val, 1, COLLIE_INT32, p - 1, NULL, &w[2]));
  /* A second group reuses nothing of the queued one. */
  int32_t x = r, y = -1;
  ASSERT_OK(collie_group_start(comm));
  ASSERT_OK(collie_send(comm, &x, 1, COLLIE_INT32, left, 4, NULL, NULL));
  ASSERT_OK(collie_recv(comm, &y, 1, COLLIE_INT32, right, 4, NULL, NULL));
  ASSERT_OK(collie_group_end(comm, NULL)); /* blocking, behind the three */
  ASSERT(y == right);
  for (int i = 0; i < 3; i++) ASSERT_OK(collie_wait(w[i], -1));
  for (int k = 0; k < N; k += 997) {
    ASSERTF(a[k] == p * k + p * (p - 1) / 2, "allreduce elem %d: %d", k, (int)a[k]);
    ASSERTF(d[k] == left * 1000 + k, "group elem %d: %d", k, (int)d[k]);
  }
  ASSERT(root_val == 4242);
  for (int i = 0; i < 3; i++) collie_work_free(w[i]);
  ASSERT_OK(collie_comm_destroy(comm));
  free(a);
  free(s);
  free(d);
}

/* Issue order is run order: 64 outstanding broadcasts of distinct values
 * from rotating roots each deliver their own value (ranks matched the i-th
 * issued with the i-th issued), and 64 outstanding sends with one tag
 * arrive in issue order into outstanding receives. */
TEST_IMPL(async_order_thread)
{
  enum { NB = 64, NP = 64 };
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  int32_t v[NB];
  collie_work_t *w[NB];
  for (int i = 0; i < NB; i++) {
    int root = i % p;
    v[i] = r == root ? 1000 * i + root : -1;
    ASSERT_OK(collie_broadcast(comm, &v[i], 1, COLLIE_INT32, root, NULL, &w[i]));
  }
  for (int i = 0; i < NB; i++) {
    ASSERT_OK(collie_wait(w[i], -1));
    ASSERTF(v[i] == 1000 * i + i % p, "broadcast %d delivered %d", i, (int)v[i]);
    collie_work_free(w[i]);
  }
  if (p >= 2) {
    int32_t msg[NP];
    collie_work_t *pw[NP];
    for (int i = 0; i < NP; i++) {
      msg[i] = r == 0 ? i * 11 : -1;
      if (r == 0)
        ASSERT_OK(collie_send(comm, &msg[i], 1, COLLIE_INT32, 1, 9, NULL, &pw[i]));
      else if (r == 1)
        ASSERT_OK(collie_recv(comm, &msg[i], 1, COLLIE_INT32, 0, 9, NULL, &pw[i]));
    }
    if (r <= 1)
      for (int i = 0; i < NP; i++) {
        ASSERT_OK(collie_wait(pw[i], -1));
        ASSERTF(msg[i] == i * 11, "message %d: %d", i, (int)msg[i]);
        collie_work_free(pw[i]);
      }
  }
  ASSERT_OK(collie_comm_destroy(comm));
}
