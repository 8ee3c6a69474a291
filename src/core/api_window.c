/*
 * api_window.c - one-sided windows (issue 22; torchcomms' new_window /
 * TorchCommWindow): every rank exposes a buffer, any rank puts bytes into
 * a peer's buffer at an offset and signals it, and the peer waits for the
 * signal. docs/windows.md.
 *
 * A window runs on a communicator of its own (a split of the caller's), so
 * its messages never meet the caller's collectives on a channel: channels
 * deliver in order, and a put waiting in front of a collective's message
 * would be read as that message.
 *
 * A put goes one of two ways:
 *   - into the peer's memory directly, by this rank's core
 *     (collie__net_write_peer: process_vm_writev, a peer on this host that
 *     the OS lets us write), complete when the call returns;
 *   - as a message (any other peer, tcp): a header {PUT, offset, bytes}
 *     and the bytes, from src itself, which must stay unchanged until
 *     collie_window_flush; the peer's window calls apply it.
 * A signal is a header {SIGNAL} after the puts before it, on the same
 * channel, so a peer that has counted it has every one of those puts in
 * its buffer (the direct ones were done before the signal was sent).
 *
 * The peer applies what arrives from q while it waits in
 * collie_window_wait_signal(q) or collie_window_fence: messages of one
 * channel are taken in order, one header at a time. Every wait has the
 * window's deadline; a peer that dies fails the wait naming it, as any
 * collective does, and the window is then unusable (its communicator
 * failed).
 *
 * Not thread-safe: one thread at a time per window.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

enum { WIN_PUT = 1, WIN_SIGNAL = 2, WIN_FENCE = 3 };

struct win_hdr {
  uint32_t kind;
  uint32_t pad;
  uint64_t offset, bytes;
};

/* What this rank knows of one peer. */
struct win_peer {
  uint64_t base, size; /* its window, as it published it */
  uint64_t sent, got;  /* messages to it and from it so far (their slots) */
  uint64_t signals;    /* signals counted from it */
  uint64_t fences;     /* fence markers counted from it */
};

/* One posted send: its header (alive until complete) and its requests (a
 * put's header and bytes; a signal's or fence's header alone). Allocated
 * one by one: a posted request must not move. */
struct win_send {
  struct win_hdr hdr;
  struct collie__req req[2];
  int nreq;
};

struct collie_window {
  collie_comm_t *comm; /* private: a split of the caller's */
  char *base;
  size_t size;
  uint64_t fence_epoch;
  struct win_peer *peer;
  struct win_send **pend; /* sends not yet known complete */
  size_t npend, cap;
};

/* The slot of message n of one direction of a pair. */
static uint64_t
win_slot(uint64_t n)
{
  return collie__slot(COLLIE_KIND_WINDOW, (uint32_t)(n >> 16), (uint32_t)(n & 0xffff));
}

static int64_t
win_deadline(const collie_window_t *w, int64_t timeout_ms)
{
  return collie__deadline_after_ms(timeout_ms > 0 ? timeout_ms : w->comm->timeout_ms);
}

static collie_result_t
win_check(const collie_window_t *w, const char *fn, int peer)
{
  if (!w) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: win is NULL", fn);
  collie_result_t rc = collie__comm_check(w->comm, fn);
  if (rc != COLLIE_SUCCESS) return rc;
  if (peer < -1 || peer >= w->comm->size)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: peer = %d is outside 0..%d", fn, peer,
                       w->comm->size - 1);
  return COLLIE_SUCCESS;
}

/* A failure of the window's communicator: it is unusable from now on. */
static collie_result_t
win_fail(collie_window_t *w, const char *fn, collie_result_t rc)
{
  collie__err_prefix("%s", fn);
  return collie__comm_poison(w->comm, rc);
}

/* Posts one send of a header (and a put's bytes) to peer q. */
static collie_result_t
win_send(collie_window_t *w, int q, uint32_t kind, uint64_t offset, const void *src, size_t bytes)
{
  if (w->npend == w->cap) {
    size_t cap = w->cap ? 2 * w->cap : 16;
    struct win_send **p = realloc(w->pend, cap * sizeof(*p));
    if (!p) return collie__err(COLLIE_SYSTEM_ERROR, "window: out of memory");
    w->pend = p;
    w->cap = cap;
  }
  struct win_send *s = calloc(1, sizeof(*s));
  if (!s) return collie__err(COLLIE_SYSTEM_ERROR, "window: out of memory");
  w->pend[w->npend++] = s;
  struct win_peer *p = &w->peer[q];
  s->hdr = (struct win_hdr){.kind = kind, .offset = offset, .bytes = bytes};
  s->nreq = 1;
  collie_result_t rc =
      collie__net_isend(w->comm->net, q, &s->hdr, sizeof(s->hdr), win_slot(p->sent++), &s->req[0]);
  if (rc == COLLIE_SUCCESS && kind == WIN_PUT) {
    s->nreq = 2;
    rc = collie__net_isend(w->comm->net, q, src, bytes, win_slot(p->sent++), &s->req[1]);
  }
  return rc;
}

/* Takes the next message from q and applies it. */
static collie_result_t
win_take(collie_window_t *w, int q, int64_t deadline)
{
  struct win_peer *p = &w->peer[q];
  struct collie__net *net = w->comm->net;
  collie_result_t rc;
  /* A wait that fails fails the window's net: nothing stays posted for a
   * later call, so the header and its request live here. */
  struct win_hdr hdr;
  struct collie__req hreq, *r = &hreq;
  memset(&hreq, 0, sizeof(hreq));
  if ((rc = collie__net_irecv(net, q, &hdr, sizeof(hdr), win_slot(p->got++), &hreq)) !=
          COLLIE_SUCCESS ||
      (rc = collie__net_wait(net, &r, 1, deadline)) != COLLIE_SUCCESS)
    return rc;
  switch (hdr.kind) {
  case WIN_PUT: {
    struct collie__req body;
    memset(&body, 0, sizeof(body));
    uint64_t off = hdr.offset, n = hdr.bytes;
    if (off > w->size || n > w->size - off)
      return collie__err(COLLIE_REMOTE_ERROR,
                         "rank %d put %llu bytes at offset %llu, past this rank's window of %zu "
                         "bytes",
                         q, (unsigned long long)n, (unsigned long long)off, w->size);
    rc = collie__net_irecv(net, q, w->base + off, n, win_slot(p->got++), &body);
    struct collie__req *b = &body;
    return rc == COLLIE_SUCCESS ? collie__net_wait(net, &b, 1, deadline) : rc;
  }
  case WIN_SIGNAL:
    p->signals++;
    return COLLIE_SUCCESS;
  case WIN_FENCE:
    p->fences++;
    return COLLIE_SUCCESS;
  default:
    return collie__err(COLLIE_REMOTE_ERROR, "rank %d sent a window message of unknown kind %u", q,
                       hdr.kind);
  }
}

collie_result_t
collie_window_create(collie_comm_t *comm, void *base, size_t bytes, collie_window_t **out)
{
  static const char fn[] = "collie_window_create";
  if (!out) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: win is NULL", fn);
  *out = NULL;
  collie_result_t rc = collie__comm_check(comm, fn);
  if (rc != COLLIE_SUCCESS) return rc;
  if (!base && bytes)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: base is NULL but bytes is %zu", fn, bytes);
  if (collie__stage_on_device(base, NULL))
    return collie__err(COLLIE_UNSUPPORTED, "%s: base is device memory; windows are host memory",
                       fn);
  collie_window_t *w = calloc(1, sizeof(*w));
  if (!w) return collie__err(COLLIE_SYSTEM_ERROR, "%s: out of memory", fn);
  w->base = base;
  w->size = bytes;
  if ((rc = collie_comm_split(comm, 0, comm->rank, &w->comm)) != COLLIE_SUCCESS) {
    free(w);
    return rc;
  }
  int p = w->comm->size;
  uint64_t mine[2] = {(uint64_t)(uintptr_t)base, bytes}, *all = calloc((size_t)p, sizeof(mine));
  w->peer = calloc((size_t)p, sizeof(*w->peer));
  if (!all || !w->peer) {
    rc = collie__err(COLLIE_SYSTEM_ERROR, "%s: out of memory", fn);
  } else {
    rc = collie__comm_exchange(w->comm, mine, all, sizeof(mine));
    for (int q = 0; rc == COLLIE_SUCCESS && q < p; q++) {
      w->peer[q].base = all[2 * q];
      w->peer[q].size = all[2 * q + 1];
    }
  }
  free(all);
  if (rc != COLLIE_SUCCESS) {
    collie_comm_destroy(w->comm);
    free(w->peer);
    free(w);
    return rc;
  }
  *out = w;
  return COLLIE_SUCCESS;
}

collie_result_t
collie_window_put(collie_window_t *w, int peer, size_t offset, const void *src, size_t bytes)
{
  static const char fn[] = "collie_window_put";
  collie_result_t rc = win_check(w, fn, peer);
  if (rc != COLLIE_SUCCESS) return rc;
  if (peer < 0) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: peer = -1 names no rank", fn);
  if (!src && bytes)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: src is NULL but bytes is %zu", fn, bytes);
  uint64_t size = w->peer[peer].size;
  if (offset > size || bytes > size - offset)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: %zu bytes at offset %zu do not fit rank %d's window of %llu bytes", fn,
                       bytes, offset, peer, (unsigned long long)size);
  if (!bytes) return COLLIE_SUCCESS;
  if (peer == w->comm->rank) {
    memmove(w->base + offset, src, bytes);
    return COLLIE_SUCCESS;
  }
  if (collie__net_single_copy(w->comm->net) &&
      collie__net_write_peer(w->comm->net, peer, w->peer[peer].base + offset, src, bytes) ==
          COLLIE_SUCCESS)
    return COLLIE_SUCCESS;
  rc = win_send(w, peer, WIN_PUT, offset, src, bytes);
  return rc == COLLIE_SUCCESS ? rc : win_fail(w, fn, rc);
}

collie_result_t
collie_window_signal(collie_window_t *w, int peer)
{
  static const char fn[] = "collie_window_signal";
  collie_result_t rc = win_check(w, fn, peer);
  if (rc != COLLIE_SUCCESS) return rc;
  if (peer < 0) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: peer = -1 names no rank", fn);
  if (peer == w->comm->rank) {
    w->peer[peer].signals++;
    return COLLIE_SUCCESS;
  }
  rc = win_send(w, peer, WIN_SIGNAL, 0, NULL, 0);
  return rc == COLLIE_SUCCESS ? rc : win_fail(w, fn, rc);
}

collie_result_t
collie_window_wait_signal(collie_window_t *w, int peer, uint64_t count, int64_t timeout_ms)
{
  static const char fn[] = "collie_window_wait_signal";
  collie_result_t rc = win_check(w, fn, peer);
  if (rc != COLLIE_SUCCESS) return rc;
  if (peer < 0) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: peer = -1 names no rank", fn);
  if (timeout_ms < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: timeout_ms = %lld must be >= 0", fn,
                       (long long)timeout_ms);
  int64_t deadline = win_deadline(w, timeout_ms);
  while (w->peer[peer].signals < count && rc == COLLIE_SUCCESS) {
    if (peer == w->comm->rank)
      return collie__err(COLLIE_INVALID_USAGE,
                         "%s: waiting for signal %llu from this rank itself, which has sent %llu",
                         fn, (unsigned long long)count, (unsigned long long)w->peer[peer].signals);
    rc = win_take(w, peer, deadline);
  }
  return rc == COLLIE_SUCCESS ? rc : win_fail(w, fn, rc);
}

collie_result_t
collie_window_flush(collie_window_t *w)
{
  static const char fn[] = "collie_window_flush";
  collie_result_t rc = win_check(w, fn, -1);
  if (rc != COLLIE_SUCCESS || !w->npend) return rc;
  struct collie__req **r = malloc(2 * w->npend * sizeof(*r));
  if (!r) return collie__err(COLLIE_SYSTEM_ERROR, "%s: out of memory", fn);
  int n = 0;
  for (size_t i = 0; i < w->npend; i++)
    for (int k = 0; k < w->pend[i]->nreq; k++) r[n++] = &w->pend[i]->req[k];
  rc = collie__net_wait(w->comm->net, r, n, win_deadline(w, 0));
  free(r);
  if (rc != COLLIE_SUCCESS) return win_fail(w, fn, rc); /* the failed net forgets them */
  for (size_t i = 0; i < w->npend; i++) free(w->pend[i]);
  w->npend = 0;
  return COLLIE_SUCCESS;
}

collie_result_t
collie_window_fence(collie_window_t *w)
{
  static const char fn[] = "collie_window_fence";
  collie_result_t rc = win_check(w, fn, -1);
  if (rc != COLLIE_SUCCESS) return rc;
  int p = w->comm->size, me = w->comm->rank;
  w->fence_epoch++;
  for (int q = 0; q < p && rc == COLLIE_SUCCESS; q++)
    if (q != me) rc = win_send(w, q, WIN_FENCE, 0, NULL, 0);
  int64_t deadline = win_deadline(w, 0);
  for (int q = 0; q < p && rc == COLLIE_SUCCESS; q++)
    while (q != me && w->peer[q].fences < w->fence_epoch && rc == COLLIE_SUCCESS)
      rc = win_take(w, q, deadline);
  if (rc != COLLIE_SUCCESS) return win_fail(w, fn, rc);
  return collie_window_flush(w);
}

collie_result_t
collie_window_free(collie_window_t *w)
{
  if (!w) return collie__err(COLLIE_INVALID_ARGUMENT, "collie_window_free: win is NULL");
  collie_result_t rc = collie__comm_check(w->comm, "collie_window_free");
  if (rc == COLLIE_SUCCESS) rc = collie_window_fence(w);
  /* Destroying the communicator ends its net, which lets go of any send
   * still posted (a failed window's): only then are they freed. */
  collie_result_t drc = collie_comm_destroy(w->comm);
  for (size_t i = 0; i < w->npend; i++) free(w->pend[i]);
  free(w->pend);
  free(w->peer);
  free(w);
  return rc != COLLIE_SUCCESS ? rc : drc;
}
