/*
 * runner.h - the test harness: each test runs in its own process group with a
 * timeout (libuv's test/runner.c is the model). A test declared with N ranks
 * is run as N forked processes that share a fresh file store, with
 * COLLIE_RANK, COLLIE_WORLD_SIZE, COLLIE_STORE, COLLIE_JOB_TOKEN and
 * COLLIE_TRANSPORT set, so each rank calls collie_comm_init() as a user would.
 *
 * Assertions print file:line, the condition and collie_last_error(), then
 * exit the rank with status 1, which fails the test.
 */
#ifndef COLLIE_TEST_RUNNER_H
#define COLLIE_TEST_RUNNER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collie.h"

#define TEST_IMPL(fn) void test_fn_##fn(void)

/* Rank and size of this test process, from the environment the runner set. */
int test_rank(void);
int test_size(void);
/* The test's private temporary directory (removed afterwards). */
const char *test_dir(void);
/* collie_comm_init() from the runner's environment; fails the test on error. */
collie_comm_t *test_comm(void);
/* CLOCK_MONOTONIC in milliseconds: a test's own bound on a polling loop. */
int64_t test_now_ms(void);
/* Ends this rank with SIGKILL; the runner counts that death as expected. */
void test_die_by_sigkill(void) __attribute__((noreturn));
/* Arms a SIGKILL of this rank us microseconds from now (from a child
 * process), the death counted as expected: for dying in the middle of a
 * call that this rank goes on to make. */
void test_die_after_us(unsigned us);
/* Runs fn(arg) with this process's stderr (fd 2) captured; returns what was
 * written (at most 64 KiB, NUL-terminated; the caller frees). A failing
 * assertion inside fn prints into the capture, so fn should only call the
 * library and record results for the caller to check afterwards. */
char *test_capture_stderr(void (*fn)(void *arg), void *arg);
/* The whole file at path, NUL-terminated, its length in *len when len is
 * not NULL; NULL when it cannot be opened. The caller frees. */
char *test_read_file(const char *path, size_t *len);
/* test_dir()/name, in one of four static buffers used in turn (so up to
 * four results may be held at once, e.g. as arguments of one call). */
const char *test_path(const char *name);
/* Writes text to path (created or truncated); asserts every step. */
void test_write_file(const char *path, const char *text);
/* Runs the shell command cmd and returns its exit status (-1 when it did
 * not exit normally), with everything it wrote on stdout in *out (caller
 * frees); redirect stderr in cmd to capture it too. */
int test_shell(const char *cmd, char **out);
/* Deterministic pseudo-random fill (seeded) for data tests. */
unsigned test_rand(unsigned *state);

/* Whether msg contains substr; a NULL substr matches anything. */
static inline int
test_contains(const char *msg, const char *substr)
{
  return !substr || strstr(msg, substr) != NULL;
}

void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

#define ASSERT(cond)                                                                               \
  do {                                                                                             \
    if (!(cond)) test_fail(__FILE__, __LINE__, "assertion failed: %s", #cond);                     \
  } while (0)
#define ASSERTF(cond, ...)                                                                         \
  do {                                                                                             \
    if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__);                                       \
  } while (0)
#define ASSERT_OK(call)                                                                            \
  do {                                                                                             \
    collie_result_t rc_ = (call);                                                                  \
    if (rc_ != COLLIE_SUCCESS)                                                                     \
      test_fail(__FILE__, __LINE__, "%s -> %s: %s", #call, collie_result_string(rc_),              \
                collie_last_error());                                                              \
  } while (0)
/* Asserts call returns code and that collie_last_error() contains substr. */
#define ASSERT_RC(code, substr, call)                                                              \
  do {                                                                                             \
    collie_result_t rc_ = (call);                                                                  \
    if (rc_ != (code))                                                                             \
      test_fail(__FILE__, __LINE__, "%s -> %s, expected %s (%s)", #call,                           \
                collie_result_string(rc_), collie_result_string(code), collie_last_error());       \
    if (!test_contains(collie_last_error(), (substr)))                                             \
      test_fail(__FILE__, __LINE__, "%s: message \"%s\" lacks \"%s\"", #call, collie_last_error(), \
                (const char *)(substr));                                                           \
  } while (0)

#endif /* COLLIE_TEST_RUNNER_H */
