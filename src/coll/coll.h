/*
 * coll.h - the algorithm interface. An algorithm sees one struct collie__call
 * (buffers, counts, dtype, op, root/peer, rank/size, the comm's net, a reduce
 * kernel, scratch space and a deadline) and moves bytes with
 * collie__net_isend/irecv/wait only: it never sees a transport, so every
 * algorithm runs on shm and tcp alike (the shm-only family in shm_flat.c is
 * the one exception, and says so in its `needs`). Each family lives in its
 * own file, opening with an essay on what moves where and what it costs.
 *
 * Selection (select.c) asks every algorithm of the call's collective for its
 * estimated time under the alpha-beta-gamma model of the transport class and
 * runs the cheapest, unless the call's opts or COLLIE_ALGO name one.
 */
#ifndef COLLIE_COLL_H
#define COLLIE_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "collie.h"
#include "reduce/reduce.h"
#include "transport/transport.h"
#include "util/mem.h"

/* Grow-only staging memory owned by a communicator: allocated on first use
 * and reused, so the hot path does not allocate. */
struct collie__scratch {
  void *buf;
  size_t cap;
};
/* Returns scratch memory of at least n bytes (64-byte aligned), or NULL with
 * the error set (SYSTEM_ERROR) when it cannot grow. One region per call: an
 * algorithm that needs several carves them out of one request. */
void *collie__scratch_get(struct collie__scratch *s, size_t n);
void collie__scratch_free(struct collie__scratch *s);

/* One validated operation, as an algorithm sees it.
 *
 * count means, per collective (as the public API): allreduce, broadcast,
 * reduce: elements of the buffer; allgather: sendcount (recvbuf holds
 * size*count); reduce_scatter: recvcount (sendbuf holds size*count);
 * alltoall, gather, scatter: elements per rank; allgatherv: sendcount, with
 * recvcounts/rdispls; alltoallv: unused, with the four arrays. In place is
 * expressed by the buffers, as in the API (allgather: sendbuf == recvbuf +
 * rank*count; reduce_scatter: recvbuf == sendbuf + rank*count; the others:
 * sendbuf == recvbuf). */
struct collie__models;
struct collie__ipc_cache;   /* device/ipc_cache.h */
struct collie__pinned;      /* device/pinned.h */
struct collie__pinned_area; /* device/pinned.h */

/* A communicator's device resources (coll/cuda_*.c), each made by the first
 * call that needs it and freed with the communicator. */
struct collie__cuda_state {
  struct collie__ipc_cache *ipc;     /* the IPC handles of the direct path */
  struct collie__pinned *pinned;     /* the pipeline's pinned staging */
  size_t chunk;                      /* the pipeline's chunk (COLLIE_CUDA_CHUNK; 0: off) */
  struct collie__pinned_area *stage; /* whole calls' pinned staging (core/stage.c) */
  size_t stage_max;                  /* its cap (COLLIE_CUDA_STAGE_MAX; 0: never) */
  /* Send and receive on device memory (core/stage_p2p.c): the IPC handles
   * of sent buffers (a cache of its own: a record goes to one peer, not to
   * all), the context a receive into host memory maps a peer's buffer in,
   * and the ops installed on the net (p2p_on once they are; p2p_off once
   * installing them failed: not tried again). */
  struct collie__ipc_cache *ipc_p2p;
  void *p2p_ctx;
  struct collie__net_dev_ops p2p_ops;
  int p2p_on, p2p_off;
};

struct collie__call {
  int kind;     /* COLLIE_KIND_* */
  int algo;     /* COLLIE_ALGO_* that runs it (set by dispatch) */
  uint32_t seq; /* the comm's sequence number of this operation */
  const void *sendbuf;
  void *recvbuf; /* broadcast: the buffer */
  size_t count;
  const size_t *sendcounts, *sdispls; /* alltoallv */
  const size_t *recvcounts, *rdispls; /* alltoallv, allgatherv */
  /* sparse_allreduce (root holds its COLLIE_SPARSE_* mode, count its nnz):
   * the pairs' indices, the result's, where the result's entry count goes,
   * the vector's length. */
  const int64_t *sidx;
  int64_t *ridx;
  size_t *rnnz;
  size_t dim;
  collie_dtype_t dtype;
  collie_op_t op;
  /* allreduce: COLLIE_WIRE_FLOAT16 or _BFLOAT16 when the call is sent
   * compressed (api.c decided it applies: float32 SUM/AVG, host memory);
   * else NATIVE (or 0 in a call made inside the library). */
  int wire;
  size_t esize; /* bytes per element */
  int root;     /* rooted collectives; p2p: the peer */
  int tag;      /* p2p */
  int rank, size;
  int cls;     /* the communicator's cost-model class (collie__net_class) */
  int all_shm; /* every rank of the communicator is on this host (shm-only algorithms apply) */
  const struct collie__topo *topo; /* the communicator's hosts (topo.h) */
  struct collie__net *net;
  collie__mem_kind_t mem; /* where its buffers live (util/mem.h), decided at the API */
  /* COLLIE_MEM_CUDA: the stream the call is ordered after (opts), and the
   * communicator's device resources. */
  void *stream;
  struct collie__cuda_state *dev;
  collie__reduce_fn reduce; /* kernel for (mem, dtype, op) when the call reduces */
  /* The communicator's two scratch regions: an algorithm uses scratch[0]; a
   * hierarchical one keeps it across its phases and gives them scratch + 1. */
  struct collie__scratch *scratch;
  int64_t deadline_ns;
  uint32_t p2p_seq; /* p2p: the pair's message counter, for the flight recorder */
  /* A receive (root: the source or COLLIE_ANY_SOURCE; tag: COLLIE_ANY_TAG
   * takes any): where the sender's rank goes (collie_recv_any), and the
   * status (collie_recv_status, the probes), once done. */
  int *source;
  collie_status_t *p2p_status;
  int p2p_sync;  /* a send that completes once matched (collie_ssend) */
  int p2p_probe; /* a probe, not a receive: 1 waits for a message, 2 looks once */
  int *p2p_flag; /* a probe: whether it found one */
  /* p2p on device memory (core/stage_p2p.c): a send that goes as a record
   * the receiver copies the bytes with (transport.h: device messages), its
   * device memory in p2p_dev; a receive's device memory, and whether the
   * bytes landed there (set by the receive) rather than in recvbuf, host
   * memory. */
  const void *p2p_rec;
  size_t p2p_reclen;
  void *p2p_dev;
  int p2p_on_dev;
  /* A phase of a hierarchical algorithm (hier.c) runs a flat algorithm on
   * part of the communicator: rank and size are then the group's, group[i]
   * is the communicator rank of the group's rank i, and step0 keeps the
   * phases' slots apart. NULL and 0 for a call on the whole communicator. */
  const int *group;
  uint32_t step0;
  /* The communicator's models: a hierarchical algorithm costs and picks its
   * phases' algorithms with them (NULL where nothing is hierarchical). */
  const struct collie__models *models;
};

/* The slot of step `step` of this call: kind, sequence, step, and the
 * algorithm in the low byte, so ranks that picked different algorithms for
 * the same call fail with a mismatch instead of misreading each other. */
static inline uint64_t
collie__call_slot(const struct collie__call *c, uint32_t step)
{
  return collie__slot(c->kind, c->seq, c->step0 + step) | (uint64_t)(c->algo & 0xff);
}

/* The communicator rank of the call's rank r (the group's, in a phase). */
static inline int
collie__call_peer(const struct collie__call *c, int r)
{
  return c->group ? c->group[r] : r;
}

/* collie__net_* by the call's ranks: every algorithm sends through these, so
 * that it runs unchanged on a group of the communicator. */
static inline collie_result_t
collie__call_isend(struct collie__call *c, int to, const void *buf, size_t len, uint64_t slot,
                   struct collie__req *r)
{
  return collie__net_isend(c->net, collie__call_peer(c, to), buf, len, slot, r);
}

static inline collie_result_t
collie__call_isend_direct(struct collie__call *c, int to, const void *buf, size_t len,
                          uint64_t slot, struct collie__req *r)
{
  return collie__net_isend_direct(c->net, collie__call_peer(c, to), buf, len, slot, r);
}

static inline collie_result_t
collie__call_irecv(struct collie__call *c, int from, void *buf, size_t len, uint64_t slot,
                   struct collie__req *r)
{
  return collie__net_irecv(c->net, collie__call_peer(c, from), buf, len, slot, r);
}

/* Rooted calls renumber ranks from the root: this rank's number (rank - root
 * mod size) and the rank of number v (v + root mod size), for 0 <= v < size.
 * By a conditional subtract: a `%` by the rank count costs 25-90 cycles, and
 * a tree broadcast had six of them per call (a tenth of a small one). */
static inline int
collie__root_rel(const struct collie__call *c)
{
  int v = c->rank - c->root;
  return v < 0 ? v + c->size : v;
}

static inline int
collie__root_abs(const struct collie__call *c, int v)
{
  int a = v + c->root;
  return a >= c->size ? a - c->size : a;
}

/* Copies between the call's buffers (the caller's or scratch) go through
 * these, by the call's memory kind: collie__copy for whole blocks the
 * caller reads later, memcpy-like for small or cache-resident pieces. On
 * host memory they are exactly those. */
static inline void
collie__call_copy(const struct collie__call *c, void *dst, const void *src, size_t n)
{
  collie__mem_copy(c->mem, dst, src, n);
}

static inline void
collie__call_copy_small(const struct collie__call *c, void *dst, const void *src, size_t n)
{
  collie__mem_copy_small(c->mem, dst, src, n);
}

/* ---- The cost model ---- */

/* Transport classes the model distinguishes: one per transport of net.c's
 * table, in its order (collie__net_class_count, collie__net_class_name);
 * this bounds the arrays that hold them. */
enum { COLLIE_CLASS_MAX = 4 };

/* alpha: latency of one message step (us); beta: time per byte moved (us/B);
 * gamma: time per byte reduced (us/B). */
struct collie__model {
  double alpha_us, beta_us, gamma_us;
  /* When some host runs more of the ranks than it has cores: those cores
   * (the fewest of such hosts), else 0. Every byte copied then takes a turn
   * on them, whichever rank copies it (collie__oversub_cost). */
  double cores;
};

/* One measured cost line of a tuning file ("fit.shm.2.allreduce.ring = lo hi
 * alpha beta"): an algorithm's time on a communicator of one class and size,
 * for calls whose collie__call_bytes is in [lo, hi], is alpha + beta x bytes. */
struct collie__fit {
  int cls, nranks, kind, algo; /* class (collie__net_class), ranks, COLLIE_KIND_*, COLLIE_ALGO_* */
  size_t lo, hi;               /* byte range, inclusive */
  double alpha_us, beta_us;    /* us, us per byte */
  int line;                    /* in the tuning file, for messages */
};

/* The model of a communicator: class constants, and the tuning file's fit
 * lines (heap array owned by the struct, sorted by cls, kind, nranks, algo, lo;
 * ranges of one algorithm never overlap). Start from a zeroed struct. */
struct collie__models {
  struct collie__model cls[COLLIE_CLASS_MAX];
  struct collie__fit *fits;
  int nfits;
};

/* Built-in defaults, measured on the reference machine (docs/algorithms.md).
 * oversub_cores: 0, or the cores of a host with more ranks than cores (a
 * step then also pays a wake-up, and copies share those cores). Sets the
 * class constants only: fit lines already loaded are kept. */
void collie__models_default(struct collie__models *m, int oversub_cores);
/* Reads a tuning file over m: "shm.alpha_us = 1.5" lines set class
 * constants, "fit.<class>.<nranks>.<collective>.<algorithm> = lo hi alpha
 * beta" lines replace m's fit lines (loading twice keeps one copy), '#'
 * starts a comment. All or nothing: on error m is unchanged. INVALID_ARGUMENT
 * naming file:line on a malformed line, unknown key, class, collective or
 * algorithm, a bad number or overlapping ranges; SYSTEM_ERROR when it cannot
 * be read or memory runs out. Blocks on file I/O only. */
collie_result_t collie__models_load(const char *path, struct collie__models *m);
/* Frees m's fit lines (m stays usable: constants kept, no fit lines). */
void collie__models_free(struct collie__models *m);

/* Bytes of the largest buffer of a call (nccl-tests "size"): allreduce,
 * broadcast, reduce: count; allgather, reduce_scatter, alltoall, gather,
 * scatter: size*count; v-variants: the sum of the counts; times esize. */
size_t collie__call_bytes(const struct collie__call *c);

/* ---- Algorithms ---- */

/* needs bits: conditions every rank can evaluate the same way. */
#define COLLIE_NEEDS_ALL_SHM 0x1u /* every rank on one host (reads peers' memory) */
#define COLLIE_NEEDS_REDUCE 0x2u  /* the call reduces (has a valid kernel) */
/* A trait in the same bits, for the model: the algorithm's cost prices the
 * sharing of a host's link itself, so select.c must not multiply the
 * network's beta by the ranks of a host: a ring or a chain crosses each
 * boundary between hosts with one rank at a time, linear's messages all go
 * through the root's link, and bruck prices each round by the ranks of a
 * host that cross in it. */
#define COLLIE_ONE_LINK 0x4u
/* Runs on CUDA device buffers (call->mem COLLIE_MEM_CUDA), and only there:
 * every other algorithm runs on host memory only. */
#define COLLIE_NEEDS_DEVICE 0x8u
/* Runs calls whose wire format is compressed (call->wire FLOAT16 or
 * BFLOAT16), and only those (wire.c). */
#define COLLIE_NEEDS_WIRE 0x10u
/* Runs compressed calls too, by handing the wire to the phase that crosses
 * hosts and running the others native (the hierarchical allreduce). Every
 * other algorithm runs native calls only. */
#define COLLIE_WIRE_OK 0x20u

/* Whether algorithm `needs` can run a call of this wire format. */
static inline int
collie__wire_fits(unsigned needs, int compressed)
{
  return compressed ? (needs & (COLLIE_NEEDS_WIRE | COLLIE_WIRE_OK)) != 0
                    : !(needs & COLLIE_NEEDS_WIRE);
}

/* Whether call c sends 16-bit floats in place of its float32 data. */
static inline int
collie__call_compressed(const struct collie__call *c)
{
  return c->wire == COLLIE_WIRE_FLOAT16 || c->wire == COLLIE_WIRE_BFLOAT16;
}

struct collie__algo {
  const char *name; /* COLLIE_ALGO_MAP's name: COLLIE_ALGO and logs */
  int id;           /* COLLIE_ALGO_* */
  int kind;         /* COLLIE_KIND_* it implements */
  unsigned needs;   /* COLLIE_NEEDS_* */
  /* Estimated time in microseconds of call under model m, or < 0 when the
   * algorithm cannot run this call. Must depend only on values every rank
   * agrees on (size, count, dtype, op, root, all_shm; never rank-local counts),
   * so that every rank picks the same algorithm. */
  double (*cost_us)(const struct collie__call *c, const struct collie__model *m);
  /* Runs the call; every wait bounded by c->deadline_ns. */
  collie_result_t (*run)(struct collie__call *c);
};

/* The cheapest algorithm of c's kind under m for a call that runs as one
 * phase of another (a hierarchical phase, sparse allreduce's allgather):
 * neither a shared-memory-only nor a hierarchical one (the caller holds the
 * scratch and is not a whole-communicator call), and one that can run c as
 * selection filters them. *cost_us gets its estimate (< 0: none). NULL when
 * none can run it. */
const struct collie__algo *collie__algo_cheapest_flat(const struct collie__call *c,
                                                      const struct collie__model *m,
                                                      double *cost_us);

/* Every algorithm, in COLLIE_ALGOS order (ties in selection go to the
 * earlier); *n gets their number. For selection and for tools. */
const struct collie__algo *const *collie__algo_table(int *n);

/* Every algorithm, one definition each in its family's file (listed in select.c). */
#define COLLIE_ALGOS(XX)                                                                           \
  XX(allreduce_ring)                                                                               \
  XX(allreduce_recursive_doubling)                                                                 \
  XX(allreduce_rabenseifner)                                                                       \
  XX(allreduce_shm_flat)                                                                           \
  XX(allreduce_hierarchical)                                                                       \
  XX(allreduce_cuda_ipc)                                                                           \
  XX(allreduce_cuda_pipeline)                                                                      \
  XX(allreduce_compressed)                                                                         \
  XX(allreduce_linear)                                                                             \
  XX(allgather_ring)                                                                               \
  XX(allgather_recursive_doubling)                                                                 \
  XX(allgather_bruck)                                                                              \
  XX(allgather_shm_flat)                                                                           \
  XX(allgather_hierarchical)                                                                       \
  XX(allgather_cuda_ipc)                                                                           \
  XX(allgather_cuda_pipeline)                                                                      \
  XX(allgatherv_ring)                                                                              \
  XX(allgatherv_hierarchical)                                                                      \
  XX(allgatherv_cuda_ipc)                                                                          \
  XX(reduce_scatter_ring)                                                                          \
  XX(reduce_scatter_recursive_halving)                                                             \
  XX(reduce_scatter_shm_flat)                                                                      \
  XX(reduce_scatter_hierarchical)                                                                  \
  XX(reduce_scatter_cuda_ipc)                                                                      \
  XX(reduce_scatter_cuda_pipeline)                                                                 \
  XX(reduce_scatter_linear)                                                                        \
  XX(broadcast_tree)                                                                               \
  XX(broadcast_scatter_allgather)                                                                  \
  XX(broadcast_chain)                                                                              \
  XX(broadcast_linear)                                                                             \
  XX(broadcast_hierarchical)                                                                       \
  XX(broadcast_cuda_ipc)                                                                           \
  XX(broadcast_cuda_pipeline)                                                                      \
  XX(reduce_tree)                                                                                  \
  XX(reduce_reduce_scatter_gather)                                                                 \
  XX(reduce_hierarchical)                                                                          \
  XX(reduce_cuda_pipeline)                                                                         \
  XX(reduce_cuda_ipc)                                                                              \
  XX(alltoall_pairwise)                                                                            \
  XX(alltoall_bruck)                                                                               \
  XX(alltoall_shm_flat)                                                                            \
  XX(alltoall_hierarchical)                                                                        \
  XX(alltoall_cuda_ipc)                                                                            \
  XX(alltoallv_pairwise)                                                                           \
  XX(alltoallv_hierarchical)                                                                       \
  XX(alltoallv_cuda_ipc)                                                                           \
  XX(sparse_allreduce_topk_allgather)                                                              \
  XX(sparse_allreduce_gtopk)                                                                       \
  XX(gather_tree)                                                                                  \
  XX(gather_linear)                                                                                \
  XX(gather_hierarchical)                                                                          \
  XX(gather_cuda_ipc)                                                                              \
  XX(scatter_tree)                                                                                 \
  XX(scatter_linear)                                                                               \
  XX(scatter_hierarchical)                                                                         \
  XX(scatter_cuda_ipc)                                                                             \
  XX(barrier_dissemination)                                                                        \
  XX(barrier_shm_flat)                                                                             \
  XX(barrier_hierarchical)

#define COLLIE_XX_(name) extern const struct collie__algo collie__algo_##name;
COLLIE_ALGOS(COLLIE_XX_)
#undef COLLIE_XX_

/* The bytes of each buffer a call touches on rank `rank` of `size` (0: not
 * used there, e.g. a non-root's recvbuf of a reduce); a v-variant's up to
 * its farthest block (extent.c). recv_all: the collective writes every byte
 * of recv there, so a copy of recv's old contents would be overwritten. */
struct collie__extent {
  size_t send, recv;
  int recv_all;
};
void collie__call_extent(const struct collie__call *call, int rank, int size,
                         struct collie__extent *e);

/* Point to point is not selected: one way to do it. */
collie_result_t collie__p2p_send(struct collie__call *call);
/* The two halves of a send or receive (not a probe): post call's message as
 * op (the caller keeps op until done; now: it waits for op at once, before
 * it posts anything else), and, once op's requests
 * (collie__p2p_reqs) are done or rc failed, hand its results to call
 * (status, source). A failed post gives up the net. */
collie_result_t collie__p2p_post(struct collie__call *call, struct collie__p2p_op *op, int now);
collie_result_t collie__p2p_done(struct collie__call *call, struct collie__p2p_op *op,
                                 collie_result_t rc);
collie_result_t collie__p2p_recv(struct collie__call *call);

/* ---- select.c ---- */

/* Per-collective forced algorithm ids parsed from COLLIE_ALGO. */
struct collie__algo_table {
  int forced[COLLIE_KIND_COUNT_]; /* COLLIE_ALGO_AUTO: let the model pick */
};
/* Parses "allreduce=ring,broadcast=tree"; an unknown collective or algorithm,
 * or one that does not implement that collective, is INVALID_ARGUMENT naming it. */
collie_result_t collie__algo_parse(const char *spec, struct collie__algo_table *out);

/* Remembers which (collective, size bucket) decision tables were logged. */
struct collie__select_log {
  uint64_t logged[COLLIE_KIND_COUNT_]; /* bit b: bucket of 2^b bytes */
};

/* Picks the algorithm for call: opts_algo (COLLIE_ALGO_* from the call's opts)
 * first, then the table's forced choice, else the cheapest under the model of
 * the call's transport class. When models has fit lines for (class, call's
 * size, kind), only the algorithms with lines are candidates, each costed by
 * its line for the call's bytes (collie__fit_cost); the formula model decides
 * only when none of them can run the call. INVALID_ARGUMENT when a named algorithm does not
 * implement this collective or cannot run this call. At COLLIE_DEBUG=INFO the
 * decision table is logged once per (collective, power-of-two size bucket). */
collie_result_t collie__algo_select(const struct collie__call *call, int opts_algo,
                                    const struct collie__algo_table *table,
                                    const struct collie__models *models,
                                    struct collie__select_log *log,
                                    const struct collie__algo **out);

/* The cost of algorithm algo (COLLIE_ALGO_*) for call under models' fit lines:
 * the line of (call's class, size, kind, algo) whose range holds the call's
 * bytes, else the nearest range's (by byte ratio; ties to the lower), its
 * line extrapolated. < 0 when that algorithm has no line there. *extrapolated
 * (may be NULL) tells whether the bytes lay outside every range. */
double collie__fit_cost(const struct collie__models *models, const struct collie__call *call,
                        int algo, int *extrapolated);

/* What selection would pick, with no communicator (collie-bench --model):
 * every algorithm of kind costed for a communicator on topo's hosts (one
 * host: the shm class, but shm_flat is not costed; several: tcp between
 * them), count elements of dtype, SUM where it reduces, under models'
 * class constants (fit lines are not used). cost[id] gets each algorithm's
 * estimate in us, < 0 where it cannot run or the kind lacks it; returns the
 * cheapest, or NULL when none can run. */
const struct collie__algo *collie__algo_predict(int kind, const struct collie__topo *topo,
                                                size_t count, collie_dtype_t dtype,
                                                const struct collie__models *models,
                                                double cost[COLLIE_ALGO_COUNT_]);

/* ---- Helpers shared by the families ---- */

/* Split [0, count) into `parts` near-equal blocks: block i starts at
 * collie__block_off(count, parts, i) and holds collie__block_len(...) elements. */
static inline size_t
collie__block_len(size_t count, int parts, int i)
{
  return count / (size_t)parts + ((size_t)i < count % (size_t)parts ? 1 : 0);
}
static inline size_t
collie__block_off(size_t count, int parts, int i)
{
  size_t q = count / (size_t)parts, r = count % (size_t)parts;
  return (size_t)i * q + ((size_t)i < r ? (size_t)i : r);
}

/* ceil(log2(p)) for p >= 1. */
static inline int
collie__log2_ceil(int p)
{
  int k = 0;
  while ((1 << k) < p) k++;
  return k;
}

/* The chunk of a step that sends sl bytes to a partner and receives rl
 * from it, for an algorithm that would cut at `chunk` (whole elements):
 * two ranks forward nothing, so they send blocks whole, one message that a
 * single copy moves in one pass (allgather and alltoall of 32-64 MiB: 6-10 %
 * faster than 256 KiB chunks). Both partners get the same (one's sl is the
 * other's rl). */
size_t collie__swap_chunk(const struct collie__call *c, size_t sl, size_t rl, size_t chunk);
/* An algorithm's cost t, raised, when ranks outnumber cores (m->cores > 0),
 * to the time of the `copies` x S bytes it copies in all (S =
 * collie__call_bytes), whichever ranks copy them, since they all take turns
 * on those cores. A tree that forwards through slots copies 2 (p-1) S for a
 * broadcast (in and out at every hop) however short its critical path is. */
double collie__oversub_cost(const struct collie__call *c, const struct collie__model *m, double t,
                            double copies);
/* What an exchange past the first adds when several are in flight at once:
 * its handling on the rank's core, at most COLLIE_MSG_US (the tcp
 * transport's step cost on oversubscribed cores). Where alpha is a network's
 * latency (hosts 1 ms apart) the exchanges' latencies overlap and only that
 * remains; where alpha is itself the handling (loopback, shared memory)
 * each costs a whole alpha. */
#define COLLIE_MSG_US 15.0
/* The latency of n exchanges (a send and/or a receive with one peer each)
 * posted up to `window` at a time: an alpha per window, and each other
 * exchange its handling (above). n alpha wherever alpha <= COLLIE_MSG_US. */
double collie__overlap_us(const struct collie__model *m, double n, double window);

/* One blocking send of step `step` to `to`, direct (collie__net_isend_direct). */
collie_result_t collie__send_direct(struct collie__call *c, int to, const void *buf, size_t bytes,
                                    uint32_t step);
/* Posts a send to `to` and a receive from `from` (either may be -1 for none)
 * of one step and waits for both. */
collie_result_t collie__sendrecv(struct collie__call *c, int to, const void *sbuf, size_t sbytes,
                                 int from, void *rbuf, size_t rbytes, uint32_t step);

#endif /* COLLIE_COLL_H */
