/*
 * topo.h - the hosts of a communicator (issue 20): which ranks share a host,
 * as the two-level view hierarchical algorithms work on. The local group of
 * a host is its ranks in ascending order; the "rail" of local index i is,
 * for every host that has an i-th rank, that rank, in host order: the bytes
 * between hosts go over every rail at once rather than through one leader
 * per host. Hosts are numbered by their lowest rank. Uneven hosts (2+1+3)
 * are the general case; a rail then skips the hosts that are too small.
 */
#ifndef COLLIE_COLL_TOPO_H
#define COLLIE_COLL_TOPO_H

#include "collie.h"
#include "transport/transport.h"

struct collie__topo {
  int size;        /* ranks */
  int nhosts;      /* distinct host identities */
  int max_local;   /* ranks of the largest host */
  int uniform;     /* every host has max_local ranks */
  int *host;       /* [size]: each rank's host */
  int *local;      /* [size]: each rank's index among its host's ranks */
  int *host_size;  /* [nhosts] */
  int *first;      /* [nhosts]: where each host's ranks start in by_host */
  int *by_host;    /* [size]: the ranks, host after host, ascending within one */
  int min_local;   /* ranks of the smallest host: every host has local indices below it */
  int *by_rail;    /* [size]: the rails one after another, each in host order */
  int *rail_first; /* [max_local + 1]: rail i is by_rail[rail_first[i] .. rail_first[i + 1]) */
};

/* Builds t from the peers' host identities (peers[r].host). Errors:
 * SYSTEM_ERROR (out of memory). Free with collie__topo_free (also after a
 * failed build, and on a zeroed struct). */
collie_result_t collie__topo_build(const struct collie__peer *peers, int size,
                                   struct collie__topo *t);
void collie__topo_free(struct collie__topo *t);
/* The hosts of a communicator that has not been made (the model's
 * predictions): size ranks, per_host to a host in rank order, the last host
 * smaller when they do not divide. INVALID_ARGUMENT below 1; SYSTEM_ERROR. */
collie_result_t collie__topo_uniform(int size, int per_host, struct collie__topo *t);

/* The rank with local index i on host h, or -1 when the host is smaller. */
static inline int
collie__topo_rank(const struct collie__topo *t, int h, int i)
{
  return i < t->host_size[h] ? t->by_host[t->first[h] + i] : -1;
}

/* The rail of local index i: the ranks with that index, host by host
 * (out[0..n) with n returned; hosts smaller than i + 1 have none). */
int collie__topo_rail(const struct collie__topo *t, int i, int *out);

/* "3 ranks on 2 hosts (2+1)" into buf, for logs and tools. */
void collie__topo_describe(const struct collie__topo *t, char *buf, size_t len);

#endif /* COLLIE_COLL_TOPO_H */
