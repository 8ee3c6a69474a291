/*
 * cuda_ipc_pull.c - reduce, gather, scatter, alltoall(v) and allgatherv on
 * the direct path
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
 *   allgatherv  one GPU: rank 0 copies each sendbuf into its block of every
 *             recvbuf, one launch a sender; several: each rank copies
 *             every block into its own recvbuf. The counts and
 *             displacements are the same on every rank (the API's rule).
 *   alltoallv   every rank first shares its four arrays through the flat
 *             area (4 p words; over 64 KiB of them, the host path), and
 *             every rank checks that each pair agrees on its count (the
 *             same error on every rank otherwise); then alltoall's plans,
 *             each block at its own displacements. Overlapping buffers on
 *             a rank: the host path, as alltoall's.
 * The copies of a plan go out in lists (collie__cuda_copy_list): one kernel
 * launch for up to 32 of them, where one driver call each cost ~4-6 us on
 * an H200 (an alltoall of 4 ranks on one GPU: 16 copies, 77-100 us).
 * Every plan ends with the frame's sync, so no rank returns while a peer
 * still reads or writes its buffers.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>

#include "coll/cuda_ipc.h"
#include "device/cuda.h"
#include "util/error.h"

/* ---- The plans' copies, batched: one launch for up to 32 of them ---- */

#define IPC_COPIES 32

struct ipc_copies {
  void *dst[IPC_COPIES];
  const void *src[IPC_COPIES];
  size_t bytes[IPC_COPIES];
  int n;
  void *stream;
  const char *what;
};

static collie_result_t
copies_flush(struct ipc_copies *l)
{
  collie_result_t rc = collie__cuda_copy_list(l->dst, l->src, l->bytes, l->n, l->stream, l->what);
  l->n = 0;
  return rc;
}

/* Queues one copy; the list goes out when full (and at copies_flush). */
static collie_result_t
copies_add(struct ipc_copies *l, void *dst, const void *src, size_t bytes)
{
  l->dst[l->n] = dst;
  l->src[l->n] = src;
  l->bytes[l->n] = bytes;
  return ++l->n == IPC_COPIES ? copies_flush(l) : COLLIE_SUCCESS;
}

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

/* reduce and gather: every rank shares its sendbuf, the root its recvbuf. */
static collie_result_t
ipc_run_into_root(struct collie__call *c, collie_result_t (*direct)(struct collie__ipc_run *))
{
  return collie__ipc_run(c, c->sendbuf, c->rank == c->root ? c->recvbuf : NULL, 1, direct);
}

static collie_result_t
ipc_reduce_run(struct collie__call *c)
{
  return ipc_run_into_root(c, ipc_reduce_direct);
}

/* ---- gather ---- */

static collie_result_t
ipc_gather_direct(struct collie__ipc_run *x)
{
  struct collie__call *c = x->c;
  size_t b = c->count * c->esize;
  collie_result_t rc = COLLIE_SUCCESS;
  struct ipc_copies l = {.stream = x->stream, .what = "cuda_ipc: gather's copies"};
  if (c->rank == c->root) { /* in place: the root's own block is already there */
    for (int q = 0; q < c->size && rc == COLLIE_SUCCESS; q++)
      rc = copies_add(&l, (char *)c->recvbuf + (size_t)q * b, x->peer_send[q], b);
    if (rc == COLLIE_SUCCESS) rc = copies_flush(&l);
  }
  return collie__ipc_finish(x, rc, "cuda_ipc: gather");
}

static collie_result_t
ipc_gather_run(struct collie__call *c)
{
  return ipc_run_into_root(c, ipc_gather_direct);
}

/* ---- scatter ---- */

static collie_result_t
ipc_scatter_direct(struct collie__ipc_run *x)
{
  struct collie__call *c = x->c;
  size_t b = c->count * c->esize;
  collie_result_t rc = COLLIE_SUCCESS;
  if (x->one_gpu) {
    struct ipc_copies l = {.stream = x->stream, .what = "cuda_ipc: scatter's copies"};
    if (c->rank == c->root) {
      for (int q = 0; q < c->size && rc == COLLIE_SUCCESS; q++)
        rc = copies_add(&l, x->peer_recv[q], (const char *)c->sendbuf + (size_t)q * b, b);
      if (rc == COLLIE_SUCCESS) rc = copies_flush(&l);
    }
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
  struct ipc_copies l = {.stream = x->stream, .what = "cuda_ipc: alltoall's copies"};
  int first = x->one_gpu ? 0 : c->rank, last = x->one_gpu ? p - 1 : c->rank;
  if (x->one_gpu && c->rank != 0) last = -1; /* rank 0 does every rank's */
  for (int r = first; r <= last; r++) {
    char *dst = x->one_gpu ? (char *)x->peer_recv[r] : (char *)c->recvbuf;
    for (int q = 0; q < p && rc == COLLIE_SUCCESS; q++)
      rc = copies_add(&l, dst + (size_t)q * b, (const char *)x->peer_send[q] + (size_t)r * b, b);
  }
  if (rc == COLLIE_SUCCESS) rc = copies_flush(&l);
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

/* ---- allgatherv ---- */

static collie_result_t
ipc_allgatherv_direct(struct collie__ipc_run *x)
{
  struct collie__call *c = x->c;
  int p = c->size;
  size_t es = c->esize;
  collie_result_t rc = COLLIE_SUCCESS;
  if (x->one_gpu) {
    if (c->rank == 0) /* sender s's block into every recvbuf: one launch */
      for (int s = 0; s < p && rc == COLLIE_SUCCESS; s++) {
        if (!c->recvcounts[s]) continue;
        void **dsts = x->tmp;
        for (int q = 0; q < p; q++) dsts[q] = (char *)x->peer_recv[q] + c->rdispls[s] * es;
        const void *src = x->peer_send[s];
        rc = collie__cuda_reduce(dsts, p, &src, 1, c->recvcounts[s], c->dtype, COLLIE_SUM, 0,
                                 x->stream);
      }
    return collie__ipc_finish(x, rc, "cuda_ipc: allgatherv");
  }
  struct ipc_copies l = {.stream = x->stream, .what = "cuda_ipc: allgatherv's copies"};
  for (int q = 0; q < p && rc == COLLIE_SUCCESS; q++)
    rc = copies_add(&l, (char *)c->recvbuf + c->rdispls[q] * es, x->peer_send[q],
                    c->recvcounts[q] * es);
  if (rc == COLLIE_SUCCESS) rc = copies_flush(&l);
  return collie__ipc_finish(x, rc, "cuda_ipc: allgatherv");
}

static collie_result_t
ipc_allgatherv_run(struct collie__call *c)
{
  return collie__ipc_run(c, c->sendbuf, c->recvbuf, 1, ipc_allgatherv_direct);
}

/* ---- alltoallv ---- */

/* Rank q's four arrays as shared: sendcounts, sdispls, recvcounts, rdispls. */
#define V_SCOUNT(v, p, i) ((v)[i])
#define V_SDISPL(v, p, i) ((v)[(size_t)(p) + (i)])
#define V_RCOUNT(v, p, i) ((v)[2 * (size_t)(p) + (i)])
#define V_RDISPL(v, p, i) ((v)[3 * (size_t)(p) + (i)])

static collie_result_t
ipc_alltoallv_direct(struct collie__ipc_run *x)
{
  struct collie__call *c = x->c;
  int p = c->size;
  size_t es = c->esize, words = 4 * (size_t)p;
  /* Not the call's scratch: the meeting's pointer arrays live there. */
  uint64_t *mine = calloc(words, sizeof(uint64_t));
  if (!mine)
    return collie__err(COLLIE_SYSTEM_ERROR, "cuda_ipc: alltoallv: out of memory for %zu counts",
                       words);
  for (int i = 0; i < p; i++) {
    V_SCOUNT(mine, p, i) = c->sendcounts[i];
    V_SDISPL(mine, p, i) = c->sdispls[i];
    V_RCOUNT(mine, p, i) = c->recvcounts[i];
    V_RDISPL(mine, p, i) = c->rdispls[i];
  }
  const uint64_t **v = (const uint64_t **)x->tmp;
  collie_result_t rc = collie__ipc_share(x, mine, words * sizeof(uint64_t), (const void **)v);
  free(mine);
  if (rc != COLLIE_SUCCESS) return rc;
  /* Every rank checks every pair, so all of them fail alike, before a copy. */
  for (int r = 0; r < p; r++)
    for (int q = 0; q < p; q++)
      if (V_RCOUNT(v[r], p, q) != V_SCOUNT(v[q], p, r))
        return collie__err(COLLIE_INVALID_USAGE,
                           "alltoallv: rank %d sends %" PRIu64 " elements to rank %d, which "
                           "expects %" PRIu64,
                           collie__call_peer(c, q), V_SCOUNT(v[q], p, r), collie__call_peer(c, r),
                           V_RCOUNT(v[r], p, q));
  struct ipc_copies l = {.stream = x->stream, .what = "cuda_ipc: alltoallv's copies"};
  int first = x->one_gpu ? 0 : c->rank, last = x->one_gpu ? p - 1 : c->rank;
  if (x->one_gpu && c->rank != 0) last = -1; /* rank 0 does every rank's */
  for (int r = first; r <= last; r++) {
    char *dst = x->one_gpu ? (char *)x->peer_recv[r] : (char *)c->recvbuf;
    for (int q = 0; q < p && rc == COLLIE_SUCCESS; q++)
      rc = copies_add(&l, dst + V_RDISPL(v[r], p, q) * es,
                      (const char *)x->peer_send[q] + V_SDISPL(v[q], p, r) * es,
                      V_RCOUNT(v[r], p, q) * es);
  }
  if (rc == COLLIE_SUCCESS) rc = copies_flush(&l);
  return collie__ipc_finish(x, rc, "cuda_ipc: alltoallv");
}

static collie_result_t
ipc_alltoallv_run(struct collie__call *c)
{
  struct collie__extent e;
  collie__call_extent(c, c->rank, c->size, &e);
  uintptr_t s = (uintptr_t)c->sendbuf, r = (uintptr_t)c->recvbuf;
  int apart = !e.send || !e.recv || s + e.send <= r || r + e.recv <= s;
  int fits = 4 * (size_t)c->size * sizeof(uint64_t) <= ((size_t)64 << 10);
  return collie__ipc_run(c, c->sendbuf, c->recvbuf, apart && fits, ipc_alltoallv_direct);
}

COLLIE_IPC_ALGO(REDUCE, reduce);
COLLIE_IPC_ALGO(GATHER, gather);
COLLIE_IPC_ALGO(SCATTER, scatter);
COLLIE_IPC_ALGO(ALLTOALL, alltoall);
COLLIE_IPC_ALGO(ALLGATHERV, allgatherv);
COLLIE_IPC_ALGO(ALLTOALLV, alltoallv);
