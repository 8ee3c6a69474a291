/*
 * topo.c - the hosts of a communicator (topo.h): grouping the ranks by
 * host identity, once per communicator, at init or split.
 */
#include "coll/topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static collie_result_t
topo_alloc(int size, struct collie__topo *t)
{
  memset(t, 0, sizeof(*t));
  t->size = size;
  t->host = calloc((size_t)size, sizeof(int));
  t->local = calloc((size_t)size, sizeof(int));
  t->host_size = calloc((size_t)size, sizeof(int));
  t->first = calloc((size_t)size, sizeof(int));
  t->by_host = calloc((size_t)size, sizeof(int));
  t->by_rail = calloc((size_t)size, sizeof(int));
  if (!t->host || !t->local || !t->host_size || !t->first || !t->by_host || !t->by_rail) {
    collie__topo_free(t);
    return collie__err(COLLIE_SYSTEM_ERROR, "out of memory describing the hosts of %d ranks", size);
  }
  return COLLIE_SUCCESS;
}

/* Everything else from t->host (hosts numbered by their lowest rank). */
static collie_result_t
topo_finish(struct collie__topo *t)
{
  int size = t->size;
  for (int r = 0; r < size; r++) {
    int h = t->host[r];
    if (h >= t->nhosts) t->nhosts = h + 1;
    t->local[r] = t->host_size[h]++;
  }
  for (int h = 1; h < t->nhosts; h++) t->first[h] = t->first[h - 1] + t->host_size[h - 1];
  for (int r = 0; r < size; r++) t->by_host[t->first[t->host[r]] + t->local[r]] = r;
  t->uniform = 1;
  t->min_local = size;
  for (int h = 0; h < t->nhosts; h++) {
    if (t->host_size[h] > t->max_local) t->max_local = t->host_size[h];
    if (t->host_size[h] < t->min_local) t->min_local = t->host_size[h];
    if (t->host_size[h] != t->host_size[0]) t->uniform = 0;
  }
  t->rail_first = calloc((size_t)t->max_local + 1, sizeof(int));
  if (!t->rail_first) {
    collie__topo_free(t);
    return collie__err(COLLIE_SYSTEM_ERROR, "out of memory describing the hosts of %d ranks", size);
  }
  for (int i = 0, n = 0; i < t->max_local; i++) {
    t->rail_first[i] = n;
    n += collie__topo_rail(t, i, t->by_rail + n);
    t->rail_first[i + 1] = n;
  }
  return COLLIE_SUCCESS;
}

collie_result_t
collie__topo_build(const struct collie__peer *peers, int size, struct collie__topo *t)
{
  collie_result_t rc = topo_alloc(size, t);
  if (rc != COLLIE_SUCCESS) return rc;
  /* A rank's host is the host of the lowest rank with its identity: hosts
   * come numbered in the order of their lowest ranks. Quadratic, once per
   * communicator, in identities that are short strings. */
  int nh = 0;
  for (int r = 0; r < size; r++) {
    int h = -1;
    for (int q = 0; q < r && h < 0; q++)
      if (!strcmp(peers[q].host, peers[r].host)) h = t->host[q];
    t->host[r] = h < 0 ? nh++ : h;
  }
  return topo_finish(t);
}

collie_result_t
collie__topo_uniform(int size, int per_host, struct collie__topo *t)
{
  if (size < 1 || per_host < 1)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%d ranks at %d per host", size, per_host);
  collie_result_t rc = topo_alloc(size, t);
  if (rc != COLLIE_SUCCESS) return rc;
  for (int r = 0; r < size; r++) t->host[r] = r / per_host;
  return topo_finish(t);
}

void
collie__topo_free(struct collie__topo *t)
{
  if (!t) return;
  free(t->host);
  free(t->local);
  free(t->host_size);
  free(t->first);
  free(t->by_host);
  free(t->by_rail);
  free(t->rail_first);
  memset(t, 0, sizeof(*t));
}

int
collie__topo_rail(const struct collie__topo *t, int i, int *out)
{
  int n = 0;
  for (int h = 0; h < t->nhosts; h++) {
    int r = collie__topo_rank(t, h, i);
    if (r >= 0) out[n++] = r;
  }
  return n;
}

void
collie__topo_describe(const struct collie__topo *t, char *buf, size_t len)
{
  size_t o = (size_t)snprintf(buf, len, "%d rank%s on %d host%s", t->size, t->size == 1 ? "" : "s",
                              t->nhosts, t->nhosts == 1 ? "" : "s");
  if (t->nhosts < 2 || o >= len) return;
  if (t->uniform) {
    snprintf(buf + o, len - o, " of %d", t->max_local);
    return;
  }
  for (int h = 0; h < t->nhosts && o < len; h++)
    o += (size_t)snprintf(buf + o, len - o, "%s%d", h ? "+" : " (", t->host_size[h]);
  if (o < len) snprintf(buf + o, len - o, ")");
}
