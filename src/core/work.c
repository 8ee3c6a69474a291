/*
 * work.c - work handles. In this version every operation runs to completion
 * before its entry point returns, so a handle only carries the result and
 * the error message of its operation; collie_wait/collie_test hand that
 * message to the caller's thread. The worker thread that makes operations
 * truly asynchronous replaces this file's internals, not its contract.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/core.h"

struct collie_work {
  collie_result_t rc;
  char msg[COLLIE_ERRMSG_LEN];
};

collie_work_t *
collie__work_done(collie_result_t rc)
{
  collie_work_t *w = calloc(1, sizeof(*w));
  if (!w) return NULL;
  w->rc = rc;
  if (rc != COLLIE_SUCCESS) snprintf(w->msg, sizeof(w->msg), "%s", collie__err_msg());
  return w;
}

static collie_result_t
work_result(collie_work_t *w, const char *fn)
{
  if (!w) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: work is NULL", fn);
  if (w->rc != COLLIE_SUCCESS) collie__err_set_text(w->msg);
  return w->rc;
}

collie_result_t
collie_wait(collie_work_t *work, int64_t timeout_ms)
{
  (void)timeout_ms;
  return work_result(work, "collie_wait");
}

collie_result_t
collie_test(collie_work_t *work)
{
  return work_result(work, "collie_test");
}

void
collie_work_free(collie_work_t *work)
{
  free(work);
}
