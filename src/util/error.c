/* error.c - the calling thread's error message and the logger. Each thread
 * has its own message so that two communicators driven from two threads never
 * overwrite each other's diagnosis (NCCL's global buffer is what we avoid). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "util/error.h"

static _Thread_local char error_msg[COLLIE_ERRMSG_LEN];
static _Thread_local const char *error_ctx;
collie__loglevel_t collie__log_level = COLLIE_LOG_WARN;

collie_result_t
collie__err(collie_result_t rc, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(error_msg, sizeof(error_msg), fmt, ap);
  va_end(ap);
  return rc;
}

collie_result_t
collie__err_errno(collie_result_t rc, const char *fmt, ...)
{
  int saved = errno;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(error_msg, sizeof(error_msg), fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n < sizeof(error_msg))
    snprintf(error_msg + n, sizeof(error_msg) - (size_t)n, ": %s", strerror(saved));
  errno = saved;
  return rc;
}

void
collie__err_prefix(const char *fmt, ...)
{
  char old[COLLIE_ERRMSG_LEN];
  memcpy(old, error_msg, sizeof(old));
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(error_msg, sizeof(error_msg), fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n < sizeof(error_msg))
    snprintf(error_msg + n, sizeof(error_msg) - (size_t)n, ": %s", old);
}

const char *
collie__err_msg(void)
{
  return error_msg;
}

void
collie__err_clear(void)
{
  error_msg[0] = '\0';
}

void
collie__err_set_text(const char *msg)
{
  snprintf(error_msg, sizeof(error_msg), "%s", msg ? msg : "");
}

void
collie__log_context(const char *ctx)
{
  error_ctx = ctx;
}

void
collie__log(collie__loglevel_t lvl, const char *subsys, const char *fmt, ...)
{
  static const char *names[] = {"", "WARN", "INFO", "TRACE"};
  char line[1024];
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  localtime_r(&tv.tv_sec, &tm);
  int n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%06ld collie %s [%d] %s%s%s: ", tm.tm_hour,
                   tm.tm_min, tm.tm_sec, (long)tv.tv_usec, names[lvl], (int)getpid(),
                   error_ctx ? error_ctx : "", error_ctx && error_ctx[0] ? " " : "", subsys);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && (size_t)n < sizeof(line))
    n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof(line) - 1) n = (int)sizeof(line) - 2;
  line[n++] = '\n';
  /* One write per line so lines of different ranks never interleave. */
  ssize_t w = write(STDERR_FILENO, line, (size_t)n);
  (void)w;
}
