/*
 * cuda_ipc.h - the frame of the direct path on device buffers (issue 21;
 * coll/cuda_ipc.c has the essay): a call's meeting in the flat area, the
 * agreement on the direct or the host path, and the end of a plan. The
 * plans live beside it: allreduce, reduce_scatter, allgather and broadcast
 * in cuda_ipc.c, the rest in cuda_ipc_pull.c.
 */
#ifndef COLLIE_COLL_CUDA_IPC_H
#define COLLIE_COLL_CUDA_IPC_H

#include "coll/coll.h"

struct collie__shm_flat;

/* One call on the direct path, as its plan sees it. */
struct collie__ipc_run {
  struct collie__call *c;
  struct collie__shm_flat *f;
  void *stream;
  void **peer_send, **peer_recv; /* every rank's buffers in this process */
  void **tmp;                    /* p pointers more, for a plan's launches */
  int one_gpu;                   /* every rank on this rank's GPU */
};

/* Runs c: in the buffers' context; one rank alone copies its one block (a
 * broadcast has nothing to do); else every rank publishes send and recv
 * (NULL: nothing) and maps its peers', and all of them run `direct`, or
 * all the host path when one rank cannot share or map, or passed
 * direct_ok 0 (its buffers are of a shape the plan cannot run). */
collie_result_t collie__ipc_run(struct collie__call *c, const void *send, const void *recv,
                                int direct_ok, collie_result_t (*direct)(struct collie__ipc_run *));

/* Every rank publishes len bytes (the same len everywhere, at most the
 * flat area's buffer: 64 KiB at least) and syncs; all[q] then points to
 * rank q's bytes, readable until the plan's next sync (the finish's). */
collie_result_t collie__ipc_share(struct collie__ipc_run *x, const void *mine, size_t len,
                                  const void **all);

/* The end of a plan: this rank's queued work done (rc first: a failure
 * stays), then the last sync, so no rank returns while a peer still reads
 * or writes its buffers. */
collie_result_t collie__ipc_finish(struct collie__ipc_run *x, collie_result_t rc, const char *what);

/* The direct path's estimate: a small one in the model's terms (the only
 * algorithm for device buffers on one host); < 0 where it cannot run. */
double collie__ipc_cost(const struct collie__call *c, const struct collie__model *m);

#define COLLIE_IPC_ALGO(KIND, kind)                                                                \
  const struct collie__algo collie__algo_##kind##_cuda_ipc = {                                     \
      "cuda_ipc",          COLLIE_ALGO_CUDA_IPC, COLLIE_KIND_##KIND,                               \
      COLLIE_NEEDS_DEVICE, collie__ipc_cost,     ipc_##kind##_run}

#endif
