/*
 * rhd.c - the recursive halving / doubling family: allreduce by recursive
 * doubling and by Rabenseifner's reduce-scatter + allgather, allgather by
 * recursive doubling, reduce_scatter by recursive halving.
 *
 * Power-of-two groups. With p = 2^k ranks, a round of distance m (a power of
 * two) pairs rank r with r ^ m, and both sides of a pair end the round holding
 * the same data.
 * - Recursive doubling (allreduce): for m = 1, 2, ..., p/2 the partners swap
 *   their whole buffer and each combines the other's into its own; after k
 *   rounds every rank holds the reduction over all ranks. The fewest steps,
 *   but every step moves the whole buffer: the family's small-message choice.
 * - Recursive halving (reduce-scatter): the buffer is cut into p blocks and a
 *   rank's window starts as all of them. For m = p/2, ..., 1 the window splits
 *   into two halves that differ in bit m of the block index; the rank keeps
 *   the half whose bit m matches its own, sends the other half to r ^ m and
 *   combines what it receives into the half it keeps. The halves shrink as
 *   S/2, S/4, ..., so rank r ends with block r reduced over all ranks after
 *   moving (p-1)/p S bytes.
 * - Recursive doubling (allgather): the reverse. For m = 1, ..., p/2 the
 *   partners swap the m blocks each holds, which doubles both windows.
 * - Rabenseifner (allreduce): halving, then doubling, over p blocks of the
 *   buffer; ring's bandwidth with logarithmic instead of linear latency.
 *
 * Other p: the fold. With p' = 2^floor(log2 p) and rr = p - p', the first
 * 2 rr ranks pair up as (2i, 2i+1): the odd one sends its input to the even
 * one, which combines it into its own (reductions) or stores it (allgather),
 * and then sits out. The p' survivors, renumbered 0..p'-1 (survivor i is rank
 * 2i for i < rr and rank i + rr after that), run the power-of-two algorithm,
 * and at the end every even rank of a pair hands its odd partner the result:
 * the whole buffer, or for reduce_scatter only the odd rank's block. Survivor
 * i stands for the ranks [first(i), first(i+1)), a contiguous run, so where
 * blocks belong to ranks (allgather, reduce_scatter) survivor i's block is
 * the run of those ranks' blocks and every window stays one contiguous byte
 * range. For allreduce the survivors split the buffer p' ways.
 *
 * Transfers. A transfer is cut into chunks of at most RHD_CHUNK bytes, both
 * sides by the same rule. When the receiver combines, the chunks land in a
 * double buffer of staging and chunk j is reduced while chunk j+1 is on the
 * wire, so staging stays at two chunks; a chunk is combined only after the
 * send of the same chunk index finished, which is what lets recursive
 * doubling send and combine one buffer. A zero-length transfer is not posted
 * at all: both sides compute the same lengths from (count, p), so they skip
 * alike (count 0 moves nothing). Step numbers: 0 the fold in, 1.. the
 * rounds, then the fold out.
 *
 * Float results carry the same bits on every rank: a doubling pair combines
 * the same two partial results (in opposite orders, and every op commutes),
 * and under halving each block is reduced on one rank only.
 *
 * Costs (alpha per step, beta per byte moved, gamma per byte reduced, S the
 * size in nccl-tests terms, k = log2 p', b = S/p the block of one rank, and
 * B = the bytes of the largest window swapped, summed over the rounds: that
 * is (p'-1)/p' S, except that with a fold and per-rank blocks the low
 * survivors carry two blocks each, which makes B somewhat larger):
 *   allreduce rd       k (alpha + S beta + S gamma)
 *   allreduce rab      2k alpha + 2 B beta + B gamma
 *   allgather rd       k alpha + B beta
 *   reduce_scatter rh  k alpha + B (beta + gamma) + (S/2 + b) beta/2
 * where the last term is the staging copies (a copy costs half a move). When
 * p is not a power of two the fold adds 2 alpha + 2 S beta + S gamma to the
 * allreduces, 2 alpha + (b + S) beta to allgather, and 2 alpha +
 * S (beta + gamma) + b beta + S beta/4 (the rest of the staging copy) to
 * reduce_scatter.
 */
#include <string.h>

#include "coll/coll.h"
#include "coll/topo.h"
#include "util/util.h"

#define RHD_CHUNK ((size_t)256 * 1024)

/* How p ranks fold onto a power of two. */
struct rhd_fold {
  int k, p2, rr; /* p2 = 2^k survivors, rr folded pairs */
  int nr;        /* this rank's survivor index, -1 when it sits out */
  int partner;   /* the other rank of this rank's folded pair, or -1 */
};

static void
rhd_fold_init(const struct collie__call *c, struct rhd_fold *f)
{
  f->k = 0;
  while ((2 << f->k) <= c->size) f->k++;
  f->p2 = 1 << f->k;
  f->rr = c->size - f->p2;
  if (c->rank < 2 * f->rr) {
    f->partner = c->rank ^ 1;
    f->nr = c->rank & 1 ? -1 : c->rank / 2;
  } else {
    f->partner = -1;
    f->nr = c->rank - f->rr;
  }
}

/* The first rank survivor i stands for, which is the rank that runs it
 * (i == p2 gives p). */
static int
rhd_first(const struct rhd_fold *f, int i)
{
  return i < f->rr ? 2 * i : i + f->rr;
}

/* Byte offset of survivor i's part of the call's buffer (i == p2: its end). */
static size_t
rhd_bound(const struct collie__call *c, const struct rhd_fold *f, int i)
{
  if (c->kind == COLLIE_KIND_ALLREDUCE) return collie__block_off(c->count, f->p2, i) * c->esize;
  return (size_t)rhd_first(f, i) * c->count * c->esize;
}

/* Staging for combining transfers of up to maxbytes: two chunks, or one
 * transfer when it is smaller than a chunk. */
static size_t
rhd_tmp_bytes(const struct collie__call *c, size_t maxbytes)
{
  size_t chunk = RHD_CHUNK - RHD_CHUNK % c->esize;
  return 2 * (maxbytes < chunk ? maxbytes : chunk) + 64;
}

/* One step: sends slen bytes at sbuf to `to` and receives rlen bytes from
 * `from` (either may be -1 for none, and a zero length posts nothing). The
 * received bytes land at rbuf, or, when tmp is not NULL, in tmp (two chunks)
 * and are combined into rbuf. Blocks until both sides finished or the
 * call's deadline; returns the first transport error. */
static collie_result_t
rhd_xfer(struct collie__call *c, int to, const char *sbuf, size_t slen, int from, char *rbuf,
         size_t rlen, char *tmp, uint32_t step)
{
  size_t es = c->esize, chunk = RHD_CHUNK - RHD_CHUNK % es;
  if (to < 0) slen = 0;
  if (from < 0) rlen = 0;
  size_t ns = (slen + chunk - 1) / chunk, nr = (rlen + chunk - 1) / chunk;
  size_t nmax = ns > nr ? ns : nr;
  struct collie__req sreq[2], rreq[2];
  struct collie__req *w[2];
  uint64_t slot = collie__call_slot(c, step);
  collie_result_t rc;

  for (size_t k = 0; k <= nmax && nmax; k++) {
    if (k < nmax) {
      if (k < nr) {
        size_t o = k * chunk, l = rlen - o < chunk ? rlen - o : chunk;
        void *dst = tmp ? tmp + (k & 1) * chunk : rbuf + o;
        if ((rc = collie__call_irecv(c, from, dst, l, slot, &rreq[k & 1])) != COLLIE_SUCCESS)
          return rc;
      }
      if (k < ns) {
        size_t o = k * chunk, l = slen - o < chunk ? slen - o : chunk;
        if ((rc = collie__call_isend(c, to, sbuf + o, l, slot, &sreq[k & 1])) != COLLIE_SUCCESS)
          return rc;
      }
    }
    if (k == 0) continue;
    /* Finish chunk k-1 while chunk k moves. */
    size_t j = k - 1;
    w[0] = j < nr ? &rreq[j & 1] : NULL;
    w[1] = j < ns ? &sreq[j & 1] : NULL;
    if ((rc = collie__net_wait(c->net, w, 2, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
    if (tmp && j < nr) {
      size_t o = j * chunk, l = rlen - o < chunk ? rlen - o : chunk;
      c->reduce(rbuf + o, tmp + (j & 1) * chunk, l / es);
    }
  }
  return COLLIE_SUCCESS;
}

/* Recursive halving among the survivors, steps step0..step0+k-1: on return
 * buf holds survivor nr's part reduced over all survivors. Round one sends
 * from src; when src is not buf, the half this survivor keeps is staged from
 * src into buf first (the input may be const), and later rounds work in buf. */
static collie_result_t
rhd_halving(struct collie__call *c, const struct rhd_fold *f, const char *src, char *buf, char *tmp,
            uint32_t step0)
{
  int lo = 0;
  uint32_t step = step0;
  for (int m = f->p2 / 2; m >= 1; m /= 2, step++) {
    int peer = rhd_first(f, f->nr ^ m);
    int keep = f->nr & m ? lo + m : lo, give = f->nr & m ? lo : lo + m;
    size_t ko = rhd_bound(c, f, keep), kl = rhd_bound(c, f, keep + m) - ko;
    size_t go = rhd_bound(c, f, give), gl = rhd_bound(c, f, give + m) - go;
    if (src != buf && kl) collie__call_copy_small(c, buf + ko, src + ko, kl);
    collie_result_t rc = rhd_xfer(c, peer, src + go, gl, peer, buf + ko, kl, tmp, step);
    if (rc != COLLIE_SUCCESS) return rc;
    src = buf;
    lo = keep;
  }
  return COLLIE_SUCCESS;
}

/* Recursive doubling among the survivors, steps step0..step0+k-1: each holds
 * its own part of buf on entry and every survivor's part on return. */
static collie_result_t
rhd_doubling(struct collie__call *c, const struct rhd_fold *f, char *buf, uint32_t step0)
{
  uint32_t step = step0;
  for (int m = 1; m < f->p2; m *= 2, step++) {
    int peer = rhd_first(f, f->nr ^ m);
    int mine = f->nr & ~(m - 1), theirs = mine ^ m;
    size_t mo = rhd_bound(c, f, mine), ml = rhd_bound(c, f, mine + m) - mo;
    size_t to = rhd_bound(c, f, theirs), tl = rhd_bound(c, f, theirs + m) - to;
    collie_result_t rc = rhd_xfer(c, peer, buf + mo, ml, peer, buf + to, tl, NULL, step);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  return COLLIE_SUCCESS;
}

/* The bytes of the largest window a pair swaps in the round of distance m:
 * survivors standing for two ranks are the low ones, so no pair moves more
 * than survivors [0, m) hold. */
static double
rhd_round_bytes(const struct collie__call *c, const struct rhd_fold *f, int m)
{
  return (double)(rhd_bound(c, f, m) - rhd_bound(c, f, 0));
}

/* The model a round runs under on several hosts: the host's (shm) when
 * every pair of the round is on one host, else the network's, net (a round
 * lasts as long as its slowest pair). m = 0 is the fold, whose pairs are
 * (r, r ^ 1) below 2 rr; else survivors i and i ^ m. With ranks placed host
 * by host, the fold and the short rounds stay inside a host: pricing them
 * at the network's alpha made flat recursive doubling look dearer than the
 * hierarchical form, which it was not (docs/hosts.md, 1 ms links). Every
 * rank computes it from the topology alike, so every rank picks alike. */
static const struct collie__model *
rhd_round_model(const struct collie__call *c, const struct rhd_fold *f, int m,
                const struct collie__model *net)
{
  const struct collie__topo *t = c->topo;
  if (!t || t->nhosts < 2 || !c->models || c->group || t->size != c->size) return net;
  if (m == 0) {
    for (int r = 0; r + 1 < 2 * f->rr; r += 2)
      if (t->host[r] != t->host[r + 1]) return net;
  } else {
    for (int i = 0; i < f->p2; i++)
      if (t->host[rhd_first(f, i)] != t->host[rhd_first(f, i ^ m)]) return net;
  }
  return &c->models->cls[COLLIE_NET_CLASS_LOCAL];
}

/* ---- allreduce ---- */

/* A rank that sits out of the fold: its input goes to its partner, and the
 * finished result comes back in the fold-out step. */
static collie_result_t
rhd_allreduce_folded(struct collie__call *c, const struct rhd_fold *f, size_t bytes,
                     uint32_t out_step)
{
  collie_result_t rc = rhd_xfer(c, f->partner, c->sendbuf, bytes, -1, NULL, 0, NULL, 0);
  if (rc != COLLIE_SUCCESS) return rc;
  /* In place, the receive overwrites the input: only after the send finished.
   */
  return rhd_xfer(c, -1, NULL, 0, f->partner, c->recvbuf, bytes, NULL, out_step);
}

/* Everything both allreduces do before their rounds: copy the input into
 * the output, take staging, and fold the partner's input in. */
static collie_result_t
rhd_allreduce_begin(struct collie__call *c, const struct rhd_fold *f, size_t bytes, char **tmp)
{
  if (c->sendbuf != c->recvbuf) collie__call_copy(c, c->recvbuf, c->sendbuf, bytes);
  *tmp = NULL;
  if (c->size == 1) return COLLIE_SUCCESS;
  if (!(*tmp = collie__scratch_get(c->scratch, rhd_tmp_bytes(c, bytes))))
    return COLLIE_SYSTEM_ERROR;
  return rhd_xfer(c, -1, NULL, 0, f->partner, c->recvbuf, bytes, *tmp, 0);
}

static collie_result_t
rhd_allreduce_rd_run(struct collie__call *c)
{
  struct rhd_fold f;
  size_t bytes = c->count * c->esize;
  char *buf = c->recvbuf, *tmp;
  collie_result_t rc;
  rhd_fold_init(c, &f);
  if (!bytes) return COLLIE_SUCCESS;
  if (f.nr < 0) return rhd_allreduce_folded(c, &f, bytes, (uint32_t)f.k + 1);
  if ((rc = rhd_allreduce_begin(c, &f, bytes, &tmp)) != COLLIE_SUCCESS) return rc;
  for (int i = 0; i < f.k; i++) {
    int peer = rhd_first(&f, f.nr ^ (1 << i));
    rc = rhd_xfer(c, peer, buf, bytes, peer, buf, bytes, tmp, 1 + (uint32_t)i);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  if (c->op == COLLIE_AVG) collie__reduce_avg_finish(buf, c->count, c->dtype, c->size);
  return rhd_xfer(c, f.partner, buf, bytes, -1, NULL, 0, NULL, (uint32_t)f.k + 1);
}

/* The fold's share of an allreduce: input in (S beta + S gamma), result out. */
static double
rhd_allreduce_fold_cost(const struct rhd_fold *f, double S, const struct collie__model *m)
{
  return f->rr ? 2 * m->alpha_us + 2 * S * m->beta_us + S * m->gamma_us : 0;
}

static double
rhd_allreduce_rd_cost(const struct collie__call *c, const struct collie__model *m)
{
  struct rhd_fold f;
  double S = (double)collie__call_bytes(c), t = 0;
  rhd_fold_init(c, &f);
  for (int r = 1; r < f.p2; r *= 2) {
    const struct collie__model *rm = rhd_round_model(c, &f, r, m);
    t += rm->alpha_us + S * (rm->beta_us + rm->gamma_us);
  }
  return t + rhd_allreduce_fold_cost(&f, S, rhd_round_model(c, &f, 0, m));
}

static collie_result_t
rhd_allreduce_rab_run(struct collie__call *c)
{
  struct rhd_fold f;
  size_t bytes = c->count * c->esize;
  char *buf = c->recvbuf, *tmp;
  collie_result_t rc;
  rhd_fold_init(c, &f);
  if (!bytes) return COLLIE_SUCCESS;
  if (f.nr < 0) return rhd_allreduce_folded(c, &f, bytes, 2 * (uint32_t)f.k + 1);
  if ((rc = rhd_allreduce_begin(c, &f, bytes, &tmp)) != COLLIE_SUCCESS) return rc;
  if ((rc = rhd_halving(c, &f, buf, buf, tmp, 1)) != COLLIE_SUCCESS) return rc;
  if (c->op == COLLIE_AVG) {
    size_t o = rhd_bound(c, &f, f.nr), l = rhd_bound(c, &f, f.nr + 1) - o;
    collie__reduce_avg_finish(buf + o, l / c->esize, c->dtype, c->size);
  }
  if ((rc = rhd_doubling(c, &f, buf, 1 + (uint32_t)f.k)) != COLLIE_SUCCESS) return rc;
  return rhd_xfer(c, f.partner, buf, bytes, -1, NULL, 0, NULL, 2 * (uint32_t)f.k + 1);
}

static double
rhd_allreduce_rab_cost(const struct collie__call *c, const struct collie__model *m)
{
  struct rhd_fold f;
  double S = (double)collie__call_bytes(c);
  rhd_fold_init(c, &f);
  double t = 0; /* a halving and a doubling round per distance r, B_r bytes each */
  for (int r = 1; r < f.p2; r *= 2) {
    const struct collie__model *rm = rhd_round_model(c, &f, r, m);
    double B = rhd_round_bytes(c, &f, r);
    t += 2 * rm->alpha_us + 2 * B * rm->beta_us + B * rm->gamma_us;
  }
  return t + rhd_allreduce_fold_cost(&f, S, rhd_round_model(c, &f, 0, m));
}

const struct collie__algo collie__algo_allreduce_recursive_doubling = {
    "recursive_doubling", COLLIE_ALGO_RECURSIVE_DOUBLING, COLLIE_KIND_ALLREDUCE,
    COLLIE_NEEDS_REDUCE,  rhd_allreduce_rd_cost,          rhd_allreduce_rd_run};

const struct collie__algo collie__algo_allreduce_rabenseifner = {
    "rabenseifner",      COLLIE_ALGO_RABENSEIFNER, COLLIE_KIND_ALLREDUCE,
    COLLIE_NEEDS_REDUCE, rhd_allreduce_rab_cost,   rhd_allreduce_rab_run};

/* ---- allgather ---- */

static collie_result_t
rhd_allgather_run(struct collie__call *c)
{
  struct rhd_fold f;
  size_t blk = c->count * c->esize, total = blk * (size_t)c->size;
  char *buf = c->recvbuf, *own = buf + (size_t)c->rank * blk;
  uint32_t out_step;
  collie_result_t rc;
  rhd_fold_init(c, &f);
  out_step = (uint32_t)f.k + 1;
  if (!blk) return COLLIE_SUCCESS;
  if (f.nr < 0) {
    rc = rhd_xfer(c, f.partner, c->sendbuf, blk, -1, NULL, 0, NULL, 0);
    if (rc != COLLIE_SUCCESS) return rc;
    /* In place, the input is part of buf: receive only after the send finished.
     */
    return rhd_xfer(c, -1, NULL, 0, f.partner, buf, total, NULL, out_step);
  }
  if (c->sendbuf != own) collie__call_copy(c, own, c->sendbuf, blk);
  if (f.partner >= 0) {
    rc = rhd_xfer(c, -1, NULL, 0, f.partner, buf + (size_t)f.partner * blk, blk, NULL, 0);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  if ((rc = rhd_doubling(c, &f, buf, 1)) != COLLIE_SUCCESS) return rc;
  return rhd_xfer(c, f.partner, buf, total, -1, NULL, 0, NULL, out_step);
}

static double
rhd_allgather_cost(const struct collie__call *c, const struct collie__model *m)
{
  struct rhd_fold f;
  double S = (double)collie__call_bytes(c), b = S / c->size;
  rhd_fold_init(c, &f);
  double t = 0;
  for (int r = 1; r < f.p2; r *= 2) {
    const struct collie__model *rm = rhd_round_model(c, &f, r, m);
    t += rm->alpha_us + rhd_round_bytes(c, &f, r) * rm->beta_us;
  }
  const struct collie__model *fm = rhd_round_model(c, &f, 0, m);
  if (f.rr) t += 2 * fm->alpha_us + (b + S) * fm->beta_us;
  return t;
}

const struct collie__algo collie__algo_allgather_recursive_doubling = {
    "recursive_doubling",  COLLIE_ALGO_RECURSIVE_DOUBLING,
    COLLIE_KIND_ALLGATHER, 0,
    rhd_allgather_cost,    rhd_allgather_run};

/* ---- reduce_scatter ---- */

/* The input is const, so survivors reduce in a staging copy indexed like the
 * input (only the parts they keep are ever written), followed by two chunks
 * of receive staging; a folded survivor stages its whole input, as its
 * partner's whole input is combined into it. */
static collie_result_t
rhd_reduce_scatter_run(struct collie__call *c)
{
  struct rhd_fold f;
  size_t blk = c->count * c->esize, total = blk * (size_t)c->size;
  const char *in = c->sendbuf;
  char *out = c->recvbuf;
  uint32_t out_step;
  collie_result_t rc;
  rhd_fold_init(c, &f);
  out_step = (uint32_t)f.k + 1;
  if (!blk) return COLLIE_SUCCESS;
  if (c->size == 1) {
    /* AVG over one rank is the identity. */
    if (out != in) collie__call_copy(c, out, in, blk);
    return COLLIE_SUCCESS;
  }
  if (f.nr < 0) {
    rc = rhd_xfer(c, f.partner, in, total, -1, NULL, 0, NULL, 0);
    if (rc != COLLIE_SUCCESS) return rc;
    /* In place, out is part of the input: receive only after the send finished.
     */
    return rhd_xfer(c, -1, NULL, 0, f.partner, out, blk, NULL, out_step);
  }
  size_t work_bytes = (total + 63) & ~(size_t)63;
  char *work = collie__scratch_get(c->scratch, work_bytes + rhd_tmp_bytes(c, total));
  if (!work) return COLLIE_SYSTEM_ERROR;
  char *tmp = work + work_bytes;
  const char *src = in;
  if (f.partner >= 0) {
    collie__call_copy_small(c, work, in, total);
    rc = rhd_xfer(c, -1, NULL, 0, f.partner, work, total, tmp, 0);
    if (rc != COLLIE_SUCCESS) return rc;
    src = work;
  }
  if ((rc = rhd_halving(c, &f, src, work, tmp, 1)) != COLLIE_SUCCESS) return rc;
  if (c->op == COLLIE_AVG) {
    /* This survivor's blocks: its own and, folded, its partner's. */
    size_t o = rhd_bound(c, &f, f.nr), l = rhd_bound(c, &f, f.nr + 1) - o;
    collie__reduce_avg_finish(work + o, l / c->esize, c->dtype, c->size);
  }
  collie__call_copy(c, out, work + (size_t)c->rank * blk, blk);
  if (f.partner < 0) return COLLIE_SUCCESS;
  return rhd_xfer(c, f.partner, work + (size_t)f.partner * blk, blk, -1, NULL, 0, NULL, out_step);
}

static double
rhd_reduce_scatter_cost(const struct collie__call *c, const struct collie__model *m)
{
  struct rhd_fold f;
  double S = (double)collie__call_bytes(c), b = S / c->size;
  rhd_fold_init(c, &f);
  if (c->size == 1) return b * m->beta_us / 2;
  double t = (S / 2 + b) * m->beta_us / 2;
  for (int r = 1; r < f.p2; r *= 2) {
    const struct collie__model *rm = rhd_round_model(c, &f, r, m);
    t += rm->alpha_us + rhd_round_bytes(c, &f, r) * (rm->beta_us + rm->gamma_us);
  }
  const struct collie__model *fm = rhd_round_model(c, &f, 0, m);
  if (f.rr)
    t +=
        2 * fm->alpha_us + S * (fm->beta_us + fm->gamma_us) + b * fm->beta_us + S * fm->beta_us / 4;
  return t;
}

const struct collie__algo collie__algo_reduce_scatter_recursive_halving = {
    "recursive_halving", COLLIE_ALGO_RECURSIVE_HALVING, COLLIE_KIND_REDUCE_SCATTER,
    COLLIE_NEEDS_REDUCE, rhd_reduce_scatter_cost,       rhd_reduce_scatter_run};
