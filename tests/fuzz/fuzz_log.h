/*
 * fuzz_log.h - the log level of fuzz targets that run library code without
 * collie_comm_init, which is what reads COLLIE_DEBUG elsewhere.
 * Built only with -DCOLLIE_FUZZ=ON (scripts/fuzz.sh).
 */
#ifndef COLLIE_FUZZ_LOG_H
#define COLLIE_FUZZ_LOG_H

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* COLLIE_DEBUG=WARN, INFO or TRACE as asked, else nothing: what the code
 * refuses is the point of a fuzzer, not news. */
static inline void
fuzz_log_level(void)
{
  const char *d = getenv("COLLIE_DEBUG");
  collie__log_level = !d                    ? COLLIE_LOG_NONE
                      : !strcmp(d, "WARN")  ? COLLIE_LOG_WARN
                      : !strcmp(d, "INFO")  ? COLLIE_LOG_INFO
                      : !strcmp(d, "TRACE") ? COLLIE_LOG_TRACE
                                            : COLLIE_LOG_NONE;
}

#endif /* COLLIE_FUZZ_LOG_H */
