/*
 * bootstrap.h - what ranks use to find each other: a small key-value store
 * (tcp served by rank 0, or files in a shared directory), the launcher's
 * environment (collierun, torchrun, Slurm, Open MPI, MPICH/PMI) and the host
 * identity that decides which peers share memory.
 *
 * The store is Gloo's Store in C. Keys are short strings ([A-Za-z0-9_./:-]),
 * values are byte strings of at most COLLIE_STORE_MAX_VALUE bytes. It is used at
 * init and split (and by the transports' setup then) only, never on the hot path.
 */
#ifndef COLLIE_BOOTSTRAP_H
#define COLLIE_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "collie.h"

#define COLLIE_STORE_MAX_KEY 256
#define COLLIE_STORE_MAX_VALUE (1u << 20)

typedef struct collie__store collie__store_t;

struct collie__store_ops {
  const char *scheme; /* "tcp", "file", "prefix", "user" (the caller's callbacks) */
  /* Sets key to value (copied), replacing an old value. Blocks until the store has it
   * or deadline_ns passes. Errors: TIMEOUT, REMOTE_ERROR (server gone), SYSTEM_ERROR. */
  collie_result_t (*set)(collie__store_t *s, const char *key, const void *val, size_t len,
                         int64_t deadline_ns);
  /* Waits until key exists or deadline_ns passes, then returns a malloc'd copy of its
   * value in *val (caller frees) and its length. Errors: TIMEOUT (naming the key),
   * REMOTE_ERROR, SYSTEM_ERROR. */
  collie_result_t (*get)(collie__store_t *s, const char *key, void **val, size_t *len,
                         int64_t deadline_ns);
  /* Atomically adds delta to the integer counter at key (absent: 0) and returns the new
   * value in *out. Errors as set. */
  collie_result_t (*add)(collie__store_t *s, const char *key, int64_t delta, int64_t *out,
                         int64_t deadline_ns);
  /* Frees the client side; for the serving rank, stops the server. Never blocks long. */
  void (*close)(collie__store_t *s);
  /* Optional (NULL: the store keeps every key for its life). Removes every key
   * that starts with prefix (non-empty), so that a communicator gone leaves
   * nothing behind. Errors as set. */
  collie_result_t (*del_prefix)(collie__store_t *s, const char *prefix, int64_t deadline_ns);
};

/* Every store starts with this header; implementations embed it first. */
struct collie__store {
  const struct collie__store_ops *ops;
  int refs; /* stores are shared by a comm and the comms split from it */
};

/* Opens the store named by url: "tcp://host:port" (rank 0 serves it on that
 * address; others connect, retrying until deadline_ns) or "file:///abs/dir"
 * (created if missing, mode 0700). Every connection to a tcp store proves it
 * knows token; one that does not is refused and logged. For the file store,
 * the token names a subdirectory, so jobs sharing a directory do not mix.
 * Errors: INVALID_ARGUMENT (malformed url, naming it), TIMEOUT, REMOTE_ERROR
 * (token refused), SYSTEM_ERROR (port in use, directory not writable). */
collie_result_t collie__store_open(const char *url, int rank, int size, const char *token,
                                   int64_t deadline_ns, collie__store_t **out);
/* As collie__store_open, where serve says whether this process starts the
 * tcp store's server (collie__store_open: rank 0 does). 0 on every rank
 * when a server runs at the address already (collierun's, which outlives
 * any rank: COLLIE_STORE_SERVE=0). */
collie_result_t collie__store_open_serving(const char *url, int rank, int size, const char *token,
                                           int serve, int64_t deadline_ns, collie__store_t **out);
/* The caller's store (collie_config_t.store_callbacks, copied): set, get and add
 * go to its callbacks with the time left until their deadline; closing it calls
 * release. Errors: INVALID_ARGUMENT (a required callback is NULL). */
collie_result_t collie__store_user_open(const collie_store_callbacks_t *cb, collie__store_t **out);
/* A view of base whose keys are prefixed with "<prefix>/". Takes a reference
 * on base; closing the view drops it. */
collie_result_t collie__store_prefix(collie__store_t *base, const char *prefix,
                                     collie__store_t **out);
/* The store below every prefix view of s (s itself when it is none);
 * borrowed: s's views hold it. */
collie__store_t *collie__store_root(collie__store_t *s);
/* Reference counting: retain adds one, release drops one and closes at zero. */
void collie__store_retain(collie__store_t *s);
void collie__store_release(collie__store_t *s);

/* Convenience wrappers that dispatch through ops. */
static inline collie_result_t
collie__store_del_prefix(collie__store_t *s, const char *prefix, int64_t dl)
{
  return s->ops->del_prefix ? s->ops->del_prefix(s, prefix, dl) : COLLIE_SUCCESS;
}
static inline collie_result_t
collie__store_set(collie__store_t *s, const char *k, const void *v, size_t n, int64_t dl)
{
  return s->ops->set(s, k, v, n, dl);
}
static inline collie_result_t
collie__store_get(collie__store_t *s, const char *k, void **v, size_t *n, int64_t dl)
{
  return s->ops->get(s, k, v, n, dl);
}
static inline collie_result_t
collie__store_add(collie__store_t *s, const char *k, int64_t d, int64_t *out, int64_t dl)
{
  return s->ops->add(s, k, d, out, dl);
}

/* ---- exit_note.c: how a rank of the job ended, for its peers ----
 *
 * A launcher that sees one of its ranks fail (collierun) notes it in the
 * job's store, at the root (collie__store_root), under
 * "collie/exit/<world rank>": a counter holding the rank's exit code + 1
 * (its exit status, or 128 + the signal that killed it), and counts the
 * notes in "collie/exits". A rank waiting
 * for a peer on another host, whose network says nothing of a dead
 * process (libfabric's reliable datagrams), reads the note. */

/* Notes that world_rank ended with code (0..255). Errors as the store's add. */
collie_result_t collie__exit_note_set(collie__store_t *root, int world_rank, int code,
                                      int64_t deadline_ns);
/* How many notes there are ("collie/exits", counted after each note's own
 * key): 0 with *count set, -1 when the store did not answer by deadline_ns. */
int collie__exit_note_count(collie__store_t *root, int64_t *count, int64_t deadline_ns);
/* world_rank's note: 1 with *code set, 0 when there is none, -1 when the
 * store did not answer by deadline_ns (the thread's error says why). */
int collie__exit_note_get(collie__store_t *root, int world_rank, int *code, int64_t deadline_ns);
/* "exit with status 3", "killed by signal 9 (Killed)" for a code (128 + n:
 * signal n), to follow "saw it". */
void collie__exit_note_describe(int code, char *buf, size_t len);

/* ---- ring.c: the bootstrap ring ----
 *
 * What a communicator of many ranks exchanges at init without the store
 * serving everyone's records to everyone (N x N records through rank 0's
 * store): each rank listens, publishes its address under "ring/<rank>",
 * reads only the next rank's, and connects to it; the records then travel
 * around the ring of the ranks' own sockets, N-1 steps (NCCL's bootstrap
 * ring, in C). The store serves 2 records a rank. The listener stays open
 * for the transports to take (tcp accepts its peers on it). */
typedef struct collie__ring collie__ring_t;

#define COLLIE_RING_ADDR_LEN 64

/* Listens (on ifname's address, else the first non-loopback IPv4 address,
 * else loopback), publishes, connects to the next rank and accepts the
 * previous one, each side proving the job token (a connection that does
 * not is closed, and the ring waits for the right one). Errors: TIMEOUT
 * naming the rank it waited for, SYSTEM_ERROR, REMOTE_ERROR. */
collie_result_t collie__ring_open(collie__store_t *store, int rank, int size, const char *token,
                                  const char *ifname, int64_t deadline_ns, collie__ring_t **out);
/* Every rank's `len` bytes into all (size x len, in rank order); mine is
 * this rank's. size-1 steps around the ring. Errors: TIMEOUT (naming the
 * previous rank and the step), REMOTE_ERROR (a rank closed the ring). */
collie_result_t collie__ring_allgather(collie__ring_t *r, const void *mine, size_t len, void *all,
                                       int64_t deadline_ns);
/* This rank's listen address ("host:port") and listening socket (owned by
 * the ring: a taker dups it). */
const char *collie__ring_addr(const collie__ring_t *r);
int collie__ring_listener(const collie__ring_t *r);
/* Closes the ring's sockets (NULL: nothing). */
void collie__ring_close(collie__ring_t *r);

/* ---- env.c: which launcher started us ---- */

struct collie__launch {
  int rank, size;             /* required */
  int local_rank, local_size; /* -1 when the launcher does not say */
  char store[512];            /* store url, "" when none was found */
  char token[256];            /* job token, "" when none was found */
  const char *source;         /* "collierun", "torchrun", "slurm", "openmpi", "pmi" */
};

/* Reads the environment in this order: COLLIE_RANK/COLLIE_WORLD_SIZE, torchrun
 * (RANK/WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_RANK/SIZE), PMI (PMI_RANK/PMI_SIZE),
 * Slurm (SLURM_PROCID/SLURM_NTASKS) last, because mpirun inside a Slurm
 * allocation inherits the allocation's SLURM_PROCID. The store comes from
 * COLLIE_STORE, else MASTER_ADDR+MASTER_PORT ("tcp://addr:port"). The token comes
 * from COLLIE_JOB_TOKEN, else from the launcher's job id (TORCHELASTIC_RUN_ID,
 * SLURM_JOB_ID.SLURM_STEP_ID, ...), else from the store address. getenv_fn lets
 * tests pass a fake environment (NULL: getenv). Errors: INVALID_ARGUMENT naming
 * the variable when none is set, a value is malformed (not an integer, rank >=
 * size, size <= 0) or half a pair is missing. */
collie_result_t collie__launch_detect(struct collie__launch *out,
                                      const char *(*getenv_fn)(const char *name));

/* ---- hostid.c ---- */

/* Writes this host's identity: override when not NULL/empty (COLLIE_HOST_ID: tests
 * use it to fake several hosts on one machine), else "<hostname>/<boot_id>" from
 * /proc/sys/kernel/random/boot_id (never from LOCAL_WORLD_SIZE or similar).
 * Ranks with equal identities share memory. */
void collie__host_id(const char *override, char *out, size_t len);

/* Writes the running kernel's boot id ("" when unreadable): equal on every
 * network namespace and container of one machine, so it tells which ranks
 * compete for the same cores whatever their host identities say. */
void collie__machine_id(char *out, size_t len);

#endif /* COLLIE_BOOTSTRAP_H */
