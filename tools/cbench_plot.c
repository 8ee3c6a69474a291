/*
 * cbench_plot.c - `collie-bench --plot FILE.svg`: the sweep as a picture,
 * an SVG drawn with the shared primitives of svg.c so that the tool needs no
 * plotting library and any browser shows it.
 *
 * Two panels share the x axis, the size in bytes on a log2 scale (sizes
 * double in a sweep): bus bandwidth on top, time per call below, both on
 * log10 scales, since a sweep spans six or more decades of each. Each
 * (collective, algorithm) is one line with a dot per measured point, the
 * same colour in both panels, named in a legend on the right; the size where
 * one algorithm's line crosses another's is where a tuning file should make
 * the model switch. Points a log axis cannot show (barrier has no size; a
 * one-rank run has no bus bandwidth) are left out, and a panel with nothing
 * to show says so.
 *
 * Every text goes through svg.c's escaping, so the output is well-formed XML.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cbench.h"
#include "svg.h"
#include "units.h"

enum {
  PLOT_W = 1080,
  PLOT_H = 860,
  PLOT_L = 90,  /* left edge of both panels */
  PLOT_R = 800, /* right edge; the legend sits beyond it */
  PLOT_T0 = 70, /* top panel: bus bandwidth */
  PLOT_T1 = 390,
  PLOT_B0 = 470, /* bottom panel: time */
  PLOT_B1 = 790,
};

#define PLOT_MAX_SERIES 64

/* Series: distinct (collective, algorithm) in order of first appearance. */
struct plot_series {
  int coll;
  const char *algo;
};

static int
plot_series_of(const struct cb_point *p, struct plot_series *s, int *ns)
{
  for (int i = 0; i < *ns; i++)
    if (s[i].coll == p->coll && !strcmp(s[i].algo, p->algo_name)) return i;
  if (*ns >= PLOT_MAX_SERIES) return -1;
  s[*ns].coll = p->coll;
  s[*ns].algo = p->algo_name;
  return (*ns)++;
}

/* The point's value in the panel, or 0 when a log-log panel cannot show it. */
static double
plot_value(const struct cb_point *p, int panel)
{
  double v = panel == 0 ? p->busbw : p->time_us;
  return p->shape.bytes > 0 && v > 0 && isfinite(v) ? v : 0;
}

static int
plot_in_series(const struct cb_point *p, const struct plot_series *s)
{
  return p->coll == s->coll && !strcmp(p->algo_name, s->algo);
}

/* One panel: frame, y grid and labels, x ticks, one path and dots per series. */
static void
plot_panel(FILE *f, int panel, const struct cb_point *pts, int npts, const struct plot_series *ser,
           int ns, const struct svg_axis *x)
{
  int top = panel == 0 ? PLOT_T0 : PLOT_B0, bot = panel == 0 ? PLOT_T1 : PLOT_B1;
  double vmin = INFINITY, vmax = 0;
  for (int i = 0; i < npts; i++) {
    double v = plot_value(&pts[i], panel);
    if (v == 0) continue;
    if (v < vmin) vmin = v;
    if (v > vmax) vmax = v;
  }
  svg_group(f, "panel", panel == 0 ? "busbw" : "time");
  svg_rect(f, NULL, PLOT_L, top, PLOT_R - PLOT_L, bot - top, "none", "#888");
  svg_text(f, PLOT_L, top - 10, "font-size=\"15\" font-weight=\"bold\"",
           panel == 0 ? "Bus bandwidth vs size" : "Time per call vs size");
  svg_vtext(f, 20, (top + bot) / 2, "font-size=\"13\"", panel == 0 ? "busbw (GB/s)" : "time (us)");

  /* x ticks at powers of two, labelled every `step` so labels do not collide. */
  int k0 = (int)x->lo, k1 = (int)x->hi, step = (k1 - k0) / 12 + 1;
  for (int k = k0; k <= k1; k++) {
    double px = svg_pos(x, ldexp(1, k));
    svg_line(f, px, top, px, bot, "#eee");
    if (k % step) continue; /* multiples of step: 1 KiB, 1 MiB show when step divides 10 */
    char lab[32];
    tool_bytes_label(lab, sizeof(lab), (uint64_t)1 << k);
    svg_text(f, px, bot + 16, "font-size=\"11\" text-anchor=\"middle\"", lab);
  }
  svg_text(f, (PLOT_L + PLOT_R) / 2, bot + 34, "font-size=\"13\" text-anchor=\"middle\"",
           "size (bytes)");

  if (vmax <= 0) {
    svg_text(f, (PLOT_L + PLOT_R) / 2, (top + bot) / 2,
             "font-size=\"14\" text-anchor=\"middle\" fill=\"#888\"",
             "nothing to show on a log scale");
    svg_group_end(f);
    return;
  }
  struct svg_axis y;
  svg_axis_log(&y, 10, vmin, vmax, bot, top);
  svg_yticks(f, &y, PLOT_L, PLOT_R);

  for (int s = 0; s < ns; s++) {
    const char *color = svg_color(s), *dash = svg_dash(s);
    /* A path, not a polyline: its data-series names the series for readers of the file. */
    fprintf(f, "<path class=\"series\" data-series=\"%s/", cb_coll_name(ser[s].coll));
    svg_esc(f, ser[s].algo);
    fprintf(f, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s%s%s d=\"", color,
            *dash ? " stroke-dasharray=\"" : "", dash, *dash ? "\"" : "");
    int first = 1;
    for (int i = 0; i < npts; i++) {
      double v = plot_value(&pts[i], panel);
      if (v == 0 || !plot_in_series(&pts[i], &ser[s])) continue;
      fputs(first ? "M" : " L", f);
      svg_num(f, svg_pos(x, (double)pts[i].shape.bytes));
      fputc(' ', f);
      svg_num(f, svg_pos(&y, v));
      first = 0;
    }
    fprintf(f, "\"/>\n");
    for (int i = 0; i < npts; i++) {
      double v = plot_value(&pts[i], panel);
      if (v == 0 || !plot_in_series(&pts[i], &ser[s])) continue;
      svg_circle(f, svg_pos(x, (double)pts[i].shape.bytes), svg_pos(&y, v), 3, color);
    }
  }
  svg_group_end(f);
}

int
cb_plot_write(const char *path, const struct cb_point *pts, int npts, const char *title)
{
  struct plot_series ser[PLOT_MAX_SERIES];
  int ns = 0;
  size_t bmin = 0, bmax = 0;
  for (int i = 0; i < npts; i++) {
    if (pts[i].shape.bytes == 0) continue;
    if (plot_series_of(&pts[i], ser, &ns) < 0) continue;
    if (!bmin || pts[i].shape.bytes < bmin) bmin = pts[i].shape.bytes;
    if (pts[i].shape.bytes > bmax) bmax = pts[i].shape.bytes;
  }
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "collie-bench: --plot %s: %s\n", path, strerror(errno));
    return -1;
  }
  if (!title) title = "collie-bench";
  svg_open(f, PLOT_W, PLOT_H, title);
  svg_text(f, PLOT_L, 30, "font-size=\"18\" font-weight=\"bold\"", title);
  if (ns == 0) {
    svg_text(f, PLOT_L, PLOT_T0 + 40, "font-size=\"14\" fill=\"#888\"",
             "no point with a size to plot");
  } else {
    /* Whole powers of two around the sweep; one doubling either side when it is one size. */
    struct svg_axis x = {floor(log2((double)bmin)), ceil(log2((double)bmax)), PLOT_L, PLOT_R, 1, 2};
    if (x.hi <= x.lo) {
      x.lo -= 1;
      x.hi += 1;
    }
    if (x.lo < 0) x.lo = 0;
    plot_panel(f, 0, pts, npts, ser, ns, &x);
    plot_panel(f, 1, pts, npts, ser, ns, &x);
    svg_group(f, "legend", NULL);
    /* Lines 20 units apart, closer when many series must fit beside the panels. */
    int gap = (PLOT_B1 - PLOT_T0) / ns < 20 ? (PLOT_B1 - PLOT_T0) / ns : 20;
    for (int s = 0; s < ns; s++) {
      char name[96];
      if (strcmp(ser[s].algo, "-")) /* sendrecv has no algorithm */
        snprintf(name, sizeof(name), "%s %s", cb_coll_name(ser[s].coll), ser[s].algo);
      else
        snprintf(name, sizeof(name), "%s", cb_coll_name(ser[s].coll));
      svg_legend(f, PLOT_R + 20, PLOT_T0 + 10 + gap * s, SVG_LINE, svg_color(s), svg_dash(s), name);
    }
    svg_group_end(f);
  }
  svg_close(f);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    fprintf(stderr, "collie-bench: --plot %s: write failed: %s\n", path, strerror(errno));
    return -1;
  }
  return 0;
}
