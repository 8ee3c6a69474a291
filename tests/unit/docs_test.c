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
  char *buf = NULL;
  if (is_cmd)
    test_shell(cmd_or_path, &buf);
  else
    buf = test_read_file(cmd_or_path, NULL);
  ASSERTF(buf, "cannot open %s", cmd_or_path);
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
