/*
 * topo_test.c - the hosts of a communicator (coll/topo.h): uneven hosts
 * numbered by their lowest rank, local indices, rails that skip small
 * hosts, one host, and a world and its split on fake hosts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "runner.h"

static void
topo_peers(struct collie__peer *p, const char *const *hosts, int n)
{
  memset(p, 0, sizeof(*p) * (size_t)n);
  for (int r = 0; r < n; r++) snprintf(p[r].host, sizeof(p[r].host), "%s", hosts[r]);
}

TEST_IMPL(topo_uneven_hosts)
{
  /* Hosts a (ranks 0, 2), b (1, 4, 5), c (3): numbered 0, 1, 2 by lowest rank. */
  const char *hosts[] = {"a", "b", "a", "c", "b", "b"};
  struct collie__peer p[6];
  topo_peers(p, hosts, 6);
  struct collie__topo t;
  ASSERT_OK(collie__topo_build(p, 6, &t));
  ASSERT(t.nhosts == 3 && t.max_local == 3 && !t.uniform);
  const int host[] = {0, 1, 0, 2, 1, 1}, local[] = {0, 0, 1, 0, 1, 2}, sizes[] = {2, 3, 1},
            by_host[] = {0, 2, 1, 4, 5, 3};
  for (int r = 0; r < 6; r++) {
    ASSERTF(t.host[r] == host[r] && t.local[r] == local[r], "rank %d: host %d local %d", r,
            t.host[r], t.local[r]);
    ASSERT(t.by_host[r] == by_host[r]);
  }
  for (int h = 0; h < 3; h++) ASSERT(t.host_size[h] == sizes[h]);
  ASSERT(collie__topo_rank(&t, 1, 2) == 5 && collie__topo_rank(&t, 2, 1) == -1);
  int rail[3];
  ASSERT(collie__topo_rail(&t, 0, rail) == 3 && rail[0] == 0 && rail[1] == 1 && rail[2] == 3);
  ASSERT(collie__topo_rail(&t, 1, rail) == 2 && rail[0] == 2 && rail[1] == 4);
  ASSERT(collie__topo_rail(&t, 2, rail) == 1 && rail[0] == 5);
  ASSERT(collie__topo_rail(&t, 3, rail) == 0);
  /* The rails laid end to end, as the hierarchical algorithms index them. */
  const int by_rail[] = {0, 1, 3, 2, 4, 5}, rail_first[] = {0, 3, 5, 6};
  ASSERT(t.min_local == 1);
  for (int i = 0; i < 6; i++)
    ASSERTF(t.by_rail[i] == by_rail[i], "by_rail[%d] = %d", i, t.by_rail[i]);
  for (int i = 0; i <= 3; i++) ASSERT(t.rail_first[i] == rail_first[i]);
  char d[96];
  collie__topo_describe(&t, d, sizeof(d));
  ASSERTF(!strcmp(d, "6 ranks on 3 hosts (2+3+1)"), "%s", d);
  collie__topo_free(&t);
  collie__topo_free(&t); /* twice: harmless */

  const char *even[] = {"x", "y", "x", "y"};
  topo_peers(p, even, 4);
  ASSERT_OK(collie__topo_build(p, 4, &t));
  ASSERT(t.nhosts == 2 && t.uniform && t.max_local == 2);
  collie__topo_describe(&t, d, sizeof(d));
  ASSERTF(!strcmp(d, "4 ranks on 2 hosts of 2"), "%s", d);
  collie__topo_free(&t);

  const char *one[] = {"z"};
  topo_peers(p, one, 1);
  ASSERT_OK(collie__topo_build(p, 1, &t));
  ASSERT(t.nhosts == 1 && t.uniform && t.local[0] == 0);
  collie__topo_describe(&t, d, sizeof(d));
  ASSERTF(!strcmp(d, "1 rank on 1 host"), "%s", d);
  collie__topo_free(&t);
}

/* A world on fake hosts by rank parity (mixed), and its split of ranks
 * 0, 1, 2: every rank sees the same hosts, numbered by lowest rank. */
TEST_IMPL(topo_world_and_split)
{
  collie_comm_t *comm = test_comm(), *sub = NULL;
  int r = test_rank(), p = test_size();
  const struct collie__topo *t = &comm->topo;
  ASSERT(t->size == p && t->nhosts == 2);
  ASSERT(t->host[r] == r % 2 && t->local[r] == r / 2);
  ASSERT(t->host_size[0] == (p + 1) / 2 && t->host_size[1] == p / 2);
  ASSERT_OK(collie_comm_split(comm, r < 3 ? 0 : COLLIE_SPLIT_NONE, r, &sub));
  if (r < 3) {
    const struct collie__topo *s = &sub->topo;
    ASSERT(s->size == 3 && s->nhosts == 2 && !s->uniform);
    ASSERT(s->host_size[0] == 2 && s->host_size[1] == 1);
    ASSERT(s->host[r] == r % 2 && s->local[r] == r / 2);
    ASSERT_OK(collie_comm_destroy(sub));
  }
  ASSERT_OK(collie_comm_destroy(comm));
}
