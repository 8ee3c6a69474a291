/*
 * kernels_gen.h - the kernel template: expands the (dtype, op) lists into one
 * static kernel per pair and one table holding them, for one instruction set.
 *
 * It is included once by each per-ISA file (kernels.c: portable;
 * kernels_avx2.c; kernels_avx512.c), which first defines:
 *   REDUCE_GEN_ISA     the name suffix (portable, avx2, avx512); the table is
 *                      collie__reduce_table_<ISA>, declared in kernels_int.h;
 *   REDUCE_GEN_TARGET  attributes put on every kernel: empty, or a
 *                      __attribute__((target("..."))) naming the ISA, so the
 *                      compiler vectorises the same C for that ISA;
 *   REDUCE_GEN_F16C    0, 8 or 16: the F16C vector width for fp16 (0: the
 *                      portable bit-trick conversions of kernels_int.h).
 * One template compiled three times, rather than three hand-written sets,
 * means every ISA computes exactly what the lists say; isa.c picks a table
 * once, at first use.
 *
 * REDUCE_DTYPE_LIST names each dtype's storage type, the type it is combined
 * in, and its "kind" (integer, float, fp16, bf16); REDUCE_OP_LIST gives each
 * op's expression. Crossing them defines the kernels, and the same crossing
 * fills the table. Pairs that make no sense (bitwise ops on floating kinds)
 * are never defined and stay NULL in the table.
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
 *   once per combine. bf16 uses the integer-shift conversions of
 *   kernels_int.h, which vectorise in the fused loop. fp16 with F16C goes one
 *   vector at a time instead: widen a vector of each input with vcvtph2ps,
 *   combine the lanes with the same op expression as every other float
 *   kernel (the compiler turns the lane loop into one vector op), and narrow
 *   with vcvtps2ph (immediate round-to-nearest-even, whatever MXCSR says).
 *   Both conversions are exact or correctly rounded, and F16C honours neither
 *   DAZ nor FTZ for halves, so the result is the portable kernel's bit for
 *   bit (NaN payloads aside, which reduce.h leaves open).
 */
#ifdef REDUCE_GEN_INCLUDED
#error "kernels_gen.h defines one table per translation unit: include it once"
#endif
#define REDUCE_GEN_INCLUDED 1

#if !defined(REDUCE_GEN_ISA) || !defined(REDUCE_GEN_TARGET) || !defined(REDUCE_GEN_F16C)
#error "define REDUCE_GEN_ISA, REDUCE_GEN_TARGET and REDUCE_GEN_F16C before kernels_gen.h"
#endif

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
 * the winner or itself NaN. So a NaN on either side gives NaN. The | (not
 * ||) keeps the condition branch-free, one mask per lane. */
#define REDUCE_EXPR_MIN(K, T, U, x, y) ((((y) < (x)) | REDUCE_ISNAN_##K(y)) ? (y) : (x))
#define REDUCE_EXPR_MAX(K, T, U, x, y) ((((y) > (x)) | REDUCE_ISNAN_##K(y)) ? (y) : (x))
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

/* Element i of a byte pointer, as S. */
#define REDUCE_LOAD(S, p, i, out) memcpy(&(out), (p) + (i) * sizeof(S), sizeof(S))
#define REDUCE_STORE(S, p, i, val)                                                                 \
  do {                                                                                             \
    S reduce_st_ = (val);                                                                          \
    memcpy((p) + (i) * sizeof(S), &reduce_st_, sizeof(S));                                         \
  } while (0)

/* reduce_<ISA>_<NAME>_<OP>: distinct names per ISA, so that profiles and
 * disassembly say which table a kernel came from. */
#define REDUCE_FN(NAME, OP) REDUCE_FN_(REDUCE_GEN_ISA, NAME, OP)
#define REDUCE_FN_(I, NAME, OP) REDUCE_FN__(I, NAME, OP)
#define REDUCE_FN__(I, NAME, OP) reduce_##I##_##NAME##_##OP
#define REDUCE_TABLE REDUCE_TABLE_(REDUCE_GEN_ISA)
#define REDUCE_TABLE_(I) REDUCE_TABLE__(I)
#define REDUCE_TABLE__(I) collie__reduce_table_##I

/* dst[i] = dst[i] op src[i] for i < n, with dst and src byte pointers. */
#define REDUCE_LOOP(S, T, U, K, EXPR, dst, src)                                                    \
  for (size_t i = 0; i < n; i++) {                                                                 \
    S sx, sy;                                                                                      \
    REDUCE_LOAD(S, dst, i, sx);                                                                    \
    REDUCE_LOAD(S, src, i, sy);                                                                    \
    T x = REDUCE_WIDEN_##K(sx), y = REDUCE_WIDEN_##K(sy);                                          \
    REDUCE_STORE(S, dst, i, REDUCE_NARROW_##K(EXPR(K, T, U, x, y)));                               \
  }

/* A fused kernel: load, widen, combine, narrow, store, one element at a time
 * in the source (the vectoriser does the rest). */
#define REDUCE_KERNEL_FUSED(NAME, S, T, U, K, OP, EXPR)                                            \
  static REDUCE_GEN_TARGET void REDUCE_FN(NAME, OP)(void *inout, const void *in, size_t n)         \
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

#if REDUCE_GEN_F16C
#include <immintrin.h>

/* One vector of REDUCE_GEN_F16C halves at p <-> fp32 at f; unaligned. */
#if REDUCE_GEN_F16C == 8
#define REDUCE_F16C_WIDEN_VEC(f, p)                                                                \
  _mm256_storeu_ps((f), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p))))
#define REDUCE_F16C_NARROW_VEC(p, f)                                                               \
  _mm_storeu_si128((__m128i *)(void *)(p),                                                         \
                   _mm256_cvtps_ph(_mm256_loadu_ps(f), _MM_FROUND_TO_NEAREST_INT))
#elif REDUCE_GEN_F16C == 16
#define REDUCE_F16C_WIDEN_VEC(f, p)                                                                \
  _mm512_storeu_ps((f), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p))))
#define REDUCE_F16C_NARROW_VEC(p, f)                                                               \
  _mm256_storeu_si256((__m256i *)(void *)(p),                                                      \
                      _mm512_cvtps_ph(_mm512_loadu_ps(f), _MM_FROUND_TO_NEAREST_INT))
#else
#error "REDUCE_GEN_F16C must be 0, 8 or 16"
#endif

/* f[i] = widen(p[i]) for i < m <= REDUCE_GEN_F16C. A short tail goes through
 * a zero-padded vector, so every element takes the same (F16C) path. */
static inline REDUCE_GEN_TARGET void
reduce_f16c_widen(float *restrict f, const unsigned char *restrict p, size_t m)
{
  if (m == REDUCE_GEN_F16C) {
    REDUCE_F16C_WIDEN_VEC(f, p);
  } else {
    uint16_t h[REDUCE_GEN_F16C] = {0};
    memcpy(h, p, 2 * m);
    REDUCE_F16C_WIDEN_VEC(f, h);
  }
}

/* p[i] = narrow(f[i]) for i < m <= REDUCE_GEN_F16C, to nearest even. */
static inline REDUCE_GEN_TARGET void
reduce_f16c_narrow(unsigned char *restrict p, const float *restrict f, size_t m)
{
  if (m == REDUCE_GEN_F16C) {
    REDUCE_F16C_NARROW_VEC(p, f);
  } else {
    uint16_t h[REDUCE_GEN_F16C];
    REDUCE_F16C_NARROW_VEC(h, f);
    memcpy(p, h, 2 * m);
  }
}

/* An fp16 kernel, one vector of halves at a time: widen both inputs, combine
 * the lanes with the float kernels' expression (the lane loop becomes one
 * vector op), narrow back. Widening more at once, into a scratch chunk of 2
 * to 128 vectors, was slower on a Sapphire Rapids core (in L1 by 1.2 to 1.6x,
 * on 64 MiB arrays by 1.2x; bench/reduce_bench): with one vector the scratch
 * stays in registers and the loads of the next vector overlap this one's
 * arithmetic. Each vector's inputs are read before its output is written, so
 * inout == in needs no special case. (The lane loop runs to m, not to the
 * constant width: gcc unrolls a constant-trip loop first and then fails to
 * vectorise MIN/MAX, which made them 8x slower.) */
#define REDUCE_KERNEL_HALF(NAME, S, T, U, K, OP, EXPR)                                             \
  static REDUCE_GEN_TARGET void REDUCE_FN(NAME, OP)(void *inout, const void *in, size_t n)         \
  {                                                                                                \
    unsigned char *c = inout;                                                                      \
    const unsigned char *a = in;                                                                   \
    for (size_t done = 0; done < n; done += REDUCE_GEN_F16C) {                                     \
      size_t m = n - done < REDUCE_GEN_F16C ? n - done : REDUCE_GEN_F16C;                          \
      _Alignas(64) float x[REDUCE_GEN_F16C];                                                       \
      _Alignas(64) float y[REDUCE_GEN_F16C];                                                       \
      reduce_f16c_widen(x, c + 2 * done, m);                                                       \
      reduce_f16c_widen(y, a + 2 * done, m);                                                       \
      for (size_t i = 0; i < m; i++) x[i] = EXPR(K, T, U, x[i], y[i]);                             \
      reduce_f16c_narrow(c + 2 * done, x, m);                                                      \
    }                                                                                              \
  }
#else
#define REDUCE_KERNEL_HALF REDUCE_KERNEL_FUSED
#endif

/* Which kernel shape each kind gets. */
#define REDUCE_KERNEL_INT REDUCE_KERNEL_FUSED
#define REDUCE_KERNEL_FLT REDUCE_KERNEL_FUSED
#define REDUCE_KERNEL_BF16 REDUCE_KERNEL_FUSED

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
  REDUCE_WHEN_##I##_##K(REDUCE_KERNEL_##K(NAME, S, T, U, K, OP, EXPR))
#define REDUCE_DEFINE_DTYPE(NAME, S, T, U, D, K) REDUCE_OP_LIST(REDUCE_DEFINE_OP, NAME, S, T, U, K)
REDUCE_DTYPE_LIST(REDUCE_DEFINE_DTYPE)

/* The table, from the same crossing; pairs not defined above stay NULL. */
#define REDUCE_ENTRY_OP(OP, I, EXPR, NAME, K)                                                      \
  REDUCE_WHEN_##I##_##K([COLLIE_##NAME][COLLIE_##OP] = REDUCE_FN(NAME, OP), )
#define REDUCE_ENTRY_DTYPE(NAME, S, T, U, D, K) REDUCE_OP_LIST(REDUCE_ENTRY_OP, NAME, K)
const collie__reduce_table_t REDUCE_TABLE = {REDUCE_DTYPE_LIST(REDUCE_ENTRY_DTYPE)};
