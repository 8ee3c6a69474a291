/*
 * cuda_ipc.c - collectives on CUDA device buffers of ranks on one host, read
 * in place through CUDA IPC (issue 21's direct path; docs/gpu.md): several
 * ranks on one GPU included, which NCCL refuses. This file is the frame
 * (coll/cuda_ipc.h) and the plans of allreduce, reduce_scatter, allgather
 * and broadcast; reduce, gather, scatter, alltoall(v) and allgatherv
 * are coll/cuda_ipc_pull.c's.
 *
 * The ranks meet in the communicator's flat area (transport/shm.h), as the
 * shm_flat family does, but what they put there is a record of their
 * buffers (device/ipc_cache.h: each allocation's IPC handle, cached on both
 * sides), not their data. A call:
 *   0. waits for the call's stream, so this rank's buffers hold what the
 *      stream's earlier work wrote, and publishes its record; sync;
 *   1. maps every peer's buffers (opening a handle only for an allocation
 *      not seen before) and publishes whether that worked; sync. Every rank
 *      now knows that every rank can read every buffer, or that one cannot
 *      (memory not shareable, a handle that will not open), and then all of
 *      them run the call through host memory instead (below);
 *   2. runs the call, on one of two plans. All on one GPU (the records'
 *      device UUIDs agree; several ranks per GPU): one rank does all of the
 *      work, because a GPU runs one process's work at a time and switches
 *      between processes' contexts slowly (measured on an H200: ~300 us a
 *      small call at 2 ranks, ~600 us at 4, when every rank ran its share,
 *      against ~12 us when one rank did). On several GPUs: every rank its
 *      share, so every GPU's bandwidth works. Each rank waits for its stream,
 *      and syncs after each phase whose results a peer reads next and at the
 *      end, so no rank returns (and lets its caller overwrite a buffer) while
 *      a peer still reads or writes it.
 *
 *   One GPU (the worker: rank 0; broadcast's root), kernels that write every
 *   rank's output at once (kernels.cu: up to 8 destinations a launch):
 *   allreduce       every recvbuf = the reduction of every sendbuf: reads p
 *                   S, writes p S; syncs 3.
 *   reduce_scatter  block q of every sendbuf reduced into rank q's recvbuf,
 *                   one launch per q; syncs 3.
 *   allgather       each sendbuf copied into its block of every recvbuf, one
 *                   launch per sender; syncs 3.
 *   broadcast       the root's buffer copied into every other one; syncs 3.
 *
 *   Several GPUs, every rank its share:
 *   allreduce       rank r reduces block r of every rank's sendbuf (rank
 *                   order, so every element has one order of combination
 *                   whichever rank computes it) into its own recvbuf; sync;
 *                   it copies every other block from its owner's recvbuf;
 *                   sync. In place works: rank r writes only block r of its
 *                   buffer while the others read only their own blocks.
 *                   Per rank: S read and S/p written by the kernel, 2
 *                   (p-1)/p S by the copies; syncs 4.
 *   reduce_scatter  rank r reduces block r of every sendbuf into recvbuf;
 *                   sync. Syncs 3.
 *   allgather       rank r copies every sendbuf into its block of recvbuf;
 *                   sync. Syncs 3.
 *   broadcast       the others copy the root's buffer; sync. Syncs 3.
 * Blocks are whole 64-byte lines (shm_flat's cut), so kernels run aligned.
 *
 * The host path inside the call: every rank copies its buffers to host
 * memory, runs the shm_flat algorithm (broadcast: the binomial tree) on
 * them, and copies the result back, all within this call's slot, so the
 * ranks stay in step whichever way they went.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/cuda_ipc.h"
#include "device/cuda.h"
#include "device/ipc_cache.h"
#include "transport/shm.h"
#include "util/error.h"

/* The flat descriptor's shape of this family (shm_flat's shapes are piece
 * sizes and counts, far below): a rank that took the host algorithm for
 * the same call fails the first sync with a mismatch. */
#define IPC_SHAPE 0xCDA00000u

static atomic_int ipc_warned; /* the fallback's WARN: once a process */

/* Start of block i of len bytes cut into p whole 64-byte lines. */
static size_t
ipc_cut(size_t len, int p, int i)
{
  if (i >= p) return len;
  return len / 64 * (size_t)i / (size_t)p * 64;
}

static collie_result_t
ipc_sync(struct collie__ipc_run *x)
{
  return collie__shm_flat_sync(x->f, x->c->deadline_ns);
}

/* Waits for this rank's queued work on the call's stream. */
static collie_result_t
ipc_wait(struct collie__ipc_run *x, const char *what)
{
  return collie__cuda_stream_sync(x->stream, x->c->deadline_ns, what);
}

/* ---- The host path ---- */

/* What the host path runs for each kind: shared-memory algorithms that need
 * no scratch of the caller's. */
static const struct collie__algo *
ipc_host_algo(int kind)
{
  switch (kind) {
  case COLLIE_KIND_ALLREDUCE:
    return &collie__algo_allreduce_shm_flat;
  case COLLIE_KIND_REDUCE_SCATTER:
    return &collie__algo_reduce_scatter_shm_flat;
  case COLLIE_KIND_ALLGATHER:
    return &collie__algo_allgather_shm_flat;
  case COLLIE_KIND_REDUCE:
    return &collie__algo_reduce_tree;
  case COLLIE_KIND_GATHER:
    return &collie__algo_gather_linear;
  case COLLIE_KIND_SCATTER:
    return &collie__algo_scatter_linear;
  case COLLIE_KIND_ALLTOALL:
    return &collie__algo_alltoall_pairwise;
  case COLLIE_KIND_ALLGATHERV:
    return &collie__algo_allgatherv_ring;
  case COLLIE_KIND_ALLTOALLV:
    return &collie__algo_alltoallv_pairwise;
  default:
    return &collie__algo_broadcast_tree;
  }
}

static collie_result_t
ipc_host_path(struct collie__ipc_run *x)
{
  struct collie__call *c = x->c, h = *c;
  struct collie__extent e;
  collie__call_extent(c, c->rank, c->size, &e);
  size_t se = e.send, re = e.recv;
  uintptr_t s = (uintptr_t)c->sendbuf, r = (uintptr_t)c->recvbuf;
  int send_in_recv = c->sendbuf && s >= r && s + se <= r + re;
  int recv_in_send = !send_in_recv && s <= r && r + re <= s + se;
  size_t own = send_in_recv ? re : recv_in_send ? se : se + re;
  char *host = malloc(own ? own : 1);
  if (!host)
    return collie__err(COLLIE_SYSTEM_ERROR, "cuda_ipc: out of memory staging %zu bytes", own);
  char *hs = host, *hr = host + (send_in_recv || recv_in_send ? 0 : se);
  if (send_in_recv) hs = hr + (s - r);
  if (recv_in_send) hr = hs + (r - s);
  collie_result_t rc = COLLIE_SUCCESS;
  if (!recv_in_send && re)
    rc = collie__cuda_copy_async(hr, c->recvbuf, re, x->stream, "recvbuf to host");
  if (rc == COLLIE_SUCCESS && !send_in_recv && se)
    rc = collie__cuda_copy_async(hs, c->sendbuf, se, x->stream, "sendbuf to host");
  if (rc == COLLIE_SUCCESS) rc = ipc_wait(x, "copying device buffers to the host");
  if (rc == COLLIE_SUCCESS) {
    h.sendbuf = hs;
    h.recvbuf = hr;
    h.mem = COLLIE_MEM_HOST;
    h.reduce = collie__reduce_kernel(c->dtype, c->op);
    rc = ipc_host_algo(c->kind)->run(&h);
  }
  if (rc == COLLIE_SUCCESS && re)
    rc = collie__cuda_copy_async(c->recvbuf, hr, re, x->stream, "result to device");
  if (rc == COLLIE_SUCCESS) rc = ipc_wait(x, "copying the result to the device");
  free(host);
  return rc;
}

/* ---- Meeting: records, mappings, agreement ---- */

/* Steps 0 and 1 of the essay. Publishes send (and recv) of this rank, maps
 * every peer's. *host: some rank cannot take the direct path, so every rank
 * runs the host path. */
static collie_result_t
ipc_meet(struct collie__ipc_run *x, const void *send, const void *recv, int direct_ok, int *host)
{
  struct collie__call *c = x->c;
  int p = c->size, r = c->rank;
  collie_result_t rc;
  *host = 0;
  if (!c->dev->ipc && !(c->dev->ipc = collie__ipc_cache_new(collie__cuda_ipc_ops(), p)))
    return COLLIE_SYSTEM_ERROR;
  void **ptrs = collie__scratch_get(c->scratch, 3 * (size_t)p * sizeof(void *));
  if (!ptrs) return COLLIE_SYSTEM_ERROR;
  x->peer_send = ptrs;
  x->peer_recv = ptrs + p;
  x->tmp = ptrs + 2 * p;

  struct collie__shm_flat_desc d;
  memset(&d, 0, sizeof(d));
  d.slot = collie__call_slot(c, 0);
  /* A v-variant's count is each rank's own: only the others must agree. */
  d.count = c->kind == COLLIE_KIND_ALLGATHERV || c->kind == COLLIE_KIND_ALLTOALLV ? 0 : c->count;
  d.dtype = (int32_t)c->dtype;
  d.op = (int32_t)c->op;
  d.root = c->root;
  d.shape = IPC_SHAPE | (uint32_t)c->kind;
  collie__shm_flat_begin(x->f, &d);

  /* Step 0: this rank's buffers are ready when its stream's work is done. */
  if ((rc = ipc_wait(x, "waiting for the call's stream")) != COLLIE_SUCCESS) return rc;
  int b = collie__shm_flat_next_buf(x->f);
  struct collie__ipc_rec *mine = collie__shm_flat_piece(x->f, r, b, sizeof(*mine));
  const void *bufs[COLLIE_IPC_BUFS] = {send, recv};
  if (collie__ipc_publish(c->dev->ipc, bufs, COLLIE_IPC_BUFS, mine) != COLLIE_SUCCESS ||
      collie__cuda_current_uuid(mine->device) != COLLIE_SUCCESS) {
    /* Still in step with the others: publishing nothing shareable sends
     * everyone down the host path. */
    if (!atomic_exchange(&ipc_warned, 1))
      COLLIE_WARN("COLL",
                  "cuda_ipc: %s; this call (and any other that cannot share) goes through "
                  "host memory",
                  collie__err_msg());
    memset(mine, 0, sizeof(*mine));
    mine->unshared = 1;
  }
  if ((rc = ipc_sync(x)) != COLLIE_SUCCESS) return rc;

  /* Step 1: map what the others published, unless one of them cannot share. */
  int unshared = -1;
  x->one_gpu = 1;
  for (int q = 0; q < p && unshared < 0; q++) {
    const struct collie__ipc_rec *rec = collie__shm_flat_piece(x->f, q, b, sizeof(*mine));
    if (rec->unshared) unshared = q;
    x->one_gpu &= !memcmp(rec->device, mine->device, sizeof(mine->device));
  }
  int failed = !direct_ok;
  for (int q = 0; q < p && unshared < 0 && !failed; q++) {
    const struct collie__ipc_rec *rec = collie__shm_flat_piece(x->f, q, b, sizeof(*mine));
    void *out[COLLIE_IPC_BUFS] = {NULL, NULL};
    if (q == r) {
      out[0] = (void *)send;
      out[1] = (void *)recv;
    } else if (collie__ipc_map(c->dev->ipc, q, rec, out) != COLLIE_SUCCESS) {
      if (!atomic_exchange(&ipc_warned, 1)) /* once a process: a loop would flood the log */
        COLLIE_WARN("COLL",
                    "cuda_ipc: mapping rank %d's buffers: %s; this call (and any other that "
                    "cannot map) goes through host memory",
                    collie__call_peer(c, q), collie__err_msg());
      failed = 1;
    }
    x->peer_send[q] = out[0];
    x->peer_recv[q] = out[1];
  }
  if (unshared >= 0) {
    if (unshared == r || r == 0)
      COLLIE_INFO("COLL",
                  "cuda_ipc: rank %d's buffer is not shareable through CUDA IPC "
                  "(cuMemCreate memory, e.g. torch's expandable segments): host path",
                  collie__call_peer(c, unshared));
    *host = 1;
    return COLLIE_SUCCESS;
  }
  int b2 = collie__shm_flat_next_buf(x->f);
  *(volatile int *)collie__shm_flat_piece(x->f, r, b2, sizeof(int)) = failed;
  if ((rc = ipc_sync(x)) != COLLIE_SUCCESS) return rc;
  for (int q = 0; q < p; q++)
    *host |= *(const volatile int *)collie__shm_flat_piece(x->f, q, b2, sizeof(int));
  return COLLIE_SUCCESS;
}

collie_result_t
collie__ipc_run(struct collie__call *c, const void *send, const void *recv, int direct_ok,
                collie_result_t (*direct)(struct collie__ipc_run *))
{
  struct collie__ipc_run x = {c, NULL, c->stream, NULL, NULL, NULL, 0};
  const void *any = c->recvbuf ? (const void *)c->recvbuf : c->sendbuf;
  collie_result_t rc = collie__cuda_push_ctx_of(any, "cuda_ipc: entering the buffer's context");
  if (rc != COLLIE_SUCCESS) return rc;
  if (c->size == 1) { /* one block to copy, at the v-variants' displacements */
    size_t es = c->esize, n = c->count * es, soff = 0, roff = 0;
    if (c->kind == COLLIE_KIND_ALLGATHERV) {
      n = c->recvcounts[0] * es;
      roff = c->rdispls[0] * es;
    } else if (c->kind == COLLIE_KIND_ALLTOALLV) {
      n = c->recvcounts[0] * es;
      soff = c->sdispls[0] * es;
      roff = c->rdispls[0] * es;
    }
    if (c->kind != COLLIE_KIND_BROADCAST)
      rc = collie__cuda_copy_async((char *)c->recvbuf + roff, (const char *)c->sendbuf + soff, n,
                                   x.stream, "cuda_ipc: a one-rank call's copy");
    if (rc == COLLIE_SUCCESS) rc = ipc_wait(&x, "cuda_ipc: finishing the call's work");
    collie__cuda_pop();
    return rc;
  }
  x.f = collie__net_shm_flat(c->net);
  int host = 0;
  if (!x.f) rc = collie__err(COLLIE_INTERNAL_ERROR, "cuda_ipc: the communicator has no flat area");
  if (rc == COLLIE_SUCCESS) rc = ipc_meet(&x, send, recv, direct_ok, &host);
  if (rc == COLLIE_SUCCESS) rc = host ? ipc_host_path(&x) : direct(&x);
  collie__cuda_pop();
  return rc;
}

/* ---- allreduce ---- */

collie_result_t
collie__ipc_share(struct collie__ipc_run *x, const void *mine, size_t len, const void **all)
{
  if (len > collie__shm_flat_buf_bytes(x->f))
    return collie__err(COLLIE_INTERNAL_ERROR, "cuda_ipc: %zu bytes to share exceed the flat area",
                       len);
  int b = collie__shm_flat_next_buf(x->f);
  memcpy(collie__shm_flat_piece(x->f, x->c->rank, b, len), mine, len);
  collie_result_t rc = ipc_sync(x);
  for (int q = 0; q < x->c->size; q++) all[q] = collie__shm_flat_piece(x->f, q, b, len);
  return rc;
}

collie_result_t
collie__ipc_finish(struct collie__ipc_run *x, collie_result_t rc, const char *what)
{
  if (rc == COLLIE_SUCCESS) rc = ipc_wait(x, what);
  if (rc == COLLIE_SUCCESS) rc = ipc_sync(x);
  return rc;
}

static collie_result_t
ipc_allreduce_direct(struct collie__ipc_run *x)
{
  struct collie__call *c = x->c;
  int p = c->size, r = c->rank, div = c->op == COLLIE_AVG ? p : 0;
  size_t es = c->esize, len = c->count * es;
  collie_result_t rc = COLLIE_SUCCESS;
  if (x->one_gpu) {
    if (r == 0)
      rc = collie__cuda_reduce(x->peer_recv, p, (const void *const *)x->peer_send, p, c->count,
                               c->dtype, c->op, div, x->stream);
    return collie__ipc_finish(x, rc, "cuda_ipc: allreduce");
  }
  /* The sources of block r: every rank's sendbuf at lo, in rank order. The
   * pointers are rewritten in place (peer_send is this call's own array). */
  size_t lo = ipc_cut(len, p, r), hi = ipc_cut(len, p, r + 1);
  void *dst = (char *)c->recvbuf + lo;
  for (int q = 0; q < p; q++) x->peer_send[q] = (char *)x->peer_send[q] + lo;
  if (hi > lo)
    rc = collie__cuda_reduce(&dst, 1, (const void *const *)x->peer_send, p, (hi - lo) / es,
                             c->dtype, c->op, div, x->stream);
  if (rc == COLLIE_SUCCESS) rc = ipc_wait(x, "cuda_ipc: allreduce's reduction");
  if (rc == COLLIE_SUCCESS) rc = ipc_sync(x);
  for (int q = 0; q < p && rc == COLLIE_SUCCESS; q++) {
    size_t qlo = ipc_cut(len, p, q), qhi = ipc_cut(len, p, q + 1);
    if (q != r && qhi > qlo)
      rc = collie__cuda_copy_async((char *)c->recvbuf + qlo, (char *)x->peer_recv[q] + qlo,
                                   qhi - qlo, x->stream, "cuda_ipc: allreduce's gather");
  }
  return collie__ipc_finish(x, rc, "cuda_ipc: allreduce's gather");
}

static collie_result_t
ipc_allreduce_run(struct collie__call *c)
{
  return collie__ipc_run(c, c->sendbuf, c->recvbuf, 1, ipc_allreduce_direct);
}

/* ---- reduce_scatter ---- */

static collie_result_t
ipc_reduce_scatter_direct(struct collie__ipc_run *x)
{
  struct collie__call *c = x->c;
  int p = c->size, div = c->op == COLLIE_AVG ? p : 0;
  size_t blk = c->count * c->esize;
  collie_result_t rc = COLLIE_SUCCESS;
  if (x->one_gpu && c->rank != 0) return collie__ipc_finish(x, rc, "cuda_ipc: reduce_scatter");
  /* Block q of every sendbuf, into rank q's recvbuf: every q on one GPU
   * (by rank 0), this rank's own on several. */
  const void **at = (const void **)x->tmp;
  int first = x->one_gpu ? 0 : c->rank, last = x->one_gpu ? p - 1 : c->rank;
  for (int q = first; q <= last && rc == COLLIE_SUCCESS; q++) {
    for (int s = 0; s < p; s++) at[s] = (const char *)x->peer_send[s] + (size_t)q * blk;
    void *dst = x->one_gpu ? x->peer_recv[q] : c->recvbuf;
    rc = collie__cuda_reduce(&dst, 1, at, p, c->count, c->dtype, c->op, div, x->stream);
  }
  return collie__ipc_finish(x, rc, "cuda_ipc: reduce_scatter");
}

static collie_result_t
ipc_reduce_scatter_run(struct collie__call *c)
{
  return collie__ipc_run(c, c->sendbuf, c->recvbuf, 1, ipc_reduce_scatter_direct);
}

/* ---- allgather ---- */

static collie_result_t
ipc_allgather_direct(struct collie__ipc_run *x)
{
  struct collie__call *c = x->c;
  int p = c->size;
  size_t b = c->count * c->esize;
  collie_result_t rc = COLLIE_SUCCESS;
  if (x->one_gpu) {
    if (c->rank == 0) { /* each sendbuf to its block of every recvbuf: one launch a sender */
      void **dsts = x->tmp;
      for (int s = 0; s < p && rc == COLLIE_SUCCESS; s++) {
        for (int q = 0; q < p; q++) dsts[q] = (char *)x->peer_recv[q] + (size_t)s * b;
        const void *src = x->peer_send[s];
        rc = collie__cuda_reduce(dsts, p, &src, 1, c->count, c->dtype, COLLIE_SUM, 0, x->stream);
      }
    }
    return collie__ipc_finish(x, rc, "cuda_ipc: allgather");
  }
  for (int q = 0; q < p && rc == COLLIE_SUCCESS; q++)
    rc = collie__cuda_copy_async((char *)c->recvbuf + (size_t)q * b,
                                 q == c->rank ? c->sendbuf : x->peer_send[q], b, x->stream,
                                 "cuda_ipc: allgather's copies");
  return collie__ipc_finish(x, rc, "cuda_ipc: allgather's copies");
}

static collie_result_t
ipc_allgather_run(struct collie__call *c)
{
  return collie__ipc_run(c, c->sendbuf, c->recvbuf, 1, ipc_allgather_direct);
}

/* ---- broadcast ---- */

static collie_result_t
ipc_broadcast_direct(struct collie__ipc_run *x)
{
  struct collie__call *c = x->c;
  int p = c->size;
  collie_result_t rc = COLLIE_SUCCESS;
  if (x->one_gpu) {
    if (c->rank == c->root) { /* the root's buffer into every other one */
      void **dsts = x->tmp;
      int nd = 0;
      for (int q = 0; q < p; q++)
        if (q != c->root) dsts[nd++] = x->peer_recv[q];
      const void *src = c->recvbuf;
      rc = collie__cuda_reduce(dsts, nd, &src, 1, c->count, c->dtype, COLLIE_SUM, 0, x->stream);
    }
    return collie__ipc_finish(x, rc, "cuda_ipc: broadcast");
  }
  if (c->rank != c->root)
    rc = collie__cuda_copy_async(c->recvbuf, x->peer_send[c->root], c->count * c->esize, x->stream,
                                 "cuda_ipc: broadcast's copy");
  return collie__ipc_finish(x, rc, "cuda_ipc: broadcast's copy");
}

static collie_result_t
ipc_broadcast_run(struct collie__call *c)
{
  /* The root shares what it sends, the others where it goes. */
  int root = c->rank == c->root;
  return collie__ipc_run(c, root ? c->recvbuf : NULL, root ? NULL : c->recvbuf, 1,
                         ipc_broadcast_direct);
}

/* ---- Costs: the only algorithms for device buffers, so any estimate
 * picks them; a small one in the model's terms keeps logs readable. ---- */

double
collie__ipc_cost(const struct collie__call *c, const struct collie__model *m)
{
  if (c->mem != COLLIE_MEM_CUDA || c->group) return -1;
  if (c->size > 1 && (!c->all_shm || !collie__net_shm_flat(c->net))) return -1;
  return 4 * m->alpha_us;
}

COLLIE_IPC_ALGO(ALLREDUCE, allreduce);
COLLIE_IPC_ALGO(REDUCE_SCATTER, reduce_scatter);
COLLIE_IPC_ALGO(ALLGATHER, allgather);
COLLIE_IPC_ALGO(BROADCAST, broadcast);
