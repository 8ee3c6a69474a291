/*
 * persistent_test.c - planned collectives (collie_*_init, collie_start): a
 * plan started many times, with new inputs each time, gives what the plain
 * call gives; plans interleave with plain calls in one order on every rank;
 * an async start completes; a plan's errors are the plain call's, made at
 * init with no plan left behind; and the options (telemetry label) are the
 * plan's own copy.
 */
#include <stdlib.h>
#include <string.h>

#include "runner.h"

TEST_IMPL(persistent_collectives)
{
  collie_comm_t *comm = test_comm();
  int p = collie_comm_size(comm), r = collie_comm_rank(comm);
  enum { N = 1000 };
  float in[N], out[N], all[N * 8], mine[N];
  char label[16] = "layer7";
  collie_opts_t o = {.label = label};
  collie_plan_t *ar = NULL, *ag = NULL, *rs = NULL, *bc = NULL, *a2a = NULL;
  ASSERT_OK(collie_allreduce_init(comm, in, out, N, COLLIE_FLOAT32, COLLIE_SUM, &o, &ar));
  strcpy(label, "changed"); /* the plan keeps its own copy */
  ASSERT_OK(collie_allgather_init(comm, mine, all, N / 8, COLLIE_FLOAT32, NULL, &ag));
  ASSERT_OK(
      collie_reduce_scatter_init(comm, all, mine, N / 8, COLLIE_FLOAT32, COLLIE_MAX, NULL, &rs));
  ASSERT_OK(collie_broadcast_init(comm, out, N, COLLIE_FLOAT32, p - 1, NULL, &bc));
  ASSERT_OK(collie_alltoall_init(comm, all, in, N / 8 / 1, COLLIE_FLOAT32, NULL, &a2a));
  ASSERT(p <= 8);
  for (int it = 0; it < 20; it++) {
    for (int i = 0; i < N; i++) in[i] = (float)(r + i % 7 + it);
    collie_work_t *w = NULL;
    ASSERT_OK(collie_start(ar, it % 2 ? &w : NULL)); /* async every other time */
    if (w) {
      ASSERT_OK(collie_wait(w, -1));
      collie_work_free(w);
    }
    for (int i = 0; i < N; i++)
      ASSERTF(out[i] == (float)(p * (i % 7 + it) + p * (p - 1) / 2),
              "allreduce start %d: [%d] = %g", it, i, out[i]);
    /* A plain call between two starts keeps the order. */
    float x = 1;
    ASSERT_OK(collie_allreduce(comm, &x, &x, 1, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
    ASSERT(x == (float)p);
    for (int i = 0; i < N / 8; i++) mine[i] = (float)(r * 1000 + i + it);
    ASSERT_OK(collie_start(ag, NULL));
    for (int q = 0; q < p; q++)
      for (int i = 0; i < N / 8; i++)
        ASSERTF(all[q * (N / 8) + i] == (float)(q * 1000 + i + it), "allgather start %d", it);
    ASSERT_OK(collie_start(rs, NULL)); /* block r of every rank's all: max over ranks */
    for (int i = 0; i < N / 8; i++)
      ASSERTF(mine[i] == (float)(r * 1000 + i + it), "reduce_scatter start %d: [%d] = %g", it, i,
              mine[i]);
    for (int i = 0; i < N; i++) out[i] = r == p - 1 ? (float)(i + it) : -1;
    ASSERT_OK(collie_start(bc, NULL));
    for (int i = 0; i < N; i++) ASSERTF(out[i] == (float)(i + it), "broadcast start %d", it);
    ASSERT_OK(collie_start(a2a, NULL)); /* block q of all (rank q's data) comes back as block q */
    for (int q = 0; q < p; q++)
      ASSERTF(in[q * (N / 8)] == (float)(r * 1000 + it), "alltoall start %d: block %d = %g", it, q,
              in[q * (N / 8)]);
  }
  /* A plan's errors are the plain call's, at init, with no plan. */
  collie_plan_t *bad = (collie_plan_t *)&bad;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "dtype",
            collie_allreduce_init(comm, in, out, N, (collie_dtype_t)99, COLLIE_SUM, NULL, &bad));
  ASSERT(bad == NULL);
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "root",
            collie_broadcast_init(comm, out, N, COLLIE_FLOAT32, p, NULL, &bad));
  ASSERT(bad == NULL);
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "plan is NULL",
            collie_allgather_init(comm, mine, all, 1, COLLIE_FLOAT32, NULL, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "plan is NULL", collie_start(NULL, NULL));
  collie_plan_free(ar);
  collie_plan_free(ag);
  collie_plan_free(rs);
  collie_plan_free(bc);
  collie_plan_free(a2a);
  collie_plan_free(NULL);
  ASSERT_OK(collie_comm_destroy(comm));
}
