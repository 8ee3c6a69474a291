/*
 * cbench_plot.c - `collie-bench --plot FILE.svg`: the sweep as a picture,
 * an SVG written by hand so that the tool needs no plotting library and any
 * browser shows it.
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
 * Every text goes through plot_esc, so the output is well-formed XML.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cbench.h"

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

static const char *const plot_colors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                          "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                                          "#9c755f", "#bab0ac", "#1b9e77", "#7570b3"};
#define PLOT_NCOLORS (int)(sizeof(plot_colors) / sizeof(plot_colors[0]))
static const char *const plot_dashes[] = {"", "6,3", "2,2", "8,3,2,3"};

/* Writes s with XML's five special characters escaped. */
static void
plot_esc(FILE *f, const char *s)
{
  for (; *s; s++) {
    switch (*s) {
    case '<':
      fputs("&lt;", f);
      break;
    case '>':
      fputs("&gt;", f);
      break;
    case '&':
      fputs("&amp;", f);
      break;
    case '"':
      fputs("&quot;", f);
      break;
    case '\'':
      fputs("&apos;", f);
      break;
    default:
      fputc(*s, f);
    }
  }
}

struct plot_axis {
  double lo, hi; /* log of the ends (base 2 for x, 10 for y) */
  double p0, p1; /* pixel of lo and hi */
};

static double
plot_pos(const struct plot_axis *a, double logv)
{
  return a->p0 + (logv - a->lo) / (a->hi - a->lo) * (a->p1 - a->p0);
}

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

static double
plot_value(const struct cb_point *p, int panel)
{
  return panel == 0 ? p->busbw : p->time_us;
}

/* One panel: frame, y grid and labels, x ticks, one path and dots per series. */
static void
plot_panel(FILE *f, int panel, const struct cb_point *pts, int npts, const struct plot_series *ser,
           int ns, const struct plot_axis *x)
{
  int top = panel == 0 ? PLOT_T0 : PLOT_B0, bot = panel == 0 ? PLOT_T1 : PLOT_B1;
  double vmin = INFINITY, vmax = 0;
  for (int i = 0; i < npts; i++) {
    double v = plot_value(&pts[i], panel);
    if (pts[i].shape.bytes == 0 || !(v > 0) || !isfinite(v)) continue;
    if (v < vmin) vmin = v;
    if (v > vmax) vmax = v;
  }
  fprintf(f, "<g class=\"panel\" id=\"%s\">\n", panel == 0 ? "busbw" : "time");
  fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n",
          PLOT_L, top, PLOT_R - PLOT_L, bot - top);
  fprintf(f,
          "<text x=\"%d\" y=\"%d\" font-size=\"15\" font-weight=\"bold\">%s</text>\n"
          "<text x=\"20\" y=\"%d\" font-size=\"13\" transform=\"rotate(-90 20 %d)\" "
          "text-anchor=\"middle\">%s</text>\n",
          PLOT_L, top - 10, panel == 0 ? "Bus bandwidth vs size" : "Time per call vs size",
          (top + bot) / 2, (top + bot) / 2, panel == 0 ? "busbw (GB/s)" : "time (us)");

  /* x ticks at powers of two, labelled every `step` so labels do not collide. */
  int k0 = (int)x->lo, k1 = (int)x->hi, step = (k1 - k0) / 12 + 1;
  for (int k = k0; k <= k1; k++) {
    double px = plot_pos(x, k);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eee\"/>\n", px, top, px,
            bot);
    if (k % step) continue; /* multiples of step: 1 KiB, 1 MiB show when step divides 10 */
    char lab[32];
    cb_fmt_size(lab, sizeof(lab), (size_t)1 << k);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n", px,
            bot + 16, lab);
  }
  fprintf(f,
          "<text x=\"%d\" y=\"%d\" font-size=\"13\" text-anchor=\"middle\">size (bytes)</text>\n",
          (PLOT_L + PLOT_R) / 2, bot + 34);

  if (vmax <= 0) {
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" font-size=\"14\" text-anchor=\"middle\" fill=\"#888\">"
            "nothing to show on a log scale</text>\n</g>\n",
            (PLOT_L + PLOT_R) / 2, (top + bot) / 2);
    return;
  }
  struct plot_axis y = {floor(log10(vmin)), ceil(log10(vmax)), bot, top};
  if (y.hi <= y.lo) y.hi = y.lo + 1;
  for (int k = (int)y.lo; k <= (int)y.hi; k++) {
    double py = plot_pos(&y, k);
    fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", PLOT_L, py,
            PLOT_R, py);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%g</text>\n",
            PLOT_L - 6, py + 4, pow(10, k));
  }

  for (int s = 0; s < ns; s++) {
    const char *color = plot_colors[s % PLOT_NCOLORS];
    const char *dash = plot_dashes[(s / PLOT_NCOLORS) % 4];
    fprintf(f, "<path class=\"series\" data-series=\"%s/", cb_coll_name(ser[s].coll));
    plot_esc(f, ser[s].algo);
    fprintf(f, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s%s%s d=\"", color,
            *dash ? " stroke-dasharray=\"" : "", dash, *dash ? "\"" : "");
    int first = 1;
    for (int i = 0; i < npts; i++) {
      double v = plot_value(&pts[i], panel);
      if (pts[i].coll != ser[s].coll || strcmp(pts[i].algo_name, ser[s].algo) ||
          pts[i].shape.bytes == 0 || !(v > 0) || !isfinite(v))
        continue;
      fprintf(f, "%s%.1f %.1f", first ? "M" : " L", plot_pos(x, log2((double)pts[i].shape.bytes)),
              plot_pos(&y, log10(v)));
      first = 0;
    }
    fprintf(f, "\"/>\n");
    for (int i = 0; i < npts; i++) {
      double v = plot_value(&pts[i], panel);
      if (pts[i].coll != ser[s].coll || strcmp(pts[i].algo_name, ser[s].algo) ||
          pts[i].shape.bytes == 0 || !(v > 0) || !isfinite(v))
        continue;
      fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
              plot_pos(x, log2((double)pts[i].shape.bytes)), plot_pos(&y, log10(v)), color);
    }
  }
  fprintf(f, "</g>\n");
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
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
          "<text x=\"%d\" y=\"30\" font-size=\"18\" font-weight=\"bold\">",
          PLOT_W, PLOT_H, PLOT_W, PLOT_H, PLOT_L);
  plot_esc(f, title ? title : "collie-bench");
  fprintf(f, "</text>\n");
  if (ns == 0) {
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" font-size=\"14\" fill=\"#888\">no point with a size to "
            "plot</text>\n",
            PLOT_L, PLOT_T0 + 40);
  } else {
    /* Whole powers of two around the sweep; one doubling either side when it is one size. */
    struct plot_axis x = {floor(log2((double)bmin)), ceil(log2((double)bmax)), PLOT_L, PLOT_R};
    if (x.hi <= x.lo) {
      x.lo -= 1;
      x.hi += 1;
    }
    if (x.lo < 0) x.lo = 0;
    plot_panel(f, 0, pts, npts, ser, ns, &x);
    plot_panel(f, 1, pts, npts, ser, ns, &x);
    fprintf(f, "<g class=\"legend\">\n");
    /* Lines 20 units apart, closer when many series must fit beside the panels. */
    int gap = (PLOT_B1 - PLOT_T0) / ns < 20 ? (PLOT_B1 - PLOT_T0) / ns : 20;
    for (int s = 0; s < ns; s++) {
      int y = PLOT_T0 + 10 + gap * s;
      const char *dash = plot_dashes[(s / PLOT_NCOLORS) % 4];
      fprintf(
          f,
          "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"%s%s%s/>\n"
          "<text x=\"%d\" y=\"%d\" font-size=\"12\">%s ",
          PLOT_R + 20, y, PLOT_R + 45, y, plot_colors[s % PLOT_NCOLORS],
          *dash ? " stroke-dasharray=\"" : "", dash, *dash ? "\"" : "", PLOT_R + 52, y + 4,
          cb_coll_name(ser[s].coll));
      if (strcmp(ser[s].algo, "-")) plot_esc(f, ser[s].algo); /* sendrecv has no algorithm */
      fprintf(f, "</text>\n");
    }
    fprintf(f, "</g>\n");
  }
  fprintf(f, "</svg>\n");
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    fprintf(stderr, "collie-bench: --plot %s: write failed: %s\n", path, strerror(errno));
    return -1;
  }
  return 0;
}
