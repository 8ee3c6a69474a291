/* Splits on tcp keep and reuse connections (issue 38, src/transport/tcp_pool.c):
 * a communicator that closes cleanly leaves its connections for the next
 * one of the same processes, so split/destroy cycles open no new sockets;
 * and a communicator's failure still poisons only it. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "runner.h"
#include "transport/tcp_int.h"

/* Descriptors this process has open. */
static int
open_fds(void)
{
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

/* Checks that a float sum over comm gives what every rank expects. */
static void
sum_works(collie_comm_t *comm, const char *what)
{
  int r = collie_comm_rank(comm), p = collie_comm_size(comm);
  float v[64];
  for (int i = 0; i < 64; i++) v[i] = (float)(r + 1);
  ASSERTF(collie_allreduce(comm, v, v, 64, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL) ==
              COLLIE_SUCCESS,
          "allreduce on %s: %s", what, collie_last_error());
  ASSERTF(v[0] == (float)(p * (p + 1) / 2) && v[63] == v[0], "allreduce on %s gave %g", what,
          (double)v[0]);
}

TEST_IMPL(tcp_splits_keep_connections)
{
  collie_comm_t *world = test_comm(), *a = NULL, *b = NULL, *c = NULL;
  int r = test_rank(), p = test_size();
  ASSERT_OK(collie_comm_split(world, 0, r, &a));
  sum_works(a, "the first split");
  ASSERT_OK(collie_comm_destroy(a));
  /* Its connections are kept, one per peer, once both ends said goodbye. */
  ASSERTF(collie__tcp_pool_count() == p - 1, "rank %d keeps %d connections after a split closed", r,
          collie__tcp_pool_count());
  /* The next split (reversed order: the other side of each pair connects)
   * says hello on them instead of connecting. */
  ASSERT_OK(collie_comm_split(world, 0, p - 1 - r, &b));
  ASSERTF(collie__tcp_pool_count() == 0, "rank %d: the split left %d kept connections unused", r,
          collie__tcp_pool_count());
  sum_works(b, "a split on kept connections");
  ASSERT_OK(collie_comm_destroy(b));

  /* Cycles: each reuses what the last kept (the pool neither grows nor
   * empties), and no descriptor more is open after them. */
  int fds = open_fds();
  for (int i = 0; i < 30; i++) {
    ASSERT_OK(collie_comm_split(world, 0, i % 2 ? r : p - 1 - r, &a));
    sum_works(a, "a cycle's split");
    ASSERT_OK(collie_comm_destroy(a));
    ASSERTF(collie__tcp_pool_count() == p - 1, "rank %d keeps %d connections after cycle %d", r,
            collie__tcp_pool_count(), i);
  }
  ASSERTF(open_fds() == fds, "rank %d: %d descriptors open after 30 split cycles, %d before", r,
          open_fds(), fds);

  /* Two splits alive at once, one on kept connections (a) and one on new
   * ones (c); a fails: c and the world go on, and a's connections are not
   * kept for later. */
  ASSERT_OK(collie_comm_split(world, 0, r, &a));
  ASSERT_OK(collie_comm_split(world, 0, r, &c));
  sum_works(c, "the second live split");
  if (r == 0) {
    ASSERT_OK(collie_comm_abort_reason(a, "the test gives up on this split"));
  } else {
    float v[4] = {0};
    collie_opts_t o = {.timeout_ms = 10000};
    collie_result_t rc = collie_allreduce(a, v, v, 4, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL);
    ASSERTF(rc != COLLIE_SUCCESS, "rank %d: allreduce on the aborted split worked", r);
    ASSERTF(strstr(collie_last_error(), "the test gives up"), "rank %d: %s", r,
            collie_last_error());
  }
  collie_comm_destroy(a);
  sum_works(c, "a split beside a failed one");
  sum_works(world, "the world beside a failed split");
  ASSERT_OK(collie_comm_destroy(c));
  ASSERT_OK(collie_comm_split(world, 0, r, &b));
  sum_works(b, "a split after a failed one");
  ASSERT_OK(collie_comm_destroy(b));
  ASSERT_OK(collie_comm_destroy(world));
}

/* COLLIE_TCP_REUSE=0: nothing is kept, every split connects anew. */
TEST_IMPL(tcp_splits_reuse_off)
{
  collie_comm_t *world = test_comm(), *a = NULL;
  int r = test_rank();
  for (int i = 0; i < 3; i++) {
    world->params.TCP_REUSE = 0;
    ASSERT_OK(collie_comm_split(world, 0, r, &a));
    sum_works(a, "a split without kept connections");
    ASSERT_OK(collie_comm_destroy(a));
    ASSERTF(collie__tcp_pool_count() == 0, "rank %d keeps %d connections with reuse off", r,
            collie__tcp_pool_count());
  }
  ASSERT_OK(collie_comm_destroy(world));
}
