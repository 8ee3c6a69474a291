/* ref.c - see ref.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "coll/ref.h"

int
ref_is_float(collie_dtype_t d)
{
  return d == COLLIE_FLOAT16 || d == COLLIE_BFLOAT16 || d == COLLIE_FLOAT32 || d == COLLIE_FLOAT64;
}

int64_t
ref_value(int r, size_t i, collie_op_t op)
{
  unsigned h = (unsigned)(r * 131 + (int)(i % 1009) * 31 + 7);
  switch (op) {
  case COLLIE_PROD:
    return 1 + (h % 2); /* product of 8 ranks <= 256 */
  case COLLIE_BAND:
  case COLLIE_BOR:
  case COLLIE_BXOR:
    return (int64_t)(h * 2654435761u % 127u); /* fits int8 */
  case COLLIE_MIN:
  case COLLIE_MAX:
    return (int64_t)(h % 23) - 11; /* negatives too */
  default:
    return (int64_t)(h % 11) - 3; /* SUM, AVG: |sum| small */
  }
}

/* IEEE binary16 bits of a small integer (|v| < 2048: exact), written out
 * by hand so the reference owes nothing to the library or the compiler. */
static uint16_t
ref_half_bits(int64_t v)
{
  uint16_t sign = v < 0 ? 0x8000 : 0;
  uint64_t a = (uint64_t)(v < 0 ? -v : v);
  if (a == 0) return sign;
  int e = 0;
  while ((a >> (e + 1)) != 0) e++;                      /* a = 1.f x 2^e */
  uint16_t mant = (uint16_t)(((a << 10) >> e) & 0x3ff); /* the 10 bits after the point */
  return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | mant);
}

/* The value of binary16 bits (normals, subnormals, zero, inf, NaN). */
static double
ref_half_value(uint16_t h)
{
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 0)
    v = ldexp(m, -24);
  else if (e == 31)
    v = m ? NAN : INFINITY;
  else
    v = ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

static uint16_t
ref_bf16_bits(float f)
{
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16); /* exact for the small integers used here */
}

static float
ref_bf16_float(uint16_t b)
{
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

void
ref_store(void *buf, size_t i, collie_dtype_t d, int64_t v)
{
  switch (d) {
  case COLLIE_INT8:
    ((int8_t *)buf)[i] = (int8_t)v;
    break;
  case COLLIE_UINT8:
    ((uint8_t *)buf)[i] = (uint8_t)v;
    break;
  case COLLIE_INT32:
    ((int32_t *)buf)[i] = (int32_t)v;
    break;
  case COLLIE_UINT32:
    ((uint32_t *)buf)[i] = (uint32_t)v;
    break;
  case COLLIE_INT64:
    ((int64_t *)buf)[i] = v;
    break;
  case COLLIE_UINT64:
    ((uint64_t *)buf)[i] = (uint64_t)v;
    break;
  case COLLIE_FLOAT16:
    ((uint16_t *)buf)[i] = ref_half_bits(v);
    break;
  case COLLIE_BFLOAT16:
    ((uint16_t *)buf)[i] = ref_bf16_bits((float)v);
    break;
  case COLLIE_FLOAT32:
    ((float *)buf)[i] = (float)v;
    break;
  case COLLIE_FLOAT64:
    ((double *)buf)[i] = (double)v;
    break;
  default:
    break;
  }
}

void
ref_fill(void *buf, size_t n, collie_dtype_t dtype, collie_op_t op, int r)
{
  ref_fill_at(buf, 0, n, dtype, op, r);
}

void
ref_fill_at(void *buf, size_t first, size_t n, collie_dtype_t dtype, collie_op_t op, int r)
{
  for (size_t i = 0; i < n; i++) ref_store(buf, i, dtype, ref_value(r, first + i, op));
}

int64_t
ref_pattern(int src, size_t i)
{
  return (int64_t)((unsigned)(src * 37) + (unsigned)(i % 9973) * 11u) % 113 - 50;
}

void
ref_fill_pattern(void *buf, size_t n, collie_dtype_t dtype, int src)
{
  for (size_t i = 0; i < n; i++) ref_store(buf, i, dtype, ref_pattern(src, i));
}

/* Reads element i as double (floats) or as the integer's value (ints). */
static double
ref_load_f(const void *buf, size_t i, collie_dtype_t d)
{
  switch (d) {
  case COLLIE_FLOAT16:
    return ref_half_value(((const uint16_t *)buf)[i]);
  case COLLIE_BFLOAT16:
    return ref_bf16_float(((const uint16_t *)buf)[i]);
  case COLLIE_FLOAT32:
    return ((const float *)buf)[i];
  default:
    return ((const double *)buf)[i];
  }
}

static uint64_t
ref_load_u(const void *buf, size_t i, collie_dtype_t d)
{
  switch (d) {
  case COLLIE_INT8:
    return (uint64_t)(int64_t)((const int8_t *)buf)[i];
  case COLLIE_UINT8:
    return ((const uint8_t *)buf)[i];
  case COLLIE_INT32:
    return (uint64_t)(int64_t)((const int32_t *)buf)[i];
  case COLLIE_UINT32:
    return ((const uint32_t *)buf)[i];
  case COLLIE_INT64:
    return (uint64_t)((const int64_t *)buf)[i];
  default:
    return ((const uint64_t *)buf)[i];
  }
}

/* Truncates an integer result to the dtype's width, sign-extending signed types. */
static uint64_t
ref_wrap(uint64_t v, collie_dtype_t d)
{
  switch (d) {
  case COLLIE_INT8:
    return (uint64_t)(int64_t)(int8_t)v;
  case COLLIE_UINT8:
    return (uint8_t)v;
  case COLLIE_INT32:
    return (uint64_t)(int64_t)(int32_t)v;
  case COLLIE_UINT32:
    return (uint32_t)v;
  default:
    return v;
  }
}

static int
ref_signed(collie_dtype_t d)
{
  return d == COLLIE_INT8 || d == COLLIE_INT32 || d == COLLIE_INT64;
}

long
ref_pattern_diff(const void *got, size_t n, collie_dtype_t d, int src)
{
  size_t es = collie_dtype_size(d);
  char want[16];
  for (size_t i = 0; i < n; i++) {
    ref_store(want, 0, d, ref_pattern(src, i));
    if (memcmp((const char *)got + i * es, want, es)) return (long)i;
  }
  return -1;
}

long
ref_check(const void *buf, size_t n, collie_dtype_t d, collie_op_t op, int p, char *why,
          size_t whylen)
{
  return ref_check_at(buf, 0, n, d, op, p, why, whylen);
}

long
ref_check_at(const void *buf, size_t first, size_t n, collie_dtype_t d, collie_op_t op, int p,
             char *why, size_t whylen)
{
  for (size_t k = 0; k < n; k++) {
    size_t i = first + k;
    if (ref_is_float(d)) {
      double acc = (double)ref_value(0, i, op);
      for (int r = 1; r < p; r++) {
        double v = (double)ref_value(r, i, op);
        switch (op) {
        case COLLIE_PROD:
          acc *= v;
          break;
        case COLLIE_MIN:
          acc = v < acc ? v : acc;
          break;
        case COLLIE_MAX:
          acc = v > acc ? v : acc;
          break;
        default:
          acc += v;
          break;
        }
      }
      double tol = 0;
      if (op == COLLIE_AVG) {
        acc /= p;
        tol = d == COLLIE_FLOAT16 ? 4e-3 : d == COLLIE_BFLOAT16 ? 2e-2 : 1e-6;
        tol *= fabs(acc) > 1 ? fabs(acc) : 1;
      }
      double got = ref_load_f(buf, k, d);
      if (!(fabs(got - acc) <= tol)) {
        snprintf(why, whylen, "element %zu = %g, expected %g (%s %s, %d ranks)", i, got, acc,
                 collie_dtype_name(d), collie_op_name(op), p);
        return (long)k;
      }
    } else {
      /* Integer reference: wrapped unsigned arithmetic; AVG truncates toward zero. */
      uint64_t acc = ref_wrap((uint64_t)ref_value(0, i, op), d);
      int64_t sacc = ref_value(0, i, op);
      for (int r = 1; r < p; r++) {
        int64_t sv = ref_value(r, i, op);
        uint64_t v = ref_wrap((uint64_t)sv, d);
        switch (op) {
        case COLLIE_PROD:
          acc = ref_wrap(acc * v, d);
          break;
        case COLLIE_MIN:
          acc = ref_signed(d) ? ((int64_t)v < (int64_t)acc ? v : acc) : (v < acc ? v : acc);
          break;
        case COLLIE_MAX:
          acc = ref_signed(d) ? ((int64_t)v > (int64_t)acc ? v : acc) : (v > acc ? v : acc);
          break;
        case COLLIE_BAND:
          acc &= v;
          break;
        case COLLIE_BOR:
          acc |= v;
          break;
        case COLLIE_BXOR:
          acc ^= v;
          break;
        default:
          acc = ref_wrap(acc + v, d);
          break;
        }
        sacc += sv;
      }
      if (op == COLLIE_AVG) {
        /* The sum of the wrapped inputs, wrapped, then C division by p. */
        if (ref_signed(d))
          acc = ref_wrap((uint64_t)((int64_t)acc / p), d);
        else
          acc = ref_wrap(acc, d) / (uint64_t)p;
      }
      (void)sacc;
      uint64_t got = ref_load_u(buf, k, d);
      if (got != acc) {
        snprintf(why, whylen, "element %zu = %lld, expected %lld (%s %s, %d ranks)", i,
                 (long long)got, (long long)acc, collie_dtype_name(d), collie_op_name(op), p);
        return (long)k;
      }
    }
  }
  return -1;
}
