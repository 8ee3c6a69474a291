/* recv_any_test.c - collie_recv_any: a receive from any source takes each
 * sender's message once, with the sender's rank; the pair order holds around
 * it (a rank's later messages go to later receives); messages of another tag
 * or from a rank that is ahead in a collective are not taken; and its errors:
 * a size that differs, another receive while it is pending, no sender before
 * the deadline, bad arguments. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runner.h"

/* The value rank src sends as its k-th message to rank 0 (tag 7). */
static int64_t
any_value(int src, int k)
{
  return 1000 * src + k;
}

/* Every other rank sends two messages (tag 7) to rank 0, which takes them
 * with receives from any source: each sender's first message comes before its
 * second, and every message comes once. Some arrive long after the receive
 * is posted (rank r sleeps r x 20 ms), some before (the second ones). Then
 * a named receive from rank 1 and an async receive from any source still
 * match in order, and the communicator goes on with a collective. */
TEST_IMPL(recv_any_takes_each_once)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  if (r == 0) {
    int seen[64];
    memset(seen, 0, sizeof(seen));
    for (int i = 0; i < 2 * (p - 1); i++) {
      int64_t v = -1;
      int src = -2;
      ASSERT_OK(collie_recv_any(comm, &v, 1, COLLIE_INT64, 7, &src, NULL, NULL));
      ASSERTF(src >= 1 && src < p && seen[src] < 2, "source %d", src);
      int k = seen[src]++;
      ASSERTF(v == any_value(src, k), "from %d: %lld, expected %lld", src, (long long)v,
              (long long)any_value(src, k));
    }
    for (int q = 1; q < p; q++) ASSERT(seen[q] == 2);
    ASSERT_OK(collie_barrier(comm, NULL, NULL));
    int64_t v = -1;
    ASSERT_OK(collie_recv(comm, &v, 1, COLLIE_INT64, 1, 7, NULL, NULL));
    ASSERT(v == any_value(1, 2));
    collie_work_t *w = NULL;
    int src = -2;
    ASSERT_OK(collie_recv_any(comm, &v, 1, COLLIE_INT64, 7, &src, NULL, &w));
    ASSERT_OK(collie_wait(w, -1));
    collie_work_free(w);
    ASSERT(src == 1 && v == any_value(1, 3));
  } else {
    usleep((useconds_t)(r * 20000));
    for (int k = 0; k < 2; k++) {
      int64_t v = any_value(r, k);
      ASSERT_OK(collie_send(comm, &v, 1, COLLIE_INT64, 0, 7, NULL, NULL));
    }
    ASSERT_OK(collie_barrier(comm, NULL, NULL)); /* the third and fourth go to later receives */
    if (r == 1) {
      for (int k = 2; k < 4; k++) {
        int64_t v = any_value(r, k);
        ASSERT_OK(collie_send(comm, &v, 1, COLLIE_INT64, 0, 7, NULL, NULL));
      }
    }
  }
  int64_t x = 1, sum = 0;
  ASSERT_OK(collie_allreduce(comm, &x, &sum, 1, COLLIE_INT64, COLLIE_SUM, NULL, NULL));
  ASSERT(sum == p);
  ASSERT_OK(collie_comm_destroy(comm));
}

/* A message of another tag at the head of a rank's stream is not taken (nor
 * anything behind it); the matching message from another rank is. Rank 1
 * sends tag 5 first, rank 2 tag 7: the receive of tag 7 gets rank 2's; then
 * rank 0 takes rank 1's tag-5 message by name. */
TEST_IMPL(recv_any_skips_other_tags)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  int64_t v = 100 + r;
  if (r == 1) ASSERT_OK(collie_send(comm, &v, 1, COLLIE_INT64, 0, 5, NULL, NULL));
  if (r == 2) {
    usleep(30000); /* rank 1's tag-5 message is there first */
    ASSERT_OK(collie_send(comm, &v, 1, COLLIE_INT64, 0, 7, NULL, NULL));
  }
  if (r == 0) {
    int src = -1;
    ASSERT_OK(collie_recv_any(comm, &v, 1, COLLIE_INT64, 7, &src, NULL, NULL));
    ASSERT(src == 2 && v == 102);
    ASSERT_OK(collie_recv(comm, &v, 1, COLLIE_INT64, 1, 5, NULL, NULL));
    ASSERT(v == 101);
  }
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  ASSERT_OK(collie_comm_destroy(comm));
}

/* The errors: bad arguments leave the communicator usable; a sender whose
 * message has another size fails the receive naming both sizes (and
 * poisons, as any mismatch); no sender before the deadline is TIMEOUT
 * naming the tag. An async receive from any source may be pending while
 * others are issued: they run after it, in issue order. */
TEST_IMPL(recv_any_errors)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  int64_t v = 0;
  int src = -1;
  if (r == 0) {
    ASSERT_RC(COLLIE_INVALID_ARGUMENT, "source is NULL",
              collie_recv_any(comm, &v, 1, COLLIE_INT64, 7, NULL, NULL, NULL));
    ASSERT_RC(COLLIE_INVALID_ARGUMENT, "tag = -1",
              collie_recv_any(comm, &v, 1, COLLIE_INT64, -1, &src, NULL, NULL));
    ASSERT_OK(collie_group_start(comm));
    ASSERT_RC(COLLIE_INVALID_USAGE, "not inside a group",
              collie_recv_any(comm, &v, 1, COLLIE_INT64, 7, &src, NULL, NULL));
    ASSERT_OK(collie_group_end(comm, NULL));
    /* Pending: a receive issued behind it waits its turn. */
    collie_work_t *w = NULL;
    int64_t v2 = 0;
    int src2 = -1;
    ASSERT_OK(collie_recv_any(comm, &v, 1, COLLIE_INT64, 7, &src, NULL, &w));
    ASSERT_OK(collie_recv_any(comm, &v2, 1, COLLIE_INT64, 7, &src2, NULL, NULL));
    ASSERT_OK(collie_wait(w, -1)); /* rank 1 sends after 100 ms */
    collie_work_free(w);
    ASSERT(src == 1 && v == 11 && src2 == 1 && v2 == 12);
    /* A size that differs: rank 1 sends 2 elements, this receive takes 1. */
    ASSERT_RC(COLLIE_INVALID_USAGE, "rank 1 sent 16 bytes with tag 8, this receive takes 8",
              collie_recv_any(comm, &v, 1, COLLIE_INT64, 8, &src, NULL, NULL));
  } else if (r == 1) {
    usleep(100000); /* rank 0's receive from any source is pending meanwhile */
    v = 11;
    ASSERT_OK(collie_send(comm, &v, 1, COLLIE_INT64, 0, 7, NULL, NULL));
    v = 12;
    ASSERT_OK(collie_send(comm, &v, 1, COLLIE_INT64, 0, 7, NULL, NULL));
    int64_t two[2] = {1, 2};
    ASSERT_OK(collie_send(comm, two, 2, COLLIE_INT64, 0, 8, NULL, NULL)); /* small: out at post */
  }
  ASSERT_OK(collie_comm_destroy(comm));

  /* No sender: TIMEOUT at the deadline, naming the tag. A communicator of its
   * own with a short timeout. */
  collie_comm_t *c2 = NULL;
  collie_comm_t *world = test_comm();
  ASSERT_OK(collie_comm_split(world, 0, r, &c2));
  ASSERT_OK(collie_barrier(c2, NULL, NULL));
  if (r == 0) {
    collie_opts_t o = {.timeout_ms = 300};
    ASSERT_RC(COLLIE_TIMEOUT, "timed out waiting for recv from any rank (send/recv tag 9)",
              collie_recv_any(c2, &v, 1, COLLIE_INT64, 9, &src, &o, NULL));
  }
  collie_comm_destroy(c2);
  ASSERT_OK(collie_comm_destroy(world));
}
