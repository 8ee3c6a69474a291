/*
 * rhd_test.c - the recursive halving / doubling family (src/coll/rhd.c)
 * named explicitly on rank counts that exercise its fold: 6 and 7 ranks
 * (two and three folded pairs) and 16 (four rounds). The matrix skips an
 * algorithm that refuses a call; here a refusal is a failure, so a cost
 * function that stops applying cannot go unnoticed. Also checked: the
 * property the matrix cannot see, that a float allreduce leaves the same
 * bits on every rank (each pair combines the same two partial results).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll/ref.h"
#include "runner.h"

#define RHD_SENTINEL 0x3c

static char *
rhd_alloc(size_t bytes)
{
  char *p = malloc(bytes + 64);
  ASSERT(p);
  memset(p, RHD_SENTINEL, bytes + 64);
  return p;
}

static int
rhd_untouched(const char *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)p[i] != RHD_SENTINEL) return 0;
  return 1;
}

static void
rhd_allreduce_case(collie_comm_t *comm, int algo, collie_dtype_t d, collie_op_t op, size_t n,
                   int inplace)
{
  collie_opts_t o = {.algorithm = algo};
  int r = collie_comm_rank(comm), p = collie_comm_size(comm);
  size_t b = n * collie_dtype_size(d);
  char *s = rhd_alloc(b), *out = inplace ? s : rhd_alloc(b), *again = rhd_alloc(b), why[200];
  ref_fill(s, n, d, op, r);
  ASSERT_OK(collie_allreduce(comm, s, out, n, d, op, &o, NULL));
  ASSERTF(ref_check(out, n, d, op, p, why, sizeof(why)) < 0, "allreduce algo %d %s %s n %zu%s: %s",
          algo, collie_dtype_name(d), collie_op_name(op), n, inplace ? " in place" : "", why);
  ASSERTF(rhd_untouched(out + b, 64), "allreduce algo %d n %zu wrote past recvbuf", algo, n);
  if (!inplace) {
    ref_fill(again, n, d, op, r);
    ASSERTF(!memcmp(again, s, b), "allreduce algo %d n %zu modified sendbuf", algo, n);
    free(out);
  }
  free(again);
  free(s);
}

static void
rhd_reduce_scatter_case(collie_comm_t *comm, collie_dtype_t d, collie_op_t op, size_t n,
                        int inplace)
{
  collie_opts_t o = {.algorithm = COLLIE_ALGO_RECURSIVE_HALVING};
  int r = collie_comm_rank(comm), p = collie_comm_size(comm);
  size_t b = n * collie_dtype_size(d);
  char *s = rhd_alloc(b * (size_t)p), *out = inplace ? s + (size_t)r * b : rhd_alloc(b), why[200];
  ref_fill(s, n * (size_t)p, d, op, r);
  ASSERT_OK(collie_reduce_scatter(comm, s, out, n, d, op, &o, NULL));
  ASSERTF(ref_check_at(out, (size_t)r * n, n, d, op, p, why, sizeof(why)) < 0,
          "reduce_scatter %s %s n %zu%s: %s", collie_dtype_name(d), collie_op_name(op), n,
          inplace ? " in place" : "", why);
  if (!inplace) {
    ASSERTF(rhd_untouched(out + b, 64), "reduce_scatter n %zu wrote past recvbuf", n);
    char *again = rhd_alloc(b * (size_t)p);
    ref_fill(again, n * (size_t)p, d, op, r);
    ASSERTF(!memcmp(again, s, b * (size_t)p), "reduce_scatter n %zu modified sendbuf", n);
    free(again);
    free(out);
  }
  free(s);
}

static void
rhd_allgather_case(collie_comm_t *comm, collie_dtype_t d, size_t n, int inplace)
{
  collie_opts_t o = {.algorithm = COLLIE_ALGO_RECURSIVE_DOUBLING};
  int r = collie_comm_rank(comm), p = collie_comm_size(comm);
  size_t b = n * collie_dtype_size(d);
  char *out = rhd_alloc(b * (size_t)p), *s = inplace ? out + (size_t)r * b : rhd_alloc(b);
  char *want = rhd_alloc(b);
  ref_fill_pattern(s, n, d, r);
  ASSERT_OK(collie_allgather(comm, s, out, n, d, &o, NULL));
  for (int q = 0; q < p; q++) {
    ref_fill_pattern(want, n, d, q);
    ASSERTF(!memcmp(out + (size_t)q * b, want, b), "allgather %s n %zu%s: block of rank %d wrong",
            collie_dtype_name(d), n, inplace ? " in place" : "", q);
  }
  ASSERTF(rhd_untouched(out + (size_t)p * b, 64), "allgather n %zu wrote past recvbuf", n);
  if (!inplace) free(s);
  free(want);
  free(out);
}

/* Every algorithm of the family by name, at counts around p (empty blocks,
 * one element per rank, uneven blocks) and one spanning several chunks. */
TEST_IMPL(rhd_forced)
{
  static const struct {
    collie_dtype_t d;
    collie_op_t op;
  } pairs[] = {{COLLIE_FLOAT32, COLLIE_SUM}, {COLLIE_BFLOAT16, COLLIE_AVG},
               {COLLIE_INT32, COLLIE_AVG},   {COLLIE_FLOAT16, COLLIE_MAX},
               {COLLIE_UINT8, COLLIE_BXOR},  {COLLIE_INT64, COLLIE_PROD}};
  static const int allreduce_algos[] = {COLLIE_ALGO_RECURSIVE_DOUBLING, COLLIE_ALGO_RABENSEIFNER};
  collie_comm_t *comm = test_comm();
  size_t p = (size_t)collie_comm_size(comm);
  size_t counts[] = {0, 1, p - 1, p + 1, 3 * p + 2};
  for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
    for (size_t j = 0; j < sizeof(counts) / sizeof(counts[0]); j++) {
      int inplace = (int)((i + j) & 1);
      for (size_t a = 0; a < 2; a++)
        rhd_allreduce_case(comm, allreduce_algos[a], pairs[i].d, pairs[i].op, counts[j], inplace);
      rhd_reduce_scatter_case(comm, pairs[i].d, pairs[i].op, counts[j], inplace);
      rhd_allgather_case(comm, pairs[i].d, counts[j], !inplace);
    }
  /* About 800 KB of float32 (and half of it in bf16): several 256 KiB chunks per transfer. */
  size_t big = 200003, per_rank = big / p + 1;
  for (int inplace = 0; inplace <= 1; inplace++) {
    for (size_t a = 0; a < 2; a++) {
      rhd_allreduce_case(comm, allreduce_algos[a], COLLIE_FLOAT32, COLLIE_SUM, big, inplace);
      rhd_allreduce_case(comm, allreduce_algos[a], COLLIE_BFLOAT16, COLLIE_AVG, big, !inplace);
    }
    rhd_reduce_scatter_case(comm, COLLIE_FLOAT32, COLLIE_SUM, per_rank * 4, inplace);
    rhd_reduce_scatter_case(comm, COLLIE_BFLOAT16, COLLIE_AVG, per_rank * 4, !inplace);
    rhd_allgather_case(comm, COLLIE_FLOAT32, per_rank * 4, inplace);
  }
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Rank r's float input at index i: values of mixed magnitude, so that the
 * order of additions changes the rounded result. */
static float
rhd_float_input(int r, size_t i)
{
  unsigned st = (unsigned)(r * 7919 + 17) ^ (unsigned)(i * 2654435761u);
  unsigned v = test_rand(&st);
  return (float)((double)(v % 2000001) / 1000.0 - 1000.0) * (v & 64 ? 1e-3f : 1e3f);
}

/* A float32 sum of rounding-sensitive values ends with identical bytes on every
 * rank, within rounding of the exact sum, for both allreduces of the family. */
TEST_IMPL(rhd_allreduce_same_bits)
{
  static const int algos[] = {COLLIE_ALGO_RECURSIVE_DOUBLING, COLLIE_ALGO_RABENSEIFNER};
  static const size_t counts[] = {3, 1001, 100003};
  collie_comm_t *comm = test_comm();
  int r = collie_comm_rank(comm), p = collie_comm_size(comm);
  for (size_t a = 0; a < 2; a++)
    for (size_t j = 0; j < sizeof(counts) / sizeof(counts[0]); j++) {
      size_t n = counts[j];
      collie_opts_t o = {.algorithm = algos[a]};
      float *x = malloc(n * sizeof(float)), *all = malloc(n * sizeof(float) * (size_t)p);
      ASSERT(x && all);
      for (size_t i = 0; i < n; i++) x[i] = rhd_float_input(r, i);
      ASSERT_OK(collie_allreduce(comm, x, x, n, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL));
      ASSERT_OK(collie_allgather(comm, x, all, n, COLLIE_FLOAT32, NULL, NULL));
      for (int q = 0; q < p; q++)
        ASSERTF(!memcmp(all + (size_t)q * n, x, n * sizeof(float)),
                "algo %d n %zu: rank %d's result differs from rank %d's", algos[a], n, q, r);
      for (size_t i = 0; i < n; i++) {
        double exact = 0, mag = 0;
        for (int q = 0; q < p; q++) {
          exact += rhd_float_input(q, i);
          mag += fabs(rhd_float_input(q, i));
        }
        ASSERTF(fabs(x[i] - exact) <= mag * 1e-6 + 1e-30, "algo %d n %zu [%zu]: %g, exact %g",
                algos[a], n, i, (double)x[i], exact);
      }
      free(x);
      free(all);
    }
  ASSERT_OK(collie_comm_destroy(comm));
}
