/* allreduce_test.c - allreduce of every dtype x op x count, in place and out
 * of place, checked against the serial reference of ref.c. */
#include <stdlib.h>
#include <string.h>

#include "coll/ref.h"
#include "runner.h"

static int
allreduce_supported(collie_dtype_t d, collie_op_t op)
{
  return !(ref_is_float(d) && (op == COLLIE_BAND || op == COLLIE_BOR || op == COLLIE_BXOR));
}

/* One allreduce of n elements; fails the test on a wrong element. */
static void
allreduce_case(collie_comm_t *comm, collie_dtype_t d, collie_op_t op, size_t n, int inplace)
{
  int r = collie_comm_rank(comm), p = collie_comm_size(comm);
  size_t es = collie_dtype_size(d);
  char *send = malloc(n * es + 1), *recv = malloc(n * es + 1);
  char why[200];
  ASSERT(send && recv);
  ref_fill(send, n, d, op, r);
  memset(recv, 0x5a, n * es);
  if (inplace) {
    ASSERT_OK(collie_allreduce(comm, send, send, n, d, op, NULL, NULL));
    ASSERTF(ref_check(send, n, d, op, p, why, sizeof(why)) < 0, "in place, count %zu: %s", n, why);
  } else {
    ASSERT_OK(collie_allreduce(comm, send, recv, n, d, op, NULL, NULL));
    ASSERTF(ref_check(recv, n, d, op, p, why, sizeof(why)) < 0, "count %zu: %s", n, why);
    /* The send buffer is left alone. */
    char *again = malloc(n * es + 1);
    ASSERT(again);
    ref_fill(again, n, d, op, r);
    ASSERTF(memcmp(again, send, n * es) == 0, "allreduce modified sendbuf (count %zu)", n);
    free(again);
  }
  free(send);
  free(recv);
}

/* Every dtype x op at small and odd counts; large counts for a few pairs. */
TEST_IMPL(allreduce_matrix)
{
  static const size_t counts[] = {0, 1, 7, 4097};
  collie_comm_t *comm = test_comm();
  for (int d = 0; d < COLLIE_DTYPE_COUNT_; d++)
    for (int op = 0; op < COLLIE_OP_COUNT_; op++) {
      if (!allreduce_supported((collie_dtype_t)d, (collie_op_t)op)) continue;
      for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
        allreduce_case(comm, (collie_dtype_t)d, (collie_op_t)op, counts[c], (int)c & 1);
    }
  ASSERT_OK(collie_comm_destroy(comm));
}

/* 1M + 3 elements: pipelined chunks, uneven blocks, in and out of place. */
TEST_IMPL(allreduce_large)
{
  collie_comm_t *comm = test_comm();
  size_t n = (1u << 20) + 3;
  allreduce_case(comm, COLLIE_FLOAT32, COLLIE_SUM, n, 0);
  allreduce_case(comm, COLLIE_FLOAT32, COLLIE_SUM, n, 1);
  allreduce_case(comm, COLLIE_INT64, COLLIE_MAX, n, 0);
  allreduce_case(comm, COLLIE_BFLOAT16, COLLIE_AVG, n, 1);
  allreduce_case(comm, COLLIE_UINT8, COLLIE_BXOR, n, 0);
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Fewer elements than ranks, and back-to-back calls of changing sizes. */
TEST_IMPL(allreduce_sizes)
{
  collie_comm_t *comm = test_comm();
  for (size_t n = 0; n < 20; n++) allreduce_case(comm, COLLIE_INT32, COLLIE_SUM, n, (int)n & 1);
  for (size_t n = 65530; n < 65540; n++) allreduce_case(comm, COLLIE_FLOAT64, COLLIE_MIN, n, 0);
  ASSERT_OK(collie_comm_destroy(comm));
}
