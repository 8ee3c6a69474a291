/*
 * store.c - opens a store by url and counts references to it.
 *
 * A communicator and every communicator split from it share one store, each
 * through a prefix view (store_prefix.c), so the store lives as long as the
 * last of them: that is what the reference count is for. The count is
 * atomic because split communicators may be destroyed from different
 * threads. The key and value checks live here so that every implementation
 * rejects the same inputs with the same words.
 */
#include <string.h>

#include "bootstrap/store_int.h"
#include "util/error.h"
#include "util/util.h"

void
collie__store_init(collie__store_t *s, const struct collie__store_ops *ops)
{
  s->ops = ops;
  s->refs = 1;
}

static int
store_key_char_ok(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '/' || c == ':' || c == '-';
}

collie_result_t
collie__store_check_key(const char *what, const char *key)
{
  if (!key || !*key) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: key is empty", what);
  size_t n = strnlen(key, COLLIE_STORE_MAX_KEY + 1);
  if (n > COLLIE_STORE_MAX_KEY)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: key \"%.40s...\" is longer than %d characters",
                       what, key, COLLIE_STORE_MAX_KEY);
  for (size_t i = 0; i < n; i++)
    if (!store_key_char_ok(key[i]))
      return collie__err(
          COLLIE_INVALID_ARGUMENT,
          "%s: key \"%s\" has character 0x%02x at %zu (allowed: A-Z a-z 0-9 _ . / : -)", what, key,
          (unsigned char)key[i], i);
  return COLLIE_SUCCESS;
}

collie_result_t
collie__store_check_value(const char *what, const char *key, const void *val, size_t len)
{
  if (len > COLLIE_STORE_MAX_VALUE)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: value of key \"%s\" is %zu bytes (max %u)",
                       what, key, len, (unsigned)COLLIE_STORE_MAX_VALUE);
  if (len > 0 && !val)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: value of key \"%s\" is NULL with length %zu",
                       what, key, len);
  return COLLIE_SUCCESS;
}

int
collie__store_parse_counter(const void *val, size_t len, int64_t *out)
{
  const char *p = val;
  size_t i = 0;
  int neg = 0;
  uint64_t v = 0;
  if (len > 0 && p[0] == '-') {
    neg = 1;
    i = 1;
  }
  if (i == len || len > 20) return -1;
  for (; i < len; i++) {
    if (p[i] < '0' || p[i] > '9' || v > UINT64_MAX / 10 - 1) return -1;
    v = v * 10 + (uint64_t)(p[i] - '0');
    if (v > (uint64_t)INT64_MAX + (uint64_t)neg) return -1;
  }
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return 0;
}

collie_result_t
collie__store_open(const char *url, int rank, int size, const char *token, int64_t deadline_ns,
                   collie__store_t **out)
{
  return collie__store_open_serving(url, rank, size, token, rank == 0, deadline_ns, out);
}

collie_result_t
collie__store_open_serving(const char *url, int rank, int size, const char *token, int serve,
                           int64_t deadline_ns, collie__store_t **out)
{
  if (!out) return collie__err(COLLIE_INVALID_ARGUMENT, "store open: out is NULL");
  *out = NULL;
  if (!url || !*url)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "store url is empty (expected tcp://host:port or file:///abs/dir)");
  if (size < 1 || rank < 0 || rank >= size)
    return collie__err(COLLIE_INVALID_ARGUMENT, "store %s: rank %d is not in [0, %d)", url, rank,
                       size);
  if (!token) token = "";
  if (!strncmp(url, "tcp://", 6))
    return collie__store_tcp_open(url, url + 6, serve, size, token, deadline_ns, out);
  if (!strncmp(url, "file://", 7)) return collie__store_file_open(url, url + 7, token, out);
  return collie__err(COLLIE_INVALID_ARGUMENT,
                     "store url \"%s\" is malformed: expected tcp://host:port or file:///abs/dir",
                     url);
}

void
collie__store_retain(collie__store_t *s)
{
  if (s) __atomic_fetch_add(&s->refs, 1, __ATOMIC_RELAXED);
}

void
collie__store_release(collie__store_t *s)
{
  if (s && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0) s->ops->close(s);
}
