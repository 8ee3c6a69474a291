/*
 * timing.c - the per-rank timing log (timing-rank{i}.csv). Recording must
 * never block the thread that runs collectives, so a record goes into a
 * bounded lock-free queue (a ring of cells, each with a sequence number that
 * says whether it is free for the producer at position pos or full for the
 * consumer: any number of producers, one consumer at a time) and a
 * background thread turns records into text every flush period. A full
 * queue drops the record and counts it: losing a log row is better than
 * stalling training. Formatting (local time, quoting) happens on the drain
 * side only.
 *
 * Every open log is also flushed at process exit (atexit) and by the core
 * right after an operation fails, so the rows that explain a crash are on
 * disk before anything else can go wrong.
 */
#include <errno.h>
#include <limits.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "telemetry/telemetry.h"
#include "util/error.h"
#include "util/util.h"

static const char timing_header[] = "timestamp,iteration,epoch,layer_name,operation,phase,"
                                    "message_size_bytes,elapsed_ms,start_counter,end_counter";
static const char timing_cat_header[] = "start_counter,end_counter,operation,category";

enum { TIMING_BUF = 64 * 1024, TIMING_LINE = 512 };

struct timing_cell {
  _Atomic uint64_t seq;
  struct collie__timing_rec rec;
};

struct collie__timing {
  /* queue */
  struct timing_cell *cells;
  uint64_t cap;
  _Atomic uint64_t enq;
  uint64_t deq; /* under drain_lock */
  _Atomic uint64_t dropped;
  /* files */
  pthread_mutex_t drain_lock;
  int fd, cat_fd;
  char dir[1024], meta[1100];
  struct collie__timing_cfg cfg;
  char host[128];
  double clock_offset; /* realtime - monotonic, seconds */
  char *buf, *cbuf;    /* text of the rows and of their categories (TIMING_BUF each) */
  uint64_t written, meta_written, meta_dropped;
  int meta_valid, warned;
  /* drain thread */
  pthread_mutex_t lock;
  pthread_cond_t wake; /* CLOCK_MONOTONIC */
  int stop;
  pthread_t thread;
  struct collie__timing *next_open; /* the registry of open logs (atexit, sharing) */
  char key[PATH_MAX + 16];          /* canonical dir and rank: one log per file */
  int refs;                         /* opens of this file (under timing_reg_lock) */
};

/* ---- The queue ---- */

int
collie__timing_push(struct collie__timing *t, const struct collie__timing_rec *rec)
{
  uint64_t pos = atomic_load_explicit(&t->enq, memory_order_relaxed);
  struct timing_cell *c;
  for (;;) {
    c = &t->cells[pos % t->cap];
    uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
    int64_t dif = (int64_t)(seq - pos);
    if (dif == 0) {
      if (atomic_compare_exchange_weak_explicit(&t->enq, &pos, pos + 1, memory_order_relaxed,
                                                memory_order_relaxed))
        break;
    } else if (dif < 0) { /* the cell still holds a record a lap behind: full */
      atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
      return -1;
    } else {
      pos = atomic_load_explicit(&t->enq, memory_order_relaxed);
    }
  }
  c->rec = *rec;
  atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
  return 0;
}

/* Takes the oldest record into *out; 0, or -1 when empty. Under drain_lock. */
static int
timing_pop(struct collie__timing *t, struct collie__timing_rec *out)
{
  struct timing_cell *c = &t->cells[t->deq % t->cap];
  uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
  if (seq != t->deq + 1) return -1; /* empty, or a producer is still filling it */
  *out = c->rec;
  atomic_store_explicit(&c->seq, t->deq + t->cap, memory_order_release);
  t->deq++;
  return 0;
}

/* ---- Text ---- */

/* Appends rec's CSV line to buf; returns the new length. */
static size_t
timing_line(const struct collie__timing *t, const struct collie__timing_rec *r, char *buf, size_t n,
            size_t cap)
{
  int64_t wall_us = (int64_t)((r->start + t->clock_offset) * 1e6 + 0.5); /* after 1970: > 0 */
  time_t sec = (time_t)(wall_us / 1000000);
  long usec = (long)(wall_us % 1000000);
  struct tm tm;
  char when[40];
  localtime_r(&sec, &tm);
  strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
  n += (size_t)snprintf(buf + n, cap - n, "%s.%06ld,%" PRId64 ",%" PRId64 ",", when, usec,
                        r->iteration, r->epoch);
  n = collie__csv_field(buf, n, cap, r->layer);
  if (n + 1 < cap) buf[n++] = ',';
  n = collie__csv_field(buf, n, cap, r->op);
  if (n + 1 < cap) buf[n++] = ',';
  n = collie__csv_field(buf, n, cap, r->phase[0] ? r->phase : "dense");
  n += (size_t)snprintf(buf + n, cap - n, ",%" PRIu64 ",%.3f,%.6f,%.6f\n", r->size,
                        (r->end - r->start) * 1e3, r->start, r->end);
  return n < cap ? n : cap - 1;
}

/* Rewrites the .meta sidecar (temp file + rename) when its numbers changed. */
static void
timing_write_meta(struct collie__timing *t)
{
  uint64_t dropped = atomic_load_explicit(&t->dropped, memory_order_relaxed);
  if (t->meta_valid && t->meta_written == t->written && t->meta_dropped == dropped) return;
  char tmp[1200];
  snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", t->meta, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  fprintf(f,
          "version=1\nrank=%d\nworld_size=%d\nhost=%s\npid=%ld\nqueue_capacity=%" PRIu64
          "\nrecords_written=%" PRIu64 "\nrecords_dropped=%" PRIu64 "\nclock_offset_s=%.6f\n",
          t->cfg.rank, t->cfg.world_size, t->host, (long)getpid(), t->cap, t->written, dropped,
          t->clock_offset);
  if (fclose(f) == 0 && rename(tmp, t->meta) == 0) {
    t->meta_valid = 1;
    t->meta_written = t->written;
    t->meta_dropped = dropped;
  } else {
    unlink(tmp);
  }
}

/* Drains the queue into the files. Under drain_lock. */
static collie_result_t
timing_drain(struct collie__timing *t)
{
  char *buf = t->buf, *cbuf = t->cbuf;
  size_t n = 0, cn = 0;
  int bad = 0;
  struct collie__timing_rec r;
  while (timing_pop(t, &r) == 0) {
    n = timing_line(t, &r, buf, n, TIMING_BUF);
    t->written++;
    if (r.category >= 0) {
      const char *cat = collie__category_name(r.category);
      cn += (size_t)snprintf(cbuf + cn, TIMING_BUF - cn, "%.6f,%.6f,", r.start, r.end);
      cn = collie__csv_field(cbuf, cn, TIMING_BUF, r.op);
      cn += (size_t)snprintf(cbuf + cn, TIMING_BUF - cn, ",%s\n", cat ? cat : "other");
    }
    if (n + TIMING_LINE > TIMING_BUF || cn + TIMING_LINE > TIMING_BUF) {
      bad |= collie__csv_write(t->fd, buf, n) != 0 || collie__csv_write(t->cat_fd, cbuf, cn) != 0;
      n = cn = 0;
    }
  }
  bad |= collie__csv_write(t->fd, buf, n) != 0 || collie__csv_write(t->cat_fd, cbuf, cn) != 0;
  timing_write_meta(t);
  if (bad) {
    collie_result_t rc = collie__err_errno(
        COLLIE_SYSTEM_ERROR, "timing log: writing %s/timing-rank%d.csv", t->dir, t->cfg.rank);
    if (!t->warned++) COLLIE_WARN("TELEMETRY", "%s", collie__err_msg());
    return rc;
  }
  return COLLIE_SUCCESS;
}

collie_result_t
collie__timing_flush(struct collie__timing *t)
{
  pthread_mutex_lock(&t->drain_lock);
  collie_result_t rc = timing_drain(t);
  pthread_mutex_unlock(&t->drain_lock);
  return rc;
}

/* ---- Registry of open logs: flushed at exit ---- */

static pthread_mutex_t timing_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct collie__timing *timing_reg;
static pthread_once_t timing_atexit_once = PTHREAD_ONCE_INIT;

static void
timing_flush_all(void)
{
  pthread_mutex_lock(&timing_reg_lock);
  for (struct collie__timing *t = timing_reg; t; t = t->next_open)
    if (pthread_mutex_trylock(&t->drain_lock) == 0) { /* a drain in progress will finish it */
      timing_drain(t);
      pthread_mutex_unlock(&t->drain_lock);
    }
  pthread_mutex_unlock(&timing_reg_lock);
}

/* A child of fork() must not write its parent's queued rows a second time at
 * its own exit: it forgets the parent's logs. */
static void
timing_forget_in_child(void)
{
  pthread_mutex_init(&timing_reg_lock, NULL);
  timing_reg = NULL;
}

static void
timing_register_atexit(void)
{
  atexit(timing_flush_all);
  pthread_atfork(NULL, NULL, timing_forget_in_child);
}

/* ---- The drain thread ---- */

static void *
timing_main(void *arg)
{
  struct collie__timing *t = arg;
  pthread_mutex_lock(&t->lock);
  while (!t->stop) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t at = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + t->cfg.flush_ms * 1000000LL;
    ts.tv_sec = (time_t)(at / 1000000000LL);
    ts.tv_nsec = (long)(at % 1000000000LL);
    pthread_cond_timedwait(&t->wake, &t->lock, &ts);
    if (t->stop) break;
    pthread_mutex_unlock(&t->lock);
    collie__timing_flush(t);
    pthread_mutex_lock(&t->lock);
  }
  pthread_mutex_unlock(&t->lock);
  return NULL;
}

/* ---- Open and close ---- */

static void
timing_free(struct collie__timing *t)
{
  if (t->fd >= 0) close(t->fd);
  if (t->cat_fd >= 0) close(t->cat_fd);
  pthread_mutex_destroy(&t->drain_lock);
  pthread_mutex_destroy(&t->lock);
  pthread_cond_destroy(&t->wake);
  free(t->cells);
  free(t->buf);
  free(t->cbuf);
  free(t);
}

static collie_result_t timing_create(const char *dir, const struct collie__timing_cfg *cfg,
                                     struct collie__timing **out);

/* The log already open on dir's file for rank (retained), or NULL. Called
 * with timing_reg_lock held. */
static struct collie__timing *
timing_reg_find(const char *key)
{
  for (struct collie__timing *t = timing_reg; t; t = t->next_open)
    if (!strcmp(t->key, key)) {
      t->refs++;
      return t;
    }
  return NULL;
}

/* Two opens of one file in a process - a communicator's COLLIE_TIMING_LOG and
 * a collie_timing_log_open of the same directory and rank - share one log:
 * one queue, one writer, one header, rows never interleaved mid-line. */
collie_result_t
collie__timing_open(const char *dir, const struct collie__timing_cfg *cfg,
                    struct collie__timing **out)
{
  char canon[PATH_MAX], key[PATH_MAX + 16];
  if (collie__mkdir_p(dir) != 0)
    return collie__err_errno(COLLIE_SYSTEM_ERROR, "timing log: cannot create directory %s", dir);
  if (!realpath(dir, canon)) snprintf(canon, sizeof(canon), "%s", dir);
  snprintf(key, sizeof(key), "%s\n%d", canon, cfg->rank);
  pthread_once(&timing_atexit_once, timing_register_atexit);
  pthread_mutex_lock(&timing_reg_lock);
  struct collie__timing *t = timing_reg_find(key);
  collie_result_t rc = COLLIE_SUCCESS;
  if (!t && (rc = timing_create(dir, cfg, &t)) == COLLIE_SUCCESS) {
    snprintf(t->key, sizeof(t->key), "%s", key);
    t->refs = 1;
    t->next_open = timing_reg;
    timing_reg = t;
  }
  pthread_mutex_unlock(&timing_reg_lock);
  if (rc == COLLIE_SUCCESS) *out = t;
  return rc;
}

static collie_result_t
timing_create(const char *dir, const struct collie__timing_cfg *cfg, struct collie__timing **out)
{
  collie_result_t rc;
  char path[1200];
  struct collie__timing *t = calloc(1, sizeof(*t));
  if (!t) return collie__err(COLLIE_SYSTEM_ERROR, "out of memory opening the timing log");
  t->fd = t->cat_fd = -1;
  t->cfg = *cfg;
  t->cap = (uint64_t)cfg->capacity;
  snprintf(t->host, sizeof(t->host), "%s", cfg->host ? cfg->host : "");
  snprintf(t->dir, sizeof(t->dir), "%s", dir);
  pthread_mutex_init(&t->drain_lock, NULL);
  pthread_mutex_init(&t->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&t->wake, &ca);
  pthread_condattr_destroy(&ca);
  t->buf = malloc(TIMING_BUF);
  t->cbuf = malloc(TIMING_BUF);
  if (!(t->cells = calloc((size_t)t->cap, sizeof(*t->cells))) || !t->buf || !t->cbuf) {
    rc = collie__err(
        COLLIE_SYSTEM_ERROR,
        "out of memory for a timing queue of %" PRIu64 " records (COLLIE_TIMING_QUEUE)", t->cap);
    goto fail;
  }
  for (uint64_t i = 0; i < t->cap; i++) atomic_init(&t->cells[i].seq, i);
  snprintf(path, sizeof(path), "%s/timing-rank%d.csv", dir, cfg->rank);
  if ((rc = collie__csv_open(path, timing_header, &t->fd)) != COLLIE_SUCCESS) goto fail;
  snprintf(path, sizeof(path), "%s/timing-rank%d.categories.csv", dir, cfg->rank);
  if ((rc = collie__csv_open(path, timing_cat_header, &t->cat_fd)) != COLLIE_SUCCESS) goto fail;
  snprintf(t->meta, sizeof(t->meta), "%s/timing-rank%d.meta", dir, cfg->rank);
  struct timespec rt, mono;
  clock_gettime(CLOCK_REALTIME, &rt);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  t->clock_offset = (double)(rt.tv_sec - mono.tv_sec) + (double)(rt.tv_nsec - mono.tv_nsec) / 1e9;
  timing_write_meta(t);
  int e = pthread_create(&t->thread, NULL, timing_main, t);
  if (e) {
    errno = e;
    rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "timing log: starting its drain thread");
    goto fail;
  }
  *out = t;
  return COLLIE_SUCCESS;

fail:
  timing_free(t);
  return rc;
}

void
collie__timing_close(struct collie__timing *t)
{
  if (!t) return;
  pthread_mutex_lock(&timing_reg_lock);
  int last = --t->refs == 0;
  if (last)
    for (struct collie__timing **p = &timing_reg; *p; p = &(*p)->next_open)
      if (*p == t) {
        *p = t->next_open;
        break;
      }
  pthread_mutex_unlock(&timing_reg_lock);
  if (!last) {
    collie__timing_flush(t); /* the other opener keeps it; this one's rows are out */
    return;
  }
  pthread_mutex_lock(&t->lock);
  t->stop = 1;
  pthread_cond_signal(&t->wake);
  pthread_mutex_unlock(&t->lock);
  pthread_join(t->thread, NULL);
  collie__timing_flush(t);
  uint64_t dropped = atomic_load_explicit(&t->dropped, memory_order_relaxed);
  if (dropped)
    COLLIE_WARN("TELEMETRY",
                "timing log %s/timing-rank%d.csv: %" PRIu64 " records dropped because the queue "
                "of %" PRIu64
                " was full; raise COLLIE_TIMING_QUEUE or lower COLLIE_TIMING_FLUSH_MS",
                t->dir, t->cfg.rank, dropped, t->cap);
  timing_free(t);
}

const char *
collie__timing_dir(const struct collie__timing *t)
{
  return t->dir;
}
