/*
 * soak.c - one rank of the soak (issue 19; docs/reliability.md, "Soak"): a
 * long random mix of collectives, then many split/destroy cycles, while the
 * rank watches what it holds. Run it under collierun (bench/soak.sh runs it
 * at 4 ranks on shm and on tcp):
 *
 *   collierun -n 4 --timeout 3600 build/bench/soak [--small N] [--large N]
 *       [--splits N] [--samples K] [--seed S] [--rss-slack MIB]
 *
 * Phase 1, the mix: N small (1..4096 bytes) and N large (1..4 MiB)
 * collectives in a random order. Every rank draws the same sequence from
 * the seed, so all call the same operation: its kind (allreduce, allgather,
 * broadcast, reduce, alltoall, reduce_scatter, barrier), size, dtype (uint8,
 * int32, int64, float32, float64, bfloat16), reduction (sum, max, min),
 * root, and whether it is blocking or async (collie_work_t + collie_wait).
 * Each rank's send data is a known pattern (1 + rank % 3 + index % 5) and
 * the receive buffer is poisoned before the call, so every result except a
 * barrier's is checked: all of it for small calls, 4096 evenly spread
 * elements (and the last) for large ones. A wrong element or a failed call
 * ends the run with exit status 1, naming the operation.
 *
 * Phase 2: N cycles of collie_comm_split (all ranks in one group in
 * reversed order, even/odd, two halves, or all but one rank that passes
 * COLLIE_SPLIT_NONE), one checked allreduce on the new communicator
 * (blocking or async, so its worker thread comes and goes) and
 * collie_comm_destroy.
 *
 * At K evenly spaced points of each phase every rank reads its resident
 * memory (/proc/self/statm), its open file descriptors (/proc/self/fd) and
 * its threads (/proc/self/status), and the mean and the longest time of its
 * calls since the last point (small and large apart; the whole cycle in
 * phase 2). An allreduce MAX gathers them, and rank 0 prints one line per
 * point: the largest value among the ranks. The verdict compares each rank's own
 * numbers at the first point (the end of the warm-up window) and the last,
 * and the mean time of the second window (the first after warm-up) with the
 * last one's. Exit status 1 when any rank's descriptors or threads grew at
 * all, or its resident memory by more than the slack (8 MiB by default), in
 * either phase; the times are printed, never judged (this machine is
 * shared). 2 for bad usage.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collie.h"
#include "cli.h"

#define SOAK_SMALL_MAX 4096u
#define SOAK_LARGE_MIN (1u << 20)
#define SOAK_LARGE_MAX (4u << 20)
#define SOAK_LARGE_CHECKS 4096u

/* What a sample carries through the allreduce MAX. */
enum { S_RSS_KB, S_FDS, S_THREADS, S_MEAN_A, S_MAX_A, S_MEAN_B, S_MAX_B, S_N };

static const collie_dtype_t soak_dtypes[] = {COLLIE_UINT8,   COLLIE_INT32,   COLLIE_INT64,
                                             COLLIE_FLOAT32, COLLIE_FLOAT64, COLLIE_BFLOAT16};
static const collie_op_t soak_ops[] = {COLLIE_SUM, COLLIE_MAX, COLLIE_MIN};
enum { SOAK_NDTYPES = sizeof(soak_dtypes) / sizeof(soak_dtypes[0]) };

enum soak_kind {
  K_ALLREDUCE,
  K_ALLGATHER,
  K_BROADCAST,
  K_REDUCE,
  K_ALLTOALL,
  K_RSCATTER,
  K_BARRIER
};
static const char *const soak_kind_names[] = {"allreduce", "allgather",      "broadcast", "reduce",
                                              "alltoall",  "reduce_scatter", "barrier"};

static int soak_rank, soak_size;

static void
soak_usage(FILE *f)
{
  fprintf(f, "usage: soak [--small N] [--large N] [--splits N] [--samples K] [--seed S]\n"
             "            [--rss-slack MIB]\n"
             "  --small N      small collectives (1..4096 B), default 1000000\n"
             "  --large N      large collectives (1..4 MiB), default 10000\n"
             "  --splits N     split/collective/destroy cycles, default 10000\n"
             "  --samples K    sample points per phase (>= 3), default 20\n"
             "  --seed S       the random sequence, the same on every rank, default 1\n"
             "  --rss-slack M  resident memory growth (MiB) still passed, default 8\n"
             "Run it under collierun, e.g. collierun -n 4 --timeout 600 soak --small 20000\n");
}

static void
soak_bad_usage(const char *fmt, const char *a, const char *b)
{
  fprintf(stderr, "soak: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\n");
  soak_usage(stderr);
  exit(2);
}

/* A whole number argument of opt, at most max. */
static uint64_t
soak_uint_arg(const char *opt, const char *s, uint64_t max)
{
  char *end;
  if (!s) soak_bad_usage("%s needs a value%s", opt, "");
  if (s[0] < '0' || s[0] > '9') soak_bad_usage("%s: '%s' is not a whole number", opt, s);
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno == ERANGE) soak_bad_usage("%s: '%s' is too large", opt, s);
  if (*end) soak_bad_usage("%s: '%s' is not a whole number", opt, s);
  if (v > max) soak_bad_usage("%s: '%s' is too large", opt, s);
  return (uint64_t)v;
}

/* splitmix64: a small generator whose sequence depends on the seed only. */
static uint64_t
soak_next(uint64_t *s)
{
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static uint64_t
soak_below(uint64_t *s, uint64_t n)
{
  return soak_next(s) % n;
}

/* ---- What the rank holds ---- */

static int64_t
soak_rss_kb(void)
{
  long size = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return -1;
  int ok = fscanf(f, "%ld %ld", &size, &resident) == 2;
  fclose(f);
  return ok ? (int64_t)resident * (sysconf(_SC_PAGESIZE) / 1024) : -1;
}

static int64_t
soak_fds(void)
{
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int64_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the directory's own descriptor */
}

static int64_t
soak_threads(void)
{
  char line[256];
  int64_t n = -1;
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  while (fgets(line, sizeof(line), f))
    if (!strncmp(line, "Threads:", 8)) n = strtoll(line + 8, NULL, 10);
  fclose(f);
  return n;
}

/* ---- Data patterns ---- */

/* Rank r's send element j is soak_base(r) + j % 5; small whole numbers, exact
 * in every dtype of the mix (bfloat16 up to 256: sums of at most 36 ranks). */
static int64_t
soak_base(int r)
{
  return 1 + r % 3;
}

static void
soak_fill(void *buf, collie_dtype_t dt, size_t n, int r)
{
  int64_t b = soak_base(r);
  for (size_t j = 0; j < n; j++) {
    int64_t v = b + (int64_t)(j % 5);
    switch (dt) {
    case COLLIE_UINT8:
      ((uint8_t *)buf)[j] = (uint8_t)v;
      break;
    case COLLIE_INT32:
      ((int32_t *)buf)[j] = (int32_t)v;
      break;
    case COLLIE_INT64:
      ((int64_t *)buf)[j] = v;
      break;
    case COLLIE_FLOAT32:
      ((float *)buf)[j] = (float)v;
      break;
    case COLLIE_FLOAT64:
      ((double *)buf)[j] = (double)v;
      break;
    default: { /* bfloat16: the high half of the float32, exact for these */
      float f = (float)v;
      uint32_t u;
      memcpy(&u, &f, sizeof(u));
      ((uint16_t *)buf)[j] = (uint16_t)(u >> 16);
    }
    }
  }
}

static double
soak_load(const void *buf, collie_dtype_t dt, size_t j)
{
  switch (dt) {
  case COLLIE_UINT8:
    return ((const uint8_t *)buf)[j];
  case COLLIE_INT32:
    return ((const int32_t *)buf)[j];
  case COLLIE_INT64:
    return (double)((const int64_t *)buf)[j];
  case COLLIE_FLOAT32:
    return ((const float *)buf)[j];
  case COLLIE_FLOAT64:
    return ((const double *)buf)[j];
  default: {
    uint32_t u = (uint32_t)((const uint16_t *)buf)[j] << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
  }
  }
}

/* Element i of buf must be add + mul * ((j0 + i) % 5). */
static int
soak_ok(const void *buf, collie_dtype_t dt, size_t i, size_t j0, int64_t add, int64_t mul)
{
  int64_t want = add + mul * (int64_t)((j0 + i) % 5);
  if (dt == COLLIE_UINT8) want &= 0xff;
  return soak_load(buf, dt, i) == (double)want;
}

/* Checks buf (n elements, see soak_ok): every element when full, else
 * SOAK_LARGE_CHECKS spread evenly and the last. Returns the first wrong
 * index, or -1. */
static long
soak_check(const void *buf, collie_dtype_t dt, size_t n, size_t j0, int64_t add, int64_t mul,
           int full)
{
  size_t step = full || n <= SOAK_LARGE_CHECKS ? 1 : n / SOAK_LARGE_CHECKS;
  for (size_t i = 0; i < n; i += step)
    if (!soak_ok(buf, dt, i, j0, add, mul)) return (long)i;
  if (n && !soak_ok(buf, dt, n - 1, j0, add, mul)) return (long)(n - 1);
  return -1;
}

/* The reduction over all ranks of soak_base(q), and the multiplier of the
 * index term: op(b_q + k) = reduced + mul * k. */
static void
soak_reduced(collie_op_t op, int64_t *add, int64_t *mul)
{
  int64_t sum = 0, mx = 0, mn = 1 << 20;
  for (int q = 0; q < soak_size; q++) {
    int64_t b = soak_base(q);
    sum += b;
    mx = b > mx ? b : mx;
    mn = b < mn ? b : mn;
  }
  *add = op == COLLIE_SUM ? sum : op == COLLIE_MAX ? mx : mn;
  *mul = op == COLLIE_SUM ? soak_size : 1;
}

/* ---- Phase 1: the mix ---- */

struct soak_bufs {
  void *send[SOAK_NDTYPES]; /* each dtype's pattern, filled once */
  void *recv;
  size_t cap; /* bytes of each */
};

static void
soak_fail(const char *what, long index, const char *name, collie_result_t rc)
{
  fprintf(stderr, "soak: rank %d: %s #%ld (%s) failed: %s: %s\n", soak_rank, what, index, name,
          collie_result_string(rc), collie_last_error());
  exit(1);
}

/* Runs operation #index of the mix as drawn from rng; returns its time in ns
 * (the call and its wait, not the filling and checking around it). */
static int64_t
soak_op(collie_comm_t *c, uint64_t *rng, struct soak_bufs *b, long index, int large)
{
  int p = soak_size, r = soak_rank;
  enum soak_kind kind = (enum soak_kind)soak_below(rng, 7);
  int di = (int)soak_below(rng, SOAK_NDTYPES - (p > 36)); /* bfloat16 is last */
  collie_dtype_t dt = soak_dtypes[di];
  collie_op_t op = soak_ops[soak_below(rng, 3)];
  int root = (int)soak_below(rng, (uint64_t)p);
  int async = soak_below(rng, 3) == 0;
  size_t bytes = large ? SOAK_LARGE_MIN + soak_below(rng, SOAK_LARGE_MAX - SOAK_LARGE_MIN + 1)
                       : 1 + soak_below(rng, SOAK_SMALL_MAX);
  size_t es = collie_dtype_size(dt), n = bytes / es ? bytes / es : 1;
  size_t blk =
      n / (size_t)p ? n / (size_t)p : 1; /* allgather, alltoall, reduce_scatter: per rank */
  const void *send = b->send[di];
  void *recv = b->recv;
  size_t rbytes = (kind == K_ALLGATHER || kind == K_ALLTOALL ? blk * (size_t)p
                   : kind == K_RSCATTER                      ? blk
                                                             : n) *
                  es;
  if (kind != K_BARRIER) memset(recv, 0xa5, rbytes);
  if (kind == K_BROADCAST && r == root) memcpy(recv, send, n * es);

  collie_work_t *w = NULL, **wp = async ? &w : NULL;
  collie_result_t rc;
  double t0 = cli_now_s();
  switch (kind) {
  case K_ALLREDUCE:
    rc = collie_allreduce(c, send, recv, n, dt, op, NULL, wp);
    break;
  case K_ALLGATHER:
    rc = collie_allgather(c, send, recv, blk, dt, NULL, wp);
    break;
  case K_BROADCAST:
    rc = collie_broadcast(c, recv, n, dt, root, NULL, wp);
    break;
  case K_REDUCE:
    rc = collie_reduce(c, send, recv, n, dt, op, root, NULL, wp);
    break;
  case K_ALLTOALL:
    rc = collie_alltoall(c, send, recv, blk, dt, NULL, wp);
    break;
  case K_RSCATTER:
    rc = collie_reduce_scatter(c, send, recv, blk, dt, op, NULL, wp);
    break;
  default:
    rc = collie_barrier(c, NULL, wp);
  }
  if (rc == COLLIE_SUCCESS && w) rc = collie_wait(w, -1);
  double t1 = cli_now_s();
  collie_work_free(w);
  if (rc != COLLIE_SUCCESS) soak_fail("operation", index, soak_kind_names[kind], rc);

  /* Which elements must hold what (soak_check's add, mul, j0), block by block. */
  int64_t add, mul;
  long bad = -1;
  int full = !large;
  soak_reduced(op, &add, &mul);
  switch (kind) {
  case K_ALLREDUCE:
    bad = soak_check(recv, dt, n, 0, add, mul, full);
    break;
  case K_REDUCE:
    if (r == root) bad = soak_check(recv, dt, n, 0, add, mul, full);
    break;
  case K_BROADCAST:
    bad = soak_check(recv, dt, n, 0, soak_base(root), 1, full);
    break;
  case K_RSCATTER:
    bad = soak_check(recv, dt, blk, (size_t)r * blk, add, mul, full);
    break;
  case K_ALLGATHER:
  case K_ALLTOALL:
    /* allgather: block q is q's first blk elements; alltoall: q's block r. */
    for (int q = 0; q < p && bad < 0; q++) {
      size_t j0 = kind == K_ALLTOALL ? (size_t)r * blk : 0;
      bad = soak_check((char *)recv + (size_t)q * blk * es, dt, blk, j0, soak_base(q), 1, full);
      if (bad >= 0) bad += (long)((size_t)q * blk);
    }
    break;
  default:
    break;
  }
  if (bad >= 0) {
    fprintf(stderr,
            "soak: rank %d: operation #%ld (%s %s %s, %zu elements, root %d, %s) gave a wrong "
            "element %ld: %g\n",
            r, index, soak_kind_names[kind], collie_dtype_name(dt), collie_op_name(op), n, root,
            async ? "async" : "blocking", bad, soak_load(recv, dt, (size_t)bad));
    exit(1);
  }
  return (int64_t)((t1 - t0) * 1e9);
}

/* ---- Phase 2: split, one collective, destroy ---- */

/* The color of rank q in a cycle of the given shape: 0 all in one group (in
 * reversed order), 1 even/odd, 2 two halves, 3 all but out_rank. */
static int
soak_split_color(int shape, int out_rank, int q)
{
  switch (shape) {
  case 1:
    return q % 2;
  case 2:
    return q >= soak_size / 2;
  case 3:
    return q == out_rank ? COLLIE_SPLIT_NONE : 0;
  default:
    return 0;
  }
}

/* One cycle as drawn from rng; returns its time in ns. */
static int64_t
soak_split_cycle(collie_comm_t *world, uint64_t *rng, long index)
{
  int p = soak_size, r = soak_rank;
  int shape = (int)soak_below(rng, 4), out_rank = (int)soak_below(rng, (uint64_t)p);
  int async = (int)soak_below(rng, 2);
  int color = soak_split_color(shape, out_rank, r), key = shape == 0 ? p - 1 - r : r;
  int64_t want = 0; /* the sum of world rank + 1 over the group */
  for (int q = 0; q < p; q++)
    if (color != COLLIE_SPLIT_NONE && soak_split_color(shape, out_rank, q) == color) want += q + 1;
  double t0 = cli_now_s();
  collie_comm_t *sub = NULL;
  collie_result_t rc = collie_comm_split(world, color, key, &sub);
  if (rc != COLLIE_SUCCESS) soak_fail("split cycle", index, "collie_comm_split", rc);
  if (sub) {
    int64_t v[3] = {r + 1, 2 * (r + 1), 0};
    collie_work_t *w = NULL;
    rc = collie_allreduce(sub, v, v, 3, COLLIE_INT64, COLLIE_SUM, NULL, async ? &w : NULL);
    if (rc == COLLIE_SUCCESS && w) rc = collie_wait(w, -1);
    collie_work_free(w);
    if (rc != COLLIE_SUCCESS) soak_fail("split cycle", index, "allreduce on the split", rc);
    if (v[0] != want || v[1] != 2 * want || v[2] != 0) {
      fprintf(stderr,
              "soak: rank %d: split cycle #%ld: allreduce on the split gave %" PRId64 ", %" PRId64
              ", %" PRId64 ", not %" PRId64 ", %" PRId64 ", 0\n",
              r, index, v[0], v[1], v[2], want, 2 * want);
      exit(1);
    }
    rc = collie_comm_destroy(sub);
    if (rc != COLLIE_SUCCESS) soak_fail("split cycle", index, "collie_comm_destroy", rc);
  }
  return (int64_t)((cli_now_s() - t0) * 1e9);
}

/* ---- Samples and verdict ---- */

struct soak_phase {
  const char *name;
  long total, done;
  int samples, taken;
  int64_t lat_sum[2], lat_n[2], lat_max[2]; /* this window's calls: small/large, or cycles */
  int64_t first[S_N];                       /* this rank's numbers at the first point */
  int64_t growth[3];                        /* this rank's last - first */
  int64_t max_first[S_N], max_second[S_N], max_last[S_N]; /* the printed maxima */
  double t0;
};

/* Counts a call (k = 0 small or cycle, 1 large) of ns in the window. */
static void
soak_count(struct soak_phase *ph, int k, int64_t ns)
{
  ph->lat_sum[k] += ns;
  ph->lat_n[k]++;
  if (ns > ph->lat_max[k]) ph->lat_max[k] = ns;
}

/* ns in the unit (1e3: us, 1e6: ms), or "-" for a window without calls. */
static const char *
soak_fmt(char *out, size_t len, int64_t ns, double unit)
{
  if (ns < 0) return "-";
  snprintf(out, len, unit == 1e3 ? "%.1f" : "%.3f", (double)ns / unit);
  return out;
}

static void
soak_sample(collie_comm_t *world, struct soak_phase *ph)
{
  int64_t v[S_N] = {soak_rss_kb(), soak_fds(), soak_threads()};
  for (int k = 0; k < 2; k++) {
    v[S_MEAN_A + 2 * k] = ph->lat_n[k] ? ph->lat_sum[k] / ph->lat_n[k] : -1;
    v[S_MAX_A + 2 * k] = ph->lat_n[k] ? ph->lat_max[k] : -1;
    ph->lat_sum[k] = ph->lat_n[k] = ph->lat_max[k] = 0;
  }
  ph->taken++;
  if (ph->taken == 1) memcpy(ph->first, v, sizeof(v));
  for (int k = 0; k < 3; k++) ph->growth[k] = v[k] - ph->first[k];
  collie_result_t rc = collie_allreduce(world, v, v, S_N, COLLIE_INT64, COLLIE_MAX, NULL, NULL);
  if (rc != COLLIE_SUCCESS) soak_fail("sample", ph->taken, ph->name, rc);
  if (ph->taken == 1) memcpy(ph->max_first, v, sizeof(v));
  if (ph->taken == 2) memcpy(ph->max_second, v, sizeof(v));
  memcpy(ph->max_last, v, sizeof(v));
  if (soak_rank != 0) return;
  char f[4][32];
  double unit_a = ph->name[0] == 's' ? 1e6 : 1e3; /* cycles in ms, small calls in us */
  printf("%-6s %9ld %9.1f %8.1f %5" PRId64 " %7" PRId64 " %9s %9s", ph->name, ph->done,
         cli_now_s() - ph->t0, (double)v[S_RSS_KB] / 1024, v[S_FDS], v[S_THREADS],
         soak_fmt(f[0], 32, v[S_MEAN_A], unit_a), soak_fmt(f[1], 32, v[S_MAX_A], unit_a));
  if (ph->name[0] != 's')
    printf(" %9s %9s", soak_fmt(f[2], 32, v[S_MEAN_B], 1e6), soak_fmt(f[3], 32, v[S_MAX_B], 1e6));
  printf("\n");
  fflush(stdout);
}

/* Whether op `done` (1-based) ends a window: K points evenly spread. */
static int
soak_due(const struct soak_phase *ph)
{
  return ph->taken < ph->samples &&
         ph->done == (long)((double)ph->total * (ph->taken + 1) / ph->samples);
}

/* The phase's verdict on rank 0; returns 1 when it fails (the same on every rank). */
static int
soak_verdict(collie_comm_t *world, struct soak_phase *ph, int64_t slack_kb)
{
  if (ph->total == 0) return 0;
  int64_t g[3];
  memcpy(g, ph->growth, sizeof(g));
  collie_result_t rc = collie_allreduce(world, g, g, 3, COLLIE_INT64, COLLIE_MAX, NULL, NULL);
  if (rc != COLLIE_SUCCESS) soak_fail("verdict", 0, ph->name, rc);
  int bad = ph->taken >= 2 && (g[1] > 0 || g[2] > 0 || g[0] > slack_kb);
  if (soak_rank == 0) {
    printf("verdict %s: from point 1 to %d, the most any rank grew: rss %+.1f MiB (slack %.0f), "
           "fds %+" PRId64 ", threads %+" PRId64 "%s\n",
           ph->name, ph->taken, (double)g[0] / 1024, (double)slack_kb / 1024, g[1], g[2],
           ph->taken < 2 ? " (too few points to judge)"
           : bad         ? ": GREW"
                         : ": flat");
    const char *what[2] = {ph->name[0] == 's' ? "cycle" : "small", "large"};
    for (int k = 0; k < (ph->name[0] == 's' ? 1 : 2); k++) {
      int64_t e = ph->max_second[S_MEAN_A + 2 * k], l = ph->max_last[S_MEAN_A + 2 * k];
      if (ph->taken >= 3 && e > 0 && l > 0)
        printf("verdict %s: %s mean time late/early %.2f (window 2: %.1f us, window %d: %.1f us)\n",
               ph->name, what[k], (double)l / (double)e, (double)e / 1e3, ph->taken,
               (double)l / 1e3);
    }
    fflush(stdout);
  }
  return bad;
}

int
main(int argc, char **argv)
{
  long small = 1000000, large = 10000, splits = 10000;
  int samples = 20;
  uint64_t seed = 1, slack_mib = 8;
  /* Every option but --help takes a value: two arguments a step. */
  for (int i = 1; i < argc; i += 2) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      soak_usage(stdout);
      return 0;
    } else if (!strcmp(a, "--small")) {
      small = (long)soak_uint_arg(a, v, 1000000000000ULL);
    } else if (!strcmp(a, "--large")) {
      large = (long)soak_uint_arg(a, v, 1000000000000ULL);
    } else if (!strcmp(a, "--splits")) {
      splits = (long)soak_uint_arg(a, v, 1000000000000ULL);
    } else if (!strcmp(a, "--samples")) {
      samples = (int)soak_uint_arg(a, v, 100000);
      if (samples < 3) soak_bad_usage("--samples: '%s' is below 3%s", v, "");
    } else if (!strcmp(a, "--seed")) {
      seed = soak_uint_arg(a, v, UINT64_MAX);
    } else if (!strcmp(a, "--rss-slack")) {
      slack_mib = soak_uint_arg(a, v, 1 << 20);
    } else {
      soak_bad_usage("unknown argument '%s'%s", a, "");
    }
  }

  collie_comm_t *world;
  if (collie_comm_init(&world) != COLLIE_SUCCESS) {
    fprintf(stderr, "soak: init: %s\n", collie_last_error());
    return 1;
  }
  soak_rank = collie_comm_rank(world);
  soak_size = collie_comm_size(world);
  struct soak_bufs b;
  b.cap = SOAK_LARGE_MAX + 16 * (size_t)soak_size;
  for (int d = 0; d < SOAK_NDTYPES; d++) {
    b.send[d] = malloc(b.cap);
    if (!b.send[d]) return 1;
    soak_fill(b.send[d], soak_dtypes[d], b.cap / collie_dtype_size(soak_dtypes[d]), soak_rank);
  }
  b.recv = malloc(b.cap);
  if (!b.recv) return 1;
  memset(b.recv, 0, b.cap);

  const char *tr = getenv("COLLIE_TRANSPORT"), *tlog = getenv("COLLIE_TIMING_LOG");
  if (soak_rank == 0) {
    printf("soak: %d ranks, transport %s, seed %" PRIu64 ": %ld small (1..%u B) and %ld large "
           "(%u..%u MiB) collectives, then %ld split/destroy cycles; %d points per phase; timing "
           "log %s\n",
           soak_size, tr && *tr ? tr : "auto", seed, small, SOAK_SMALL_MAX, large,
           SOAK_LARGE_MIN >> 20, SOAK_LARGE_MAX >> 20, splits, samples,
           tlog && *tlog ? tlog : "off");
    printf("columns: phase, ops (cycles) done, seconds, then the largest among the ranks of: "
           "rss MiB, fds, threads, and the mean and longest time of a small call (us) and of a "
           "large one (ms) since the last point (split: of a whole cycle, ms)\n");
    if (small + large > 0)
      printf("%-6s %9s %9s %8s %5s %7s %9s %9s %9s %9s\n", "phase", "ops", "elapsed_s", "rss_mib",
             "fds", "threads", "small_us", "max_us", "large_ms", "max_ms");
    fflush(stdout);
  }

  uint64_t rng = seed;
  struct soak_phase mix = {.name = "mix", .total = small + large, .samples = samples};
  if (mix.total < mix.samples) mix.samples = (int)mix.total;
  mix.t0 = cli_now_s();
  long small_left = small, large_left = large;
  for (; mix.done < mix.total;) {
    int is_large = (long)soak_below(&rng, (uint64_t)(small_left + large_left)) < large_left;
    if (is_large)
      large_left--;
    else
      small_left--;
    soak_count(&mix, is_large, soak_op(world, &rng, &b, mix.done, is_large));
    mix.done++;
    if (soak_due(&mix)) soak_sample(world, &mix);
  }
  double mix_s = cli_now_s() - mix.t0;

  struct soak_phase sp = {.name = "split", .total = splits, .samples = samples};
  if (sp.total < sp.samples) sp.samples = (int)sp.total;
  if (soak_rank == 0 && splits > 0) {
    printf("%-6s %9s %9s %8s %5s %7s %9s %9s\n", "phase", "cycles", "elapsed_s", "rss_mib", "fds",
           "threads", "cycle_ms", "max_ms");
    fflush(stdout);
  }
  sp.t0 = cli_now_s();
  for (; sp.done < sp.total;) {
    soak_count(&sp, 0, soak_split_cycle(world, &rng, sp.done));
    sp.done++;
    if (soak_due(&sp)) soak_sample(world, &sp);
  }
  double split_s = cli_now_s() - sp.t0;

  int bad = soak_verdict(world, &mix, (int64_t)slack_mib * 1024);
  bad |= soak_verdict(world, &sp, (int64_t)slack_mib * 1024);
  if (soak_rank == 0) {
    printf("soak: mix %ld ops in %.1f s (%.0f ops/s), splits %ld cycles in %.1f s: %s\n", mix.total,
           mix_s, mix_s > 0 ? (double)mix.total / mix_s : 0.0, sp.total, split_s,
           bad ? "FAIL (a rank's descriptors, threads or memory grew)" : "PASS");
    fflush(stdout);
  }
  collie_result_t rc = collie_comm_destroy(world);
  if (rc != COLLIE_SUCCESS) {
    fprintf(stderr, "soak: destroy: %s\n", collie_last_error());
    return 1;
  }
  for (int d = 0; d < SOAK_NDTYPES; d++) free(b.send[d]);
  free(b.recv);
  return bad ? 1 : 0;
}
