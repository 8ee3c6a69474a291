/*
 * crowd_test.c - who competes for a machine's cores, and the spin that
 * allows (core/crowd.c): the counts and the pick alone, from made-up peer
 * records.
 */
#include <string.h>

#include "core/core.h"
#include "runner.h"

/* Records of ranks on hosts[] and machines[] (one letter each; '-': the
 * boot id unknown), each bringing machine_ranks `brought`. */
static void
ct_peers(struct collie__peer *peers, const char *hosts, const char *machines, int brought)
{
  int n = (int)strlen(hosts);
  memset(peers, 0, sizeof(*peers) * (size_t)n);
  for (int p = 0; p < n; p++) {
    peers[p].host[0] = hosts[p];
    if (machines[p] != '-') peers[p].machine[0] = machines[p];
    peers[p].machine_ranks = brought;
  }
  collie__count_machine_ranks(peers, n);
}

TEST_IMPL(crowd_spin)
{
  struct collie__peer peers[8];
  /* One host of two ranks on two cores: spin. */
  ct_peers(peers, "hh", "mm", 0);
  ASSERT(peers[0].machine_ranks == 2 && peers[1].machine_ranks == 2);
  ASSERT(collie__spin_default(peers, 2, 0, 2) == COLLIE_SPIN_POLLS);
  /* Four hosts of two ranks that are namespaces of one two-core machine
   * (the test bed): each host fits the cores, the machine does not. */
  ct_peers(peers, "aabbccdd", "mmmmmmmm", 0);
  for (int p = 0; p < 8; p++) ASSERT(peers[p].machine_ranks == 8);
  ASSERT(collie__spin_default(peers, 8, 3, 2) == 0);
  ASSERT(collie__spin_default(peers, 8, 3, 8) == COLLIE_SPIN_POLLS);
  /* The same hosts on two machines: four ranks on each. */
  ct_peers(peers, "aabbccdd", "mmmmnnnn", 0);
  ASSERT(peers[0].machine_ranks == 4 && peers[7].machine_ranks == 4);
  ASSERT(collie__spin_default(peers, 8, 7, 4) == COLLIE_SPIN_POLLS);
  ASSERT(collie__spin_default(peers, 8, 7, 3) == 0);
  /* Boot id unknown: the host is all there is to count. */
  ct_peers(peers, "aabb", "----", 0);
  ASSERT(peers[0].machine_ranks == 2 && collie__spin_default(peers, 4, 0, 2) == COLLIE_SPIN_POLLS);
  /* A host identity shared across machines (a COLLIE_HOST_ID override):
   * its ranks still count as one crowd. */
  ct_peers(peers, "xxxx", "mnmn", 0);
  ASSERT(peers[0].machine_ranks == 2 && collie__spin_default(peers, 4, 0, 2) == 0);
  /* A split's two members bring their world's count of eight. */
  ct_peers(peers, "ab", "mm", 8);
  ASSERT(peers[0].machine_ranks == 8 && collie__spin_default(peers, 2, 1, 4) == 0);
  ASSERT(collie__spin_default(peers, 2, 1, 8) == COLLIE_SPIN_POLLS);
}
