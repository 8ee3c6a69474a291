/*
 * wire.c - float32 to and from the 16-bit wire formats, in bulk, for the
 * compressed allreduce (coll/wire.c). Rounding is to nearest even, as the
 * fp16/bf16 reduction kernels round (kernels_int.h's conversions, which
 * are branch-free so these loops vectorise); a NaN stays a NaN, an fp16
 * overflow becomes infinity.
 *
 * On a CPU the AVX2 kernel table runs on (AVX2 and F16C), fp16 goes
 * through vcvtps2ph / vcvtph2ps and bf16 through the same integer rounding
 * as the portable code, 8 lanes at a time: the portable conversions are
 * several operations per element. The choice follows isa.c's, made once
 * per process.
 */
#include <string.h>

#include "reduce/kernels_int.h"
#include "reduce/reduce.h"

#ifdef REDUCE_HAVE_X86
#include <immintrin.h>

#define WIRE_F16C __attribute__((target("avx2,f16c")))

static WIRE_F16C void
wire_f16c_encode(uint16_t *d, const float *s, size_t n)
{
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(void *)(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++) d[i] = reduce_f2h(s[i]);
}

static WIRE_F16C void
wire_f16c_decode(float *d, const uint16_t *s, size_t n, int add)
{
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(s + i)));
    if (add) v = _mm256_add_ps(_mm256_loadu_ps(d + i), v);
    _mm256_storeu_ps(d + i, v);
  }
  for (; i < n; i++) d[i] = add ? d[i] + reduce_h2f(s[i]) : reduce_h2f(s[i]);
}

/* bfloat16 8 lanes at a time, the rounding of reduce_f2bf: add 0x7fff plus
 * the lowest kept bit, keep the top half; a NaN keeps its top half, quiet. */
static WIRE_F16C void
wire_avx2_bf16_encode(uint16_t *d, const float *s, size_t n)
{
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff),
                quiet = _mm256_set1_epi32(0x40), absmask = _mm256_set1_epi32(0x7fffffff),
                inf = _mm256_set1_epi32(0x7f800000);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
    __m256i hi = _mm256_srli_epi32(x, 16);
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(x, bias), _mm256_and_si256(hi, one)), 16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, absmask), inf);
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), nan);
    /* 8 values of 0..0xffff in 32-bit lanes to 8 halves: pack (by 128-bit
     * lane), then put the two lanes' halves side by side. */
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128((__m128i *)(void *)(d + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; i++) d[i] = reduce_f2bf(s[i]);
}

static WIRE_F16C void
wire_avx2_bf16_decode(float *d, const uint16_t *s, size_t n, int add)
{
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(s + i)));
    __m256 v = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    if (add) v = _mm256_add_ps(_mm256_loadu_ps(d + i), v);
    _mm256_storeu_ps(d + i, v);
  }
  for (; i < n; i++) d[i] = add ? d[i] + reduce_bf2f(s[i]) : reduce_bf2f(s[i]);
}
#endif

/* Whether the F16C path may run: isa.c chose a table that needs it. */
static int
wire_f16c(void)
{
#ifdef REDUCE_HAVE_X86
  return strcmp(collie__reduce_isa(), "portable") != 0;
#else
  return 0;
#endif
}

void
collie__wire_encode(int wire, void *dst, const float *src, size_t n)
{
  uint16_t *d = dst;
#ifdef REDUCE_HAVE_X86
  if (wire_f16c()) {
    if (wire == COLLIE_WIRE_FLOAT16)
      wire_f16c_encode(d, src, n);
    else
      wire_avx2_bf16_encode(d, src, n);
    return;
  }
#endif
  if (wire == COLLIE_WIRE_FLOAT16)
    for (size_t i = 0; i < n; i++) d[i] = reduce_f2h(src[i]);
  else
    for (size_t i = 0; i < n; i++) d[i] = reduce_f2bf(src[i]);
}

static void
wire_decode(int wire, float *dst, const void *src, size_t n, int add)
{
  const uint16_t *s = src;
#ifdef REDUCE_HAVE_X86
  if (wire_f16c()) {
    if (wire == COLLIE_WIRE_FLOAT16)
      wire_f16c_decode(dst, s, n, add);
    else
      wire_avx2_bf16_decode(dst, s, n, add);
    return;
  }
#endif
  if (wire == COLLIE_WIRE_FLOAT16) {
    for (size_t i = 0; i < n; i++) dst[i] = add ? dst[i] + reduce_h2f(s[i]) : reduce_h2f(s[i]);
  } else {
    for (size_t i = 0; i < n; i++) dst[i] = add ? dst[i] + reduce_bf2f(s[i]) : reduce_bf2f(s[i]);
  }
}

void
collie__wire_decode(int wire, float *dst, const void *src, size_t n)
{
  wire_decode(wire, dst, src, n, 0);
}

void
collie__wire_decode_add(int wire, float *acc, const void *src, size_t n)
{
  wire_decode(wire, acc, src, n, 1);
}
