/*
 * report_hang.c - `collie-report hang DIR`: reads every rank's flight-recorder
 * dump and says, per communicator, which operation the job is stuck on and
 * who is behind.
 *
 * The verdict. Collectives carry the communicator's sequence number, the same
 * on every rank, so the records of all ranks line up by seq. The stuck
 * operation is the highest seq that some rank started (its record is started,
 * completed or failed) but not every rank completed. For it we list the ranks
 * that started it, queued it, completed it or failed in it, and for every
 * rank with no record of it, whether its ring had already overwritten that
 * record or it never joined, and then what its last operation was. Records
 * only queued are not evidence of progress (the worker queues ahead), so they
 * do not pick the stuck operation. Point-to-point records count per pair, not
 * per communicator, so they never pick it either; unfinished ones are listed
 * after the verdict.
 *
 * Each rank that failed is listed with its error (the dump's "error", which
 * names the peer it lost), and report_partition.c adds a verdict on the
 * network when every rank failed naming a rank on another host.
 *
 * Exit status: 0 when every communicator completed everything, 1 when
 * something is stuck or failed, 2 when the dumps could not be read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "units.h"

void
report_hang_usage(void)
{
  printf("usage: collie-report hang DIR\n"
         "  Reads DIR/flight-rank*.json (the flight-recorder dumps of every "
         "rank) and says,\n"
         "  per communicator, which operation is stuck, which ranks started, "
         "completed or\n"
         "  failed it, and which never joined it (with their last operation); each\n"
         "  failed rank's error; and whether a host lost its network link (every\n"
         "  rank failed naming a rank on another host).\n"
         "  Exit status: 0 nothing stuck, 1 a hang or failure found, 2 "
         "unreadable input.\n");
}

/* "allreduce #5 (4 MiB float32)". */
static void
hang_describe(char *buf, size_t len, const struct rd_op *op)
{
  char size[32];
  tool_bytes_label(size, sizeof(size), op->bytes);
  if (op->dtype[0])
    snprintf(buf, len, "%s #%lld (%s %s)", op->kind, (long long)op->seq, size, op->dtype);
  else
    snprintf(buf, len, "%s #%lld (%s)", op->kind, (long long)op->seq, size);
}

/* This rank's latest collective record of seq, or NULL. */
static const struct rd_op *
hang_find(const struct rd_dump *d, int64_t seq)
{
  for (int k = d->nops - 1; k >= 0; k--)
    if (!rd_is_p2p(d->ops[k].kind) && d->ops[k].seq == seq) return &d->ops[k];
  return NULL;
}

/* Lowest collective seq the rank still holds, or INT64_MAX. */
static int64_t
hang_oldest(const struct rd_dump *d)
{
  int64_t lo = INT64_MAX;
  for (int k = 0; k < d->nops; k++)
    if (!rd_is_p2p(d->ops[k].kind) && d->ops[k].seq < lo) lo = d->ops[k].seq;
  return lo;
}

/* Appends "; rank 2 failed" or "ranks 0,1,3 started" for the ranks in list. */
static void
hang_clause(char *out, size_t len, const int *list, int n, const char *what)
{
  if (n == 0) return;
  size_t o = strlen(out);
  o += (size_t)snprintf(out + o, o < len ? len - o : 0, "%s%s ", o ? "; " : "",
                        n == 1 ? "rank" : "ranks");
  for (int i = 0; i < n && o < len; i++)
    o += (size_t)snprintf(out + o, len - o, "%s%d", i ? "," : "", list[i]);
  if (o < len) snprintf(out + o, len - o, " %s", what);
}

/* Writes to f the verdict for the dumps d[0..n) of one communicator; returns 1 when
 * stuck. */
static int
hang_comm(FILE *f, const struct rd_dump *d, int n)
{
  int p = d[0].size;
  /* A split's ranks as the job knows them, when any dump says and they differ. */
  const int *world = NULL;
  for (int i = 0; i < n && !world; i++) world = d[i].world;
  int renamed = 0;
  for (int r = 0; world && r < p; r++) renamed |= world[r] != r;
  if (!renamed) world = NULL;
  fprintf(f, "communicator %s: %d rank%s", d[0].comm, p, p == 1 ? "" : "s");
  for (int r = 0; world && r < p; r++) fprintf(f, "%s%d", r ? "," : " (world ranks ", world[r]);
  fprintf(f, "%s, %d dump%s\n", world ? ")" : "", n, n == 1 ? "" : "s");
  /* by_rank[r]: rank r's dump, or NULL when it left none. */
  const struct rd_dump **by_rank = calloc((size_t)p, sizeof(*by_rank));
  if (!by_rank) return 1;
  for (int i = 0; i < n; i++) by_rank[d[i].rank] = &d[i];

  /* The stuck seq: highest started somewhere, not completed everywhere. */
  int64_t stuck = -1, max_seq = -1;
  const struct rd_op *last_coll = NULL;
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < d[i].nops; k++) {
      const struct rd_op *op = &d[i].ops[k];
      if (rd_is_p2p(op->kind) || op->state == RD_QUEUED) continue;
      if (op->seq > max_seq) {
        max_seq = op->seq;
        last_coll = op;
      }
      int all_done = 1;
      for (int r = 0; r < p && all_done; r++) {
        if (!by_rank[r]) {
          all_done = 0;
          break;
        }
        const struct rd_op *o = hang_find(by_rank[r], op->seq);
        /* A record the ring dropped is old news: the rank moved past it. */
        if (o ? o->state != RD_COMPLETED : hang_oldest(by_rank[r]) <= op->seq) all_done = 0;
      }
      if (!all_done && op->seq > stuck) stuck = op->seq;
    }
  }

  int found = 0;
  if (stuck < 0) {
    char desc[128];
    if (last_coll) {
      hang_describe(desc, sizeof(desc), last_coll);
      fprintf(f, "  all ranks completed everything (last: %s)\n", desc);
    } else {
      fprintf(f, "  all ranks completed everything (no collective recorded)\n");
    }
  } else {
    found = 1;
    const struct rd_op *ref = NULL;
    int *lists[5];
    int counts[5] = {0};
    for (int s = 0; s < 5; s++) lists[s] = calloc((size_t)p, sizeof(int));
    char tail[4096] = "";
    for (int r = 0; r < p; r++) {
      const struct rd_dump *rd = by_rank[r];
      if (!rd) {
        size_t o = strlen(tail);
        if (world)
          snprintf(tail + o, sizeof(tail) - o, "; rank %d (world rank %d) left no dump", r,
                   world[r]);
        else
          snprintf(tail + o, sizeof(tail) - o, "; rank %d left no dump", r);
        continue;
      }
      const struct rd_op *o = hang_find(rd, stuck);
      if (o) {
        if (!ref || (!ref->dtype[0] && o->dtype[0])) ref = o;
        if (lists[o->state]) lists[o->state][counts[o->state]++] = r;
        continue;
      }
      size_t t = strlen(tail);
      if (hang_oldest(rd) < stuck || hang_oldest(rd) == INT64_MAX) {
        if (rd->nops == 0) {
          snprintf(tail + t, sizeof(tail) - t, "; rank %d never joined: it recorded no operation",
                   r);
        } else {
          const struct rd_op *last = &rd->ops[rd->nops - 1];
          snprintf(tail + t, sizeof(tail) - t,
                   "; rank %d never joined: its last op was %s #%lld (%s)", r, last->kind,
                   (long long)last->seq, rd_state_name(last->state));
        }
      } else {
        snprintf(tail + t, sizeof(tail) - t, "; rank %d moved past it (its record was overwritten)",
                 r);
      }
    }
    char line[8192] = "";
    hang_clause(line, sizeof(line), lists[RD_STARTED], counts[RD_STARTED], "started");
    hang_clause(line, sizeof(line), lists[RD_QUEUED], counts[RD_QUEUED], "queued it");
    hang_clause(line, sizeof(line), lists[RD_COMPLETED], counts[RD_COMPLETED], "completed");
    hang_clause(line, sizeof(line), lists[RD_FAILED], counts[RD_FAILED], "failed");
    for (int s = 0; s < 5; s++) free(lists[s]);
    char desc[128] = "?";
    if (ref) hang_describe(desc, sizeof(desc), ref);
    fprintf(f, "  stuck: %s: %s%s\n", desc, line, line[0] ? tail : (tail[0] ? tail + 2 : ""));
  }
  /* What each rank that failed was told: the message names the peer it lost. */
  for (int i = 0; i < n; i++) {
    if (!d[i].error[0]) continue;
    fprintf(f, "  rank %d", d[i].rank);
    if (d[i].host_of) fprintf(f, " (host %s)", d[i].hosts[d[i].host_of[d[i].rank]]);
    fprintf(f, ": %s\n", d[i].error);
  }

  /* Point-to-point operations that never finished, per rank. */
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < d[i].nops; k++) {
      const struct rd_op *op = &d[i].ops[k];
      if (!rd_is_p2p(op->kind) || op->state == RD_COMPLETED) continue;
      char desc[128];
      hang_describe(desc, sizeof(desc), op);
      fprintf(f, "  rank %d: %s with peer %d %s\n", d[i].rank, desc, op->root,
              rd_state_name(op->state));
      found = 1;
    }
  }
  free(by_rank);
  return found;
}

int
report_hang_verdict(FILE *f, const struct rd_dump *dumps, int n)
{
  int found = 0;
  for (int i = 0; i < n;) {
    int j = i;
    while (j < n && strcmp(dumps[j].comm, dumps[i].comm) == 0) j++;
    found |= hang_comm(f, &dumps[i], j - i);
    i = j;
  }
  found |= report_partition(f, dumps, n);
  return found;
}

int
report_hang(int argc, char **argv)
{
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    report_hang_usage();
    return REPORT_OK;
  }
  if (argc != 2) {
    fprintf(stderr, "collie-report hang: expected one directory (try --help)\n");
    return REPORT_BAD_INPUT;
  }
  struct rd_dump *dumps;
  int n;
  char err[1600];
  if (rd_load_dir(argv[1], &dumps, &n, err, sizeof(err)) != 0) {
    fprintf(stderr, "collie-report hang: %s\n", err);
    return REPORT_BAD_INPUT;
  }
  int found = report_hang_verdict(stdout, dumps, n);
  rd_free(dumps, n);
  return found ? REPORT_FOUND : REPORT_OK;
}
