/* bootstrap_file_test.c - the file store, the multi-rank helpers shared with
 * the tcp tests, and the prefix view. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap_test.h"
#include "runner.h"
#include "util/util.h"

void
bootstrap_test_fill(unsigned char *buf, size_t n, unsigned seed)
{
  unsigned st = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)test_rand(&st);
}

void
bootstrap_test_barrier(collie__store_t *s, const char *key, int size)
{
  int64_t v = 0;
  int64_t dl = collie__deadline_after_ms(15000);
  ASSERT_OK(collie__store_add(s, key, 1, &v, dl));
  while (v < size) {
    ASSERTF(collie__now_ns() < dl, "barrier %s stuck at %lld/%d", key, (long long)v, size);
    collie__sleep_ns(1000000);
    ASSERT_OK(collie__store_add(s, key, 0, &v, dl));
  }
  ASSERT(v == size);
}

void
bootstrap_test_finish(collie__store_t *s, int rank, int size)
{
  int64_t v = 0;
  int64_t dl = collie__deadline_after_ms(15000);
  ASSERT_OK(collie__store_add(s, "finished", 1, &v, dl));
  while (rank == 0 && v < size) {
    ASSERTF(collie__now_ns() < dl, "finish stuck at %lld/%d", (long long)v, size);
    collie__sleep_ns(1000000);
    ASSERT_OK(collie__store_add(s, "finished", 0, &v, dl));
  }
}

void
bootstrap_test_exercise(collie__store_t *s, int rank, int size, size_t bigval)
{
  char key[64], val[64];
  int64_t dl = collie__deadline_after_ms(15000);
  unsigned char *big = malloc(bigval);
  ASSERT(big);
  snprintf(key, sizeof(key), "rank/%d/addr", rank);
  snprintf(val, sizeof(val), "value-of-%d", rank);
  ASSERT_OK(collie__store_set(s, key, val, strlen(val), dl));
  bootstrap_test_fill(big, bigval, (unsigned)rank);
  snprintf(key, sizeof(key), "rank/%d/big", rank);
  ASSERT_OK(collie__store_set(s, key, big, bigval, dl));
  for (int r = 0; r < size; r++) {
    void *got = NULL;
    size_t n = 0;
    snprintf(key, sizeof(key), "rank/%d/addr", r);
    snprintf(val, sizeof(val), "value-of-%d", r);
    ASSERT_OK(collie__store_get(s, key, &got, &n, dl));
    ASSERTF(n == strlen(val) && !memcmp(got, val, n), "key %s: got %.*s", key, (int)n, (char *)got);
    free(got);
    snprintf(key, sizeof(key), "rank/%d/big", r);
    ASSERT_OK(collie__store_get(s, key, &got, &n, dl));
    bootstrap_test_fill(big, bigval, (unsigned)r);
    ASSERTF(n == bigval && !memcmp(got, big, n), "key %s: %zu bytes, wrong content", key, n);
    free(got);
  }
  free(big);
  /* Every rank adds once: the values handed out are distinct, the last is size. */
  int64_t mine = 0;
  ASSERT_OK(collie__store_add(s, "counter", 1, &mine, dl));
  ASSERT(mine >= 1 && mine <= size);
  snprintf(key, sizeof(key), "counter/%lld", (long long)mine);
  ASSERT_OK(collie__store_set(s, key, "x", 1, dl)); /* two ranks with one value would clash */
  if (mine == size) ASSERT_OK(collie__store_set(s, "counter/done", "", 0, dl));
  void *got = NULL;
  size_t n = 99;
  ASSERT_OK(collie__store_get(s, "counter/done", &got, &n, dl));
  ASSERT(n == 0);
  free(got);
  for (int i = 1; i <= size; i++) {
    snprintf(key, sizeof(key), "counter/%d", i);
    ASSERT_OK(collie__store_get(s, key, &got, &n, dl));
    free(got);
  }
  /* A counter reads back as its decimal digits. */
  ASSERT_OK(collie__store_get(s, "counter", &got, &n, dl));
  snprintf(val, sizeof(val), "%d", size);
  ASSERTF(n == strlen(val) && !memcmp(got, val, n), "counter reads %.*s", (int)n, (char *)got);
  free(got);
  bootstrap_test_barrier(s, "exit", size);
}

/* 4 ranks on the runner's file store (COLLIE_STORE is file://...). */
TEST_IMPL(bootstrap_file_store_ranks)
{
  collie__store_t *s = NULL;
  const char *url = getenv("COLLIE_STORE");
  ASSERT(url && !strncmp(url, "file://", 7));
  ASSERT_OK(collie__store_open(url, test_rank(), test_size(), getenv("COLLIE_JOB_TOKEN"),
                               collie__deadline_after_ms(5000), &s));
  ASSERT(!strcmp(s->ops->scheme, "file"));
  bootstrap_test_exercise(s, test_rank(), test_size(), 200000);
  bootstrap_test_finish(s, test_rank(), test_size());
  collie__store_release(s);
}

static collie__store_t *
file_open(const char *token)
{
  char url[600];
  collie__store_t *s = NULL;
  snprintf(url, sizeof(url), "file://%s/store/sub", test_dir());
  ASSERT_OK(collie__store_open(url, 0, 1, token, collie__deadline_after_ms(1000), &s));
  return s;
}

TEST_IMPL(bootstrap_file_store_timeout)
{
  collie__store_t *s = file_open("tok");
  void *v = NULL;
  size_t n = 0;
  int64_t t0 = collie__now_ns();
  ASSERT_RC(COLLIE_TIMEOUT, "never/set",
            collie__store_get(s, "never/set", &v, &n, collie__deadline_after_ms(300)));
  int64_t took = collie__now_ns() - t0;
  ASSERTF(took >= 290000000 && took < 800000000, "timeout took %lld ns", (long long)took);
  ASSERT(v == NULL);
  /* A deadline already past still finds a key that exists. */
  ASSERT_OK(collie__store_set(s, "there", "1", 1, collie__deadline_after_ms(1000)));
  ASSERT_OK(collie__store_get(s, "there", &v, &n, collie__now_ns() - 1));
  ASSERT(n == 1 && !memcmp(v, "1", 1));
  free(v);
  collie__store_release(s);
}

TEST_IMPL(bootstrap_file_store_tokens)
{
  collie__store_t *a = file_open("job-a"), *b = file_open("job-b"), *a2 = file_open("job-a");
  int64_t dl = collie__deadline_after_ms(2000);
  void *v = NULL;
  size_t n = 0;
  ASSERT_OK(collie__store_set(a, "addr", "AAA", 3, dl));
  ASSERT_RC(COLLIE_TIMEOUT, "addr",
            collie__store_get(b, "addr", &v, &n, collie__deadline_after_ms(50)));
  ASSERT_OK(collie__store_set(b, "addr", "BB", 2, dl));
  ASSERT_OK(collie__store_get(a2, "addr", &v, &n, dl));
  ASSERT(n == 3 && !memcmp(v, "AAA", 3));
  free(v);
  ASSERT_OK(collie__store_get(b, "addr", &v, &n, dl));
  ASSERT(n == 2 && !memcmp(v, "BB", 2));
  free(v);
  int64_t c;
  ASSERT_OK(collie__store_add(a, "n", 5, &c, dl));
  ASSERT_OK(collie__store_add(b, "n", 1, &c, dl));
  ASSERT(c == 1);
  ASSERT_OK(collie__store_add(a2, "n", 1, &c, dl));
  ASSERT(c == 6);
  collie__store_release(a);
  collie__store_release(a2);
  collie__store_release(b);
}

TEST_IMPL(bootstrap_file_store_keys)
{
  collie__store_t *s = file_open("k");
  int64_t dl = collie__deadline_after_ms(2000);
  void *v = NULL;
  size_t n = 0;
  /* Keys with separators, dots and the longest allowed length. */
  const char *keys[] = {"a/b/c", "a-2Fb", "..", ".", "x:y-z_1.2", "a_2Fb"};
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
    ASSERT_OK(collie__store_set(s, keys[i], keys[i], strlen(keys[i]), dl));
  char longkey[COLLIE_STORE_MAX_KEY + 2];
  memset(longkey, '/', COLLIE_STORE_MAX_KEY);
  longkey[COLLIE_STORE_MAX_KEY] = '\0';
  ASSERT_OK(collie__store_set(s, longkey, "L", 1, dl));
  longkey[0] = '.';
  ASSERT_OK(collie__store_set(s, longkey, "M", 1, dl));
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
    ASSERT_OK(collie__store_get(s, keys[i], &v, &n, dl));
    ASSERTF(n == strlen(keys[i]) && !memcmp(v, keys[i], n), "key %s", keys[i]);
    free(v);
  }
  ASSERT_OK(collie__store_get(s, longkey, &v, &n, dl));
  ASSERT(n == 1 && !memcmp(v, "M", 1));
  free(v);
  longkey[0] = '/';
  ASSERT_OK(collie__store_get(s, longkey, &v, &n, dl));
  ASSERT(n == 1 && !memcmp(v, "L", 1));
  free(v);
  /* Bad keys and values. */
  longkey[COLLIE_STORE_MAX_KEY] = 'x';
  longkey[COLLIE_STORE_MAX_KEY + 1] = '\0';
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "longer than", collie__store_set(s, longkey, "", 0, dl));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "empty", collie__store_set(s, "", "", 0, dl));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "a b", collie__store_set(s, "a b", "", 0, dl));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "key", collie__store_get(s, "a\nb", &v, &n, dl));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "bad*", collie__store_add(s, "bad*", 1, NULL, dl));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "big",
            collie__store_set(s, "big", "x", COLLIE_STORE_MAX_VALUE + 1, dl));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "NULL", collie__store_set(s, "nul", NULL, 3, dl));
  /* Overwrite, empty value, the largest value. */
  ASSERT_OK(collie__store_set(s, "ow", "first", 5, dl));
  ASSERT_OK(collie__store_set(s, "ow", "", 0, dl));
  ASSERT_OK(collie__store_get(s, "ow", &v, &n, dl));
  ASSERT(n == 0 && v != NULL);
  free(v);
  unsigned char *big = malloc(COLLIE_STORE_MAX_VALUE);
  bootstrap_test_fill(big, COLLIE_STORE_MAX_VALUE, 7);
  ASSERT_OK(collie__store_set(s, "max", big, COLLIE_STORE_MAX_VALUE, dl));
  ASSERT_OK(collie__store_get(s, "max", &v, &n, dl));
  ASSERT(n == COLLIE_STORE_MAX_VALUE && !memcmp(v, big, n));
  free(v);
  free(big);
  /* Counters: negative deltas, a non-integer value, overflow. */
  int64_t c = 0;
  ASSERT_OK(collie__store_add(s, "c", -3, &c, dl));
  ASSERT(c == -3);
  ASSERT_OK(collie__store_add(s, "c", 10, &c, dl));
  ASSERT(c == 7);
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "not an integer", collie__store_add(s, "ow", 1, &c, dl));
  ASSERT_OK(collie__store_set(s, "ow", "12x", 3, dl));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "not an integer", collie__store_add(s, "ow", 1, &c, dl));
  ASSERT_OK(collie__store_add(s, "big", INT64_MAX, &c, dl));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "overflow", collie__store_add(s, "big", 1, &c, dl));
  ASSERT_OK(collie__store_add(s, "big", 0, &c, dl));
  ASSERT(c == INT64_MAX);
  collie__store_release(s);
}

TEST_IMPL(bootstrap_store_bad_urls)
{
  collie__store_t *s = (collie__store_t *)1;
  int64_t dl = collie__deadline_after_ms(1000);
  const char *bad[] = {"file://relative/dir", "file://",         "file:/abs",     "files:///x",
                       "http://h:1",          "tcp://",          "tcp://host",    "tcp://:80",
                       "tcp://host:99999",    "tcp://host:12ab", "tcp://[::1:80", "/abs/dir"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    ASSERT_RC(COLLIE_INVALID_ARGUMENT, bad[i], collie__store_open(bad[i], 0, 2, "t", dl, &s));
    ASSERT(s == NULL);
  }
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "empty", collie__store_open("", 0, 1, "t", dl, &s));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "empty", collie__store_open(NULL, 0, 1, "t", dl, &s));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "rank 2",
            collie__store_open("file:///tmp/x", 2, 2, "t", dl, &s));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "rank -1",
            collie__store_open("file:///tmp/x", -1, 2, "t", dl, &s));
  /* A directory that cannot be created is a system error naming the path. */
  ASSERT_RC(COLLIE_SYSTEM_ERROR, "/etc/passwd/x",
            collie__store_open("file:///etc/passwd/x", 0, 1, "t", dl, &s));
}

TEST_IMPL(bootstrap_prefix_store)
{
  collie__store_t *base = file_open("p"), *p1 = NULL, *p2 = NULL;
  int64_t dl = collie__deadline_after_ms(2000);
  void *v = NULL;
  size_t n = 0;
  ASSERT_OK(collie__store_prefix(base, "c1a2b", &p1));
  ASSERT(base->refs == 2 && p1->refs == 1);
  ASSERT(!strcmp(p1->ops->scheme, "prefix"));
  ASSERT_OK(collie__store_prefix(p1, "s7", &p2));
  ASSERT(p1->refs == 2);
  ASSERT_OK(collie__store_set(p1, "addr", "one", 3, dl));
  ASSERT_OK(collie__store_get(base, "c1a2b/addr", &v, &n, dl));
  ASSERT(n == 3 && !memcmp(v, "one", 3));
  free(v);
  ASSERT_OK(collie__store_set(p2, "addr", "two", 3, dl));
  ASSERT_OK(collie__store_get(base, "c1a2b/s7/addr", &v, &n, dl));
  ASSERT(n == 3 && !memcmp(v, "two", 3));
  free(v);
  ASSERT_OK(collie__store_get(p1, "s7/addr", &v, &n, dl));
  ASSERT(n == 3 && !memcmp(v, "two", 3));
  free(v);
  int64_t c;
  ASSERT_OK(collie__store_add(p2, "n", 2, &c, dl));
  ASSERT_OK(collie__store_add(base, "c1a2b/s7/n", 1, &c, dl));
  ASSERT(c == 3);
  ASSERT_RC(COLLIE_TIMEOUT, "c1a2b/s7/missing",
            collie__store_get(p2, "missing", &v, &n, collie__deadline_after_ms(20)));
  /* Bad prefixes and keys that do not fit once prefixed. */
  collie__store_t *bad = (collie__store_t *)1;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "empty", collie__store_prefix(base, "", &bad));
  ASSERT(bad == NULL);
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "a b", collie__store_prefix(base, "a b", &bad));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "NULL", collie__store_prefix(NULL, "x", &bad));
  char longkey[COLLIE_STORE_MAX_KEY + 1];
  memset(longkey, 'k', COLLIE_STORE_MAX_KEY - 3);
  longkey[COLLIE_STORE_MAX_KEY - 3] = '\0';
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "prefix", collie__store_set(p1, longkey, "", 0, dl));
  /* Releasing the base first: the views keep it alive. */
  collie__store_release(base);
  ASSERT_OK(collie__store_set(p2, "late", "3", 1, dl));
  collie__store_release(p1);
  ASSERT_OK(collie__store_get(p2, "late", &v, &n, dl));
  free(v);
  collie__store_release(p2); /* closes p2, then p1, then base: valgrind sees no leak */
}
