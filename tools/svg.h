/*
 * svg.h - drawing primitives for the self-contained SVG charts the tools
 * write (collie-report plot, collie-bench --plot): one file, no script, no
 * style sheet, no plotting library, readable by any browser.
 *
 * Every text and attribute value that comes from data goes through the
 * escaping here, so a chart is well-formed XML whatever its names hold.
 * Coordinates are SVG user units (pixels), written with at most two decimals.
 * The functions write to f and report nothing: the caller checks ferror(f)
 * once at the end, as for any other stdio output.
 */
#ifndef COLLIE_SVG_H
#define COLLIE_SVG_H

#include <stdio.h>

/* ---- Text ---- */

/* Length of the valid UTF-8 sequence at s (1 to 4 bytes), or 0 when s does
 * not start one (a stray continuation byte, an overlong form, a surrogate,
 * past U+10FFFF, or cut short by the NUL). svg_esc keeps such sequences and
 * replaces the rest; exported so the report tool's JSON writer repairs text
 * by the same rule. */
int svg_utf8_len(const unsigned char *s);

/* Writes s as XML text or attribute value: & < > " ' as references, control
 * characters XML 1.0 forbids (all below 0x20 but tab, CR, LF) as '?', bytes
 * that are not UTF-8 as U+FFFD. */
void svg_esc(FILE *f, const char *s);

/* Writes a coordinate as every primitive here does: at most two decimals,
 * no trailing zeros ("90", "412.5"), never NaN or an exponent (SVG readers
 * may reject them). For an element svg.h has no function for. */
void svg_num(FILE *f, double v);

/* ---- Document ---- */

/* Opens a width x height document: the XML declaration, the <svg> root
 * (sans-serif, 12 units by default), a <title> (skipped when title is NULL)
 * and a white background. Close it with svg_close. */
void svg_open(FILE *f, int width, int height, const char *title);
/* Ends the document svg_open began. */
void svg_close(FILE *f);

/* A <g> around what follows, with a class and an id (each omitted when
 * NULL), so a reader of the file can find a panel; svg_group_end closes it. */
void svg_group(FILE *f, const char *cls, const char *id);
void svg_group_end(FILE *f);

/* ---- Shapes ---- */

/* A line of width 1 in colour stroke. */
void svg_line(FILE *f, double x1, double y1, double x2, double y2, const char *stroke);
/* A rectangle filled with fill ("none" for a frame), outlined in stroke
 * unless it is NULL, with class cls unless it is NULL. */
void svg_rect(FILE *f, const char *cls, double x, double y, double w, double h, const char *fill,
              const char *stroke);
/* A dot of radius r. */
void svg_circle(FILE *f, double cx, double cy, double r, const char *fill);

/* A polyline written point by point: svg_polyline opens it (class cls,
 * unfilled, colour stroke, the given width), svg_polyline_point adds the
 * i-th point (i from 0, in order), svg_polyline_end closes it. */
void svg_polyline(FILE *f, const char *cls, const char *stroke, double width);
void svg_polyline_point(FILE *f, int i, double x, double y);
void svg_polyline_end(FILE *f);

/* Text at (x, y), the baseline's start unless attrs says otherwise. attrs is
 * written into the tag as is (say "font-size=\"15\" text-anchor=\"end\"";
 * "" for none), so it must be a constant of the caller, never data; text is
 * escaped. */
void svg_text(FILE *f, double x, double y, const char *attrs, const char *text);
/* svg_text of a printf-formatted text. */
void svg_textf(FILE *f, double x, double y, const char *attrs, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* svg_text turned a quarter left about (x, y) and centred there: the label
 * of a y axis. */
void svg_vtext(FILE *f, double x, double y, const char *attrs, const char *text);

/* ---- Axes ---- */

/* A linear or logarithmic map from values to pixels along one axis, and the
 * spacing of its ticks. A log axis holds the logarithms of its values in lo,
 * hi and step, so its ticks are whole powers of base when lo is whole. */
struct svg_axis {
  double lo, hi; /* the ends, in axis units (values, or their logs); hi > lo */
  double p0, p1; /* pixels of lo and hi; p0 > p1 for a y axis growing upwards */
  double step;   /* between ticks, in axis units, > 0 */
  int base;      /* 0: linear; else the base of the logarithm (2, 10) */
};

/* A linear axis from 0 to a round top >= max, with about five ticks at round
 * values (1, 2 or 5 times a power of ten). max <= 0 or NaN (nothing to show)
 * gives 0 to 1. */
void svg_axis_linear(struct svg_axis *a, double max, double p0, double p1);
/* A log axis from the power of base at or below vmin to the one at or above
 * vmax (one power wide when they are the same), a tick per power. Needs
 * 0 < vmin <= vmax. */
void svg_axis_log(struct svg_axis *a, int base, double vmin, double vmax, double p0, double p1);
/* The pixel of value v (a value, not its logarithm; v > 0 on a log axis). */
double svg_pos(const struct svg_axis *a, double v);
/* The ticks of y axis a across a panel from x = left to x = right: a light
 * grid line at each and its value left of the panel ("%g"; on a log axis the
 * power itself: 1000, not 3). */
void svg_yticks(FILE *f, const struct svg_axis *a, double left, double right);

/* ---- Legend and colours ---- */

/* A legend entry whose middle is at height y: a swatch at x (SVG_BOX, a
 * filled square, for bars; SVG_LINE, a short line dashed like its series,
 * for lines; dash "" or NULL for solid) and name to its right. */
enum { SVG_BOX, SVG_LINE };
void svg_legend(FILE *f, double x, double y, int swatch, const char *color, const char *dash,
                const char *name);

/* The colour of series i (i >= 0): twelve that stay apart for most eyes, then
 * the same again. */
const char *svg_color(int i);
/* A stroke-dasharray for series i: "" (solid) for the first twelve, then a
 * different dash each time the colours come round again, so no two of the
 * first 48 series look alike. */
const char *svg_dash(int i);

#endif
