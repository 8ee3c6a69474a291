/*
 * store_prefix.c - a view of a store whose keys all start with "<prefix>/".
 *
 * Each communicator (the world one and every split) talks to the shared store
 * through its own view, so two communicators may use the same key names
 * ("rank3/addr") without colliding: Gloo's PrefixStore. The view holds a
 * reference on the store below it and drops it when it is closed, so views
 * may nest and outlive the handle their creator had.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/store_int.h"
#include "util/error.h"

struct prefix_store {
  collie__store_t base;
  collie__store_t *inner;
  char prefix[COLLIE_STORE_MAX_KEY + 1];
};

/* Builds "<prefix>/<key>" into full (COLLIE_STORE_MAX_KEY + 1 bytes). */
static collie_result_t
prefix_key(const struct prefix_store *ps, const char *op, const char *key, char *full)
{
  char what[COLLIE_STORE_MAX_KEY + 64];
  collie_result_t rc;
  snprintf(what, sizeof(what), "store %s in prefix \"%s\"", op, ps->prefix);
  if ((rc = collie__store_check_key(what, key)) != COLLIE_SUCCESS) return rc;
  size_t pl = strlen(ps->prefix), kl = strlen(key);
  if (pl + 1 + kl > COLLIE_STORE_MAX_KEY)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: key \"%s\" with its prefix is longer than %d characters", what, key,
                       COLLIE_STORE_MAX_KEY);
  memcpy(full, ps->prefix, pl);
  full[pl] = '/';
  memcpy(full + pl + 1, key, kl + 1);
  return COLLIE_SUCCESS;
}

static collie_result_t
prefix_set(collie__store_t *s, const char *key, const void *val, size_t len, int64_t deadline_ns)
{
  struct prefix_store *ps = (struct prefix_store *)s;
  char full[COLLIE_STORE_MAX_KEY + 1];
  collie_result_t rc = prefix_key(ps, "set", key, full);
  if (rc != COLLIE_SUCCESS) return rc;
  return collie__store_set(ps->inner, full, val, len, deadline_ns);
}

/* prefix "" removes the whole view: every key under "<view prefix>/". */
static collie_result_t
prefix_del_prefix(collie__store_t *s, const char *prefix, int64_t deadline_ns)
{
  struct prefix_store *ps = (struct prefix_store *)s;
  char full[COLLIE_STORE_MAX_KEY + 1];
  if (!prefix || !*prefix) {
    snprintf(full, sizeof(full), "%s/", ps->prefix);
  } else {
    collie_result_t rc = prefix_key(ps, "delete-prefix", prefix, full);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  return collie__store_del_prefix(ps->inner, full, deadline_ns);
}

static collie_result_t
prefix_get(collie__store_t *s, const char *key, void **val, size_t *len, int64_t deadline_ns)
{
  struct prefix_store *ps = (struct prefix_store *)s;
  char full[COLLIE_STORE_MAX_KEY + 1];
  collie_result_t rc = prefix_key(ps, "get", key, full);
  if (rc != COLLIE_SUCCESS) return rc;
  return collie__store_get(ps->inner, full, val, len, deadline_ns);
}

static collie_result_t
prefix_add(collie__store_t *s, const char *key, int64_t delta, int64_t *out, int64_t deadline_ns)
{
  struct prefix_store *ps = (struct prefix_store *)s;
  char full[COLLIE_STORE_MAX_KEY + 1];
  collie_result_t rc = prefix_key(ps, "add", key, full);
  if (rc != COLLIE_SUCCESS) return rc;
  return collie__store_add(ps->inner, full, delta, out, deadline_ns);
}

static void
prefix_close(collie__store_t *s)
{
  struct prefix_store *ps = (struct prefix_store *)s;
  collie__store_release(ps->inner);
  free(ps);
}

static const struct collie__store_ops prefix_ops = {.scheme = "prefix",
                                                    .set = prefix_set,
                                                    .get = prefix_get,
                                                    .add = prefix_add,
                                                    .close = prefix_close,
                                                    .del_prefix = prefix_del_prefix};

collie__store_t *
collie__store_root(collie__store_t *s)
{
  while (s && s->ops == &prefix_ops) s = ((struct prefix_store *)s)->inner;
  return s;
}

collie_result_t
collie__store_prefix(collie__store_t *base, const char *prefix, collie__store_t **out)
{
  collie_result_t rc;
  if (!out) return collie__err(COLLIE_INVALID_ARGUMENT, "store prefix: out is NULL");
  *out = NULL;
  if (!base) return collie__err(COLLIE_INVALID_ARGUMENT, "store prefix: base store is NULL");
  if ((rc = collie__store_check_key("store prefix", prefix)) != COLLIE_SUCCESS) return rc;
  if (strlen(prefix) >= COLLIE_STORE_MAX_KEY)
    return collie__err(COLLIE_INVALID_ARGUMENT, "store prefix \"%s\" leaves no room for keys",
                       prefix);
  struct prefix_store *ps = calloc(1, sizeof(*ps));
  if (!ps) return collie__err(COLLIE_SYSTEM_ERROR, "store prefix \"%s\": out of memory", prefix);
  collie__store_init(&ps->base, &prefix_ops);
  snprintf(ps->prefix, sizeof(ps->prefix), "%s", prefix);
  collie__store_retain(base);
  ps->inner = base;
  *out = &ps->base;
  return COLLIE_SUCCESS;
}
