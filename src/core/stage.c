/*
 * stage.c - calls on CUDA device memory, staged through host memory (issue
 * 21's first path; docs/gpu.md): the API finds the call's buffers on a
 * device, copies what the call reads to host buffers, runs the host
 * collective on them, and copies what it wrote back to the device.
 *
 * Everything of the host path holds (algorithms, deadlines, errors naming
 * the peer, telemetry, the flight recorder), at the price of two copies
 * over PCIe and host-speed reductions. Ordering: the copies in are ordered
 * after the work already queued on the legacy default stream (cuMemcpy),
 * and the result is in device memory when the call returns.
 *
 * What a call reads and writes is its extent (coll/extent.c): the bytes of
 * each buffer the collective touches on this rank, a v-variant's up to its
 * farthest block. A receive buffer is copied in too, so that the bytes a
 * collective leaves alone (a non-root's part, the gaps between v-blocks)
 * come back unchanged. A send buffer inside the receive buffer's extent (an
 * in-place call) is staged as that same part of the receive buffer.
 *
 * Async collectives on device memory run to completion at issue and return
 * a handle that is already complete: collectives are issued in the same
 * order on every rank, so this never deadlocks. Sends and receives, async
 * or not, are queued as on the host and moved when they run (stage_p2p.c:
 * as device messages between ranks of one host, else staged); a group
 * stages each of its messages around its run (group.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "device/cuda.h"
#include "device/pinned.h"
#include "transport/shm.h"

/* Where a buffer of the call is: 1 device, 0 host, -1 not used here. */
static int
stage_where(const void *buf, size_t extent, int *device)
{
  if (!buf || !extent) return -1;
  return collie__cuda_is_device(buf, device);
}

int
collie__stage_on_device(const void *a, const void *b)
{
  int d;
  return !collie__host_mem_plain_both(a, b) && collie__cuda_live() &&
         (collie__cuda_is_device(a, &d) || collie__cuda_is_device(b, &d));
}

/* Every input is the same on every rank of a job that passes device
 * buffers everywhere (docs/gpu.md says what a mix of kinds does). */
int
collie__stage_device_algo(const collie_comm_t *comm, int kind, size_t bytes,
                          const collie_opts_t *opts)
{
  int id = opts && opts->algorithm ? opts->algorithm : comm->algos.forced[kind];
  int one_host = comm->size == 1 || (comm->all_shm && collie__net_shm_flat(comm->net));
  int ipc = 0, pipe = 0;
  switch (kind) {
  case COLLIE_KIND_ALLREDUCE:
  case COLLIE_KIND_BROADCAST:
    ipc = pipe = 1;
    break;
  case COLLIE_KIND_REDUCE_SCATTER:
  case COLLIE_KIND_ALLGATHER:
    ipc = pipe = 1;
    bytes *= (size_t)comm->size; /* the pipeline chunks the whole buffer */
    break;
  case COLLIE_KIND_REDUCE:
    ipc = pipe = 1;
    break;
  /* The direct path's small copies go out as one copy-list launch, which
   * beat staging at every size on an H200 (docs/gpu.md); before it, a small
   * gather and a 32-128 KiB alltoall were staged. */
  case COLLIE_KIND_GATHER:
  case COLLIE_KIND_ALLTOALL:
  case COLLIE_KIND_SCATTER:
  case COLLIE_KIND_ALLGATHERV:
  case COLLIE_KIND_ALLTOALLV:
    ipc = 1;
    break;
  default:
    return 0;
  }
  if (ipc && one_host && comm->params.CUDA_IPC && collie__cuda_has_kernels() &&
      (id == COLLIE_ALGO_AUTO || id == COLLIE_ALGO_CUDA_IPC))
    return COLLIE_ALGO_CUDA_IPC;
  if (pipe && comm->size > 1 && !comm->all_shm && comm->dev.chunk && bytes > comm->dev.chunk &&
      (id == COLLIE_ALGO_AUTO || id == COLLIE_ALGO_CUDA_PIPELINE))
    return COLLIE_ALGO_CUDA_PIPELINE;
  return 0;
}

/* A finished call's handle, for a caller that asked for one. */
static collie_result_t
stage_completed(const char *fn, collie_work_t **work)
{
  if (!work) return COLLIE_SUCCESS;
  *work = collie__work_completed();
  return *work ? COLLIE_SUCCESS
               : collie__err(COLLIE_SYSTEM_ERROR, "%s: out of memory for a work handle", fn);
}

collie_result_t
collie__stage_run(collie_comm_t *comm, struct collie__op *op, const collie_opts_t *opts,
                  collie_work_t **work, int *handled, void **capture_graph)
{
  struct collie__call *call = &op->call;
  const char *fn = collie__kind_name(call->kind);
  struct collie__extent e;
  collie__call_extent(call, comm->rank, comm->size, &e);
  int sdev = -1, rdev = -1;
  int s = stage_where(call->sendbuf, e.send, &sdev), r = stage_where(call->recvbuf, e.recv, &rdev);
  *handled = s == 1 || r == 1;
  if (!*handled) return COLLIE_SUCCESS; /* host memory: the caller goes on */
  if (s == 0 || r == 0)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: %s is CUDA device memory (device %d) but %s is host memory: the "
                       "buffers of one call must all be on the device or all on the host",
                       fn, s == 1 ? "sendbuf" : "recvbuf", s == 1 ? sdev : rdev,
                       s == 1 ? "recvbuf" : "sendbuf");
  void *graph = NULL;
  int capturing = collie__cuda_capture_graph(opts ? opts->cuda_stream : NULL, &graph);
  if (capturing > 0 && opts && opts->cuda_stream) {
    *handled = 2; /* the caller captures it (api.c, core/capture.c) */
    *capture_graph = graph;
    return COLLIE_SUCCESS;
  }
  if (capturing) return collie__cuda_refuse_capture(fn, opts ? opts->cuda_stream : NULL);
  /* From this rank's first call on device memory on, peers may send it
   * device messages (stage_p2p.c). */
  collie__stage_p2p_ready(comm, r == 1 ? call->recvbuf : call->sendbuf);
  if (collie__stage_device_algo(comm, call->kind, call->count * collie_dtype_size(call->dtype),
                                opts)) {
    /* A device algorithm (coll/cuda_ipc.c on one host, coll/cuda_pipeline.c
     * across hosts), picked by select.c for device memory; run at issue as
     * below. */
    call->mem = COLLIE_MEM_CUDA;
    call->reduce = NULL;
    call->stream = opts ? opts->cuda_stream : NULL;
    call->dev = &comm->dev;
    collie_result_t rc = collie__dispatch_prepare(comm, op, opts, 1);
    if (rc == COLLIE_SUCCESS) rc = collie__work_issue(comm, op, NULL, NULL);
    return rc == COLLIE_SUCCESS ? stage_completed(fn, work) : rc;
  }
  if (opts && opts->cuda_stream) {
    /* The copies below are ordered after the legacy default stream only. */
    const void *any = r == 1 ? call->recvbuf : call->sendbuf;
    collie_result_t rc = collie__cuda_push_ctx_of(any, "entering the buffer's context");
    if (rc != COLLIE_SUCCESS) return rc;
    int64_t deadline =
        collie__deadline_after_ms(opts->timeout_ms > 0 ? opts->timeout_ms : comm->timeout_ms);
    rc = collie__cuda_stream_sync(opts->cuda_stream, deadline, "waiting for opts->cuda_stream");
    collie__cuda_pop();
    if (rc != COLLIE_SUCCESS) return rc;
  }
  if (call->kind == COLLIE_KIND_P2P) {
    /* Moved when it runs, on whichever thread runs it (stage_p2p.c), so an
     * async pair that waits on each other progresses as on the host. */
    collie_result_t rc = collie__dispatch_prepare(comm, op, opts, !work);
    if (rc != COLLIE_SUCCESS) return rc;
    op->stage_dev = call->sendbuf ? (void *)call->sendbuf : call->recvbuf;
    op->stage_blocking = !work;
    return collie__work_issue(comm, op, NULL, work);
  }
  /* Host buffers for the device ones; an in-place send buffer is the
   * receive buffer's staging at the same offset. */
  const char *rb = call->recvbuf, *sb = call->sendbuf;
  uintptr_t ra = (uintptr_t)rb,
            sa = (uintptr_t)sb; /* two allocations' pointers: compare as numbers */
  int alias = r == 1 && s == 1 && sa >= ra && sa + e.send <= ra + e.recv;
  size_t soff = r == 1 ? (e.recv + 63) & ~(size_t)63 : 0; /* recvbuf's staging first */
  size_t need = soff + (s == 1 && !alias ? e.send : 0);
  char *host = NULL, *heap = NULL;
  collie_result_t rc = collie__stage_area(comm, r == 1 ? rb : sb, need, &host);
  if (rc != COLLIE_SUCCESS) return rc;
  if (!host && !(host = heap = malloc(need ? need : 1)))
    return collie__err(COLLIE_SYSTEM_ERROR, "%s: out of memory staging %zu bytes", fn, need);
  char *hr = r == 1 ? host : NULL, *hs = s == 1 && !alias ? host + soff : NULL;
  /* The receive buffer's old contents only where the collective may leave
   * some of them (or reads them: in place). */
  if (r == 1 && (alias || !e.recv_all))
    rc = collie__cuda_copy(hr, rb, e.recv, "copying recvbuf to the host");
  if (rc == COLLIE_SUCCESS && hs)
    rc = collie__cuda_copy(hs, sb, e.send, "copying sendbuf to the host");
  if (rc == COLLIE_SUCCESS) {
    if (r == 1) call->recvbuf = hr;
    if (s == 1) call->sendbuf = alias ? hr + (sb - rb) : hs;
    rc = collie__dispatch_prepare(comm, op, opts, 1);
    if (rc == COLLIE_SUCCESS) rc = collie__work_issue(comm, op, NULL, NULL);
    if (rc == COLLIE_SUCCESS && r == 1)
      rc = collie__cuda_copy((void *)rb, hr, e.recv, "copying the result to the device");
  }
  free(heap);
  return rc == COLLIE_SUCCESS ? stage_completed(fn, work) : rc;
}
