/*
 * cuda_pipeline.c - allreduce, broadcast, reduce, allgather and
 * reduce_scatter on CUDA device buffers
 * of ranks on several hosts (issue 21 item 4; docs/gpu.md): the device data
 * is staged through the communicator's pinned buffers (device/pinned.h) in
 * chunks, and each chunk is one host collective over the network, so that
 * the copy engines move chunk k+1 to the host and chunk k-1 back to the
 * device while the CPU and the network work on chunk k. Staging a call
 * whole (core/stage.c) costs its two PCIe copies on top of the network
 * time; pipelined, only the first chunk's copy in and the last one's copy
 * out are not hidden.
 *
 * A call: wait for its stream (the inputs are ready); copy chunk 0 in; then
 * for each chunk k: wait for its copy in, queue chunk k+1's (the GPU waits
 * for that buffer's last copy out), run the host collective on the pinned
 * buffer in place (the flat algorithm the model picks for a chunk's size;
 * every rank picks alike), queue its copy out. What each rank copies:
 * allreduce in and out; reduce in, and out at the root only; broadcast in
 * at the root, out elsewhere (a buffer the CPU writes without a copy in
 * first waits for its last copy out); allgather its own block in and every
 * rank's out; reduce_scatter every rank's block in and its own out. Those
 * two chunk each block (COLLIE_CUDA_CHUNK / p bytes of each), so that a
 * pinned buffer holds one chunk of every block, block after block, and the
 * chunk's collective runs in place on it. The chunks' collectives share the
 * call's sequence number, apart by their steps (step0), and run in order
 * on every rank, as one call's steps do.
 *
 * Chunks are COLLIE_CUDA_CHUNK bytes (4 MiB; whole elements), a call's
 * whole buffer counted (nccl-tests' size). A call of at most one chunk
 * takes the whole staging of stage.c instead.
 */
#include <string.h>

#include "coll/coll.h"
#include "device/cuda.h"
#include "device/pinned.h"
#include "util/error.h"

/* Steps apart between chunks' collectives (a slot's step has 16 bits; the
 * transports match a pair's messages in order, so wrapping is harmless). */
#define PIPE_STEPS 4096u

/* The host algorithm for one chunk: what the model picks for a host call of
 * this shape (COLLIE_ALGO and opts name the pipeline, so nothing is forced). */
static collie_result_t
pipe_pick(const struct collie__call *sub, const struct collie__algo **out)
{
  struct collie__algo_table none;
  struct collie__select_log log;
  memset(&none, 0, sizeof(none));
  memset(&log, 0, sizeof(log));
  log.logged[sub->kind] = ~0ull; /* the outer call's line is the one to log */
  return collie__algo_select(sub, COLLIE_ALGO_AUTO, &none, sub->models, &log, out);
}

/* Where chunk k of one side of a call lives: `blocks` blocks `stride`
 * bytes apart on the device (allgather's output and reduce_scatter's input
 * hold one block per rank; the others one), each chunk's share of them
 * packed block after block in a pinned buffer from block index `at`
 * (allgather's input: this rank's place among the output's blocks). */
struct pipe_side {
  int blocks;
  size_t stride, at;
};

/* Queues chunk bytes [off, off+len) of each block of side s between the
 * device at dev and pinned buffer b (in: to the host). */
static collie_result_t
pipe_copy(struct collie__pinned *pin, int b, int in, const struct pipe_side *s, char *dev,
          size_t off, size_t len)
{
  collie_result_t rc = COLLIE_SUCCESS;
  for (int q = 0; q < s->blocks && rc == COLLIE_SUCCESS; q++) {
    char *d = dev + (size_t)q * s->stride + off;
    size_t at = (s->at + (size_t)q) * len;
    rc = in ? collie__pinned_in(pin, b, at, d, len) : collie__pinned_out(pin, b, at, d, len);
  }
  return rc;
}

static collie_result_t
pipe_run(struct collie__call *c)
{
  size_t es = c->esize, bytes = c->count * es; /* one block */
  int p = c->size, rs = c->kind == COLLIE_KIND_REDUCE_SCATTER,
      ag = c->kind == COLLIE_KIND_ALLGATHER;
  /* A chunk of a block: the pinned buffers hold one chunk of every block. */
  size_t chunk = c->dev->chunk / (rs || ag ? (size_t)p : 1) / es * es;
  if (!chunk) chunk = es;
  int root = c->rank == c->root;
  int copy_in = c->kind != COLLIE_KIND_BROADCAST || root;
  int copy_out = c->kind != COLLIE_KIND_REDUCE || root;
  if (c->kind == COLLIE_KIND_BROADCAST) copy_out = !root;
  struct pipe_side in = {rs ? p : 1, bytes, ag ? (size_t)c->rank : 0},
                   out = {ag ? p : 1, bytes, rs ? (size_t)c->rank : 0};
  /* allgather's input is this rank's block only; broadcast's one buffer is
   * both sides. */
  char *src = (char *)(c->kind == COLLIE_KIND_BROADCAST ? c->recvbuf : c->sendbuf);
  char *dst = c->recvbuf;
  collie_result_t rc = collie__cuda_push_ctx_of(dst ? (const void *)dst : src,
                                                "cuda_pipeline: entering the context");
  if (rc != COLLIE_SUCCESS) return rc;
  rc = collie__cuda_stream_sync(c->stream, c->deadline_ns,
                                "cuda_pipeline: waiting for the call's stream");
  if (rc == COLLIE_SUCCESS) rc = collie__pinned_get(&c->dev->pinned, chunk * (rs || ag ? p : 1));
  struct collie__pinned *pin = c->dev->pinned;
  size_t n = bytes ? (bytes + chunk - 1) / chunk : 0;
  const struct collie__algo *a = NULL;
  if (rc == COLLIE_SUCCESS && copy_in && n)
    rc = pipe_copy(pin, 0, 1, &in, src, 0, bytes < chunk ? bytes : chunk);
  for (size_t k = 0; k < n && rc == COLLIE_SUCCESS; k++) {
    size_t off = k * chunk, len = bytes - off < chunk ? bytes - off : chunk;
    int b = (int)(k & 1);
    if (copy_in) {
      rc = collie__pinned_wait_in(pin, c->deadline_ns);
      if (rc == COLLIE_SUCCESS && k + 1 < n) {
        size_t next = bytes - off - len < chunk ? bytes - off - len : chunk;
        rc = pipe_copy(pin, b ^ 1, 1, &in, src, off + len, next);
      }
    } else {
      rc = collie__pinned_wait_buf(pin, b,
                                   c->deadline_ns); /* the CPU writes it: its copy out is done */
    }
    if (rc != COLLIE_SUCCESS) break;
    char *buf = collie__pinned_buf(pin, b);
    struct collie__call sub = *c;
    sub.mem = COLLIE_MEM_HOST;
    sub.reduce = collie__reduce_kernel(c->dtype, c->op);
    sub.count = len / es;
    /* In place on the pinned buffer, as each collective spells it. */
    sub.sendbuf = sub.recvbuf = buf;
    if (ag) sub.sendbuf = buf + in.at * len;
    if (rs) sub.recvbuf = buf + out.at * len;
    sub.step0 = c->step0 + (uint32_t)k * PIPE_STEPS;
    /* Every chunk but a short last one has one shape: picked once. */
    if (k == 0 || len != chunk) rc = pipe_pick(&sub, &a);
    if (rc != COLLIE_SUCCESS) break;
    sub.algo = a->id;
    rc = a->run(&sub);
    if (rc == COLLIE_SUCCESS && copy_out) rc = pipe_copy(pin, b, 0, &out, dst, off, len);
  }
  if (rc == COLLIE_SUCCESS && copy_out) rc = collie__pinned_wait_out(pin, c->deadline_ns);
  collie__cuda_pop();
  return rc;
}

/* The pipeline is for device buffers the direct path cannot take (ranks
 * on several hosts), larger than one chunk; priced as the host collective
 * of the whole call, which its chunks add up to. */
static double
pipe_cost(const struct collie__call *c, const struct collie__model *m)
{
  (void)m;
  if (c->mem != COLLIE_MEM_CUDA || c->group || !c->dev || !c->dev->chunk) return -1;
  if (c->size > 1 && c->all_shm) return -1; /* one host: cuda_ipc's */
  return collie__call_bytes(c) > c->dev->chunk ? 1 : -1;
}

#define PIPE_ALGO(KIND, kind)                                                                      \
  const struct collie__algo collie__algo_##kind##_cuda_pipeline = {                                \
      "cuda_pipeline",    COLLIE_ALGO_CUDA_PIPELINE,                                               \
      COLLIE_KIND_##KIND, COLLIE_NEEDS_DEVICE,                                                     \
      pipe_cost,          pipe_run}
PIPE_ALGO(ALLREDUCE, allreduce);
PIPE_ALGO(BROADCAST, broadcast);
PIPE_ALGO(REDUCE, reduce);
PIPE_ALGO(ALLGATHER, allgather);
PIPE_ALGO(REDUCE_SCATTER, reduce_scatter);
