/*
 * select.c - which algorithm runs a call.
 *
 * Every algorithm estimates its own time with the alpha-beta-gamma model:
 * alpha per message step (latency), beta per byte moved, gamma per byte
 * reduced, with one set of constants per transport class (shm when every
 * rank of the communicator shares a host, tcp otherwise). The call runs the
 * cheapest, unless its opts or COLLIE_ALGO name an algorithm; a name that is
 * unknown, belongs to another collective, or cannot run this call is an
 * error, never a silent fallback.
 *
 * The default constants were measured on the reference machine (2 cores,
 * docs/algorithms.md says how); COLLIE_TUNING_FILE replaces them with what
 * collie-bench measures on yours. Oversubscription (more local ranks than
 * cores) raises alpha: a step then waits for the peer to get a core.
 *
 * A tuning file may also carry fit lines: each algorithm's measured time as
 * alpha + beta x bytes over byte ranges, per class and communicator size
 * (collie-bench --tune writes them; docs/tuning.md). Where they exist for a
 * call's class, size and collective they replace the formulas, since a
 * measurement of the algorithm itself beats any model of it. Every rank must
 * read the same file, as every rank must pick the same algorithm.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/topo.h"
#include "util/error.h"

static const struct collie__algo *const select_table[] = {
#define COLLIE_XX_(name) &collie__algo_##name,
    COLLIE_ALGOS(COLLIE_XX_)
#undef COLLIE_XX_
};
#define SELECT_N (int)(sizeof(select_table) / sizeof(select_table[0]))

const struct collie__algo *const *
collie__algo_table(int *n)
{
  *n = SELECT_N;
  return select_table;
}

static const char *select_algo_names[] = {
#define COLLIE_XX_(name, str) str,
    COLLIE_ALGO_MAP(COLLIE_XX_)
#undef COLLIE_XX_
};

static const struct collie__algo *
select_find(int kind, int id)
{
  for (int i = 0; i < SELECT_N; i++)
    if (select_table[i]->kind == kind && select_table[i]->id == id) return select_table[i];
  return NULL;
}

/* ---- The model ---- */

void
collie__models_default(struct collie__models *m, int oversub_cores)
{
  int oversubscribed = oversub_cores > 0;
  /* Each class is a transport, whose file states its step and byte costs
   * (collie__xport_ops.cost). Reducing float32 runs at ~10 GB/s of input,
   * whatever carries the bytes. */
  for (int i = 0; i < collie__net_class_count() && i < COLLIE_CLASS_MAX; i++) {
    const struct collie__xport_cost *x = collie__net_class_cost(i);
    m->cls[i] = (struct collie__model){oversubscribed ? x->alpha_oversub_us : x->alpha_us,
                                       x->beta_us, 1.0e-4, oversub_cores};
  }
}

/* "shm|tcp": the class names, as the tuning file spells them. */
static const char *
select_class_choices(char *buf, size_t len)
{
  size_t n = 0;
  buf[0] = '\0';
  for (int i = 0; i < collie__net_class_count() && n < len; i++)
    n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "|" : "", collie__net_class_name(i));
  return buf;
}

/* ---- The tuning file ----
 *
 * Two kinds of line. "shm.alpha_us = 1.5" sets one constant of a class's
 * formula model. "fit.shm.2.allreduce.ring = 0 4095 1.2 2.5e-4" is a line
 * measured by collie-bench: on 2-rank shm communicators, allreduce with ring
 * takes 1.2 us + 2.5e-4 us per byte for 0..4095 bytes. Several disjoint
 * ranges of one algorithm make a piecewise model, since one line cannot
 * follow a curve that bends where messages leave the cache or switch from
 * latency- to bandwidth-bound. The file is parsed into a fresh table and
 * swapped in only when every line is valid, so a bad file leaves the model
 * as it was, and loading the same file twice leaves one copy of its lines. */

#define SELECT_FIT_SYNTAX                                                                          \
  "\"fit.<%s>.<nranks>.<collective>.<algorithm> = <lo_bytes> <hi_bytes> <alpha_us> "               \
  "<beta_us_per_byte>\""

/* Orders fit lines by (cls, kind, nranks, algo, lo): the lines one call can
 * use are adjacent, and each algorithm's ranges follow in byte order. */
static int
select_fit_cmp(const void *pa, const void *pb)
{
  const struct collie__fit *a = pa, *b = pb;
  if (a->cls != b->cls) return a->cls < b->cls ? -1 : 1;
  if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
  if (a->nranks != b->nranks) return a->nranks < b->nranks ? -1 : 1;
  if (a->algo != b->algo) return a->algo < b->algo ? -1 : 1;
  if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
  return 0;
}

/* Whether tok is a non-negative finite number; sets *v. */
static int
select_number(const char *tok, double *v)
{
  char *end;
  errno = 0;
  *v = strtod(tok, &end);
  return !errno && end != tok && !*end && *v >= 0 && !isinf(*v);
}

/* Whether tok is a byte count (decimal digits only, no sign); sets *v. */
static int
select_bytes(const char *tok, size_t *v)
{
  char *end;
  if (*tok < '0' || *tok > '9') return 0;
  errno = 0;
  unsigned long long x = strtoull(tok, &end, 10);
  if (errno || *end || x > SIZE_MAX) return 0;
  *v = (size_t)x;
  return 1;
}

/* Parses one fit line: key (the text before '=', trimmed) and val (after it)
 * into f. INVALID_ARGUMENT naming path:lineno and the offending part. */
static collie_result_t
select_parse_fit(const char *path, int lineno, char *key, char *val, struct collie__fit *f)
{
  char *part[6], names[64];
  int n = 0;
  for (char *p = key; n < 6; n++) {
    part[n] = p;
    char *dot = strchr(p, '.');
    if (!dot) {
      n++;
      break;
    }
    *dot = '\0';
    p = dot + 1;
  }
  if (n != 5 || !*part[1] || !*part[2] || !*part[3] || !*part[4])
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s:%d: expected " SELECT_FIT_SYNTAX, path, lineno,
                       select_class_choices(names, sizeof(names)));
  memset(f, 0, sizeof(*f));
  f->line = lineno;
  f->cls = -1;
  f->cls = collie__net_class_index(part[1]);
  if (f->cls < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s:%d: unknown class \"%s\" (%s)", path, lineno,
                       part[1], select_class_choices(names, sizeof(names)));
  size_t nr;
  if (!select_bytes(part[2], &nr) || nr < 1 || nr > (1u << 24))
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s:%d: \"%s\" is not a number of ranks (an integer, 1 or more)", path,
                       lineno, part[2]);
  f->nranks = (int)nr;
  f->kind = -1;
  for (int k = 1; k < COLLIE_KIND_COUNT_; k++)
    for (int i = 0; i < SELECT_N; i++)
      if (select_table[i]->kind == k && !strcmp(part[3], collie__kind_name(k))) f->kind = k;
  if (f->kind < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s:%d: unknown collective \"%s\"", path, lineno,
                       part[3]);
  f->algo = -1;
  for (int a = 1; a < COLLIE_ALGO_COUNT_; a++)
    if (!strcmp(part[4], select_algo_names[a])) f->algo = a;
  if (f->algo < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s:%d: unknown algorithm \"%s\"", path, lineno,
                       part[4]);
  if (!select_find(f->kind, f->algo))
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s:%d: %s has no algorithm \"%s\"", path, lineno,
                       part[3], part[4]);
  char *tok[5], *save = NULL;
  int nt = 0;
  for (char *t = strtok_r(val, " \t\r\n", &save); t && nt < 5; t = strtok_r(NULL, " \t\r\n", &save))
    tok[nt++] = t;
  if (nt != 4)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s:%d: expected 4 values after '=' (<lo_bytes> <hi_bytes> <alpha_us> "
                       "<beta_us_per_byte>), got %s",
                       path, lineno, nt < 4 ? "fewer" : "more");
  for (int i = 0; i < 2; i++)
    if (!select_bytes(tok[i], i ? &f->hi : &f->lo))
      return collie__err(COLLIE_INVALID_ARGUMENT, "%s:%d: \"%s\" is not a byte count", path, lineno,
                         tok[i]);
  if (f->lo > f->hi)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s:%d: empty range: lo_bytes %zu is above hi_bytes %zu", path, lineno,
                       f->lo, f->hi);
  for (int i = 2; i < 4; i++)
    if (!select_number(tok[i], i == 2 ? &f->alpha_us : &f->beta_us))
      return collie__err(COLLIE_INVALID_ARGUMENT, "%s:%d: \"%s\" is not a non-negative number",
                         path, lineno, tok[i]);
  return COLLIE_SUCCESS;
}

/* Sorts fits and refuses two ranges of one algorithm that share a byte. */
static collie_result_t
select_check_fits(const char *path, struct collie__fit *fits, int n)
{
  if (n > 1) qsort(fits, (size_t)n, sizeof(*fits), select_fit_cmp);
  for (int i = 1; i < n; i++) {
    const struct collie__fit *a = &fits[i - 1], *b = &fits[i];
    if (a->cls != b->cls || a->kind != b->kind || a->nranks != b->nranks || a->algo != b->algo ||
        a->hi < b->lo)
      continue;
    const struct collie__fit *first = a->line < b->line ? a : b, *later = a->line < b->line ? b : a;
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s:%d: fit.%s.%d.%s.%s range %zu..%zu overlaps %zu..%zu of line %d", path,
                       later->line, collie__net_class_name(a->cls), a->nranks,
                       collie__kind_name(a->kind), select_algo_names[a->algo], later->lo, later->hi,
                       first->lo, first->hi, first->line);
  }
  return COLLIE_SUCCESS;
}

collie_result_t
collie__models_load(const char *path, struct collie__models *m)
{
  FILE *f = fopen(path, "r");
  if (!f) return collie__err_errno(COLLIE_SYSTEM_ERROR, "COLLIE_TUNING_FILE %s", path);
  struct collie__model cls[COLLIE_CLASS_MAX];
  char names[64], names2[64];
  memcpy(cls, m->cls, sizeof(cls));
  struct collie__fit *fits = NULL;
  int nfits = 0, cap = 0;
  char line[512];
  int lineno = 0;
  collie_result_t rc = COLLIE_SUCCESS;
  while (rc == COLLIE_SUCCESS && fgets(line, sizeof(line), f)) {
    char c[16], key[32], *end;
    lineno++;
    size_t len = strlen(line);
    int more = len == sizeof(line) - 1 && line[len - 1] != '\n' ? fgetc(f) : EOF;
    if (more != EOF) {
      rc = collie__err(COLLIE_INVALID_ARGUMENT, "%s:%d: line longer than %zu characters", path,
                       lineno, sizeof(line) - 2);
      break;
    }
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char *p = line + strspn(line, " \t\r\n");
    if (!*p) continue;
    char *eq = strchr(p, '=');
    if (eq && !strncmp(p, "fit.", 4)) {
      char *kend = eq;
      while (kend > p && (kend[-1] == ' ' || kend[-1] == '\t')) kend--;
      *kend = '\0';
      if (nfits == cap) {
        int ncap = cap ? 2 * cap : 64;
        struct collie__fit *g = realloc(fits, (size_t)ncap * sizeof(*fits));
        if (!g) {
          rc = collie__err(COLLIE_SYSTEM_ERROR, "%s:%d: out of memory for fit lines", path, lineno);
          break;
        }
        fits = g;
        cap = ncap;
      }
      rc = select_parse_fit(path, lineno, p, eq + 1, &fits[nfits]);
      if (rc == COLLIE_SUCCESS) nfits++;
      continue;
    }
    int n = 0;
    if (!eq || sscanf(p, "%15[a-z].%31[a-z_] %n", c, key, &n) != 2 || p + n != eq) {
      rc = collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s:%d: expected \"<%s>.<alpha_us|beta_us|gamma_us> = <number>\" or "
                       "" SELECT_FIT_SYNTAX,
                       path, lineno, select_class_choices(names, sizeof(names)),
                       select_class_choices(names2, sizeof(names2)));
      break;
    }
    errno = 0;
    double v = strtod(eq + 1, &end);
    end += strspn(end, " \t\r\n");
    if (errno || end == eq + 1 || *end || !(v >= 0) || isinf(v)) {
      rc = collie__err(COLLIE_INVALID_ARGUMENT, "%s:%d: \"%s\" is not a non-negative number", path,
                       lineno, eq + 1 + strspn(eq + 1, " \t"));
      break;
    }
    int ci = -1;
    ci = collie__net_class_index(c);
    double *field = NULL;
    if (ci >= 0 && !strcmp(key, "alpha_us")) field = &cls[ci].alpha_us;
    if (ci >= 0 && !strcmp(key, "beta_us")) field = &cls[ci].beta_us;
    if (ci >= 0 && !strcmp(key, "gamma_us")) field = &cls[ci].gamma_us;
    if (!field)
      rc = collie__err(COLLIE_INVALID_ARGUMENT, "%s:%d: unknown key \"%s.%s\"", path, lineno, c,
                       key);
    else
      *field = v;
  }
  if (rc == COLLIE_SUCCESS && ferror(f))
    rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "COLLIE_TUNING_FILE %s: read failed", path);
  fclose(f);
  if (rc == COLLIE_SUCCESS) rc = select_check_fits(path, fits, nfits);
  if (rc != COLLIE_SUCCESS) {
    free(fits);
    return rc;
  }
  free(m->fits);
  m->fits = fits;
  m->nfits = nfits;
  memcpy(m->cls, cls, sizeof(cls));
  return COLLIE_SUCCESS;
}

void
collie__models_free(struct collie__models *m)
{
  free(m->fits);
  m->fits = NULL;
  m->nfits = 0;
}

/* The fit lines for calls of (cls, kind) on nranks ranks: *n of them,
 * starting at the returned one (NULL when there are none). Binary search, as
 * it runs for every call once a tuning file has lines. */
static const struct collie__fit *
select_fit_group(const struct collie__models *m, int cls, int kind, int nranks, int *n)
{
  *n = 0;
  if (!m->nfits) return NULL;
  /* algo -1 sorts before every real line of the group. */
  struct collie__fit key = {.cls = cls, .kind = kind, .nranks = nranks, .algo = -1};
  int lo = 0, hi = m->nfits;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (select_fit_cmp(&m->fits[mid], &key) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  int e = lo;
  while (e < m->nfits && m->fits[e].cls == cls && m->fits[e].kind == kind &&
         m->fits[e].nranks == nranks)
    e++;
  *n = e - lo;
  return *n ? &m->fits[lo] : NULL;
}

/* The cost of algo at bytes from the group's lines (see collie__fit_cost). */
static double
select_group_cost(const struct collie__fit *g, int n, int algo, size_t bytes, int *extrapolated)
{
  const struct collie__fit *prev = NULL, *use = NULL;
  int outside = 1;
  for (int i = 0; i < n && !use; i++) {
    if (g[i].algo != algo) continue;
    if (bytes < g[i].lo) {
      /* In the gap after prev (or before the first range): the range nearer in
       * ratio, as sweeps are geometric; +1 keeps 0 bytes finite. */
      double b = (double)bytes + 1;
      use = prev && b * b <= ((double)prev->hi + 1) * ((double)g[i].lo + 1) ? prev : &g[i];
    } else if (bytes <= g[i].hi) {
      use = &g[i];
      outside = 0;
    } else {
      prev = &g[i];
    }
  }
  if (!use) use = prev;
  if (!use) return -1;
  if (extrapolated) *extrapolated = outside;
  return use->alpha_us + use->beta_us * (double)bytes;
}

double
collie__fit_cost(const struct collie__models *models, const struct collie__call *call, int algo,
                 int *extrapolated)
{
  int n, cls = call->cls;
  const struct collie__fit *g = select_fit_group(models, cls, call->kind, call->size, &n);
  if (!g) return -1;
  return select_group_cost(g, n, algo, collie__call_bytes(call), extrapolated);
}

size_t
collie__call_bytes(const struct collie__call *c)
{
  size_t n = 0;
  switch (c->kind) {
  case COLLIE_KIND_ALLGATHER:
  case COLLIE_KIND_REDUCE_SCATTER:
  case COLLIE_KIND_ALLTOALL:
  case COLLIE_KIND_GATHER:
  case COLLIE_KIND_SCATTER:
    n = c->count * (size_t)c->size;
    break;
  case COLLIE_KIND_ALLGATHERV:
    for (int q = 0; q < c->size; q++) n += c->recvcounts[q];
    break;
  case COLLIE_KIND_ALLTOALLV:
    /* Rank-local; only the transport-independent shape matters for the model. */
    for (int q = 0; q < c->size; q++) n += c->sendcounts[q];
    break;
  default:
    n = c->count;
    break;
  }
  return n * c->esize;
}

/* ---- COLLIE_ALGO ---- */

collie_result_t
collie__algo_parse(const char *spec, struct collie__algo_table *out)
{
  memset(out, 0, sizeof(*out));
  if (!spec) return COLLIE_SUCCESS;
  const char *p = spec;
  while (*p) {
    char item[128], *eq;
    size_t n = strcspn(p, ",");
    if (n == 0 || n >= sizeof(item))
      return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_ALGO=\"%s\": empty or overlong item",
                         spec);
    memcpy(item, p, n);
    item[n] = '\0';
    p += n + (p[n] == ',');
    if (!(eq = strchr(item, '=')))
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "COLLIE_ALGO=\"%s\": \"%s\" is not collective=algorithm", spec, item);
    *eq = '\0';
    int kind = -1, id = -1;
    for (int k = 1; k < COLLIE_KIND_COUNT_; k++)
      if (!strcmp(item, collie__kind_name(k))) kind = k;
    for (int a = 0; a < COLLIE_ALGO_COUNT_; a++)
      if (!strcmp(eq + 1, select_algo_names[a])) id = a;
    if (kind < 0)
      return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_ALGO=\"%s\": unknown collective \"%s\"",
                         spec, item);
    if (id < 0)
      return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_ALGO=\"%s\": unknown algorithm \"%s\"",
                         spec, eq + 1);
    if (id != COLLIE_ALGO_AUTO && !select_find(kind, id))
      return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_ALGO=\"%s\": %s has no algorithm \"%s\"",
                         spec, item, eq + 1);
    out->forced[kind] = id;
  }
  return COLLIE_SUCCESS;
}

/* ---- Selection ---- */

/* Whether a can run c at all (memory kind, shared memory, a kernel, the
 * wire format), whatever its cost. */
static int
select_can_run(const struct collie__algo *a, const struct collie__call *c)
{
  if (!(a->needs & COLLIE_NEEDS_DEVICE) != (c->mem != COLLIE_MEM_CUDA)) return 0;
  if ((a->needs & COLLIE_NEEDS_ALL_SHM) && !c->all_shm) return 0;
  if ((a->needs & COLLIE_NEEDS_REDUCE) && !c->reduce) return 0;
  return collie__wire_fits(a->needs, collie__call_compressed(c));
}

const struct collie__algo *
collie__algo_cheapest_flat(const struct collie__call *c, const struct collie__model *m,
                           double *cost_us)
{
  const struct collie__algo *best = NULL;
  double best_t = -1;
  for (int i = 0; i < SELECT_N; i++) {
    const struct collie__algo *a = select_table[i];
    if (a->kind != c->kind || a->id == COLLIE_ALGO_HIERARCHICAL ||
        (a->needs & COLLIE_NEEDS_ALL_SHM) || !select_can_run(a, c))
      continue;
    double t = a->cost_us(c, m);
    if (t >= 0 && (!best || t < best_t)) {
      best = a;
      best_t = t;
    }
  }
  if (cost_us) *cost_us = best_t;
  return best;
}

static double
select_cost(const struct collie__algo *a, const struct collie__call *c,
            const struct collie__model *m)
{
  if (!select_can_run(a, c)) return -1;
  /* A flat algorithm on several hosts: in most of its steps every rank of
   * a host talks to another host at once, and they share its link, so the
   * network's beta counts once per rank of the largest host. A ring or a
   * chain crosses each boundary between hosts with one rank at a time (ranks
   * placed host by host, as launchers do); linear and bruck price the link
   * themselves (COLLIE_ONE_LINK). The hierarchical algorithms cost their
   * levels themselves. */
  const struct collie__topo *t = c->topo;
  if (t && t->nhosts > 1 && t->max_local > 1 && !(a->needs & COLLIE_ONE_LINK)) {
    struct collie__model shared = *m;
    shared.beta_us *= t->max_local;
    return a->cost_us(c, &shared);
  }
  return a->cost_us(c, m);
}

/* Logs every candidate's estimate once per (collective, size bucket); g/ng:
 * the fit lines that decided (NULL: the formula model did). */
static void
select_log_table(const struct collie__call *c, const struct collie__model *m, int cls,
                 const struct collie__fit *g, int ng, const struct collie__algo *chosen,
                 struct collie__select_log *log)
{
  size_t bytes = collie__call_bytes(c);
  int bucket = 0;
  while (bucket < 63 && ((size_t)2 << bucket) <= bytes) bucket++;
  if (log->logged[c->kind] & (1ull << bucket)) return;
  log->logged[c->kind] |= 1ull << bucket;
  char line[768];
  size_t o = 0;
  for (int i = 0; i < SELECT_N && o < sizeof(line); i++) {
    const struct collie__algo *a = select_table[i];
    if (a->kind != c->kind) continue;
    double t = select_cost(a, c, m);
    int extra = 0;
    if (t >= 0 && g) t = select_group_cost(g, ng, a->id, bytes, &extra);
    if (t < 0)
      o += (size_t)snprintf(line + o, sizeof(line) - o, " %s %s", a->name,
                            g && select_cost(a, c, m) >= 0 ? "unfitted" : "n/a");
    else
      o += (size_t)snprintf(line + o, sizeof(line) - o, " %s %.1f us%s%s", a->name, t,
                            g ? (extra ? " (fit, extrapolated)" : " (fit)") : "",
                            a == chosen ? " <-" : "");
  }
  COLLIE_INFO("COLL", "%s of %zu bytes (%zu x %s, %d ranks, %s %s):%s", collie__kind_name(c->kind),
              bytes, c->count, collie_dtype_name(c->dtype), c->size, collie__net_class_name(cls),
              g ? "fit lines" : "model", line);
}

collie_result_t
collie__algo_select(const struct collie__call *call, int opts_algo,
                    const struct collie__algo_table *table, const struct collie__models *models,
                    struct collie__select_log *log, const struct collie__algo **out)
{
  int cls = call->cls;
  const struct collie__model *m = &models->cls[cls];
  int id = opts_algo != COLLIE_ALGO_AUTO ? opts_algo : table->forced[call->kind];
  if (id < 0 || id >= COLLIE_ALGO_COUNT_)
    return collie__err(COLLIE_INVALID_ARGUMENT, "opts->algorithm = %d is not a COLLIE_ALGO_* value",
                       id);
  if (id != COLLIE_ALGO_AUTO && opts_algo == COLLIE_ALGO_AUTO) {
    /* COLLIE_ALGO names one algorithm per collective for the whole job: a
     * device algorithm applies to calls on device buffers, a host one to
     * calls on host memory (device calls asking for a host algorithm are
     * staged through host memory before they get here, stage.c). */
    const struct collie__algo *a = select_find(call->kind, id);
    if (a && !(a->needs & COLLIE_NEEDS_DEVICE) != (call->mem != COLLIE_MEM_CUDA))
      id = COLLIE_ALGO_AUTO;
  }
  if (id != COLLIE_ALGO_AUTO) {
    const struct collie__algo *a = select_find(call->kind, id);
    if (!a)
      return collie__err(COLLIE_INVALID_ARGUMENT, "%s has no algorithm \"%s\"",
                         collie__kind_name(call->kind), select_algo_names[id]);
    if (select_cost(a, call, m) < 0)
      return collie__err(COLLIE_INVALID_ARGUMENT, "%s algorithm \"%s\" cannot run this call%s",
                         collie__kind_name(call->kind), a->name,
                         a->id == COLLIE_ALGO_CUDA_IPC
                             ? " (it needs CUDA device buffers, every rank on one host, and a "
                               "libcollie built with nvcc)"
                         : (a->needs & COLLIE_NEEDS_DEVICE)
                             ? " (it needs CUDA device buffers on ranks of several hosts, "
                               "larger than COLLIE_CUDA_CHUNK)"
                         : (a->needs & COLLIE_NEEDS_ALL_SHM) && !call->all_shm
                             ? " (it needs every rank on one host)"
                             : "");
    *out = a;
    return COLLIE_SUCCESS;
  }
  /* Measured lines for this communicator's class, size and collective
   * replace the formula: only the algorithms that were measured compete. */
  int ng = 0;
  const struct collie__fit *g = select_fit_group(models, cls, call->kind, call->size, &ng);
  size_t bytes = g ? collie__call_bytes(call) : 0;
  const struct collie__algo *best = NULL;
  double best_t = 0;
  for (int pass = g ? 0 : 1; pass < 2 && !best; pass++) {
    if (pass == 1) g = NULL; /* no fitted algorithm can run it: the formula decides */
    for (int i = 0; i < SELECT_N; i++) {
      const struct collie__algo *a = select_table[i];
      if (a->kind != call->kind) continue;
      double t = select_cost(a, call, m);
      if (t >= 0 && g) t = select_group_cost(g, ng, a->id, bytes, NULL);
      /* Ties go to the earlier entry, so every rank breaks them the same way. */
      if (t >= 0 && (!best || t < best_t)) {
        best = a;
        best_t = t;
      }
    }
  }
  if (!best)
    return collie__err(COLLIE_INTERNAL_ERROR, "no algorithm can run %s",
                       collie__kind_name(call->kind));
  if (collie__log_level >= COLLIE_LOG_INFO) select_log_table(call, m, cls, g, ng, best, log);
  *out = best;
  return COLLIE_SUCCESS;
}

/* ---- Predictions (collie-bench --model) ---- */

const struct collie__algo *
collie__algo_predict(int kind, const struct collie__topo *topo, size_t count, collie_dtype_t dtype,
                     const struct collie__models *models, double cost[COLLIE_ALGO_COUNT_])
{
  int one_host = topo->nhosts == 1;
  int cls = one_host ? COLLIE_NET_CLASS_LOCAL : collie__net_class_remote();
  struct collie__call call = {.kind = kind,
                              .count = count,
                              .dtype = dtype,
                              .op = COLLIE_SUM,
                              .esize = collie_dtype_size(dtype),
                              .size = topo->size,
                              .cls = cls,
                              .all_shm = 0, /* shm_flat needs a real segment to be costed */
                              .topo = topo,
                              .models = models,
                              .reduce = collie__reduce_kernel(dtype, COLLIE_SUM)};
  const struct collie__model *m = &models->cls[cls];
  const struct collie__algo *best = NULL;
  double best_t = 0;
  for (int a = 0; a < COLLIE_ALGO_COUNT_; a++) cost[a] = -1;
  for (int i = 0; i < SELECT_N; i++) {
    const struct collie__algo *a = select_table[i];
    if (a->kind != kind) continue;
    double t = select_cost(a, &call, m);
    cost[a->id] = t;
    if (t >= 0 && (!best || t < best_t)) {
      best = a;
      best_t = t;
    }
  }
  return best;
}
