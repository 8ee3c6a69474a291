/* docs_test.c - the documentation names every variable the library parses:
 * docs/env.md and `collierun --help` are checked against params.def. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/params.h"
#include "runner.h"

static char *
docs_slurp(const char *cmd_or_path, int is_cmd)
{
  FILE *f = is_cmd ? popen(cmd_or_path, "r") : fopen(cmd_or_path, "r");
  ASSERTF(f, "cannot open %s", cmd_or_path);
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  ASSERT(buf);
  size_t k;
  while ((k = fread(buf + n, 1, cap - 1 - n, f)) > 0) {
    n += k;
    if (n + 1 >= cap) {
      cap *= 2;
      buf = realloc(buf, cap);
      ASSERT(buf);
    }
  }
  buf[n] = '\0';
  if (is_cmd)
    pclose(f);
  else
    fclose(f);
  return buf;
}

struct docs_texts {
  const char *env_md, *help;
  int n;
};

static void
docs_check(const char *name, const char *def, const char *help, void *arg)
{
  struct docs_texts *t = arg;
  char quoted[64];
  (void)def;
  (void)help;
  snprintf(quoted, sizeof(quoted), "`%s`", name);
  ASSERTF(strstr(t->env_md, quoted), "docs/env.md does not document %s", name);
  ASSERTF(strstr(t->help, name), "collierun --help does not mention %s", name);
  t->n++;
}

TEST_IMPL(docs_env_complete)
{
  struct docs_texts t = {docs_slurp(COLLIE_SOURCE_DIR "/docs/env.md", 0),
                         docs_slurp(COLLIE_BUILD_DIR "/collierun --help", 1), 0};
  collie__params_describe(docs_check, &t);
  ASSERT(t.n >= 16);
  free((void *)t.env_md);
  free((void *)t.help);
}
