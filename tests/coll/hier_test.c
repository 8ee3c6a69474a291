/*
 * hier_test.c - the hierarchical algorithms (src/coll/hier.c) beyond the
 * matrix's reference checks: refused on one host, and every rank holding
 * the same bits after a floating-point allreduce (data-parallel replicas
 * must not drift apart), whichever variant the size picks, and an
 * allgatherv whose blocks lie end to end.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

/* On one host there is nothing to be hierarchical about: every collective
 * that has the algorithm refuses it when named, and the automatic choice
 * never takes it. */
TEST_IMPL(hier_refused_on_one_host)
{
  collie_comm_t *comm = test_comm();
  collie_opts_t o = {.algorithm = COLLIE_ALGO_HIERARCHICAL};
  float x[4] = {1, 2, 3, 4}, y[4 * 8];
  ASSERT(test_size() <= 8);
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "allreduce algorithm \"hierarchical\" cannot run this call",
            collie_allreduce(comm, x, y, 4, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "cannot run this call",
            collie_broadcast(comm, x, 4, COLLIE_FLOAT32, 0, &o, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "cannot run this call",
            collie_reduce(comm, x, y, 4, COLLIE_FLOAT32, COLLIE_SUM, 0, &o, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "cannot run this call",
            collie_allgather(comm, x, y, 4, COLLIE_FLOAT32, &o, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "cannot run this call", collie_barrier(comm, &o, NULL));
  /* The communicator stays usable, and the automatic choice runs. */
  ASSERT_OK(collie_allreduce(comm, x, y, 4, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  ASSERT(y[3] == 4.0f * (float)test_size());
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Floats whose sum depends on the order of the additions. */
static void
hier_fill(float *v, size_t n, int rank)
{
  uint32_t s = 0x9e3779b9u * (uint32_t)(rank + 1);
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    v[i] = (float)((s >> 8) & 0xffff) * 1e-3f - 30.0f + (float)(s & 0xff) * 1e-7f;
  }
}

TEST_IMPL(hier_allreduce_same_bits)
{
  static const size_t counts[] = {1, 5, 1000, 65537, 300001};
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  collie_opts_t hier = {.algorithm = COLLIE_ALGO_HIERARCHICAL},
                ring = {.algorithm = COLLIE_ALGO_RING};
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
    size_t n = counts[c];
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    float *flat = malloc(n * sizeof(float));
    uint32_t *sums = malloc((size_t)p * sizeof(uint32_t));
    ASSERT(in && out && flat && sums);
    for (int op = 0; op < 2; op++) {
      collie_op_t rop = op ? COLLIE_AVG : COLLIE_SUM;
      hier_fill(in, n, r);
      ASSERT_OK(collie_allreduce(comm, in, out, n, COLLIE_FLOAT32, rop, &hier, NULL));
      ASSERT_OK(collie_allreduce(comm, in, flat, n, COLLIE_FLOAT32, rop, &ring, NULL));
      /* Close to the flat ring's answer (another order of additions)... */
      for (size_t i = 0; i < n; i++)
        ASSERTF(fabsf(out[i] - flat[i]) <= 1e-4f * (fabsf(flat[i]) + 30.0f * (float)p),
                "count %zu %s: element %zu = %g, ring %g", n, op ? "avg" : "sum", i, out[i],
                flat[i]);
      /* ... and the very same bits on every rank: a checksum of the bits,
       * gathered, agrees everywhere. */
      uint32_t h = 2166136261u;
      const unsigned char *b = (const unsigned char *)out;
      for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ b[i]) * 16777619u;
      ASSERT_OK(collie_allgather(comm, &h, sums, 1, COLLIE_UINT32, &ring, NULL));
      for (int q = 0; q < p; q++)
        ASSERTF(sums[q] == sums[0], "count %zu %s: rank %d's result differs from rank 0's", n,
                op ? "avg" : "sum", q);
      /* In place gives the same bits as out of place. */
      hier_fill(flat, n, r);
      ASSERT_OK(collie_allreduce(comm, flat, flat, n, COLLIE_FLOAT32, rop, &hier, NULL));
      ASSERTF(!memcmp(flat, out, n * sizeof(float)), "count %zu %s: in place differs", n,
              op ? "avg" : "sum");
    }
    free(in);
    free(out);
    free(flat);
    free(sums);
  }
  ASSERT_OK(collie_comm_destroy(comm));
}

/* allgatherv whose blocks lie end to end in rank order (torch's uneven
 * all_gather): the hierarchical form broadcasts the output inside each host
 * as one run, where the matrix's gapped layout takes the packed path. Every
 * rank checks every element, and the word past the end stays untouched. */
TEST_IMPL(hier_allgatherv_end_to_end)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  collie_opts_t o = {.algorithm = COLLIE_ALGO_HIERARCHICAL};
  size_t *counts = malloc((size_t)p * sizeof(size_t)), *displs = malloc((size_t)p * sizeof(size_t));
  ASSERT(counts && displs);
  size_t total = 0;
  for (int q = 0; q < p; q++) {
    counts[q] = (size_t)(q * 37 % 5) * 1000 + (size_t)q; /* rank 0 sends nothing */
    displs[q] = total;
    total += counts[q];
  }
  int32_t *out = malloc((total + 1) * sizeof(int32_t)), *in = malloc((counts[r] + 1) * 4);
  ASSERT(out && in);
  for (size_t i = 0; i < counts[r]; i++) in[i] = r * 1000003 + (int32_t)i;
  for (int inplace = 0; inplace < 2; inplace++) {
    for (size_t i = 0; i <= total; i++) out[i] = -1;
    const int32_t *src = in;
    if (inplace) {
      memcpy(out + displs[r], in, counts[r] * sizeof(int32_t));
      src = out + displs[r];
    }
    ASSERT_OK(collie_allgatherv(comm, src, counts[r], out, counts, displs, COLLIE_INT32, &o, NULL));
    for (int q = 0; q < p; q++)
      for (size_t i = 0; i < counts[q]; i++)
        ASSERTF(out[displs[q] + i] == q * 1000003 + (int32_t)i, "inplace %d: rank %d elem %zu",
                inplace, q, i);
    ASSERT(out[total] == -1);
  }
  free(out);
  free(in);
  free(counts);
  free(displs);
  ASSERT_OK(collie_comm_destroy(comm));
}
