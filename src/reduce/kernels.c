/*
 * kernels.c - the portable kernel table, the checks that the kernel lists
 * match collie.h, and AVG's final division.
 *
 * The kernels themselves come from the template kernels_gen.h, compiled here
 * for the baseline ISA (SSE2 on x86-64, whatever the target offers
 * elsewhere); kernels_avx2.c and kernels_avx512.c compile the same template
 * for wider vectors, and isa.c chooses among the tables at first use.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "reduce/reduce.h"
#include "reduce/kernels_int.h"

#define REDUCE_GEN_ISA portable
#define REDUCE_GEN_TARGET
#define REDUCE_GEN_F16C 0
#include "reduce/kernels_gen.h"

/* The lists must cover collie.h's enums exactly, with the same sizes and the
 * same integer-only ops; these fail to compile if either side drifts. */
#define REDUCE_STORAGE_TYPEDEF(NAME, S, T, U, D, K) typedef S reduce_storage_##NAME;
REDUCE_DTYPE_LIST(REDUCE_STORAGE_TYPEDEF)
#define REDUCE_CHECK_DTYPE(name, size, isf, str)                                                   \
  _Static_assert(sizeof(reduce_storage_##name) == (size), "size of " str);
COLLIE_DTYPE_MAP(REDUCE_CHECK_DTYPE)
#define REDUCE_INTONLY_ENUM(OP, I, EXPR, unused) reduce_intonly_##OP = I,
enum { REDUCE_OP_LIST(REDUCE_INTONLY_ENUM, ~) };
#define REDUCE_CHECK_OP(name, str, intonly)                                                        \
  _Static_assert(reduce_intonly_##name == (intonly), "integer-only flag of " str);
COLLIE_OP_MAP(REDUCE_CHECK_OP)
#define REDUCE_COUNT(...) +1
_Static_assert(0 REDUCE_DTYPE_LIST(REDUCE_COUNT) == COLLIE_DTYPE_COUNT_, "dtype list length");
_Static_assert(0 REDUCE_OP_LIST(REDUCE_COUNT, ~) == COLLIE_OP_COUNT_, "op list length");

/* AVG's final division, one function per dtype: x = x / p computed in D. It
 * runs once per reduction, over the result only, so the portable build is
 * enough. */
#define REDUCE_DEFINE_AVG(NAME, S, T, U, D, K)                                                     \
  static void reduce_avg_##NAME(unsigned char *buf, size_t n, int p)                               \
  {                                                                                                \
    D dp = (D)p;                                                                                   \
    for (size_t i = 0; i < n; i++) {                                                               \
      S s;                                                                                         \
      REDUCE_LOAD(S, buf, i, s);                                                                   \
      T x = REDUCE_WIDEN_##K(s);                                                                   \
      REDUCE_STORE(S, buf, i, REDUCE_NARROW_##K((T)((D)x / dp)));                                  \
    }                                                                                              \
  }
REDUCE_DTYPE_LIST(REDUCE_DEFINE_AVG)

void
collie__reduce_avg_finish(void *buf, size_t n, collie_dtype_t dtype, int p)
{
  /* p is a communicator size; dividing by 1 changes nothing, and p <= 0 has
   * no meaning, so both leave buf as it is. */
  if (p <= 1 || n == 0) return;
  switch (dtype) {
#define REDUCE_AVG_CASE(NAME, S, T, U, D, K)                                                       \
  case COLLIE_##NAME:                                                                              \
    reduce_avg_##NAME(buf, n, p);                                                                  \
    break;
    REDUCE_DTYPE_LIST(REDUCE_AVG_CASE)
  default:
    break;
  }
}
