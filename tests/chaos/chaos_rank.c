/*
 * chaos_rank.c - one rank of a chaos trial (scripts/chaos.sh runs them
 * under `collierun --keep-going`): every rank draws the same random sequence
 * of collectives from SEED (kind, size, root, dtype, blocking or async, on the
 * world communicator or on its even/odd split), and one rank, the victim,
 * drawn from SEED too, injects one fault at a random moment of a random
 * operation from a thread of its own:
 *
 *   kill     SIGKILL to itself (a crash)
 *   term     SIGTERM to itself (a job manager's stop)
 *   stop     SIGSTOP to itself (a frozen rank; the script kills it later)
 *   sockets  shutdown() of every socket it has (a cut network; tcp and mixed)
 *   shmfull  fills /dev/shm, and every rank then splits the world anew: the
 *            split needs a new segment (only when CHAOS_SHM_FULL=1, which
 *            scripts/chaos.sh sets when /dev/shm is a private tmpfs)
 *   cut      its host's link goes down (on the test bed only, when
 *            CHAOS_CUT_FILE names the file scripts/testbed.sh's
 *            --cut-on-request watches: the victim writes its host's index,
 *            TESTBED_HOST, there); the victim goes on like every other rank
 *
 * CHAOS_FAULTS=kill,cut (names, comma-separated) draws only among those.
 * CHAOS_COLLIDE=1 (scripts/chaos.sh --collide) fires the fault 0-2 ms into
 * its operation instead of 0-20: a frozen victim then stops inside it, after
 * some of its messages went out, so that the ranks it reached finish the
 * operation and wait in the next one on ranks still waiting on the victim
 * (a chain one operation deep, whose deadlines pass together under the
 * short COLLIE_TIMEOUT_MS the script gives).
 *
 * The fault fires 0-20 ms after the victim starts operation 3..40, and
 * every rank goes on calling collectives until one fails (at most OPS of
 * them), so the survivors always meet it. Just before the fault the victim
 * writes DIR/fault ("<kind> <monotonic s> <op index> <world rank> <pid>", and
 * for a cut " <host index>"). On the test bed each rank writes DIR/host<r>
 * (its host's index) at the start. A rank
 * whose call fails writes DIR/rank<r> ("<rc> <monotonic s> <op index>" and
 * the message on the next line) and exits 0 0.3 s later without destroying anything:
 * what it leaves behind is the library's doing. A rank that runs every
 * operation writes "done" there.
 *
 *   chaos_rank SEED [OPS]      (DIR: $CHAOS_DIR; OPS default 1000000)
 *
 * CHAOS_MIXED=1 makes two fake hosts by rank parity (COLLIE_HOST_ID), so
 * that shm and tcp serve the communicators together; CHAOS_TESTBED=1 says the
 * ranks run on the test bed's hosts (scripts/testbed.sh), tcp between them.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "collie.h"

static uint64_t
chaos_next(uint64_t *s)
{
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static double
chaos_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *chaos_dir;
static const char *const chaos_faults[] = {"kill", "term", "stop", "sockets", "shmfull", "cut"};
enum { CHAOS_SOCKETS = 3, CHAOS_SHMFULL = 4, CHAOS_CUT = 5, CHAOS_NFAULTS = 6 };
static const char *chaos_host = ""; /* TESTBED_HOST: this rank's host on the test bed */

struct chaos_fault {
  int kind, op, rank;
  unsigned delay_us;
};

static void
chaos_write(const char *name, const char *text)
{
  char path[1024], tmp[1100];
  snprintf(path, sizeof(path), "%s/%s", chaos_dir, name);
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  fputs(text, f);
  fclose(f);
  rename(tmp, path);
}

static void *
chaos_inject(void *arg)
{
  const struct chaos_fault *f = arg;
  usleep(f->delay_us);
  char line[128];
  snprintf(line, sizeof(line), "%s %.6f %d %d %ld%s%s\n", chaos_faults[f->kind], chaos_now(), f->op,
           f->rank, (long)getpid(), f->kind == CHAOS_CUT ? " " : "",
           f->kind == CHAOS_CUT ? chaos_host : "");
  chaos_write("fault", line);
  switch (f->kind) {
  case 0:
    raise(SIGKILL);
    break;
  case 1:
    raise(SIGTERM);
    break;
  case 2:
    raise(SIGSTOP);
    break;
  case CHAOS_CUT: {
    /* testbed.sh takes the link down; the rank carries on and meets it. */
    char req[1100], tmp[1200];
    snprintf(req, sizeof(req), "%s", getenv("CHAOS_CUT_FILE"));
    snprintf(tmp, sizeof(tmp), "%s.tmp", req);
    FILE *w = fopen(tmp, "w");
    if (w) {
      fprintf(w, "%s\n", chaos_host);
      fclose(w);
      rename(tmp, req);
    }
    break;
  }
  default:
    for (int fd = 0; fd < 1024; fd++) {
      struct stat st;
      if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) shutdown(fd, SHUT_RDWR);
    }
  }
  return NULL;
}

/* Fills /dev/shm until it has no room left (the file stays: the script
 * removes it after the trial). */
static void
chaos_fill_shm(const struct chaos_fault *f)
{
  static char block[1 << 20];
  memset(block, 0x5a, sizeof(block));
  char line[128];
  snprintf(line, sizeof(line), "%s %.6f %d %d %ld\n", chaos_faults[f->kind], chaos_now(), f->op,
           f->rank, (long)getpid());
  int fd = open("/dev/shm/chaos-fill", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  while (fd >= 0 && write(fd, block, sizeof(block)) > 0) {
  }
  if (fd >= 0) close(fd);
  chaos_write("fault", line);
}

/* One random collective on c; the sequence is every rank's (same seed). */
static collie_result_t
chaos_op(collie_comm_t *c, uint64_t *rng, char *buf, char *out)
{
  int p = collie_comm_size(c);
  int kind = (int)(chaos_next(rng) % 7);
  size_t count = 1 + chaos_next(rng) % 4096;
  collie_dtype_t dt = chaos_next(rng) % 2 ? COLLIE_FLOAT32 : COLLIE_INT32;
  int root = (int)(chaos_next(rng) % (uint64_t)p);
  int async = chaos_next(rng) % 3 == 0;
  collie_work_t *w = NULL, **wp = async ? &w : NULL;
  collie_result_t rc;
  switch (kind) {
  case 0:
    rc = collie_allreduce(c, buf, out, count, dt, COLLIE_SUM, NULL, wp);
    break;
  case 1:
    rc = collie_allgather(c, buf, out, count / (size_t)p + 1, dt, NULL, wp);
    break;
  case 2:
    rc = collie_broadcast(c, out, count, dt, root, NULL, wp);
    break;
  case 3:
    rc = collie_reduce(c, buf, out, count, dt, COLLIE_SUM, root, NULL, wp);
    break;
  case 4:
    rc = collie_alltoall(c, buf, out, count / (size_t)p + 1, dt, NULL, wp);
    break;
  case 5:
    rc = collie_reduce_scatter(c, buf, out, count / (size_t)p + 1, dt, COLLIE_SUM, NULL, wp);
    break;
  default:
    rc = collie_barrier(c, NULL, wp);
  }
  if (rc == COLLIE_SUCCESS && w) rc = collie_wait(w, -1);
  collie_work_free(w);
  return rc;
}

int
main(int argc, char **argv)
{
  if (argc < 2 || !(chaos_dir = getenv("CHAOS_DIR"))) {
    fprintf(stderr, "usage: CHAOS_DIR=dir chaos_rank SEED [OPS]\n");
    return 2;
  }
  uint64_t seed = strtoull(argv[1], NULL, 10), rng = seed;
  long ops = argc > 2 ? atol(argv[2]) : 1000000;
  collie_comm_t *world = NULL, *sub = NULL;
  /* Two fake hosts by rank parity: shm within each, tcp between them. */
  const char *mixed = getenv("CHAOS_MIXED"), *rank_env = getenv("RANK");
  int is_mixed = mixed && !strcmp(mixed, "1");
  if (is_mixed) {
    char host[32];
    snprintf(host, sizeof(host), "chaos-host-%d", rank_env ? atoi(rank_env) % 2 : 0);
    setenv("COLLIE_HOST_ID", host, 1);
  }
  if (collie_comm_init(&world) != COLLIE_SUCCESS) {
    fprintf(stderr, "chaos_rank: init: %s\n", collie_last_error());
    return 1;
  }
  int r = collie_comm_rank(world), p = collie_comm_size(world);
  char pidname[32], pidtext[32];
  snprintf(pidname, sizeof(pidname), "pid%d", r);
  snprintf(pidtext, sizeof(pidtext), "%ld\n", (long)getpid());
  chaos_write(pidname, pidtext); /* the script checks that no rank outlives its trial */
  const char *bed_host = getenv("TESTBED_HOST");
  if (bed_host && *bed_host) {
    char hostname[32], hosttext[32];
    chaos_host = bed_host;
    snprintf(hostname, sizeof(hostname), "host%d", r);
    snprintf(hosttext, sizeof(hosttext), "%s\n", bed_host);
    chaos_write(hostname, hosttext); /* where each rank ran: the cut fault's checks */
  }
  if (collie_comm_split(world, r % 2, r, &sub) != COLLIE_SUCCESS) {
    fprintf(stderr, "chaos_rank: split: %s\n", collie_last_error());
    return 1;
  }
  /* The trial's fault, drawn alike everywhere among those that apply: sockets
   * where there are any, a full /dev/shm where it is shared and private. */
  const char *tr = getenv("COLLIE_TRANSPORT"), *full = getenv("CHAOS_SHM_FULL");
  int tcp = tr && !strcmp(tr, "tcp"), shm_full = !tcp && full && !strcmp(full, "1");
  int kinds[CHAOS_NFAULTS] = {0, 1, 2}, nkinds = 3;
  const char *bed = getenv("CHAOS_TESTBED"); /* real hosts (scripts/testbed.sh): tcp between */
  int on_bed = bed && !strcmp(bed, "1");
  const char *cut_file = getenv("CHAOS_CUT_FILE");
  if (tcp || is_mixed || on_bed) kinds[nkinds++] = CHAOS_SOCKETS;
  if (shm_full) kinds[nkinds++] = CHAOS_SHMFULL;
  if (on_bed && cut_file && *cut_file && *chaos_host) kinds[nkinds++] = CHAOS_CUT;
  const char *only = getenv("CHAOS_FAULTS");
  if (only && *only) {
    int kept = 0;
    for (int k = 0; k < nkinds; k++) {
      char list[256];
      snprintf(list, sizeof(list), ",%s,", only);
      char name[32];
      snprintf(name, sizeof(name), ",%s,", chaos_faults[kinds[k]]);
      if (strstr(list, name)) kinds[kept++] = kinds[k];
    }
    if (!kept) {
      fprintf(stderr, "chaos_rank: CHAOS_FAULTS=%s: none of these faults applies here\n", only);
      return 2;
    }
    nkinds = kept;
  }
  const char *collide = getenv("CHAOS_COLLIDE");
  unsigned spread_us = collide && !strcmp(collide, "1") ? 2000 : 20000;
  struct chaos_fault f = {.kind = kinds[chaos_next(&rng) % (uint64_t)nkinds],
                          .op = 3 + (int)(chaos_next(&rng) % 38),
                          .delay_us = (unsigned)(chaos_next(&rng) % spread_us)};
  int victim = (int)(chaos_next(&rng) % (uint64_t)p);
  f.rank = victim;
  size_t cap = 4096 * 8 * (size_t)p + 64;
  char *buf = calloc(cap, 1), *out = calloc(cap, 1);
  if (!buf || !out) return 1;
  for (long i = 0; i < ops; i++) {
    if (r == victim && i == f.op && f.kind != CHAOS_SHMFULL) {
      pthread_t th;
      pthread_create(&th, NULL, chaos_inject, &f);
      pthread_detach(th);
    }
    collie_comm_t *c = chaos_next(&rng) % 4 == 0 ? sub : world, *fresh = NULL;
    collie_result_t rc = COLLIE_SUCCESS;
    if (f.kind == CHAOS_SHMFULL && i >= f.op) {
      /* A full /dev/shm: everyone splits anew, one group of all, which needs
       * a segment; the victim fills the tmpfs first (the split waits for it). */
      if (r == victim && i == f.op) chaos_fill_shm(&f);
      rc = collie_comm_split(world, 0, r, &fresh);
      c = fresh;
    }
    if (rc == COLLIE_SUCCESS) rc = chaos_op(c, &rng, buf, out);
    if (rc == COLLIE_SUCCESS && fresh) rc = collie_comm_destroy(fresh);
    if (rc != COLLIE_SUCCESS) {
      char name[32], text[4096];
      snprintf(name, sizeof(name), "rank%d", r);
      snprintf(text, sizeof(text), "%d %.6f %ld\n%s\n", (int)rc, chaos_now(), i,
               collie_last_error());
      chaos_write(name, text);
      /* As a program that reports its error and exits: what is left is the
       * library's doing. The pause is the report's (a traceback, a log). */
      usleep(300000);
      _exit(0);
    }
  }
  char name[32];
  snprintf(name, sizeof(name), "rank%d", r);
  chaos_write(name, "done\n");
  collie_comm_destroy(sub);
  collie_comm_destroy(world);
  free(buf);
  free(out);
  return 0;
}
