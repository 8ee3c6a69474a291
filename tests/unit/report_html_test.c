/*
 * report_html_test.c - `collie-report html` as a black box: bad input gives
 * exit status 2 and a message naming what is wrong; the page embeds its data
 * as JSON that survives labels and column names with markup, quotes and
 * invalid UTF-8 in them (read back with the tool's own JSON reader); absent
 * inputs become sentences, big inputs are capped and the page says so. The
 * drawing itself is checked in a browser by tests/python/test_report_html.py.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runner.h"

#include "../../tools/report.h"

#define TH_BIN COLLIE_BUILD_DIR "/collie-report"

/* Runs `collie-report ARGS 2>&1`, checks the exit status and that the output
 * holds text; returns the output (caller frees). */
static char *
th_expect(int code, const char *text, const char *fmt, ...)
{
  char args[2048], cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof(args), fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof(cmd), "'%s' %s 2>&1", TH_BIN, args);
  char *out;
  int rc = test_shell(cmd, &out);
  ASSERTF(rc == code, "collie-report %s: exit %d, expected %d; output:\n%s", args, rc, code, out);
  ASSERTF(strstr(out, text) != NULL, "collie-report %s: output lacks \"%s\":\n%s", args, text, out);
  return out;
}

static void
th_write(const char *rel, const char *text)
{
  char path[1200];
  snprintf(path, sizeof(path), "%s/%s", test_dir(), rel);
  FILE *f = fopen(path, "w");
  ASSERTF(f != NULL, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

static size_t
th_count(const char *s, const char *what)
{
  size_t n = 0;
  for (const char *p = strstr(s, what); p; p = strstr(p + 1, what)) n++;
  return n;
}

/* The page's embedded data, parsed; fails the test unless the page is whole. */
static struct rj_val *
th_data(const char *page)
{
  /* Three scripts (the error sink, the data, the drawing): no label may close one early. */
  ASSERTF(th_count(page, "</script>") == 3, "%zu </script> in the page",
          th_count(page, "</script>"));
  ASSERT(strncmp(page, "<!DOCTYPE html>", 15) == 0 && strstr(page, "</html>\n"));
  ASSERT(strstr(page, "<pre id=\"collie-errors\"></pre>"));
  const char *tag = "<script type=\"application/json\" id=\"collie-data\">";
  const char *p = strstr(page, tag);
  ASSERT(p != NULL);
  p += strlen(tag);
  const char *end = strstr(p, "</script>");
  ASSERT(end != NULL);
  ASSERT(memchr(p, '<', (size_t)(end - p)) == NULL); /* every '<' of the data is escaped */
  char err[256];
  struct rj_val *v = rj_parse(p, (size_t)(end - p), err, sizeof(err));
  ASSERTF(v != NULL, "embedded JSON does not parse: %s", err);
  return v;
}

static const struct rj_val *
th_at(const struct rj_val *arr, size_t i)
{
  ASSERT(arr && arr->type == RJ_ARR && i < arr->n);
  return &arr->items[i];
}

static const char th_timing_header[] = "timestamp,iteration,epoch,layer_name,operation,phase,"
                                       "message_size_bytes,elapsed_ms,start_counter,end_counter\n";

TEST_IMPL(report_html_bad_input)
{
  const char *d = test_dir();
  free(th_expect(2, "cannot open directory", "html '%s/nowhere' -o '%s/r.html'", d, d));
  free(th_expect(2, "nothing to report: no comms.csv or flight-rank*.json in",
                 "html '%s' -o '%s/r.html'", d, d));
  free(th_expect(2, "-o FILE is required", "html '%s'", d));
  free(th_expect(2, "expected a directory", "html -o '%s/r.html'", d));
  free(th_expect(2, "unknown option '--csv'", "html '%s' --csv -o x", d));
  free(th_expect(2, "cannot open directory", "html '%s' --timing '%s/nowhere' -o x", d, d));
  free(th_expect(0, "usage: collie-report html DIR", "html --help"));
  free(th_expect(0, "html ", "--help"));
  struct stat st;
  char path[1200];
  snprintf(path, sizeof(path), "%s/r.html", d);
  ASSERT(stat(path, &st) != 0); /* nothing written on bad input */

  th_write("comms.csv", "step,epoch,bytes_total,t_total_ms\n1,0,5,1.0\n");
  free(th_expect(2, "cannot write", "html '%s' -o '%s/nowhere/r.html'", d, d));
  th_write("comms.csv", "step,epoch,bytes_total,t_total_ms\n1,0,5,fast\n");
  free(th_expect(2, "comms.csv:2: column \"t_total_ms\": \"fast\" is not a number",
                 "html '%s' -o '%s/r.html'", d, d));
  /* --timing: the timing logs elsewhere. */
  th_write("comms.csv", "step,epoch,bytes_total,t_total_ms\n1,0,5,1.0\n");
  char sub[1200];
  snprintf(sub, sizeof(sub), "%s/timing", d);
  ASSERT(mkdir(sub, 0755) == 0);
  char log[1024];
  snprintf(log, sizeof(log), "%s2026-02-06T14:30:45.123456,1,0,,BCAST,dense,8,0.5,1.0,1.0005\n",
           th_timing_header);
  th_write("timing/timing-rank0.csv", log);
  free(th_expect(0, "1 step from comms.csv, timing logs of 0 ranks", "html '%s' -o '%s/r.html'", d,
                 d));
  free(th_expect(0, "1 step from comms.csv, timing logs of 1 rank", "html '%s' --timing '%s' -o -",
                 d, sub));
  th_write("flight-rank0-00000000000000aa.json", "{\"version\": 1, \"rank\": ");
  free(th_expect(2, "flight-rank0-00000000000000aa.json", "html '%s' -o '%s/r.html'", d, d));
}

TEST_IMPL(report_html_escaping)
{
  /* A category column and a label that would end the script, open a comment,
   * break a string or are not UTF-8. */
  th_write("comms.csv", "step,epoch,bytes_total,t_total_ms,bytes_all_reduce,t_all_reduce_ms,"
                        "\"bytes_x</script><!--\"\"q\\\"\n"
                        "1,0,10,1.5,10,1.5,10\n");
  char log[2048];
  snprintf(log, sizeof(log),
           "%s2026-02-06T14:30:45.123456,1,0,\"</SCRIPT></script>\"\"a\\b\xff\",ALLREDUCE,dense,8,"
           "0.010,1.000000,1.000010\n",
           th_timing_header);
  th_write("timing-rank0.csv", log);
  /* -o -: the page on stdout, the note on stderr. */
  char cmd[4096], *out;
  snprintf(cmd, sizeof(cmd), "'%s' html '%s' -o - 2>&1 >'%s/stdout.html'", TH_BIN, test_dir(),
           test_dir());
  ASSERT(test_shell(cmd, &out) == 0);
  ASSERTF(strstr(out, "wrote -: 1 step from comms.csv, timing logs of 1 rank, 0 flight dumps"),
          "%s", out);
  free(out);
  char path[1200];
  snprintf(path, sizeof(path), "%s/stdout.html", test_dir());
  char *page = test_read_file(path, NULL);
  ASSERT(page != NULL);
  struct rj_val *v = th_data(page);
  const struct rj_val *cats = rj_get(rj_get(v, "comms"), "categories");
  ASSERT(cats && cats->n == 1);
  ASSERTF(strcmp(th_at(cats, 0)->str, "x</script><!--\"q\\") == 0, "%s", th_at(cats, 0)->str);
  const struct rj_val *rec =
      th_at(rj_get(th_at(rj_get(rj_get(v, "timing"), "ranks"), 0), "records"), 0);
  ASSERTF(strcmp(th_at(rec, 3)->str, "</SCRIPT></script>\"a\\b\xef\xbf\xbd") == 0, "%s",
          th_at(rec, 3)->str);
  ASSERT(strcmp(th_at(rec, 2)->str, "ALLREDUCE") == 0 && th_at(rec, 1)->num == 0.010);
  /* Nothing outside the page is referred to. */
  ASSERT(!strstr(page, "<script src") && !strstr(page, "<link") && !strstr(page, "url("));
  rj_free(v);
  free(page);
}

TEST_IMPL(report_html_absent_and_caps)
{
  /* Timing logs only, 2500 records: comms and dumps absent, the records capped. */
  char path[1200];
  snprintf(path, sizeof(path), "%s/timing-rank3.csv", test_dir());
  FILE *f = fopen(path, "w");
  ASSERT(f != NULL);
  fputs(th_timing_header, f);
  for (int k = 0; k < 2500; k++)
    fprintf(f, "2026-02-06T14:30:45.123456,1,0,,BCAST,dense,8,0.500,%d.000000,%d.000500\n", 10 + k,
            10 + k);
  fclose(f);
  char *out =
      th_expect(0, "timing logs of 1 rank", "html '%s' -o '%s/r.html'", test_dir(), test_dir());
  free(out);
  snprintf(path, sizeof(path), "%s/r.html", test_dir());
  char *page = test_read_file(path, NULL);
  ASSERT(page != NULL);
  struct rj_val *v = th_data(page);
  ASSERT(rj_get(v, "comms")->type == RJ_NULL && rj_get(v, "hang")->type == RJ_NULL);
  const struct rj_val *absent = rj_get(v, "absent");
  ASSERT(absent && absent->n == 2);
  ASSERT(strcmp(rj_get(th_at(absent, 0), "what")->str, "comms") == 0);
  ASSERT(strcmp(rj_get(th_at(absent, 1), "what")->str, "hang") == 0);
  ASSERT(strstr(rj_get(th_at(absent, 1), "text")->str, "kill -USR1"));
  const struct rj_val *r = th_at(rj_get(rj_get(v, "timing"), "ranks"), 0);
  ASSERT(rj_get(r, "rank")->i == 3 && rj_get(r, "rows")->i == 2500);
  ASSERT(rj_get(r, "shown")->i == 2000 && rj_get(r, "records")->n == 2000);
  ASSERT(rj_get(th_at(rj_get(r, "ops"), 0), "n")->i == 2500);
  rj_free(v);
  free(page);

  /* 64 ranks of 2500 records: each keeps its share of 100,000 (1562), not 2000, so that the
   * page stays one a browser opens; counts stay whole. */
  char tdir[1100];
  snprintf(tdir, sizeof(tdir), "%s/many", test_dir());
  ASSERT(mkdir(tdir, 0755) == 0);
  for (int rank = 0; rank < 64; rank++) {
    snprintf(path, sizeof(path), "%s/timing-rank%d.csv", tdir, rank);
    f = fopen(path, "w");
    ASSERT(f != NULL);
    fputs(th_timing_header, f);
    for (int k = 0; k < 2500; k++)
      fprintf(f, "2026-02-06T14:30:45.123456,1,0,,BCAST,dense,8,0.500,%d.000000,%d.000500\n",
              10 + k, 10 + k);
    fclose(f);
  }
  free(th_expect(0, "timing logs of 64 ranks", "html '%s' -o '%s/m.html'", tdir, test_dir()));
  snprintf(path, sizeof(path), "%s/m.html", test_dir());
  page = test_read_file(path, NULL);
  ASSERT(page != NULL);
  v = th_data(page);
  const struct rj_val *t = rj_get(v, "timing");
  ASSERT(rj_get(t, "cap")->i == 1562 && rj_get(t, "ranks")->n == 64);
  r = th_at(rj_get(t, "ranks"), 63);
  ASSERT(rj_get(r, "rows")->i == 2500 && rj_get(r, "shown")->i == 1562 &&
         rj_get(r, "records")->n == 1562);
  rj_free(v);
  free(page);

  /* 2500 steps: averaged in groups of 3 (834 entries, the last of one step). */
  snprintf(path, sizeof(path), "%s/comms.csv", test_dir());
  f = fopen(path, "w");
  ASSERT(f != NULL);
  fputs("step,epoch,bytes_total,t_total_ms,bytes_other\n", f);
  for (int s = 1; s <= 2500; s++) fprintf(f, "%d,0,%d,1.0,%d\n", s, 3 * s, 3 * s);
  fclose(f);
  free(th_expect(0, "2500 steps from comms.csv", "html '%s' -o '%s/r.html'", test_dir(),
                 test_dir()));
  snprintf(path, sizeof(path), "%s/r.html", test_dir());
  page = test_read_file(path, NULL);
  ASSERT(page != NULL);
  v = th_data(page);
  const struct rj_val *c = rj_get(v, "comms");
  ASSERT(rj_get(c, "nrows")->i == 2500 && rj_get(c, "group")->i == 3);
  const struct rj_val *steps = rj_get(c, "steps");
  ASSERT(steps->n == 834);
  ASSERT(rj_get(th_at(steps, 1), "step")->i == 4 && rj_get(th_at(steps, 1), "n")->i == 3);
  ASSERT(rj_get(th_at(steps, 1), "bytes_total")->num == 15.0); /* (12 + 15 + 18) / 3 */
  ASSERT(rj_get(th_at(steps, 833), "n")->i == 1);
  /* The summary's totals are over every step. */
  ASSERT(rj_get(rj_get(c, "summary"), "bytes_total")->num == 3.0 * 2500 * 2501 / 2);
  rj_free(v);
  free(page);
}
