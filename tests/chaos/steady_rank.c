/*
 * steady_rank.c - one rank of a job that must finish with correct results
 * while strangers attack it (scripts/hostile.sh). Each of ITERS rounds
 * splits the world (by parity, so every round opens new transport
 * listeners and store keys), checks an allreduce on the split and one on
 * the world, and destroys the split. It writes its pid to $CHAOS_DIR/pid<rank>
 * first, so that the attacker can find its listening sockets, and rank 0
 * writes the store's address (COLLIE_STORE) to $CHAOS_DIR/store.
 *
 *   steady_rank ITERS          (exit 0 when every result was right)
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "collie.h"

/* Allreduce of (rank + 1) * (i + k) over c; every element must be the sum. */
static int
steady_check(collie_comm_t *c, int round, const char *what)
{
  enum { N = 1000 };
  static double in[N], out[N];
  int r = collie_comm_rank(c), p = collie_comm_size(c);
  for (int k = 0; k < N; k++) in[k] = (double)(r + 1) * (round + k);
  if (collie_allreduce(c, in, out, N, COLLIE_FLOAT64, COLLIE_SUM, NULL, NULL) != COLLIE_SUCCESS) {
    fprintf(stderr, "steady_rank: round %d: %s allreduce: %s\n", round, what, collie_last_error());
    return -1;
  }
  double ranks = (double)p * (p + 1) / 2;
  for (int k = 0; k < N; k++)
    if (out[k] != ranks * (round + k)) {
      fprintf(stderr, "steady_rank: round %d: %s allreduce: element %d is %g, expected %g\n", round,
              what, k, out[k], ranks * (round + k));
      return -1;
    }
  return 0;
}

int
main(int argc, char **argv)
{
  const char *dir = getenv("CHAOS_DIR");
  if (argc != 2 || !dir) {
    fprintf(stderr, "usage: CHAOS_DIR=dir steady_rank ITERS\n");
    return 2;
  }
  int iters = atoi(argv[1]);
  collie_comm_t *world = NULL;
  if (collie_comm_init(&world) != COLLIE_SUCCESS) {
    fprintf(stderr, "steady_rank: init: %s\n", collie_last_error());
    return 1;
  }
  int r = collie_comm_rank(world);
  char path[1024];
  snprintf(path, sizeof(path), "%s/pid%d", dir, r);
  FILE *f = fopen(path, "w");
  if (f) {
    fprintf(f, "%ld\n", (long)getpid());
    fclose(f);
  }
  const char *store = getenv("COLLIE_STORE");
  snprintf(path, sizeof(path), "%s/store", dir);
  if (r == 0 && store && (f = fopen(path, "w"))) {
    fprintf(f, "%s\n", store);
    fclose(f);
  }
  for (int i = 0; i < iters; i++) {
    collie_comm_t *sub = NULL;
    /* The last rank comes late to each split: the others' listeners stay
     * open meanwhile, as on a loaded machine, and the attacker finds them. */
    if (r == collie_comm_size(world) - 1) usleep(20000);
    if (collie_comm_split(world, r % 2, r, &sub) != COLLIE_SUCCESS) {
      fprintf(stderr, "steady_rank: round %d: split: %s\n", i, collie_last_error());
      return 1;
    }
    if (steady_check(sub, i, "split") || steady_check(world, i, "world")) return 1;
    if (collie_comm_destroy(sub) != COLLIE_SUCCESS) {
      fprintf(stderr, "steady_rank: round %d: destroy: %s\n", i, collie_last_error());
      return 1;
    }
  }
  collie_comm_destroy(world);
  printf("steady_rank %d: %d rounds right\n", r, iters);
  return 0;
}
