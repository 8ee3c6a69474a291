/*
 * extent.c - the bytes of each buffer a call touches on one rank: what the
 * device paths stage through host memory (core/stage.c, coll/cuda_ipc.c),
 * where a wrong extent would corrupt or overrun device memory.
 */
#include "coll/coll.h"

void
collie__call_extent(const struct collie__call *call, int rank, int size, struct collie__extent *e)
{
  size_t es = collie_dtype_size(call->dtype), n = call->count, p = (size_t)size;
  *e = (struct collie__extent){0};
  int root = call->root == rank;
  switch (call->kind) {
  case COLLIE_KIND_ALLREDUCE:
    e->send = e->recv = n * es;
    break;
  case COLLIE_KIND_BROADCAST:
    e->send = e->recv = n * es; /* one buffer: sendbuf == recvbuf */
    break;
  case COLLIE_KIND_ALLGATHER:
    e->send = n * es;
    e->recv = p * n * es;
    break;
  case COLLIE_KIND_REDUCE_SCATTER:
    e->send = p * n * es;
    e->recv = n * es;
    break;
  case COLLIE_KIND_REDUCE:
    e->send = n * es;
    e->recv = root ? n * es : 0;
    break;
  case COLLIE_KIND_ALLTOALL:
    e->send = e->recv = p * n * es;
    break;
  case COLLIE_KIND_GATHER:
    e->send = n * es;
    e->recv = root ? p * n * es : 0;
    break;
  case COLLIE_KIND_SCATTER:
    e->send = root ? p * n * es : 0;
    e->recv = n * es;
    break;
  case COLLIE_KIND_ALLGATHERV:
  case COLLIE_KIND_ALLTOALLV:
    if (call->kind == COLLIE_KIND_ALLGATHERV) e->send = n * es;
    for (int q = 0; q < size; q++) {
      if (call->sendcounts && call->sendcounts[q]) {
        size_t end = (call->sdispls[q] + call->sendcounts[q]) * es;
        if (end > e->send) e->send = end;
      }
      if (call->recvcounts && call->recvcounts[q]) {
        size_t end = (call->rdispls[q] + call->recvcounts[q]) * es;
        if (end > e->recv) e->recv = end;
      }
    }
    break;
  case COLLIE_KIND_P2P:
    if (call->sendbuf)
      e->send = n * es;
    else
      e->recv = n * es;
    break;
  default: /* barrier: no buffers */
    break;
  }
  /* Broadcast's one buffer is the root's input; v-variants leave gaps; a
   * receive may take a shorter message. */
  switch (call->kind) {
  case COLLIE_KIND_ALLREDUCE:
  case COLLIE_KIND_ALLGATHER:
  case COLLIE_KIND_REDUCE_SCATTER:
  case COLLIE_KIND_REDUCE:
  case COLLIE_KIND_ALLTOALL:
  case COLLIE_KIND_GATHER:
  case COLLIE_KIND_SCATTER:
    e->recv_all = 1;
    break;
  default:
    break;
  }
}
