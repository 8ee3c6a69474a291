/*
 * error.h - the calling thread's error message, and logging.
 *
 * Every module reports a failure by formatting one specific message
 * (naming the argument and value, or the peer, operation and errno's text)
 * into the calling thread's slot and returning the code:
 *
 *     return collie__err(COLLIE_INVALID_ARGUMENT, "allreduce: sendbuf is NULL with count %zu", n);
 *
 * collie_last_error() reads the slot. There is no process-global buffer.
 * Logging writes to stderr, each line with the thread's log context (rank and
 * communicator, set by src/core on entry to every call).
 */
#ifndef COLLIE_UTIL_ERROR_H
#define COLLIE_UTIL_ERROR_H

#include "collie.h"

#define COLLIE_ERRMSG_LEN 512

/* Formats the calling thread's message and returns rc. Cold: a branch that
 * reports an error is laid out away from the calls' fast paths, which the
 * compiler then keeps whole (without it, a collective's checks were split
 * into an outlined part with its own prologue; issue 38 point 5). */
collie_result_t collie__err(collie_result_t rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), cold));
/* As collie__err, appending ": <strerror(errno)>" with the errno at entry. */
collie_result_t collie__err_errno(collie_result_t rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), cold));
/* Prefixes the thread's current message with "<fmt>: " (adds context on the way up). */
void collie__err_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The thread's current message (never NULL), and a way to clear or copy one in. */
const char *collie__err_msg(void);
void collie__err_clear(void);
void collie__err_set_text(const char *msg);

typedef enum {
  COLLIE_LOG_NONE = 0,
  COLLIE_LOG_WARN,
  COLLIE_LOG_INFO,
  COLLIE_LOG_TRACE
} collie__loglevel_t;

/* Process-wide level, set from COLLIE_DEBUG at init; WARN by default. */
extern collie__loglevel_t collie__log_level;

/* Sets the thread's context shown on each log line ("rank 3/8 comm 9f2c"). The
 * string is borrowed, not copied (the communicator owns it): cheap per call. */
void collie__log_context(const char *ctx);
void collie__log(collie__loglevel_t lvl, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define COLLIE_WARN(subsys, ...)                                                                   \
  do {                                                                                             \
    if (collie__log_level >= COLLIE_LOG_WARN) collie__log(COLLIE_LOG_WARN, subsys, __VA_ARGS__);   \
  } while (0)
#define COLLIE_INFO(subsys, ...)                                                                   \
  do {                                                                                             \
    if (collie__log_level >= COLLIE_LOG_INFO) collie__log(COLLIE_LOG_INFO, subsys, __VA_ARGS__);   \
  } while (0)
#define COLLIE_TRACE(subsys, ...)                                                                  \
  do {                                                                                             \
    if (collie__log_level >= COLLIE_LOG_TRACE) collie__log(COLLIE_LOG_TRACE, subsys, __VA_ARGS__); \
  } while (0)

/* Runs call; on failure logs a TRACE breadcrumb (file:line -> rc), stores the
 * code in rc and jumps to label. Never hides a return. */
#define COLLIE_CHECK_GOTO(call, rc, label)                                                         \
  do {                                                                                             \
    (rc) = (call);                                                                                 \
    if ((rc) != COLLIE_SUCCESS) {                                                                  \
      COLLIE_TRACE("CHECK", "%s:%d -> %s", __FILE__, __LINE__, collie_result_string(rc));          \
      goto label;                                                                                  \
    }                                                                                              \
  } while (0)

#endif /* COLLIE_UTIL_ERROR_H */
