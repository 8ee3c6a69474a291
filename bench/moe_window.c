/*
 * moe_window.c - MoE-style irregular token exchange (issue 22 item 3): an
 * alltoallv built on one-sided windows against collie_alltoallv, both fed
 * the same skewed token counts each step. Run it under collierun:
 *
 *   collierun -n 4 build/bench/moe_window [TOKEN_BYTES [TOKENS [STEPS]]]
 *   COLLIE_TRANSPORT=tcp collierun -n 4 build/bench/moe_window
 *
 * A step routes, from every rank to every rank ("expert"), a number of
 * tokens drawn around TOKENS (default 64) with a skew that moves between
 * steps (hot experts get up to 4x); a token is TOKEN_BYTES (default 4096:
 * a hidden size of 1024 in float32). Both variants first learn the step's
 * counts:
 *
 *   alltoallv  an alltoall of the counts, then collie_alltoallv;
 *   window     an allgather of every rank's counts row (so every rank knows
 *              where its block lands in each receiver's buffer), then a put
 *              of each block straight into its receiver's window and a
 *              signal; each rank waits for every rank's signal. On one host
 *              the puts are single copies into the receiver's memory by the
 *              sender's core, which the receiver does not take part in.
 *
 * Every step's result is checked against the pattern (a wrong byte: exit
 * 3). Printed: median ms per step of each, in interleaved rounds, and
 * their ratio (one run; this machine is shared).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "collie.h"

#define ROUNDS 5

static int
die(const char *what)
{
  fprintf(stderr, "moe_window: %s: %s\n", what, collie_last_error());
  exit(1);
}

/* Tokens rank s sends rank t at step k: around base, with a moving skew. */
static size_t
tokens(int s, int t, int k, size_t base)
{
  uint32_t h = (uint32_t)(s * 7919 + t * 104729 + k * 1299709) * 2654435761u;
  size_t hot = ((size_t)t + (size_t)k) % 4 == 0 ? 4 : 1;
  return base * hot / 2 + (h >> 8) % (base + 1);
}

static unsigned char
pattern(int s, int t, size_t i)
{
  return (unsigned char)(s * 37 + t * 11 + i * 3);
}

static int
cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
  size_t tb = argc > 1 ? (size_t)atol(argv[1]) : 4096, base = argc > 2 ? (size_t)atol(argv[2]) : 64;
  int steps = argc > 3 ? atoi(argv[3]) : 20;
  collie_comm_t *c;
  if (collie_comm_init(&c) != COLLIE_SUCCESS) die("init");
  int p = collie_comm_size(c), me = collie_comm_rank(c);
  size_t maxrecv = (size_t)p * (base * 2 + base + 1) * tb; /* tokens() < 2 base + base + 1 */
  size_t *sc = calloc((size_t)p, sizeof(size_t)), *sd = calloc((size_t)p, sizeof(size_t));
  size_t *rc = calloc((size_t)p, sizeof(size_t)), *rd = calloc((size_t)p, sizeof(size_t));
  uint64_t *row = calloc((size_t)p, 8), *all = calloc((size_t)p * p, 8);
  unsigned char *send = malloc(maxrecv), *recv = malloc(maxrecv);
  double *t_a = calloc((size_t)steps * ROUNDS, sizeof(double)),
         *t_w = calloc((size_t)steps * ROUNDS, sizeof(double));
  if (!sc || !sd || !rc || !rd || !row || !all || !send || !recv || !t_a || !t_w) die("memory");
  collie_window_t *w;
  if (collie_window_create(c, recv, maxrecv, &w) != COLLIE_SUCCESS) die("window_create");
  uint64_t signals = 0;
  int na = 0, nw = 0;
  for (int r = 0; r < ROUNDS; r++)
    for (int k = 0; k < steps; k++)
      for (int variant = 0; variant < 2; variant++) {
        /* This step's send side, in bytes (the calls take bytes as uint8). */
        size_t at = 0;
        for (int t = 0; t < p; t++) {
          sc[t] = tokens(me, t, k, base) * tb;
          sd[t] = at;
          for (size_t i = 0; i < sc[t]; i++) send[at + i] = pattern(me, t, i);
          at += sc[t];
        }
        memset(recv, 0, maxrecv);
        collie_barrier(c, NULL, NULL);
        double t0 = cli_now_s();
        if (variant == 0) {
          for (int t = 0; t < p; t++) row[t] = sc[t];
          if (collie_alltoall(c, row, all, 1, COLLIE_UINT64, NULL, NULL) != COLLIE_SUCCESS)
            die("alltoall");
          size_t off = 0;
          for (int s = 0; s < p; s++) {
            rc[s] = (size_t)all[s];
            rd[s] = off;
            off += rc[s];
          }
          if (collie_alltoallv(c, send, sc, sd, recv, rc, rd, COLLIE_UINT8, NULL, NULL) !=
              COLLIE_SUCCESS)
            die("alltoallv");
        } else {
          for (int t = 0; t < p; t++) row[t] = sc[t];
          if (collie_allgather(c, row, all, (size_t)p, COLLIE_UINT64, NULL, NULL) != COLLIE_SUCCESS)
            die("allgather");
          for (int t = 0; t < p; t++) { /* where my block lands at t: after lower ranks' */
            size_t off = 0;
            for (int s = 0; s < me; s++) off += (size_t)all[(size_t)s * p + t];
            if (collie_window_put(w, t, off, send + sd[t], sc[t]) != COLLIE_SUCCESS) die("put");
            if (collie_window_signal(w, t) != COLLIE_SUCCESS) die("signal");
          }
          signals++;
          for (int s = 0; s < p; s++)
            if (collie_window_wait_signal(w, s, signals, 0) != COLLIE_SUCCESS) die("wait_signal");
          if (collie_window_flush(w) != COLLIE_SUCCESS) die("flush");
          size_t off = 0;
          for (int s = 0; s < p; s++) {
            rc[s] = (size_t)all[(size_t)s * p + me];
            rd[s] = off;
            off += rc[s];
          }
        }
        double dt = cli_now_s() - t0;
        for (int s = 0; s < p; s++)
          for (size_t i = 0; i < rc[s]; i++)
            if (recv[rd[s] + i] != pattern(s, me, i)) {
              fprintf(stderr, "moe_window: %s: step %d: byte %zu from rank %d wrong\n",
                      variant ? "window" : "alltoallv", k, i, s);
              return 3;
            }
        /* Every rank's pace: the slowest rank's step. */
        double slow = 0;
        if (collie_allreduce(c, &dt, &slow, 1, COLLIE_FLOAT64, COLLIE_MAX, NULL, NULL) !=
            COLLIE_SUCCESS)
          die("allreduce");
        if (variant == 0)
          t_a[na++] = slow;
        else
          t_w[nw++] = slow;
      }
  qsort(t_a, (size_t)na, sizeof(double), cmp_double);
  qsort(t_w, (size_t)nw, sizeof(double), cmp_double);
  if (me == 0)
    printf("%d ranks, %zu-byte tokens, ~%zu a pair (skewed), %d steps x %d rounds: alltoallv "
           "%.3f ms, window %.3f ms (median), alltoallv/window %.2f\n",
           p, tb, base, steps, ROUNDS, t_a[na / 2] * 1e3, t_w[nw / 2] * 1e3,
           t_a[na / 2] / t_w[nw / 2]);
  collie_window_free(w);
  collie_comm_destroy(c);
  free(sc);
  free(sd);
  free(rc);
  free(rd);
  free(row);
  free(all);
  free(send);
  free(recv);
  free(t_a);
  free(t_w);
  return 0;
}
