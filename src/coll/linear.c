/*
 * linear.c - gather, scatter, broadcast, allreduce and reduce_scatter where ranks talk to each
 * other directly.
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
 * Cost: alpha (1 + LIN_SEND_FRACTION (p-2)) + (p-1)/p S beta (S = p *
 * count * esize). The root's messages are all in flight at once, so past the
 * first each adds only the root's share of a handoff; its (p-1)/p S bytes are
 * the bottleneck. Against a tree's log2 p handoffs and S beta (a subtree's
 * blocks wait for each other), linear wins but for small messages over many
 * ranks: 8 ranks on 2 cores, gather of 64 KiB 6 us linear vs 26 us tree,
 * 1 MiB 112 vs 160 us (a model that charged linear a full alpha per rank
 * picked the tree below ~512 KiB).
 */
#include <stdatomic.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/topo.h"
#include "util/error.h"
#include "util/util.h"

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
    int q = collie__root_abs(c, i);
    if (posted - retired == LIN_WINDOW) {
      w = &req[retired % LIN_WINDOW];
      if ((rc = collie__net_wait(c->net, &w, 1, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
      retired++;
    }
    struct collie__req *r = &req[posted % LIN_WINDOW];
    char *b = buf + (size_t)q * stride;
    rc = send ? collie__call_isend_direct(c, q, b, blk, slot, r)
              : collie__call_irecv(c, q, b, blk, slot, r);
    if (rc != COLLIE_SUCCESS) return rc;
    posted++;
  }
  if (own_src != own_dst) collie__call_copy(c, own_dst, own_src, blk);
  for (; retired < posted; retired++) {
    w = &req[retired % LIN_WINDOW];
    if ((rc = collie__net_wait(c->net, &w, 1, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
  }
  return COLLIE_SUCCESS;
}

/* One eager send's cost at the root, in alpha (a full handoff): measured on
 * 8 ranks on 2 cores, 16 B, ~0.2 us per send against ~3 us per handoff. */
#define LIN_SEND_FRACTION 0.1

/* The handoffs of p-1 messages the root has in flight at once. */
static double
lin_alpha(const struct collie__call *c, const struct collie__model *m)
{
  return m->alpha_us * (1 + LIN_SEND_FRACTION * (c->size - 2));
}

static double
lin_cost(const struct collie__call *c, const struct collie__model *m)
{
  double p = c->size, S = (double)collie__call_bytes(c);
  const struct collie__topo *t = c->topo;
  if (t && t->nhosts > 1 && !c->group && c->root >= 0 && c->root < t->size) {
    /* Several hosts: the root's link carries the blocks of the ranks off
     * its host; its own host's blocks move over shared memory meanwhile. */
    double away = p - t->host_size[t->host[c->root]];
    return lin_alpha(c, m) + away / p * S * m->beta_us;
  }
  return lin_alpha(c, m) + (p - 1) / p * S * m->beta_us;
}

/* ---- gather ----
 *
 * Large blocks on one host: the peers write. A root that reads every block
 * itself (single copies, process_vm_readv) moves p blocks on its own core
 * while the others wait: at 2 ranks, 32 MiB from the peer plus its own
 * 32 MiB take 15-17 ms, against 8-10 ms when the peer writes its block into
 * the root's buffer (process_vm_writev) while the root copies its own. So
 * from LIN_PUSH_MIN bytes per block, when every rank is on this host and
 * single copies are allowed (both the same on every rank), the root sends
 * each rank recvbuf's address (step 1); each writes its block into place and
 * answers with a status (step 2), 0 once written. A rank that may not write
 * (no permission to reach the root's memory) answers with why and sends the
 * block as a message (step 3) instead, so the protocol never fails where
 * messages work. */

#define LIN_PUSH_MIN ((size_t)256 << 10)
enum { LIN_STEP_ADDR = 1, LIN_STEP_STATUS, LIN_STEP_DATA };

/* The root's wait for rank q's status; a rank that could not write sends its
 * block now. */
static collie_result_t
lin_push_retire(struct collie__call *c, struct collie__req *s, struct collie__req *r,
                const uint64_t *status, int q, size_t blk)
{
  struct collie__req *w[2] = {s, r};
  collie_result_t rc = collie__net_wait(c->net, w, 2, c->deadline_ns);
  if (rc != COLLIE_SUCCESS || *status == 0) return rc;
  return collie__sendrecv(c, -1, NULL, 0, q, (char *)c->recvbuf + (size_t)q * blk, blk,
                          LIN_STEP_DATA);
}

static collie_result_t
lin_gather_push_root(struct collie__call *c, size_t blk)
{
  int p = c->size, posted = 0, retired = 0, k;
  uint64_t base = (uint64_t)(uintptr_t)c->recvbuf, status[LIN_WINDOW];
  struct collie__req s[LIN_WINDOW], r[LIN_WINDOW];
  int from[LIN_WINDOW];
  collie_result_t rc;
  for (int i = 1; i < p; i++) {
    if (posted - retired == LIN_WINDOW) {
      k = retired++ % LIN_WINDOW;
      if ((rc = lin_push_retire(c, &s[k], &r[k], &status[k], from[k], blk)) != COLLIE_SUCCESS)
        return rc;
    }
    k = posted++ % LIN_WINDOW;
    from[k] = collie__root_abs(c, i);
    if ((rc = collie__call_irecv(c, from[k], &status[k], sizeof(status[k]),
                                 collie__call_slot(c, LIN_STEP_STATUS), &r[k])) != COLLIE_SUCCESS ||
        (rc = collie__call_isend(c, from[k], &base, sizeof(base),
                                 collie__call_slot(c, LIN_STEP_ADDR), &s[k])) != COLLIE_SUCCESS)
      return rc;
  }
  char *own = (char *)c->recvbuf + (size_t)c->root * blk;
  if (c->sendbuf != own) collie__call_copy(c, own, c->sendbuf, blk);
  for (; retired < posted; retired++) {
    k = retired % LIN_WINDOW;
    if ((rc = lin_push_retire(c, &s[k], &r[k], &status[k], from[k], blk)) != COLLIE_SUCCESS)
      return rc;
  }
  return COLLIE_SUCCESS;
}

static collie_result_t
lin_gather_push_peer(struct collie__call *c, size_t blk)
{
  static _Atomic int told; /* say once per process why writing failed */
  uint64_t base, status = 0;
  collie_result_t rc =
      collie__sendrecv(c, -1, NULL, 0, c->root, &base, sizeof(base), LIN_STEP_ADDR);
  if (rc != COLLIE_SUCCESS) return rc;
  rc = collie__net_write_peer(c->net, collie__call_peer(c, c->root), base + (uint64_t)c->rank * blk,
                              c->sendbuf, blk);
  if (rc != COLLIE_SUCCESS) {
    status = (uint64_t)rc;
    if (!atomic_exchange_explicit(&told, 1, memory_order_relaxed))
      COLLIE_INFO("COLL", "gather: blocks go to the root as messages: %s", collie__err_msg());
  }
  rc = collie__sendrecv(c, c->root, &status, sizeof(status), -1, NULL, 0, LIN_STEP_STATUS);
  if (rc != COLLIE_SUCCESS || status == 0) return rc;
  return collie__send_direct(c, c->root, c->sendbuf, blk, LIN_STEP_DATA);
}

static collie_result_t
lin_gather_run(struct collie__call *c)
{
  size_t blk = c->count * c->esize;
  if (blk == 0) return COLLIE_SUCCESS; /* every rank passed count 0 */
  if (c->all_shm && blk >= LIN_PUSH_MIN && collie__net_single_copy(c->net))
    return c->rank == c->root ? lin_gather_push_root(c, blk) : lin_gather_push_peer(c, blk);
  if (c->rank != c->root) return collie__send_direct(c, c->root, c->sendbuf, blk, 0);
  return lin_root(c, 0, c->recvbuf, blk, blk, c->sendbuf,
                  (char *)c->recvbuf + (size_t)c->root * blk);
}

/* COLLIE_ONE_LINK: on several hosts every message goes to or from the root,
 * so the root's link carries what its host does not hold; the other links
 * carry less at the same time, so their ranks do not share it. */
const struct collie__algo collie__algo_gather_linear = {
    "linear", COLLIE_ALGO_LINEAR, COLLIE_KIND_GATHER, COLLIE_ONE_LINK, lin_cost, lin_gather_run};

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
    "linear", COLLIE_ALGO_LINEAR, COLLIE_KIND_SCATTER, COLLIE_ONE_LINK, lin_cost, lin_scatter_run};

/* ---- broadcast ----
 *
 * The root sends the whole buffer to every rank at once. Eager sends return
 * as soon as the bytes sit in the peer's ring, so the root never waits for a
 * receiver to run, and no rank forwards: with more ranks than cores, where a
 * tree's every level waits for its ranks to get a core in turn, this is the
 * fastest broadcast of small buffers. Cost: the last receiver's handoff,
 * plus LIN_SEND_FRACTION of one per further send (the root only posts
 * them), plus (p-1) S beta at the root. */

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
  /* With more ranks than cores the receivers' copies (single copies from 64
   * KiB) run on all the cores at once, not one after the other at the root. */
  double lanes = m->cores > 0 ? (m->cores < p - 1 ? m->cores : p - 1) : 1;
  return lin_alpha(c, m) + (p - 1) * S * m->beta_us / lanes;
}

const struct collie__algo collie__algo_broadcast_linear = {
    "linear", COLLIE_ALGO_LINEAR, COLLIE_KIND_BROADCAST, 0, lin_broadcast_cost, lin_broadcast_run};

/* ---- allreduce ----
 *
 * Every rank sends its input to every other at once and reduces the p
 * inputs itself, in rank order, so that every rank computes the same bits:
 * one round of latency where recursive doubling pays log2 p, for (p-1) S
 * bytes a rank. It wins for small buffers between hosts far apart, where a
 * round is a network latency (4 hosts 1 ms apart: one crossing instead of
 * two), and inside the hierarchical allreduce's phase between hosts. Sends
 * and receives are posted LIN_WINDOW / 2 peers at a time, peers taken from
 * rank+1 on, so that no rank is everyone's first. */

/* The one round both reductions share: every rank q's `bytes` into
 * in + q * bytes, this rank's sendbuf + q * stride out to q (stride 0: the
 * whole input to everyone), LIN_WINDOW / 2 peers at a time from rank+1 on;
 * then own (this rank's contribution) in place of its slot, and the p
 * inputs reduced into recvbuf in rank order, so that every rank computes
 * the same bits. Every send has read sendbuf before recvbuf (in place, the
 * same memory) is written. */
static collie_result_t
lin_reduce_round(struct collie__call *c, char *in, size_t bytes, size_t stride, const char *own)
{
  int p = c->size;
  uint64_t slot = collie__call_slot(c, 0);
  struct collie__req req[LIN_WINDOW];
  struct collie__req *w[LIN_WINDOW];
  for (int i = 1; i < p;) {
    int n = 0;
    for (; i < p && n + 2 <= LIN_WINDOW; i++) {
      int q = (c->rank + i) % p;
      const char *out = (const char *)c->sendbuf + (size_t)q * stride;
      collie_result_t rc = collie__call_irecv(c, q, in + (size_t)q * bytes, bytes, slot, &req[n]);
      if (rc == COLLIE_SUCCESS) w[n] = &req[n], n++;
      if (rc == COLLIE_SUCCESS) rc = collie__call_isend(c, q, out, bytes, slot, &req[n]);
      if (rc != COLLIE_SUCCESS) return rc;
      w[n] = &req[n], n++;
    }
    collie_result_t rc = collie__net_wait(c->net, w, n, c->deadline_ns);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  collie__call_copy(c, in + (size_t)c->rank * bytes, own, bytes);
  collie__call_copy(c, c->recvbuf, in, bytes);
  size_t count = bytes / c->esize;
  for (int q = 1; q < p; q++) c->reduce(c->recvbuf, in + (size_t)q * bytes, count);
  if (c->op == COLLIE_AVG) collie__reduce_avg_finish(c->recvbuf, count, c->dtype, p);
  return COLLIE_SUCCESS;
}

static collie_result_t
lin_allreduce_run(struct collie__call *c)
{
  size_t bytes = c->count * c->esize;
  if (bytes == 0) return COLLIE_SUCCESS;
  if (c->size == 1) {
    if (c->sendbuf != c->recvbuf) collie__call_copy(c, c->recvbuf, c->sendbuf, bytes);
    return COLLIE_SUCCESS;
  }
  char *in = collie__scratch_get(c->scratch, (size_t)c->size * bytes);
  if (!in) return COLLIE_SYSTEM_ERROR;
  return lin_reduce_round(c, in, bytes, 0, c->sendbuf);
}

/* One round of messages of b bytes, one to and one from each peer: each
 * message past the first adds its handling (collie__overlap_us; at 3 and 4
 * ranks on one host over tcp, 2 cores, where alpha is itself the handling,
 * the allreduce measured 31-62 and 46-60 us against recursive doubling's
 * 25-33 and 37-47), and the reduction of p inputs where recursive doubling
 * streams them is one more; 2 ranks: recursive doubling's one exchange.
 * The busiest host's link carries its ranks' messages to every rank off it
 * (COLLIE_ONE_LINK); every rank reduces p-1 inputs. */
static double
lin_round_cost(const struct collie__call *c, const struct collie__model *m, double b)
{
  double p = c->size, link = (p - 1) * b;
  const struct collie__topo *t = c->topo;
  if (t && t->nhosts > 1 && !c->group && t->size == c->size)
    link = t->max_local * (p - t->max_local) * b;
  double extra = p > 2 ? 2 * (p - 2) + 1 : 0;
  return collie__overlap_us(m, 1 + extra, 0) + link * m->beta_us + (p - 1) * b * m->gamma_us;
}

static double
lin_allreduce_cost(const struct collie__call *c, const struct collie__model *m)
{
  return lin_round_cost(c, m, (double)collie__call_bytes(c));
}

const struct collie__algo collie__algo_allreduce_linear = {"linear",
                                                           COLLIE_ALGO_LINEAR,
                                                           COLLIE_KIND_ALLREDUCE,
                                                           COLLIE_NEEDS_REDUCE | COLLIE_ONE_LINK,
                                                           lin_allreduce_cost,
                                                           lin_allreduce_run};

/* ---- reduce_scatter ----
 *
 * Every rank sends block q of its input straight to rank q, all at once,
 * and reduces the p blocks it gets for its own in rank order: one round of
 * latency where recursive halving pays log2 p, and the ring's (p-1)/p S
 * bytes a rank. It wins where a round is a network's latency, and it is
 * the phase between hosts the hierarchical reduce_scatter takes over slow
 * links (4 x 2 test-bed hosts 1 ms apart: recursive halving's two
 * crossings took 2.2 ms). In place, recvbuf is this rank's own block,
 * which the round keeps before writing it. */
static collie_result_t
lin_reduce_scatter_run(struct collie__call *c)
{
  size_t blk = c->count * c->esize;
  const char *own = (const char *)c->sendbuf + (size_t)c->rank * blk;
  if (blk == 0) return COLLIE_SUCCESS;
  if (c->size == 1) {
    if ((const char *)c->recvbuf != own) collie__call_copy(c, c->recvbuf, own, blk);
    return COLLIE_SUCCESS;
  }
  char *in = collie__scratch_get(c->scratch, (size_t)c->size * blk);
  if (!in) return COLLIE_SYSTEM_ERROR;
  return lin_reduce_round(c, in, blk, blk, own);
}

/* As the allreduce's, with a block (S/p) where the allreduce sends S. */
static double
lin_reduce_scatter_cost(const struct collie__call *c, const struct collie__model *m)
{
  return lin_round_cost(c, m, (double)collie__call_bytes(c) / c->size);
}

const struct collie__algo collie__algo_reduce_scatter_linear = {"linear",
                                                                COLLIE_ALGO_LINEAR,
                                                                COLLIE_KIND_REDUCE_SCATTER,
                                                                COLLIE_NEEDS_REDUCE |
                                                                    COLLIE_ONE_LINK,
                                                                lin_reduce_scatter_cost,
                                                                lin_reduce_scatter_run};
