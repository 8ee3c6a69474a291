/*
 * report_plot.c - `collie-report plot DIR -o comms.svg`: comms.csv as one
 * picture, an SVG file written by hand so the tool needs no plotting
 * library and any browser shows the result.
 *
 * Top panel: one stacked bar per step, the bytes of each payload category
 * (every bytes_<category> column, registered ones included), which shows
 * what the communication is made of and whether it changes over training.
 * Bottom panel: one line per collective, its t_<collective>_ms per step,
 * which shows which collective costs the time and when it jumps.
 *
 * A long run has more steps than a picture has pixels, so beyond
 * PLOT_MAX_BARS steps consecutive steps are averaged in groups of equal size
 * (the last one may be shorter) and the title says how many steps each bar
 * and point stands for. Categories and collectives that are zero in every
 * step are left out of the panels and legends.
 *
 * Every text comes from the CSV header, so it is escaped; the output is
 * well-formed XML.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define PLOT_MAX_BARS 500

/* Geometry, in SVG user units (pixels). */
enum {
  PLOT_W = 1100,
  PLOT_H = 800,
  PLOT_L = 100, /* left edge of both panels */
  PLOT_R = 850, /* right edge; the legends sit beyond it */
  PLOT_T0 = 80, /* top panel */
  PLOT_T1 = 370,
  PLOT_B0 = 450, /* bottom panel */
  PLOT_B1 = 720,
};

static const char *const plot_colors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                          "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                                          "#9c755f", "#bab0ac", "#1b9e77", "#7570b3"};
#define PLOT_NCOLORS (sizeof(plot_colors) / sizeof(plot_colors[0]))

void
report_plot_usage(void)
{
  printf("usage: collie-report plot DIR -o comms.svg\n"
         "  Draws DIR/comms.csv as an SVG: a stacked bar per step of the bytes of each\n"
         "  payload category, and a line per collective of its time per step. Beyond %d\n"
         "  steps, consecutive steps are averaged so at most %d bars are drawn (the title\n"
         "  says so). -o - writes to stdout.\n"
         "  Exit status: 0 done, 2 bad usage, unreadable input or unwritable output.\n",
         PLOT_MAX_BARS, PLOT_MAX_BARS);
}

/* A round tick step for [0, max] in about five ticks; returns the axis top. */
static double
plot_nice(double max, double *step)
{
  if (!(max > 0)) {
    *step = 0.2;
    return 1;
  }
  double raw = max / 5, mag = pow(10, floor(log10(raw))), norm = raw / mag;
  double s = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * mag;
  *step = s;
  return ceil(max / s - 1e-9) * s;
}

/* A y axis from y0 (top) to y1 (bottom) for values 0..top, with grid lines. */
static void
plot_yaxis(FILE *f, double y0, double y1, double top, double step, const char *label)
{
  fprintf(f, "<g class=\"yaxis\">\n");
  int nt = (int)floor(top / step + 0.5);
  for (int i = 0; i <= nt; i++) {
    double v = i * step, y = y1 - (y1 - y0) * v / top;
    fprintf(f,
            "<line x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" stroke=\"#ddd\"/>"
            "<text x=\"%d\" y=\"%.2f\" text-anchor=\"end\">%.6g</text>\n",
            PLOT_L, y, PLOT_R, y, PLOT_L - 6, y + 4, v);
  }
  fprintf(f, "<line x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" stroke=\"black\"/>\n", PLOT_L, y0,
          PLOT_L, y1);
  double my = (y0 + y1) / 2;
  fprintf(f, "<text x=\"%d\" y=\"%.2f\" text-anchor=\"middle\" transform=\"rotate(-90 %d %.2f)\">",
          PLOT_L - 60, my, PLOT_L - 60, my);
  rt_xml_text(f, label);
  fprintf(f, "</text>\n</g>\n");
}

/* The x axis under a panel: a tick every few groups, labelled by step. */
static void
plot_xaxis(FILE *f, double y, int groups, double slot, const double *first_step)
{
  fprintf(f,
          "<g class=\"xaxis\">\n<line x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" "
          "stroke=\"black\"/>\n",
          PLOT_L, y, PLOT_R, y);
  int every = (groups + 9) / 10;
  if (every < 1) every = 1;
  for (int j = 0; j < groups; j += every) {
    double x = PLOT_L + slot * (j + 0.5);
    fprintf(f,
            "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"black\"/>"
            "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">%.0f</text>\n",
            x, y, x, y + 5, x, y + 18, first_step[j]);
  }
  fprintf(f, "</g>\n");
}

/* A legend entry: a swatch (box or line) and the name. */
static void
plot_legend(FILE *f, double y, const char *color, const char *name, int line)
{
  if (line)
    fprintf(f,
            "<line class=\"legend\" x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" stroke=\"%s\" "
            "stroke-width=\"3\"/>",
            PLOT_R + 20, y + 6, PLOT_R + 34, y + 6, color);
  else
    fprintf(f,
            "<rect class=\"legend\" x=\"%d\" y=\"%.2f\" width=\"12\" height=\"12\" fill=\"%s\"/>",
            PLOT_R + 20, y, color);
  fprintf(f, "<text x=\"%d\" y=\"%.2f\">", PLOT_R + 40, y + 11);
  rt_xml_text(f, name);
  fprintf(f, "</text>\n");
}

struct plot_series {
  const char *name;
  int col;
  double *mean; /* per group */
};

/* Writes the SVG; returns 0 or -1 (out of memory). */
static int
plot_write(FILE *f, const struct rt_comms *c)
{
  const struct rc_table *t = &c->tab;
  size_t n = t->nrows;
  size_t g = (n + PLOT_MAX_BARS - 1) / PLOT_MAX_BARS;
  if (g < 1) g = 1;
  int groups = (int)((n + g - 1) / g);
  struct plot_series *cats = calloc((size_t)t->ncols, sizeof(*cats));
  struct plot_series *colls = calloc((size_t)t->ncols, sizeof(*colls));
  double *first_step = calloc((size_t)groups + 1, sizeof(double));
  double *stack = calloc((size_t)groups + 1, sizeof(double));
  int ncat = 0, ncoll = 0, rc = -1;
  if (!cats || !colls || !first_step || !stack) goto out;

  /* Means per group of every non-zero category and collective. */
  for (int k = 0; k < t->ncols; k++) {
    int ct, kind = rt_comms_kind(c, k, &ct);
    if (kind == RT_COL_OTHER) continue;
    int col = kind == RT_COL_COLL ? ct : k;
    double *mean = calloc((size_t)groups, sizeof(double));
    if (!mean) goto out;
    int any = 0;
    for (int j = 0; j < groups; j++) {
      size_t lo = (size_t)j * g, hi = lo + g < n ? lo + g : n;
      double sum = 0;
      for (size_t i = lo; i < hi; i++) sum += c->v[i * (size_t)t->ncols + (size_t)col];
      mean[j] = sum / (double)(hi - lo);
      if (mean[j] != 0) any = 1;
    }
    if (!any) {
      free(mean);
      continue;
    }
    struct plot_series *s = kind == RT_COL_COLL ? &colls[ncoll++] : &cats[ncat++];
    s->name = t->head[k] + 6;
    s->col = col;
    s->mean = mean;
  }
  double tmax = 0, bmax = 0, smin = 0, smax = 0;
  for (int j = 0; j < groups; j++) {
    first_step[j] = c->v[(size_t)j * g * (size_t)t->ncols + (size_t)c->c_step];
    for (int s = 0; s < ncat; s++) stack[j] += cats[s].mean[j];
    if (stack[j] > tmax) tmax = stack[j];
    for (int s = 0; s < ncoll; s++)
      if (colls[s].mean[j] > bmax) bmax = colls[s].mean[j];
  }
  for (size_t i = 0; i < n; i++) {
    double s = c->v[i * (size_t)t->ncols + (size_t)c->c_step];
    if (i == 0 || s < smin) smin = s;
    if (i == 0 || s > smax) smax = s;
  }

  /* Bytes in a unit that keeps the tick labels short. */
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  double scale = 1;
  while (tmax / scale >= 1024 && u < 5) {
    scale *= 1024;
    u++;
  }
  double tstep, bstep;
  double ttop = plot_nice(tmax / scale, &tstep), btop = plot_nice(bmax, &bstep);
  double slot = (double)(PLOT_R - PLOT_L) / groups;

  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
          PLOT_W, PLOT_H, PLOT_W, PLOT_H);
  char title[512];
  if (g > 1)
    snprintf(title, sizeof(title),
             "comms.csv: %zu steps (%.0f to %.0f), aggregated: each bar and point is the mean of "
             "%zu consecutive steps",
             n, smin, smax, g);
  else
    snprintf(title, sizeof(title), "comms.csv: %zu step%s (%.0f to %.0f)", n, n == 1 ? "" : "s",
             smin, smax);
  fprintf(f, "<title>");
  rt_xml_text(f, title);
  fprintf(f,
          "</title>\n<rect class=\"background\" x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" "
          "fill=\"white\"/>\n<text x=\"%d\" y=\"30\" font-size=\"16\">",
          PLOT_W, PLOT_H, PLOT_L);
  rt_xml_text(f, title);
  fprintf(f, "</text>\n");

  /* Top panel. */
  fprintf(f,
          "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">bytes per step by payload category%s"
          "</text>\n",
          PLOT_L, PLOT_T0 - 12, ncat ? "" : " (no bytes recorded)");
  char ylabel[64];
  snprintf(ylabel, sizeof(ylabel), "bytes (%s)", units[u]);
  plot_yaxis(f, PLOT_T0, PLOT_T1, ttop, tstep, ylabel);
  fprintf(f, "<g class=\"bars\">\n");
  double bw = slot * 0.8;
  for (int j = 0; j < groups; j++) {
    double y = PLOT_T1;
    for (int s = 0; s < ncat; s++) {
      double v = cats[s].mean[j] / scale;
      if (!(v > 0)) continue;
      double h = (PLOT_T1 - PLOT_T0) * v / ttop;
      y -= h;
      fprintf(f,
              "<rect class=\"bar\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
              "fill=\"%s\"/>\n",
              PLOT_L + slot * j + (slot - bw) / 2, y, bw, h, plot_colors[s % PLOT_NCOLORS]);
    }
  }
  fprintf(f, "</g>\n");
  plot_xaxis(f, PLOT_T1, groups, slot, first_step);
  for (int s = 0; s < ncat; s++)
    /* Listed top down as stacked, so each entry sits level with its band. */
    plot_legend(f, PLOT_T0 + 18.0 * (ncat - 1 - s), plot_colors[s % PLOT_NCOLORS], cats[s].name, 0);

  /* Bottom panel. */
  fprintf(f, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">time per step by collective%s</text>\n",
          PLOT_L, PLOT_B0 - 12, ncoll ? "" : " (no time recorded)");
  plot_yaxis(f, PLOT_B0, PLOT_B1, btop, bstep, "time (ms)");
  fprintf(f, "<g class=\"lines\">\n");
  for (int s = 0; s < ncoll; s++) {
    const char *color = plot_colors[s % PLOT_NCOLORS];
    fprintf(f,
            "<polyline class=\"line\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
            "points=\"",
            color);
    for (int j = 0; j < groups; j++)
      fprintf(f, "%s%.2f,%.2f", j ? " " : "", PLOT_L + slot * (j + 0.5),
              PLOT_B1 - (PLOT_B1 - PLOT_B0) * colls[s].mean[j] / btop);
    fprintf(f, "\"/>\n");
    if (groups <= 60)
      for (int j = 0; j < groups; j++)
        fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"2.5\" fill=\"%s\"/>\n",
                PLOT_L + slot * (j + 0.5), PLOT_B1 - (PLOT_B1 - PLOT_B0) * colls[s].mean[j] / btop,
                color);
  }
  fprintf(f, "</g>\n");
  plot_xaxis(f, PLOT_B1, groups, slot, first_step);
  for (int s = 0; s < ncoll; s++)
    plot_legend(f, PLOT_B0 + 18.0 * s, plot_colors[s % PLOT_NCOLORS], colls[s].name, 1);
  fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step%s</text>\n",
          (PLOT_L + PLOT_R) / 2, PLOT_B1 + 45, g > 1 ? " (first of each group)" : "");
  fprintf(f, "</svg>\n");
  rc = 0;
out:
  if (cats)
    for (int s = 0; s < ncat; s++) free(cats[s].mean);
  if (colls)
    for (int s = 0; s < ncoll; s++) free(colls[s].mean);
  free(cats);
  free(colls);
  free(first_step);
  free(stack);
  return rc;
}

int
report_plot(int argc, char **argv)
{
  struct rt_args a;
  int prc = rt_parse_args(argc, argv, "plot", RT_ARG_OUT, report_plot_usage, &a);
  if (prc != 0) return prc > 0 ? REPORT_OK : REPORT_BAD_INPUT;
  if (!a.out) {
    fprintf(stderr, "collie-report plot: -o FILE is required (-o - for stdout)\n");
    return REPORT_BAD_INPUT;
  }
  struct rt_data d;
  char err[2048];
  if (rt_load(&d, a.dir, NULL, RT_COMMS, err, sizeof(err)) != 0) {
    fprintf(stderr, "collie-report plot: %s\n", err);
    rt_free(&d);
    return REPORT_BAD_INPUT;
  }
  if (!d.has_comms) {
    fprintf(stderr, "collie-report plot: no comms.csv in %s\n", d.dir);
    rt_free(&d);
    return REPORT_BAD_INPUT;
  }
  if (d.comms.tab.nrows == 0) {
    fprintf(stderr, "collie-report plot: %s has no step rows: nothing to plot\n", d.comms.tab.path);
    rt_free(&d);
    return REPORT_BAD_INPUT;
  }
  int to_stdout = strcmp(a.out, "-") == 0;
  FILE *f = to_stdout ? stdout : fopen(a.out, "w");
  if (!f) {
    fprintf(stderr, "collie-report plot: cannot write %s: %s\n", a.out, strerror(errno));
    rt_free(&d);
    return REPORT_BAD_INPUT;
  }
  int rc = plot_write(f, &d.comms);
  int bad = ferror(f);
  if (to_stdout ? fflush(f) != 0 : fclose(f) != 0) bad = 1;
  if (rc != 0 || bad) {
    fprintf(stderr, "collie-report plot: writing %s failed: %s\n", a.out,
            rc != 0 ? "out of memory" : strerror(errno));
    rt_free(&d);
    return REPORT_BAD_INPUT;
  }
  size_t n = d.comms.tab.nrows, g = (n + PLOT_MAX_BARS - 1) / PLOT_MAX_BARS;
  fprintf(to_stdout ? stderr : stdout, "wrote %s: %zu step%s%s\n", a.out, n, n == 1 ? "" : "s",
          g > 1 ? " (aggregated into bars of consecutive steps)" : "");
  rt_free(&d);
  return REPORT_OK;
}
