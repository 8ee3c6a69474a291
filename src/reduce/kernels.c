/*
 * kernels.c - the element-wise reduction kernels: one function per (dtype, op),
 * generated from two lists so that no pair is written by hand.
 *
 * REDUCE_DTYPE_LIST names each dtype's storage type, the type it is combined
 * in, and its "kind" (integer, float, fp16, bf16); REDUCE_OP_LIST gives each
 * op's expression. REDUCE_DEFINE crosses them into static kernels, and the
 * same crossing fills reduce_table. Pairs that make no sense (bitwise ops on
 * floating kinds) are never defined and stay NULL in the table.
 *
 * Why the loops look the way they do:
 * - Elements are loaded and stored with memcpy of a fixed size, which compiles
 *   to a plain (unaligned) load/store, so buffers need no alignment at all and
 *   UBSan's alignment check has nothing to say. The loop still vectorises.
 * - The two pointers are restrict-qualified, as the buffers never overlap.
 *   When the caller passes inout == in (allowed by reduce.h), a second,
 *   single-pointer loop runs instead, so restrict is never violated. (gcc
 *   still adds one overlap test per call, since the accesses go through
 *   memcpy; that costs a compare, not a scalar loop.)
 * - Integer SUM and PROD are done in an unsigned type (signed overflow is
 *   undefined; UBSan runs in CI) and narrowed back, which wraps modulo 2^bits.
 * - fp16/bf16 are widened to fp32, combined, and rounded back to nearest even,
 *   once per combine, using the inline conversions of kernels_int.h.
 * - On x86-64 the kernels are built twice (AVX2 and baseline) with
 *   target_clones and picked by the dynamic loader once, at load time, so a
 *   call through the table costs nothing extra. AVX-512 dispatch, and F16C
 *   conversions for fp16, are left for the runtime-dispatch work.
 * - NaN tests (x != x) and the rounding tricks need IEEE semantics, hence the
 *   refusal to build under -ffast-math.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "reduce/reduce.h"
#include "reduce/kernels_int.h"

#ifdef __FAST_MATH__
#error                                                                                             \
    "src/reduce needs IEEE float semantics (NaN propagation, round to nearest even): no -ffast-math"
#endif

/* XX(NAME, storage type S, compute type T, arithmetic type U, division type D,
 * kind K). U is what SUM/PROD run in (unsigned for integers, so they wrap); D
 * is what AVG's final division runs in (signed for signed integers, so it
 * truncates toward zero). Integer U and D are at least as wide as int, so the
 * usual promotions never turn an unsigned operation back into a signed one. */
#define REDUCE_DTYPE_LIST(XX)                                                                      \
  XX(INT8, int8_t, int8_t, unsigned, int, INT)                                                     \
  XX(UINT8, uint8_t, uint8_t, unsigned, unsigned, INT)                                             \
  XX(INT32, int32_t, int32_t, uint32_t, int32_t, INT)                                              \
  XX(UINT32, uint32_t, uint32_t, uint32_t, uint32_t, INT)                                          \
  XX(INT64, int64_t, int64_t, uint64_t, int64_t, INT)                                              \
  XX(UINT64, uint64_t, uint64_t, uint64_t, uint64_t, INT)                                          \
  XX(FLOAT16, uint16_t, float, float, float, HALF)                                                 \
  XX(BFLOAT16, uint16_t, float, float, float, BF16)                                                \
  XX(FLOAT32, float, float, float, float, FLT)                                                     \
  XX(FLOAT64, double, double, double, double, FLT)

/* XX(OP, integer-only, expression macro, ...). Each expression macro takes
 * (K, T, U, x, y) and yields x op y as a T. The trailing arguments are passed
 * through to XX, which is how a dtype's columns reach every op (a list macro
 * cannot expand inside itself, so the crossing is done by forwarding). */
#define REDUCE_OP_LIST(XX, ...)                                                                    \
  XX(SUM, 0, REDUCE_EXPR_SUM, __VA_ARGS__)                                                         \
  XX(PROD, 0, REDUCE_EXPR_PROD, __VA_ARGS__)                                                       \
  XX(MIN, 0, REDUCE_EXPR_MIN, __VA_ARGS__)                                                         \
  XX(MAX, 0, REDUCE_EXPR_MAX, __VA_ARGS__)                                                         \
  XX(AVG, 0, REDUCE_EXPR_SUM, __VA_ARGS__)                                                         \
  XX(BAND, 1, REDUCE_EXPR_BAND, __VA_ARGS__)                                                       \
  XX(BOR, 1, REDUCE_EXPR_BOR, __VA_ARGS__)                                                         \
  XX(BXOR, 1, REDUCE_EXPR_BXOR, __VA_ARGS__)

#define REDUCE_EXPR_SUM(K, T, U, x, y) ((T)((U)(x) + (U)(y)))
#define REDUCE_EXPR_PROD(K, T, U, x, y) ((T)((U)(x) * (U)(y)))
/* MIN/MAX take y when it wins or is NaN; otherwise x, which is then either
 * the winner or itself NaN. So a NaN on either side gives NaN. */
#define REDUCE_EXPR_MIN(K, T, U, x, y) ((y) < (x) || REDUCE_ISNAN_##K(y) ? (y) : (x))
#define REDUCE_EXPR_MAX(K, T, U, x, y) ((y) > (x) || REDUCE_ISNAN_##K(y) ? (y) : (x))
#define REDUCE_EXPR_BAND(K, T, U, x, y) ((T)((x) & (y)))
#define REDUCE_EXPR_BOR(K, T, U, x, y) ((T)((x) | (y)))
#define REDUCE_EXPR_BXOR(K, T, U, x, y) ((T)((x) ^ (y)))

#define REDUCE_ISNAN_INT(v) 0
#define REDUCE_ISNAN_FLT(v) ((v) != (v))
#define REDUCE_ISNAN_HALF(v) ((v) != (v))
#define REDUCE_ISNAN_BF16(v) ((v) != (v))

/* Storage <-> compute conversions per kind. */
#define REDUCE_WIDEN_INT(s) (s)
#define REDUCE_WIDEN_FLT(s) (s)
#define REDUCE_WIDEN_HALF(s) reduce_h2f(s)
#define REDUCE_WIDEN_BF16(s) reduce_bf2f(s)
#define REDUCE_NARROW_INT(v) (v)
#define REDUCE_NARROW_FLT(v) (v)
#define REDUCE_NARROW_HALF(v) reduce_f2h(v)
#define REDUCE_NARROW_BF16(v) reduce_f2bf(v)

/* Build every kernel for AVX2 and for the baseline on x86-64 with glibc, and
 * let the loader pick (an ifunc, which musl lacks; gcc >= 6 and clang >= 14
 * know target_clones). Not under ThreadSanitizer: the ifunc resolvers run
 * while the executable is being relocated, before the TSan runtime is up,
 * and crash there. Elsewhere, or with -DCOLLIE_REDUCE_NO_CLONES, one portable
 * build. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define REDUCE_NO_CLONES_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define REDUCE_NO_CLONES_TSAN 1
#endif
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute) &&                       \
    !defined(COLLIE_REDUCE_NO_CLONES) && !defined(REDUCE_NO_CLONES_TSAN)
#if __has_attribute(target_clones)
#define REDUCE_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef REDUCE_CLONES
#define REDUCE_CLONES
#endif

/* Element i of a byte pointer, as S. */
#define REDUCE_LOAD(S, p, i, out) memcpy(&(out), (p) + (i) * sizeof(S), sizeof(S))
#define REDUCE_STORE(S, p, i, val)                                                                 \
  do {                                                                                             \
    S reduce_st_ = (val);                                                                          \
    memcpy((p) + (i) * sizeof(S), &reduce_st_, sizeof(S));                                         \
  } while (0)

/* dst[i] = dst[i] op src[i] for i < n, with dst and src byte pointers. */
#define REDUCE_LOOP(S, T, U, K, EXPR, dst, src)                                                    \
  for (size_t i = 0; i < n; i++) {                                                                 \
    S sx, sy;                                                                                      \
    REDUCE_LOAD(S, dst, i, sx);                                                                    \
    REDUCE_LOAD(S, src, i, sy);                                                                    \
    T x = REDUCE_WIDEN_##K(sx), y = REDUCE_WIDEN_##K(sy);                                          \
    REDUCE_STORE(S, dst, i, REDUCE_NARROW_##K(EXPR(K, T, U, x, y)));                               \
  }

/* One kernel. */
#define REDUCE_DEFINE(NAME, S, T, U, K, OP, EXPR)                                                  \
  static REDUCE_CLONES void reduce_##NAME##_##OP(void *inout, const void *in, size_t n)            \
  {                                                                                                \
    if (inout == in) {                                                                             \
      unsigned char *c = inout;                                                                    \
      REDUCE_LOOP(S, T, U, K, EXPR, c, c)                                                          \
    } else {                                                                                       \
      unsigned char *restrict c = inout;                                                           \
      const unsigned char *restrict a = in;                                                        \
      REDUCE_LOOP(S, T, U, K, EXPR, c, a)                                                          \
    }                                                                                              \
  }

/* REDUCE_WHEN_<integer-only>_<kind>(text): text, unless the op is integer-only
 * and the kind is not an integer. */
#define REDUCE_WHEN_0_INT(...) __VA_ARGS__
#define REDUCE_WHEN_0_FLT(...) __VA_ARGS__
#define REDUCE_WHEN_0_HALF(...) __VA_ARGS__
#define REDUCE_WHEN_0_BF16(...) __VA_ARGS__
#define REDUCE_WHEN_1_INT(...) __VA_ARGS__
#define REDUCE_WHEN_1_FLT(...)
#define REDUCE_WHEN_1_HALF(...)
#define REDUCE_WHEN_1_BF16(...)

/* The kernels: every dtype crossed with every op it supports. */
#define REDUCE_DEFINE_OP(OP, I, EXPR, NAME, S, T, U, K)                                            \
  REDUCE_WHEN_##I##_##K(REDUCE_DEFINE(NAME, S, T, U, K, OP, EXPR))
#define REDUCE_DEFINE_DTYPE(NAME, S, T, U, D, K) REDUCE_OP_LIST(REDUCE_DEFINE_OP, NAME, S, T, U, K)
REDUCE_DTYPE_LIST(REDUCE_DEFINE_DTYPE)

/* The table, from the same crossing; pairs not defined above stay NULL. */
#define REDUCE_ENTRY_OP(OP, I, EXPR, NAME, K)                                                      \
  REDUCE_WHEN_##I##_##K([COLLIE_##NAME][COLLIE_##OP] = reduce_##NAME##_##OP, )
#define REDUCE_ENTRY_DTYPE(NAME, S, T, U, D, K) REDUCE_OP_LIST(REDUCE_ENTRY_OP, NAME, K)
static const collie__reduce_fn reduce_table[COLLIE_DTYPE_COUNT_][COLLIE_OP_COUNT_] = {
    REDUCE_DTYPE_LIST(REDUCE_ENTRY_DTYPE)};

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

collie__reduce_fn
collie__reduce_kernel(collie_dtype_t dtype, collie_op_t op)
{
  /* As unsigned, so that negative values are out of range too. */
  if ((unsigned)dtype >= (unsigned)COLLIE_DTYPE_COUNT_ ||
      (unsigned)op >= (unsigned)COLLIE_OP_COUNT_)
    return NULL;
  return reduce_table[dtype][op];
}

/* AVG's final division, one function per dtype: x = x / p computed in D. */
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
