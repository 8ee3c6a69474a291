/*
 * report_telemetry_test.c - collie-report's telemetry commands (summary,
 * stragglers, trace, plot) run as black boxes on files written here by hand
 * after docs/telemetry.md, so the tool is checked against the contract and
 * not against the library's writer: the numbers the tool prints are compared
 * with sums and percentiles computed here, the trace is parsed back with the
 * tool's own JSON reader, the SVG is checked for balanced tags and counted
 * bars. The CSV reader itself is compiled in and fed the awkward cases
 * (quotes, line breaks inside quotes, CRLF, byte-order mark). Bad input must
 * give exit status 2 and a message naming the file and line.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "runner.h"

/* The telemetry loader is compiled in here (and only here: tools_impl.c
 * lists it) so the test can reach its static report_tel_micros; the JSON and CSV
 * readers come from tools_impl.c. */
#include "../../tools/report.h"

#define TT_BIN COLLIE_BUILD_DIR "/collie-report"

/* Runs collie-report with args (a shell fragment); returns its exit status and
 * sets *out to stdout, and stderr too when with_stderr (caller frees). */
static int
tt_run(const char *args, int with_stderr, char **out)
{
  char cmd[4096];
  snprintf(cmd, sizeof(cmd), "'%s' %s %s", TT_BIN, args, with_stderr ? "2>&1" : "2>/dev/null");
  return test_shell(cmd, out);
}

/* Runs and checks the exit status and that the output (with stderr) contains text. */
static void
tt_expect(int code, const char *text, const char *fmt, ...)
{
  char args[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof(args), fmt, ap);
  va_end(ap);
  char *out;
  int rc = tt_run(args, 1, &out);
  ASSERTF(rc == code, "collie-report %s: exit %d, expected %d; output:\n%s", args, rc, code, out);
  ASSERTF(strstr(out, text) != NULL, "collie-report %s: output lacks \"%s\":\n%s", args, text, out);
  free(out);
}

/* Opens test_dir()/rel for writing (creating the one directory level in rel). */
static FILE *
tt_open(const char *rel)
{
  char path[1200];
  snprintf(path, sizeof(path), "%s/%s", test_dir(), rel);
  char *slash = strrchr(path, '/');
  if (slash > path + strlen(test_dir())) {
    *slash = '\0';
    mkdir(path, 0755);
    *slash = '/';
  }
  FILE *f = fopen(path, "w");
  ASSERTF(f != NULL, "cannot write %s", path);
  return f;
}

static void
tt_write(const char *rel, const char *text)
{
  FILE *f = tt_open(rel);
  fputs(text, f);
  fclose(f);
}

static char *
tt_slurp(const char *path, size_t *len)
{
  char *buf = test_read_file(path, len);
  ASSERTF(buf != NULL, "cannot read %s", path);
  return buf;
}

/* The line of the CSV section headed by `header` whose first field is key, or NULL. */
static const char *
tt_row(const char *out, const char *header, const char *key)
{
  char h[512];
  snprintf(h, sizeof(h), "%s\n", header);
  const char *p = strstr(out, h);
  if (!p || (p != out && p[-1] != '\n')) return NULL;
  p += strlen(h);
  size_t kl = strlen(key);
  while (*p && *p != '\n') {
    if (strncmp(p, key, kl) == 0 && p[kl] == ',') return p + kl + 1;
    p = strchr(p, '\n');
    if (!p) return NULL;
    p++;
  }
  return NULL;
}

static const char tt_comms_header[] =
    "step,epoch,world_size,"
    "bytes_all_reduce,bytes_all_gather,bytes_reduce_scatter,bytes_broadcast,bytes_total,"
    "t_all_reduce_ms,t_all_gather_ms,t_reduce_scatter_ms,t_broadcast_ms,t_total_ms,"
    "eff_bandwidth_MiBps,"
    "bytes_features_allgather,bytes_moments_mu,bytes_moments_sigma_full,bytes_moments_sigma_diag,"
    "bytes_mixture_muK,bytes_mixture_sigmaK,bytes_third_moment_sketch,bytes_topr_indices,bytes_"
    "other,"
    "bytes_reduce,bytes_all_to_all,bytes_gather,bytes_scatter,bytes_send_recv,"
    "t_reduce_ms,t_all_to_all_ms,t_gather_ms,t_scatter_ms,t_send_recv_ms";

static const char *const tt_colls[9] = {"all_reduce",     "broadcast", "all_gather",
                                        "reduce_scatter", "reduce",    "all_to_all",
                                        "gather",         "scatter",   "send_recv"};

/* One comms.csv row: bytes and thousandths of ms per collective (tt_colls order). */
struct tt_step {
  int step, epoch;
  uint64_t b[9];
  int64_t t[9];
  uint64_t mu, other, myreg, total;
  int64_t t_total;
};

/* Writes rel (comms.csv) with the registered category "myreg" and CRLF line ends. */
static void
tt_write_comms(const char *rel, const struct tt_step *s, int n, const char *eol)
{
  FILE *f = tt_open(rel);
  fprintf(f, "%s,bytes_myreg%s", tt_comms_header, eol);
  for (int i = 0; i < n; i++) {
    const struct tt_step *r = &s[i];
#define TT_MS(x) (long long)((x) / 1000), (long long)((x) % 1000)
    double bw = r->t_total ? (double)r->total / 1048576.0 / ((double)r->t_total / 1e6) : 0;
    /* all_reduce, all_gather, reduce_scatter, broadcast = indices 0, 2, 3, 1 */
    fprintf(f,
            "%d,%d,4,%llu,%llu,%llu,%llu,%llu,%lld.%03lld,%lld.%03lld,%lld.%03lld,%lld.%03lld,"
            "%lld.%03lld,%.3f,0,%llu,0,0,0,0,0,0,%llu,%llu,%llu,%llu,%llu,%llu,%lld.%03lld,"
            "%lld.%03lld,%lld.%03lld,%lld.%03lld,%lld.%03lld,%llu%s",
            r->step, r->epoch, (unsigned long long)r->b[0], (unsigned long long)r->b[2],
            (unsigned long long)r->b[3], (unsigned long long)r->b[1], (unsigned long long)r->total,
            TT_MS(r->t[0]), TT_MS(r->t[2]), TT_MS(r->t[3]), TT_MS(r->t[1]), TT_MS(r->t_total), bw,
            (unsigned long long)r->mu, (unsigned long long)r->other, (unsigned long long)r->b[4],
            (unsigned long long)r->b[5], (unsigned long long)r->b[6], (unsigned long long)r->b[7],
            (unsigned long long)r->b[8], TT_MS(r->t[4]), TT_MS(r->t[5]), TT_MS(r->t[6]),
            TT_MS(r->t[7]), TT_MS(r->t[8]), (unsigned long long)r->myreg, eol);
#undef TT_MS
  }
  fclose(f);
}

static const char tt_timing_header[] = "timestamp,iteration,epoch,layer_name,operation,phase,"
                                       "message_size_bytes,elapsed_ms,start_counter,end_counter\n";

/* A timing row: start and end in microseconds of CLOCK_MONOTONIC. */
static void
tt_timing_row(FILE *f, const char *label, const char *op, uint64_t size, int64_t elapsed_us,
              int64_t start_us, int64_t end_us)
{
  fprintf(f,
          "2026-02-06T14:30:45.123456,3,1,%s,%s,dense,%llu,%lld.%03lld,%lld.%06lld,%lld.%06lld\n",
          label, op, (unsigned long long)size, (long long)(elapsed_us / 1000),
          (long long)(elapsed_us % 1000), (long long)(start_us / 1000000),
          (long long)(start_us % 1000000), (long long)(end_us / 1000000),
          (long long)(end_us % 1000000));
}

static void
tt_meta(const char *rel, int rank, const char *host, const char *offset, long dropped)
{
  FILE *f = tt_open(rel);
  fprintf(f,
          "version=1\nrank=%d\nworld_size=4\nhost=%s\npid=%d\nqueue_capacity=10000\n"
          "records_written=10\nrecords_dropped=%ld\nclock_offset_s=%s\n",
          rank, host, 1000 + rank, dropped, offset);
  fclose(f);
}

static int
tt_near(double got, double want, double tol)
{
  return fabs(got - want) <= tol;
}

TEST_IMPL(report_summary_numbers)
{
  enum { NSTEP = 12 };
  struct tt_step s[NSTEP];
  unsigned seed = 12345;
  memset(s, 0, sizeof(s));
  for (int i = 0; i < NSTEP; i++) {
    s[i].step = i + 1;
    s[i].epoch = i / 5;
    for (int c = 0; c < 9; c++) {
      /* reduce_scatter and gather stay zero: the text table must leave them out. */
      if (c == 3 || c == 6) continue;
      s[i].b[c] = test_rand(&seed) % 5000000;
      s[i].t[c] = (int64_t)(test_rand(&seed) % 40000);
      s[i].total += s[i].b[c];
      s[i].t_total += s[i].t[c];
    }
    s[i].mu = s[i].total / 2;
    s[i].myreg = s[i].total / 4;
    s[i].other = s[i].total - s[i].mu - s[i].myreg;
  }
  tt_write_comms("comms.csv", s, NSTEP, "\r\n");

  /* Timing logs in a subdirectory, for --timing. Rank r holds the ALLREDUCE
   * latencies v = 1..100 ms with v % 3 == r, in a scrambled order. */
  for (int r = 0; r < 3; r++) {
    char rel[64];
    snprintf(rel, sizeof(rel), "tl/timing-rank%d.csv", r);
    FILE *f = tt_open(rel);
    fputs(tt_timing_header, f);
    int64_t t = 1000000;
    for (int k = 0; k < 100; k++) {
      int v = (k * 37) % 100 + 1;
      if (v % 3 != r) continue;
      tt_timing_row(f, "enc", "ALLREDUCE", 1500, v * 1000, t, t + v * 1000);
      t += 200000;
    }
    if (r == 0) {
      /* BCAST <= 1 KiB: 1..7 ms; a 4096 B and a 4097 B SEND; a user op with a comma. */
      for (int v = 7; v >= 1; v--) tt_timing_row(f, "", "BCAST", 100, v * 1000, t, t + v * 1000);
      tt_timing_row(f, "", "SEND", 4096, 2000, t, t + 2000);
      tt_timing_row(f, "", "SEND", 4097, 3000, t, t + 3000);
      tt_timing_row(f, "", "\"copy,h2d\"", 0, 250, t, t + 250);
    }
    fclose(f);
    snprintf(rel, sizeof(rel), "tl/timing-rank%d.meta", r);
    tt_meta(rel, r, "nodeA", "1764120000.000000", r == 1 ? 7 : 0);
  }

  char *out;
  char args[2048];
  snprintf(args, sizeof(args), "summary --csv --timing '%s/tl' '%s'", test_dir(), test_dir());
  int rc = tt_run(args, 0, &out);
  ASSERTF(rc == 0, "exit %d:\n%s", rc, out);

  /* Per collective: sums computed here. */
  uint64_t all_b = 0;
  int64_t all_t = 0;
  for (int c = 0; c < 9; c++) {
    uint64_t b = 0;
    int64_t t = 0;
    for (int i = 0; i < NSTEP; i++) {
      b += s[i].b[c];
      t += s[i].t[c];
    }
    all_b += b;
    all_t += t;
    const char *row = tt_row(out, "collective,bytes,time_ms,bandwidth_MiBps", tt_colls[c]);
    ASSERTF(row, "no row for %s in:\n%s", tt_colls[c], out);
    unsigned long long gb;
    double gt, gbw;
    ASSERT(sscanf(row, "%llu,%lf,%lf", &gb, &gt, &gbw) == 3);
    double want_bw = t ? (double)b / 1048576.0 / ((double)t / 1e6) : 0;
    ASSERTF(gb == b, "%s: bytes %llu, expected %llu", tt_colls[c], gb, (unsigned long long)b);
    ASSERTF(tt_near(gt, (double)t / 1000, 0.0005), "%s: %f ms, expected %f", tt_colls[c], gt,
            (double)t / 1000);
    ASSERTF(tt_near(gbw, want_bw, 0.0005 + want_bw * 1e-9), "%s: %f MiB/s, expected %f",
            tt_colls[c], gbw, want_bw);
  }
  const char *row = tt_row(out, "collective,bytes,time_ms,bandwidth_MiBps", "total");
  ASSERT(row);
  unsigned long long gb;
  double gt, gshare;
  ASSERT(sscanf(row, "%llu,%lf", &gb, &gt) == 2);
  ASSERT(gb == all_b);
  ASSERT(tt_near(gt, (double)all_t / 1000, 0.0005));

  /* Per category, with the registered one. */
  struct {
    const char *name;
    uint64_t b;
  } cats[3] = {{"moments_mu", 0}, {"other", 0}, {"myreg", 0}};
  for (int i = 0; i < NSTEP; i++) {
    cats[0].b += s[i].mu;
    cats[1].b += s[i].other;
    cats[2].b += s[i].myreg;
  }
  for (int k = 0; k < 3; k++) {
    row = tt_row(out, "category,bytes,share_pct", cats[k].name);
    ASSERTF(row, "no category %s in:\n%s", cats[k].name, out);
    ASSERT(sscanf(row, "%llu,%lf", &gb, &gshare) == 2);
    ASSERTF(gb == cats[k].b, "%s: %llu bytes, expected %llu", cats[k].name, gb,
            (unsigned long long)cats[k].b);
    ASSERT(tt_near(gshare, 100.0 * (double)cats[k].b / (double)all_b, 0.0005));
  }
  row = tt_row(out, "category,bytes,share_pct", "features_allgather");
  ASSERT(row && strncmp(row, "0,0.000\n", 8) == 0);

  /* The five slowest steps, slowest first. */
  const char *top = strstr(out, "step,epoch,t_total_ms,bytes_total\n");
  ASSERT(top);
  top = strchr(top, '\n') + 1;
  int used[NSTEP] = {0};
  for (int k = 0; k < 5; k++) {
    int best = -1;
    for (int i = 0; i < NSTEP; i++)
      if (!used[i] && (best < 0 || s[i].t_total > s[best].t_total)) best = i;
    used[best] = 1;
    int st, ep;
    unsigned long long tb;
    double tt;
    ASSERTF(sscanf(top, "%d,%d,%lf,%llu", &st, &ep, &tt, &tb) == 4, "top line %d: %s", k, top);
    ASSERTF(st == s[best].step && ep == s[best].epoch && tb == s[best].total &&
                tt_near(tt, (double)s[best].t_total / 1000, 0.0005),
            "slowest #%d: got step %d, expected %d", k + 1, st, s[best].step);
    top = strchr(top, '\n') + 1;
  }
  ASSERT(*top == '\n'); /* the section ends after five */

  /* Latency: nearest-rank percentiles of known sets. */
  const char *lat =
      "operation,size_bucket,bucket_lo_bytes,bucket_hi_bytes,rows,p50_ms,p90_ms,p99_ms";
  row = tt_row(out, lat, "ALLREDUCE");
  ASSERTF(row && strncmp(row, "1-2KiB,1024,2048,100,50.000,90.000,99.000\n", 42) == 0,
          "ALLREDUCE latency row: %s", row ? row : "(none)");
  row = tt_row(out, lat, "BCAST");
  ASSERTF(row && strncmp(row, "<=1KiB,0,1024,7,4.000,7.000,7.000\n", 34) == 0, "BCAST row: %s",
          row ? row : "(none)");
  row = tt_row(out, lat, "SEND");
  ASSERTF(row && strncmp(row,
                         "2-4KiB,2048,4096,1,2.000,2.000,2.000\nSEND,4-8KiB,4096,8192,1,"
                         "3.000,3.000,3.000\n",
                         76) == 0,
          "SEND rows: %s", row ? row : "(none)");
  ASSERTF(strstr(out, "\n\"copy,h2d\",<=1KiB,0,1024,1,0.250,0.250,0.250\n"),
          "user op row missing or unquoted:\n%s", out);
  free(out);

  /* The text form: the same facts for people, and the dropped records. */
  snprintf(args, sizeof(args), "summary --timing '%s/tl' '%s'", test_dir(), test_dir());
  tt_expect(0, "warning: rank 1 dropped 7 timing records", "%s", args);
  tt_expect(0, "(2 collectives with no bytes and no time not shown)", "%s", args);
  tt_expect(0,
            "ALLREDUCE            1-2KiB              100       50.000       90.000       99.000",
            "%s", args);
  tt_expect(0, "myreg", "%s", args);
}

TEST_IMPL(report_summary_sources)
{
  /* Timing logs only (in DIR itself): latency table, no per-step tables. */
  FILE *f = tt_open("timing-rank0.csv");
  fputs(tt_timing_header, f);
  tt_timing_row(f, "x", "ALLGATHER", 3 << 20, 5000, 1000000, 1005000);
  fclose(f);
  char *out;
  char args[1200];
  snprintf(args, sizeof(args), "summary --csv '%s'", test_dir());
  int rc = tt_run(args, 0, &out);
  ASSERTF(rc == 0, "exit %d: %s", rc, out);
  ASSERTF(strncmp(out,
                  "operation,size_bucket,bucket_lo_bytes,bucket_hi_bytes,rows,p50_ms,p90_ms,p99_"
                  "ms\nALLGATHER,2-4MiB,2097152,4194304,1,5.000,5.000,5.000\n",
                  128) == 0,
          "timing-only output:\n%s", out);
  ASSERT(strstr(out, "collective,") == NULL);
  free(out);
  tt_expect(0, "comms.csv: not found", "summary '%s'", test_dir());

  /* comms.csv only (the timing log moved away): per-step tables, no latency. */
  char from[1200], to[1200];
  snprintf(from, sizeof(from), "%s/timing-rank0.csv", test_dir());
  snprintf(to, sizeof(to), "%s/timing-rank0.csv.old", test_dir());
  ASSERT(rename(from, to) == 0);
  struct tt_step st = {.step = 7, .epoch = 2, .b = {1048576}, .t = {500}, .total = 1048576};
  st.t_total = 500;
  st.other = 1048576;
  tt_write_comms("comms.csv", &st, 1, "\n");
  rc = tt_run(args, 0, &out);
  ASSERTF(rc == 0, "exit %d: %s", rc, out);
  ASSERTF(strstr(out, "all_reduce,1048576,0.500,2000.000\n"), "comms-only output:\n%s", out);
  ASSERTF(strstr(out, "step,epoch,t_total_ms,bytes_total\n7,2,0.500,1048576\n"), "%s", out);
  ASSERT(strstr(out, "operation,size_bucket") == NULL);
  free(out);
  tt_expect(0, "timing-rank*.csv: not found", "summary '%s'", test_dir());
  /* A comms.csv with a header only. */
  tt_write("comms.csv", "step,epoch,bytes_total,t_total_ms\n");
  tt_expect(0, "no steps recorded", "summary '%s'", test_dir());
}

TEST_IMPL(report_csv_reader)
{
  struct rc_table t;
  char err[512];
  char path[1200];
  snprintf(path, sizeof(path), "%s/t.csv", test_dir());
  /* BOM, CRLF, a quoted comma, doubled quotes, a line break inside quotes,
   * blank lines, no newline at the end. */
  tt_write("t.csv", "\xEF\xBB\xBF"
                    "a,b,c\r\n"
                    "1,\"x,y\",\"say \"\"hi\"\"\"\r\n"
                    "\r\n"
                    "2,\"two\nlines\",\r\n"
                    "\n"
                    "3,,\"\"");
  ASSERTF(rc_load(path, &t, err, sizeof(err)) == 0, "%s", err);
  ASSERT(t.ncols == 3 && t.nrows == 3);
  ASSERT(rc_col(&t, "a") == 0 && rc_col(&t, "c") == 2 && rc_col(&t, "d") == -1);
  ASSERT(strcmp(rc_cell(&t, 0, 1), "x,y") == 0);
  ASSERT(strcmp(rc_cell(&t, 0, 2), "say \"hi\"") == 0);
  ASSERT(strcmp(rc_cell(&t, 1, 1), "two\nlines") == 0);
  ASSERT(strcmp(rc_cell(&t, 1, 2), "") == 0);
  ASSERT(strcmp(rc_cell(&t, 2, 0), "3") == 0 && strcmp(rc_cell(&t, 2, 2), "") == 0);
  ASSERT(t.lines[0] == 1 && t.lines[1] == 2 && t.lines[2] == 4 && t.lines[3] == 7);
  double d;
  int64_t i64;
  ASSERT(rc_double(&t, 2, 0, &d, err, sizeof(err)) == 0 && d == 3);
  ASSERT(rc_double(&t, 1, 1, &d, err, sizeof(err)) == -1);
  ASSERTF(strstr(err, "t.csv:4: column \"b\": \"two\nlines\" is not a number"), "%s", err);
  ASSERT(rc_double(&t, 2, 1, &d, err, sizeof(err)) == -1); /* empty is not a number */
  ASSERT(rc_int64(&t, 0, 0, &i64, err, sizeof(err)) == 0 && i64 == 1);
  const char *const need[] = {"a", "zz"};
  ASSERT(rc_require(&t, need, 2, err, sizeof(err)) == -1);
  ASSERTF(strstr(err, "t.csv:1: no column \"zz\" in the header"), "%s", err);
  rc_free(&t);

  /* The line of a bad record counts the line breaks inside earlier quotes. */
  tt_write("t.csv", "a,b\n\"1\n\n\",2\n3\n");
  ASSERT(rc_load(path, &t, err, sizeof(err)) == -1);
  ASSERTF(strstr(err, "t.csv:5: 1 field, but the header has 2"), "%s", err);
  tt_write("t.csv", "a,b\n1,\"open\n2,3\n");
  ASSERT(rc_load(path, &t, err, sizeof(err)) == -1);
  ASSERTF(strstr(err, "t.csv:2: a quoted field is never closed"), "%s", err);
  tt_write("t.csv", "a,b\n1,\"x\"y\n");
  ASSERT(rc_load(path, &t, err, sizeof(err)) == -1);
  ASSERTF(strstr(err, "t.csv:2: 'y' after the closing quote"), "%s", err);
  tt_write("t.csv", "\n\r\n");
  ASSERT(rc_load(path, &t, err, sizeof(err)) == -1);
  ASSERTF(strstr(err, "t.csv: empty file"), "%s", err);
  snprintf(path, sizeof(path), "%s/none.csv", test_dir());
  ASSERT(rc_load(path, &t, err, sizeof(err)) == -1);
  ASSERTF(strstr(err, "none.csv: cannot read: No such file"), "%s", err);

  /* Counters to whole microseconds, exactly, and percentiles by nearest rank. */
  int64_t us;
  ASSERT(report_tel_micros("1764120000.123456", &us) == 0 && us == 1764120000123456LL);
  ASSERT(report_tel_micros("8812.0012345", &us) == 0 && us == 8812001235LL);
  ASSERT(report_tel_micros("-0.5", &us) == 0 && us == -500000);
  ASSERT(report_tel_micros("12", &us) == 0 && us == 12000000);
  ASSERT(report_tel_micros("1e3", &us) == -1 && report_tel_micros("", &us) == -1 &&
         report_tel_micros(".", &us) == -1);
  double v[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  ASSERT(rt_percentile(v, 10, 50) == 5 && rt_percentile(v, 10, 90) == 9);
  ASSERT(rt_percentile(v, 10, 99) == 10 && rt_percentile(v, 1, 50) == 1);
  ASSERT(rt_percentile(v, 4, 50) == 2 && rt_percentile(v, 3, 50) == 2);
}

/* Rank r's timing log: ncoll ALLREDUCEs 10 ms apart, arriving late_us later
 * on the calls where late(k) is true, with SEND/RECV and user rows between
 * (rank 0 only) that must not be matched. */
static void
tt_straggler_log(int r, int ncoll, int64_t base_us, int64_t late_us, int (*late)(int r, int k),
                 const char *bad_op_at)
{
  char rel[64];
  snprintf(rel, sizeof(rel), "timing-rank%d.csv", r);
  FILE *f = tt_open(rel);
  fputs(tt_timing_header, f);
  for (int k = 0; k < ncoll; k++) {
    int64_t s = base_us + k * 10000 + (late && late(r, k) ? late_us : 0);
    const char *op = "ALLREDUCE";
    if (bad_op_at && k == atoi(bad_op_at)) op = strchr(bad_op_at, ':') + 1;
    if (k == 2) op = "BARRIER";
    tt_timing_row(f, "", op, 4096, 100, s, s + 100);
    if (r == 0) {
      tt_timing_row(f, "", "SEND", 64, 10, s + 500, s + 510);
      tt_timing_row(f, "", "compress", 64, 10, s + 600, s + 610);
    }
  }
  fclose(f);
}

/* Host A (ranks 0, 1): rank 1 late by 3 ms in calls 0..7 of 10; host B
 * (ranks 2, 3): rank 3 late by 1 ms in every call. */
static int
tt_late(int r, int k)
{
  return (r == 1 && k < 8) || r == 3;
}

TEST_IMPL(report_stragglers_late_rank)
{
  /* Host B's clock is far from host A's: comparing across hosts would blame host B. */
  for (int r = 0; r < 4; r++) {
    tt_straggler_log(r, 10, r < 2 ? 5000000 : 900000000, r == 1 ? 3000 : 1000, tt_late, NULL);
    char rel[64];
    snprintf(rel, sizeof(rel), "timing-rank%d.meta", r);
    tt_meta(rel, r, r < 2 ? "hostA/1" : "hostB/2", "1.000000", 0);
  }
  char *out;
  char args[1200];
  snprintf(args, sizeof(args), "stragglers '%s'", test_dir());
  int rc = tt_run(args, 1, &out);
  ASSERTF(rc == 0, "exit %d:\n%s", rc, out);
  ASSERTF(strstr(out, "4 ranks (") && strstr(out, "10 collective calls matched"), "%s", out);
  ASSERTF(strstr(out, "host hostA/1: ranks 0,1; 10 matched calls\n"
                      "  arrival spread (max - min start_counter): p50 3.000 ms, p99 3.000 ms, "
                      "max 3.000 ms\n"),
          "%s", out);
  ASSERTF(strstr(out, "         0        0     0.0%          0.000\n"
                      "         1        8    80.0%          2.400\n"),
          "%s", out);
  ASSERTF(strstr(out, "  straggler: rank 1 arrived last in 8 of 10 calls (80.0%), on average "
                      "2.400 ms after the first\n"),
          "%s", out);
  ASSERTF(strstr(out, "host hostB/2: ranks 2,3; 10 matched calls\n"
                      "  arrival spread (max - min start_counter): p50 1.000 ms, p99 1.000 ms, "
                      "max 1.000 ms\n"),
          "%s", out);
  ASSERTF(strstr(out, "  straggler: rank 3 arrived last in 10 of 10 calls (100.0%)"), "%s", out);
  ASSERT(strstr(out, "diverge") == NULL);
  free(out);

  /* A host with one rank has nothing to compare. */
  tt_meta("timing-rank3.meta", 3, "hostC", "1.0", 0);
  tt_expect(0, "host hostC: rank 3 alone: nothing to compare on its clock", "stragglers '%s'",
            test_dir());
}

TEST_IMPL(report_stragglers_diverge)
{
  /* Rank 2 calls BCAST where the others call their 4th ALLREDUCE (call #5:
   * the 3rd call is a BARRIER everywhere). No .meta: one group. */
  for (int r = 0; r < 3; r++)
    tt_straggler_log(r, 8, 5000000, 2000, tt_late, r == 2 ? "4:BCAST" : NULL);
  tt_expect(1, "call #5: rank 0 ALLREDUCE, rank 2 BCAST: sequences diverge; matched 4 calls\n",
            "stragglers '%s'", test_dir());
  tt_expect(1, "compared as one group", "stragglers '%s'", test_dir());
  tt_expect(1, "host (all): ranks 0,1,2; 4 matched calls", "stragglers '%s'", test_dir());

  /* Same operations, but rank 1's log is shorter: a note, no divergence. */
  for (int r = 0; r < 3; r++) tt_straggler_log(r, r == 1 ? 6 : 8, 5000000, 2000, NULL, NULL);
  tt_expect(0, "note: rank 1 logged 6 collective calls, another rank 8: only the first 6",
            "stragglers '%s'", test_dir());
}

/* The trace's events with ph == "X", in order. */
static size_t
tt_slices(const struct rj_val *root, const struct rj_val **x, size_t max)
{
  const struct rj_val *ev = rj_get(root, "traceEvents");
  ASSERT(ev && ev->type == RJ_ARR);
  size_t n = 0;
  for (size_t i = 0; i < ev->n; i++) {
    const struct rj_val *ph = rj_get(&ev->items[i], "ph");
    ASSERT(ph && ph->type == RJ_STR);
    if (strcmp(ph->str, "X") == 0) {
      if (n < max) x[n] = &ev->items[i];
      n++;
    }
  }
  return n;
}

static int64_t
tt_int(const struct rj_val *obj, const char *key)
{
  const struct rj_val *v = rj_get(obj, key);
  ASSERTF(v && v->type == RJ_NUM && v->is_int, "\"%s\" is not an integer", key);
  return v->i;
}

static const char *
tt_str(const struct rj_val *obj, const char *key)
{
  const struct rj_val *v = rj_get(obj, key);
  ASSERTF(v && v->type == RJ_STR, "\"%s\" is not a string", key);
  return v->str;
}

TEST_IMPL(report_trace_json)
{
  /* Rank 0 (host A, offset 1000 s): a categorised ALLREDUCE with a label
   * holding a comma and quotes, a BCAST with no category row (other), a user
   * op (user). Rank 1 (host A, offset 1000.5 s) starts 0.4 s earlier on its
   * clock, i.e. 0.1 s later in real time. Rank 2 (host B) has no category file. */
  FILE *f = tt_open("timing-rank0.csv");
  fputs(tt_timing_header, f);
  tt_timing_row(f, "\"enc,\"\"q\"\"\"", "ALLREDUCE", 4096, 1500, 10000000, 10001500);
  tt_timing_row(f, "dec", "BCAST", 64, 100, 10010000, 10010100);
  tt_timing_row(f, "", "h2d_copy", 1 << 20, 10000, 10020000, 10030000);
  fclose(f);
  tt_write("timing-rank0.categories.csv", "start_counter,end_counter,operation,category\n"
                                          "10.000000,10.001500,ALLREDUCE,moments_mu\n"
                                          "10.010000,10.010101,BCAST,topr_indices\n");
  tt_meta("timing-rank0.meta", 0, "hostA", "1000.000000", 0);
  f = tt_open("timing-rank1.csv");
  fputs(tt_timing_header, f);
  tt_timing_row(f, "", "ALLREDUCE", 4096, 2000, 9600000, 9602000);
  tt_timing_row(f, "", "RECV", 8, 5, 9700000, 9700005);
  fclose(f);
  tt_write("timing-rank1.categories.csv", "start_counter,end_counter,operation,category\n"
                                          "9.600000,9.602000,ALLREDUCE,myreg\n");
  tt_meta("timing-rank1.meta", 1, "hostA", "1000.500000", 0);
  f = tt_open("timing-rank2.csv");
  fputs(tt_timing_header, f);
  tt_timing_row(f, "", "ALLREDUCE", 4096, 1000, 5000000, 5001000);
  fclose(f);
  tt_meta("timing-rank2.meta", 2, "hostB", "1010.000000", 0);

  char json[1200];
  snprintf(json, sizeof(json), "%s/out", test_dir());
  mkdir(json, 0755);
  snprintf(json, sizeof(json), "%s/out/trace.json", test_dir());
  tt_expect(0, "wrote 6 slices from 3 ranks to", "trace '%s' -o '%s'", test_dir(), json);

  size_t len;
  char *text = tt_slurp(json, &len);
  char err[256];
  struct rj_val *root = rj_parse(text, len, err, sizeof(err));
  ASSERTF(root != NULL, "trace.json does not parse: %s", err);
  ASSERT(strcmp(tt_str(root, "displayTimeUnit"), "ms") == 0);
  const struct rj_val *x[8];
  ASSERT(tt_slices(root, x, 8) == 6);

  /* Rank 0's ALLREDUCE: earliest real time, so ts 0; joined category. */
  ASSERT(tt_int(x[0], "pid") == 0 && strcmp(tt_str(x[0], "name"), "ALLREDUCE") == 0);
  ASSERT(tt_int(x[0], "ts") == 0 && tt_int(x[0], "dur") == 1500);
  ASSERT(strcmp(tt_str(x[0], "cat"), "moments_mu") == 0);
  const struct rj_val *args = rj_get(x[0], "args");
  ASSERT(args && args->type == RJ_OBJ);
  ASSERTF(strcmp(tt_str(args, "label"), "enc,\"q\"") == 0, "label %s", tt_str(args, "label"));
  ASSERT(strcmp(tt_str(args, "category"), "moments_mu") == 0);
  ASSERT(strcmp(tt_str(args, "phase"), "dense") == 0);
  ASSERT(tt_int(args, "size") == 4096 && tt_int(args, "iteration") == 3 &&
         tt_int(args, "epoch") == 1);
  /* The BCAST's category row differs in end_counter: no match, so "other". */
  ASSERT(strcmp(tt_str(x[1], "cat"), "other") == 0 && tt_int(x[1], "ts") == 10000);
  ASSERT(strcmp(tt_str(x[2], "name"), "h2d_copy") == 0);
  ASSERT(strcmp(tt_str(x[2], "cat"), "user") == 0 && tt_int(x[2], "tid") == 1);
  ASSERT(tt_int(x[2], "dur") == 10000);
  /* Rank 1: 9.6 + 1000.5 = 1010.1 s, 100 ms after rank 0's 1010.0 s. */
  ASSERT(tt_int(x[3], "pid") == 1 && tt_int(x[3], "ts") == 100000);
  ASSERT(strcmp(tt_str(x[3], "cat"), "myreg") == 0);
  ASSERT(strcmp(tt_str(x[4], "name"), "RECV") == 0 && strcmp(tt_str(x[4], "cat"), "other") == 0);
  /* Rank 2: 5 + 1010 = 1015 s, 5 s after. */
  ASSERT(tt_int(x[5], "pid") == 2 && tt_int(x[5], "ts") == 5000000);
  ASSERT(strcmp(tt_str(x[5], "cat"), "other") == 0);
  /* Each rank is named, with its host. */
  ASSERT(strstr(text, "\"args\":{\"name\":\"rank 1 (hostA)\"}"));
  ASSERT(strstr(text, "\"args\":{\"name\":\"rank 2 (hostB)\"}"));
  rj_free(root);
  free(text);

  /* To stdout, the count goes to stderr. */
  char *out;
  char a2[1200];
  snprintf(a2, sizeof(a2), "trace '%s' -o -", test_dir());
  ASSERT(tt_run(a2, 0, &out) == 0);
  root = rj_parse(out, strlen(out), err, sizeof(err));
  ASSERTF(root != NULL, "stdout trace does not parse: %s", err);
  ASSERT(tt_slices(root, x, 8) == 6);
  rj_free(root);
  free(out);
}

/* Whether the XML text's tags nest properly (one root element). */
static int
tt_xml_balanced(const char *s)
{
  const char *stack[64];
  size_t lens[64];
  int depth = 0, roots = 0;
  for (const char *p = strchr(s, '<'); p; p = strchr(p + 1, '<')) {
    if (p[1] == '?' || p[1] == '!') continue;
    const char *end = strchr(p, '>');
    if (!end) return 0;
    if (p[1] == '/') {
      size_t n = strcspn(p + 2, " >");
      if (depth == 0 || lens[depth - 1] != n || strncmp(stack[depth - 1], p + 2, n) != 0) return 0;
      depth--;
    } else if (end[-1] != '/') {
      if (depth == 64) return 0;
      if (depth == 0) roots++;
      stack[depth] = p + 1;
      lens[depth++] = strcspn(p + 1, " >");
    } else if (depth == 0) {
      roots++;
    }
  }
  return depth == 0 && roots == 1;
}

static size_t
tt_count(const char *s, const char *what)
{
  size_t n = 0;
  for (const char *p = strstr(s, what); p; p = strstr(p + 1, what)) n++;
  return n;
}

TEST_IMPL(report_plot_svg)
{
  /* 12 steps: moments_mu every step, myreg on even steps, other on step 5
   * only: 12 + 6 + 1 bars. A hand-made category name needing escapes. */
  FILE *f = tt_open("comms.csv");
  fprintf(f, "%s,bytes_myreg,bytes_a<b&c\n", tt_comms_header);
  int bars = 0;
  for (int s = 1; s <= 12; s++) {
    uint64_t mu = 1000u * (uint64_t)s, reg = s % 2 == 0 ? 300 : 0, oth = s == 5 ? 77 : 0;
    bars += 1 + (reg > 0) + (oth > 0);
    uint64_t tot = mu + reg + oth;
    fprintf(f,
            "%d,0,2,%llu,0,0,0,%llu,%d.250,0,0,0,%d.250,1.0,0,%llu,0,0,0,0,0,0,%llu,0,0,0,0,0,0,0,"
            "0,0,0,%llu,0\n",
            s, (unsigned long long)tot, (unsigned long long)tot, s, s, (unsigned long long)mu,
            (unsigned long long)oth, (unsigned long long)reg);
  }
  fclose(f);
  char svg[1200];
  snprintf(svg, sizeof(svg), "%s/comms.svg", test_dir());
  tt_expect(0, "wrote", "plot '%s' -o '%s'", test_dir(), svg);
  char *text = tt_slurp(svg, NULL);
  ASSERTF(tt_xml_balanced(text), "unbalanced SVG:\n%s", text);
  ASSERTF(tt_count(text, "<rect class=\"bar\"") == (size_t)bars, "%zu bars, expected %d",
          tt_count(text, "<rect class=\"bar\""), bars);
  /* Legends: the non-zero categories and collectives only. */
  ASSERT(tt_count(text, "<rect class=\"legend\"") == 3);
  ASSERT(strstr(text, ">moments_mu</text>") && strstr(text, ">myreg</text>") &&
         strstr(text, ">other</text>") && !strstr(text, ">a&lt;b&amp;c</text>"));
  ASSERT(tt_count(text, "<polyline") == 1 && strstr(text, ">all_reduce</text>"));
  ASSERT(strstr(text, "comms.csv: 12 steps (1 to 12)") && !strstr(text, "aggregated"));
  ASSERT(strstr(text, ">bytes (KiB)</text>") && strstr(text, ">time (ms)</text>"));
  free(text);

  /* Now the odd category carries bytes: it is drawn, and escaped. */
  f = tt_open("comms.csv");
  fprintf(f, "step,epoch,bytes_total,t_total_ms,bytes_a<b&c\n1,0,10,1.0,10\n");
  fclose(f);
  tt_expect(0, "wrote", "plot '%s' -o '%s'", test_dir(), svg);
  text = tt_slurp(svg, NULL);
  ASSERTF(tt_xml_balanced(text), "unbalanced SVG:\n%s", text);
  ASSERT(strstr(text, ">a&lt;b&amp;c</text>") && tt_count(text, "<rect class=\"bar\"") == 1);
  free(text);
}

TEST_IMPL(report_plot_many_steps)
{
  /* 10000 steps, two categories each step: 500 bars of 20 steps, 2 rects each. */
  FILE *f = tt_open("comms.csv");
  fprintf(f, "%s\n", tt_comms_header);
  for (int s = 1; s <= 10000; s++)
    fprintf(f, "%d,0,2,%d,0,0,0,%d,1.500,0,0,0,1.500,1.0,0,%d,0,0,0,0,0,0,%d,0,0,0,0,0,0,0,0,0,0\n",
            s, 3 * s, 3 * s, s, 2 * s);
  fclose(f);
  char svg[1200];
  snprintf(svg, sizeof(svg), "%s/comms.svg", test_dir());
  tt_expect(0, "wrote", "plot '%s' -o '%s'", test_dir(), svg);
  size_t len;
  char *text = tt_slurp(svg, &len);
  ASSERTF(tt_xml_balanced(text), "unbalanced SVG");
  ASSERT(tt_count(text, "<rect class=\"bar\"") == 1000);
  ASSERTF(strstr(text, "10000 steps (1 to 10000), aggregated: each bar and point is the mean of "
                       "20 consecutive steps"),
          "title lacks the aggregation");
  ASSERTF(len < 1000000, "SVG of %zu bytes", len);
  /* One line of 500 points. */
  const char *pts = strstr(text, "points=\"");
  ASSERT(pts);
  size_t npts = 1;
  for (const char *p = pts + 8; *p != '"'; p++) npts += *p == ' ';
  ASSERT(npts == 500);
  free(text);
}

TEST_IMPL(report_telemetry_bad_input)
{
  const char *d = test_dir();
  tt_expect(2, "cannot open directory", "summary '%s/nowhere'", d);
  tt_expect(2, "cannot open directory", "stragglers '%s/nowhere'", d);
  tt_expect(2, "neither", "summary '%s'", d);
  tt_expect(2, "no timing-rank*.csv in", "stragglers '%s'", d);
  tt_expect(2, "no timing-rank*.csv in", "trace '%s' -o '%s/t.json'", d, d);
  tt_expect(2, "no comms.csv in", "plot '%s' -o '%s/c.svg'", d, d);
  tt_expect(2, "expected a directory", "summary");
  tt_expect(2, "unknown option '--frob'", "summary --frob '%s'", d);
  tt_expect(2, "-o FILE is required", "trace '%s'", d);
  tt_expect(2, "-o needs a value", "plot '%s' -o", d);
  tt_expect(2, "expected one directory", "stragglers '%s' '%s'", d, d);
  tt_expect(2, "cannot open directory", "summary '%s' --timing '%s/nowhere'", d, d);
  tt_expect(0, "usage: collie-report summary DIR", "summary --help");
  tt_expect(0, "usage: collie-report stragglers DIR", "stragglers --help");
  tt_expect(0, "usage: collie-report trace DIR", "trace --help");
  tt_expect(0, "usage: collie-report plot DIR", "plot --help");
  tt_expect(0, "stragglers", "--help");

  /* comms.csv: wrong field count, a non-number, a missing column, an open quote. */
  tt_write("comms.csv", "step,epoch,bytes_total,t_total_ms\n1,0,5,1.0\n2,0\n");
  tt_expect(2, "comms.csv:3: 2 fields, but the header has 4", "summary '%s'", d);
  tt_expect(2, "comms.csv:3: 2 fields, but the header has 4", "plot '%s' -o '%s/c.svg'", d, d);
  tt_write("comms.csv", "step,epoch,bytes_total,t_total_ms\n1,0,5,fast\n");
  tt_expect(2, "comms.csv:2: column \"t_total_ms\": \"fast\" is not a number", "summary '%s'", d);
  tt_write("comms.csv", "step,epoch,bytes_total\n1,0,5\n");
  tt_expect(2, "comms.csv:1: no column \"t_total_ms\" in the header", "summary '%s'", d);
  tt_expect(2, "comms.csv:1: no column \"t_total_ms\" in the header", "plot '%s' -o '%s/c.svg'", d,
            d);
  tt_write("comms.csv", "step,epoch,bytes_total,t_total_ms\n1,0,\"5,1.0\n");
  tt_expect(2, "comms.csv:2: a quoted field is never closed", "summary '%s'", d);
  tt_write("comms.csv", "");
  tt_expect(2, "comms.csv: empty file", "plot '%s' -o '%s/c.svg'", d, d);
  tt_write("comms.csv", "step,epoch,bytes_total,t_total_ms\n");
  tt_expect(2, "has no step rows", "plot '%s' -o '%s/c.svg'", d, d);
  tt_write("comms.csv", "step,epoch,bytes_total,t_total_ms\n1,0,5,1.0\n");
  tt_expect(2, "cannot write", "plot '%s' -o '%s/nowhere/c.svg'", d, d);

  /* Timing logs: header without a needed column, a bad counter, a bad sidecar. */
  tt_write("timing-rank0.csv", "timestamp,iteration,epoch,layer_name,operation,phase,"
                               "message_size_bytes,elapsed_ms,end_counter\n");
  tt_expect(2, "timing-rank0.csv:1: no column \"start_counter\" in the header", "stragglers '%s'",
            d);
  tt_expect(2, "timing-rank0.csv:1: no column \"start_counter\"", "summary '%s'", d);
  FILE *f = tt_open("timing-rank0.csv");
  fputs(tt_timing_header, f);
  tt_timing_row(f, "", "ALLREDUCE", 8, 10, 1000000, 1000010);
  fputs("2026-02-06T14:30:45.123456,1,0,,ALLREDUCE,dense,8,0.010,soon,1.000020\n", f);
  fclose(f);
  tt_expect(2, "timing-rank0.csv:3: column \"start_counter\": \"soon\" is not a number",
            "trace '%s' -o '%s/t.json'", d, d);
  f = tt_open("timing-rank0.csv");
  fputs(tt_timing_header, f);
  tt_timing_row(f, "", "ALLREDUCE", 8, 10, 1000000, 1000010);
  fputs("2026-02-06T14:30:45.123456,1,0,,ALLREDUCE,dense,-8,0.010,1.0,1.000020\n", f);
  fclose(f);
  tt_expect(2, "timing-rank0.csv:3: column \"message_size_bytes\": -8 is negative",
            "stragglers '%s'", d);
  f = tt_open("timing-rank0.csv");
  fputs(tt_timing_header, f);
  tt_timing_row(f, "", "ALLREDUCE", 8, 10, 1000000, 1000010);
  fclose(f);
  tt_write("timing-rank0.meta", "version=1\nthis line is wrong\n");
  tt_expect(2, "timing-rank0.meta:2: expected key=value", "stragglers '%s'", d);
  tt_write("timing-rank0.meta", "version=1\nrecords_dropped=many\n");
  tt_expect(2, "timing-rank0.meta:2: records_dropped: \"many\" is not a whole number",
            "summary '%s'", d);
  tt_write("timing-rank0.meta", "version=1\nclock_offset_s=1.5\n");
  tt_write("timing-rank0.categories.csv", "start_counter,operation,category\n1.0,X,y\n");
  tt_expect(2, "timing-rank0.categories.csv:1: no column \"end_counter\"",
            "trace '%s' -o '%s/t.json'", d, d);
  tt_write("timing-rank0.categories.csv", "start_counter,end_counter,operation,category\n");
  tt_expect(2, "cannot write", "trace '%s' -o '%s/nowhere/t.json'", d, d);
  tt_expect(0, "wrote 1 slice from 1 rank", "trace '%s' -o '%s/t.json'", d, d);
}

/* ---- collie-report bench: benchmark CSVs of several libraries, one panel per collective ---- */

/* The value on the dot at `bytes` in panel `coll`, series `impl`, or -1 when there is none. */
static double
tt_bench_dot(const char *svg, const char *coll, const char *impl, const char *bytes)
{
  char want[160];
  snprintf(want, sizeof(want), "<g class=\"panel\" data-collective=\"%s\">", coll);
  const char *panel = strstr(svg, want), *end = panel ? strstr(panel, "</g>") : NULL;
  if (!panel || !end) return -1;
  snprintf(want, sizeof(want), "data-impl=\"%s\"", impl);
  const char *series = strstr(panel, want);
  if (!series || series > end) return -1;
  const char *next = strstr(series + 1, "<path class=\"series\"");
  if (!next || next > end) next = end;
  snprintf(want, sizeof(want), "data-bytes=\"%s\" data-value=\"", bytes);
  const char *dot = strstr(series, want);
  return dot && dot < next ? atof(dot + strlen(want)) : -1;
}

TEST_IMPL(report_bench_svg)
{
  const char *d = test_dir();
  tt_write("collie.csv", "impl,collective,nranks,bytes,time_us,algbw_GBps,busbw_GBps,wrong\n"
                         "collie,allreduce,2,8,0.5,0.016,0.016,0\n"
                         "collie,allreduce,2,64,0.75,0.085,0.085,0\n"
                         "collie,allreduce,2,512,1.25,0.41,0.41,0\n"
                         "collie,broadcast,2,8,0.25,0.032,0.032,0\n"
                         "collie,broadcast,2,64,0.3,0.2,0.2,0\n"
                         "collie,barrier,2,0,0.4,0,0,0\n");
  /* The MPIs' "bcast", Gloo's "all_reduce" and a collective it lacks, a name to escape. */
  tt_write("mpi.csv", "impl,collective,nranks,bytes,time_us,algbw_GBps,busbw_GBps\n"
                      "openmpi,allreduce,2,8,1.5,0.005,0.005\n"
                      "openmpi,allreduce,2,64,2.5,0.0256,0.0256\n"
                      "openmpi,bcast,2,8,1.0,0.008,0.008\n"
                      "a<b,allreduce,2,64,9.5,0.0067,0.0067\n");
  tt_write("gloo.csv", "impl,collective,nranks,bytes,time_us,algbw_GBps,busbw_GBps\n"
                       "gloo,all_reduce,2,8,400.0,0.00002,0.00002\n"
                       "gloo,reduce_scatter,2,NA,unsupported,NA,NA\n");
  char svg[1200];
  snprintf(svg, sizeof(svg), "%s/bench.svg", d);
  tt_expect(0, "2 collectives, 4 libraries, 10 points, 2 ranks",
            "bench '%s/collie.csv' '%s/mpi.csv' "
            "'%s/gloo.csv' -o '%s'",
            d, d, d, svg);
  char *text = tt_slurp(svg, NULL);
  ASSERTF(tt_xml_balanced(text), "unbalanced SVG:\n%s", text);
  ASSERT(tt_count(text, "<g class=\"panel\"") == 2);
  /* allreduce: collie, openmpi, a<b, gloo; broadcast: collie, openmpi. */
  ASSERT(tt_count(text, "<path class=\"series\"") == 6);
  ASSERT(tt_count(text, "<circle class=\"point\"") == 10);
  ASSERT(tt_count(text, "<rect class=\"legend\"") == 0); /* lines, not boxes */
  ASSERT(strstr(text, "data-impl=\"a&lt;b\"") && strstr(text, ">a&lt;b</text>"));
  ASSERT(tt_bench_dot(text, "allreduce", "collie", "512") == 1.25);
  ASSERT(tt_bench_dot(text, "allreduce", "openmpi", "64") == 2.5);
  ASSERT(tt_bench_dot(text, "allreduce", "gloo", "8") == 400);
  ASSERT(tt_bench_dot(text, "broadcast", "openmpi", "8") == 1.0);
  ASSERT(tt_bench_dot(text, "broadcast", "collie", "512") == -1);
  ASSERT(!strstr(text, "barrier") && !strstr(text, "reduce_scatter"));
  ASSERT(strstr(text, ">Time per call, 2 ranks</text>"));
  free(text);

  /* Bus bandwidth instead, with a title of one's own. */
  tt_expect(0, "wrote", "bench '%s/collie.csv' --metric busbw --title 'A & B' -o '%s'", d, svg);
  text = tt_slurp(svg, NULL);
  ASSERTF(tt_xml_balanced(text), "unbalanced SVG:\n%s", text);
  ASSERT(tt_bench_dot(text, "allreduce", "collie", "512") == 0.41);
  ASSERT(strstr(text, ">A &amp; B</text>") && strstr(text, ">busbw (GB/s)</text>"));
  free(text);

  /* collie's lines come first (the same colour in every plot), whatever the files' order. */
  tt_expect(0, "wrote", "bench '%s/gloo.csv' '%s/collie.csv' -o '%s'", d, d, svg);
  text = tt_slurp(svg, NULL);
  const char *first_collie = strstr(text, "data-impl=\"collie\""),
             *first_gloo = strstr(text, "data-impl=\"gloo\"");
  ASSERT(first_collie && first_gloo && first_collie < first_gloo);
  free(text);

  /* One library over two transports (collie-bench's transport column): two lines. */
  tt_write("tcp.csv", "impl,collective,algorithm,transport,nranks,bytes,time_us,busbw_GBps\n"
                      "collie,allreduce,ring,tcp,2,8,12.5,0\n");
  tt_write("ofi.csv", "impl,collective,algorithm,transport,nranks,bytes,time_us,busbw_GBps\n"
                      "collie,allreduce,ring,ofi,2,8,11.5,0\n");
  tt_expect(0, "1 collective, 2 libraries", "bench '%s/tcp.csv' '%s/ofi.csv' -o '%s'", d, d, svg);
  text = tt_slurp(svg, NULL);
  ASSERT(tt_bench_dot(text, "allreduce", "collie (tcp)", "8") == 12.5);
  ASSERT(tt_bench_dot(text, "allreduce", "collie (ofi)", "8") == 11.5);
  free(text);

  /* Twelve libraries of one collective: the legend wraps into rows inside the picture. One
   * size, the largest an int64 holds: its axis stays within 2^0 .. 2^63 (UBSan checks the
   * labels' shifts). */
  FILE *many = tt_open("many.csv");
  fprintf(many, "impl,collective,nranks,bytes,time_us\n");
  for (int k = 1; k <= 12; k++)
    fprintf(many, "library-with-a-long-name-%d,allreduce,2,9223372036854775807,%d\n", k, k);
  fclose(many);
  tt_expect(0, "1 collective, 12 libraries", "bench '%s/many.csv' -o '%s'", d, svg);
  text = tt_slurp(svg, NULL);
  ASSERTF(tt_xml_balanced(text), "unbalanced SVG:\n%s", text);
  int width = 0;
  ASSERT(sscanf(strstr(text, "<svg "), "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\"",
                &width) == 1);
  for (int k = 1; k <= 12; k++) {
    char name[64];
    snprintf(name, sizeof(name), ">library-with-a-long-name-%d</text>", k);
    const char *end = strstr(text, name), *tag = end;
    ASSERTF(end, "no legend entry %d", k);
    while (tag > text && strncmp(tag, "<text x=\"", 9)) tag--;
    double x = atof(tag + 9);
    ASSERTF(x + 7.0 * (double)(strlen(name) - 8) <= width, "legend entry %d at x %g of %d", k, x,
            width);
  }
  ASSERT(tt_bench_dot(text, "allreduce", "library-with-a-long-name-3", "9223372036854775807") == 3);
  free(text);

  /* Several rank counts: one must be chosen, and then only its rows are drawn. */
  tt_write("np4.csv", "impl,collective,nranks,bytes,time_us,algbw_GBps,busbw_GBps\n"
                      "openmpi,allreduce,4,8,3.5,0.002,0.003\n");
  tt_expect(2, "np4.csv:2: rows of 2 and 4 ranks: choose one with --ranks",
            "bench '%s/collie.csv' '%s/np4.csv' -o '%s'", d, d, svg);
  tt_expect(0, "1 collective, 1 library, 1 point, 4 ranks",
            "bench '%s/collie.csv' '%s/np4.csv' --ranks 4 -o '%s'", d, d, svg);
  text = tt_slurp(svg, NULL);
  ASSERT(tt_bench_dot(text, "allreduce", "openmpi", "8") == 3.5 && !strstr(text, "collie"));
  free(text);
}

TEST_IMPL(report_bench_bad_input)
{
  const char *d = test_dir();
  tt_write("ok.csv", "impl,collective,nranks,bytes,time_us,busbw_GBps\ncollie,allreduce,2,8,1,0\n");
  tt_expect(2, "no CSV file given", "bench -o '%s/x.svg'", d);
  tt_expect(2, "-o FILE.svg is required", "bench '%s/ok.csv'", d);
  tt_expect(2, "-o needs a value", "bench '%s/ok.csv' -o", d);
  tt_expect(2, "unknown option '--frob'", "bench --frob '%s/ok.csv' -o '%s/x.svg'", d, d);
  tt_expect(2, "--metric 'speed': time or busbw", "bench '%s/ok.csv' --metric speed -o x", d);
  tt_expect(2, "--ranks 'two' is not a rank count", "bench '%s/ok.csv' --ranks two -o x", d);
  tt_expect(2, "no row of 4 ranks", "bench '%s/ok.csv' --ranks 4 -o '%s/x.svg'", d, d);
  tt_expect(2, "nowhere.csv", "bench '%s/nowhere.csv' -o '%s/x.svg'", d, d);
  tt_expect(2, "cannot write", "bench '%s/ok.csv' -o '%s/no/such/dir/x.svg'", d, d);
  tt_expect(0, "usage: collie-report bench CSV...", "bench --help");
  /* A missing column, a value that is no number, a row given twice, only unmeasured rows. */
  tt_write("bad.csv", "impl,collective,bytes,time_us\ncollie,allreduce,8,1\n");
  tt_expect(2, "bad.csv:1: no column \"nranks\"", "bench '%s/bad.csv' -o '%s/x.svg'", d, d);
  tt_write("bad.csv", "impl,collective,nranks,bytes,time_us\ncollie,allreduce,2,8,1\n"
                      "collie,allreduce,2,16,fast\n");
  tt_expect(2, "bad.csv:3: column \"time_us\": \"fast\" is not a number",
            "bench '%s/bad.csv' -o '%s/x.svg'", d, d);
  tt_write("bad.csv", "impl,collective,nranks,bytes,time_us\ncollie,allreduce,2,8,1\n");
  tt_expect(2, "ok.csv:2: a second row for collie allreduce at 8 bytes (the first: ",
            "bench '%s/bad.csv' '%s/ok.csv' -o '%s/x.svg'", d, d, d);
  tt_write("bad.csv", "impl,collective,nranks,bytes,time_us\ngloo,barrier,2,0,5\n"
                      "gloo,gather,2,NA,unsupported\n");
  tt_expect(2, "no row with a size to draw", "bench '%s/bad.csv' -o '%s/x.svg'", d, d);
}
