/*
 * tele_timing.c - a communicator tree's timing log (timing-rank{i}.csv, the
 * files and queue of timing.c) as one of the tree's outputs: a row per
 * operation, pushed when it completes.
 *
 * The log can be opened and closed while operations are in flight on other
 * threads, so an operation never holds a pointer to a log: issue only
 * decides whether a row is due (and copies its text), and completion takes
 * the log under the output's lock, pushes (non-blocking) and lets go. That
 * lock is never held for I/O, so a push never waits for a file: open creates
 * the files before it installs the log, and a flush writes under open_lock
 * instead, which also keeps close (swap the log out, then stop it) from
 * freeing a log that is being written.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "telemetry/telemetry.h"
#include "util/error.h"

struct collie__tele_timing {
  struct collie__tele_out_head head; /* wanted: a log is open */
  pthread_mutex_t lock;              /* the timing pointer: held briefly, never for I/O */
  pthread_mutex_t open_lock;         /* serialises open, flush and close */
  struct collie__timing *timing;     /* under lock */
  struct collie__timing_cfg cfg;
  char host[128];
};

static collie_result_t
timing_out_open(const struct collie__tele_cfg *cfg, void **out)
{
  struct collie__tele_timing *t = calloc(1, sizeof(*t));
  if (!t) return collie__err(COLLIE_SYSTEM_ERROR, "out of memory for the timing log");
  pthread_mutex_init(&t->lock, NULL);
  pthread_mutex_init(&t->open_lock, NULL);
  snprintf(t->host, sizeof(t->host), "%s", cfg->host ? cfg->host : "");
  t->cfg = (struct collie__timing_cfg){.rank = cfg->rank,
                                       .world_size = cfg->world_size,
                                       .host = t->host,
                                       .capacity = cfg->timing_queue,
                                       .flush_ms = cfg->timing_flush_ms};
  *out = t;
  if (!cfg->timing_dir || !*cfg->timing_dir) return COLLIE_SUCCESS;
  return collie__tele_timing_log_open(t, cfg->timing_dir);
}

collie_result_t
collie__tele_timing_log_open(struct collie__tele_timing *t, const char *dir)
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
  } else if ((rc = collie__timing_open(dir, &t->cfg, &log)) == COLLIE_SUCCESS) {
    /* Files are opened outside t->lock: pushes never wait for I/O. */
    pthread_mutex_lock(&t->lock);
    t->timing = log;
    pthread_mutex_unlock(&t->lock);
    atomic_store(&t->head.wanted, 1);
  }
  pthread_mutex_unlock(&t->open_lock);
  return rc;
}

static collie_result_t
timing_out_flush(void *self)
{
  struct collie__tele_timing *t = self;
  /* Under open_lock, not t->lock: the log cannot close meanwhile, and pushes
   * (which take only t->lock) go on while the file is written. */
  collie_result_t rc = COLLIE_SUCCESS;
  pthread_mutex_lock(&t->open_lock);
  if (t->timing) rc = collie__timing_flush(t->timing);
  pthread_mutex_unlock(&t->open_lock);
  return rc;
}

collie_result_t
collie__tele_timing_log_flush(struct collie__tele_timing *t)
{
  return timing_out_flush(t);
}

void
collie__tele_timing_log_close(struct collie__tele_timing *t)
{
  pthread_mutex_lock(&t->open_lock);
  pthread_mutex_lock(&t->lock);
  struct collie__timing *log = t->timing;
  t->timing = NULL;
  atomic_store(&t->head.wanted, 0);
  pthread_mutex_unlock(&t->lock);
  /* No push can reach the log now (they hold t->lock), nor a flush (open_lock). */
  collie__timing_close(log);
  pthread_mutex_unlock(&t->open_lock);
}

static void
timing_out_close(void *self)
{
  struct collie__tele_timing *t = self;
  if (!t) return;
  collie__tele_timing_log_close(t);
  pthread_mutex_destroy(&t->lock);
  pthread_mutex_destroy(&t->open_lock);
  free(t);
}

int
collie__tele_timing_log_on(const struct collie__tele_timing *t)
{
  return atomic_load_explicit(&t->head.wanted, memory_order_relaxed);
}

void
collie__tele_timing_log_push(struct collie__tele_timing *t, const struct collie__timing_rec *rec)
{
  pthread_mutex_lock(&t->lock);
  if (t->timing) collie__timing_push(t->timing, rec);
  pthread_mutex_unlock(&t->lock);
}

/* ---- The output ---- */

static void
timing_out_issue(void *self, struct collie__tele_op *op, const char *label, const char *phase)
{
  (void)self;
  op->timed = 1;
  if (op->opname) collie__tele_row_init(&op->row, op->opname, op->size, op->category, label, phase);
}

static void
timing_out_complete(void *self, struct collie__tele_op *op, int failed, int64_t now)
{
  if (!op->timed) return;
  op->timed = 0;
  if (op->opname) {
    op->row.iteration = op->iteration;
    op->row.epoch = op->epoch;
    op->row.start = (double)op->t0_ns / 1e9;
    op->row.end = (double)now / 1e9;
    collie__tele_timing_log_push(self, &op->row);
  }
  if (failed) { /* the caller is reporting the failure: keep its message */
    char saved[COLLIE_ERRMSG_LEN];
    snprintf(saved, sizeof(saved), "%s", collie__err_msg());
    timing_out_flush(self);
    collie__err_set_text(saved);
  }
}

const struct collie__tele_output collie__tele_timing_output = {
    .name = "timing log",
    .open = timing_out_open,
    .issue = timing_out_issue,
    .complete = timing_out_complete,
    .flush = timing_out_flush,
    .close = timing_out_close,
};
