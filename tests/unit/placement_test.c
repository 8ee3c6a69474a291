/*
 * placement_test.c - which rank moves at init when two local ranks start on
 * one CPU (core/placement.c): the pick alone, from made-up peer records.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "runner.h"

/* A peer on host h (one letter) that ran on cpu at init. */
static struct collie__peer
pt_peer(const char *h, int cpu)
{
  struct collie__peer p;
  memset(&p, 0, sizeof(p));
  snprintf(p.host, sizeof(p.host), "%s", h);
  p.cpu = cpu;
  return p;
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
  struct collie__peer a[2] = {pt_peer("h", 0), pt_peer("h", 0)};
  ASSERT(collie__place_pick(a, 2, 0, &two) == -1);
  ASSERT(collie__place_pick(a, 2, 1, &two) == 1);
  /* One CPU allowed: nowhere to go. */
  ASSERT(collie__place_pick(a, 2, 1, &one) == -1);
  /* Apart already: nobody moves. */
  struct collie__peer b[2] = {pt_peer("h", 0), pt_peer("h", 1)};
  ASSERT(collie__place_pick(b, 2, 0, &two) == -1 && collie__place_pick(b, 2, 1, &two) == -1);
  /* The same CPU number on another host is no crowding. */
  struct collie__peer c[2] = {pt_peer("h", 0), pt_peer("g", 0)};
  ASSERT(collie__place_pick(c, 2, 1, &two) == -1);
  /* Three local ranks on two CPUs: sharing cannot be avoided, stay. */
  struct collie__peer d[3] = {pt_peer("h", 0), pt_peer("h", 0), pt_peer("h", 1)};
  ASSERT(collie__place_pick(d, 3, 1, &two) == -1);
  /* With three CPUs the crowded one takes the CPU no local rank claims. */
  ASSERT(collie__place_pick(d, 3, 1, &three) == 2);
  ASSERT(collie__place_pick(d, 3, 2, &three) == -1);
  /* A remote rank on CPU 1 does not claim this host's CPU 1. */
  struct collie__peer e[3] = {pt_peer("h", 0), pt_peer("g", 1), pt_peer("h", 0)};
  ASSERT(collie__place_pick(e, 3, 2, &two) == 1);
  /* Unknown CPU (sched_getcpu failed): stay. */
  struct collie__peer f[2] = {pt_peer("h", -1), pt_peer("h", -1)};
  ASSERT(collie__place_pick(f, 2, 1, &two) == -1);
}
