/*
 * capture.c - calls on device memory captured into a CUDA graph (issue 35;
 * docs/gpu.md, "CUDA graphs"): a call issued while its stream captures
 * becomes three stream-ordered steps of the graph, and each replay of the
 * graph runs the collective again on the buffers' contents at that time.
 *
 *   1. copies of what the call reads, device to a page-locked host block;
 *   2. a host node that runs the host collective on that block;
 *   3. a copy of what it wrote back to the device.
 *
 * Nothing else is queued, and nothing at capture waits for the GPU: the
 * block is page-locked once, at capture, with the thread's capture mode
 * relaxed as a library may (it is not part of the graph), and is owned by
 * the graph (a user object), so it lives as long as the graph does.
 *
 * The host node runs on a thread of the driver's, which must make no CUDA
 * call: collie marks it (collie__cuda_thread_off) so that the collective
 * sees host memory and never asks the driver (core/capture_replay.c).
 * Replays run on a communicator of their own, split from the caller's at
 * its first capture by api.c (every rank captures the same calls, so every
 * rank splits there): a
 * replay's collectives may then run while the caller issues others on its
 * communicator, in any interleaving, and still match across ranks, as long
 * as every rank replays its graphs in the same order. A replay that fails
 * (a peer that never replays: its deadline) cannot return an error to
 * anyone; it is logged, dumped to the flight recorder, and poisons the
 * caller's communicator, whose next call fails naming it.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/capture.h"
#include "core/core.h"
#include "device/cuda.h"
#include "device/pinned.h"

static int
capture_kind_ok(int kind)
{
  switch (kind) {
  case COLLIE_KIND_ALLREDUCE:
  case COLLIE_KIND_ALLGATHER:
  case COLLIE_KIND_REDUCE_SCATTER:
  case COLLIE_KIND_BROADCAST:
  case COLLIE_KIND_P2P:
    return 1;
  default:
    return 0;
  }
}

static void
capture_free(struct collie__capture *c)
{
  collie__pinned_area_free(c->area);
  free(c);
}

void
collie__capture_free_all(collie_comm_t *comm, int all)
{
  struct collie__capture **pp = &comm->captures;
  while (*pp) {
    struct collie__capture *c = *pp;
    if (all || atomic_load_explicit(&c->dead, memory_order_acquire)) {
      *pp = c->next;
      capture_free(c);
    } else {
      pp = &c->next;
    }
  }
}

/* The graph's destructor (a driver thread, no CUDA call allowed): only marks. */
static void
capture_dead(void *arg)
{
  struct collie__capture *c = arg;
  atomic_store_explicit(&c->dead, 1, memory_order_release);
}

collie_result_t
collie__capture_call(collie_comm_t *comm, struct collie__op *op, const collie_opts_t *opts,
                     void *graph, collie_work_t **work)
{
  struct collie__call *call = &op->call;
  const char *fn = collie__kind_name(call->kind);
  if (!capture_kind_ok(call->kind))
    return collie__err(COLLIE_UNSUPPORTED,
                       "%s on CUDA device memory cannot be captured into a CUDA graph yet "
                       "(allreduce, allgather, reduce_scatter, broadcast, send and recv can); "
                       "issue it outside the capture (docs/gpu.md, \"CUDA graphs\")",
                       fn);
  void *stream = opts->cuda_stream;
  collie__capture_free_all(comm, 0);
  struct collie__capture *c = calloc(1, sizeof(*c));
  if (!c) return collie__err(COLLIE_SYSTEM_ERROR, "%s: out of memory capturing a call", fn);
  c->graph = comm->graph_comm;
  c->owner = comm;
  c->call = *call;
  c->opts = *opts;
  if (opts->label) snprintf(c->label, sizeof(c->label), "%s", opts->label);
  if (opts->phase) snprintf(c->phase, sizeof(c->phase), "%s", opts->phase);

  /* The host block: the receive buffer's part first, then the send
   * buffer's, unless the send buffer lies inside the receive buffer (in
   * place: its part of the receive buffer's copy). */
  struct collie__extent e;
  collie__call_extent(call, comm->rank, comm->size, &e);
  const char *rb = call->recvbuf, *sb = call->sendbuf;
  int r = rb && e.recv, s = sb && e.send;
  uintptr_t ra = (uintptr_t)rb, sa = (uintptr_t)sb;
  int alias = r && s && sa >= ra && sa + e.send <= ra + e.recv;
  size_t soff = r ? (e.recv + 63) & ~(size_t)63 : 0;
  size_t need = soff + (s && !alias ? e.send : 0);
  const void *any = r ? (const void *)rb : (const void *)sb;
  int mode = collie__cuda_capture_relax(); /* page-locking is not part of the graph */
  collie_result_t rc = collie__cuda_push_ctx_of(any, "entering the buffer's context");
  char *host = NULL;
  if (rc == COLLIE_SUCCESS) {
    void *buf = NULL;
    rc = collie__pinned_area_get(&c->area, need ? need : 1, need ? need : 1, &buf);
    host = buf;
    if (rc != COLLIE_SUCCESS) collie__cuda_pop();
  }
  collie__cuda_capture_restore(mode);
  if (rc != COLLIE_SUCCESS) {
    capture_free(c);
    return rc;
  }
  c->hrecv = r ? host : NULL;
  c->hsend = s ? (alias ? host + (sb - rb) : host + soff) : NULL;
  if (call->kind == COLLIE_KIND_BROADCAST) c->hsend = NULL; /* one buffer: hrecv */

  /* The graph's steps, on the capturing stream. */
  if (r && (alias || !e.recv_all))
    rc = collie__cuda_copy_async(c->hrecv, rb, e.recv, stream, "capturing the copy of recvbuf");
  if (rc == COLLIE_SUCCESS && s && !alias)
    rc = collie__cuda_copy_async(c->hsend, sb, e.send, stream, "capturing the copy of sendbuf");
  if (rc == COLLIE_SUCCESS)
    rc = collie__cuda_host_node(stream, collie__capture_replay, c,
                                "capturing the collective's host node");
  if (rc == COLLIE_SUCCESS && r)
    rc = collie__cuda_copy_async((void *)rb, c->hrecv, e.recv, stream,
                                 "capturing the copy of the result");
  if (rc == COLLIE_SUCCESS)
    rc = collie__cuda_graph_own(graph, c, capture_dead, "giving the graph the call's host block");
  collie__cuda_pop();
  if (rc != COLLIE_SUCCESS) {
    /* The capture is broken already (the driver says why): the graph never
     * runs, and may not have taken c: it is kept until the communicator goes. */
    c->next = comm->captures;
    comm->captures = c;
    return rc;
  }
  c->next = comm->captures;
  comm->captures = c;
  if (work) {
    *work = collie__work_completed();
    if (!*work) return collie__err(COLLIE_SYSTEM_ERROR, "%s: out of memory for a work handle", fn);
  }
  return COLLIE_SUCCESS;
}
