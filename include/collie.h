/*
 * collie.h - the public API of collie, a collective-communication library for
 * distributed training over shared memory and TCP.
 *
 * This is the only header a user includes. Every symbol it declares starts
 * with collie_ or COLLIE_; everything else in the library is hidden.
 *
 * Conventions shared by every call (see docs/, docs/design.md first):
 * - Counts and displacements are in elements of the dtype, never bytes.
 * - work == NULL blocks until the operation is done; a non-NULL work returns
 *   at once with a handle to wait on (collie_wait / collie_test).
 * - An argument error found before any communication returns at once and
 *   leaves the communicator usable. An error during communication poisons
 *   the communicator: every later call fails with COLLIE_INVALID_USAGE,
 *   quoting the first error, until collie_comm_destroy.
 * - collie_last_error() gives the calling thread's message for its last
 *   failed call: which argument, which value, which peer, which operation.
 * - Threads: one thread at a time issues calls on a communicator (and on the
 *   communicators split from it that it drives), as with NCCL and MPI's
 *   MPI_THREAD_SERIALIZED; operations run in the order they were issued.
 *   collie_wait, collie_test, collie_comm_abort, collie_flight_dump and the
 *   telemetry calls are safe from any thread.
 */
#ifndef COLLIE_H
#define COLLIE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define COLLIE_API __attribute__((visibility("default")))
#else
#define COLLIE_API
#endif

#define COLLIE_VERSION_MAJOR 0
#define COLLIE_VERSION_MINOR 1
#define COLLIE_VERSION_PATCH 0
#define COLLIE_VERSION_CODE                                                                        \
  (COLLIE_VERSION_MAJOR * 10000 + COLLIE_VERSION_MINOR * 100 + COLLIE_VERSION_PATCH)

/* ---- Result codes ------------------------------------------------------ */

/* XX(name, description). The enum and collie_result_string() come from this
 * one list, so the two never drift. The order is the contract's order. */
#define COLLIE_RESULT_MAP(XX)                                                                      \
  XX(SUCCESS, "success")                                                                           \
  XX(IN_PROGRESS, "operation in progress")                                                         \
  XX(INVALID_ARGUMENT, "invalid argument")                                                         \
  XX(INVALID_USAGE, "invalid usage")                                                               \
  XX(SYSTEM_ERROR, "system error")                                                                 \
  XX(REMOTE_ERROR, "remote error")                                                                 \
  XX(TIMEOUT, "timeout")                                                                           \
  XX(UNSUPPORTED, "unsupported")                                                                   \
  XX(INTERNAL_ERROR, "internal error")

typedef enum {
#define COLLIE_XX_(name, desc) COLLIE_##name,
  COLLIE_RESULT_MAP(COLLIE_XX_)
#undef COLLIE_XX_
} collie_result_t;

/* ---- Data types and reduction operations --------------------------------- */

/* XX(name, C-type-size-in-bytes, is_float, short-name) */
#define COLLIE_DTYPE_MAP(XX)                                                                       \
  XX(INT8, 1, 0, "int8")                                                                           \
  XX(UINT8, 1, 0, "uint8")                                                                         \
  XX(INT32, 4, 0, "int32")                                                                         \
  XX(UINT32, 4, 0, "uint32")                                                                       \
  XX(INT64, 8, 0, "int64")                                                                         \
  XX(UINT64, 8, 0, "uint64")                                                                       \
  XX(FLOAT16, 2, 1, "float16")                                                                     \
  XX(BFLOAT16, 2, 1, "bfloat16")                                                                   \
  XX(FLOAT32, 4, 1, "float32")                                                                     \
  XX(FLOAT64, 8, 1, "float64")

typedef enum {
#define COLLIE_XX_(name, size, isf, str) COLLIE_##name,
  COLLIE_DTYPE_MAP(COLLIE_XX_)
#undef COLLIE_XX_
      COLLIE_DTYPE_COUNT_ /* not a dtype: the number of dtypes */
} collie_dtype_t;

/* XX(name, short-name, integer-only) */
#define COLLIE_OP_MAP(XX)                                                                          \
  XX(SUM, "sum", 0)                                                                                \
  XX(PROD, "prod", 0)                                                                              \
  XX(MIN, "min", 0)                                                                                \
  XX(MAX, "max", 0)                                                                                \
  XX(AVG, "avg", 0)                                                                                \
  XX(BAND, "band", 1)                                                                              \
  XX(BOR, "bor", 1)                                                                                \
  XX(BXOR, "bxor", 1)

typedef enum {
#define COLLIE_XX_(name, str, intonly) COLLIE_##name,
  COLLIE_OP_MAP(COLLIE_XX_)
#undef COLLIE_XX_
      COLLIE_OP_COUNT_ /* not an op: the number of ops */
} collie_op_t;

/* Size in bytes of one element of dtype; 0 for a value outside the enum. */
COLLIE_API size_t collie_dtype_size(collie_dtype_t dtype);
/* "float32", "sum", ...; "?" for a value outside the enum. Never NULL. */
COLLIE_API const char *collie_dtype_name(collie_dtype_t dtype);
COLLIE_API const char *collie_op_name(collie_op_t op);

/* ---- Errors ---------------------------------------------------------------- */

/* Short description of a result code ("invalid argument"). Never NULL. */
COLLIE_API const char *collie_result_string(collie_result_t r);

/* The calling thread's message for its last failed collie call, naming the
 * argument and value, or the peer and operation. "" when there was none.
 * Valid until the thread's next collie call. */
COLLIE_API const char *collie_last_error(void);

/* ---- Settings ---------------------------------------------------------------- */

/* 1 when name is one of the COLLIE_* variables the library reads
 * (docs/env.md), given with or without its "COLLIE_" prefix, any case
 * ("timeout_ms", "COLLIE_TIMEOUT_MS"); 0 otherwise, NULL included. The
 * Python binding asks it to tell collie's own settings among a
 * communicator's hints from other libraries' (which it ignores). */
COLLIE_API int collie_setting_known(const char *name);

/* ---- Communicators ---------------------------------------------------------- */

typedef struct collie_comm collie_comm_t; /* opaque */
typedef struct collie_work collie_work_t; /* opaque: one async operation */

#define COLLIE_CONFIG_MAGIC 0xC0111Eu

/* Explicit configuration for collie_comm_init_config. Initialise it with
 * COLLIE_CONFIG_INIT so that size/magic/version are right; fields left at
 * their initial value take the environment's (or the built-in) default. */
/* A key-value store of the caller's (torch.distributed's Store, a service of the
 * job's) through which collie_comm_init_config rendezvouses instead of opening
 * one of its own (collie_config_t.store_callbacks). collie calls it at init and
 * split only, on the thread that called them, one call at a time per
 * communicator tree; keys are 1..256 characters of [A-Za-z0-9_./:-], values at
 * most 1 MiB. Each callback returns COLLIE_SUCCESS or the collie_result_t that
 * says what went wrong (TIMEOUT, REMOTE_ERROR, SYSTEM_ERROR); collie's message
 * then names the operation, the key and that code. */
typedef struct collie_store_callbacks {
  void *ctx; /* passed to every callback */
  /* Sets key to the len bytes at value (copied), replacing an older value. */
  collie_result_t (*set)(void *ctx, const char *key, const void *value, size_t len);
  /* Waits at most timeout_ms until key exists, then copies min(cap, length) bytes
   * of its value to buf and stores the value's length in *len. collie calls it
   * again with a larger buffer when *len > cap. TIMEOUT while key is missing. */
  collie_result_t (*get)(void *ctx, const char *key, int64_t timeout_ms, void *buf, size_t cap,
                         size_t *len);
  /* Atomically adds delta to the integer counter at key (absent: 0) and stores
   * the new value in *out. */
  collie_result_t (*add)(void *ctx, const char *key, int64_t delta, int64_t *out);
  /* Called exactly once per collie_comm_init_config that was given these callbacks
   * (and a cfg made with COLLIE_CONFIG_INIT): when the last communicator using the
   * store is destroyed, or at once when init failed or the job has one rank. May
   * be NULL. */
  void (*release)(void *ctx);
} collie_store_callbacks_t;

typedef struct {
  size_t size;       /* sizeof(collie_config_t), set by COLLIE_CONFIG_INIT */
  unsigned magic;    /* COLLIE_CONFIG_MAGIC */
  unsigned version;  /* COLLIE_VERSION_CODE the caller compiled against */
  int rank;          /* 0 <= rank < world_size; required */
  int world_size;    /* > 0; required */
  const char *store; /* "tcp://host:port" (rank 0 serves it) or "file:///dir"; NULL: COLLIE_STORE */
  const char *job_token; /* shared secret of the job; NULL: COLLIE_JOB_TOKEN */
  int64_t timeout_ms;    /* default deadline of every operation; 0: COLLIE_TIMEOUT_MS */
  const char *transport; /* "auto", "shm" or "tcp"; NULL: COLLIE_TRANSPORT */
  /* The caller's store instead of store/COLLIE_STORE (both set: INVALID_ARGUMENT).
   * Copied at init; ctx must stay valid until release is called. Without a job
   * token, rank 0 draws a random one and hands it out through this store. A cfg
   * from a header without this field or the next (its smaller size) is still
   * accepted. */
  const collie_store_callbacks_t *store_callbacks;
  /* A communicator of this process that the new one is a group of, made apart
   * from it because not every rank of it takes part (torch's new_group runs
   * on the members only). The new communicator shares parent's telemetry
   * (steps and comms.csv, the timing log, categories) and names ranks in
   * messages by their world rank there, as a split of parent would. Read at
   * init only; parent may be destroyed first. NULL: none. */
  collie_comm_t *parent;
  /* The communicator's default COLLIE_WIRE_* for float32 SUM and AVG
   * allreduces of host memory (other calls stay native); DEFAULT (0): the
   * COLLIE_WIRE variable, else NATIVE. Splits inherit it. */
  int wire;
} collie_config_t;

#define COLLIE_CONFIG_INIT                                                                         \
  {                                                                                                \
    sizeof(collie_config_t), COLLIE_CONFIG_MAGIC, COLLIE_VERSION_CODE, -1, 0, NULL, NULL, 0, NULL, \
        NULL, NULL, 0                                                                              \
  }

/* Creates the world communicator from the environment that a launcher set:
 * collierun (COLLIE_RANK, COLLIE_WORLD_SIZE, COLLIE_STORE, COLLIE_JOB_TOKEN), torchrun
 * (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Slurm (SLURM_PROCID, SLURM_NTASKS and
 * COLLIE_STORE or MASTER_ADDR/MASTER_PORT), Open MPI (OMPI_COMM_WORLD_RANK/SIZE) or
 * MPICH/PMI (PMI_RANK, PMI_SIZE). Blocks until every rank has joined or the timeout
 * (COLLIE_TIMEOUT_MS) passes. Collective over all ranks. The caller owns *comm and
 * frees it with collie_comm_destroy. Errors: INVALID_ARGUMENT for a missing,
 * inconsistent or malformed environment (the message names the variable);
 * TIMEOUT when a rank never arrives; REMOTE_ERROR for a refused job token;
 * SYSTEM_ERROR when an OS call fails. */
COLLIE_API collie_result_t collie_comm_init(collie_comm_t **comm);

/* As collie_comm_init, with rank, size, store, token and timeout given by cfg. */
COLLIE_API collie_result_t collie_comm_init_config(const collie_config_t *cfg,
                                                   collie_comm_t **comm);

/* Value of color that leaves the calling rank out of every new communicator. */
#define COLLIE_SPLIT_NONE (-1)

/* Splits comm as MPI_Comm_split: ranks that pass the same color >= 0 form one new
 * communicator, ordered by key, ties broken by their rank in comm. A rank that
 * passes COLLIE_SPLIT_NONE gets *out = NULL. Collective over comm; blocks. The
 * new communicator is independent of comm (own sequence, own channels) and may
 * be driven from another thread. Errors: INVALID_ARGUMENT (color < -1, out NULL),
 * INVALID_USAGE (comm destroyed or poisoned), TIMEOUT, REMOTE_ERROR. */
COLLIE_API collie_result_t collie_comm_split(collie_comm_t *comm, int color, int key,
                                             collie_comm_t **out);

/* Shrink and continue (as MPIX_Comm_shrink, ncclCommShrink): the ranks of comm
 * that are still alive agree on who they are and each gets *out, a new
 * communicator of just them, ordered by their rank in comm. Call it on every
 * surviving rank after an operation failed (comm is then poisoned; it is not
 * used again, destroy it afterwards), or on a healthy comm to leave out the
 * ranks in exclude[0..nexclude) (the same list everywhere; those ranks do not
 * call). A rank is left out when it is excluded, its process is gone (checked
 * by the survivors of its host), or it neither calls shrink nor is found dead
 * within timeout_ms (-1: comm's timeout) -- a frozen rank, or every rank of a
 * lost host. The agreement holds when ranks fail during it. It goes through
 * the job's store, so the store must outlive the failure: a tcp store is
 * served by world rank 0's process (use a file store to survive its death).
 * Collective over the survivors; blocks. Errors: INVALID_ARGUMENT (bad exclude
 * list or timeout, out NULL, the caller excluded), INVALID_USAGE (comm
 * destroyed, inside a group), REMOTE_ERROR (this rank was left out, or the
 * store is gone), TIMEOUT (the decision never came, or a member died after it:
 * shrink again). */
COLLIE_API collie_result_t collie_comm_shrink(collie_comm_t *comm, const int *exclude, int nexclude,
                                              int64_t timeout_ms, collie_comm_t **out);

/* Frees comm and everything it holds (channels, shared memory, threads). Not
 * collective in its outcome: it always succeeds on a valid communicator, even
 * when peers have died; on a healthy communicator it waits (bounded by the
 * timeout) for the others so that rank 0's store outlives every user of it.
 * Using comm afterwards returns INVALID_USAGE. */
COLLIE_API collie_result_t collie_comm_destroy(collie_comm_t *comm);

/* Fails every pending operation on comm, here and on its peers, and poisons
 * it. Never blocks. Destroy it afterwards. */
COLLIE_API collie_result_t collie_comm_abort(collie_comm_t *comm);

/* collie_comm_abort, telling the peers why: their errors end with
 * ", after: <why>" (up to 255 bytes of it), e.g. the Python binding's "rank 1's
 * process is exiting on an uncaught exception (ValueError: bad batch)".
 * why NULL or "": collie_comm_abort. */
COLLIE_API collie_result_t collie_comm_abort_reason(collie_comm_t *comm, const char *why);

/* Rank of the caller in comm and number of ranks; -1 for an invalid comm. */
COLLIE_API int collie_comm_rank(const collie_comm_t *comm);
COLLIE_API int collie_comm_size(const collie_comm_t *comm);

/* ---- Per-call options ----------------------------------------------------------- */

/* Telemetry payload categories (seed schema); 0 is OTHER so zeroed options default to it. */
typedef enum {
  COLLIE_CAT_OTHER = 0,
  COLLIE_CAT_FEATURES_ALLGATHER,
  COLLIE_CAT_MOMENTS_MU,
  COLLIE_CAT_MOMENTS_SIGMA_FULL,
  COLLIE_CAT_MOMENTS_SIGMA_DIAG,
  COLLIE_CAT_MIXTURE_MU_K,
  COLLIE_CAT_MIXTURE_SIGMA_K,
  COLLIE_CAT_THIRD_MOMENT_SKETCH,
  COLLIE_CAT_TOPR_INDICES,
  COLLIE_CAT_BUILTIN_COUNT_ /* registered categories take ids from here on */
} collie_category_t;

/* Named algorithms for collie_opts_t.algorithm and COLLIE_ALGO; AUTO lets the
 * cost model pick. Which collective has which is in docs/algorithms.md; naming
 * one that a collective lacks, or that cannot run the call (shm_flat across
 * hosts), is COLLIE_INVALID_ARGUMENT, never a silent fallback. */
#define COLLIE_ALGO_MAP(XX)                                                                        \
  XX(AUTO, "auto")                                                                                 \
  XX(RING, "ring")                                                                                 \
  XX(TREE, "tree")                                                                                 \
  XX(DISSEMINATION, "dissemination")                                                               \
  XX(LINEAR, "linear")                                                                             \
  XX(RECURSIVE_DOUBLING, "recursive_doubling")                                                     \
  XX(RABENSEIFNER, "rabenseifner")                                                                 \
  XX(BRUCK, "bruck")                                                                               \
  XX(RECURSIVE_HALVING, "recursive_halving")                                                       \
  XX(SCATTER_ALLGATHER, "scatter_allgather")                                                       \
  XX(CHAIN, "chain")                                                                               \
  XX(PAIRWISE, "pairwise")                                                                         \
  XX(REDUCE_SCATTER_GATHER, "reduce_scatter_gather")                                               \
  XX(SHM_FLAT, "shm_flat")                                                                         \
  XX(HIERARCHICAL, "hierarchical")                                                                 \
  XX(CUDA_IPC, "cuda_ipc")                                                                         \
  XX(CUDA_PIPELINE, "cuda_pipeline")                                                               \
  XX(COMPRESSED, "compressed")                                                                     \
  XX(TOPK_ALLGATHER, "topk_allgather")                                                             \
  XX(GTOPK, "gtopk")

typedef enum {
#define COLLIE_XX_(name, str) COLLIE_ALGO_##name,
  COLLIE_ALGO_MAP(COLLIE_XX_)
#undef COLLIE_XX_
      COLLIE_ALGO_COUNT_
} collie_algo_t;

/* What a float32 SUM or AVG allreduce sends between ranks (docs/compression.md).
 * NATIVE: float32, exact as any allreduce. FLOAT16 / BFLOAT16: each rank's
 * contribution and the result cross the wire as 16-bit floats, rounded to
 * nearest even once each, while every sum is taken in float32: half the
 * bytes, within the error bound the docs give. FLOAT16 keeps 11 significant
 * bits but overflows past 65504; BFLOAT16 keeps float32's range with 8 bits.
 * DEFAULT (0): the communicator's choice (collie_config_t.wire, else
 * COLLIE_WIRE, else NATIVE). */
typedef enum {
  COLLIE_WIRE_DEFAULT = 0,
  COLLIE_WIRE_NATIVE,
  COLLIE_WIRE_FLOAT16,
  COLLIE_WIRE_BFLOAT16,
  COLLIE_WIRE_COUNT_
} collie_wire_t;

/* Per-call options; NULL, or a zero-initialised struct, means defaults. */
typedef struct {
  int64_t timeout_ms; /* 0: the communicator's default */
  int category;       /* telemetry payload category (COLLIE_CAT_*) */
  const char *label;  /* telemetry: layer or bucket name */
  const char *phase;  /* telemetry: "dense", "sparse", ... */
  int algorithm;      /* COLLIE_ALGO_AUTO (= 0) or a named algorithm */
  /* CUDA device buffers only (docs/gpu.md): the stream (a CUstream or
   * cudaStream_t) the call is ordered after, and whose later work sees its
   * result. NULL: the legacy default stream. Ignored for host buffers. */
  void *cuda_stream;
  /* allreduce only: a COLLIE_WIRE_* value. FLOAT16 or BFLOAT16 named here on
   * a call that is not a float32 SUM or AVG allreduce of host memory is
   * COLLIE_INVALID_ARGUMENT (the communicator's default, by contrast, applies
   * where it can and leaves other calls native). */
  int wire;
} collie_opts_t;

/* ---- Collectives ------------------------------------------------------------------- */

/* Every operation below: comm first, then buffers, counts, dtype, op, root/peer,
 * opts, work. work == NULL blocks until done; otherwise *work receives a handle.
 * Errors common to all: INVALID_ARGUMENT (NULL buffer with count > 0, a count whose
 * byte size overflows, dtype/op/root/peer out of range, work set inside a group),
 * UNSUPPORTED (BAND/BOR/BXOR on a floating dtype; an operation this build does not
 * implement yet), INVALID_USAGE (comm destroyed or poisoned; collectives mismatched
 * across ranks), TIMEOUT, REMOTE_ERROR (a peer failed or vanished), SYSTEM_ERROR. */

/* recvbuf[i] = op over ranks of sendbuf[i], on every rank. In place: sendbuf == recvbuf.
 * AVG divides the sum by the size (integers: truncated toward zero). */
COLLIE_API collie_result_t collie_allreduce(collie_comm_t *comm, const void *sendbuf, void *recvbuf,
                                            size_t count, collie_dtype_t dtype, collie_op_t op,
                                            const collie_opts_t *opts, collie_work_t **work);

/* recvbuf (size*sendcount elements) = every rank's sendbuf, in rank order.
 * In place: sendbuf == recvbuf + rank*sendcount. */
COLLIE_API collie_result_t collie_allgather(collie_comm_t *comm, const void *sendbuf, void *recvbuf,
                                            size_t sendcount, collie_dtype_t dtype,
                                            const collie_opts_t *opts, collie_work_t **work);

/* As allgather with per-rank counts: rank q's block lands at recvbuf + displs[q]. */
COLLIE_API collie_result_t collie_allgatherv(collie_comm_t *comm, const void *sendbuf,
                                             size_t sendcount, void *recvbuf,
                                             const size_t *recvcounts, const size_t *displs,
                                             collie_dtype_t dtype, const collie_opts_t *opts,
                                             collie_work_t **work);

/* recvbuf (recvcount elements) = op over ranks of block `rank` of sendbuf
 * (size*recvcount elements). In place: recvbuf == sendbuf + rank*recvcount. */
COLLIE_API collie_result_t collie_reduce_scatter(collie_comm_t *comm, const void *sendbuf,
                                                 void *recvbuf, size_t recvcount,
                                                 collie_dtype_t dtype, collie_op_t op,
                                                 const collie_opts_t *opts, collie_work_t **work);

/* Copies root's buf to every rank's buf. */
COLLIE_API collie_result_t collie_broadcast(collie_comm_t *comm, void *buf, size_t count,
                                            collie_dtype_t dtype, int root,
                                            const collie_opts_t *opts, collie_work_t **work);

/* Root's recvbuf = op over ranks of sendbuf. recvbuf matters only at root. */
COLLIE_API collie_result_t collie_reduce(collie_comm_t *comm, const void *sendbuf, void *recvbuf,
                                         size_t count, collie_dtype_t dtype, collie_op_t op,
                                         int root, const collie_opts_t *opts, collie_work_t **work);

/* Block q of sendbuf (count_per_rank elements) goes to rank q, landing in block
 * `rank` of its recvbuf. */
COLLIE_API collie_result_t collie_alltoall(collie_comm_t *comm, const void *sendbuf, void *recvbuf,
                                           size_t count_per_rank, collie_dtype_t dtype,
                                           const collie_opts_t *opts, collie_work_t **work);

/* As alltoall with per-peer counts and displacements (in elements). */
COLLIE_API collie_result_t collie_alltoallv(collie_comm_t *comm, const void *sendbuf,
                                            const size_t *sendcounts, const size_t *sdispls,
                                            void *recvbuf, const size_t *recvcounts,
                                            const size_t *rdispls, collie_dtype_t dtype,
                                            const collie_opts_t *opts, collie_work_t **work);

/* Root's recvbuf (size*count elements) = every rank's sendbuf in rank order. */
COLLIE_API collie_result_t collie_gather(collie_comm_t *comm, const void *sendbuf, void *recvbuf,
                                         size_t count, collie_dtype_t dtype, int root,
                                         const collie_opts_t *opts, collie_work_t **work);

/* Block q of root's sendbuf (size*count elements) goes to rank q's recvbuf. */
COLLIE_API collie_result_t collie_scatter(collie_comm_t *comm, const void *sendbuf, void *recvbuf,
                                          size_t count, collie_dtype_t dtype, int root,
                                          const collie_opts_t *opts, collie_work_t **work);

/* Sparse allreduce (docs/sparse.md): every rank holds nnz (index, value)
 * pairs of a vector of dim elements (indices in [0, dim), any order,
 * duplicates summed), the same nnz on every rank, float32 or float64
 * values; every rank gets the same result, sorted by index, *out_nnz
 * entries of out_indices/out_values.
 * TOPK_ALLGATHER: exact: every rank's pairs gathered, values of one index
 *   summed; out_cap >= size x nnz.
 * GTOPK: gTop-k: log2(size) rounds of pairwise exchange, each keeping the
 *   nnz largest magnitudes of the merged set; at most nnz entries, out_cap
 *   >= nnz. What a merge drops is lost (error feedback is the caller's).
 * Index bytes are charged to COLLIE_CAT_TOPR_INDICES in comms.csv, values
 * to opts->category. Host memory only. */
typedef enum { COLLIE_SPARSE_TOPK_ALLGATHER = 0, COLLIE_SPARSE_GTOPK = 1 } collie_sparse_mode_t;

COLLIE_API collie_result_t collie_sparse_allreduce(collie_comm_t *comm, collie_sparse_mode_t mode,
                                                   const int64_t *indices, const void *values,
                                                   size_t nnz, size_t dim, int64_t *out_indices,
                                                   void *out_values, size_t out_cap,
                                                   size_t *out_nnz, collie_dtype_t dtype,
                                                   const collie_opts_t *opts, collie_work_t **work);

/* ---- One-sided windows (docs/windows.md) ----
 * Every rank of comm exposes `bytes` of host memory at base (each its own
 * size, 0 allowed); any rank puts bytes into a peer's window at an offset,
 * then signals it; the peer waits for the signal, after which every put the
 * signaller made to it before signalling is in its buffer. */
typedef struct collie_window collie_window_t;

/* Collective over comm (the window gets channels of its own). base must stay
 * valid until collie_window_free. */
COLLIE_API collie_result_t collie_window_create(collie_comm_t *comm, void *base, size_t bytes,
                                                collie_window_t **win);
/* Copies bytes of src into peer's window at offset (INVALID_ARGUMENT when
 * they do not fit it). src must stay unchanged until collie_window_flush
 * (into a peer of this host whose memory the OS lets us write, the copy is
 * done at return). */
COLLIE_API collie_result_t collie_window_put(collie_window_t *win, int peer, size_t offset,
                                             const void *src, size_t bytes);
/* Tells peer that this rank's puts to it so far are done (one count). */
COLLIE_API collie_result_t collie_window_signal(collie_window_t *win, int peer);
/* Blocks until peer's signals to this rank number at least count (since
 * the window's creation), applying its puts meanwhile; timeout_ms 0: the
 * communicator's. TIMEOUT, REMOTE_ERROR (peer died) leave the window
 * unusable. */
COLLIE_API collie_result_t collie_window_wait_signal(collie_window_t *win, int peer, uint64_t count,
                                                     int64_t timeout_ms);
/* Waits until this rank's puts and signals have left (src reusable). */
COLLIE_API collie_result_t collie_window_flush(collie_window_t *win);
/* Collective: every put any rank made to this rank before its fence is in
 * this rank's window when the fence returns. */
COLLIE_API collie_result_t collie_window_fence(collie_window_t *win);
/* Collective: a fence, then the window's resources go. */
COLLIE_API collie_result_t collie_window_free(collie_window_t *win);

/* ---- Barrier and persistent collectives ----------------------------------------------- */

/* Returns once every rank of comm has entered the barrier. */
COLLIE_API collie_result_t collie_barrier(collie_comm_t *comm, const collie_opts_t *opts,
                                          collie_work_t **work);

/* Persistent collectives (MPI-4's MPI_Allreduce_init, torchcomms'
 * all_gather_p_init): plan a collective once, with its buffers and options,
 * then start it as many times as needed. The arguments are checked when the
 * plan is made, with the same errors as the plain call, and *plan is NULL on
 * an error; making a plan is local (no rank waits for another). Each
 * collie_start is one collective of comm, in the order of the calls, as the
 * plain call would be at that point (every rank starts its plans, and calls
 * its other collectives, in the same order); it reads the buffers' contents
 * at each start (write the next input before starting again). work == NULL
 * blocks; otherwise *work receives a handle, which must complete before the
 * same plan starts again. Free every plan before its communicator is
 * destroyed. */
typedef struct collie_plan collie_plan_t; /* opaque: one planned collective */
COLLIE_API collie_result_t collie_allreduce_init(collie_comm_t *comm, const void *sendbuf,
                                                 void *recvbuf, size_t count, collie_dtype_t dtype,
                                                 collie_op_t op, const collie_opts_t *opts,
                                                 collie_plan_t **plan);
COLLIE_API collie_result_t collie_allgather_init(collie_comm_t *comm, const void *sendbuf,
                                                 void *recvbuf, size_t sendcount,
                                                 collie_dtype_t dtype, const collie_opts_t *opts,
                                                 collie_plan_t **plan);
COLLIE_API collie_result_t collie_reduce_scatter_init(collie_comm_t *comm, const void *sendbuf,
                                                      void *recvbuf, size_t recvcount,
                                                      collie_dtype_t dtype, collie_op_t op,
                                                      const collie_opts_t *opts,
                                                      collie_plan_t **plan);
COLLIE_API collie_result_t collie_broadcast_init(collie_comm_t *comm, void *buf, size_t count,
                                                 collie_dtype_t dtype, int root,
                                                 const collie_opts_t *opts, collie_plan_t **plan);
COLLIE_API collie_result_t collie_alltoall_init(collie_comm_t *comm, const void *sendbuf,
                                                void *recvbuf, size_t count_per_rank,
                                                collie_dtype_t dtype, const collie_opts_t *opts,
                                                collie_plan_t **plan);
/* Runs plan once (see above). Errors: INVALID_ARGUMENT (plan is NULL), and
 * those of the plain call's run. */
COLLIE_API collie_result_t collie_start(collie_plan_t *plan, collie_work_t **work);
/* Frees plan (NULL: nothing). A start still running keeps what it needs. */
COLLIE_API void collie_plan_free(collie_plan_t *plan);

/* ---- Point to point ---------------------------------------------------------------------
 *
 * Sends and receives match as MPI's do (docs/p2p.md): a receive takes the first message from
 * its source with its tag, in the order the messages arrived, and different tags are
 * independent streams; messages of one source and tag are never overtaken. A receive names its
 * source or takes COLLIE_ANY_SOURCE, and its tag or COLLIE_ANY_TAG. A message that arrives
 * before its receive is posted waits in its channel, and goes into a buffer of
 * COLLIE_P2P_UNEXPECTED_BYTES per communicator once something needs the channel past it (a
 * receive of a later message, a probe, a collective); a message that would overflow the buffer
 * waits in its channel, and its sender waits with it, until receives take what is buffered.
 * Nothing is dropped. Every wait ends at the operation's deadline (TIMEOUT, naming what it
 * waited for and the unexpected messages it saw). tag must be >= 0. Async sends and receives
 * (with work) are posted: they complete in whatever order their messages allow. To this rank
 * itself only async ones, or a group's, are allowed (a blocking one is INVALID_USAGE). */
#define COLLIE_ANY_SOURCE (-1)
#define COLLIE_ANY_TAG (-1)

/* What a receive or probe found: the sender's rank, its tag and its message's bytes. */
typedef struct collie_status {
  int source;
  int tag;
  size_t bytes;
} collie_status_t;

/* A standard send: complete once its bytes have left this rank's buffer (small messages
 * at once; a large one may wait until the receiver takes it). */
COLLIE_API collie_result_t collie_send(collie_comm_t *comm, const void *buf, size_t count,
                                       collie_dtype_t dtype, int peer, int tag,
                                       const collie_opts_t *opts, collie_work_t **work);
/* A synchronous send (MPI_Ssend): complete only once a receive on peer has matched it. */
COLLIE_API collie_result_t collie_ssend(collie_comm_t *comm, const void *buf, size_t count,
                                        collie_dtype_t dtype, int peer, int tag,
                                        const collie_opts_t *opts, collie_work_t **work);
/* Receives count elements from peer (or COLLIE_ANY_SOURCE) with tag (or COLLIE_ANY_TAG). The
 * message must be exactly count x dtype: another size fails with INVALID_USAGE naming both. */
COLLIE_API collie_result_t collie_recv(collie_comm_t *comm, void *buf, size_t count,
                                       collie_dtype_t dtype, int peer, int tag,
                                       const collie_opts_t *opts, collie_work_t **work);
/* As collie_recv, taking a message of up to count elements, and reporting in *status (once
 * done; with work, once collie_wait returned SUCCESS) its source, tag and bytes. A longer
 * message fails with INVALID_USAGE ("message truncated", naming both sizes). */
COLLIE_API collie_result_t collie_recv_status(collie_comm_t *comm, void *buf, size_t count,
                                              collie_dtype_t dtype, int source, int tag,
                                              collie_status_t *status, const collie_opts_t *opts,
                                              collie_work_t **work);
/* Receives from any source (as collie_recv with COLLIE_ANY_SOURCE; tag must be >= 0), and
 * *source gets the sender's rank (with work, once collie_wait returned SUCCESS). */
COLLIE_API collie_result_t collie_recv_any(collie_comm_t *comm, void *buf, size_t count,
                                           collie_dtype_t dtype, int tag, int *source,
                                           const collie_opts_t *opts, collie_work_t **work);
/* Waits until a message from source (or COLLIE_ANY_SOURCE) with tag (or COLLIE_ANY_TAG) is
 * here, without receiving it, and fills *status: the receive posted next for that source and
 * tag takes it. TIMEOUT at the deadline. Runs in issue order, as a blocking call. */
COLLIE_API collie_result_t collie_probe(collie_comm_t *comm, int source, int tag,
                                        collie_status_t *status, const collie_opts_t *opts);
/* As collie_probe, looking once: *flag 1 and *status filled when such a message is here,
 * else *flag 0. */
COLLIE_API collie_result_t collie_iprobe(collie_comm_t *comm, int source, int tag, int *flag,
                                         collie_status_t *status, const collie_opts_t *opts);

/* Batch send/recv, as NCCL groups: between start and end, send and recv only
 * record (their work must be NULL); end posts them all so they progress together. */
COLLIE_API collie_result_t collie_group_start(collie_comm_t *comm);
COLLIE_API collie_result_t collie_group_end(collie_comm_t *comm, collie_work_t **work);

/* ---- Memory that peers read in place -------------------------------------------------- */

/* Allocates bytes (> 0) of zeroed memory, page-aligned, that the ranks on this
 * host read in place. Use it as any buffer; a send (or the send side of a
 * collective) whose buffer lies inside it, over shared memory and at least
 * COLLIE_SHM_CMA_MIN bytes, is copied by the receiver straight out of its own
 * mapping of this memory, at memcpy speed, instead of through the kernel
 * (process_vm_readv) or the slots. Everywhere else (tcp, small messages,
 * COLLIE_SHM_CMA_MIN=0, a kernel without pidfd_getfd) it behaves as malloc'd
 * memory. Peers keep a mapping of up to 8 of a rank's regions each until the
 * communicator is destroyed. comm must be valid; the memory is not tied to it.
 * Returns NULL on failure, and collie_last_error() says why: INVALID_USAGE
 * (comm destroyed, never initialised or poisoned), INVALID_ARGUMENT (bytes 0),
 * SYSTEM_ERROR (the OS refused). */
COLLIE_API void *collie_mem_alloc(collie_comm_t *comm, size_t bytes);
/* Frees memory from collie_mem_alloc, before or after any communicator is
 * destroyed; NULL is a no-op. No operation may still use it. INVALID_ARGUMENT
 * for any other pointer (nothing is freed). */
COLLIE_API collie_result_t collie_mem_free(void *ptr);

/* ---- Work handles ---------------------------------------------------------------------- */

/* Waits for work up to timeout_ms (< 0: until the operation's own deadline).
 * Returns the operation's result, or TIMEOUT if it is still running. */
COLLIE_API collie_result_t collie_wait(collie_work_t *work, int64_t timeout_ms);
/* SUCCESS, IN_PROGRESS or the operation's error. Never blocks. */
COLLIE_API collie_result_t collie_test(collie_work_t *work);
/* Releases the handle; the operation still completes or fails. NULL is a no-op. */
COLLIE_API void collie_work_free(collie_work_t *work);

/* ---- Telemetry -------------------------------------------------------------------------- */

/* Delimit a training step (step >= 1, epoch >= 0). Operations issued in between, on comm or any
 * communicator of its collie_comm_init tree, are accounted to it; rank 0 appends the step's row to
 * COLLIE_LOG_DIR/comms.csv once the step ended and all its operations completed
 * (docs/telemetry.md). Local: no communication. Errors: INVALID_ARGUMENT (step < 1, epoch < 0),
 * INVALID_USAGE (begin while a step is open, end while none is). */
COLLIE_API collie_result_t collie_step_begin(collie_comm_t *comm, int64_t step, int64_t epoch);
COLLIE_API collie_result_t collie_step_end(collie_comm_t *comm);

/* Adds a payload category named `name` (1..32 characters of [A-Za-z0-9_], not a built-in
 * name) and returns its id in *category, for opts->category. Registering a name again returns
 * the same id. Each adds a bytes_<name> column at the end of comms.csv of communicators created
 * afterwards (docs/telemetry.md). Process-wide, thread-safe. Errors: INVALID_ARGUMENT (NULL,
 * bad or built-in name), UNSUPPORTED (more than 32 registered). */
COLLIE_API collie_result_t collie_category_register(const char *name, int *category);

/* Opens the timing log of comm's tree (comm and every communicator split from the same
 * collie_comm_init) in dir: dir/timing-rank{i}.csv, i = the rank in that init's communicator.
 * Local to this rank. Opening the directory that is already open succeeds; another one while
 * open is INVALID_USAGE. Errors: SYSTEM_ERROR naming the path, INVALID_USAGE (existing file
 * with a different header). COLLIE_TIMING_LOG=dir does this at init. */
COLLIE_API collie_result_t collie_timing_open(collie_comm_t *comm, const char *dir);
/* Writes every queued record now (blocks on the file write only). No log open: SUCCESS. */
COLLIE_API collie_result_t collie_timing_flush(collie_comm_t *comm);
/* Flushes and closes comm's tree's timing log (warning when records were dropped). No log
 * open: SUCCESS. */
COLLIE_API collie_result_t collie_timing_close(collie_comm_t *comm);

/* A user-timed region for the timing log (timing-rank{i}.csv). */
typedef struct {
  const char *operation;       /* any name, e.g. "COMPRESS" */
  const char *layer_name;      /* NULL: "" */
  const char *phase;           /* NULL: "dense" */
  uint64_t message_size_bytes; /* bytes the region handled */
  double start_counter;        /* monotonic seconds (CLOCK_MONOTONIC) at start */
  double end_counter;          /* monotonic seconds at end */
} collie_timing_t;

/* Queues rec for comm's tree's timing log without blocking (a full queue drops and counts it);
 * iteration and epoch come from the open step. No log open: does nothing, returns SUCCESS.
 * Errors: INVALID_ARGUMENT (NULL rec, empty operation, end before start). */
COLLIE_API collie_result_t collie_timing_record(collie_comm_t *comm, const collie_timing_t *rec);

/* A timing log without a communicator: the same timing-rank{rank}.csv (columns,
 * sidecars, bounded non-blocking queue, background writer, flush at exit) for a
 * process whose communication runs on MPI, NCCL or Gloo. A communicator of this
 * process logging to the same directory and rank (collie_timing_open, COLLIE_TIMING_LOG)
 * shares the file: one queue and one writer, so its operations' rows and these
 * interleave whole. */
typedef struct collie__timing collie_timing_log_t;

/* Opens dir/timing-rank{rank}.csv (dir created with its parents). queue: records
 * the queue holds before it drops (0: COLLIE_TIMING_QUEUE, else 10000; at most
 * 1000000, ~250 bytes each, allocated at open); flush_ms: the
 * writer's period (0: COLLIE_TIMING_FLUSH_MS, else 1000). Close it with
 * collie_timing_log_close. Errors: INVALID_ARGUMENT (dir NULL or empty, rank < 0,
 * queue or flush_ms < 0, queue above 1000000, out NULL), SYSTEM_ERROR naming the path,
 * INVALID_USAGE (the file exists with another header). */
COLLIE_API collie_result_t collie_timing_log_open(const char *dir, int rank, int64_t queue,
                                                  int64_t flush_ms, collie_timing_log_t **out);
/* Queues rec with iteration and epoch as given (>= 0), without blocking: a full queue
 * drops the record and counts it (in the .meta sidecar, and a warning at close). Safe
 * from any thread. Errors: INVALID_ARGUMENT (NULL log or rec, empty operation, end
 * before start, negative iteration or epoch). */
COLLIE_API collie_result_t collie_timing_log_record(collie_timing_log_t *log,
                                                    const collie_timing_t *rec, int64_t iteration,
                                                    int64_t epoch);
/* Writes what is queued now (blocks on the file writes). */
COLLIE_API collie_result_t collie_timing_log_flush(collie_timing_log_t *log);
/* Flushes and lets the log go (the file stays open while a communicator shares it).
 * NULL: nothing. */
COLLIE_API void collie_timing_log_close(collie_timing_log_t *log);

/* comms.csv without a communicator: the same file, columns and step rules as a
 * communicator's (docs/telemetry.md), for a process whose communication runs on
 * MPI, NCCL or Gloo, which tells collie what each call was and how long it took.
 * The collectives comms.csv has columns for: */
/* XX(name, column): COLLIE_COLL_<name> has the comms.csv columns bytes_<column> and
 * t_<column>_ms, except BARRIER: counted, no column (no bytes, its time in no t_
 * column). */
#define COLLIE_COLLECTIVE_MAP(XX)                                                                  \
  XX(ALLREDUCE, "all_reduce")                                                                      \
  XX(ALLGATHER, "all_gather")                                                                      \
  XX(REDUCE_SCATTER, "reduce_scatter")                                                             \
  XX(BROADCAST, "broadcast")                                                                       \
  XX(REDUCE, "reduce")                                                                             \
  XX(ALLTOALL, "all_to_all")                                                                       \
  XX(GATHER, "gather")                                                                             \
  XX(SCATTER, "scatter")                                                                           \
  XX(SEND_RECV, "send_recv")                                                                       \
  XX(BARRIER, "barrier")

typedef enum {
#define COLLIE_XX_(name, column) COLLIE_COLL_##name,
  COLLIE_COLLECTIVE_MAP(COLLIE_XX_)
#undef COLLIE_XX_
      COLLIE_COLL_COUNT_ /* not a collective: the number of them */
} collie_collective_t;

/* The wire model's bytes one rank moves for a call of coll on p ranks whose caller
 * buffer is `size` bytes (allreduce 2(p-1)/p x size; allgather, reduce_scatter,
 * gather, scatter (p-1) x size of the rank's shard; alltoall (p-1)/p x size of the
 * whole send buffer; broadcast, reduce, send/recv 1 x size; barrier 0). 0 for a
 * value outside the enum. */
COLLIE_API uint64_t collie_wire_bytes(collie_collective_t coll, int p, uint64_t size);

typedef struct collie__steps collie_comms_log_t;
typedef struct collie__step_acc collie_comms_charge_t; /* one call charged, its time due */

/* A comms.csv log for rank `rank` of a job of world_size ranks. Rank 0 appends to
 * dir/comms.csv (dir: NULL or "" = "."; made if missing, one level: its parent must
 * exist; a new file gets the
 * header, an existing one must have it); other ranks get a log that checks the
 * calls, keeps the step numbers and writes nothing, so every rank runs the same
 * code. The columns are fixed at open: register categories before. Errors:
 * INVALID_ARGUMENT (out NULL, rank < 0, world_size < 1, rank >= world_size),
 * SYSTEM_ERROR naming the path, INVALID_USAGE (the file exists with another
 * header). */
COLLIE_API collie_result_t collie_comms_log_open(const char *dir, int rank, int world_size,
                                                 collie_comms_log_t **out);
/* Delimit a step (step >= 1, epoch >= 0), as collie_step_begin/end: calls charged in
 * between are its row, written once it ended and every charge is done, rows in
 * step order. Errors: INVALID_ARGUMENT, INVALID_USAGE (begin while open, end while
 * none is). */
COLLIE_API collie_result_t collie_comms_log_step_begin(collie_comms_log_t *log, int64_t step,
                                                       int64_t epoch);
COLLIE_API collie_result_t collie_comms_log_step_end(collie_comms_log_t *log);
/* The open step's numbers (step 0 when none is open; epoch stays the last step's). */
COLLIE_API collie_result_t collie_comms_log_step(collie_comms_log_t *log, int64_t *step,
                                                 int64_t *epoch);
/* Charges a call issued now to the open step: collie_wire_bytes(coll, group_size or,
 * when 0, the log's world size, size) to coll's column and to category's. *charge
 * is what collie_comms_log_done needs to add the call's time once it completes (an
 * async call's row waits for it); NULL outside a step and on ranks other than 0,
 * where done does nothing. Safe from any thread. Errors: INVALID_ARGUMENT naming
 * coll, a category unknown or registered after open, group_size < 0. */
COLLIE_API collie_result_t collie_comms_log_charge(collie_comms_log_t *log,
                                                   collie_collective_t coll, int category,
                                                   int group_size, uint64_t size,
                                                   collie_comms_charge_t **charge);
/* Adds the charged call's elapsed time (>= 0 ns) to its step and writes the rows
 * that became complete. Each charge is done exactly once, before close. */
COLLIE_API collie_result_t collie_comms_log_done(collie_comms_log_t *log,
                                                 collie_comms_charge_t *charge,
                                                 collie_collective_t coll, int64_t elapsed_ns);
/* charge and done in one: a call that already completed, elapsed_ns long. */
COLLIE_API collie_result_t collie_comms_log_record(collie_comms_log_t *log,
                                                   collie_collective_t coll, int category,
                                                   int group_size, uint64_t size,
                                                   int64_t elapsed_ns);
/* Writes the rows still due (a step still open as it stands) and frees. NULL: nothing. */
COLLIE_API void collie_comms_log_close(collie_comms_log_t *log);

/* Writes this rank's flight recorder for comm (its last COLLIE_FR_SIZE operations with their
 * state and timestamps) as JSON to COLLIE_LOG_DIR/flight-rank{rank}-{comm hash}.json, replacing
 * it atomically; `collie-report hang DIR` reads the dumps of all ranks (docs/flight-recorder.md).
 * Local only: no other rank takes part. Blocks only on the file write. Safe to call while
 * operations are in flight, from any thread. Errors: INVALID_ARGUMENT (comm is NULL),
 * SYSTEM_ERROR naming the path that could not be written. */
COLLIE_API collie_result_t collie_flight_dump(collie_comm_t *comm);

#ifdef __cplusplus
}
#endif
#endif /* COLLIE_H */
