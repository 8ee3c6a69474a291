/*
 * nccl_coll.c - NCCL's collectives, sends and receives, and groups, as
 * collie's calls on the stream they are given (collie_opts_t.cuda_stream).
 *
 * A call returns once its work is done (collie's device path), which NCCL
 * allows ("enqueued" is a weaker promise than "done"); later work on the
 * stream sees the result. Between ncclGroupStart and ncclGroupEnd calls are
 * recorded; ncclGroupEnd runs them, for each communicator in the order the
 * group first named it: its collectives in call order, then its sends and
 * receives together as one collie group, so that any pattern of them
 * progresses at once (NCCL's reason for groups).
 */
#include <stdlib.h>
#include <string.h>

#include "device/cuda.h"
#include "nccl/nccl_int.h"

enum nccl_kind {
  K_ALLREDUCE,
  K_BROADCAST,
  K_REDUCE,
  K_ALLGATHER,
  K_REDUCE_SCATTER,
  K_ALLTOALL,
  K_GATHER,
  K_SCATTER,
  K_SEND,
  K_RECV
};

static const char *const nccl_kind_fn[] = {
    "ncclAllReduce", "ncclBroadcast", "ncclReduce",  "ncclAllGather", "ncclReduceScatter",
    "ncclAlltoAll",  "ncclGather",    "ncclScatter", "ncclSend",      "ncclRecv"};

struct nccl_call {
  enum nccl_kind kind;
  const void *sendbuf;
  void *recvbuf;
  size_t count;
  collie_dtype_t dtype;
  collie_op_t op;
  int root; /* or the peer */
  ncclComm_t comm;
  cudaStream_t stream;
  /* A PreMulSum operator's, copied: NCCL lets it be destroyed once the call
   * returned, before the group that recorded the call ends. */
  int premul;
  struct nccl_user_op user;
};

/* The open group of this thread (NCCL's groups are per thread). */
static _Thread_local struct {
  int depth;
  struct nccl_call *calls;
  int n, cap;
  ncclResult_t failed; /* a call recorded in it was refused: the group fails */
} nccl_group;

int
nccl_group_open(void)
{
  return nccl_group.depth > 0;
}

ncclResult_t
nccl_dtype(ncclDataType_t t, const char *fn, collie_dtype_t *out)
{
  static const collie_dtype_t map[] = {
      COLLIE_INT8,   COLLIE_UINT8,   COLLIE_INT32,   COLLIE_UINT32,  COLLIE_INT64,
      COLLIE_UINT64, COLLIE_FLOAT16, COLLIE_FLOAT32, COLLIE_FLOAT64, COLLIE_BFLOAT16};
  if ((unsigned)t < sizeof(map) / sizeof(map[0])) {
    *out = map[t];
    return ncclSuccess;
  }
  if (t == ncclFloat8e4m3 || t == ncclFloat8e5m2)
    return nccl_fail(ncclInvalidArgument, fn,
                     "datatype %s is not supported by collie (no fp8 reductions yet)",
                     t == ncclFloat8e4m3 ? "ncclFloat8e4m3" : "ncclFloat8e5m2");
  return nccl_fail(ncclInvalidArgument, fn, "datatype = %d is not an ncclDataType_t", (int)t);
}

/* op as collie's, or a live PreMulSum operator of comm (*user set). */
static ncclResult_t
nccl_op(ncclRedOp_t op, ncclComm_t comm, const char *fn, collie_op_t *out,
        struct nccl_user_op *user, int *premul)
{
  static const collie_op_t map[] = {COLLIE_SUM, COLLIE_PROD, COLLIE_MAX, COLLIE_MIN, COLLIE_AVG};
  if ((unsigned)op < sizeof(map) / sizeof(map[0])) {
    *out = map[op];
    return ncclSuccess;
  }
  const struct nccl_user_op *u = nccl_user_op(comm, op);
  if (u) {
    *out = COLLIE_SUM;
    *user = *u;
    *premul = 1;
    return ncclSuccess;
  }
  return nccl_fail(ncclInvalidArgument, fn,
                   "op = %d is neither ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg nor a live "
                   "ncclRedOpCreatePreMulSum operator of this communicator",
                   (int)op);
}

int
nccl_on_device(const void *p)
{
  int dev;
  return p && collie__cuda_live() && collie__cuda_is_device(p, &dev);
}

/* ncclBroadcast out of place: the root's sendbuff into its recvbuff first,
 * on the stream (collie's broadcast is in place and waits for it). */
static collie_result_t
nccl_root_copy(const struct nccl_call *k, size_t bytes)
{
  if (k->comm->rank != k->root || k->sendbuf == k->recvbuf || !bytes) return COLLIE_SUCCESS;
  if (nccl_on_device(k->sendbuf) || nccl_on_device(k->recvbuf))
    return collie__cuda_copy_async(k->recvbuf, k->sendbuf, bytes, k->stream,
                                   "ncclBroadcast: root's sendbuff to recvbuff");
  memmove(k->recvbuf, k->sendbuf, bytes);
  return COLLIE_SUCCESS;
}

static collie_result_t
nccl_run_collective(const struct nccl_call *k)
{
  collie_comm_t *c = k->comm->c;
  collie_opts_t o;
  memset(&o, 0, sizeof(o));
  o.cuda_stream = k->stream;
  if (k->premul)
    return nccl_premul_run(k->comm, &k->user, k->kind == K_REDUCE_SCATTER,
                           k->kind == K_REDUCE ? k->root : -1, k->sendbuf, k->recvbuf, k->count,
                           k->dtype, k->stream, nccl_kind_fn[k->kind]);
  switch (k->kind) {
  case K_ALLREDUCE:
    return collie_allreduce(c, k->sendbuf, k->recvbuf, k->count, k->dtype, k->op, &o, NULL);
  case K_BROADCAST: {
    collie_result_t rc = nccl_root_copy(k, k->count * collie_dtype_size(k->dtype));
    if (rc != COLLIE_SUCCESS) return rc;
    return collie_broadcast(c, k->recvbuf, k->count, k->dtype, k->root, &o, NULL);
  }
  case K_REDUCE:
    return collie_reduce(c, k->sendbuf, k->recvbuf, k->count, k->dtype, k->op, k->root, &o, NULL);
  case K_ALLGATHER:
    return collie_allgather(c, k->sendbuf, k->recvbuf, k->count, k->dtype, &o, NULL);
  case K_REDUCE_SCATTER:
    return collie_reduce_scatter(c, k->sendbuf, k->recvbuf, k->count, k->dtype, k->op, &o, NULL);
  case K_ALLTOALL:
    return collie_alltoall(c, k->sendbuf, k->recvbuf, k->count, k->dtype, &o, NULL);
  case K_GATHER:
    return collie_gather(c, k->sendbuf, k->recvbuf, k->count, k->dtype, k->root, &o, NULL);
  case K_SCATTER:
    return collie_scatter(c, k->sendbuf, k->recvbuf, k->count, k->dtype, k->root, &o, NULL);
  case K_SEND:
    return collie_send(c, k->sendbuf, k->count, k->dtype, k->root, 0, &o, NULL);
  case K_RECV:
    return collie_recv(c, k->recvbuf, k->count, k->dtype, k->root, 0, &o, NULL);
  }
  return COLLIE_INTERNAL_ERROR;
}

/* Checks a call and runs it, or records it in the open group. */
static ncclResult_t
nccl_issue(enum nccl_kind kind, const void *sendbuf, void *recvbuf, size_t count,
           ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
  const char *fn = nccl_kind_fn[kind];
  struct nccl_call k;
  memset(&k, 0, sizeof(k));
  k.kind = kind;
  k.sendbuf = sendbuf;
  k.recvbuf = recvbuf;
  k.count = count;
  k.root = root;
  k.comm = comm;
  k.stream = stream;
  ncclResult_t r = nccl_check_comm(comm, fn);
  if (r == ncclSuccess) r = nccl_dtype(datatype, fn, &k.dtype);
  if (r == ncclSuccess && (kind == K_ALLREDUCE || kind == K_REDUCE || kind == K_REDUCE_SCATTER))
    r = nccl_op(op, comm, fn, &k.op, &k.user, &k.premul);
  if (r == ncclSuccess &&
      (kind == K_BROADCAST || kind == K_REDUCE || kind == K_GATHER || kind == K_SCATTER ||
       kind == K_SEND || kind == K_RECV) &&
      (root < 0 || root >= comm->size))
    r = nccl_fail(ncclInvalidArgument, fn, "%s = %d is outside 0..%d",
                  kind == K_SEND || kind == K_RECV ? "peer" : "root", root, comm->size - 1);
  if (r != ncclSuccess) {
    if (nccl_group_open() && nccl_group.failed == ncclSuccess) nccl_group.failed = r;
    return r;
  }
  if (nccl_group_open()) {
    if (nccl_group.n == nccl_group.cap) {
      int cap = nccl_group.cap ? 2 * nccl_group.cap : 16;
      struct nccl_call *grown = realloc(nccl_group.calls, (size_t)cap * sizeof(*grown));
      if (!grown) {
        nccl_group.failed = ncclSystemError;
        return nccl_fail(ncclSystemError, fn, "out of memory recording the call in a group");
      }
      nccl_group.calls = grown;
      nccl_group.cap = cap;
    }
    nccl_group.calls[nccl_group.n++] = k;
    return ncclSuccess;
  }
  if ((r = nccl_comm_enter(comm, fn)) != ncclSuccess) return r;
  r = nccl_from_collie(nccl_run_collective(&k), comm, fn);
  nccl_comm_leave(comm);
  return r;
}

/* ---- groups ---- */

NCCL_EXPORT ncclResult_t
ncclGroupStart(void)
{
  if (nccl_group.depth++ == 0) {
    nccl_group.n = 0;
    nccl_group.failed = ncclSuccess;
  }
  return ncclSuccess;
}

/* Runs comm's recorded calls: collectives in order, then its sends and
 * receives as one collie group. */
static ncclResult_t
nccl_group_run_comm(ncclComm_t comm)
{
  int p2p = 0;
  for (int i = 0; i < nccl_group.n; i++) {
    const struct nccl_call *k = &nccl_group.calls[i];
    if (k->comm != comm) continue;
    if (k->kind == K_SEND || k->kind == K_RECV) {
      p2p = 1;
      continue;
    }
    collie_result_t rc = nccl_run_collective(k);
    if (rc != COLLIE_SUCCESS) return nccl_from_collie(rc, comm, nccl_kind_fn[k->kind]);
  }
  if (!p2p) return ncclSuccess;
  collie_result_t rc = collie_group_start(comm->c);
  for (int i = 0; rc == COLLIE_SUCCESS && i < nccl_group.n; i++) {
    const struct nccl_call *k = &nccl_group.calls[i];
    if (k->comm == comm && (k->kind == K_SEND || k->kind == K_RECV)) rc = nccl_run_collective(k);
  }
  collie_result_t end = collie_group_end(comm->c, NULL);
  if (rc == COLLIE_SUCCESS) rc = end;
  return nccl_from_collie(rc, comm, "ncclGroupEnd");
}

NCCL_EXPORT ncclResult_t
ncclGroupEnd(void)
{
  static const char fn[] = "ncclGroupEnd";
  if (nccl_group.depth == 0)
    return nccl_fail(ncclInvalidUsage, fn, "no group is open (ncclGroupStart was not called)");
  if (--nccl_group.depth > 0) return ncclSuccess;
  ncclResult_t r = nccl_group.failed;
  if (r != ncclSuccess) {
    nccl_group.n = 0;
    return r; /* the refused call's message stays the last error */
  }
  for (int i = 0; i < nccl_group.n && r == ncclSuccess; i++) {
    ncclComm_t comm = nccl_group.calls[i].comm;
    int first = 1;
    for (int j = 0; j < i && first; j++) first = nccl_group.calls[j].comm != comm;
    if (!first) continue;
    if ((r = nccl_comm_enter(comm, fn)) != ncclSuccess) break;
    r = nccl_group_run_comm(comm);
    nccl_comm_leave(comm);
  }
  nccl_group.n = 0;
  return r;
}

/* ---- the calls ---- */

NCCL_EXPORT ncclResult_t
ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
  return nccl_issue(K_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

NCCL_EXPORT ncclResult_t
ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
              ncclComm_t comm, cudaStream_t stream)
{
  return nccl_issue(K_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

NCCL_EXPORT ncclResult_t
ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
          cudaStream_t stream)
{
  return nccl_issue(K_BROADCAST, buff, buff, count, datatype, ncclSum, root, comm, stream);
}

NCCL_EXPORT ncclResult_t
ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
           ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
  return nccl_issue(K_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

NCCL_EXPORT ncclResult_t
ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
              ncclComm_t comm, cudaStream_t stream)
{
  return nccl_issue(K_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream);
}

NCCL_EXPORT ncclResult_t
ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
  return nccl_issue(K_REDUCE_SCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream);
}

NCCL_EXPORT ncclResult_t
ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
             ncclComm_t comm, cudaStream_t stream)
{
  return nccl_issue(K_ALLTOALL, sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream);
}

NCCL_EXPORT ncclResult_t
ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
           ncclComm_t comm, cudaStream_t stream)
{
  return nccl_issue(K_GATHER, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

NCCL_EXPORT ncclResult_t
ncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
            ncclComm_t comm, cudaStream_t stream)
{
  return nccl_issue(K_SCATTER, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

NCCL_EXPORT ncclResult_t
ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         cudaStream_t stream)
{
  return nccl_issue(K_SEND, sendbuff, NULL, count, datatype, ncclSum, peer, comm, stream);
}

NCCL_EXPORT ncclResult_t
ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         cudaStream_t stream)
{
  return nccl_issue(K_RECV, NULL, recvbuff, count, datatype, ncclSum, peer, comm, stream);
}
