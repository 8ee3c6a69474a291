/*
 * pingpong.c - send/recv ping-pong between ranks 0 and 1: one-way latency
 * and bandwidth from 8 B to 4 MiB, the same-tag path every pair program
 * takes. Other ranks only wait. Run it under collierun:
 *
 *   collierun -n 2 build/bench/pingpong [max_bytes [seconds_per_size]]
 *
 * Rank 0 prints, per size, the median over 5 batches of the time per
 * one-way message (half a round trip) and the bandwidth that makes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "collie.h"

static int
cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Round trips of bytes between ranks 0 and 1; seconds per one-way message. */
static double
batch(collie_comm_t *c, char *buf, size_t bytes, int iters)
{
  int r = collie_comm_rank(c);
  double t0 = cli_now_s();
  for (int i = 0; i < iters; i++) {
    collie_result_t rc;
    if (r == 0) {
      rc = collie_send(c, buf, bytes, COLLIE_UINT8, 1, 1, NULL, NULL);
      if (rc == COLLIE_SUCCESS) rc = collie_recv(c, buf, bytes, COLLIE_UINT8, 1, 1, NULL, NULL);
    } else {
      rc = collie_recv(c, buf, bytes, COLLIE_UINT8, 0, 1, NULL, NULL);
      if (rc == COLLIE_SUCCESS) rc = collie_send(c, buf, bytes, COLLIE_UINT8, 0, 1, NULL, NULL);
    }
    if (rc != COLLIE_SUCCESS) {
      fprintf(stderr, "pingpong: %s\n", collie_last_error());
      exit(1);
    }
  }
  return (cli_now_s() - t0) / iters / 2;
}

int
main(int argc, char **argv)
{
  collie_comm_t *c;
  if (collie_comm_init(&c) != COLLIE_SUCCESS) {
    fprintf(stderr, "pingpong: %s\n", collie_last_error());
    return 1;
  }
  size_t max = argc > 1 ? (size_t)atoll(argv[1]) : (size_t)4 << 20;
  double secs = argc > 2 ? atof(argv[2]) : 0.2;
  if (max < 8 || secs <= 0) {
    fprintf(stderr, "usage: pingpong [max_bytes >= 8 [seconds_per_size > 0]]\n");
    return 2;
  }
  char *buf = malloc(max);
  if (!buf) return 1;
  memset(buf, 1, max);
  int r = collie_comm_rank(c);
  if (r == 0) printf("%12s %12s %12s\n", "bytes", "one-way us", "GB/s");
  for (size_t bytes = 8; bytes <= max; bytes *= 4) {
    if (r < 2 && collie_comm_size(c) >= 2) {
      /* Calibrate the batch to ~secs/5 on rank 0, and tell rank 1. */
      int iters = 10;
      double t = batch(c, buf, bytes, iters);
      long want = (long)(secs / 5 / (2 * t));
      if (want < 5) want = 5;
      if (want > 200000) want = 200000;
      long n = want;
      if (r == 0)
        collie_send(c, &n, 1, COLLIE_INT64, 1, 2, NULL, NULL);
      else
        collie_recv(c, &n, 1, COLLIE_INT64, 0, 2, NULL, NULL);
      double m[5];
      for (int k = 0; k < 5; k++) m[k] = batch(c, buf, bytes, (int)n);
      qsort(m, 5, sizeof(m[0]), cmp_double);
      if (r == 0) printf("%12zu %12.2f %12.3f\n", bytes, m[2] * 1e6, bytes / m[2] / 1e9);
      fflush(stdout);
    }
  }
  collie_barrier(c, NULL, NULL);
  free(buf);
  collie_comm_destroy(c);
  return 0;
}
