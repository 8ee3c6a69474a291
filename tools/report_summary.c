/*
 * report_summary.c - `collie-report summary DIR`: where the bytes and the
 * milliseconds went, in four tables.
 *
 * From comms.csv (rank 0's steps): per collective the bytes, the time and the
 * effective bandwidth over all steps; per payload category the bytes and
 * their share; the five slowest steps. From the timing logs of every rank:
 * latency percentiles per operation and message size. The size buckets are
 * powers of two because message sizes in training are, and because latency
 * grows with size: pooling a 4 KiB and a 4 MiB allreduce would make the
 * percentiles meaningless.
 *
 * Which comms.csv columns are collectives and which are categories is read
 * from the header (rt_comms_kind), not from a built-in list, so categories
 * registered with collie_category_register appear without a change here.
 *
 * --csv prints the same tables as CSV sections for scripts (see
 * docs/collie-report.md); the dropped-records warning then goes to stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

void
report_summary_usage(void)
{
  printf("usage: collie-report summary DIR [--timing DIR2] [--csv]\n"
         "  Reads DIR/comms.csv and the timing logs (timing-rank*.csv, in DIR or DIR2) and\n"
         "  prints per collective the bytes, time and effective bandwidth; per payload\n"
         "  category the bytes and share; the 5 slowest steps; latency p50/p90/p99 per\n"
         "  operation and message-size bucket (power-of-two buckets: \"1-2KiB\" holds\n"
         "  sizes above 1 KiB up to 2 KiB); a warning for ranks that dropped records.\n"
         "  --csv prints the tables as CSV sections separated by blank lines.\n"
         "  Exit status: 0 done, 2 bad usage or unreadable input.\n");
}

/* One timing row reduced to what the latency table needs. */
struct sum_lat {
  const char *op;
  uint64_t hi; /* bucket's upper bound: sizes in (hi/2, hi], or [0, 1024] */
  double ms;
};

static int
sum_lat_cmp(const void *a, const void *b)
{
  const struct sum_lat *x = a, *y = b;
  int c = strcmp(x->op, y->op);
  if (c) return c;
  if (x->hi != y->hi) return x->hi < y->hi ? -1 : 1;
  return (x->ms > y->ms) - (x->ms < y->ms);
}

static uint64_t
sum_bucket_hi(uint64_t size)
{
  uint64_t hi = 1024;
  while (size > hi && hi < ((uint64_t)1 << 63)) hi <<= 1;
  return hi;
}

/* "1KiB", "512KiB", "2MiB" for a power of two >= 1024. */
static void
sum_pow2(char *buf, size_t len, uint64_t v, const char **unit)
{
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (v >= 1024 && u < 6) {
    v >>= 10;
    u++;
  }
  snprintf(buf, len, "%llu", (unsigned long long)v);
  *unit = units[u];
}

/* "<=1KiB", "1-2KiB", "512KiB-1MiB". */
static void
sum_bucket_label(char *buf, size_t len, uint64_t hi)
{
  if (hi <= 1024) {
    snprintf(buf, len, "<=1KiB");
    return;
  }
  char a[24], b[24];
  const char *ua, *ub;
  sum_pow2(a, sizeof(a), hi / 2, &ua);
  sum_pow2(b, sizeof(b), hi, &ub);
  if (strcmp(ua, ub) == 0)
    snprintf(buf, len, "%s-%s%s", a, b, ub);
  else
    snprintf(buf, len, "%s%s-%s%s", a, ua, b, ub);
}

static double
sum_bw(double bytes, double ms)
{
  return ms > 0 ? (bytes / 1048576.0) / (ms / 1000.0) : 0.0;
}

int
rsum_columns(const struct rt_comms *c, struct rsum_col **colls, int *ncoll, struct rsum_col **cats,
             int *ncat)
{
  const struct rc_table *t = &c->tab;
  *colls = calloc((size_t)t->ncols + 1, sizeof(**colls));
  *cats = calloc((size_t)t->ncols + 1, sizeof(**cats));
  if (!*colls || !*cats) return -1;
  *ncoll = *ncat = 0;
  for (int k = 0; k < t->ncols; k++) {
    int ct, kind = rt_comms_kind(c, k, &ct);
    if (kind == RT_COL_OTHER) continue;
    struct rsum_col *col = kind == RT_COL_COLL ? &(*colls)[(*ncoll)++] : &(*cats)[(*ncat)++];
    col->name = t->head[k] + 6;
    col->c_bytes = k;
    col->c_t = ct;
    for (size_t i = 0; i < t->nrows; i++) {
      const double *row = &c->v[i * (size_t)t->ncols];
      col->bytes += row[k];
      if (col->c_t >= 0) col->ms += row[col->c_t];
    }
  }
  return 0;
}

int
rsum_slowest(const struct rt_comms *c, size_t *top, int n)
{
  const struct rc_table *t = &c->tab;
  int got = 0;
  for (size_t i = 0; i < t->nrows; i++) {
    double v = c->v[i * (size_t)t->ncols + (size_t)c->c_t_total];
    int pos = got;
    /* Strictly larger moves up, so equal times keep file order. */
    while (pos > 0 && c->v[top[pos - 1] * (size_t)t->ncols + (size_t)c->c_t_total] < v) pos--;
    if (pos >= n) continue;
    if (got < n) got++;
    memmove(&top[pos + 1], &top[pos], (size_t)(got - 1 - pos) * sizeof(*top));
    top[pos] = i;
  }
  return got;
}

static void
sum_comms(const struct rt_data *d, int csv, int *first_section)
{
  const struct rt_comms *c = &d->comms;
  const struct rc_table *t = &c->tab;
  struct rsum_col *colls = NULL, *cats = NULL;
  int ncoll = 0, ncat = 0;
  if (rsum_columns(c, &colls, &ncoll, &cats, &ncat) != 0) {
    fprintf(stderr, "collie-report summary: out of memory\n");
    free(colls);
    free(cats);
    return;
  }
  double tot_bytes = 0, tot_ms = 0, cat_bytes = 0;
  for (size_t i = 0; i < t->nrows; i++) {
    tot_bytes += c->v[i * (size_t)t->ncols + (size_t)c->c_bytes_total];
    tot_ms += c->v[i * (size_t)t->ncols + (size_t)c->c_t_total];
  }
  for (int k = 0; k < ncat; k++) cat_bytes += cats[k].bytes;
  size_t top[5];
  int ntop = rsum_slowest(c, top, 5);

  if (csv) {
    printf("%scollective,bytes,time_ms,bandwidth_MiBps\n", *first_section ? "" : "\n");
    for (int k = 0; k < ncoll; k++)
      printf("%s,%.0f,%.3f,%.3f\n", colls[k].name, colls[k].bytes, colls[k].ms,
             sum_bw(colls[k].bytes, colls[k].ms));
    printf("total,%.0f,%.3f,%.3f\n", tot_bytes, tot_ms, sum_bw(tot_bytes, tot_ms));
    printf("\ncategory,bytes,share_pct\n");
    for (int k = 0; k < ncat; k++)
      printf("%s,%.0f,%.3f\n", cats[k].name, cats[k].bytes,
             tot_bytes > 0 ? 100.0 * cats[k].bytes / tot_bytes : 0.0);
    printf("\nstep,epoch,t_total_ms,bytes_total\n");
    for (int k = 0; k < ntop; k++) {
      const double *row = &c->v[top[k] * (size_t)t->ncols];
      printf("%.0f,%.0f,%.3f,%.0f\n", row[c->c_step], row[c->c_epoch], row[c->c_t_total],
             row[c->c_bytes_total]);
    }
    *first_section = 0;
  } else {
    double lo = 0, hi = 0;
    for (size_t i = 0; i < t->nrows; i++) {
      double s = c->v[i * (size_t)t->ncols + (size_t)c->c_step];
      if (i == 0 || s < lo) lo = s;
      if (i == 0 || s > hi) hi = s;
    }
    if (t->nrows == 0)
      printf("%s: no steps recorded\n", t->path);
    else
      printf("%s: %zu step%s (steps %.0f to %.0f)\n", t->path, t->nrows, t->nrows == 1 ? "" : "s",
             lo, hi);
    printf("\nPer collective, all steps (bandwidth = bytes / 2^20 / seconds)\n");
    printf("  %-16s %16s %14s %14s\n", "collective", "bytes", "time ms", "MiB/s");
    int shown = 0;
    for (int k = 0; k < ncoll; k++) {
      if (colls[k].bytes == 0 && colls[k].ms == 0) continue;
      shown++;
      printf("  %-16s %16.0f %14.3f %14.3f\n", colls[k].name, colls[k].bytes, colls[k].ms,
             sum_bw(colls[k].bytes, colls[k].ms));
    }
    if (shown < ncoll)
      printf("  (%d collective%s with no bytes and no time not shown)\n", ncoll - shown,
             ncoll - shown == 1 ? "" : "s");
    printf("  %-16s %16.0f %14.3f %14.3f\n", "total", tot_bytes, tot_ms, sum_bw(tot_bytes, tot_ms));

    printf("\nPer payload category, all steps\n");
    printf("  %-28s %16s %8s\n", "category", "bytes", "share");
    int zero = 0;
    for (int k = 0; k < ncat; k++) {
      if (cats[k].bytes == 0) {
        zero++;
        continue;
      }
      printf("  %-28s %16.0f %7.1f%%\n", cats[k].name, cats[k].bytes,
             tot_bytes > 0 ? 100.0 * cats[k].bytes / tot_bytes : 0.0);
    }
    if (zero > 0)
      printf("  (%d categor%s with no bytes not shown)\n", zero, zero == 1 ? "y" : "ies");
    if (ncat > 0 && cat_bytes != tot_bytes)
      printf("  note: the categories sum to %.0f bytes, bytes_total to %.0f\n", cat_bytes,
             tot_bytes);

    if (ntop > 0) {
      printf("\nSlowest steps (by t_total_ms)\n");
      printf("  %10s %8s %14s %16s\n", "step", "epoch", "t_total_ms", "bytes_total");
      for (int k = 0; k < ntop; k++) {
        const double *row = &c->v[top[k] * (size_t)t->ncols];
        printf("  %10.0f %8.0f %14.3f %16.0f\n", row[c->c_step], row[c->c_epoch], row[c->c_t_total],
               row[c->c_bytes_total]);
      }
    }
  }
  free(colls);
  free(cats);
}

static int
sum_latency(const struct rt_data *d, int csv, int *first_section)
{
  size_t total = 0;
  for (int i = 0; i < d->nranks; i++) total += d->ranks[i].nrows;
  struct sum_lat *lat = calloc(total ? total : 1, sizeof(*lat));
  if (!lat) {
    fprintf(stderr, "collie-report summary: out of memory\n");
    return -1;
  }
  size_t n = 0;
  for (int i = 0; i < d->nranks; i++) {
    for (size_t k = 0; k < d->ranks[i].nrows; k++) {
      const struct rt_row *row = &d->ranks[i].rows[k];
      lat[n].op = row->op;
      lat[n].hi = sum_bucket_hi(row->size);
      lat[n].ms = row->elapsed_ms;
      n++;
    }
  }
  qsort(lat, n, sizeof(*lat), sum_lat_cmp);
  double *ms = malloc((n ? n : 1) * sizeof(*ms));
  if (!ms) {
    free(lat);
    fprintf(stderr, "collie-report summary: out of memory\n");
    return -1;
  }
  if (csv) {
    printf("%soperation,size_bucket,bucket_lo_bytes,bucket_hi_bytes,rows,p50_ms,p90_ms,p99_ms\n",
           *first_section ? "" : "\n");
  } else {
    printf("\nLatency per operation and message size (%zu row%s from %d rank%s; nearest-rank "
           "percentiles;\n  bucket \"A-B\" holds sizes above A up to B)\n",
           n, n == 1 ? "" : "s", d->nranks, d->nranks == 1 ? "" : "s");
    printf("  %-20s %-14s %8s %12s %12s %12s\n", "operation", "size", "rows", "p50 ms", "p90 ms",
           "p99 ms");
  }
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && strcmp(lat[j].op, lat[i].op) == 0 && lat[j].hi == lat[i].hi) {
      ms[j - i] = lat[j].ms;
      j++;
    }
    size_t m = j - i;
    char label[48];
    sum_bucket_label(label, sizeof(label), lat[i].hi);
    double p50 = rt_percentile(ms, m, 50), p90 = rt_percentile(ms, m, 90),
           p99 = rt_percentile(ms, m, 99);
    if (csv) {
      /* The operation is user text: quote it when it needs quoting. */
      if (strpbrk(lat[i].op, ",\"\r\n")) {
        putchar('"');
        for (const char *p = lat[i].op; *p; p++) {
          if (*p == '"') putchar('"');
          putchar(*p);
        }
        putchar('"');
      } else {
        fputs(lat[i].op, stdout);
      }
      printf(",%s,%llu,%llu,%zu,%.3f,%.3f,%.3f\n", label,
             (unsigned long long)(lat[i].hi <= 1024 ? 0 : lat[i].hi / 2),
             (unsigned long long)lat[i].hi, m, p50, p90, p99);
    } else {
      printf("  %-20s %-14s %8zu %12.3f %12.3f %12.3f\n", lat[i].op, label, m, p50, p90, p99);
    }
    i = j;
  }
  *first_section = 0;
  free(ms);
  free(lat);
  return 0;
}

int
report_summary(int argc, char **argv)
{
  struct rt_args a;
  struct rt_data d;
  int start = rt_start(argc, argv, "summary", RT_ARG_CSV, report_summary_usage,
                       RT_COMMS | RT_TIMING, 0, &a, &d);
  if (start >= 0) return start;
  if (!d.has_comms && d.nranks == 0) {
    fprintf(stderr, "collie-report summary: neither %s/comms.csv nor %s/timing-rank*.csv exists\n",
            d.dir, d.timing_dir);
    rt_free(&d);
    return REPORT_BAD_INPUT;
  }
  int first = 1, rc = REPORT_OK;
  if (d.has_comms)
    sum_comms(&d, a.csv, &first);
  else if (!a.csv)
    printf("%s/comms.csv: not found (no per-step tables)\n", d.dir);
  if (d.nranks > 0) {
    if (sum_latency(&d, a.csv, &first) != 0) rc = REPORT_BAD_INPUT;
  } else if (!a.csv) {
    printf("\n%s/timing-rank*.csv: not found (no latency table)\n", d.timing_dir);
  }
  for (int i = 0; i < d.nranks; i++) {
    if (d.ranks[i].dropped > 0)
      fprintf(a.csv ? stderr : stdout,
              "%swarning: rank %d dropped %lld timing record%s (its queue was full): the latency "
              "table misses them\n",
              a.csv ? "collie-report summary: " : "", d.ranks[i].rank,
              (long long)d.ranks[i].dropped, d.ranks[i].dropped == 1 ? "" : "s");
  }
  rt_free(&d);
  return rc;
}
