/*
 * kernels_int.h - private to src/reduce: the per-ISA kernel tables that isa.c
 * chooses between, and the inline fp16 / bf16 <-> fp32 conversions.
 *
 * Tables: kernels_gen.h is compiled once per instruction set, each time
 * filling one collie__reduce_table_<isa> (kernels.c: portable, kernels_avx2.c,
 * kernels_avx512.c); isa.c reads the CPU once and hands out entries of the
 * best table it may run.
 *
 * The reduction kernels convert every element twice, so the conversions must
 * inline into the kernel loops (an out-of-line call per element would cost more
 * than the arithmetic). half.c wraps these in the collie__ functions that
 * reduce.h exports; kernels.c uses them directly.
 *
 * Every path is computed and the answer picked with reduce_sel's bit masks,
 * with no branch and no ?: other than a plain min (gcc turns a ?: between two
 * computed values back into a branch): that is what lets the kernel loops
 * vectorise. They rely only on IEEE single precision
 * arithmetic in the default rounding mode (round to nearest even).
 */
#ifndef COLLIE_REDUCE_KERNELS_INT_H
#define COLLIE_REDUCE_KERNELS_INT_H

#include <stdint.h>
#include <string.h>

#include "reduce/reduce.h"

/* One kernel per (dtype, op); NULL where the pair is not supported. */
typedef collie__reduce_fn collie__reduce_table_t[COLLIE_DTYPE_COUNT_][COLLIE_OP_COUNT_];

/* Built everywhere, for the baseline ISA (SSE2 on x86-64). */
extern const collie__reduce_table_t collie__reduce_table_portable;

/* The x86-64 tables need gcc's or clang's target attribute and <immintrin.h>
 * with per-function ISAs; -DCOLLIE_REDUCE_PORTABLE_ONLY leaves them out. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(COLLIE_REDUCE_PORTABLE_ONLY)
#define REDUCE_HAVE_X86 1
/* AVX2 + FMA + F16C (Haswell, Zen 1 and later). */
extern const collie__reduce_table_t collie__reduce_table_avx2;
/* The AVX2 set plus AVX-512 F, BW, VL, DQ (Skylake-SP, Zen 4 and later). */
extern const collie__reduce_table_t collie__reduce_table_avx512;
#endif

static inline uint32_t
reduce_f32_bits(float f)
{
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float
reduce_f32_from_bits(uint32_t u)
{
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* c ? a : b for c in {0, 1}, as masks. Signed lanes: every value compared
 * below is below 2^31, and SSE2 only has signed compares. */
static inline int32_t
reduce_sel(int32_t c, int32_t a, int32_t b)
{
  int32_t m = -c;
  return (a & m) | (b & ~m);
}

/* binary16 -> binary32. Always exact. A NaN keeps its payload and stays
 * signalling if it was: the kernels narrow every result back through
 * reduce_f2h, which quiets it, so quieting here would be wasted work (half.c
 * quiets for its exported callers). */
static inline float
reduce_h2f(uint16_t h)
{
  int32_t em = h & 0x7fff; /* exponent and mantissa */
  int32_t o = em << 13;    /* ... in fp32's places */
  /* Normal: rebias the exponent from 15 to 127 (add 112). Infinity or NaN
   * (exponent 31): add 112 once more, giving fp32's all-ones exponent 255. */
  int32_t normal = o + (112 << 23) + ((em >= 0x7c00) << 23) * 112;
  /* Zero or subnormal, m units of 2^-24: build 2^-14 * (1 + m/1024) and take
   * 2^-14 away; the subtraction is exact and normalises the result. */
  int32_t tiny =
      (int32_t)reduce_f32_bits(reduce_f32_from_bits((uint32_t)o + (113u << 23)) - 0x1p-14f);
  int32_t mag = reduce_sel(em < 0x0400, tiny, normal);
  return reduce_f32_from_bits(((uint32_t)(h & 0x8000u) << 16) | (uint32_t)mag);
}

/* binary32 -> binary16, rounded to nearest even; overflow gives infinity, a NaN
 * becomes a quiet NaN keeping the top of its payload. */
static inline uint16_t
reduce_f2h(float f)
{
  uint32_t x = reduce_f32_bits(f);
  int32_t ax = (int32_t)(x & 0x7fffffffu);
  /* Normal half: drop 13 mantissa bits with round-half-even, rebias by 112.
   * A carry out of the mantissa bumps the exponent, which is the right result;
   * anything at or above 65520 (halfway between 65504, the largest half, and
   * 2^16) comes out >= 0x7c00 and is clamped to infinity below. */
  int32_t normal =
      (int32_t)(((uint32_t)ax - (112u << 23) + 0xfffu + (((uint32_t)ax >> 13) & 1u)) >> 13);
  /* Below 2^-14: adding 0.5f, whose ulp is 2^-24 (the half subnormal step),
   * makes the FPU do the round-half-even; the bits above 0.5f's are the
   * result, and a round-up to 2^-14 lands on the smallest normal (0x400). */
  int32_t tiny =
      (int32_t)(reduce_f32_bits(reduce_f32_from_bits((uint32_t)ax) + 0.5f) - 0x3f000000u);
  int32_t r = reduce_sel(ax < 0x38800000, tiny, normal);
  r = r < 0x7c00 ? r : 0x7c00;
  r = reduce_sel(ax > 0x7f800000, 0x7e00 | ((ax >> 13) & 0x1ff), r);
  return (uint16_t)(((x >> 16) & 0x8000u) | (uint32_t)r);
}

/* bfloat16 -> binary32: bf16 is the top half of an fp32. Exact; NaNs are
 * left as they are, as in reduce_h2f. */
static inline float
reduce_bf2f(uint16_t h)
{
  return reduce_f32_from_bits((uint32_t)h << 16);
}

/* binary32 -> bfloat16, rounded to nearest even; overflow gives infinity (the
 * carry runs into the exponent), a NaN becomes a quiet NaN. */
static inline uint16_t
reduce_f2bf(float f)
{
  uint32_t x = reduce_f32_bits(f);
  int32_t rounded = (int32_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  int32_t nan = (int32_t)((x >> 16) | 0x0040u);
  return (uint16_t)reduce_sel((int32_t)(x & 0x7fffffffu) > 0x7f800000, nan, rounded);
}

#endif /* COLLIE_REDUCE_KERNELS_INT_H */
