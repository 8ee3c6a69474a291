/*
 * shm_test.c - multi-rank tests of the shared-memory transport, driven
 * through its ops table (collie__shm_ops) without the net layer: each rank
 * meets the others in the runner's file store, opens the transport to all
 * of them and runs loops of post + progress + wait.
 *
 * Covered: contents of messages of 0 B .. 8 MiB + 5 around a ring; many
 * messages in flight per channel, delivered in order; small payloads in
 * header cells whose stale words never pass for a header; an all-to-all among 8
 * ranks on 2 cores (waits must sleep); slot and length mismatches; a peer
 * that dies, closes or aborts; a peer that never opens (TIMEOUT naming it);
 * a stale segment from a crashed job; bad arguments; and a ping-pong that
 * prints latency and bandwidth for later tuning.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "runner.h"
#include "transport/shm_int.h"
#include "transport/transport.h"
#include "util/error.h"
#include "util/util.h"
#include "xport_fixture.h"

static const struct collie__xport_ops *const shmt_ops = &collie__shm_ops;

/* Meets the other ranks and fills the config as a communicator would for
 * shm: the runner's store itself, transport "auto". */
static void
shmt_meet(struct xfix *t, int64_t setup_ms)
{
  xfix_meet(t, shmt_ops, 0);
  xfix_config(t, NULL, "auto", setup_ms);
}

/* The segment's name, as shm_setup.c builds it (the runner relies on the prefix). */
static void
shmt_seg_name(char *buf, size_t len, uint64_t comm_hash, int leader)
{
  const char *tok = getenv("COLLIE_JOB_TOKEN");
  snprintf(buf, len, "/collie-%016llx-%016llx-%d",
           (unsigned long long)collie__hash64(tok, strlen(tok), 0), (unsigned long long)comm_hash,
           leader);
}

/* ---- Ring exchange of every size, contents checked ---- */

TEST_IMPL(shm_ring_sizes)
{
  struct xfix t;
  shmt_meet(&t, 10000);
  int fds = xfix_nfds();
  xfix_open(&t);
  /* Every rank is attached once open() returns: the name must be gone. */
  char name[96], path[128];
  shmt_seg_name(name, sizeof(name), 1, 0);
  snprintf(path, sizeof(path), "/dev/shm%s", name);
  ASSERTF(access(path, F_OK) != 0, "%s still exists after open", path);

  xfix_ring_sizes(&t, 100);
  int pending = -1;
  ASSERT_OK(shmt_ops->progress(t.x, &pending));
  ASSERT(pending == 0);
  xfix_barrier(&t, "end"); /* nobody closes while a neighbour still reads */
  shmt_ops->close(t.x);
  t.x = NULL;
  ASSERTF(xfix_nfds() == fds, "%d fds open after close, %d before open", xfix_nfds(), fds);
  xfix_done(&t);
}

/* ---- Many messages in flight per channel, in order ---- */

#define SHMT_INFLIGHT 300

static size_t
shmt_inflight_len(int i)
{
  if (i % 50 == 7) return 200 * 1024 + (size_t)i; /* several slots */
  /* Three slots and a last chunk small enough to go inline, in a header
   * that must say its offset (not the whole-message form). */
  if (i % 50 == 17) return 3 * 64 * 1024 + 100 + (size_t)i % 7;
  if (i % 10 == 3) return 0;
  return (size_t)(i * 37 % 3000);
}

TEST_IMPL(shm_many_inflight)
{
  struct xfix t;
  shmt_meet(&t, 10000);
  xfix_open(&t);
  int peer = t.rank ^ 1;
  if (peer >= t.size) peer = t.rank; /* odd rank count: the last one idles */
  if (peer != t.rank) {
    static struct collie__req reqs[2 * SHMT_INFLIGHT];
    unsigned char *sb[SHMT_INFLIGHT], *rb[SHMT_INFLIGHT];
    /* Receives first on one side, sends first on the other: order of posting
     * across queues must not matter. */
    for (int pass = 0; pass < 2; pass++) {
      int sends = (pass == 0) == (t.rank < peer);
      for (int i = 0; i < SHMT_INFLIGHT; i++) {
        size_t n = shmt_inflight_len(i);
        uint64_t slot = collie__slot(COLLIE_KIND_ALLGATHER, (uint32_t)i, (uint32_t)i & 0xff);
        if (sends) {
          sb[i] = malloc(n + 1);
          ASSERT(sb[i]);
          xfix_fill(sb[i], n, t.rank, peer, (unsigned)i);
          xfix_post(&t, &reqs[SHMT_INFLIGHT + i], peer, 1, sb[i], n, slot);
        } else {
          rb[i] = malloc(n + 1);
          ASSERT(rb[i]);
          xfix_post(&t, &reqs[i], peer, 0, rb[i], n, slot);
        }
      }
    }
    ASSERT_OK(xfix_wait_n(&t, reqs, 2 * SHMT_INFLIGHT, 100, collie__deadline_after_ms(15000)));
    for (int i = 0; i < SHMT_INFLIGHT; i++) {
      xfix_check(rb[i], shmt_inflight_len(i), peer, t.rank, (unsigned)i);
      free(rb[i]);
      free(sb[i]);
    }
  }
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* ---- Small payloads in header cells: stale words never pass for a header ----
 *
 * A message of up to 296 bytes goes inline: its header cell, then cells
 * that carry the rest of its payload. A receiver polls the seq word of the
 * cell where the next header will be; a lap earlier that cell may have
 * carried payload. Each message here is 296 bytes (6 cells), and the word
 * that would sit in a continuation cell's seq slot, had the payload filled
 * whole cells, holds the very value the receiver waits for at that cell one
 * lap later (32 cells on). The sender pauses between messages so that the
 * receiver, with every receive posted, is always polling ahead of it. Had a
 * payload word landed on the seq word, the receiver would take it for a
 * header and fail with a mismatch or wrong bytes. */
enum { SHMT_CELL_MSGS = 200, SHMT_CELL_LEN = 296, SHMT_CELL_CELLS = 6 };

static void
shmt_cell_fill(unsigned char *b, int src, int dst, unsigned m)
{
  xfix_fill(b, SHMT_CELL_LEN, src, dst, m);
  for (uint64_t j = 1; j <= 4; j++) {
    uint64_t lure = SHMT_CELL_CELLS * (uint64_t)m + j + 32 + 1;
    memcpy(b + 56 + 64 * (j - 1), &lure, sizeof(lure));
  }
}

TEST_IMPL(shm_inline_stale_words)
{
  struct xfix t;
  shmt_meet(&t, 10000);
  xfix_open(&t);
  static struct collie__req reqs[SHMT_CELL_MSGS];
  static unsigned char buf[SHMT_CELL_MSGS][SHMT_CELL_LEN], want[SHMT_CELL_LEN];
  uint64_t slot0 = collie__slot(COLLIE_KIND_BROADCAST, 0, 0);
  if (t.rank == 1) {
    for (int m = 0; m < SHMT_CELL_MSGS; m++)
      xfix_post(&t, &reqs[m], 0, 0, buf[m], SHMT_CELL_LEN, slot0 + ((uint64_t)m << 24));
    ASSERT_OK(xfix_wait_n(&t, reqs, SHMT_CELL_MSGS, 100, collie__deadline_after_ms(15000)));
    for (int m = 0; m < SHMT_CELL_MSGS; m++) {
      shmt_cell_fill(want, 0, 1, (unsigned)m);
      ASSERTF(memcmp(buf[m], want, SHMT_CELL_LEN) == 0, "message %d arrived wrong", m);
    }
  } else if (t.rank == 0) {
    for (int m = 0; m < SHMT_CELL_MSGS; m++) {
      shmt_cell_fill(buf[m], 0, 1, (unsigned)m);
      xfix_post(&t, &reqs[m], 1, 1, buf[m], SHMT_CELL_LEN, slot0 + ((uint64_t)m << 24));
      ASSERT_OK(xfix_wait_n(&t, &reqs[m], 1, 100, collie__deadline_after_ms(15000)));
      usleep(20);
    }
  }
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* ---- Fence-free publishes: where every rank can fence the others ----
 *
 * Producers skip the fence between publishing and reading a peer's sleeping
 * word only when every rank of the segment registered for membarrier (a
 * sleeper then fences them) and the ranks do not outnumber the cores (a
 * sleeper's membarrier would interrupt a busy peer every time). Every rank
 * must choose the same. (shm_pingpong_2 checks that waits which sleep at
 * once lose no wake-up: at 2 ranks they run fence-free where it works.) */
TEST_IMPL(shm_fence_mode)
{
  struct xfix t;
  shmt_meet(&t, 10000);
  xfix_open(&t);
  const struct collie__shm_xport *x = (const struct collie__shm_xport *)(const void *)t.x;
  int want = collie__membarrier_register() && t.size <= x->cores;
  ASSERTF(x->fence_free == want, "%d ranks on %d cores: fence_free %d, want %d", t.size, x->cores,
          x->fence_free, want);
  if (t.rank == 0)
    printf("%d ranks on %d cores: %s\n", t.size, x->cores, want ? "fence-free" : "fenced");
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* ---- Ranks sharing a CPU: see xfix_crowded ---- */

TEST_IMPL(shm_crowded)
{
  struct xfix t;
  shmt_meet(&t, 10000);
  xfix_open(&t);
  xfix_crowded(&t);
  xfix_done(&t);
}

/* ---- All-to-all among every rank at once ---- */

TEST_IMPL(shm_alltoall)
{
  struct xfix t;
  shmt_meet(&t, 10000);
  xfix_open(&t);
  enum { ITERS = 20 };
  size_t base = 96 * 1024;
  double secs = xfix_alltoall(&t, ITERS, base, 0, 50);
  if (t.rank == 0)
    printf("shm_alltoall %d ranks: %d rounds of %zu KiB per pair in %.3f s\n", t.size, ITERS,
           base / 1024, secs);
  ASSERTF(secs < 10.0, "all-to-all took %.1f s: waits are grinding", secs);
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* ---- Mismatches ---- */

static void
shmt_mismatch(uint64_t sslot, size_t slen, uint64_t rslot, size_t rlen, const char *want1,
              const char *want2)
{
  struct xfix t;
  shmt_meet(&t, 10000);
  xfix_open(&t);
  unsigned char *buf = malloc(slen > rlen ? slen : rlen);
  ASSERT(buf);
  struct collie__req r;
  if (t.rank == 0) {
    memset(buf, 0x11, slen);
    xfix_post(&t, &r, 1, 1, buf, slen, sslot);
    ASSERT_OK(xfix_wait_n(&t, &r, 1, 100, collie__deadline_after_ms(5000)));
  } else {
    memset(buf, 0x77, rlen);
    struct collie__req later;
    /* A small receive takes a message already in the ring at post, so the
     * mismatch surfaces there or at the wait, with the same message. */
    collie_result_t prc = xfix_post_rc(&t, &r, 0, 0, buf, rlen, rslot);
    ASSERTF(prc == COLLIE_SUCCESS || prc == COLLIE_INVALID_USAGE, "post: %s",
            collie_result_string(prc));
    char other[8];
    collie_result_t lrc = xfix_post_rc(&t, &later, 0, 0, other, sizeof(other), rslot + 256);
    ASSERT(lrc == prc); /* a failed transport fails every later post the same way */
    ASSERT_RC(COLLIE_INVALID_USAGE, "mismatched",
              prc != COLLIE_SUCCESS ? prc
                                    : xfix_wait_n(&t, &r, 1, 100, collie__deadline_after_ms(5000)));
    ASSERTF(strstr(collie_last_error(), want1) && strstr(collie_last_error(), want2),
            "message \"%s\" lacks \"%s\" or \"%s\"", collie_last_error(), want1, want2);
    ASSERTF(strstr(collie_last_error(), "rank 0"), "message does not name rank 0: %s",
            collie_last_error());
    /* Nothing copied; every posted request ended with the error; the
     * transport stays failed. */
    for (size_t i = 0; i < rlen; i++) ASSERT(buf[i] == 0x77);
    ASSERT(r.done && r.rc == COLLIE_INVALID_USAGE);
    ASSERT(later.done && later.rc == COLLIE_INVALID_USAGE);
    xfix_assert_failed(&t, COLLIE_INVALID_USAGE, "mismatched", 0, 0, buf, 1);
  }
  xfix_barrier(&t, "end");
  free(buf);
  xfix_done(&t);
}

TEST_IMPL(shm_mismatch_slot)
{
  shmt_mismatch(collie__slot(COLLIE_KIND_ALLREDUCE, 7, 1), 4096,
                collie__slot(COLLIE_KIND_BROADCAST, 7, 0), 4096, "allreduce #7 step 1",
                "broadcast #7 step 0");
}

TEST_IMPL(shm_mismatch_len)
{
  shmt_mismatch(collie__slot(COLLIE_KIND_REDUCE, 3, 2), 100 * 1024,
                collie__slot(COLLIE_KIND_REDUCE, 3, 2), 200, "(102400 bytes)", "(200 bytes)");
}

/* ---- Peers that die, close or abort ---- */

TEST_IMPL(shm_peer_dies)
{
  struct xfix t;
  shmt_meet(&t, 10000);
  xfix_open(&t);
  int victim = t.size - 1;
  if (t.rank == victim) {
    xfix_barrier(&t, "posted");
    collie__sleep_ns(100 * 1000000LL); /* let the others go to sleep in wait() */
    test_die_by_sigkill();
  }
  /* Everyone waits on the victim: one receive each, and rank 0 also a send
   * too big for the ring, so both directions must notice. */
  size_t big = 4 * 1024 * 1024;
  unsigned char *sb = calloc(1, big), rb[16];
  ASSERT(sb);
  struct collie__req reqs[2];
  xfix_post(&t, &reqs[0], victim, 0, rb, sizeof(rb), collie__slot(COLLIE_KIND_BARRIER, 1, 0));
  int n = 1;
  if (t.rank == 0)
    xfix_post(&t, &reqs[n++], victim, 1, sb, big, collie__slot(COLLIE_KIND_GATHER, 1, 0));
  xfix_barrier(&t, "posted");
  int64_t t0 = collie__now_ns();
  ASSERT_RC(COLLIE_REMOTE_ERROR, "died",
            xfix_wait_n(&t, reqs, n, 0, collie__deadline_after_ms(10000)));
  double secs = (double)(collie__now_ns() - t0) / 1e9;
  char want[64];
  snprintf(want, sizeof(want), "rank %d (world rank %d, pid", victim, victim);
  ASSERTF(strstr(collie_last_error(), want), "\"%s\" does not name the dead %s",
          collie_last_error(), want);
  ASSERTF(secs < 2.0, "death noticed after %.2f s", secs);
  for (int i = 0; i < n; i++) ASSERT(reqs[i].done && reqs[i].rc == COLLIE_REMOTE_ERROR);
  free(sb);
  xfix_done(&t);
}

/* Someone else in the process closes the transport's pidfds (a double close
 * elsewhere): death is still noticed, through kill(2) and /proc. */
TEST_IMPL(shm_pidfd_closed)
{
  struct xfix t;
  shmt_meet(&t, 10000);
  xfix_open(&t);
  if (t.rank == 1) {
    xfix_barrier(&t, "posted");
    test_die_by_sigkill();
  }
  int closed = 0;
  DIR *d = opendir("/proc/self/fd");
  ASSERT(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char path[300], target[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (strstr(target, "pidfd") && close(atoi(e->d_name)) == 0) closed++;
  }
  closedir(d);
  char in[4];
  struct collie__req r;
  xfix_post(&t, &r, 1, 0, in, sizeof(in), collie__slot(COLLIE_KIND_BARRIER, 3, 0));
  xfix_barrier(&t, "posted");
  ASSERT_RC(COLLIE_REMOTE_ERROR, "rank 1 (world rank 1, pid",
            xfix_wait_n(&t, &r, 1, 0, collie__deadline_after_ms(5000)));
  ASSERTF(strstr(collie_last_error(), "died"), "%s", collie_last_error());
  printf("shm_pidfd_closed: closed %d pidfd(s) behind the transport's back\n", closed);
  xfix_done(&t);
}

/* Rank 1 sends one message, then leaves (close or abort); rank 0 gets the
 * message (what a peer published before leaving is delivered) and then a
 * REMOTE_ERROR for the next receive. */
static void
shmt_peer_leaves(int use_abort)
{
  struct xfix t;
  shmt_meet(&t, 10000);
  xfix_open(&t);
  uint64_t slot = collie__slot(COLLIE_KIND_BROADCAST, 9, 0);
  char msg[100];
  struct collie__req reqs[2];
  if (t.rank == 1) {
    memset(msg, 'q', sizeof(msg));
    xfix_post(&t, &reqs[0], 0, 1, msg, sizeof(msg), slot);
    ASSERT_OK(xfix_wait_n(&t, reqs, 1, 0, collie__deadline_after_ms(5000)));
    collie__sleep_ns(150 * 1000000LL); /* rank 0 is asleep in wait() by now */
    if (use_abort) {
      /* A request posted when abort() comes is abandoned, never written to
       * again (after a timeout its memory may be gone); progress fails. */
      char in[4];
      xfix_post(&t, &reqs[1], 0, 0, in, sizeof(in), slot + 256);
      shmt_ops->abort(t.x);
      shmt_ops->abort(t.x); /* idempotent */
      ASSERT(!reqs[1].done);
      xfix_assert_failed(&t, COLLIE_INVALID_USAGE, "aborted", 0, 0, in, sizeof(in));
    }
    shmt_ops->close(t.x);
    t.x = NULL;
  } else {
    char a[100], b[100];
    xfix_post(&t, &reqs[0], 1, 0, a, sizeof(a), slot);
    xfix_post(&t, &reqs[1], 1, 0, b, sizeof(b), slot + 256);
    int64_t t0 = collie__now_ns();
    ASSERT_RC(COLLIE_REMOTE_ERROR, use_abort ? "aborted" : "closed",
              xfix_wait_n(&t, reqs, 2, 0, collie__deadline_after_ms(10000)));
    double secs = (double)(collie__now_ns() - t0) / 1e9;
    ASSERTF(strstr(collie_last_error(), "rank 1 (world rank 1"), "\"%s\" does not name rank 1",
            collie_last_error());
    ASSERT(reqs[0].done && reqs[0].rc == COLLIE_SUCCESS);
    for (size_t i = 0; i < sizeof(a); i++) ASSERT(a[i] == 'q');
    ASSERT(reqs[1].done && reqs[1].rc == COLLIE_REMOTE_ERROR);
    ASSERTF(secs < 1.0, "departure noticed after %.2f s", secs);
  }
  xfix_done(&t);
}

TEST_IMPL(shm_peer_closes)
{
  shmt_peer_leaves(0);
}

TEST_IMPL(shm_peer_aborts)
{
  shmt_peer_leaves(1);
}

/* Rank 2 dies; rank 0 waits on it, fails and aborts; rank 1 waits only on
 * rank 0 and must still learn the root cause from rank 0's abort reason. */
TEST_IMPL(shm_abort_reason)
{
  struct xfix t;
  shmt_meet(&t, 10000);
  xfix_open(&t);
  xfix_barrier(&t, "open");
  if (t.rank == 2) test_die_by_sigkill();
  char buf[8];
  struct collie__req r;
  uint64_t slot = collie__slot(COLLIE_KIND_REDUCE, 4, 0);
  if (t.rank == 0) {
    xfix_post(&t, &r, 2, 0, buf, sizeof(buf), slot);
    ASSERT_RC(COLLIE_REMOTE_ERROR, "rank 2 (world rank 2, pid",
              xfix_wait_n(&t, &r, 1, 0, collie__deadline_after_ms(10000)));
    shmt_ops->abort(t.x);
  } else {
    xfix_post(&t, &r, 0, 0, buf, sizeof(buf), slot);
    ASSERT_RC(COLLIE_REMOTE_ERROR, "rank 0 (world rank 0",
              xfix_wait_n(&t, &r, 1, 0, collie__deadline_after_ms(10000)));
    ASSERTF(strstr(collie_last_error(), "aborted its communicator") &&
                strstr(collie_last_error(), ", after: shm: rank 2 (world rank 2, pid") &&
                strstr(collie_last_error(), "died"),
            "\"%s\" does not carry rank 0's reason", collie_last_error());
  }
  xfix_done(&t);
}

/* abort() from another thread while the driving thread sleeps in wait():
 * the driver gets up and fails at once, and the peer hears of it. */
struct shmt_driver {
  struct xfix *t;
  struct collie__req r;
  collie_result_t rc;
  double secs;
};

static void *
shmt_drive(void *arg)
{
  struct shmt_driver *d = arg;
  char buf[16];
  xfix_post(d->t, &d->r, 1, 0, buf, sizeof(buf), collie__slot(COLLIE_KIND_GATHER, 2, 0));
  int64_t t0 = collie__now_ns();
  d->rc = xfix_wait_n(d->t, &d->r, 1, 0, collie__deadline_after_ms(10000));
  d->secs = (double)(collie__now_ns() - t0) / 1e9;
  return NULL;
}

TEST_IMPL(shm_abort_from_thread)
{
  struct xfix t;
  shmt_meet(&t, 10000);
  xfix_open(&t);
  if (t.rank == 0) {
    struct shmt_driver d = {.t = &t};
    pthread_t th;
    ASSERT(pthread_create(&th, NULL, shmt_drive, &d) == 0);
    collie__sleep_ns(300 * 1000000LL); /* the driver is asleep in wait() */
    int64_t t0 = collie__now_ns();
    shmt_ops->abort(t.x);
    ASSERT(pthread_join(th, NULL) == 0);
    double after = (double)(collie__now_ns() - t0) / 1e9;
    ASSERT(d.rc == COLLIE_INVALID_USAGE);
    ASSERTF(d.secs > 0.2 && after < 0.5, "driver returned %.3f s after abort (ran %.3f s)", after,
            d.secs);
  } else {
    char buf[16];
    struct collie__req r;
    xfix_post(&t, &r, 0, 0, buf, sizeof(buf), collie__slot(COLLIE_KIND_GATHER, 2, 0));
    ASSERT_RC(COLLIE_REMOTE_ERROR, "rank 0 (world rank 0",
              xfix_wait_n(&t, &r, 1, 0, collie__deadline_after_ms(10000)));
    ASSERTF(strstr(collie_last_error(), "aborted"), "\"%s\" lacks \"aborted\"",
            collie_last_error());
  }
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* After a timeout at the net level the caller returns and its requests die
 * while still posted; abort() and close() must not write to them. */
TEST_IMPL(shm_abandoned_requests)
{
  struct xfix t;
  shmt_meet(&t, 10000);
  xfix_open(&t);
  size_t big = 2 * 1024 * 1024; /* more than a ring holds: stays posted */
  unsigned char *sb = calloc(1, big);
  unsigned char *mem = malloc(2 * sizeof(struct collie__req));
  ASSERT(sb && mem);
  struct collie__req *reqs = (struct collie__req *)(void *)mem;
  /* Two sends each way and no receive: both stay posted. */
  xfix_post(&t, &reqs[0], 1 - t.rank, 1, sb, big, collie__slot(COLLIE_KIND_SCATTER, 1, 0));
  xfix_post(&t, &reqs[1], 1 - t.rank, 1, sb, 5, collie__slot(COLLIE_KIND_SCATTER, 2, 0));
  int pending = 0;
  ASSERT_OK(shmt_ops->progress(t.x, &pending));
  ASSERT(pending == 2);
  xfix_barrier(&t, "posted");
  memset(mem, 0xab, 2 * sizeof(struct collie__req)); /* the caller's frame is gone */
  if (t.rank == 0) shmt_ops->abort(t.x);
  shmt_ops->close(t.x);
  t.x = NULL;
  for (size_t i = 0; i < 2 * sizeof(struct collie__req); i++) ASSERT(mem[i] == 0xab);
  free(mem);
  free(sb);
  xfix_done(&t);
}

/* ---- open() when a peer never shows up ---- */

/* The last rank never opens: the others fail with TIMEOUT naming it. */
TEST_IMPL(shm_open_timeout)
{
  struct xfix t;
  shmt_meet(&t, 1500);
  int absent = t.size - 1;
  if (t.rank != absent) {
    int64_t t0 = collie__now_ns();
    char want[64];
    snprintf(want, sizeof(want), "rank %d (world rank %d)", absent, absent);
    const char *wantp = want; /* a pointer: ASSERT_RC tests it for NULL */
    ASSERT_RC(COLLIE_TIMEOUT, wantp, xfix_try_open(&t));
    ASSERT(t.x == NULL);
    ASSERT(collie__now_ns() - t0 < 4000000000LL);
  }
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* Rank 0 (the leader) never opens: rank 1 fails with TIMEOUT naming it. */
TEST_IMPL(shm_open_no_leader)
{
  struct xfix t;
  shmt_meet(&t, 1000);
  if (t.rank == 1) {
    int peers[1] = {0};
    ASSERT_RC(COLLIE_TIMEOUT, "rank 0 (world rank 0", shmt_ops->open(&t.cfg, peers, 1, &t.x));
    ASSERT(t.x == NULL);
  }
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* The leader made its segment and died before the others could attach
 * (issue 19: the name stayed in /dev/shm for ever): the rank that gives up
 * removes it. Rank 0 creates the file and never opens; rank 1's open times
 * out naming it, and the name is gone. */
TEST_IMPL(shm_open_leader_died)
{
  struct xfix t;
  shmt_meet(&t, 800);
  t.cfg.comm_hash = 0xd1ed;
  char name[96], path[128];
  shmt_seg_name(name, sizeof(name), t.cfg.comm_hash, 0);
  snprintf(path, sizeof(path), "/dev/shm%s", name);
  if (t.rank == 0) {
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT(fd >= 0);
    ASSERT(ftruncate(fd, 4096) == 0);
    close(fd);
  }
  xfix_barrier(&t, "made");
  if (t.rank == 1) {
    int peers[1] = {0};
    ASSERT_RC(COLLIE_TIMEOUT, "rank 0 (world rank 0", shmt_ops->open(&t.cfg, peers, 1, &t.x));
    ASSERT(t.x == NULL);
    ASSERTF(access(path, F_OK) != 0, "%s left behind", path);
  }
  xfix_barrier(&t, "end");
  shm_unlink(name); /* the test's own leftovers, were the check to fail */
  xfix_done(&t);
}

/* The leader cannot create the segment (here a directory holds its name, as
 * a full /dev/shm would fail it): the others learn why at once, not at their
 * deadline (10 s) told that the segment never came. */
TEST_IMPL(shm_open_leader_failed)
{
  struct xfix t;
  shmt_meet(&t, 10000);
  t.cfg.comm_hash = 0xfa11;
  char name[96], path[128];
  shmt_seg_name(name, sizeof(name), t.cfg.comm_hash, 0);
  snprintf(path, sizeof(path), "/dev/shm%s", name);
  if (t.rank == 0) ASSERT(mkdir(path, 0700) == 0);
  xfix_barrier(&t, "made");
  int peers[1] = {1 - t.rank};
  if (t.rank == 0) {
    ASSERT_RC(COLLIE_SYSTEM_ERROR, "cannot create segment", shmt_ops->open(&t.cfg, peers, 1, &t.x));
  } else {
    ASSERT_RC(COLLIE_REMOTE_ERROR, "rank 0 (world rank 0, pid",
              shmt_ops->open(&t.cfg, peers, 1, &t.x));
    ASSERTF(strstr(collie_last_error(), "could not create the shared-memory segment: shm: cannot "
                                        "create segment"),
            "%s", collie_last_error());
  }
  ASSERT(t.x == NULL);
  xfix_barrier(&t, "end");
  rmdir(path);
  xfix_done(&t);
}

/* ---- open() when a peer of this host died first ---- */

/* Rank `victim` publishes its peer record (pid included) and is killed
 * instead of opening, as a rank dies while a communicator is set up; the
 * others' open, with a communicator's setup deadline of 20 s, must fail at
 * once with REMOTE_ERROR naming its rank, world rank and pid: well within
 * 5 s (before the fix it waited out the 20 s). The leader's death leaves the
 * others waiting for its segment; another rank's, waiting for it to attach. */
static void
shmt_dies_before_open(int victim, const char *what)
{
  struct xfix t;
  shmt_meet(&t, 20000);
  t.cfg.comm_hash = 0xdead0 + (uint64_t)victim;
  if (t.rank == victim) test_die_by_sigkill();
  char want[128];
  snprintf(want, sizeof(want), "rank %d (world rank %d, pid %d) died before it %s", victim, victim,
           (int)t.peers[victim].pid, what);
  const char *wantp = want; /* a pointer: ASSERT_RC tests it for NULL */
  int64_t t0 = collie__now_ns();
  ASSERT_RC(COLLIE_REMOTE_ERROR, wantp, xfix_try_open(&t));
  double s = (double)(collie__now_ns() - t0) / 1e9;
  ASSERTF(s < 5.0, "open named the dead rank after %.2f s (setup deadline 20 s)", s);
  ASSERT(t.x == NULL);
  xfix_barrier_n(&t, "end", t.size - 1);
  xfix_done(&t);
}

TEST_IMPL(shm_open_peer_dead)
{
  shmt_dies_before_open(test_size() - 1, "attached to the shared-memory segment");
}

TEST_IMPL(shm_open_leader_dead)
{
  shmt_dies_before_open(0, "created the shared-memory segment");
}

/* A segment left by a crashed job with the same token and comm is replaced. */
TEST_IMPL(shm_stale_segment)
{
  struct xfix t;
  shmt_meet(&t, 10000);
  t.cfg.comm_hash = 0xdead;
  if (t.rank == 0) {
    char name[96];
    shmt_seg_name(name, sizeof(name), t.cfg.comm_hash, 0);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT(fd >= 0);
    ASSERT(ftruncate(fd, 4096) == 0);
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ASSERT(p != MAP_FAILED);
    memset(p, 0xab, 4096); /* junk where the magic would be */
    munmap(p, 4096);
    close(fd);
  }
  xfix_barrier(&t, "stale");
  xfix_open(&t);
  char buf[8] = "abcdefg", in[8];
  struct collie__req reqs[2];
  int peer = (t.rank + 1) % t.size, from = (t.rank + t.size - 1) % t.size;
  xfix_post(&t, &reqs[0], from, 0, in, sizeof(in), 5);
  xfix_post(&t, &reqs[1], peer, 1, buf, sizeof(buf), 5);
  ASSERT_OK(xfix_wait_n(&t, reqs, 2, 100, collie__deadline_after_ms(5000)));
  ASSERT(!memcmp(in, "abcdefg", 8));
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* ---- Bad input ---- */

TEST_IMPL(shm_bad_input)
{
  struct xfix t;
  shmt_meet(&t, 10000);
  struct collie__xport *x = NULL;
  /* can_connect: the same host only, never to self. It is a pure predicate
   * about hosts: COLLIE_TRANSPORT=tcp is net.c's filter, not shm's. */
  ASSERT(shmt_ops->can_connect(&t.cfg, 1 - t.rank));
  ASSERT(!shmt_ops->can_connect(&t.cfg, t.rank));
  ASSERT(!shmt_ops->can_connect(&t.cfg, 2));
  ASSERT(!shmt_ops->can_connect(&t.cfg, -1));
  t.cfg.transport = "tcp";
  ASSERT(shmt_ops->can_connect(&t.cfg, 1 - t.rank));
  t.cfg.transport = "shm";
  /* open: peer lists that are out of range, unsorted or on another host. */
  int self[1] = {t.rank}, out_of_range[1] = {5};
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "entry 0 is 5", shmt_ops->open(&t.cfg, out_of_range, 1, &x));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "itself", shmt_ops->open(&t.cfg, self, 1, &x));
  ASSERT(x == NULL);
  char keep[COLLIE_HOSTID_LEN];
  memcpy(keep, t.peers[1 - t.rank].host, sizeof(keep));
  snprintf(t.peers[1 - t.rank].host, sizeof(keep), "elsewhere");
  int other[1] = {1 - t.rank};
  ASSERT(!shmt_ops->can_connect(&t.cfg, 1 - t.rank));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "elsewhere", shmt_ops->open(&t.cfg, other, 1, &x));
  ASSERT(x == NULL);
  memcpy(t.peers[1 - t.rank].host, keep, sizeof(keep));
  /* open with no peers (every other rank on another host): a transport
   * that owns no segment and accepts no request. */
  ASSERT_OK(shmt_ops->open(&t.cfg, NULL, 0, &x));
  ASSERT(x != NULL);
  int none = -1;
  ASSERT_OK(shmt_ops->progress(x, &none));
  ASSERT(none == 0);
  shmt_ops->wait(x, collie__now_ns() + 1000000);
  shmt_ops->close(x);
  x = NULL;
  /* post: to self, out of range, NULL buffer. */
  xfix_open(&t);
  struct collie__req r;
  memset(&r, 0, sizeof(r));
  r.peer = t.rank;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "not a shm peer", shmt_ops->post(t.x, &r));
  r.peer = 7;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "rank 7", shmt_ops->post(t.x, &r));
  r.peer = 1 - t.rank;
  r.len = 10;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "NULL buffer", shmt_ops->post(t.x, &r));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "NULL", shmt_ops->post(t.x, NULL));
  int pending = -1;
  ASSERT_OK(shmt_ops->progress(t.x, &pending));
  ASSERT(pending == 0);
  /* Still usable after rejected posts. */
  char b = (char)('a' + t.rank), in = 0;
  struct collie__req reqs[2];
  xfix_post(&t, &reqs[0], 1 - t.rank, 0, &in, 1, 1);
  xfix_post(&t, &reqs[1], 1 - t.rank, 1, &b, 1, 1);
  ASSERT_OK(xfix_wait_n(&t, reqs, 2, 10, collie__deadline_after_ms(5000)));
  ASSERT(in == 'a' + (1 - t.rank));
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* ---- Ping-pong: latency and bandwidth, printed for tuning ---- */

/* Returns the one-way time in seconds; *slow counts round trips of 45 ms or
 * more: a lost wake-up shows as a round trip that only wait()'s 50 ms cap
 * ended. */
static double
shmt_pingpong(struct xfix *t, size_t len, int iters, int spin, int *slow)
{
  unsigned char *buf = malloc(len ? len : 1);
  ASSERT(buf);
  memset(buf, 0x5a, len);
  int peer = 1 - t->rank;
  int64_t t0 = 0, prev = 0;
  *slow = 0;
  for (int i = -2; i < iters; i++) { /* two warm-up rounds fault the pages in */
    int64_t now = collie__now_ns();
    if (i == 0) t0 = now;
    if (i > 0 && now - prev >= 45000000) ++*slow;
    prev = now;
    uint64_t slot = collie__slot(COLLIE_KIND_P2P, (uint32_t)i, 0);
    xfix_pingpong_round(t, peer, buf, len, slot, spin);
  }
  double one_way_s = (double)(collie__now_ns() - t0) / 1e9 / (2.0 * iters);
  free(buf);
  return one_way_s;
}

TEST_IMPL(shm_pingpong)
{
  struct xfix t;
  shmt_meet(&t, 10000);
  xfix_open(&t);
  int slow = 0, slow_sleep = 0;
  double lat_spin = shmt_pingpong(&t, 8, 20000, 1000000, &slow);
  double lat_sleep = shmt_pingpong(&t, 8, 2000, 0, &slow_sleep);
  double big_spin = shmt_pingpong(&t, 8u << 20, 30, 1000000, &slow);
  double big_sleep = shmt_pingpong(&t, 8u << 20, 30, 0, &slow);
  if (t.rank == 0) {
    printf("shm ping-pong 8 B: %.2f us one way (spinning), %.2f us (sleeping at once)\n",
           lat_spin * 1e6, lat_sleep * 1e6);
    printf("shm ping-pong 8 MiB: %.2f GB/s one way (spinning), %.2f GB/s (sleeping at once)\n",
           8.0 * 1048576 / big_spin / 1e9, 8.0 * 1048576 / big_sleep / 1e9);
  }
  /* Generous bounds (the machine is shared); a lost wake-up would cost 50 ms. */
  ASSERTF(lat_spin < 2e-3 && lat_sleep < 10e-3, "8-byte latency %.1f / %.1f us", lat_spin * 1e6,
          lat_sleep * 1e6);
  ASSERTF(slow_sleep <= 2, "%d of 2000 sleeping round trips took >= 45 ms: lost wake-ups?",
          slow_sleep);
  xfix_barrier(&t, "end");
  xfix_done(&t);
}
