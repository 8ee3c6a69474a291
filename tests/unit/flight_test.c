/*
 * flight_test.c - the flight recorder (src/telemetry/flight.c) driven
 * directly through its collie__flight_* functions: the ring's wraparound and
 * states, JSON that reads back (with collie-report's own reader, compiled in
 * here so the test checks the very parser the tool uses), concurrent writers
 * and a dumping reader (run under TSan in CI: the name carries "thread"),
 * SIGUSR1 dumps and chaining to a handler the program installed first.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner.h"
#include "telemetry/telemetry.h"
#include "util/util.h"

/* collie-report's reader and loader (compiled in by tools_impl.c), so that
 * what we write is what it reads. */
#include "../../tools/report.h"

#define FT_HASH 0x00c0ffee12345678ULL

static struct collie__flight_op
ft_op(uint32_t seq, const char *kind)
{
  struct collie__flight_op op = {.seq = seq,
                                 .kind = kind,
                                 .dtype = "float32",
                                 .op = "sum",
                                 .algo = NULL,
                                 .count = (size_t)seq * 3,
                                 .bytes = (size_t)seq * 12,
                                 .root = -1};
  return op;
}

static const char *
ft_path(int rank)
{
  static char buf[1024];
  snprintf(buf, sizeof(buf), "%s/flight-rank%d-%016llx.json", test_dir(), rank,
           (unsigned long long)FT_HASH);
  return buf;
}

/* Loads the one dump of test_dir(), failing the test on any error. */
static struct rd_dump *
ft_load(int *n)
{
  struct rd_dump *d;
  char err[1024];
  ASSERTF(rd_load_dir(test_dir(), &d, n, err, sizeof(err)) == 0, "load: %s", err);
  return d;
}

/* Dumps fr into test_dir() as a "user" dump and loads it back: the one file there. */
static struct rd_dump *
ft_dump_one(struct collie__flight *fr)
{
  int n;
  ASSERT_OK(collie__flight_dump(fr, test_dir(), "user"));
  struct rd_dump *d = ft_load(&n);
  ASSERTF(n == 1, "%d dumps in %s", n, test_dir());
  return d;
}

/* A call that runs at once on the issuing thread is STARTED from its issue
 * (stamped with its queue time) though only the issuer's half was written;
 * when it completes or fails, its start time is still its issue time. */
TEST_IMPL(flight_started_at_issue)
{
  struct collie__flight *fr = collie__flight_new(4, 0, 2, FT_HASH);
  ASSERT(fr != NULL);
  for (uint32_t s = 0; s < 3; s++) {
    struct collie__flight_op op = ft_op(s, "broadcast");
    op.started = 1;
    ASSERT(collie__flight_queued_at(fr, &op, 1000 + (int64_t)s) == (int64_t)s);
  }
  collie__flight_state_at(fr, 0, COLLIE_FR_COMPLETED, NULL, 2000);
  collie__flight_state_at(fr, 1, COLLIE_FR_FAILED, "tree", 3000);
  struct rd_dump *d = ft_dump_one(fr);
  ASSERT(d[0].nops == 3);
  const struct rd_op *o = d[0].ops;
  ASSERT(o[0].state == RD_COMPLETED && o[0].t_started == 1000 && o[0].t_done == 2000);
  ASSERT(o[1].state == RD_FAILED && o[1].t_started == 1001 && o[1].t_done == 3000);
  ASSERT(strcmp(o[1].algo, "tree") == 0);
  ASSERTF(o[2].state == RD_STARTED && o[2].t_started == 1002 && o[2].t_done == 0,
          "in flight: state %d, started %lld", o[2].state, (long long)o[2].t_started);
  rd_free(d, 1);
  /* Ids 3 and 4: 4 refills slot 0, whose completion time (op 0's) must not
   * make the new op look done. */
  for (uint32_t s = 3; s < 5; s++) {
    struct collie__flight_op op = ft_op(s, "broadcast");
    op.started = 1;
    ASSERT(collie__flight_queued_at(fr, &op, 1000 + (int64_t)s) == (int64_t)s);
  }
  d = ft_dump_one(fr);
  ASSERT(d[0].nops == 4);
  o = d[0].ops;
  ASSERT(o[3].id == 4);
  ASSERTF(o[3].state == RD_STARTED && o[3].t_done == 0, "refilled slot: state %d, done %lld",
          o[3].state, (long long)o[3].t_done);
  rd_free(d, 1);
  /* The dispatcher's one-store completion: id 0's slot now holds id 4, so
   * ending 0 must not touch it; ending 4 completes it. */
  collie__flight_end_at_issue(fr, 0, 4000);
  d = ft_dump_one(fr);
  ASSERT(d[0].ops[3].id == 4 && d[0].ops[3].state == RD_STARTED);
  rd_free(d, 1);
  collie__flight_end_at_issue(fr, 4, 5000);
  d = ft_dump_one(fr);
  ASSERTF(d[0].ops[3].state == RD_COMPLETED && d[0].ops[3].t_started == 1004 &&
              d[0].ops[3].t_done == 5000,
          "ended at issue: state %d, done %lld", d[0].ops[3].state, (long long)d[0].ops[3].t_done);
  rd_free(d, 1);
  collie__flight_free(fr);
}

/* A capacity that is no power of two: the ring is larger inside (records are
 * found by masking the id), a dump still shows exactly the last `capacity`
 * operations, and a record overwritten in the larger ring ignores updates. */
TEST_IMPL(flight_ring_capacity_not_pow2)
{
  struct collie__flight *fr = collie__flight_new(5, 0, 2, FT_HASH);
  ASSERT(fr != NULL);
  for (uint32_t s = 0; s < 13; s++) {
    struct collie__flight_op op = ft_op(s, "broadcast");
    ASSERT(collie__flight_queued(fr, &op) == (int64_t)s);
    collie__flight_state(fr, (int64_t)s, COLLIE_FR_STARTED, "tree");
  }
  collie__flight_state(fr, 4, COLLIE_FR_COMPLETED, NULL);  /* slot taken by id 12: ignored */
  collie__flight_state(fr, 12, COLLIE_FR_COMPLETED, NULL); /* the newest: applied */
  struct rd_dump *d = ft_dump_one(fr);
  ASSERTF(d[0].nops == 5, "capacity 5: %d records dumped", d[0].nops);
  for (int k = 0; k < 5; k++) {
    ASSERTF(d[0].ops[k].id == 8 + k, "record %d: id %lld", k, (long long)d[0].ops[k].id);
    ASSERT(d[0].ops[k].state == (k == 4 ? RD_COMPLETED : RD_STARTED));
  }
  rd_free(d, 1);
  collie__flight_free(fr);
}

TEST_IMPL(flight_ring_wraparound)
{
  struct collie__flight *fr = collie__flight_new(4, 1, 3, FT_HASH);
  ASSERT(fr != NULL);
  for (uint32_t s = 0; s < 10; s++) {
    struct collie__flight_op op = ft_op(s, "allreduce");
    int64_t id = collie__flight_queued(fr, &op);
    ASSERT(id == (int64_t)s);
    if (s < 8) collie__flight_state(fr, id, COLLIE_FR_STARTED, "ring");
    if (s < 7) collie__flight_state(fr, id, COLLIE_FR_COMPLETED, NULL);
  }
  collie__flight_state(fr, 2, COLLIE_FR_FAILED, NULL); /* overwritten: ignored */
  ASSERT_OK(collie__flight_dump(fr, test_dir(), "user"));
  int n;
  struct rd_dump *d = ft_load(&n);
  ASSERT(n == 1);
  ASSERT(d[0].rank == 1 && d[0].size == 3);
  ASSERT(strcmp(d[0].comm, "00c0ffee12345678") == 0);
  ASSERT(strcmp(d[0].reason, "user") == 0);
  ASSERT(d[0].pid == (long)getpid());
  ASSERT(d[0].nops == 4); /* the last 4 of 10, oldest first */
  for (int k = 0; k < 4; k++) {
    const struct rd_op *op = &d[0].ops[k];
    ASSERT(op->id == 6 + k && op->seq == 6 + k);
    ASSERT(strcmp(op->kind, "allreduce") == 0 && strcmp(op->dtype, "float32") == 0);
    ASSERT(strcmp(op->op, "sum") == 0);
    ASSERT(op->count == (uint64_t)(6 + k) * 3 && op->bytes == (uint64_t)(6 + k) * 12);
    ASSERT(op->root == -1);
    ASSERT(op->t_queued > 0);
  }
  ASSERT(d[0].ops[0].state == RD_COMPLETED && strcmp(d[0].ops[0].algo, "ring") == 0);
  ASSERT(d[0].ops[0].t_started >= d[0].ops[0].t_queued);
  ASSERT(d[0].ops[0].t_done >= d[0].ops[0].t_started);
  ASSERT(d[0].ops[1].state == RD_STARTED && d[0].ops[1].t_done == 0);
  ASSERT(d[0].ops[2].state == RD_QUEUED && d[0].ops[2].algo[0] == '\0');
  ASSERT(d[0].ops[2].t_started == 0);
  rd_free(d, n);
  collie__flight_free(fr);
}

TEST_IMPL(flight_states_and_null)
{
  struct collie__flight_op op = ft_op(5, "broadcast");
  ASSERT(collie__flight_queued(NULL, &op) == -1);
  collie__flight_state(NULL, 0, COLLIE_FR_STARTED, NULL); /* no-op, no crash */
  collie__flight_free(NULL);
  struct collie__flight *fr = collie__flight_new(8, 0, 1, FT_HASH);
  ASSERT(fr != NULL);
  op.root = 2;
  op.op = NULL;
  int64_t id = collie__flight_queued(fr, &op);
  collie__flight_state(fr, id, COLLIE_FR_STARTED, "tree");
  collie__flight_state(fr, id, COLLIE_FR_FAILED, NULL);
  collie__flight_state(fr, id + 5, COLLIE_FR_COMPLETED, NULL); /* never issued: ignored */
  collie__flight_state(fr, id, 99, NULL);                      /* bad state: ignored */
  ASSERT_OK(collie__flight_dump(fr, test_dir(), "failure"));
  int n;
  struct rd_dump *d = ft_load(&n);
  ASSERT(d[0].nops == 1);
  ASSERT(d[0].ops[0].state == RD_FAILED && d[0].ops[0].root == 2);
  ASSERT(strcmp(d[0].ops[0].algo, "tree") == 0 && d[0].ops[0].op[0] == '\0');
  ASSERT(strcmp(d[0].reason, "failure") == 0);
  rd_free(d, n);

  /* The file is JSON a strict reader accepts, with the ISO wall-clock fields. */
  FILE *f = fopen(ft_path(0), "r");
  ASSERT(f != NULL);
  char text[8192];
  size_t len = fread(text, 1, sizeof(text), f);
  fclose(f);
  char err[256];
  struct rj_val *v = rj_parse(text, len, err, sizeof(err));
  ASSERTF(v != NULL, "parse: %s", err);
  const struct rj_val *t = rj_get(v, "time");
  ASSERT(t && t->type == RJ_STR && strlen(t->str) == 27 && t->str[10] == 'T' && t->str[26] == 'Z');
  const struct rj_val *ops = rj_get(v, "ops");
  ASSERT(ops && ops->type == RJ_ARR && ops->n == 1);
  const struct rj_val *w = rj_get(&ops->items[0], "wall_done");
  ASSERT(w && w->type == RJ_STR && w->str[26] == 'Z');
  ASSERT(rj_get(&ops->items[0], "op")->type == RJ_NULL);
  rj_free(v);
  collie__flight_free(fr);
}

TEST_IMPL(flight_json_escaping)
{
  struct collie__flight *fr = collie__flight_new(2, 0, 2, FT_HASH);
  struct collie__flight_op op = ft_op(1, "odd\"kind\\with\nnewline\x01");
  collie__flight_queued(fr, &op);
  ASSERT_OK(collie__flight_dump(fr, test_dir(), "a \"quoted\" reason"));
  int n;
  struct rd_dump *d = ft_load(&n);
  ASSERT(strcmp(d[0].ops[0].kind, "odd\"kind\\with\nnewline\x01") == 0);
  ASSERT(strcmp(d[0].reason, "a \"quoted\" reason") == 0);
  rd_free(d, n);
  collie__flight_free(fr);
}

TEST_IMPL(flight_dump_bad_dir)
{
  struct collie__flight *fr = collie__flight_new(2, 0, 1, FT_HASH);
  char path[1024];
  snprintf(path, sizeof(path), "%s/plainfile", test_dir());
  FILE *f = fopen(path, "w");
  ASSERT(f != NULL);
  fclose(f);
  ASSERT_RC(COLLIE_SYSTEM_ERROR, "plainfile", collie__flight_dump(fr, path, "user"));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "recorder", collie__flight_dump(NULL, test_dir(), "user"));
  collie__flight_free(fr);
}

/* ---- two writers and a reader at once ---- */

#define FT_OPS 20000

struct ft_shared {
  struct collie__flight *fr;
  int64_t published; /* atomic: highest id the issuer queued, -1 at first */
  int done;          /* atomic */
  int dumps;         /* atomic: dumps checked so far */
};

static void *
ft_worker(void *arg)
{
  struct ft_shared *sh = arg;
  int64_t next = 0;
  while (next < FT_OPS) {
    int64_t pub = __atomic_load_n(&sh->published, __ATOMIC_ACQUIRE);
    if (pub < next) {
      collie__cpu_relax();
      continue;
    }
    for (; next <= pub; next++) {
      collie__flight_state(sh->fr, next, COLLIE_FR_STARTED, "ring");
      collie__flight_state(sh->fr, next, COLLIE_FR_COMPLETED, NULL);
    }
  }
  return NULL;
}

static void *
ft_dumper(void *arg)
{
  struct ft_shared *sh = arg;
  int dumps = 0;
  while (!__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE) || dumps < 3) {
    ASSERT_OK(collie__flight_dump(sh->fr, test_dir(), "user"));
    int n;
    struct rd_dump *d = ft_load(&n);
    for (int k = 0; k < d[0].nops; k++) {
      const struct rd_op *op = &d[0].ops[k];
      /* A torn record would mix fields of two operations. */
      ASSERTF(op->seq == op->id && op->count == (uint64_t)op->id * 3 &&
                  op->bytes == (uint64_t)op->id * 12,
              "torn record id %lld seq %lld count %llu", (long long)op->id, (long long)op->seq,
              (unsigned long long)op->count);
      ASSERT(k == 0 || op->id > d[0].ops[k - 1].id);
      if (op->state == RD_COMPLETED) ASSERT(op->t_done >= op->t_started && op->t_started > 0);
    }
    rd_free(d, n);
    __atomic_store_n(&sh->dumps, ++dumps, __ATOMIC_RELEASE);
  }
  return NULL;
}

TEST_IMPL(flight_thread_concurrent)
{
  struct ft_shared sh = {.fr = collie__flight_new(64, 0, 2, FT_HASH), .published = -1};
  ASSERT(sh.fr != NULL);
  pthread_t worker, dumper;
  ASSERT(pthread_create(&worker, NULL, ft_worker, &sh) == 0);
  ASSERT(pthread_create(&dumper, NULL, ft_dumper, &sh) == 0);
  for (uint32_t s = 0; s < FT_OPS; s++) {
    /* Hold the issuer back until the dumper has read once, so the three overlap. */
    if (s == FT_OPS / 2) {
      int64_t deadline = collie__deadline_after_ms(10000);
      while (__atomic_load_n(&sh.dumps, __ATOMIC_ACQUIRE) == 0 && collie__now_ns() < deadline)
        collie__sleep_ns(100000);
    }
    struct collie__flight_op op = ft_op(s, "allreduce");
    int64_t id = collie__flight_queued(sh.fr, &op);
    ASSERT(id == (int64_t)s);
    __atomic_store_n(&sh.published, id, __ATOMIC_RELEASE);
  }
  pthread_join(worker, NULL);
  __atomic_store_n(&sh.done, 1, __ATOMIC_RELEASE);
  pthread_join(dumper, NULL);
  /* Quiet now: the last 64 are all there and completed. */
  ASSERT_OK(collie__flight_dump(sh.fr, test_dir(), "user"));
  int n;
  struct rd_dump *d = ft_load(&n);
  ASSERT(d[0].nops == 64);
  ASSERT(d[0].ops[0].id == FT_OPS - 64 && d[0].ops[63].id == FT_OPS - 1);
  for (int k = 0; k < 64; k++) ASSERT(d[0].ops[k].state == RD_COMPLETED);
  rd_free(d, n);
  collie__flight_free(sh.fr);
}

/* ---- SIGUSR1 ---- */

/* Waits (at most 5 s) until path exists and its reason is SIGUSR1. */
static void
ft_wait_dump(const char *path)
{
  int64_t deadline = collie__deadline_after_ms(5000);
  struct stat st;
  while (stat(path, &st) != 0) {
    ASSERTF(collie__now_ns() < deadline, "no dump at %s after SIGUSR1", path);
    collie__sleep_ns(5 * 1000 * 1000);
  }
  int n;
  struct rd_dump *d = ft_load(&n);
  ASSERT(n >= 1 && strcmp(d[0].reason, "SIGUSR1") == 0);
  rd_free(d, n);
}

TEST_IMPL(flight_sigusr1_dump)
{
  struct collie__flight *fr = collie__flight_new(16, 2, 4, FT_HASH);
  struct collie__flight_op op = ft_op(3, "allreduce");
  collie__flight_state(fr, collie__flight_queued(fr, &op), COLLIE_FR_STARTED, "ring");
  collie__flight_watch(fr, test_dir());
  collie__flight_watch(fr, test_dir()); /* idempotent */
  raise(SIGUSR1);
  ft_wait_dump(ft_path(2));
  collie__flight_unwatch(fr);
  collie__flight_unwatch(fr); /* not watched any more: no-op */
  struct sigaction now;
  sigaction(SIGUSR1, NULL, &now);
  ASSERT(!(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL);

  /* Watching again after the last unwatch starts a fresh thread. */
  unlink(ft_path(2));
  collie__flight_watch(fr, test_dir());
  raise(SIGUSR1);
  ft_wait_dump(ft_path(2));
  collie__flight_unwatch(fr);
  collie__flight_free(fr);
}

static volatile sig_atomic_t ft_user_hits;

static void
ft_user_handler(int sig)
{
  (void)sig;
  ft_user_hits++;
}

TEST_IMPL(flight_sigusr1_chain)
{
  struct sigaction mine;
  memset(&mine, 0, sizeof(mine));
  mine.sa_handler = ft_user_handler;
  sigemptyset(&mine.sa_mask);
  ASSERT(sigaction(SIGUSR1, &mine, NULL) == 0);
  struct collie__flight *a = collie__flight_new(4, 0, 2, FT_HASH);
  struct collie__flight *b = collie__flight_new(4, 0, 1, FT_HASH + 1);
  collie__flight_watch(a, test_dir());
  collie__flight_watch(b, test_dir());
  raise(SIGUSR1);
  ASSERT(ft_user_hits == 1); /* the program's handler still runs, synchronously */
  ft_wait_dump(ft_path(0));
  char other[1024];
  snprintf(other, sizeof(other), "%s/flight-rank0-%016llx.json", test_dir(),
           (unsigned long long)(FT_HASH + 1));
  ft_wait_dump(other);
  collie__flight_unwatch(a);
  collie__flight_unwatch(b);
  collie__flight_free(a);
  collie__flight_free(b);
  struct sigaction now;
  sigaction(SIGUSR1, NULL, &now);
  ASSERT(now.sa_handler == ft_user_handler); /* restored */
  raise(SIGUSR1);
  ASSERT(ft_user_hits == 2);
}

/* A handler installed after collie's that chains to what it replaced (collie's). */
static struct sigaction ft_later_prev;
static volatile sig_atomic_t ft_later_hits;

static void
ft_later_handler(int sig, siginfo_t *info, void *ctx)
{
  ft_later_hits++;
  if (ft_later_prev.sa_flags & SA_SIGINFO) ft_later_prev.sa_sigaction(sig, info, ctx);
}

TEST_IMPL(flight_sigusr1_later_handler)
{
  struct collie__flight *fr = collie__flight_new(4, 0, 1, FT_HASH);
  collie__flight_watch(fr, test_dir());
  struct sigaction later;
  memset(&later, 0, sizeof(later));
  later.sa_sigaction = ft_later_handler;
  later.sa_flags = SA_SIGINFO;
  sigemptyset(&later.sa_mask);
  ASSERT(sigaction(SIGUSR1, &later, &ft_later_prev) == 0);
  raise(SIGUSR1); /* the program's handler, then collie's through it */
  ASSERT(ft_later_hits == 1);
  ft_wait_dump(ft_path(0));
  collie__flight_unwatch(fr);
  struct sigaction now;
  sigaction(SIGUSR1, NULL, &now);
  ASSERT(now.sa_sigaction == ft_later_handler); /* not ours to restore over */

  /* Watching again saves the program's handler, which chains back to ours: one
   * signal must still end, with one call of each. */
  unlink(ft_path(0));
  collie__flight_watch(fr, test_dir());
  raise(SIGUSR1);
  ASSERT(ft_later_hits == 2);
  ft_wait_dump(ft_path(0));
  collie__flight_unwatch(fr);
  collie__flight_free(fr);
}
