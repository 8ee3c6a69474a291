/*
 * api.c - the public entry points. Each is thin: check the communicator,
 * validate every argument (naming it and its value in the error), build a
 * struct collie__call, and hand it to dispatch (issue-time half) and work.c
 * (run now or queue). Argument errors are found here, before any
 * communication, so they never poison the communicator.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "device/cuda.h"
#include "transport/shm.h"

/* ---- Validation helpers: each returns SUCCESS or sets the message ---- */

/* The checks every call makes, inlined whole: their error branches call
 * collie__err (cold), so what stays in line is a few compares; a call to
 * each cost an 8-byte broadcast ~30 instructions (issue 38 point 5). */
#define API_HOT static inline __attribute__((always_inline))

API_HOT collie_result_t
api_dtype(const char *fn, collie_dtype_t dtype)
{
  if ((unsigned)dtype >= (unsigned)COLLIE_DTYPE_COUNT_)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: dtype = %d is not a collie_dtype_t value", fn,
                       (int)dtype);
  return COLLIE_SUCCESS;
}

static collie_result_t
api_op(const char *fn, collie_dtype_t dtype, collie_op_t op)
{
  if ((unsigned)op >= (unsigned)COLLIE_OP_COUNT_)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: op = %d is not a collie_op_t value", fn,
                       (int)op);
  if (!collie__reduce_kernel(dtype, op))
    return collie__err(COLLIE_UNSUPPORTED,
                       "%s: op %s is not defined on %s (bitwise ops need an "
                       "integer dtype)",
                       fn, collie_op_name(op), collie_dtype_name(dtype));
  return COLLIE_SUCCESS;
}

/* The most bytes one buffer can span: no process addresses more (x86-64
 * and arm64 user space with 5-level tables: 2^56-2^57 bytes). A larger
 * count is a caller's bug that would otherwise crash inside an algorithm. */
#define API_MAX_BUFFER_BYTES ((size_t)1 << (sizeof(size_t) == 8 ? 57 : 31))

/* count elements of dtype, times `blocks` (e.g. the comm size), must fit in
 * an address space. */
API_HOT collie_result_t
api_count(const char *fn, const char *what, size_t count, size_t blocks, collie_dtype_t dtype)
{
  size_t es = collie__dtype_bytes(dtype), total;
  /* Multiplications that report overflow: two divisions here would cost more
   * than the rest of a small call's validation. */
  if (count && (blocks == 0 || __builtin_mul_overflow(count, es, &total) ||
                __builtin_mul_overflow(total, blocks, &total)))
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: %s = %zu elements of %s (x %zu) overflows the addressable bytes", fn,
                       what, count, collie_dtype_name(dtype), blocks);
  if (count && total > API_MAX_BUFFER_BYTES)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: %s = %zu elements of %s (x %zu) is %zu bytes, more bytes than a "
                       "process can address (%zu)",
                       fn, what, count, collie_dtype_name(dtype), blocks, total,
                       API_MAX_BUFFER_BYTES);
  return COLLIE_SUCCESS;
}

API_HOT collie_result_t
api_buf(const char *fn, const char *name, const void *buf, size_t count)
{
  if (!buf && count)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: %s is NULL but count is %zu", fn, name, count);
  return COLLIE_SUCCESS;
}

API_HOT collie_result_t
api_rank(const collie_comm_t *comm, const char *fn, const char *what, int r)
{
  if (r < 0 || r >= comm->size)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: %s = %d is outside 0..%d (communicator of %d)",
                       fn, what, r, comm->size - 1, comm->size);
  return COLLIE_SUCCESS;
}

static collie_result_t
api_opts(const collie_comm_t *comm, const char *fn, const collie_opts_t *opts)
{
  if (!opts) return COLLIE_SUCCESS;
  if (opts->category < 0 || opts->category >= collie__tele_categories(comm->tele)) {
    const char *name = collie__category_name(opts->category);
    if (name)
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "%s: opts->category = %d ('%s') was registered after this "
                         "communicator's collie_comm_init, so its comms.csv has no column for "
                         "it; register categories before init",
                         fn, opts->category, name);
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: opts->category = %d is neither a COLLIE_CAT_* value nor a registered "
                       "category",
                       fn, opts->category);
  }
  if (opts->timeout_ms < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: opts->timeout_ms = %lld must be >= 0", fn,
                       (long long)opts->timeout_ms);
  if (opts->algorithm < 0 || opts->algorithm >= COLLIE_ALGO_COUNT_)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: opts->algorithm = %d is not a COLLIE_ALGO_* value", fn,
                       opts->algorithm);
  if (opts->wire < 0 || opts->wire >= COLLIE_WIRE_COUNT_)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: opts->wire = %d is not a COLLIE_WIRE_* value",
                       fn, opts->wire);
  return COLLIE_SUCCESS;
}

/* Common head of every operation: live comm, opts, work allowed here. */
API_HOT collie_result_t
api_enter(collie_comm_t *comm, const char *fn, const collie_opts_t *opts, collie_work_t **work)
{
  collie_result_t rc = collie__comm_check(comm, fn);
  if (rc != COLLIE_SUCCESS) return rc;
  if (work) *work = NULL;
  return opts ? api_opts(comm, fn, opts) : COLLIE_SUCCESS;
}

/* The wire format of a call (docs/compression.md): opts->wire when set, and
 * then it must apply (a float32 SUM or AVG allreduce of host memory), else
 * the communicator's default where it applies. */
static collie_result_t
api_wire(collie_comm_t *comm, struct collie__call *call, const collie_opts_t *opts)
{
  int asked = opts ? opts->wire : COLLIE_WIRE_DEFAULT;
  int w = asked ? asked : comm->params.WIRE;
  if (w == COLLIE_WIRE_NATIVE) return COLLIE_SUCCESS;
  int reduction = call->kind == COLLIE_KIND_ALLREDUCE && call->dtype == COLLIE_FLOAT32 &&
                  (call->op == COLLIE_SUM || call->op == COLLIE_AVG);
  int device = reduction && collie__stage_on_device(call->sendbuf, call->recvbuf);
  if (reduction && !device) {
    call->wire = w;
    return COLLIE_SUCCESS;
  }
  if (!asked) return COLLIE_SUCCESS; /* the default leaves what it cannot compress alone */
  const char *name = w == COLLIE_WIRE_FLOAT16 ? "COLLIE_WIRE_FLOAT16" : "COLLIE_WIRE_BFLOAT16";
  if (call->kind != COLLIE_KIND_ALLREDUCE)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "collie_%s: opts->wire = %s applies to allreduce only (leave it 0)",
                       collie__kind_name(call->kind), name);
  if (device)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "collie_allreduce: opts->wire = %s applies to host memory only; these "
                       "buffers are device memory",
                       name);
  return collie__err(COLLIE_INVALID_ARGUMENT,
                     "collie_allreduce: opts->wire = %s applies to float32 SUM or AVG only; this "
                     "call is %s %s",
                     name, collie_dtype_name(call->dtype), collie_op_name(call->op));
}

/* Common tail: the issue-time decisions, then run now or queue (work set). */
/* op: only op->call set by the caller, in place (copying the call in from
 * a struct just zeroed stalls on store forwarding); not zeroed whole:
 * prepare sets what is read (telemetry's row is big). */
/* A persistent plan being made on this thread (collie_*_init): the call's
 * checks have passed and its op is taken into the plan instead of run. */
static __thread struct collie__op *api_capture;
/* Threads making a plan now: every call reads this plain global first, and
 * the thread-local above only while it is non-zero (a thread-local of a
 * shared library is a call to __tls_get_addr; one per call was ~1.5 % of
 * an 8-byte broadcast). */
static atomic_int api_capturing;

/* The calls that are not a plain one on host memory: a compressed wire,
 * a plan being made, or buffers that may be device memory. Out of line, so
 * that api_finish's plain path stays a few loads (issue 38 point 5: the
 * three checks written inline cost an 8-byte broadcast ~50 instructions). */
static __attribute__((noinline)) collie_result_t
api_finish_special(collie_comm_t *comm, struct collie__op *op, const collie_opts_t *opts,
                   collie_work_t **work)
{
  if ((opts && opts->wire > COLLIE_WIRE_NATIVE) || comm->params.WIRE != COLLIE_WIRE_NATIVE) {
    collie_result_t rc = api_wire(comm, &op->call, opts);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  if (atomic_load_explicit(&api_capturing, memory_order_relaxed) != 0 && api_capture != NULL) {
    *api_capture = *op;
    return COLLIE_SUCCESS;
  }
  /* Device memory exists only in a process that loaded the CUDA driver, and
   * never in the program's image or the brk heap: the cheapest check first
   * (device/host_mem.c, then device/cuda.c). */
  if (!collie__host_mem_plain_both(op->call.sendbuf, op->call.recvbuf) && collie__cuda_live()) {
    int handled;
    void *graph = NULL;
    collie_result_t rc = collie__stage_run(comm, op, opts, work, &handled, &graph);
    if (handled == 2) {
      /* Captured into a CUDA graph: replays run on a split of their own,
       * made at the first capture (every rank captures the same calls). */
      if (!comm->graph_comm) rc = collie_comm_split(comm, 0, comm->rank, &comm->graph_comm);
      return rc == COLLIE_SUCCESS ? collie__capture_call(comm, op, opts, graph, work) : rc;
    }
    if (handled) return rc;
  }
  collie_result_t rc = collie__dispatch_prepare(comm, op, opts, work == NULL);
  if (rc != COLLIE_SUCCESS) return rc;
  return collie__work_issue(comm, op, NULL, work);
}

static inline __attribute__((always_inline)) collie_result_t
api_finish(collie_comm_t *comm, struct collie__op *op, const collie_opts_t *opts,
           collie_work_t **work)
{
  if (__builtin_expect((opts && opts->wire > COLLIE_WIRE_NATIVE) ||
                           comm->params.WIRE != COLLIE_WIRE_NATIVE ||
                           atomic_load_explicit(&api_capturing, memory_order_relaxed) != 0 ||
                           !collie__host_mem_plain_both(op->call.sendbuf, op->call.recvbuf),
                       0))
    return api_finish_special(comm, op, opts, work);
  collie_result_t rc = collie__dispatch_prepare(comm, op, opts, work == NULL);
  if (rc != COLLIE_SUCCESS) return rc;
  return collie__work_issue(comm, op, NULL, work);
}

/* The reduction kernel for (mem, dtype, op): the one place a memory kind
 * chooses its kernels (util/mem.h). NULL when none exists. */
static collie__reduce_fn
api_kernel(collie__mem_kind_t mem, collie_dtype_t dtype, collie_op_t op)
{
  switch (mem) {
  case COLLIE_MEM_HOST:
  default:
    return collie__reduce_kernel(dtype, op);
  }
}

/* The call of a regular collective, built in place (see api_finish). */
static void
api_call(struct collie__call *call, int kind, const void *sendbuf, void *recvbuf, size_t count,
         collie_dtype_t dtype, int root)
{
  /* Field by field: a compound literal zeroes the whole struct first with
   * `rep stos`, whose start-up was a fifth of a small broadcast's api time.
   * Dispatch fills the communicator's fields (rank, size, net, ...); every
   * call builder starts here and sets its own extra fields after. */
  call->kind = kind;
  call->algo = 0;
  call->seq = 0;
  call->sendbuf = sendbuf;
  call->recvbuf = recvbuf;
  call->count = count;
  call->sendcounts = call->sdispls = call->recvcounts = call->rdispls = NULL;
  call->sidx = NULL;
  call->ridx = NULL;
  call->rnnz = NULL;
  call->dim = 0;
  call->dtype = dtype;
  call->op = 0;
  call->wire = COLLIE_WIRE_NATIVE;
  call->root = root;
  call->tag = 0;
  call->mem = collie__mem_kind_of(sendbuf, recvbuf); /* decided here, once (util/mem.h) */
  call->stream = NULL;
  call->dev = NULL;
  call->reduce = NULL;
  call->deadline_ns = 0;
  call->p2p_seq = 0;
  call->source = NULL;
  call->p2p_status = NULL;
  call->p2p_sync = 0;
  call->p2p_probe = 0;
  call->p2p_flag = NULL;
  call->p2p_rec = NULL;
  call->p2p_reclen = 0;
  call->p2p_dev = NULL;
  call->p2p_on_dev = 0;
  call->group = NULL;
  call->step0 = 0;
  call->models = NULL;
}
/* A field added to struct collie__call must be set above (or by dispatch). */
_Static_assert(sizeof(void *) != 8 || sizeof(struct collie__call) == 312,
               "struct collie__call changed: update api_call");

/* The same for a reducing collective (root: reduce's; 0 for the others). */
static void
api_reduction(struct collie__call *call, int kind, const void *sendbuf, void *recvbuf, size_t count,
              collie_dtype_t dtype, collie_op_t op, int root)
{
  api_call(call, kind, sendbuf, recvbuf, count, dtype, root);
  call->op = op;
  call->reduce = api_kernel(call->mem, dtype, op);
}

/* ---- Collectives ---- */

collie_result_t
collie_allreduce(collie_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                 collie_dtype_t dtype, collie_op_t op, const collie_opts_t *opts,
                 collie_work_t **work)
{
  static const char fn[] = "collie_allreduce";
  API_TRY(api_enter(comm, fn, opts, work));
  API_TRY(api_dtype(fn, dtype));
  API_TRY(api_op(fn, dtype, op));
  API_TRY(api_count(fn, "count", count, 1, dtype));
  API_TRY(api_buf(fn, "sendbuf", sendbuf, count));
  API_TRY(api_buf(fn, "recvbuf", recvbuf, count));
  struct collie__op issue;
  api_reduction(&issue.call, COLLIE_KIND_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, 0);
  return api_finish(comm, &issue, opts, work);
}

collie_result_t
collie_broadcast(collie_comm_t *comm, void *buf, size_t count, collie_dtype_t dtype, int root,
                 const collie_opts_t *opts, collie_work_t **work)
{
  static const char fn[] = "collie_broadcast";
  API_TRY(api_enter(comm, fn, opts, work));
  API_TRY(api_dtype(fn, dtype));
  API_TRY(api_count(fn, "count", count, 1, dtype));
  API_TRY(api_buf(fn, "buf", buf, count));
  API_TRY(api_rank(comm, fn, "root", root));
  struct collie__op issue;
  api_call(&issue.call, COLLIE_KIND_BROADCAST, buf, buf, count, dtype, root);
  return api_finish(comm, &issue, opts, work);
}

collie_result_t
collie_sparse_allreduce(collie_comm_t *comm, collie_sparse_mode_t mode, const int64_t *indices,
                        const void *values, size_t nnz, size_t dim, int64_t *out_indices,
                        void *out_values, size_t out_cap, size_t *out_nnz, collie_dtype_t dtype,
                        const collie_opts_t *opts, collie_work_t **work)
{
  static const char fn[] = "collie_sparse_allreduce";
  API_TRY(api_enter(comm, fn, opts, work));
  if (mode != COLLIE_SPARSE_TOPK_ALLGATHER && mode != COLLIE_SPARSE_GTOPK)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: mode = %d is neither COLLIE_SPARSE_TOPK_ALLGATHER nor "
                       "COLLIE_SPARSE_GTOPK",
                       fn, (int)mode);
  API_TRY(api_dtype(fn, dtype));
  if (dtype != COLLIE_FLOAT32 && dtype != COLLIE_FLOAT64)
    return collie__err(COLLIE_UNSUPPORTED, "%s: dtype %s: sparse values are float32 or float64", fn,
                       collie_dtype_name(dtype));
  API_TRY(api_count(fn, "nnz", nnz, (size_t)comm->size, dtype));
  API_TRY(api_buf(fn, "indices", indices, nnz));
  API_TRY(api_buf(fn, "values", values, nnz));
  size_t need = mode == COLLIE_SPARSE_GTOPK ? nnz : nnz * (size_t)comm->size;
  if (out_cap < need)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: out_cap = %zu, but the result may hold %zu entries (%s)", fn, out_cap,
                       need, mode == COLLIE_SPARSE_GTOPK ? "nnz" : "size x nnz");
  API_TRY(api_buf(fn, "out_indices", out_indices, need));
  API_TRY(api_buf(fn, "out_values", out_values, need));
  if (!out_nnz) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: out_nnz is NULL", fn);
  for (size_t i = 0; i < nnz; i++)
    if (indices[i] < 0 || (uint64_t)indices[i] >= dim)
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "%s: indices[%zu] = %lld is outside 0..%zu (dim = %zu)", fn, i,
                         (long long)indices[i], dim ? dim - 1 : 0, dim);
  struct collie__op issue;
  api_call(&issue.call, COLLIE_KIND_SPARSE_ALLREDUCE, values, out_values, nnz, dtype, (int)mode);
  if (collie__stage_on_device(values, out_values) || collie__stage_on_device(indices, out_indices))
    return collie__err(COLLIE_UNSUPPORTED,
                       "%s: device memory: sparse allreduce runs on host memory", fn);
  issue.call.op = COLLIE_SUM;
  issue.call.sidx = indices;
  issue.call.ridx = out_indices;
  issue.call.rnnz = out_nnz;
  issue.call.dim = dim;
  return api_finish(comm, &issue, opts, work);
}

collie_result_t
collie_barrier(collie_comm_t *comm, const collie_opts_t *opts, collie_work_t **work)
{
  API_TRY(api_enter(comm, "collie_barrier", opts, work));
  struct collie__op issue;
  api_call(&issue.call, COLLIE_KIND_BARRIER, NULL, NULL, 0, COLLIE_UINT8, 0);
  return api_finish(comm, &issue, opts, work);
}

collie_result_t
collie_allgather(collie_comm_t *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                 collie_dtype_t dtype, const collie_opts_t *opts, collie_work_t **work)
{
  static const char fn[] = "collie_allgather";
  API_TRY(api_enter(comm, fn, opts, work));
  API_TRY(api_dtype(fn, dtype));
  API_TRY(api_count(fn, "sendcount", sendcount, (size_t)comm->size, dtype));
  API_TRY(api_buf(fn, "sendbuf", sendbuf, sendcount));
  API_TRY(api_buf(fn, "recvbuf", recvbuf, sendcount));
  struct collie__op issue;
  api_call(&issue.call, COLLIE_KIND_ALLGATHER, sendbuf, recvbuf, sendcount, dtype, 0);
  return api_finish(comm, &issue, opts, work);
}

/* A v-variant's counts and displacements (named cn and dn in messages): both
 * present, no element count or end offset whose bytes overflow, and a buffer
 * (named bn) whenever any count is non-zero. */
static collie_result_t
api_varrays(const collie_comm_t *comm, const char *fn, const char *bn, const void *buf,
            const size_t *counts, const char *cn, const size_t *displs, const char *dn,
            collie_dtype_t dtype)
{
  if (!counts || !displs)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: %s is NULL", fn, !counts ? cn : dn);
  size_t any = 0;
  for (int q = 0; q < comm->size; q++) {
    API_TRY(api_count(fn, cn, counts[q], 1, dtype));
    if (displs[q] > API_MAX_BUFFER_BYTES / collie_dtype_size(dtype) - counts[q])
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "%s: %s[%d] + %s[%d] = %zu + %zu elements ends beyond what a process can "
                         "address (overflows)",
                         fn, dn, q, cn, q, displs[q], counts[q]);
    any |= counts[q];
  }
  return api_buf(fn, bn, buf, any);
}

collie_result_t
collie_allgatherv(collie_comm_t *comm, const void *sendbuf, size_t sendcount, void *recvbuf,
                  const size_t *recvcounts, const size_t *displs, collie_dtype_t dtype,
                  const collie_opts_t *opts, collie_work_t **work)
{
  static const char fn[] = "collie_allgatherv";
  API_TRY(api_enter(comm, fn, opts, work));
  API_TRY(api_dtype(fn, dtype));
  API_TRY(api_count(fn, "sendcount", sendcount, 1, dtype));
  API_TRY(api_buf(fn, "sendbuf", sendbuf, sendcount));
  API_TRY(
      api_varrays(comm, fn, "recvbuf", recvbuf, recvcounts, "recvcounts", displs, "displs", dtype));
  if (recvcounts[comm->rank] != sendcount)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: recvcounts[%d] = %zu differs from sendcount %zu", fn, comm->rank,
                       recvcounts[comm->rank], sendcount);
  struct collie__op issue;
  api_call(&issue.call, COLLIE_KIND_ALLGATHERV, sendbuf, recvbuf, sendcount, dtype, 0);
  issue.call.recvcounts = recvcounts;
  issue.call.rdispls = displs;
  return api_finish(comm, &issue, opts, work);
}

collie_result_t
collie_reduce_scatter(collie_comm_t *comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                      collie_dtype_t dtype, collie_op_t op, const collie_opts_t *opts,
                      collie_work_t **work)
{
  static const char fn[] = "collie_reduce_scatter";
  API_TRY(api_enter(comm, fn, opts, work));
  API_TRY(api_dtype(fn, dtype));
  API_TRY(api_op(fn, dtype, op));
  API_TRY(api_count(fn, "recvcount", recvcount, (size_t)comm->size, dtype));
  API_TRY(api_buf(fn, "sendbuf", sendbuf, recvcount));
  API_TRY(api_buf(fn, "recvbuf", recvbuf, recvcount));
  struct collie__op issue;
  api_reduction(&issue.call, COLLIE_KIND_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op, 0);
  return api_finish(comm, &issue, opts, work);
}

collie_result_t
collie_reduce(collie_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
              collie_dtype_t dtype, collie_op_t op, int root, const collie_opts_t *opts,
              collie_work_t **work)
{
  static const char fn[] = "collie_reduce";
  API_TRY(api_enter(comm, fn, opts, work));
  API_TRY(api_dtype(fn, dtype));
  API_TRY(api_op(fn, dtype, op));
  API_TRY(api_count(fn, "count", count, 1, dtype));
  API_TRY(api_rank(comm, fn, "root", root));
  API_TRY(api_buf(fn, "sendbuf", sendbuf, count));
  if (comm->rank == root) API_TRY(api_buf(fn, "recvbuf (at the root)", recvbuf, count));
  struct collie__op issue;
  api_reduction(&issue.call, COLLIE_KIND_REDUCE, sendbuf, recvbuf, count, dtype, op, root);
  return api_finish(comm, &issue, opts, work);
}

collie_result_t
collie_alltoall(collie_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count_per_rank,
                collie_dtype_t dtype, const collie_opts_t *opts, collie_work_t **work)
{
  static const char fn[] = "collie_alltoall";
  API_TRY(api_enter(comm, fn, opts, work));
  API_TRY(api_dtype(fn, dtype));
  API_TRY(api_count(fn, "count_per_rank", count_per_rank, (size_t)comm->size, dtype));
  API_TRY(api_buf(fn, "sendbuf", sendbuf, count_per_rank));
  API_TRY(api_buf(fn, "recvbuf", recvbuf, count_per_rank));
  struct collie__op issue;
  api_call(&issue.call, COLLIE_KIND_ALLTOALL, sendbuf, recvbuf, count_per_rank, dtype, 0);
  return api_finish(comm, &issue, opts, work);
}

collie_result_t
collie_alltoallv(collie_comm_t *comm, const void *sendbuf, const size_t *sendcounts,
                 const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                 const size_t *rdispls, collie_dtype_t dtype, const collie_opts_t *opts,
                 collie_work_t **work)
{
  static const char fn[] = "collie_alltoallv";
  API_TRY(api_enter(comm, fn, opts, work));
  API_TRY(api_dtype(fn, dtype));
  API_TRY(api_varrays(comm, fn, "sendbuf", sendbuf, sendcounts, "sendcounts", sdispls, "sdispls",
                      dtype));
  API_TRY(api_varrays(comm, fn, "recvbuf", recvbuf, recvcounts, "recvcounts", rdispls, "rdispls",
                      dtype));
  if (sendcounts[comm->rank] != recvcounts[comm->rank])
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: sendcounts[%d] = %zu differs from recvcounts[%d] = %zu (the block a "
                       "rank keeps for itself has one size)",
                       fn, comm->rank, sendcounts[comm->rank], comm->rank, recvcounts[comm->rank]);
  struct collie__op issue;
  api_call(&issue.call, COLLIE_KIND_ALLTOALLV, sendbuf, recvbuf, 0, dtype, 0);
  issue.call.sendcounts = sendcounts;
  issue.call.sdispls = sdispls;
  issue.call.recvcounts = recvcounts;
  issue.call.rdispls = rdispls;
  return api_finish(comm, &issue, opts, work);
}

collie_result_t
collie_gather(collie_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
              collie_dtype_t dtype, int root, const collie_opts_t *opts, collie_work_t **work)
{
  static const char fn[] = "collie_gather";
  API_TRY(api_enter(comm, fn, opts, work));
  API_TRY(api_dtype(fn, dtype));
  API_TRY(api_count(fn, "count", count, (size_t)comm->size, dtype));
  API_TRY(api_rank(comm, fn, "root", root));
  API_TRY(api_buf(fn, "sendbuf", sendbuf, count));
  if (comm->rank == root) API_TRY(api_buf(fn, "recvbuf (at the root)", recvbuf, count));
  struct collie__op issue;
  api_call(&issue.call, COLLIE_KIND_GATHER, sendbuf, recvbuf, count, dtype, root);
  return api_finish(comm, &issue, opts, work);
}

collie_result_t
collie_scatter(collie_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
               collie_dtype_t dtype, int root, const collie_opts_t *opts, collie_work_t **work)
{
  static const char fn[] = "collie_scatter";
  API_TRY(api_enter(comm, fn, opts, work));
  API_TRY(api_dtype(fn, dtype));
  API_TRY(api_count(fn, "count", count, (size_t)comm->size, dtype));
  API_TRY(api_rank(comm, fn, "root", root));
  if (comm->rank == root) API_TRY(api_buf(fn, "sendbuf (at the root)", sendbuf, count));
  API_TRY(api_buf(fn, "recvbuf", recvbuf, count));
  struct collie__op issue;
  api_call(&issue.call, COLLIE_KIND_SCATTER, sendbuf, recvbuf, count, dtype, root);
  return api_finish(comm, &issue, opts, work);
}

/* ---- Point to point ---- */

/* The peer and tag of a send, receive or probe. A receive or probe (any)
 * takes COLLIE_ANY_SOURCE and COLLIE_ANY_TAG. */
static collie_result_t
api_peer_tag(const collie_comm_t *comm, const char *fn, int peer, int tag, int any)
{
  if (!(any && peer == COLLIE_ANY_SOURCE) && (peer < 0 || peer >= comm->size))
    /* Named as each call's prototype names it (on the error path only:
     * this check runs on every send and receive). */
    return api_rank(comm, fn, strstr(fn, "recv_status") || strstr(fn, "probe") ? "source" : "peer",
                    peer);
  if (tag < 0 && !(any && tag == COLLIE_ANY_TAG))
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: tag = %d must be >= 0%s", fn, tag,
                       any ? " (or COLLIE_ANY_TAG)" : "");
  return COLLIE_SUCCESS;
}

/* A send (sbuf) or receive (rbuf) issued as a call. sync: a synchronous
 * send; source, status: where a receive reports the sender (NULL: not
 * wanted; a receive with a status takes a message shorter than count). */
static collie_result_t
api_p2p(collie_comm_t *comm, const char *fn, const void *sbuf, void *rbuf, size_t count,
        collie_dtype_t dtype, int peer, int tag, int sync, int *source, collie_status_t *status,
        const collie_opts_t *opts, collie_work_t **work)
{
  API_TRY(api_enter(comm, fn, opts, work));
  API_TRY(api_dtype(fn, dtype));
  API_TRY(api_count(fn, "count", count, 1, dtype));
  API_TRY(api_buf(fn, "buf", sbuf ? sbuf : rbuf, count));
  API_TRY(api_peer_tag(comm, fn, peer, tag, rbuf != NULL));
  if (comm->in_group) {
    if (work)
      return collie__err(
          COLLIE_INVALID_ARGUMENT,
          "%s: work must be NULL inside a group (collie_group_end returns the handle)", fn);
    if (sync || source || status || peer == COLLIE_ANY_SOURCE || tag == COLLIE_ANY_TAG)
      return collie__err(COLLIE_INVALID_USAGE,
                         "%s: not inside a group (collie_group_start): a group takes sends and "
                         "receives with a named peer and tag",
                         fn);
    return collie__group_add(comm, sbuf, rbuf, count, dtype, peer, tag, opts);
  }
  /* To itself: async ones are posted and match each other (work.c); a
   * blocking one would wait for a counterpart that cannot be issued. */
  if (peer == comm->rank && !work)
    return collie__err(COLLIE_INVALID_USAGE,
                       "%s: a blocking %s to itself would never complete; issue it async (with a "
                       "work handle) or put the send and the recv in one group "
                       "(collie_group_start/end)",
                       fn, sbuf ? "send" : "recv");
  struct collie__op issue;
  api_call(&issue.call, COLLIE_KIND_P2P, sbuf, rbuf, count, dtype, peer);
  issue.call.tag = tag;
  /* The flight recorder's numbers: each pair's messages in issue order. */
  if (peer >= 0)
    issue.call.p2p_seq = sbuf ? comm->p2p_send_seq[peer]++ : comm->p2p_recv_seq[peer]++;
  issue.call.p2p_sync = sync;
  issue.call.source = source;
  issue.call.p2p_status = status;
  if (source) *source = -1;
  return api_finish(comm, &issue, opts, work);
}

collie_result_t
collie_recv_any(collie_comm_t *comm, void *buf, size_t count, collie_dtype_t dtype, int tag,
                int *source, const collie_opts_t *opts, collie_work_t **work)
{
  static const char fn[] = "collie_recv_any";
  static char dummy;
  if (!source) {
    API_TRY(api_enter(comm, fn, opts, work));
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: source is NULL", fn);
  }
  if (tag < 0) {
    API_TRY(api_enter(comm, fn, opts, work));
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: tag = %d must be >= 0", fn, tag);
  }
  return api_p2p(comm, fn, NULL, buf ? buf : &dummy, count, dtype, COLLIE_ANY_SOURCE, tag, 0,
                 source, NULL, opts, work);
}

collie_result_t
collie_send(collie_comm_t *comm, const void *buf, size_t count, collie_dtype_t dtype, int peer,
            int tag, const collie_opts_t *opts, collie_work_t **work)
{
  /* A zero-count send may pass NULL; mark it as a send with a non-NULL dummy. */
  static const char dummy;
  return api_p2p(comm, "collie_send", buf ? buf : &dummy, NULL, count, dtype, peer, tag, 0, NULL,
                 NULL, opts, work);
}

collie_result_t
collie_ssend(collie_comm_t *comm, const void *buf, size_t count, collie_dtype_t dtype, int peer,
             int tag, const collie_opts_t *opts, collie_work_t **work)
{
  static const char dummy;
  return api_p2p(comm, "collie_ssend", buf ? buf : &dummy, NULL, count, dtype, peer, tag, 1, NULL,
                 NULL, opts, work);
}

collie_result_t
collie_recv(collie_comm_t *comm, void *buf, size_t count, collie_dtype_t dtype, int peer, int tag,
            const collie_opts_t *opts, collie_work_t **work)
{
  static char dummy;
  return api_p2p(comm, "collie_recv", NULL, buf ? buf : &dummy, count, dtype, peer, tag, 0, NULL,
                 NULL, opts, work);
}

collie_result_t
collie_recv_status(collie_comm_t *comm, void *buf, size_t count, collie_dtype_t dtype, int source,
                   int tag, collie_status_t *status, const collie_opts_t *opts,
                   collie_work_t **work)
{
  static const char fn[] = "collie_recv_status";
  static char dummy;
  if (!status) {
    API_TRY(api_enter(comm, fn, opts, work));
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: status is NULL (collie_recv takes none)", fn);
  }
  *status = (collie_status_t){.source = -1, .tag = -1, .bytes = 0};
  return api_p2p(comm, fn, NULL, buf ? buf : &dummy, count, dtype, source, tag, 0, NULL, status,
                 opts, work);
}

/* A probe runs as a call (in issue order, on the thread that drives the
 * communicator), blocking (collie_probe) or looking once (collie_iprobe). */
static collie_result_t
api_probe(collie_comm_t *comm, const char *fn, int source, int tag, int block, int *flag,
          collie_status_t *status, const collie_opts_t *opts)
{
  static char dummy;
  API_TRY(api_enter(comm, fn, opts, NULL));
  if (!status) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: status is NULL", fn);
  if (!block && !flag) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: flag is NULL", fn);
  API_TRY(api_peer_tag(comm, fn, source, tag, 1));
  if (comm->in_group)
    return collie__err(COLLIE_INVALID_USAGE, "%s: not inside a group (collie_group_start)", fn);
  *status = (collie_status_t){.source = -1, .tag = -1, .bytes = 0};
  if (flag) *flag = 0;
  struct collie__op issue;
  api_call(&issue.call, COLLIE_KIND_P2P, NULL, &dummy, 0, COLLIE_UINT8, source);
  issue.call.tag = tag;
  issue.call.p2p_probe = block ? 1 : 2;
  issue.call.p2p_flag = flag;
  issue.call.p2p_status = status;
  return api_finish(comm, &issue, opts, NULL);
}

collie_result_t
collie_probe(collie_comm_t *comm, int source, int tag, collie_status_t *status,
             const collie_opts_t *opts)
{
  return api_probe(comm, "collie_probe", source, tag, 1, NULL, status, opts);
}

collie_result_t
collie_iprobe(collie_comm_t *comm, int source, int tag, int *flag, collie_status_t *status,
              const collie_opts_t *opts)
{
  return api_probe(comm, "collie_iprobe", source, tag, 0, flag, status, opts);
}

const char *
collie_last_error(void)
{
  return collie__err_msg();
}

/* ---- Groups of send/recv (group.c records and runs them) ---- */

collie_result_t
collie_group_start(collie_comm_t *comm)
{
  collie_result_t rc = collie__comm_check(comm, "collie_group_start");
  if (rc != COLLIE_SUCCESS) return rc;
  if (comm->in_group)
    return collie__err(COLLIE_INVALID_USAGE,
                       "collie_group_start: a group is already open (groups do not nest)");
  if (!comm->group && !(comm->group = collie__group_new()))
    return collie__err(COLLIE_SYSTEM_ERROR, "out of memory starting a group");
  collie__group_begin(comm->group);
  comm->in_group = 1;
  return COLLIE_SUCCESS;
}

collie_result_t
collie_group_end(collie_comm_t *comm, collie_work_t **work)
{
  collie_result_t rc = collie__comm_check(comm, "collie_group_end");
  if (rc != COLLIE_SUCCESS) return rc;
  if (!comm->in_group)
    return collie__err(COLLIE_INVALID_USAGE, "collie_group_end: no group is open");
  if (work) *work = NULL;
  comm->in_group = 0;
  collie__group_seal(comm, comm->group);
  return collie__work_issue(comm, NULL, comm->group, work);
}

/* ---- Memory peers read in place ---- */

void *
collie_mem_alloc(collie_comm_t *comm, size_t bytes)
{
  if (collie__comm_check(comm, "collie_mem_alloc") != COLLIE_SUCCESS) return NULL;
  return collie__shm_mem_alloc(bytes);
}

collie_result_t
collie_mem_free(void *ptr)
{
  return collie__shm_mem_free(ptr);
}

/* ---- Persistent collectives ----
 *
 * A plan is the op that the plain call would issue, taken from api_finish
 * after every check of that call has passed (so the two can never check
 * differently), with its options copied. A start issues a copy of it as
 * api_finish would have: the collective's sequence number, the algorithm
 * (the selection memo answers at once for a repeated shape) and the device
 * check happen at each start, the argument checks and the call's building
 * only once. */

struct collie_plan {
  collie_comm_t *comm;
  struct collie__op op;
  collie_opts_t opts;
  int has_opts;
  char *label, *phase; /* the options' strings, owned */
};

/* The plan of the plain call `invocation` (its arguments end in opts and a
 * NULL work). */
#define API_PLAN(comm, opts, plan, invocation)                                                     \
  do {                                                                                             \
    if (!(plan)) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: plan is NULL", __func__);        \
    *(plan) = NULL;                                                                                \
    struct collie__op cap_;                                                                        \
    cap_.call.kind = -1; /* set by api_finish when the call gets there */                          \
    atomic_fetch_add_explicit(&api_capturing, 1, memory_order_relaxed);                            \
    api_capture = &cap_;                                                                           \
    collie_result_t rc_ = (invocation);                                                            \
    api_capture = NULL;                                                                            \
    atomic_fetch_sub_explicit(&api_capturing, 1, memory_order_relaxed);                            \
    if (rc_ != COLLIE_SUCCESS) return rc_;                                                         \
    if (cap_.call.kind < 0)                                                                        \
      return collie__err(COLLIE_INTERNAL_ERROR, "%s: the call made no plan", __func__);            \
    return api_plan_make((comm), &cap_, (opts), (plan));                                           \
  } while (0)

static collie_result_t
api_plan_make(collie_comm_t *comm, const struct collie__op *op, const collie_opts_t *opts,
              collie_plan_t **out)
{
  collie_plan_t *p = calloc(1, sizeof(*p));
  if (!p) return collie__err(COLLIE_SYSTEM_ERROR, "out of memory for a collective's plan");
  p->comm = comm;
  p->op = *op;
  if (opts) {
    p->has_opts = 1;
    p->opts = *opts;
    if ((opts->label && !(p->label = strdup(opts->label))) ||
        (opts->phase && !(p->phase = strdup(opts->phase)))) {
      collie_plan_free(p);
      return collie__err(COLLIE_SYSTEM_ERROR, "out of memory for a collective's plan");
    }
    p->opts.label = p->label;
    p->opts.phase = p->phase;
  }
  *out = p;
  return COLLIE_SUCCESS;
}

collie_result_t
collie_allreduce_init(collie_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                      collie_dtype_t dtype, collie_op_t op, const collie_opts_t *opts,
                      collie_plan_t **plan)
{
  API_PLAN(comm, opts, plan,
           collie_allreduce(comm, sendbuf, recvbuf, count, dtype, op, opts, NULL));
}

collie_result_t
collie_allgather_init(collie_comm_t *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                      collie_dtype_t dtype, const collie_opts_t *opts, collie_plan_t **plan)
{
  API_PLAN(comm, opts, plan,
           collie_allgather(comm, sendbuf, recvbuf, sendcount, dtype, opts, NULL));
}

collie_result_t
collie_reduce_scatter_init(collie_comm_t *comm, const void *sendbuf, void *recvbuf,
                           size_t recvcount, collie_dtype_t dtype, collie_op_t op,
                           const collie_opts_t *opts, collie_plan_t **plan)
{
  API_PLAN(comm, opts, plan,
           collie_reduce_scatter(comm, sendbuf, recvbuf, recvcount, dtype, op, opts, NULL));
}

collie_result_t
collie_broadcast_init(collie_comm_t *comm, void *buf, size_t count, collie_dtype_t dtype, int root,
                      const collie_opts_t *opts, collie_plan_t **plan)
{
  API_PLAN(comm, opts, plan, collie_broadcast(comm, buf, count, dtype, root, opts, NULL));
}

collie_result_t
collie_alltoall_init(collie_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count_per_rank,
                     collie_dtype_t dtype, const collie_opts_t *opts, collie_plan_t **plan)
{
  API_PLAN(comm, opts, plan,
           collie_alltoall(comm, sendbuf, recvbuf, count_per_rank, dtype, opts, NULL));
}

collie_result_t
collie_start(collie_plan_t *plan, collie_work_t **work)
{
  static const char fn[] = "collie_start";
  if (!plan) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: plan is NULL", fn);
  collie_comm_t *comm = plan->comm;
  API_TRY(collie__comm_check(comm, fn));
  if (work) *work = NULL;
  struct collie__op op;
  op.call = plan->op.call;
  return api_finish(comm, &op, plan->has_opts ? &plan->opts : NULL, work);
}

void
collie_plan_free(collie_plan_t *plan)
{
  if (!plan) return;
  free(plan->label);
  free(plan->phase);
  free(plan);
}
