/*
 * tele.c - a communicator tree's telemetry: what every communicator of one
 * collie_comm_init shares with its splits. It keeps the step accounting
 * (steps.c) and hands each operation to the tree's outputs, in the order of
 * tele_outputs[]: comms.csv (steps.c) and the timing log (tele_timing.c).
 * The core calls the hooks below at issue and at completion; an output
 * never sees the core.
 *
 * Adding an output: a file with its struct collie__tele_output (telemetry.h
 * says what each function must do), and its line in tele_outputs[].
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "telemetry/telemetry.h"
#include "util/error.h"

/* The outputs, in the order every operation visits them. comms.csv comes
 * first: its issue stamps the operation with the open step's numbers, which
 * the others read at completion. */
static const struct collie__tele_output *const tele_outputs[] = {
    &collie__tele_comms_output,
    &collie__tele_timing_output,
};
enum { TELE_COMMS, TELE_TIMING, TELE_NOUT };
_Static_assert(sizeof(tele_outputs) / sizeof(tele_outputs[0]) == TELE_NOUT,
               "tele_outputs and its indices must agree");

struct collie__tele {
  _Atomic int refs;
  void *out[TELE_NOUT]; /* each output's state; out[TELE_COMMS] is the step accounting */
};

static int
tele_wants(const struct collie__tele *t, int i)
{
  const struct collie__tele_out_head *h = t->out[i];
  return atomic_load_explicit(&h->wanted, memory_order_relaxed);
}

static struct collie__steps *
tele_steps(const struct collie__tele *t)
{
  return t->out[TELE_COMMS];
}

collie_result_t
collie__tele_open(const struct collie__tele_cfg *cfg, struct collie__tele **out)
{
  struct collie__tele *t = calloc(1, sizeof(*t));
  if (!t) return collie__err(COLLIE_SYSTEM_ERROR, "out of memory for telemetry");
  atomic_init(&t->refs, 1);
  for (int i = 0; i < TELE_NOUT; i++) {
    collie_result_t rc = tele_outputs[i]->open(cfg, &t->out[i]);
    if (rc != COLLIE_SUCCESS) {
      collie__tele_release(t);
      return rc;
    }
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
  for (int i = TELE_NOUT - 1; i >= 0; i--)
    if (t->out[i]) tele_outputs[i]->close(t->out[i]);
  free(t);
}

collie_result_t
collie__tele_step_begin(struct collie__tele *t, int64_t step, int64_t epoch)
{
  return collie__steps_begin(tele_steps(t), step, epoch);
}

collie_result_t
collie__tele_step_end(struct collie__tele *t)
{
  return collie__steps_end(tele_steps(t));
}

int
collie__tele_categories(const struct collie__tele *t)
{
  return collie__steps_categories(tele_steps(t));
}

/* ---- The timing log, which opens and closes at any time ---- */

collie_result_t
collie__tele_timing_open(struct collie__tele *t, const char *dir)
{
  return collie__tele_timing_log_open(t->out[TELE_TIMING], dir);
}

collie_result_t
collie__tele_timing_flush(struct collie__tele *t)
{
  return collie__tele_timing_log_flush(t->out[TELE_TIMING]);
}

void
collie__tele_timing_close(struct collie__tele *t)
{
  collie__tele_timing_log_close(t->out[TELE_TIMING]);
}

int
collie__tele_timing_on(const struct collie__tele *t)
{
  return collie__tele_timing_log_on(t->out[TELE_TIMING]);
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
  for (int i = 0; i < TELE_NOUT; i++)
    if (tele_wants(t, i)) return 1;
  return 0;
}

void
collie__tele_issue(struct collie__tele *t, struct collie__tele_op *op, const char *label,
                   const char *phase, int64_t now)
{
  op->active = 1;
  op->t0_ns = now;
  op->acc = NULL;
  op->timed = 0;
  op->iteration = -1;
  for (int i = 0; i < TELE_NOUT; i++)
    if (tele_wants(t, i)) tele_outputs[i]->issue(t->out[i], op, label, phase);
  if (op->iteration < 0) /* comms.csv took no interest: the numbers still go in the rows */
    collie__steps_numbers(tele_steps(t), &op->iteration, &op->epoch);
}

void
collie__tele_push_row(struct collie__tele *t, const struct collie__tele_op *op,
                      struct collie__timing_rec *rec, int64_t end_ns)
{
  rec->iteration = op->iteration;
  rec->epoch = op->epoch;
  rec->start = (double)op->t0_ns / 1e9;
  rec->end = (double)end_ns / 1e9;
  collie__tele_timing_log_push(t->out[TELE_TIMING], rec);
}

void
collie__tele_complete(struct collie__tele *t, struct collie__tele_op *op, int failed, int64_t now)
{
  if (!op->active) return;
  op->active = 0;
  for (int i = 0; i < TELE_NOUT; i++) tele_outputs[i]->complete(t->out[i], op, failed, now);
}

void
collie__tele_user_record(struct collie__tele *t, const char *opname, const char *layer,
                         const char *phase, uint64_t size, double start, double end)
{
  if (!collie__tele_timing_on(t)) return;
  struct collie__timing_rec rec;
  collie__tele_row_init(&rec, opname, size, -1, layer, phase);
  collie__steps_numbers(tele_steps(t), &rec.iteration, &rec.epoch);
  rec.start = start;
  rec.end = end;
  collie__tele_timing_log_push(t->out[TELE_TIMING], &rec);
}
