/*
 * hier.c - the hierarchical family (issue 20): shared memory inside a host,
 * the network between hosts, on the communicator's topology (topo.h).
 *
 * A flat algorithm on several hosts pays the network's latency at every
 * step, also for the steps between two ranks of one host. The algorithms
 * here cut a collective into phases that each run a flat algorithm on a
 * group of the communicator (coll.h: call->group): a host's local group,
 * whose messages go over shared memory, and a rail (the ranks of one local
 * index, one per host), whose messages cross the network. Each phase picks
 * its flat algorithm by the model of its own level, so the whole costs
 * (local alpha and beta for the local phases, the network's for the rail)
 * are what select.c compares with the flat algorithms' single-level cost.
 *
 *   allreduce, "leader" (small S): reduce to local index 0 on every host,
 *     allreduce over rail 0, broadcast inside each host.
 *   allreduce, "sharded" (large S, K = the smallest host's ranks >= 2):
 *     ring reduce-scatter inside each host into K shards, allreduce of
 *     shard i over rail i (K rails at once, so the bytes between hosts are
 *     spread over K ranks rather than funnelled through one), ring
 *     allgather inside each host. A bigger host's ranks beyond K hand their
 *     input to local index (i mod K) first and take the result back last.
 *   broadcast: the root hands the buffer to its host's local index 0 (when
 *     it is not that), broadcast over rail 0, then inside each host.
 *   reduce: reduce inside each host to local index 0, reduce over rail 0 to
 *     the root's host, then to the root (when it is not local index 0).
 *   allgather(v): each host's blocks gathered at local index 0, those
 *     exchanged between the hosts' index-0 ranks, the whole buffer
 *     broadcast inside each host (an allgatherv whose blocks do not lie end
 *     to end: packed first and put in place after, never writing the gaps).
 *   barrier: barrier inside each host, over rail 0, inside each host again
 *     (no rank leaves before every host's index 0 has passed rail 0).
 *   reduce_scatter (hosts of equal size L; other hosts: hier_handler.c):
 *     the input's blocks put in rail
 *     order (rail 0's ranks host by host, then rail 1's, ...), a ring
 *     reduce-scatter inside each host leaves on local index i its host's
 *     sum of rail i's blocks, and a reduce-scatter over rail i finishes them.
 *   gather: each rank's block to its host's collector (the root on the
 *     root's host, local index 0 elsewhere), then each other host's blocks
 *     to the root in one message; scatter the mirror (below).
 *   alltoall (hosts of equal size L; other hosts: hier_handler.c, as
 *     alltoallv), aggregated per host pair: inside each
 *     host an alltoall hands local index i every block its host sends to
 *     rail i; over rail i an alltoall then moves, per pair of hosts, the L
 *     blocks of the one host for the other's rank i in one message, where
 *     the flat algorithms send L x L messages per pair of hosts.
 *
 * Costs: the sum of the phases' cheapest flat costs, each under its level's
 * model. The K rails of the sharded allreduce share each host's link, so
 * their phase is costed at K times the network's beta: a host sends the
 * same bytes between hosts either way, over K streams. A phase's steps are
 * numbered from its own base (HIER_STEP_*), so two phases of one call never
 * share a slot even between the same two ranks.
 *
 * Applies to a whole communicator on at least two hosts where some host has
 * two ranks or more (on one host, or one rank per host, a phase would be
 * the flat algorithm itself). Phases do not nest.
 */
#include <string.h>

#include "coll/coll.h"
#include "coll/coll_int.h"
#include "coll/topo.h"
#include "util/error.h"

/* Step bases of the phases: 12288 steps each, more than any flat algorithm
 * takes on a group of fewer than 6144 ranks. */
enum {
  HIER_STEP_IN = 0x0000,    /* hand-ins to a host's index 0 or shard owner */
  HIER_STEP_LOCAL = 0x3000, /* the first phase inside a host */
  HIER_STEP_RAIL = 0x6000,  /* between hosts */
  HIER_STEP_BACK = 0x9000,  /* the last phase inside a host */
  HIER_STEP_OUT = 0xC000    /* results handed back to a bigger host's extra ranks */
};

static int
hier_applies(const struct collie__call *c)
{
  const struct collie__topo *t = c->topo;
  return t && !c->group && c->models && t->nhosts >= 2 && t->nhosts < c->size;
}

static const struct collie__model *
hier_local_model(const struct collie__call *c)
{
  return &c->models->cls[COLLIE_NET_CLASS_LOCAL];
}

static const struct collie__model *
hier_rail_model(const struct collie__call *c)
{
  return &c->models->cls[c->cls];
}

/* The network's model for one of k rails that run at once and share each
 * host's link: every byte waits for the other rails' bytes. */
static struct collie__model
hier_shared_model(const struct collie__call *c, int k)
{
  struct collie__model m = *hier_rail_model(c);
  m.beta_us *= k;
  return m;
}

/* ---- Phases ---- */

/* A phase of c: `kind` over `size` ranks of `group` (this rank is `rank`
 * there), `count` elements (the kind's meaning), rooted at `root`, with
 * steps from step0, run by the flat algorithm cheapest under m. AVG reduces
 * as SUM in a phase: the hierarchical algorithm divides once, by c's size. */
struct hier_phase {
  struct collie__call call;
  const struct collie__algo *algo;
  double cost_us;
};

/* c as a phase of `kind` over `size` ranks (the group, this rank's place
 * in it, buffers and steps are the caller's to set). */
static void
hier_phase_call(const struct collie__call *c, struct collie__call *s, int kind, int size,
                size_t count, int root)
{
  *s = *c;
  s->kind = kind;
  s->size = size;
  s->rank = 0;
  s->count = count;
  s->root = root;
  s->topo = NULL;
  s->all_shm = 0;
  s->group = NULL;
  s->sendcounts = s->sdispls = s->recvcounts = s->rdispls = NULL;
  if (s->op == COLLIE_AVG) s->op = COLLIE_SUM;
  /* A compressed allreduce compresses its allreduce phase, the one over a
   * rail; the phases inside a host move float32 (shared memory: no bytes to
   * save, and each rounding would add error). */
  if (kind != COLLIE_KIND_ALLREDUCE) s->wire = COLLIE_WIRE_NATIVE;
}

static void
hier_phase_plan(const struct collie__call *c, struct hier_phase *ph, int kind, int size,
                size_t count, int root, const struct collie__model *m)
{
  hier_phase_call(c, &ph->call, kind, size, count, root);
  ph->algo = collie__algo_cheapest_flat(&ph->call, m, &ph->cost_us);
}

/* Cost of a phase (0 for a group of one, which moves nothing). */
static double
hier_phase_cost(const struct collie__call *c, int kind, int size, size_t count, int root,
                const struct collie__model *m)
{
  if (size <= 1) return 0;
  struct hier_phase ph;
  hier_phase_plan(c, &ph, kind, size, count, root, m);
  return ph.cost_us;
}

/* Runs a phase on group[0..size) where this rank is `rank`, with its
 * buffers, in the phases' scratch. */
static collie_result_t
hier_phase_run(struct collie__call *c, int kind, const int *group, int size, int rank,
               const void *sendbuf, void *recvbuf, size_t count, int root, uint32_t step0,
               const struct collie__model *m)
{
  if (size == 1) { /* a group of one: a reduction is its input */
    int reduces = kind == COLLIE_KIND_REDUCE || kind == COLLIE_KIND_ALLREDUCE;
    size_t bytes = count * c->esize;
    if (reduces && bytes && recvbuf && recvbuf != sendbuf)
      collie__call_copy(c, recvbuf, sendbuf, bytes);
    return COLLIE_SUCCESS;
  }
  struct hier_phase ph;
  hier_phase_plan(c, &ph, kind, size, count, root, m);
  if (!ph.algo)
    return collie__err(COLLIE_INTERNAL_ERROR, "%s #%u: no flat algorithm for a %d-rank %s phase",
                       collie__kind_name(c->kind), c->seq, size, collie__kind_name(kind));
  struct collie__call *s = &ph.call;
  s->group = group;
  s->rank = rank;
  s->sendbuf = sendbuf;
  s->recvbuf = recvbuf;
  s->step0 = step0;
  s->algo = ph.algo->id;
  s->scratch = c->scratch + 1;
  return ph.algo->run(s);
}

/* This rank's host group: its ranks, how many, and this rank's index. */
static const int *
hier_local(const struct collie__call *c, int *size, int *li)
{
  const struct collie__topo *t = c->topo;
  int h = t->host[c->rank];
  *size = t->host_size[h];
  *li = t->local[c->rank];
  return t->by_host + t->first[h];
}

/* Rail i (every host has an index i below min_local: one rank per host, in
 * host order, so this rank's place in it is its host). */
static const int *
hier_rail(const struct collie__call *c, int i)
{
  return c->topo->by_rail + c->topo->rail_first[i];
}

/* ---- allreduce ---- */

/* Which allreduce variant is cheaper: every rank decides alike (it depends
 * on the topology, the count and the models only). */
static double
hier_allreduce_plan(const struct collie__call *c, int *sharded)
{
  const struct collie__topo *t = c->topo;
  const struct collie__model *ml = hier_local_model(c), *mr = hier_rail_model(c);
  int H = t->nhosts, L = t->max_local, K = t->min_local;
  double S = (double)(c->count * c->esize);
  double leader = hier_phase_cost(c, COLLIE_KIND_REDUCE, L, c->count, 0, ml) +
                  hier_phase_cost(c, COLLIE_KIND_ALLREDUCE, H, c->count, 0, mr) +
                  hier_phase_cost(c, COLLIE_KIND_BROADCAST, L, c->count, 0, ml);
  *sharded = 0;
  if (K < 2 || c->count < (size_t)K) return leader;
  struct collie__model shared = hier_shared_model(c, K);
  double k = K;
  double sh = 2 * (k - 1) * ml->alpha_us + (k - 1) / k * S * (2 * ml->beta_us + ml->gamma_us) +
              hier_phase_cost(c, COLLIE_KIND_ALLREDUCE, H, (c->count + K - 1) / K, 0, &shared);
  if (L > K) { /* extras hand in and take back the whole buffer */
    int rounds = (L - K + K - 1) / K;
    sh += rounds * (2 * ml->alpha_us + S * (2 * ml->beta_us + ml->gamma_us));
  }
  if (sh < leader) {
    *sharded = 1;
    return sh;
  }
  return leader;
}

static collie_result_t
hier_allreduce_leader(struct collie__call *c)
{
  int L, li;
  const int *local = hier_local(c, &L, &li);
  const struct collie__topo *t = c->topo;
  collie_result_t rc = hier_phase_run(c, COLLIE_KIND_REDUCE, local, L, li, c->sendbuf, c->recvbuf,
                                      c->count, 0, HIER_STEP_LOCAL, hier_local_model(c));
  if (rc != COLLIE_SUCCESS) return rc;
  if (li == 0) {
    rc = hier_phase_run(c, COLLIE_KIND_ALLREDUCE, hier_rail(c, 0), t->nhosts, t->host[c->rank],
                        c->recvbuf, c->recvbuf, c->count, 0, HIER_STEP_RAIL, hier_rail_model(c));
    if (rc != COLLIE_SUCCESS) return rc;
    if (c->op == COLLIE_AVG) collie__reduce_avg_finish(c->recvbuf, c->count, c->dtype, c->size);
  }
  return hier_phase_run(c, COLLIE_KIND_BROADCAST, local, L, li, c->recvbuf, c->recvbuf, c->count, 0,
                        HIER_STEP_BACK, hier_local_model(c));
}

static collie_result_t
hier_allreduce_sharded(struct collie__call *c)
{
  const struct collie__topo *t = c->topo;
  int L, li, K = t->min_local;
  const int *local = hier_local(c, &L, &li);
  char *buf = c->recvbuf;
  size_t bytes = c->count * c->esize;
  collie_result_t rc;
  if (c->sendbuf != c->recvbuf && bytes) collie__call_copy(c, buf, c->sendbuf, bytes);
  if (li >= K) { /* an extra rank of a bigger host: its owner does its share */
    int owner = local[li % K];
    if ((rc = collie__send_direct(c, owner, buf, bytes, HIER_STEP_IN)) != COLLIE_SUCCESS) return rc;
    return collie__sendrecv(c, -1, NULL, 0, owner, buf, bytes, HIER_STEP_OUT);
  }
  if (L > K) {
    char *in = collie__scratch_get(c->scratch, bytes);
    if (!in) return COLLIE_SYSTEM_ERROR;
    for (int e = li + K; e < L; e += K) {
      rc = collie__sendrecv(c, -1, NULL, 0, local[e], in, bytes, HIER_STEP_IN);
      if (rc != COLLIE_SUCCESS) return rc;
      c->reduce(buf, in, c->count);
    }
  }
  /* The local phases run the ring's own phases on the first K ranks of the
   * host, so that shard i ends on local index i with every host cutting the
   * same shards. */
  struct collie__call sc, *s = &sc;
  hier_phase_call(c, s, COLLIE_KIND_ALLREDUCE, K, c->count, 0);
  s->group = local;
  s->rank = li;
  s->algo = COLLIE_ALGO_RING;
  s->step0 = HIER_STEP_LOCAL;
  char *tmp = collie__scratch_get(c->scratch, collie__ring_staging_bytes(s, c->count));
  if (!tmp) return COLLIE_SYSTEM_ERROR;
  if ((rc = collie__ring_reduce_scatter_phase(s, buf, c->count, tmp, -1)) != COLLIE_SUCCESS)
    return rc;
  size_t off = collie__block_off(c->count, K, li), len = collie__block_len(c->count, K, li);
  char *shard = buf + off * c->esize;
  struct collie__model shared = hier_shared_model(c, K);
  rc = hier_phase_run(c, COLLIE_KIND_ALLREDUCE, hier_rail(c, li), t->nhosts, t->host[c->rank],
                      shard, shard, len, 0, HIER_STEP_RAIL, &shared);
  if (rc != COLLIE_SUCCESS) return rc;
  if (c->op == COLLIE_AVG) collie__reduce_avg_finish(shard, len, c->dtype, c->size);
  s->step0 = HIER_STEP_BACK;
  if ((rc = collie__ring_allgather_phase(s, buf, c->count, -1)) != COLLIE_SUCCESS) return rc;
  for (int e = li + K; e < L; e += K)
    if ((rc = collie__send_direct(c, local[e], buf, bytes, HIER_STEP_OUT)) != COLLIE_SUCCESS)
      return rc;
  return COLLIE_SUCCESS;
}

static collie_result_t
hier_allreduce_run(struct collie__call *c)
{
  int sharded;
  hier_allreduce_plan(c, &sharded);
  return sharded ? hier_allreduce_sharded(c) : hier_allreduce_leader(c);
}

static double
hier_allreduce_cost(const struct collie__call *c, const struct collie__model *m)
{
  (void)m;
  if (!hier_applies(c)) return -1;
  int sharded;
  return hier_allreduce_plan(c, &sharded);
}

/* COLLIE_WIRE_OK: a compressed call sends 16-bit floats over the rails
 * only (the rail phase is the compressed allreduce), float32 inside hosts. */
const struct collie__algo collie__algo_allreduce_hierarchical = {
    "hierarchical",        COLLIE_ALGO_HIERARCHICAL,
    COLLIE_KIND_ALLREDUCE, COLLIE_NEEDS_REDUCE | COLLIE_WIRE_OK,
    hier_allreduce_cost,   hier_allreduce_run};

/* ---- broadcast ---- */

static collie_result_t
hier_broadcast_run(struct collie__call *c)
{
  const struct collie__topo *t = c->topo;
  int L, li, hr = t->host[c->root], h = t->host[c->rank];
  const int *local = hier_local(c, &L, &li);
  size_t bytes = c->count * c->esize;
  collie_result_t rc;
  if (t->local[c->root] != 0 && h == hr) { /* the root hands it to its host's index 0 */
    if (c->rank == c->root)
      rc = collie__send_direct(c, local[0], c->recvbuf, bytes, HIER_STEP_IN);
    else if (li == 0)
      rc = collie__sendrecv(c, -1, NULL, 0, c->root, c->recvbuf, bytes, HIER_STEP_IN);
    else
      rc = COLLIE_SUCCESS;
    if (rc != COLLIE_SUCCESS) return rc;
  }
  if (li == 0) {
    rc = hier_phase_run(c, COLLIE_KIND_BROADCAST, hier_rail(c, 0), t->nhosts, h, c->recvbuf,
                        c->recvbuf, c->count, hr, HIER_STEP_RAIL, hier_rail_model(c));
    if (rc != COLLIE_SUCCESS) return rc;
  }
  return hier_phase_run(c, COLLIE_KIND_BROADCAST, local, L, li, c->recvbuf, c->recvbuf, c->count, 0,
                        HIER_STEP_BACK, hier_local_model(c));
}

static double
hier_broadcast_cost(const struct collie__call *c, const struct collie__model *m)
{
  (void)m;
  if (!hier_applies(c)) return -1;
  const struct collie__topo *t = c->topo;
  const struct collie__model *ml = hier_local_model(c);
  double S = (double)(c->count * c->esize);
  double hand = t->local[c->root] ? ml->alpha_us + S * ml->beta_us : 0;
  return hand +
         hier_phase_cost(c, COLLIE_KIND_BROADCAST, t->nhosts, c->count, 0, hier_rail_model(c)) +
         hier_phase_cost(c, COLLIE_KIND_BROADCAST, t->max_local, c->count, 0, ml);
}

const struct collie__algo collie__algo_broadcast_hierarchical = {
    "hierarchical",      COLLIE_ALGO_HIERARCHICAL, COLLIE_KIND_BROADCAST, 0,
    hier_broadcast_cost, hier_broadcast_run};

/* ---- reduce ---- */

static collie_result_t
hier_reduce_run(struct collie__call *c)
{
  const struct collie__topo *t = c->topo;
  int L, li, hr = t->host[c->root], h = t->host[c->rank], lr = t->local[c->root];
  const int *local = hier_local(c, &L, &li);
  size_t bytes = c->count * c->esize;
  collie_result_t rc;
  /* Index 0 of every host holds its host's sum, then index 0 of the root's
   * host the whole: in the root's recvbuf when it is the root, else in the
   * call's scratch (the phases use their own). */
  char *acc = NULL;
  if (li == 0) {
    acc = c->rank == c->root ? c->recvbuf : collie__scratch_get(c->scratch, bytes ? bytes : 1);
    if (!acc) return COLLIE_SYSTEM_ERROR;
  }
  rc = hier_phase_run(c, COLLIE_KIND_REDUCE, local, L, li, c->sendbuf, acc, c->count, 0,
                      HIER_STEP_LOCAL, hier_local_model(c));
  if (rc != COLLIE_SUCCESS) return rc;
  if (li == 0) {
    rc = hier_phase_run(c, COLLIE_KIND_REDUCE, hier_rail(c, 0), t->nhosts, h, acc, acc, c->count,
                        hr, HIER_STEP_RAIL, hier_rail_model(c));
    if (rc != COLLIE_SUCCESS) return rc;
    if (h == hr && c->op == COLLIE_AVG) collie__reduce_avg_finish(acc, c->count, c->dtype, c->size);
  }
  if (lr != 0 && h == hr) { /* index 0 hands the result to the root */
    if (li == 0) return collie__send_direct(c, c->root, acc, bytes, HIER_STEP_OUT);
    if (c->rank == c->root)
      return collie__sendrecv(c, -1, NULL, 0, local[0], c->recvbuf, bytes, HIER_STEP_OUT);
  }
  return COLLIE_SUCCESS;
}

static double
hier_reduce_cost(const struct collie__call *c, const struct collie__model *m)
{
  (void)m;
  if (!hier_applies(c)) return -1;
  const struct collie__topo *t = c->topo;
  const struct collie__model *ml = hier_local_model(c);
  double S = (double)(c->count * c->esize);
  double hand = t->local[c->root] ? ml->alpha_us + S * ml->beta_us : 0;
  return hier_phase_cost(c, COLLIE_KIND_REDUCE, t->max_local, c->count, 0, ml) +
         hier_phase_cost(c, COLLIE_KIND_REDUCE, t->nhosts, c->count, 0, hier_rail_model(c)) + hand;
}

const struct collie__algo collie__algo_reduce_hierarchical = {
    "hierarchical",      COLLIE_ALGO_HIERARCHICAL, COLLIE_KIND_REDUCE,
    COLLIE_NEEDS_REDUCE, hier_reduce_cost,         hier_reduce_run};

/* ---- allgather(v) ---- */

/* Block q of the output: where it starts and its bytes. */
static void
hier_ag_block(const struct collie__call *c, int q, size_t *off, size_t *len)
{
  if (c->kind == COLLIE_KIND_ALLGATHERV) {
    *off = c->rdispls[q] * c->esize;
    *len = c->recvcounts[q] * c->esize;
  } else {
    *len = c->count * c->esize;
    *off = (size_t)q * *len;
  }
}

/* Elements of the whole output, and whether its blocks lie end to end from
 * offset 0 in rank order (always for allgather): the local broadcast then
 * sends it as one run; else through a packed copy, since the gaps between
 * an allgatherv's blocks are the caller's and must not be written. */
static size_t
hier_ag_total(const struct collie__call *c, int *run)
{
  if (c->kind != COLLIE_KIND_ALLGATHERV) {
    *run = 1;
    return c->count * (size_t)c->size;
  }
  size_t total = 0;
  *run = 1;
  for (int q = 0; q < c->size; q++) {
    if (c->rdispls[q] != total) *run = 0;
    total += c->recvcounts[q];
  }
  return total;
}

static collie_result_t
hier_allgather_run(struct collie__call *c)
{
  const struct collie__topo *t = c->topo;
  int L, li, h = t->host[c->rank], run;
  const int *local = hier_local(c, &L, &li);
  size_t total = hier_ag_total(c, &run), bytes = total * c->esize, off, len;
  char *out = c->recvbuf;
  collie_result_t rc;
  /* Requests: L - 1 local blocks in, every other host's blocks in, and
   * this host's L blocks out to each of the H - 1 others (more than come
   * in when this host is the biggest). Then the packed output, if any. */
  size_t nreq = li ? 0 : (size_t)(L - 1) + (size_t)(c->size - L) + (size_t)L * (t->nhosts - 1);
  size_t head = (nreq * sizeof(struct collie__req) + 63) & ~(size_t)63;
  char *base = collie__scratch_get(c->scratch, head + (run ? 0 : bytes) + 64);
  if (!base) return COLLIE_SYSTEM_ERROR;
  char *packed = base + head;
  hier_ag_block(c, c->rank, &off, &len);
  if (li != 0) {
    if ((rc = collie__send_direct(c, local[0], c->sendbuf, len, HIER_STEP_IN)) != COLLIE_SUCCESS)
      return rc;
  } else {
    /* Index 0 gathers its host's blocks, then trades them with every other
     * host's index 0: one message per block, all posted at once. */
    int n = 0;
    struct collie__req *req = (struct collie__req *)base;
    struct collie__req **w = collie__scratch_get(c->scratch + 1, nreq * sizeof(*w) + 8);
    if (!w) return COLLIE_SYSTEM_ERROR;
    if (len && out + off != (const char *)c->sendbuf)
      collie__call_copy(c, out + off, c->sendbuf, len);
    uint64_t in = collie__call_slot(c, HIER_STEP_IN), x = collie__call_slot(c, HIER_STEP_RAIL);
    for (int q = 1; q < L; q++) {
      hier_ag_block(c, local[q], &off, &len);
      if ((rc = collie__call_irecv(c, local[q], out + off, len, in, &req[n++])) != COLLIE_SUCCESS)
        return rc;
    }
    for (int g = 0; g < t->nhosts; g++) {
      if (g == h) continue;
      const int *theirs = t->by_host + t->first[g];
      for (int q = 0; q < t->host_size[g]; q++) {
        hier_ag_block(c, theirs[q], &off, &len);
        if ((rc = collie__call_irecv(c, theirs[0], out + off, len, x, &req[n++])) != COLLIE_SUCCESS)
          return rc;
      }
    }
    for (int i = 0; i < n; i++) w[i] = &req[i];
    if ((rc = collie__net_wait(c->net, w, L - 1, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
    for (int g = 0; g < t->nhosts; g++) {
      if (g == h) continue;
      int to = t->by_host[t->first[g]];
      for (int q = 0; q < L; q++) {
        hier_ag_block(c, local[q], &off, &len);
        if ((rc = collie__call_isend(c, to, out + off, len, x, &req[n++])) != COLLIE_SUCCESS)
          return rc;
      }
    }
    for (int i = L - 1; i < n; i++) w[i] = &req[i];
    if ((rc = collie__net_wait(c->net, w + L - 1, n - (L - 1), c->deadline_ns)) != COLLIE_SUCCESS)
      return rc;
  }
  if (run)
    return hier_phase_run(c, COLLIE_KIND_BROADCAST, local, L, li, out, out, total, 0,
                          HIER_STEP_BACK, hier_local_model(c));
  /* The blocks one after another, broadcast, and put in place. */
  for (size_t q = 0, at = 0; li == 0 && q < (size_t)c->size; q++) {
    hier_ag_block(c, (int)q, &off, &len);
    if (len) collie__call_copy(c, packed + at, out + off, len);
    at += len;
  }
  rc = hier_phase_run(c, COLLIE_KIND_BROADCAST, local, L, li, packed, packed, total, 0,
                      HIER_STEP_BACK, hier_local_model(c));
  if (rc != COLLIE_SUCCESS || li == 0) return rc;
  for (size_t q = 0, at = 0; q < (size_t)c->size; q++) {
    hier_ag_block(c, (int)q, &off, &len);
    if (len) collie__call_copy(c, out + off, packed + at, len);
    at += len;
  }
  return COLLIE_SUCCESS;
}

static double
hier_allgather_cost(const struct collie__call *c, const struct collie__model *m)
{
  (void)m;
  if (!hier_applies(c)) return -1;
  const struct collie__topo *t = c->topo;
  const struct collie__model *ml = hier_local_model(c), *mr = hier_rail_model(c);
  int run;
  size_t total = hier_ag_total(c, &run);
  /* A block's bytes on average (an allgatherv's counts are the same on
   * every rank, so every rank prices alike). */
  double S = (double)(total * c->esize), blk = S / c->size, L = t->max_local, H = t->nhosts;
  /* Index 0 takes its host's blocks in, then every other host's blocks over
   * its link while it sends its own to each of them, all posted at once: a
   * link carries both ways at once, so the larger direction counts. */
  double gather = ml->alpha_us + (L - 1) * blk * ml->beta_us;
  double in = c->size - L, out = (H - 1) * L;
  double trade = collie__overlap_us(mr, H - 1, 0) + (in > out ? in : out) * blk * mr->beta_us;
  double pack = run ? 0 : 2 * S * ml->beta_us;
  return gather + trade + pack +
         hier_phase_cost(c, COLLIE_KIND_BROADCAST, t->max_local, total, 0, ml);
}

const struct collie__algo collie__algo_allgather_hierarchical = {
    "hierarchical",      COLLIE_ALGO_HIERARCHICAL, COLLIE_KIND_ALLGATHER, 0,
    hier_allgather_cost, hier_allgather_run};

const struct collie__algo collie__algo_allgatherv_hierarchical = {
    "hierarchical",      COLLIE_ALGO_HIERARCHICAL, COLLIE_KIND_ALLGATHERV, 0,
    hier_allgather_cost, hier_allgather_run};

/* ---- barrier ---- */

static collie_result_t
hier_barrier_run(struct collie__call *c)
{
  const struct collie__topo *t = c->topo;
  int L, li;
  const int *local = hier_local(c, &L, &li);
  const struct collie__model *ml = hier_local_model(c);
  collie_result_t rc =
      hier_phase_run(c, COLLIE_KIND_BARRIER, local, L, li, NULL, NULL, 0, 0, HIER_STEP_LOCAL, ml);
  if (rc == COLLIE_SUCCESS && li == 0)
    rc = hier_phase_run(c, COLLIE_KIND_BARRIER, hier_rail(c, 0), t->nhosts, t->host[c->rank], NULL,
                        NULL, 0, 0, HIER_STEP_RAIL, hier_rail_model(c));
  if (rc == COLLIE_SUCCESS)
    rc = hier_phase_run(c, COLLIE_KIND_BARRIER, local, L, li, NULL, NULL, 0, 0, HIER_STEP_BACK, ml);
  return rc;
}

static double
hier_barrier_cost(const struct collie__call *c, const struct collie__model *m)
{
  (void)m;
  if (!hier_applies(c)) return -1;
  const struct collie__topo *t = c->topo;
  const struct collie__model *ml = hier_local_model(c);
  return 2 * hier_phase_cost(c, COLLIE_KIND_BARRIER, t->max_local, 0, 0, ml) +
         hier_phase_cost(c, COLLIE_KIND_BARRIER, t->nhosts, 0, 0, hier_rail_model(c));
}

const struct collie__algo collie__algo_barrier_hierarchical = {
    "hierarchical",    COLLIE_ALGO_HIERARCHICAL, COLLIE_KIND_BARRIER, 0,
    hier_barrier_cost, hier_barrier_run};

/* ---- reduce_scatter (equal hosts) ---- */

static int
hier_uniform(const struct collie__call *c)
{
  return hier_applies(c) && c->topo->uniform;
}

/* Copies the size blocks of blk bytes of src into dst in rail order (the
 * k-th block of dst is rank by_rail[k]'s). */
static void
hier_to_rail_order(const struct collie__call *c, char *dst, const char *src, size_t blk)
{
  for (int k = 0; k < c->size; k++)
    collie__call_copy_small(c, dst + (size_t)k * blk, src + (size_t)c->topo->by_rail[k] * blk, blk);
}

static collie_result_t
hier_reduce_scatter_run(struct collie__call *c)
{
  if (!c->topo->uniform) return collie__hier_reduce_scatter_uneven_run(c);
  const struct collie__topo *t = c->topo;
  int L, li, H = t->nhosts;
  const int *local = hier_local(c, &L, &li);
  size_t blk = c->count * c->esize, total = c->count * (size_t)c->size;
  struct collie__call sc, *s = &sc;
  hier_phase_call(c, s, COLLIE_KIND_ALLREDUCE, L, total, 0);
  s->group = local;
  s->rank = li;
  s->algo = COLLIE_ALGO_RING;
  s->step0 = HIER_STEP_LOCAL;
  size_t pb = ((size_t)c->size * blk + 63) & ~(size_t)63;
  char *part = collie__scratch_get(c->scratch, pb + collie__ring_staging_bytes(s, total));
  if (!part) return COLLIE_SYSTEM_ERROR;
  hier_to_rail_order(c, part, c->sendbuf, blk);
  /* Equal hosts: part i of the ring is exactly rail i's H blocks. */
  collie_result_t rc = collie__ring_reduce_scatter_phase(s, part, total, part + pb, -1);
  if (rc != COLLIE_SUCCESS) return rc;
  struct collie__model shared = hier_shared_model(c, L);
  rc =
      hier_phase_run(c, COLLIE_KIND_REDUCE_SCATTER, hier_rail(c, li), H, t->host[c->rank],
                     part + (size_t)li * H * blk, c->recvbuf, c->count, 0, HIER_STEP_RAIL, &shared);
  if (rc == COLLIE_SUCCESS && c->op == COLLIE_AVG)
    collie__reduce_avg_finish(c->recvbuf, c->count, c->dtype, c->size);
  return rc;
}

static double
hier_reduce_scatter_cost(const struct collie__call *c, const struct collie__model *m)
{
  (void)m;
  if (hier_applies(c) && !c->topo->uniform) return collie__hier_reduce_scatter_uneven_cost(c);
  if (!hier_uniform(c)) return -1;
  const struct collie__topo *t = c->topo;
  const struct collie__model *ml = hier_local_model(c);
  struct collie__model shared = hier_shared_model(c, t->max_local);
  double L = t->max_local, S = (double)collie__call_bytes(c);
  return S * ml->beta_us + (L - 1) * ml->alpha_us + (L - 1) / L * S * (ml->beta_us + ml->gamma_us) +
         hier_phase_cost(c, COLLIE_KIND_REDUCE_SCATTER, t->nhosts, c->count, 0, &shared);
}

const struct collie__algo collie__algo_reduce_scatter_hierarchical = {
    "hierarchical",      COLLIE_ALGO_HIERARCHICAL, COLLIE_KIND_REDUCE_SCATTER,
    COLLIE_NEEDS_REDUCE, hier_reduce_scatter_cost, hier_reduce_scatter_run};

/* ---- alltoall (equal hosts) ---- */

static collie_result_t
hier_alltoall_run(struct collie__call *c)
{
  if (!c->topo->uniform) return collie__hier_alltoall_uneven_run(c);
  const struct collie__topo *t = c->topo;
  int L, li, H = t->nhosts;
  const int *local = hier_local(c, &L, &li);
  size_t blk = c->count * c->esize, all = (size_t)c->size * blk;
  /* a: the input in rail order, later the rail phase's input; b: what the
   * local phase brings, later the rail phase's output. */
  char *a = collie__scratch_get(c->scratch, 2 * all + 64);
  if (!a) return COLLIE_SYSTEM_ERROR;
  char *b = a + ((all + 63) & ~(size_t)63);
  hier_to_rail_order(c, a, c->sendbuf, blk);
  /* Local index j sends local index i rail i's H blocks: b[j][g] is the
   * block local index j sends to host g's rank i. */
  collie_result_t rc =
      hier_phase_run(c, COLLIE_KIND_ALLTOALL, local, L, li, a, b, c->count * (size_t)H, 0,
                     HIER_STEP_LOCAL, hier_local_model(c));
  if (rc != COLLIE_SUCCESS) return rc;
  /* Per destination host g, the L blocks of this host's ranks: a[g][j]. */
  for (int g = 0; g < H; g++)
    for (int j = 0; j < L; j++)
      collie__call_copy_small(c, a + ((size_t)g * L + j) * blk, b + ((size_t)j * H + g) * blk, blk);
  struct collie__model shared = hier_shared_model(c, L);
  rc = hier_phase_run(c, COLLIE_KIND_ALLTOALL, hier_rail(c, li), H, t->host[c->rank], a, b,
                      c->count * (size_t)L, 0, HIER_STEP_RAIL, &shared);
  if (rc != COLLIE_SUCCESS) return rc;
  /* b[h][j] came from host h's local index j. */
  for (int h = 0; h < H; h++)
    for (int j = 0; j < L; j++)
      collie__call_copy(c, (char *)c->recvbuf + (size_t)t->by_host[t->first[h] + j] * blk,
                        b + ((size_t)h * L + j) * blk, blk);
  return COLLIE_SUCCESS;
}

static double
hier_alltoall_cost(const struct collie__call *c, const struct collie__model *m)
{
  (void)m;
  if (hier_applies(c) && !c->topo->uniform) return collie__hier_alltoall_uneven_cost(c);
  if (!hier_uniform(c)) return -1;
  const struct collie__topo *t = c->topo;
  const struct collie__model *ml = hier_local_model(c);
  struct collie__model shared = hier_shared_model(c, t->max_local);
  double S = (double)collie__call_bytes(c);
  return 3 * S * ml->beta_us +
         hier_phase_cost(c, COLLIE_KIND_ALLTOALL, t->max_local, c->count * (size_t)t->nhosts, 0,
                         ml) +
         hier_phase_cost(c, COLLIE_KIND_ALLTOALL, t->nhosts, c->count * (size_t)t->max_local, 0,
                         &shared);
}

const struct collie__algo collie__algo_alltoall_hierarchical = {
    "hierarchical",     COLLIE_ALGO_HIERARCHICAL, COLLIE_KIND_ALLTOALL, 0,
    hier_alltoall_cost, hier_alltoall_run};

/* ---- gather and scatter ----
 *
 * gather: every rank hands its block to its host's collector (the root on
 * the root's host, local index 0 elsewhere); each other host's collector
 * sends its host's blocks to the root as one message. scatter is the
 * mirror: one message from the root to each other host's collector, which
 * hands its ranks their blocks. Between hosts that is one message per host,
 * where linear sends one per rank and the tree takes log2 p rounds. A host
 * whose ranks are consecutive (launchers place them so) has its message
 * land in, or leave from, the root's buffer in place; otherwise the root
 * packs or unpacks it through scratch. */

/* The rank that gathers host h's blocks (or hands them out). */
static int
hier_collector(const struct collie__call *c, int h)
{
  const struct collie__topo *t = c->topo;
  return h == t->host[c->root] ? c->root : t->by_host[t->first[h]];
}

/* Whether host h's ranks are consecutive, ascending: its blocks are then
 * one run of the root's buffer. */
static int
hier_consecutive(const struct collie__topo *t, int h)
{
  const int *r = t->by_host + t->first[h];
  for (int i = 1; i < t->host_size[h]; i++)
    if (r[i] != r[0] + i) return 0;
  return 1;
}

/* Bytes of scratch the root needs to pack or unpack the hosts whose ranks
 * are not consecutive, and the requests: one per rank of its host and one
 * per other host. */
static size_t
hier_root_scratch(const struct collie__call *c, size_t blk, size_t *data)
{
  const struct collie__topo *t = c->topo;
  *data = 0;
  for (int g = 0; g < t->nhosts; g++)
    if (g != t->host[c->root] && !hier_consecutive(t, g)) *data += (size_t)t->host_size[g] * blk;
  size_t nreq = (size_t)t->host_size[t->host[c->root]] - 1 + (size_t)t->nhosts - 1;
  return nreq * (sizeof(struct collie__req) + sizeof(struct collie__req *)) + 64 + *data;
}

/* The root's side of both: its host's ranks one block each (recv: into
 * buf, else out of it), every other host one message; send packs first,
 * receive unpacks after. */
static collie_result_t
hier_root_side(struct collie__call *c, int send, char *buf, size_t blk)
{
  const struct collie__topo *t = c->topo;
  int hr = t->host[c->root], L = t->host_size[hr];
  size_t data, need = hier_root_scratch(c, blk, &data);
  size_t nreq = (size_t)L - 1 + (size_t)t->nhosts - 1;
  char *s = collie__scratch_get(c->scratch, need);
  if (!s) return COLLIE_SYSTEM_ERROR;
  struct collie__req *req = (struct collie__req *)s;
  struct collie__req **w = (struct collie__req **)(req + nreq);
  char *pack = (char *)(((uintptr_t)(w + nreq) + 63) & ~(uintptr_t)63);
  uint64_t in = collie__call_slot(c, HIER_STEP_IN), x = collie__call_slot(c, HIER_STEP_RAIL);
  collie_result_t rc = COLLIE_SUCCESS;
  int n = 0;
  const int *local = t->by_host + t->first[hr];
  for (int q = 0; q < L && rc == COLLIE_SUCCESS; q++) {
    if (local[q] == c->root) continue;
    char *b = buf + (size_t)local[q] * blk;
    rc = send ? collie__call_isend(c, local[q], b, blk, in, &req[n])
              : collie__call_irecv(c, local[q], b, blk, in, &req[n]);
    n++;
  }
  char *p = pack;
  for (int g = 0; g < t->nhosts && rc == COLLIE_SUCCESS; g++) {
    if (g == hr) continue;
    const int *theirs = t->by_host + t->first[g];
    size_t bytes = (size_t)t->host_size[g] * blk;
    char *b = buf + (size_t)theirs[0] * blk;
    if (!hier_consecutive(t, g)) {
      if (send)
        for (int q = 0; q < t->host_size[g]; q++)
          collie__call_copy(c, p + (size_t)q * blk, buf + (size_t)theirs[q] * blk, blk);
      b = p;
      p += bytes;
    }
    rc = send ? collie__call_isend(c, theirs[0], b, bytes, x, &req[n])
              : collie__call_irecv(c, theirs[0], b, bytes, x, &req[n]);
    n++;
  }
  for (int i = 0; i < n; i++) w[i] = &req[i];
  if (rc == COLLIE_SUCCESS) rc = collie__net_wait(c->net, w, n, c->deadline_ns);
  if (rc != COLLIE_SUCCESS || send) return rc;
  p = pack;
  for (int g = 0; g < t->nhosts; g++) {
    if (g == hr || hier_consecutive(t, g)) continue;
    const int *theirs = t->by_host + t->first[g];
    for (int q = 0; q < t->host_size[g]; q++)
      collie__call_copy(c, buf + (size_t)theirs[q] * blk, p + (size_t)q * blk, blk);
    p += (size_t)t->host_size[g] * blk;
  }
  return COLLIE_SUCCESS;
}

/* Another host's collector: its ranks' blocks, in local order, in and out
 * of one buffer (gather: in from them, then out to the root; scatter: the
 * reverse). own/own_dst: this rank's block. */
static collie_result_t
hier_collector_side(struct collie__call *c, int gather, const void *own_src, void *own_dst,
                    size_t blk)
{
  int L, li;
  const int *local = hier_local(c, &L, &li);
  size_t bytes = (size_t)L * blk;
  char *s = collie__scratch_get(
      c->scratch,
      bytes + (size_t)L * (sizeof(struct collie__req) + sizeof(struct collie__req *)) + 64);
  if (!s) return COLLIE_SYSTEM_ERROR;
  struct collie__req *req = (struct collie__req *)(((uintptr_t)(s + bytes) + 63) & ~(uintptr_t)63);
  struct collie__req **w = (struct collie__req **)(req + L);
  uint64_t in = collie__call_slot(c, HIER_STEP_IN);
  collie_result_t rc = COLLIE_SUCCESS;
  if (!gather) rc = collie__sendrecv(c, -1, NULL, 0, c->root, s, bytes, HIER_STEP_RAIL);
  if (rc != COLLIE_SUCCESS) return rc;
  if (gather && blk) collie__call_copy(c, s, own_src, blk);
  if (!gather && blk) collie__call_copy(c, own_dst, s, blk);
  int n = 0;
  for (int q = 1; q < L && rc == COLLIE_SUCCESS; q++, n++)
    rc = gather ? collie__call_irecv(c, local[q], s + (size_t)q * blk, blk, in, &req[n])
                : collie__call_isend(c, local[q], s + (size_t)q * blk, blk, in, &req[n]);
  for (int i = 0; i < n; i++) w[i] = &req[i];
  if (rc == COLLIE_SUCCESS) rc = collie__net_wait(c->net, w, n, c->deadline_ns);
  if (rc == COLLIE_SUCCESS && gather)
    rc = collie__send_direct(c, c->root, s, bytes, HIER_STEP_RAIL);
  return rc;
}

static collie_result_t
hier_gather_run(struct collie__call *c)
{
  const struct collie__topo *t = c->topo;
  size_t blk = c->count * c->esize;
  int coll = hier_collector(c, t->host[c->rank]);
  if (c->rank != coll) return collie__send_direct(c, coll, c->sendbuf, blk, HIER_STEP_IN);
  if (c->rank != c->root) return hier_collector_side(c, 1, c->sendbuf, NULL, blk);
  char *own = (char *)c->recvbuf + (size_t)c->root * blk;
  if (blk && own != (const char *)c->sendbuf) collie__call_copy(c, own, c->sendbuf, blk);
  return hier_root_side(c, 0, c->recvbuf, blk);
}

static collie_result_t
hier_scatter_run(struct collie__call *c)
{
  const struct collie__topo *t = c->topo;
  size_t blk = c->count * c->esize;
  int coll = hier_collector(c, t->host[c->rank]);
  if (c->rank != coll) return collie__sendrecv(c, -1, NULL, 0, coll, c->recvbuf, blk, HIER_STEP_IN);
  if (c->rank != c->root) return hier_collector_side(c, 0, NULL, c->recvbuf, blk);
  const char *own = (const char *)c->sendbuf + (size_t)c->root * blk;
  collie_result_t rc = hier_root_side(c, 1, (char *)c->sendbuf, blk);
  if (rc == COLLIE_SUCCESS && blk && own != (const char *)c->recvbuf)
    collie__call_copy(c, c->recvbuf, own, blk);
  return rc;
}

/* Each host's collector takes its L - 1 blocks over shared memory (the
 * hosts at once), then the root takes every other host's blocks over its
 * link, one message per host: a link's bytes are what the root's host does
 * not hold. */
static double
hier_gather_cost(const struct collie__call *c, const struct collie__model *m)
{
  (void)m;
  if (!hier_applies(c)) return -1;
  const struct collie__topo *t = c->topo;
  const struct collie__model *ml = hier_local_model(c), *mr = hier_rail_model(c);
  double blk = (double)(c->count * c->esize), H = t->nhosts;
  double L = t->max_local, away = c->size - t->host_size[t->host[c->root]];
  return ml->alpha_us + (L - 1) * blk * ml->beta_us + (1 + 0.1 * (H - 2)) * mr->alpha_us +
         away * blk * mr->beta_us;
}

const struct collie__algo collie__algo_gather_hierarchical = {
    "hierarchical",   COLLIE_ALGO_HIERARCHICAL, COLLIE_KIND_GATHER, 0,
    hier_gather_cost, hier_gather_run};

const struct collie__algo collie__algo_scatter_hierarchical = {
    "hierarchical",   COLLIE_ALGO_HIERARCHICAL, COLLIE_KIND_SCATTER, 0,
    hier_gather_cost, hier_scatter_run};
