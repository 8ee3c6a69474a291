/*
 * csv_read.c - an RFC 4180 reader for the files collie's telemetry writes,
 * plus the small file helpers its tests share (see csv_read.h). Written
 * independently of src/telemetry on purpose: a test must not inherit the
 * writer's mistakes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll/csv_read.h"
#include "runner.h"

char *
csv_slurp(const char *path, size_t *len)
{
  return test_read_file(path, len);
}

/* A growable string for one field. */
struct csv_str {
  char *s;
  size_t n, cap;
};

static int
csv_str_put(struct csv_str *b, char c)
{
  if (b->n + 2 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 32;
    char *ns = realloc(b->s, cap);
    if (!ns) return -1;
    b->s = ns;
    b->cap = cap;
  }
  b->s[b->n++] = c;
  b->s[b->n] = '\0';
  return 0;
}

/* Appends one field to a record's array. */
static int
csv_push(char ***fields, int *n, char *f)
{
  char **nf = realloc(*fields, (size_t)(*n + 1) * sizeof(char *));
  if (!nf) return -1;
  nf[(*n)++] = f;
  *fields = nf;
  return 0;
}

/* Parses one record starting at *pos; returns 0 and the record's fields, or
 * -1 on malformed input (unterminated quote, text after a closing quote, a
 * quote inside an unquoted field, no final '\n'). */
static int
csv_record(const char *raw, size_t len, size_t *pos, char ***fields, int *nfields)
{
  size_t p = *pos;
  *fields = NULL;
  *nfields = 0;
  for (;;) {
    struct csv_str b = {NULL, 0, 0};
    if (csv_str_put(&b, 'x') < 0) return -1; /* an empty field is "" not NULL */
    b.n = 0;
    b.s[0] = '\0';
    if (p < len && raw[p] == '"') {
      p++;
      for (;;) {
        if (p >= len) goto bad;
        if (raw[p] == '"') {
          if (p + 1 < len && raw[p + 1] == '"') {
            if (csv_str_put(&b, '"') < 0) goto bad;
            p += 2;
            continue;
          }
          p++;
          break;
        }
        if (csv_str_put(&b, raw[p++]) < 0) goto bad;
      }
    } else {
      while (p < len && raw[p] != ',' && raw[p] != '\n') {
        if (raw[p] == '"') goto bad;
        if (csv_str_put(&b, raw[p++]) < 0) goto bad;
      }
    }
    if (csv_push(fields, nfields, b.s) < 0) goto bad;
    if (p >= len) goto bad_pushed; /* every record ends with '\n' */
    if (raw[p] == ',') {
      p++;
      continue;
    }
    if (raw[p] != '\n') goto bad_pushed;
    *pos = p + 1;
    return 0;
  bad:
    free(b.s);
  bad_pushed:
    for (int i = 0; i < *nfields; i++) free((*fields)[i]);
    free(*fields);
    *fields = NULL;
    *nfields = 0;
    return -1;
  }
}

int
csv_load(const char *path, struct csv_table *t)
{
  size_t len = 0;
  memset(t, 0, sizeof(*t));
  t->raw = csv_slurp(path, &len);
  if (!t->raw) return -1;
  for (size_t i = 0; i < len; i++) t->nlines += t->raw[i] == '\n';
  size_t eol = strcspn(t->raw, "\n");
  t->first_line = strndup(t->raw, eol);
  if (!t->first_line) goto fail;
  size_t pos = 0;
  int first = 1;
  while (pos < len) {
    char **f;
    int nf;
    if (csv_record(t->raw, len, &pos, &f, &nf) < 0) goto fail;
    if (first) {
      t->header = f;
      t->ncols = nf;
      first = 0;
      continue;
    }
    char ***nr = realloc(t->rows, (size_t)(t->nrows + 1) * sizeof(*nr));
    int *nn = realloc(t->nfields, (size_t)(t->nrows + 1) * sizeof(*nn));
    if (nr) t->rows = nr;
    if (nn) t->nfields = nn;
    if (!nr || !nn) {
      for (int i = 0; i < nf; i++) free(f[i]);
      free(f);
      goto fail;
    }
    t->rows[t->nrows] = f;
    t->nfields[t->nrows] = nf;
    t->nrows++;
  }
  return 0;
fail:
  csv_free(t);
  errno = EINVAL;
  return -1;
}

void
csv_free(struct csv_table *t)
{
  for (int i = 0; i < t->ncols; i++) free(t->header[i]);
  free(t->header);
  for (int r = 0; r < t->nrows; r++) {
    for (int i = 0; i < t->nfields[r]; i++) free(t->rows[r][i]);
    free(t->rows[r]);
  }
  free(t->rows);
  free(t->nfields);
  free(t->first_line);
  free(t->raw);
  memset(t, 0, sizeof(*t));
}

int
csv_col(const struct csv_table *t, const char *name)
{
  for (int i = 0; i < t->ncols; i++)
    if (!strcmp(t->header[i], name)) return i;
  return -1;
}

const char *
csv_cell(const struct csv_table *t, int row, const char *name)
{
  int c = csv_col(t, name);
  if (c < 0 || row < 0 || row >= t->nrows || c >= t->nfields[row]) return NULL;
  return t->rows[row][c];
}

int
csv_is_int(const char *s)
{
  if (!s) return 0;
  if (*s == '-') s++;
  if (!*s) return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

int
csv_is_fixed(const char *s, int decimals)
{
  if (!s) return 0;
  if (*s == '-') s++;
  const char *dot = strchr(s, '.');
  if (!dot || dot == s) return 0;
  for (const char *q = s; q < dot; q++)
    if (*q < '0' || *q > '9') return 0;
  if ((int)strlen(dot + 1) != decimals) return 0;
  for (const char *q = dot + 1; *q; q++)
    if (*q < '0' || *q > '9') return 0;
  return 1;
}

int
csv_meta_get(const char *text, const char *key, char *out, size_t outlen)
{
  size_t klen = strlen(key);
  for (const char *line = text; line && *line;) {
    const char *eol = strchr(line, '\n');
    size_t n = eol ? (size_t)(eol - line) : strlen(line);
    if (n > klen && !strncmp(line, key, klen) && line[klen] == '=') {
      snprintf(out, outlen, "%.*s", (int)(n - klen - 1), line + klen + 1);
      return 0;
    }
    line = eol ? eol + 1 : NULL;
  }
  return -1;
}

static void
csv_mark_path(char *buf, size_t len, const char *tag, int rank)
{
  snprintf(buf, len, "%s/mark-%s-%d", test_dir(), tag, rank);
}

void
csv_mark(const char *tag)
{
  char path[512];
  csv_mark_path(path, sizeof(path), tag, test_rank());
  FILE *f = fopen(path, "w");
  ASSERTF(f, "cannot create %s: %s", path, strerror(errno));
  fclose(f);
}

void
csv_wait_marks(const char *tag, int nranks, double timeout_s)
{
  double deadline = csv_now_mono() + timeout_s;
  for (int r = 0; r < nranks; r++) {
    char path[512];
    csv_mark_path(path, sizeof(path), tag, r);
    while (access(path, F_OK) != 0) {
      ASSERTF(csv_now_mono() < deadline, "rank %d never reached \"%s\"", r, tag);
      usleep(5000);
    }
  }
}

double
csv_now_mono(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double
csv_now_real(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
