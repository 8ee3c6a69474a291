/*
 * report_telemetry.c - loads a telemetry directory (docs/telemetry.md) once,
 * for the summary, stragglers, trace and plot commands of collie-report:
 * comms.csv as a matrix of numbers, and per rank its timing log parsed into
 * rows, its .meta sidecar (host, clock offset, dropped records) and its
 * .categories.csv sidecar, sorted so a timing row finds its category by
 * binary search. Also what those commands share to print: percentiles, byte
 * labels, JSON escaping (UTF-8 repaired by svg.c's rule, as the plot's XML
 * is), the command line.
 *
 * Every malformed thing is an error naming the file and line, checked here at
 * load, so the commands themselves work on clean data and cannot crash on a
 * hand-edited file. Counters are kept in whole microseconds, converted from
 * their decimal text without going through a double: start_counter plus
 * clock_offset_s is a 16-digit number of microseconds, more than a double
 * holds exactly.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "report.h"
#include "svg.h"

static const char *const tel_collie_ops[] = {
    "ALLREDUCE", "ALLGATHER", "REDUCE_SCATTER", "BCAST", "REDUCE", "ALLTOALL",
    "GATHER",    "SCATTER",   "BARRIER",        "SEND",  "RECV"};

int
rt_is_collie_op(const char *op)
{
  for (size_t i = 0; i < sizeof(tel_collie_ops) / sizeof(tel_collie_ops[0]); i++)
    if (strcmp(op, tel_collie_ops[i]) == 0) return 1;
  return 0;
}

int
rt_is_collective(const char *op)
{
  return rt_is_collie_op(op) && strcmp(op, "SEND") != 0 && strcmp(op, "RECV") != 0;
}

/* Parses a decimal number of seconds ("8812.001234", "-3.5") into whole
 * microseconds, rounding digits past the sixth half up. Returns 0 or -1. */
int
report_tel_micros(const char *s, int64_t *out)
{
  const char *p = s;
  while (*p == ' ') p++;
  int neg = 0;
  if (*p == '-' || *p == '+') neg = *p++ == '-';
  int64_t whole = 0, frac = 0;
  int digits = 0, fdigits = 0, round_up = 0;
  for (; *p >= '0' && *p <= '9'; p++, digits++) {
    if (whole > (INT64_MAX / 1000000 - 9) / 10) return -1;
    whole = whole * 10 + (*p - '0');
  }
  if (*p == '.') {
    for (p++; *p >= '0' && *p <= '9'; p++, fdigits++) {
      if (fdigits < 6)
        frac = frac * 10 + (*p - '0');
      else if (fdigits == 6)
        round_up = *p >= '5';
    }
  }
  while (*p == ' ') p++;
  if (*p != '\0' || digits + fdigits == 0) return -1;
  for (int k = fdigits; k < 6; k++) frac *= 10;
  int64_t v = whole * 1000000 + frac + round_up;
  *out = neg ? -v : v;
  return 0;
}

/* The column numbers of a timing log, looked up once per file. */
static const char *const tel_timing_cols[] = {"iteration",  "epoch",         "layer_name",
                                              "operation",  "phase",         "message_size_bytes",
                                              "elapsed_ms", "start_counter", "end_counter"};
enum { TC_ITER, TC_EPOCH, TC_LABEL, TC_OP, TC_PHASE, TC_SIZE, TC_ELAPSED, TC_START, TC_END, TC_N };

static int
tel_counter(const struct rc_table *t, size_t row, int col, int64_t *out, char *err, size_t errlen)
{
  if (report_tel_micros(rc_cell(t, row, col), out) == 0) return 0;
  double dummy;
  if (rc_double(t, row, col, &dummy, err, errlen) != 0) return -1;
  snprintf(err, errlen, "%s:%d: column \"%s\": \"%s\" is not a decimal number of seconds", t->path,
           t->lines[row + 1], t->head[col], rc_cell(t, row, col));
  return -1;
}

static int
tel_load_timing(struct rt_rank *r, const char *path, char *err, size_t errlen)
{
  if (rc_load(path, &r->tab, err, errlen) != 0) return -1;
  if (rc_require(&r->tab, tel_timing_cols, TC_N, err, errlen) != 0) return -1;
  int col[TC_N];
  for (int k = 0; k < TC_N; k++) col[k] = rc_col(&r->tab, tel_timing_cols[k]);
  r->nrows = r->tab.nrows;
  r->rows = calloc(r->nrows ? r->nrows : 1, sizeof(*r->rows));
  if (!r->rows) {
    snprintf(err, errlen, "%s: out of memory", path);
    return -1;
  }
  for (size_t i = 0; i < r->nrows; i++) {
    struct rt_row *row = &r->rows[i];
    const struct rc_table *t = &r->tab;
    int64_t size;
    row->line = t->lines[i + 1];
    row->op = rc_cell(t, i, col[TC_OP]);
    row->label = rc_cell(t, i, col[TC_LABEL]);
    row->phase = rc_cell(t, i, col[TC_PHASE]);
    row->start_s = rc_cell(t, i, col[TC_START]);
    row->end_s = rc_cell(t, i, col[TC_END]);
    if (rc_int64(t, i, col[TC_ITER], &row->iteration, err, errlen) ||
        rc_int64(t, i, col[TC_EPOCH], &row->epoch, err, errlen) ||
        rc_int64(t, i, col[TC_SIZE], &size, err, errlen) ||
        rc_double(t, i, col[TC_ELAPSED], &row->elapsed_ms, err, errlen) ||
        tel_counter(t, i, col[TC_START], &row->start_us, err, errlen) ||
        tel_counter(t, i, col[TC_END], &row->end_us, err, errlen))
      return -1;
    if (size < 0) {
      snprintf(err, errlen, "%s:%d: column \"message_size_bytes\": %lld is negative", path,
               row->line, (long long)size);
      return -1;
    }
    if (row->op[0] == '\0') {
      snprintf(err, errlen, "%s:%d: column \"operation\" is empty", path, row->line);
      return -1;
    }
    row->size = (uint64_t)size;
  }
  return 0;
}

/* Orders category rows by (start, end, operation) as strings. */
static int
tel_cat_cmp(const void *a, const void *b)
{
  const struct rt_catrow *x = a, *y = b;
  int c = strcmp(x->start_s, y->start_s);
  if (c == 0) c = strcmp(x->end_s, y->end_s);
  if (c == 0) c = strcmp(x->op, y->op);
  return c;
}

static int
tel_load_cats(struct rt_rank *r, const char *path, char *err, size_t errlen)
{
  static const char *const cols[] = {"start_counter", "end_counter", "operation", "category"};
  if (rc_load(path, &r->cats_tab, err, errlen) != 0) return -1;
  if (rc_require(&r->cats_tab, cols, 4, err, errlen) != 0) return -1;
  int c[4];
  for (int k = 0; k < 4; k++) c[k] = rc_col(&r->cats_tab, cols[k]);
  r->ncats = r->cats_tab.nrows;
  r->cats = calloc(r->ncats ? r->ncats : 1, sizeof(*r->cats));
  if (!r->cats) {
    snprintf(err, errlen, "%s: out of memory", path);
    return -1;
  }
  for (size_t i = 0; i < r->ncats; i++) {
    r->cats[i].start_s = rc_cell(&r->cats_tab, i, c[0]);
    r->cats[i].end_s = rc_cell(&r->cats_tab, i, c[1]);
    r->cats[i].op = rc_cell(&r->cats_tab, i, c[2]);
    r->cats[i].cat = rc_cell(&r->cats_tab, i, c[3]);
  }
  qsort(r->cats, r->ncats, sizeof(*r->cats), tel_cat_cmp);
  r->has_cats = 1;
  return 0;
}

const char *
rt_category(const struct rt_rank *r, const struct rt_row *row)
{
  if (r->has_cats && r->ncats > 0) {
    struct rt_catrow key = {row->start_s, row->end_s, row->op, NULL};
    const struct rt_catrow *hit = bsearch(&key, r->cats, r->ncats, sizeof(*r->cats), tel_cat_cmp);
    if (hit && hit->cat[0]) return hit->cat;
  }
  return rt_is_collie_op(row->op) ? "other" : "user";
}

/* Reads key=value lines; unknown keys are skipped so a newer writer's extra
 * keys do not break this reader. */
static int
tel_load_meta(struct rt_rank *r, const char *path, char *err, size_t errlen)
{
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    return -1;
  }
  char *line = NULL;
  size_t cap = 0;
  int ln = 0, rc = 0;
  while (getline(&line, &cap, f) >= 0) {
    ln++;
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    if (n == 0 || line[0] == '#') continue;
    char *eq = strchr(line, '=');
    if (!eq) {
      snprintf(err, errlen, "%s:%d: expected key=value, got \"%.64s\"", path, ln, line);
      rc = -1;
      break;
    }
    *eq = '\0';
    const char *key = line, *val = eq + 1;
    char *e;
    if (strcmp(key, "host") == 0) {
      snprintf(r->host, sizeof(r->host), "%s", val);
    } else if (strcmp(key, "clock_offset_s") == 0) {
      if (report_tel_micros(val, &r->offset_us) != 0) {
        snprintf(err, errlen, "%s:%d: clock_offset_s: \"%.64s\" is not a number", path, ln, val);
        rc = -1;
        break;
      }
      r->has_offset = 1;
    } else if (strcmp(key, "records_dropped") == 0 || strcmp(key, "rank") == 0) {
      errno = 0;
      long long v = strtoll(val, &e, 10);
      if (val[0] == '\0' || *e != '\0' || errno == ERANGE || v < 0) {
        snprintf(err, errlen, "%s:%d: %s: \"%.64s\" is not a whole number", path, ln, key, val);
        rc = -1;
        break;
      }
      if (strcmp(key, "records_dropped") == 0)
        r->dropped = v;
      else if (v != r->rank)
        fprintf(stderr, "collie-report: warning: %s says rank=%lld; using %d from the file name\n",
                path, v, r->rank);
    }
  }
  free(line);
  fclose(f);
  if (rc == 0) r->has_meta = 1;
  return rc;
}

/* The rank of "timing-rank12.csv" (no leading zeros), or -1. */
static int
tel_rank_of(const char *name)
{
  static const char prefix[] = "timing-rank";
  if (strncmp(name, prefix, sizeof(prefix) - 1) != 0) return -1;
  const char *p = name + sizeof(prefix) - 1;
  if (*p < '0' || *p > '9' || (*p == '0' && p[1] >= '0' && p[1] <= '9')) return -1;
  long v = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    v = v * 10 + (*p - '0');
    if (v > 1 << 24) return -1;
  }
  return strcmp(p, ".csv") == 0 ? (int)v : -1;
}

static int
tel_rank_cmp(const void *a, const void *b)
{
  const struct rt_rank *x = a, *y = b;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

static int
tel_exists(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int
tel_load_comms(struct rt_data *d, const char *path, char *err, size_t errlen)
{
  static const char *const cols[] = {"step", "epoch", "bytes_total", "t_total_ms"};
  struct rt_comms *c = &d->comms;
  if (rc_load(path, &c->tab, err, errlen) != 0) return -1;
  d->has_comms = 1;
  if (rc_require(&c->tab, cols, 4, err, errlen) != 0) return -1;
  c->c_step = rc_col(&c->tab, "step");
  c->c_epoch = rc_col(&c->tab, "epoch");
  c->c_bytes_total = rc_col(&c->tab, "bytes_total");
  c->c_t_total = rc_col(&c->tab, "t_total_ms");
  size_t n = c->tab.nrows * (size_t)c->tab.ncols;
  c->v = calloc(n ? n : 1, sizeof(double));
  if (!c->v) {
    snprintf(err, errlen, "%s: out of memory", path);
    return -1;
  }
  for (size_t i = 0; i < c->tab.nrows; i++)
    for (int k = 0; k < c->tab.ncols; k++)
      if (rc_double(&c->tab, i, k, &c->v[i * (size_t)c->tab.ncols + (size_t)k], err, errlen) != 0)
        return -1;
  return 0;
}

int
rt_comms_kind(const struct rt_comms *c, int col, int *t_col)
{
  const char *h = c->tab.head[col];
  *t_col = -1;
  if (strncmp(h, "bytes_", 6) != 0 || col == c->c_bytes_total || h[6] == '\0') return RT_COL_OTHER;
  char tname[1100];
  snprintf(tname, sizeof(tname), "t_%s_ms", h + 6);
  int ct = rc_col(&c->tab, tname);
  if (ct >= 0 && rc_col(&c->tab, h) == col) {
    *t_col = ct;
    return RT_COL_COLL;
  }
  return RT_COL_CAT;
}

int
rt_load(struct rt_data *d, const char *dir, const char *timing_dir, unsigned what, char *err,
        size_t errlen)
{
  memset(d, 0, sizeof(*d));
  snprintf(d->dir, sizeof(d->dir), "%s", dir);
  snprintf(d->timing_dir, sizeof(d->timing_dir), "%s", timing_dir ? timing_dir : dir);
  DIR *dh = opendir(dir);
  if (!dh) {
    snprintf(err, errlen, "cannot open directory %s: %s", dir, strerror(errno));
    return -1;
  }
  closedir(dh);
  char path[1200];
  if (what & RT_COMMS) {
    snprintf(path, sizeof(path), "%s/comms.csv", dir);
    if (tel_exists(path) && tel_load_comms(d, path, err, errlen) != 0) return -1;
  }
  if (!(what & (RT_TIMING | RT_CATS))) return 0;
  dh = opendir(d->timing_dir);
  if (!dh) {
    snprintf(err, errlen, "cannot open directory %s: %s", d->timing_dir, strerror(errno));
    return -1;
  }
  int cap = 0;
  struct dirent *de;
  while ((de = readdir(dh)) != NULL) {
    int rank = tel_rank_of(de->d_name);
    if (rank < 0) continue;
    if (d->nranks == cap) {
      int ncap = cap ? cap * 2 : 16;
      struct rt_rank *nr = realloc(d->ranks, (size_t)ncap * sizeof(*nr));
      if (!nr) {
        closedir(dh);
        snprintf(err, errlen, "out of memory");
        return -1;
      }
      d->ranks = nr;
      cap = ncap;
    }
    memset(&d->ranks[d->nranks], 0, sizeof(d->ranks[0]));
    d->ranks[d->nranks++].rank = rank;
  }
  closedir(dh);
  if (d->nranks > 0) qsort(d->ranks, (size_t)d->nranks, sizeof(*d->ranks), tel_rank_cmp);
  for (int i = 0; i < d->nranks; i++) {
    struct rt_rank *r = &d->ranks[i];
    snprintf(path, sizeof(path), "%s/timing-rank%d.csv", d->timing_dir, r->rank);
    if (tel_load_timing(r, path, err, errlen) != 0) return -1;
    snprintf(path, sizeof(path), "%s/timing-rank%d.meta", d->timing_dir, r->rank);
    if (tel_exists(path) && tel_load_meta(r, path, err, errlen) != 0) return -1;
    snprintf(path, sizeof(path), "%s/timing-rank%d.categories.csv", d->timing_dir, r->rank);
    if ((what & RT_CATS) && tel_exists(path) && tel_load_cats(r, path, err, errlen) != 0) return -1;
  }
  return 0;
}

void
rt_free(struct rt_data *d)
{
  if (d->has_comms) {
    rc_free(&d->comms.tab);
    free(d->comms.v);
  }
  for (int i = 0; i < d->nranks; i++) {
    rc_free(&d->ranks[i].tab);
    free(d->ranks[i].rows);
    rc_free(&d->ranks[i].cats_tab);
    free(d->ranks[i].cats);
  }
  free(d->ranks);
  memset(d, 0, sizeof(*d));
}

double
rt_percentile(const double *sorted, size_t n, double p)
{
  /* Nearest rank: the smallest value with at least p% of the values <= it. */
  double k = p / 100.0 * (double)n;
  size_t idx = (size_t)k;
  if ((double)idx < k) idx++;
  if (idx < 1) idx = 1;
  if (idx > n) idx = n;
  return sorted[idx - 1];
}

void
rt_json_string(FILE *f, const char *s)
{
  const unsigned char *p = (const unsigned char *)s;
  fputc('"', f);
  while (*p) {
    if (*p == '"' || *p == '\\') {
      fputc('\\', f);
      fputc(*p++, f);
    } else if (*p < 0x20 || *p == 0x7F) {
      fprintf(f, "\\u%04x", *p++);
    } else {
      int n = svg_utf8_len(p);
      if (n == 0) {
        fputs("\\ufffd", f);
        p++;
      } else {
        fwrite(p, 1, (size_t)n, f);
        p += n;
      }
    }
  }
  fputc('"', f);
}

int
rt_start(int argc, char **argv, const char *cmd, unsigned allowed, void (*usage)(void),
         unsigned what, unsigned need, struct rt_args *a, struct rt_data *d)
{
  int prc = rt_parse_args(argc, argv, cmd, allowed, usage, a);
  if (prc != 0) return prc > 0 ? REPORT_OK : REPORT_BAD_INPUT;
  if ((allowed & RT_ARG_OUT) && !a->out) {
    fprintf(stderr, "collie-report %s: -o FILE is required (-o - for stdout)\n", cmd);
    return REPORT_BAD_INPUT;
  }
  char err[2048];
  if (rt_load(d, a->dir, a->timing, what, err, sizeof(err)) != 0)
    fprintf(stderr, "collie-report %s: %s\n", cmd, err);
  else if ((need & RT_COMMS) && !d->has_comms)
    fprintf(stderr, "collie-report %s: no comms.csv in %s\n", cmd, d->dir);
  else if ((need & RT_TIMING) && d->nranks == 0)
    fprintf(stderr, "collie-report %s: no timing-rank*.csv in %s\n", cmd, d->timing_dir);
  else
    return -1;
  rt_free(d);
  return REPORT_BAD_INPUT;
}

int
rt_parse_args(int argc, char **argv, const char *cmd, unsigned allowed, void (*usage)(void),
              struct rt_args *a)
{
  memset(a, 0, sizeof(*a));
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
      usage();
      return 1;
    }
    if (strcmp(s, "--timing") == 0 || ((allowed & RT_ARG_OUT) && strcmp(s, "-o") == 0)) {
      if (i + 1 >= argc) {
        fprintf(stderr, "collie-report %s: %s needs a value (try --help)\n", cmd, s);
        return -1;
      }
      if (s[1] == 'o')
        a->out = argv[++i];
      else
        a->timing = argv[++i];
    } else if ((allowed & RT_ARG_CSV) && strcmp(s, "--csv") == 0) {
      a->csv = 1;
    } else if (s[0] == '-' && s[1] != '\0') {
      fprintf(stderr, "collie-report %s: unknown option '%s' (try --help)\n", cmd, s);
      return -1;
    } else if (a->dir) {
      fprintf(stderr, "collie-report %s: expected one directory, got '%s' and '%s'\n", cmd, a->dir,
              s);
      return -1;
    } else {
      a->dir = s;
    }
  }
  if (!a->dir) {
    fprintf(stderr, "collie-report %s: expected a directory (try --help)\n", cmd);
    return -1;
  }
  return 0;
}
