/*
 * collie-demo - the first thing to run: `collierun -n 4 collie-demo`.
 * Every rank joins the world, then runs a barrier, a broadcast from rank 0,
 * allreduces of a small and a large float32 buffer, and sends two messages
 * to its right-hand neighbour that the neighbour receives in the other order
 * (send/recv match by tag, as in MPI), checks each result
 * against what it must be, and prints it with the time it took. Rank 0
 * prints the summary; the exit status says whether every check passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collie.h"

static double
demo_now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

#define DEMO_CHECK(call)                                                                           \
  do {                                                                                             \
    collie_result_t rc_ = (call);                                                                  \
    if (rc_ != COLLIE_SUCCESS) {                                                                   \
      fprintf(stderr, "collie-demo: %s failed: %s: %s\n", #call, collie_result_string(rc_),        \
              collie_last_error());                                                                \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

int
main(void)
{
  collie_comm_t *comm;
  DEMO_CHECK(collie_comm_init(&comm));
  int rank = collie_comm_rank(comm), size = collie_comm_size(comm);
  int ok = 1;

  double t0 = demo_now_us();
  DEMO_CHECK(collie_barrier(comm, NULL, NULL));
  double t_barrier = demo_now_us() - t0;

  char msg[64] = "";
  if (rank == 0) snprintf(msg, sizeof(msg), "hello from rank 0 of %d", size);
  t0 = demo_now_us();
  DEMO_CHECK(collie_broadcast(comm, msg, sizeof(msg), COLLIE_UINT8, 0, NULL, NULL));
  double t_bcast = demo_now_us() - t0;
  char want[64];
  snprintf(want, sizeof(want), "hello from rank 0 of %d", size);
  ok &= strcmp(msg, want) == 0;

  /* Small allreduce: sum of ranks 0..size-1. */
  float x = (float)rank, sum = 0;
  t0 = demo_now_us();
  DEMO_CHECK(collie_allreduce(comm, &x, &sum, 1, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  double t_small = demo_now_us() - t0;
  ok &= sum == (float)(size * (size - 1) / 2);

  /* Large allreduce, in place: 16 MiB of float32, element i on rank r is r + i % 7. */
  size_t n = 4u << 20;
  float *big = malloc(n * sizeof(float));
  if (!big) return 1;
  for (size_t i = 0; i < n; i++) big[i] = (float)(rank + (int)(i % 7));
  DEMO_CHECK(collie_allreduce(comm, big, big, n, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  for (size_t i = 0; i < n; i++) big[i] = (float)(rank + (int)(i % 7));
  t0 = demo_now_us();
  DEMO_CHECK(collie_allreduce(comm, big, big, n, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  double t_big = demo_now_us() - t0;
  for (size_t i = 0; i < n; i++)
    if (big[i] != (float)(size * (size - 1) / 2 + size * (int)(i % 7))) {
      ok = 0;
      break;
    }
  free(big);

  /* Send/recv around the ring: tags 1 and 2 sent in that order (async),
   * received 2 first; each message says who sent it and with which tag. */
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  int32_t out[2] = {100 * rank + 1, 100 * rank + 2}, in[2] = {100 * left + 1, 100 * left + 2};
  collie_work_t *w[2];
  t0 = demo_now_us();
  if (size > 1) { /* one rank has no neighbour but itself */
    in[0] = in[1] = 0;
    for (int k = 0; k < 2; k++)
      DEMO_CHECK(collie_send(comm, &out[k], 1, COLLIE_INT32, right, k + 1, NULL, &w[k]));
    DEMO_CHECK(collie_recv(comm, &in[1], 1, COLLIE_INT32, left, 2, NULL, NULL));
    DEMO_CHECK(collie_recv(comm, &in[0], 1, COLLIE_INT32, left, 1, NULL, NULL));
    for (int k = 0; k < 2; k++) {
      DEMO_CHECK(collie_wait(w[k], -1));
      collie_work_free(w[k]);
    }
  }
  double t_p2p = demo_now_us() - t0;
  ok &= in[0] == 100 * left + 1 && in[1] == 100 * left + 2;

  /* Everyone's verdict, so rank 0 can report for the whole job. */
  int32_t bad = !ok, bad_total = 0;
  DEMO_CHECK(collie_allreduce(comm, &bad, &bad_total, 1, COLLIE_INT32, COLLIE_SUM, NULL, NULL));
  printf("rank %d/%d: barrier %.1f us, broadcast \"%s\" %.1f us, allreduce(1 float) = %g %.1f us, "
         "allreduce(16 MiB) %.2f ms (%.2f GB/s busbw), send/recv by tag %.1f us%s\n",
         rank, size, t_barrier, msg, t_bcast, sum, t_small, t_big / 1e3,
         size > 1 ? (double)n * 4 * 2 * (size - 1) / size / (t_big * 1e3) : 0.0, t_p2p,
         ok ? "" : "  WRONG RESULT");
  fflush(stdout);
  DEMO_CHECK(collie_barrier(comm, NULL, NULL));
  if (rank == 0)
    printf("collie-demo: %d ranks, %s\n", size,
           bad_total ? "SOME RESULTS WERE WRONG" : "all results correct");
  DEMO_CHECK(collie_comm_destroy(comm));
  return bad_total ? 1 : 0;
}
