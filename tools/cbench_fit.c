/*
 * cbench_fit.c - collie-bench --fit, --tune and --tune-check: this machine's
 * alpha-beta model, measured, and the tuning file that makes collie pick
 * with it (docs/tuning.md).
 *
 * What is measured. The library's selection (src/coll/select.c) costs a call
 * with alpha per message step, beta per byte moved and gamma per byte
 * reduced, per transport class. --fit measures each of these directly:
 * - point to point: a sendrecv sweep on the communicator as it is, and on a
 *   second one forced to the other class (tcp when this one is shm; shm when
 *   it is tcp on one host; skipped across hosts, where shm cannot exist);
 *   t = alpha + beta x bytes gives that class's alpha and beta;
 * - reduction: every dtype's sum kernel over a 4 MiB array on every rank at
 *   once (collectives reduce on all ranks together, sharing memory
 *   bandwidth), the slowest rank's time per input byte giving gamma;
 * - every algorithm of each selected collective, forced by name, over the
 *   sweep: one line per algorithm for the table.
 *
 * The fitting itself (weighted least squares, segments) is cbench_line.c.
 *
 * The tuning file (--tune). Class constants from the point-to-point and
 * reduction fits, and for this communicator's class and size, fit lines for
 * the algorithms worth having: those the current model picks at some
 * measured size, and those that beat that pick somewhere by more than
 * FIT_MARGIN (selection only lets algorithms with lines compete, so one
 * that was never clearly better stays out instead of winning wherever noise
 * favoured it). Each gets a piecewise model: lines over runs of consecutive
 * sweep sizes (cb_fit_segments), a run growing while its line stays within a
 * tolerance of all its points. One line per algorithm cannot follow a curve
 * that bends where messages leave the caches or a protocol switches; one
 * line per pair of points follows the noise. So the tolerance is chosen by
 * the result: the file is written, loaded back through the library's own
 * parser and selection (collie__comm_models_load, collie__comm_select), and
 * wherever the pick at a measured size is more than FIT_SLACK slower than
 * the best algorithm with lines, that collective's tolerance is tightened
 * and the file written again, down to 0, which reproduces every measurement
 * exactly.
 *
 * Noise. The machines this runs on are shared and small: a single
 * measurement of a point moves 10-40 %, and what ran just before it moves
 * it too (a peer spinning or asleep, caches). Every point is measured
 * FIT_ROUNDS times, the rounds interleaved across sizes, collectives and
 * algorithms (every other round backwards) so that a slow phase hits them
 * alike and no point always follows the same one, and the median is kept:
 * the minimum would keep a lucky round, which the next measurement does not
 * repeat. --tune-check measures a point FIT_CONFIRM more times before it
 * calls a pick too slow there.
 *
 * Agreement. Every rank makes the same calls in the same order (cb_measure
 * is collective); only rank 0 prints and writes, and the exit status is the
 * maximum over ranks, so that every rank of a job exits alike.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cbench.h"
#include "cbench_int.h"
#include "core/introspect.h"

int (*cb_fit_measure)(collie_comm_t *, const struct cb_opts *, int, int, size_t,
                      struct cb_point *) = cb_measure;

#define FIT_ROUNDS 5  /* measurements of every point; the median counts */
#define FIT_CONFIRM 5 /* --tune-check: more of a point that looks wrong */
#define FIT_MAXR (FIT_ROUNDS + FIT_CONFIRM)
#define FIT_MAXPTS 64
#define FIT_MAXALGO 8
#define FIT_SLACK 1.02             /* a pick within 2 % of the best counts as the best */
#define FIT_CHECK_LIMIT 1.1        /* --tune-check fails above this tuned / best ratio */
#define FIT_MARGIN FIT_CHECK_LIMIT /* --tune: what beating the default pick takes */
#define FIT_REDUCE_BYTES ((size_t)4 << 20)
#define FIT_NA (-2.0) /* t[][] of an algorithm that cannot run that point */
/* Exit statuses, as the rest of collie-bench's. */
#define FIT_EXIT_BAD 1    /* --tune-check: a pick too slow; or results were wrong */
#define FIT_EXIT_FILE 2   /* the tuning file cannot be written or read */
#define FIT_EXIT_COLLIE 3 /* collie failed */

/* The algorithm (kind, id), or NULL. */
static const struct collie__algo *
fit_find(int kind, int id)
{
  int n;
  const struct collie__algo *const *algos = collie__algo_table(&n);
  for (int i = 0; i < n; i++)
    if (algos[i]->kind == kind && algos[i]->id == id) return algos[i];
  return NULL;
}

/* ---- The tuning file ---- */

int
cb_tune_write(FILE *f, const char *comment, const struct cb_tune_consts *c,
              const struct cb_tune_algo *a, int na)
{
  for (int i = 0; i < na; i++) {
    if (a[i].cls < 0 || a[i].cls >= collie__net_class_count() || a[i].nranks < 1 || a[i].nseg < 0 ||
        !fit_find(a[i].kind, a[i].algo)) {
      errno = EINVAL;
      return -1;
    }
  }
  for (const char *p = comment; p && *p;) {
    size_t len = strcspn(p, "\n");
    fprintf(f, "# %.*s\n", (int)len, p);
    p += len + (p[len] == '\n');
  }
  for (int k = 0; c && k < collie__net_class_count() && k < CB_CLASS_MAX; k++) {
    if (!c->have[k]) continue;
    fprintf(f, "%s.alpha_us = %.6g\n%s.beta_us = %.6g\n%s.gamma_us = %.6g\n",
            collie__net_class_name(k), c->alpha_us[k], collie__net_class_name(k), c->beta_us[k],
            collie__net_class_name(k), c->gamma_us[k]);
  }
  for (int i = 0; i < na; i++)
    for (int s = 0; s < a[i].nseg; s++)
      fprintf(f, "fit.%s.%d.%s.%s = %zu %zu %.6g %.6g\n", collie__net_class_name(a[i].cls),
              a[i].nranks, collie__kind_name(a[i].kind), fit_find(a[i].kind, a[i].algo)->name,
              a[i].seg[s].lo, a[i].seg[s].hi, a[i].seg[s].alpha_us, a[i].seg[s].beta_us_per_byte);
  return fflush(f) != 0 || ferror(f) ? -1 : 0;
}

/* ---- Measuring ---- */

/* One collective's measurements on one communicator. */
struct fit_sweep {
  int coll, kind;
  int nalgo;
  const struct collie__algo *algo[FIT_MAXALGO];
  int n; /* sweep sizes */
  size_t req[FIT_MAXPTS], bytes[FIT_MAXPTS], count[FIT_MAXPTS];
  int have[FIT_MAXPTS];                         /* the shape ran (not skipped, not a duplicate) */
  double t[FIT_MAXALGO][FIT_MAXPTS];            /* us, median of the rounds; -1 none yet; FIT_NA */
  double rt[FIT_MAXALGO][FIT_MAXPTS][FIT_MAXR]; /* every round's time */
  int nr[FIT_MAXALGO][FIT_MAXPTS];
  int confirmed[FIT_MAXPTS]; /* --tune-check measured this point again */
  int tol_step;              /* --tune: index into fit_tols */
  int keep[FIT_MAXALGO];     /* --tune: the algorithm gets fit lines */
  int nseg[FIT_MAXALGO];     /* --tune: segments of each algorithm */
  struct cb_seg seg[FIT_MAXALGO][FIT_MAXPTS];
  long wrong; /* points whose result check failed (left out) */
};

static const double fit_tols[] = {0.10, 0.05, 0.025, 0.01, 0};
#define FIT_NTOLS (int)(sizeof(fit_tols) / sizeof(fit_tols[0]))

/* The requested sizes of o's sweep (at most max). */
static int
fit_sizes(const struct cb_opts *o, size_t *req, int max)
{
  double f = o->stepfactor > 1 ? o->stepfactor : 2;
  int n = 0;
  for (size_t s = o->minbytes; n < max && s <= o->maxbytes;) {
    req[n++] = s;
    size_t next = (size_t)((double)s * f);
    if (next <= s) next = s + 1;
    s = next;
  }
  return n;
}

/* Whether every rank can run a (decided from what every rank knows alike). */
int
cb_fit_can_run(const collie_comm_t *comm, const struct cb_opts *o, const struct collie__algo *a)
{
  if ((a->needs & COLLIE_NEEDS_ALL_SHM) && collie__comm_class(comm) != COLLIE_NET_CLASS_LOCAL)
    return 0;
  if ((a->needs & COLLIE_NEEDS_REDUCE) && !collie__reduce_kernel(o->dtype, o->redop)) return 0;
  if (a->needs & COLLIE_NEEDS_DEVICE) return 0; /* host buffers: no device algorithm runs */
  if (a->needs & COLLIE_NEEDS_WIRE) return 0;   /* native calls: not the compressed one */
  return 1;
}

/* Sets up one sweep of coll over req[0..n) with every algorithm that can run.
 */
static void
fit_sweep_init(struct fit_sweep *s, const collie_comm_t *comm, const struct cb_opts *o, int coll,
               const size_t *req, int n)
{
  memset(s, 0, sizeof(*s));
  s->coll = coll;
  s->kind = cb_coll_kind(coll);
  int nalgos;
  const struct collie__algo *const *algos = collie__algo_table(&nalgos);
  for (int i = 0; i < nalgos && s->nalgo < FIT_MAXALGO; i++)
    if (algos[i]->kind == s->kind && cb_fit_can_run(comm, o, algos[i]))
      s->algo[s->nalgo++] = algos[i];
  /* A barrier has no size: one point. */
  s->n = coll == CB_BARRIER ? 1 : n;
  for (int i = 0; i < s->n; i++) {
    s->req[i] = coll == CB_BARRIER ? 0 : req[i];
    for (int k = 0; k < FIT_MAXALGO; k++) s->t[k][i] = -1;
  }
}

/* The collective's name as collie spells it ("sendrecv" for point to point). */
static const char *
fit_coll_name(const struct fit_sweep *s)
{
  return s->kind == COLLIE_KIND_P2P ? "sendrecv" : collie__kind_name(s->kind);
}

/* The median of v[0..n) (n >= 1; v is reordered). */
static double
fit_median(double *v, int n)
{
  for (int a = 1; a < n; a++)
    for (int b = a; b > 0 && v[b] < v[b - 1]; b--) {
      double x = v[b];
      v[b] = v[b - 1];
      v[b - 1] = x;
    }
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Measures point i of algorithm k (sendrecv: k 0) once more and updates its
 * median. Returns -1 when the communicator failed, else 0. */
static int
fit_point(collie_comm_t *comm, const struct cb_opts *o, struct fit_sweep *s, int k, int i)
{
  struct cb_point pt;
  if (s->t[k][i] == FIT_NA || s->nr[k][i] == FIT_MAXR) return 0;
  int algo = s->kind == COLLIE_KIND_P2P ? COLLIE_ALGO_AUTO : s->algo[k]->id;
  memset(&pt, 0, sizeof(pt));
  int rc = cb_fit_measure(comm, o, s->coll, algo, s->req[i], &pt);
  if (rc == 1) return 0; /* shape skipped: too small to give each rank an element */
  if (rc < 0) {
    if (collie__comm_poisoned(comm) != COLLIE_SUCCESS) return -1;
    s->t[k][i] = FIT_NA;
    return 0;
  }
  if (pt.wrong) {
    if (collie_comm_rank(comm) == 0)
      fprintf(stderr, "collie-bench: %s %s at %zu bytes: %ld wrong elements; point left out\n",
              fit_coll_name(s), s->kind == COLLIE_KIND_P2P ? "-" : s->algo[k]->name, pt.shape.bytes,
              pt.wrong);
    s->t[k][i] = FIT_NA;
    s->wrong++;
    return 0;
  }
  s->have[i] = 1;
  s->bytes[i] = pt.shape.bytes;
  s->count[i] = pt.shape.count;
  s->rt[k][i][s->nr[k][i]++] = pt.time_us;
  double v[FIT_MAXR];
  memcpy(v, s->rt[k][i], (size_t)s->nr[k][i] * sizeof(double));
  s->t[k][i] = fit_median(v, s->nr[k][i]);
  return 0;
}

/* Measures every sweep of sw[0..nsw) `rounds` times, then drops sizes whose
 * shape rounded to the bytes of a smaller one. Rounds alternate direction
 * (sizes, collectives and algorithms backwards every other round), so that
 * what ran just before a point, which moves its time, differs between its
 * rounds. Returns -1 when the communicator failed (message on stderr). */
static int
fit_measure(collie_comm_t *comm, const struct cb_opts *o, struct fit_sweep *sw, int nsw, int rounds)
{
  int maxn = 0;
  for (int j = 0; j < nsw; j++) maxn = sw[j].n > maxn ? sw[j].n : maxn;
  for (int r = 0; r < rounds; r++)
    for (int ii = 0; ii < maxn; ii++)
      for (int jj = 0; jj < nsw; jj++) {
        int back = r % 2, i = back ? maxn - 1 - ii : ii, j = back ? nsw - 1 - jj : jj;
        int na = sw[j].kind == COLLIE_KIND_P2P ? 1 : sw[j].nalgo;
        for (int kk = 0; i < sw[j].n && kk < na; kk++)
          if (fit_point(comm, o, &sw[j], back ? na - 1 - kk : kk, i) != 0) {
            if (collie_comm_rank(comm) == 0)
              fprintf(stderr, "collie-bench: %s failed: %s\n", fit_coll_name(&sw[j]),
                      collie_last_error());
            return -1;
          }
      }
  for (int j = 0; j < nsw; j++) {
    struct fit_sweep *s = &sw[j];
    int last = -1;
    for (int i = 0; i < s->n; i++) {
      if (!s->have[i]) continue;
      if (last >= 0 && s->bytes[i] == s->bytes[last])
        s->have[i] = 0;
      else
        last = i;
    }
  }
  return 0;
}

/* The measured points of algorithm k of s: sizes in m, times in t. */
static int
fit_points(const struct fit_sweep *s, int k, double *m, double *t)
{
  int n = 0;
  for (int i = 0; i < s->n; i++)
    if (s->have[i] && s->t[k][i] > 0) {
      m[n] = (double)s->bytes[i];
      t[n++] = s->t[k][i];
    }
  return n;
}

/* Reduction kernels: gamma (us per input byte) of every dtype's sum and, in
 * gamma[COLLIE_FLOAT64 + 1], of (o->dtype, o->redop). Every rank times at
 * once; the slowest rank's time counts. Returns -1 when memory or the
 * allreduce of the results fails. */
static int
fit_gamma(collie_comm_t *comm, const struct cb_opts *o, double *gamma)
{
  enum { ND = COLLIE_FLOAT64 + 2 };
  char *a = malloc(FIT_REDUCE_BYTES), *b = malloc(FIT_REDUCE_BYTES);
  int ok = a && b;
  /* Zeros: no denormals or overflow, whatever the dtype and however often
   * summed. */
  if (ok) {
    memset(a, 0, FIT_REDUCE_BYTES);
    memset(b, 0, FIT_REDUCE_BYTES);
  }
  if (collie_barrier(comm, NULL, NULL) != COLLIE_SUCCESS) ok = 0;
  for (int d = 0; d < ND; d++) {
    collie_dtype_t dt = d <= COLLIE_FLOAT64 ? (collie_dtype_t)d : o->dtype;
    collie__reduce_fn fn = collie__reduce_kernel(dt, d <= COLLIE_FLOAT64 ? COLLIE_SUM : o->redop);
    gamma[d] = -1;
    if (!ok || !fn) continue;
    size_t n = FIT_REDUCE_BYTES / collie_dtype_size(dt);
    double best = -1;
    fn(a, b, n); /* warm: pages and caches */
    for (int r = 0; r < 5; r++) {
      int64_t t0 = collie__now_ns();
      fn(a, b, n);
      double us = (double)(collie__now_ns() - t0) / 1e3;
      if (best < 0 || us < best) best = us;
    }
    gamma[d] = best / (double)(n * collie_dtype_size(dt));
  }
  free(a);
  free(b);
  if (collie_allreduce(comm, gamma, gamma, ND, COLLIE_FLOAT64, COLLIE_MAX, NULL, NULL) !=
      COLLIE_SUCCESS)
    return -1;
  return ok ? 0 : -1;
}

/* Point to point on one communicator: a sendrecv sweep and its fit. */
struct fit_p2p {
  int cls;    /* COLLIE_CLASS_* */
  int done;   /* measured and fitted */
  long wrong; /* points whose result check failed */
  char note[160];
  struct cb_fit fit;
};

static int
fit_p2p_measure(collie_comm_t *comm, const struct cb_opts *o, const size_t *req, int n,
                struct fit_p2p *p)
{
  struct fit_sweep *s = calloc(1, sizeof(*s));
  double m[FIT_MAXPTS], t[FIT_MAXPTS];
  if (!s) return -1;
  s->coll = CB_SENDRECV;
  s->kind = COLLIE_KIND_P2P;
  s->n = n;
  for (int i = 0; i < n; i++) {
    s->req[i] = req[i];
    s->t[0][i] = -1;
  }
  int rc = fit_measure(comm, o, s, 1, FIT_ROUNDS);
  p->wrong = s->wrong;
  if (rc == 0) {
    int np = fit_points(s, 0, m, t);
    p->done = cb_fit_line_rel(m, t, np, &p->fit) == 0;
    if (!p->done) snprintf(p->note, sizeof(p->note), "too few sizes to fit (%d)", np);
  }
  free(s);
  return rc;
}

/* The communicator of another transport class, or NULL with why in note:
 * on one host's shared memory, the farthest-reaching transport (the table's
 * last, which serves every pair); elsewhere, shared memory when every rank
 * is on one host. Every rank decides alike (from the peers' host ids, which
 * all share). */
static collie_comm_t *
fit_other_comm(collie_comm_t *comm, int *cls, char *note, size_t len)
{
  if (collie__comm_class(comm) == COLLIE_NET_CLASS_LOCAL) {
    *cls = collie__net_class_count() - 1;
  } else {
    for (int p = 1; p < collie_comm_size(comm); p++)
      if (strcmp(collie__comm_host(comm, p), collie__comm_host(comm, 0)) != 0) {
        snprintf(note, len, "ranks are on different hosts: no %s between them",
                 collie__net_class_name(COLLIE_NET_CLASS_LOCAL));
        return NULL;
      }
    *cls = COLLIE_NET_CLASS_LOCAL;
  }
  const char *want = collie__net_class_name(*cls);
  const char *old = getenv("COLLIE_TRANSPORT");
  char *saved = old ? strdup(old) : NULL;
  collie_comm_t *other = NULL;
  setenv("COLLIE_TRANSPORT", want, 1);
  collie_result_t rc = collie_comm_init(&other);
  if (saved)
    setenv("COLLIE_TRANSPORT", saved, 1);
  else
    unsetenv("COLLIE_TRANSPORT");
  free(saved);
  if (rc != COLLIE_SUCCESS) {
    snprintf(note, len, "a %s communicator could not be made: %s", want, collie_last_error());
    return NULL;
  }
  return other;
}

/* ---- Printing ---- */

/* Bandwidth in GB/s of beta us per byte ("inf" when 0). */
static void
fit_gbps(char *buf, size_t len, double beta)
{
  if (beta > 0)
    snprintf(buf, len, "%.3g", 1e-3 / beta);
  else
    snprintf(buf, len, "inf");
}

static void
fit_print_p2p(const struct fit_p2p *p, int np, int nranks)
{
  printf("\n## Point to point (sendrecv sweep, %d ranks)\n\n", nranks);
  printf("| class | alpha (us) | bandwidth (GB/s) | beta (us/B) | R^2 | sizes |\n");
  printf("|---|---|---|---|---|---|\n");
  for (int i = 0; i < np; i++) {
    char bw[32];
    if (!p[i].done) {
      printf("| %s | - | - | - | - | %s |\n", collie__net_class_name(p[i].cls), p[i].note);
      continue;
    }
    fit_gbps(bw, sizeof(bw), p[i].fit.beta_us_per_byte);
    printf("| %s | %.3g | %s | %.4g | %.4f | %d |\n", collie__net_class_name(p[i].cls),
           p[i].fit.alpha_us, bw, p[i].fit.beta_us_per_byte, p[i].fit.r2, p[i].fit.n);
  }
}

static void
fit_print_gamma(const double *gamma, const struct cb_opts *o)
{
  printf("\n## Reduction kernels (%s, %zu MiB per call, slowest rank)\n\n", collie__reduce_isa(),
         FIT_REDUCE_BYTES >> 20);
  printf("| dtype | op | gamma (us/B) | GB/s |\n|---|---|---|---|\n");
  for (int d = 0; d <= COLLIE_FLOAT64 + 1; d++) {
    collie_dtype_t dt = d <= COLLIE_FLOAT64 ? (collie_dtype_t)d : o->dtype;
    collie_op_t op = d <= COLLIE_FLOAT64 ? COLLIE_SUM : o->redop;
    if (d > COLLIE_FLOAT64 && op == COLLIE_SUM) break; /* already listed */
    if (gamma[d] > 0)
      printf("| %s | %s | %.4g | %.3g |\n", collie_dtype_name(dt), collie_op_name(op), gamma[d],
             1e-3 / gamma[d]);
    else
      printf("| %s | %s | - | - |\n", collie_dtype_name(dt), collie_op_name(op));
  }
}

static void
fit_print_colls(const struct fit_sweep *sw, int nsw, int cls, int nranks)
{
  printf("\n## Collectives (%s, %d ranks; one line per algorithm over the sweep)\n\n",
         collie__net_class_name(cls), nranks);
  printf("| collective | algorithm | alpha (us) | bandwidth (GB/s) | R^2 | sizes |\n");
  printf("|---|---|---|---|---|---|\n");
  for (int j = 0; j < nsw; j++) {
    const struct fit_sweep *s = &sw[j];
    for (int k = 0; k < s->nalgo; k++) {
      double m[FIT_MAXPTS], t[FIT_MAXPTS];
      struct cb_fit f;
      char bw[32];
      int n = fit_points(s, k, m, t);
      if (n == 1) {
        printf("| %s | %s | %.3g | - | - | 1 |\n", fit_coll_name(s), s->algo[k]->name, t[0]);
      } else if (n < 2 || cb_fit_line_rel(m, t, n, &f) != 0) {
        printf("| %s | %s | - | - | - | %d (cannot run or too few) |\n", fit_coll_name(s),
               s->algo[k]->name, n);
      } else {
        fit_gbps(bw, sizeof(bw), f.beta_us_per_byte);
        printf("| %s | %s | %.3g | %s | %.4f | %d |\n", fit_coll_name(s), s->algo[k]->name,
               f.alpha_us, bw, f.r2, n);
      }
    }
  }
}

/* ---- Picks ---- */

/* At size i of s: the measured best algorithm (*best) and the one models
 * picks (*pick; -1 when the pick was not measured there). Returns 0, or -1
 * when nothing was measured at i or the selection failed. */
static int
fit_pick(collie_comm_t *comm, const struct cb_opts *o, const struct fit_sweep *s, int i,
         const struct collie__models *models, int *pick, int *best)
{
  const struct collie__algo *a;
  *best = *pick = -1;
  for (int k = 0; k < s->nalgo; k++)
    if (s->t[k][i] > 0 && (*best < 0 || s->t[k][i] < s->t[*best][i])) *best = k;
  if (*best < 0) return -1;
  if (collie__comm_select(comm, s->kind, s->count[i], o->dtype, o->redop, o->root, models, &a) !=
      COLLIE_SUCCESS)
    return -1;
  for (int k = 0; k < s->nalgo; k++)
    if (s->algo[k] == a && s->t[k][i] > 0) *pick = k;
  return 0;
}

/* ---- --tune ---- */

/* Which algorithms of s get fit lines: those the current model picks at
 * some measured size, and those that beat that pick somewhere by more than
 * FIT_MARGIN. An algorithm that is never clearly better than the default
 * pick only looks better where noise favoured it, and would be picked there
 * next time for nothing; left without lines, it is not a candidate. */
static void
fit_candidates(collie_comm_t *comm, const struct cb_opts *o, struct fit_sweep *s)
{
  memset(s->keep, 0, sizeof(s->keep));
  for (int i = 0; i < s->n; i++) {
    int d, best;
    if (!s->have[i] || fit_pick(comm, o, s, i, NULL, &d, &best) != 0) continue;
    if (d >= 0) s->keep[d] = 1;
    if (d < 0 || s->t[best][i] * FIT_MARGIN < s->t[d][i]) s->keep[best] = 1;
  }
}

/* The fastest measured algorithm at point i among those kept (-1: none). */
static int
fit_best_kept(const struct fit_sweep *s, int i)
{
  int best = -1;
  for (int k = 0; k < s->nalgo; k++)
    if (s->keep[k] && s->t[k][i] > 0 && (best < 0 || s->t[k][i] < s->t[best][i])) best = k;
  return best;
}

/* Segments every kept algorithm of s at its current tolerance. */
static void
fit_segment(struct fit_sweep *s)
{
  for (int k = 0; k < s->nalgo; k++) {
    double m[FIT_MAXPTS], t[FIT_MAXPTS];
    int n = s->keep[k] ? fit_points(s, k, m, t) : 0;
    s->nseg[k] = n ? cb_fit_segments(m, t, n, fit_tols[s->tol_step], s->seg[k], FIT_MAXPTS) : 0;
    if (s->nseg[k] < 0) s->nseg[k] = 0;
  }
}

/* Writes path: the constants and every sweep's segments. Returns 0 or -1
 * (message on stderr). */
static int
fit_write(const char *path, const char *comment, const struct cb_tune_consts *c,
          const struct fit_sweep *sw, int nsw, int cls, int nranks)
{
  struct cb_tune_algo a[CB_NCOLL * FIT_MAXALGO];
  int na = 0;
  for (int j = 0; j < nsw; j++)
    for (int k = 0; k < sw[j].nalgo; k++)
      if (sw[j].nseg[k] > 0)
        a[na++] = (struct cb_tune_algo){cls,           nranks,      sw[j].kind, sw[j].algo[k]->id,
                                        sw[j].nseg[k], sw[j].seg[k]};
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "collie-bench: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  int rc = cb_tune_write(f, comment, c, a, na);
  if (fclose(f) != 0) rc = -1;
  if (rc != 0) fprintf(stderr, "collie-bench: writing %s failed: %s\n", path, strerror(errno));
  return rc;
}

/* Writes the tuning file, tightening each collective's tolerance until the
 * file's pick at every measured size is within FIT_SLACK of the best (rank 0
 * only; local). Returns the exit status (0, or 2 when path fails). */
static int
fit_tune(collie_comm_t *comm, const struct cb_opts *o, const char *path,
         const struct cb_tune_consts *c, const char *comment, struct fit_sweep *sw, int nsw)
{
  int cls = collie__comm_class(comm);
  int miss[CB_NCOLL] = {0}, sizes[CB_NCOLL] = {0}, lines = 0;
  for (int j = 0; j < nsw; j++) {
    fit_candidates(comm, o, &sw[j]);
    fit_segment(&sw[j]);
  }
  for (;;) { /* ends: each pass with a miss raises a tolerance, up to FIT_NTOLS */
    struct collie__models tuned;
    if (fit_write(path, comment, c, sw, nsw, cls, collie_comm_size(comm)) != 0)
      return FIT_EXIT_FILE;
    if (collie__comm_models_load(comm, path, &tuned) != COLLIE_SUCCESS) {
      fprintf(stderr, "collie-bench: %s does not load back: %s\n", path, collie_last_error());
      return FIT_EXIT_FILE;
    }
    int again = 0;
    for (int j = 0; j < nsw; j++) {
      miss[j] = sizes[j] = 0;
      for (int i = 0; i < sw[j].n; i++) {
        int pick, best;
        if (!sw[j].have[i] || fit_pick(comm, o, &sw[j], i, &tuned, &pick, &best) != 0) continue;
        best = fit_best_kept(&sw[j], i);
        if (best < 0) continue;
        sizes[j]++;
        miss[j] += pick < 0 || sw[j].t[pick][i] > FIT_SLACK * sw[j].t[best][i];
      }
      if (miss[j] && sw[j].tol_step + 1 < FIT_NTOLS) {
        sw[j].tol_step++;
        fit_segment(&sw[j]);
        again = 1;
      }
    }
    collie__models_free(&tuned);
    if (!again) break;
  }
  printf("\n## Tuning file %s\n\n", path);
  printf("| collective | algorithms with lines | fit lines | tolerance | sizes where the pick is "
         "the best of them |\n");
  printf("|---|---|---|---|---|\n");
  for (int j = 0; j < nsw; j++) {
    int nl = 0;
    char names[256] = "";
    size_t len = 0;
    for (int k = 0; k < sw[j].nalgo; k++) {
      nl += sw[j].nseg[k];
      if (sw[j].nseg[k] && len < sizeof(names))
        len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", len ? ", " : "",
                                sw[j].algo[k]->name);
    }
    lines += nl;
    printf("| %s | %s | %d | %g %% | %d of %d |\n", fit_coll_name(&sw[j]), names, nl,
           100 * fit_tols[sw[j].tol_step], sizes[j] - miss[j], sizes[j]);
  }
  printf("\nwrote %s: %d fit lines for %s communicators of %d ranks\n", path, lines,
         collie__net_class_name(cls), collie_comm_size(comm));
  return 0;
}

/* ---- --tune-check ---- */

/* Measures algorithms ks[0..nk) at point i of s FIT_CONFIRM more times. */
static int
fit_confirm(collie_comm_t *comm, const struct cb_opts *o, struct fit_sweep *s, int i, const int *ks,
            int nk)
{
  for (int r = 0; r < FIT_CONFIRM; r++)
    for (int q = 0; q < nk; q++) {
      int k = ks[r % 2 ? nk - 1 - q : q];
      if (k >= 0 && fit_point(comm, o, s, k, i) != 0) return -1;
    }
  s->confirmed[i] = 1;
  return 0;
}

/* Compares the default and tuned picks with the measured best at every
 * point, on every rank (the times are the same everywhere, so the points
 * measured again are too); rank 0 prints the table. A point where either
 * pick looks more than FIT_CHECK_LIMIT slower than the best is measured
 * FIT_CONFIRM more times first, as one slow or fast round would otherwise
 * decide. Returns the exit status. */
static int
fit_check(collie_comm_t *comm, const struct cb_opts *o, const char *path,
          const struct collie__models *tuned, struct fit_sweep *sw, int nsw)
{
  int rank = collie_comm_rank(comm);
  for (int j = 0; j < nsw; j++)
    for (int i = 0; i < sw[j].n; i++) {
      int ks[3], b2;
      if (!sw[j].have[i] || fit_pick(comm, o, &sw[j], i, NULL, &ks[0], &ks[2]) != 0 ||
          fit_pick(comm, o, &sw[j], i, tuned, &ks[1], &b2) != 0)
        continue;
      double tb = sw[j].t[ks[2]][i];
      if ((ks[0] >= 0 && sw[j].t[ks[0]][i] <= FIT_CHECK_LIMIT * tb) &&
          (ks[1] >= 0 && sw[j].t[ks[1]][i] <= FIT_CHECK_LIMIT * tb))
        continue;
      if (fit_confirm(comm, o, &sw[j], i, ks, 3) != 0) {
        if (rank == 0)
          fprintf(stderr, "collie-bench: %s failed: %s\n", fit_coll_name(&sw[j]),
                  collie_last_error());
        return FIT_EXIT_COLLIE;
      }
    }
  double worst = 0, worst_default = 0;
  int rows = 0, tuned_best = 0, default_best = 0, again = 0;
  if (rank == 0) {
    printf("\n## Tuning check: %s (%s, %d ranks)\n\n", path,
           collie__net_class_name(collie__comm_class(comm)), collie_comm_size(comm));
    printf("| collective | bytes | default pick | tuned pick | measured best | best (us) | default "
           "/ best | tuned / best |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
  }
  for (int j = 0; j < nsw; j++) {
    struct fit_sweep *s = &sw[j];
    for (int i = 0; i < s->n; i++) {
      int dpick, tpick, best, b2;
      if (!s->have[i]) continue;
      if (fit_pick(comm, o, s, i, NULL, &dpick, &best) != 0 ||
          fit_pick(comm, o, s, i, tuned, &tpick, &b2) != 0)
        continue;
      double tb = s->t[best][i];
      double rd = dpick >= 0 ? s->t[dpick][i] / tb : INFINITY;
      double rt = tpick >= 0 ? s->t[tpick][i] / tb : INFINITY;
      if (rank == 0)
        printf("| %s | %zu | %s | %s | %s | %.2f | %.2f | %.2f%s%s |\n", fit_coll_name(s),
               s->bytes[i], dpick >= 0 ? s->algo[dpick]->name : "?",
               tpick >= 0 ? s->algo[tpick]->name : "?", s->algo[best]->name, tb, rd, rt,
               s->confirmed[i] ? " (r)" : "", rt > FIT_CHECK_LIMIT ? " (!)" : "");
      rows++;
      again += s->confirmed[i];
      tuned_best += tpick == best;
      default_best += dpick == best;
      worst = rt > worst ? rt : worst;
      worst_default = rd > worst_default ? rd : worst_default;
    }
  }
  if (rank == 0) {
    printf("\nTimes are the median of %d rounds; (r): %d more rounds at that point, as a pick "
           "looked more than %.0f %% slower than the best.\n",
           FIT_ROUNDS, FIT_CONFIRM, 100 * (FIT_CHECK_LIMIT - 1));
    printf("%d points (%d measured again): the tuned pick is the measured best at %d (worst ratio "
           "%.2f), the default pick at %d (worst ratio %.2f)\n",
           rows, again, tuned_best, worst, default_best, worst_default);
    if (worst > FIT_CHECK_LIMIT)
      printf("FAILED: a tuned pick is more than %.0f %% slower than the best\n",
             100 * (FIT_CHECK_LIMIT - 1));
  }
  return worst > FIT_CHECK_LIMIT ? FIT_EXIT_BAD : 0;
}

/* ---- Entry ---- */

/* The sweeps of every collective o selects (sendrecv aside, and alltoallv:
 * the library picks its algorithm from the per-peer counts, which no fit
 * line of a size can stand for, and collie__comm_select does not answer
 * for it). */
static int
fit_sweeps_init(collie_comm_t *comm, const struct cb_opts *o, const size_t *req, int n,
                struct fit_sweep *sw)
{
  int nsw = 0;
  for (int c = 0; c < CB_NCOLL; c++) {
    if (!o->ops[c] || c == CB_SENDRECV || c == CB_ALLTOALLV) continue;
    fit_sweep_init(&sw[nsw], comm, o, c, req, n);
    if (sw[nsw].nalgo > 0) nsw++;
  }
  return nsw;
}

/* The header comment of a tuning file. */
static void
fit_comment(char *buf, size_t len, collie_comm_t *comm, const struct cb_opts *o)
{
  char host[256] = "?", when[64] = "?";
  time_t now = time(NULL);
  struct tm tm;
  gethostname(host, sizeof(host) - 1);
  if (localtime_r(&now, &tm)) strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
  snprintf(
      buf, len,
      "collie tuning file: written by collie-bench --tune on %s at %s\n"
      "%d ranks, %s; sweep %zu..%zu bytes x %g, %s %s; every point the median of %d rounds\n"
      "class constants: point-to-point and reduction fits (they serve every communicator\n"
      "size); fit lines: per class, communicator size, collective and algorithm (docs/tuning.md)",
      host, when, collie_comm_size(comm), collie__net_class_name(collie__comm_class(comm)),
      o->minbytes, o->maxbytes, o->stepfactor, collie_dtype_name(o->dtype),
      collie_op_name(o->redop), FIT_ROUNDS);
}

int
cb_fit_main(collie_comm_t *comm, const struct cb_opts *o, const char *tune_path, int check_only)
{
  int rank = collie_comm_rank(comm), status = 0, nsw = 0, wrong = 0;
  int cls = collie__comm_class(comm);
  size_t req[FIT_MAXPTS];
  int n = fit_sizes(o, req, FIT_MAXPTS);
  struct fit_sweep *sw = calloc(CB_NCOLL, sizeof(*sw));
  struct collie__models tuned = {0};
  if (!sw) {
    fprintf(stderr, "collie-bench: out of memory\n");
    status = FIT_EXIT_COLLIE;
  }
  if (rank == 0 && getenv("COLLIE_TUNING_FILE") && tune_path)
    fprintf(stderr,
            "collie-bench: note: COLLIE_TUNING_FILE=%s is in effect: the \"default\" model is it\n",
            getenv("COLLIE_TUNING_FILE"));
  if (!status && check_only && tune_path &&
      collie__comm_models_load(comm, tune_path, &tuned) != COLLIE_SUCCESS) {
    fprintf(stderr, "collie-bench: rank %d: %s\n", rank, collie_last_error());
    status = FIT_EXIT_FILE;
  }
  /* Every rank must know whether the others go on before measuring together. */
  int32_t st = status;
  if (collie_allreduce(comm, &st, &st, 1, COLLIE_INT32, COLLIE_MAX, NULL, NULL) != COLLIE_SUCCESS)
    st = FIT_EXIT_COLLIE;
  status = st;
  if (status) goto out;
  nsw = fit_sweeps_init(comm, o, req, n, sw);
  if (rank == 0 && o->ops[CB_ALLTOALLV])
    printf("# note: alltoallv is not fitted: its cost depends on the per-peer counts, not on a "
           "size\n");

  if (check_only) {
    if (fit_measure(comm, o, sw, nsw, FIT_ROUNDS) != 0)
      status = FIT_EXIT_COLLIE;
    else
      status = fit_check(comm, o, tune_path, &tuned, sw, nsw);
  } else {
    struct fit_p2p p2p[2] = {{.cls = cls}, {.cls = !cls}};
    double gamma[COLLIE_FLOAT64 + 2];
    int np = 1;
    if (collie_comm_size(comm) < 2) {
      snprintf(p2p[0].note, sizeof(p2p[0].note), "one rank: no peer");
    } else {
      if (fit_p2p_measure(comm, o, req, n, &p2p[0]) != 0) status = FIT_EXIT_COLLIE;
      collie_comm_t *other = NULL;
      if (!status) other = fit_other_comm(comm, &p2p[1].cls, p2p[1].note, sizeof(p2p[1].note));
      if (other && fit_p2p_measure(other, o, req, n, &p2p[1]) != 0) status = FIT_EXIT_COLLIE;
      if (other) collie_comm_destroy(other);
      np = 2;
    }
    if (!status && fit_gamma(comm, o, gamma) != 0) status = FIT_EXIT_COLLIE;
    if (!status && fit_measure(comm, o, sw, nsw, FIT_ROUNDS) != 0) status = FIT_EXIT_COLLIE;
    if (p2p[0].wrong || p2p[1].wrong) wrong = 1;
    if (!status && rank == 0) {
      fit_print_p2p(p2p, np, collie_comm_size(comm));
      fit_print_gamma(gamma, o);
      fit_print_colls(sw, nsw, cls, collie_comm_size(comm));
    }
    if (!status && rank == 0 && tune_path) {
      struct cb_tune_consts c;
      char comment[1024];
      memset(&c, 0, sizeof(c));
      double g = gamma[COLLIE_FLOAT64 + 1] > 0 ? gamma[COLLIE_FLOAT64 + 1] : gamma[o->dtype];
      for (int i = 0; i < np; i++) {
        if (!p2p[i].done) continue;
        c.have[p2p[i].cls] = 1;
        c.alpha_us[p2p[i].cls] = p2p[i].fit.alpha_us;
        c.beta_us[p2p[i].cls] = p2p[i].fit.beta_us_per_byte;
        c.gamma_us[p2p[i].cls] = g > 0 ? g : collie__comm_models(comm)->cls[p2p[i].cls].gamma_us;
      }
      fit_comment(comment, sizeof(comment), comm, o);
      status = fit_tune(comm, o, tune_path, &c, comment, sw, nsw);
    }
  }
  for (int j = 0; j < nsw; j++)
    if (sw[j].wrong) wrong = 1;
  if (wrong && !status) status = FIT_EXIT_BAD;
  fflush(stdout);
out:
  collie__models_free(&tuned);
  free(sw);
  st = status;
  if (collie_allreduce(comm, &st, &st, 1, COLLIE_INT32, COLLIE_MAX, NULL, NULL) != COLLIE_SUCCESS)
    return status ? status : FIT_EXIT_COLLIE;
  return st;
}
