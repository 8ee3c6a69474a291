/* log_test.c - COLLIE_DEBUG=INFO writes log lines to stderr that carry the
 * level, the rank and the communicator; WARN (the default) keeps init quiet. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

struct log_run {
  collie_result_t barrier_rc, destroy_rc;
};

/* init + barrier + destroy, as a program would, results kept for checking. */
static void
log_lifecycle(void *arg)
{
  struct log_run *r = arg;
  collie_comm_t *comm = test_comm();
  r->barrier_rc = collie_barrier(comm, NULL, NULL);
  r->destroy_rc = collie_comm_destroy(comm);
}

/* The stderr of one lifecycle at COLLIE_DEBUG=level (caller frees). */
static char *
log_capture(const char *level)
{
  struct log_run r;
  setenv("COLLIE_DEBUG", level, 1);
  char *out = test_capture_stderr(log_lifecycle, &r);
  ASSERT_OK(r.barrier_rc);
  ASSERT_OK(r.destroy_rc);
  return out;
}

TEST_IMPL(log_levels)
{
  char want[64];
  char *quiet = log_capture("WARN");
  ASSERTF(quiet[0] == '\0', "WARN level printed during a healthy run:\n%s", quiet);
  free(quiet);
  char *info = log_capture("INFO");
  snprintf(want, sizeof(want), "rank %d/%d comm ", test_rank(), test_size());
  ASSERTF(strstr(info, "collie INFO") && strstr(info, want) && strstr(info, "INIT"),
          "INFO output lacks level, \"%s\" or subsystem:\n%s", want, info);
  free(info);
  unsetenv("COLLIE_DEBUG");
}
