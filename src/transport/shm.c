/*
 * shm.c - the shared-memory transport: channels between ranks of one
 * communicator that run on the same host.
 *
 * Segment. The local ranks of a communicator (this rank and the peers passed
 * to open()) share one POSIX shared-memory segment, laid out as shm_int.h
 * describes. The lowest comm rank among them (the leader) creates it with
 * mode 0600 under "/collie-<token hash>-<comm hash>-<leader>", initialises
 * it, stores a ready magic and publishes a per-creation nonce in the store;
 * the others wait for the nonce, map the segment and check it. Every rank
 * then bumps the "attached" counter, and the one that completes it unlinks
 * the name: from then on the segment lives only as long as some rank maps
 * it, so a crash cannot leave a file behind. On any failure in open() the
 * name is unlinked too.
 *
 * Messages. Each ordered pair (i -> j) has a FIFO ring of fixed-size slots
 * (single producer, single consumer). A message is cut into chunks of at
 * most COLLIE_SHM_SLOT_BYTES; each chunk's header repeats the message's slot
 * tag and total length, so the receiver checks both against its posted
 * receive before copying anything. A zero-length message is one empty
 * chunk. Both sides copy (sender into the slot, receiver out of it); there
 * is no allocation per message.
 *
 * Sleeping. Each rank has a 32-bit doorbell futex word. Whoever moves a ring
 * counter another rank may wait on bumps that rank's doorbell afterwards and
 * calls futex_wake only when the rank announced it sleeps (see shm_notify
 * and shm_wait for why no wake-up is lost). A rank that dies cannot ring,
 * so a rank with requests outstanding checks its peers at least every
 * SHM_CHECK_NS: their state word (closed, aborted) and whether their process
 * still exists (a pidfd, or kill/proc as a fallback).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "transport/shm_int.h"
#include "transport/transport.h"
#include "util/error.h"
#include "util/util.h"

/* How often a rank with outstanding requests looks for dead peers, and the
 * longest single sleep in wait() (a death rings no doorbell). */
#define SHM_CHECK_NS (50 * 1000000LL)
/* Poll interval while waiting for the leader's segment in open(). */
#define SHM_OPEN_POLL_NS (1 * 1000000LL)
/* Longest futex sleep while waiting for the others to attach. */
#define SHM_ATTACH_POLL_NS (10 * 1000000LL)

/* A channel: this rank's two rings with one peer, and its posted requests. */
struct shm_chan {
  int rank;                     /* the peer's comm rank */
  int world_rank;               /* for messages */
  int local;                    /* the peer's index in the segment */
  int pid;                      /* the peer's pid, as it wrote it when attaching */
  int pidfd;                    /* pidfd of the peer, or -1 (then kill(2) / /proc) */
  int pid_check;                /* 0 when the pid is not ours to check (other pid namespace) */
  struct collie__shm_ring *out; /* this rank -> peer: we produce */
  struct collie__shm_ring *in;  /* peer -> this rank: we consume */
  uint64_t out_tail;            /* our copy of out->tail (we own it) */
  uint64_t out_head_seen;       /* out->head as last read */
  uint64_t in_head;             /* our copy of in->head (we own it) */
  uint64_t in_tail_seen;        /* in->tail as last read */
  struct collie__req *sendq, *sendq_last;
  struct collie__req *recvq, *recvq_last;
};

/* The transport state of one communicator on this rank. struct collie__xport
 * is opaque to the rest of the library; shm_of() converts. */
struct shm_xport {
  int rank, comm_size;
  int nlocal, me;         /* group size and this rank's index in it */
  int *chan_of_rank;      /* comm rank -> index into chans, or -1 */
  struct shm_chan *chans; /* nlocal - 1 channels, ascending comm rank */
  int nchans;
  char name[64];
  void *base;
  size_t bytes;
  struct collie__shm_header *hdr;
  struct collie__shm_ctrl *ctrl;
  uint32_t snapshot;    /* my doorbell at the start of the last progress() */
  uint32_t events_seen; /* hdr->events at the last peer check */
  int64_t next_check_ns;
  int npending;
  collie_result_t failed; /* first failure; errmsg holds its text */
  char errmsg[COLLIE_ERRMSG_LEN];
  /* The only words touched by two threads of this process: abort() may come
   * from another thread (collie_comm_abort) while the driving thread is in
   * progress() or wait(). busy serialises abort() with post() and progress(),
   * which take it uncontended otherwise; stopped lets wait() skip sleeping. */
  _Atomic int busy;
  _Atomic int stopped;
  _Atomic int left; /* our state is CLOSED or ABORTED already */
};

static struct shm_xport *
shm_of(struct collie__xport *x)
{
  return (struct shm_xport *)(void *)x;
}

static uint32_t *
shm_futex_word(_Atomic uint32_t *w)
{
  /* Same size and representation (asserted in shm_int.h); the kernel only
   * compares and sleeps on the word. */
  return (uint32_t *)(void *)w;
}

static void
shm_lock(struct shm_xport *x)
{
  /* Held only by post/progress (never blocking) or abort: a short spin. */
  while (atomic_exchange_explicit(&x->busy, 1, memory_order_acquire)) collie__cpu_relax();
}

static void
shm_unlock(struct shm_xport *x)
{
  atomic_store_explicit(&x->busy, 0, memory_order_release);
}

/* ---- Layout ---- */

static struct collie__shm_layout
shm_layout(int nlocal)
{
  struct collie__shm_layout l;
  size_t n = (size_t)nlocal;
  l.ranks_off = sizeof(struct collie__shm_header);
  l.ctrl_off = l.ranks_off + COLLIE_SHM_ALIGN_UP(n * sizeof(int32_t), COLLIE_SHM_LINE);
  l.rings_off =
      COLLIE_SHM_ALIGN_UP(l.ctrl_off + n * sizeof(struct collie__shm_ctrl), COLLIE_SHM_PAGE);
  l.bytes = l.rings_off + n * (n - 1) * COLLIE_SHM_RING_BYTES;
  return l;
}

/* The ring carrying i -> j (local indices, i != j). */
static struct collie__shm_ring *
shm_ring(const struct shm_xport *x, int i, int j)
{
  struct collie__shm_layout l = shm_layout(x->nlocal);
  size_t k = (size_t)i * (size_t)(x->nlocal - 1) + (size_t)(j < i ? j : j - 1);
  return (struct collie__shm_ring *)((char *)x->base + l.rings_off + k * COLLIE_SHM_RING_BYTES);
}

static struct collie__shm_chunk *
shm_chunk(struct collie__shm_ring *r, uint64_t seq)
{
  return (struct collie__shm_chunk *)((char *)(r + 1) + (size_t)(seq & (COLLIE_SHM_NSLOTS - 1)) *
                                                            COLLIE_SHM_SLOT_STRIDE);
}

/* ---- Wake-ups ----
 *
 * The lost wake-up race, and why it cannot happen here. The waiter (W) runs
 *   progress: s = doorbell (acquire); read the rings, find nothing to do
 *   wait:     sleeping = 1 (seq_cst); if doorbell == s: futex_wait(doorbell, s)
 * and a producer (P) that makes W's work possible runs
 *   publish tail/head (release); doorbell += 1 (seq_cst read-modify-write);
 *   if sleeping (seq_cst): futex_wake(doorbell).
 * 1. If W's ring reads missed P's publish, W's snapshot s predates P's bump:
 *    had W read the bumped value, its acquire would have synchronised with
 *    the bump (a release), which follows the publish, and W's later ring
 *    reads would have seen it. So the doorbell differs from s after the bump.
 * 2. W's store of sleeping and P's bump are both seq_cst, and so are the
 *    loads after them: in the single total order, either W's load of the
 *    doorbell comes after P's bump (W sees it and does not sleep), or P's
 *    load of sleeping comes after W's store (P sees 1 and wakes W). This is
 *    the store-then-load (Dekker) pattern; acquire/release alone would not
 *    rule out both sides missing each other.
 * 3. futex_wait re-compares the word with s in the kernel, so a bump landing
 *    between W's compare and its sleep makes it return at once.
 * The bump is unconditional (only the syscall is skipped when W is awake):
 * skipping it would let an awake W take a stale snapshot and then sleep. */
static void
shm_notify(struct shm_xport *x, int local)
{
  struct collie__shm_ctrl *c = &x->ctrl[local];
  atomic_fetch_add_explicit(&c->doorbell, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&c->sleeping, memory_order_seq_cst))
    collie__futex_wake_all(shm_futex_word(&c->doorbell));
}

static void
shm_notify_all(struct shm_xport *x)
{
  for (int i = 0; i < x->nchans; i++) shm_notify(x, x->chans[i].local);
}

/* ---- Requests ---- */

static void
shm_complete(struct shm_xport *x, struct collie__req *r, collie_result_t rc)
{
  r->rc = rc;
  r->done = 1;
  x->npending--;
}

/* "receive of allreduce #7 step 1 (4096 bytes)" */
static void
shm_describe_req(const struct collie__req *r, char *buf, size_t len)
{
  char slot[96];
  collie__slot_describe(r->slot, slot, sizeof(slot));
  collie__fmt(buf, len, "%s of %s (%zu bytes)", r->is_send ? "send" : "receive", slot, r->len);
}

/* Records the thread's current message as the transport's failure and ends
 * every posted request with rc. Later calls return the same error. */
static collie_result_t
shm_fail(struct shm_xport *x, collie_result_t rc)
{
  if (!x->failed) {
    x->failed = rc;
    collie__fmt(x->errmsg, sizeof(x->errmsg), "%s", collie__err_msg());
    atomic_store_explicit(&x->stopped, 1, memory_order_release);
  }
  for (int i = 0; i < x->nchans; i++) {
    struct shm_chan *ch = &x->chans[i];
    struct collie__req *r;
    while ((r = ch->sendq) != NULL) {
      ch->sendq = r->next;
      shm_complete(x, r, x->failed);
    }
    while ((r = ch->recvq) != NULL) {
      ch->recvq = r->next;
      shm_complete(x, r, x->failed);
    }
    ch->sendq_last = ch->recvq_last = NULL;
  }
  x->npending = 0;
  collie__err_set_text(x->errmsg);
  return x->failed;
}

/* Copies queued sends into free slots of the peer's ring. Never blocks. */
static void
shm_push(struct shm_xport *x, struct shm_chan *ch)
{
  uint64_t tail = ch->out_tail;
  struct collie__req *r;
  while ((r = ch->sendq) != NULL) {
    if (tail - ch->out_head_seen >= COLLIE_SHM_NSLOTS) {
      ch->out_head_seen = atomic_load_explicit(&ch->out->head, memory_order_acquire);
      if (tail - ch->out_head_seen >= COLLIE_SHM_NSLOTS) break;
    }
    size_t n = r->len - r->off;
    if (n > COLLIE_SHM_SLOT_BYTES) n = COLLIE_SHM_SLOT_BYTES;
    struct collie__shm_chunk *c = shm_chunk(ch->out, tail);
    c->slot = r->slot;
    c->total = r->len;
    c->off = r->off;
    c->len = (uint32_t)n;
    if (n) memcpy(c + 1, (const char *)r->buf + r->off, n);
    r->off += n;
    /* Publish each chunk at once so a polling receiver can copy it out while
     * we fill the next slot; the doorbell is rung once, below. */
    atomic_store_explicit(&ch->out->tail, ++tail, memory_order_release);
    if (r->off == r->len) {
      ch->sendq = r->next;
      if (!ch->sendq) ch->sendq_last = NULL;
      shm_complete(x, r, COLLIE_SUCCESS);
    }
  }
  if (tail != ch->out_tail) {
    ch->out_tail = tail;
    shm_notify(x, ch->local);
  }
}

static collie_result_t
shm_mismatch(const struct shm_chan *ch, const struct collie__shm_chunk *c,
             const struct collie__req *r)
{
  char got[96], want[96];
  collie__slot_describe(c->slot, got, sizeof(got));
  collie__slot_describe(r->slot, want, sizeof(want));
  return collie__err(
      COLLIE_INVALID_USAGE,
      "collectives mismatched across ranks: rank %d (world rank %d) sent %s (%" PRIu64
      " bytes), this rank expected %s (%zu bytes)",
      ch->rank, ch->world_rank, got, c->total, want, r->len);
}

/* Copies arrived chunks into the posted receives, in order. Never blocks.
 * A chunk whose slot or length does not match the head receive fails the
 * transport and is left in the ring, uncopied. */
static collie_result_t
shm_pull(struct shm_xport *x, struct shm_chan *ch)
{
  uint64_t head = ch->in_head;
  collie_result_t rc = COLLIE_SUCCESS;
  struct collie__req *r;
  while ((r = ch->recvq) != NULL) {
    if (head == ch->in_tail_seen) {
      ch->in_tail_seen = atomic_load_explicit(&ch->in->tail, memory_order_acquire);
      if (head == ch->in_tail_seen) break;
    }
    const struct collie__shm_chunk *c = shm_chunk(ch->in, head);
    if (c->slot != r->slot || c->total != r->len) {
      rc = shm_mismatch(ch, c, r);
      break;
    }
    if (c->off != r->off || c->len > r->len - r->off || c->len > COLLIE_SHM_SLOT_BYTES ||
        (c->len == 0 && r->len != 0)) {
      rc = collie__err(COLLIE_INTERNAL_ERROR,
                       "shm: corrupt chunk from rank %d (world rank %d): offset %" PRIu64
                       " length %u, expected offset %zu of %zu bytes",
                       ch->rank, ch->world_rank, c->off, c->len, r->off, r->len);
      break;
    }
    if (c->len) memcpy((char *)r->buf + r->off, c + 1, c->len);
    r->off += c->len;
    atomic_store_explicit(&ch->in->head, ++head, memory_order_release);
    if (r->off == r->len) {
      ch->recvq = r->next;
      if (!ch->recvq) ch->recvq_last = NULL;
      shm_complete(x, r, COLLIE_SUCCESS);
    }
  }
  if (head != ch->in_head) {
    ch->in_head = head;
    shm_notify(x, ch->local);
  }
  return rc;
}

/* ---- Liveness ---- */

/* Whether the peer's process has exited (a zombie counts). Never blocks. */
static int
shm_peer_exited(struct shm_chan *ch)
{
  if (!ch->pid_check) return 0;
  if (ch->pidfd >= 0) {
    struct pollfd p = {.fd = ch->pidfd, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (!(p.revents & POLLNVAL)) return (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
    /* Someone else closed our descriptor (a double close elsewhere in the
     * process): it is not ours any more, so do not close it; fall back. */
    COLLIE_WARN("SHM", "pidfd %d of rank %d was closed behind our back; checking pid %d instead",
                ch->pidfd, ch->rank, ch->pid);
    ch->pidfd = -1;
  }
  if (kill(ch->pid, 0) != 0 && errno == ESRCH) return 1;
  /* Killed but not yet reaped by its parent: state Z (or X) in /proc. */
  char path[64], buf[512];
  collie__fmt(path, sizeof(path), "/proc/%d/stat", ch->pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

/* Fails the transport if a peer we wait on has died, closed or aborted and
 * what it left in the rings does not finish our requests with it. A death
 * is reported in preference to a departure: a peer that aborted because a
 * third rank died should not hide the root cause. */
static collie_result_t
shm_check_peers(struct shm_xport *x)
{
  struct shm_chan *gone = NULL, *left = NULL;
  uint32_t left_state = 0;
  for (int i = 0; i < x->nchans; i++) {
    struct shm_chan *ch = &x->chans[i];
    if (!ch->sendq && !ch->recvq) continue;
    int exited = shm_peer_exited(ch);
    uint32_t st = atomic_load_explicit(&x->ctrl[ch->local].state, memory_order_acquire);
    if (!exited && st == COLLIE_SHM_ALIVE) continue;
    /* Whatever the peer published before leaving is valid: take it first. */
    shm_push(x, ch);
    collie_result_t rc = shm_pull(x, ch);
    if (rc != COLLIE_SUCCESS) return shm_fail(x, rc);
    if (!ch->sendq && !ch->recvq) continue;
    /* A peer that closed or aborted and then exited left on purpose: say so. */
    if (st == COLLIE_SHM_ALIVE) {
      if (!gone) gone = ch;
    } else if (!left) {
      left = ch;
      left_state = st;
    }
  }
  struct shm_chan *ch = gone ? gone : left;
  if (!ch) return COLLIE_SUCCESS;
  char what[160], why[COLLIE_SHM_REASON_LEN + 16] = "";
  shm_describe_req(ch->recvq ? ch->recvq : ch->sendq, what, sizeof(what));
  const char *how = gone                              ? "died"
                    : left_state == COLLIE_SHM_CLOSED ? "closed its communicator"
                                                      : "aborted its communicator";
  if (!gone && left_state == COLLIE_SHM_ABORTED) {
    /* Written by the peer before its state (which we read with acquire). */
    const char *r = x->ctrl[ch->local].reason;
    size_t n = strnlen(r, COLLIE_SHM_REASON_LEN - 1);
    if (n) collie__fmt(why, sizeof(why), ", after: %.*s", (int)n, r);
  }
  collie__err(COLLIE_REMOTE_ERROR, "shm: rank %d (world rank %d, pid %d) %s during %s %s it%s",
              ch->rank, ch->world_rank, ch->pid, how, what, ch->recvq ? "from" : "to", why);
  return shm_fail(x, COLLIE_REMOTE_ERROR);
}

/* ---- The ops ---- */

static int
shm_can_connect(const struct collie__net_cfg *cfg, int peer)
{
  if (!cfg || !cfg->peers || peer < 0 || peer >= cfg->size || peer == cfg->rank) return 0;
  if (cfg->rank < 0 || cfg->rank >= cfg->size) return 0;
  if (cfg->transport && !strcmp(cfg->transport, "tcp")) return 0;
  return strcmp(cfg->peers[cfg->rank].host, cfg->peers[peer].host) == 0;
}

static collie_result_t
shm_post(struct collie__xport *xp, struct collie__req *r)
{
  struct shm_xport *x = shm_of(xp);
  if (!r) return collie__err(COLLIE_INVALID_ARGUMENT, "shm: post: request is NULL");
  if (r->peer < 0 || r->peer >= x->comm_size || x->chan_of_rank[r->peer] < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT, "shm: post: rank %d is not a shm peer of rank %d",
                       r->peer, x->rank);
  if (r->len > 0 && !r->buf)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "shm: post: %s of %zu bytes to rank %d has a NULL buffer",
                       r->is_send ? "send" : "receive", r->len, r->peer);
  r->done = 0;
  r->rc = COLLIE_SUCCESS;
  r->off = 0;
  r->next = NULL;
  shm_lock(x);
  if (x->failed) {
    r->done = 1;
    r->rc = x->failed;
    collie__err_set_text(x->errmsg);
    shm_unlock(x);
    return r->rc;
  }
  struct shm_chan *ch = &x->chans[x->chan_of_rank[r->peer]];
  struct collie__req **first = r->is_send ? &ch->sendq : &ch->recvq;
  struct collie__req **last = r->is_send ? &ch->sendq_last : &ch->recvq_last;
  if (*last)
    (*last)->next = r;
  else
    *first = r;
  *last = r;
  x->npending++;
  shm_unlock(x);
  return COLLIE_SUCCESS;
}

static collie_result_t
shm_progress_locked(struct shm_xport *x, int *pending)
{
  if (x->failed) {
    *pending = 0;
    collie__err_set_text(x->errmsg);
    return x->failed;
  }
  if (!x->ctrl) { /* opened with no peers */
    *pending = x->npending;
    return COLLIE_SUCCESS;
  }
  /* Taken before looking at any ring: see shm_notify. */
  x->snapshot = atomic_load_explicit(&x->ctrl[x->me].doorbell, memory_order_acquire);
  if (x->npending == 0) {
    *pending = 0;
    return COLLIE_SUCCESS;
  }
  for (int i = 0; i < x->nchans; i++) {
    struct shm_chan *ch = &x->chans[i];
    if (ch->sendq) shm_push(x, ch);
    if (ch->recvq) {
      collie_result_t rc = shm_pull(x, ch);
      if (rc != COLLIE_SUCCESS) {
        *pending = 0;
        return shm_fail(x, rc);
      }
    }
  }
  if (x->npending > 0) {
    /* A departure rings every doorbell and bumps events: check at once. A
     * death rings nothing: check on a timer. */
    uint32_t ev = atomic_load_explicit(&x->hdr->events, memory_order_acquire);
    int64_t now = collie__now_ns();
    if (ev != x->events_seen || now >= x->next_check_ns) {
      x->events_seen = ev;
      x->next_check_ns = now + SHM_CHECK_NS;
      collie_result_t rc = shm_check_peers(x);
      if (rc != COLLIE_SUCCESS) {
        *pending = 0;
        return rc;
      }
    }
  }
  *pending = x->npending;
  return COLLIE_SUCCESS;
}

static collie_result_t
shm_progress(struct collie__xport *xp, int *pending)
{
  struct shm_xport *x = shm_of(xp);
  shm_lock(x);
  collie_result_t rc = shm_progress_locked(x, pending);
  shm_unlock(x);
  return rc;
}

static void
shm_wait(struct collie__xport *xp, int64_t until_ns)
{
  struct shm_xport *x = shm_of(xp);
  if (atomic_load_explicit(&x->stopped, memory_order_acquire) || !x->ctrl) return;
  int64_t now = collie__now_ns();
  int64_t limit = now + SHM_CHECK_NS; /* a dead peer rings no doorbell */
  if (until_ns < limit) limit = until_ns;
  if (limit <= now) return;
  struct collie__shm_ctrl *c = &x->ctrl[x->me];
  atomic_store_explicit(&c->sleeping, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&c->doorbell, memory_order_seq_cst) == x->snapshot)
    collie__futex_wait(shm_futex_word(&c->doorbell), x->snapshot, limit);
  atomic_store_explicit(&c->sleeping, 0, memory_order_relaxed);
}

/* Announces that this rank left (state CLOSED or ABORTED, with an optional
 * reason) and wakes everyone. */
static void
shm_leave(struct shm_xport *x, uint32_t state, const char *reason)
{
  if (!x->ctrl || atomic_exchange_explicit(&x->left, 1, memory_order_acq_rel)) return;
  if (reason && reason[0])
    collie__fmt(x->ctrl[x->me].reason, sizeof(x->ctrl[x->me].reason), "%s", reason);
  atomic_store_explicit(&x->ctrl[x->me].state, state, memory_order_release);
  atomic_fetch_add_explicit(&x->hdr->events, 1, memory_order_seq_cst);
  shm_notify_all(x);
  shm_notify(x, x->me); /* a thread of ours asleep in wait() gets up too */
}

/* Forgets every posted request without touching it: after a timeout at the
 * net level the caller has already returned and its requests are gone, so
 * abort() and close() must not write to them. */
static void
shm_drop_requests(struct shm_xport *x)
{
  for (int i = 0; i < x->nchans; i++) {
    struct shm_chan *ch = &x->chans[i];
    ch->sendq = ch->sendq_last = ch->recvq = ch->recvq_last = NULL;
  }
  x->npending = 0;
}

static void
shm_abort(struct collie__xport *xp)
{
  struct shm_xport *x = shm_of(xp);
  shm_lock(x);
  /* Our own failure, if any, tells peers why we abort. */
  shm_leave(x, COLLIE_SHM_ABORTED, x->failed ? x->errmsg : NULL);
  if (!x->failed) {
    x->failed = COLLIE_INVALID_USAGE;
    collie__fmt(x->errmsg, sizeof(x->errmsg), "shm: the communicator was aborted on this rank");
    atomic_store_explicit(&x->stopped, 1, memory_order_release);
  }
  shm_drop_requests(x);
  shm_unlock(x);
}

static void
shm_free(struct shm_xport *x)
{
  if (x->base) munmap(x->base, x->bytes);
  for (int i = 0; i < x->nchans; i++)
    if (x->chans[i].pidfd >= 0) close(x->chans[i].pidfd);
  free(x->chans);
  free(x->chan_of_rank);
  free(x);
}

static void
shm_close(struct collie__xport *xp)
{
  struct shm_xport *x = shm_of(xp);
  if (!x) return;
  shm_leave(x, COLLIE_SHM_CLOSED, NULL);
  shm_drop_requests(x);
  shm_free(x);
}

/* ---- open ---- */

static int
shm_pidfd_open(int pid)
{
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0); /* close-on-exec by default */
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

/* "rank 3 (world rank 5)" for each local index whose state is still 0. */
static void
shm_list_unattached(const struct shm_xport *x, const struct collie__net_cfg *cfg, const int *group,
                    char *buf, size_t len)
{
  size_t o = 0;
  buf[0] = '\0';
  for (int i = 0; i < x->nlocal && o + 1 < len; i++) {
    if (atomic_load_explicit(&x->ctrl[i].state, memory_order_acquire) != COLLIE_SHM_UNATTACHED)
      continue;
    int n = snprintf(buf + o, len - o, "%srank %d (world rank %d)", o ? ", " : "", group[i],
                     cfg->peers[group[i]].world_rank);
    if (n < 0) break;
    o += (size_t)n;
  }
}

/* Leader: creates, sizes, maps and initialises the segment, then publishes
 * its nonce under "shm/seg/<leader>". On failure nothing is left behind. */
static collie_result_t
shm_create(struct shm_xport *x, const struct collie__net_cfg *cfg, const int *group)
{
  int fd = shm_open(x->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {
    /* Left by a crashed job with the same token and communicator. */
    COLLIE_INFO("SHM", "removing stale segment %s", x->name);
    shm_unlink(x->name);
    fd = shm_open(x->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  }
  if (fd < 0)
    return collie__err_errno(COLLIE_SYSTEM_ERROR, "shm: cannot create segment /dev/shm%s", x->name);
  if (ftruncate(fd, (off_t)x->bytes) != 0) {
    collie_result_t rc = collie__err_errno(
        COLLIE_SYSTEM_ERROR, "shm: cannot size segment /dev/shm%s to %zu bytes", x->name, x->bytes);
    close(fd);
    shm_unlink(x->name);
    return rc;
  }
  /* Reserve the pages now: a tmpfs that is too small (a container's 64 MiB
   * /dev/shm) then fails here with a message instead of SIGBUS mid-run. */
  int err;
  do {
    err = posix_fallocate(fd, 0, (off_t)x->bytes);
  } while (err == EINTR);
  if (err != 0 && err != EOPNOTSUPP && err != ENOSYS) {
    errno = err;
    collie_result_t rc = collie__err_errno(COLLIE_SYSTEM_ERROR,
                                           "shm: cannot reserve %zu bytes for segment /dev/shm%s "
                                           "(%d local ranks; is /dev/shm too small?)",
                                           x->bytes, x->name, x->nlocal);
    close(fd);
    shm_unlink(x->name);
    return rc;
  }
  void *base = mmap(NULL, x->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    collie_result_t rc = collie__err_errno(
        COLLIE_SYSTEM_ERROR, "shm: cannot map segment /dev/shm%s (%zu bytes)", x->name, x->bytes);
    close(fd);
    shm_unlink(x->name);
    return rc;
  }
  close(fd);
  x->base = base;
  x->hdr = base;
  struct collie__shm_layout l = shm_layout(x->nlocal);
  x->ctrl = (struct collie__shm_ctrl *)((char *)base + l.ctrl_off);
  /* ftruncate zero-filled everything: counters, states, doorbells are 0. */
  struct collie__shm_header *h = x->hdr;
  uint64_t seed = (uint64_t)getpid() ^ (uint64_t)collie__now_ns();
  h->nonce = collie__hash64(&seed, sizeof(seed), collie__hash64(x->name, strlen(x->name), 0));
  if (h->nonce == 0) h->nonce = 1;
  h->comm_hash = cfg->comm_hash;
  h->seg_bytes = x->bytes;
  h->version = COLLIE_SHM_VERSION;
  h->nlocal = (uint32_t)x->nlocal;
  h->nslots = COLLIE_SHM_NSLOTS;
  h->slot_bytes = COLLIE_SHM_SLOT_BYTES;
  h->leader_pid = (int32_t)getpid();
  int32_t *ranks = (int32_t *)((char *)base + l.ranks_off);
  for (int i = 0; i < x->nlocal; i++) ranks[i] = group[i];
  atomic_store_explicit(&h->magic, COLLIE_SHM_MAGIC, memory_order_release);

  char key[64], val[32];
  collie__fmt(key, sizeof(key), "shm/seg/%d", cfg->rank);
  collie__fmt(val, sizeof(val), "%016" PRIx64, h->nonce);
  collie_result_t rc = collie__store_set(cfg->store, key, val, strlen(val), cfg->deadline_ns);
  if (rc != COLLIE_SUCCESS) {
    collie__err_prefix("shm: publishing segment %s", x->name);
    shm_unlink(x->name);
    return rc;
  }
  return COLLIE_SUCCESS;
}

/* Maps the segment if it is the leader's current one. Returns 1 when mapped
 * and checked, 0 to retry later (not there yet, stale, still being built),
 * or -1 with the error set. */
static int
shm_try_map(struct shm_xport *x, const struct collie__net_cfg *cfg, const int *group,
            uint64_t nonce, collie_result_t *rc)
{
  int fd = shm_open(x->name, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    if (errno == ENOENT) return 0;
    *rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "shm: cannot open segment /dev/shm%s", x->name);
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "shm: cannot stat segment /dev/shm%s", x->name);
    close(fd);
    return -1;
  }
  if ((size_t)st.st_size != x->bytes) {
    close(fd); /* not sized yet, or a stale segment of another shape */
    return 0;
  }
  void *base = mmap(NULL, x->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    *rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "shm: cannot map segment /dev/shm%s (%zu bytes)",
                            x->name, x->bytes);
    return -1;
  }
  struct collie__shm_header *h = base;
  if (atomic_load_explicit(&h->magic, memory_order_acquire) != COLLIE_SHM_MAGIC ||
      h->nonce != nonce) {
    munmap(base, x->bytes);
    return 0;
  }
  struct collie__shm_layout l = shm_layout(x->nlocal);
  const int32_t *ranks = (const int32_t *)((char *)base + l.ranks_off);
  int same = h->version == COLLIE_SHM_VERSION && h->nlocal == (uint32_t)x->nlocal &&
             h->comm_hash == cfg->comm_hash && h->seg_bytes == x->bytes &&
             h->nslots == COLLIE_SHM_NSLOTS && h->slot_bytes == COLLIE_SHM_SLOT_BYTES;
  for (int i = 0; same && i < x->nlocal; i++) same = ranks[i] == group[i];
  if (!same) {
    *rc = collie__err(COLLIE_INTERNAL_ERROR,
                      "shm: segment /dev/shm%s of rank %d does not match this rank's view (layout "
                      "version %u vs %u, %u vs %d local ranks, or another rank set)",
                      x->name, group[0], h->version, COLLIE_SHM_VERSION, h->nlocal, x->nlocal);
    munmap(base, x->bytes);
    return -1;
  }
  x->base = base;
  x->hdr = h;
  x->ctrl = (struct collie__shm_ctrl *)((char *)base + l.ctrl_off);
  return 1;
}

/* Non-leader: waits for the leader's nonce in the store, then maps the
 * segment carrying it, retrying until the setup deadline. */
static collie_result_t
shm_attach(struct shm_xport *x, const struct collie__net_cfg *cfg, const int *group)
{
  char key[64];
  collie__fmt(key, sizeof(key), "shm/seg/%d", group[0]);
  for (;;) {
    void *val = NULL;
    size_t len = 0;
    collie_result_t rc = collie__store_get(cfg->store, key, &val, &len, cfg->deadline_ns);
    if (rc == COLLIE_TIMEOUT)
      return collie__err(COLLIE_TIMEOUT,
                         "shm: rank %d (world rank %d, pid %d) never created the shared-memory "
                         "segment before the setup deadline (store key %s not set)",
                         group[0], cfg->peers[group[0]].world_rank, cfg->peers[group[0]].pid, key);
    if (rc != COLLIE_SUCCESS) {
      collie__err_prefix("shm: waiting for the segment of rank %d", group[0]);
      return rc;
    }
    char text[32];
    size_t n = len < sizeof(text) - 1 ? len : sizeof(text) - 1;
    memcpy(text, val, n);
    text[n] = '\0';
    free(val);
    uint64_t nonce = strtoull(text, NULL, 16);
    int got = shm_try_map(x, cfg, group, nonce, &rc);
    if (got < 0) return rc;
    if (got > 0) return COLLIE_SUCCESS;
    if (collie__now_ns() >= cfg->deadline_ns)
      return collie__err(COLLIE_TIMEOUT,
                         "shm: the segment /dev/shm%s announced by rank %d (world rank %d) did not "
                         "appear before the setup deadline",
                         x->name, group[0], cfg->peers[group[0]].world_rank);
    collie__sleep_ns(SHM_OPEN_POLL_NS);
  }
}

/* Marks this rank attached; the rank that completes the group unlinks the
 * name. Then waits until every local rank has attached. */
static collie_result_t
shm_join(struct shm_xport *x, const struct collie__net_cfg *cfg, const int *group)
{
  struct collie__shm_ctrl *mine = &x->ctrl[x->me];
  mine->pid = (int32_t)getpid();
  atomic_store_explicit(&mine->state, COLLIE_SHM_ALIVE, memory_order_release);
  uint32_t n = atomic_fetch_add_explicit(&x->hdr->attached, 1, memory_order_acq_rel) + 1;
  if (n == (uint32_t)x->nlocal) {
    shm_unlink(x->name);
    collie__futex_wake_all(shm_futex_word(&x->hdr->attached));
  }
  for (;;) {
    n = atomic_load_explicit(&x->hdr->attached, memory_order_acquire);
    if (n >= (uint32_t)x->nlocal) return COLLIE_SUCCESS;
    /* A rank that attached and gave up (its own deadline came first) means
     * the group cannot complete: fail now, naming those still missing. */
    int quit = -1;
    for (int i = 0; i < x->nlocal && quit < 0; i++) {
      uint32_t st = atomic_load_explicit(&x->ctrl[i].state, memory_order_acquire);
      if (st == COLLIE_SHM_ABORTED || st == COLLIE_SHM_CLOSED) quit = i;
    }
    int64_t now = collie__now_ns();
    if (quit >= 0 || now >= cfg->deadline_ns) {
      char who[512], why[128] = "";
      shm_list_unattached(x, cfg, group, who, sizeof(who));
      if (!who[0]) continue; /* the last one attached just now */
      if (quit >= 0)
        collie__fmt(why, sizeof(why), "; rank %d (world rank %d) gave up waiting", group[quit],
                    cfg->peers[group[quit]].world_rank);
      return collie__err(COLLIE_TIMEOUT,
                         "shm: %s never attached to the shared-memory segment before the setup "
                         "deadline (%u of %d local ranks did%s)",
                         who, n, x->nlocal, why);
    }
    int64_t until = now + SHM_ATTACH_POLL_NS;
    if (until > cfg->deadline_ns) until = cfg->deadline_ns;
    collie__futex_wait(shm_futex_word(&x->hdr->attached), n, until);
  }
}

static collie_result_t
shm_open_peers(const struct collie__net_cfg *cfg, const int *peers, int npeers,
               struct collie__xport **out)
{
  if (!out) return collie__err(COLLIE_INVALID_ARGUMENT, "shm: open: out is NULL");
  *out = NULL;
  if (!cfg || !cfg->peers || cfg->size <= 0 || cfg->rank < 0 || cfg->rank >= cfg->size)
    return collie__err(COLLIE_INVALID_ARGUMENT, "shm: open: bad configuration (rank %d of %d)",
                       cfg ? cfg->rank : -1, cfg ? cfg->size : -1);
  if (npeers < 0 || npeers >= cfg->size || (npeers > 0 && !peers))
    return collie__err(COLLIE_INVALID_ARGUMENT, "shm: open: bad peer list (%d peers of %d ranks)",
                       npeers, cfg->size);
  if (npeers > 0 && (!cfg->store || !cfg->token))
    return collie__err(COLLIE_INVALID_ARGUMENT, "shm: open: no store or job token to meet peers");
  for (int i = 0; i < npeers; i++) {
    if (peers[i] < 0 || peers[i] >= cfg->size || (i > 0 && peers[i] <= peers[i - 1]))
      return collie__err(
          COLLIE_INVALID_ARGUMENT,
          "shm: open: peer list must hold ascending comm ranks in [0, %d): entry %d is %d",
          cfg->size, i, peers[i]);
    if (peers[i] == cfg->rank)
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "shm: open: peer list entry %d is this rank (%d) itself", i, cfg->rank);
    if (!shm_can_connect(cfg, peers[i]))
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "shm: open: rank %d (world rank %d, host %s) does not share memory with "
                         "this rank (host %s)",
                         peers[i], cfg->peers[peers[i]].world_rank, cfg->peers[peers[i]].host,
                         cfg->peers[cfg->rank].host);
  }

  collie_result_t rc = COLLIE_SUCCESS;
  struct shm_xport *x = calloc(1, sizeof(*x));
  int *group = calloc((size_t)npeers + 1, sizeof(int));
  if (!x || !group) goto out_nomem;
  x->rank = cfg->rank;
  x->comm_size = cfg->size;
  x->nlocal = npeers + 1;
  x->nchans = npeers;
  x->chan_of_rank = malloc((size_t)cfg->size * sizeof(int));
  x->chans = calloc((size_t)npeers + 1, sizeof(struct shm_chan));
  if (!x->chan_of_rank || !x->chans) goto out_nomem;
  for (int i = 0; i < cfg->size; i++) x->chan_of_rank[i] = -1;
  /* The group: this rank merged into the ascending peer list. */
  int k = 0, placed = 0;
  for (int j = 0; j < npeers; j++) {
    if (!placed && cfg->rank < peers[j]) {
      x->me = k;
      group[k++] = cfg->rank;
      placed = 1;
    }
    group[k++] = peers[j];
  }
  if (!placed) {
    x->me = k;
    group[k++] = cfg->rank;
  }
  for (int i = 0; i < x->nchans; i++) x->chans[i].pidfd = -1;
  if (npeers == 0) {
    *out = (struct collie__xport *)(void *)x;
    free(group);
    return COLLIE_SUCCESS;
  }

  x->bytes = shm_layout(x->nlocal).bytes;
  collie__fmt(x->name, sizeof(x->name), "/collie-%016llx-%016llx-%d",
              (unsigned long long)collie__hash64(cfg->token, strlen(cfg->token), 0),
              (unsigned long long)cfg->comm_hash, group[0]);
  int leader = group[0] == cfg->rank;
  if (leader)
    rc = shm_create(x, cfg, group);
  else
    rc = shm_attach(x, cfg, group);
  if (rc != COLLIE_SUCCESS) goto out_free;
  rc = shm_join(x, cfg, group);
  if (rc != COLLIE_SUCCESS) goto out_leave;

  for (int i = 0, c = 0; i < x->nlocal; i++) {
    if (i == x->me) continue;
    struct shm_chan *ch = &x->chans[c];
    ch->rank = group[i];
    ch->world_rank = cfg->peers[group[i]].world_rank;
    ch->local = i;
    ch->pid = x->ctrl[i].pid;
    ch->out = shm_ring(x, x->me, i);
    ch->in = shm_ring(x, i, x->me);
    ch->pid_check = 1;
    ch->pidfd = shm_pidfd_open(ch->pid);
    if (ch->pidfd < 0 && errno == ESRCH &&
        atomic_load_explicit(&x->ctrl[i].state, memory_order_acquire) == COLLIE_SHM_ALIVE) {
      /* Attached and alive, yet no such pid here: another pid namespace
       * sharing /dev/shm. Rely on its state word alone. */
      ch->pid_check = 0;
    }
    x->chan_of_rank[group[i]] = c++;
  }
  x->events_seen = atomic_load_explicit(&x->hdr->events, memory_order_acquire);
  COLLIE_INFO("SHM", "segment %s: %d local ranks (this is index %d), %zu bytes, %u x %u-byte slots",
              x->name, x->nlocal, x->me, x->bytes, COLLIE_SHM_NSLOTS, COLLIE_SHM_SLOT_BYTES);
  free(group);
  *out = (struct collie__xport *)(void *)x;
  return COLLIE_SUCCESS;

out_leave:
  /* Peers that attached late must not wait on us: mark ourselves gone. */
  shm_leave(x, COLLIE_SHM_ABORTED, collie__err_msg());
  shm_unlink(x->name); /* ENOENT when it is gone already: fine */
  goto out_free;
out_nomem:
  rc = collie__err(COLLIE_SYSTEM_ERROR, "shm: open: out of memory for %d peers", npeers);
out_free:
  free(group);
  if (x) {
    x->nchans = 0; /* no pidfds opened yet */
    shm_free(x);
  }
  return rc;
}

const struct collie__xport_ops collie__shm_ops = {
    .name = "shm",
    .can_connect = shm_can_connect,
    .open = shm_open_peers,
    .post = shm_post,
    .progress = shm_progress,
    .wait = shm_wait,
    .abort = shm_abort,
    .close = shm_close,
};
