/*
 * shrink_test.c - collie_comm_shrink: after a rank is killed (the last one,
 * or rank 0, whose death the runner's file store survives) the others agree
 * on who is left and go on with right results; a frozen rank is left out
 * when the timeout passes, and told so when it wakes; a rank that dies
 * during the agreement is left out by a shrink that follows; a healthy
 * communicator leaves out the ranks it excludes; bad arguments are named.
 * The shrinks here pass a timeout longer than the test's own, where no rank
 * is frozen: a shrink that waited for it instead of finding the dead rank
 * fails the test by its timeout. The exception is the death during the
 * agreement, whose shrinks pass 20 s in a test of 60 s: there a stuck
 * agreement must fail with its own error (printed per attempt), not be
 * killed silently by the runner.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner.h"

/* An allreduce of (rank + 1) on c, checked: every element is the sum. */
static void
shrink_check(collie_comm_t *c)
{
  enum { N = 4096 };
  static float in[N], out[N];
  int r = collie_comm_rank(c), p = collie_comm_size(c);
  for (int i = 0; i < N; i++) in[i] = (float)(r + 1);
  ASSERT_OK(collie_allreduce(c, in, out, N, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  for (int i = 0; i < N; i++)
    ASSERTF(out[i] == (float)(p * (p + 1) / 2), "element %d is %g on rank %d of %d", i, out[i], r,
            p);
}

/* Runs allreduces until one fails (the victim died meanwhile). */
static void
shrink_until_failure(collie_comm_t *comm)
{
  float v[1024] = {0};
  collie_result_t rc;
  int iter = 0;
  do {
    rc = collie_allreduce(comm, v, v, 1024, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL);
  } while (rc == COLLIE_SUCCESS && ++iter < 1000);
  ASSERTF(rc != COLLIE_SUCCESS, "no operation failed after a rank died");
}

/* The victim dies by SIGKILL after one allreduce; the others shrink and
 * carry on in the old order, twice over (a second victim in the shrunk one). */
static void
shrink_after_kill(int victim)
{
  collie_comm_t *comm = test_comm(), *small = NULL;
  int r = test_rank(), p = test_size();
  shrink_check(comm);
  if (r == victim) {
    usleep(50000);
    test_die_by_sigkill();
  }
  shrink_until_failure(comm);
  ASSERT_OK(collie_comm_shrink(comm, NULL, 0, 60000, &small));
  ASSERT(small != NULL);
  ASSERT(collie_comm_size(small) == p - 1);
  ASSERT(collie_comm_rank(small) == (r < victim ? r : r - 1));
  shrink_check(small);
  ASSERT_OK(collie_comm_destroy(comm));
  if (p >= 3) {
    /* Again: the new last rank dies; the shrunk communicator shrinks. */
    collie_comm_t *smaller = NULL;
    int q = collie_comm_size(small);
    if (collie_comm_rank(small) == q - 1) {
      usleep(50000);
      test_die_by_sigkill();
    }
    shrink_until_failure(small);
    ASSERT_OK(collie_comm_shrink(small, NULL, 0, 60000, &smaller));
    ASSERT(collie_comm_size(smaller) == q - 1);
    shrink_check(smaller);
    ASSERT_OK(collie_comm_destroy(smaller));
  }
  ASSERT_OK(collie_comm_destroy(small));
}

TEST_IMPL(shrink_last_killed)
{
  shrink_after_kill(test_size() - 1);
}

TEST_IMPL(shrink_rank0_killed)
{
  shrink_after_kill(0);
}

/* The last rank freezes (SIGSTOP): the others time out, shrink with a short
 * timeout and go on without it; then rank 0 wakes it, and its own shrink
 * says it was left out. */
TEST_IMPL(shrink_frozen_rank)
{
  collie_comm_t *comm = test_comm(), *small = NULL;
  int r = test_rank(), p = test_size();
  char path[1024];
  snprintf(path, sizeof(path), "%s/frozen.pid", test_dir());
  if (r == p - 1) {
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fprintf(f, "%ld\n", (long)getpid());
    fclose(f);
  }
  shrink_check(comm);
  if (r == p - 1) {
    raise(SIGSTOP);
    /* Woken after the others went on without it (its allreduce may even
     * complete from what they sent before they gave up). */
    ASSERT_RC(COLLIE_REMOTE_ERROR, "left out", collie_comm_shrink(comm, NULL, 0, 500, &small));
    ASSERT(small == NULL);
    ASSERT_OK(collie_comm_destroy(comm));
    return;
  }
  float v[16] = {0};
  collie_opts_t o = {0};
  o.timeout_ms = 500;
  ASSERT(collie_allreduce(comm, v, v, 16, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL) != COLLIE_SUCCESS);
  ASSERT_OK(collie_comm_shrink(comm, NULL, 0, 1000, &small));
  ASSERT(collie_comm_size(small) == p - 1);
  shrink_check(small);
  if (r == 0) {
    long pid = 0;
    FILE *f = fopen(path, "r");
    ASSERT(f != NULL && fscanf(f, "%ld", &pid) == 1);
    fclose(f);
    kill((pid_t)pid, SIGCONT);
  }
  ASSERT_OK(collie_comm_destroy(small));
  ASSERT_OK(collie_comm_destroy(comm));
}

/* The shrinks of shrink_death_during_agreement: well under the test's 60 s,
 * so that an agreement that waits for nothing fails naming what it waited
 * for (a shrink's store requests get the communicator's timeout, 20 s, on
 * top) instead of the runner killing every rank at its timeout. */
#define SHRINK_AGREEMENT_TIMEOUT_MS 20000

/* Rank 2 is killed while the others (and itself) are in the agreement, at a
 * moment that varies: the shrink either leaves it out or takes it in and
 * the new communicator's setup fails naming it; shrinking again always ends
 * with the survivors. */
TEST_IMPL(shrink_death_during_agreement)
{
  collie_comm_t *comm = test_comm(), *small = NULL;
  int r = test_rank(), p = test_size();
  shrink_check(comm);
  if (r == p - 1) test_die_by_sigkill();
  shrink_until_failure(comm);
  if (r == 2) {
    /* Dies somewhere inside its own shrink: 0-30 ms in. */
    test_die_after_us((unsigned)(getpid() % 30) * 1000);
    collie_comm_shrink(comm, NULL, 0, SHRINK_AGREEMENT_TIMEOUT_MS, &small);
    test_die_by_sigkill();
  }
  collie_result_t rc = COLLIE_INTERNAL_ERROR;
  for (int attempt = 0; attempt < 3 && rc != COLLIE_SUCCESS; attempt++) {
    rc = collie_comm_shrink(comm, NULL, 0, SHRINK_AGREEMENT_TIMEOUT_MS, &small);
    if (rc != COLLIE_SUCCESS)
      fprintf(stderr, "rank %d: shrink attempt %d failed: %s\n", r, attempt, collie_last_error());
    if (rc == COLLIE_SUCCESS && collie_comm_size(small) != p - 2) {
      /* Took rank 2 in just before it died: the next use fails. */
      float v[8] = {0};
      collie_opts_t o = {0};
      o.timeout_ms = 3000;
      if (collie_allreduce(small, v, v, 8, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL) == COLLIE_SUCCESS)
        continue;
      collie_comm_t *again = NULL;
      rc = collie_comm_shrink(small, NULL, 0, SHRINK_AGREEMENT_TIMEOUT_MS, &again);
      if (rc != COLLIE_SUCCESS)
        fprintf(stderr, "rank %d: shrink attempt %d (of the 3 taken in) failed: %s\n", r, attempt,
                collie_last_error());
      collie_comm_destroy(small);
      small = again;
    }
  }
  ASSERTF(rc == COLLIE_SUCCESS, "no shrink succeeded: %s", collie_last_error());
  ASSERT(collie_comm_size(small) == p - 2);
  shrink_check(small);
  ASSERT_OK(collie_comm_destroy(small));
  ASSERT_OK(collie_comm_destroy(comm));
}

/* A healthy communicator leaves out rank 1 by name; rank 1 does not call. */
TEST_IMPL(shrink_exclude)
{
  collie_comm_t *comm = test_comm(), *small = NULL;
  int r = test_rank(), p = test_size();
  shrink_check(comm);
  int out[1] = {1};
  if (r == 1) {
    ASSERT_RC(COLLIE_INVALID_ARGUMENT, "is the calling rank",
              collie_comm_shrink(comm, out, 1, -1, &small));
  } else {
    ASSERT_OK(collie_comm_shrink(comm, out, 1, -1, &small));
    ASSERT(collie_comm_size(small) == p - 1);
    ASSERT(collie_comm_rank(small) == (r < 1 ? r : r - 1));
    shrink_check(small);
    ASSERT_OK(collie_comm_destroy(small));
  }
  /* The old communicator was never failed: it still works for everyone. */
  shrink_check(comm);
  ASSERT_OK(collie_comm_destroy(comm));
}

TEST_IMPL(shrink_bad_arguments)
{
  collie_comm_t *comm = test_comm(), *small = (collie_comm_t *)1;
  int p = test_size(), bad[2] = {(test_rank() + 1) % p, p};
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "comm is NULL", collie_comm_shrink(NULL, NULL, 0, -1, &small));
  ASSERT(small == NULL);
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "out is NULL", collie_comm_shrink(comm, NULL, 0, -1, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "nexclude = -1",
            collie_comm_shrink(comm, bad, -1, -1, &small));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "nexclude = 2 with exclude NULL",
            collie_comm_shrink(comm, NULL, 2, -1, &small));
  char what[64];
  snprintf(what, sizeof(what), "exclude[1] = %d is outside 0..%d", p, p - 1);
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, what, collie_comm_shrink(comm, bad, 2, -1, &small));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "timeout_ms = -2",
            collie_comm_shrink(comm, NULL, 0, -2, &small));
  ASSERT(small == NULL);
  /* Nothing was agreed: the communicator is as it was. */
  shrink_check(comm);
  ASSERT_OK(collie_comm_destroy(comm));
  ASSERT_RC(COLLIE_INVALID_USAGE, "destroyed", collie_comm_shrink(comm, NULL, 0, -1, &small));
}
