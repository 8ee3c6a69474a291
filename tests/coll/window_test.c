/*
 * window_test.c - one-sided windows (src/core/api_window.c, docs/windows.md):
 *
 *   - every rank puts a block into every other rank's window (and its own)
 *     at its own offset, signals, and each rank waits for every signal:
 *     every block is in place, the bytes around it untouched; several
 *     rounds reuse the window (signals count up); windows of different
 *     sizes per rank; written straight into a peer on this host, or sent
 *     as messages (tcp, or single copies off);
 *   - a fence applies puts no signal announced;
 *   - puts interleave with collectives on the caller's communicator
 *     (the window's channels are its own);
 *   - misuse is refused by name (outside the peer's window, bad peer,
 *     NULL arguments, a wait on oneself that could never end), a wait
 *     whose peer never signals times out, and a dead peer is named.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner.h"

/* Block of rank r for rank t in round k: bytes a function of the three. */
static void
win_fill(unsigned char *b, size_t n, int r, int t, int k)
{
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(r * 31 + t * 7 + k * 13 + i * 5);
}

static void
win_put_signal(void)
{
  collie_comm_t *comm = test_comm();
  int me = test_rank(), p = test_size();
  /* Rank t's window: a block of (t + 1) x 100 + 3 bytes per rank, with a
   * guard byte between blocks. */
  size_t blk = (size_t)(me + 1) * 100 + 3, stride = blk + 1, bytes = stride * (size_t)p;
  unsigned char *win = malloc(bytes), *src = malloc((size_t)p * 1000 + 3);
  ASSERT(win && src);
  memset(win, 0xEE, bytes);
  collie_window_t *w = NULL;
  ASSERT_OK(collie_window_create(comm, win, bytes, &w));
  for (int k = 0; k < 3; k++) {
    for (int t = 0; t < p; t++) {
      size_t tb = (size_t)(t + 1) * 100 + 3;
      unsigned char *s = src + (size_t)t * 1000;
      win_fill(s, tb, me, t, k);
      ASSERT_OK(collie_window_put(w, t, (size_t)me * (tb + 1), s, tb));
      ASSERT_OK(collie_window_signal(w, t));
    }
    for (int r = 0; r < p; r++) ASSERT_OK(collie_window_wait_signal(w, r, (uint64_t)k + 1, 0));
    unsigned char *want = malloc(blk);
    ASSERT(want);
    for (int r = 0; r < p; r++) {
      win_fill(want, blk, r, me, k);
      ASSERTF(!memcmp(win + (size_t)r * stride, want, blk), "round %d: block of rank %d wrong", k,
              r);
      ASSERTF(win[(size_t)r * stride + blk] == 0xEE, "round %d: guard after rank %d's block", k, r);
    }
    free(want);
    ASSERT_OK(collie_window_flush(w)); /* src is rewritten next round */
    /* The caller's communicator goes on beside the window. */
    int32_t x = me, y = 0;
    ASSERT_OK(collie_allreduce(comm, &x, &y, 1, COLLIE_INT32, COLLIE_SUM, NULL, NULL));
    ASSERT(y == p * (p - 1) / 2);
  }
  ASSERT_OK(collie_window_free(w));
  free(win);
  free(src);
  ASSERT_OK(collie_comm_destroy(comm));
}

TEST_IMPL(window_put_signal)
{
  win_put_signal();
}

/* The same with single copies off: on shared memory too, puts travel as
 * messages that the target's wait applies. */
TEST_IMPL(window_put_signal_messages)
{
  setenv("COLLIE_SHM_CMA_MIN", "0", 1);
  win_put_signal();
}

/* Puts that no signal announces are in place after a fence. */
TEST_IMPL(window_fence)
{
  collie_comm_t *comm = test_comm();
  int me = test_rank(), p = test_size();
  int64_t *win = calloc((size_t)p, sizeof(int64_t)), v = 1000 + me;
  ASSERT(win);
  collie_window_t *w = NULL;
  ASSERT_OK(collie_window_create(comm, win, (size_t)p * sizeof(int64_t), &w));
  for (int t = 0; t < p; t++)
    ASSERT_OK(collie_window_put(w, t, (size_t)me * sizeof(int64_t), &v, sizeof(v)));
  ASSERT_OK(collie_window_fence(w));
  for (int r = 0; r < p; r++) ASSERTF(win[r] == 1000 + r, "slot %d = %lld", r, (long long)win[r]);
  ASSERT_OK(collie_window_free(w));
  free(win);
  ASSERT_OK(collie_comm_destroy(comm));
}

TEST_IMPL(window_refused)
{
  collie_comm_t *comm = test_comm();
  int me = test_rank(), p = test_size();
  char buf[64], src[128] = {0};
  collie_window_t *w = NULL;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "base is NULL but bytes is 8",
            collie_window_create(comm, NULL, 8, &w));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "win is NULL", collie_window_create(comm, buf, 8, NULL));
  /* Rank r exposes 32 + r bytes. */
  ASSERT_OK(collie_window_create(comm, buf, 32 + (size_t)me, &w));
  int last = p - 1;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "do not fit rank",
            collie_window_put(w, last, 10, src, 23 + (size_t)last));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "peer = -1 names no rank",
            collie_window_put(w, -1, 0, src, 1));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "is outside 0..", collie_window_put(w, p, 0, src, 1));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "src is NULL but bytes is 4",
            collie_window_put(w, 0, 0, NULL, 4));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "is outside 0..", collie_window_signal(w, p));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "timeout_ms = -5 must be >= 0",
            collie_window_wait_signal(w, 0, 1, -5));
  ASSERT_RC(COLLIE_INVALID_USAGE, "waiting for signal 1 from this rank itself",
            collie_window_wait_signal(w, me, 1, 0));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "win is NULL", collie_window_put(NULL, 0, 0, src, 1));
  /* The largest put that fits does; the window is still usable. */
  ASSERT_OK(collie_window_put(w, last, 10, src, 22 + (size_t)last));
  ASSERT_OK(collie_window_signal(w, me));
  ASSERT_OK(collie_window_wait_signal(w, me, 1, 0));
  ASSERT_OK(collie_window_free(w));
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Rank 1 never signals rank 0: rank 0's wait times out, naming what it
 * waited for; rank 1 leaves once rank 0 says so (by the caller's comm). */
TEST_IMPL(window_wait_timeout)
{
  collie_comm_t *comm = test_comm();
  int me = test_rank();
  char buf[16];
  collie_window_t *w = NULL;
  ASSERT_OK(collie_window_create(comm, buf, sizeof(buf), &w));
  if (me == 0) {
    collie_result_t rc = collie_window_wait_signal(w, 1, 1, 300);
    ASSERTF(rc == COLLIE_TIMEOUT, "%s", collie_last_error());
    ASSERTF(strstr(collie_last_error(), "collie_window_wait_signal"), "%s", collie_last_error());
  }
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  collie_window_free(w); /* rank 0's is failed: free still releases it */
  ASSERT_OK(collie_comm_destroy(comm));
}

/* A peer that dies while another waits for its signal is named. */
TEST_IMPL(window_peer_dies)
{
  collie_comm_t *comm = test_comm();
  int me = test_rank();
  char buf[16];
  collie_window_t *w = NULL;
  ASSERT_OK(collie_window_create(comm, buf, sizeof(buf), &w));
  if (me == 1) {
    usleep(100000);
    test_die_by_sigkill();
  }
  collie_result_t rc = collie_window_wait_signal(w, 1, 1, 20000);
  ASSERTF(rc == COLLIE_REMOTE_ERROR, "%s: %s", collie_result_string(rc), collie_last_error());
  ASSERTF(strstr(collie_last_error(), "rank 1"), "%s", collie_last_error());
  collie_window_free(w);
  collie_comm_destroy(comm);
}
