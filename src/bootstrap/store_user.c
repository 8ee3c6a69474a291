/*
 * store_user.c - the caller's key-value store (collie_store_callbacks_t) behind
 * collie's store interface.
 *
 * A framework that already has a rendezvous store (torch.distributed hands
 * every process group one) should not need a second listening port or
 * directory for collie: its callbacks become a store like the tcp and file
 * ones, so init, split and the transports' setup run unchanged on top of it.
 * The callbacks know nothing of deadlines; each call gets the time left until
 * the operation's deadline, and the key and value rules are checked here, so
 * a callback only ever sees what collie's own stores accept.
 */
#include <stdlib.h>
#include <string.h>

#include "bootstrap/store_int.h"
#include "util/error.h"
#include "util/util.h"

struct user_store {
  collie__store_t base;
  collie_store_callbacks_t cb;
};

/* First buffer a get offers; peer records and addresses fit. */
#define USER_GET_FIRST_CAP 4096

static int64_t
user_ms_left(int64_t deadline_ns)
{
  int64_t left = deadline_ns - collie__now_ns();
  return left <= 0 ? 0 : (left + 999999) / 1000000;
}

/* The error of a callback that returned rc: a code outside the result codes (or
 * SUCCESS where a failure was due) becomes SYSTEM_ERROR. */
static collie_result_t
user_fail(const char *op, const char *key, collie_result_t rc, const char *why)
{
  if (rc <= COLLIE_SUCCESS || rc > COLLIE_INTERNAL_ERROR || rc == COLLIE_IN_PROGRESS)
    rc = COLLIE_SYSTEM_ERROR;
  return collie__err(rc, "store %s \"%s\" (the caller's store): %s%s", op, key,
                     why ? why : "the callback returned ", why ? "" : collie_result_string(rc));
}

static collie_result_t
user_set(collie__store_t *s, const char *key, const void *val, size_t len, int64_t deadline_ns)
{
  struct user_store *us = (struct user_store *)s;
  collie_result_t rc;
  (void)deadline_ns;
  if ((rc = collie__store_check_key("store set (the caller's store)", key)) != COLLIE_SUCCESS ||
      (rc = collie__store_check_value("store set (the caller's store)", key, val, len)) !=
          COLLIE_SUCCESS)
    return rc;
  rc = us->cb.set(us->cb.ctx, key, len ? val : "", len);
  return rc == COLLIE_SUCCESS ? rc : user_fail("set", key, rc, NULL);
}

static collie_result_t
user_get(collie__store_t *s, const char *key, void **val, size_t *len, int64_t deadline_ns)
{
  struct user_store *us = (struct user_store *)s;
  collie_result_t rc = collie__store_check_key("store get (the caller's store)", key);
  if (rc != COLLIE_SUCCESS) return rc;
  size_t cap = USER_GET_FIRST_CAP;
  for (int tries = 0; tries < 3; tries++) {
    char *buf = malloc(cap ? cap : 1);
    if (!buf) return collie__err(COLLIE_SYSTEM_ERROR, "store get \"%s\": out of memory", key);
    size_t n = (size_t)-1;
    rc = us->cb.get(us->cb.ctx, key, user_ms_left(deadline_ns), buf, cap, &n);
    if (rc != COLLIE_SUCCESS) {
      free(buf);
      if (rc == COLLIE_TIMEOUT)
        return collie__err(COLLIE_TIMEOUT,
                           "store get \"%s\" (the caller's store): not set "
                           "within the timeout (a rank did not arrive)",
                           key);
      return user_fail("get", key, rc, NULL);
    }
    if (n > COLLIE_STORE_MAX_VALUE) {
      free(buf);
      return user_fail("get", key, COLLIE_INVALID_ARGUMENT,
                       n == (size_t)-1 ? "the callback did not set the value's length"
                                       : "the value is longer than 1 MiB");
    }
    if (n <= cap) {
      *val = buf;
      *len = n;
      return COLLIE_SUCCESS;
    }
    free(buf); /* too small: once more with the length the store said */
    cap = n;
  }
  return user_fail("get", key, COLLIE_SYSTEM_ERROR, "the value kept growing between two reads");
}

static collie_result_t
user_add(collie__store_t *s, const char *key, int64_t delta, int64_t *out, int64_t deadline_ns)
{
  struct user_store *us = (struct user_store *)s;
  (void)deadline_ns;
  collie_result_t rc = collie__store_check_key("store add (the caller's store)", key);
  if (rc != COLLIE_SUCCESS) return rc;
  rc = us->cb.add(us->cb.ctx, key, delta, out);
  return rc == COLLIE_SUCCESS ? rc : user_fail("add", key, rc, NULL);
}

static void
user_close(collie__store_t *s)
{
  struct user_store *us = (struct user_store *)s;
  if (us->cb.release) us->cb.release(us->cb.ctx);
  free(us);
}

static const struct collie__store_ops user_ops = {
    .scheme = "user", .set = user_set, .get = user_get, .add = user_add, .close = user_close};

collie_result_t
collie__store_user_open(const collie_store_callbacks_t *cb, collie__store_t **out)
{
  if (!out) return collie__err(COLLIE_INVALID_ARGUMENT, "store open: out is NULL");
  *out = NULL;
  if (!cb || !cb->set || !cb->get || !cb->add)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "collie_config_t.store_callbacks: %s is NULL (set, get and add are "
                       "required; release is optional)",
                       !cb        ? "the struct"
                       : !cb->set ? "set"
                       : !cb->get ? "get"
                                  : "add");
  struct user_store *us = calloc(1, sizeof(*us));
  if (!us) return collie__err(COLLIE_SYSTEM_ERROR, "store open: out of memory");
  collie__store_init(&us->base, &user_ops);
  us->cb = *cb;
  *out = &us->base;
  return COLLIE_SUCCESS;
}
