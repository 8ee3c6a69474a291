/*
 * hier_handler.c - alltoallv aggregated per host pair (issue 20), and
 * alltoall and reduce_scatter on hosts of different sizes, where hier.c's
 * rail forms do not apply.
 *
 * The pairwise exchange sends every rank p - 1 messages, so a pair of
 * hosts with L ranks each trades L x L messages over the network, each
 * paying its latency. Here each destination rank d is served, on every
 * host h, by one handler: the local index (local(d) mod L_h) of h, so on
 * hosts of equal size the handlers of rail i serve rail i. Four steps:
 *
 *   counts  each rank tells each handler of its host how many elements it
 *           has for each destination the handler serves (one small
 *           message per pair of local ranks);
 *   in      each rank hands each handler of its host those blocks, packed
 *           in destination order (shared memory);
 *   across  each handler sends each destination it serves on another host
 *           one message: the blocks of all its host's ranks for it, in
 *           local order. So a pair of hosts trades at most L messages
 *           instead of L x L, and each rank receives exactly one message
 *           per other host;
 *   out     each rank unpacks what it received into its receive buffer;
 *           the blocks from its own host came with step "in" (a rank is
 *           its own handler).
 *
 * Sizes: a handler learns them from the counts; a receiver knows its own
 * recvcounts, so it posts its receives across hosts first, before any
 * count has moved. Every message is sent, empty or not, so counts that
 * disagree between two ranks end in a length error naming the pair, never
 * a hang.
 *
 * Costs: 2 (L - 1) local alphas and ceil(max L / min L) (H - 1) network
 * exchanges (a handler of a small host serves several rails), posted at
 * once (collie__overlap_us), against pairwise's p - 1. Bytes: every byte is copied four times
 * on its host (packed, handed in, packed again per destination, unpacked)
 * and crosses the network once, as in the pairwise exchange; a host's
 * handlers share its link. alltoallv's byte term needs the counts, which
 * are rank-local (every rank must estimate alike), so its estimate is the
 * latency terms only, as pairwise's is: between hosts, where a message
 * costs tens of microseconds and more, aggregation is what matters.
 * alltoall (uniform counts) is priced with its bytes.
 *
 * In place: every block is packed out of the send buffer in step "in",
 * before any byte of the receive buffer is written in step "out".
 *
 * reduce_scatter on hosts of different sizes takes the same handlers:
 * each rank hands each handler of its host its blocks for the ranks that
 * handler serves (step "in", no counts needed: every block is count
 * elements), the handler reduces its host's L blocks for each, sends each
 * one it serves on another host that host's partial sum (step "across",
 * one block), and each rank reduces its own host's partial with the H - 1
 * that came across. A host sends out p - L_h blocks, the least a
 * reduce_scatter between hosts can, and each rank takes H - 1 messages
 * from the network. Cost: (L - 1) alpha_l + ceil(max L / min L) (H - 1)
 * network exchanges at once, 2 S (beta_l) on the host plus S gamma for the reductions inside
 * it, and the blocks that leave the biggest host over its shared link.
 */
#include <stdint.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/coll_int.h"
#include "coll/topo.h"
#include "util/error.h"

enum { AV_STEP_COUNTS = 0, AV_STEP_IN = 1, AV_STEP_ACROSS = 2 };

/* Elements of this rank's block for rank q, and where it starts (elements). */
static size_t
av_scount(const struct collie__call *c, int q)
{
  return c->kind == COLLIE_KIND_ALLTOALLV ? c->sendcounts[q] : c->count;
}

static size_t
av_sdispl(const struct collie__call *c, int q)
{
  return c->kind == COLLIE_KIND_ALLTOALLV ? c->sdispls[q] : (size_t)q * c->count;
}

static size_t
av_rcount(const struct collie__call *c, int q)
{
  return c->kind == COLLIE_KIND_ALLTOALLV ? c->recvcounts[q] : c->count;
}

static size_t
av_rdispl(const struct collie__call *c, int q)
{
  return c->kind == COLLIE_KIND_ALLTOALLV ? c->rdispls[q] : (size_t)q * c->count;
}

/* The local index of host h that serves destination d. */
static int
av_handler(const struct collie__topo *t, int h, int d)
{
  return t->local[d] % t->host_size[h];
}

static size_t
av_align(size_t n)
{
  return (n + 63) & ~(size_t)63;
}

/* Bytes of the message from host g: a count per rank of g, then the blocks
 * (0 for this rank's own host). */
static size_t
av_across_bytes(const struct collie__call *c, int g)
{
  const struct collie__topo *t = c->topo;
  if (g == t->host[c->rank]) return 0;
  size_t elems = 0;
  for (int j = 0; j < t->host_size[g]; j++) elems += av_rcount(c, t->by_host[t->first[g] + j]);
  return (size_t)t->host_size[g] * sizeof(uint64_t) + elems * c->esize;
}

/* Whether rank `from` sent what this rank's recvcounts expect; else the
 * first such error goes to *bad. Without this, counts that disagree between
 * two ranks yet add up alike per host would land blocks in the wrong place. */
static int
av_check(const struct collie__call *c, int from, size_t got, collie_result_t *bad)
{
  size_t want = av_rcount(c, from);
  if (got == want) return 1;
  if (*bad == COLLIE_SUCCESS)
    *bad = collie__err(COLLIE_INVALID_USAGE,
                       "rank %d sends this rank %zu elements, but recvcounts[%d] here is %zu (the "
                       "two ranks' counts disagree)",
                       from, got, from, want);
  return 0;
}

/* The plan of one call on this rank: the regions of its scratch. */
struct av_plan {
  int h, L, li, H, p;
  const int *local; /* this host's ranks */
  int nserve;       /* destinations this rank serves (itself among them) */
  int *serve;       /* [nserve], ascending */
  uint64_t *cin;    /* [L][nserve]: counts of each local rank for them */
  uint64_t *cout;   /* [nserve] per handler, packed one handler after another */
  size_t *pack_off; /* [L + 1]: this rank's packed blocks for handler j */
  char *pack;       /* what this rank hands in, handler after handler */
  size_t *in_off;   /* [L + 1]: where local rank j's blocks land here */
  char *in;         /* what the local ranks handed in (this rank's own: in pack) */
  char *out;        /* one message per destination served on another host */
  size_t *out_off;  /* [nserve + 1] */
  char *recv;       /* one message per other host */
  size_t *recv_off; /* [H + 1] */
  char **src;       /* [L]: a cursor in each local rank's blocks */
  struct collie__req *req;
  struct collie__req **w;
};

/* Number of destinations handler j of host h serves. */
static int
av_nserve(const struct collie__topo *t, int h, int j)
{
  int n = 0;
  for (int d = 0; d < t->size; d++) n += av_handler(t, h, d) == j;
  return n;
}

/* Bytes the plan needs before the counts are known: requests, counts,
 * offsets, cursors and the destinations served, in that order (each part's
 * alignment no stricter than the one before). */
static size_t
av_fixed_bytes(const struct collie__call *c, int L, int nserve, int H)
{
  size_t nreq = 2 * (size_t)L + (size_t)c->size + (size_t)H + 2 * (size_t)L;
  return nreq * (sizeof(struct collie__req) + sizeof(struct collie__req *)) +
         ((size_t)L * nserve + (size_t)c->size) * sizeof(uint64_t) +
         ((size_t)(L + 1) * 2 + (size_t)nserve + 1 + (size_t)H + 1) * sizeof(size_t) +
         (size_t)L * sizeof(char *) + (size_t)nserve * sizeof(int);
}

static collie_result_t
av_wait(struct collie__call *c, struct av_plan *pl, int n)
{
  for (int i = 0; i < n; i++) pl->w[i] = &pl->req[i];
  return n ? collie__net_wait(c->net, pl->w, n, c->deadline_ns) : COLLIE_SUCCESS;
}

static collie_result_t
hier_av_run(struct collie__call *c)
{
  const struct collie__topo *t = c->topo;
  struct av_plan P, *pl = &P;
  memset(pl, 0, sizeof(*pl));
  pl->p = c->size;
  pl->H = t->nhosts;
  pl->h = t->host[c->rank];
  pl->L = t->host_size[pl->h];
  pl->li = t->local[c->rank];
  pl->local = t->by_host + t->first[pl->h];
  pl->nserve = av_nserve(t, pl->h, pl->li);
  int L = pl->L, H = pl->H, p = pl->p, me = c->rank;
  size_t es = c->esize;

  /* Counts, offsets and requests in the second scratch region (this
   * algorithm runs no phases): the data's sizes follow from the counts, and
   * the first region is then asked for the data alone. */
  size_t nreq = 2 * (size_t)L + (size_t)p + (size_t)H + 2 * (size_t)L;
  char *q = collie__scratch_get(c->scratch + 1, av_fixed_bytes(c, L, pl->nserve, H));
  if (!q) return COLLIE_SYSTEM_ERROR;
  pl->req = (struct collie__req *)q;
  pl->w = (struct collie__req **)(pl->req + nreq);
  q = (char *)(pl->w + nreq);
  pl->cin = (uint64_t *)q;
  pl->cout = pl->cin + (size_t)L * pl->nserve;
  q = (char *)(pl->cout + p);
  pl->pack_off = (size_t *)q;
  pl->in_off = pl->pack_off + L + 1;
  pl->out_off = pl->in_off + L + 1;
  pl->recv_off = pl->out_off + pl->nserve + 1;
  pl->src = (char **)(pl->recv_off + H + 1);
  pl->serve = (int *)(pl->src + L);

  for (int d = 0, n = 0; d < p; d++)
    if (av_handler(t, pl->h, d) == pl->li) pl->serve[n++] = d;
  /* This rank's counts, handler after handler, each in destination order. */
  pl->pack_off[0] = 0;
  uint64_t *co = pl->cout;
  for (int j = 0; j < L; j++) {
    size_t bytes = 0;
    for (int d = 0; d < p; d++)
      if (av_handler(t, pl->h, d) == j) {
        *co++ = av_scount(c, d);
        bytes += av_scount(c, d) * es;
      }
    pl->pack_off[j + 1] = pl->pack_off[j] + av_align(bytes);
  }
  /* What arrives across: one message per other host, from the handler of
   * this rank there, its ranks' blocks in local order after their counts. */
  pl->recv_off[0] = 0;
  for (int g = 0; g < H; g++)
    pl->recv_off[g + 1] = pl->recv_off[g] + av_align(av_across_bytes(c, g));

  /* Step counts: each local rank's counts for what this rank serves. */
  uint64_t slot_c = collie__call_slot(c, AV_STEP_COUNTS);
  collie_result_t rc = COLLIE_SUCCESS;
  int n = 0;
  co = pl->cout;
  for (int j = 0; j < L && rc == COLLIE_SUCCESS; j++) {
    int nj = av_nserve(t, pl->h, j);
    if (j == pl->li) {
      memcpy(pl->cin + (size_t)j * pl->nserve, co, (size_t)nj * sizeof(uint64_t));
    } else {
      rc = collie__call_isend(c, pl->local[j], co, (size_t)nj * sizeof(uint64_t), slot_c,
                              &pl->req[n++]);
      if (rc == COLLIE_SUCCESS)
        rc = collie__call_irecv(c, pl->local[j], pl->cin + (size_t)j * pl->nserve,
                                (size_t)pl->nserve * sizeof(uint64_t), slot_c, &pl->req[n++]);
    }
    co += nj;
  }
  if (rc == COLLIE_SUCCESS) rc = av_wait(c, pl, n);
  if (rc != COLLIE_SUCCESS) return rc;

  /* Now the data's sizes: what each local rank hands in here, and what
   * goes out to each destination served on another host. */
  pl->in_off[0] = 0;
  for (int j = 0; j < L; j++) {
    size_t bytes = 0;
    for (int k = 0; j != pl->li && k < pl->nserve; k++)
      bytes += pl->cin[(size_t)j * pl->nserve + k] * es;
    pl->in_off[j + 1] = pl->in_off[j] + av_align(bytes);
  }
  pl->out_off[0] = 0;
  for (int k = 0; k < pl->nserve; k++) {
    size_t bytes = 0;
    for (int j = 0; t->host[pl->serve[k]] != pl->h && j < L; j++)
      bytes += pl->cin[(size_t)j * pl->nserve + k] * es + sizeof(uint64_t);
    pl->out_off[k + 1] = pl->out_off[k] + av_align(bytes);
  }
  size_t data = pl->pack_off[L] + pl->in_off[L] + pl->out_off[pl->nserve] + pl->recv_off[H];
  pl->pack = collie__scratch_get(c->scratch, data + 64); /* never 0: all counts may be */
  if (!pl->pack) return COLLIE_SYSTEM_ERROR;
  pl->in = pl->pack + pl->pack_off[L];
  pl->out = pl->in + pl->in_off[L];
  pl->recv = pl->out + pl->out_off[pl->nserve];

  /* Receives across first: the other hosts' handlers may be ready first. */
  uint64_t slot_a = collie__call_slot(c, AV_STEP_ACROSS), slot_i = collie__call_slot(c, AV_STEP_IN);
  n = 0;
  for (int g = 0; g < H && rc == COLLIE_SUCCESS; g++) {
    if (g == pl->h) continue;
    int from = t->by_host[t->first[g] + av_handler(t, g, me)];
    rc = collie__call_irecv(c, from, pl->recv + pl->recv_off[g], av_across_bytes(c, g), slot_a,
                            &pl->req[n++]);
  }
  int nacross = n;
  /* Step in: pack, hand in, take in. */
  for (int j = 0; j < L; j++) {
    char *at = pl->pack + pl->pack_off[j];
    for (int d = 0; d < p; d++)
      if (av_handler(t, pl->h, d) == j) {
        size_t b = av_scount(c, d) * es;
        if (b) collie__call_copy_small(c, at, (const char *)c->sendbuf + av_sdispl(c, d) * es, b);
        at += b;
      }
  }
  for (int j = 0; j < L && rc == COLLIE_SUCCESS; j++) {
    if (j == pl->li) continue;
    size_t sb = 0, rb = 0;
    for (int d = 0; d < p; d++)
      if (av_handler(t, pl->h, d) == j) sb += av_scount(c, d) * es;
    for (int k = 0; k < pl->nserve; k++) rb += pl->cin[(size_t)j * pl->nserve + k] * es;
    rc = collie__call_isend_direct(c, pl->local[j], pl->pack + pl->pack_off[j], sb, slot_i,
                                   &pl->req[n++]);
    if (rc == COLLIE_SUCCESS)
      rc = collie__call_irecv(c, pl->local[j], pl->in + pl->in_off[j], rb, slot_i, &pl->req[n++]);
  }
  if (rc != COLLIE_SUCCESS) return rc;
  {
    struct collie__req **w = pl->w + nacross;
    for (int i = nacross; i < n; i++) pl->w[i] = &pl->req[i];
    rc = n > nacross ? collie__net_wait(c->net, w, n - nacross, c->deadline_ns) : COLLIE_SUCCESS;
    if (rc != COLLIE_SUCCESS) return rc;
  }

  /* Step across: per destination served on another host, every local
   * rank's block for it, in local order. Blocks of local rank j sit in its
   * region in destination order, so one cursor per rank walks them. */
  char **src = pl->src;
  for (int j = 0; j < L; j++)
    src[j] = j == pl->li ? pl->pack + pl->pack_off[j] : pl->in + pl->in_off[j];
  int m = nacross;
  collie_result_t bad = COLLIE_SUCCESS; /* counts that disagree: after every wait */
  for (int k = 0; k < pl->nserve && rc == COLLIE_SUCCESS; k++) {
    int d = pl->serve[k];
    if (d == me) { /* this host's blocks for this rank: unpack them */
      for (int j = 0; j < L; j++) {
        size_t got = pl->cin[(size_t)j * pl->nserve + k], b = got * es;
        if (av_check(c, pl->local[j], got, &bad) && b)
          collie__call_copy(c, (char *)c->recvbuf + av_rdispl(c, pl->local[j]) * es, src[j], b);
        src[j] += b;
      }
      continue;
    }
    char *at = pl->out + pl->out_off[k], *start = at;
    for (int j = 0; j < L; j++, at += sizeof(uint64_t))
      memcpy(at, &pl->cin[(size_t)j * pl->nserve + k], sizeof(uint64_t));
    for (int j = 0; j < L; j++) {
      size_t b = pl->cin[(size_t)j * pl->nserve + k] * es;
      if (b) collie__call_copy_small(c, at, src[j], b);
      src[j] += b;
      at += b;
    }
    rc = collie__call_isend(c, d, start, (size_t)(at - start), slot_a, &pl->req[m++]);
  }
  for (int i = 0; i < m; i++) pl->w[i] = &pl->req[i];
  collie_result_t wrc = m ? collie__net_wait(c->net, pl->w, m, c->deadline_ns) : COLLIE_SUCCESS;
  if (rc == COLLIE_SUCCESS) rc = wrc;
  if (rc != COLLIE_SUCCESS) return rc;

  /* Step out: each other host's blocks, in its local order, after their
   * counts (the message's length matched: only the split may differ). */
  for (int g = 0; g < H; g++) {
    if (g == pl->h) continue;
    const char *at = pl->recv + pl->recv_off[g];
    int Lg = t->host_size[g], ok = 1;
    for (int j = 0; j < Lg; j++) {
      uint64_t got;
      memcpy(&got, at + (size_t)j * sizeof(uint64_t), sizeof(got));
      ok &= av_check(c, t->by_host[t->first[g] + j], (size_t)got, &bad);
    }
    at += (size_t)Lg * sizeof(uint64_t);
    for (int j = 0; ok && j < Lg; j++) {
      int from = t->by_host[t->first[g] + j];
      size_t b = av_rcount(c, from) * es;
      if (b) collie__call_copy(c, (char *)c->recvbuf + av_rdispl(c, from) * es, at, b);
      at += b;
    }
  }
  return bad;
}

static int
av_applies(const struct collie__call *c)
{
  const struct collie__topo *t = c->topo;
  return t && !c->group && c->models && t->nhosts >= 2 && t->nhosts < c->size;
}

/* The latency terms (see the top). */
static double
av_alpha_cost(const struct collie__call *c)
{
  const struct collie__topo *t = c->topo;
  const struct collie__model *ml = &c->models->cls[COLLIE_NET_CLASS_LOCAL];
  const struct collie__model *mr = &c->models->cls[c->cls];
  int per = (t->max_local + t->min_local - 1) / t->min_local;
  return 2.0 * (t->max_local - 1) * ml->alpha_us + collie__overlap_us(mr, per * (t->nhosts - 1), 0);
}

static double
hier_av_cost(const struct collie__call *c, const struct collie__model *m)
{
  (void)m;
  if (!av_applies(c)) return -1;
  return av_alpha_cost(c);
}

/* alltoall on hosts of different sizes (hier.c's rail alltoall takes equal
 * ones): the latency terms, four local copies of the rank's S bytes, and
 * the bytes that leave the biggest host, over its link shared by its
 * handlers. */
double
collie__hier_alltoall_uneven_cost(const struct collie__call *c)
{
  if (!av_applies(c) || c->topo->uniform) return -1;
  const struct collie__topo *t = c->topo;
  const struct collie__model *ml = &c->models->cls[COLLIE_NET_CLASS_LOCAL];
  const struct collie__model *mr = &c->models->cls[c->cls];
  double blk = (double)(c->count * c->esize), L = t->max_local;
  double leaving = L * blk * (double)(c->size - t->max_local);
  return av_alpha_cost(c) + 4 * blk * c->size * ml->beta_us + leaving * mr->beta_us;
}

collie_result_t
collie__hier_alltoall_uneven_run(struct collie__call *c)
{
  return hier_av_run(c);
}

const struct collie__algo collie__algo_alltoallv_hierarchical = {
    "hierarchical", COLLIE_ALGO_HIERARCHICAL, COLLIE_KIND_ALLTOALLV, 0, hier_av_cost, hier_av_run};

/* ---- reduce_scatter on hosts of different sizes ---- */

collie_result_t
collie__hier_reduce_scatter_uneven_run(struct collie__call *c)
{
  const struct collie__topo *t = c->topo;
  int h = t->host[c->rank], L = t->host_size[h], li = t->local[c->rank], H = t->nhosts, p = c->size,
      me = c->rank;
  const int *local = t->by_host + t->first[h];
  int nserve = av_nserve(t, h, li);
  size_t blk = c->count * c->esize;
  /* Scratch: requests, then this rank's blocks by handler (in destination
   * order), what the local ranks hand in, and what comes across. */
  size_t nreq = 2 * (size_t)L + (size_t)p + (size_t)H;
  size_t head = av_align(nreq * (sizeof(struct collie__req) + sizeof(struct collie__req *)));
  size_t in_bytes = (size_t)L * nserve * blk, across = (size_t)H * blk;
  char *base = collie__scratch_get(c->scratch, head + (size_t)p * blk + in_bytes + across + 64);
  if (!base) return COLLIE_SYSTEM_ERROR;
  struct collie__req *req = (struct collie__req *)base;
  struct collie__req **w = (struct collie__req **)(req + nreq);
  char *pack = base + head, *in = pack + (size_t)p * blk, *recv = in + in_bytes;
  /* pack: this rank's blocks, handler after handler, each handler's in
   * destination order (the order it serves them in). */
  size_t at = 0;
  for (int j = 0; j < L; j++)
    for (int d = 0; d < p; d++)
      if (av_handler(t, h, d) == j) {
        if (blk)
          collie__call_copy_small(c, pack + at * blk, (const char *)c->sendbuf + d * blk, blk);
        at++;
      }
  uint64_t slot_i = collie__call_slot(c, AV_STEP_IN), slot_a = collie__call_slot(c, AV_STEP_ACROSS);
  collie_result_t rc = COLLIE_SUCCESS;
  int n = 0;
  /* Across first: one partial from each other host's handler for this rank. */
  for (int g = 0; g < H && rc == COLLIE_SUCCESS; g++)
    if (g != h)
      rc = collie__call_irecv(c, t->by_host[t->first[g] + av_handler(t, g, me)], recv + g * blk,
                              blk, slot_a, &req[n++]);
  int nacross = n;
  size_t off = 0, mine = 0;
  for (int j = 0; j < L && rc == COLLIE_SUCCESS; j++) {
    int nj = av_nserve(t, h, j);
    if (j == li) {
      mine = off;
    } else {
      rc = collie__call_isend_direct(c, local[j], pack + off * blk, (size_t)nj * blk, slot_i,
                                     &req[n++]);
      if (rc == COLLIE_SUCCESS)
        rc = collie__call_irecv(c, local[j], in + (size_t)j * nserve * blk, (size_t)nserve * blk,
                                slot_i, &req[n++]);
    }
    off += (size_t)nj;
  }
  for (int i = 0; i < n; i++) w[i] = &req[i];
  if (rc == COLLIE_SUCCESS && n > nacross)
    rc = collie__net_wait(c->net, w + nacross, n - nacross, c->deadline_ns);
  if (rc != COLLIE_SUCCESS) return rc;
  /* This host's partial for each destination served: the own blocks plus
   * every local rank's, reduced into the own (pack is this rank's copy). */
  char *acc = pack + mine * blk;
  for (int j = 0; j < L; j++)
    if (j != li)
      for (int k = 0; k < nserve; k++)
        c->reduce(acc + (size_t)k * blk, in + ((size_t)j * nserve + k) * blk, c->count);
  int m = nacross, own = -1;
  for (int k = 0, d = 0; d < p && rc == COLLIE_SUCCESS; d++) {
    if (av_handler(t, h, d) != li) continue;
    if (d == me)
      own = k;
    else
      rc = collie__call_isend(c, d, acc + (size_t)k * blk, blk, slot_a, &req[m++]);
    k++;
  }
  for (int i = 0; i < m; i++) w[i] = &req[i];
  collie_result_t wrc = m ? collie__net_wait(c->net, w, m, c->deadline_ns) : COLLIE_SUCCESS;
  if (rc == COLLIE_SUCCESS) rc = wrc;
  if (rc != COLLIE_SUCCESS) return rc;
  /* This rank's block: its host's partial and the others', in host order
   * (so the result does not depend on which message came first). */
  char *res = acc + (size_t)own * blk;
  for (int g = 0; g < H; g++)
    if (g != h) c->reduce(res, recv + g * blk, c->count);
  if (blk) collie__call_copy(c, c->recvbuf, res, blk);
  if (c->op == COLLIE_AVG) collie__reduce_avg_finish(c->recvbuf, c->count, c->dtype, p);
  return COLLIE_SUCCESS;
}

double
collie__hier_reduce_scatter_uneven_cost(const struct collie__call *c)
{
  if (!av_applies(c) || c->topo->uniform) return -1;
  const struct collie__topo *t = c->topo;
  const struct collie__model *ml = &c->models->cls[COLLIE_NET_CLASS_LOCAL];
  const struct collie__model *mr = &c->models->cls[c->cls];
  int per = (t->max_local + t->min_local - 1) / t->min_local;
  double blk = (double)(c->count * c->esize), S = blk * c->size, L = t->max_local;
  return (L - 1) * ml->alpha_us + collie__overlap_us(mr, per * (t->nhosts - 1), 0) +
         S * (2 * ml->beta_us + ml->gamma_us) + L * blk * (c->size - L) * mr->beta_us;
}
