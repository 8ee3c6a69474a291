/*
 * cbench_line.c - the arithmetic of collie-bench's fits (cbench.h): a
 * weighted least-squares line through measured (bytes, time) points, with
 * absolute or relative weights, and the split of a sweep into the fewest
 * segments that each stay within a tolerance of their own line. Pure
 * functions of arrays: cbench_fit.c measures and writes the tuning file.
 *
 * Why relative least squares. A sweep spans six decades of sizes. Plain
 * least squares weighs each point by its absolute error, so the largest
 * sizes decide both parameters and alpha comes out as whatever is left
 * (often negative). Weighting by 1/t^2 minimises relative errors, which is
 * what comparing algorithms at one size needs; alpha and beta are kept
 * non-negative, as times cannot shrink with size or start below zero.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "cbench.h"

/* Weighted least squares of t = a + b m (w NULL: every weight 1); nonneg
 * keeps a, b >= 0. The contract is cb_fit_line's. */
static int
fit_wls(const double *m, const double *t, const double *w, int n, int nonneg, struct cb_fit *out)
{
  if (n < 2) return -1;
  int spread = 0;
  for (int i = 1; i < n; i++) spread |= m[i] != m[0];
  if (!spread) return -1;
  /* Centred sums: sizes reach 1e9, and their squares would swamp the
   * differences that carry the slope. */
  double sw = 0, sm = 0, st = 0;
  for (int i = 0; i < n; i++) {
    double wi = w ? w[i] : 1;
    sw += wi;
    sm += wi * m[i];
    st += wi * t[i];
  }
  double mb = sm / sw, tb = st / sw, sxx = 0, sxy = 0, sst = 0;
  for (int i = 0; i < n; i++) {
    double wi = w ? w[i] : 1, dm = m[i] - mb, dt = t[i] - tb;
    sxx += wi * dm * dm;
    sxy += wi * dm * dt;
    sst += wi * dt * dt;
  }
  double b = sxy / sxx, a = tb - b * mb;
  if (nonneg && (a < 0 || b < 0)) {
    /* The squared error is convex, so with the free optimum outside a, b >= 0
     * the constrained one lies on an edge: a = 0 or b = 0. */
    double smm = 0, smt = 0, e0 = 0, e1 = 0;
    for (int i = 0; i < n; i++) {
      double wi = w ? w[i] : 1;
      smm += wi * m[i] * m[i];
      smt += wi * m[i] * t[i];
    }
    double b0 = smm > 0 && smt > 0 ? smt / smm : 0, a1 = tb > 0 ? tb : 0;
    for (int i = 0; i < n; i++) {
      double wi = w ? w[i] : 1, r0 = t[i] - b0 * m[i], r1 = t[i] - a1;
      e0 += wi * r0 * r0;
      e1 += wi * r1 * r1;
    }
    a = e0 <= e1 ? 0 : a1;
    b = e0 <= e1 ? b0 : 0;
  }
  double sse = 0;
  for (int i = 0; i < n; i++) {
    double wi = w ? w[i] : 1, r = t[i] - a - b * m[i];
    sse += wi * r * r;
  }
  out->alpha_us = a;
  out->beta_us_per_byte = b;
  out->r2 = sst > 0 ? 1 - sse / sst : 1;
  out->n = n;
  return 0;
}

int
cb_fit_line(const double *m, const double *t, int n, struct cb_fit *out)
{
  return fit_wls(m, t, NULL, n, 0, out);
}

int
cb_fit_line_rel(const double *m, const double *t, int n, struct cb_fit *out)
{
  if (n < 2 || n > (1 << 20)) return -1;
  double *w = malloc((size_t)n * sizeof(*w));
  if (!w) return -1;
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    if (!(t[i] > 0)) rc = -1;
    w[i] = rc ? 0 : 1 / (t[i] * t[i]);
  }
  if (!rc) rc = fit_wls(m, t, w, n, 1, out);
  free(w);
  return rc;
}

/* Fits points [i, j] of a sweep. A single point gets the line through it
 * whose slope is the mean of its secants to its neighbours, kept within
 * [0, t/m] so that alpha stays >= 0: between sweep points that follows the
 * curve better than a flat line would. */
static void
fit_run(const double *m, const double *t, int n, int i, int j, struct cb_fit *f)
{
  if (j > i && cb_fit_line_rel(m + i, t + i, j - i + 1, f) == 0) return;
  double slope = 0;
  int k = 0;
  if (i > 0) slope += (t[i] - t[i - 1]) / (m[i] - m[i - 1]), k++;
  if (i + 1 < n) slope += (t[i + 1] - t[i]) / (m[i + 1] - m[i]), k++;
  slope = k ? slope / k : 0;
  if (slope < 0) slope = 0;
  if (m[i] > 0 && slope > t[i] / m[i]) slope = t[i] / m[i];
  *f = (struct cb_fit){.alpha_us = t[i] - slope * m[i], .beta_us_per_byte = slope, .r2 = 1, .n = 1};
  if (f->alpha_us < 0) f->alpha_us = 0; /* rounding */
}

/* Whether f is within tol (relative) of every point of [i, j]. */
static int
fit_within(const double *m, const double *t, int i, int j, const struct cb_fit *f, double tol)
{
  for (int k = i; k <= j; k++)
    if (fabs(t[k] - f->alpha_us - f->beta_us_per_byte * m[k]) > (tol + 1e-9) * t[k]) return 0;
  return 1;
}

int
cb_fit_segments(const double *m, const double *t, int n, double tol, struct cb_seg *seg, int maxseg)
{
  if (n < 1 || !(tol >= 0)) return -1;
  for (int i = 0; i < n; i++)
    if (!(t[i] > 0) || !(m[i] >= 0) || (i && !(m[i] > m[i - 1]))) return -1;
  int ns = 0;
  for (int i = 0; i < n;) {
    struct cb_fit f, g;
    int j = i;
    fit_run(m, t, n, i, i, &f);
    while (j + 1 < n) {
      fit_run(m, t, n, i, j + 1, &g);
      if (!fit_within(m, t, i, j + 1, &g, tol)) break;
      f = g;
      j++;
    }
    if (ns == maxseg) return -1;
    seg[ns].lo = i == 0 ? (size_t)m[0] : seg[ns - 1].hi + 1;
    if (j == n - 1) {
      seg[ns].hi = (size_t)m[j];
    } else {
      /* Halfway in ratio, as sweeps are geometric; within [m[j], m[j+1]). */
      double mid = floor(sqrt(m[j] * m[j + 1]));
      if (mid < m[j]) mid = m[j];
      if (mid >= m[j + 1]) mid = m[j + 1] - 1;
      seg[ns].hi = (size_t)mid;
    }
    seg[ns].alpha_us = f.alpha_us;
    seg[ns].beta_us_per_byte = f.beta_us_per_byte;
    ns++;
    i = j + 1;
  }
  return ns;
}
