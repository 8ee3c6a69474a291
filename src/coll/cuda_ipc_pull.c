/*
 * cuda_ipc_pull.c - reduce, gather, scatter and alltoall on the direct path
 * (device buffers of ranks on one host, read in place through CUDA IPC;
 * the frame and its essay are coll/cuda_ipc.c's).
 *
 * Each output is pulled from the peers' buffers by the rank that owns it;
 * on one GPU a single rank pulls every output, because a GPU switches
 * between processes' contexts slowly (bench/cuda_copy_probe.c measured
 * ~150 us a switch on an H200, for a kernel or a small copy alike, where
 * one process's copy takes ~10 us).
 *
 *   reduce    the root reduces every sendbuf into its recvbuf (one GPU or
 *             several: the output is the root's alone). In place at the
 *             root works: the kernel reads and writes element by element.
 *   gather    the root copies every sendbuf into its block of recvbuf.
 *   scatter   one GPU: the root copies block q of sendbuf into rank q's
 *             recvbuf, for every q; several: each rank copies its block.
 *   alltoall  one GPU: rank 0 copies block r of every sendbuf q into block
 *             q of rank r's recvbuf, p*p copies; several: rank r its p.
 *             A rank whose sendbuf and recvbuf overlap sends every rank
 *             down the host path (the copies would read what they wrote).
 * Every plan ends with the frame's sync, so no rank returns while a peer
 * still reads or writes its buffers.
 */
#include <stdint.h>

#include "coll/cuda_ipc.h"
#include "device/cuda.h"

/* ---- reduce ---- */

static collie_result_t
ipc_reduce_direct(struct collie__ipc_run *x)
{
  struct collie__call *c = x->c;
  int p = c->size, div = c->op == COLLIE_AVG ? p : 0;
  collie_result_t rc = COLLIE_SUCCESS;
  if (c->rank == c->root && c->count) {
    void *dst = c->recvbuf;
    rc = collie__cuda_reduce(&dst, 1, (const void *const *)x->peer_send, p, c->count, c->dtype,
                             c->op, div, x->stream);
  }
  return collie__ipc_finish(x, rc, "cuda_ipc: reduce");
}

static collie_result_t
ipc_reduce_run(struct collie__call *c)
{
  return collie__ipc_run(c, c->sendbuf, c->rank == c->root ? c->recvbuf : NULL, 1,
                         ipc_reduce_direct);
}

/* ---- gather ---- */

static collie_result_t
ipc_gather_direct(struct collie__ipc_run *x)
{
  struct collie__call *c = x->c;
  size_t b = c->count * c->esize;
  collie_result_t rc = COLLIE_SUCCESS;
  if (c->rank == c->root) /* in place: the root's own block is already there */
    for (int q = 0; q < c->size && rc == COLLIE_SUCCESS; q++)
      rc = collie__cuda_copy_async((char *)c->recvbuf + (size_t)q * b, x->peer_send[q], b,
                                   x->stream, "cuda_ipc: gather's copies");
  return collie__ipc_finish(x, rc, "cuda_ipc: gather");
}

static collie_result_t
ipc_gather_run(struct collie__call *c)
{
  return collie__ipc_run(c, c->sendbuf, c->rank == c->root ? c->recvbuf : NULL, 1,
                         ipc_gather_direct);
}

/* ---- scatter ---- */

static collie_result_t
ipc_scatter_direct(struct collie__ipc_run *x)
{
  struct collie__call *c = x->c;
  size_t b = c->count * c->esize;
  collie_result_t rc = COLLIE_SUCCESS;
  if (x->one_gpu) {
    if (c->rank == c->root)
      for (int q = 0; q < c->size && rc == COLLIE_SUCCESS; q++)
        rc = collie__cuda_copy_async(x->peer_recv[q], (const char *)c->sendbuf + (size_t)q * b, b,
                                     x->stream, "cuda_ipc: scatter's copies");
  } else {
    rc = collie__cuda_copy_async(c->recvbuf,
                                 (const char *)x->peer_send[c->root] + (size_t)c->rank * b, b,
                                 x->stream, "cuda_ipc: scatter's copy");
  }
  return collie__ipc_finish(x, rc, "cuda_ipc: scatter");
}

static collie_result_t
ipc_scatter_run(struct collie__call *c)
{
  return collie__ipc_run(c, c->rank == c->root ? c->sendbuf : NULL, c->recvbuf, 1,
                         ipc_scatter_direct);
}

/* ---- alltoall ---- */

static collie_result_t
ipc_alltoall_direct(struct collie__ipc_run *x)
{
  struct collie__call *c = x->c;
  int p = c->size;
  size_t b = c->count * c->esize;
  collie_result_t rc = COLLIE_SUCCESS;
  int first = x->one_gpu ? 0 : c->rank, last = x->one_gpu ? p - 1 : c->rank;
  if (x->one_gpu && c->rank != 0) last = -1; /* rank 0 does every rank's */
  for (int r = first; r <= last; r++) {
    char *dst = x->one_gpu ? (char *)x->peer_recv[r] : (char *)c->recvbuf;
    for (int q = 0; q < p && rc == COLLIE_SUCCESS; q++)
      rc = collie__cuda_copy_async(dst + (size_t)q * b,
                                   (const char *)x->peer_send[q] + (size_t)r * b, b, x->stream,
                                   "cuda_ipc: alltoall's copies");
  }
  return collie__ipc_finish(x, rc, "cuda_ipc: alltoall");
}

static collie_result_t
ipc_alltoall_run(struct collie__call *c)
{
  size_t len = (size_t)c->size * c->count * c->esize;
  uintptr_t s = (uintptr_t)c->sendbuf, r = (uintptr_t)c->recvbuf;
  int apart = s + len <= r || r + len <= s;
  return collie__ipc_run(c, c->sendbuf, c->recvbuf, apart, ipc_alltoall_direct);
}

COLLIE_IPC_ALGO(REDUCE, reduce);
COLLIE_IPC_ALGO(GATHER, gather);
COLLIE_IPC_ALGO(SCATTER, scatter);
COLLIE_IPC_ALGO(ALLTOALL, alltoall);
