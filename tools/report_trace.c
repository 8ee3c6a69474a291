/*
 * report_trace.c - `collie-report trace DIR -o trace.json`: the timing logs
 * of every rank as one Chrome trace (Trace Event Format JSON), which
 * ui.perfetto.dev and chrome://tracing open as a timeline: one process per
 * rank, one slice per operation.
 *
 * Why a trace: a table says that rank 3 is late on average; a timeline shows
 * that it is late only after every checkpoint, or that its allreduces overlap
 * a user-timed copy. Collie's operations go on thread 0 of their rank and
 * user-timed regions (collie_timing_record) on thread 1, so the two never
 * stack into each other.
 *
 * Time: ts = start_counter + clock_offset_s (from the .meta), which is Unix
 * time, so ranks on different hosts line up as well as their wall clocks do;
 * the smallest ts is subtracted so the trace starts at 0. Without a .meta the
 * rank's start_counter is used as it is (a note says so: such ranks line up
 * only with ranks of the same host). All arithmetic is in whole microseconds,
 * the unit of the format.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

void
report_trace_usage(void)
{
  printf("usage: collie-report trace DIR [--timing DIR2] -o trace.json\n"
         "  Writes the timing logs (timing-rank*.csv in DIR or DIR2) as a Chrome trace for\n"
         "  ui.perfetto.dev or chrome://tracing: one process per rank, one slice per\n"
         "  operation (name = operation, category from timing-rank*.categories.csv, args:\n"
         "  size, label, phase, iteration, epoch, category). -o - writes to stdout.\n"
         "  Exit status: 0 done, 2 bad usage, unreadable input or unwritable output.\n");
}

static void
trace_meta(FILE *f, int *first, int pid, int tid, const char *name, const char *key,
           const char *sval, long long ival)
{
  fprintf(f, "%s\n{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"%s\":",
          *first ? "" : ",", name, pid, tid, key);
  if (sval)
    rt_json_string(f, sval);
  else
    fprintf(f, "%lld", ival);
  fputs("}}", f);
  *first = 0;
}

/* Writes the whole trace to f; returns the number of slices. */
static size_t
trace_write(FILE *f, const struct rt_data *d, int64_t t0)
{
  size_t slices = 0;
  int first = 1;
  fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", f);
  for (int i = 0; i < d->nranks; i++) {
    const struct rt_rank *r = &d->ranks[i];
    char name[400];
    if (r->host[0])
      snprintf(name, sizeof(name), "rank %d (%s)", r->rank, r->host);
    else
      snprintf(name, sizeof(name), "rank %d", r->rank);
    trace_meta(f, &first, r->rank, 0, "process_name", "name", name, 0);
    trace_meta(f, &first, r->rank, 0, "process_sort_index", "sort_index", NULL, r->rank);
    trace_meta(f, &first, r->rank, 0, "thread_name", "name", "collie", 0);
    trace_meta(f, &first, r->rank, 1, "thread_name", "name", "user", 0);
  }
  for (int i = 0; i < d->nranks; i++) {
    const struct rt_rank *r = &d->ranks[i];
    int64_t off = r->has_offset ? r->offset_us : 0;
    for (size_t k = 0; k < r->nrows; k++) {
      const struct rt_row *row = &r->rows[k];
      const char *cat = rt_category(r, row);
      int64_t dur = row->end_us - row->start_us;
      if (dur < 0) dur = 0;
      fprintf(f, "%s\n{\"name\":", first ? "" : ",");
      first = 0;
      rt_json_string(f, row->op);
      fputs(",\"cat\":", f);
      rt_json_string(f, cat);
      fprintf(
          f,
          ",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%lld,\"dur\":%lld,\"args\":{\"size\":%llu,"
          "\"label\":",
          r->rank, rt_is_collie_op(row->op) ? 0 : 1, (long long)(row->start_us + off - t0),
          (long long)dur, (unsigned long long)row->size);
      rt_json_string(f, row->label);
      fputs(",\"phase\":", f);
      rt_json_string(f, row->phase);
      fprintf(f, ",\"iteration\":%lld,\"epoch\":%lld,\"category\":", (long long)row->iteration,
              (long long)row->epoch);
      rt_json_string(f, cat);
      fputs("}}", f);
      slices++;
    }
  }
  fputs("\n]}\n", f);
  return slices;
}

int
report_trace(int argc, char **argv)
{
  struct rt_args a;
  struct rt_data d;
  int start = rt_start(argc, argv, "trace", RT_ARG_OUT, report_trace_usage, RT_TIMING | RT_CATS,
                       RT_TIMING, &a, &d);
  if (start >= 0) return start;
  int64_t t0 = INT64_MAX;
  int without = 0, with = 0;
  for (int i = 0; i < d.nranks; i++) {
    const struct rt_rank *r = &d.ranks[i];
    if (r->has_offset)
      with++;
    else
      without++;
    for (size_t k = 0; k < r->nrows; k++) {
      int64_t ts = r->rows[k].start_us + (r->has_offset ? r->offset_us : 0);
      if (ts < t0) t0 = ts;
    }
  }
  if (t0 == INT64_MAX) t0 = 0;
  int to_stdout = strcmp(a.out, "-") == 0;
  FILE *f = to_stdout ? stdout : fopen(a.out, "w");
  if (!f) {
    fprintf(stderr, "collie-report trace: cannot write %s: %s\n", a.out, strerror(errno));
    rt_free(&d);
    return REPORT_BAD_INPUT;
  }
  size_t slices = trace_write(f, &d, t0);
  int bad = ferror(f);
  if (to_stdout ? fflush(f) != 0 : fclose(f) != 0) bad = 1;
  if (bad) {
    fprintf(stderr, "collie-report trace: writing %s failed: %s\n", a.out, strerror(errno));
    rt_free(&d);
    return REPORT_BAD_INPUT;
  }
  FILE *msg = to_stdout ? stderr : stdout;
  if (with && without)
    fprintf(msg,
            "note: %d rank%s without a clock_offset_s (.meta) placed by start_counter alone: "
            "they do not line up with the others\n",
            without, without == 1 ? "" : "s");
  fprintf(msg, "wrote %zu slice%s from %d rank%s to %s\n", slices, slices == 1 ? "" : "s", d.nranks,
          d.nranks == 1 ? "" : "s", a.out);
  rt_free(&d);
  return REPORT_OK;
}
