/*
 * report_partition.c - `collie-report hang`'s verdict on the network: did the
 * job lose a host's link (a cut cable, a down interface, a partition) rather
 * than a rank?
 *
 * A dead or frozen rank writes no dump, and the hang verdict names it. When
 * a link goes, every rank stays alive, fails and dumps, and each failure
 * names the peer it lost (the last "(world rank N" of its message: a message
 * that quotes a neighbour's failure ends with the root cause). The dumps'
 * "hosts"/"host_of" place every rank, so each failure leads to an edge
 * between two hosts, following the blame past peers on the rank's own host
 * (shm relays a neighbour's failure, and a long message may have lost its
 * tail). A rank whose own deadline came first names its silent neighbour,
 * alive and still waiting itself, rather than what that neighbour waited
 * on: the dumps' times show it (the neighbour failed later).
 *
 * When every rank of the job dumped a failure and every edge joins two
 * different hosts, the network is to blame. A host accounts for an edge it
 * is on, and for one whose far rank failed later than the near one (alive
 * and waiting itself) when that rank's own edge is on the host. The host
 * that accounts for every edge is the one cut off (two such hosts: the link
 * between them); else the verdict names the hosts that account for the
 * most.
 */
#define _DEFAULT_SOURCE /* timegm */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report.h"

/* The world rank the last "(world rank N" of msg names, or -1. */
static int
part_blamed(const char *msg)
{
  int w = -1;
  for (const char *at = strstr(msg, "(world rank "); at; at = strstr(at + 1, "(world rank ")) {
    char *end;
    long v = strtol(at + 12, &end, 10);
    if (end != at + 12 && v >= 0 && v < 1 << 20) w = (int)v;
  }
  return w;
}

/* The dump's "time" (ISO 8601 UTC, "2026-11-27T01:23:45.123456Z") in ns
 * since the epoch, or 0 when it does not parse. A dump is written as its
 * rank fails, so this is when the rank gave up. */
static int64_t
part_time(const char *iso)
{
  struct tm tm;
  memset(&tm, 0, sizeof(tm));
  int us = 0;
  if (sscanf(iso, "%4d-%2d-%2dT%2d:%2d:%2d.%6dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
             &tm.tm_min, &tm.tm_sec, &us) != 7)
    return 0;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return (int64_t)timegm(&tm) * 1000000000 + (int64_t)us * 1000;
}

/* Where the news reached the rank: the few ms a failure's news takes to cross. */
#define PART_NEWS_NS (10 * 1000 * 1000LL)

/* A dump's rank r as the job knows it. */
static int
part_world(const struct rd_dump *d, int r)
{
  return d->world ? d->world[r] : r;
}

/* Index of name in names[*n], added when new (at most cap). */
static int
part_host_index(char (*names)[64], int *n, int cap, const char *name)
{
  for (int i = 0; i < *n; i++)
    if (strcmp(names[i], name) == 0) return i;
  if (*n == cap) return -1;
  snprintf(names[*n], sizeof(names[0]), "%s", name);
  return (*n)++;
}

int
report_partition(const struct rd_dump *d, int n)
{
  /* The job's size: the largest communicator's (the world's, by its ranks). */
  int size = 0;
  for (int i = 0; i < n; i++) {
    if (d[i].world) {
      for (int r = 0; r < d[i].size; r++)
        if (d[i].world[r] + 1 > size) size = d[i].world[r] + 1;
    } else if (d[i].size > size) {
      size = d[i].size;
    }
  }
  if (size < 2) return 0;
  int *host = malloc((size_t)size * sizeof(*host));    /* world rank -> host, -1 unknown */
  int *failed = calloc((size_t)size, sizeof(*failed)); /* dumped a failure */
  int *blame = malloc((size_t)size * sizeof(*blame));  /* world rank it names */
  int64_t *when = calloc((size_t)size, sizeof(*when)); /* when it failed (first failure) */
  int *seen = calloc((size_t)size, sizeof(*seen));     /* w + 1: on w's blame chain */
  char(*names)[64] = calloc((size_t)size, sizeof(*names));
  int nnames = 0, found = 0;
  if (!host || !failed || !blame || !when || !seen || !names) goto out;
  for (int w = 0; w < size; w++) host[w] = blame[w] = -1;
  for (int i = 0; i < n; i++) {
    const struct rd_dump *x = &d[i];
    for (int r = 0; x->host_of && r < x->size; r++) {
      int w = part_world(x, r);
      if (w < size && host[w] < 0)
        host[w] = part_host_index(names, &nnames, size, x->hosts[x->host_of[r]]);
    }
    int me = part_world(x, x->rank);
    int64_t t = part_time(x->time);
    if (me < size && x->error[0] && (!failed[me] || (t && t < when[me]))) {
      failed[me] = 1; /* its first failure: what went wrong for it */
      blame[me] = part_blamed(x->error);
      when[me] = t;
    }
  }
  if (nnames < 2) goto out; /* one host: no network between hosts to blame */
  /* Each rank's edge: past same-host relays, the rank x whose failure
   * names a rank y on another host. */
  int *ex = malloc((size_t)size * sizeof(*ex)), *ey = malloc((size_t)size * sizeof(*ey));
  int *touch = calloc((size_t)nnames, sizeof(*touch)),
      *score = calloc((size_t)nnames, sizeof(*score));
  int edges = 0;
  if (!ex || !ey || !score) goto out_edges;
  for (int w = 0; w < size; w++) {
    if (!failed[w]) goto out_edges; /* it left no failure: a rank, not the network */
    int x = w, y = blame[w];
    while (y >= 0 && y < size && host[x] >= 0 && host[y] == host[x] && seen[y] != w + 1 &&
           failed[y] && blame[y] >= 0) {
      seen[x] = w + 1;
      x = y;
      y = blame[y];
    }
    /* Names no rank of a known host, or ends on its own host: a rank's failure. */
    if (y < 0 || y >= size || host[x] < 0 || host[y] < 0 || host[x] == host[y]) goto out_edges;
    ex[w] = x;
    ey[w] = y;
    edges++;
  }
  /* A host accounts for an edge that touches it, and for one whose far rank
   * failed after the near one gave up on it (it was alive and waiting
   * itself: a rank whose deadline came first names a live neighbour) when
   * that rank's own edge touches the host. */
  for (int h = 0; h < nnames; h++) {
    for (int w = 0; w < size; w++) {
      int x = ex[w], y = ey[w];
      if (host[x] == h || host[y] == h) {
        score[h]++;
        continue;
      }
      int waited_too = when[y] && when[x] && when[y] > when[x] - PART_NEWS_NS;
      if (waited_too && (host[ex[y]] == h || host[ey[y]] == h)) score[h]++;
    }
  }
  int cut = -1, other = -1, full = 0, most = 0, nmost = 0;
  for (int h = 0; h < nnames; h++) {
    if (score[h] > most) most = score[h];
    if (score[h] != edges) continue;
    full++;
    if (cut < 0)
      cut = h;
    else
      other = h;
  }
  for (int h = 0; h < nnames; h++) nmost += score[h] == most;
  found = 1;
  printf("network: every rank failed naming a rank on another host (%d failures):", edges);
  if (full == 1) {
    printf(" host %s accounts for every one: it lost its link to the other hosts (a cut link, "
           "a down interface or a partition), not a rank\n",
           names[cut]);
  } else if (full == 2) {
    /* Two hosts that lost each other: which side was cut, the dumps cannot tell. */
    printf(" the link between hosts %s and %s was lost (a cut link, a down interface or a "
           "partition), not a rank\n",
           names[cut], names[other]);
  } else {
    printf(" the hosts lost each other (a partition); %s ", nmost == 1 ? "host" : "hosts");
    for (int h = 0, k = 0; h < nnames; h++)
      if (score[h] == most) printf("%s%s", k++ ? (k == nmost ? " and " : ", ") : "", names[h]);
    printf(" %s for the most (%d of %d%s)\n", nmost == 1 ? "accounts" : "account", most, edges,
           nmost == 1 ? "" : " each");
  }
out_edges:
  free(ex);
  free(ey);
  free(score);
out:
  free(host);
  free(failed);
  free(blame);
  free(when);
  free(seen);
  free(names);
  return found;
}
