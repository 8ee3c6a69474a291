/* log_test.c - COLLIE_DEBUG=INFO writes log lines to stderr that carry the
 * level, the rank and the communicator; WARN (the default) keeps init quiet. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner.h"

/* Runs init + barrier + destroy with stderr captured into path; returns the text. */
static char *
log_capture(const char *level, const char *path)
{
  setenv("COLLIE_DEBUG", level, 1);
  fflush(stderr);
  int saved = dup(2), fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
  ASSERT(saved >= 0 && fd >= 0);
  dup2(fd, 2);
  close(fd);
  collie_comm_t *comm = test_comm();
  collie_result_t rc = collie_barrier(comm, NULL, NULL);
  collie_result_t rc2 = collie_comm_destroy(comm);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  ASSERT_OK(rc);
  ASSERT_OK(rc2);
  FILE *f = fopen(path, "r");
  ASSERT(f);
  char *buf = calloc(1, 1 << 16);
  ASSERT(buf);
  size_t n = fread(buf, 1, (1 << 16) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

TEST_IMPL(log_levels)
{
  char path[512], want[64];
  snprintf(path, sizeof(path), "%s/stderr-%d", test_dir(), test_rank());
  char *quiet = log_capture("WARN", path);
  ASSERTF(quiet[0] == '\0', "WARN level printed during a healthy run:\n%s", quiet);
  free(quiet);
  char *info = log_capture("INFO", path);
  snprintf(want, sizeof(want), "rank %d/%d comm ", test_rank(), test_size());
  ASSERTF(strstr(info, "collie INFO") && strstr(info, want) && strstr(info, "INIT"),
          "INFO output lacks level, \"%s\" or subsystem:\n%s", want, info);
  free(info);
  unsetenv("COLLIE_DEBUG");
}
