/*
 * composite.c - collectives built from two phases of other families.
 *
 * broadcast = scatter + allgather (van de Geijn). The buffer is cut into p
 * blocks (collie__block_off/len, so fewer elements than ranks leaves some
 * blocks empty). The root scatters them down the binomial tree (tree.c's
 * block phase, every rank keeping the whole buffer so blocks land in place
 * and no staging is needed), rank q ending with block q; then a ring
 * allgather passes the blocks around (step s: rank r sends block r - s to
 * r + 1 and receives block r - s - 1 from r - 1) until everyone has all of
 * them. The root already holds every block, so it receives nothing in the
 * ring and its left neighbour sends it nothing: the root forwards from its
 * own copy what it would have received, which saves (p-1)/p S of copying
 * and makes p = 2 move S, as the tree does. Empty blocks are not sent
 * (both ends know the sizes). The root sends 2 (p-1)/p S instead of the
 * tree's ceil(log2 p) S, and no link carries more than (p-1)/p S per phase:
 *   cost (ceil(log2 p) + p - 1) alpha + 2 (p-1)/p S beta.
 * Better than the tree for large buffers on several ranks when links, not
 * the memory system, are the limit; its p-1 latency steps make it lose for
 * small ones.
 *
 * reduce = reduce-scatter + gather (Rabenseifner's reduce). The ring
 * reduce-scatter phase leaves rank q with block q reduced over all ranks
 * (each rank divides its own block for AVG, so every element is divided
 * exactly once), then the binomial gather brings the blocks to the root.
 * The ring reduces in place, so the input is first copied into a working
 * buffer: the root's recvbuf (free when in place), scratch on the others
 * (non-roots never touch recvbuf, which may be NULL).
 *   cost (p-1) alpha + (p-1)/p S (beta + gamma) + S beta / 2 (the copy, as
 *        ring.c's reduce_scatter counts it) + ceil(log2 p) alpha
 *        + (p-1)/p S beta.
 * Every rank reduces only (p-1)/p S instead of the root reducing
 * ceil(log2 p) S in the tree: the choice for large buffers where reducing,
 * not copying, is the limit (on the 2-core reference machine the tree was
 * faster at every size measured).
 *
 * Steps: the first phase uses steps 0.., the second starts after it, so the
 * two never share a slot.
 */
#include <string.h>

#include "coll/coll.h"
#include "coll/coll_int.h"
#include "util/error.h"
#include "util/util.h"

/* ---- broadcast ---- */

static collie_result_t
composite_bcast_run(struct collie__call *c)
{
  int p = c->size, r = c->rank;
  int right = (r + 1) % p, left = (r - 1 + p) % p;
  size_t es = c->esize;
  char *buf = c->recvbuf;
  collie_result_t rc;
  if (p == 1 || c->count == 0) return COLLIE_SUCCESS;
  /* Scatter: steps 0 and 1; allgather: steps 2 .. p. */
  if ((rc = collie__tree_scatter_phase(c, c->count, buf, 0, 0)) != COLLIE_SUCCESS) return rc;
  for (int s = 0; s < p - 1; s++) {
    int sb = ((r - s) % p + p) % p, rb = (sb - 1 + p) % p;
    size_t slen = collie__block_len(c->count, p, sb) * es;
    size_t rlen = collie__block_len(c->count, p, rb) * es;
    int to = right != c->root && slen ? right : -1, from = r != c->root && rlen ? left : -1;
    rc = collie__sendrecv(c, to, buf + collie__block_off(c->count, p, sb) * es, slen, from,
                          buf + collie__block_off(c->count, p, rb) * es, rlen, 2 + (uint32_t)s);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  return COLLIE_SUCCESS;
}

static double
composite_bcast_cost(const struct collie__call *c, const struct collie__model *m)
{
  double p = c->size, S = (double)collie__call_bytes(c);
  double t = (collie__log2_ceil(c->size) + p - 1) * m->alpha_us + 2 * (p - 1) / p * S * m->beta_us;
  return collie__oversub_cost(c, m, t, 2 * (p - 1));
}

const struct collie__algo collie__algo_broadcast_scatter_allgather = {
    "scatter_allgather",   COLLIE_ALGO_SCATTER_ALLGATHER,
    COLLIE_KIND_BROADCAST, 0,
    composite_bcast_cost,  composite_bcast_run};

/* ---- reduce ---- */

static collie_result_t
composite_reduce_run(struct collie__call *c)
{
  int p = c->size;
  size_t bytes = c->count * c->esize;
  const char *in = c->sendbuf;
  char *work, *tmp;
  collie_result_t rc;
  if (p == 1) {
    if (bytes && c->recvbuf != in) collie__call_copy(c, c->recvbuf, in, bytes);
    if (bytes && c->op == COLLIE_AVG) collie__reduce_avg_finish(c->recvbuf, c->count, c->dtype, p);
    return COLLIE_SUCCESS;
  }
  if (bytes == 0) return COLLIE_SUCCESS;
  size_t tmpb = collie__ring_staging_bytes(c, c->count);
  if (c->rank == c->root) {
    if (!(tmp = collie__scratch_get(c->scratch, tmpb))) return COLLIE_SYSTEM_ERROR;
    work = c->recvbuf;
  } else {
    size_t wb = (bytes + 63) & ~(size_t)63;
    if (!(work = collie__scratch_get(c->scratch, wb + tmpb))) return COLLIE_SYSTEM_ERROR;
    tmp = work + wb;
  }
  if (work != in) collie__call_copy_small(c, work, in, bytes);
  /* Reduce-scatter: steps 0 .. p-2; rank r ends owning block r. */
  if ((rc = collie__ring_reduce_scatter_phase(c, work, c->count, tmp, -1)) != COLLIE_SUCCESS)
    return rc;
  if (c->op == COLLIE_AVG)
    collie__reduce_avg_finish(work + collie__block_off(c->count, p, c->rank) * c->esize,
                              collie__block_len(c->count, p, c->rank), c->dtype, p);
  /* Gather: steps p-1 and p. */
  return collie__tree_gather_phase(c, c->count, work, 0, (uint32_t)(p - 1));
}

static double
composite_reduce_cost(const struct collie__call *c, const struct collie__model *m)
{
  double p = c->size, S = (double)collie__call_bytes(c);
  return (p - 1 + collie__log2_ceil(c->size)) * m->alpha_us +
         (p - 1) / p * S * (2 * m->beta_us + m->gamma_us) + S * m->beta_us / 2;
}

const struct collie__algo collie__algo_reduce_reduce_scatter_gather = {
    "reduce_scatter_gather", COLLIE_ALGO_REDUCE_SCATTER_GATHER,
    COLLIE_KIND_REDUCE,      COLLIE_NEEDS_REDUCE,
    composite_reduce_cost,   composite_reduce_run};
