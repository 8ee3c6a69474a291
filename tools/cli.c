/*
 * cli.c - the size parser and clock of cli.h.
 */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int
cli_parse_size(const char *s, size_t *out, char *why, size_t len)
{
  char *end;
  if (!s || !*s || *s == '-' || *s == '+' || isspace((unsigned char)*s)) {
    snprintf(why, len, "is not a size (e.g. 8, 4K, 64M, 1G)");
    return -1;
  }
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno || !isfinite(v) || v < 0) {
    snprintf(why, len, "is not a size (e.g. 8, 4K, 64M, 1G)");
    return -1;
  }
  double mult = 1;
  switch (*end) {
  case 'k':
  case 'K':
    mult = 1024.0, end++;
    break;
  case 'm':
  case 'M':
    mult = 1024.0 * 1024, end++;
    break;
  case 'g':
  case 'G':
    mult = 1024.0 * 1024 * 1024, end++;
    break;
  default:
    break;
  }
  if (mult > 1 && !strcmp(end, "iB")) end += 2;
  if (!strcmp(end, "B") || !strcmp(end, "b")) end++;
  if (*end) {
    snprintf(why, len, "is not a size (e.g. 8, 4K, 64M, 1G)");
    return -1;
  }
  v *= mult;
  if (v < 1) {
    snprintf(why, len, "must be at least 1 byte");
    return -1;
  }
  if (v >= 9.2e18) {
    snprintf(why, len, "is too large");
    return -1;
  }
  *out = (size_t)v;
  return 0;
}

size_t
cli_size_arg(const char *opt, const char *s)
{
  char why[96];
  size_t v;
  if (cli_parse_size(s, &v, why, sizeof(why)) != 0) {
    fprintf(stderr, "%s: '%s' %s\n", opt, s, why);
    exit(2);
  }
  return v;
}

double
cli_now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
