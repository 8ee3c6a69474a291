/*
 * svg.c - drawing primitives for self-contained SVG charts (svg.h), shared
 * by collie-report plot and collie-bench --plot so that both write the same
 * well-formed markup: one escaping rule, one document header, one way to lay
 * out axis ticks (round linear steps, whole powers on log scales), legend
 * entries and the colour palette.
 *
 * Markup is written straight to the FILE as it is made; nothing is buffered
 * or allocated except by svg_textf for a text longer than its stack buffer.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "svg.h"

static const char *const svg_colors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                         "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                                         "#9c755f", "#bab0ac", "#1b9e77", "#7570b3"};
#define SVG_NCOLORS (int)(sizeof(svg_colors) / sizeof(svg_colors[0]))
static const char *const svg_dashes[] = {"", "6,3", "2,2", "8,3,2,3"};
#define SVG_NDASHES (int)(sizeof(svg_dashes) / sizeof(svg_dashes[0]))

int
svg_utf8_len(const unsigned char *s)
{
  if (s[0] < 0x80) return 1;
  int n;
  unsigned cp;
  if ((s[0] & 0xE0) == 0xC0) {
    n = 2;
    cp = s[0] & 0x1F;
  } else if ((s[0] & 0xF0) == 0xE0) {
    n = 3;
    cp = s[0] & 0x0F;
  } else if ((s[0] & 0xF8) == 0xF0) {
    n = 4;
    cp = s[0] & 0x07;
  } else {
    return 0;
  }
  for (int k = 1; k < n; k++) {
    if ((s[k] & 0xC0) != 0x80) return 0; /* also stops at the NUL */
    cp = (cp << 6) | (s[k] & 0x3F);
  }
  static const unsigned min[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

void
svg_esc(FILE *f, const char *s)
{
  static const char special[] = "&<>\"'";
  static const char *const entity[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    const char *hit = strchr(special, *p); /* *p is not the NUL, which strchr would find */
    if (hit) {
      fputs(entity[hit - special], f);
    } else if (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r') {
      fputc('?', f); /* XML 1.0 forbids most control characters even as references */
    } else {
      int n = svg_utf8_len(p);
      if (n == 0) {
        fputs("\xEF\xBF\xBD", f);
      } else {
        fwrite(p, 1, (size_t)n, f);
        p += n - 1;
      }
    }
  }
}

void
svg_num(FILE *f, double v)
{
  if (!isfinite(v)) v = 0;
  if (v > 1e9) v = 1e9; /* far off any page, and keeps the text short */
  if (v < -1e9) v = -1e9;
  char buf[32];
  snprintf(buf, sizeof(buf), "%.2f", v);
  size_t n = strlen(buf);
  while (buf[n - 1] == '0') n--; /* "%.2f" always writes a '.', so this stops there */
  if (buf[n - 1] == '.') n--;
  buf[n] = '\0';
  fputs(strcmp(buf, "-0") ? buf : "0", f);
}

/* ` name="v"` for a number. */
static void
svg_attr(FILE *f, const char *name, double v)
{
  fprintf(f, " %s=\"", name);
  svg_num(f, v);
  fputc('"', f);
}

/* ` name="s"` for a string, escaped. */
static void
svg_attr_str(FILE *f, const char *name, const char *s)
{
  fprintf(f, " %s=\"", name);
  svg_esc(f, s);
  fputc('"', f);
}

void
svg_open(FILE *f, int width, int height, const char *title)
{
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
          width, height, width, height);
  if (title) {
    fputs("<title>", f);
    svg_esc(f, title);
    fputs("</title>\n", f);
  }
  svg_rect(f, "background", 0, 0, width, height, "white", NULL);
}

void
svg_close(FILE *f)
{
  fputs("</svg>\n", f);
}

void
svg_group(FILE *f, const char *cls, const char *id)
{
  fputs("<g", f);
  if (cls) svg_attr_str(f, "class", cls);
  if (id) svg_attr_str(f, "id", id);
  fputs(">\n", f);
}

void
svg_group_end(FILE *f)
{
  fputs("</g>\n", f);
}

void
svg_line(FILE *f, double x1, double y1, double x2, double y2, const char *stroke)
{
  fputs("<line", f);
  svg_attr(f, "x1", x1);
  svg_attr(f, "y1", y1);
  svg_attr(f, "x2", x2);
  svg_attr(f, "y2", y2);
  svg_attr_str(f, "stroke", stroke);
  fputs("/>\n", f);
}

void
svg_rect(FILE *f, const char *cls, double x, double y, double w, double h, const char *fill,
         const char *stroke)
{
  fputs("<rect", f);
  if (cls) svg_attr_str(f, "class", cls);
  svg_attr(f, "x", x);
  svg_attr(f, "y", y);
  svg_attr(f, "width", w);
  svg_attr(f, "height", h);
  svg_attr_str(f, "fill", fill);
  if (stroke) svg_attr_str(f, "stroke", stroke);
  fputs("/>\n", f);
}

void
svg_circle(FILE *f, double cx, double cy, double r, const char *fill)
{
  fputs("<circle", f);
  svg_attr(f, "cx", cx);
  svg_attr(f, "cy", cy);
  svg_attr(f, "r", r);
  svg_attr_str(f, "fill", fill);
  fputs("/>\n", f);
}

void
svg_polyline(FILE *f, const char *cls, const char *stroke, double width)
{
  fputs("<polyline", f);
  if (cls) svg_attr_str(f, "class", cls);
  fputs(" fill=\"none\"", f);
  svg_attr_str(f, "stroke", stroke);
  svg_attr(f, "stroke-width", width);
  fputs(" points=\"", f);
}

void
svg_polyline_point(FILE *f, int i, double x, double y)
{
  if (i > 0) fputc(' ', f);
  svg_num(f, x);
  fputc(',', f);
  svg_num(f, y);
}

void
svg_polyline_end(FILE *f)
{
  fputs("\"/>\n", f);
}

/* The opening <text> tag at (x, y) with the caller's attributes. */
static void
svg_text_open(FILE *f, double x, double y, const char *attrs)
{
  fputs("<text", f);
  svg_attr(f, "x", x);
  svg_attr(f, "y", y);
  if (attrs && *attrs) fprintf(f, " %s", attrs);
  fputc('>', f);
}

void
svg_text(FILE *f, double x, double y, const char *attrs, const char *text)
{
  svg_text_open(f, x, y, attrs);
  svg_esc(f, text);
  fputs("</text>\n", f);
}

void
svg_textf(FILE *f, double x, double y, const char *attrs, const char *fmt, ...)
{
  char small[512], *text = small;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof(small), fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof(small)) {
    /* Out of memory keeps the cut text rather than losing all of it. */
    char *big = malloc((size_t)n + 1);
    if (big) {
      va_start(ap, fmt);
      vsnprintf(big, (size_t)n + 1, fmt, ap);
      va_end(ap);
      text = big;
    }
  }
  svg_text(f, x, y, attrs, text);
  if (text != small) free(text);
}

void
svg_vtext(FILE *f, double x, double y, const char *attrs, const char *text)
{
  fputs("<text", f);
  svg_attr(f, "x", x);
  svg_attr(f, "y", y);
  fputs(" text-anchor=\"middle\" transform=\"rotate(-90 ", f);
  svg_num(f, x);
  fputc(' ', f);
  svg_num(f, y);
  fputs(")\"", f);
  if (attrs && *attrs) fprintf(f, " %s", attrs);
  fputc('>', f);
  svg_esc(f, text);
  fputs("</text>\n", f);
}

void
svg_axis_linear(struct svg_axis *a, double max, double p0, double p1)
{
  a->lo = 0;
  a->p0 = p0;
  a->p1 = p1;
  a->base = 0;
  if (!(max > 0)) {
    a->hi = 1;
    a->step = 0.2;
    return;
  }
  /* About five ticks: the raw step max/5 rounded up to 1, 2 or 5 times a
   * power of ten; the top is the first tick at or above max (the epsilon
   * keeps a max that is already a multiple from gaining an empty tick). */
  double raw = max / 5, mag = pow(10, floor(log10(raw))), norm = raw / mag;
  double s = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * mag;
  a->step = s;
  a->hi = ceil(max / s - 1e-9) * s;
}

/* log_base(v), exact at whole powers for the usual bases. */
static double
svg_log(int base, double v)
{
  return base == 2 ? log2(v) : base == 10 ? log10(v) : log(v) / log(base);
}

void
svg_axis_log(struct svg_axis *a, int base, double vmin, double vmax, double p0, double p1)
{
  a->base = base;
  a->lo = floor(svg_log(base, vmin));
  a->hi = ceil(svg_log(base, vmax));
  if (a->hi <= a->lo) a->hi = a->lo + 1;
  a->step = 1;
  a->p0 = p0;
  a->p1 = p1;
}

/* The pixel of u in axis units. */
static double
svg_unit_pos(const struct svg_axis *a, double u)
{
  return a->p0 + (u - a->lo) / (a->hi - a->lo) * (a->p1 - a->p0);
}

double
svg_pos(const struct svg_axis *a, double v)
{
  return svg_unit_pos(a, a->base ? svg_log(a->base, v) : v);
}

void
svg_yticks(FILE *f, const struct svg_axis *a, double left, double right)
{
  /* Ticks counted, not stepped to, so rounding cannot add or drop the last. */
  int n = (int)floor((a->hi - a->lo) / a->step + 0.5);
  for (int i = 0; i <= n; i++) {
    double u = a->lo + i * a->step, y = svg_unit_pos(a, u);
    svg_line(f, left, y, right, y, "#ddd");
    svg_textf(f, left - 6, y + 4, "font-size=\"11\" text-anchor=\"end\"", "%g",
              a->base ? pow(a->base, u) : u);
  }
}

void
svg_legend(FILE *f, double x, double y, int swatch, const char *color, const char *dash,
           const char *name)
{
  double text_x;
  if (swatch == SVG_BOX) {
    svg_rect(f, "legend", x, y - 6, 12, 12, color, NULL);
    text_x = x + 18;
  } else {
    /* Long enough to show a whole period of the longest dash pattern. */
    fputs("<line class=\"legend\"", f);
    svg_attr(f, "x1", x);
    svg_attr(f, "y1", y);
    svg_attr(f, "x2", x + 24);
    svg_attr(f, "y2", y);
    svg_attr_str(f, "stroke", color);
    fputs(" stroke-width=\"3\"", f);
    if (dash && *dash) svg_attr_str(f, "stroke-dasharray", dash);
    fputs("/>\n", f);
    text_x = x + 30;
  }
  svg_text(f, text_x, y + 4, "font-size=\"12\"", name);
}

const char *
svg_color(int i)
{
  return svg_colors[(i < 0 ? 0 : i) % SVG_NCOLORS];
}

const char *
svg_dash(int i)
{
  return svg_dashes[((i < 0 ? 0 : i) / SVG_NCOLORS) % SVG_NDASHES];
}
