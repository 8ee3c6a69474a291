/*
 * report_json.c - a small, strict JSON reader for the files collie writes
 * (flight-recorder dumps). It builds a tree, bounds the nesting depth, and on
 * malformed input returns an error naming line and column instead of
 * guessing: collie-report must never crash on a truncated or edited dump.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define RJ_MAX_DEPTH 64

struct rj_parser {
  const char *s, *end, *p;
  char *err;
  size_t errlen;
  int failed;
};

static void
rj_fail(struct rj_parser *ps, const char *fmt, ...)
{
  if (ps->failed) return;
  ps->failed = 1;
  int line = 1, col = 1;
  for (const char *q = ps->s; q < ps->p && q < ps->end; q++) {
    if (*q == '\n') {
      line++;
      col = 1;
    } else {
      col++;
    }
  }
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  snprintf(ps->err, ps->errlen, "line %d, column %d: %s", line, col, msg);
}

static void
rj_ws(struct rj_parser *ps)
{
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
    ps->p++;
}

static int rj_value(struct rj_parser *ps, struct rj_val *v, int depth);

static void
rj_utf8(char *out, size_t *o, unsigned cp)
{
  if (cp < 0x80) {
    out[(*o)++] = (char)cp;
  } else if (cp < 0x800) {
    out[(*o)++] = (char)(0xc0 | (cp >> 6));
    out[(*o)++] = (char)(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out[(*o)++] = (char)(0xe0 | (cp >> 12));
    out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[(*o)++] = (char)(0x80 | (cp & 0x3f));
  } else {
    out[(*o)++] = (char)(0xf0 | (cp >> 18));
    out[(*o)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[(*o)++] = (char)(0x80 | (cp & 0x3f));
  }
}

static int
rj_hex4(struct rj_parser *ps, unsigned *cp)
{
  if (ps->end - ps->p < 4) {
    rj_fail(ps, "truncated \\u escape");
    return -1;
  }
  unsigned v = 0;
  for (int k = 0; k < 4; k++) {
    char c = ps->p[k];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (unsigned)(c - 'A' + 10);
    else {
      rj_fail(ps, "bad \\u escape");
      return -1;
    }
  }
  ps->p += 4;
  *cp = v;
  return 0;
}

/* At the opening quote; returns a malloc'd string or NULL. */
static char *
rj_string(struct rj_parser *ps)
{
  ps->p++;
  const char *start = ps->p;
  /* Escapes never make the text longer, \u excepted (6 chars -> at most 4
   * bytes). */
  const char *q = start;
  while (q < ps->end && *q != '"') q += (*q == '\\' && q + 1 < ps->end) ? 2 : 1;
  if (q >= ps->end) {
    rj_fail(ps, "unterminated string");
    return NULL;
  }
  char *out = malloc((size_t)(q - start) + 1);
  if (!out) {
    rj_fail(ps, "out of memory");
    return NULL;
  }
  size_t o = 0;
  while (ps->p < ps->end && *ps->p != '"') {
    unsigned char c = (unsigned char)*ps->p;
    if (c < 0x20) {
      rj_fail(ps, "control character in string");
      goto out_free;
    }
    if (c != '\\') {
      out[o++] = (char)c;
      ps->p++;
      continue;
    }
    ps->p++;
    if (ps->p >= ps->end) break;
    char e = *ps->p++;
    switch (e) {
    case '"':
      out[o++] = '"';
      break;
    case '\\':
      out[o++] = '\\';
      break;
    case '/':
      out[o++] = '/';
      break;
    case 'b':
      out[o++] = '\b';
      break;
    case 'f':
      out[o++] = '\f';
      break;
    case 'n':
      out[o++] = '\n';
      break;
    case 'r':
      out[o++] = '\r';
      break;
    case 't':
      out[o++] = '\t';
      break;
    case 'u': {
      unsigned cp;
      if (rj_hex4(ps, &cp) != 0) goto out_free;
      if (cp >= 0xd800 && cp < 0xdc00 && ps->end - ps->p >= 6 && ps->p[0] == '\\' &&
          ps->p[1] == 'u') {
        unsigned lo;
        ps->p += 2;
        if (rj_hex4(ps, &lo) != 0) goto out_free;
        if (lo >= 0xdc00 && lo < 0xe000) cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
      }
      rj_utf8(out, &o, cp);
      break;
    }
    default:
      rj_fail(ps, "bad escape \\%c", e);
      goto out_free;
    }
  }
  if (ps->p >= ps->end) {
    rj_fail(ps, "unterminated string");
    goto out_free;
  }
  ps->p++;
  out[o] = '\0';
  return out;
out_free:
  free(out);
  return NULL;
}

static int
rj_number(struct rj_parser *ps, struct rj_val *v)
{
  const char *start = ps->p;
  int integral = 1;
  if (ps->p < ps->end && *ps->p == '-') ps->p++;
  if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') {
    rj_fail(ps, "bad number");
    return -1;
  }
  while (ps->p < ps->end && strchr("0123456789.eE+-", *ps->p)) {
    if (strchr(".eE", *ps->p)) integral = 0;
    ps->p++;
  }
  char buf[64];
  size_t n = (size_t)(ps->p - start);
  if (n >= sizeof(buf)) {
    rj_fail(ps, "number too long");
    return -1;
  }
  memcpy(buf, start, n);
  buf[n] = '\0';
  char *endp;
  errno = 0;
  v->type = RJ_NUM;
  v->num = strtod(buf, &endp);
  if (*endp) {
    ps->p = start;
    rj_fail(ps, "bad number %s", buf);
    return -1;
  }
  if (integral) {
    errno = 0;
    long long ll = strtoll(buf, &endp, 10);
    if (!*endp && errno == 0) {
      v->is_int = 1;
      v->i = ll;
    }
  }
  return 0;
}

static int
rj_literal(struct rj_parser *ps, const char *word)
{
  size_t n = strlen(word);
  if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) {
    rj_fail(ps, "unexpected character '%c'", *ps->p);
    return -1;
  }
  ps->p += n;
  return 0;
}

/* Appends a zeroed item (and key slot for objects) to v; NULL on no memory. */
static struct rj_val *
rj_push(struct rj_parser *ps, struct rj_val *v, char *key)
{
  if ((v->n & (v->n - 1)) == 0) { /* grow at powers of two */
    size_t cap = v->n ? v->n * 2 : 4;
    struct rj_val *items = realloc(v->items, cap * sizeof(*items));
    if (!items) goto out_oom;
    v->items = items;
    if (v->type == RJ_OBJ) {
      char **keys = realloc(v->keys, cap * sizeof(*keys));
      if (!keys) goto out_oom;
      v->keys = keys;
    }
  }
  memset(&v->items[v->n], 0, sizeof(v->items[0]));
  if (v->type == RJ_OBJ) v->keys[v->n] = key;
  return &v->items[v->n++];
out_oom:
  rj_fail(ps, "out of memory");
  return NULL;
}

static int
rj_value(struct rj_parser *ps, struct rj_val *v, int depth)
{
  rj_ws(ps);
  if (ps->p >= ps->end) {
    rj_fail(ps, "unexpected end of input");
    return -1;
  }
  char c = *ps->p;
  if (c == '{' || c == '[') {
    if (depth >= RJ_MAX_DEPTH) {
      rj_fail(ps, "nested deeper than %d", RJ_MAX_DEPTH);
      return -1;
    }
    char close = c == '{' ? '}' : ']';
    v->type = c == '{' ? RJ_OBJ : RJ_ARR;
    ps->p++;
    rj_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
      ps->p++;
      return 0;
    }
    for (;;) {
      char *key = NULL;
      if (v->type == RJ_OBJ) {
        rj_ws(ps);
        if (ps->p >= ps->end || *ps->p != '"') {
          rj_fail(ps, "expected a key in quotes");
          return -1;
        }
        if (!(key = rj_string(ps))) return -1;
        rj_ws(ps);
        if (ps->p >= ps->end || *ps->p != ':') {
          free(key);
          rj_fail(ps, "expected ':'");
          return -1;
        }
        ps->p++;
      }
      struct rj_val *item = rj_push(ps, v, key);
      if (!item) {
        free(key);
        return -1;
      }
      if (rj_value(ps, item, depth + 1) != 0) return -1;
      rj_ws(ps);
      if (ps->p < ps->end && *ps->p == ',') {
        ps->p++;
        continue;
      }
      if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return 0;
      }
      rj_fail(ps, ps->p < ps->end ? "expected ',' or '%c'" : "unexpected end of input", close);
      return -1;
    }
  }
  if (c == '"') {
    v->type = RJ_STR;
    return (v->str = rj_string(ps)) ? 0 : -1;
  }
  if (c == 't' || c == 'f') {
    v->type = RJ_BOOL;
    v->i = c == 't';
    return rj_literal(ps, c == 't' ? "true" : "false");
  }
  if (c == 'n') {
    v->type = RJ_NULL;
    return rj_literal(ps, "null");
  }
  return rj_number(ps, v);
}

static void
rj_free_inner(struct rj_val *v)
{
  for (size_t k = 0; k < v->n; k++) {
    rj_free_inner(&v->items[k]);
    if (v->keys) free(v->keys[k]);
  }
  free(v->items);
  free(v->keys);
  free(v->str);
}

void
rj_free(struct rj_val *v)
{
  if (!v) return;
  rj_free_inner(v);
  free(v);
}

struct rj_val *
rj_parse(const char *text, size_t len, char *err, size_t errlen)
{
  struct rj_parser ps = {.s = text, .end = text + len, .p = text, .err = err, .errlen = errlen};
  struct rj_val *v = calloc(1, sizeof(*v));
  if (!v) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if (rj_value(&ps, v, 0) == 0) {
    rj_ws(&ps);
    if (ps.p == ps.end) return v;
    rj_fail(&ps, "trailing characters after the value");
  }
  rj_free(v);
  return NULL;
}

const struct rj_val *
rj_get(const struct rj_val *obj, const char *key)
{
  if (!obj || obj->type != RJ_OBJ) return NULL;
  for (size_t k = 0; k < obj->n; k++)
    if (strcmp(obj->keys[k], key) == 0) return &obj->items[k];
  return NULL;
}
