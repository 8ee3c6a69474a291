/*
 * cli.h - what collie's command-line programs (collie-bench and the
 * benchmarks in bench/) share: one reading of a byte size and one seconds
 * clock, so that "-b 64M" means the same everywhere and is refused the same
 * way when it is not a size.
 */
#ifndef COLLIE_CLI_H
#define COLLIE_CLI_H

#include <stddef.h>

/* A size: digits (a fraction allowed), then an optional binary K, M or G,
 * optionally followed by B or iB ("8", "4K", "1.5M", "64MiB", "1G"); at
 * least 1 byte, below 2^63. Returns 0 with *out set, or -1 with why (a
 * sentence without the value) in why[0..len). */
int cli_parse_size(const char *s, size_t *out, char *why, size_t len);

/* A size argument of option opt: cli_parse_size's value, or a message on
 * stderr ("-s: '12X' is not a size ...") and exit(2). For the benchmarks,
 * whose options are few and whose errors end the run. */
size_t cli_size_arg(const char *opt, const char *s);

/* CLOCK_MONOTONIC in seconds. */
double cli_now_s(void);

#endif /* COLLIE_CLI_H */
