/*
 * telemetry_steps_test.c - comms.csv checked against docs/telemetry.md: the
 * exact header (with and without registered categories), every collective's
 * wire bytes computed here from the doc's formulas, the category split, the
 * time and bandwidth columns, step accounting with async operations and
 * split communicators, the step API's errors, rank 0 as the only writer,
 * COLLIE_COMMS_LOG=0, appending to an existing file and refusing one whose
 * header differs.
 *
 * The expected header is written out below from the doc, not taken from the
 * library: it is the spec. Only rank 0 reads the file, after every rank has
 * destroyed its communicators (csv_wait_marks), so a rank that wrongly wrote
 * would be seen.
 */
#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coll/csv_read.h"
#include "runner.h"

/* docs/telemetry.md, "Columns, in this order" (one line in the file). */
#define STEPS_HEADER                                                                               \
  "step,epoch,world_size,"                                                                         \
  "bytes_all_reduce,bytes_all_gather,bytes_reduce_scatter,bytes_broadcast,bytes_total,"            \
  "t_all_reduce_ms,t_all_gather_ms,t_reduce_scatter_ms,t_broadcast_ms,t_total_ms,"                 \
  "eff_bandwidth_MiBps,"                                                                           \
  "bytes_features_allgather,bytes_moments_mu,bytes_moments_sigma_full,bytes_moments_sigma_diag,"   \
  "bytes_mixture_muK,bytes_mixture_sigmaK,bytes_third_moment_sketch,bytes_topr_indices,"           \
  "bytes_other,"                                                                                   \
  "bytes_reduce,bytes_all_to_all,bytes_gather,bytes_scatter,bytes_send_recv,"                      \
  "t_reduce_ms,t_all_to_all_ms,t_gather_ms,t_scatter_ms,t_send_recv_ms"

/* The collective columns: bytes_<name> and t_<name>_ms. */
enum {
  C_ALLREDUCE,
  C_ALLGATHER,
  C_REDUCE_SCATTER,
  C_BROADCAST,
  C_REDUCE,
  C_ALLTOALL,
  C_GATHER,
  C_SCATTER,
  C_SENDRECV,
  C_N
};
static const char *const steps_coll[C_N] = {"all_reduce", "all_gather", "reduce_scatter",
                                            "broadcast",  "reduce",     "all_to_all",
                                            "gather",     "scatter",    "send_recv"};

/* Built-in category names, indexed by collie_category_t (the doc's table). */
#define STEPS_NBUILTIN 9
#define STEPS_MAXREG 8
static const char *const steps_cat[STEPS_NBUILTIN] = {"other",
                                                      "features_allgather",
                                                      "moments_mu",
                                                      "moments_sigma_full",
                                                      "moments_sigma_diag",
                                                      "mixture_muK",
                                                      "mixture_sigmaK",
                                                      "third_moment_sketch",
                                                      "topr_indices"};

/* What rank 0's row for one step must hold. */
struct steps_row {
  int64_t step, epoch;
  uint64_t bytes[C_N];
  unsigned used;                               /* bit c: a call of collective c was made */
  uint64_t cat[STEPS_NBUILTIN + STEPS_MAXREG]; /* built-ins, then registered in order */
  double max_ms;                               /* test's wall time of the step; < 0: no bound */
  double min_ms[C_N];                          /* lower bounds on t_<c>_ms */
};

/* Registered categories of the communicator under test (column order). */
struct steps_cats {
  int n;
  const char *name[STEPS_MAXREG];
  int id[STEPS_MAXREG];
};

static void
steps_add(struct steps_row *e, const struct steps_cats *reg, int c, int cat, uint64_t wire)
{
  e->bytes[c] += wire;
  e->used |= 1u << c;
  if (cat < STEPS_NBUILTIN) {
    e->cat[cat] += wire;
    return;
  }
  for (int i = 0; reg && i < reg->n; i++)
    if (reg->id[i] == cat) {
      e->cat[STEPS_NBUILTIN + i] += wire;
      return;
    }
  ASSERTF(0, "category %d is neither built-in nor registered", cat);
}

static int64_t
steps_int(const struct csv_table *t, int row, const char *col)
{
  const char *v = csv_cell(t, row, col);
  ASSERTF(v, "row %d has no column %s", row, col);
  ASSERTF(csv_is_int(v), "row %d: %s = \"%s\" is not an integer", row, col, v);
  return strtoll(v, NULL, 10);
}

static double
steps_ms(const struct csv_table *t, int row, const char *col)
{
  const char *v = csv_cell(t, row, col);
  ASSERTF(v, "row %d has no column %s", row, col);
  ASSERTF(csv_is_fixed(v, 3), "row %d: %s = \"%s\" is not a number with three decimals", row, col,
          v);
  return strtod(v, NULL);
}

static char *
steps_header(const struct steps_cats *reg)
{
  size_t len = sizeof(STEPS_HEADER) + 64 * STEPS_MAXREG;
  char *h = malloc(len);
  ASSERT(h);
  snprintf(h, len, "%s", STEPS_HEADER);
  for (int i = 0; reg && i < reg->n; i++) {
    strcat(h, ",bytes_");
    strcat(h, reg->name[i]);
  }
  return h;
}

static void
steps_path(char *buf, size_t len)
{
  snprintf(buf, len, "%s/comms.csv", test_dir());
}

/* Loads comms.csv and checks its header is exactly the doc's (plus reg). */
static void
steps_load(struct csv_table *t, const struct steps_cats *reg)
{
  char path[512];
  steps_path(path, sizeof(path));
  ASSERTF(csv_load(path, t) == 0, "%s: %s", path, strerror(errno));
  char *want = steps_header(reg);
  ASSERTF(!strcmp(t->first_line, want), "comms.csv header\n  got:  %s\n  want: %s", t->first_line,
          want);
  free(want);
}

/* Checks data record `row` against e, for a world of `world` ranks. */
static void
steps_check(const struct csv_table *t, int row, const struct steps_row *e, int world,
            const struct steps_cats *reg)
{
  char col[64];
  ASSERTF(t->nfields[row] == t->ncols, "row %d has %d fields, header %d", row, t->nfields[row],
          t->ncols);
  ASSERTF(steps_int(t, row, "step") == e->step, "row %d: step %lld, want %lld", row,
          (long long)steps_int(t, row, "step"), (long long)e->step);
  ASSERTF(steps_int(t, row, "epoch") == e->epoch, "step %lld: epoch %lld, want %lld",
          (long long)e->step, (long long)steps_int(t, row, "epoch"), (long long)e->epoch);
  ASSERTF(steps_int(t, row, "world_size") == world, "step %lld: world_size %lld, want %d",
          (long long)e->step, (long long)steps_int(t, row, "world_size"), world);
  uint64_t total = 0;
  double tsum = 0;
  for (int c = 0; c < C_N; c++) {
    snprintf(col, sizeof(col), "bytes_%s", steps_coll[c]);
    int64_t b = steps_int(t, row, col);
    ASSERTF(b == (int64_t)e->bytes[c], "step %lld: %s = %lld, want %llu", (long long)e->step, col,
            (long long)b, (unsigned long long)e->bytes[c]);
    total += e->bytes[c];
    snprintf(col, sizeof(col), "t_%s_ms", steps_coll[c]);
    double ms = steps_ms(t, row, col);
    tsum += ms;
    ASSERTF(ms >= 0, "step %lld: %s = %.3f < 0", (long long)e->step, col, ms);
    if (!(e->used & (1u << c)))
      ASSERTF(ms == 0, "step %lld: %s = %.3f but the step made no such call", (long long)e->step,
              col, ms);
    if (e->max_ms >= 0)
      ASSERTF(ms <= e->max_ms + 0.002, "step %lld: %s = %.3f ms, longer than the whole step %.3f",
              (long long)e->step, col, ms, e->max_ms);
    ASSERTF(ms >= e->min_ms[c], "step %lld: %s = %.3f ms, want >= %.3f", (long long)e->step, col,
            ms, e->min_ms[c]);
  }
  int64_t bt = steps_int(t, row, "bytes_total");
  ASSERTF(bt == (int64_t)total, "step %lld: bytes_total %lld, want %llu", (long long)e->step,
          (long long)bt, (unsigned long long)total);
  double tt = steps_ms(t, row, "t_total_ms");
  /* The file is self-consistent: t_total_ms is the sum of the printed t
   * columns, and the bandwidth follows from the printed bytes_total and
   * t_total_ms (0 when that is 0), to the printed precision. */
  ASSERTF(fabs(tt - tsum) < 1e-6, "step %lld: t_total_ms %.3f, sum of the t columns %.3f",
          (long long)e->step, tt, tsum);
  double bw = steps_ms(t, row, "eff_bandwidth_MiBps");
  double want_bw = tt > 0 ? ((double)total / 1048576.0) / (tt / 1000.0) : 0;
  ASSERTF(fabs(bw - want_bw) <= 0.0005 + 1e-9 * want_bw,
          "step %lld: eff_bandwidth_MiBps %.3f, want (bytes_total %llu / 2^20) / (t_total_ms %.3f "
          "/ 1000) = %.3f",
          (long long)e->step, bw, (unsigned long long)total, tt, want_bw);
  uint64_t csum = 0;
  int ncat = STEPS_NBUILTIN + (reg ? reg->n : 0);
  for (int i = 0; i < ncat; i++) {
    const char *name = i < STEPS_NBUILTIN ? steps_cat[i] : reg->name[i - STEPS_NBUILTIN];
    snprintf(col, sizeof(col), "bytes_%s", name);
    int64_t b = steps_int(t, row, col);
    ASSERTF(b == (int64_t)e->cat[i], "step %lld: %s = %lld, want %llu", (long long)e->step, col,
            (long long)b, (unsigned long long)e->cat[i]);
    csum += (uint64_t)b;
  }
  ASSERTF(csum == total, "step %lld: category columns sum to %llu, bytes_total %llu",
          (long long)e->step, (unsigned long long)csum, (unsigned long long)total);
}

static void *
steps_alloc(size_t bytes)
{
  void *p = calloc(1, bytes ? bytes : 1);
  ASSERT(p);
  return p;
}

/* The calls of the value test; each is one step. */
enum {
  K_ALLREDUCE,
  K_ALLGATHER,
  K_ALLGATHERV,
  K_REDUCE_SCATTER,
  K_BCAST_ROOT0,
  K_BCAST_ROOTLAST,
  K_REDUCE_ROOT0,
  K_REDUCE_ROOTLAST,
  K_ALLTOALL,
  K_ALLTOALLV,
  K_GATHER,
  K_SCATTER,
  K_GROUP_SENDRECV,
  K_SENDRECV, /* p >= 2 */
  K_BARRIER,
  K_ZERO_COUNT,
  K_MULTI,
  K_COUNT
};

/* Runs the calls of `kind` with category cat on every rank; adds to e the
 * wire bytes this rank must be charged (docs/telemetry.md, "The wire
 * model"): the formulas are written out here, p = the communicator's size. */
static void
steps_do(collie_comm_t *comm, int kind, int cat, struct steps_row *e, const struct steps_cats *reg)
{
  int r = collie_comm_rank(comm), p = collie_comm_size(comm);
  uint64_t up = (uint64_t)p;
  collie_opts_t o;
  memset(&o, 0, sizeof(o));
  o.category = cat;
  switch (kind) {
  case K_ALLREDUCE: { /* 2(p-1)/p x size, rounded down */
    size_t n = 1001;
    void *s = steps_alloc(n * 8), *d = steps_alloc(n * 8);
    ASSERT_OK(collie_allreduce(comm, s, d, n, COLLIE_FLOAT64, COLLIE_SUM, &o, NULL));
    steps_add(e, reg, C_ALLREDUCE, cat, 2 * (up - 1) * (n * 8) / up);
    free(s);
    free(d);
    break;
  }
  case K_ALLGATHER: { /* (p-1) x the input shard */
    size_t n = 333;
    void *s = steps_alloc(n * 2), *d = steps_alloc(n * 2 * up);
    ASSERT_OK(collie_allgather(comm, s, d, n, COLLIE_FLOAT16, &o, NULL));
    steps_add(e, reg, C_ALLGATHER, cat, (up - 1) * n * 2);
    free(s);
    free(d);
    break;
  }
  case K_ALLGATHERV: { /* the other ranks' shards; counts differ per rank */
    size_t *cnt = steps_alloc(up * sizeof(size_t)), *dsp = steps_alloc(up * sizeof(size_t));
    size_t tot = 0;
    uint64_t others = 0;
    for (int q = 0; q < p; q++) {
      cnt[q] = (size_t)(2 * q + 3);
      dsp[q] = tot;
      tot += cnt[q];
      if (q != r) others += cnt[q] * 4;
    }
    void *s = steps_alloc(cnt[r] * 4), *d = steps_alloc(tot * 4);
    ASSERT_OK(collie_allgatherv(comm, s, cnt[r], d, cnt, dsp, COLLIE_INT32, &o, NULL));
    steps_add(e, reg, C_ALLGATHER, cat, others);
    free(s);
    free(d);
    free(cnt);
    free(dsp);
    break;
  }
  case K_REDUCE_SCATTER: { /* (p-1) x the output shard */
    size_t n = 250;
    void *s = steps_alloc(n * 4 * up), *d = steps_alloc(n * 4);
    ASSERT_OK(collie_reduce_scatter(comm, s, d, n, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL));
    steps_add(e, reg, C_REDUCE_SCATTER, cat, (up - 1) * n * 4);
    free(s);
    free(d);
    break;
  }
  case K_BCAST_ROOT0:
  case K_BCAST_ROOTLAST: { /* 1 x size, whoever the root */
    int root = kind == K_BCAST_ROOT0 ? 0 : p - 1;
    size_t n = kind == K_BCAST_ROOT0 ? 777 : 100, es = kind == K_BCAST_ROOT0 ? 1 : 8;
    void *b = steps_alloc(n * es);
    ASSERT_OK(collie_broadcast(comm, b, n, kind == K_BCAST_ROOT0 ? COLLIE_UINT8 : COLLIE_INT64,
                               root, &o, NULL));
    steps_add(e, reg, C_BROADCAST, cat, n * es);
    free(b);
    break;
  }
  case K_REDUCE_ROOT0:
  case K_REDUCE_ROOTLAST: { /* 1 x size, whoever the root */
    int root = kind == K_REDUCE_ROOT0 ? 0 : p - 1;
    size_t n = kind == K_REDUCE_ROOT0 ? 513 : 10;
    void *s = steps_alloc(n * 4), *d = steps_alloc(n * 4);
    ASSERT_OK(collie_reduce(comm, s, r == root ? d : NULL, n,
                            kind == K_REDUCE_ROOT0 ? COLLIE_FLOAT32 : COLLIE_INT32, COLLIE_MAX,
                            root, &o, NULL));
    steps_add(e, reg, C_REDUCE, cat, n * 4);
    free(s);
    free(d);
    break;
  }
  case K_ALLTOALL: { /* (p-1)/p x the whole send buffer */
    size_t n = 7;
    uint64_t size = up * n * 4;
    void *s = steps_alloc(size), *d = steps_alloc(size);
    ASSERT_OK(collie_alltoall(comm, s, d, n, COLLIE_FLOAT32, &o, NULL));
    steps_add(e, reg, C_ALLTOALL, cat, (up - 1) * size / up);
    free(s);
    free(d);
    break;
  }
  case K_ALLTOALLV: { /* bytes sent to the other ranks; count(src, dst) = 1 + src + 2 dst */
    size_t *sc = steps_alloc(up * sizeof(size_t)), *sd = steps_alloc(up * sizeof(size_t));
    size_t *rc = steps_alloc(up * sizeof(size_t)), *rd = steps_alloc(up * sizeof(size_t));
    size_t st = 0, rt = 0;
    uint64_t others = 0;
    for (int q = 0; q < p; q++) {
      sc[q] = (size_t)(1 + r + 2 * q);
      rc[q] = (size_t)(1 + q + 2 * r);
      sd[q] = st;
      rd[q] = rt;
      st += sc[q];
      rt += rc[q];
      if (q != r) others += sc[q];
    }
    void *s = steps_alloc(st), *d = steps_alloc(rt);
    ASSERT_OK(collie_alltoallv(comm, s, sc, sd, d, rc, rd, COLLIE_UINT8, &o, NULL));
    steps_add(e, reg, C_ALLTOALL, cat, others);
    free(s);
    free(d);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    break;
  }
  case K_GATHER: { /* (p-1) x the shard, root or not */
    size_t n = 5;
    int root = p - 1;
    void *s = steps_alloc(n * 8), *d = steps_alloc(n * 8 * up);
    ASSERT_OK(collie_gather(comm, s, r == root ? d : NULL, n, COLLIE_FLOAT64, root, &o, NULL));
    steps_add(e, reg, C_GATHER, cat, (up - 1) * n * 8);
    free(s);
    free(d);
    break;
  }
  case K_SCATTER: { /* (p-1) x the shard, root or not */
    size_t n = 9;
    int root = p - 1;
    void *s = steps_alloc(n * up), *d = steps_alloc(n);
    ASSERT_OK(collie_scatter(comm, r == root ? s : NULL, d, n, COLLIE_INT8, root, &o, NULL));
    steps_add(e, reg, C_SCATTER, cat, (up - 1) * n);
    free(s);
    free(d);
    break;
  }
  case K_GROUP_SENDRECV: { /* each message 1 x size at each end: one send + one recv here */
    size_t n = 50;
    void *s = steps_alloc(n * 4), *d = steps_alloc(n * 4);
    ASSERT_OK(collie_group_start(comm));
    ASSERT_OK(collie_send(comm, s, n, COLLIE_UINT32, (r + 1) % p, 3, &o, NULL));
    ASSERT_OK(collie_recv(comm, d, n, COLLIE_UINT32, (r + p - 1) % p, 3, &o, NULL));
    ASSERT_OK(collie_group_end(comm, NULL));
    steps_add(e, reg, C_SENDRECV, cat, 2 * n * 4);
    free(s);
    free(d);
    break;
  }
  case K_SENDRECV: { /* rank 0 sends 64 B to rank 1 and receives 96 B back */
    uint8_t a[64], b[96];
    memset(a, 1, sizeof(a));
    memset(b, 2, sizeof(b));
    if (r == 0) {
      ASSERT_OK(collie_send(comm, a, sizeof(a), COLLIE_UINT8, 1, 5, &o, NULL));
      ASSERT_OK(collie_recv(comm, b, sizeof(b), COLLIE_UINT8, 1, 6, &o, NULL));
      steps_add(e, reg, C_SENDRECV, cat, sizeof(a));
      steps_add(e, reg, C_SENDRECV, cat, sizeof(b));
    } else if (r == 1) {
      ASSERT_OK(collie_recv(comm, a, sizeof(a), COLLIE_UINT8, 0, 5, &o, NULL));
      ASSERT_OK(collie_send(comm, b, sizeof(b), COLLIE_UINT8, 0, 6, &o, NULL));
    }
    break;
  }
  case K_BARRIER: /* no bytes, no column: the row is all zeros */
    ASSERT_OK(collie_barrier(comm, &o, NULL));
    break;
  case K_ZERO_COUNT: /* a count of 0 still is a call: 0 bytes, its time in the column */
    ASSERT_OK(collie_allreduce(comm, NULL, NULL, 0, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL));
    steps_add(e, reg, C_ALLREDUCE, cat, 0);
    break;
  case K_MULTI: { /* sums within a step, per-call rounding, several categories */
    size_t n = 1001, big = 1u << 18;
    void *s = steps_alloc(big * 4), *d = steps_alloc(big * 4);
    collie_opts_t mu = o, topr = o, other = o;
    mu.category = COLLIE_CAT_MOMENTS_MU;
    topr.category = COLLIE_CAT_TOPR_INDICES;
    other.category = COLLIE_CAT_OTHER;
    for (int i = 0; i < 2; i++) {
      ASSERT_OK(collie_allreduce(comm, s, d, n, COLLIE_FLOAT32, COLLIE_SUM, &mu, NULL));
      steps_add(e, reg, C_ALLREDUCE, COLLIE_CAT_MOMENTS_MU, 2 * (up - 1) * (n * 4) / up);
    }
    ASSERT_OK(collie_allreduce(comm, s, d, big, COLLIE_FLOAT32, COLLIE_SUM, &other, NULL));
    steps_add(e, reg, C_ALLREDUCE, COLLIE_CAT_OTHER, 2 * (up - 1) * (big * 4) / up);
    ASSERT_OK(collie_allgather(comm, s, d, 5, COLLIE_INT8, &topr, NULL));
    steps_add(e, reg, C_ALLGATHER, COLLIE_CAT_TOPR_INDICES, (up - 1) * 5);
    /* 1 MiB through p >= 2 ranks cannot take under a microsecond. */
    if (p >= 2) e->min_ms[C_ALLREDUCE] = 0.001;
    free(s);
    free(d);
    break;
  }
  default:
    ASSERT(0);
  }
}

/* Every rank marks `tag` after it is done with the library; rank 0 then
 * waits for all of them. */
static void
steps_sync_done(const char *tag)
{
  csv_mark(tag);
  if (test_rank() == 0) csv_wait_marks(tag, test_size(), 15);
}

/* One step per collective (and per root, p2p form, zero count, barrier, and a
 * step of several calls); rank 0's rows checked value by value. */
TEST_IMPL(telemetry_values)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  struct steps_row exp[K_COUNT];
  int nexp = 0;
  for (int kind = 0; kind < K_COUNT; kind++) {
    if (kind == K_SENDRECV && p < 2) continue;
    struct steps_row *e = &exp[nexp];
    memset(e, 0, sizeof(*e));
    e->step = nexp + 1;
    e->epoch = nexp / 4;
    /* A barrier outside any step: not in comms.csv, and it lines the ranks
     * up so each step's wall time bounds its calls. */
    ASSERT_OK(collie_barrier(comm, NULL, NULL));
    double t0 = csv_now_mono();
    ASSERT_OK(collie_step_begin(comm, e->step, e->epoch));
    steps_do(comm, kind, nexp % STEPS_NBUILTIN, e, NULL);
    ASSERT_OK(collie_step_end(comm));
    e->max_ms = (csv_now_mono() - t0) * 1e3;
    nexp++;
  }
  ASSERT_OK(collie_comm_destroy(comm));
  steps_sync_done("destroyed");
  if (r != 0) return;
  struct csv_table t;
  steps_load(&t, NULL);
  ASSERTF(t.nrows == nexp, "comms.csv has %d rows, want one per step: %d", t.nrows, nexp);
  for (int i = 0; i < nexp; i++) steps_check(&t, i, &exp[i], p, NULL);
  csv_free(&t);
}

/* Registered categories: columns after the fixed ones, in registration order;
 * the same id on re-registration; a category registered after init refused
 * on a call (naming it) without poisoning the communicator or counting bytes. */
TEST_IMPL(telemetry_categories_csv)
{
  int r = test_rank(), p = test_size(), again = -1;
  struct steps_cats reg = {2, {"grad_sparse", "kv_cache"}, {-1, -1}};
  ASSERT_OK(collie_category_register("grad_sparse", &reg.id[0]));
  ASSERT_OK(collie_category_register("kv_cache", &reg.id[1]));
  ASSERT_OK(collie_category_register("grad_sparse", &again));
  ASSERT(again == reg.id[0]);
  ASSERT(reg.id[0] != reg.id[1]);
  ASSERT(reg.id[0] >= COLLIE_CAT_BUILTIN_COUNT_ && reg.id[1] >= COLLIE_CAT_BUILTIN_COUNT_);
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_category_register("bad-name", &again));
  collie_comm_t *comm = test_comm();
  int late = -1;
  ASSERT_OK(collie_category_register("late_cat", &late));
  ASSERT(late != reg.id[0] && late != reg.id[1]);

  struct steps_row e;
  memset(&e, 0, sizeof(e));
  e.step = 1;
  e.epoch = 3;
  e.max_ms = -1;
  ASSERT_OK(collie_step_begin(comm, 1, 3));
  steps_do(comm, K_ALLREDUCE, reg.id[0], &e, &reg);
  steps_do(comm, K_ALLGATHER, reg.id[1], &e, &reg);
  steps_do(comm, K_BCAST_ROOT0, COLLIE_CAT_MOMENTS_MU, &e, &reg);
  steps_do(comm, K_REDUCE_ROOT0, COLLIE_CAT_OTHER, &e, &reg);
  /* Refused before any communication: no bytes, the communicator stays usable. */
  float f[4] = {0};
  collie_opts_t o;
  memset(&o, 0, sizeof(o));
  o.category = late;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "late_cat",
            collie_allreduce(comm, f, f, 4, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL));
  o.category = -1;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "",
            collie_allreduce(comm, f, f, 4, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL));
  o.category = 9999;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_broadcast(comm, f, 4, COLLIE_FLOAT32, 0, &o, NULL));
  steps_do(comm, K_SCATTER, reg.id[1], &e, &reg);
  ASSERT_OK(collie_step_end(comm));
  ASSERT_OK(collie_comm_destroy(comm));
  steps_sync_done("destroyed");
  if (r != 0) return;
  struct csv_table t;
  steps_load(&t, &reg);
  ASSERTF(t.nrows == 1, "comms.csv has %d rows, want 1", t.nrows);
  steps_check(&t, 0, &e, p, &reg);
  ASSERT(e.cat[STEPS_NBUILTIN] > 0 || p == 1);
  csv_free(&t);
}

/* Async work and split communicators: a step's row waits for the step's end
 * and for every operation issued in it, whenever that completes; rows come
 * in step order; a later step never takes an earlier step's bytes; the wire
 * model uses the size of the communicator the call ran on while world_size
 * stays the init communicator's; operations outside steps make no row; a step
 * ended with work pending, and a step still open at destroy, are written. */
TEST_IMPL(telemetry_async_steps)
{
  collie_comm_t *comm = test_comm(), *sub = NULL;
  int r = test_rank(), p = test_size();
  ASSERT(p >= 2);
  uint64_t up = (uint64_t)p;
  enum { PRE = 11, A = 1000, B = 3000, C = 5000, D = 7000, E = 13, F = 17 };
  float *buf = calloc(8192 * 4, sizeof(float));
  ASSERT(buf);
  char path[512];
  steps_path(path, sizeof(path));
  struct csv_table t;

  ASSERT_OK(collie_allreduce(comm, buf, buf, PRE, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  /* sub: world ranks 0 and 1 only, so its calls are charged with p = 2. */
  ASSERT_OK(collie_comm_split(comm, r < 2 ? 0 : COLLIE_SPLIT_NONE, r, &sub));
  ASSERT((sub != NULL) == (r < 2));
  ASSERT_OK(collie_barrier(comm, NULL, NULL));

  struct steps_row exp[4];
  memset(exp, 0, sizeof(exp));
  for (int i = 0; i < 4; i++) {
    exp[i].step = i + 1;
    exp[i].epoch = i / 2;
    exp[i].max_ms = -1;
  }
  collie_work_t *w1 = NULL, *w3 = NULL;
  ASSERT_OK(collie_step_begin(comm, 1, 0));
  if (r == 1) {
    /* Rank 1 runs step 2's call on sub first, then holds back step 1's
     * allreduce on comm until rank 0 has looked at comms.csv, and 300 ms
     * more: rank 0's step 2 completes before its step 1. */
    ASSERT_OK(collie_step_end(comm));
    ASSERT_OK(collie_step_begin(comm, 2, 0));
    ASSERT_OK(
        collie_allreduce(sub, buf + 8192, buf + 8192, B, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
    csv_wait_marks("checked", 1, 15); /* rank 0's mark */
    usleep(300000);
    ASSERT_OK(collie_allreduce(comm, buf, buf, A, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
    ASSERT_OK(collie_step_end(comm));
  } else {
    ASSERT_OK(collie_allreduce(comm, buf, buf, A, COLLIE_FLOAT32, COLLIE_SUM, NULL, &w1));
    steps_add(&exp[0], NULL, C_ALLREDUCE, COLLIE_CAT_OTHER, 2 * (up - 1) * (A * 4) / up);
    exp[0].min_ms[C_ALLREDUCE] = 200; /* issue to completion includes rank 1's 300 ms */
    ASSERT_OK(collie_step_end(comm));
    if (r == 0) {
      /* Step 1 ended but its allreduce cannot have completed: no row yet. */
      if (csv_load(path, &t) == 0) {
        ASSERTF(t.nrows == 0, "step 1's row written before its allreduce completed (%d rows)",
                t.nrows);
        csv_free(&t);
      }
    }
    ASSERT_OK(collie_step_begin(comm, 2, 0));
    if (sub) {
      ASSERT_OK(
          collie_allreduce(sub, buf + 8192, buf + 8192, B, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
      steps_add(&exp[1], NULL, C_ALLREDUCE, COLLIE_CAT_OTHER, 2 * (2 - 1) * (B * 4) / 2);
    }
    ASSERT_OK(collie_step_end(comm));
    if (r == 0) {
      /* Step 2 is complete but step 1 is not: rows go in step order. */
      if (csv_load(path, &t) == 0) {
        ASSERTF(t.nrows == 0, "a row (step %s) written before step 1's allreduce completed",
                t.nrows ? t.rows[0][0] : "?");
        csv_free(&t);
      }
      csv_mark("checked"); /* rank 1 may now join step 1's allreduce */
    }
    ASSERT_OK(collie_wait(w1, 10000));
    collie_work_free(w1);
  }
  /* Outside any step: in no row. */
  ASSERT_OK(collie_allgather(comm, buf, buf + 64, E, COLLIE_FLOAT32, NULL, NULL));

  /* Step 3 ends with its work pending, and nobody waits for it. */
  ASSERT_OK(collie_step_begin(comm, 3, 1));
  ASSERT_OK(collie_allreduce(comm, buf, buf, C, COLLIE_FLOAT32, COLLIE_SUM, NULL, &w3));
  steps_add(&exp[2], NULL, C_ALLREDUCE, COLLIE_CAT_OTHER, 2 * (up - 1) * (C * 4) / up);
  ASSERT_OK(collie_step_end(comm));
  collie_work_free(w3);
  /* Step 4 is still open when the tree is destroyed. The init communicator
   * goes first: the split keeps the tree (and the open step) alive, and its
   * call after that still counts in step 4. */
  ASSERT_OK(collie_step_begin(comm, 4, 1));
  ASSERT_OK(collie_allreduce(comm, buf, buf, D, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  steps_add(&exp[3], NULL, C_ALLREDUCE, COLLIE_CAT_OTHER, 2 * (up - 1) * (D * 4) / up);
  ASSERT_OK(collie_comm_destroy(comm));
  if (sub) {
    ASSERT_OK(collie_allgather(sub, buf, buf + 64, F, COLLIE_FLOAT32, NULL, NULL));
    steps_add(&exp[3], NULL, C_ALLGATHER, COLLIE_CAT_OTHER, (2 - 1) * (F * 4));
    ASSERT_OK(collie_comm_destroy(sub));
  }
  free(buf);
  steps_sync_done("destroyed");
  if (r != 0) return;
  steps_load(&t, NULL);
  ASSERTF(t.nrows == 4, "comms.csv has %d rows, want 4 (steps 1-4)", t.nrows);
  for (int i = 0; i < 4; i++) steps_check(&t, i, &exp[i], p, NULL);
  csv_free(&t);
}

/* The step calls' own errors, and that a refused call changes nothing. */
static void
steps_errors(collie_comm_t *comm)
{
  ASSERT_RC(COLLIE_INVALID_USAGE, "", collie_step_end(comm));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_step_begin(comm, 0, 0));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_step_begin(comm, -3, 0));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_step_begin(comm, 1, -1));
  ASSERT_RC(COLLIE_INVALID_USAGE, "", collie_step_end(comm)); /* none of those opened one */
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_step_begin(NULL, 1, 0));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_step_end(NULL));
}

/* step_begin twice, step_end without begin, step < 1, epoch < 0, NULL comm;
 * a step is the tree's, so it cannot be opened again on a split either. The
 * one valid step still gets exactly its row. */
TEST_IMPL(telemetry_step_errors)
{
  collie_comm_t *comm = test_comm(), *sub = NULL;
  int r = test_rank(), p = test_size();
  ASSERT_OK(collie_comm_split(comm, 0, r, &sub));
  steps_errors(comm);
  steps_errors(sub);
  struct steps_row e;
  memset(&e, 0, sizeof(e));
  e.step = 7;
  e.epoch = 2;
  e.max_ms = -1;
  ASSERT_OK(collie_step_begin(comm, 7, 2));
  ASSERT_RC(COLLIE_INVALID_USAGE, "", collie_step_begin(comm, 8, 2));
  ASSERT_RC(COLLIE_INVALID_USAGE, "", collie_step_begin(sub, 8, 2));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_step_begin(comm, 0, 2));
  steps_do(comm, K_BCAST_ROOT0, COLLIE_CAT_OTHER, &e, NULL);
  ASSERT_OK(collie_step_end(comm));
  ASSERT_RC(COLLIE_INVALID_USAGE, "", collie_step_end(comm));
  ASSERT_RC(COLLIE_INVALID_USAGE, "", collie_step_end(sub));
  ASSERT_OK(collie_comm_destroy(sub));
  ASSERT_OK(collie_comm_destroy(comm));
  /* A destroyed communicator is refused. */
  ASSERT_RC(COLLIE_INVALID_USAGE, "", collie_step_begin(comm, 1, 0));
  steps_sync_done("destroyed");
  if (r != 0) return;
  struct csv_table t;
  steps_load(&t, NULL);
  ASSERTF(t.nrows == 1, "comms.csv has %d rows, want 1", t.nrows);
  steps_check(&t, 0, &e, p, NULL);
  csv_free(&t);
}

/* Every rank writes to the same COLLIE_LOG_DIR (the runner's): exactly one
 * header and one row per step, with rank 0's values (allgatherv charges each
 * rank differently, so another rank's row would not match). */
TEST_IMPL(telemetry_rank0_only)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  enum { NSTEPS = 5 };
  struct steps_row exp[NSTEPS];
  for (int i = 0; i < NSTEPS; i++) {
    memset(&exp[i], 0, sizeof(exp[i]));
    exp[i].step = 10 + i;
    exp[i].epoch = 1;
    exp[i].max_ms = -1;
    ASSERT_OK(collie_step_begin(comm, exp[i].step, 1));
    steps_do(comm, i % 2 ? K_ALLGATHERV : K_ALLTOALLV, COLLIE_CAT_MIXTURE_SIGMA_K, &exp[i], NULL);
    ASSERT_OK(collie_step_end(comm));
  }
  ASSERT_OK(collie_comm_destroy(comm));
  steps_sync_done("destroyed");
  if (r != 0) return;
  struct csv_table t;
  steps_load(&t, NULL);
  ASSERTF(t.nrows == NSTEPS && t.nlines == NSTEPS + 1,
          "comms.csv has %d rows in %zu lines, want %d rows after one header", t.nrows, t.nlines,
          NSTEPS);
  for (int i = 0; i < NSTEPS; i++) steps_check(&t, i, &exp[i], p, NULL);
  csv_free(&t);
}

/* COLLIE_COMMS_LOG=0: no comms.csv at all, while the step calls still
 * validate. */
TEST_IMPL(telemetry_comms_log_off)
{
  setenv("COLLIE_COMMS_LOG", "0", 1);
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  struct steps_row e;
  memset(&e, 0, sizeof(e));
  ASSERT_RC(COLLIE_INVALID_USAGE, "", collie_step_end(comm));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_step_begin(comm, 0, 0));
  for (int i = 1; i <= 3; i++) {
    ASSERT_OK(collie_step_begin(comm, i, 0));
    ASSERT_RC(COLLIE_INVALID_USAGE, "", collie_step_begin(comm, i + 1, 0));
    steps_do(comm, K_ALLREDUCE, COLLIE_CAT_MOMENTS_MU, &e, NULL);
    steps_do(comm, K_GATHER, COLLIE_CAT_OTHER, &e, NULL);
    ASSERT_OK(collie_step_end(comm));
  }
  ASSERT_OK(collie_comm_destroy(comm));
  steps_sync_done("destroyed");
  if (r != 0) return;
  char path[512];
  steps_path(path, sizeof(path));
  ASSERTF(access(path, F_OK) != 0, "%s exists with COLLIE_COMMS_LOG=0", path);
}

/* COLLIE_LOG_DIR names a directory whose parent does not exist (a typo, a
 * volume not mounted): init fails naming it and nothing is created; one
 * level is made (issue 19: collie made every missing directory from the
 * root). The same for collie_comms_log_open. */
TEST_IMPL(telemetry_log_dir_missing_parent)
{
  char dir[600], top[600], ok[600];
  snprintf(top, sizeof(top), "%s/not-there", test_dir());
  snprintf(dir, sizeof(dir), "%s/logs", top);
  setenv("COLLIE_LOG_DIR", dir, 1);
  collie_comm_t *comm = NULL;
  collie_result_t rc = collie_comm_init(&comm);
  ASSERTF(rc == COLLIE_SYSTEM_ERROR && strstr(collie_last_error(), dir) &&
              strstr(collie_last_error(), "parent"),
          "init -> %s: %s", collie_result_string(rc), collie_last_error());
  ASSERT(comm == NULL);
  ASSERTF(access(top, F_OK) != 0, "%s was created", top);
  collie_comms_log_t *log = NULL;
  ASSERT_RC(COLLIE_SYSTEM_ERROR, "parent", collie_comms_log_open(dir, 0, 1, &log));
  ASSERTF(access(top, F_OK) != 0, "%s was created", top);
  /* One missing level is made. */
  snprintf(ok, sizeof(ok), "%s/new-logs", test_dir());
  setenv("COLLIE_LOG_DIR", ok, 1);
  ASSERT_OK(collie_comm_init(&comm));
  ASSERT_OK(collie_comm_destroy(comm));
  struct stat st;
  ASSERTF(stat(ok, &st) == 0 && S_ISDIR(st.st_mode), "%s not made", ok);
}

/* COLLIE_LOG_DIR unset: comms.csv goes to the working directory, made at
 * the first step: a job that runs collectives but never opens a step
 * leaves no file there (issue 36: every torch job left a header-only
 * comms.csv in its working directory). */
TEST_IMPL(telemetry_log_dir_default)
{
  int r = test_rank(), p = test_size();
  char wd[512], path[600];
  snprintf(wd, sizeof(wd), "%s/wd", test_dir());
  ASSERT(mkdir(wd, 0700) == 0 || errno == EEXIST);
  ASSERT(chdir(wd) == 0);
  unsetenv("COLLIE_LOG_DIR");
  collie_comm_t *comm = test_comm();
  struct steps_row e;
  memset(&e, 0, sizeof(e));
  float x = 1.0f;
  ASSERT_OK(collie_allreduce(comm, &x, &x, 1, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  snprintf(path, sizeof(path), "%s/comms.csv", wd);
  ASSERTF(access(path, F_OK) != 0, "%s exists before any step", path);
  ASSERT_OK(collie_barrier(comm, NULL, NULL)); /* (rank 0 looks before the step) */
  e.step = 3;
  e.max_ms = -1;
  ASSERT_OK(collie_step_begin(comm, 3, 0));
  steps_do(comm, K_REDUCE_SCATTER, COLLIE_CAT_OTHER, &e, NULL);
  ASSERT_OK(collie_step_end(comm));
  ASSERT_OK(collie_comm_destroy(comm));
  steps_sync_done("destroyed");
  if (r != 0) return;
  steps_path(path, sizeof(path));
  ASSERTF(access(path, F_OK) != 0, "%s written although COLLIE_LOG_DIR is unset", path);
  snprintf(path, sizeof(path), "%s/comms.csv", wd);
  struct csv_table t;
  ASSERTF(csv_load(path, &t) == 0, "%s: %s", path, strerror(errno));
  char *want = steps_header(NULL);
  ASSERT(!strcmp(t.first_line, want));
  free(want);
  ASSERTF(t.nrows == 1, "%s has %d rows, want 1", path, t.nrows);
  steps_check(&t, 0, &e, p, NULL);
  csv_free(&t);
}

/* Runs `nsteps` broadcast steps numbered from first on a fresh communicator,
 * filling exp. */
static void
steps_append_round(int first, int nsteps, struct steps_row *exp)
{
  collie_comm_t *comm = test_comm();
  for (int i = 0; i < nsteps; i++) {
    memset(&exp[i], 0, sizeof(exp[i]));
    exp[i].step = first + i;
    exp[i].epoch = first;
    exp[i].max_ms = -1;
    ASSERT_OK(collie_step_begin(comm, first + i, first));
    steps_do(comm, i % 2 ? K_BCAST_ROOTLAST : K_REDUCE_ROOTLAST, COLLIE_CAT_OTHER, &exp[i], NULL);
    ASSERT_OK(collie_step_end(comm));
  }
  ASSERT_OK(collie_comm_destroy(comm));
}

/* A comms.csv that already exists with the right header (written here, as
 * by an earlier job) is appended to: header once, then the rows of two
 * successive collie_comm_init in the same directory, in order. A category
 * registered before a third init changes the header that init would write:
 * refused on every rank with INVALID_USAGE naming the file and the column,
 * the file untouched. */
TEST_IMPL(telemetry_append)
{
  int r = test_rank(), p = test_size();
  char path[512];
  steps_path(path, sizeof(path));
  if (r == 0) test_write_file(path, STEPS_HEADER "\n");
  struct steps_row exp[5];
  steps_append_round(1, 2, exp);
  steps_append_round(20, 3, exp + 2);
  steps_sync_done("appended");
  char *before = NULL;
  size_t blen = 0;
  if (r == 0) {
    struct csv_table t;
    steps_load(&t, NULL);
    ASSERTF(t.nrows == 5 && t.nlines == 6,
            "comms.csv has %d rows in %zu lines, want the header once and 5 rows", t.nrows,
            t.nlines);
    for (int i = 0; i < 5; i++) steps_check(&t, i, &exp[i], p, NULL);
    csv_free(&t);
    before = csv_slurp(path, &blen);
    ASSERT(before);
  }
  int id = -1;
  ASSERT_OK(collie_category_register("extra", &id));
  collie_comm_t *comm = NULL;
  double t0 = csv_now_mono();
  collie_result_t rc = collie_comm_init(&comm);
  ASSERTF(rc == COLLIE_INVALID_USAGE && strstr(collie_last_error(), "comms.csv") &&
              strstr(collie_last_error(), "bytes_extra"),
          "init with a new category over an old comms.csv -> %s, want INVALID_USAGE naming "
          "comms.csv and bytes_extra: %s",
          collie_result_string(rc), collie_last_error());
  ASSERTF(csv_now_mono() - t0 < 10, "the refusal took %.1f s", csv_now_mono() - t0);
  steps_sync_done("refused");
  if (r == 0) {
    size_t alen = 0;
    char *after = csv_slurp(path, &alen);
    ASSERT(after);
    ASSERTF(alen == blen && !memcmp(before, after, blen), "a refused init changed comms.csv");
    free(before);
    free(after);
  }
}

/* An existing comms.csv whose header differs in one column: collie_comm_init
 * fails on every rank (promptly, not at a timeout) with INVALID_USAGE naming
 * the file and the column; the file is left exactly as it was. */
TEST_IMPL(telemetry_header_mismatch)
{
  int r = test_rank();
  char path[512];
  steps_path(path, sizeof(path));
  /* The doc's header with bytes_broadcast renamed, and an old row. */
  const char *old = "step,epoch,world_size,bytes_all_reduce,bytes_all_gather,"
                    "bytes_reduce_scatter,bytes_bcast,bytes_total\n1,0,4,10,20,30,40,100\n";
  if (r == 0) test_write_file(path, old);
  collie_comm_t *comm = NULL;
  double t0 = csv_now_mono();
  collie_result_t rc = collie_comm_init(&comm);
  double dt = csv_now_mono() - t0;
  ASSERTF(rc == COLLIE_INVALID_USAGE, "collie_comm_init -> %s, want INVALID_USAGE (%s)",
          collie_result_string(rc), collie_last_error());
  ASSERTF(strstr(collie_last_error(), "comms.csv"), "message does not name comms.csv: %s",
          collie_last_error());
  ASSERTF(strstr(collie_last_error(), "bytes_broadcast") || strstr(collie_last_error(), "bcast"),
          "message does not name the differing column: %s", collie_last_error());
  ASSERTF(dt < 10, "init took %.1f s to fail", dt);
  steps_sync_done("refused");
  if (r == 0) {
    char *now = csv_slurp(path, NULL);
    ASSERT(now);
    ASSERTF(!strcmp(now, old), "comms.csv changed by a refused init:\n%s", now);
    free(now);
  }
}

/* The category registry alone (no communicator): name rules, built-in names,
 * idempotence, the limit of 32 per process. */
TEST_IMPL(telemetry_category_rules)
{
  int id = -1, a = -1, b = -1;
  char name[64];
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_category_register(NULL, &id));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_category_register("ok_name", NULL));
  const char *bad[] = {"",       "has-dash", "sp ace",      "dot.ted",  "semi;colon",
                       "comma,", "quo\"te",  "caf\xc3\xa9", "new\nline"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    collie_result_t rc = collie_category_register(bad[i], &id);
    ASSERTF(rc == COLLIE_INVALID_ARGUMENT, "name \"%s\" -> %s", bad[i], collie_result_string(rc));
  }
  memset(name, 'x', 33);
  name[33] = '\0';
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "", collie_category_register(name, &id));
  for (int i = 0; i < STEPS_NBUILTIN; i++) {
    collie_result_t rc = collie_category_register(steps_cat[i], &id);
    ASSERTF(rc == COLLIE_INVALID_ARGUMENT, "built-in name \"%s\" -> %s", steps_cat[i],
            collie_result_string(rc));
  }
  /* 1 and 32 characters are fine; ids are new, distinct and stable. */
  ASSERT_OK(collie_category_register("q", &a));
  name[32] = '\0';
  memcpy(name, "Z9_", 3);
  ASSERT_OK(collie_category_register(name, &b));
  ASSERT(a >= COLLIE_CAT_BUILTIN_COUNT_ && b >= COLLIE_CAT_BUILTIN_COUNT_ && a != b);
  ASSERT_OK(collie_category_register("q", &id));
  ASSERT(id == a);
  ASSERT_OK(collie_category_register(name, &id));
  ASSERT(id == b);
  int ids[32];
  ids[0] = a;
  ids[1] = b;
  for (int i = 2; i < 32; i++) {
    snprintf(name, sizeof(name), "cat_%d", i);
    ASSERT_OK(collie_category_register(name, &ids[i]));
    for (int j = 0; j < i; j++) ASSERTF(ids[j] != ids[i], "ids %d and %d are equal", j, i);
  }
  ASSERT_RC(COLLIE_UNSUPPORTED, "", collie_category_register("one_too_many", &id));
  /* A full registry still answers for names it has. */
  ASSERT_OK(collie_category_register("cat_17", &id));
  ASSERT(id == ids[17]);
}

/* Malformed telemetry variables fail init with INVALID_ARGUMENT naming the
 * variable (one rank: there is nobody to wait for). */
TEST_IMPL(telemetry_env_bad)
{
  struct {
    const char *var, *value;
  } bad[] = {{"COLLIE_COMMS_LOG", "abc"},
             {"COLLIE_COMMS_LOG", "2"},
             {"COLLIE_COMMS_LOG", "-1"},
             {"COLLIE_TIMING_QUEUE", "0"},
             {"COLLIE_TIMING_QUEUE", "-5"},
             {"COLLIE_TIMING_QUEUE", "abc"},
             /* 10^8 records were once "valid": 24 GB touched at every rank's init */
             {"COLLIE_TIMING_QUEUE", "100000000"},
             {"COLLIE_TIMING_QUEUE", "1000001"},
             {"COLLIE_TIMING_FLUSH_MS", "0"},
             {"COLLIE_TIMING_FLUSH_MS", "-1"},
             {"COLLIE_TIMING_FLUSH_MS", "abc"}};
  char dir[512];
  snprintf(dir, sizeof(dir), "%s/tlog", test_dir());
  /* With and without the timing log on: a malformed value is an error either way. */
  for (int withlog = 0; withlog < 2; withlog++) {
    if (withlog)
      setenv("COLLIE_TIMING_LOG", dir, 1);
    else
      unsetenv("COLLIE_TIMING_LOG");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
      collie_comm_t *comm = NULL;
      setenv(bad[i].var, bad[i].value, 1);
      collie_result_t rc = collie_comm_init(&comm);
      ASSERTF(rc == COLLIE_INVALID_ARGUMENT && strstr(collie_last_error(), bad[i].var),
              "%s=%s (timing log %s): init -> %s: %s", bad[i].var, bad[i].value,
              withlog ? "on" : "off", collie_result_string(rc), collie_last_error());
      ASSERT(comm == NULL);
      unsetenv(bad[i].var);
    }
  }
  /* Good values are accepted. */
  setenv("COLLIE_TIMING_QUEUE", "16", 1);
  setenv("COLLIE_TIMING_FLUSH_MS", "50", 1);
  setenv("COLLIE_COMMS_LOG", "1", 1);
  collie_comm_t *comm = test_comm();
  ASSERT_OK(collie_comm_destroy(comm));
}

/* ---- collie_comms_log_*: comms.csv with no communicator ---- */

/* The wire model of docs/telemetry.md for collie_wire_bytes, from the doc's
 * table (p = 4). */
static void
comms_log_wire_model(void)
{
  ASSERT(collie_wire_bytes(COLLIE_COLL_ALLREDUCE, 4, 1000) == 1500);
  ASSERT(collie_wire_bytes(COLLIE_COLL_ALLGATHER, 4, 100) == 300);
  ASSERT(collie_wire_bytes(COLLIE_COLL_REDUCE_SCATTER, 4, 100) == 300);
  ASSERT(collie_wire_bytes(COLLIE_COLL_GATHER, 4, 100) == 300);
  ASSERT(collie_wire_bytes(COLLIE_COLL_SCATTER, 4, 100) == 300);
  ASSERT(collie_wire_bytes(COLLIE_COLL_ALLTOALL, 4, 400) == 300);
  ASSERT(collie_wire_bytes(COLLIE_COLL_BROADCAST, 4, 4096) == 4096);
  ASSERT(collie_wire_bytes(COLLIE_COLL_REDUCE, 4, 4096) == 4096);
  ASSERT(collie_wire_bytes(COLLIE_COLL_SEND_RECV, 4, 77) == 77);
  ASSERT(collie_wire_bytes(COLLIE_COLL_BARRIER, 4, 77) == 0);
  ASSERT(collie_wire_bytes(COLLIE_COLL_ALLREDUCE, 3, 10) == 13); /* 40/3 rounded down */
  ASSERT(collie_wire_bytes((collie_collective_t)99, 4, 77) == 0);
}

/* Rank 0 of a 4-rank job that runs on something else: two steps, one with an
 * async call whose time arrives after the step ended (the row waits for it),
 * every figure as the calls said, the time columns exact to the microsecond. */
TEST_IMPL(comms_log_alone)
{
  comms_log_wire_model();
  int reg_id = -1;
  ASSERT_OK(collie_category_register("wrapper_cat", &reg_id));
  struct steps_cats reg = {1, {"wrapper_cat"}, {reg_id}};
  collie_comms_log_t *log = NULL;
  ASSERT_OK(collie_comms_log_open(test_dir(), 0, 4, &log));
  int late = -1;
  ASSERT_OK(collie_category_register("after_open_cat", &late));

  struct steps_row e[2];
  memset(e, 0, sizeof(e));
  e[0].step = 1, e[0].epoch = 0, e[0].max_ms = -1;
  e[1].step = 2, e[1].epoch = 1, e[1].max_ms = -1;
  int64_t s = -1, ep = -1;
  ASSERT_OK(collie_comms_log_record(log, COLLIE_COLL_ALLREDUCE, 0, 0, 999, 1000)); /* no step */
  ASSERT_OK(collie_comms_log_step(log, &s, &ep));
  ASSERT(s == 0 && ep == 0);

  ASSERT_OK(collie_comms_log_step_begin(log, 1, 0));
  ASSERT_OK(collie_comms_log_step(log, &s, &ep));
  ASSERT(s == 1 && ep == 0);
  ASSERT_OK(
      collie_comms_log_record(log, COLLIE_COLL_ALLREDUCE, COLLIE_CAT_OTHER, 0, 1000, 2500000));
  steps_add(&e[0], &reg, C_ALLREDUCE, COLLIE_CAT_OTHER, 1500);
  ASSERT_OK(
      collie_comms_log_record(log, COLLIE_COLL_ALLGATHER, COLLIE_CAT_MOMENTS_MU, 0, 100, 1000));
  steps_add(&e[0], &reg, C_ALLGATHER, COLLIE_CAT_MOMENTS_MU, 300);
  collie_comms_charge_t *charge = NULL;
  /* On a group of 2: its own p. */
  ASSERT_OK(collie_comms_log_charge(log, COLLIE_COLL_REDUCE_SCATTER, reg_id, 2, 64, &charge));
  ASSERT(charge != NULL);
  steps_add(&e[0], &reg, C_REDUCE_SCATTER, reg_id, 64);
  ASSERT_OK(collie_comms_log_step_end(log));
  struct csv_table t;
  steps_load(&t, &reg);
  ASSERTF(t.nrows == 0, "step 1 written with a charge not done: %d rows", t.nrows);
  csv_free(&t);
  ASSERT_OK(collie_comms_log_done(log, charge, COLLIE_COLL_REDUCE_SCATTER, 3000000));

  ASSERT_OK(collie_comms_log_step_begin(log, 2, 1));
  ASSERT_OK(collie_comms_log_record(log, COLLIE_COLL_BROADCAST, COLLIE_CAT_TOPR_INDICES, 0, 4096,
                                    1500000));
  steps_add(&e[1], &reg, C_BROADCAST, COLLIE_CAT_TOPR_INDICES, 4096);
  ASSERT_OK(collie_comms_log_record(log, COLLIE_COLL_BARRIER, COLLIE_CAT_OTHER, 0, 0, 9000000));
  ASSERT_OK(collie_comms_log_record(log, COLLIE_COLL_ALLTOALL, COLLIE_CAT_OTHER, 0, 400, 250000));
  steps_add(&e[1], &reg, C_ALLTOALL, COLLIE_CAT_OTHER, 300);
  ASSERT_OK(collie_comms_log_record(log, COLLIE_COLL_SEND_RECV, COLLIE_CAT_OTHER, 0, 10, 1));
  steps_add(&e[1], &reg, C_SENDRECV, COLLIE_CAT_OTHER, 10);
  ASSERT_OK(collie_comms_log_step_end(log));

  /* The errors, each naming what was wrong. */
  collie_comms_log_t *bad = NULL;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "out is NULL", collie_comms_log_open(test_dir(), 0, 2, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "rank = -1", collie_comms_log_open(test_dir(), -1, 2, &bad));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "world_size = 0",
            collie_comms_log_open(test_dir(), 0, 0, &bad));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "above rank = 2",
            collie_comms_log_open(test_dir(), 2, 2, &bad));
  ASSERT_RC(COLLIE_SYSTEM_ERROR, "/proc/collie-no",
            collie_comms_log_open("/proc/collie-no", 0, 2, &bad));
  ASSERT(bad == NULL);
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "coll = 42",
            collie_comms_log_record(log, (collie_collective_t)42, 0, 0, 1, 1));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "registered after",
            collie_comms_log_record(log, COLLIE_COLL_ALLREDUCE, late, 0, 1, 1));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "category = 1000",
            collie_comms_log_record(log, COLLIE_COLL_ALLREDUCE, 1000, 0, 1, 1));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "group_size = -3",
            collie_comms_log_record(log, COLLIE_COLL_ALLREDUCE, 0, -3, 1, 1));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "elapsed_ns = -1",
            collie_comms_log_record(log, COLLIE_COLL_ALLREDUCE, 0, 0, 1, -1));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "charge is NULL",
            collie_comms_log_charge(log, COLLIE_COLL_ALLREDUCE, 0, 0, 1, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "log is NULL", collie_comms_log_step_end(NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "step = 0", collie_comms_log_step_begin(log, 0, 0));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "epoch = -1", collie_comms_log_step_begin(log, 3, -1));
  ASSERT_RC(COLLIE_INVALID_USAGE, "no step is open", collie_comms_log_step_end(log));
  ASSERT_OK(collie_comms_log_step_begin(log, 3, 1));
  ASSERT_RC(COLLIE_INVALID_USAGE, "still open", collie_comms_log_step_begin(log, 4, 1));
  /* Step 3, empty and still open, is written at close as it stands. */
  collie_comms_log_close(log);
  collie_comms_log_close(NULL);

  steps_load(&t, &reg);
  ASSERTF(t.nrows == 3, "comms.csv has %d rows, want 3", t.nrows);
  steps_check(&t, 0, &e[0], 4, &reg);
  steps_check(&t, 1, &e[1], 4, &reg);
  ASSERT(steps_int(&t, 2, "step") == 3 && steps_int(&t, 2, "bytes_total") == 0);
  /* Times exactly as given, the barrier's in no column. */
  ASSERT(!strcmp(csv_cell(&t, 0, "t_all_reduce_ms"), "2.500"));
  ASSERT(!strcmp(csv_cell(&t, 0, "t_all_gather_ms"), "0.001"));
  ASSERT(!strcmp(csv_cell(&t, 0, "t_reduce_scatter_ms"), "3.000"));
  ASSERT(!strcmp(csv_cell(&t, 0, "t_total_ms"), "5.501"));
  ASSERT(!strcmp(csv_cell(&t, 1, "t_broadcast_ms"), "1.500"));
  ASSERT(!strcmp(csv_cell(&t, 1, "t_all_to_all_ms"), "0.250"));
  ASSERT(!strcmp(csv_cell(&t, 1, "t_send_recv_ms"), "0.000"));
  ASSERTF(!strcmp(csv_cell(&t, 1, "t_total_ms"), "1.750"), "t_total_ms %s",
          csv_cell(&t, 1, "t_total_ms"));
  csv_free(&t);

  /* Another rank writes nothing, but checks and keeps the numbers. */
  const char *dir1 = test_path("rank1");
  ASSERT_OK(collie_comms_log_open(dir1, 1, 4, &log));
  ASSERT_OK(collie_comms_log_step_begin(log, 5, 2));
  ASSERT_OK(collie_comms_log_charge(log, COLLIE_COLL_ALLREDUCE, 0, 0, 8, &charge));
  ASSERT(charge == NULL);
  ASSERT_OK(collie_comms_log_done(log, charge, COLLIE_COLL_ALLREDUCE, 10));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "coll = 42",
            collie_comms_log_record(log, (collie_collective_t)42, 0, 0, 1, 1));
  ASSERT_OK(collie_comms_log_step(log, &s, &ep));
  ASSERT(s == 5 && ep == 2);
  ASSERT_OK(collie_comms_log_step_end(log));
  collie_comms_log_close(log);
  char path[600];
  struct stat st;
  snprintf(path, sizeof(path), "%s/comms.csv", dir1);
  ASSERTF(stat(path, &st) != 0 && errno == ENOENT, "rank 1 wrote %s", path);

  /* An existing comms.csv with another header is refused, naming the file. */
  const char *dir2 = test_path("other");
  ASSERT(mkdir(dir2, 0755) == 0);
  snprintf(path, sizeof(path), "%s/comms.csv", dir2);
  FILE *f = fopen(path, "w");
  ASSERT(f);
  fputs("step,epoch,world_size,bytes_allreduce\n", f);
  fclose(f);
  ASSERT_RC(COLLIE_INVALID_USAGE, "different header", collie_comms_log_open(dir2, 0, 2, &bad));
  ASSERT(bad == NULL);
}
