/*
 * report_stragglers.c - `collie-report stragglers DIR`: which rank keeps the
 * others waiting.
 *
 * A collective starts for real only when its last rank arrives, so the rank
 * that enters collectives last, call after call, is the one the job waits
 * for (a slow data loader, a noisy neighbour, an unbalanced shard). The
 * timing logs hold each call's start_counter, so lining up the k-th
 * collective of every rank shows who arrived when.
 *
 * Matching is by order: every rank issues the same collectives in the same
 * order (else the job would hang), so the k-th collective row of each rank,
 * in start order, is the same call. SEND, RECV and user operations are left
 * out: they are not issued by every rank. When the k-th operations differ,
 * the sequences diverge there (a split communicator used by some ranks only,
 * or a real bug) and matching stops.
 *
 * start_counter is CLOCK_MONOTONIC, comparable only between ranks of one
 * host, so arrival is compared within each host (the .meta's host=). Without
 * .meta files there is no host to go by, and all ranks are compared as one
 * group, with a note.
 *
 * A call where several ranks share the latest start counts as nobody's.
 * Exit status: 0 done, 1 the sequences diverge, 2 bad usage or input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

void
report_stragglers_usage(void)
{
  printf("usage: collie-report stragglers DIR [--timing DIR2]\n"
         "  Lines up the k-th collective call of every rank (timing-rank*.csv in DIR or DIR2;\n"
         "  SEND, RECV and user operations left out) and, per host (host= of the .meta\n"
         "  files), prints the spread of arrival times (p50/p99/max of max - min\n"
         "  start_counter), how often each rank arrived last and its mean lateness, and\n"
         "  names the rank that arrived last most often.\n"
         "  Exit status: 0 done, 1 the ranks' call sequences diverge, 2 bad usage or input.\n");
}

/* A rank's collective rows in start order. */
struct str_seq {
  const struct rt_rank *r;
  size_t n;
  const struct rt_row **calls;
};

static int
str_row_cmp(const void *a, const void *b)
{
  const struct rt_row *x = *(const struct rt_row *const *)a, *y = *(const struct rt_row *const *)b;
  if (x->start_us != y->start_us) return x->start_us < y->start_us ? -1 : 1;
  return (x->line > y->line) - (x->line < y->line); /* stable: file order */
}

static int
str_dbl_cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Appends "0,1,3" for the ranks seq[members[0..n)]. */
static void
str_rank_list(char *buf, size_t len, const struct str_seq *seq, const int *members, int n)
{
  size_t o = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && o < len; i++)
    o += (size_t)snprintf(buf + o, len - o, "%s%d", i ? "," : "", seq[members[i]].r->rank);
}

/* Over the first k calls of the ranks seq[members[0..m)]: per call the
 * arrival spread in ms (spread[c], may be NULL), per member how often it
 * arrived last alone (last[i]) and its summed lateness after the first in ms
 * (late[i]); last and late start zeroed. */
static void
str_count(const struct str_seq *seq, const int *members, int m, size_t k, double *spread,
          size_t *last, double *late)
{
  for (size_t c = 0; c < k; c++) {
    int64_t lo = 0, hi = 0;
    int who = -1, ties = 0;
    for (int i = 0; i < m; i++) {
      int64_t s = seq[members[i]].calls[c]->start_us;
      if (i == 0 || s < lo) lo = s;
      if (i == 0 || s > hi) {
        hi = s;
        who = i;
        ties = 0;
      } else if (s == hi) {
        ties++;
      }
    }
    if (spread) spread[c] = (double)(hi - lo) / 1000.0;
    if (!ties) last[who]++;
    for (int i = 0; i < m; i++)
      late[i] += (double)(seq[members[i]].calls[c]->start_us - lo) / 1000.0;
  }
}

/* The table for one host: members index seq[]; k calls matched. */
static void
str_group(const struct str_seq *seq, const int *members, int m, size_t k, const char *host)
{
  char list[512];
  str_rank_list(list, sizeof(list), seq, members, m);
  if (m < 2) {
    printf("host %s: rank %s alone: nothing to compare on its clock\n", host, list);
    return;
  }
  printf("host %s: ranks %s; %zu matched call%s\n", host, list, k, k == 1 ? "" : "s");
  if (k == 0) return;
  double *spread = malloc(k * sizeof(*spread));
  size_t *last = calloc((size_t)m, sizeof(*last));
  double *late = calloc((size_t)m, sizeof(*late));
  if (!spread || !last || !late) {
    fprintf(stderr, "collie-report stragglers: out of memory\n");
    goto out;
  }
  str_count(seq, members, m, k, spread, last, late);
  qsort(spread, k, sizeof(*spread), str_dbl_cmp);
  printf("  arrival spread (max - min start_counter): p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
         rt_percentile(spread, k, 50), rt_percentile(spread, k, 99), spread[k - 1]);
  printf("  %8s %8s %8s %14s\n", "rank", "last", "share", "mean late ms");
  size_t best = 0;
  for (int i = 0; i < m; i++) {
    printf("  %8d %8zu %7.1f%% %14.3f\n", seq[members[i]].r->rank, last[i],
           100.0 * (double)last[i] / (double)k, late[i] / (double)k);
    if (last[i] > best) best = last[i];
  }
  if (best == 0) {
    printf("  no rank arrived last alone in any call\n");
    goto out;
  }
  int nbest = 0, bi = -1;
  char blist[512] = "";
  size_t o = 0;
  for (int i = 0; i < m; i++) {
    if (last[i] != best) continue;
    if (bi < 0) bi = i;
    nbest++;
    if (o < sizeof(blist))
      o += (size_t)snprintf(blist + o, sizeof(blist) - o, "%s%d", o ? "," : "",
                            seq[members[i]].r->rank);
  }
  if (nbest == 1)
    printf("  straggler: rank %d arrived last in %zu of %zu calls (%.1f%%), on average %.3f ms "
           "after the first\n",
           seq[members[bi]].r->rank, best, k, 100.0 * (double)best / (double)k,
           late[bi] / (double)k);
  else
    printf("  stragglers: ranks %s each arrived last in %zu of %zu calls\n", blist, best, k);
out:
  free(spread);
  free(last);
  free(late);
}

/* Fills seq[0..d->nranks) with each rank's collective rows in start order;
 * *k: how many calls line up on every rank (up to where the operations first
 * differ, which diverge then describes; else diverge is ""); *longest: the
 * most calls of one rank. Returns 0, or -1 when out of memory (seq[i].calls
 * allocated so far are the caller's to free). */
static int
str_build(const struct rt_data *d, struct str_seq *seq, size_t *k, size_t *longest, char *diverge,
          size_t dlen)
{
  int p = d->nranks;
  *k = (size_t)-1;
  *longest = 0;
  diverge[0] = '\0';
  for (int i = 0; i < p; i++) {
    const struct rt_rank *r = &d->ranks[i];
    seq[i].r = r;
    seq[i].calls = malloc((r->nrows ? r->nrows : 1) * sizeof(*seq[i].calls));
    if (!seq[i].calls) return -1;
    for (size_t j = 0; j < r->nrows; j++)
      if (rt_is_collective(r->rows[j].op)) seq[i].calls[seq[i].n++] = &r->rows[j];
    qsort(seq[i].calls, seq[i].n, sizeof(*seq[i].calls), str_row_cmp);
    if (seq[i].n < *k) *k = seq[i].n;
    if (seq[i].n > *longest) *longest = seq[i].n;
  }
  if (p == 0) *k = 0;
  /* Where the sequences part: the first call whose operation differs from rank 0's. */
  for (size_t c = 0; c < *k && !diverge[0]; c++) {
    for (int i = 1; i < p; i++) {
      if (strcmp(seq[i].calls[c]->op, seq[0].calls[c]->op) != 0) {
        snprintf(diverge, dlen,
                 "call #%zu: rank %d %.40s, rank %d %.40s: sequences diverge; matched %zu call%s",
                 c + 1, seq[0].r->rank, seq[0].calls[c]->op, seq[i].r->rank, seq[i].calls[c]->op, c,
                 c == 1 ? "" : "s");
        *k = c;
        break;
      }
    }
  }
  return 0;
}

/* The next group of ranks whose arrivals compare, from index i on (done[] marks
 * those already grouped): the ranks of d->ranks[i]'s host when by_host, else
 * every rank. Writes their indices to members; returns how many. */
static int
str_next_group(const struct rt_data *d, int i, int by_host, int *done, int *members)
{
  int m = 0;
  for (int j = i; j < d->nranks; j++) {
    if (!done[j] && (!by_host || strcmp(d->ranks[j].host, d->ranks[i].host) == 0)) {
      members[m++] = j;
      done[j] = 1;
    }
  }
  return m;
}

int
rs_compute(const struct rt_data *d, struct rs_result *out)
{
  int p = d->nranks, rc = -1;
  memset(out, 0, sizeof(*out));
  struct str_seq *seq = calloc((size_t)p + 1, sizeof(*seq));
  int *members = calloc((size_t)p + 1, sizeof(*members));
  int *done = calloc((size_t)p + 1, sizeof(*done));
  size_t *last = calloc((size_t)p + 1, sizeof(*last));
  double *late = calloc((size_t)p + 1, sizeof(*late));
  out->ranks = calloc((size_t)p + 1, sizeof(*out->ranks));
  if (!seq || !members || !done || !last || !late || !out->ranks) goto out;
  size_t longest;
  if (str_build(d, seq, &out->matched, &longest, out->diverge, sizeof(out->diverge)) != 0) goto out;
  out->nranks = p;
  out->by_host = 1;
  for (int i = 0; i < p; i++) out->by_host &= d->ranks[i].has_meta;
  for (int i = 0, g = 0; i < p; i++) {
    if (done[i]) continue;
    int m = str_next_group(d, i, out->by_host, done, members);
    memset(last, 0, (size_t)m * sizeof(*last));
    memset(late, 0, (size_t)m * sizeof(*late));
    if (m >= 2) str_count(seq, members, m, out->matched, NULL, last, late);
    for (int j = 0; j < m; j++) {
      struct rs_rank *x = &out->ranks[members[j]];
      x->rank = d->ranks[members[j]].rank;
      x->group = g;
      x->group_size = m;
      x->last = last[j];
      x->mean_late_ms = out->matched ? late[j] / (double)out->matched : 0.0;
    }
    g++;
  }
  rc = 0;
out:
  if (seq)
    for (int i = 0; i < p; i++) free(seq[i].calls);
  free(seq);
  free(members);
  free(done);
  free(last);
  free(late);
  if (rc != 0) rs_free(out);
  return rc;
}

void
rs_free(struct rs_result *r)
{
  free(r->ranks);
  memset(r, 0, sizeof(*r));
}

int
report_stragglers(int argc, char **argv)
{
  struct rt_args a;
  struct rt_data d;
  int start =
      rt_start(argc, argv, "stragglers", 0, report_stragglers_usage, RT_TIMING, RT_TIMING, &a, &d);
  if (start >= 0) return start;
  int rc = REPORT_OK, p = d.nranks;
  struct str_seq *seq = calloc((size_t)p, sizeof(*seq));
  int *members = calloc((size_t)p, sizeof(*members));
  int *done = calloc((size_t)p, sizeof(*done));
  if (!seq || !members || !done) {
    fprintf(stderr, "collie-report stragglers: out of memory\n");
    rc = REPORT_BAD_INPUT;
    goto out;
  }
  size_t k, longest;
  char diverge[512];
  if (str_build(&d, seq, &k, &longest, diverge, sizeof(diverge)) != 0) {
    fprintf(stderr, "collie-report stragglers: out of memory\n");
    rc = REPORT_BAD_INPUT;
    goto out;
  }

  int with_meta = 0;
  for (int i = 0; i < p; i++) with_meta += d.ranks[i].has_meta;
  printf("collie-report stragglers: %d rank%s (%s), %zu collective call%s matched\n", p,
         p == 1 ? "" : "s", d.timing_dir, k, k == 1 ? "" : "s");
  if (diverge[0]) {
    printf("%s\n", diverge);
    rc = REPORT_FOUND;
  } else if (longest > k) {
    for (int i = 0; i < p; i++)
      if (seq[i].n == k) {
        printf("note: rank %d logged %zu collective calls, another rank %zu: only the first %zu "
               "are matched\n",
               seq[i].r->rank, k, longest, k);
        break;
      }
  }
  if (p < 2) printf("only one rank's timing log: nothing to compare\n");

  if (with_meta < p) {
    char list[512] = "";
    size_t o = 0;
    for (int i = 0; i < p && o < sizeof(list); i++)
      if (!d.ranks[i].has_meta)
        o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%d", o ? "," : "", d.ranks[i].rank);
    printf("note: no timing-rank*.meta for rank%s %s: no host to group by, so all ranks are "
           "compared as one group (start_counter is only comparable within a host)\n",
           p - with_meta == 1 ? "" : "s", list);
    if (p >= 2) {
      for (int i = 0; i < p; i++) members[i] = i;
      str_group(seq, members, p, k, "(all)");
    }
  } else {
    /* One table per distinct host, in order of each host's lowest rank. */
    for (int i = 0; i < p; i++) {
      if (done[i]) continue;
      int m = str_next_group(&d, i, 1, done, members);
      str_group(seq, members, m, k, d.ranks[i].host[0] ? d.ranks[i].host : "(unnamed)");
    }
  }
out:
  if (seq)
    for (int i = 0; i < p; i++) free(seq[i].calls);
  free(seq);
  free(members);
  free(done);
  rt_free(&d);
  return rc;
}
