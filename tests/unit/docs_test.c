/* docs_test.c - the documentation names every variable the library parses
 * (docs/env.md and `collierun --help` are checked against params.def) and
 * every option of the tools (each tool's page against its --help). */
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

/* Every long option in text's usage lines and option lines (a line whose
 * first word starts with '-') is named in page; returns how many. */
static int
docs_options_in(const char *tool, const char *text, const char *page, const char *page_name)
{
  int n = 0;
  for (const char *line = text; line && *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    const char *p = line;
    while (p < line + len && *p == ' ') p++;
    int wanted = (p < line + len && *p == '-') || !strncmp(p, "usage:", 6);
    for (const char *q = p; wanted && q + 2 < line + len; q++) {
      if (q[0] != '-' || q[1] != '-' || !(q[2] >= 'a' && q[2] <= 'z') ||
          (q > line && q[-1] != ' ' && q[-1] != '['))
        continue;
      char opt[48];
      size_t k = 0;
      while (q + k < line + len && k + 1 < sizeof(opt) &&
             ((q[k] >= 'a' && q[k] <= 'z') || (q[k] >= '0' && q[k] <= '9') || q[k] == '-'))
        opt[k] = q[k], k++;
      opt[k] = '\0';
      ASSERTF(strstr(page, opt), "%s: %s's option %s is not in %s", page_name, tool, opt,
              page_name);
      n++;
      q += k - 1;
    }
    line = end ? end + 1 : NULL;
  }
  return n;
}

TEST_IMPL(docs_tool_options)
{
  static const struct {
    const char *tool, *cmd, *page;
  } helps[] = {
      {"collierun", "collierun --help", "collierun.md"},
      {"collie-bench", "collie-bench --help", "collie-bench.md"},
      {"collie-report hang", "collie-report hang --help", "collie-report.md"},
      {"collie-report summary", "collie-report summary --help", "collie-report.md"},
      {"collie-report stragglers", "collie-report stragglers --help", "collie-report.md"},
      {"collie-report trace", "collie-report trace --help", "collie-report.md"},
      {"collie-report plot", "collie-report plot --help", "collie-report.md"},
  };
  int total = 0;
  for (size_t i = 0; i < sizeof(helps) / sizeof(helps[0]); i++) {
    char cmd[256], path[256];
    snprintf(cmd, sizeof(cmd), "%s/%s 2>&1", COLLIE_BUILD_DIR, helps[i].cmd);
    snprintf(path, sizeof(path), "%s/docs/%s", COLLIE_SOURCE_DIR, helps[i].page);
    char *help = docs_slurp(cmd, 1), *page = docs_slurp(path, 0);
    total += docs_options_in(helps[i].tool, help, page, helps[i].page);
    free(help);
    free(page);
  }
  ASSERTF(total >= 40, "only %d options found in the tools' --help (the parser is wrong)", total);
}
