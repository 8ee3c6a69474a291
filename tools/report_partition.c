/*
 * report_partition.c - `collie-report hang`'s verdict on the network: did the
 * job lose a host's link (a cut cable, a down interface, a partition) rather
 * than a rank?
 *
 * A dead or frozen rank writes no dump, and the hang verdict names it. When
 * a link goes, every rank stays alive, fails and dumps, and each failure
 * names a peer: the one it waited on until its deadline, or the one whose
 * failure reached it as news ("aborted its communicator", "closed the
 * connection"), quoting that peer's own cause. The dumps' "hosts"/"host_of"
 * place every rank.
 *
 * Each rank's failure leads to an edge between two hosts: news is followed
 * to the peer that sent it (its own dump says why it failed), and so is a
 * same-host relay (shm relays a neighbour's failure, and a long message may
 * have lost its tail), until a rank that waited on a rank of another host
 * until its deadline. When every rank of the job dumped a failure and every
 * edge joins two different hosts, the network is to blame.
 *
 * Which host was cut off? Three kinds of evidence:
 *   - an edge that touches a host is explained by that host's loss;
 *   - a rank whose deadline came first names a neighbour that was alive and
 *     still waiting itself (the dumps' times show it: the neighbour failed
 *     later), so its edge is explained by whatever explains the
 *     neighbour's, along the chain;
 *   - news that crossed between two hosts proves their link still worked
 *     after the failure began: neither of them was the one cut off.
 * A host that explains every edge and is not proven connected is the one cut
 * off (two such hosts: the link between them). Else the verdict names the
 * hosts that explain the most edges.
 */
#define _DEFAULT_SOURCE /* timegm */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report.h"

/* The world rank the first or last "(world rank N" of msg names, or -1. */
static int
part_named(const char *msg, int last)
{
  int w = -1;
  for (const char *at = strstr(msg, "(world rank "); at; at = strstr(at + 1, "(world rank ")) {
    char *end;
    long v = strtol(at + 12, &end, 10);
    if (end != at + 12 && v >= 0 && v < 1 << 20) w = (int)v;
    if (!last && w >= 0) break;
  }
  return w;
}

/* Whether msg's own failure (before any ", after: " quoting the sender's)
 * is news from a peer: something crossed from it, so the link worked. */
static int
part_is_news(const char *msg)
{
  const char *after = strstr(msg, ", after: ");
  size_t own = after ? (size_t)(after - msg) : strlen(msg);
  const char *marks[] = {"aborted its communicator", "closed the connection"};
  for (size_t k = 0; k < sizeof(marks) / sizeof(marks[0]); k++) {
    const char *at = strstr(msg, marks[k]);
    if (at && (size_t)(at - msg) < own) return 1;
  }
  return 0;
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

/* What the dumps say of one world rank. */
struct part_rank {
  int host;     /* index into names, -1 unknown */
  int failed;   /* dumped a failure */
  int blame;    /* the world rank its failure names last (the root cause), -1 none */
  int peer;     /* the world rank it names first (whom it heard from or waited on) */
  int news;     /* its failure came from peer over the link */
  int64_t when; /* when it failed (its first failure), 0 unknown */
  int ex, ey;   /* its edge: rank ex waited on rank ey (another host) until its deadline */
};

/* Whether host h explains rank w's edge: the edge touches h, or its far rank
 * was alive and waiting when the near one gave up and h explains that
 * rank's edge (along the chain; seen marks the ranks visited). */
static int
part_explains(const struct part_rank *k, int h, int w, int *seen, int mark)
{
  for (;;) {
    int x = k[w].ex, y = k[w].ey;
    if (k[x].host == h || k[y].host == h) return 1;
    int waited_too = k[y].when && k[x].when && k[y].when > k[x].when - PART_NEWS_NS;
    if (!waited_too || seen[y] == mark) return 0;
    seen[y] = mark;
    w = y;
  }
}

/* Follows rank w's failure to its edge (k[w].ex, k[w].ey); 0 when it leads
 * to no rank of another known host (a rank's failure, not the network's). */
static int
part_edge(struct part_rank *k, int size, int w, int *seen)
{
  int x = w;
  seen[x] = w + 1;
  for (;;) {
    int next = -1;
    if (k[x].news && k[x].peer >= 0 && k[x].peer < size && k[k[x].peer].failed)
      next = k[x].peer; /* its peer's failure: that peer's dump says why */
    else if (k[x].blame >= 0 && k[x].blame < size && k[x].host >= 0 &&
             k[k[x].blame].host == k[x].host && k[k[x].blame].failed)
      next = k[x].blame; /* a same-host relay */
    if (next < 0 || seen[next] == w + 1) break;
    seen[next] = w + 1;
    x = next;
  }
  int y = k[x].blame;
  if (y < 0 || y >= size || k[x].host < 0 || k[y].host < 0 || k[x].host == k[y].host) return 0;
  k[w].ex = x;
  k[w].ey = y;
  return 1;
}

int
report_partition(FILE *f, const struct rd_dump *d, int n)
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
  struct part_rank *k = calloc((size_t)size, sizeof(*k));
  int *seen = calloc((size_t)size, sizeof(*seen));
  char(*names)[64] = calloc((size_t)size, sizeof(*names));
  int *score = NULL, *linked = NULL; /* per host; linked: proven connected */
  int nnames = 0, found = 0;
  if (!k || !seen || !names) goto out;
  for (int w = 0; w < size; w++) k[w].host = k[w].blame = k[w].peer = -1;
  for (int i = 0; i < n; i++) {
    const struct rd_dump *x = &d[i];
    for (int r = 0; x->host_of && r < x->size; r++) {
      int w = part_world(x, r);
      if (w < size && k[w].host < 0)
        k[w].host = part_host_index(names, &nnames, size, x->hosts[x->host_of[r]]);
    }
    int me = part_world(x, x->rank);
    int64_t t = part_time(x->time);
    if (me < size && x->error[0] && (!k[me].failed || (t && t < k[me].when))) {
      k[me].failed = 1; /* its first failure: what went wrong for it */
      k[me].blame = part_named(x->error, 1);
      k[me].peer = part_named(x->error, 0);
      k[me].news = part_is_news(x->error);
      k[me].when = t;
    }
  }
  if (nnames < 2) goto out; /* one host: no network between hosts to blame */
  for (int w = 0; w < size; w++)
    if (!k[w].failed || !part_edge(k, size, w, seen)) goto out; /* a rank's failure */
  score = calloc((size_t)nnames, sizeof(*score));
  linked = calloc((size_t)nnames, sizeof(*linked));
  if (!score || !linked) goto out;
  for (int w = 0; w < size; w++) {
    int p = k[w].peer;
    if (k[w].news && p >= 0 && p < size && k[p].host >= 0 && k[p].host != k[w].host)
      linked[k[w].host] = linked[k[p].host] = 1;
  }
  memset(seen, 0, (size_t)size * sizeof(*seen));
  int mark = 0;
  for (int h = 0; h < nnames; h++)
    for (int w = 0; w < size; w++) score[h] += part_explains(k, h, w, seen, ++mark);
  int cut = -1, other = -1, full = 0, most = 0, nmost = 0;
  for (int h = 0; h < nnames; h++) {
    if (score[h] > most) most = score[h];
    if (score[h] != size || linked[h]) continue;
    full++;
    if (cut < 0)
      cut = h;
    else
      other = h;
  }
  for (int h = 0; h < nnames; h++) nmost += score[h] == most;
  found = 1;
  fprintf(f, "network: every rank failed naming a rank on another host (%d failures):", size);
  if (full == 1) {
    fprintf(f,
            " host %s accounts for every one: it lost its link to the other hosts (a cut link, "
            "a down interface or a partition), not a rank\n",
            names[cut]);
  } else if (full == 2) {
    /* Two hosts that lost each other: which side was cut, the dumps cannot tell. */
    fprintf(f,
            " the link between hosts %s and %s was lost (a cut link, a down interface or a "
            "partition), not a rank\n",
            names[cut], names[other]);
  } else {
    fprintf(f, " the hosts lost each other (a partition); %s ", nmost == 1 ? "host" : "hosts");
    for (int h = 0, j = 0; h < nnames; h++)
      if (score[h] == most) fprintf(f, "%s%s", j++ ? (j == nmost ? " and " : ", ") : "", names[h]);
    fprintf(f, " %s for the most (%d of %d%s)\n", nmost == 1 ? "accounts" : "account", most, size,
            nmost == 1 ? "" : " each");
  }
out:
  free(k);
  free(seen);
  free(names);
  free(score);
  free(linked);
  return found;
}
