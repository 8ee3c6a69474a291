/*
 * sparse.c - sparse allreduce (issue 22): each rank holds nnz (index, value)
 * pairs of a vector of dim elements, as top-k gradient sparsification
 * leaves them; the call's mode (call->root, COLLIE_SPARSE_*) picks one of
 * two algorithms, each the only one for its mode.
 *
 * topk_allgather (exact). Every rank's pairs are gathered (one allgather of
 * nnz (8 + esize) bytes a rank, by the flat allgather the model picks), and
 * every rank merges the p nnz pairs alike: sorted by index with a stable
 * radix sort (so equal indices add in rank order everywhere: the same bits
 * on every rank), values of one index summed in double and rounded once. The
 * result is the union, at most p nnz entries. Cost: the allgather's, (p-1)
 * nnz (8 + e) bytes in and out per rank, plus a sort of p nnz keys.
 *
 * gtopk (approximate, bounded: Shi et al.'s gTop-k). Each rank's pairs,
 * duplicates summed, keep their k = nnz largest magnitudes; then log2 q
 * rounds of recursive doubling (q the largest power of two <= p) in which
 * partners swap their k pairs and both keep the k largest magnitudes of the
 * merged set (indices present in both summed). Both sides compute the same
 * merge (IEEE addition commutes; ties of magnitude go to the smaller
 * index), so after the rounds every rank holds the same k pairs. A rank r
 * >= q first folds its pairs into rank r - q and at the end receives the
 * result from it. Each message is k pairs (padded with index -1), so a rank
 * sends k (8 + e) bytes per exchange, ceil(log2 p) of them against the
 * allgather's p - 1 blocks. What a merge drops is lost: error feedback (adding what was
 * not sent to the next step's gradient) is the caller's, docs/sparse.md.
 *
 * Results are sorted by index; *out_nnz says how many there are.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "util/error.h"

enum { SP_STEP_FOLD = 0, SP_STEP_ROUND = 1, SP_STEP_UNFOLD = 0x100, SP_STEP_GATHER = 0x200 };

/* Value i of a values array of the call's dtype (float32 or float64). */
static double
sp_get(const struct collie__call *c, const void *v, size_t i)
{
  if (c->dtype == COLLIE_FLOAT64) {
    double d;
    memcpy(&d, (const char *)v + i * 8, 8);
    return d;
  }
  float f;
  memcpy(&f, (const char *)v + i * 4, 4);
  return f;
}

static void
sp_put(const struct collie__call *c, void *v, size_t i, double x)
{
  if (c->dtype == COLLIE_FLOAT64) {
    memcpy((char *)v + i * 8, &x, 8);
  } else {
    float f = (float)x;
    memcpy((char *)v + i * 4, &f, 4);
  }
}

/* ---- topk_allgather ---- */

/* A gathered pair: its index and where it sits (rank-major). */
struct sp_key {
  int64_t idx;
  size_t pos;
};

/* Sorts key[0..n) by index, stably (equal indices keep their order of
 * position, rank after rank), by LSD radix sort on the bits below dim: 11
 * bits a pass, so 2 passes up to 4M elements. tmp: n more keys. */
static void
sp_radix_sort(struct sp_key *key, struct sp_key *tmp, size_t n, size_t dim)
{
  enum { BITS = 11, BUCKETS = 1 << BITS };
  size_t count[BUCKETS];
  int passes = 0;
  while (passes * BITS < 64 && (dim - 1) >> (passes * BITS)) passes++;
  for (int pass = 0; pass < passes; pass++) {
    int shift = pass * BITS;
    memset(count, 0, sizeof(count));
    for (size_t i = 0; i < n; i++) count[((uint64_t)key[i].idx >> shift) & (BUCKETS - 1)]++;
    size_t at = 0;
    for (size_t b = 0; b < BUCKETS; b++) {
      size_t c = count[b];
      count[b] = at;
      at += c;
    }
    for (size_t i = 0; i < n; i++)
      tmp[count[((uint64_t)key[i].idx >> shift) & (BUCKETS - 1)]++] = key[i];
    struct sp_key *t = key;
    key = tmp;
    tmp = t;
  }
  if (passes & 1) memcpy(tmp, key, n * sizeof(*key)); /* the sorted run back where it started */
}

static collie_result_t
sp_allgather_run(struct collie__call *c)
{
  int p = c->size;
  size_t k = c->count, es = c->esize, rec = k * (8 + es);
  size_t all_bytes = (size_t)p * rec, keys = 2 * (size_t)p * k * sizeof(struct sp_key);
  char *base = collie__scratch_get(c->scratch, rec + all_bytes + keys + 64);
  if (!base) return COLLIE_SYSTEM_ERROR;
  char *own = base, *all = base + rec;
  struct sp_key *key =
      (struct sp_key *)(void *)(((uintptr_t)(all + all_bytes) + 15) & ~(uintptr_t)15);
  /* This rank's block: its indices, then its values. */
  if (k) {
    memcpy(own, c->sidx, k * 8);
    memcpy(own + k * 8, c->sendbuf, k * es);
  }
  if (p > 1 && rec) {
    struct collie__call s = *c;
    s.kind = COLLIE_KIND_ALLGATHER;
    s.dtype = COLLIE_UINT8;
    s.esize = 1;
    s.op = 0;
    s.reduce = NULL;
    s.count = rec;
    s.sendbuf = own;
    s.recvbuf = all;
    s.scratch = c->scratch + 1;
    s.step0 = SP_STEP_GATHER;
    /* The cheapest flat allgather of those bytes: this call holds the first
     * scratch region, so the allgather runs as one phase (scratch + 1). */
    const struct collie__algo *a = collie__algo_cheapest_flat(&s, &c->models->cls[c->cls], NULL);
    if (!a)
      return collie__err(COLLIE_INTERNAL_ERROR, "sparse_allreduce #%u: no allgather algorithm",
                         c->seq);
    s.algo = a->id;
    collie_result_t rc = a->run(&s);
    if (rc != COLLIE_SUCCESS) return rc;
  } else if (rec) {
    memcpy(all, own, rec);
  }
  size_t n = 0;
  for (int r = 0; r < p; r++)
    for (size_t i = 0; i < k; i++, n++) {
      memcpy(&key[n].idx, all + (size_t)r * rec + i * 8, 8);
      key[n].pos = n;
    }
  sp_radix_sort(key, key + n, n, c->dim);
  size_t out = 0;
  for (size_t i = 0; i < n;) {
    double sum = 0;
    size_t j = i;
    for (; j < n && key[j].idx == key[i].idx; j++) {
      size_t r = key[j].pos / k, at = key[j].pos % k;
      sum += sp_get(c, all + r * rec + k * 8, at);
    }
    c->ridx[out] = key[i].idx;
    sp_put(c, c->recvbuf, out, sum);
    out++;
    i = j;
  }
  *c->rnnz = out;
  return COLLIE_SUCCESS;
}

static double
sp_allgather_cost(const struct collie__call *c, const struct collie__model *m)
{
  if (c->root != COLLIE_SPARSE_TOPK_ALLGATHER) return -1;
  double p = c->size, blk = (double)c->count * (8 + (double)c->esize);
  return collie__log2_ceil(c->size) * m->alpha_us + (p - 1) * blk * m->beta_us;
}

const struct collie__algo collie__algo_sparse_allreduce_topk_allgather = {
    "topk_allgather",
    COLLIE_ALGO_TOPK_ALLGATHER,
    COLLIE_KIND_SPARSE_ALLREDUCE,
    0,
    sp_allgather_cost,
    sp_allgather_run};

/* ---- gtopk ---- */

/* A set of at most k pairs, sorted by index, in a message's layout: k
 * indices (-1: empty, after the used ones), then k values. */
struct sp_set {
  int64_t *idx;
  char *val;
  size_t n; /* used */
};

static void
sp_set_at(struct sp_set *s, char *buf, size_t k)
{
  s->idx = (int64_t *)(void *)buf;
  s->val = buf + k * 8;
  s->n = 0;
}

/* Entries of a merge before the top-k cut. */
struct sp_ent {
  int64_t idx;
  double v;
};

/* The k-th largest of m[0..n) (1 <= k <= n), by quickselect; m is
 * reordered. */
static double
sp_kth_largest(double *m, size_t n, size_t k)
{
  ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, want = (ptrdiff_t)k - 1;
  while (lo < hi) {
    double pivot = m[lo + (hi - lo) / 2];
    ptrdiff_t i = lo, j = hi;
    while (i <= j) { /* descending: [lo..j] >= pivot, [i..hi] <= pivot after */
      while (m[i] > pivot) i++;
      while (m[j] < pivot) j--;
      if (i <= j) {
        double t = m[i];
        m[i++] = m[j];
        m[j--] = t;
      }
    }
    if (want <= j)
      hi = j;
    else if (want >= i)
      lo = i;
    else
      break; /* between the two: equal to the pivot */
  }
  return m[want];
}

/* out = the k largest magnitudes of e[0..n) (sorted by index, as they
 * come: every caller builds e in index order), ties to the smaller index;
 * empty slots padded. mag: scratch for n doubles. */
static void
sp_cut(const struct collie__call *c, const struct sp_ent *e, size_t n, size_t k, double *mag,
       struct sp_set *out)
{
  double thr = 0;
  size_t above = 0, at = 0;
  if (n > k && k > 0) {
    for (size_t i = 0; i < n; i++) mag[i] = fabs(e[i].v);
    thr = sp_kth_largest(mag, n, k);
    for (size_t i = 0; i < n; i++) above += fabs(e[i].v) > thr;
  }
  size_t ties = k - above; /* of the magnitude thr, the first ones by index */
  for (size_t i = 0; i < n && at < k; i++) {
    double m = fabs(e[i].v);
    if (n > k && !(m > thr || (m == thr && ties && ties--))) continue;
    out->idx[at] = e[i].idx;
    sp_put(c, out->val, at, e[i].v);
    at++;
  }
  for (size_t i = at; i < k; i++) {
    out->idx[i] = -1;
    sp_put(c, out->val, i, 0);
  }
  out->n = at;
}

/* The used entries of a received message (its -1 padding skipped). */
static size_t
sp_used(const struct sp_set *s, size_t k)
{
  size_t n = 0;
  while (n < k && s->idx[n] >= 0) n++;
  return n;
}

/* e = a merged with b (both sorted by index), equal indices summed: a's
 * value first, then b's, where a is the lower rank's set (so both partners
 * add in one order). Returns the entries. */
static size_t
sp_merge(const struct collie__call *c, const struct sp_set *a, const struct sp_set *b,
         struct sp_ent *e)
{
  size_t i = 0, j = 0, n = 0;
  while (i < a->n || j < b->n) {
    if (j == b->n || (i < a->n && a->idx[i] < b->idx[j])) {
      e[n++] = (struct sp_ent){a->idx[i], sp_get(c, a->val, i)};
      i++;
    } else if (i == a->n || b->idx[j] < a->idx[i]) {
      e[n++] = (struct sp_ent){b->idx[j], sp_get(c, b->val, j)};
      j++;
    } else {
      double v = sp_get(c, a->val, i) + sp_get(c, b->val, j);
      e[n++] = (struct sp_ent){a->idx[i], v};
      i++;
      j++;
    }
  }
  return n;
}

/* Swaps this rank's set with peer's (k pairs each way) and keeps the top k
 * of the merge in mine. */
static collie_result_t
sp_round(struct collie__call *c, int peer, uint32_t step, struct sp_set *mine,
         struct sp_set *theirs, struct sp_ent *e, size_t k)
{
  size_t bytes = k * (8 + c->esize);
  collie_result_t rc = collie__sendrecv(c, peer, mine->idx, bytes, peer, theirs->idx, bytes, step);
  if (rc != COLLIE_SUCCESS) return rc;
  theirs->n = sp_used(theirs, k);
  size_t n = c->rank < peer ? sp_merge(c, mine, theirs, e) : sp_merge(c, theirs, mine, e);
  sp_cut(c, e, n, k, (double *)(e + 2 * k + 1), mine);
  return COLLIE_SUCCESS;
}

static collie_result_t
sp_gtopk_run(struct collie__call *c)
{
  int p = c->size, r = c->rank;
  size_t k = c->count, es = c->esize, msg = k * (8 + es);
  /* Entries of a merge (2 k + 1), then 2 k doubles of magnitudes, which
   * first hold the own pairs' 2 k sort keys (as large: 16 bytes each). */
  size_t ents = (2 * k + 1) * sizeof(struct sp_ent) + 2 * k * sizeof(struct sp_key);
  char *base = collie__scratch_get(c->scratch, 2 * msg + ents + 64);
  if (!base) return COLLIE_SYSTEM_ERROR;
  struct sp_set mine, theirs;
  sp_set_at(&mine, base, k);
  sp_set_at(&theirs, base + msg, k);
  struct sp_ent *e = (struct sp_ent *)(void *)(((uintptr_t)(base + 2 * msg) + 15) & ~(uintptr_t)15);
  /* This rank's pairs sorted by index (the radix sort's 2 k keys in the
   * magnitudes' room, not yet used), duplicates summed in input order, cut
   * to k. */
  double *mag = (double *)(e + 2 * k + 1);
  struct sp_key *key = (struct sp_key *)(void *)mag;
  for (size_t i = 0; i < k; i++) key[i] = (struct sp_key){c->sidx[i], i};
  sp_radix_sort(key, key + k, k, c->dim);
  size_t n = 0;
  for (size_t i = 0; i < k; i++) {
    double v = sp_get(c, c->sendbuf, key[i].pos);
    if (n && e[n - 1].idx == key[i].idx)
      e[n - 1].v += v;
    else
      e[n++] = (struct sp_ent){key[i].idx, v};
  }
  if (k) sp_cut(c, e, n, k, mag, &mine);
  collie_result_t rc = COLLIE_SUCCESS;
  if (k && p > 1) {
    int q = 1;
    while (q * 2 <= p) q *= 2;
    size_t bytes = msg;
    if (r >= q) { /* fold in, wait for the result */
      rc = collie__sendrecv(c, r - q, mine.idx, bytes, -1, NULL, 0, SP_STEP_FOLD);
      if (rc == COLLIE_SUCCESS)
        rc = collie__sendrecv(c, -1, NULL, 0, r - q, mine.idx, bytes, SP_STEP_UNFOLD);
      mine.n = sp_used(&mine, k);
    } else {
      if (r + q < p) {
        rc = collie__sendrecv(c, -1, NULL, 0, r + q, theirs.idx, bytes, SP_STEP_FOLD);
        if (rc == COLLIE_SUCCESS) {
          theirs.n = sp_used(&theirs, k);
          sp_cut(c, e, sp_merge(c, &mine, &theirs, e), k, mag, &mine);
        }
      }
      uint32_t step = SP_STEP_ROUND;
      for (int m = 1; m < q && rc == COLLIE_SUCCESS; m <<= 1, step++)
        rc = sp_round(c, r ^ m, step, &mine, &theirs, e, k);
      if (rc == COLLIE_SUCCESS && r + q < p)
        rc = collie__sendrecv(c, r + q, mine.idx, bytes, -1, NULL, 0, SP_STEP_UNFOLD);
    }
  }
  if (rc != COLLIE_SUCCESS) return rc;
  for (size_t i = 0; i < mine.n; i++) {
    c->ridx[i] = mine.idx[i];
    sp_put(c, c->recvbuf, i, sp_get(c, mine.val, i));
  }
  *c->rnnz = mine.n;
  return COLLIE_SUCCESS;
}

static double
sp_gtopk_cost(const struct collie__call *c, const struct collie__model *m)
{
  if (c->root != COLLIE_SPARSE_GTOPK) return -1;
  /* A rank takes part in ceil(log2 p) exchanges: log2 q rounds, plus the
   * fold or the unfold where p is not a power of two. */
  double rounds = collie__log2_ceil(c->size), blk = (double)c->count * (8 + (double)c->esize);
  return rounds * (m->alpha_us + blk * m->beta_us);
}

const struct collie__algo collie__algo_sparse_allreduce_gtopk = {
    "gtopk", COLLIE_ALGO_GTOPK, COLLIE_KIND_SPARSE_ALLREDUCE, 0, sp_gtopk_cost, sp_gtopk_run};
