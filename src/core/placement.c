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
 * crowded check). Every rank records the CPU it runs on in the peer record
 * that init exchanges anyway; a rank that finds a lower local rank on its
 * CPU, while there are at least as many CPUs as local ranks, moves itself
 * to a CPU no local rank claims.
 *
 * How. sched_setaffinity to that one CPU (the kernel migrates the calling
 * thread before returning), then straight back to the mask it had: the
 * thread keeps its original affinity and only changes where it runs now.
 * Nothing else is touched: other threads, later placement, or a process
 * pinned to one CPU (no other CPU to go to). COLLIE_SPREAD=0 turns it off.
 */
#include <sched.h>
#include <string.h>

#include "core/core.h"

int
collie__place_pick(const struct collie__peer *peers, int size, int rank, const cpu_set_t *allowed)
{
  const struct collie__peer *me = &peers[rank];
  int mine = me->cpu, local = 0, crowded = 0;
  if (mine < 0 || mine >= CPU_SETSIZE) return -1;
  for (int p = 0; p < size; p++) {
    if (strcmp(peers[p].host, me->host) != 0) continue;
    local++;
    if (p < rank && peers[p].cpu == mine) crowded = 1;
  }
  if (!crowded || local > CPU_COUNT(allowed)) return -1;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, allowed)) continue;
    int taken = 0;
    for (int p = 0; p < size && !taken; p++)
      taken = peers[p].cpu == c && !strcmp(peers[p].host, me->host);
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
  int to = collie__place_pick(c->peers, c->size, c->rank, &allowed);
  if (to < 0) return;
  CPU_ZERO(&one);
  CPU_SET(to, &one);
  if (sched_setaffinity(0, sizeof(one), &one) != 0) return;
  if (sched_setaffinity(0, sizeof(allowed), &allowed) != 0)
    COLLIE_WARN("INIT", "could not restore this thread's CPU affinity after moving it to CPU %d",
                to);
  COLLIE_INFO("INIT", "started on CPU %d with a lower local rank: moved to CPU %d",
              c->peers[c->rank].cpu, to);
}
