/*
 * cbench_measure.c - one measured point of collie-bench: a collective, an
 * algorithm and a size, timed the way nccl-tests and the MPI anchors
 * (../shared/anchors/mpi_coll_perf.c) time it, then checked once.
 *
 * Timing. Barrier, warm-up, barrier, then a loop of back-to-back calls with
 * no barrier inside, so that pipelining between consecutive calls counts as
 * it does in a training loop; each rank's mean is its loop time over the
 * iterations, and the point's time is the slowest rank's mean. When the
 * iteration count is left to us (-n 0) it comes from the second half of the
 * warm-up (the first half pays for first-touch and connection set-up) ended
 * by a barrier, so that ranks which may run ahead (the root of a broadcast)
 * cannot make a call look cheaper than it is; a loop that then ran for less
 * than half the target is rerun longer, at most four batches in all. The
 * timed loop reads no clock inside, as the anchors' do. A second loop of half
 * as many calls reads it after every call for the spread of single
 * iterations (min, p50, p99), which the mean hides: a p99 far above the mean
 * on an oversubscribed machine is a rank that lost its core.
 *
 * Checking. After the timed loop the inputs are written afresh with small
 * integers that depend on the rank and the element, the outputs are
 * poisoned, and one more call runs; every element of the result is compared
 * with the value computed here. The integers are chosen per dtype and
 * operation so that every partial result is exact in that dtype (bfloat16
 * holds integers only up to 256, int8 up to 127, a product only a few
 * doublings), so "equal" means bit-equal, with no tolerance: AVG's inputs
 * are spread around a per-element base so that their sum is exactly
 * nranks x base. Inputs depend on the element index modulo CB_PERIOD, so the
 * expected values of a reduction are computed once per residue, not once
 * per element and rank.
 *
 * Buffers grow and are kept for the life of the process, touched once when
 * they grow, as the anchors do: page faults belong to the library's cost,
 * not to the benchmark's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cbench.h"
#include "cbench_int.h"
#include "core/introspect.h"

collie_result_t (*cb_meas_alltoall)(collie_comm_t *, const void *, void *, size_t, collie_dtype_t,
                                    const collie_opts_t *, collie_work_t **) = collie_alltoall;
collie_result_t (*cb_meas_alltoallv)(collie_comm_t *, const void *, const size_t *, const size_t *,
                                     void *, const size_t *, const size_t *, collie_dtype_t,
                                     const collie_opts_t *, collie_work_t **) = collie_alltoallv;

#define CB_MIN_ITERS 5
#define CB_MAX_ITERS 50000
#define CB_MAX_BATCHES 4

/* ---- The library's algorithm table ---- */

static const struct collie__algo *const meas_algos[] = {
#define COLLIE_XX_(name) &collie__algo_##name,
    COLLIE_ALGOS(COLLIE_XX_)
#undef COLLIE_XX_
};
#define MEAS_NALGOS (int)(sizeof(meas_algos) / sizeof(meas_algos[0]))

static const char *const meas_algo_names[] = {
#define COLLIE_XX_(name, str) str,
    COLLIE_ALGO_MAP(COLLIE_XX_)
#undef COLLIE_XX_
};

const char *
cb_algo_name(int algo)
{
  return algo >= 0 && algo < COLLIE_ALGO_COUNT_ ? meas_algo_names[algo] : "?";
}

int
cb_algo_parse(const char *name)
{
  for (int a = 0; name && a < COLLIE_ALGO_COUNT_; a++)
    if (!strcmp(name, meas_algo_names[a])) return a;
  return -1;
}

int
cb_algos_of(int coll, int *ids, int max)
{
  int kind = cb_coll_kind(coll), n = 0;
  if (coll == CB_SENDRECV) return 0;
  for (int i = 0; i < MEAS_NALGOS; i++)
    /* Host buffers, native calls: no device or compressed-wire algorithm runs. */
    if (meas_algos[i]->kind == kind &&
        !(meas_algos[i]->needs & (COLLIE_NEEDS_DEVICE | COLLIE_NEEDS_WIRE))) {
      if (n < max) ids[n] = meas_algos[i]->id;
      n++;
    }
  return n;
}

int
cb_coll_has_algo(int coll, int algo)
{
  if (algo == COLLIE_ALGO_AUTO) return 1;
  int ids[COLLIE_ALGO_COUNT_], n = cb_algos_of(coll, ids, COLLIE_ALGO_COUNT_);
  for (int i = 0; i < n && i < COLLIE_ALGO_COUNT_; i++)
    if (ids[i] == algo) return 1;
  return 0;
}

const char *
cb_transport_used(collie_comm_t *comm)
{
  static char used[64];
  int32_t mask = 0;
  int p = collie_comm_size(comm), me = collie_comm_rank(comm);
  for (int q = 0; q < p; q++) {
    if (q == me) continue;
    int cls = collie__net_class_index(collie__comm_transport_of(comm, q));
    if (cls >= 0) mask |= 1 << cls;
  }
  /* A rank sees only its own links: a host with one rank sees no shm even
   * when another host's ranks use it, so the answer is the union over ranks. */
  if (collie_allreduce(comm, &mask, &mask, 1, COLLIE_INT32, COLLIE_BOR, NULL, NULL) !=
      COLLIE_SUCCESS)
    return NULL;
  if (!mask) return "self";
  size_t n = 0;
  used[0] = '\0';
  for (int cls = 0; cls < collie__net_class_count() && n < sizeof(used); cls++)
    if (mask & (1 << cls))
      n += (size_t)snprintf(used + n, sizeof(used) - n, "%s%s", n ? "+" : "",
                            collie__net_class_name(cls));
  return used;
}

/* ---- Which algorithm AUTO picks ---- */

/* alltoallv's pick. collie__comm_select answers for the regular collectives
 * only, since a v-variant's cost may depend on counts only one rank knows;
 * the benchmark's counts are all equal, so the pick is the one the library's
 * model predicts for this communicator's hosts (collie__algo_predict, which
 * costs alltoallv from the hosts and ranks alone), unless COLLIE_ALGO forces
 * one. NULL when it cannot say. */
static const struct collie__algo *
meas_resolve_v(collie_comm_t *comm, int kind, size_t count, collie_dtype_t dtype)
{
  const struct collie__algo *a = NULL;
  struct collie__algo_table forced;
  if (collie__algo_parse(getenv("COLLIE_ALGO"), &forced) == COLLIE_SUCCESS &&
      forced.forced[kind] != COLLIE_ALGO_AUTO) {
    for (int i = 0; i < MEAS_NALGOS; i++)
      if (meas_algos[i]->kind == kind && meas_algos[i]->id == forced.forced[kind])
        return meas_algos[i];
    return NULL;
  }
  int n = collie_comm_size(comm);
  struct collie__peer *peers = calloc((size_t)n, sizeof(*peers));
  struct collie__topo topo;
  memset(&topo, 0, sizeof(topo));
  if (!peers) return NULL;
  for (int q = 0; q < n; q++) {
    const char *host = collie__comm_host(comm, q);
    snprintf(peers[q].host, sizeof(peers[q].host), "%s", host ? host : "?");
  }
  if (collie__topo_build(peers, n, &topo) == COLLIE_SUCCESS) {
    double cost[COLLIE_ALGO_COUNT_];
    a = collie__algo_predict(kind, &topo, count, dtype, collie__comm_models(comm), cost);
  }
  collie__topo_free(&topo);
  free(peers);
  return a;
}

static const char *
meas_resolve(collie_comm_t *comm, int coll, size_t count, collie_dtype_t dtype, collie_op_t op,
             int root, int *algo_id)
{
  const struct collie__algo *a = NULL;
  if (coll == CB_SENDRECV) {
    *algo_id = COLLIE_ALGO_AUTO;
    return "-";
  }
  if (coll == CB_ALLTOALLV) {
    a = meas_resolve_v(comm, cb_coll_kind(coll), count, dtype);
    *algo_id = a ? a->id : -1;
    return a ? a->name : NULL;
  }
  /* A non-reducing collective carries no op; SUM is always a valid pair. */
  if (coll != CB_ALLREDUCE && coll != CB_REDUCE_SCATTER && coll != CB_REDUCE) op = COLLIE_SUM;
  if (collie__comm_select(comm, cb_coll_kind(coll), count, dtype, op, root, NULL, &a) !=
          COLLIE_SUCCESS ||
      !a) {
    *algo_id = -1;
    return NULL;
  }
  *algo_id = a->id;
  return a->name;
}

const char *
cb_auto_algo(collie_comm_t *comm, int coll, const struct cb_shape *shape, collie_dtype_t dtype,
             int *algo_id)
{
  int id;
  const char *name = meas_resolve(comm, coll, shape->count, dtype, COLLIE_SUM, 0, &id);
  if (algo_id) *algo_id = id;
  return name;
}

/* ---- Element values ---- */

/* The largest integer every partial result may reach and stay exact in dtype. */
static double
meas_limit(collie_dtype_t dt)
{
  switch (dt) {
  case COLLIE_INT8:
    return 127;
  case COLLIE_UINT8:
    return 255;
  case COLLIE_FLOAT16:
    return 2048;
  case COLLIE_BFLOAT16:
    return 256;
  case COLLIE_INT32:
  case COLLIE_FLOAT32:
    return 16777216; /* 2^24: float32's exact integers; int32 goes further */
  default:
    return 1 << 30;
  }
}

void
cb_meas_put(collie_dtype_t dt, void *buf, size_t i, double v)
{
  switch (dt) {
  case COLLIE_INT8:
    ((int8_t *)buf)[i] = (int8_t)v;
    break;
  case COLLIE_UINT8:
    ((uint8_t *)buf)[i] = (uint8_t)v;
    break;
  case COLLIE_INT32:
    ((int32_t *)buf)[i] = (int32_t)v;
    break;
  case COLLIE_UINT32:
    ((uint32_t *)buf)[i] = (uint32_t)v;
    break;
  case COLLIE_INT64:
    ((int64_t *)buf)[i] = (int64_t)v;
    break;
  case COLLIE_UINT64:
    ((uint64_t *)buf)[i] = (uint64_t)v;
    break;
  case COLLIE_FLOAT16:
    ((unsigned short *)buf)[i] = collie__float_to_half((float)v);
    break;
  case COLLIE_BFLOAT16:
    ((unsigned short *)buf)[i] = collie__float_to_bf16((float)v);
    break;
  case COLLIE_FLOAT32:
    ((float *)buf)[i] = (float)v;
    break;
  default:
    ((double *)buf)[i] = v;
    break;
  }
}

double
cb_meas_get(collie_dtype_t dt, const void *buf, size_t i)
{
  switch (dt) {
  case COLLIE_INT8:
    return ((const int8_t *)buf)[i];
  case COLLIE_UINT8:
    return ((const uint8_t *)buf)[i];
  case COLLIE_INT32:
    return ((const int32_t *)buf)[i];
  case COLLIE_UINT32:
    return ((const uint32_t *)buf)[i];
  case COLLIE_INT64:
    return (double)((const int64_t *)buf)[i];
  case COLLIE_UINT64:
    return (double)((const uint64_t *)buf)[i];
  case COLLIE_FLOAT16:
    return collie__half_to_float(((const unsigned short *)buf)[i]);
  case COLLIE_BFLOAT16:
    return collie__bf16_to_float(((const unsigned short *)buf)[i]);
  case COLLIE_FLOAT32:
    return ((const float *)buf)[i];
  default:
    return ((const double *)buf)[i];
  }
}

/* Rank-and-position pattern for data that is moved, not reduced: src names
 * whose data it is (a rank, or a (rank, destination) pair). */
static double
meas_pat(const struct cb_meas_data *d, size_t src, size_t j)
{
  return (double)((src * 131 + (j % CB_PERIOD) * 7 + 1) % (size_t)d->modulo);
}

/* Rank r's input for element g of a reduced vector. */
static double
meas_red_in(const struct cb_meas_data *d, int r, size_t g)
{
  size_t h = g % CB_PERIOD;
  switch (d->op) {
  case COLLIE_SUM:
    if (d->vmax < 1) return r < (int)d->limit ? (double)((r + h) % 2) : 0;
    return (double)(((size_t)r + h) % (size_t)(d->vmax + 1));
  case COLLIE_AVG: {
    if (d->avg_base < 1) return 0;
    /* base + (+1, -1, +1, -1, ..., 0 for an odd last rank): sums to n x base. */
    double base = 1 + (double)(h % (size_t)d->avg_base);
    int dev = r >= d->n - d->n % 2 ? 0 : r % 2 ? -1 : 1;
    return base + dev;
  }
  case COLLIE_PROD:
    return ((size_t)r + h) % (size_t)d->prod_period == 0 ? 2 : 1;
  case COLLIE_MIN:
  case COLLIE_MAX:
  case COLLIE_BXOR:
    return (double)(((size_t)r * 37 + h * 11 + 5) %
                    (d->op == COLLIE_BXOR ? 128 : (size_t)d->modulo));
  case COLLIE_BAND:
    return (double)(0x7f & ~(1u << ((size_t)(r + (int)(h % 7)) % 7)));
  default: /* BOR */
    return (double)(1u << ((size_t)(r + (int)(h % 7)) % 7));
  }
}

void
cb_meas_data_init(struct cb_meas_data *d, collie_dtype_t dt, collie_op_t op, int n)
{
  d->dt = dt;
  d->op = op;
  d->n = n;
  d->limit = meas_limit(dt);
  d->modulo = d->limit < (1 << 20) ? d->limit : (1 << 20);
  double per = d->limit / n;
  d->vmax = per >= 7 ? 7 : (int)per;
  per = d->limit / (2.0 * n);
  d->avg_base = d->limit < n ? 0 : per >= 7 ? 7 : per >= 1 ? (int)per : 1;
  int k = 0; /* doublings a product may hold: 2^k <= limit */
  while (k < 30 && (double)(1u << (k + 1)) <= d->limit) k++;
  d->prod_period = (n + k - 1) / k;
  if (d->prod_period < 2) d->prod_period = 2;
  for (size_t h = 0; h < CB_PERIOD; h++) {
    double acc = meas_red_in(d, 0, h);
    int64_t bits = (int64_t)acc;
    for (int r = 1; r < n; r++) {
      double v = meas_red_in(d, r, h);
      switch (op) {
      case COLLIE_SUM:
      case COLLIE_AVG:
        acc += v;
        break;
      case COLLIE_PROD:
        acc *= v;
        break;
      case COLLIE_MIN:
        acc = v < acc ? v : acc;
        break;
      case COLLIE_MAX:
        acc = v > acc ? v : acc;
        break;
      case COLLIE_BAND:
        bits &= (int64_t)v;
        break;
      case COLLIE_BOR:
        bits |= (int64_t)v;
        break;
      default:
        bits ^= (int64_t)v;
        break;
      }
    }
    if (op == COLLIE_BAND || op == COLLIE_BOR || op == COLLIE_BXOR) acc = (double)bits;
    if (op == COLLIE_AVG) acc /= n; /* exact: the sum is n x base */
    d->expect[h] = acc;
  }
}

/* ---- Buffers ---- */

void *cb_meas_sbuf, *cb_meas_rbuf;
static size_t meas_cap;
static int64_t *meas_stamps;
static size_t meas_stamps_cap;
static double *meas_sorted;

static collie_comm_t *meas_mem; /* --mem collie: collie_mem_alloc's comm */

static void *
meas_alloc(size_t cap)
{
  void *p = NULL;
  if (meas_mem) return collie_mem_alloc(meas_mem, cap);
  return posix_memalign(&p, 4096, cap) ? NULL : p;
}

static void
meas_release(void *p)
{
  if (meas_mem)
    collie_mem_free(p);
  else
    free(p);
}

/* Grows both buffers to bytes (touching every page once) and the per-iteration
 * arrays to iters. Returns 0, or -1 when memory runs out. */
static int
meas_reserve(size_t bytes, long iters)
{
  if (bytes > meas_cap) {
    size_t cap = (bytes + 4095) / 4096 * 4096;
    void *s = meas_alloc(cap), *r = s ? meas_alloc(cap) : NULL;
    if (!r) {
      meas_release(s);
      return -1;
    }
    memset(s, 0, cap);
    memset(r, 0, cap);
    meas_release(cb_meas_sbuf);
    meas_release(cb_meas_rbuf);
    cb_meas_sbuf = s;
    cb_meas_rbuf = r;
    meas_cap = cap;
  }
  if ((size_t)iters + 1 > meas_stamps_cap) {
    size_t cap = (size_t)iters + 1;
    int64_t *st = malloc(cap * sizeof(*st));
    double *so = malloc(cap * sizeof(*so));
    if (!st || !so) {
      free(st);
      free(so);
      return -1;
    }
    free(meas_stamps);
    free(meas_sorted);
    meas_stamps = st;
    meas_sorted = so;
    meas_stamps_cap = cap;
  }
  return 0;
}

/* --device cuda: device buffers mirroring cb_meas_sbuf and cb_meas_rbuf
 * (offset for offset); the host ones are still where inputs are made and
 * results checked, copied across around the checked call. */
static void *meas_dsbuf, *meas_drbuf;
static size_t meas_dcap;

static int
meas_reserve_device(size_t bytes)
{
  if (bytes <= meas_dcap) return 0;
  size_t cap = (bytes + 4095) / 4096 * 4096;
  void *s = cb_cuda_alloc(cap), *r = s ? cb_cuda_alloc(cap) : NULL;
  if (!r) {
    cb_cuda_free(s);
    return -1;
  }
  cb_cuda_free(meas_dsbuf);
  cb_cuda_free(meas_drbuf);
  meas_dsbuf = s;
  meas_drbuf = r;
  meas_dcap = cap;
  return 0;
}

/* Where host pointer p (inside one of the host areas) is on the device. */
static void *
meas_on_device(void *p)
{
  char *c = p, *s = cb_meas_sbuf, *r = cb_meas_rbuf;
  if (c >= s && c < s + meas_cap) return (char *)meas_dsbuf + (c - s);
  if (c >= r && c < r + meas_cap) return (char *)meas_drbuf + (c - r);
  return p;
}

/* Copies both host areas' first bytes to the device (to_device) or back. */
static int
meas_device_sync(size_t bytes, int to_device)
{
  if (to_device)
    return cb_cuda_copy(meas_dsbuf, cb_meas_sbuf, bytes) |
           cb_cuda_copy(meas_drbuf, cb_meas_rbuf, bytes);
  return cb_cuda_copy(cb_meas_sbuf, meas_dsbuf, bytes) |
         cb_cuda_copy(cb_meas_rbuf, meas_drbuf, bytes);
}

/* ---- One call ---- */

void
cb_meas_buffers(struct cb_meas_call *c, int inplace)
{
  size_t blk = c->count * collie_dtype_size(c->dt);
  c->send = cb_meas_sbuf;
  c->recv = cb_meas_rbuf;
  if (!inplace) return;
  switch (c->coll) {
  case CB_ALLREDUCE:
  case CB_REDUCE:
  case CB_ALLTOALL:
  case CB_ALLTOALLV:
    c->send = c->recv;
    break;
  case CB_ALLGATHER:
    c->send = (char *)c->recv + (size_t)c->rank * blk;
    break;
  case CB_REDUCE_SCATTER:
    c->recv = (char *)c->send + (size_t)c->rank * blk;
    break;
  case CB_GATHER: /* only the root receives: its own block is already in place */
    if (c->rank == c->root) c->send = (char *)c->recv + (size_t)c->rank * blk;
    break;
  case CB_SCATTER: /* the root keeps its block where it is */
    if (c->rank == c->root) c->recv = (char *)c->send + (size_t)c->rank * blk;
    break;
  default: /* broadcast is in place by nature; sendrecv and barrier have no such mode */
    break;
  }
}

static collie_result_t
meas_run(struct cb_meas_call *c)
{
  collie_comm_t *m = c->comm;
  const collie_opts_t *o = &c->opts;
  switch (c->coll) {
  case CB_ALLREDUCE:
    return collie_allreduce(m, c->send, c->recv, c->count, c->dt, c->op, o, NULL);
  case CB_ALLGATHER:
    return collie_allgather(m, c->send, c->recv, c->count, c->dt, o, NULL);
  case CB_REDUCE_SCATTER:
    return collie_reduce_scatter(m, c->send, c->recv, c->count, c->dt, c->op, o, NULL);
  case CB_BROADCAST:
    return collie_broadcast(m, c->recv, c->count, c->dt, c->root, o, NULL);
  case CB_REDUCE:
    return collie_reduce(m, c->send, c->recv, c->count, c->dt, c->op, c->root, o, NULL);
  case CB_ALLTOALL:
    return cb_meas_alltoall(m, c->send, c->recv, c->count, c->dt, o, NULL);
  case CB_ALLTOALLV: /* alltoall's layout: every count c->count, block q at q x count */
    return cb_meas_alltoallv(m, c->send, c->vcounts, c->vdispls, c->recv, c->vcounts, c->vdispls,
                             c->dt, o, NULL);
  case CB_GATHER:
    return collie_gather(m, c->send, c->recv, c->count, c->dt, c->root, o, NULL);
  case CB_SCATTER:
    return collie_scatter(m, c->send, c->recv, c->count, c->dt, c->root, o, NULL);
  case CB_BARRIER:
    return collie_barrier(m, o, NULL);
  default: { /* sendrecv: a ring shift, both halves progressing together */
    collie_result_t rc = collie_group_start(m);
    if (rc != COLLIE_SUCCESS) return rc;
    int next = (c->rank + 1) % c->n, prev = (c->rank + c->n - 1) % c->n;
    collie_result_t rs = collie_send(m, c->send, c->count, c->dt, next, 0, NULL, NULL);
    collie_result_t rr = collie_recv(m, c->recv, c->count, c->dt, prev, 0, NULL, NULL);
    rc = collie_group_end(m, NULL); /* always closes the group */
    return rs != COLLIE_SUCCESS ? rs : rr != COLLIE_SUCCESS ? rr : rc;
  }
  }
}

/* ---- Data for the checked call ---- */

static double
meas_poison(collie_dtype_t dt)
{
  return dt == COLLIE_UINT8 ? 255 : dt == COLLIE_UINT32 || dt == COLLIE_UINT64 ? 4294967295.0 : -1;
}

void
cb_meas_fill(const struct cb_meas_call *c, const struct cb_meas_data *d)
{
  size_t cnt = c->count, tot = cnt * (size_t)c->n, i;
  int r = c->rank, n = c->n;
  double poison = meas_poison(c->dt);
  collie_dtype_t dt = c->dt;
  switch (c->coll) {
  case CB_ALLREDUCE:
  case CB_REDUCE:
    for (i = 0; i < cnt; i++) cb_meas_put(dt, c->recv, i, poison);
    for (i = 0; i < cnt; i++) cb_meas_put(dt, c->send, i, meas_red_in(d, r, i));
    break;
  case CB_REDUCE_SCATTER:
    for (i = 0; i < cnt; i++) cb_meas_put(dt, c->recv, i, poison);
    for (i = 0; i < tot; i++) cb_meas_put(dt, c->send, i, meas_red_in(d, r, i));
    break;
  case CB_ALLGATHER:
  case CB_GATHER:
    for (i = 0; i < tot; i++) cb_meas_put(dt, c->recv, i, poison);
    for (i = 0; i < cnt; i++) cb_meas_put(dt, c->send, i, meas_pat(d, (size_t)r, i));
    break;
  case CB_BROADCAST:
    for (i = 0; i < cnt; i++)
      cb_meas_put(dt, c->recv, i, r == c->root ? meas_pat(d, (size_t)r, i) : poison);
    break;
  case CB_SCATTER:
    for (i = 0; i < cnt; i++) cb_meas_put(dt, c->recv, i, poison);
    if (r == c->root)
      for (i = 0; i < tot; i++) cb_meas_put(dt, c->send, i, meas_pat(d, i / cnt, i % cnt));
    break;
  case CB_ALLTOALL: /* block q goes to rank q: its pattern names (sender, receiver) */
  case CB_ALLTOALLV:
    for (i = 0; i < tot; i++) cb_meas_put(dt, c->recv, i, poison);
    for (i = 0; i < tot; i++)
      cb_meas_put(dt, c->send, i, meas_pat(d, (size_t)r * (size_t)n + i / cnt, i % cnt));
    break;
  case CB_SENDRECV:
    for (i = 0; i < cnt; i++) cb_meas_put(dt, c->recv, i, poison);
    for (i = 0; i < cnt; i++) cb_meas_put(dt, c->send, i, meas_pat(d, (size_t)r, i));
    break;
  default:
    break;
  }
}

/* Counts elements of the result that differ from the expected; reports the
 * first on stderr. */
long
cb_meas_check(const struct cb_meas_call *c, const struct cb_meas_data *d, size_t bytes)
{
  size_t cnt = c->count, tot = cnt * (size_t)c->n, len = 0, i;
  int r = c->rank, n = c->n;
  const void *out = c->recv;
  long wrong = 0;
  size_t first = 0;
  double first_got = 0, first_want = 0;
#define MEAS_EXPECT(idx, want)                                                                     \
  do {                                                                                             \
    double got_ = cb_meas_get(c->dt, out, (idx)), want_ = (want);                                  \
    if (got_ != want_) {                                                                           \
      if (!wrong++) {                                                                              \
        first = (idx);                                                                             \
        first_got = got_;                                                                          \
        first_want = want_;                                                                        \
      }                                                                                            \
    }                                                                                              \
  } while (0)
  switch (c->coll) {
  case CB_ALLREDUCE:
  case CB_REDUCE:
    if (c->coll == CB_REDUCE && r != c->root) break;
    for (i = 0, len = cnt; i < cnt; i++) MEAS_EXPECT(i, d->expect[i % CB_PERIOD]);
    break;
  case CB_REDUCE_SCATTER:
    for (i = 0, len = cnt; i < cnt; i++)
      MEAS_EXPECT(i, d->expect[((size_t)r * cnt + i) % CB_PERIOD]);
    break;
  case CB_ALLGATHER:
  case CB_GATHER:
    if (c->coll == CB_GATHER && r != c->root) break;
    for (i = 0, len = tot; i < tot; i++) MEAS_EXPECT(i, meas_pat(d, i / cnt, i % cnt));
    break;
  case CB_BROADCAST:
    for (i = 0, len = cnt; i < cnt; i++) MEAS_EXPECT(i, meas_pat(d, (size_t)c->root, i));
    break;
  case CB_SCATTER:
    for (i = 0, len = cnt; i < cnt; i++) MEAS_EXPECT(i, meas_pat(d, (size_t)r, i));
    break;
  case CB_ALLTOALL: /* block s came from rank s, which named it (s, me) */
  case CB_ALLTOALLV:
    for (i = 0, len = tot; i < tot; i++)
      MEAS_EXPECT(i, meas_pat(d, (i / cnt) * (size_t)n + (size_t)r, i % cnt));
    break;
  case CB_SENDRECV:
    for (i = 0, len = cnt; i < cnt; i++) MEAS_EXPECT(i, meas_pat(d, (size_t)((r + n - 1) % n), i));
    break;
  default:
    break;
  }
#undef MEAS_EXPECT
  if (wrong)
    fprintf(stderr,
            "collie-bench: rank %d: %s of %zu bytes (%s%s%s): %ld of %zu elements wrong; "
            "element %zu is %g, expected %g\n",
            r, cb_coll_name(c->coll), bytes, collie_dtype_name(c->dt),
            cb_coll_reduces(c->coll) ? ", " : "",
            cb_coll_reduces(c->coll) ? collie_op_name(c->op) : "", wrong, len, first, first_got,
            first_want);
  return wrong;
}

/* ---- Timing ---- */

static int
meas_cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The nearest-rank q-quantile (0 < q <= 1) of sorted[0..n). */
static double
meas_quantile(const double *sorted, long n, double q)
{
  long k = (long)((double)n * q + 0.999999999); /* ceil, robust to q*n landing just above */
  if (k < 1) k = 1;
  if (k > n) k = n;
  return sorted[k - 1];
}

static int
meas_fail(const struct cb_meas_call *c, size_t bytes, collie_result_t rc)
{
  /* An algorithm that cannot run the call is refused identically on every
   * rank before any communication: one message is enough, and once per
   * (collective, algorithm): a sweep over every algorithm (--algo all,
   * --fit) would otherwise say it again at every size, where its table's
   * line already says "cannot run". */
  static unsigned char said[CB_NCOLL][COLLIE_ALGO_COUNT_];
  int refused = rc == COLLIE_INVALID_ARGUMENT && !collie__comm_poisoned(c->comm);
  int a = (int)c->opts.algorithm;
  if (refused && c->rank != 0) return -1;
  if (refused && a >= 0 && a < COLLIE_ALGO_COUNT_) {
    if (said[c->coll][a]) return -1;
    said[c->coll][a] = 1;
  }
  fprintf(stderr, "collie-bench: rank %d: %s of %zu bytes (algorithm %s): %s: %s%s\n", c->rank,
          cb_coll_name(c->coll), bytes, cb_algo_name(c->opts.algorithm), collie_result_string(rc),
          collie_last_error(), refused ? " (not said again for other sizes)" : "");
  return -1;
}

int
cb_measure(collie_comm_t *comm, const struct cb_opts *o, int coll, int algo, size_t req_bytes,
           struct cb_point *out)
{
  int n = collie_comm_size(comm), rank = collie_comm_rank(comm);
  size_t esize = collie_dtype_size(o->dtype);
  memset(out, 0, sizeof(*out));
  out->coll = coll;
  out->algo = algo;
  out->root = cb_coll_rooted(coll) ? o->root : -1;
  snprintf(out->algo_name, sizeof(out->algo_name), "%s",
           coll == CB_SENDRECV ? "-" : cb_algo_name(algo));
  if (!cb_shape(coll, req_bytes, n, esize, &out->shape)) return 1;

  struct cb_meas_call c = {.comm = comm,
                           .coll = coll,
                           .rank = rank,
                           .n = n,
                           .root = out->root < 0 ? 0 : out->root,
                           .count = out->shape.count,
                           .dt = o->dtype,
                           .op = o->redop,
                           .opts = {.algorithm = coll == CB_SENDRECV ? COLLIE_ALGO_AUTO : algo}};
  if (algo == COLLIE_ALGO_AUTO && coll != CB_SENDRECV) {
    int id;
    const char *name = meas_resolve(comm, coll, c.count, c.dt, c.op, c.root, &id);
    if (name) {
      out->algo = id;
      snprintf(out->algo_name, sizeof(out->algo_name), "%s", name);
    }
  }

  if (o->device_cuda && coll != CB_SENDRECV && coll != CB_BARRIER) { /* a barrier has no buffers */
    /* On device buffers collie runs its device algorithm, or stages the
     * call through host memory and runs the host algorithm named. */
    int dev = collie__comm_device_algo(comm, cb_coll_kind(coll), out->shape.count * esize);
    if (dev) {
      out->algo = dev;
      snprintf(out->algo_name, sizeof(out->algo_name), "%s", cb_algo_name(dev));
    } else {
      char host[32];
      snprintf(host, sizeof(host), "%s", out->algo_name);
      snprintf(out->algo_name, sizeof(out->algo_name), "staged+%s", host);
    }
  }
  /* Every rank must know that every other one has its memory before the
   * first call, or a rank that ran out would leave the others waiting. */
  size_t need = out->shape.bytes > esize ? out->shape.bytes : esize;
  long max_iters = o->iters > 0 ? o->iters : CB_MAX_ITERS;
  meas_mem = o->mem_collie ? comm : NULL;
  struct cb_meas_data *d = calloc(1, sizeof(*d));
  /* alltoallv's counts and displacements, once per point: count each, block
   * q at q x count (the same arrays serve the send and the receive side). */
  size_t *v = coll == CB_ALLTOALLV ? malloc(2 * (size_t)n * sizeof(*v)) : NULL;
  if (v) {
    for (int q = 0; q < n; q++) {
      v[q] = c.count;
      v[n + q] = (size_t)q * c.count;
    }
    c.vcounts = v;
    c.vdispls = v + n;
  }
  int32_t nomem = !d || (coll == CB_ALLTOALLV && !v) || meas_reserve(need, max_iters) != 0 ||
                          (o->device_cuda && meas_reserve_device(need) != 0)
                      ? rank + 1
                      : 0;
  collie_result_t arc =
      collie_allreduce(comm, &nomem, &nomem, 1, COLLIE_INT32, COLLIE_MAX, NULL, NULL);
  if (arc != COLLIE_SUCCESS || nomem) {
    free(d);
    free(v);
    if (arc != COLLIE_SUCCESS) return meas_fail(&c, out->shape.bytes, arc);
    if (rank == 0)
      fprintf(stderr, "collie-bench: rank %d cannot allocate 2 x %zu bytes for %s\n", nomem - 1,
              need, cb_coll_name(coll));
    return -1;
  }
  cb_meas_buffers(&c, o->inplace);
  cb_meas_data_init(d, c.dt, c.op, n);
  cb_meas_fill(&c, d); /* sane values to time with */
  /* What runs: c, or its twin on device memory. */
  struct cb_meas_call dc = c, *run = &c;
  if (o->device_cuda) {
    dc.send = meas_on_device(c.send);
    dc.recv = meas_on_device(c.recv);
    run = &dc;
    if (meas_device_sync(need, 1) != 0) {
      fprintf(stderr, "collie-bench: rank %d: copying %zu bytes to the device failed\n", rank,
              need);
      free(d);
      free(v);
      return -1;
    }
  }

  long warm = o->warmup >= 0 ? o->warmup : out->shape.bytes <= (1u << 20) ? 20 : 4;
  long iters = o->iters, it;
  int rc = -1;
#define MEAS_TRY(call)                                                                             \
  do {                                                                                             \
    collie_result_t rc_ = (call);                                                                  \
    if (rc_ != COLLIE_SUCCESS) {                                                                   \
      meas_fail(&c, out->shape.bytes, rc_);                                                        \
      goto out_free;                                                                               \
    }                                                                                              \
  } while (0)

  MEAS_TRY(collie_barrier(comm, NULL, NULL));
  for (it = 0; it < warm / 2; it++) MEAS_TRY(meas_run(run));
  int64_t t0 = collie__now_ns();
  for (; it < warm; it++) MEAS_TRY(meas_run(run));
  if (iters <= 0) {
    long timed = warm - warm / 2;
    if (timed == 0) { /* no warm-up asked for: one call is the estimate */
      MEAS_TRY(meas_run(run));
      timed = 1;
    }
    MEAS_TRY(collie_barrier(comm, NULL, NULL));
    double est = (double)(collie__now_ns() - t0) / 1e9 / (double)timed;
    MEAS_TRY(collie_allreduce(comm, &est, &est, 1, COLLIE_FLOAT64, COLLIE_MAX, NULL, NULL));
    double want = o->target_s / (est > 1e-9 ? est : 1e-9);
    iters = want < CB_MIN_ITERS ? CB_MIN_ITERS : want > CB_MAX_ITERS ? CB_MAX_ITERS : (long)want;
  }

  double stat[4]; /* mean, min, p50, p99 of this rank, then the max over ranks */
  for (int batch = 1;; batch++) {
    MEAS_TRY(collie_barrier(comm, NULL, NULL));
    int64_t start = collie__now_ns();
    for (it = 0; it < iters; it++) MEAS_TRY(meas_run(run));
    stat[0] = (double)(collie__now_ns() - start) / 1e3 / (double)iters;
    MEAS_TRY(collie_allreduce(comm, stat, stat, 1, COLLIE_FLOAT64, COLLIE_MAX, NULL, NULL));
    double loop_s = stat[0] * 1e-6 * (double)iters;
    if (o->iters > 0 || loop_s >= 0.5 * o->target_s || iters >= CB_MAX_ITERS ||
        batch >= CB_MAX_BATCHES)
      break;
    /* The estimate was pessimistic: aim past the target, at most 10x longer. */
    double mult = 1.2 * o->target_s / (loop_s > 1e-9 ? loop_s : 1e-9);
    if (mult > 10) mult = 10;
    iters = (long)((double)iters * mult) + 1;
    if (iters > CB_MAX_ITERS) iters = CB_MAX_ITERS;
  }
  /* The spread, from a loop of its own: a clock read after every call would
   * add ~25 ns to the mean, a tenth of a small broadcast, which the anchors'
   * loops do not pay. Half as many calls (at least CB_MIN_ITERS) keep the
   * point's time within 1.5x of the target. */
  long spread = iters / 2 >= CB_MIN_ITERS ? iters / 2 : iters < CB_MIN_ITERS ? iters : CB_MIN_ITERS;
  MEAS_TRY(collie_barrier(comm, NULL, NULL));
  meas_stamps[0] = collie__now_ns();
  for (it = 0; it < spread; it++) {
    MEAS_TRY(meas_run(run));
    meas_stamps[it + 1] = collie__now_ns();
  }
  for (it = 0; it < spread; it++)
    meas_sorted[it] = (double)(meas_stamps[it + 1] - meas_stamps[it]) / 1e3;
  qsort(meas_sorted, (size_t)spread, sizeof(double), meas_cmp);
  stat[1] = meas_sorted[0];
  stat[2] = meas_quantile(meas_sorted, spread, 0.5);
  stat[3] = meas_quantile(meas_sorted, spread, 0.99);
  MEAS_TRY(collie_allreduce(comm, stat + 1, stat + 1, 3, COLLIE_FLOAT64, COLLIE_MAX, NULL, NULL));

  int64_t wrong = -1;
  if (o->check) {
    cb_meas_fill(&c, d);
    if (o->device_cuda) meas_device_sync(need, 1);
    MEAS_TRY(meas_run(run));
    if (o->device_cuda && meas_device_sync(need, 0) != 0)
      fprintf(stderr, "collie-bench: rank %d: copying the result back failed\n", rank);
    wrong = cb_meas_check(&c, d, out->shape.bytes);
    MEAS_TRY(collie_allreduce(comm, &wrong, &wrong, 1, COLLIE_INT64, COLLIE_SUM, NULL, NULL));
  }
  /* The next point starts together: a rank still checking is not a slow call. */
  MEAS_TRY(collie_barrier(comm, NULL, NULL));

  out->iters = iters;
  out->time_us = stat[0];
  out->min_us = stat[1];
  out->p50_us = stat[2];
  out->p99_us = stat[3];
  out->algbw = cb_algbw(out->shape.bytes, out->time_us);
  out->busbw = out->algbw * cb_busbw_factor(coll, n);
  out->wrong = (long)wrong;
  rc = 0;
out_free:
  free(d);
  free(v);
  return rc;
}
