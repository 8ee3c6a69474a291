/*
 * report_bench.c - `collie-report bench CSV... -o FILE.svg`: benchmark results
 * of several libraries in one picture, so that "how does collie compare" is
 * answered by looking rather than by reading joined tables.
 *
 * It reads the columns that collie-bench's --csv and the MPI and Gloo anchors
 * (bench/compare.sh, ../shared/anchors) all write: impl, collective, nranks,
 * bytes, time_us and busbw_GBps. Other columns are ignored, but for
 * collie-bench's transport, which names its lines ("collie (ofi)" and
 * "collie (tcp)": one library over two transports is two lines). One panel
 * per collective, laid out in a grid; in each, the size in bytes on a log2 x
 * axis and the time per call (or the bus bandwidth, --metric busbw) on a
 * log10 y axis, one line per library in the same colour in every panel, and
 * one legend above them all. A ratio between two libraries is the vertical
 * gap between their lines, the same everywhere on the log scale.
 *
 * Collective names are matched without their underscores, so Gloo's
 * "all_reduce" and the MPIs' "allreduce" share a panel (and the MPIs'
 * "bcast" is "broadcast"); a panel is titled with collie's name for it. Rows
 * of one rank count only are drawn: when the files hold several, --ranks
 * picks one (a picture mixing them would compare unlike things). Points a
 * log scale cannot show (barrier has no size; a zero bus bandwidth) are left
 * out, and a second row for the same (library, collective, size) is an error
 * naming both lines:
 * which one to draw is not for the tool to guess.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "svg.h"
#include "units.h"

#define BENCH_MAX_FILES 32
#define BENCH_MAX_SERIES 24 /* libraries */
#define BENCH_MAX_PANELS 24 /* collectives */

/* Geometry, in SVG user units (pixels). */
enum {
  BENCH_COLS = 3,        /* panels per row */
  BENCH_PW = 360,        /* a panel's plot area */
  BENCH_PH = 240,        /* ... */
  BENCH_GAP_X = 100,     /* room for the y labels left of each panel */
  BENCH_GAP_Y = 110,     /* the panel's title above, the x labels below */
  BENCH_TOP = 110,       /* the title and the legend above the first row */
  BENCH_MARGIN = 40,     /* right and bottom */
  BENCH_LEGEND = 150,    /* pixels per legend entry, at least */
  BENCH_LEGEND_ROW = 20, /* between rows of the legend */
};

struct bench_point {
  int series, panel;
  int64_t nbytes; /* as the CSV says it (data-bytes); bytes: the same as a double, to draw */
  double bytes, value;
  const char *path; /* where it was read, for messages */
  int line;
};

struct bench_set {
  int nseries, npanels;
  char series[BENCH_MAX_SERIES][64]; /* library names */
  char panel[BENCH_MAX_PANELS][64];  /* collective names as first seen */
  size_t npts, cap;
  struct bench_point *pts;
  long nranks;   /* of the points drawn */
  int busbw;     /* metric */
  size_t nosize; /* rows left out: no size, or a value a log scale cannot show */
};

void
report_bench_usage(void)
{
  printf("usage: collie-report bench CSV... -o FILE.svg [--metric time|busbw] [--ranks N]\n"
         "                          [--title TEXT]\n"
         "  Draws benchmark results of one or more libraries side by side: one panel per\n"
         "  collective, size on the x axis (log2), time per call (default) or bus\n"
         "  bandwidth on the y axis (log10), one line per library. Each CSV has the\n"
         "  columns impl, collective, nranks, bytes, time_us (and busbw_GBps for\n"
         "  --metric busbw), as collie-bench --csv and the MPI and Gloo anchors of\n"
         "  bench/compare.sh write them; a transport column (collie-bench's) names the\n"
         "  line \"impl (transport)\"; other columns are ignored. When the files hold\n"
         "  several rank counts, --ranks N chooses one. -o - writes to stdout.\n"
         "  Exit status: 0 done, 2 bad usage, unreadable or malformed input, unwritable\n"
         "  output.\n");
}

/* The collective's name without underscores ("all_reduce" -> "allreduce"), and the MPI
 * anchors' "bcast" as "broadcast". */
static void
bench_key(char *out, size_t len, const char *name)
{
  size_t n = 0;
  for (; *name && n + 1 < len; name++)
    if (*name != '_') out[n++] = *name;
  out[n] = 0;
  if (!strcmp(out, "bcast")) snprintf(out, len, "broadcast");
}

/* The name a panel shows: collie's spelling of a collective it knows, else the first seen. */
static void
bench_panel_name(char *out, size_t len, const char *name)
{
  static const char *const known[] = {"allreduce", "allgather", "reduce_scatter", "broadcast",
                                      "reduce",    "alltoall",  "alltoallv",      "gather",
                                      "scatter",   "barrier",   "sendrecv"};
  char key[64], k2[64];
  bench_key(key, sizeof(key), name);
  for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) {
    bench_key(k2, sizeof(k2), known[k]);
    if (!strcmp(key, k2)) {
      snprintf(out, len, "%s", known[k]);
      return;
    }
  }
  snprintf(out, len, "%s", name);
}

/* The index of name in names[0..*n), adding it when new; -1 when full or too long. */
static int
bench_index(char (*names)[64], int *n, int max, const char *name, int by_key)
{
  char want[64], have[64];
  if (strlen(name) >= sizeof(want)) return -1;
  if (by_key)
    bench_key(want, sizeof(want), name);
  else
    snprintf(want, sizeof(want), "%s", name);
  for (int i = 0; i < *n; i++) {
    if (by_key)
      bench_key(have, sizeof(have), names[i]);
    else
      snprintf(have, sizeof(have), "%s", names[i]);
    if (!strcmp(want, have)) return i;
  }
  if (*n >= max) return -1;
  if (by_key)
    bench_panel_name(names[*n], 64, name);
  else
    snprintf(names[*n], 64, "%s", name);
  return (*n)++;
}

/* Whether a field says the point was not measured, as the anchors write it for a collective a
 * library lacks ("gloo,reduce_scatter,4,NA,unsupported,NA,NA"). Any other non-number is an
 * error. */
static int
bench_unmeasured(const char *field)
{
  static const char *const marks[] = {"", "NA", "N/A", "unsupported", "-"};
  for (size_t k = 0; k < sizeof(marks) / sizeof(marks[0]); k++)
    if (!strcmp(field, marks[k])) return 1;
  return 0;
}

/* Reads one CSV into s. Returns 0, or -1 with a message in err. */
static int
bench_read(struct bench_set *s, struct rc_table *t, long want_ranks, char *err, size_t errlen)
{
  static const char *const need[] = {"impl",  "collective", "nranks",
                                     "bytes", "time_us",    "busbw_GBps"};
  if (rc_require(t, need, s->busbw ? 6 : 5, err, errlen) != 0) return -1;
  int c_impl = rc_col(t, "impl"), c_coll = rc_col(t, "collective"), c_np = rc_col(t, "nranks"),
      c_bytes = rc_col(t, "bytes"), c_val = rc_col(t, s->busbw ? "busbw_GBps" : "time_us"),
      c_tr = rc_col(t, "transport");
  for (size_t r = 0; r < t->nrows; r++) {
    int64_t np, bytes;
    double v;
    if (bench_unmeasured(rc_cell(t, r, c_bytes)) || bench_unmeasured(rc_cell(t, r, c_val))) {
      s->nosize++;
      continue;
    }
    if (rc_int64(t, r, c_np, &np, err, errlen) != 0 ||
        rc_int64(t, r, c_bytes, &bytes, err, errlen) != 0 ||
        rc_double(t, r, c_val, &v, err, errlen) != 0)
      return -1;
    if (np < 1 || bytes < 0) {
      snprintf(err, errlen, "%s:%d: nranks %lld, bytes %lld: not a run", t->path, t->lines[r + 1],
               (long long)np, (long long)bytes);
      return -1;
    }
    if (want_ranks > 0 && np != want_ranks) continue;
    if (s->nranks == 0) s->nranks = (long)np;
    if (np != s->nranks) {
      snprintf(err, errlen,
               "%s:%d: rows of %ld and %lld ranks: choose one with --ranks (a picture mixing them "
               "would compare unlike runs)",
               t->path, t->lines[r + 1], s->nranks, (long long)np);
      return -1;
    }
    if (bytes == 0 || !(v > 0)) {
      s->nosize++;
      continue;
    }
    const char *impl = rc_cell(t, r, c_impl), *coll = rc_cell(t, r, c_coll);
    char named[160];
    if (c_tr >= 0 && *rc_cell(t, r, c_tr) && strcmp(rc_cell(t, r, c_tr), "-")) {
      snprintf(named, sizeof(named), "%s (%s)", impl, rc_cell(t, r, c_tr));
      impl = named;
    }
    int si = bench_index(s->series, &s->nseries, BENCH_MAX_SERIES, impl, 0);
    int pi = bench_index(s->panel, &s->npanels, BENCH_MAX_PANELS, coll, 1);
    if (si < 0 || pi < 0) {
      snprintf(err, errlen, "%s:%d: more than %d %s, or a name of 64 characters or more", t->path,
               t->lines[r + 1], si < 0 ? BENCH_MAX_SERIES : BENCH_MAX_PANELS,
               si < 0 ? "libraries" : "collectives");
      return -1;
    }
    for (size_t k = 0; k < s->npts; k++) {
      const struct bench_point *p = &s->pts[k];
      if (p->series == si && p->panel == pi && p->bytes == (double)bytes) {
        snprintf(err, errlen,
                 "%s:%d: a second row for %s %s at %lld bytes (the first: %s:%d); keep one",
                 t->path, t->lines[r + 1], impl, coll, (long long)bytes, p->path, p->line);
        return -1;
      }
    }
    if (s->npts == s->cap) {
      size_t cap = s->cap ? 2 * s->cap : 256;
      struct bench_point *p = realloc(s->pts, cap * sizeof(*p));
      if (!p) {
        snprintf(err, errlen, "out of memory");
        return -1;
      }
      s->pts = p;
      s->cap = cap;
    }
    s->pts[s->npts++] =
        (struct bench_point){si, pi, bytes, (double)bytes, v, t->path, t->lines[r + 1]};
  }
  return 0;
}

/* Puts collie's lines ("collie", or "collie (transport)") first, the others in the order the files
 * gave them, so that collie has the same colour in every plot. */
static void
bench_collie_first(struct bench_set *s)
{
  int order[BENCH_MAX_SERIES], to[BENCH_MAX_SERIES], n = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < s->nseries; i++)
      if ((!strcmp(s->series[i], "collie") || !strncmp(s->series[i], "collie (", 8)) == (pass == 0))
        order[n++] = i;
  char names[BENCH_MAX_SERIES][64];
  for (int k = 0; k < n; k++) {
    to[order[k]] = k;
    memcpy(names[k], s->series[order[k]], sizeof(names[k]));
  }
  memcpy(s->series, names, sizeof(names[0]) * (size_t)n);
  for (size_t k = 0; k < s->npts; k++) s->pts[k].series = to[s->pts[k].series];
}

static int
bench_by_size(const void *a, const void *b)
{
  const struct bench_point *p = a, *q = b;
  if (p->panel != q->panel) return p->panel - q->panel;
  if (p->series != q->series) return p->series - q->series;
  return (p->bytes > q->bytes) - (p->bytes < q->bytes);
}

/* One collective's panel with its top-left corner at (x0, y0). */
static void
bench_panel(FILE *f, const struct bench_set *s, int panel, double x0, double y0)
{
  double bmin = INFINITY, bmax = 0, vmin = INFINITY, vmax = 0;
  for (size_t k = 0; k < s->npts; k++) {
    const struct bench_point *p = &s->pts[k];
    if (p->panel != panel) continue;
    bmin = fmin(bmin, p->bytes);
    bmax = fmax(bmax, p->bytes);
    vmin = fmin(vmin, p->value);
    vmax = fmax(vmax, p->value);
  }
  double x1 = x0 + BENCH_PW, y1 = y0 + BENCH_PH;
  fprintf(f, "<g class=\"panel\" data-collective=\"");
  svg_esc(f, s->panel[panel]);
  fprintf(f, "\">\n");
  svg_rect(f, NULL, x0, y0, BENCH_PW, BENCH_PH, "none", "#888");
  svg_text(f, x0, y0 - 10, "font-size=\"15\" font-weight=\"bold\"", s->panel[panel]);
  svg_vtext(f, x0 - 62, (y0 + y1) / 2, "font-size=\"12\"",
            s->busbw ? "busbw (GB/s)" : "time per call (us)");
  /* Whole powers of two around the sizes, a doubling either side of a single size, within
   * 2^0 .. 2^63 (sizes are positive int64s), so every tick's label is a size. */
  struct svg_axis x = {floor(log2(bmin)), ceil(log2(bmax)), x0, x1, 1, 2}, y;
  if (x.hi <= x.lo) {
    x.lo -= 1;
    x.hi += 1;
  }
  if (x.lo < 0) x.lo = 0;
  if (x.hi > 63) x.hi = 63;
  if (x.hi <= x.lo) x.lo = x.hi - 1;
  svg_axis_log(&y, 10, vmin, vmax, y1, y0);
  svg_yticks(f, &y, x0, x1);
  int k0 = (int)x.lo, k1 = (int)x.hi, step = (k1 - k0) / 6 + 1;
  for (int k = k0; k <= k1; k++) {
    double px = svg_pos(&x, ldexp(1, k));
    svg_line(f, px, y1, px, y1 + 4, "#888");
    if ((k - k0) % step) continue;
    char lab[32];
    tool_bytes_label(lab, sizeof(lab), (uint64_t)1 << k);
    svg_text(f, px, y1 + 17, "font-size=\"11\" text-anchor=\"middle\"", lab);
  }
  svg_text(f, (x0 + x1) / 2, y1 + 34, "font-size=\"12\" text-anchor=\"middle\"", "size (bytes)");
  for (int si = 0; si < s->nseries; si++) {
    size_t first = s->npts, n = 0;
    for (size_t k = 0; k < s->npts; k++)
      if (s->pts[k].panel == panel && s->pts[k].series == si) {
        if (first == s->npts) first = k;
        n++;
      }
    if (n == 0) continue;
    const char *color = svg_color(si), *dash = svg_dash(si);
    fprintf(f, "<path class=\"series\" data-impl=\"");
    svg_esc(f, s->series[si]);
    fprintf(f, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s%s%s d=\"", color,
            *dash ? " stroke-dasharray=\"" : "", dash, *dash ? "\"" : "");
    for (size_t k = first; k < first + n; k++) { /* sorted: one run per (panel, series) */
      fputs(k == first ? "M" : " L", f);
      svg_num(f, svg_pos(&x, s->pts[k].bytes));
      fputc(' ', f);
      svg_num(f, svg_pos(&y, s->pts[k].value));
    }
    fprintf(f, "\"/>\n");
    for (size_t k = first; k < first + n; k++) {
      /* Each dot carries its numbers, so a reader of the file can check them. */
      fprintf(f, "<circle class=\"point\" data-bytes=\"%lld\" data-value=\"%.15g\" cx=\"",
              (long long)s->pts[k].nbytes, s->pts[k].value);
      svg_num(f, svg_pos(&x, s->pts[k].bytes));
      fprintf(f, "\" cy=\"");
      svg_num(f, svg_pos(&y, s->pts[k].value));
      fprintf(f, "\" r=\"2.5\" fill=\"%s\"/>\n", color);
    }
  }
  fprintf(f, "</g>\n");
}

static void
bench_write(FILE *f, const struct bench_set *s, const char *title)
{
  int rows = (s->npanels + BENCH_COLS - 1) / BENCH_COLS;
  int cols = s->npanels < BENCH_COLS ? s->npanels : BENCH_COLS;
  int w = cols * (BENCH_PW + BENCH_GAP_X) + BENCH_MARGIN;
  if (w < 700) w = 700;
  /* The legend in rows that fit the width, each entry as wide as the longest name needs
   * (about 7 units a character), the panels below it. */
  size_t longest = 0;
  for (int si = 0; si < s->nseries; si++)
    if (strlen(s->series[si]) > longest) longest = strlen(s->series[si]);
  int entry = 40 + 7 * (int)longest < BENCH_LEGEND ? BENCH_LEGEND : 40 + 7 * (int)longest;
  int per_row = (w - BENCH_GAP_X - BENCH_MARGIN) / entry;
  if (per_row < 1) per_row = 1;
  int legend_rows = (s->nseries + per_row - 1) / per_row;
  int top = BENCH_TOP + BENCH_LEGEND_ROW * (legend_rows - 1);
  int h = top + rows * (BENCH_PH + BENCH_GAP_Y) + BENCH_MARGIN - 40;
  char def[160];
  if (!title) {
    snprintf(def, sizeof(def), "%s per call, %ld rank%s", s->busbw ? "Bus bandwidth" : "Time",
             s->nranks, s->nranks == 1 ? "" : "s");
    title = def;
  }
  svg_open(f, w, h, title);
  svg_text(f, BENCH_GAP_X, 32, "font-size=\"18\" font-weight=\"bold\"", title);
  svg_text(f, BENCH_GAP_X, 54, "font-size=\"12\" fill=\"#555\"",
           s->busbw ? "higher is better" : "lower is better; a ratio is the vertical gap");
  svg_group(f, "legend", NULL);
  for (int si = 0; si < s->nseries; si++)
    svg_legend(f, BENCH_GAP_X + (double)entry * (si % per_row),
               78 + (double)BENCH_LEGEND_ROW * (si / per_row), SVG_LINE, svg_color(si),
               svg_dash(si), s->series[si]);
  svg_group_end(f);
  for (int pi = 0; pi < s->npanels; pi++)
    bench_panel(f, s, pi, BENCH_GAP_X + (double)(pi % BENCH_COLS) * (BENCH_PW + BENCH_GAP_X),
                top + (double)(pi / BENCH_COLS) * (BENCH_PH + BENCH_GAP_Y));
  svg_close(f);
}

int
report_bench(int argc, char **argv)
{
  const char *files[BENCH_MAX_FILES], *out = NULL, *title = NULL, *metric = "time";
  int nfiles = 0;
  long want_ranks = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      report_bench_usage();
      return REPORT_OK;
    }
    int takes = !strcmp(a, "-o") || !strcmp(a, "--metric") || !strcmp(a, "--ranks") ||
                !strcmp(a, "--title");
    if (takes && i + 1 >= argc) {
      fprintf(stderr, "collie-report bench: %s needs a value\n", a);
      return REPORT_BAD_INPUT;
    }
    if (!strcmp(a, "-o")) {
      out = argv[++i];
    } else if (!strcmp(a, "--title")) {
      title = argv[++i];
    } else if (!strcmp(a, "--metric")) {
      metric = argv[++i];
      if (strcmp(metric, "time") && strcmp(metric, "busbw")) {
        fprintf(stderr, "collie-report bench: --metric '%s': time or busbw\n", metric);
        return REPORT_BAD_INPUT;
      }
    } else if (!strcmp(a, "--ranks")) {
      char *end;
      errno = 0;
      want_ranks = strtol(argv[++i], &end, 10);
      if (errno || *end || end == argv[i] || want_ranks < 1) {
        fprintf(stderr, "collie-report bench: --ranks '%s' is not a rank count\n", argv[i]);
        return REPORT_BAD_INPUT;
      }
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "collie-report bench: unknown option '%s' (--help lists them)\n", a);
      return REPORT_BAD_INPUT;
    } else if (nfiles == BENCH_MAX_FILES) {
      fprintf(stderr, "collie-report bench: more than %d files\n", BENCH_MAX_FILES);
      return REPORT_BAD_INPUT;
    } else {
      files[nfiles++] = a;
    }
  }
  if (nfiles == 0 || !out) {
    fprintf(stderr, "collie-report bench: %s\n",
            nfiles == 0 ? "no CSV file given" : "-o FILE.svg is required (-o - for stdout)");
    report_bench_usage();
    return REPORT_BAD_INPUT;
  }

  struct bench_set s;
  memset(&s, 0, sizeof(s));
  s.busbw = !strcmp(metric, "busbw");
  struct rc_table t[BENCH_MAX_FILES];
  int loaded = 0, rc = REPORT_BAD_INPUT;
  char err[1400];
  for (; loaded < nfiles; loaded++) {
    if (rc_load(files[loaded], &t[loaded], err, sizeof(err)) != 0) {
      fprintf(stderr, "collie-report bench: %s\n", err);
      goto done;
    }
    if (bench_read(&s, &t[loaded], want_ranks, err, sizeof(err)) != 0) {
      loaded++; /* freed below */
      fprintf(stderr, "collie-report bench: %s\n", err);
      goto done;
    }
  }
  if (s.npts == 0) {
    if (want_ranks > 0 && s.nranks == 0)
      fprintf(stderr, "collie-report bench: no row of %ld ranks in the files\n", want_ranks);
    else
      fprintf(stderr, "collie-report bench: no row with a size to draw in the files\n");
    goto done;
  }
  bench_collie_first(&s);
  qsort(s.pts, s.npts, sizeof(*s.pts), bench_by_size);
  int to_stdout = !strcmp(out, "-");
  FILE *f = to_stdout ? stdout : fopen(out, "w");
  if (!f) {
    fprintf(stderr, "collie-report bench: cannot write %s: %s\n", out, strerror(errno));
    goto done;
  }
  bench_write(f, &s, title);
  int bad = ferror(f);
  if (to_stdout ? fflush(f) != 0 : fclose(f) != 0) bad = 1;
  if (bad) {
    fprintf(stderr, "collie-report bench: writing %s failed: %s\n", out, strerror(errno));
    goto done;
  }
  fprintf(to_stdout ? stderr : stdout,
          "wrote %s: %d collective%s, %d librar%s, %zu point%s, %ld rank%s%s\n", out, s.npanels,
          s.npanels == 1 ? "" : "s", s.nseries, s.nseries == 1 ? "y" : "ies", s.npts,
          s.npts == 1 ? "" : "s", s.nranks, s.nranks == 1 ? "" : "s",
          s.nosize ? " (rows without a size or a value a log scale can show left out)" : "");
  rc = REPORT_OK;
done:
  for (int k = 0; k < loaded; k++) rc_free(&t[k]);
  free(s.pts);
  return rc;
}
