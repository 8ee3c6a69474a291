/*
 * ring.c - the ring family: reduce-scatter, allgather(v) and allreduce
 * around the ring rank -> rank+1.
 *
 * A buffer is cut into p blocks. In a reduce-scatter step s (0 <= s < p-1)
 * every rank sends one block to its right neighbour and receives the next one
 * from its left, combining it into its own copy; after p-1 steps each rank
 * holds one block reduced over all ranks. In an allgather step every rank
 * forwards the block it received last, so after p-1 steps every rank has
 * every block. Which block a rank finishes with is a rotation ("shift"):
 * rank r owns block (r + 1 + shift) mod p, so allreduce uses shift 0 and
 * reduce_scatter / allgather use shift -1 (rank r owns block r, as the API
 * wants).
 *
 * Each block transfer is cut into chunks of at most RING_CHUNK bytes and
 * double-buffered: while chunk c is on the wire, chunk c-1 is being reduced,
 * so copying and reducing overlap and the staging space stays at two chunks.
 *
 * Costs (alpha latency, beta per byte, gamma per reduced byte, S the size in
 * nccl-tests terms, p ranks):
 *   allreduce       2(p-1) alpha + 2 (p-1)/p S beta + (p-1)/p S gamma
 *   reduce_scatter  (p-1) alpha + (p-1)/p S (beta + gamma) + S beta/2 (staging copy)
 *   allgather(v)    (p-1) alpha + (p-1)/p S beta
 * Bandwidth-optimal for large S; the linear latency term makes it a poor
 * choice for small messages on many ranks, where the recursive families win.
 * Correct for any p >= 1 and any count, including fewer elements than ranks
 * (empty blocks travel as zero-length messages, which keeps every rank's step
 * count equal).
 */
#include <string.h>

#include "coll/coll.h"
#include "coll/coll_int.h"
#include "util/error.h"
#include "util/util.h"

#define RING_CHUNK ((size_t)256 * 1024)

/* Byte offset and length of block i of the call's ring buffer. */
static void
ring_block(const struct collie__call *c, size_t total, int i, size_t *off, size_t *len)
{
  if (c->kind == COLLIE_KIND_ALLGATHERV) {
    *off = c->rdispls[i] * c->esize;
    *len = c->recvcounts[i] * c->esize;
  } else {
    *off = collie__block_off(total, c->size, i) * c->esize;
    *len = collie__block_len(total, c->size, i) * c->esize;
  }
}

/* An allgather's own block: sent straight from the caller's sendbuf in the
 * first step, and copied into place while that step's first chunk moves
 * (one rank's copy overlaps the peer's read; copying first made the 2-rank
 * exchange wait for it). */
struct ring_own {
  const char *src; /* the rank's input: the bytes of block sb */
  char *dst;       /* where they belong in buf (== src in place) */
  size_t len;
};

/* Sends block sb and receives block rb for one step; when tmp is not NULL the
 * received bytes are combined into buf, else they land in buf directly. With
 * own, block sb's bytes come from own->src, and own is copied into place
 * after the first chunk is posted. */
static collie_result_t
ring_step(struct collie__call *c, char *buf, size_t total, char *tmp, int sb, int rb, uint32_t step,
          const struct ring_own *own)
{
  int right = (c->rank + 1) % c->size, left = (c->rank + c->size - 1) % c->size;
  size_t es = c->esize, s_off, s_len, r_off, r_len;
  ring_block(c, total, sb, &s_off, &s_len);
  ring_block(c, total, rb, &r_off, &r_len);
  /* Both sides chunk a block by the same rule, and a chunk holds whole
   * elements. Chunks bound the staging of a reduction and let a block be
   * forwarded while it still arrives; without staging, two ranks send it
   * whole (collie__swap_chunk). */
  size_t chunk = RING_CHUNK - RING_CHUNK % es;
  if (!tmp) chunk = collie__swap_chunk(c, s_len, r_len, chunk);
  size_t ns = s_len ? (s_len + chunk - 1) / chunk : 1, nr = r_len ? (r_len + chunk - 1) / chunk : 1;
  size_t nmax = ns > nr ? ns : nr;
  struct collie__req sreq[2], rreq[2];
  struct collie__req *w[2];
  uint64_t slot = collie__call_slot(c, step);
  const char *sbase = own ? own->src : buf + s_off;
  collie_result_t rc;

  for (size_t k = 0; k <= nmax; k++) {
    if (k < nmax) {
      if (k < nr) {
        size_t o = k * chunk, l = r_len - o < chunk ? r_len - o : chunk;
        void *dst = tmp ? tmp + (k & 1) * chunk : buf + r_off + o;
        if ((rc = collie__call_irecv(c, left, dst, l, slot, &rreq[k & 1])) != COLLIE_SUCCESS)
          return rc;
      }
      if (k < ns) {
        size_t o = k * chunk, l = s_len - o < chunk ? s_len - o : chunk;
        rc = collie__call_isend(c, right, sbase + o, l, slot, &sreq[k & 1]);
        if (rc != COLLIE_SUCCESS) return rc;
      }
    }
    if (k == 0) {
      if (own && own->len && own->dst != own->src)
        collie__call_copy(c, own->dst, own->src, own->len);
      continue;
    }
    /* Finish chunk k-1 while chunk k moves. */
    size_t j = k - 1;
    w[0] = j < nr ? &rreq[j & 1] : NULL;
    w[1] = j < ns ? &sreq[j & 1] : NULL;
    if ((rc = collie__net_wait(c->net, w, 2, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
    if (tmp && j < nr) {
      size_t o = j * chunk, l = r_len - o < chunk ? r_len - o : chunk;
      c->reduce(buf + r_off + o, tmp + (j & 1) * chunk, l / es);
    }
  }
  return COLLIE_SUCCESS;
}

/* Staging for the reduce-scatter phase: two chunks, or two of the largest block. */
static char *
ring_tmp(struct collie__call *c, size_t total)
{
  size_t chunk = RING_CHUNK - RING_CHUNK % c->esize;
  size_t maxblk = collie__block_len(total, c->size, 0) * c->esize;
  return collie__scratch_get(c->scratch, 2 * (maxblk < chunk ? maxblk : chunk) + 64);
}

/* p-1 reduce-scatter steps over buf (total elements, in place). */
static collie_result_t
ring_reduce_scatter_phase(struct collie__call *c, char *buf, size_t total, char *tmp, int shift)
{
  int p = c->size, r = c->rank;
  for (int s = 0; s < p - 1; s++) {
    int sb = ((r - s + shift) % p + 2 * p) % p, rb = (sb - 1 + p) % p;
    collie_result_t rc = ring_step(c, buf, total, tmp, sb, rb, (uint32_t)s, NULL);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  return COLLIE_SUCCESS;
}

/* p-1 allgather steps over buf; rank r starts owning block (r + 1 + shift)
 * mod p, whose bytes are at own->src when own is not NULL (see ring_own). */
static collie_result_t
ring_allgather_phase(struct collie__call *c, char *buf, size_t total, int shift, uint32_t step0,
                     const struct ring_own *own)
{
  int p = c->size, r = c->rank;
  if (p == 1 && own && own->len && own->dst != own->src)
    collie__call_copy(c, own->dst, own->src, own->len);
  for (int s = 0; s < p - 1; s++) {
    int sb = ((r + 1 + shift - s) % p + 2 * p) % p, rb = (sb - 1 + p) % p;
    collie_result_t rc =
        ring_step(c, buf, total, NULL, sb, rb, step0 + (uint32_t)s, s == 0 ? own : NULL);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  return COLLIE_SUCCESS;
}

/* ---- allreduce ---- */

static collie_result_t
ring_allreduce_run(struct collie__call *c)
{
  int p = c->size;
  char *buf = c->recvbuf;
  size_t bytes = c->count * c->esize;
  collie_result_t rc;
  if (c->sendbuf != c->recvbuf && bytes) collie__call_copy(c, buf, c->sendbuf, bytes);
  if (p > 1) {
    char *tmp = ring_tmp(c, c->count);
    if (!tmp) return COLLIE_SYSTEM_ERROR;
    if ((rc = ring_reduce_scatter_phase(c, buf, c->count, tmp, 0)) != COLLIE_SUCCESS) return rc;
  }
  if (c->op == COLLIE_AVG) {
    int own = (c->rank + 1) % p;
    collie__reduce_avg_finish(buf + collie__block_off(c->count, p, own) * c->esize,
                              collie__block_len(c->count, p, own), c->dtype, p);
  }
  return ring_allgather_phase(c, buf, c->count, 0, (uint32_t)(p - 1), NULL);
}

static double
ring_allreduce_cost(const struct collie__call *c, const struct collie__model *m)
{
  double p = c->size, S = (double)collie__call_bytes(c);
  return 2 * (p - 1) * m->alpha_us + 2 * (p - 1) / p * S * m->beta_us +
         (p - 1) / p * S * m->gamma_us;
}

const struct collie__algo collie__algo_allreduce_ring = {"ring",
                                                         COLLIE_ALGO_RING,
                                                         COLLIE_KIND_ALLREDUCE,
                                                         COLLIE_NEEDS_REDUCE | COLLIE_ONE_LINK,
                                                         ring_allreduce_cost,
                                                         ring_allreduce_run};

/* ---- reduce_scatter ---- */

/* Reduces a staged copy of the whole input in place, then copies out block
 * `rank`: the input is const, and one copy keeps the step loop shared with
 * allreduce. */
static collie_result_t
ring_reduce_scatter_run(struct collie__call *c)
{
  int p = c->size;
  size_t total = c->count * (size_t)p, blk = c->count * c->esize;
  const char *own_in = (const char *)c->sendbuf + (size_t)c->rank * blk;
  if (p == 1) {
    if (blk && c->recvbuf != (void *)own_in) collie__call_copy(c, c->recvbuf, own_in, blk);
    return COLLIE_SUCCESS;
  }
  size_t chunk = RING_CHUNK - RING_CHUNK % c->esize;
  size_t tmpb = 2 * (blk < chunk ? blk : chunk) + 64;
  char *work = collie__scratch_get(c->scratch, total * c->esize + tmpb);
  if (!work) return COLLIE_SYSTEM_ERROR;
  if (total) collie__call_copy_small(c, work, c->sendbuf, total * c->esize);
  collie_result_t rc = ring_reduce_scatter_phase(c, work, total, work + total * c->esize, -1);
  if (rc != COLLIE_SUCCESS) return rc;
  if (c->op == COLLIE_AVG) collie__reduce_avg_finish(work + c->rank * blk, c->count, c->dtype, p);
  if (blk) collie__call_copy(c, c->recvbuf, work + c->rank * blk, blk);
  return COLLIE_SUCCESS;
}

static double
ring_reduce_scatter_cost(const struct collie__call *c, const struct collie__model *m)
{
  double p = c->size, S = (double)collie__call_bytes(c);
  return (p - 1) * m->alpha_us + (p - 1) / p * S * (m->beta_us + m->gamma_us) + S * m->beta_us / 2;
}

const struct collie__algo collie__algo_reduce_scatter_ring = {"ring",
                                                              COLLIE_ALGO_RING,
                                                              COLLIE_KIND_REDUCE_SCATTER,
                                                              COLLIE_NEEDS_REDUCE | COLLIE_ONE_LINK,
                                                              ring_reduce_scatter_cost,
                                                              ring_reduce_scatter_run};

/* ---- allgather(v) ---- */

static collie_result_t
ring_allgather_run(struct collie__call *c)
{
  size_t off, len, total = c->count * (size_t)c->size;
  ring_block(c, total, c->rank, &off, &len);
  struct ring_own own = {c->sendbuf, (char *)c->recvbuf + off, len};
  return ring_allgather_phase(c, c->recvbuf, total, -1, 0, &own);
}

static double
ring_allgather_cost(const struct collie__call *c, const struct collie__model *m)
{
  double p = c->size, S = (double)collie__call_bytes(c);
  return (p - 1) * m->alpha_us + (p - 1) / p * S * m->beta_us;
}

const struct collie__algo collie__algo_allgather_ring = {
    "ring",          COLLIE_ALGO_RING,    COLLIE_KIND_ALLGATHER,
    COLLIE_ONE_LINK, ring_allgather_cost, ring_allgather_run};

const struct collie__algo collie__algo_allgatherv_ring = {
    "ring",          COLLIE_ALGO_RING,    COLLIE_KIND_ALLGATHERV,
    COLLIE_ONE_LINK, ring_allgather_cost, ring_allgather_run};

/* ---- Phases lent to the composites (coll_int.h) ---- */

size_t
collie__ring_staging_bytes(const struct collie__call *c, size_t total)
{
  size_t chunk = RING_CHUNK - RING_CHUNK % c->esize;
  size_t maxblk = collie__block_len(total, c->size, 0) * c->esize;
  return 2 * (maxblk < chunk ? maxblk : chunk) + 64;
}

collie_result_t
collie__ring_reduce_scatter_phase(struct collie__call *c, char *buf, size_t total, char *tmp,
                                  int shift)
{
  return ring_reduce_scatter_phase(c, buf, total, tmp, shift);
}

collie_result_t
collie__ring_allgather_phase(struct collie__call *c, char *buf, size_t total, int shift)
{
  return ring_allgather_phase(c, buf, total, shift, 0, NULL);
}
