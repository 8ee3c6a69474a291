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
 *   sockets  shutdown() of every socket it has (a cut network; tcp only)
 *
 * The fault fires 0-20 ms after the victim starts operation 3..40, and
 * every rank goes on calling collectives until one fails (at most OPS of
 * them), so the survivors always meet it. Just before the fault the victim
 * writes DIR/fault ("<kind> <monotonic s> <op index> <world rank>"). A rank
 * whose call fails writes DIR/rank<r> ("<rc> <monotonic s> <op index>" and
 * the message on the next line) and exits 0 without destroying anything:
 * what it leaves behind is the library's doing. A rank that runs every
 * operation writes "done" there.
 *
 *   chaos_rank SEED [OPS]      (DIR: $CHAOS_DIR; OPS default 1000000)
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
static const char *const chaos_faults[] = {"kill", "term", "stop", "sockets"};

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
  snprintf(line, sizeof(line), "%s %.6f %d %d\n", chaos_faults[f->kind], chaos_now(), f->op,
           f->rank);
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
  default:
    for (int fd = 0; fd < 1024; fd++) {
      struct stat st;
      if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) shutdown(fd, SHUT_RDWR);
    }
  }
  return NULL;
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
  if (collie_comm_init(&world) != COLLIE_SUCCESS) {
    fprintf(stderr, "chaos_rank: init: %s\n", collie_last_error());
    return 1;
  }
  int r = collie_comm_rank(world), p = collie_comm_size(world);
  if (collie_comm_split(world, r % 2, r, &sub) != COLLIE_SUCCESS) {
    fprintf(stderr, "chaos_rank: split: %s\n", collie_last_error());
    return 1;
  }
  /* The trial's fault, drawn alike everywhere; sockets only where there are any. */
  const char *tr = getenv("COLLIE_TRANSPORT");
  int nkinds = tr && !strcmp(tr, "tcp") ? 4 : 3;
  struct chaos_fault f = {.kind = (int)(chaos_next(&rng) % (uint64_t)nkinds),
                          .op = 3 + (int)(chaos_next(&rng) % 38),
                          .delay_us = (unsigned)(chaos_next(&rng) % 20000)};
  int victim = (int)(chaos_next(&rng) % (uint64_t)p);
  f.rank = victim;
  size_t cap = 4096 * 8 * (size_t)p + 64;
  char *buf = calloc(cap, 1), *out = calloc(cap, 1);
  if (!buf || !out) return 1;
  for (long i = 0; i < ops; i++) {
    if (r == victim && i == f.op) {
      pthread_t th;
      pthread_create(&th, NULL, chaos_inject, &f);
      pthread_detach(th);
    }
    collie_comm_t *c = chaos_next(&rng) % 4 == 0 ? sub : world;
    collie_result_t rc = chaos_op(c, &rng, buf, out);
    if (rc != COLLIE_SUCCESS) {
      char name[32], text[4096];
      snprintf(name, sizeof(name), "rank%d", r);
      snprintf(text, sizeof(text), "%d %.6f %ld\n%s\n", (int)rc, chaos_now(), i,
               collie_last_error());
      chaos_write(name, text);
      _exit(0); /* as a program that gives up: what is left is the library's doing */
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
