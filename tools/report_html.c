/*
 * report_html.c - `collie-report html DIR -o report.html`: everything the
 * other commands say about a job, in one page a person opens in a browser.
 *
 * The page is one self-contained file: no network, no external script, style,
 * font or image, so it can be mailed, attached to a ticket or opened on a
 * machine without access to anything. The data goes in as JSON inside
 * <script type="application/json" id="collie-data">, and a small inline
 * script (report_html_assets.c) draws the figures from it. Keeping the data
 * separate from the drawing means a script can read the numbers back out of
 * the page, and the figures stay consistent with the tables.
 *
 * The numbers are those of the other commands, computed by the same code:
 * comms.csv's sums and slowest steps (rsum_columns, rsum_slowest: summary),
 * the arrivals at collectives (rs_compute: stragglers), the verdict on the
 * flight-recorder dumps (report_hang_verdict: hang, word for word).
 *
 * Whatever is absent (no timing logs, no dumps) becomes a sentence on the
 * page saying how to get it; only no input at all is an error. A hang found
 * in the dumps is shown, not reported by the exit status: the page was
 * written, which is what the command was asked to do.
 *
 * Big jobs: beyond HTML_MAX_STEPS steps, consecutive steps are averaged in
 * equal groups (as plot does), and each rank's timeline holds its first
 * HTML_MAX_RECORDS records, fewer when the ranks are so many that together
 * they would pass HTML_MAX_TOTAL_RECORDS; the page says so where it happens. Counts and
 * totals are always over every row.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define HTML_MAX_STEPS 1000
#define HTML_MAX_RECORDS 2000
#define HTML_MAX_TOTAL_RECORDS 100000 /* over all ranks: a rank keeps its share */
#define HTML_MIN_RECORDS 50           /* ... but never fewer */

void
report_html_usage(void)
{
  printf("usage: collie-report html DIR [--timing DIR2] -o report.html\n"
         "  Writes one self-contained HTML page (no network, data embedded as JSON) with\n"
         "  the job's telemetry: the summary tables and, per step, the bytes of each\n"
         "  payload category and the time of each collective (DIR/comms.csv); a timeline\n"
         "  per rank and the ranks that arrive last at collectives (timing-rank*.csv, in\n"
         "  DIR or DIR2); the hang verdict (DIR/flight-rank*.json). Absent files are named\n"
         "  on the page. Beyond %d steps consecutive steps are averaged; a rank's\n"
         "  timeline holds its first %d records (its share of %d when there are many\n"
         "  ranks). -o - writes to stdout.\n"
         "  Exit status: 0 written (also when the dumps show a hang), 2 bad usage, no\n"
         "  input at all, unreadable input or unwritable output.\n",
         HTML_MAX_STEPS, HTML_MAX_RECORDS, HTML_MAX_TOTAL_RECORDS);
}

/* A JSON number: integers exactly, others with enough digits to read back. */
static void
html_num(FILE *f, double v)
{
  if (v != v || v - v != 0) { /* NaN or infinite: not JSON */
    fputs("null", f);
    return;
  }
  fprintf(f, "%.15g", v);
}

/* ,"key":"value" or "key":"value" (first). */
static void
html_kstr(FILE *f, int first, const char *key, const char *val)
{
  fprintf(f, "%s\"%s\":", first ? "" : ",", key);
  rt_json_string(f, val);
}

static void
html_knum(FILE *f, const char *key, double v)
{
  fprintf(f, ",\"%s\":", key);
  html_num(f, v);
}

/* The mean of comms.csv's column col over the rows [lo, hi). */
static double
html_mean(const struct rt_comms *c, size_t lo, size_t hi, int col)
{
  double s = 0;
  for (size_t i = lo; i < hi; i++) s += c->v[i * (size_t)c->tab.ncols + (size_t)col];
  return s / (double)(hi - lo);
}

/* comms.csv: the steps (grouped beyond HTML_MAX_STEPS) and the summary sums. */
static int
html_comms(FILE *f, const struct rt_comms *c)
{
  const struct rc_table *t = &c->tab;
  struct rsum_col *colls = NULL, *cats = NULL;
  int ncoll = 0, ncat = 0;
  if (rsum_columns(c, &colls, &ncoll, &cats, &ncat) != 0) {
    free(colls);
    free(cats);
    return -1;
  }
  size_t n = t->nrows, g = (n + HTML_MAX_STEPS - 1) / HTML_MAX_STEPS;
  if (g < 1) g = 1;
  size_t nc = (size_t)t->ncols;
  fputs("{", f);
  html_kstr(f, 1, "path", t->path);
  fprintf(f, ",\"nrows\":%zu,\"group\":%zu,\"categories\":[", n, g);
  for (int k = 0; k < ncat; k++) {
    if (k) fputc(',', f);
    rt_json_string(f, cats[k].name);
  }
  fputs("],\"collectives\":[", f);
  for (int k = 0; k < ncoll; k++) {
    if (k) fputc(',', f);
    rt_json_string(f, colls[k].name);
  }
  /* One entry per group of g steps: the means of its steps (g == 1: the step). */
  fputs("],\"steps\":[", f);
  for (size_t lo = 0; lo < n; lo += g) {
    size_t hi = lo + g < n ? lo + g : n;
    fprintf(f, "%s{\"step\":", lo ? "," : "");
    html_num(f, c->v[lo * nc + (size_t)c->c_step]);
    html_knum(f, "epoch", c->v[lo * nc + (size_t)c->c_epoch]);
    fprintf(f, ",\"n\":%zu", hi - lo);
    html_knum(f, "bytes_total", html_mean(c, lo, hi, c->c_bytes_total));
    html_knum(f, "t_total_ms", html_mean(c, lo, hi, c->c_t_total));
    fputs(",\"cat\":[", f);
    for (int k = 0; k < ncat; k++) {
      if (k) fputc(',', f);
      html_num(f, html_mean(c, lo, hi, cats[k].c_bytes));
    }
    fputs("],\"bytes\":[", f);
    for (int k = 0; k < ncoll; k++) {
      if (k) fputc(',', f);
      html_num(f, html_mean(c, lo, hi, colls[k].c_bytes));
    }
    fputs("],\"ms\":[", f);
    for (int k = 0; k < ncoll; k++) {
      if (k) fputc(',', f);
      html_num(f, html_mean(c, lo, hi, colls[k].c_t));
    }
    fputs("]}", f);
  }
  /* The summary's tables: totals over every step. */
  double tot_bytes = 0, tot_ms = 0;
  for (size_t i = 0; i < n; i++) {
    tot_bytes += c->v[i * nc + (size_t)c->c_bytes_total];
    tot_ms += c->v[i * nc + (size_t)c->c_t_total];
  }
  fputs("],\"summary\":{\"collectives\":[", f);
  for (int k = 0; k < ncoll; k++) {
    fprintf(f, "%s{", k ? "," : "");
    html_kstr(f, 1, "name", colls[k].name);
    html_knum(f, "bytes", colls[k].bytes);
    html_knum(f, "ms", colls[k].ms);
    fputs("}", f);
  }
  fputs("],\"categories\":[", f);
  for (int k = 0; k < ncat; k++) {
    fprintf(f, "%s{", k ? "," : "");
    html_kstr(f, 1, "name", cats[k].name);
    html_knum(f, "bytes", cats[k].bytes);
    fputs("}", f);
  }
  fputs("],\"bytes_total\":", f);
  html_num(f, tot_bytes);
  html_knum(f, "t_total_ms", tot_ms);
  size_t top[5];
  int ntop = rsum_slowest(c, top, 5);
  fputs(",\"slowest\":[", f);
  for (int k = 0; k < ntop; k++) {
    const double *row = &c->v[top[k] * nc];
    fprintf(f, "%s{\"step\":", k ? "," : "");
    html_num(f, row[c->c_step]);
    html_knum(f, "epoch", row[c->c_epoch]);
    html_knum(f, "t_total_ms", row[c->c_t_total]);
    html_knum(f, "bytes_total", row[c->c_bytes_total]);
    fputs("}", f);
  }
  fputs("]}}", f);
  free(colls);
  free(cats);
  return 0;
}

/* Per operation of one rank: how many rows and their milliseconds. */
struct html_op {
  const char *op;
  size_t n;
  double ms;
};

/* The timing logs: per rank its counts and first records; the arrivals. */
static int
html_timing(FILE *f, const struct rt_data *d)
{
  struct rs_result st;
  if (rs_compute(d, &st) != 0) return -1;
  /* Time zero: the earliest start of any rank, on the clock the trace uses. */
  int64_t t0 = 0;
  int any = 0;
  for (int i = 0; i < d->nranks; i++) {
    const struct rt_rank *r = &d->ranks[i];
    for (size_t k = 0; k < r->nrows; k++) {
      int64_t s = r->rows[k].start_us + (r->has_offset ? r->offset_us : 0);
      if (!any || s < t0) t0 = s;
      any = 1;
    }
  }
  fputs("{", f);
  html_kstr(f, 1, "dir", d->timing_dir);
  /* A rank's share of the page's records: HTML_MAX_RECORDS, less when many ranks would make
   * the page too large for a browser (256 ranks x 2000 records drew 512k rectangles, 22 MB). */
  size_t cap = HTML_MAX_RECORDS;
  if (d->nranks > 0 && (size_t)HTML_MAX_TOTAL_RECORDS / (size_t)d->nranks < cap)
    cap = (size_t)HTML_MAX_TOTAL_RECORDS / (size_t)d->nranks;
  if (cap < HTML_MIN_RECORDS) cap = HTML_MIN_RECORDS;
  fprintf(f, ",\"cap\":%zu,\"ranks\":[", cap);
  for (int i = 0; i < d->nranks; i++) {
    const struct rt_rank *r = &d->ranks[i];
    int64_t off = r->has_offset ? r->offset_us : 0;
    struct html_op *ops = calloc(r->nrows + 1, sizeof(*ops));
    if (!ops) {
      rs_free(&st);
      return -1;
    }
    size_t nops = 0;
    double total = 0;
    for (size_t k = 0; k < r->nrows; k++) {
      const struct rt_row *row = &r->rows[k];
      size_t j = 0;
      while (j < nops && strcmp(ops[j].op, row->op) != 0) j++;
      if (j == nops) ops[nops++].op = row->op;
      ops[j].n++;
      ops[j].ms += row->elapsed_ms;
      total += row->elapsed_ms;
    }
    fprintf(f, "%s{\"rank\":%d", i ? "," : "", r->rank);
    html_kstr(f, 0, "host", r->host);
    fprintf(f, ",\"rows\":%zu,\"dropped\":%lld,\"clock_offset\":%s", r->nrows,
            (long long)r->dropped, r->has_offset ? "true" : "false");
    html_knum(f, "total_ms", total);
    fputs(",\"ops\":[", f);
    for (size_t j = 0; j < nops; j++) {
      fprintf(f, "%s{", j ? "," : "");
      html_kstr(f, 1, "op", ops[j].op);
      fprintf(f, ",\"n\":%zu", ops[j].n);
      html_knum(f, "ms", ops[j].ms);
      fputs("}", f);
    }
    free(ops);
    /* Records: [start ms after time zero, elapsed ms, operation, label, category]. */
    size_t shown = r->nrows < cap ? r->nrows : cap;
    fprintf(f, "],\"shown\":%zu,\"records\":[", shown);
    for (size_t k = 0; k < shown; k++) {
      const struct rt_row *row = &r->rows[k];
      fprintf(f, "%s[", k ? "," : "");
      html_num(f, (double)(row->start_us + off - t0) / 1000.0);
      fputc(',', f);
      html_num(f, row->elapsed_ms);
      fputc(',', f);
      rt_json_string(f, row->op);
      fputc(',', f);
      rt_json_string(f, row->label);
      fputc(',', f);
      rt_json_string(f, rt_category(r, row));
      fputs("]", f);
    }
    fputs("]}", f);
  }
  fprintf(f, "],\"stragglers\":{\"matched\":%zu,\"by_host\":%s", st.matched,
          st.by_host ? "true" : "false");
  html_kstr(f, 0, "diverge", st.diverge);
  fputs(",\"ranks\":[", f);
  for (int i = 0; i < st.nranks; i++) {
    const struct rs_rank *x = &st.ranks[i];
    fprintf(f, "%s{\"rank\":%d,\"group\":%d,\"group_size\":%d,\"last\":%zu", i ? "," : "", x->rank,
            x->group, x->group_size, x->last);
    html_knum(f, "mean_late_ms", x->mean_late_ms);
    fputs(",\"host\":", f);
    rt_json_string(f, d->ranks[i].host);
    fputs("}", f);
  }
  fputs("]}}", f);
  rs_free(&st);
  return 0;
}

/* The dumps: the verdict's lines, as `hang` prints them, and each dump's gist. */
static int
html_hang(FILE *f, const char *dir, const struct rd_dump *dumps, int n)
{
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  if (!m) return -1;
  int found = report_hang_verdict(m, dumps, n);
  if (fclose(m) != 0) {
    free(text);
    return -1;
  }
  fputs("{", f);
  html_kstr(f, 1, "dir", dir);
  fprintf(f, ",\"found\":%s,\"verdict\":[", found ? "true" : "false");
  int first = 1;
  for (char *line = text; line && *line;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    if (!first) fputc(',', f);
    rt_json_string(f, line);
    first = 0;
    line = nl ? nl + 1 : NULL;
  }
  free(text);
  fputs("],\"dumps\":[", f);
  for (int i = 0; i < n; i++) {
    const struct rd_dump *x = &dumps[i];
    fprintf(f, "%s{\"rank\":%d,\"size\":%d,\"ops\":%d", i ? "," : "", x->rank, x->size, x->nops);
    html_kstr(f, 0, "comm", x->comm);
    html_kstr(f, 0, "reason", x->reason);
    html_kstr(f, 0, "time", x->time);
    html_kstr(f, 0, "error", x->error);
    if (x->nops > 0) {
      const struct rd_op *op = &x->ops[x->nops - 1];
      fprintf(f, ",\"last\":{\"seq\":%lld", (long long)op->seq);
      html_kstr(f, 0, "kind", op->kind);
      html_kstr(f, 0, "state", rd_state_name(op->state));
      fprintf(f, ",\"bytes\":%llu}", (unsigned long long)op->bytes);
    } else {
      fputs(",\"last\":null", f);
    }
    fputs("}", f);
  }
  fputs("]}", f);
  return 0;
}

/* Whether dir holds a flight-rank*.json (rd_load_dir calls none an error; here it is news). */
static int
html_has_dumps(const char *dir)
{
  DIR *dh = opendir(dir);
  if (!dh) return 0;
  struct dirent *e;
  int found = 0;
  while (!found && (e = readdir(dh)) != NULL) {
    size_t len = strlen(e->d_name);
    found = strncmp(e->d_name, "flight-rank", 11) == 0 && len > 16 &&
            strcmp(e->d_name + len - 5, ".json") == 0;
  }
  closedir(dh);
  return found;
}

/* One {"what": ..., "text": ...} of the absent list. */
static void
html_absent(FILE *f, int *first, const char *what, const char *text)
{
  fputs(*first ? "{" : ",{", f);
  html_kstr(f, 1, "what", what);
  html_kstr(f, 0, "text", text);
  fputs("}", f);
  *first = 0;
}

/* The whole data object; the absent parts are null, each with a sentence. */
static int
html_data(FILE *f, const struct rt_data *d, const struct rd_dump *dumps, int ndumps)
{
  fputs("{\"version\":1", f);
  html_kstr(f, 0, "dir", d->dir);
  fputs(",\"comms\":", f);
  if (d->has_comms) {
    if (html_comms(f, &d->comms) != 0) return -1;
  } else {
    fputs("null", f);
  }
  fputs(",\"timing\":", f);
  if (d->nranks > 0) {
    if (html_timing(f, d) != 0) return -1;
  } else {
    fputs("null", f);
  }
  fputs(",\"hang\":", f);
  if (ndumps > 0) {
    if (html_hang(f, d->dir, dumps, ndumps) != 0) return -1;
  } else {
    fputs("null", f);
  }
  /* What is missing and how a job makes it: the page shows these sentences. */
  char msg[3000];
  int first = 1;
  fputs(",\"absent\":[", f);
  if (!d->has_comms) {
    snprintf(msg, sizeof(msg),
             "No comms.csv in %s: rank 0 writes it to COLLIE_LOG_DIR when the program marks its "
             "steps (collie_step_begin/end; comm.step() in Python) and COLLIE_COMMS_LOG is 1.",
             d->dir);
    html_absent(f, &first, "comms", msg);
  }
  if (d->nranks == 0) {
    snprintf(msg, sizeof(msg),
             "No timing-rank*.csv in %s: run the job with COLLIE_TIMING_LOG=DIR (every rank logs "
             "its operations there) and pass --timing DIR when DIR is not %s.",
             d->timing_dir, d->dir);
    html_absent(f, &first, "timing", msg);
  }
  if (ndumps == 0) {
    snprintf(msg, sizeof(msg),
             "No flight-rank*.json in %s: every rank writes a flight-recorder dump to "
             "COLLIE_LOG_DIR when an operation times out or fails, on SIGUSR1 (kill -USR1 PID) "
             "or when the program calls collie_flight_dump.",
             d->dir);
    html_absent(f, &first, "hang", msg);
  }
  fputs("]}", f);
  return ferror(f) ? -1 : 0;
}

/* Copies the JSON text into the page. Inside <script> the HTML parser looks
 * for "</script" and "<!--" before JSON.parse sees anything, so every '<' is
 * written as \u003c: valid JSON (it only occurs inside strings) that no label
 * can turn into markup. */
static void
html_embed(FILE *f, const char *json, size_t len)
{
  for (size_t i = 0; i < len; i++) {
    if (json[i] == '<')
      fputs("\\u003c", f);
    else
      fputc(json[i], f);
  }
}

/* The page: styles, the data, an error sink, then the script that draws. */
static void
html_page(FILE *f, const char *json, size_t len)
{
  fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        "<title>collie-report</title>\n<style>\n",
        f);
  fputs(report_html_css, f);
  /* The error sink first, so a failure anywhere below shows on the page. */
  fputs("</style>\n<script>\n", f);
  fputs(report_html_onerror_js, f);
  fputs("</script>\n</head>\n<body>\n<pre id=\"collie-errors\"></pre>\n"
        "<main id=\"collie-report\"><noscript>This report draws its figures with JavaScript; the "
        "data is in the page source.</noscript></main>\n"
        "<script type=\"application/json\" id=\"collie-data\">",
        f);
  html_embed(f, json, len);
  fputs("</script>\n<script>\n", f);
  fputs(report_html_js, f);
  fputs("</script>\n</body>\n</html>\n", f);
}

int
report_html(int argc, char **argv)
{
  struct rt_args a;
  struct rt_data d;
  int start = rt_start(argc, argv, "html", RT_ARG_OUT, report_html_usage,
                       RT_COMMS | RT_TIMING | RT_CATS, 0, &a, &d);
  if (start >= 0) return start;
  struct rd_dump *dumps = NULL;
  int ndumps = 0, rc = REPORT_BAD_INPUT;
  char *json = NULL;
  size_t len = 0;
  FILE *m = NULL, *f = NULL;
  if (html_has_dumps(d.dir)) {
    char err[1600];
    if (rd_load_dir(d.dir, &dumps, &ndumps, err, sizeof(err)) != 0) {
      fprintf(stderr, "collie-report html: %s\n", err);
      goto out;
    }
  }
  if (!d.has_comms && d.nranks == 0 && ndumps == 0) {
    fprintf(stderr,
            "collie-report html: nothing to report: no comms.csv or flight-rank*.json in %s, no "
            "timing-rank*.csv in %s\n",
            d.dir, d.timing_dir);
    goto out;
  }
  m = open_memstream(&json, &len);
  if (!m || html_data(m, &d, dumps, ndumps) != 0) {
    fprintf(stderr, "collie-report html: out of memory\n");
    goto out;
  }
  if (fclose(m) != 0) {
    m = NULL;
    fprintf(stderr, "collie-report html: out of memory\n");
    goto out;
  }
  m = NULL;
  int to_stdout = strcmp(a.out, "-") == 0;
  f = to_stdout ? stdout : fopen(a.out, "w");
  if (!f) {
    fprintf(stderr, "collie-report html: cannot write %s: %s\n", a.out, strerror(errno));
    goto out;
  }
  html_page(f, json, len);
  int bad = ferror(f);
  if (to_stdout ? fflush(f) != 0 : fclose(f) != 0) bad = 1;
  f = NULL;
  if (bad) {
    fprintf(stderr, "collie-report html: writing %s failed: %s\n", a.out, strerror(errno));
    goto out;
  }
  fprintf(to_stdout ? stderr : stdout,
          "wrote %s: %zu step%s from comms.csv, timing logs of %d rank%s, %d flight dump%s\n",
          a.out, d.has_comms ? d.comms.tab.nrows : 0,
          d.has_comms && d.comms.tab.nrows == 1 ? "" : "s", d.nranks, d.nranks == 1 ? "" : "s",
          ndumps, ndumps == 1 ? "" : "s");
  rc = REPORT_OK;
out:
  if (m) fclose(m);
  free(json);
  if (dumps) rd_free(dumps, ndumps);
  rt_free(&d);
  return rc;
}
