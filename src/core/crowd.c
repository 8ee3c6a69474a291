/*
 * crowd.c - how many processes compete for this machine's cores, and so
 * whether a wait may spin before it sleeps.
 *
 * Why the machine and not the host. A host identity names what shares
 * memory (hostname and boot id, bootstrap/hostid.c), but network namespaces
 * and containers of one machine are hosts of their own that still share its
 * cores: the test bed's four "hosts" of two ranks run eight ranks on two
 * cores. A rank there that spins while it waits takes the core its host's
 * other rank, or another host's, needs to make the progress it waits for
 * (4 x 2 test-bed hosts, hierarchical 8 B allreduce over 1 ms links:
 * 1.65-1.90 ms spinning, 1.31-1.37 ms sleeping at once). The boot id is the
 * same in every namespace of one kernel, so the ranks that share it are the
 * crowd. A split counts its world's crowd: the processes left out of it
 * still run on the same cores.
 */
#include <string.h>

#include "core/core.h"

void
collie__count_machine_ranks(struct collie__peer *peers, int size)
{
  for (int p = 0; p < size; p++) peers[p].machine[sizeof(peers[p].machine) - 1] = '\0';
  for (int p = 0; p < size; p++) {
    int n = 0;
    for (int q = 0; q < size; q++)
      n += peers[p].machine[0] ? !strcmp(peers[q].machine, peers[p].machine)
                               : !strcmp(peers[q].host, peers[p].host);
    if (n > peers[p].machine_ranks) peers[p].machine_ranks = n;
  }
}

int
collie__spin_default(const struct collie__peer *peers, int size, int rank, int ncpus)
{
  int crowd = peers[rank].machine_ranks, local = 0;
  for (int p = 0; p < size; p++) local += !strcmp(peers[p].host, peers[rank].host);
  if (local > crowd) crowd = local;
  return crowd <= ncpus ? COLLIE_SPIN_POLLS : 0;
}
