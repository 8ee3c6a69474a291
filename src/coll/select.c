/*
 * select.c - which algorithm runs a call. The table lists every algorithm
 * with the collective it implements; a call takes the one named by its opts,
 * else the one COLLIE_ALGO forces for its collective, else the collective's
 * default (the first listed). A name that is unknown or that does not
 * implement the collective is an error, never a silent fallback. The
 * alpha-beta cost model that picks among several candidates comes with the
 * algorithms issue.
 */
#include <stdio.h>
#include <string.h>

#include "coll/coll.h"
#include "util/error.h"

static const struct collie__algo select_table[] = {
    {"ring", COLLIE_ALGO_RING, COLLIE_KIND_ALLREDUCE, collie__allreduce_ring},
    {"tree", COLLIE_ALGO_TREE, COLLIE_KIND_BROADCAST, collie__broadcast_tree},
    {"dissemination", COLLIE_ALGO_DISSEMINATION, COLLIE_KIND_BARRIER, collie__barrier_dissemination},
};
#define SELECT_N (int)(sizeof(select_table) / sizeof(select_table[0]))

static const char *select_algo_names[] = {
#define COLLIE_XX_(name, str) str,
    COLLIE_ALGO_MAP(COLLIE_XX_)
#undef COLLIE_XX_
};

static const struct collie__algo *
select_find(int kind, int id)
{
  for (int i = 0; i < SELECT_N; i++)
    if (select_table[i].kind == kind && (id == COLLIE_ALGO_AUTO || select_table[i].id == id))
      return &select_table[i];
  return NULL;
}

collie_result_t
collie__algo_parse(const char *spec, struct collie__algo_table *out)
{
  memset(out, 0, sizeof(*out));
  if (!spec) return COLLIE_SUCCESS;
  const char *p = spec;
  while (*p) {
    char item[128], *eq;
    size_t n = strcspn(p, ",");
    if (n == 0 || n >= sizeof(item))
      return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_ALGO=\"%s\": empty or overlong item", spec);
    memcpy(item, p, n);
    item[n] = '\0';
    p += n + (p[n] == ',');
    if (!(eq = strchr(item, '=')))
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "COLLIE_ALGO=\"%s\": \"%s\" is not collective=algorithm", spec, item);
    *eq = '\0';
    int kind = -1, id = -1;
    for (int k = 1; k < COLLIE_KIND_COUNT_; k++)
      if (!strcmp(item, collie__kind_name(k))) kind = k;
    for (int a = 0; a < COLLIE_ALGO_COUNT_; a++)
      if (!strcmp(eq + 1, select_algo_names[a])) id = a;
    if (kind < 0)
      return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_ALGO=\"%s\": unknown collective \"%s\"",
                         spec, item);
    if (id < 0)
      return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_ALGO=\"%s\": unknown algorithm \"%s\"",
                         spec, eq + 1);
    if (!select_find(kind, id))
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "COLLIE_ALGO=\"%s\": %s has no algorithm \"%s\"", spec, item, eq + 1);
    out->forced[kind] = id;
  }
  return COLLIE_SUCCESS;
}

collie_result_t
collie__algo_select(const struct collie__call *call, int opts_algo,
                    const struct collie__algo_table *table, const struct collie__algo **out)
{
  int id = opts_algo != COLLIE_ALGO_AUTO ? opts_algo : table->forced[call->kind];
  if (id < 0 || id >= COLLIE_ALGO_COUNT_)
    return collie__err(COLLIE_INVALID_ARGUMENT, "opts->algorithm = %d is not a COLLIE_ALGO_* value",
                       id);
  *out = select_find(call->kind, id);
  if (!*out)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s has no algorithm \"%s\"",
                       collie__kind_name(call->kind), select_algo_names[id]);
  return COLLIE_SUCCESS;
}
