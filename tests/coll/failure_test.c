/* failure_test.c - a rank that dies or never calls must turn into a clear
 * error on the others, fast, never a hang. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

static double
failure_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The last rank is SIGKILLed between two large allreduces; the others must
 * fail with REMOTE_ERROR naming it well before the (20 s) timeout, then fail
 * fast with INVALID_USAGE, and still destroy cleanly. */
TEST_IMPL(kill_rank_mid_allreduce)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  size_t n = 4u << 20;
  float *buf = calloc(n, sizeof(float));
  ASSERT(buf);
  ASSERT_OK(collie_allreduce(comm, buf, buf, n, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  if (r == p - 1) {
    usleep(100000); /* let the others enter the next allreduce */
    test_die_by_sigkill();
  }
  double t0 = failure_now();
  collie_result_t rc;
  int iter = 0;
  do { /* a rank may finish one call before it notices, never many */
    rc = collie_allreduce(comm, buf, buf, n, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL);
  } while (rc == COLLIE_SUCCESS && ++iter < 3);
  double dt = failure_now() - t0;
  ASSERTF(rc == COLLIE_REMOTE_ERROR, "got %s: %s", collie_result_string(rc), collie_last_error());
  char who[32];
  snprintf(who, sizeof(who), "rank %d", p - 1);
  ASSERTF(strstr(collie_last_error(), who) || strstr(collie_last_error(), "closed"),
          "message does not name the dead rank: %s", collie_last_error());
  ASSERTF(dt < 5.0, "took %.2f s to notice the dead rank", dt);
  ASSERT_RC(COLLIE_INVALID_USAGE, "earlier error", collie_barrier(comm, NULL, NULL));
  ASSERT_OK(collie_comm_destroy(comm));
  free(buf);
}

/* Rank 0 never joins the second barrier: the others time out (per-call
 * timeout) with a message naming what they waited for. */
TEST_IMPL(timeout_names_peer)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  if (r != 0) {
    collie_opts_t opts = {.timeout_ms = 300};
    double t0 = failure_now();
    ASSERT_RC(COLLIE_TIMEOUT, "barrier #1", collie_barrier(comm, &opts, NULL));
    double dt = failure_now() - t0;
    ASSERTF(dt >= 0.29 && dt < 3.0, "timeout after %.3f s, wanted ~0.3 s", dt);
    ASSERT(strstr(collie_last_error(), "rank"));
  }
  /* Rank 0 stays away until the others gave up (its closing barrier in destroy
   * would otherwise complete theirs), then destroys. */
  if (r == 0) usleep(1500000);
  ASSERT_OK(collie_comm_destroy(comm));
}
