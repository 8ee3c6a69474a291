/*
 * telemetry.h - what collie records about its own operations. This header
 * is the contract between src/core (which calls these hooks) and the
 * telemetry module (which implements them); telemetry depends on util only.
 *
 * Flight recorder: each communicator keeps its last N operations (N =
 * COLLIE_FR_SIZE) in a ring: id, communicator, sequence number, collective,
 * dtype, count, root/peer, algorithm, state and timestamps. It is dumped as
 * JSON (COLLIE_LOG_DIR/flight-rank{i}-{comm hash}.json) when an operation times out or
 * fails, on SIGUSR1, and by collie_flight_dump(); tools/collie-report reads
 * the dumps of all ranks and says who is stuck where.
 *
 * Accounting (docs/telemetry.md): every communicator created by one
 * collie_comm_init shares one struct collie__tele with its splits. It knows the
 * open training step, charges each operation its wire-model bytes and time
 * (comms.csv rows, written by rank 0: steps.c), and queues one row per
 * operation for the timing log (timing.c). The core describes an operation in
 * telemetry's own terms (struct collie__tele_op), so this module needs
 * nothing above util.
 */
#ifndef COLLIE_TELEMETRY_H
#define COLLIE_TELEMETRY_H

#include <stddef.h>
#include <stdint.h>

#include "collie.h"

enum { COLLIE_FR_QUEUED = 0, COLLIE_FR_STARTED, COLLIE_FR_COMPLETED, COLLIE_FR_FAILED };

/* What the core knows about an operation when it is issued. Strings are
 * static (kind and algorithm names) and are copied by pointer. */
struct collie__flight_op {
  uint32_t seq;      /* the comm's collective sequence number (p2p: the pair's counter) */
  const char *kind;  /* "allreduce", "send/recv", ... */
  const char *dtype; /* "float32" */
  const char *op;    /* "sum", or NULL when the collective does not reduce */
  const char *algo;  /* "ring", or NULL before selection */
  size_t count;      /* elements, as the caller passed */
  size_t bytes;      /* the caller's buffer size in bytes */
  int root;          /* root or peer; -1 when none */
  int started;       /* runs at once on the issuing thread: STARTED at queue time,
                        said by the issuer's half (no runner's half written until done) */
};

struct collie__flight;

/* A recorder of `capacity` records for one rank of one communicator; NULL on
 * allocation failure (the caller then records nothing). */
struct collie__flight *collie__flight_new(int capacity, int rank, int size, uint64_t comm_hash);
void collie__flight_free(struct collie__flight *fr);
/* Gives the recorder each rank's world rank (size entries, copied), so that a
 * dump of a split names ranks as the job knows them; without it, or on
 * allocation failure, the dump leaves the map out. */
void collie__flight_set_world(struct collie__flight *fr, const int *world);
/* Gives the recorder each rank's host: host_of[size] indexes names[nhosts]
 * (host names, each cut at its first '/': the hostname of a host identity).
 * A dump then says where each rank ran, so that collie-report can tell a
 * lost host or link from a lost rank. Copied; on allocation failure the
 * dump leaves them out. */
void collie__flight_set_hosts(struct collie__flight *fr, const int *host_of, int nhosts,
                              const char *const *names);

/* Records an issued operation in state QUEUED; returns its id (monotonic per
 * recorder), or -1 when fr is NULL. Never blocks, never allocates; safe to call
 * from the issuing thread while the worker thread updates other records. */
int64_t collie__flight_queued(struct collie__flight *fr, const struct collie__flight_op *op);
/* Moves record id to state (STARTED, COMPLETED or FAILED), with a timestamp;
 * algo may be set at STARTED (NULL keeps it). A record already overwritten by
 * newer ones is ignored. */
void collie__flight_state(struct collie__flight *fr, int64_t id, int state, const char *algo);
/* The same with the time (collie__now_ns()) given: the core reads the clock
 * once per event and shares it with telemetry and the deadline. */
int64_t collie__flight_queued_at(struct collie__flight *fr, const struct collie__flight_op *op,
                                 int64_t now);
/* The same with seq and started given apart from the rest of the record
 * (shape's own seq and started are ignored): the dispatcher's memo keeps one
 * shape per collective and each call adds its own. */
int64_t collie__flight_queued_as(struct collie__flight *fr, const struct collie__flight_op *shape,
                                 uint32_t seq, int started, int64_t now);
void collie__flight_state_at(struct collie__flight *fr, int64_t id, int state, const char *algo,
                             int64_t now);
/* The same for a call recorded as started at issue (its issuer ran it) that
 * completed: one store, no state to check (flight.c: t_end). */
void collie__flight_end_at_issue(struct collie__flight *fr, int64_t id, int64_t now);

/* Writes the recorder as JSON to dir/flight-rank{rank}-{comm_hash as 16 hex
 * digits}.json (one file per communicator: ranks differ between a comm and its
 * splits), replacing it atomically (temp file + rename), with `reason`
 * ("timeout", "failure", "SIGUSR1", "user"); dir is made if missing, one level
 * (its parent must exist). Format: docs/flight-recorder.md. Errors: SYSTEM_ERROR naming the
 * path; INVALID_ARGUMENT when fr is NULL. */
collie_result_t collie__flight_dump(struct collie__flight *fr, const char *dir, const char *reason);
/* The same, with the error that made the rank dump (its message, naming the
 * operation and the peer) in the dump's "error" field; NULL or "" leaves it out. */
collie_result_t collie__flight_dump_error(struct collie__flight *fr, const char *dir,
                                          const char *reason, const char *error);

/* SIGUSR1 makes every live recorder of the process dump itself to its
 * directory (registered with collie__flight_watch). The handler only flags;
 * a background thread writes. Idempotent; the watch ends at
 * collie__flight_unwatch (called before collie__flight_free). */
void collie__flight_watch(struct collie__flight *fr, const char *dir);
void collie__flight_unwatch(struct collie__flight *fr);

/* ---- wire.c: the collectives comms.csv tracks (collie.h's collie_collective_t,
 * COLLIE_COLLECTIVE_MAP), and the wire model ---- */

/* "all_reduce", ... as in comms.csv column names. */
const char *collie__tc_column(int tc);
/* Estimated bytes one rank moves for a call of collective tc on p ranks whose
 * caller buffer is `size` bytes (what `size` means per collective:
 * docs/telemetry.md). The v-variants are charged by the core directly. */
uint64_t collie__wire_bytes(int tc, int p, uint64_t size);

/* ---- category.c: payload categories ---- */

/* Built-in and registered categories so far (ids 0..n-1). */
int collie__category_count(void);
/* "moments_mu", ... (the comms.csv column without bytes_); NULL for an unknown id. */
const char *collie__category_name(int id);

/* ---- csvfile.c: append-only CSV files with a fixed header ---- */

/* Opens path for appending (O_APPEND; created 0644 if missing). A new or empty
 * file gets header (plus a newline); an existing one must start with exactly
 * that header line, else INVALID_USAGE naming the path and the first column
 * that differs (the file is left untouched). Returns the descriptor in *fd.
 * Errors also: SYSTEM_ERROR naming the path. */
collie_result_t collie__csv_open(const char *path, const char *header, int *fd);
/* What collie__csv_open would refuse, without making or changing anything:
 * an existing path with another header (INVALID_USAGE), or a missing one
 * whose directory cannot take a new file (SYSTEM_ERROR). For files made at
 * their first row, whose errors still belong at the start. */
collie_result_t collie__csv_check(const char *path, const char *header);
/* Writes all of buf[0..len) with one write(2) when possible (a row never
 * interleaves with another writer's on O_APPEND); 0 or -1 with errno. */
int collie__csv_write(int fd, const char *buf, size_t len);
/* Appends field to out (capacity cap, NUL-terminated, truncating), quoted as
 * CSV requires when it holds a comma, a quote or a line break. Returns the
 * new length. */
size_t collie__csv_field(char *out, size_t len, size_t cap, const char *field);

/* ---- timing.c: the per-rank timing log ---- */

/* One row of timing-rank{i}.csv (strings truncated to their arrays). */
struct collie__timing_rec {
  double start, end; /* CLOCK_MONOTONIC seconds */
  int64_t iteration, epoch;
  uint64_t size;
  int category; /* payload category id, or -1 for a user record */
  char op[32];
  char phase[32];
  char layer[128];
};

/* The largest queue a timing log takes, in records (~250 bytes each, all
 * allocated and initialised at open: 1,000,000 is ~250 MB per rank). */
#define COLLIE_TIMING_QUEUE_MAX 1000000

struct collie__timing_cfg {
  int rank, world_size;
  const char *host; /* written to the .meta sidecar */
  int64_t capacity; /* queue capacity in records (> 0) */
  int64_t flush_ms; /* background drain period (> 0) */
};

struct collie__timing;

/* Opens dir/timing-rank{rank}.csv (+ .meta, .categories.csv; dir created with
 * its parents), allocates the queue and starts the drain thread. Errors:
 * SYSTEM_ERROR naming the path, INVALID_USAGE (existing file, other header). */
collie_result_t collie__timing_open(const char *dir, const struct collie__timing_cfg *cfg,
                                    struct collie__timing **out);
/* Queues rec; never blocks, never allocates. Returns 0, or -1 when the queue
 * is full (the record is dropped and counted). Safe from any thread. */
int collie__timing_push(struct collie__timing *t, const struct collie__timing_rec *rec);
/* Writes everything queued now (blocks on the file writes). */
collie_result_t collie__timing_flush(struct collie__timing *t);
/* Stops the thread, flushes, warns when records were dropped, frees. The
 * caller guarantees no push runs concurrently. NULL is a no-op. */
void collie__timing_close(struct collie__timing *t);
const char *collie__timing_dir(const struct collie__timing *t);

/* ---- steps.c: per-step accounting and comms.csv ---- */

struct collie__steps;
struct collie__step_acc; /* one step's sums */

/* Step accounting for a tree of world size world_size; when path is not NULL
 * (rank 0, COLLIE_COMMS_LOG=1) rows are appended to it, with a header of the
 * ncat categories that exist now. The file is made at the first step (a job
 * that never opens one leaves none behind); what would stop it is refused
 * here (collie__csv_check's errors), and at that step collie__csv_open's. */
collie_result_t collie__steps_open(const char *path, int world_size, struct collie__steps **out);
/* Writes the rows of ended steps whose operations are all done and then, if a
 * step is still open, that step as it stands; frees. NULL is a no-op. */
void collie__steps_close(struct collie__steps *s);
/* INVALID_ARGUMENT / INVALID_USAGE as collie_step_begin/end document. */
collie_result_t collie__steps_begin(struct collie__steps *s, int64_t step, int64_t epoch);
collie_result_t collie__steps_end(struct collie__steps *s);
/* Whether a step is open (a racy hint for the fast path). */
int collie__steps_in_step(const struct collie__steps *s);
/* The open step's numbers (iteration 0 outside a step) and, when rows are
 * written and a step is open, charges it wire bytes of tc in category and
 * returns it with one more operation pending (else NULL). */
struct collie__step_acc *collie__steps_charge(struct collie__steps *s, int tc, int category,
                                              uint64_t wire, int64_t *iteration, int64_t *epoch);
/* Moves bytes of acc's charge from category `from` to `to` (a sparse
 * allreduce's index bytes to COLLIE_CAT_TOPR_INDICES). acc NULL: no-op. */
void collie__steps_recharge(struct collie__steps *s, struct collie__step_acc *acc, int from, int to,
                            uint64_t bytes);
/* The open step's numbers only (iteration 0 outside a step). */
void collie__steps_numbers(struct collie__steps *s, int64_t *iteration, int64_t *epoch);
/* Adds an operation's time to acc and ends its pending count; writes the
 * rows that became complete. acc NULL is a no-op. */
void collie__steps_done(struct collie__steps *s, struct collie__step_acc *acc, int tc, int64_t ns);
/* Categories the tree's columns know (ids >= this are refused by the core). */
int collie__steps_categories(const struct collie__steps *s);
int collie__steps_world_size(const struct collie__steps *s);

/* ---- Outputs: what a communicator tree writes about its operations ----
 *
 * tele.c hands every operation to each output of its table (tele_outputs[]),
 * in order: issue on the issuing thread, complete on whichever thread ran the
 * operation, possibly concurrently with other operations' hooks. An output
 * keeps its own state, made by open for each tree. A new output (JSON lines,
 * a trace) is one file with its struct and one line in that table; what it
 * needs of each operation is in struct collie__tele_op. */

/* What a tree records, from the communicator's parameters. */
struct collie__tele_cfg {
  const char *log_dir;    /* COLLIE_LOG_DIR */
  int comms_log;          /* COLLIE_COMMS_LOG */
  const char *timing_dir; /* COLLIE_TIMING_LOG (NULL: closed) */
  int rank, world_size;
  const char *host;
  int64_t timing_queue, timing_flush_ms;
};

/* One operation as telemetry sees it; filled at issue, finished at completion. */
struct collie__tele_op {
  int tc;              /* collie_collective_t */
  int category;        /* payload category id */
  const char *opname;  /* "ALLREDUCE", ... (static); NULL: no timing row of its own */
  uint64_t size;       /* the caller's buffer bytes */
  uint64_t wire;       /* wire-model bytes */
  uint64_t index_wire; /* of those, a sparse allreduce's indices: COLLIE_CAT_TOPR_INDICES's */
  /* set by collie__tele_issue */
  int active;                      /* anything to record at completion */
  int64_t t0_ns, iteration, epoch; /* the step's numbers: comms.csv's issue, else tele.c */
  /* each output's own */
  struct collie__step_acc *acc;  /* comms.csv: the step charged, its time due */
  int timed;                     /* timing log: a row is due at completion */
  struct collie__timing_rec row; /* its text fields, stamped at completion */
};

/* Every output's state starts with this, so that tele.c asks "would anyone
 * record an operation issued now?" with a load per output and no call. */
struct collie__tele_out_head {
  _Atomic int wanted; /* a racy hint, kept current by the output */
};

struct collie__tele_output {
  const char *name;
  /* The output's state for a tree with cfg (starting with a struct
   * collie__tele_out_head whose wanted it keeps current: whether an operation
   * issued now would be recorded here, asked before the core even describes
   * the operation): SUCCESS, or the error (the tree is not made; close is
   * called on the states already made). */
  collie_result_t (*open)(const struct collie__tele_cfg *cfg, void **self);
  /* op was issued (its description and t0_ns set; label and phase are the
   * caller's, valid during the call only). Called only when wanted was set.
   * Never blocks, never allocates. */
  void (*issue)(void *self, struct collie__tele_op *op, const char *label, const char *phase);
  /* op ended at now (failed: with an error, whose message must survive).
   * Called for every output, wanted at issue or not: an output checks its own
   * fields of op. Never blocks on I/O except to flush after a failure. */
  void (*complete)(void *self, struct collie__tele_op *op, int failed, int64_t now);
  /* Writes what is due now. */
  collie_result_t (*flush)(void *self);
  /* Writes what is pending and frees (the tree's last communicator went). */
  void (*close)(void *self);
};

extern const struct collie__tele_output collie__tele_comms_output;  /* steps.c: comms.csv */
extern const struct collie__tele_output collie__tele_timing_output; /* tele_timing.c */

/* The timing log output's own calls (it opens and closes at any time). */
struct collie__tele_timing;
collie_result_t collie__tele_timing_log_open(struct collie__tele_timing *t, const char *dir);
collie_result_t collie__tele_timing_log_flush(struct collie__tele_timing *t);
void collie__tele_timing_log_close(struct collie__tele_timing *t);
int collie__tele_timing_log_on(const struct collie__tele_timing *t);
/* Queues rec if the log is open (never blocks). */
void collie__tele_timing_log_push(struct collie__tele_timing *t,
                                  const struct collie__timing_rec *rec);

/* ---- tele.c: what a communicator tree records ---- */

struct collie__tele;

/* Opens the tree's telemetry (comms.csv on rank 0 when comms_log; the timing
 * log when timing_dir). Errors: those of collie__csv_open and timing_open. */
collie_result_t collie__tele_open(const struct collie__tele_cfg *cfg, struct collie__tele **out);
void collie__tele_retain(struct collie__tele *t);
/* The last release writes what is pending and frees. NULL is a no-op. */
void collie__tele_release(struct collie__tele *t);
collie_result_t collie__tele_step_begin(struct collie__tele *t, int64_t step, int64_t epoch);
collie_result_t collie__tele_step_end(struct collie__tele *t);
/* Categories the tree's comms.csv has columns for. */
int collie__tele_categories(const struct collie__tele *t);
collie_result_t collie__tele_timing_open(struct collie__tele *t, const char *dir);
collie_result_t collie__tele_timing_flush(struct collie__tele *t);
void collie__tele_timing_close(struct collie__tele *t);

/* Whether an operation issued now would record anything (a racy hint: the
 * core skips describing the operation when not). */
int collie__tele_wanted(const struct collie__tele *t);
/* For an op issued when collie__tele_wanted said yes (else the caller sets
 * op->active = 0 and skips describing it): stamps its start and step,
 * charges the step, and prepares the timing row (label and phase copied:
 * the caller's strings need not outlive the call). */
void collie__tele_issue(struct collie__tele *t, struct collie__tele_op *op, const char *label,
                        const char *phase, int64_t now);
/* Ends op: time to the step, the row to the timing log (and, when failed,
 * flushes the log so a crash after a failure loses nothing). */
void collie__tele_complete(struct collie__tele *t, struct collie__tele_op *op, int failed,
                           int64_t now);
/* Whether a timing log is open (a racy hint: the row may still be refused). */
int collie__tele_timing_on(const struct collie__tele *t);
/* Fills rec's text fields, size and category for a row to be finished by
 * collie__tele_push_row. */
void collie__tele_row_init(struct collie__timing_rec *rec, const char *opname, uint64_t size,
                           int category, const char *label, const char *phase);
/* Stamps rec with op's step and times (t0 = op's start, now = its end) and
 * queues it. For the members of a send/recv group, whose op (opname NULL)
 * writes no row itself. */
void collie__tele_push_row(struct collie__tele *t, const struct collie__tele_op *op,
                           struct collie__timing_rec *rec, int64_t end_ns);
/* Queues a user record (collie_timing_record); no log open: nothing. */
void collie__tele_user_record(struct collie__tele *t, const char *op, const char *layer,
                              const char *phase, uint64_t size, double start, double end);

#endif /* COLLIE_TELEMETRY_H */
