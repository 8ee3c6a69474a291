/*
 * pairwise.c - pairwise-exchange alltoall and alltoallv.
 *
 * Every rank has one block for every rank. The exchange runs in p global
 * steps s = 0..p-1; at step s rank r swaps blocks with partner q = (s - r)
 * mod p: it sends its block for q and receives q's block for r. The pairing
 * is symmetric (q's partner at step s is r), so each step is a perfect
 * matching and every rank talks to every other rank exactly once, for any p,
 * power of two or not. A rank whose partner at a step is itself (2r = s mod p,
 * once per rank) has nothing to do at that step: its own block is copied
 * locally, never sent through the net. So each rank sends p-1 messages and
 * receives p-1, as in the textbook "send to r+s, receive from r-s" schedule.
 *
 * Why swaps rather than the shift schedule: a swap touches one block slot,
 * in both directions, with one peer. That is what makes the in-place form
 * cheap. With sendbuf == recvbuf the block for q and the block from q share
 * a slot, so before the receive into a chunk of that slot is posted, the
 * chunk is copied to a staging slot and sent from there. Staging is bounded
 * by the window below, whatever the message size. (With the shift schedule
 * a block received at step s is the one still to be sent at step p-s, so
 * half of the buffer would have to be staged.) Both forms post the same
 * messages in the same order, so ranks may even disagree on in-place.
 *
 * Pipelining. A block is cut into chunks of at most PW_CHUNK bytes (two
 * ranks, which run a single swap, send it whole: collie__swap_chunk); a piece
 * is (step, chunk), with a send and/or a receive. Up to PW_WINDOW pieces are
 * in flight: the oldest is retired before a new one is posted. Pieces are
 * posted in the same global order on every rank and both partners of a step
 * count its pieces alike (the larger of the two directions' chunk counts),
 * so the oldest unfinished piece in the whole job is always posted on both
 * sides: the bounded window cannot deadlock. Every message is sent even when
 * empty, so a count mismatch between two ranks is a clear length error, not
 * a hang.
 *
 * alltoallv. Per-peer counts and displacements come from the call's four
 * arrays (elements). The exchange is the same; only block geometry differs,
 * and both ends of a message agree on its length (sendcounts[q] at r is
 * recvcounts[r] at q), hence on its chunks. In place (sendbuf == recvbuf),
 * the send and receive regions may overlap in any way, so the whole span of
 * the send side is staged first (scratch as large as that span).
 *
 * Costs (S = nccl-tests size = p * count * esize for alltoall), the p-1
 * exchanges priced as the window posts them (collie__overlap_us: p-1 alpha
 * on one host or a fast network, one latency a window and a handling per
 * other exchange where alpha is a slow network's):
 *   alltoall   overlap(p-1) + (p-1)/p S beta; on several hosts the busiest
 *              host's link: L (p-L)/p S beta
 *   alltoallv  overlap(p-1): the byte term would need the counts, which are
 *              rank-local (every rank must compute the same estimate), and
 *              this is the only alltoallv algorithm, so the estimate serves
 *              the decision log only.
 * Chunking adds messages only above PW_CHUNK per block, where the beta term
 * dominates; the in-place staging copy is not modelled (the estimate may not
 * depend on buffers).
 */
#include <string.h>

#include "coll/coll.h"
#include "coll/topo.h"
#include "util/error.h"
#include "util/util.h"

#define PW_CHUNK ((size_t)256 * 1024)
#define PW_WINDOW 8

/* One piece in flight: its requests (NULL when that direction has no chunk). */
struct pw_piece {
  struct collie__req sreq, rreq;
  struct collie__req *w[2];
};

/* Where the exchange reads and writes. Send block q starts at
 * sbase + (soff(q) - sshift); stage is NULL, or PW_WINDOW staging chunks for
 * the in-place alltoall (send chunks are copied there before the receive into
 * the same bytes is posted). */
struct pw_bufs {
  const char *sbase;
  size_t sshift;
  char *rbase;
  char *stage;
  size_t stage_chunk;
};

/* Byte offset and length of block q on the send (send != 0) or receive side. */
static void
pw_block(const struct collie__call *c, int send, int q, size_t *off, size_t *len)
{
  if (c->kind == COLLIE_KIND_ALLTOALLV) {
    *off = (send ? c->sdispls[q] : c->rdispls[q]) * c->esize;
    *len = (send ? c->sendcounts[q] : c->recvcounts[q]) * c->esize;
  } else {
    *len = c->count * c->esize;
    *off = (size_t)q * *len;
  }
}

static size_t
pw_nchunks(size_t len, size_t chunk)
{
  return len ? (len + chunk - 1) / chunk : 1;
}

static collie_result_t
pw_retire(struct collie__call *c, struct pw_piece *pc)
{
  return collie__net_wait(c->net, pc->w, 2, c->deadline_ns);
}

/* The p-1 swaps, windowed. Own block not included. */
static collie_result_t
pw_exchange(struct collie__call *c, const struct pw_bufs *b)
{
  int p = c->size, r = c->rank;
  struct pw_piece win[PW_WINDOW];
  size_t posted = 0, retired = 0;
  collie_result_t rc;

  for (int s = 0; s < p; s++) {
    int q = ((s - r) % p + p) % p;
    if (q == r) continue;
    size_t so, sl, ro, rl;
    pw_block(c, 1, q, &so, &sl);
    pw_block(c, 0, q, &ro, &rl);
    size_t chunk = collie__swap_chunk(c, sl, rl, PW_CHUNK);
    size_t ns = pw_nchunks(sl, chunk), nr = pw_nchunks(rl, chunk), n = ns > nr ? ns : nr;
    uint64_t slot = collie__call_slot(c, (uint32_t)s);
    for (size_t k = 0; k < n; k++) {
      if (posted - retired == PW_WINDOW) {
        if ((rc = pw_retire(c, &win[retired % PW_WINDOW])) != COLLIE_SUCCESS) return rc;
        retired++;
      }
      struct pw_piece *pc = &win[posted % PW_WINDOW];
      size_t o = k * chunk;
      pc->w[0] = pc->w[1] = NULL;
      const char *src = NULL;
      size_t slen = 0;
      if (k < ns && sl) {
        slen = sl - o < chunk ? sl - o : chunk;
        src = b->sbase + (so - b->sshift) + o;
        if (b->stage) {
          /* The receive below overwrites these bytes: send a copy. */
          char *st = b->stage + (posted % PW_WINDOW) * b->stage_chunk;
          collie__call_copy_small(c, st, src, slen);
          src = st;
        }
      }
      if (k < nr) {
        size_t rlen = rl - o < chunk ? rl - o : chunk;
        char *dst = rlen ? b->rbase + ro + o : NULL;
        if ((rc = collie__call_irecv(c, q, dst, rlen, slot, &pc->rreq)) != COLLIE_SUCCESS)
          return rc;
        pc->w[0] = &pc->rreq;
      }
      if (k < ns) {
        if ((rc = collie__call_isend(c, q, src, slen, slot, &pc->sreq)) != COLLIE_SUCCESS)
          return rc;
        pc->w[1] = &pc->sreq;
      }
      posted++;
    }
  }
  for (; retired < posted; retired++)
    if ((rc = pw_retire(c, &win[retired % PW_WINDOW])) != COLLIE_SUCCESS) return rc;
  return COLLIE_SUCCESS;
}

/* ---- alltoall ---- */

static collie_result_t
pw_alltoall_run(struct collie__call *c)
{
  size_t blk = c->count * c->esize, own = (size_t)c->rank * blk;
  int inplace = c->sendbuf == c->recvbuf;
  if (blk == 0) return COLLIE_SUCCESS; /* every rank passed count 0 */
  if (!inplace) collie__call_copy(c, (char *)c->recvbuf + own, (const char *)c->sendbuf + own, blk);
  if (c->size == 1) return COLLIE_SUCCESS;
  struct pw_bufs b = {c->sendbuf, 0, c->recvbuf, NULL, 0};
  if (inplace) {
    /* Two ranks swap one whole block (collie__swap_chunk): one staging slot of it. */
    b.stage_chunk = c->size == 2 || blk < PW_CHUNK ? blk : PW_CHUNK;
    size_t slots = c->size == 2 ? 1 : PW_WINDOW;
    if (!(b.stage = collie__scratch_get(c->scratch, slots * b.stage_chunk)))
      return COLLIE_SYSTEM_ERROR;
  }
  return pw_exchange(c, &b);
}

/* On several hosts (COLLIE_ONE_LINK) only the blocks for other hosts
 * cross, every rank of the largest host sending its own at once over the
 * host's link: L (p-L)/p S. Priced at (p-1)/p S on every rank's link share,
 * the block for each local peer counted as network bytes, the model put
 * pairwise 1.5x too dear at 2 x 2 hosts and picked the hierarchical form,
 * 0.67-0.87x as fast at 2-16 MiB on the 10 Gbit/s test bed. */
static double
pw_alltoall_cost(const struct collie__call *c, const struct collie__model *m)
{
  double p = c->size, S = (double)collie__call_bytes(c), link = (p - 1) / p * S;
  const struct collie__topo *t = c->topo;
  if (t && t->nhosts > 1 && !c->group && t->size == c->size)
    link = t->max_local * (p - t->max_local) / p * S;
  return collie__overlap_us(m, p - 1, PW_WINDOW) + link * m->beta_us;
}

const struct collie__algo collie__algo_alltoall_pairwise = {
    "pairwise",      COLLIE_ALGO_PAIRWISE, COLLIE_KIND_ALLTOALL,
    COLLIE_ONE_LINK, pw_alltoall_cost,     pw_alltoall_run};

/* ---- alltoallv ---- */

static collie_result_t
pw_alltoallv_run(struct collie__call *c)
{
  int p = c->size, r = c->rank;
  size_t es = c->esize;
  if (c->sendcounts[r] != c->recvcounts[r])
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "sendcounts[%d] = %zu differs from recvcounts[%d] = %zu (a rank's block "
                       "to itself)",
                       r, c->sendcounts[r], r, c->recvcounts[r]);
  struct pw_bufs b = {c->sendbuf, 0, c->recvbuf, NULL, 0};
  if (c->sendbuf == c->recvbuf) {
    /* Stage the span of every nonempty send block: receives may land anywhere in it. */
    size_t lo = SIZE_MAX, hi = 0;
    for (int q = 0; q < p; q++) {
      if (!c->sendcounts[q]) continue;
      if (c->sdispls[q] < lo) lo = c->sdispls[q];
      if (c->sdispls[q] + c->sendcounts[q] > hi) hi = c->sdispls[q] + c->sendcounts[q];
    }
    if (hi > 0) {
      char *stage = collie__scratch_get(c->scratch, (hi - lo) * es);
      if (!stage) return COLLIE_SYSTEM_ERROR;
      collie__call_copy_small(c, stage, (const char *)c->sendbuf + lo * es, (hi - lo) * es);
      b.sbase = stage;
      b.sshift = lo * es;
    }
  }
  size_t own = c->sendcounts[r] * es;
  if (own) {
    const char *src = b.sbase + (c->sdispls[r] * es - b.sshift);
    char *dst = (char *)c->recvbuf + c->rdispls[r] * es;
    if (src != dst) collie__call_copy(c, dst, src, own);
  }
  if (p == 1) return COLLIE_SUCCESS;
  return pw_exchange(c, &b);
}

static double
pw_alltoallv_cost(const struct collie__call *c, const struct collie__model *m)
{
  return collie__overlap_us(m, c->size - 1, PW_WINDOW);
}

const struct collie__algo collie__algo_alltoallv_pairwise = {
    "pairwise", COLLIE_ALGO_PAIRWISE, COLLIE_KIND_ALLTOALLV,
    0,          pw_alltoallv_cost,    pw_alltoallv_run};
