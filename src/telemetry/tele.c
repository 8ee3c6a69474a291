/*
 * tele.c - a communicator tree's telemetry: the step accounting (steps.c)
 * and the timing log (timing.c) that every communicator of one
 * collie_comm_init shares with its splits, and the per-operation hooks the
 * core calls at issue and at completion.
 *
 * The timing log can be opened and closed while operations are in flight on
 * other threads, so hooks never hold a pointer to a log across the
 * operation: issue only decides whether a row is due, and completion takes
 * the log under the tree's lock, pushes (non-blocking) and lets go. That
 * lock is never held for I/O, so a push never waits for a file: open creates
 * the files before it installs the log, and a flush writes under open_lock
 * instead, which also keeps close (swap the log out, then stop it) from
 * freeing a log that is being written.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "telemetry/telemetry.h"
#include "util/error.h"
#include "util/util.h"

struct collie__tele {
  _Atomic int refs;
  struct collie__steps *steps;
  int rows;                      /* this rank writes comms.csv */
  pthread_mutex_t lock;          /* the timing pointer: held briefly, never for I/O */
  pthread_mutex_t open_lock;     /* serialises open, flush and close */
  struct collie__timing *timing; /* under lock */
  _Atomic int timing_on;
  struct collie__timing_cfg timing_cfg;
  char host[128];
};

collie_result_t
collie__tele_open(const struct collie__tele_cfg *cfg, struct collie__tele **out)
{
  collie_result_t rc;
  char path[1200];
  struct collie__tele *t = calloc(1, sizeof(*t));
  if (!t) return collie__err(COLLIE_SYSTEM_ERROR, "out of memory for telemetry");
  atomic_init(&t->refs, 1);
  pthread_mutex_init(&t->lock, NULL);
  pthread_mutex_init(&t->open_lock, NULL);
  snprintf(t->host, sizeof(t->host), "%s", cfg->host ? cfg->host : "");
  t->timing_cfg = (struct collie__timing_cfg){.rank = cfg->rank,
                                              .world_size = cfg->world_size,
                                              .host = t->host,
                                              .capacity = cfg->timing_queue,
                                              .flush_ms = cfg->timing_flush_ms};
  t->rows = cfg->rank == 0 && cfg->comms_log;
  const char *dir = cfg->log_dir && *cfg->log_dir ? cfg->log_dir : ".";
  snprintf(path, sizeof(path), "%s/comms.csv", dir);
  if (t->rows && collie__mkdir_p(dir) != 0) {
    rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "comms.csv: cannot create directory %s", dir);
    collie__tele_release(t);
    return rc;
  }
  rc = collie__steps_open(t->rows ? path : NULL, cfg->world_size, &t->steps);
  if (rc == COLLIE_SUCCESS && cfg->timing_dir && *cfg->timing_dir)
    rc = collie__tele_timing_open(t, cfg->timing_dir);
  if (rc != COLLIE_SUCCESS) {
    collie__tele_release(t);
    return rc;
  }
  *out = t;
  return COLLIE_SUCCESS;
}

void
collie__tele_retain(struct collie__tele *t)
{
  atomic_fetch_add(&t->refs, 1);
}

void
collie__tele_release(struct collie__tele *t)
{
  if (!t || atomic_fetch_sub(&t->refs, 1) != 1) return;
  collie__tele_timing_close(t);
  collie__steps_close(t->steps);
  pthread_mutex_destroy(&t->lock);
  pthread_mutex_destroy(&t->open_lock);
  free(t);
}

collie_result_t
collie__tele_step_begin(struct collie__tele *t, int64_t step, int64_t epoch)
{
  return collie__steps_begin(t->steps, step, epoch);
}

collie_result_t
collie__tele_step_end(struct collie__tele *t)
{
  return collie__steps_end(t->steps);
}

int
collie__tele_categories(const struct collie__tele *t)
{
  return collie__steps_categories(t->steps);
}

/* ---- The timing log ---- */

collie_result_t
collie__tele_timing_open(struct collie__tele *t, const char *dir)
{
  collie_result_t rc = COLLIE_SUCCESS;
  pthread_mutex_lock(&t->open_lock);
  struct collie__timing *log = t->timing; /* only open/close change it, under open_lock */
  if (log) {
    if (strcmp(collie__timing_dir(log), dir) != 0)
      rc = collie__err(COLLIE_INVALID_USAGE,
                       "collie_timing_open(\"%s\"): the timing log is already open in %s "
                       "(collie_timing_close it first)",
                       dir, collie__timing_dir(log));
  } else if ((rc = collie__timing_open(dir, &t->timing_cfg, &log)) == COLLIE_SUCCESS) {
    /* Files are opened outside t->lock: pushes never wait for I/O. */
    pthread_mutex_lock(&t->lock);
    t->timing = log;
    pthread_mutex_unlock(&t->lock);
    atomic_store(&t->timing_on, 1);
  }
  pthread_mutex_unlock(&t->open_lock);
  return rc;
}

collie_result_t
collie__tele_timing_flush(struct collie__tele *t)
{
  /* Under open_lock, not t->lock: the log cannot close meanwhile, and pushes
   * (which take only t->lock) go on while the file is written. */
  collie_result_t rc = COLLIE_SUCCESS;
  pthread_mutex_lock(&t->open_lock);
  if (t->timing) rc = collie__timing_flush(t->timing);
  pthread_mutex_unlock(&t->open_lock);
  return rc;
}

void
collie__tele_timing_close(struct collie__tele *t)
{
  pthread_mutex_lock(&t->open_lock);
  pthread_mutex_lock(&t->lock);
  struct collie__timing *log = t->timing;
  t->timing = NULL;
  atomic_store(&t->timing_on, 0);
  pthread_mutex_unlock(&t->lock);
  /* No push can reach the log now (they hold t->lock), nor a flush (open_lock). */
  collie__timing_close(log);
  pthread_mutex_unlock(&t->open_lock);
}

int
collie__tele_timing_on(const struct collie__tele *t)
{
  return atomic_load_explicit(&t->timing_on, memory_order_relaxed);
}

/* Queues rec if a log is open. */
static void
tele_push(struct collie__tele *t, const struct collie__timing_rec *rec)
{
  pthread_mutex_lock(&t->lock);
  if (t->timing) collie__timing_push(t->timing, rec);
  pthread_mutex_unlock(&t->lock);
}

/* ---- Per operation ---- */

/* Copies src (NULL: def) into dst[cap], truncating; snprintf costs more than
 * the whole queue push on this path. */
static void
tele_copy(char *dst, size_t cap, const char *src, const char *def)
{
  if (!src || !*src) src = def;
  size_t n = strnlen(src, cap - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
}

void
collie__tele_row_init(struct collie__timing_rec *rec, const char *opname, uint64_t size,
                      int category, const char *label, const char *phase)
{
  tele_copy(rec->op, sizeof(rec->op), opname, "");
  tele_copy(rec->layer, sizeof(rec->layer), label, "");
  tele_copy(rec->phase, sizeof(rec->phase), phase, "dense");
  rec->size = size;
  rec->category = category;
}

int
collie__tele_wanted(const struct collie__tele *t)
{
  return collie__tele_timing_on(t) || (t->rows && collie__steps_in_step(t->steps));
}

void
collie__tele_issue(struct collie__tele *t, struct collie__tele_op *op, const char *label,
                   const char *phase, int64_t now)
{
  op->active = 1;
  op->timed = collie__tele_timing_on(t);
  op->t0_ns = now;
  op->acc =
      collie__steps_charge(t->steps, op->tc, op->category, op->wire, &op->iteration, &op->epoch);
  if (op->timed && op->opname)
    collie__tele_row_init(&op->row, op->opname, op->size, op->category, label, phase);
}

void
collie__tele_push_row(struct collie__tele *t, const struct collie__tele_op *op,
                      struct collie__timing_rec *rec, int64_t end_ns)
{
  rec->iteration = op->iteration;
  rec->epoch = op->epoch;
  rec->start = (double)op->t0_ns / 1e9;
  rec->end = (double)end_ns / 1e9;
  tele_push(t, rec);
}

void
collie__tele_complete(struct collie__tele *t, struct collie__tele_op *op, int failed, int64_t now)
{
  if (!op->active) return;
  op->active = 0;
  collie__steps_done(t->steps, op->acc, op->tc, now - op->t0_ns);
  op->acc = NULL;
  if (op->timed && op->opname) collie__tele_push_row(t, op, &op->row, now);
  if (failed && op->timed) { /* the caller is reporting the failure: keep its message */
    char saved[COLLIE_ERRMSG_LEN];
    snprintf(saved, sizeof(saved), "%s", collie__err_msg());
    collie__tele_timing_flush(t);
    collie__err_set_text(saved);
  }
}

void
collie__tele_user_record(struct collie__tele *t, const char *opname, const char *layer,
                         const char *phase, uint64_t size, double start, double end)
{
  if (!collie__tele_timing_on(t)) return;
  struct collie__timing_rec rec;
  collie__tele_row_init(&rec, opname, size, -1, layer, phase);
  collie__steps_numbers(t->steps, &rec.iteration, &rec.epoch);
  rec.start = start;
  rec.end = end;
  tele_push(t, &rec);
}
