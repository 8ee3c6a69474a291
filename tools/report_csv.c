/*
 * report_csv.c - the CSV reader behind collie-report's telemetry commands.
 *
 * collie writes comms.csv and the timing logs itself, but people open them in
 * spreadsheets, cut them, concatenate them and save them back with CRLF line
 * ends, so the reader takes RFC 4180 as written by anyone: quoted fields with
 * doubled quotes and line breaks inside, LF or CRLF, a byte-order mark, blank
 * lines. It is strict about what would make the numbers wrong: every record
 * must have the header's field count, and a numeric column must hold numbers.
 * Each complaint names the file and the line the record starts on, so the
 * user can open the file there.
 *
 * The whole file is read into one buffer and unquoted in place: a field never
 * grows when unquoted, so the write position trails the read position, and
 * each field's terminating NUL takes the place of the delimiter after it.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

char *
rt_slurp(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
    if (n + 1 >= cap) {
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        errno = ENOMEM;
        break;
      }
      buf = nb;
      cap *= 2;
    }
  }
  int failed = buf && ferror(f);
  int saved = errno;
  fclose(f);
  if (failed) {
    free(buf);
    errno = saved ? saved : EIO;
    return NULL;
  }
  if (buf) {
    buf[n] = '\0';
    *len = n;
  }
  return buf;
}

/* A growable array of field pointers and one of record start lines. */
struct csv_acc {
  char **cells;
  size_t ncells, cap;
  int *lines;
  size_t nrec, lcap;
};

static int
csv_push_cell(struct csv_acc *a, char *cell)
{
  if (a->ncells == a->cap) {
    size_t ncap = a->cap ? a->cap * 2 : 256;
    char **nc = realloc(a->cells, ncap * sizeof(*nc));
    if (!nc) return -1;
    a->cells = nc;
    a->cap = ncap;
  }
  a->cells[a->ncells++] = cell;
  return 0;
}

static int
csv_push_line(struct csv_acc *a, int line)
{
  if (a->nrec == a->lcap) {
    size_t ncap = a->lcap ? a->lcap * 2 : 64;
    int *nl = realloc(a->lines, ncap * sizeof(*nl));
    if (!nl) return -1;
    a->lines = nl;
    a->lcap = ncap;
  }
  a->lines[a->nrec++] = line;
  return 0;
}

int
rc_load(const char *path, struct rc_table *t, char *err, size_t errlen)
{
  memset(t, 0, sizeof(*t));
  snprintf(t->path, sizeof(t->path), "%s", path);
  size_t len = 0;
  char *buf = rt_slurp(path, &len);
  if (!buf) {
    snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    return -1;
  }
  struct csv_acc a = {0};
  char *p = buf, *end = buf + len, *w = buf;
  int line = 1;
  size_t ncols = 0;
  if (len >= 3 && (unsigned char)p[0] == 0xEF && (unsigned char)p[1] == 0xBB &&
      (unsigned char)p[2] == 0xBF)
    p += 3;
  while (p < end) {
    /* A blank line is no record (a trailing one is common). */
    if (*p == '\n' || (*p == '\r' && (p + 1 == end || p[1] == '\n'))) {
      p += *p == '\r' && p + 1 < end ? 2 : 1;
      line++;
      continue;
    }
    int rec_line = line;
    size_t first = a.ncells;
    for (;;) {
      char *field = w;
      if (p < end && *p == '"') {
        p++;
        for (;;) {
          if (p >= end) {
            snprintf(err, errlen, "%s:%d: a quoted field is never closed", path, rec_line);
            goto fail;
          }
          if (*p == '"') {
            if (p + 1 < end && p[1] == '"') {
              *w++ = '"';
              p += 2;
              continue;
            }
            p++;
            break;
          }
          if (*p == '\n') line++;
          *w++ = *p++;
        }
        if (p < end && *p != ',' && *p != '\n' && *p != '\r') {
          snprintf(err, errlen, "%s:%d: '%c' after the closing quote of a field (expected a comma)",
                   path, line, *p);
          goto fail;
        }
      } else {
        while (p < end && *p != ',' && *p != '\n' && *p != '\r') *w++ = *p++;
      }
      char delim = p < end ? *p : '\n';
      *w++ = '\0';
      if (csv_push_cell(&a, field) != 0) goto oom;
      if (delim == ',') {
        p++;
        continue;
      }
      if (p < end) {
        p += *p == '\r' && p + 1 < end && p[1] == '\n' ? 2 : 1;
        line++;
      }
      break;
    }
    size_t nf = a.ncells - first;
    if (a.nrec == 0) {
      ncols = nf;
    } else if (nf != ncols) {
      snprintf(err, errlen, "%s:%d: %zu field%s, but the header has %zu", path, rec_line, nf,
               nf == 1 ? "" : "s", ncols);
      goto fail;
    }
    if (csv_push_line(&a, rec_line) != 0) goto oom;
  }
  if (a.nrec == 0) {
    snprintf(err, errlen, "%s: empty file (no header line)", path);
    goto fail;
  }
  t->buf = buf;
  t->ncols = (int)ncols;
  t->head = a.cells;
  t->cells = a.cells + ncols;
  t->nrows = a.nrec - 1;
  t->lines = a.lines;
  return 0;
oom:
  snprintf(err, errlen, "%s: out of memory", path);
fail:
  free(a.cells);
  free(a.lines);
  free(buf);
  return -1;
}

void
rc_free(struct rc_table *t)
{
  free(t->buf);
  free(t->head); /* cells points into the same array */
  free(t->lines);
  t->buf = NULL;
  t->head = t->cells = NULL;
  t->lines = NULL;
  t->nrows = 0;
  t->ncols = 0;
}

int
rc_col(const struct rc_table *t, const char *name)
{
  for (int c = 0; c < t->ncols; c++)
    if (strcmp(t->head[c], name) == 0) return c;
  return -1;
}

int
rc_require(const struct rc_table *t, const char *const *names, int n, char *err, size_t errlen)
{
  for (int i = 0; i < n; i++) {
    if (rc_col(t, names[i]) < 0) {
      snprintf(err, errlen, "%s:%d: no column \"%s\" in the header", t->path, t->lines[0],
               names[i]);
      return -1;
    }
  }
  return 0;
}

const char *
rc_cell(const struct rc_table *t, size_t row, int col)
{
  return t->cells[row * (size_t)t->ncols + (size_t)col];
}

/* Shortens a field for a message so one huge field cannot drown it. */
static void
csv_quote_short(char *buf, size_t len, const char *s)
{
  size_t n = strlen(s);
  if (n + 1 <= len)
    snprintf(buf, len, "%s", s);
  else
    snprintf(buf, len, "%.*s...", (int)(len > 4 ? len - 4 : 0), s);
}

int
rc_double(const struct rc_table *t, size_t row, int col, double *out, char *err, size_t errlen)
{
  const char *s = rc_cell(t, row, col);
  char *e;
  errno = 0;
  double v = strtod(s, &e);
  while (*e == ' ') e++;
  if (s[0] == '\0' || *e != '\0' || !isfinite(v) || errno == ERANGE) {
    char shown[48];
    csv_quote_short(shown, sizeof(shown), s);
    snprintf(err, errlen, "%s:%d: column \"%s\": \"%s\" is not a number", t->path,
             t->lines[row + 1], t->head[col], shown);
    return -1;
  }
  *out = v;
  return 0;
}

int
rc_int64(const struct rc_table *t, size_t row, int col, int64_t *out, char *err, size_t errlen)
{
  const char *s = rc_cell(t, row, col);
  char *e;
  errno = 0;
  long long v = strtoll(s, &e, 10);
  while (*e == ' ') e++;
  if (s[0] == '\0' || *e != '\0' || errno == ERANGE) {
    char shown[48];
    csv_quote_short(shown, sizeof(shown), s);
    snprintf(err, errlen, "%s:%d: column \"%s\": \"%s\" is not a whole number", t->path,
             t->lines[row + 1], t->head[col], shown);
    return -1;
  }
  *out = (int64_t)v;
  return 0;
}
