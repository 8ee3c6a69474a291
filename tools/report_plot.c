/*
 * report_plot.c - `collie-report plot DIR -o comms.svg`: comms.csv as one
 * picture, an SVG file drawn with svg.c's primitives so the tool needs no
 * plotting library and any browser shows the result.
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
 * Every text comes from the CSV header, so it goes through svg.c's
 * escaping; the output is well-formed XML.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "svg.h"

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

/* A panel's y axis: ticks with grid lines, the axis line, and label turned up its side. */
static void
plot_yaxis(FILE *f, const struct svg_axis *y, const char *label)
{
  svg_group(f, "yaxis", NULL);
  svg_yticks(f, y, PLOT_L, PLOT_R);
  svg_line(f, PLOT_L, y->p1, PLOT_L, y->p0, "black");
  svg_vtext(f, PLOT_L - 60, (y->p0 + y->p1) / 2, "", label);
  svg_group_end(f);
}

/* The x axis under a panel at height y: a tick every few groups, labelled by
 * the first step of the group. */
static void
plot_xaxis(FILE *f, double y, const struct svg_axis *x, int groups, const double *first_step)
{
  svg_group(f, "xaxis", NULL);
  svg_line(f, PLOT_L, y, PLOT_R, y, "black");
  int every = (groups + 9) / 10;
  if (every < 1) every = 1;
  for (int j = 0; j < groups; j += every) {
    double px = svg_pos(x, j + 0.5);
    svg_line(f, px, y, px, y + 5, "black");
    svg_textf(f, px, y + 18, "text-anchor=\"middle\"", "%.0f", first_step[j]);
  }
  svg_group_end(f);
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
  struct svg_axis ty, by, x = {0, groups, PLOT_L, PLOT_R, 1, 0}; /* x: group j spans [j, j+1] */
  svg_axis_linear(&ty, tmax / scale, PLOT_T1, PLOT_T0);
  svg_axis_linear(&by, bmax, PLOT_B1, PLOT_B0);
  double slot = (double)(PLOT_R - PLOT_L) / groups;

  char title[512];
  if (g > 1)
    snprintf(title, sizeof(title),
             "comms.csv: %zu steps (%.0f to %.0f), aggregated: each bar and point is the mean of "
             "%zu consecutive steps",
             n, smin, smax, g);
  else
    snprintf(title, sizeof(title), "comms.csv: %zu step%s (%.0f to %.0f)", n, n == 1 ? "" : "s",
             smin, smax);
  svg_open(f, PLOT_W, PLOT_H, title);
  svg_text(f, PLOT_L, 30, "font-size=\"16\"", title);

  /* Top panel. */
  svg_textf(f, PLOT_L, PLOT_T0 - 12, "font-weight=\"bold\"", "bytes per step by payload category%s",
            ncat ? "" : " (no bytes recorded)");
  char ylabel[64];
  snprintf(ylabel, sizeof(ylabel), "bytes (%s)", units[u]);
  plot_yaxis(f, &ty, ylabel);
  svg_group(f, "bars", NULL);
  double bw = slot * 0.8;
  for (int j = 0; j < groups; j++) {
    double below = 0;
    for (int s = 0; s < ncat; s++) {
      double v = cats[s].mean[j] / scale;
      if (!(v > 0)) continue;
      double y0 = svg_pos(&ty, below), y1 = svg_pos(&ty, below + v);
      below += v;
      svg_rect(f, "bar", svg_pos(&x, j) + (slot - bw) / 2, y1, bw, y0 - y1, svg_color(s), NULL);
    }
  }
  svg_group_end(f);
  plot_xaxis(f, PLOT_T1, &x, groups, first_step);
  for (int s = 0; s < ncat; s++)
    /* Listed top down as stacked, so each entry sits level with its band. */
    svg_legend(f, PLOT_R + 20, PLOT_T0 + 6 + 18.0 * (ncat - 1 - s), SVG_BOX, svg_color(s), NULL,
               cats[s].name);

  /* Bottom panel. */
  svg_textf(f, PLOT_L, PLOT_B0 - 12, "font-weight=\"bold\"", "time per step by collective%s",
            ncoll ? "" : " (no time recorded)");
  plot_yaxis(f, &by, "time (ms)");
  svg_group(f, "lines", NULL);
  for (int s = 0; s < ncoll; s++) {
    svg_polyline(f, "line", svg_color(s), 1.5);
    for (int j = 0; j < groups; j++)
      svg_polyline_point(f, j, svg_pos(&x, j + 0.5), svg_pos(&by, colls[s].mean[j]));
    svg_polyline_end(f);
    if (groups <= 60)
      for (int j = 0; j < groups; j++)
        svg_circle(f, svg_pos(&x, j + 0.5), svg_pos(&by, colls[s].mean[j]), 2.5, svg_color(s));
  }
  svg_group_end(f);
  plot_xaxis(f, PLOT_B1, &x, groups, first_step);
  for (int s = 0; s < ncoll; s++)
    svg_legend(f, PLOT_R + 20, PLOT_B0 + 6 + 18.0 * s, SVG_LINE, svg_color(s), NULL, colls[s].name);
  svg_textf(f, (PLOT_L + PLOT_R) / 2, PLOT_B1 + 45, "text-anchor=\"middle\"", "step%s",
            g > 1 ? " (first of each group)" : "");
  svg_close(f);
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
  struct rt_data d;
  int start =
      rt_start(argc, argv, "plot", RT_ARG_OUT, report_plot_usage, RT_COMMS, RT_COMMS, &a, &d);
  if (start >= 0) return start;
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
