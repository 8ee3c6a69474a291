/*
 * comm_state.c - what every call asks of a communicator before it runs: is it
 * live (the registry, so that a call on a destroyed one is an error, not a
 * crash) and is it usable (poisoning: after a failure during communication
 * every later call fails fast, quoting the first error). The bottom of
 * src/core: it calls nothing else of core, and comm.c's life cycle, api.c,
 * work.c and dispatch.c all call it.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* ---- Registry of live communicators ---- */

/* Every public call checks its communicator here, so lookups take no lock:
 * slots live in chunks that are allocated once and never move or go away,
 * a destroyed communicator's slot is cleared (never compacted, so a reader
 * cannot miss a live entry while another moves), and comm_reg_hi only grows.
 * Adding and removing are serialised by comm_reg_lock. */
#define COMM_REG_CHUNK 256
#define COMM_REG_CHUNKS 64 /* at most 16384 live communicators per process */

typedef _Atomic(collie_comm_t *) comm_reg_slot;
static pthread_mutex_t comm_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(comm_reg_slot *) comm_reg_chunks[COMM_REG_CHUNKS];
static _Atomic size_t comm_reg_hi; /* slots ever used */
static size_t comm_reg_live;       /* under comm_reg_lock */

static comm_reg_slot *
comm_reg_slot_at(size_t i)
{
  comm_reg_slot *chunk =
      atomic_load_explicit(&comm_reg_chunks[i / COMM_REG_CHUNK], memory_order_acquire);
  return &chunk[i % COMM_REG_CHUNK];
}

collie_result_t
collie__comm_register(collie_comm_t *c)
{
  int rc = 0;
  pthread_mutex_lock(&comm_reg_lock);
  size_t hi = atomic_load_explicit(&comm_reg_hi, memory_order_relaxed), i;
  for (i = 0; i < hi && atomic_load_explicit(comm_reg_slot_at(i), memory_order_relaxed); i++) {
  }
  if (i == hi) { /* no free slot: a new one, in a new chunk every COMM_REG_CHUNK */
    if (hi == (size_t)COMM_REG_CHUNK * COMM_REG_CHUNKS) {
      rc = -1;
    } else if (hi % COMM_REG_CHUNK == 0 &&
               !atomic_load_explicit(&comm_reg_chunks[hi / COMM_REG_CHUNK], memory_order_relaxed)) {
      comm_reg_slot *chunk = calloc(COMM_REG_CHUNK, sizeof(*chunk));
      if (!chunk)
        rc = -1;
      else
        atomic_store_explicit(&comm_reg_chunks[hi / COMM_REG_CHUNK], chunk, memory_order_release);
    }
  }
  if (rc == 0) {
    atomic_store_explicit(comm_reg_slot_at(i), c, memory_order_release);
    if (i == hi) atomic_store_explicit(&comm_reg_hi, hi + 1, memory_order_release);
    comm_reg_live++;
  }
  pthread_mutex_unlock(&comm_reg_lock);
  if (rc != 0)
    return collie__err(COLLIE_SYSTEM_ERROR,
                       "cannot register a communicator: out of memory, or %d live in this process",
                       COMM_REG_CHUNK * COMM_REG_CHUNKS);
  return COLLIE_SUCCESS;
}

int
collie__comm_unregister(const collie_comm_t *c)
{
  int found = 0;
  pthread_mutex_lock(&comm_reg_lock);
  size_t hi = atomic_load_explicit(&comm_reg_hi, memory_order_relaxed);
  for (size_t i = 0; i < hi && !found; i++)
    if (atomic_load_explicit(comm_reg_slot_at(i), memory_order_relaxed) == c) {
      atomic_store_explicit(comm_reg_slot_at(i), NULL, memory_order_release);
      comm_reg_live--;
      found = 1;
    }
  pthread_mutex_unlock(&comm_reg_lock);
  return found;
}

int
collie__comm_live(const collie_comm_t *c)
{
  size_t hi = atomic_load_explicit(&comm_reg_hi, memory_order_acquire);
  for (size_t i = 0; i < hi; i++)
    if (atomic_load_explicit(comm_reg_slot_at(i), memory_order_acquire) == c) return 1;
  return 0;
}

collie_result_t
collie__comm_check(const collie_comm_t *comm, const char *fn)
{
  if (!comm) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: comm is NULL", fn);
  if (!collie__comm_live(comm))
    return collie__err(COLLIE_INVALID_USAGE,
                       "%s: communicator %p was destroyed or never initialised", fn,
                       (const void *)comm);
  collie__log_context(comm->ctx);
  collie_result_t poisoned = collie__comm_poisoned(comm);
  if (poisoned != COLLIE_SUCCESS)
    return collie__err(COLLIE_INVALID_USAGE,
                       "%s: communicator is unusable after an earlier error (%s): %s", fn,
                       collie_result_string(poisoned), comm->poison_msg);
  return COLLIE_SUCCESS;
}

collie_result_t
collie__comm_poison(collie_comm_t *comm, collie_result_t rc)
{
  pthread_mutex_lock(&comm->poison_lock);
  if (atomic_load_explicit(&comm->poison_rc, memory_order_relaxed) == COLLIE_SUCCESS) {
    snprintf(comm->poison_msg, sizeof(comm->poison_msg), "%s", collie__err_msg());
    atomic_store_explicit(&comm->poison_rc, (int)rc, memory_order_release);
    COLLIE_WARN("COLL", "%s", comm->poison_msg);
  }
  pthread_mutex_unlock(&comm->poison_lock);
  return rc;
}

collie_result_t
collie__comm_poisoned(const collie_comm_t *comm)
{
  return (collie_result_t)atomic_load_explicit(&comm->poison_rc, memory_order_acquire);
}

/* ---- Flight recorder ---- */

void
collie__comm_flight_dump(collie_comm_t *comm, const char *reason)
{
  if (!comm->flight) return;
  char saved[COLLIE_ERRMSG_LEN];
  snprintf(saved, sizeof(saved), "%s", collie__err_msg()); /* keep the caller's diagnosis */
  if (collie__flight_dump_error(comm->flight, comm->params.LOG_DIR, reason, saved) !=
      COLLIE_SUCCESS)
    COLLIE_WARN("INIT", "flight recorder: %s", collie__err_msg());
  collie__err_set_text(saved);
}
