/*
 * steps.c - per-step accounting and comms.csv. An operation is charged to
 * the step open when it is issued, and its time arrives when it completes,
 * which for an async operation may be after collie_step_end and on the
 * communicator's worker thread. So a step is a record with a count of
 * pending operations; its row is written once it has ended and that count is
 * zero, and rows leave in step order (a later step that finishes first waits
 * for the earlier one). Every ranks keeps the open step's numbers (the timing
 * log needs them); only rank 0 keeps sums and writes rows. One mutex guards
 * it all: it is taken once at issue and once at completion of an operation in
 * a step, and never while waiting for anything but a row's write.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "telemetry/telemetry.h"
#include "util/error.h"
#include "util/util.h"

/* Row columns in order, after step,epoch,world_size (docs/telemetry.md). */
static const int steps_first[] = {COLLIE_COLL_ALLREDUCE, COLLIE_COLL_ALLGATHER,
                                  COLLIE_COLL_REDUCE_SCATTER, COLLIE_COLL_BROADCAST};
static const int steps_more[] = {COLLIE_COLL_REDUCE, COLLIE_COLL_ALLTOALL, COLLIE_COLL_GATHER,
                                 COLLIE_COLL_SCATTER, COLLIE_COLL_SEND_RECV};
#define STEPS_N(a) ((int)(sizeof(a) / sizeof((a)[0])))
/* Built-in categories in column order (OTHER, id 0, comes last). */
static const int steps_builtin_cats[] = {
    COLLIE_CAT_FEATURES_ALLGATHER,  COLLIE_CAT_MOMENTS_MU,   COLLIE_CAT_MOMENTS_SIGMA_FULL,
    COLLIE_CAT_MOMENTS_SIGMA_DIAG,  COLLIE_CAT_MIXTURE_MU_K, COLLIE_CAT_MIXTURE_SIGMA_K,
    COLLIE_CAT_THIRD_MOMENT_SKETCH, COLLIE_CAT_TOPR_INDICES, COLLIE_CAT_OTHER};

struct collie__step_acc {
  int64_t step, epoch;
  int ended;
  int pending; /* operations issued in the step and not yet complete */
  uint64_t bytes[COLLIE_COLL_COUNT_];
  int64_t ns[COLLIE_COLL_COUNT_];
  struct collie__step_acc *next; /* the next step in row order */
  uint64_t cat_bytes[];          /* per category id (ncat) */
};

struct collie__steps {
  struct collie__tele_out_head out; /* wanted: rows are written and a step is open */
  pthread_mutex_t lock;
  _Atomic int in_step;
  int64_t step, epoch; /* the open step (step 0: none); epoch stays after it ends */
  int world_size;
  int ncat; /* categories with columns */
  int fd;   /* comms.csv once made (the first step), or -1 */
  int rows; /* comms.csv is wanted (path): made at the first step */
  char path[1024];
  struct collie__step_acc *open;        /* the open step's record (rows only) */
  struct collie__step_acc *head, *tail; /* steps whose rows are not written yet */
  int warned;                           /* a write failed once (reported once) */
};

/* The header line for ncat categories (no newline). */
static void
steps_header(char *buf, size_t cap, int ncat)
{
  size_t n = 0;
#define STEPS_PUT(...) n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, __VA_ARGS__)
  STEPS_PUT("step,epoch,world_size");
  for (int i = 0; i < STEPS_N(steps_first); i++)
    STEPS_PUT(",bytes_%s", collie__tc_column(steps_first[i]));
  STEPS_PUT(",bytes_total");
  for (int i = 0; i < STEPS_N(steps_first); i++)
    STEPS_PUT(",t_%s_ms", collie__tc_column(steps_first[i]));
  STEPS_PUT(",t_total_ms,eff_bandwidth_MiBps");
  for (int i = 0; i < STEPS_N(steps_builtin_cats); i++)
    STEPS_PUT(",bytes_%s", collie__category_name(steps_builtin_cats[i]));
  for (int i = 0; i < STEPS_N(steps_more); i++)
    STEPS_PUT(",bytes_%s", collie__tc_column(steps_more[i]));
  for (int i = 0; i < STEPS_N(steps_more); i++)
    STEPS_PUT(",t_%s_ms", collie__tc_column(steps_more[i]));
  for (int c = COLLIE_CAT_BUILTIN_COUNT_; c < ncat; c++)
    STEPS_PUT(",bytes_%s", collie__category_name(c));
#undef STEPS_PUT
}

/* Microseconds as milliseconds with three decimals, exactly (no float). */
static const char *
steps_ms(int64_t us, char buf[32])
{
  snprintf(buf, 32, "%" PRId64 ".%03d", us / 1000, (int)(us % 1000));
  return buf;
}

/* Formats acc's row (with newline) into buf; returns its length. */
static size_t
steps_row(const struct collie__steps *s, const struct collie__step_acc *a, char *buf, size_t cap)
{
  size_t n = 0;
  char ms[32];
  uint64_t total = 0;
  /* Times in whole microseconds, as printed: the total is the sum of the
   * printed columns and the bandwidth follows from printed values, so a
   * reader who recomputes either from the file gets the file's number. */
  int64_t us[COLLIE_COLL_COUNT_], total_us = 0;
  for (int tc = 0; tc < COLLIE_COLL_COUNT_; tc++) {
    us[tc] = (a->ns[tc] + 500) / 1000;
    total += a->bytes[tc];
    total_us += us[tc];
  }
  double bw = total_us > 0 ? ((double)total / 1048576.0) / ((double)total_us / 1e6) : 0.0;
#define STEPS_PUT(...) n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, __VA_ARGS__)
  STEPS_PUT("%" PRId64 ",%" PRId64 ",%d", a->step, a->epoch, s->world_size);
  for (int i = 0; i < STEPS_N(steps_first); i++) STEPS_PUT(",%" PRIu64, a->bytes[steps_first[i]]);
  STEPS_PUT(",%" PRIu64, total);
  for (int i = 0; i < STEPS_N(steps_first); i++) STEPS_PUT(",%s", steps_ms(us[steps_first[i]], ms));
  STEPS_PUT(",%s,%.3f", steps_ms(total_us, ms), bw);
  for (int i = 0; i < STEPS_N(steps_builtin_cats); i++)
    STEPS_PUT(",%" PRIu64, a->cat_bytes[steps_builtin_cats[i]]);
  for (int i = 0; i < STEPS_N(steps_more); i++) STEPS_PUT(",%" PRIu64, a->bytes[steps_more[i]]);
  for (int i = 0; i < STEPS_N(steps_more); i++) STEPS_PUT(",%s", steps_ms(us[steps_more[i]], ms));
  for (int c = COLLIE_CAT_BUILTIN_COUNT_; c < s->ncat; c++) STEPS_PUT(",%" PRIu64, a->cat_bytes[c]);
  STEPS_PUT("\n");
#undef STEPS_PUT
  return n < cap ? n : cap - 1;
}

/* Writes and frees the complete steps at the head of the row order
 * (all = 1: every step, complete or not). Called locked. */
static void
steps_write_ready(struct collie__steps *s, int all)
{
  char buf[4096];
  while (s->head && (all || (s->head->ended && s->head->pending == 0))) {
    struct collie__step_acc *a = s->head;
    s->head = a->next;
    if (!s->head) s->tail = NULL;
    if (a == s->open) s->open = NULL;
    size_t len = steps_row(s, a, buf, sizeof(buf));
    if (collie__csv_write(s->fd, buf, len) != 0 && !s->warned) {
      s->warned = 1;
      COLLIE_WARN("TELEMETRY", "comms.csv: writing step %" PRId64 " to %s failed: %s", a->step,
                  s->path, strerror(errno));
    }
    free(a);
  }
}

collie_result_t
collie__steps_open(const char *path, int world_size, struct collie__steps **out)
{
  struct collie__steps *s = calloc(1, sizeof(*s));
  if (!s) return collie__err(COLLIE_SYSTEM_ERROR, "out of memory for step accounting");
  pthread_mutex_init(&s->lock, NULL);
  s->world_size = world_size;
  s->ncat = collie__category_count();
  s->fd = -1;
  if (path) {
    char header[4096];
    steps_header(header, sizeof(header), s->ncat);
    snprintf(s->path, sizeof(s->path), "%s", path);
    s->rows = 1;
    collie_result_t rc = collie__csv_check(path, header);
    if (rc != COLLIE_SUCCESS) {
      pthread_mutex_destroy(&s->lock);
      free(s);
      return rc;
    }
  }
  *out = s;
  return COLLIE_SUCCESS;
}

void
collie__steps_close(struct collie__steps *s)
{
  if (!s) return;
  pthread_mutex_lock(&s->lock);
  if (s->fd >= 0) {
    steps_write_ready(s, 1);
    close(s->fd);
  }
  pthread_mutex_unlock(&s->lock);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

/* comms.csv, made at the first step (collie__csv_open's errors). Locked. */
static collie_result_t
steps_make_file(struct collie__steps *s)
{
  if (s->fd >= 0) return COLLIE_SUCCESS;
  char header[4096];
  steps_header(header, sizeof(header), s->ncat);
  return collie__csv_open(s->path, header, &s->fd);
}

collie_result_t
collie__steps_begin(struct collie__steps *s, int64_t step, int64_t epoch)
{
  collie_result_t rc = COLLIE_SUCCESS;
  pthread_mutex_lock(&s->lock);
  if (s->step != 0) {
    rc = collie__err(COLLIE_INVALID_USAGE,
                     "collie_step_begin(%" PRId64 "): step %" PRId64
                     " is still open; call collie_step_end first",
                     step, s->step);
  } else if (s->rows && (rc = steps_make_file(s)) == COLLIE_SUCCESS) {
    struct collie__step_acc *a = calloc(1, sizeof(*a) + (size_t)s->ncat * sizeof(uint64_t));
    if (!a) {
      rc = collie__err(COLLIE_SYSTEM_ERROR, "collie_step_begin: out of memory");
    } else {
      a->step = step;
      a->epoch = epoch;
      if (s->tail)
        s->tail->next = a;
      else
        s->head = a;
      s->tail = a;
      s->open = a;
    }
  }
  if (rc == COLLIE_SUCCESS) {
    s->step = step;
    s->epoch = epoch;
    atomic_store_explicit(&s->in_step, 1, memory_order_relaxed);
    atomic_store_explicit(&s->out.wanted, s->fd >= 0, memory_order_relaxed);
  }
  pthread_mutex_unlock(&s->lock);
  return rc;
}

collie_result_t
collie__steps_end(struct collie__steps *s)
{
  collie_result_t rc = COLLIE_SUCCESS;
  pthread_mutex_lock(&s->lock);
  if (s->step == 0) {
    rc = collie__err(COLLIE_INVALID_USAGE, "collie_step_end: no step is open (collie_step_begin)");
  } else {
    s->step = 0;
    atomic_store_explicit(&s->in_step, 0, memory_order_relaxed);
    atomic_store_explicit(&s->out.wanted, 0, memory_order_relaxed);
    if (s->open) {
      s->open->ended = 1;
      s->open = NULL;
      steps_write_ready(s, 0);
    }
  }
  pthread_mutex_unlock(&s->lock);
  return rc;
}

int
collie__steps_in_step(const struct collie__steps *s)
{
  return atomic_load_explicit(&s->in_step, memory_order_relaxed);
}

int
collie__steps_categories(const struct collie__steps *s)
{
  return s->ncat;
}

int
collie__steps_world_size(const struct collie__steps *s)
{
  return s->world_size;
}

struct collie__step_acc *
collie__steps_charge(struct collie__steps *s, int tc, int category, uint64_t wire,
                     int64_t *iteration, int64_t *epoch)
{
  struct collie__step_acc *a;
  pthread_mutex_lock(&s->lock);
  *iteration = s->step;
  *epoch = s->epoch;
  a = s->open;
  if (a) {
    a->pending++;
    a->bytes[tc] += wire;
    if (tc != COLLIE_COLL_BARRIER && category >= 0 && category < s->ncat)
      a->cat_bytes[category] += wire;
  }
  pthread_mutex_unlock(&s->lock);
  return a;
}

void
collie__steps_recharge(struct collie__steps *s, struct collie__step_acc *acc, int from, int to,
                       uint64_t bytes)
{
  if (!acc || from < 0 || from >= s->ncat || to < 0 || to >= s->ncat) return;
  pthread_mutex_lock(&s->lock);
  uint64_t moved = acc->cat_bytes[from] < bytes ? acc->cat_bytes[from] : bytes;
  acc->cat_bytes[from] -= moved;
  acc->cat_bytes[to] += moved;
  pthread_mutex_unlock(&s->lock);
}

void
collie__steps_numbers(struct collie__steps *s, int64_t *iteration, int64_t *epoch)
{
  pthread_mutex_lock(&s->lock);
  *iteration = s->step;
  *epoch = s->epoch;
  pthread_mutex_unlock(&s->lock);
}

void
collie__steps_done(struct collie__steps *s, struct collie__step_acc *acc, int tc, int64_t ns)
{
  if (!acc) return;
  pthread_mutex_lock(&s->lock);
  /* Barrier has no column: its time is not communication volume's. */
  if (tc != COLLIE_COLL_BARRIER) acc->ns[tc] += ns;
  acc->pending--;
  if (acc->ended && acc->pending == 0) steps_write_ready(s, 0);
  pthread_mutex_unlock(&s->lock);
}

/* ---- comms.csv as an output of a communicator tree (tele.c) ---- */

static collie_result_t
comms_out_open(const struct collie__tele_cfg *cfg, void **out)
{
  char path[1200];
  int rows = cfg->rank == 0 && cfg->comms_log;
  const char *dir = cfg->log_dir && *cfg->log_dir ? cfg->log_dir : ".";
  snprintf(path, sizeof(path), "%s/comms.csv", dir);
  if (rows && collie__mkdir_one(dir) != 0)
    return collie__err_errno(COLLIE_SYSTEM_ERROR,
                             errno == ENOENT ? "comms.csv: cannot create directory %s: its parent "
                                               "does not exist (COLLIE_LOG_DIR makes one level)"
                                             : "comms.csv: cannot create directory %s",
                             dir);
  struct collie__steps *s = NULL;
  collie_result_t rc = collie__steps_open(rows ? path : NULL, cfg->world_size, &s);
  *out = s;
  return rc;
}

static void
comms_out_issue(void *self, struct collie__tele_op *op, const char *label, const char *phase)
{
  (void)label;
  (void)phase;
  op->acc = collie__steps_charge(self, op->tc, op->category, op->wire, &op->iteration, &op->epoch);
  if (op->index_wire && op->category != COLLIE_CAT_TOPR_INDICES)
    collie__steps_recharge(self, op->acc, op->category, COLLIE_CAT_TOPR_INDICES, op->index_wire);
}

static void
comms_out_complete(void *self, struct collie__tele_op *op, int failed, int64_t now)
{
  (void)failed; /* a failed call's time counts as spent */
  collie__steps_done(self, op->acc, op->tc, now - op->t0_ns);
  op->acc = NULL;
}

static collie_result_t
comms_out_flush(void *self)
{
  (void)self; /* rows are written as their steps complete */
  return COLLIE_SUCCESS;
}

static void
comms_out_close(void *self)
{
  collie__steps_close(self);
}

const struct collie__tele_output collie__tele_comms_output = {
    .name = "comms.csv",
    .open = comms_out_open,
    .issue = comms_out_issue,
    .complete = comms_out_complete,
    .flush = comms_out_flush,
    .close = comms_out_close,
};
