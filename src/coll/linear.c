/*
 * linear.c - gather and scatter where the root talks to every rank directly.
 *
 * gather: every non-root sends its count elements to the root in one
 * message; the root posts a receive from every rank at once, each straight
 * into that rank's block of recvbuf, copies its own block (unless in place:
 * sendbuf == recvbuf + root*count) and waits. scatter is the mirror image:
 * the root posts a send of block q to every rank q at once and copies its
 * own block (unless in place: recvbuf == sendbuf + root*count); every other
 * rank receives one message. Non-roots never touch the root-only buffer, so
 * they may pass NULL for it.
 *
 * "At once" is bounded: at most LIN_WINDOW requests are posted; past that the
 * oldest is retired before the next is posted, so any p works with a fixed
 * request array and no allocation. No staging, no chunking: every byte moves
 * once, between user buffers.
 *
 * Cost: (p-1) alpha + (p-1)/p S beta (S = p * count * esize). The root's
 * p-1 messages and its (p-1)/p S bytes are the bottleneck; the other ranks
 * finish after one message. Best for small p or small messages, where a
 * tree's log2 p steps save little and its forwarding moves more bytes.
 */
#include <string.h>

#include "coll/coll.h"
#include "util/error.h"

#define LIN_WINDOW 64

/* The root's side: one message of blk bytes with every other rank q, into
 * or out of buf + q * stride (send: buf is the source, else the
 * destination). Its own block (blk bytes from own_src to own_dst) is copied
 * once everything is posted, so that the copy overlaps the messages. The
 * root's sends go direct (it is busy) and so do the gather's (the root takes
 * them from everyone): a shm receiver reads the sender's block itself. */
static collie_result_t
lin_root(struct collie__call *c, int send, char *buf, size_t blk, size_t stride,
         const void *own_src, void *own_dst)
{
  int p = c->size;
  struct collie__req req[LIN_WINDOW];
  struct collie__req *w;
  uint64_t slot = collie__call_slot(c, 0);
  int posted = 0, retired = 0;
  collie_result_t rc;
  for (int i = 1; i < p; i++) {
    int q = (c->root + i) % p;
    if (posted - retired == LIN_WINDOW) {
      w = &req[retired % LIN_WINDOW];
      if ((rc = collie__net_wait(c->net, &w, 1, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
      retired++;
    }
    struct collie__req *r = &req[posted % LIN_WINDOW];
    char *b = buf + (size_t)q * stride;
    rc = send ? collie__net_isend_direct(c->net, q, b, blk, slot, r)
              : collie__net_irecv(c->net, q, b, blk, slot, r);
    if (rc != COLLIE_SUCCESS) return rc;
    posted++;
  }
  if (own_src != own_dst) memcpy(own_dst, own_src, blk);
  for (; retired < posted; retired++) {
    w = &req[retired % LIN_WINDOW];
    if ((rc = collie__net_wait(c->net, &w, 1, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
  }
  return COLLIE_SUCCESS;
}

static double
lin_cost(const struct collie__call *c, const struct collie__model *m)
{
  double p = c->size, S = (double)collie__call_bytes(c);
  return (p - 1) * m->alpha_us + (p - 1) / p * S * m->beta_us;
}

/* ---- gather ---- */

static collie_result_t
lin_gather_run(struct collie__call *c)
{
  size_t blk = c->count * c->esize;
  if (blk == 0) return COLLIE_SUCCESS; /* every rank passed count 0 */
  if (c->rank != c->root) return collie__send_direct(c, c->root, c->sendbuf, blk, 0);
  return lin_root(c, 0, c->recvbuf, blk, blk, c->sendbuf,
                  (char *)c->recvbuf + (size_t)c->root * blk);
}

const struct collie__algo collie__algo_gather_linear = {
    "linear", COLLIE_ALGO_LINEAR, COLLIE_KIND_GATHER, 0, lin_cost, lin_gather_run};

/* ---- scatter ---- */

static collie_result_t
lin_scatter_run(struct collie__call *c)
{
  size_t blk = c->count * c->esize;
  if (blk == 0) return COLLIE_SUCCESS;
  if (c->rank != c->root) return collie__sendrecv(c, -1, NULL, 0, c->root, c->recvbuf, blk, 0);
  /* The sends only read sendbuf; the cast is for the shared helper. */
  return lin_root(c, 1, (char *)c->sendbuf, blk, blk,
                  (const char *)c->sendbuf + (size_t)c->root * blk, c->recvbuf);
}

const struct collie__algo collie__algo_scatter_linear = {
    "linear", COLLIE_ALGO_LINEAR, COLLIE_KIND_SCATTER, 0, lin_cost, lin_scatter_run};

/* ---- broadcast ----
 *
 * The root sends the whole buffer to every rank at once. Eager sends return
 * as soon as the bytes sit in the peer's ring, so the root never waits for a
 * receiver to run, and no rank forwards: with more ranks than cores, where a
 * tree's every level waits for its ranks to get a core in turn, this is the
 * fastest broadcast of small buffers. Cost: the last receiver's handoff,
 * plus LIN_SEND_FRACTION of one per further send (the root only posts
 * them), plus (p-1) S beta at the root. */

/* One eager send's cost at the root, in alpha (a full handoff): measured on
 * 8 ranks on 2 cores, 16 B, ~0.2 us per send against ~3 us per handoff. */
#define LIN_SEND_FRACTION 0.1

static collie_result_t
lin_broadcast_run(struct collie__call *c)
{
  size_t bytes = c->count * c->esize;
  if (bytes == 0 || c->size == 1) return COLLIE_SUCCESS;
  if (c->rank != c->root) return collie__sendrecv(c, -1, NULL, 0, c->root, c->recvbuf, bytes, 0);
  return lin_root(c, 1, c->recvbuf, bytes, 0, NULL, NULL);
}

static double
lin_broadcast_cost(const struct collie__call *c, const struct collie__model *m)
{
  double p = c->size, S = (double)collie__call_bytes(c);
  return m->alpha_us * (1 + LIN_SEND_FRACTION * (p - 2)) + (p - 1) * S * m->beta_us;
}

const struct collie__algo collie__algo_broadcast_linear = {
    "linear", COLLIE_ALGO_LINEAR, COLLIE_KIND_BROADCAST, 0, lin_broadcast_cost, lin_broadcast_run};
