/*
 * fuzz_tcp_frames.c - the tcp transport's data path (tcp.c: frame headers,
 * DATA chunks, BYE, ABORT and its reason, ends of stream) on what a broken or
 * hostile peer may send once the handshake is done. A channel to "rank 1" is
 * one end of a socketpair; the fuzzer plays rank 1 on the other end, and the
 * transport is driven through its real ops (post, progress, wait, peek, tell,
 * abort, close), as net.c drives it. Only open() is skipped: the channel is
 * built here as it leaves one (struct collie__tcp_xport, tcp_int.h).
 *
 * The input is a little program; each step is an opcode byte (taken modulo
 * FUZZ_NOPS) and its operands, little-endian, read as 0 past the end:
 *
 *   0 RECV  slot:u64 len:u32   post a receive of len % (2 chunks + 64) bytes
 *   1 SEND  slot:u64 len:u16   post a send of len bytes
 *   2 WRITE n:u16 bytes[n]     rank 1 writes these bytes
 *   3 ZEROS n:u32              rank 1 writes n % (2 chunks + 64) zero bytes
 *   4 STEP                     progress, then wait until now
 *   5 PEEK                     peek at rank 1 (and at ranks without a channel)
 *   6 HANGUP                   rank 1 ends its stream (shutdown SHUT_WR)
 *   7 CLOSE                    rank 1 closes its end (a reset if it left data unread)
 *   8 TELL  n:u16              this rank tells rank 1 why it gives up (n % 700 bytes),
 *                              then aborts, as net.c does
 *   9 ABORT                    this rank aborts
 *  10 DRAIN                    rank 1 reads what this rank sent
 *
 * At the end rank 1 ends its stream, and progress runs until nothing is
 * posted or the transport failed: every posted request must then be done
 * (an end of stream is always noticed), and after each progress the count of
 * pending requests must be right, a completed receive full, and a failure
 * must leave every request done with an error and a message. Then close().
 * Writes that the transport does not take (no receive posted: backpressure)
 * are given up after a few tries, so no input blocks.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_log.h"
#include "transport/tcp_int.h"
#include "transport/tcp_proto.h"
#include "transport/transport.h"
#include "util/error.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

#define FUZZ_NOPS 11
#define FUZZ_MAX_REQS 8
#define FUZZ_MAX_LEN (2 * COLLIE_TCP_CHUNK + 64)

struct fuzz {
  const uint8_t *p, *end;
  struct collie__xport *x;
  int peer_fd; /* rank 1's end, -1 once closed */
  int hung_up; /* rank 1 ended its stream */
  int aborted;
  struct collie__req reqs[FUZZ_MAX_REQS];
  int nreqs;
};

static uint64_t
fuzz_take(struct fuzz *f, int bytes)
{
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) {
    uint64_t b = f->p < f->end ? *f->p++ : 0;
    v |= b << (8 * i);
  }
  return v;
}

/* The transport open() would have made with one channel, to rank 1, on one
 * end of a socketpair (what the channel's code does with it is the same as
 * with a TCP socket: non-blocking recvmsg/sendmsg, poll). */
static void
fuzz_open(struct fuzz *f)
{
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) abort();
  struct collie__tcp_xport *t = calloc(1, sizeof(*t));
  if (!t) abort();
  atomic_init(&t->aborted, 0);
  t->rank = 0;
  t->size = 2;
  t->nchan = 1;
  t->chans = calloc(1, sizeof(*t->chans));
  t->pfds = calloc(1, sizeof(*t->pfds));
  t->chan_of = malloc(2 * sizeof(int));
  if (!t->chans || !t->pfds || !t->chan_of) abort();
  t->chan_of[0] = -1;
  t->chan_of[1] = 0;
  struct collie__tcp_chan *c = &t->chans[0];
  c->peer = 1;
  c->world_rank = 1;
  c->pid = 0;
  c->near = 0;
  c->fd = sv[0];
  snprintf(c->addr, sizeof(c->addr), "fuzz-peer");
  f->x = (struct collie__xport *)(void *)t;
  f->peer_fd = sv[1];
}

/* The invariants after a progress() that returned rc with *pending. */
static void
fuzz_check(struct fuzz *f, collie_result_t rc, int pending)
{
  if (f->aborted) return; /* abort() forgets requests without touching them */
  int open = 0;
  for (int i = 0; i < f->nreqs; i++) {
    const struct collie__req *r = &f->reqs[i];
    if (!r->done) {
      open++;
      continue;
    }
    if (r->rc == COLLIE_SUCCESS && r->off != r->len) {
      fprintf(stderr, "fuzz_tcp_frames: request %d done with %zu of %zu bytes\n", i, r->off,
              r->len);
      abort();
    }
  }
  if (rc == COLLIE_SUCCESS && pending != open) {
    fprintf(stderr, "fuzz_tcp_frames: %d pending, %d not done\n", pending, open);
    abort();
  }
  if (rc != COLLIE_SUCCESS && (open || !collie__err_msg()[0])) {
    fprintf(stderr, "fuzz_tcp_frames: failed (%s) with %d request(s) not done: \"%s\"\n",
            collie_result_string(rc), open, collie__err_msg());
    abort();
  }
}

static collie_result_t
fuzz_step(struct fuzz *f, int64_t wait_ns, int *pending)
{
  collie_result_t rc = collie__tcp_ops.progress(f->x, pending);
  fuzz_check(f, rc, *pending);
  /* Even with nothing posted, as net.c does while it peeks: a header, a BYE or
   * an end of stream is then read by the next progress. */
  if (rc == COLLIE_SUCCESS) collie__tcp_ops.wait(f->x, collie__now_ns() + wait_ns);
  return rc;
}

/* Rank 1 reads what this rank sent, so that its sends complete. */
static void
fuzz_drain(struct fuzz *f)
{
  char sink[65536];
  if (f->peer_fd < 0) return;
  while (recv(f->peer_fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
  }
}

/* Rank 1 writes buf[0..n) (NULL: zeros); what the transport does not take
 * after a few rounds of progress is dropped. */
static void
fuzz_write(struct fuzz *f, const uint8_t *buf, size_t n)
{
  static const uint8_t zeros[65536];
  int stalls = 0;
  if (f->peer_fd < 0 || f->hung_up) return;
  while (n > 0 && stalls < 4) {
    size_t len = n;
    if (!buf && len > sizeof(zeros)) len = sizeof(zeros);
    ssize_t w = send(f->peer_fd, buf ? buf : zeros, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w > 0) {
      n -= (size_t)w;
      if (buf) buf += w;
      stalls = 0;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return; /* this rank closed its end */
    int pending;
    stalls++;
    fuzz_drain(f);
    if (fuzz_step(f, 0, &pending) != COLLIE_SUCCESS) stalls = 4;
  }
}

static void
fuzz_post(struct fuzz *f, int is_send, uint64_t slot, size_t len)
{
  if (f->nreqs == FUZZ_MAX_REQS) return;
  struct collie__req *r = &f->reqs[f->nreqs++];
  memset(r, 0, sizeof(*r));
  r->peer = 1;
  r->is_send = is_send;
  r->slot = slot;
  r->len = len;
  r->buf = malloc(len ? len : 1); /* exact: ASan sees a byte written past it */
  if (!r->buf) abort();
  memset(r->buf, is_send ? 0x5a : 0xa5, len);
  (void)collie__tcp_ops.post(f->x, r);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
  struct fuzz f;
  memset(&f, 0, sizeof(f));
  fuzz_log_level();
  f.p = data;
  f.end = data + n;
  fuzz_open(&f);
  int pending = 0;
  while (f.p < f.end) {
    switch (fuzz_take(&f, 1) % FUZZ_NOPS) {
    case 0: {
      uint64_t slot = fuzz_take(&f, 8);
      fuzz_post(&f, 0, slot, (size_t)(fuzz_take(&f, 4) % FUZZ_MAX_LEN));
      break;
    }
    case 1: {
      uint64_t slot = fuzz_take(&f, 8);
      fuzz_post(&f, 1, slot, (size_t)fuzz_take(&f, 2));
      break;
    }
    case 2: {
      size_t len = (size_t)fuzz_take(&f, 2);
      if (len > (size_t)(f.end - f.p)) len = (size_t)(f.end - f.p);
      fuzz_write(&f, f.p, len);
      f.p += len;
      break;
    }
    case 3:
      fuzz_write(&f, NULL, (size_t)(fuzz_take(&f, 4) % FUZZ_MAX_LEN));
      break;
    case 4:
      (void)fuzz_step(&f, 0, &pending);
      break;
    case 5: {
      uint64_t slot;
      size_t len;
      (void)collie__tcp_ops.peek(f.x, 1, &slot, &len);
      if (collie__tcp_ops.peek(f.x, 0, &slot, &len) || collie__tcp_ops.peek(f.x, 2, &slot, &len) ||
          collie__tcp_ops.peek(f.x, -1, &slot, &len))
        abort(); /* no channel to those */
      break;
    }
    case 6:
      if (f.peer_fd >= 0) shutdown(f.peer_fd, SHUT_WR);
      f.hung_up = 1;
      break;
    case 7:
      if (f.peer_fd >= 0) close(f.peer_fd);
      f.peer_fd = -1;
      break;
    case 8: {
      char why[700];
      size_t len = (size_t)(fuzz_take(&f, 2) % sizeof(why));
      memset(why, 'w', len);
      why[len ? len - 1 : 0] = '\0';
      collie__tcp_ops.tell(f.x, why);
      collie__tcp_ops.abort(f.x); /* the contract: tell comes just before abort */
      f.aborted = 1;
      break;
    }
    case 9:
      collie__tcp_ops.abort(f.x);
      f.aborted = 1;
      break;
    default:
      fuzz_drain(&f);
      break;
    }
  }
  /* Rank 1 says no more: whatever is posted must now finish or fail. */
  if (f.peer_fd >= 0) shutdown(f.peer_fd, SHUT_WR);
  f.hung_up = 1;
  for (int round = 0;; round++) {
    fuzz_drain(&f);
    collie_result_t rc = fuzz_step(&f, 1000000, &pending);
    if (rc != COLLIE_SUCCESS || pending == 0) break;
    if (round == 50) {
      fprintf(stderr, "fuzz_tcp_frames: %d request(s) still pending after rank 1 hung up\n",
              pending);
      abort();
    }
  }
  fuzz_drain(&f);
  collie__tcp_ops.close(f.x);
  for (int i = 0; i < f.nreqs; i++) free(f.reqs[i].buf);
  if (f.peer_fd >= 0) close(f.peer_fd);
  return 0;
}
