/*
 * shm_flat_area.c - the shm transport's flat area (shm.h), apart from its
 * ring data path (shm.c): per rank, buffers every local rank can read and a
 * phase word, and the sync that the shm-only algorithms (coll/shm_flat.c)
 * step with.
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

/* ---- The flat area (shm.h) ----
 *
 * A sync is a counter barrier on per-rank phase words: publish phase n,
 * wait until every word reads >= n. Words only grow, and a rank publishes
 * n+1 only after it saw everyone at n, so no word is ever more than one
 * ahead of the slowest rank and a stale reading can only be too low, never
 * misleading.
 *
 * Waking. A waiter spins and yields first (collie__backoff), then
 * announces itself in its sleeping word, takes a snapshot of its doorbell,
 * looks at the words again and sleeps on the doorbell. A publisher stores its word and rings the
 * doorbell of every peer whose sleeping word is set. Both sides store
 * first and load second, all seq_cst, so in the single total order either
 * the waiter's second look sees the new word, or the publisher sees the
 * sleeping word and bumps the doorbell, which either changes it before the
 * snapshot (and then the look after it sees the word too) or after it
 * (and futex_wait does not sleep). Unlike the rings, publishers skip the
 * doorbell of a peer that is awake: an awake flat waiter re-reads the words
 * themselves, never a snapshot taken earlier. The doorbell is the one the
 * rings, departures (collie__shm_leave) and abort() ring too, so a sleeping
 * flat waiter also wakes for a stray message, a departure or an abort.
 */

struct collie__shm_flat *
collie__shm_flat_of(struct collie__xport *xp)
{
  struct collie__shm_xport *x = shm_of(xp);
  return x && x->flat.ctrl ? &x->flat : NULL;
}

int
collie__shm_flat_cores(const struct collie__shm_flat *f)
{
  return f->x->cores;
}

size_t
collie__shm_flat_buf_bytes(const struct collie__shm_flat *f)
{
  return f->buf_bytes;
}

void *
collie__shm_flat_buf(const struct collie__shm_flat *f, int rank, int b)
{
  return f->regions + ((size_t)rank * 2 + (size_t)(b & 1)) * f->buf_bytes;
}

void *
collie__shm_flat_piece(const struct collie__shm_flat *f, int rank, int b, size_t len)
{
  if (len <= COLLIE_SHM_FLAT_INLINE) return f->ctrl[rank].inline_piece[b & 1];
  return collie__shm_flat_buf(f, rank, b);
}

int
collie__shm_flat_next_buf(struct collie__shm_flat *f)
{
  return (int)(f->pieces++ & 1);
}

/* The descriptor's digest: a few multiplies (a byte-wise hash of the 64-byte
 * line cost ~80 ns, a sizeable part of an 8-byte allreduce). Only equality
 * matters, and every field moves it. */
static uint64_t
shm_flat_digest(const struct collie__shm_flat_desc *d)
{
  uint64_t h = (d->slot ^ 0x243f6a8885a308d3ull) * 0x9e3779b97f4a7c15ull;
  h = (h ^ (h >> 29) ^ d->count) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 31) ^ ((uint64_t)(uint32_t)d->dtype << 32 | (uint32_t)d->op)) *
      0x94d049bb133111ebull;
  h = (h ^ (h >> 29) ^ ((uint64_t)(uint32_t)d->root << 32 | d->shape)) * 0x9e3779b97f4a7c15ull;
  return h ^ (h >> 32);
}

void
collie__shm_flat_begin(struct collie__shm_flat *f, const struct collie__shm_flat_desc *d)
{
  f->cur = *d;
  f->cur_digest = shm_flat_digest(d);
  f->calls++;
  /* Published by the release of our next phase word; no rank reads these
   * entries now (see struct collie__shm_flat_ctrl). */
  struct collie__shm_flat_ctrl *me = &f->ctrl[f->x->me];
  me->desc[f->calls & 1] = *d;
  atomic_store_explicit(&me->digest[f->calls & 1], f->cur_digest, memory_order_relaxed);
  f->check = 1;
  f->step = 0;
}

/* The current call and step, as a slot text: "allreduce #7 step 1 (shm_flat)". */
static void
shm_flat_where(const struct collie__shm_flat *f, char *buf, size_t len)
{
  uint64_t slot = (f->cur.slot & ~((uint64_t)0xffff << 8)) | ((uint64_t)(f->step & 0xffff) << 8);
  collie__slot_describe(slot, buf, len);
}

/* A rank whose phase word is still below target, starting with the one
 * missing last time (ranks tend to arrive in the same order); -1 if none. */
static int
shm_flat_missing(struct collie__shm_flat *f, uint64_t target)
{
  int n = f->x->nlocal;
  for (int k = 0, q = f->hint; k < n; k++, q = q + 1 == n ? 0 : q + 1) {
    if (q == f->x->me) continue;
    if (atomic_load_explicit(&f->ctrl[q].phase, memory_order_acquire) < target) {
      f->hint = q;
      return q;
    }
  }
  return -1;
}

/* A queued message that proves a peer runs another algorithm for this call
 * or is past it: a collective's chunk of this call's sequence number or a
 * later one. Earlier calls' messages were all consumed, and p2p ones may
 * legitimately wait. Returns its channel and slot, or NULL. Never blocks. */
static struct collie__shm_chan *
shm_flat_stray(struct collie__shm_flat *f, uint64_t *slot, uint64_t *total)
{
  struct collie__shm_xport *x = f->x;
  uint32_t seq = (uint32_t)(f->cur.slot >> 24);
  for (int i = 0; i < x->nchans; i++) {
    struct collie__shm_chan *ch = &x->chans[i];
    uint64_t tail = atomic_load_explicit(&ch->in->tail, memory_order_acquire);
    for (uint64_t k = ch->in_head; k < tail; k += shm_chunk_cells(shm_chunk(ch->in, k))) {
      const struct collie__shm_chunk *c = shm_chunk(ch->in, k);
      int kind = (int)(c->slot >> 56);
      if (kind == COLLIE_KIND_NONE || kind >= COLLIE_KIND_P2P) continue;
      if ((int32_t)((uint32_t)(c->slot >> 24) - seq) < 0) continue;
      *slot = c->slot;
      *total = shm_chunk_total(c);
      return ch;
    }
  }
  return NULL;
}

/* Fails the wait if a rank still missing at target died, closed or
 * aborted, or if any rank aborted: with a rank missing the sync is not
 * complete, and an aborted rank takes part in nothing more, so the call
 * cannot succeed everywhere; saying so now (with its reason) beats waiting
 * for the deadline. A death is named in preference to a departure (a peer
 * that aborted because a third rank died should not hide the root cause). */
static collie_result_t
shm_flat_check_peers(struct collie__shm_flat *f, uint64_t target)
{
  struct collie__shm_xport *x = f->x;
  struct collie__shm_departure d = {NULL, NULL, 0};
  for (int i = 0; i < x->nchans; i++) {
    struct collie__shm_chan *ch = &x->chans[i];
    uint32_t st = atomic_load_explicit(&x->ctrl[ch->local].state, memory_order_acquire);
    if (atomic_load_explicit(&f->ctrl[ch->local].phase, memory_order_acquire) >= target) {
      if (st == COLLIE_SHM_ABORTED) collie__shm_departure_note(&d, ch, st);
      continue;
    }
    int exited = collie__shm_peer_exited(ch);
    if (!exited && st == COLLIE_SHM_ALIVE) continue;
    /* It may have arrived just before it left (its word precedes its state):
     * then only an abort counts, as above. */
    if (atomic_load_explicit(&f->ctrl[ch->local].phase, memory_order_acquire) >= target &&
        st != COLLIE_SHM_ABORTED)
      continue;
    collie__shm_departure_note(&d, ch, st);
  }
  const char *how = "";
  char where[96], why[COLLIE_SHM_REASON_LEN + 16];
  struct collie__shm_chan *ch = collie__shm_departure_verdict(x, &d, &how, why, sizeof(why));
  if (!ch) return COLLIE_SUCCESS;
  shm_flat_where(f, where, sizeof(where));
  return collie__err(COLLIE_REMOTE_ERROR, "shm: rank %d (world rank %d, pid %d) %s during %s%s",
                     ch->rank, ch->world_rank, ch->pid, how, where, why);
}

/* TIMEOUT naming every rank still missing at target. */
static collie_result_t
shm_flat_timeout(struct collie__shm_flat *f, uint64_t target)
{
  struct collie__shm_xport *x = f->x;
  char who[400], where[96];
  size_t o = 0;
  int n = 0;
  who[0] = '\0';
  for (int i = 0; i < x->nchans; i++) {
    struct collie__shm_chan *ch = &x->chans[i];
    if (atomic_load_explicit(&f->ctrl[ch->local].phase, memory_order_acquire) >= target) continue;
    if (o + 1 < sizeof(who)) {
      int k = snprintf(who + o, sizeof(who) - o, "%srank %d (world rank %d)", n ? ", " : "",
                       ch->rank, ch->world_rank);
      if (k > 0) o += (size_t)k;
    }
    n++;
  }
  shm_flat_where(f, where, sizeof(where));
  return collie__err(COLLIE_TIMEOUT,
                     "shm: timed out waiting for %s to reach %s (%d of %d ranks missing)", who,
                     where, n, x->nlocal);
}

/* The first sync of a call: does every rank run the same call? Every rank
 * wrote its descriptor before the phase we just saw, and cannot overwrite
 * it before we publish our next one. */
static collie_result_t
shm_flat_compare(struct collie__shm_flat *f)
{
  struct collie__shm_xport *x = f->x;
  for (int i = 0; i < x->nchans; i++) {
    struct collie__shm_chan *ch = &x->chans[i];
    const struct collie__shm_flat_ctrl *q = &f->ctrl[ch->local];
    if (atomic_load_explicit(&q->digest[f->calls & 1], memory_order_relaxed) == f->cur_digest)
      continue;
    struct collie__shm_flat_desc d = q->desc[f->calls & 1];
    char theirs[96], ours[96];
    collie__slot_describe(d.slot, theirs, sizeof(theirs));
    collie__slot_describe(f->cur.slot, ours, sizeof(ours));
    return collie__err(
        COLLIE_INVALID_USAGE,
        "collectives mismatched across ranks: rank %d (world rank %d) runs %s (count %" PRIu64
        ", %s, %s, root %d, shape %#x), this rank %s (count %" PRIu64
        ", %s, %s, root %d, shape %#x)",
        ch->rank, ch->world_rank, theirs, d.count, collie_dtype_name((collie_dtype_t)d.dtype),
        collie_op_name((collie_op_t)d.op), d.root, d.shape, ours, f->cur.count,
        collie_dtype_name((collie_dtype_t)f->cur.dtype), collie_op_name((collie_op_t)f->cur.op),
        f->cur.root, f->cur.shape);
  }
  return COLLIE_SUCCESS;
}

static int
shm_crowded_arg(void *x)
{
  return collie__shm_crowded((struct collie__xport *)x);
}

/* Waits until every phase word reads >= target; see the section comment. */
static collie_result_t
shm_flat_wait(struct collie__shm_flat *f, uint64_t target, int64_t deadline_ns)
{
  struct collie__shm_xport *x = f->x;
  if (shm_flat_missing(f, target) < 0) return COLLIE_SUCCESS;
  struct collie__backoff b;
  collie__backoff_init_crowded(&b, x->spin, shm_crowded_arg, x);
  while (collie__backoff_next(&b, deadline_ns)) {
    if (shm_flat_missing(f, target) < 0) return COLLIE_SUCCESS;
    if (atomic_load_explicit(&x->stopped, memory_order_acquire)) break;
  }
  struct collie__shm_ctrl *me = &x->ctrl[x->me];
  collie_result_t rc = COLLIE_SUCCESS;
  for (;;) {
    atomic_store_explicit(&me->sleeping, COLLIE_SHM_SLEEP_FUTEX, memory_order_seq_cst);
    uint32_t snap = atomic_load_explicit(&me->doorbell, memory_order_seq_cst);
    /* Strays first: one sent after the words were complete proves nothing,
     * and the sender's own sync reads precede its send. */
    uint64_t sslot = 0, stotal = 0;
    struct collie__shm_chan *stray = shm_flat_stray(f, &sslot, &stotal);
    if (shm_flat_missing(f, target) < 0) break;
    int64_t now = collie__now_ns();
    if (stray) {
      char got[96], want[96];
      collie__slot_describe(sslot, got, sizeof(got));
      shm_flat_where(f, want, sizeof(want));
      char who[64];
      snprintf(who, sizeof(who), "rank %d (world rank %d)", stray->rank, stray->world_rank);
      if (collie__slot_closing(sslot)) {
        rc = collie__slot_closed_err(who, "this rank", want);
        break;
      }
      rc = collie__err(
          COLLIE_INVALID_USAGE,
          "collectives mismatched across ranks: rank %d (world rank %d) sent %s (%" PRIu64
          " bytes), this rank runs %s",
          stray->rank, stray->world_rank, got, stotal, want);
      break;
    }
    if (atomic_load_explicit(&x->stopped, memory_order_acquire)) {
      rc = COLLIE_INTERNAL_ERROR; /* the caller takes the transport's failure */
      break;
    }
    if (now >= deadline_ns) {
      rc = shm_flat_timeout(f, target);
      break;
    }
    uint32_t ev = atomic_load_explicit(&x->hdr->events, memory_order_acquire);
    if (ev != x->events_seen || now >= x->next_check_ns) {
      x->events_seen = ev;
      x->next_check_ns = now + SHM_CHECK_NS;
      if ((rc = shm_flat_check_peers(f, target)) != COLLIE_SUCCESS) break;
    }
    int64_t until = now + SHM_CHECK_NS; /* a death rings no doorbell */
    if (until > deadline_ns) until = deadline_ns;
    collie__futex_wait(collie__shm_futex_word(&me->doorbell), snap, until);
  }
  atomic_store_explicit(&me->sleeping, 0, memory_order_relaxed);
  return rc;
}

/* Fails the transport with the thread's current error (unless it failed
 * already: then that failure stands) and tells peers at once, as net.c does
 * for a failed message wait. Returns the transport's failure. */
static collie_result_t
shm_flat_fail(struct collie__shm_xport *x, collie_result_t rc)
{
  shm_lock(x);
  if (!x->failed && rc == COLLIE_INTERNAL_ERROR)
    collie__err(rc, "shm: flat sync stopped without a recorded failure");
  rc = collie__shm_fail(x, rc);
  collie__shm_leave(x, COLLIE_SHM_ABORTED, x->errmsg);
  shm_unlock(x);
  return rc;
}

collie_result_t
collie__shm_flat_sync(struct collie__shm_flat *f, int64_t deadline_ns)
{
  struct collie__shm_xport *x = f->x;
  if (atomic_load_explicit(&x->stopped, memory_order_acquire))
    return shm_flat_fail(x, COLLIE_INTERNAL_ERROR);
  uint64_t target = ++f->phase;
  atomic_store_explicit(&f->ctrl[x->me].phase, target, memory_order_seq_cst);
  for (int i = 0; i < x->nchans; i++) {
    int q = x->chans[i].local;
    if (atomic_load_explicit(&x->ctrl[q].sleeping, memory_order_seq_cst)) collie__shm_notify(x, q);
  }
  collie_result_t rc = shm_flat_wait(f, target, deadline_ns);
  if (rc == COLLIE_SUCCESS && f->check) rc = shm_flat_compare(f);
  f->check = 0;
  f->step++;
  return rc == COLLIE_SUCCESS ? rc : shm_flat_fail(x, rc);
}
