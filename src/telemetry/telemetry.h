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
  uint64_t comm_hash;
  uint32_t seq;      /* the comm's collective sequence number (p2p: the pair's counter) */
  const char *kind;  /* "allreduce", "send/recv", ... */
  const char *dtype; /* "float32" */
  const char *op;    /* "sum", or NULL when the collective does not reduce */
  const char *algo;  /* "ring", or NULL before selection */
  size_t count;      /* elements, as the caller passed */
  size_t bytes;      /* the caller's buffer size in bytes */
  int root;          /* root or peer; -1 when none */
};

struct collie__flight;

/* A recorder of `capacity` records for one rank of one communicator; NULL on
 * allocation failure (the caller then records nothing). */
struct collie__flight *collie__flight_new(int capacity, int rank, int size, uint64_t comm_hash);
void collie__flight_free(struct collie__flight *fr);

/* Records an issued operation in state QUEUED; returns its id (monotonic per
 * recorder), or -1 when fr is NULL. Never blocks, never allocates; safe to call
 * from the issuing thread while the worker thread updates other records. */
int64_t collie__flight_queued(struct collie__flight *fr, const struct collie__flight_op *op);
/* Moves record id to state (STARTED, COMPLETED or FAILED), with a timestamp;
 * algo may be set at STARTED (NULL keeps it). A record already overwritten by
 * newer ones is ignored. */
void collie__flight_state(struct collie__flight *fr, int64_t id, int state, const char *algo);

/* Writes the recorder as JSON to dir/flight-rank{rank}-{comm_hash as 16 hex
 * digits}.json (one file per communicator: ranks differ between a comm and its
 * splits), replacing it atomically (temp file + rename), with `reason`
 * ("timeout", "failure", "SIGUSR1", "user"); dir is created if missing (one
 * level). Format: docs/flight-recorder.md. Errors: SYSTEM_ERROR naming the
 * path; INVALID_ARGUMENT when fr is NULL. */
collie_result_t collie__flight_dump(struct collie__flight *fr, const char *dir, const char *reason);

/* SIGUSR1 makes every live recorder of the process dump itself to its
 * directory (registered with collie__flight_watch). The handler only flags;
 * a background thread writes. Idempotent; the watch ends at
 * collie__flight_unwatch (called before collie__flight_free). */
void collie__flight_watch(struct collie__flight *fr, const char *dir);
void collie__flight_unwatch(struct collie__flight *fr);

#endif /* COLLIE_TELEMETRY_H */
