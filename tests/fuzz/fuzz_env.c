/*
 * fuzz_env.c - the COLLIE_* environment parser (collie__params_load,
 * core/params.c) on arbitrary settings: the bytes are lines NAME=VALUE,
 * looked up as COLLIE_<NAME> through the parser's getenv hook (the process
 * environment is left alone); the parser must accept or refuse naming the
 * variable, never crash or overrun its string store.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

enum { FUZZ_MAXVARS = 16 };
static char *fuzz_names[FUZZ_MAXVARS], *fuzz_values[FUZZ_MAXVARS];
static int fuzz_nv;

static const char *
fuzz_getenv(const char *name)
{
  for (int i = fuzz_nv - 1; i >= 0; i--) /* the last setting of a name counts */
    if (!strcmp(fuzz_names[i], name)) return fuzz_values[i];
  return NULL;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
  char *text = malloc(n + 1);
  if (!text) return 0;
  memcpy(text, data, n);
  text[n] = '\0';
  fuzz_nv = 0;
  for (char *line = text, *next; line && *line && fuzz_nv < FUZZ_MAXVARS; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    char *eq = strchr(line, '=');
    if (!eq || eq == line) continue;
    *eq = '\0';
    size_t len = strlen(line) + 8;
    char *name = malloc(len);
    if (!name) break;
    snprintf(name, len, "COLLIE_%s", line);
    fuzz_names[fuzz_nv] = name;
    fuzz_values[fuzz_nv++] = eq + 1;
  }
  struct collie__params p;
  (void)collie__params_load(&p, fuzz_getenv);
  for (int i = 0; i < fuzz_nv; i++) free(fuzz_names[i]);
  fuzz_nv = 0;
  free(text);
  return 0;
}
