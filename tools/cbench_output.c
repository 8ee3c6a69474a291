/*
 * cbench_output.c - what collie-bench writes besides the picture: the text
 * table on stdout, the CSV that bench/compare.sh joins with the MPI anchors'
 * CSV, the seed profile file, and the progress line on a terminal.
 *
 * Each format is a contract with a reader elsewhere, so each is written in
 * one place. The table follows nccl-tests' columns (size, count, type,
 * redop, root, time, algbw, busbw, #wrong) plus the algorithm and the spread
 * of single iterations. The CSV extends the anchors'
 * (impl,collective,nranks,bytes,time_us,algbw_GBps,busbw_GBps) with the
 * algorithm, the transport, the element count and #wrong, and uses the
 * anchors' collective names and number formats so a join on (collective,
 * nranks, bytes) lines up. The profile reproduces the seed tool's file
 * byte for byte in layout (docs/collie-bench.md has the example); its MB are
 * MiB, as in the seed's own example, where 1,048,576 float32 are "4.00 MB".
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cbench.h"
#include "cbench_int.h"
#include "units.h"

/* ---- Text table ---- */

void
cb_table_header(FILE *f, int coll, int inplace)
{
  fprintf(f, "#\n# %s, %s\n", cb_coll_name(coll),
          coll == CB_BROADCAST || coll == CB_BARRIER || coll == CB_SENDRECV
              ? "(one buffer)"
              : (inplace ? "in place" : "out of place"));
  fprintf(f, "# %10s %12s %9s %6s %5s  %-21s %10s %8s %8s %7s %10s %10s %10s\n", "size", "count",
          "type", "redop", "root", "algorithm", "time", "algbw", "busbw", "#wrong", "min", "p50",
          "p99");
  fprintf(f, "# %10s %12s %9s %6s %5s  %-21s %10s %8s %8s %7s %10s %10s %10s\n", "(B)",
          "(elements)", "", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)");
}

void
cb_table_row(FILE *f, const struct cb_point *p, const struct cb_opts *o)
{
  char wrong[24];
  if (p->wrong < 0)
    snprintf(wrong, sizeof(wrong), "N/A");
  else
    snprintf(wrong, sizeof(wrong), "%ld", p->wrong);
  fprintf(f, "  %10zu %12zu %9s %6s %5d  %-21s %10.2f %8.2f %8.2f %7s %10.2f %10.2f %10.2f\n",
          p->shape.bytes, p->shape.count, collie_dtype_name(o->dtype),
          cb_coll_reduces(p->coll) ? collie_op_name(o->redop) : "none", p->root, p->algo_name,
          p->time_us, p->algbw, p->busbw, wrong, p->min_us, p->p50_us, p->p99_us);
  fflush(f);
}

/* ---- CSV ---- */

void
cb_csv_header(FILE *f)
{
  fputs("impl,collective,algorithm,transport,nranks,bytes,count,time_us,algbw_GBps,busbw_GBps,"
        "wrong\n",
        f);
}

void
cb_csv_row(FILE *f, const struct cb_point *p, const char *transport, int nranks)
{
  /* Names and precisions as ../shared/anchors/mpi_coll_perf.c prints them. */
  const char *name = p->coll == CB_BROADCAST ? "bcast" : cb_coll_name(p->coll);
  fprintf(f, "collie,%s,%s,%s,%d,%zu,%zu,%.3f,%.4f,%.4f,%ld\n", name, p->algo_name, transport,
          nranks, p->shape.bytes, p->shape.count, p->time_us, p->algbw, p->busbw, p->wrong);
  fflush(f);
}

/* ---- The seed profile ---- */

static const char *const out_profile_names[CB_NCOLL] = {
    "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce",   "AllToAll",
    "Gather",    "Scatter",   "Barrier",       "SendRecv",  "AllToAllv"};

/* 1048576 -> "1,048,576" */
void
cb_out_thousands(char *buf, size_t len, size_t v)
{
  char digits[32];
  int n = snprintf(digits, sizeof(digits), "%zu", v), o = 0;
  for (int i = 0; i < n && (size_t)o + 2 < len; i++) {
    if (i > 0 && (n - i) % 3 == 0) buf[o++] = ',';
    buf[o++] = digits[i];
  }
  buf[o] = '\0';
}

int
cb_profile_write(FILE *f, const struct cb_point *pts, int npts, int nranks, const char *transport,
                 collie_dtype_t dtype)
{
  static const char rule[] =
      "================================================================================";
  fprintf(f, "%s\nConfiguration: World Size=%d\nBackend: collie (%s)\n%s\n", rule, nranks,
          transport, rule);
  /* Several algorithms of one collective (--algo all) get their name added. */
  int multi = 0;
  for (int i = 0; i < npts; i++)
    for (int j = i + 1; j < npts; j++)
      if (pts[i].coll == pts[j].coll && pts[i].shape.count == pts[j].shape.count) multi = 1;
  for (int i = 0; i < npts; i++) {
    int seen = 0;
    for (int j = 0; j < i; j++)
      if (pts[j].shape.count == pts[i].shape.count) seen = 1;
    if (seen) continue;
    char num[40];
    cb_out_thousands(num, sizeof(num), pts[i].shape.count);
    fprintf(f, "\nTensor Size: %s elements (%.2f MB)\n", num,
            (double)pts[i].shape.count * (double)collie_dtype_size(dtype) / (1024.0 * 1024.0));
    for (int j = i; j < npts; j++) {
      const struct cb_point *p = &pts[j];
      if (p->shape.count != pts[i].shape.count) continue;
      char label[64];
      if (multi)
        snprintf(label, sizeof(label), "%s[%s]:", out_profile_names[p->coll], p->algo_name);
      else
        snprintf(label, sizeof(label), "%s:", out_profile_names[p->coll]);
      fprintf(f, "  %-15s%.3f ms | AlgBW: %.2f GB/s | BusBW: %.2f GB/s\n", label, p->time_us / 1e3,
              p->algbw, p->busbw);
    }
  }
  fflush(f);
  return ferror(f) ? -1 : 0;
}

void
cb_profile_path(char *buf, size_t len, const char *dir, int nranks, long long when)
{
  time_t t = (time_t)when;
  struct tm tm;
  char stamp[32] = "00000000_000000";
  if (localtime_r(&t, &tm)) strftime(stamp, sizeof(stamp), "%Y%m%d_%H%M%S", &tm);
  snprintf(buf, len, "%s%sprofile_collie_world%d_%s.txt", dir && *dir ? dir : "",
           dir && *dir && dir[strlen(dir) - 1] != '/' ? "/" : "", nranks, stamp);
}

/* ---- Progress ---- */

static int out_progress_width;

void
cb_progress(FILE *f, int k, int total, int coll, size_t bytes, const char *algo)
{
  char size[32];
  tool_bytes_label(size, sizeof(size), bytes);
  int w = fprintf(f, "\r[%d/%d] %s %s %s", k, total, cb_coll_name(coll), size, algo ? algo : "");
  /* Blank out the tail of a longer previous line. */
  if (w < out_progress_width) fprintf(f, "%*s", out_progress_width - w, "");
  if (w > out_progress_width) out_progress_width = w;
  fflush(f);
}

void
cb_progress_end(FILE *f)
{
  if (out_progress_width > 0) fprintf(f, "\r%*s\r", out_progress_width, "");
  out_progress_width = 0;
  fflush(f);
}
