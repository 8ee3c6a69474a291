/* misc.c - hashing and string helpers with no better home. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

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
