/*
 * core.h - the communicator and what the public entry points share: the
 * parsed environment, the live-communicator registry, poisoning, and the
 * dispatch of a validated call to an algorithm.
 */
#ifndef COLLIE_CORE_H
#define COLLIE_CORE_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "coll/coll.h"
#include "coll/topo.h"
#include "telemetry/telemetry.h"
#include "transport/transport.h"
#include "util/error.h"
#include "util/util.h"

/* ---- params.c ---- */

#define COLLIE_PARAM_CTYPE_INT int64_t
#define COLLIE_PARAM_CTYPE_STR const char *
#define COLLIE_PARAM_CTYPE_LEVEL collie__loglevel_t
#define COLLIE_PARAM_CTYPE_TRANSPORT const char *
#define COLLIE_PARAM_CTYPE_WIRE int /* a COLLIE_WIRE_* other than DEFAULT */

/* The parsed environment: one field per params.def line, named as the variable. */
struct collie__params {
#define X(name, type, def, help) COLLIE_PARAM_CTYPE_##type name;
#include "core/params.def"
#undef X
  char strings_[8192]; /* the string values, copied from the environment */
};

/* Parses every COLLIE_* variable through getenv_fn (NULL: getenv). Strings are
 * copied into p (the environment may change later). Errors: INVALID_ARGUMENT
 * naming the variable and its value. Unknown COLLIE_* names get a warning. */
collie_result_t collie__params_load(struct collie__params *p,
                                    const char *(*getenv_fn)(const char *name));
/* Copies src to dst, its strings included (a plain struct copy would leave
 * dst's strings pointing into src). */
void collie__params_copy(struct collie__params *dst, const struct collie__params *src);
#include "core/introspect.h" /* what tools may ask (some of it defined here) */
#include "core/params.h"     /* collie__params_describe */

/* ---- comm.c ---- */

/* The last algorithm dispatch picked for a collective, and the shape it was for. */
struct collie__select_memo {
  const struct collie__algo *algo; /* NULL: none yet */
  size_t count;
  collie_dtype_t dtype;
  collie_op_t op;
  int root, opts_algo;
  collie__mem_kind_t mem;
  int wire;
  /* The flight recorder's description of that shape (names, bytes, root):
   * a repeated call copies it and adds its sequence number, instead of
   * looking up four names and its byte count again. */
  struct collie__flight_op fr;
};

/* placement.c: the CPU a rank that shares its CPU with a lower local rank
 * should move to at init (-1: stay), from the peers' hosts, the CPU each
 * runs on (cpus[p], -1: unknown or another host) and this thread's allowed
 * CPUs; and the move itself (world init). */
int collie__place_pick(const struct collie__peer *peers, const int *cpus, int size, int rank,
                       const cpu_set_t *allowed);
void collie__place_spread(const collie_comm_t *c);

/* crowd.c: polls a wait makes before it sleeps while every rank on a
 * machine can have a core of its own. */
#define COLLIE_SPIN_POLLS 20000
/* Sets each record's machine_ranks to the ranks that share its machine (its
 * boot id; its host where that is unknown), keeping a larger count a record
 * brought (a split's members count their whole world). */
void collie__count_machine_ranks(struct collie__peer *peers, int size);
/* The spin rank's waits get when COLLIE_SPIN is -1: COLLIE_SPIN_POLLS while
 * neither its host's ranks nor its machine's outnumber ncpus, else 0 (sleep
 * at once). peers[] has its machine counts (collie__count_machine_ranks). */
int collie__spin_default(const struct collie__peer *peers, int size, int rank, int ncpus);

#define COLLIE_COMM_MAGIC 0xC0CC1E11u

struct collie_comm {
  uint32_t magic;
  int rank, size;
  uint64_t hash; /* unique per communicator within the job */
  char ctx[64];  /* log context "rank 3/8 comm 9f2c" */
  struct collie__params params;
  int64_t timeout_ms;
  char token[256];
  collie__store_t *job_store; /* the job's store (a reference), for split */
  collie__store_t *store;     /* this comm's prefixed view of it */
  const char *transport;      /* "auto" or a transport's name (collie__net_transport_name) */
  struct collie__peer *peers;
  struct collie__topo topo; /* its hosts: local groups and rails (coll/topo.h) */
  struct collie__net *net;
  struct collie__algo_table algos; /* COLLIE_ALGO overrides */
  struct collie__models models;    /* cost model (defaults or COLLIE_TUNING_FILE) */
  struct collie__select_log select_log;
  struct collie__select_memo select_memo[COLLIE_KIND_COUNT_]; /* dispatch.c: last pick per kind */
  struct collie__flight *flight; /* last COLLIE_FR_SIZE operations (NULL: off) */
  struct collie__tele *tele;     /* shared with the whole collie_comm_init tree */
  int cls;                       /* cost-model class: collie__net_class */
  int all_shm;       /* cls is COLLIE_NET_CLASS_LOCAL: shared memory serves every rank */
  int spin;          /* polls a wait makes before it sleeps (crowd.c, COLLIE_SPIN) */
  int met_over_ring; /* init exchanged its records over the bootstrap ring (bootstrap/ring.c) */
  uint32_t seq;      /* collectives issued so far */
  uint32_t split_seq;
  uint32_t shrink_seq;                   /* collie_comm_shrink calls so far (comm_shrink.c) */
  uint32_t *p2p_send_seq, *p2p_recv_seq; /* per peer */
  int in_group;
  struct collie__group *group;
  struct collie__workq *workq; /* work.c's queue and worker; NULL until the first async call */
  /* [0] a call's, [1] its phases' when the call runs hierarchically (hier.c) */
  struct collie__scratch scratch[2];
  struct collie__cuda_state dev; /* device algorithms' resources (coll/cuda_*.c) */
  /* CUDA graphs (capture.c): the communicator replays run on (split at the
   * first capture) and the calls captured, each with its host block. */
  collie_comm_t *graph_comm;
  struct collie__capture *captures;
  /* The first fatal error. collie_comm_abort may set it from another thread
   * while the driving thread reads it: the message is written under the lock,
   * then the code is published (release); readers load the code (acquire)
   * before they read the message. */
  pthread_mutex_t poison_lock;
  _Atomic int poison_rc;
  char poison_msg[COLLIE_ERRMSG_LEN];
};

/* ---- comm.c ---- */

/* What a split or a shrink knows of the new communicator's members before
 * it is set up: their records (from the parent), whose processes the setup
 * watches while it waits for them, so that a member of this host that died
 * fails it at once, named; and whether the members must meet in the store,
 * never on the bootstrap ring (a shrink: the ring does not watch them). */
struct collie__comm_known {
  const struct collie__peer *peers; /* size entries, in the new rank order */
  int store_only;
};

/* Creates one rank's communicator of `size` ranks with id `hash` over the job
 * store base (a reference is taken): publishes `me`, meets the others in the
 * store and opens the channels. A split or shrink passes its parent's
 * telemetry (tele); a world communicator (tele NULL) opens its own. known:
 * a split's or shrink's, or NULL. */
collie_result_t collie__comm_create(const struct collie__params *params, const char *token,
                                    int64_t timeout_ms, const char *transport,
                                    collie__store_t *base, uint64_t hash, int rank, int size,
                                    const struct collie__peer *me,
                                    const struct collie__comm_known *known,
                                    struct collie__tele *tele, collie_comm_t **out);

/* ---- comm_state.c: what every call asks of a communicator ---- */

/* Adds c to the registry of live communicators. Errors: SYSTEM_ERROR (out of
 * memory, or 16384 live in this process). */
collie_result_t collie__comm_register(collie_comm_t *c);
/* Removes c; 1 if it was registered. */
int collie__comm_unregister(const collie_comm_t *c);
/* Whether c is registered (no lock: every public call asks). */
int collie__comm_live(const collie_comm_t *c);
/* Checks that comm is live and usable; sets the error and returns INVALID_USAGE
 * (destroyed, never initialised, or poisoned: quoting the first error). */
collie_result_t collie__comm_check(const collie_comm_t *comm, const char *fn);
/* Every rank's `bytes` of mine into all (rank order), over comm's channels,
 * at the next sequence number, within comm's timeout (the library's own
 * setup steps: split, windows). A failure leaves comm to the caller to
 * poison. */
collie_result_t collie__comm_exchange(collie_comm_t *comm, const void *mine, void *all,
                                      size_t bytes);
/* Records the first fatal error (the thread's current message) and returns rc.
 * Thread-safe against readers and other poisoners. */
collie_result_t collie__comm_poison(collie_comm_t *comm, collie_result_t rc);
/* collie__comm_poisoned: introspect.h. */
/* Dumps comm's flight recorder to COLLIE_LOG_DIR with reason; failures to write
 * are logged, not returned (the caller is already reporting an error). */
void collie__comm_flight_dump(collie_comm_t *comm, const char *reason);

/* ---- dispatch.c ---- */

/* One validated operation with what dispatch decides at issue: the call, the
 * algorithm that runs it (NULL for p2p) and its timeout. */
struct collie__op {
  struct collie__call call;
  const struct collie__algo *algo;
  int64_t timeout_ms;
  int64_t fr_id;   /* its flight-recorder record (-1: none) */
  int64_t t_issue; /* collie__dispatch_now() at issue */
  int at_once;     /* blocking with no queue: runs on the issuing thread now */
  int precise;     /* telemetry times it: its stamps need the precise clock */
  /* A send or receive on device memory (stage.c): its device buffer, which
   * stage_p2p.c moves when the op runs, and whether the caller waits for
   * it (blocking: host staging may use the communicator's pinned area).
   * NULL otherwise. */
  void *stage_dev;
  int stage_blocking;
  struct collie__tele_op tele;
  struct collie__p2p_op p2p; /* an async send or receive, posted (work.c) */
};

/* Issue-time half, on the caller's thread: fills op->call's comm fields,
 * picks the algorithm and takes the collective's sequence number; blocking
 * says the caller waits for the call (no work handle). An
 * unusable algorithm choice returns an argument error before any sequence
 * number is taken (the communicator stays usable). Does not block. */
collie_result_t collie__dispatch_prepare(collie_comm_t *comm, struct collie__op *op,
                                         const collie_opts_t *opts, int blocking);
/* The time stamps of op come from: collie__now_ns() when telemetry times
 * it, else the coarse clock. Every untimed call would otherwise pay two
 * precise reads for its flight record alone (a third of a one-rank
 * broadcast), and a recorder that finds hangs needs milliseconds, not
 * nanoseconds. */
int64_t collie__dispatch_now(const struct collie__op *op);
/* Run-time half, on the thread that owns comm's channels, starting at `now`
 * (collie__dispatch_now(op); a blocking call that runs at once passes its
 * issue time, saving a clock read): sets the deadline,
 * runs, and on failure prefixes the message with the operation and poisons
 * the communicator. Blocks until done or the op's deadline. */
collie_result_t collie__dispatch_run(collie_comm_t *comm, struct collie__op *op, int64_t now);

/* An async send or receive (collie__dispatch_postable) is posted by the
 * worker and left to complete with whatever progresses the net (work.c):
 * collie__dispatch_post starts it as collie__dispatch_run would (a failed
 * post ends it, and returns the error); once op->p2p's requests are done,
 * or the net failed (rc), collie__dispatch_posted_end ends it as
 * collie__dispatch_run would have. */
int collie__dispatch_postable(const struct collie__op *op);
collie_result_t collie__dispatch_post(collie_comm_t *comm, struct collie__op *op, int64_t now);
collie_result_t collie__dispatch_posted_end(collie_comm_t *comm, struct collie__op *op,
                                            collie_result_t rc);

/* Ends op's records (flight recorder, telemetry) for an op that will never
 * run because the communicator failed before its turn. */
void collie__dispatch_skipped(collie_comm_t *comm, struct collie__op *op);

/* ---- introspect.c: core/introspect.h (included above) ---- */

/* ---- check.c ---- */

/* COLLIE_CHECK=1: exchanges a fingerprint of call with every rank (a ring of
 * p-1 steps under the internal kind) and returns INVALID_USAGE naming each
 * rank's call when they differ. Called with the call's seq and algo set. */
collie_result_t collie__check_call(const struct collie__call *call);

/* ---- group.c ---- */

/* A group record, empty (NULL when out of memory); freed by collie__group_free. */
struct collie__group *collie__group_new(void);
/* Empties g for a new group (its arrays are kept). */
void collie__group_begin(struct collie__group *g);
/* Closes g at collie_group_end: numbers each message with its pair's
 * sequence number (on the caller's thread, in call order) and starts the
 * group's telemetry. */
void collie__group_seal(collie_comm_t *comm, struct collie__group *g);
/* Records one send (sbuf set) or recv (rbuf set) of the open group (opts:
 * its telemetry label, phase, category). */
collie_result_t collie__group_add(collie_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                  collie_dtype_t dtype, int peer, int tag,
                                  const collie_opts_t *opts);
/* Runs a closed group whose messages were numbered at issue: posts every
 * message, waits for all until now + timeout_ms; on failure prefixes the
 * message and poisons comm. Empties g (its arrays are kept). Blocks. */
collie_result_t collie__group_run(collie_comm_t *comm, struct collie__group *g, int64_t timeout_ms);
void collie__group_free(struct collie__group *g);
/* Ends the telemetry of a closed group that will never run (comm failed). */
void collie__group_skipped(collie_comm_t *comm, struct collie__group *g);

/* ---- stage.c: calls on CUDA device memory, staged through the host ---- */

/* Runs op on host copies of its buffers when they are CUDA device memory
 * (*handled = 1), else sets *handled = 0 and does nothing; *handled = 2
 * when opts->cuda_stream is capturing a CUDA graph (*capture_graph): the
 * caller captures the call (core/capture.c). Errors: INVALID_ARGUMENT for a
 * mix of device and host buffers, UNSUPPORTED for a call no capture can
 * take, the copies' and the run's. An async send or receive is queued and
 * staged when it runs. */
collie_result_t collie__stage_run(collie_comm_t *comm, struct collie__op *op,
                                  const collie_opts_t *opts, collie_work_t **work, int *handled,
                                  void **capture_graph);
/* The device algorithm a call of kind on device buffers of `bytes` (count x
 * dtype size) runs: COLLIE_ALGO_CUDA_IPC (every rank on this host with a
 * flat area, the build has device code, COLLIE_CUDA_IPC allows it),
 * COLLIE_ALGO_CUDA_PIPELINE (ranks on several hosts, more than one
 * COLLIE_CUDA_CHUNK), or 0: staged whole through host memory. A host
 * algorithm asked for (opts or COLLIE_ALGO) stages. */
/* Whether a or b is CUDA device memory, for the API's host-only features
 * (compressed wire, sparse allreduce, windows): util/mem.h's kind is host
 * until collie__stage_run decides. The driver is asked only in a process
 * that uses CUDA. */
int collie__stage_on_device(const void *a, const void *b);

/* ---- capture.c: calls on device memory captured into a CUDA graph ---- */

/* Captures op (device buffers; opts->cuda_stream capturing into graph) as
 * the graph's copies in, host node and copy out, its replays to run on
 * comm->graph_comm (the caller made it: a split of comm); *work (if asked)
 * is a completed handle. COLLIE_UNSUPPORTED for a collective that cannot be
 * captured; the driver's errors. */
collie_result_t collie__capture_call(collie_comm_t *comm, struct collie__op *op,
                                     const collie_opts_t *opts, void *graph, collie_work_t **work);
/* Frees comm's captured calls whose graphs were destroyed (all: every one,
 * when comm goes). */
void collie__capture_free_all(collie_comm_t *comm, int all);
int collie__stage_device_algo(const collie_comm_t *comm, int kind, size_t bytes,
                              const collie_opts_t *opts);

/* ---- stage_p2p.c: send and receive on CUDA device memory ---- */

/* Runs a send or receive whose buffer (op->stage_dev) is device memory: as
 * a device message to a peer that takes them (one copy, by the receiver),
 * else through host memory; a receive takes either. Errors: the copies',
 * the driver's, the send's or receive's. */
collie_result_t collie__stage_p2p_run(collie_comm_t *comm, struct collie__op *op);
/* Makes comm take device messages from now on (once; dev: a device buffer
 * of this rank, whose context receives into host memory use). */
void collie__stage_p2p_ready(collie_comm_t *comm, const void *dev);
/* Whether comm takes device messages (the ops are installed). Any thread. */
int collie__stage_p2p_on(const collie_comm_t *comm);
/* Whether a send of bytes of device memory dev to peer goes as a device
 * message (*shared; rec then filled): large enough (COLLIE_CUDA_P2P_MIN),
 * peer takes them, the buffer can be shared. Waits for the legacy default
 * stream first, until deadline_ns. Errors: that wait's, the driver's. */
struct collie__ipc_rec;
collie_result_t collie__stage_p2p_share(collie_comm_t *comm, int peer, const void *dev,
                                        size_t bytes, int64_t deadline_ns,
                                        struct collie__ipc_rec *rec, int *shared);
/* *host: `need` bytes of the communicator's page-locked staging area, or
 * NULL where the call is over COLLIE_CUDA_STAGE_MAX or page-locking failed
 * (the caller stages through pageable memory: slower, still right). The
 * area is kept for the communicator's life: page-locking costs
 * milliseconds. One user at a time: blocking calls only. */
collie_result_t collie__stage_area(collie_comm_t *comm, const void *dev, size_t need, char **host);

/* ---- work.c ---- */

/* Issues a prepared op (work != NULL: queued for the worker, *work receives
 * the handle; work == NULL: runs now, on the caller's thread when nothing is
 * pending, else after the queue drained). A group (op NULL, g set) works the
 * same; a queued group is owned by the queue from then on. Errors: the run's
 * (blocking), SYSTEM_ERROR (no memory, no thread; the comm is poisoned, as
 * the op already took its sequence number). */
collie_result_t collie__work_issue(collie_comm_t *comm, struct collie__op *op,
                                   struct collie__group *g, collie_work_t **work);
/* Waits until comm's queue is empty: SUCCESS, or TIMEOUT with the error set
 * once quiet_ms pass without any queued operation completing (the bound is
 * per operation, not for the whole queue). Immediate when no worker was ever
 * started. */
collie_result_t collie__work_drain(collie_comm_t *comm, int64_t quiet_ms);
/* Stops and joins comm's worker (items still queued fail as the comm is
 * poisoned or with INVALID_USAGE "destroyed") and frees the queue. The caller
 * must have drained or poisoned/aborted comm first. */
void collie__work_stop(collie_comm_t *comm);
/* Waits for comm's posted sends and receives (work.c), each until its own
 * deadline (which fails it and the net), ending them all. */
void collie__work_finish_posted(collie_comm_t *comm);
/* The caller's thread uses comm's channels outside an operation (split's
 * exchange): it owns them meanwhile, so that no waiter of a posted send or
 * receive drives them too. No-ops without a worker. */
void collie__work_own_net(collie_comm_t *comm);
void collie__work_release_net(collie_comm_t *comm);
/* A handle that is already complete and successful (an operation that ran
 * to the end at issue: the device path's staged calls); NULL without memory. */
collie_work_t *collie__work_completed(void);

/* Returns from the calling function when expr is not SUCCESS (the public
 * entry points validate step by step, each step setting the message). */
#define API_TRY(expr)                                                                              \
  do {                                                                                             \
    collie_result_t rc_ = (expr);                                                                  \
    if (rc_ != COLLIE_SUCCESS) return rc_;                                                         \
  } while (0)

#endif /* COLLIE_CORE_H */
