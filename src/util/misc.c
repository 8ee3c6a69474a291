/* misc.c - hashing and string helpers with no better home. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "util/util.h"

int
collie__random_bytes(void *buf, size_t n)
{
  unsigned char *p = buf;
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += got;
    n -= (size_t)got;
  }
  return 0;
}

uint64_t
collie__hash64(const void *data, size_t n, uint64_t seed)
{
  const unsigned char *p = data;
  uint64_t h = seed ? seed : 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

char *
collie__strdup(const char *s)
{
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

void
collie__fmt(char *buf, size_t len, const char *fmt, ...)
{
  va_list ap;
  if (len == 0) return;
  va_start(ap, fmt);
  vsnprintf(buf, len, fmt, ap);
  va_end(ap);
}

int
collie__mkdir_one(const char *path)
{
  if (!path || !*path) {
    errno = ENOENT;
    return -1;
  }
  if (mkdir(path, 0777) != 0 && errno != EEXIST) return -1;
  struct stat st;
  if (stat(path, &st) != 0) return -1;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return -1;
  }
  return 0;
}

int
collie__mkdir_p(const char *path)
{
  char buf[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof(buf)) {
    errno = n ? ENAMETOOLONG : ENOENT;
    return -1;
  }
  memcpy(buf, path, n + 1);
  /* Each prefix ending before a '/', then the whole path, one level. */
  for (size_t i = 1; i < n; i++) {
    if (buf[i] != '/') continue;
    buf[i] = '\0';
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
    buf[i] = '/';
  }
  return collie__mkdir_one(path);
}

int
collie__equal_ct(const void *a, size_t alen, const void *b, size_t blen)
{
  const unsigned char *x = a, *y = b;
  unsigned diff = alen != blen;
  for (size_t i = 0; i < blen; i++) diff |= (unsigned)(x[i < alen ? i : 0] ^ y[i]);
  return diff == 0;
}
