/*
 * telemetry_timing_test.c - timing-rank{i}.csv and its sidecars checked
 * against docs/telemetry.md: the exact header, one row per operation (each
 * message of a send/recv group its own row) and per collie_timing_record,
 * every column's value and format, quoting, truncation, the .meta and
 * .categories.csv sidecars, both ways of turning the log on, the bounded
 * queue dropping (and counting) instead of blocking, and the flushes the doc
 * promises: at close, at destroy, at process exit and right after a failure.
 */
#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "coll/csv_read.h"
#include "runner.h"

/* docs/telemetry.md, "timing-rank{i}.csv" and "timing-rank{i}.categories.csv". */
#define TIM_HEADER                                                                                 \
  "timestamp,iteration,epoch,layer_name,operation,phase,message_size_bytes,elapsed_ms,"            \
  "start_counter,end_counter"
#define TIM_CAT_HEADER "start_counter,end_counter,operation,category"

/* One row the log must hold. Rows are found by (operation, layer_name), so
 * every expected row gets a distinct label. */
struct tim_exp {
  const char *op;
  char label[200];
  const char *phase;
  uint64_t size;
  int64_t iteration, epoch;
  const char *category; /* collie operations: the category's name; user records: NULL */
  double t_lo, t_hi;    /* monotonic window around the call (user records: exact) */
  int user;
};

struct tim_list {
  int n;
  struct tim_exp e[64];
};

static struct tim_exp *
tim_add(struct tim_list *l, const char *op, const char *label, const char *phase, uint64_t size,
        int64_t iteration, int64_t epoch, const char *category)
{
  ASSERT(l->n < 64);
  struct tim_exp *e = &l->e[l->n++];
  memset(e, 0, sizeof(*e));
  e->op = op;
  snprintf(e->label, sizeof(e->label), "%s", label ? label : "");
  e->phase = phase ? phase : "dense";
  e->size = size;
  e->iteration = iteration;
  e->epoch = epoch;
  e->category = category;
  return e;
}

static void
tim_path(char *buf, size_t len, const char *dir, int rank, const char *suffix)
{
  snprintf(buf, len, "%s/timing-rank%d%s", dir, rank, suffix);
}

/* "2026-02-06T14:30:45.123456" -> Unix seconds (local time), or -1. */
static double
tim_parse_stamp(const char *s)
{
  static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddddd";
  if (strlen(s) != sizeof(shape) - 1) return -1;
  for (size_t i = 0; i < sizeof(shape) - 1; i++) {
    if (shape[i] == 'd' ? (s[i] < '0' || s[i] > '9') : s[i] != shape[i]) return -1;
  }
  struct tm tm;
  memset(&tm, 0, sizeof(tm));
  if (!strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)) return -1;
  tm.tm_isdst = -1;
  return (double)mktime(&tm) + strtod(s + 19, NULL);
}

static double
tim_num(const struct csv_table *t, int row, const char *col, int decimals)
{
  const char *v = csv_cell(t, row, col);
  ASSERTF(v, "row %d has no %s", row, col);
  ASSERTF(csv_is_fixed(v, decimals), "row %d: %s = \"%s\" is not a number with %d decimals", row,
          col, v, decimals);
  return strtod(v, NULL);
}

static int64_t
tim_int(const struct csv_table *t, int row, const char *col)
{
  const char *v = csv_cell(t, row, col);
  ASSERTF(v && csv_is_int(v), "row %d: %s = \"%s\" is not an integer", row, col, v ? v : "");
  return strtoll(v, NULL, 10);
}

/* The .meta sidecar as text; checks the keys every meta must hold. */
static char *
tim_meta(const char *dir, int rank, int world, long capacity, long written, long dropped)
{
  char path[600], v[256];
  tim_path(path, sizeof(path), dir, rank, ".meta");
  char *m = csv_slurp(path, NULL);
  ASSERTF(m, "%s: %s", path, strerror(errno));
  struct {
    const char *key;
    long want; /* -1: any non-empty value */
  } keys[] = {{"version", 1},
              {"rank", rank},
              {"world_size", world},
              {"pid", (long)getpid()},
              {"queue_capacity", capacity},
              {"records_written", written},
              {"records_dropped", dropped},
              {"host", -1},
              {"clock_offset_s", -1}};
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
    ASSERTF(csv_meta_get(m, keys[i].key, v, sizeof(v)) == 0, "%s lacks %s=:\n%s", path, keys[i].key,
            m);
    ASSERTF(*v, "%s: %s is empty", path, keys[i].key);
    if (keys[i].want >= 0)
      ASSERTF(csv_is_int(v) && strtol(v, NULL, 10) == keys[i].want, "%s: %s=%s, want %ld", path,
              keys[i].key, v, keys[i].want);
  }
  ASSERT(csv_meta_get(m, "clock_offset_s", v, sizeof(v)) == 0);
  ASSERTF(csv_is_fixed(v, 6), "clock_offset_s=%s is not seconds with six decimals", v);
  double off = strtod(v, NULL), now = csv_now_real() - csv_now_mono();
  ASSERTF(off > now - 1 && off < now + 1,
          "clock_offset_s=%s, CLOCK_REALTIME - CLOCK_MONOTONIC %.6f", v, now);
  return m;
}

/* Loads dir/timing-rank{rank}.csv, checks its header and that it holds
 * exactly the rows of l, each with the right values. */
static void
tim_check(const char *dir, int rank, const struct tim_list *l, struct csv_table *t)
{
  char path[600], v[64];
  tim_path(path, sizeof(path), dir, rank, ".csv");
  ASSERTF(csv_load(path, t) == 0, "%s: %s", path, strerror(errno));
  ASSERTF(!strcmp(t->first_line, TIM_HEADER), "%s header\n  got:  %s\n  want: %s", path,
          t->first_line, TIM_HEADER);
  ASSERTF(t->nrows == l->n, "%s has %d rows, want %d", path, t->nrows, l->n);
  /* Turning timestamps into Unix time needs the log's clock offset. */
  double off = 0;
  char mpath[600];
  tim_path(mpath, sizeof(mpath), dir, rank, ".meta");
  char *m = csv_slurp(mpath, NULL);
  ASSERTF(m && csv_meta_get(m, "clock_offset_s", v, sizeof(v)) == 0, "%s: no clock_offset_s",
          mpath);
  off = strtod(v, NULL);
  free(m);
  for (int i = 0; i < l->n; i++) {
    const struct tim_exp *e = &l->e[i];
    int row = -1;
    for (int j = 0; j < t->nrows; j++)
      if (!strcmp(csv_cell(t, j, "operation"), e->op) &&
          !strcmp(csv_cell(t, j, "layer_name"), e->label)) {
        ASSERTF(row < 0, "two rows for %s \"%s\"", e->op, e->label);
        row = j;
      }
    ASSERTF(row >= 0, "%s: no row for operation %s, layer_name \"%s\"", path, e->op, e->label);
    ASSERTF(t->nfields[row] == 10, "%s \"%s\": %d fields", e->op, e->label, t->nfields[row]);
    ASSERTF(!strcmp(csv_cell(t, row, "phase"), e->phase), "%s \"%s\": phase \"%s\", want \"%s\"",
            e->op, e->label, csv_cell(t, row, "phase"), e->phase);
    ASSERTF(tim_int(t, row, "iteration") == e->iteration && tim_int(t, row, "epoch") == e->epoch,
            "%s \"%s\": iteration %s epoch %s, want %lld %lld", e->op, e->label,
            csv_cell(t, row, "iteration"), csv_cell(t, row, "epoch"), (long long)e->iteration,
            (long long)e->epoch);
    ASSERTF(tim_int(t, row, "message_size_bytes") == (int64_t)e->size,
            "%s \"%s\": message_size_bytes %s, want %llu", e->op, e->label,
            csv_cell(t, row, "message_size_bytes"), (unsigned long long)e->size);
    double el = tim_num(t, row, "elapsed_ms", 3), s = tim_num(t, row, "start_counter", 6),
           en = tim_num(t, row, "end_counter", 6);
    ASSERTF(s <= en, "%s \"%s\": start %.6f after end %.6f", e->op, e->label, s, en);
    ASSERTF(el >= (en - s) * 1e3 - 0.002 && el <= (en - s) * 1e3 + 0.002,
            "%s \"%s\": elapsed_ms %.3f, end - start = %.6f ms", e->op, e->label, el,
            (en - s) * 1e3);
    if (e->user) {
      ASSERTF(s >= e->t_lo - 1e-6 && s <= e->t_lo + 1e-6 && en >= e->t_hi - 1e-6 &&
                  en <= e->t_hi + 1e-6,
              "%s \"%s\": counters %.6f..%.6f, given %.6f..%.6f", e->op, e->label, s, en, e->t_lo,
              e->t_hi);
    } else {
      ASSERTF(s >= e->t_lo - 1e-6 && en <= e->t_hi + 1e-6,
              "%s \"%s\": counters %.6f..%.6f outside the call %.6f..%.6f", e->op, e->label, s, en,
              e->t_lo, e->t_hi);
    }
    const char *stamp = csv_cell(t, row, "timestamp");
    double unix_s = tim_parse_stamp(stamp);
    ASSERTF(unix_s > 0, "%s \"%s\": timestamp \"%s\" is not ISO 8601 with microseconds", e->op,
            e->label, stamp);
    ASSERTF(unix_s > s + off - 0.5 && unix_s < s + off + 0.5,
            "%s \"%s\": timestamp %s is not the local time of start_counter %.6f + offset %.6f",
            e->op, e->label, stamp, s, off);
  }
}

/* Checks timing-rank{rank}.categories.csv against l: every collie operation
 * with a category other than `other` has its row (matched on start_counter,
 * end_counter, operation as the doc says), the others have none or `other`,
 * user records have none. */
static void
tim_check_categories(const char *dir, int rank, const struct tim_list *l, const struct csv_table *t)
{
  char path[600];
  tim_path(path, sizeof(path), dir, rank, ".categories.csv");
  struct csv_table c;
  ASSERTF(csv_load(path, &c) == 0, "%s: %s", path, strerror(errno));
  ASSERTF(!strcmp(c.first_line, TIM_CAT_HEADER), "%s header\n  got:  %s\n  want: %s", path,
          c.first_line, TIM_CAT_HEADER);
  int ncollie = 0;
  for (int i = 0; i < l->n; i++) {
    const struct tim_exp *e = &l->e[i];
    int row = -1;
    for (int j = 0; j < t->nrows; j++)
      if (!strcmp(csv_cell(t, j, "operation"), e->op) &&
          !strcmp(csv_cell(t, j, "layer_name"), e->label))
        row = j;
    ASSERT(row >= 0);
    const char *s = csv_cell(t, row, "start_counter"), *en = csv_cell(t, row, "end_counter");
    int match = -1;
    for (int j = 0; j < c.nrows; j++)
      if (c.nfields[j] == 4 && !strcmp(c.rows[j][0], s) && !strcmp(c.rows[j][1], en) &&
          !strcmp(c.rows[j][2], e->op))
        match = j;
    if (e->user) {
      ASSERTF(match < 0, "%s: a category row for user record %s", path, e->op);
      continue;
    }
    ncollie++;
    if (strcmp(e->category, "other") != 0)
      ASSERTF(match >= 0, "%s: no row for %s \"%s\" (%s..%s), category %s", path, e->op, e->label,
              s, en, e->category);
    if (match >= 0)
      ASSERTF(!strcmp(c.rows[match][3], e->category), "%s: %s \"%s\" has category %s, want %s",
              path, e->op, e->label, c.rows[match][3], e->category);
  }
  ASSERTF(c.nrows <= ncollie, "%s has %d rows for %d operations", path, c.nrows, ncollie);
  csv_free(&c);
}

static void *
tim_alloc(size_t bytes)
{
  void *p = calloc(1, bytes ? bytes : 1);
  ASSERT(p);
  return p;
}

/* Opts with a label and category (phase NULL: the default). */
static collie_opts_t
tim_opts(const char *label, const char *phase, int category)
{
  collie_opts_t o;
  memset(&o, 0, sizeof(o));
  o.label = label;
  o.phase = phase;
  o.category = category;
  return o;
}

/* Every kind of operation with COLLIE_TIMING_LOG set before init, inside and
 * outside a step, plus user records with awkward text: the file after destroy
 * holds exactly those rows, right to the column; .meta and .categories.csv
 * agree. */
TEST_IMPL(telemetry_timing_env)
{
  int r = test_rank(), p = test_size();
  uint64_t up = (uint64_t)p;
  char dir[512], lbl[200];
  snprintf(dir, sizeof(dir), "%s/tlog", test_dir()); /* created by the library */
  setenv("COLLIE_TIMING_LOG", dir, 1);
  int grads = -1;
  ASSERT_OK(collie_category_register("grads", &grads));
  collie_comm_t *comm = test_comm();
  struct tim_list l = {0};
  struct tim_exp *e;
  collie_opts_t o;
  size_t big = 4096;
  char *s = tim_alloc(big * 8 * up), *d = tim_alloc(big * 8 * up);

#define TIM_CALL(expr, op, label, phase, size, it, ep, cat)                                        \
  do {                                                                                             \
    e = tim_add(&l, op, label, phase, size, it, ep, cat);                                          \
    e->t_lo = csv_now_mono();                                                                      \
    ASSERT_OK(expr);                                                                               \
    e->t_hi = csv_now_mono();                                                                      \
  } while (0)

  o = tim_opts("enc.l1", NULL, COLLIE_CAT_OTHER);
  TIM_CALL(collie_allreduce(comm, s, d, 1001, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL), "ALLREDUCE",
           "enc.l1", NULL, 4004, 0, 0, "other");

  ASSERT_OK(collie_step_begin(comm, 5, 2));
  o = tim_opts("ag", "sparse", COLLIE_CAT_FEATURES_ALLGATHER);
  TIM_CALL(collie_allgather(comm, s, d, 33, COLLIE_FLOAT16, &o, NULL), "ALLGATHER", "ag", "sparse",
           66, 5, 2, "features_allgather");
  {
    size_t cnt[16], dsp[16], tot = 0;
    for (int q = 0; q < p; q++) {
      cnt[q] = (size_t)(q + 2);
      dsp[q] = tot;
      tot += cnt[q];
    }
    o = tim_opts("agv", NULL, COLLIE_CAT_MOMENTS_MU);
    TIM_CALL(collie_allgatherv(comm, s, cnt[r], d, cnt, dsp, COLLIE_INT32, &o, NULL), "ALLGATHER",
             "agv", NULL, cnt[r] * 4, 5, 2, "moments_mu");
  }
  o = tim_opts("rs", NULL, grads);
  TIM_CALL(collie_reduce_scatter(comm, s, d, 10, COLLIE_FLOAT64, COLLIE_SUM, &o, NULL),
           "REDUCE_SCATTER", "rs", NULL, 80, 5, 2, "grads");
  o = tim_opts("bc", NULL, COLLIE_CAT_MOMENTS_SIGMA_FULL);
  TIM_CALL(collie_broadcast(comm, s, 77, COLLIE_UINT8, p - 1, &o, NULL), "BCAST", "bc", NULL, 77, 5,
           2, "moments_sigma_full");
  o = tim_opts("red", NULL, COLLIE_CAT_MOMENTS_SIGMA_DIAG);
  TIM_CALL(collie_reduce(comm, s, d, 12, COLLIE_INT64, COLLIE_SUM, 0, &o, NULL), "REDUCE", "red",
           NULL, 96, 5, 2, "moments_sigma_diag");
  o = tim_opts("a2a", NULL, COLLIE_CAT_MIXTURE_MU_K);
  TIM_CALL(collie_alltoall(comm, s, d, 3, COLLIE_FLOAT32, &o, NULL), "ALLTOALL", "a2a", NULL,
           up * 12, 5, 2, "mixture_muK");
  {
    size_t sc[16], sd[16], rc[16], rd[16], st = 0, rt = 0;
    for (int q = 0; q < p; q++) {
      sc[q] = (size_t)(1 + r + q);
      rc[q] = (size_t)(1 + q + r);
      sd[q] = st;
      rd[q] = rt;
      st += sc[q];
      rt += rc[q];
    }
    o = tim_opts("a2av", NULL, COLLIE_CAT_MIXTURE_SIGMA_K);
    TIM_CALL(collie_alltoallv(comm, s, sc, sd, d, rc, rd, COLLIE_INT8, &o, NULL), "ALLTOALL",
             "a2av", NULL, st, 5, 2, "mixture_sigmaK");
  }
  o = tim_opts("ga", NULL, COLLIE_CAT_THIRD_MOMENT_SKETCH);
  TIM_CALL(collie_gather(comm, s, d, 6, COLLIE_FLOAT64, 0, &o, NULL), "GATHER", "ga", NULL, 48, 5,
           2, "third_moment_sketch");
  o = tim_opts("sc", NULL, COLLIE_CAT_TOPR_INDICES);
  TIM_CALL(collie_scatter(comm, s, d, 5, COLLIE_UINT32, p - 1, &o, NULL), "SCATTER", "sc", NULL, 20,
           5, 2, "topr_indices");
  o = tim_opts("bar", NULL, COLLIE_CAT_OTHER);
  TIM_CALL(collie_barrier(comm, &o, NULL), "BARRIER", "bar", NULL, 0, 5, 2, "other");
  {
    /* One group, two messages: a SEND row and a RECV row. */
    collie_opts_t os = tim_opts("grp.s", NULL, COLLIE_CAT_MOMENTS_MU);
    collie_opts_t orr = tim_opts("grp.r", "recvphase", COLLIE_CAT_OTHER);
    double t0 = csv_now_mono();
    ASSERT_OK(collie_group_start(comm));
    ASSERT_OK(collie_send(comm, s, 40, COLLIE_UINT8, (r + 1) % p, 9, &os, NULL));
    ASSERT_OK(collie_recv(comm, d, 40, COLLIE_UINT8, (r + p - 1) % p, 9, &orr, NULL));
    ASSERT_OK(collie_group_end(comm, NULL));
    double t1 = csv_now_mono();
    e = tim_add(&l, "SEND", "grp.s", NULL, 40, 5, 2, "moments_mu");
    e->t_lo = t0;
    e->t_hi = t1;
    e = tim_add(&l, "RECV", "grp.r", "recvphase", 40, 5, 2, "other");
    e->t_lo = t0;
    e->t_hi = t1;
  }
  {
    /* Async: timed from issue to completion. */
    collie_work_t *w = NULL;
    o = tim_opts("async", NULL, grads);
    e = tim_add(&l, "ALLREDUCE", "async", NULL, big * 8, 5, 2, "grads");
    e->t_lo = csv_now_mono();
    ASSERT_OK(collie_allreduce(comm, s, d, big, COLLIE_FLOAT64, COLLIE_SUM, &o, &w));
    ASSERT_OK(collie_wait(w, 10000));
    e->t_hi = csv_now_mono();
    collie_work_free(w);
  }
  {
    /* A user record whose label needs quoting: comma, quote, line break. */
    collie_timing_t rec;
    memset(&rec, 0, sizeof(rec));
    rec.operation = "COMPRESS";
    rec.layer_name = "enc,\"q\"\nx";
    rec.phase = "fp8";
    rec.message_size_bytes = 123;
    rec.start_counter = csv_now_mono() - 0.25;
    rec.end_counter = rec.start_counter + 0.125;
    ASSERT_OK(collie_timing_record(comm, &rec));
    e = tim_add(&l, "COMPRESS", rec.layer_name, "fp8", 123, 5, 2, NULL);
    e->user = 1;
    e->t_lo = rec.start_counter;
    e->t_hi = rec.end_counter;
  }
  ASSERT_OK(collie_step_end(comm));

  /* After the step: iteration 0, the last step's epoch. */
  o = tim_opts("after", NULL, COLLIE_CAT_OTHER);
  TIM_CALL(collie_allreduce(comm, s, d, 3, COLLIE_INT32, COLLIE_MAX, &o, NULL), "ALLREDUCE",
           "after", NULL, 12, 0, 2, "other");
  {
    /* Long names are cut: operation 31 bytes, layer_name 127, phase 31. */
    char opname[48], longlabel[200], longphase[48];
    memset(opname, 'O', sizeof(opname) - 1);
    opname[sizeof(opname) - 1] = '\0';
    memset(longlabel, 'L', sizeof(longlabel) - 1);
    longlabel[sizeof(longlabel) - 1] = '\0';
    memset(longphase, 'P', sizeof(longphase) - 1);
    longphase[sizeof(longphase) - 1] = '\0';
    collie_timing_t rec;
    memset(&rec, 0, sizeof(rec));
    rec.operation = opname;
    rec.layer_name = longlabel;
    rec.phase = longphase;
    rec.message_size_bytes = 7;
    rec.start_counter = csv_now_mono();
    rec.end_counter = rec.start_counter;
    ASSERT_OK(collie_timing_record(comm, &rec));
    snprintf(lbl, sizeof(lbl), "%.127s", longlabel);
    e = tim_add(&l, "OOOOOOOOOOOOOOOOOOOOOOOOOOOOOOO", lbl, "PPPPPPPPPPPPPPPPPPPPPPPPPPPPPPP", 7, 0,
                2, NULL);
    e->user = 1;
    e->t_lo = e->t_hi = rec.start_counter;
    ASSERT(strlen(e->op) == 31 && strlen(e->phase) == 31 && strlen(e->label) == 127);
  }
  {
    /* Inside another step, with NULL label and phase. */
    collie_timing_t rec;
    memset(&rec, 0, sizeof(rec));
    rec.operation = "H2D";
    rec.message_size_bytes = 1u << 20;
    rec.start_counter = csv_now_mono();
    rec.end_counter = rec.start_counter + 0.001;
    ASSERT_OK(collie_step_begin(comm, 6, 3));
    ASSERT_OK(collie_timing_record(comm, &rec));
    ASSERT_OK(collie_step_end(comm));
    e = tim_add(&l, "H2D", "", NULL, 1u << 20, 6, 3, NULL);
    e->user = 1;
    e->t_lo = rec.start_counter;
    e->t_hi = rec.end_counter;
  }
#undef TIM_CALL
  ASSERT_OK(collie_comm_destroy(comm)); /* flushes and closes the log */
  free(s);
  free(d);

  struct csv_table t;
  tim_check(dir, r, &l, &t);
  /* The quoted field, exactly: inner quotes doubled, the line break kept. */
  ASSERTF(strstr(t.raw, ",\"enc,\"\"q\"\"\nx\",COMPRESS,"),
          "the label with a comma, quotes and a line break is not quoted as RFC 4180 says");
  tim_check_categories(dir, r, &l, &t);
  csv_free(&t);
  free(tim_meta(dir, r, p, 10000, l.n, 0));
}

/* collie_timing_open / flush / close on a running communicator: nothing
 * before open or after close; a split's operations go to the same file,
 * named by the rank in the init communicator; flush writes what is queued;
 * reopening appends under one header; argument errors; a file with another
 * header is refused at open and left alone. */
TEST_IMPL(telemetry_timing_open)
{
  int r = test_rank(), p = test_size();
  char dir[512], other[512], bad[512], path[600], lbl[64];
  snprintf(dir, sizeof(dir), "%s/topen", test_dir());
  snprintf(other, sizeof(other), "%s/tother", test_dir());
  snprintf(bad, sizeof(bad), "%s/tbad", test_dir());
  collie_comm_t *comm = test_comm(), *sub = NULL;
  /* Ranks reversed in sub: its rank differs from the init rank (p >= 2). */
  ASSERT_OK(collie_comm_split(comm, 0, -r, &sub));
  ASSERT(collie_comm_rank(sub) == p - 1 - r);
  float f[64] = {0};
  collie_timing_t rec;
  memset(&rec, 0, sizeof(rec));
  rec.operation = "BEFORE";
  rec.start_counter = rec.end_counter = csv_now_mono();
  collie_opts_t o = tim_opts("not-logged", NULL, 0);

  /* No log open: calls succeed and record nothing. */
  ASSERT_OK(collie_timing_record(comm, &rec));
  ASSERT_OK(collie_timing_flush(comm));
  ASSERT_OK(collie_timing_close(comm));
  ASSERT_OK(collie_allreduce(comm, f, f, 4, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL));

  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_timing_open(comm, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_timing_open(NULL, dir));
  ASSERT_OK(collie_timing_open(comm, dir));
  ASSERT_OK(collie_timing_open(sub, dir)); /* the same directory: fine */
  ASSERT_RC(COLLIE_INVALID_USAGE, "", collie_timing_open(comm, other));
  /* Bad records are refused. */
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_timing_record(comm, NULL));
  rec.operation = NULL;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_timing_record(comm, &rec));
  rec.operation = "";
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_timing_record(comm, &rec));
  rec.operation = "BACKWARDS";
  rec.end_counter = rec.start_counter - 1;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_timing_record(comm, &rec));
  rec.end_counter = NAN; /* not a time: refused like a backwards one */
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "not at or after start_counter",
            collie_timing_record(comm, &rec));

  struct tim_list l = {0};
  struct tim_exp *e;
#define TIM_OP(op, size, cat, expr)                                                                \
  do {                                                                                             \
    snprintf(lbl, sizeof(lbl), "r%d.%d", r, l.n);                                                  \
    o = tim_opts(lbl, NULL, cat);                                                                  \
    e = tim_add(&l, op, lbl, NULL, size, 0, 0, NULL);                                              \
    e->t_lo = csv_now_mono();                                                                      \
    ASSERT_OK(expr);                                                                               \
    e->t_hi = csv_now_mono();                                                                      \
  } while (0)
  TIM_OP("ALLREDUCE", 16, 0, collie_allreduce(comm, f, f, 4, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL));
  TIM_OP("BCAST", 40, 0, collie_broadcast(sub, f, 10, COLLIE_FLOAT32, 0, &o, NULL));
  snprintf(lbl, sizeof(lbl), "r%d.%d", r, l.n);
  rec.layer_name = lbl;
  rec.start_counter = csv_now_mono();
  rec.end_counter = rec.start_counter + 0.5;
  rec.message_size_bytes = 5;
  ASSERT_OK(collie_timing_record(sub, &rec));
  e = tim_add(&l, "BACKWARDS", lbl, NULL, 5, 0, 0, NULL);
  e->user = 1;
  e->t_lo = rec.start_counter;
  e->t_hi = rec.end_counter;

  /* flush writes what is queued now, without closing. */
  ASSERT_OK(collie_timing_flush(comm));
  struct csv_table t;
  tim_check(dir, r, &l, &t);
  csv_free(&t);
  free(tim_meta(dir, r, p, 10000, l.n, 0));

  TIM_OP("ALLGATHER", 8, 0, collie_allgather(sub, f, f + 8, 2, COLLIE_FLOAT32, &o, NULL));
  ASSERT_OK(collie_timing_close(sub)); /* closes the tree's log */
  tim_check(dir, r, &l, &t);
  csv_free(&t);
  free(tim_meta(dir, r, p, 10000, l.n, 0));

  /* Closed: nothing more is logged; closing again is fine. */
  o = tim_opts("not-logged", NULL, 0);
  ASSERT_OK(collie_allreduce(comm, f, f, 4, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL));
  rec.layer_name = "not-logged";
  rec.end_counter = rec.start_counter;
  ASSERT_OK(collie_timing_record(comm, &rec));
  ASSERT_OK(collie_timing_close(comm));

  /* Reopened: appended under the one header; now another dir may be opened later. */
  ASSERT_OK(collie_timing_open(sub, dir));
  TIM_OP("REDUCE", 4, 0, collie_reduce(comm, f, f + 32, 1, COLLIE_INT32, COLLIE_SUM, 1, &o, NULL));
  ASSERT_OK(collie_timing_close(comm));
  tim_check(dir, r, &l, &t);
  ASSERTF(t.nlines == (size_t)l.n + 1, "%zu lines for %d rows and one header", t.nlines, l.n);
  csv_free(&t);
#undef TIM_OP

  /* A file with another header: open refused, file untouched. */
  ASSERT(mkdir(bad, 0700) == 0 || errno == EEXIST);
  tim_path(path, sizeof(path), bad, r, ".csv");
  const char *old = "timestamp,iteration,epoch,layer,operation\nx,1,0,a,B\n";
  FILE *fp = fopen(path, "w");
  ASSERT(fp && fputs(old, fp) >= 0 && fclose(fp) == 0);
  ASSERT_RC(COLLIE_INVALID_USAGE, "timing-rank", collie_timing_open(comm, bad));
  char *now = csv_slurp(path, NULL);
  ASSERT(now && !strcmp(now, old));
  free(now);
  /* A directory under a regular file cannot exist: SYSTEM_ERROR naming it. */
  snprintf(path, sizeof(path), "%s/plainfile-%d", test_dir(), r);
  fp = fopen(path, "w");
  ASSERT(fp && fclose(fp) == 0);
  snprintf(path, sizeof(path), "%s/plainfile-%d/dir", test_dir(), r);
  ASSERT_RC(COLLIE_SYSTEM_ERROR, "plainfile", collie_timing_open(comm, path));
  /* Missing parents are created, as mkdir -p. */
  char nested[600];
  snprintf(nested, sizeof(nested), "%s/no/such/dir", test_dir());
  ASSERT_OK(collie_timing_open(comm, nested));
  ASSERT_OK(collie_timing_close(comm));
  tim_path(path, sizeof(path), nested, r, ".csv");
  ASSERTF(access(path, R_OK) == 0, "%s was not created", path);
  /* The other directory now opens (nothing is open). */
  ASSERT_OK(collie_timing_open(comm, other));
  ASSERT_OK(collie_timing_close(comm));

  ASSERT_OK(collie_comm_destroy(sub));
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Queue of 8, no drain for 100 s: 100 records never block, the first 8 are
 * kept, 92 are dropped and counted in .meta, and closing warns about them. */
struct tim_close_arg {
  collie_comm_t *comm;
  collie_result_t rc;
};

static void
tim_close_fn(void *arg)
{
  struct tim_close_arg *a = arg;
  a->rc = collie_timing_close(a->comm);
}

TEST_IMPL(telemetry_timing_overflow)
{
  int r = test_rank(), p = test_size();
  char dir[512], name[100][16];
  snprintf(dir, sizeof(dir), "%s/tq", test_dir());
  setenv("COLLIE_TIMING_LOG", dir, 1);
  setenv("COLLIE_TIMING_QUEUE", "8", 1);
  setenv("COLLIE_TIMING_FLUSH_MS", "100000", 1);
  collie_comm_t *comm = test_comm();
  struct tim_list l = {0};
  double t0 = csv_now_mono();
  for (int i = 0; i < 100; i++) {
    collie_timing_t rec;
    memset(&rec, 0, sizeof(rec));
    snprintf(name[i], sizeof(name[i]), "U%03d", i);
    rec.operation = name[i];
    rec.layer_name = "q";
    rec.start_counter = rec.end_counter = csv_now_mono();
    ASSERT_OK(collie_timing_record(comm, &rec));
    if (i < 8) {
      struct tim_exp *e = tim_add(&l, name[i], "q", NULL, 0, 0, 0, NULL);
      e->user = 1;
      e->t_lo = e->t_hi = rec.start_counter;
    }
  }
  double dt = csv_now_mono() - t0;
  ASSERTF(dt < 5, "100 records into a full queue took %.3f s: recording blocked", dt);
  struct tim_close_arg arg = {comm, COLLIE_INTERNAL_ERROR};
  char *err = test_capture_stderr(tim_close_fn, &arg);
  ASSERTF(arg.rc == COLLIE_SUCCESS, "collie_timing_close -> %s", collie_result_string(arg.rc));
  ASSERTF(strstr(err, "92") && strcasestr(err, "drop"),
          "closing did not warn about the 92 dropped records; stderr:\n%s", err);
  free(err);
  struct csv_table t;
  tim_check(dir, r, &l, &t);
  csv_free(&t);
  free(tim_meta(dir, r, p, 8, 8, 92));
  ASSERT_OK(collie_comm_destroy(comm));
}

/* With a 100 s flush interval nothing is written while the communicators
 * live; destroying the last of the tree (no flush, no close) writes every
 * record. */
TEST_IMPL(telemetry_timing_destroy_flush)
{
  int r = test_rank(), p = test_size();
  char dir[512], path[600], lbl[32];
  snprintf(dir, sizeof(dir), "%s/td", test_dir());
  setenv("COLLIE_TIMING_LOG", dir, 1);
  setenv("COLLIE_TIMING_FLUSH_MS", "100000", 1);
  collie_comm_t *comm = test_comm(), *sub = NULL;
  ASSERT_OK(collie_comm_split(comm, 0, r, &sub));
  struct tim_list l = {0};
  int64_t x[8] = {0};
  for (int i = 0; i < 6; i++) {
    snprintf(lbl, sizeof(lbl), "d%d", i);
    collie_opts_t o = tim_opts(lbl, NULL, 0);
    struct tim_exp *e =
        tim_add(&l, i % 2 ? "BARRIER" : "ALLREDUCE", lbl, NULL, i % 2 ? 0 : 64, 0, 0, "other");
    e->t_lo = csv_now_mono();
    if (i % 2)
      ASSERT_OK(collie_barrier(comm, &o, NULL));
    else
      ASSERT_OK(collie_allreduce(comm, x, x, 8, COLLIE_INT64, COLLIE_SUM, &o, NULL));
    e->t_hi = csv_now_mono();
  }
  tim_path(path, sizeof(path), dir, r, ".csv");
  struct csv_table t;
  if (csv_load(path, &t) == 0) {
    ASSERTF(t.nrows == 0, "%d rows written before any flush was due", t.nrows);
    csv_free(&t);
  }
  /* The init communicator goes first; the split still logs until it goes. */
  ASSERT_OK(collie_comm_destroy(comm));
  collie_opts_t o = tim_opts("on-sub", NULL, 0);
  struct tim_exp *e = tim_add(&l, "BCAST", "on-sub", NULL, 64, 0, 0, "other");
  e->t_lo = csv_now_mono();
  ASSERT_OK(collie_broadcast(sub, x, 8, COLLIE_INT64, 0, &o, NULL));
  e->t_hi = csv_now_mono();
  ASSERT_OK(collie_comm_destroy(sub));
  tim_check(dir, r, &l, &t);
  csv_free(&t);
  free(tim_meta(dir, r, p, 10000, l.n, 0));
}

/* Rank 1 records and leaves with exit() without destroying anything: its
 * queued records are written at process exit. */
TEST_IMPL(telemetry_timing_exit_flush)
{
  int r = test_rank();
  char dir[512], path[600];
  snprintf(dir, sizeof(dir), "%s/tx", test_dir());
  setenv("COLLIE_TIMING_LOG", dir, 1);
  setenv("COLLIE_TIMING_FLUSH_MS", "100000", 1);
  collie_comm_t *comm = test_comm();
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  if (r == 1) {
    for (int i = 0; i < 3; i++) {
      collie_timing_t rec;
      memset(&rec, 0, sizeof(rec));
      rec.operation = "ATEXIT";
      rec.start_counter = rec.end_counter = csv_now_mono();
      ASSERT_OK(collie_timing_record(comm, &rec));
    }
    fflush(stdout);
    exit(0);
  }
  /* Rank 0: wait for rank 1's file to hold its rows (barrier + 3 records). */
  tim_path(path, sizeof(path), dir, 1, ".csv");
  double deadline = csv_now_mono() + 10;
  int rows = -1;
  while (csv_now_mono() < deadline) {
    struct csv_table t;
    if (csv_load(path, &t) == 0) {
      rows = t.nrows;
      csv_free(&t);
      if (rows >= 4) break;
    }
    usleep(20000);
  }
  ASSERTF(rows == 4, "rank 1 exited with 4 records queued; its file has %d rows", rows);
  ASSERT_OK(collie_comm_abort(comm));
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Rank 1 is killed after three allreduces; rank 0's next allreduce fails, and
 * right then (before any destroy or flush by the test, with a 100 s flush
 * interval) rank 0's file holds the three earlier rows and the failed one. */
TEST_IMPL(telemetry_timing_killed_peer)
{
  int r = test_rank(), p = test_size();
  char dir[512], lbl[32], path[600];
  snprintf(dir, sizeof(dir), "%s/tk", test_dir());
  setenv("COLLIE_TIMING_LOG", dir, 1);
  setenv("COLLIE_TIMING_FLUSH_MS", "100000", 1);
  collie_comm_t *comm = test_comm();
  struct tim_list l = {0};
  float x[256] = {0};
  for (int i = 0; i < 3; i++) {
    snprintf(lbl, sizeof(lbl), "pre%d", i);
    collie_opts_t o = tim_opts(lbl, NULL, 0);
    struct tim_exp *e = tim_add(&l, "ALLREDUCE", lbl, NULL, sizeof(x), 0, 0, "other");
    e->t_lo = csv_now_mono();
    ASSERT_OK(collie_allreduce(comm, x, x, 256, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL));
    e->t_hi = csv_now_mono();
  }
  if (r == 1) {
    usleep(100000);
    test_die_by_sigkill();
  }
  collie_opts_t o = tim_opts("fail", NULL, 0);
  struct tim_exp *e = tim_add(&l, "ALLREDUCE", "fail", NULL, sizeof(x), 0, 0, "other");
  e->t_lo = csv_now_mono();
  collie_result_t rc = collie_allreduce(comm, x, x, 256, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL);
  e->t_hi = csv_now_mono();
  ASSERTF(rc == COLLIE_REMOTE_ERROR || rc == COLLIE_TIMEOUT, "allreduce with rank 1 dead -> %s",
          collie_result_string(rc));
  tim_path(path, sizeof(path), dir, r, ".csv");
  struct csv_table t;
  int rows = csv_load(path, &t) == 0 ? t.nrows : -1;
  if (rows >= 0) csv_free(&t);
  if (rows != l.n) {
    /* Say whether the rows come later (flushed asynchronously) or never. */
    usleep(1000000);
    int later = csv_load(path, &t) == 0 ? t.nrows : -1;
    if (later >= 0) csv_free(&t);
    ASSERTF(0, "right after the failure %s has %d rows, want %d (1 s later: %d)", path, rows, l.n,
            later);
  }
  tim_check(dir, r, &l, &t);
  csv_free(&t);
  ASSERT_OK(collie_comm_destroy(comm));
  /* Destroy flushes again: still exactly those rows, none twice. */
  tim_check(dir, r, &l, &t);
  csv_free(&t);
  free(tim_meta(dir, r, p, 10000, l.n, 0));
}

/* COLLIE_TIMING_LOG names a directory where rank 1's file exists with
 * another header: init fails with INVALID_USAGE on every rank (promptly),
 * rank 1's message names its file, and the file is left alone. */
TEST_IMPL(telemetry_timing_header_mismatch)
{
  int r = test_rank();
  char dir[512], path[600];
  snprintf(dir, sizeof(dir), "%s/tm", test_dir());
  const char *old = "a,b,c\n1,2,3\n";
  if (r == 1) {
    ASSERT(mkdir(dir, 0700) == 0 || errno == EEXIST);
    tim_path(path, sizeof(path), dir, 1, ".csv");
    FILE *fp = fopen(path, "w");
    ASSERT(fp && fputs(old, fp) >= 0 && fclose(fp) == 0);
  }
  setenv("COLLIE_TIMING_LOG", dir, 1);
  collie_comm_t *comm = NULL;
  double t0 = csv_now_mono();
  collie_result_t rc = collie_comm_init(&comm);
  double dt = csv_now_mono() - t0;
  ASSERTF(rc == COLLIE_INVALID_USAGE, "init -> %s, want INVALID_USAGE: %s",
          collie_result_string(rc), collie_last_error());
  if (r == 1)
    ASSERTF(strstr(collie_last_error(), "timing-rank1.csv"), "message does not name the file: %s",
            collie_last_error());
  ASSERTF(dt < 10, "init took %.1f s to fail", dt);
  if (r == 1) {
    char *now = csv_slurp(path, NULL);
    ASSERT(now && !strcmp(now, old));
    free(now);
  }
}
