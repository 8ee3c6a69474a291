/*
 * shm.c - the data path of the shared-memory transport: post, progress, wait,
 * liveness checks, abort and close over a segment that shm_setup.c has
 * created and mapped. Kept apart from setup because this is the hot path:
 * everything here runs per message and must never block or allocate.
 *
 * Messages. Each ordered pair (i -> j) has a FIFO ring of fixed-size slots
 * (single producer, single consumer). A message is cut into chunks of at
 * most the segment's slot size (x->layout.slot_bytes: 64 KiB unless
 * COLLIE_SHM_BYTES made it smaller); each chunk's header repeats the message's slot
 * tag and total length, so the receiver checks both against its posted
 * receive before copying anything. A zero-length message is one empty
 * chunk. Both sides copy (sender into the slot, receiver out of it); there
 * is no allocation per message.
 *
 * Sleeping. Each rank has a 32-bit doorbell futex word. Whoever moves a ring
 * counter another rank may wait on bumps that rank's doorbell and calls
 * futex_wake only when the rank announced it sleeps (see shm_signal and
 * shm_wait for why no wake-up is lost). A rank that dies cannot ring,
 * so a rank with requests outstanding checks its peers at least every
 * SHM_CHECK_NS: their state word (closed, aborted) and whether their process
 * still exists (a pidfd, or kill/proc as a fallback).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/shm.h"
#include "transport/shm_int.h"
#include "transport/transport.h"
#include "util/error.h"
#include "util/util.h"

/* The longest sleep when the membarrier that makes it safe failed. */
/* A one-way single copy starts here even when the algorithm asks for it:
 * below, the slots' pipeline is faster (a 16-32 KiB broadcast or gather
 * root: 5-25 % slower as one copy), while an exchange gains from 16 KiB
 * (COLLIE_SHM_CMA_MIN; 2-rank allgather of 32 KiB 3.9 -> 2.5 us). */
#define SHM_ONEWAY_CMA_MIN ((size_t)64 << 10)
_Atomic uint64_t collie__shm_peer_writes;
_Atomic uint64_t collie__shm_device_reads;

/* The payload slot of chunk seq of ring r (when its payload is not inline). */
static char *
shm_payload(const struct collie__shm_xport *x, struct collie__shm_ring *r, uint64_t seq)
{
  return (char *)r + x->layout.payload_off +
         (size_t)(seq & (COLLIE_SHM_NSLOTS - 1)) * x->layout.slot_bytes;
}

static uint64_t
shm_chunk_off(const struct collie__shm_chunk *c)
{
  return c->flags & COLLIE_SHM_CHUNK_WHOLE ? 0 : c->u.part.off;
}

/* Whether the producer may write a chunk of `cells` cells at position tail
 * of ring ch->out, with a payload slot or not. Rereads the consumer's head
 * only when the last one read says no. */
static int
shm_room(struct collie__shm_chan *ch, uint64_t tail, uint64_t cells, int payload)
{
  for (int look = 0; look < 2; look++) {
    if (look) ch->out_head_seen = atomic_load_explicit(&ch->out->head, memory_order_acquire);
    uint64_t used = tail - ch->out_head_seen;
    if (used + cells <= COLLIE_SHM_NCELLS && (!payload || used < COLLIE_SHM_NSLOTS)) return 1;
  }
  return 0;
}

/* An inline payload of len bytes at position k of ring r, copied in (to_ring)
 * or out: the header's inline bytes, then continuation cells, wrapping at the
 * end of the array. A continuation cell carries payload around its seq word
 * and the producer stores 0 there: the consumer polls that word when the
 * cell is a header again, and payload bytes left in it could match the
 * position it waits for. Inlined with a constant to_ring, whole cells copy
 * with fixed sizes. */
static inline void
shm_inline_move(struct collie__shm_ring *r, uint64_t k, char *buf, size_t len, int to_ring,
                int whole)
{
  enum { LO = COLLIE_SHM_CELL_LO, HI = COLLIE_SHM_CELL_PAYLOAD - COLLIE_SHM_CELL_LO };
#define SHM_MOVE(cell, b, n) (to_ring ? memcpy((cell), (b), (n)) : memcpy((b), (cell), (n)))
  struct collie__shm_chunk *h = shm_chunk(r, k);
  size_t head = shm_head_bytes(whole), n = len < head ? len : head;
  SHM_MOVE(whole ? h->u.whole : h->u.part.inline_payload, buf, n);
  for (size_t o = n; o < len; o += COLLIE_SHM_CELL_PAYLOAD) {
    struct collie__shm_chunk *c = shm_chunk(r, ++k);
    size_t m = len - o;
    if (to_ring) atomic_store_explicit(&c->seq, 0, memory_order_relaxed);
    if (m >= COLLIE_SHM_CELL_PAYLOAD) {
      SHM_MOVE(c, buf + o, LO);
      SHM_MOVE(c->u.whole, buf + o + LO, HI);
    } else {
      SHM_MOVE(c, buf + o, m < LO ? m : LO);
      if (m > LO) SHM_MOVE(c->u.whole, buf + o + LO, m - LO);
    }
  }
#undef SHM_MOVE
}

/* ---- Wake-ups ----
 *
 * The lost wake-up race, and why it cannot happen here. A producer (P) that
 * makes a waiter's (W's) work possible runs, all seq_cst,
 *   publish tail/head; if W.sleeping: W.doorbell += 1; futex_wake(W.doorbell)
 * and W, having found nothing to do, runs in wait(), all seq_cst,
 *   sleeping = 1; s = doorbell;
 *   look at the rings again (shm_look); if nothing moved: futex_wait(doorbell, s)
 * 1. Store then load on both sides (the Dekker pattern): in the single total
 *    order of seq_cst operations, either W's second look comes after P's
 *    publish and sees it (W does not sleep), or P's load of sleeping comes
 *    after W's store and sees 1. (Fences would do the same, but
 *    ThreadSanitizer does not model them.)
 * 2. In the second case P bumps the doorbell: before W's snapshot s (then
 *    W's look, after the snapshot, sees the publish that preceded the bump)
 *    or after it (then futex_wait, which compares the word with s in the
 *    kernel, returns at once).
 * So a producer pays a locked store and one load of a line the waiter writes only
 * when it goes to sleep, and touches the doorbell only for a sleeper: an
 * awake peer's line is left alone (a bump per message used to move the
 * doorbell's cache line between the cores twice per message). Departures
 * and aborts ring unconditionally (shm_notify); the flat area (below) keeps
 * its own words and the same rule. */
void
collie__shm_notify(struct collie__shm_xport *x, int local)
{
  struct collie__shm_ctrl *c = &x->ctrl[local];
  atomic_fetch_add_explicit(&c->doorbell, 1, memory_order_seq_cst);
  uint32_t how = atomic_load_explicit(&c->sleeping, memory_order_seq_cst);
  if (how == COLLIE_SHM_SLEEP_POLL)
    collie__shm_wake_ring(x, local);
  else if (how)
    collie__futex_wake_all(collie__shm_futex_word(&c->doorbell));
}

/* After publishing a ring counter local may wait on: wakes it if asleep. */
static void
shm_signal(struct collie__shm_xport *x, int local)
{
  if (x->fence_free) {
    /* The sleeper's membarrier orders our publish before this load; only the
     * compiler must keep them in program order. */
    atomic_signal_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&x->ctrl[local].sleeping, memory_order_relaxed))
      collie__shm_notify(x, local);
  } else if (atomic_load_explicit(&x->ctrl[local].sleeping, memory_order_seq_cst)) {
    collie__shm_notify(x, local);
  }
}

/* Stores a ring counter a peer may wait on; shm_signal follows. */
static void
shm_publish(struct collie__shm_xport *x, _Atomic uint64_t *word, uint64_t v)
{
  /* Two stores, not one with a computed order: compilers take an order they
   * cannot see as seq_cst, a locked instruction. */
  if (x->fence_free)
    atomic_store_explicit(word, v, memory_order_release);
  else
    atomic_store_explicit(word, v, memory_order_seq_cst);
}

static void
shm_notify_all(struct collie__shm_xport *x)
{
  for (int i = 0; i < x->nchans; i++) collie__shm_notify(x, x->chans[i].local);
}

/* ---- Requests ---- */

static void
shm_complete(struct collie__shm_xport *x, struct collie__req *r, collie_result_t rc)
{
  r->rc = rc;
  r->done = 1;
  free(r->own);
  r->own = NULL;
  x->npending--;
  if (!r->is_send) x->nrecvs--;
}

/* Completes the head request of the FIFO first..last once all its bytes
 * have moved. */
static void
shm_finish_head(struct collie__shm_xport *x, struct collie__req **first, struct collie__req **last)
{
  struct collie__req *r = *first;
  if (r->off != r->len) return;
  *first = r->next;
  if (!*first) *last = NULL;
  shm_complete(x, r, COLLIE_SUCCESS);
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
collie_result_t
collie__shm_fail(struct collie__shm_xport *x, collie_result_t rc)
{
  if (!x->failed) {
    x->failed = rc;
    collie__fmt(x->errmsg, sizeof(x->errmsg), "%s", collie__err_msg());
    atomic_store_explicit(&x->stopped, 1, memory_order_release);
  }
  for (int i = 0; i < x->nchans; i++) {
    struct collie__shm_chan *ch = &x->chans[i];
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
  x->nrecvs = 0;
  collie__err_set_text(x->errmsg);
  return x->failed;
}

/* Whether r goes as a single copy: large enough, the peer proved it can
 * read our memory (checked once per channel, then remembered), and this
 * rank's core has other work meanwhile. A single copy is one pass over the
 * bytes instead of two, but it is the receiver's pass alone and runs below
 * memcpy speed (the kernel pins the sender's pages), while through slots the
 * sender's copy-in and the receiver's copy-out overlap on two cores. So it
 * wins when this rank is also receiving (exchanges: allgather, alltoall,
 * ring steps), or when ranks outnumber cores (no core is idle anyway), and
 * loses for a one-way stream such as a broadcast's. */
static int
shm_single_copy(struct collie__shm_xport *x, struct collie__shm_chan *ch,
                const struct collie__req *r, struct collie__shm_mem_ref *ref, int *mapped)
{
  *mapped = 0;
  if (!x->cma_min || r->len < x->cma_min || r->off != 0) return 0;
  /* One way, the slots let the two cores share a stream's copying (each
   * does one memcpy, overlapped), which beats the receiver's single slower
   * copy (2-rank broadcast of 2 MiB in 512 KiB pieces: 150 us through slots,
   * 305 us single copy), unless the send says otherwise: a whole call in one
   * message (broadcast 512 KiB: 23 us single copy, 30 through slots), a busy
   * sender or a receiver fed by many (scatter and gather roots, 10-30 %). */
  if (x->nrecvs == 0 && x->ncatch == 0 && x->nlocal <= x->cores &&
      (!r->direct || r->len < SHM_ONEWAY_CMA_MIN))
    return 0;
  if (!ch->cma) ch->cma = atomic_load_explicit(&ch->out->cma_ok, memory_order_acquire) != 0;
  /* From a collie_mem_alloc region the receiver copies out of its own
   * mapping at memcpy speed instead of through the kernel. (A one-way stream
   * still goes through the slots: two cores copying beat one, even so:
   * 2-rank broadcast of 64 MiB, 8.4 ms through slots, 19.6 ms mapped.) */
  if (ch->cma) *mapped = collie__shm_mem_find(r->buf, r->len, ref);
  return ch->cma;
}

/* A device send the receiver refused (it could not map the buffer): its
 * bytes, fetched to host memory of r's own, go in its place, next on the
 * ring, so the pair's order holds. */
static collie_result_t
shm_device_refused(struct collie__shm_xport *x, struct collie__shm_chan *ch, struct collie__req *r)
{
  void *host = malloc(r->len ? r->len : 1);
  if (!host)
    return collie__err(COLLIE_SYSTEM_ERROR,
                       "shm: out of memory for %zu bytes of a device send rank %d refused", r->len,
                       ch->rank);
  collie_result_t rc =
      x->dev_ops ? x->dev_ops->fetch(x->dev_ops->ctx, host, r->dev, r->len)
                 : collie__err(COLLIE_INTERNAL_ERROR, "shm: a device send without device ops");
  if (rc != COLLIE_SUCCESS) {
    free(host);
    return rc;
  }
  r->own = r->buf = host;
  r->devrec = 0;
  r->off = 0;
  return COLLIE_SUCCESS;
}

/* Copies queued sends into free slots of the peer's ring. Never blocks.
 *
 * Single copy. A send of at least cma_min bytes to a peer that can read our
 * memory takes one slot holding only its address; the receiver copies the
 * bytes straight from our buffer into its own (process_vm_readv) and then
 * consumes the slot, so the ring's head passing that slot is the
 * acknowledgement that completes the send (until then the buffer must stay,
 * as for any posted send). One copy instead of two halves the memory
 * traffic of large messages, the cost that dominates them. */
static void
shm_push(struct collie__shm_xport *x, struct collie__shm_chan *ch)
{
  uint64_t tail = ch->out_tail, cells = 1;
  struct collie__req *r;
  while ((r = ch->sendq) != NULL) {
    if (r->xseq) { /* a single copy in flight: done once the peer consumed its slot */
      ch->out_head_seen = atomic_load_explicit(&ch->out->head, memory_order_acquire);
      if (ch->out_head_seen < r->xseq) break;
      /* The peer wrote its verdict on a device message before it passed it
       * (the head's release); the chunk's cell is ours again only now. */
      int refused =
          r->devrec && (shm_chunk(ch->out, r->xseq - 1)->flags & COLLIE_SHM_CHUNK_REFUSED);
      r->xseq = 0;
      if (refused) {
        collie_result_t rc = shm_device_refused(x, ch, r);
        if (rc == COLLIE_SUCCESS) continue; /* goes again, as host bytes */
        ch->sendq = r->next;
        if (!ch->sendq) ch->sendq_last = NULL;
        shm_complete(x, r, rc);
        continue;
      }
      shm_finish_head(x, &ch->sendq, &ch->sendq_last);
      continue;
    }
    if (r->devrec) { /* a device message: its record in a payload slot */
      if (!shm_room(ch, tail, 1, 1)) break;
      struct collie__shm_chunk *c = shm_chunk(ch->out, tail);
      c->slot = r->slot;
      c->len = 0;
      c->flags = COLLIE_SHM_CHUNK_DEVICE;
      c->u.part.total = r->len;
      c->u.part.off = 0;
      c->u.part.addr = r->devrec;
      memcpy(shm_payload(x, ch->out, tail), r->buf, r->devrec);
      r->off = r->len;
      r->xseq = tail + 1; /* complete when head reaches it: the receiver has copied */
      atomic_store_explicit(&c->seq, ++tail, memory_order_release);
      continue;
    }
    if (!shm_room(ch, tail, 1, 0)) break;
    struct collie__shm_mem_ref ref;
    int mapped;
    if (shm_single_copy(x, ch, r, &ref, &mapped)) {
      struct collie__shm_chunk *c = shm_chunk(ch->out, tail);
      c->slot = r->slot;
      c->u.part.total = r->len;
      c->u.part.off = 0;
      c->len = 0;
      c->flags = COLLIE_SHM_CHUNK_CMA;
      c->u.part.addr = (uint64_t)(uintptr_t)r->buf;
      if (mapped) {
        uint64_t where[2] = {ref.id, ref.region_len};
        memcpy(c->u.part.inline_payload, where, sizeof(where));
        c->u.part.off = ref.off;
        c->flags |= COLLIE_SHM_CHUNK_MAPPED;
      }
      r->off = r->len;
      r->xseq = tail + 1; /* complete when head reaches it */
      atomic_store_explicit(&c->seq, ++tail, memory_order_release);
      continue;
    }
    size_t n = r->len - r->off;
    if (n > x->layout.slot_bytes) n = x->layout.slot_bytes;
    int payload = n > COLLIE_SHM_CELLS_INLINE, whole = !payload && n == r->len;
    cells = shm_cells(n, whole);
    if ((cells > 1 || payload) && !shm_room(ch, tail, cells, payload)) break;
    struct collie__shm_chunk *c = shm_chunk(ch->out, tail);
    c->slot = r->slot;
    c->len = (uint32_t)n;
    if (whole) {
      c->flags = COLLIE_SHM_CHUNK_WHOLE;
    } else {
      c->flags = 0;
      c->u.part.total = r->len;
      c->u.part.off = r->off;
    }
    if (payload)
      memcpy(shm_payload(x, ch->out, tail), (const char *)r->buf + r->off, n);
    else if (n) /* an empty message may have no buffer at all */
      shm_inline_move(ch->out, tail, (char *)r->buf + r->off, n, 1, whole);
    r->off += n;
    /* Publish each chunk at once so a polling receiver can copy it out while
     * we fill the next slot; the tail and the doorbell follow once, below. */
    atomic_store_explicit(&c->seq, tail + 1, memory_order_release);
    tail += cells;
    shm_finish_head(x, &ch->sendq, &ch->sendq_last);
  }
  if (tail != ch->out_tail) {
    /* The tail is for a waiter about to sleep (shm_look) and for the stray
     * check: receivers that poll read the slots' seq. */
    shm_publish(x, &ch->out->tail, tail);
    ch->out_tail = tail;
    shm_signal(x, ch->local);
    /* The next chunk's cells were last read by the peer: asking for them
     * now overlaps those transfers with whatever this rank does before its
     * next send, instead of stalling the next publish on them. As many as
     * the last chunk took (a loop repeats its sizes); only free cells:
     * taking one the peer is still to read would cost it a miss. */
    for (uint64_t k = tail; k < tail + cells && k - ch->out_head_seen < COLLIE_SHM_NCELLS; k++)
      collie__prefetch_write(shm_chunk(ch->out, k));
  }
}

static collie_result_t
shm_mismatch(const struct collie__shm_xport *x, const struct collie__shm_chan *ch,
             const struct collie__shm_chunk *c, const struct collie__req *r)
{
  char got[96], want[96];
  collie__slot_describe(c->slot, got, sizeof(got));
  collie__slot_describe(r->slot, want, sizeof(want));
  if (collie__slot_closing(c->slot) != collie__slot_closing(r->slot)) {
    char peer[64], me[32];
    snprintf(peer, sizeof(peer), "rank %d (world rank %d)", ch->rank, ch->world_rank);
    snprintf(me, sizeof(me), "rank %d", x->rank);
    return collie__slot_closing(c->slot) ? collie__slot_closed_err(peer, "this rank", want)
                                         : collie__slot_closed_err(me, peer, got);
  }
  return collie__err(
      COLLIE_INVALID_USAGE,
      "collectives mismatched across ranks: rank %d (world rank %d) sent %s (%" PRIu64
      " bytes), this rank expected %s (%zu bytes)",
      ch->rank, ch->world_rank, got, shm_chunk_total(c), want, r->len);
}

/* Moves len bytes between local and the peer's memory at remote, straight
 * (process_vm_readv, or process_vm_writev when write is set). The kernel may
 * move less than asked in one call; the rest follows. */
static collie_result_t
shm_peer_copy(const struct collie__shm_chan *ch, void *local, uint64_t remote, size_t len,
              int write)
{
  size_t done = 0;
  while (done < len) {
    struct iovec l = {.iov_base = (char *)local + done, .iov_len = len - done};
    struct iovec r = {.iov_base = (void *)(uintptr_t)(remote + done), .iov_len = len - done};
    ssize_t n = write ? process_vm_writev(ch->pid, &l, 1, &r, 1, 0)
                      : process_vm_readv(ch->pid, &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return collie__err_errno(COLLIE_REMOTE_ERROR,
                               "shm: %s %zu bytes %s rank %d's (world rank %d, pid %d) "
                               "memory directly (%s) after %zu",
                               write ? "writing" : "reading", len, write ? "into" : "of", ch->rank,
                               ch->world_rank, ch->pid,
                               write ? "process_vm_writev" : "process_vm_readv", done);
    done += (size_t)n;
  }
  return COLLIE_SUCCESS;
}

/* Reads a single-copy message (its length already checked against r) from
 * the sender's memory straight into r->buf: out of our mapping of the
 * sender's region when it names one we can map, else through the kernel. */
static collie_result_t
shm_read_peer(struct collie__shm_chan *ch, const struct collie__shm_chunk *c, struct collie__req *r)
{
  if (c->flags & COLLIE_SHM_CHUNK_MAPPED) {
    uint64_t where[2];
    memcpy(where, c->u.part.inline_payload, sizeof(where));
    const char *base = collie__shm_mem_map(ch, where[0], (size_t)where[1]);
    if (base && c->u.part.off <= where[1] && r->len <= where[1] - c->u.part.off) {
      collie__copy(r->buf, base + c->u.part.off, r->len);
      atomic_fetch_add_explicit(&collie__shm_mem_mapped_reads, 1, memory_order_relaxed);
      return COLLIE_SUCCESS;
    }
  }
  return shm_peer_copy(ch, r->buf, c->u.part.addr, r->len, 0);
}

/* A single-copy or device message is read out of the sender's own buffer,
 * which stays the sender's only while its send is pending: a sender that
 * gave up (aborted on a timeout or error of its own, or closed, and so
 * returned the buffer to its caller) may have reused or freed it. Checked
 * before the copy and after it (a copy that raced the departure may be
 * torn): a sender aborts before its failed send returns, so one still
 * alive after the copy held its buffer throughout. One that died did not
 * give it back: what it left is the message, as for any chunk it
 * published (shm_check_peers). One load: these are large messages, but
 * the check runs for each. */
static collie_result_t
shm_sender_holds(struct collie__shm_xport *x, struct collie__shm_chan *ch,
                 const struct collie__req *r)
{
  uint32_t st = atomic_load_explicit(&x->ctrl[ch->local].state, memory_order_acquire);
  if (st == COLLIE_SHM_ALIVE) return COLLIE_SUCCESS;
  struct collie__shm_departure d = {NULL, NULL, 0};
  collie__shm_departure_note(&d, ch, st);
  const char *how = "";
  char what[160], why[COLLIE_SHM_REASON_LEN + 16];
  collie__shm_departure_verdict(x, &d, &how, why, sizeof(why));
  shm_describe_req(r, what, sizeof(what));
  return collie__err(
      COLLIE_REMOTE_ERROR,
      "shm: rank %d (world rank %d, pid %d) %s before this rank had copied the message for its %s "
      "out of its memory%s",
      ch->rank, ch->world_rank, ch->pid, how, what, why);
}

/* Copies a device message (COLLIE_SHM_CHUNK_DEVICE at ring position k) into
 * r: into r->dev when the receive has device memory, else into r->buf,
 * through the net's device ops. *refused: the buffer could not be mapped;
 * the chunk says so to the sender, which sends the bytes next, and this
 * rank takes no more device messages. */
static collie_result_t
shm_read_device(struct collie__shm_xport *x, struct collie__shm_chan *ch,
                struct collie__shm_chunk *c, struct collie__req *r, uint64_t k, int *refused)
{
  *refused = 0;
  size_t reclen = (size_t)c->u.part.addr;
  if (r->off != 0 || !reclen || reclen > COLLIE_NET_DEV_REC_MAX || reclen > x->layout.slot_bytes)
    return collie__err(COLLIE_INTERNAL_ERROR,
                       "shm: corrupt device message from rank %d (world rank %d): record of %zu "
                       "bytes at offset %zu",
                       ch->rank, ch->world_rank, reclen, r->off);
  if (!x->dev_ops) /* it told its peers it takes them only after it had ops */
    return collie__err(COLLIE_INTERNAL_ERROR,
                       "shm: a device message from rank %d, but this rank has no device ops",
                       ch->rank);
  void *dst = r->dev ? r->dev : r->buf;
  collie_result_t rc = shm_sender_holds(x, ch, r);
  if (rc == COLLIE_SUCCESS)
    rc =
        x->dev_ops->read(x->dev_ops->ctx, ch->rank, shm_payload(x, ch->in, k), reclen, dst, r->len);
  if (rc == COLLIE_UNSUPPORTED) {
    atomic_store_explicit(&x->ctrl[x->me].dev_rx, 0, memory_order_release);
    c->flags |= COLLIE_SHM_CHUNK_REFUSED; /* published by the head that passes it */
    *refused = 1;
    return COLLIE_SUCCESS;
  }
  if (rc == COLLIE_SUCCESS) rc = shm_sender_holds(x, ch, r);
  if (rc == COLLIE_SUCCESS) {
    r->on_dev = r->dev != NULL;
    atomic_fetch_add_explicit(&collie__shm_device_reads, 1, memory_order_relaxed);
  }
  return rc;
}

/* The write half of single copy (transport.h: write_peer): this rank's core
 * copies into a peer's buffer whose address the peer handed over. Allowed
 * where this rank may read the peer's memory (checked at open: the same
 * permission), never when COLLIE_SHM_CMA_MIN=0. */
static collie_result_t
shm_write_peer(struct collie__xport *xp, int peer, uint64_t addr, const void *buf, size_t len)
{
  struct collie__shm_xport *x = shm_of(xp);
  if (peer < 0 || peer >= x->comm_size || x->chan_of_rank[peer] < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT, "shm: rank %d is not a shm peer of rank %d", peer,
                       x->rank);
  const struct collie__shm_chan *ch = &x->chans[x->chan_of_rank[peer]];
  if (!x->cma_min || !atomic_load_explicit(&ch->in->cma_ok, memory_order_acquire))
    return collie__err(
        COLLIE_UNSUPPORTED, "shm: rank %d may not write rank %d's memory directly (%s)", x->rank,
        ch->rank, x->cma_min ? "process_vm_readv was refused at open" : "COLLIE_SHM_CMA_MIN=0");
  collie_result_t rc = shm_peer_copy(ch, (void *)(uintptr_t)buf, addr, len, 1);
  if (rc == COLLIE_SUCCESS)
    atomic_fetch_add_explicit(&collie__shm_peer_writes, 1, memory_order_relaxed);
  return rc;
}

/* Copies arrived chunks into the posted receives, in order. Never blocks.
 * A chunk whose slot or length does not match the head receive fails the
 * transport and is left in the ring, uncopied. */
/* Consumed chunks of ch's ring the producer has not been told of yet. The
 * head is published lazily: at once after a chunk with a payload slot or a
 * single copy (the producer has only 8 of those, and a single copy's sender
 * waits for the head to pass it), after SHM_HEAD_LAG header-only chunks, and
 * whenever this rank waits for anything (shm_progress_locked), so a producer
 * never waits on room this rank holds while it waits too. Between calls a
 * producer sees at most SHM_HEAD_LAG - 1 fewer free headers than there are.
 * Publishing every small message moved the head's line between the cores
 * each time, as the producer reads it to know its room. */
#define SHM_HEAD_LAG (COLLIE_SHM_NCELLS / 8)

static void
shm_publish_head(struct collie__shm_xport *x, struct collie__shm_chan *ch)
{
  shm_publish(x, &ch->in->head, ch->in_head);
  ch->in_pub = ch->in_head;
  shm_signal(x, ch->local);
}

/* Puts s, the sink's request for the message at the head of ch, in front
 * of ch's posted receives, counted as a posted one (transport.h: the sink). */
static void
shm_adopt(struct collie__shm_xport *x, struct collie__shm_chan *ch, struct collie__req *s)
{
  s->done = 0;
  s->rc = COLLIE_SUCCESS;
  s->peer = ch->rank;
  s->is_send = 0;
  s->off = 0;
  s->xseq = 0;
  s->next = ch->recvq;
  ch->recvq = s;
  if (!ch->recvq_last) ch->recvq_last = s;
  x->npending++;
  x->nrecvs++;
  ch->stalled = 0;
}

/* Whether this rank waits for P2P messages of ch's peer: caught, and the
 * sink did not say no more (a receive that took its message leaves the
 * peer caught but sated: its closing is no failure then). */
static int
shm_wants(const struct collie__shm_chan *ch)
{
  return ch->catching && !ch->sated;
}

/* The message at the head of ch stays there until more arrives (or the
 * sink is asked again): wait() may sleep on it instead of seeing it as new
 * each time (shm_look). */
static void
shm_stall(struct collie__shm_chan *ch)
{
  if (ch->stalled) return;
  ch->stalled = 1;
  ch->stall_tail = atomic_load_explicit(&ch->in->tail, memory_order_acquire);
}

/* The head chunk c, the first of a P2P message, is not for ch's head receive
 * r (NULL: none posted): asks the sink for a request to take it into.
 * Returns it (already at the head), or NULL when the sink said not now. */
static struct collie__req *
shm_sink(struct collie__shm_xport *x, struct collie__shm_chan *ch,
         const struct collie__shm_chunk *c, struct collie__req *r)
{
  int more = 1, replace = 0;
  struct collie__req *s = x->sink->take(x->sink->ctx, ch->rank, c->slot, (size_t)shm_chunk_total(c),
                                        r, &more, &replace);
  if (s && !more) ch->sated = 1;
  if (!s) {
    shm_stall(ch);
    return NULL;
  }
  shm_adopt(x, ch, s);
  if (replace && r) { /* the net's receive r gives way to s (it has not started) */
    s->next = r->next;
    if (ch->recvq_last == r) ch->recvq_last = s;
    x->npending--;
    x->nrecvs--;
  }
  return s;
}

static collie_result_t
shm_pull(struct collie__shm_xport *x, struct collie__shm_chan *ch)
{
  uint64_t head = ch->in_head, start = head, cells = 1;
  collie_result_t rc = COLLIE_SUCCESS;
  struct collie__req *r;
  ch->stalled = 0; /* this look decides again */
  while ((r = ch->recvq) != NULL || (ch->catching && !ch->sated)) {
    const struct collie__shm_chunk *c = shm_chunk(ch->in, head);
    if (atomic_load_explicit(&c->seq, memory_order_acquire) != head + 1) break;
    if (!r || c->slot != r->slot || shm_chunk_total(c) != r->len) {
      /* A point-to-point message nobody posted for goes to the net's
       * matching; anything else is a mismatch. */
      if (x->sink && collie__slot_is_p2p(c->slot) && (!r || r->off == 0)) {
        if ((r = shm_sink(x, ch, c, r)) == NULL) break;
      } else if (!r) {
        shm_stall(ch); /* a collective's message, which this rank has not reached */
        break;
      } else {
        rc = shm_mismatch(x, ch, c, r);
        break;
      }
    }
    if (c->flags & COLLIE_SHM_CHUNK_DEVICE) {
      int refused = 0;
      if ((rc = shm_read_device(x, ch, (struct collie__shm_chunk *)c, r, head, &refused)) !=
          COLLIE_SUCCESS)
        break;
      ch->in_head = ++head;
      shm_publish_head(x, ch);
      if (refused) continue; /* the bytes follow, for the same receive */
      r->off = r->len;
      shm_finish_head(x, &ch->recvq, &ch->recvq_last);
      continue;
    }
    if (c->flags & COLLIE_SHM_CHUNK_CMA) {
      if (r->off != 0 || (rc = shm_sender_holds(x, ch, r)) != COLLIE_SUCCESS ||
          (rc = shm_read_peer(ch, c, r)) != COLLIE_SUCCESS ||
          (rc = shm_sender_holds(x, ch, r)) != COLLIE_SUCCESS) {
        if (rc == COLLIE_SUCCESS)
          rc = collie__err(COLLIE_INTERNAL_ERROR,
                           "shm: single-copy chunk from rank %d in the middle of a message",
                           ch->rank);
        break;
      }
      r->off = r->len;
      ch->in_head = ++head;
      shm_publish_head(x, ch);
      shm_finish_head(x, &ch->recvq, &ch->recvq_last);
      continue;
    }
    if (shm_chunk_off(c) != r->off || c->len > r->len - r->off || c->len > x->layout.slot_bytes ||
        (c->len == 0 && r->len != 0)) {
      rc = collie__err(COLLIE_INTERNAL_ERROR,
                       "shm: corrupt chunk from rank %d (world rank %d): offset %" PRIu64
                       " length %u, expected offset %zu of %zu bytes",
                       ch->rank, ch->world_rank, shm_chunk_off(c), c->len, r->off, r->len);
      break;
    }
    int payload = c->len > COLLIE_SHM_CELLS_INLINE;
    if (payload)
      collie__copy_part((char *)r->buf + r->off, shm_payload(x, ch->in, head), c->len, r->len);
    else if (c->len)
      shm_inline_move(ch->in, head, (char *)r->buf + r->off, c->len, 0,
                      (c->flags & COLLIE_SHM_CHUNK_WHOLE) != 0);
    r->off += c->len;
    cells = shm_chunk_cells(c);
    head += cells;
    ch->in_head = head;
    if (payload) shm_publish_head(x, ch);
    shm_finish_head(x, &ch->recvq, &ch->recvq_last);
  }
  if (head != start) {
    if (head - ch->in_pub >= SHM_HEAD_LAG) shm_publish_head(x, ch);
    /* A sender running ahead may have filled the next chunk: fetch its
     * lines (as many as the last chunk took) while this rank returns to its
     * caller; a continuation cell fetched only when copied cost a 20-byte
     * broadcast ~0.1 us over a 16-byte one. */
    for (uint64_t k = head; k < head + cells; k++) __builtin_prefetch(shm_chunk(ch->in, k));
  }
  return rc;
}

/* ---- Liveness ---- */

/* Whether the peer's process has exited (a zombie counts). Never blocks. */
int
collie__shm_peer_exited(struct collie__shm_chan *ch)
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
  char buf[512];
  int gone;
  const char *f = collie__proc_stat(ch->pid, buf, sizeof(buf), &gone);
  return gone || (f && (f[0] == 'Z' || f[0] == 'X'));
}

void
collie__shm_departure_note(struct collie__shm_departure *d, struct collie__shm_chan *ch,
                           uint32_t st)
{
  if (st == COLLIE_SHM_ALIVE) {
    if (!d->gone) d->gone = ch;
  } else if (!d->left) {
    d->left = ch;
    d->left_state = st;
  }
}

/* The channel to report (NULL: nobody left), how it left, and an aborting
 * peer's own reason (", after: ...") into why. */
struct collie__shm_chan *
collie__shm_departure_verdict(struct collie__shm_xport *x, const struct collie__shm_departure *d,
                              const char **how, char *why, size_t whylen)
{
  struct collie__shm_chan *ch = d->gone ? d->gone : d->left;
  why[0] = '\0';
  if (!ch) return NULL;
  *how = d->gone                              ? "died"
         : d->left_state == COLLIE_SHM_CLOSED ? "closed its communicator"
                                              : "aborted its communicator";
  if (!d->gone && d->left_state == COLLIE_SHM_ABORTED) {
    /* Written by the peer before its state (which we read with acquire). */
    const char *r = x->ctrl[ch->local].reason;
    size_t n = strnlen(r, COLLIE_SHM_REASON_LEN - 1);
    if (n) collie__fmt(why, whylen, ", after: %.*s", (int)n, r);
  }
  return ch;
}

/* Fails the transport if a peer we wait on has died, closed or aborted and
 * what it left in the rings does not finish our requests with it. */
static collie_result_t
shm_check_peers(struct collie__shm_xport *x)
{
  struct collie__shm_departure d = {NULL, NULL, 0};
  for (int i = 0; i < x->nchans; i++) {
    struct collie__shm_chan *ch = &x->chans[i];
    if (!ch->sendq && !ch->recvq && !shm_wants(ch)) continue;
    int exited = collie__shm_peer_exited(ch);
    uint32_t st = atomic_load_explicit(&x->ctrl[ch->local].state, memory_order_acquire);
    if (!exited && st == COLLIE_SHM_ALIVE) continue;
    /* Whatever the peer published before leaving is valid: take it first. */
    shm_push(x, ch);
    collie_result_t rc = shm_pull(x, ch);
    if (rc != COLLIE_SUCCESS) return collie__shm_fail(x, rc);
    if (!ch->sendq && !ch->recvq && !shm_wants(ch)) continue;
    /* A peer that closed or aborted and then exited left on purpose: say so. */
    collie__shm_departure_note(&d, ch, st);
  }
  const char *how = "";
  char what[160], why[COLLIE_SHM_REASON_LEN + 16];
  struct collie__shm_chan *ch = collie__shm_departure_verdict(x, &d, &how, why, sizeof(why));
  if (!ch) return COLLIE_SUCCESS;
  if (ch->recvq || ch->sendq)
    shm_describe_req(ch->recvq ? ch->recvq : ch->sendq, what, sizeof(what));
  else
    collie__fmt(what, sizeof(what), "a receive of send/recv messages");
  collie__err(COLLIE_REMOTE_ERROR, "shm: rank %d (world rank %d, pid %d) %s during %s %s it%s",
              ch->rank, ch->world_rank, ch->pid, how, what, ch->recvq ? "from" : "to", why);
  return collie__shm_fail(x, COLLIE_REMOTE_ERROR);
}

/* ---- The ops ---- */

static collie_result_t
shm_post(struct collie__xport *xp, struct collie__req *r)
{
  struct collie__shm_xport *x = shm_of(xp);
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
  r->xseq = 0;
  r->next = NULL;
  shm_lock(x);
  if (x->failed) {
    r->done = 1;
    r->rc = x->failed;
    collie__err_set_text(x->errmsg);
    shm_unlock(x);
    return r->rc;
  }
  struct collie__shm_chan *ch = &x->chans[x->chan_of_rank[r->peer]];
  struct collie__req **first = r->is_send ? &ch->sendq : &ch->recvq;
  struct collie__req **last = r->is_send ? &ch->sendq_last : &ch->recvq_last;
  if (*last)
    (*last)->next = r;
  else
    *first = r;
  *last = r;
  x->npending++;
  /* A send moves at once, so that a peer can take it while this rank goes on
   * with work of its own (a root copying its own block) before it waits;
   * except an undirected one that may go as a single copy, which waits for
   * progress: whether it does depends on receives posted after it (an
   * exchange posts both before it waits). */
  collie_result_t rc = COLLIE_SUCCESS;
  if (!r->is_send) {
    x->nrecvs++;
    /* A small message may be there already (a root running ahead): taking
     * it now spares the wait its progress round. Not a large one: a send
     * posted next goes as a single copy only while a receive is pending
     * (an exchange), and not while a send waits for that decision. */
    if (ch->recvq == r && (!x->cma_min || r->len < x->cma_min) && x->npending == x->nrecvs &&
        (rc = shm_pull(x, ch)) != COLLIE_SUCCESS)
      rc = collie__shm_fail(x, rc);
  } else if (r->direct || !x->cma_min || r->len < x->cma_min) {
    shm_push(x, ch);
  }
  shm_unlock(x);
  return rc;
}

static collie_result_t
shm_progress_locked(struct collie__shm_xport *x, int *pending)
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
  if (x->npending == 0 && x->ncatch == 0) {
    *pending = 0;
    return COLLIE_SUCCESS;
  }
  for (int i = 0; i < x->nchans; i++) {
    struct collie__shm_chan *ch = &x->chans[i];
    if (ch->sendq) shm_push(x, ch);
    if (ch->recvq || ch->catching) {
      collie_result_t rc = shm_pull(x, ch);
      if (rc != COLLIE_SUCCESS) {
        *pending = 0;
        return collie__shm_fail(x, rc);
      }
    }
  }
  if (x->npending > 0 || x->ncatch > 0) {
    /* This rank is about to wait: tell producers of all the room it holds
     * (shm_publish_head). */
    for (int i = 0; i < x->nchans; i++)
      if (x->chans[i].in_pub != x->chans[i].in_head) shm_publish_head(x, &x->chans[i]);
    /* A departure rings every doorbell and bumps events: check at once. A
     * death rings nothing: check on a timer, read from the coarse clock (a
     * 50 ms timer needs no better, and this runs on every poll of a wait:
     * the precise clock was a tenth of both ranks' time in a small
     * broadcast loop). */
    uint32_t ev = atomic_load_explicit(&x->hdr->events, memory_order_acquire);
    int64_t now = collie__now_coarse_ns();
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
  *pending = x->npending + x->ncatch;
  return COLLIE_SUCCESS;
}

static collie_result_t
shm_progress(struct collie__xport *xp, int *pending)
{
  struct collie__shm_xport *x = shm_of(xp);
  shm_lock(x);
  collie_result_t rc = shm_progress_locked(x, pending);
  shm_unlock(x);
  return rc;
}

/* Whether anything a waiter could act on moved since the last progress():
 * a ring of a posted request (data in, space freed, a single copy taken) or
 * a departure. Part of the wake-up protocol (see shm_signal). */
static int
shm_look(struct collie__shm_xport *x)
{
  if (atomic_load_explicit(&x->hdr->events, memory_order_seq_cst) != x->events_seen) return 1;
  for (int i = 0; i < x->nchans; i++) {
    struct collie__shm_chan *ch = &x->chans[i];
    if ((ch->recvq || (ch->catching && !ch->sated)) &&
        atomic_load_explicit(&ch->in->tail, memory_order_seq_cst) !=
            (ch->stalled ? ch->stall_tail : ch->in_head))
      return 1;
    if (ch->sendq &&
        atomic_load_explicit(&ch->out->head, memory_order_seq_cst) != ch->out_head_seen)
      return 1;
  }
  return 0;
}

int
collie__shm_look_locked(struct collie__shm_xport *x)
{
  shm_lock(x);
  int moved = shm_look(x);
  shm_unlock(x);
  return moved;
}

static void
shm_wait(struct collie__xport *xp, int64_t until_ns)
{
  struct collie__shm_xport *x = shm_of(xp);
  if (atomic_load_explicit(&x->stopped, memory_order_acquire) || !x->ctrl) return;
  int64_t now = collie__now_ns();
  int64_t limit = now + SHM_CHECK_NS; /* a dead peer rings no doorbell */
  if (until_ns < limit) limit = until_ns;
  if (limit <= now) return;
  struct collie__shm_ctrl *c = &x->ctrl[x->me];
  atomic_store_explicit(&c->sleeping, COLLIE_SHM_SLEEP_FUTEX, memory_order_seq_cst);
  uint32_t s = atomic_load_explicit(&c->doorbell, memory_order_seq_cst);
  /* Fence-free producers did not fence between their publish and their look
   * at `sleeping`: this fences them. Should it fail, sleep in short turns. */
  if (x->fence_free && collie__membarrier_all() != 0 && limit > now + SHM_UNFENCED_SLEEP_NS)
    limit = now + SHM_UNFENCED_SLEEP_NS;
  shm_lock(x);
  int moved = shm_look(x);
  shm_unlock(x);
  if (!moved) collie__futex_wait(collie__shm_futex_word(&c->doorbell), s, limit);
  atomic_store_explicit(&c->sleeping, 0, memory_order_relaxed);
}

/* Announces that this rank left (state CLOSED or ABORTED, with an optional
 * reason, NUL-terminated, copied) and wakes everyone. Non-blocking; only
 * the first call of either kind counts; a no-op before the segment is
 * mapped. Used by abort(), close() and a failed open(). */
void
collie__shm_leave(struct collie__shm_xport *x, uint32_t state, const char *reason)
{
  if (!x->ctrl || atomic_exchange_explicit(&x->left, 1, memory_order_acq_rel)) return;
  if (reason && reason[0])
    collie__fmt(x->ctrl[x->me].reason, sizeof(x->ctrl[x->me].reason), "%s", reason);
  atomic_store_explicit(&x->ctrl[x->me].state, state, memory_order_release);
  atomic_fetch_add_explicit(&x->hdr->events, 1, memory_order_seq_cst);
  shm_notify_all(x);
  collie__shm_notify(x, x->me); /* a thread of ours asleep in wait() gets up too */
}

/* Forgets every posted request without touching it: after a timeout at the
 * net level the caller has already returned and its requests are gone, so
 * abort() and close() must not write to them. */
static void
shm_drop_requests(struct collie__shm_xport *x)
{
  for (int i = 0; i < x->nchans; i++) {
    struct collie__shm_chan *ch = &x->chans[i];
    ch->sendq = ch->sendq_last = ch->recvq = ch->recvq_last = NULL;
  }
  x->npending = 0;
  x->nrecvs = 0;
}

static void
shm_abort(struct collie__xport *xp)
{
  struct collie__shm_xport *x = shm_of(xp);
  shm_lock(x);
  /* Our own failure, if any, tells peers why we abort. */
  collie__shm_leave(x, COLLIE_SHM_ABORTED, x->failed ? x->errmsg : NULL);
  if (!x->failed) {
    x->failed = COLLIE_INVALID_USAGE;
    collie__fmt(x->errmsg, sizeof(x->errmsg), "shm: the communicator was aborted on this rank");
    atomic_store_explicit(&x->stopped, 1, memory_order_release);
  }
  shm_drop_requests(x);
  shm_unlock(x);
}

/* Before abort, on a failure of this rank's own: peers read why in our
 * control line (collie__shm_leave keeps the first reason given). */
static void
shm_tell(struct collie__xport *xp, const char *why)
{
  struct collie__shm_xport *x = shm_of(xp);
  shm_lock(x);
  collie__shm_leave(x, COLLIE_SHM_ABORTED, why);
  shm_unlock(x);
}

/* Unmaps the segment, closes the pidfds of the first x->nchans channels and
 * frees x. Never touches posted requests; does not announce anything
 * (collie__shm_leave does). Used by close() and a failed open(). */
void
collie__shm_free(struct collie__shm_xport *x)
{
  if (x->base) munmap(x->base, x->bytes);
  for (int i = 0; i < x->nchans; i++) {
    collie__shm_mem_unmap_all(&x->chans[i]);
    if (x->chans[i].pidfd >= 0) close(x->chans[i].pidfd);
  }
  collie__shm_wake_close(x);
  free(x->chans);
  free(x->chan_of_rank);
  free(x);
}

static void
shm_close(struct collie__xport *xp)
{
  struct collie__shm_xport *x = shm_of(xp);
  if (!x) return;
  collie__shm_leave(x, COLLIE_SHM_CLOSED, NULL);
  shm_drop_requests(x);
  collie__shm_free(x);
}

/* ---- Ranks sharing a CPU ----
 *
 * Each rank says in its ctrl line which CPU it ran on when it last looked,
 * storing only a change (the line stays shared: producers read the same
 * line's sleeping word). A waiter that finds a peer on its own CPU stops
 * spinning: the peer cannot run until it yields. The peer's CPU may be
 * stale (it moved and has not looked since); the waiter then only yields
 * sooner, which on a CPU of its own returns at once. */
int
collie__shm_crowded(struct collie__xport *xp)
{
  struct collie__shm_xport *x = shm_of(xp);
  if (!x->ctrl) return 0;
  int cpu = sched_getcpu();
  if (cpu < 0) return 0;
  if (cpu != x->my_cpu) {
    x->my_cpu = cpu;
    atomic_store_explicit(&x->ctrl[x->me].cpu, cpu, memory_order_relaxed);
  }
  for (int i = 0; i < x->nlocal; i++)
    if (i != x->me && atomic_load_explicit(&x->ctrl[i].cpu, memory_order_relaxed) == cpu) return 1;
  return 0;
}

/* Device messages: this rank takes them from now on (ops first, then the
 * word its peers read). */
static void
shm_set_device(struct collie__xport *xp, const struct collie__net_dev_ops *ops,
               const unsigned char uuid[16])
{
  struct collie__shm_xport *x = shm_of(xp);
  struct collie__shm_ctrl *mine = &x->ctrl[x->me];
  if (atomic_load_explicit(&mine->dev_rx, memory_order_relaxed)) return; /* once */
  shm_lock(x);
  x->dev_ops = ops;
  shm_unlock(x);
  memcpy(mine->dev_uuid, uuid, sizeof(mine->dev_uuid));
  atomic_store_explicit(&mine->dev_rx, 1, memory_order_release);
}

static int
shm_device_peer(struct collie__xport *xp, int peer, const unsigned char uuid[16])
{
  struct collie__shm_xport *x = shm_of(xp);
  if (peer < 0 || peer >= x->comm_size || x->chan_of_rank[peer] < 0) return 0;
  const struct collie__shm_ctrl *c = &x->ctrl[x->chans[x->chan_of_rank[peer]].local];
  return atomic_load_explicit(&c->dev_rx, memory_order_acquire) &&
         memcmp(c->dev_uuid, uuid, sizeof(c->dev_uuid)) == 0;
}

static void
shm_catch_p2p(struct collie__xport *xp, int peer, int on)
{
  struct collie__shm_xport *x = shm_of(xp);
  if (peer < 0 || peer >= x->comm_size || x->chan_of_rank[peer] < 0) return;
  shm_lock(x);
  struct collie__shm_chan *ch = &x->chans[x->chan_of_rank[peer]];
  if (ch->catching != !!on) x->ncatch += on ? 1 : -1;
  ch->catching = !!on;
  ch->sated = 0;
  ch->stalled = 0;
  shm_unlock(x);
}

static int
shm_peek(struct collie__xport *xp, int peer, uint64_t *slot, size_t *len)
{
  struct collie__shm_xport *x = shm_of(xp);
  if (peer < 0 || peer >= x->comm_size || x->chan_of_rank[peer] < 0) return 0;
  struct collie__shm_chan *ch = &x->chans[x->chan_of_rank[peer]];
  if (ch->recvq) return 0; /* the next chunk belongs to a posted receive */
  const struct collie__shm_chunk *c = shm_chunk(ch->in, ch->in_head);
  if (atomic_load_explicit(&c->seq, memory_order_acquire) != ch->in_head + 1) return 0;
  *slot = c->slot;
  *len = (size_t)shm_chunk_total(c);
  return 1;
}

const struct collie__xport_ops collie__shm_ops = {
    .name = "shm",
    /* A step is a flag handoff (~1 us busy; ~3 us oversubscribed, where waits
     * yield the core to the peer before they sleep); bytes go through a slot
     * (two copies at ~10 GB/s each). */
    .cost = {.alpha_us = 1.0, .alpha_oversub_us = 3.0, .beta_us = 2.0e-4},
    .can_connect = collie__shm_can_connect,
    .open = collie__shm_open,
    .post = shm_post,
    .progress = shm_progress,
    .wait = shm_wait,
    .abort = shm_abort,
    .close = shm_close,
    .tell = shm_tell,
    .write_peer = shm_write_peer,
    .peek = shm_peek,
    .catch_p2p = shm_catch_p2p,
    .crowded = collie__shm_crowded,
    .poll_arm = collie__shm_poll_arm,
    .poll_done = collie__shm_poll_done,
    .set_device = shm_set_device,
    .device_peer = shm_device_peer,
};
