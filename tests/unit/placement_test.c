/*
 * placement_test.c - which rank moves at init when two local ranks start on
 * one CPU (core/placement.c): the pick alone, from made-up peer records.
 */
#include <sched.h>
#include <string.h>

#include "core/core.h"
#include "runner.h"

/* Peers on the hosts of hosts[] (one letter each), running on cpus[]. */
static int
pt_pick(const char *hosts, const int *cpus, int rank, const cpu_set_t *allowed)
{
  struct collie__peer peers[8];
  int n = (int)strlen(hosts);
  memset(peers, 0, sizeof(peers));
  for (int p = 0; p < n; p++) peers[p].host[0] = hosts[p];
  return collie__place_pick(peers, cpus, n, rank, allowed);
}

static cpu_set_t
pt_cpus(int n)
{
  cpu_set_t s;
  CPU_ZERO(&s);
  for (int c = 0; c < n; c++) CPU_SET(c, &s);
  return s;
}

TEST_IMPL(place_pick)
{
  cpu_set_t two = pt_cpus(2), one = pt_cpus(1), three = pt_cpus(3);
  /* Both on CPU 0 with two CPUs: the higher rank moves to the free one. */
  ASSERT(pt_pick("hh", (int[]){0, 0}, 0, &two) == -1);
  ASSERT(pt_pick("hh", (int[]){0, 0}, 1, &two) == 1);
  /* One CPU allowed: nowhere to go. */
  ASSERT(pt_pick("hh", (int[]){0, 0}, 1, &one) == -1);
  /* Apart already: nobody moves. */
  ASSERT(pt_pick("hh", (int[]){0, 1}, 0, &two) == -1 &&
         pt_pick("hh", (int[]){0, 1}, 1, &two) == -1);
  /* The same CPU number on another host is no crowding. */
  ASSERT(pt_pick("hg", (int[]){0, 0}, 1, &two) == -1);
  /* Three local ranks on two CPUs: sharing cannot be avoided, stay. */
  ASSERT(pt_pick("hhh", (int[]){0, 0, 1}, 1, &two) == -1);
  /* With three CPUs the crowded one takes the CPU no local rank runs on. */
  ASSERT(pt_pick("hhh", (int[]){0, 0, 1}, 1, &three) == 2);
  ASSERT(pt_pick("hhh", (int[]){0, 0, 1}, 2, &three) == -1);
  /* A remote rank on CPU 1 does not claim this host's CPU 1. */
  ASSERT(pt_pick("hgh", (int[]){0, 1, 0}, 2, &two) == 1);
  /* This rank's CPU unknown (sched_getcpu failed): stay. */
  ASSERT(pt_pick("hh", (int[]){0, -1}, 1, &two) == -1);
}
