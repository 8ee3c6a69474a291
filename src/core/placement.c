/*
 * placement.c - two local ranks started on one CPU are moved apart at init.
 *
 * Why. The scheduler places a forked process on the idlest CPU it sees at
 * that moment; a launcher that forks its ranks back to back sometimes gets
 * two of them on one CPU while another CPU sits idle, and keeps them there
 * for a tenth of a second or more: a task that ran a moment ago counts as
 * cache-hot and idle balancing leaves it alone. Two ranks that hand work to
 * each other on one CPU pay a context switch per handoff (2-rank allreduce
 * of 8 bytes over tcp: 70-110 us instead of 5-8; over shm, see shm.c's
 * crowded check). Once init has exchanged the peer records (host, pid), a
 * rank looks where the others of its host run now (/proc/<pid>/stat: the
 * CPU each recorded at the start of init is often stale by then, and a move
 * decided on it put ranks together more often than apart); one that finds a
 * lower local rank on its CPU, while there are at least as many CPUs as
 * local ranks, moves itself to a CPU no local rank runs on.
 *
 * How. sched_setaffinity to that one CPU (the kernel migrates the calling
 * thread before returning), then straight back to the mask it had: the
 * thread keeps its original affinity and only changes where it runs now.
 * Nothing else is touched: other threads, later placement, or a process
 * pinned to one CPU (no other CPU to go to). COLLIE_SPREAD=0 turns it off.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

int
collie__place_pick(const struct collie__peer *peers, const int *cpus, int size, int rank,
                   const cpu_set_t *allowed)
{
  const struct collie__peer *me = &peers[rank];
  int mine = cpus[rank], local = 0, crowded = 0;
  if (mine < 0 || mine >= CPU_SETSIZE) return -1;
  for (int p = 0; p < size; p++) {
    if (strcmp(peers[p].host, me->host) != 0) continue;
    local++;
    if (p < rank && cpus[p] == mine) crowded = 1;
  }
  if (!crowded || local > CPU_COUNT(allowed)) return -1;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, allowed)) continue;
    int taken = 0;
    for (int p = 0; p < size && !taken; p++)
      taken = cpus[p] == c && !strcmp(peers[p].host, me->host);
    if (!taken) return c;
  }
  return -1;
}

void
collie__place_spread(const collie_comm_t *c)
{
  if (!c->params.SPREAD) return;
  cpu_set_t allowed, one;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  int *cpus = malloc((size_t)c->size * sizeof(*cpus));
  if (!cpus) return; /* only an optimisation */
  const char *host = c->peers[c->rank].host;
  for (int p = 0; p < c->size; p++)
    cpus[p] = p == c->rank                     ? sched_getcpu()
              : strcmp(c->peers[p].host, host) ? -1
                                               : collie__proc_cpu(c->peers[p].pid);
  int from = cpus[c->rank], to = collie__place_pick(c->peers, cpus, c->size, c->rank, &allowed);
  free(cpus);
  if (to < 0) return;
  CPU_ZERO(&one);
  CPU_SET(to, &one);
  if (sched_setaffinity(0, sizeof(one), &one) != 0) return;
  if (sched_setaffinity(0, sizeof(allowed), &allowed) != 0)
    COLLIE_WARN("INIT", "could not restore this thread's CPU affinity after moving it to CPU %d",
                to);
  COLLIE_INFO("INIT", "ran on CPU %d with a lower local rank: moved to CPU %d", from, to);
}
