/*
 * reduce_test.c - the reduction kernels of src/reduce against a scalar
 * reference written here, independently: its own fp16/bf16 conversions (by
 * frexp/ldexp/rint rather than bit tricks), its own integer wrap-around (in
 * uint64_t with a mask), its own NaN rules. Nothing here calls a kernel to
 * compute an expected value.
 *
 * The data tests cross every (dtype, op) pair with odd lengths and with
 * starting offsets that are not multiples of the element size, and check
 * that bytes around the output and the whole input are left untouched.
 *
 * The kernels exist once per instruction set (portable, AVX2, AVX-512) and
 * the library runs whichever the CPU allows; every kernel test here runs
 * against each table this machine can execute (collie__reduce_kernel_isa),
 * not only the one the dispatcher chose.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "runner.h"
#include "reduce/reduce.h"

/* ---- Instruction sets ------------------------------------------------------- */

/* Every table name, best first (the dispatcher's order). */
static const char *const rt_isas[] = {"avx512", "avx2", "portable"};
#define RT_NISA (sizeof rt_isas / sizeof rt_isas[0])

/* The table the kernel tests use: NULL means the dispatched one. */
static const char *rt_isa;

static int
rt_isa_available(const char *isa)
{
  return collie__reduce_kernel_isa(COLLIE_INT8, COLLIE_SUM, isa) != NULL;
}

static collie__reduce_fn
rt_kernel(collie_dtype_t dt, collie_op_t op)
{
  return rt_isa ? collie__reduce_kernel_isa(dt, op, rt_isa) : collie__reduce_kernel(dt, op);
}

static const char *
rt_isa_name(void)
{
  return rt_isa ? rt_isa : "dispatched";
}

/* ASSERT, naming the table under test. */
#define RT_ASSERT(cond) ASSERTF(cond, "[%s] assertion failed: %s", rt_isa_name(), #cond)

/* Runs the statement once per table this machine can run; fails if there is none. */
#define RT_FOR_EACH_ISA(...)                                                                       \
  do {                                                                                             \
    int rt_ran_ = 0;                                                                               \
    for (size_t rt_i_ = 0; rt_i_ < RT_NISA; rt_i_++) {                                             \
      if (!rt_isa_available(rt_isas[rt_i_])) continue;                                             \
      rt_isa = rt_isas[rt_i_];                                                                     \
      __VA_ARGS__;                                                                                 \
      rt_ran_++;                                                                                   \
    }                                                                                              \
    rt_isa = NULL;                                                                                 \
    ASSERT(rt_ran_ >= 1);                                                                          \
  } while (0)

/* ---- Reference -------------------------------------------------------------- */

static uint64_t rt_rng = 0x9e3779b97f4a7c15ull;

/* xorshift64*: full 64-bit words (test_rand gives 24 bits). */
static uint64_t
rt_rand64(void)
{
  rt_rng ^= rt_rng >> 12;
  rt_rng ^= rt_rng << 25;
  rt_rng ^= rt_rng >> 27;
  return rt_rng * 0x2545f4914f6cdd1dull;
}

static int
rt_is_float(collie_dtype_t dt)
{
  return dt == COLLIE_FLOAT16 || dt == COLLIE_BFLOAT16 || dt == COLLIE_FLOAT32 ||
         dt == COLLIE_FLOAT64;
}

static int
rt_is_signed(collie_dtype_t dt)
{
  return dt == COLLIE_INT8 || dt == COLLIE_INT32 || dt == COLLIE_INT64;
}

static size_t
rt_size(collie_dtype_t dt)
{
  switch (dt) {
  case COLLIE_INT8:
  case COLLIE_UINT8:
    return 1;
  case COLLIE_FLOAT16:
  case COLLIE_BFLOAT16:
    return 2;
  case COLLIE_INT32:
  case COLLIE_UINT32:
  case COLLIE_FLOAT32:
    return 4;
  default:
    return 8;
  }
}

/* Names for messages, from collie.h's own lists (not the library's, which
 * another module implements). */
static const char *
rt_dname(collie_dtype_t dt)
{
  static const char *const names[] = {
#define RT_XX(name, size, isf, str) str,
      COLLIE_DTYPE_MAP(RT_XX)
#undef RT_XX
  };
  return (unsigned)dt < COLLIE_DTYPE_COUNT_ ? names[dt] : "?";
}

static const char *
rt_oname(collie_op_t op)
{
  static const char *const names[] = {
#define RT_XX(name, str, intonly) str,
      COLLIE_OP_MAP(RT_XX)
#undef RT_XX
  };
  return (unsigned)op < COLLIE_OP_COUNT_ ? names[op] : "?";
}

static int
rt_int_only(collie_op_t op)
{
  return op == COLLIE_BAND || op == COLLIE_BOR || op == COLLIE_BXOR;
}

/* IEEE binary16 value of h, by its definition. */
static float
rt_h2f(uint16_t h)
{
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 31)
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = ldexp(m, -24);
  else
    v = ldexp(1024 + m, e - 25);
  return (float)((h & 0x8000) ? -v : v);
}

static float
rt_bf2f(uint16_t h)
{
  int e = (h >> 7) & 0xff, m = h & 0x7f;
  double v;
  if (e == 255)
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = ldexp(m, -133);
  else
    v = ldexp(128 + m, e - 134);
  return (float)((h & 0x8000) ? -v : v);
}

/* Rounds |f| to a float format with `mbits` stored mantissa bits and minimum
 * normal exponent emin (value 2^emin), to nearest even, and encodes it. An
 * exponent beyond the format's top is infinity. */
static uint16_t
rt_encode(float f, int mbits, int emin, int ebits)
{
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  int emax_field = (1 << ebits) - 1;
  uint16_t inf = (uint16_t)(emax_field << mbits);
  double a = fabs((double)f);
  if (isnan(f)) return (uint16_t)(sign | inf | (1u << (mbits - 1)));
  if (a == 0) return sign;
  if (isinf(a)) return (uint16_t)(sign | inf);
  int e;
  frexp(a, &e);
  e -= 1; /* a = 1.x * 2^e */
  if (e < emin) e = emin;
  double q = rint(ldexp(a, mbits - e)); /* exact before rint: a has 24 bits */
  long field;
  if (q < ldexp(1, mbits)) /* subnormal (e == emin), or a round-up to the smallest normal below */
    field = (long)q;
  else
    field = ((long)(e - emin + 1) << mbits) + (long)(q - ldexp(1, mbits));
  if (field >= (long)inf) field = inf;
  return (uint16_t)(sign | field);
}

static uint16_t
rt_f2h(float f)
{
  return rt_encode(f, 10, -14, 5);
}

static uint16_t
rt_f2bf(float f)
{
  return rt_encode(f, 7, -126, 8);
}

static float
rt_float_op(collie_op_t op, float x, float y)
{
  switch (op) {
  case COLLIE_SUM:
  case COLLIE_AVG:
    return x + y;
  case COLLIE_PROD:
    return x * y;
  case COLLIE_MIN:
    if (isnan(x) || isnan(y)) return NAN;
    return y < x ? y : x;
  default:
    if (isnan(x) || isnan(y)) return NAN;
    return y > x ? y : x;
  }
}

static double
rt_double_op(collie_op_t op, double x, double y)
{
  switch (op) {
  case COLLIE_SUM:
  case COLLIE_AVG:
    return x + y;
  case COLLIE_PROD:
    return x * y;
  case COLLIE_MIN:
    if (isnan(x) || isnan(y)) return NAN;
    return y < x ? y : x;
  default:
    if (isnan(x) || isnan(y)) return NAN;
    return y > x ? y : x;
  }
}

/* An element of 1, 2, 4 or 8 bytes as an unsigned number, and back. */
static uint64_t
rt_load_u(const unsigned char *p, size_t sz)
{
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  switch (sz) {
  case 1:
    memcpy(&u8, p, 1);
    return u8;
  case 2:
    memcpy(&u16, p, 2);
    return u16;
  case 4:
    memcpy(&u32, p, 4);
    return u32;
  default:
    memcpy(&u64, p, 8);
    return u64;
  }
}

static void
rt_store_u(unsigned char *p, size_t sz, uint64_t v)
{
  uint8_t u8 = (uint8_t)v;
  uint16_t u16 = (uint16_t)v;
  uint32_t u32 = (uint32_t)v;
  switch (sz) {
  case 1:
    memcpy(p, &u8, 1);
    break;
  case 2:
    memcpy(p, &u16, 2);
    break;
  case 4:
    memcpy(p, &u32, 4);
    break;
  default:
    memcpy(p, &v, 8);
    break;
  }
}

/* Sign-extends the low 8*sz bits of u. */
static int64_t
rt_sext(uint64_t u, size_t sz)
{
  if (sz == 8) return (int64_t)u;
  uint64_t sbit = 1ull << (8 * sz - 1);
  return (u & sbit) ? -(int64_t)((~u & (sbit - 1)) + 1) : (int64_t)u;
}

/* out = x op y for one element of dt. */
static void
rt_combine(collie_dtype_t dt, collie_op_t op, const unsigned char *px, const unsigned char *py,
           unsigned char *out)
{
  size_t sz = rt_size(dt);
  if (dt == COLLIE_FLOAT32) {
    float x, y, r;
    memcpy(&x, px, 4);
    memcpy(&y, py, 4);
    r = rt_float_op(op, x, y);
    memcpy(out, &r, 4);
  } else if (dt == COLLIE_FLOAT64) {
    double x, y, r;
    memcpy(&x, px, 8);
    memcpy(&y, py, 8);
    r = rt_double_op(op, x, y);
    memcpy(out, &r, 8);
  } else if (dt == COLLIE_FLOAT16 || dt == COLLIE_BFLOAT16) {
    uint16_t hx, hy, hr;
    memcpy(&hx, px, 2);
    memcpy(&hy, py, 2);
    if (dt == COLLIE_FLOAT16)
      hr = rt_f2h(rt_float_op(op, rt_h2f(hx), rt_h2f(hy)));
    else
      hr = rt_f2bf(rt_float_op(op, rt_bf2f(hx), rt_bf2f(hy)));
    memcpy(out, &hr, 2);
  } else {
    uint64_t mask = sz == 8 ? ~0ull : (1ull << (8 * sz)) - 1;
    uint64_t ux = rt_load_u(px, sz), uy = rt_load_u(py, sz), r;
    int64_t sx = rt_sext(ux, sz), sy = rt_sext(uy, sz);
    int ylt = rt_is_signed(dt) ? sy < sx : uy < ux;
    switch (op) {
    case COLLIE_SUM:
    case COLLIE_AVG:
      r = ux + uy;
      break;
    case COLLIE_PROD:
      r = ux * uy;
      break;
    case COLLIE_MIN:
      r = ylt ? uy : ux;
      break;
    case COLLIE_MAX:
      r = (!ylt && ux != uy) ? uy : ux;
      break;
    case COLLIE_BAND:
      r = ux & uy;
      break;
    case COLLIE_BOR:
      r = ux | uy;
      break;
    default:
      r = ux ^ uy;
      break;
    }
    rt_store_u(out, sz, r & mask);
  }
}

static int
rt_h_isnan(uint16_t h, collie_dtype_t dt)
{
  return dt == COLLIE_FLOAT16 ? ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
                              : ((h & 0x7f80) == 0x7f80 && (h & 0x7f));
}

/* Do two elements agree? NaN matches any NaN; for MIN/MAX, +0 matches -0
 * (which of two equal zeros wins is not part of the contract). */
static int
rt_same(collie_dtype_t dt, collie_op_t op, const unsigned char *got, const unsigned char *want)
{
  size_t sz = rt_size(dt);
  int minmax = op == COLLIE_MIN || op == COLLIE_MAX;
  if (dt == COLLIE_FLOAT32) {
    float g, w;
    memcpy(&g, got, 4);
    memcpy(&w, want, 4);
    if (isnan(w) || isnan(g)) return isnan(w) && isnan(g);
    return minmax ? g == w : !memcmp(got, want, 4);
  }
  if (dt == COLLIE_FLOAT64) {
    double g, w;
    memcpy(&g, got, 8);
    memcpy(&w, want, 8);
    if (isnan(w) || isnan(g)) return isnan(w) && isnan(g);
    return minmax ? g == w : !memcmp(got, want, 8);
  }
  if (dt == COLLIE_FLOAT16 || dt == COLLIE_BFLOAT16) {
    uint16_t g, w;
    memcpy(&g, got, 2);
    memcpy(&w, want, 2);
    if (rt_h_isnan(g, dt) || rt_h_isnan(w, dt)) return rt_h_isnan(g, dt) && rt_h_isnan(w, dt);
    if (minmax && !(g & 0x7fff) && !(w & 0x7fff)) return 1;
    return g == w;
  }
  return !memcmp(got, want, sz);
}

static void
rt_hex(char *out, const unsigned char *p, size_t sz)
{
  for (size_t i = sz; i-- > 0;) out += sprintf(out, "%02x", p[i]);
}

/* Random element bits, with the interesting values of dt mixed in. */
static void
rt_fill(collie_dtype_t dt, unsigned char *p, size_t nelem)
{
  size_t sz = rt_size(dt);
  for (size_t i = 0; i < nelem; i++) {
    uint64_t r = rt_rand64();
    unsigned pick = (unsigned)(rt_rand64() % 16);
    if (pick < 10 || pick >= 14) {
      memcpy(p + i * sz, &r, sz);
      continue;
    }
    /* Specials: 0 and -0 / INT_MIN, infinity / MAX, NaN / -1, a small value. */
    uint64_t v;
    switch (dt) {
    case COLLIE_FLOAT16:
      v = (uint64_t[]){0x8000, 0x7c00, 0x7e00, 0x3c00}[pick - 10] ^ (r & 0x8000);
      break;
    case COLLIE_BFLOAT16:
      v = (uint64_t[]){0x8000, 0x7f80, 0x7fc1, 0x3f80}[pick - 10] ^ (r & 0x8000);
      break;
    case COLLIE_FLOAT32:
      v = (uint64_t[]){0x80000000u, 0x7f800000u, 0x7fc00000u, 0x3f800000u}[pick - 10] ^
          (r & 0x80000000u);
      break;
    case COLLIE_FLOAT64:
      v = (uint64_t[]){0x8000000000000000ull, 0x7ff0000000000000ull, 0x7ff8000000000001ull,
                       0x3ff0000000000000ull}[pick - 10] ^
          (r & 0x8000000000000000ull);
      break;
    default: {
      uint64_t top = 1ull << (8 * sz - 1);
      v = (uint64_t[]){top, top - 1, ~0ull, 2}[pick - 10];
      break;
    }
    }
    rt_store_u(p + i * sz, sz, v);
  }
}

/* ---- Tests ------------------------------------------------------------------- */

/* One run of kernel(dt, op) on n elements at byte offsets oc (inout) and oa (in). */
static void
rt_check_run(collie_dtype_t dt, collie_op_t op, size_t n, size_t oc, size_t oa, int inplace)
{
  size_t sz = rt_size(dt);
  size_t bytes = (n + 8) * sz + 16;
  unsigned char *c = malloc(bytes), *a = malloc(bytes);
  unsigned char *c0 = malloc(bytes), *a0 = malloc(bytes), *want = malloc(n * sz + 1);
  ASSERT(c && a && c0 && a0 && want);
  rt_fill(dt, c, bytes / sz);
  rt_fill(dt, a, bytes / sz);
  memcpy(c0, c, bytes);
  memcpy(a0, a, bytes);
  for (size_t i = 0; i < n; i++) {
    const unsigned char *y = inplace ? c0 + oc + i * sz : a0 + oa + i * sz;
    rt_combine(dt, op, c0 + oc + i * sz, y, want + i * sz);
  }

  collie__reduce_fn fn = rt_kernel(dt, op);
  ASSERTF(fn != NULL, "[%s] no kernel for %s %s", rt_isa_name(), rt_dname(dt), rt_oname(op));
  fn(c + oc, inplace ? c + oc : a + oa, n);

  for (size_t i = 0; i < n; i++) {
    if (!rt_same(dt, op, c + oc + i * sz, want + i * sz)) {
      char sx[20], sy[20], sg[20], sw[20];
      rt_hex(sx, c0 + oc + i * sz, sz);
      rt_hex(sy, inplace ? c0 + oc + i * sz : a0 + oa + i * sz, sz);
      rt_hex(sg, c + oc + i * sz, sz);
      rt_hex(sw, want + i * sz, sz);
      test_fail(__FILE__, __LINE__,
                "[%s] %s %s n=%zu offsets %zu/%zu%s: element %zu: %s op %s = %s, expected %s",
                rt_isa_name(), rt_dname(dt), rt_oname(op), n, oc, oa, inplace ? " in place" : "", i,
                sx, sy, sg, sw);
    }
  }
  ASSERTF(!memcmp(c, c0, oc) && !memcmp(c + oc + n * sz, c0 + oc + n * sz, bytes - oc - n * sz),
          "[%s] %s %s n=%zu: bytes outside the output changed", rt_isa_name(), rt_dname(dt),
          rt_oname(op), n);
  ASSERTF(!memcmp(a, a0, bytes), "[%s] %s %s n=%zu: the input changed", rt_isa_name(), rt_dname(dt),
          rt_oname(op), n);
  free(c);
  free(a);
  free(c0);
  free(a0);
  free(want);
}

/* Every pair, lengths, offsets and in-place, for the table rt_isa names. */
static void
rt_all_pairs(void)
{
  /* 1000 + 3 spans two of the fp16 F16C kernels' 512-element chunks. */
  static const size_t lens[] = {0, 1, 7, 33, 1000 + 3};
  /* Starting offsets of inout and in, in elements; some runs add one byte
   * (below) so that the start is not even aligned to the element size. */
  static const size_t offs[][2] = {{0, 0}, {0, 1}, {1, 0}, {3, 5}, {8, 3}};
  int pairs = 0;
  for (int dt = 0; dt < COLLIE_DTYPE_COUNT_; dt++) {
    for (int op = 0; op < COLLIE_OP_COUNT_; op++) {
      if (rt_is_float((collie_dtype_t)dt) && rt_int_only((collie_op_t)op)) continue;
      size_t sz = rt_size((collie_dtype_t)dt);
      for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
        for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++) {
          size_t oc = offs[o][0] * sz + (o == 1 || o == 3), oa = offs[o][1] * sz + (o >= 3);
          rt_check_run((collie_dtype_t)dt, (collie_op_t)op, lens[l], oc, oa, 0);
        }
        rt_check_run((collie_dtype_t)dt, (collie_op_t)op, lens[l], sz, 0, 1);
      }
      pairs++;
    }
  }
  ASSERT(pairs == 6 * 8 + 4 * 5);
}

TEST_IMPL(reduce_kernels_all_pairs)
{
  RT_FOR_EACH_ISA(rt_all_pairs());
  /* And through the dispatcher, as the library calls them. */
  rt_all_pairs();
}

TEST_IMPL(reduce_kernel_lookup)
{
  for (int dt = 0; dt < COLLIE_DTYPE_COUNT_; dt++) {
    for (int op = 0; op < COLLIE_OP_COUNT_; op++) {
      collie__reduce_fn fn = collie__reduce_kernel((collie_dtype_t)dt, (collie_op_t)op);
      int want_null = rt_is_float((collie_dtype_t)dt) && rt_int_only((collie_op_t)op);
      ASSERTF((fn == NULL) == want_null, "%s %s: kernel %s", rt_dname((collie_dtype_t)dt),
              rt_oname((collie_op_t)op), fn ? "present" : "missing");
    }
  }
  ASSERT(collie__reduce_kernel(COLLIE_FLOAT32, COLLIE_BAND) == NULL);
  ASSERT(collie__reduce_kernel(COLLIE_FLOAT16, COLLIE_BXOR) == NULL);
  ASSERT(collie__reduce_kernel(COLLIE_BFLOAT16, COLLIE_BOR) == NULL);
  ASSERT(collie__reduce_kernel(COLLIE_FLOAT64, COLLIE_BAND) == NULL);
  ASSERT(collie__reduce_kernel(COLLIE_DTYPE_COUNT_, COLLIE_SUM) == NULL);
  ASSERT(collie__reduce_kernel((collie_dtype_t)-1, COLLIE_SUM) == NULL);
  ASSERT(collie__reduce_kernel((collie_dtype_t)1000, COLLIE_SUM) == NULL);
  ASSERT(collie__reduce_kernel(COLLIE_INT32, COLLIE_OP_COUNT_) == NULL);
  ASSERT(collie__reduce_kernel(COLLIE_INT32, (collie_op_t)-1) == NULL);
  ASSERT(collie__reduce_kernel(COLLIE_INT32, (collie_op_t)77) == NULL);
  /* n == 0 touches nothing, so NULL buffers are fine. */
  collie__reduce_kernel(COLLIE_FLOAT32, COLLIE_SUM)(NULL, NULL, 0);
  /* Every table has the same pairs, and the same bounds checks. */
  RT_FOR_EACH_ISA({
    for (int dt = 0; dt < COLLIE_DTYPE_COUNT_; dt++) {
      for (int op = 0; op < COLLIE_OP_COUNT_; op++) {
        collie__reduce_fn fn = rt_kernel((collie_dtype_t)dt, (collie_op_t)op);
        int want_null = rt_is_float((collie_dtype_t)dt) && rt_int_only((collie_op_t)op);
        ASSERTF((fn == NULL) == want_null, "[%s] %s %s: kernel %s", rt_isa,
                rt_dname((collie_dtype_t)dt), rt_oname((collie_op_t)op),
                fn ? "present" : "missing");
      }
    }
    RT_ASSERT(rt_kernel(COLLIE_DTYPE_COUNT_, COLLIE_SUM) == NULL);
    RT_ASSERT(rt_kernel((collie_dtype_t)-1, COLLIE_SUM) == NULL);
    RT_ASSERT(rt_kernel(COLLIE_INT32, COLLIE_OP_COUNT_) == NULL);
    RT_ASSERT(rt_kernel(COLLIE_INT32, (collie_op_t)-1) == NULL);
    rt_kernel(COLLIE_FLOAT16, COLLIE_SUM)(NULL, NULL, 0);
    rt_kernel(COLLIE_FLOAT32, COLLIE_SUM)(NULL, NULL, 0);
  });
}

static uint32_t
rt_fbits(float f)
{
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float
rt_bitsf(uint32_t u)
{
  float f;
  memcpy(&f, &u, 4);
  return f;
}

TEST_IMPL(reduce_half_convert)
{
  /* Every half: exact widening, exact round trip, NaN stays NaN and is quiet. */
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = collie__half_to_float((uint16_t)h), w = rt_h2f((uint16_t)h);
    if (rt_h_isnan((uint16_t)h, COLLIE_FLOAT16)) {
      ASSERTF(isnan(f) && (rt_fbits(f) & 0x00400000u), "half %04x -> %08x", h, rt_fbits(f));
      uint16_t back = collie__float_to_half(f);
      ASSERTF(rt_h_isnan(back, COLLIE_FLOAT16) && (back & 0x200) && (back & 0x8000) == (h & 0x8000),
              "half NaN %04x -> %04x", h, back);
    } else {
      ASSERTF(rt_fbits(f) == rt_fbits(w), "half %04x -> %08x, expected %08x", h, rt_fbits(f),
              rt_fbits(w));
      ASSERTF(collie__float_to_half(f) == h, "half %04x round trip -> %04x", h,
              collie__float_to_half(f));
    }
  }
  /* Every midpoint between neighbouring finite halves (ties), and one float
   * ulp either side of it. */
  for (uint32_t h = 0; h < 0x7c00; h++) {
    double lo = rt_h2f((uint16_t)h), hi = h + 1 == 0x7c00 ? 65536.0 : rt_h2f((uint16_t)(h + 1));
    float mid = (float)((lo + hi) / 2); /* exact: 11 bits + 1 */
    for (int s = 0; s < 2; s++) {
      float m = s ? -mid : mid;
      uint16_t sign = s ? 0x8000 : 0;
      uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
      ASSERTF(collie__float_to_half(m) == (sign | even), "tie %a -> %04x, expected %04x", m,
              collie__float_to_half(m), sign | even);
      float below = nextafterf(m, 0), above = nextafterf(m, s ? -INFINITY : INFINITY);
      ASSERTF(collie__float_to_half(below) == (sign | h), "%a -> %04x", below,
              collie__float_to_half(below));
      ASSERTF(collie__float_to_half(above) == (sign | (h + 1)), "%a -> %04x", above,
              collie__float_to_half(above));
    }
  }
  /* Random floats of every magnitude against the reference rounding. */
  for (int i = 0; i < 300000; i++) {
    float f = rt_bitsf((uint32_t)rt_rand64());
    if (isnan(f)) continue;
    ASSERTF(collie__float_to_half(f) == rt_f2h(f), "%a (%08x) -> %04x, expected %04x", f,
            rt_fbits(f), collie__float_to_half(f), rt_f2h(f));
  }
  /* Named cases. */
  ASSERT(collie__float_to_half(1.0f) == 0x3c00);
  ASSERT(collie__float_to_half(1.0f + 0x1p-11f) == 0x3c00);     /* tie, to even */
  ASSERT(collie__float_to_half(1.0f + 3 * 0x1p-11f) == 0x3c02); /* tie, to even (up) */
  ASSERT(collie__float_to_half(0x1p-24f) == 0x0001);            /* smallest subnormal */
  ASSERT(collie__float_to_half(0x1p-25f) == 0x0000);            /* tie with 0: to even */
  ASSERT(collie__float_to_half(-0x1p-25f) == 0x8000);           /* keeps the sign */
  ASSERT(collie__float_to_half(0x1.8p-24f) == 0x0002);          /* 1.5 units: to even */
  ASSERT(collie__float_to_half(0x1p-14f - 0x1p-25f) == 0x0400); /* up into the normals */
  ASSERT(collie__float_to_half(0x1p-30f) == 0x0000);            /* underflow */
  ASSERT(collie__float_to_half(65504.0f) == 0x7bff);            /* largest finite */
  ASSERT(collie__float_to_half(65519.99f) == 0x7bff);
  ASSERT(collie__float_to_half(65520.0f) == 0x7c00); /* tie, to even = inf */
  ASSERT(collie__float_to_half(1e10f) == 0x7c00);    /* overflow */
  ASSERT(collie__float_to_half(-1e10f) == 0xfc00);
  ASSERT(collie__float_to_half(INFINITY) == 0x7c00);
  ASSERT(collie__float_to_half(-INFINITY) == 0xfc00);
  ASSERT(collie__float_to_half(-0.0f) == 0x8000);
  ASSERT(rt_h_isnan(collie__float_to_half(NAN), COLLIE_FLOAT16));
  ASSERT(rt_h_isnan(collie__float_to_half(rt_bitsf(0x7f800001u)), COLLIE_FLOAT16)); /* sNaN */
  ASSERT(collie__float_to_half(rt_bitsf(0x7f800001u)) & 0x200);                     /* quiet */
  ASSERT(isinf(collie__half_to_float(0xfc00)) && collie__half_to_float(0xfc00) < 0);
  ASSERT(collie__half_to_float(0x0001) == 0x1p-24f);
  ASSERT(collie__half_to_float(0x03ff) == 0x3ffp-24f);
  ASSERT(collie__half_to_float(0x7bff) == 65504.0f);
  ASSERT(rt_fbits(collie__half_to_float(0x7c01)) & 0x00400000u); /* sNaN -> quiet */
}

TEST_IMPL(reduce_bf16_convert)
{
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = collie__bf16_to_float((uint16_t)h), w = rt_bf2f((uint16_t)h);
    if (rt_h_isnan((uint16_t)h, COLLIE_BFLOAT16)) {
      ASSERTF(isnan(f) && (rt_fbits(f) & 0x00400000u), "bf16 %04x -> %08x", h, rt_fbits(f));
      uint16_t back = collie__float_to_bf16(f);
      ASSERTF(rt_h_isnan(back, COLLIE_BFLOAT16) && (back & 0x40) && (back & 0x8000) == (h & 0x8000),
              "bf16 NaN %04x -> %04x", h, back);
    } else {
      ASSERTF(rt_fbits(f) == rt_fbits(w), "bf16 %04x -> %08x, expected %08x", h, rt_fbits(f),
              rt_fbits(w));
      ASSERTF(collie__float_to_bf16(f) == h, "bf16 %04x round trip -> %04x", h,
              collie__float_to_bf16(f));
    }
  }
  for (uint32_t h = 0; h < 0x7f80; h++) {
    /* The midpoint above bf16 h is the float with h's bits and 0x8000 below. */
    float mid = rt_bitsf((h << 16) | 0x8000u);
    uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
    ASSERTF(collie__float_to_bf16(mid) == even, "tie %a -> %04x", mid, collie__float_to_bf16(mid));
    ASSERT(collie__float_to_bf16(rt_bitsf((h << 16) | 0x7fffu)) == h);
    ASSERT(collie__float_to_bf16(rt_bitsf((h << 16) | 0x8001u)) == h + 1);
    ASSERT(collie__float_to_bf16(-mid) == (0x8000 | even));
  }
  for (int i = 0; i < 300000; i++) {
    float f = rt_bitsf((uint32_t)rt_rand64());
    if (isnan(f)) continue;
    ASSERTF(collie__float_to_bf16(f) == rt_f2bf(f), "%a -> %04x, expected %04x", f,
            collie__float_to_bf16(f), rt_f2bf(f));
  }
  ASSERT(collie__float_to_bf16(1.0f) == 0x3f80);
  ASSERT(collie__float_to_bf16(1.0f + 0x1p-8f) == 0x3f80);        /* tie, to even */
  ASSERT(collie__float_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);    /* tie, to even (up) */
  ASSERT(collie__float_to_bf16(rt_bitsf(0x00008000u)) == 0x0000); /* subnormal tie to 0 */
  ASSERT(collie__float_to_bf16(rt_bitsf(0x00018000u)) == 0x0002); /* subnormal tie up */
  ASSERT(collie__float_to_bf16(rt_bitsf(0x00000001u)) == 0x0000);
  ASSERT(collie__float_to_bf16(3.4028235e38f) == 0x7f80); /* FLT_MAX rounds up to inf */
  ASSERT(collie__float_to_bf16(-3.4028235e38f) == 0xff80);
  ASSERT(collie__float_to_bf16(INFINITY) == 0x7f80);
  ASSERT(collie__float_to_bf16(-INFINITY) == 0xff80);
  ASSERT(collie__float_to_bf16(rt_bitsf(0x7f800001u)) == 0x7fc0); /* sNaN -> quiet NaN */
  ASSERT(collie__float_to_bf16(rt_bitsf(0xffc00000u)) == 0xffc0);
  ASSERT(rt_fbits(collie__bf16_to_float(0x7f81)) == 0x7fc10000u); /* sNaN -> quiet */
}

/* Runs the (dt, op) kernel on one pair of elements given as raw bits. */
static uint64_t
rt_one(collie_dtype_t dt, collie_op_t op, uint64_t x, uint64_t y)
{
  size_t sz = rt_size(dt);
  unsigned char bx[8] = {0}, by[8] = {0};
  memcpy(bx, &x, sz); /* little-endian: the low bytes are the element */
  memcpy(by, &y, sz);
  collie__reduce_fn fn = rt_kernel(dt, op);
  RT_ASSERT(fn != NULL);
  fn(bx, by, 1);
  uint64_t r = 0;
  memcpy(&r, bx, sz);
  return r;
}

static float
rt_onef(collie_op_t op, float x, float y)
{
  return rt_bitsf((uint32_t)rt_one(COLLIE_FLOAT32, op, rt_fbits(x), rt_fbits(y)));
}

static double
rt_oned(collie_op_t op, double x, double y)
{
  uint64_t ux, uy, r;
  double d;
  memcpy(&ux, &x, 8);
  memcpy(&uy, &y, 8);
  r = rt_one(COLLIE_FLOAT64, op, ux, uy);
  memcpy(&d, &r, 8);
  return d;
}

static void
rt_reduce_minmax_nan_checks(void)
{
  /* NaN on either side, either op, wins. */
  RT_ASSERT(isnan(rt_onef(COLLIE_MIN, NAN, 1.0f)));
  RT_ASSERT(isnan(rt_onef(COLLIE_MIN, 1.0f, NAN)));
  RT_ASSERT(isnan(rt_onef(COLLIE_MAX, NAN, 1.0f)));
  RT_ASSERT(isnan(rt_onef(COLLIE_MAX, 1.0f, NAN)));
  RT_ASSERT(isnan(rt_onef(COLLIE_MAX, -INFINITY, NAN)));
  RT_ASSERT(isnan(rt_onef(COLLIE_MIN, NAN, -INFINITY)));
  RT_ASSERT(isnan(rt_oned(COLLIE_MIN, NAN, 1.0)));
  RT_ASSERT(isnan(rt_oned(COLLIE_MIN, 1.0, NAN)));
  RT_ASSERT(isnan(rt_oned(COLLIE_MAX, NAN, INFINITY)));
  RT_ASSERT(isnan(rt_oned(COLLIE_MAX, INFINITY, NAN)));
  /* Infinities order as numbers. */
  RT_ASSERT(rt_onef(COLLIE_MIN, -INFINITY, -1e38f) == -INFINITY);
  RT_ASSERT(rt_onef(COLLIE_MIN, 5.0f, -INFINITY) == -INFINITY);
  RT_ASSERT(rt_onef(COLLIE_MAX, INFINITY, 1e38f) == INFINITY);
  RT_ASSERT(rt_onef(COLLIE_MAX, 1.0f, INFINITY) == INFINITY);
  RT_ASSERT(rt_onef(COLLIE_MIN, INFINITY, 3.0f) == 3.0f);
  RT_ASSERT(rt_onef(COLLIE_MAX, -2.0f, -3.0f) == -2.0f);
  RT_ASSERT(rt_oned(COLLIE_MIN, -INFINITY, 0.0) == -INFINITY);
  RT_ASSERT(rt_oned(COLLIE_MAX, 1e300, INFINITY) == INFINITY);
  RT_ASSERT(rt_oned(COLLIE_MIN, -1e-300, 1e-300) == -1e-300);
  /* fp16 / bf16: the same rules through the widening. */
  RT_ASSERT(
      rt_h_isnan((uint16_t)rt_one(COLLIE_FLOAT16, COLLIE_MIN, 0x7e00, 0x3c00), COLLIE_FLOAT16));
  RT_ASSERT(
      rt_h_isnan((uint16_t)rt_one(COLLIE_FLOAT16, COLLIE_MAX, 0x3c00, 0xfe00), COLLIE_FLOAT16));
  RT_ASSERT(
      rt_h_isnan((uint16_t)rt_one(COLLIE_FLOAT16, COLLIE_MAX, 0x3c00, 0x7c01), COLLIE_FLOAT16));
  RT_ASSERT(rt_one(COLLIE_FLOAT16, COLLIE_MIN, 0xfc00, 0x3c00) == 0xfc00);
  RT_ASSERT(rt_one(COLLIE_FLOAT16, COLLIE_MAX, 0x7c00, 0x7bff) == 0x7c00);
  RT_ASSERT(rt_one(COLLIE_FLOAT16, COLLIE_MIN, 0x0001, 0x8001) == 0x8001);
  RT_ASSERT(
      rt_h_isnan((uint16_t)rt_one(COLLIE_BFLOAT16, COLLIE_MIN, 0x3f80, 0x7fc0), COLLIE_BFLOAT16));
  RT_ASSERT(
      rt_h_isnan((uint16_t)rt_one(COLLIE_BFLOAT16, COLLIE_MAX, 0xffc0, 0x3f80), COLLIE_BFLOAT16));
  RT_ASSERT(rt_one(COLLIE_BFLOAT16, COLLIE_MAX, 0xff80, 0xc000) == 0xc000);
  /* fp16 SUM: overflow to infinity, inf - inf = NaN, ties to even. */
  RT_ASSERT(rt_one(COLLIE_FLOAT16, COLLIE_SUM, 0x7bff, 0x7bff) == 0x7c00);
  RT_ASSERT(rt_one(COLLIE_FLOAT16, COLLIE_SUM, 0x7bff, 0x4c00) ==
            0x7c00); /* 65504+16: tie -> inf */
  RT_ASSERT(rt_one(COLLIE_FLOAT16, COLLIE_SUM, 0x7bff, 0x4bff) == 0x7bff); /* just below the tie */
  RT_ASSERT(
      rt_h_isnan((uint16_t)rt_one(COLLIE_FLOAT16, COLLIE_SUM, 0x7c00, 0xfc00), COLLIE_FLOAT16));
  RT_ASSERT(rt_one(COLLIE_FLOAT16, COLLIE_SUM, 0x3c00, 0x1000) == 0x3c00);  /* 1 + 2^-11: to even */
  RT_ASSERT(rt_one(COLLIE_FLOAT16, COLLIE_SUM, 0x3c01, 0x1000) == 0x3c02);  /* odd + half ulp: up */
  RT_ASSERT(rt_one(COLLIE_FLOAT16, COLLIE_SUM, 0x0001, 0x0001) == 0x0002);  /* subnormals add */
  RT_ASSERT(rt_one(COLLIE_FLOAT16, COLLIE_PROD, 0x0001, 0x3800) == 0x0000); /* 2^-25: tie -> 0 */
  RT_ASSERT(rt_one(COLLIE_FLOAT16, COLLIE_PROD, 0x0003, 0x3800) == 0x0002); /* 1.5 units -> 2 */
  RT_ASSERT(rt_one(COLLIE_BFLOAT16, COLLIE_SUM, 0x7f7f, 0x7f7f) == 0x7f80); /* overflow */
  RT_ASSERT(rt_one(COLLIE_BFLOAT16, COLLIE_SUM, 0x3f80, 0x3b80) == 0x3f80); /* 1 + 2^-8: to even */
  RT_ASSERT(rt_one(COLLIE_BFLOAT16, COLLIE_SUM, 0x3f81, 0x3b80) == 0x3f82);
}

TEST_IMPL(reduce_minmax_nan)
{
  RT_FOR_EACH_ISA(rt_reduce_minmax_nan_checks());
  rt_reduce_minmax_nan_checks();
}

static void
rt_reduce_int_wrap_checks(void)
{
  /* Unsigned wrap. */
  RT_ASSERT(rt_one(COLLIE_UINT8, COLLIE_SUM, 200, 100) == 44);
  RT_ASSERT(rt_one(COLLIE_UINT8, COLLIE_PROD, 16, 16) == 0);
  RT_ASSERT(rt_one(COLLIE_UINT8, COLLIE_PROD, 255, 255) == 1);
  RT_ASSERT(rt_one(COLLIE_UINT32, COLLIE_SUM, 0xffffffffu, 2) == 1);
  RT_ASSERT(rt_one(COLLIE_UINT32, COLLIE_PROD, 0x10000, 0x10000) == 0);
  RT_ASSERT(rt_one(COLLIE_UINT32, COLLIE_PROD, 0xffffffffu, 0xffffffffu) == 1);
  RT_ASSERT(rt_one(COLLIE_UINT64, COLLIE_SUM, ~0ull, 2) == 1);
  RT_ASSERT(rt_one(COLLIE_UINT64, COLLIE_PROD, 1ull << 32, 1ull << 32) == 0);
  RT_ASSERT(rt_one(COLLIE_UINT64, COLLIE_PROD, ~0ull, ~0ull) == 1);
  /* Signed wrap, as two's complement (no UB: UBSan would abort here). */
  RT_ASSERT(rt_one(COLLIE_INT8, COLLIE_SUM, 127, 1) == 0x80);
  RT_ASSERT(rt_one(COLLIE_INT8, COLLIE_SUM, 0x80, 0xff) == 0x7f);  /* -128 + -1 */
  RT_ASSERT(rt_one(COLLIE_INT8, COLLIE_PROD, 0x80, 0xff) == 0x80); /* -128 * -1 */
  RT_ASSERT(rt_one(COLLIE_INT8, COLLIE_PROD, 100, 100) == (10000 & 0xff));
  RT_ASSERT(rt_one(COLLIE_INT32, COLLIE_SUM, 0x7fffffff, 1) == 0x80000000u);
  RT_ASSERT(rt_one(COLLIE_INT32, COLLIE_PROD, 0x80000000u, 0xffffffffu) == 0x80000000u);
  RT_ASSERT(rt_one(COLLIE_INT32, COLLIE_PROD, 65536, 65536) == 0);
  RT_ASSERT(rt_one(COLLIE_INT64, COLLIE_SUM, 0x7fffffffffffffffull, 1) == 0x8000000000000000ull);
  RT_ASSERT(rt_one(COLLIE_INT64, COLLIE_SUM, 0x8000000000000000ull, ~0ull) ==
            0x7fffffffffffffffull);
  RT_ASSERT(rt_one(COLLIE_INT64, COLLIE_PROD, 0x8000000000000000ull, ~0ull) ==
            0x8000000000000000ull);
  RT_ASSERT(rt_one(COLLIE_INT64, COLLIE_PROD, 1ull << 32, 1ull << 32) == 0);
  /* MIN/MAX compare signed types as signed and unsigned ones as unsigned. */
  RT_ASSERT(rt_one(COLLIE_INT8, COLLIE_MIN, 0x80, 0x7f) == 0x80);
  RT_ASSERT(rt_one(COLLIE_UINT8, COLLIE_MIN, 0x80, 0x7f) == 0x7f);
  RT_ASSERT(rt_one(COLLIE_INT32, COLLIE_MAX, 0xffffffffu, 0) == 0);
  RT_ASSERT(rt_one(COLLIE_UINT32, COLLIE_MAX, 0xffffffffu, 0) == 0xffffffffu);
  RT_ASSERT(rt_one(COLLIE_INT64, COLLIE_MIN, ~0ull, 0) == ~0ull);
  RT_ASSERT(rt_one(COLLIE_UINT64, COLLIE_MIN, ~0ull, 0) == 0);
  RT_ASSERT(rt_one(COLLIE_INT8, COLLIE_BXOR, 0xf0, 0xff) == 0x0f);
  RT_ASSERT(rt_one(COLLIE_INT64, COLLIE_BAND, ~0ull, 0x8000000000000001ull) ==
            0x8000000000000001ull);
  RT_ASSERT(rt_one(COLLIE_UINT32, COLLIE_BOR, 0xf0f0f0f0u, 0x0f0f0f0fu) == 0xffffffffu);
}

TEST_IMPL(reduce_int_wrap)
{
  RT_FOR_EACH_ISA(rt_reduce_int_wrap_checks());
  rt_reduce_int_wrap_checks();
}

/* Reference AVG finish for one element: C division (truncates toward zero)
 * for integers, x / p in the dtype's arithmetic for floats. */
static void
rt_avg_one(collie_dtype_t dt, unsigned char *p, int np)
{
  size_t sz = rt_size(dt);
  if (dt == COLLIE_FLOAT32) {
    float f;
    memcpy(&f, p, 4);
    f = f / (float)np;
    memcpy(p, &f, 4);
  } else if (dt == COLLIE_FLOAT64) {
    double d;
    memcpy(&d, p, 8);
    d = d / np;
    memcpy(p, &d, 8);
  } else if (dt == COLLIE_FLOAT16 || dt == COLLIE_BFLOAT16) {
    uint16_t h;
    memcpy(&h, p, 2);
    h = dt == COLLIE_FLOAT16 ? rt_f2h(rt_h2f(h) / (float)np) : rt_f2bf(rt_bf2f(h) / (float)np);
    memcpy(p, &h, 2);
  } else if (rt_is_signed(dt)) {
    rt_store_u(p, sz, (uint64_t)(rt_sext(rt_load_u(p, sz), sz) / np));
  } else {
    rt_store_u(p, sz, rt_load_u(p, sz) / (uint64_t)np);
  }
}

TEST_IMPL(reduce_avg_finish)
{
  /* Signed integers truncate toward zero, including the most negative value. */
  int8_t i8[] = {-7, 7, -128, 127, -1, 1, 0, -2};
  collie__reduce_avg_finish(i8, 8, COLLIE_INT8, 2);
  ASSERT(i8[0] == -3 && i8[1] == 3 && i8[2] == -64 && i8[3] == 63);
  ASSERT(i8[4] == 0 && i8[5] == 0 && i8[6] == 0 && i8[7] == -1);
  int32_t i32[] = {-10, 10, INT32_MIN, INT32_MAX, -2};
  collie__reduce_avg_finish(i32, 5, COLLIE_INT32, 3);
  ASSERT(i32[0] == -3 && i32[1] == 3 && i32[2] == INT32_MIN / 3 && i32[3] == INT32_MAX / 3);
  ASSERT(i32[4] == 0);
  int64_t i64[] = {-15, INT64_MIN, INT64_MAX};
  collie__reduce_avg_finish(i64, 3, COLLIE_INT64, 7);
  ASSERT(i64[0] == -2 && i64[1] == INT64_MIN / 7 && i64[2] == INT64_MAX / 7);
  /* Unsigned: plain division; p larger than the type's range gives 0. */
  uint8_t u8[] = {255, 9};
  collie__reduce_avg_finish(u8, 2, COLLIE_UINT8, 300);
  ASSERT(u8[0] == 0 && u8[1] == 0);
  uint32_t u32[] = {0xffffffffu, 7};
  collie__reduce_avg_finish(u32, 2, COLLIE_UINT32, 2);
  ASSERT(u32[0] == 0x7fffffffu && u32[1] == 3);
  uint64_t u64[] = {~0ull};
  collie__reduce_avg_finish(u64, 1, COLLIE_UINT64, 4);
  ASSERT(u64[0] == ~0ull / 4);
  /* Floats. */
  float f32[] = {1.0f, 3.0f, -INFINITY, NAN, 0x1p-149f, -6.0f};
  collie__reduce_avg_finish(f32, 6, COLLIE_FLOAT32, 2);
  ASSERT(f32[0] == 0.5f && f32[1] == 1.5f && f32[2] == -INFINITY && isnan(f32[3]));
  ASSERT(f32[4] == 0.0f && f32[5] == -3.0f); /* 2^-150: tie, to even (0) */
  double f64[] = {1.0, -1e308};
  collie__reduce_avg_finish(f64, 2, COLLIE_FLOAT64, 3);
  ASSERT(f64[0] == 1.0 / 3 && f64[1] == -1e308 / 3);
  uint16_t h[] = {0x3c00, 0x0001, 0x0003, 0x7c00, 0x7e00, 0xbc00};
  collie__reduce_avg_finish(h, 6, COLLIE_FLOAT16, 2);
  ASSERT(h[0] == 0x3800 && h[1] == 0x0000 && h[2] == 0x0002 && h[3] == 0x7c00);
  ASSERT(rt_h_isnan(h[4], COLLIE_FLOAT16) && h[5] == 0xb800);
  uint16_t h3 = 0x3c00; /* 1/3 in fp16 is 0x3555 */
  collie__reduce_avg_finish(&h3, 1, COLLIE_FLOAT16, 3);
  ASSERT(h3 == 0x3555);
  uint16_t b[] = {0x3f80, 0x4040, 0xff80, 0x7fc0};
  collie__reduce_avg_finish(b, 4, COLLIE_BFLOAT16, 2);
  ASSERT(b[0] == 0x3f00 && b[1] == 0x3fc0 && b[2] == 0xff80 && rt_h_isnan(b[3], COLLIE_BFLOAT16));
  /* p == 1 changes nothing; p <= 0, n == 0 and a bad dtype are ignored. */
  int32_t keep[] = {5, -5};
  collie__reduce_avg_finish(keep, 2, COLLIE_INT32, 1);
  collie__reduce_avg_finish(keep, 2, COLLIE_INT32, 0);
  collie__reduce_avg_finish(keep, 2, COLLIE_INT32, -3);
  collie__reduce_avg_finish(keep, 2, COLLIE_DTYPE_COUNT_, 2);
  collie__reduce_avg_finish(keep, 2, (collie_dtype_t)-1, 2);
  collie__reduce_avg_finish(NULL, 0, COLLIE_INT32, 2);
  ASSERT(keep[0] == 5 && keep[1] == -5);

  /* Random data, every dtype, odd lengths and misaligned starts. */
  static const int ps[] = {2, 3, 7, 8};
  for (int dt = 0; dt < COLLIE_DTYPE_COUNT_; dt++) {
    size_t sz = rt_size((collie_dtype_t)dt);
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
      size_t n = 1003, off = k; /* k = 1, 3: misaligned */
      unsigned char *buf = malloc(n * sz + 8), *want = malloc(n * sz + 8);
      ASSERT(buf && want);
      rt_fill((collie_dtype_t)dt, buf, (n * sz + 8) / sz);
      memcpy(want, buf, n * sz + 8);
      for (size_t i = 0; i < n; i++) rt_avg_one((collie_dtype_t)dt, want + off + i * sz, ps[k]);
      collie__reduce_avg_finish(buf + off, n, (collie_dtype_t)dt, ps[k]);
      for (size_t i = 0; i < n; i++)
        ASSERTF(rt_same((collie_dtype_t)dt, COLLIE_SUM, buf + off + i * sz, want + off + i * sz),
                "avg %s p=%d element %zu", rt_dname((collie_dtype_t)dt), ps[k], i);
      ASSERT(!memcmp(buf, want, off));
      ASSERT(!memcmp(buf + off + n * sz, want + off + n * sz, 8 - off));
      free(buf);
      free(want);
    }
  }
}

/* ---- fp16 / bf16 kernels: every value, every tie ----------------------------- */

/* The element that, added to h (same sign), lands exactly halfway between |h|
 * and the next value up: half of h's ulp, when the format can hold it; 0
 * otherwise. fp16: 10 mantissa bits, exponent bias 15; bf16: 7 and 127. */
static uint16_t
rt_tie_partner(collie_dtype_t dt, uint16_t h)
{
  int mbits = dt == COLLIE_FLOAT16 ? 10 : 7, bias = dt == COLLIE_FLOAT16 ? 15 : 127;
  int efield = (h & 0x7fff) >> mbits, emax = dt == COLLIE_FLOAT16 ? 31 : 255;
  if (efield == emax) return 0;
  int e = (efield ? efield : 1) - bias; /* h = 1.x * 2^e (or 0.x * 2^e) */
  int k = e - mbits - 1;                /* half an ulp: 2^k */
  int kmin = 1 - bias - mbits;          /* the smallest subnormal */
  if (k < kmin) return 0;
  uint16_t mag = k >= 1 - bias ? (uint16_t)((k + bias) << mbits) : (uint16_t)(1u << (k - kmin));
  return (uint16_t)((h & 0x8000) | mag);
}

/* For each 16-bit x (all 65536) and a fixed set of partners y per x (its tie
 * partner, 0.5 for ties below the normals, +-0, +-inf, a NaN, the smallest
 * subnormal, 1, x itself, -x, random bits), the SUM, PROD, MIN and MAX
 * kernels of every table against the reference, element by element, in one
 * call per (table, op) of 65536 * RT_NY elements. */
#define RT_NY 12
static void
rt_half_exhaustive(collie_dtype_t dt)
{
  static const collie_op_t ops[] = {COLLIE_SUM, COLLIE_PROD, COLLIE_MIN, COLLIE_MAX};
  int f16 = dt == COLLIE_FLOAT16;
  size_t n = 65536u * RT_NY;
  uint16_t *x = malloc(n * 2), *y = malloc(n * 2), *want = malloc(n * 2), *got = malloc(n * 2);
  ASSERT(x && y && want && got);
  size_t ties = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    uint16_t t = rt_tie_partner(dt, (uint16_t)h);
    uint16_t ys[RT_NY] = {t,
                          f16 ? 0x3800 : 0x3f00, /* 0.5 */
                          0x0000,
                          0x8000,
                          f16 ? 0x7c00 : 0x7f80,
                          f16 ? 0xfc00 : 0xff80,
                          f16 ? 0x7e00 : 0x7fc0,
                          0x0001,
                          f16 ? 0x3c00 : 0x3f80, /* 1 */
                          (uint16_t)h,
                          (uint16_t)(h ^ 0x8000),
                          (uint16_t)rt_rand64()};
    ties += t != 0;
    for (int j = 0; j < RT_NY; j++) {
      x[h * RT_NY + j] = (uint16_t)h;
      y[h * RT_NY + j] = ys[j];
    }
  }
  /* Every finite x with exponent field >= 2 has a representable tie partner. */
  ASSERT(ties > (f16 ? 2 * 0x7000u : 2 * 0x7e00u));
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
    for (size_t i = 0; i < n; i++)
      rt_combine(dt, ops[o], (const unsigned char *)&x[i], (const unsigned char *)&y[i],
                 (unsigned char *)&want[i]);
    RT_FOR_EACH_ISA({
      memcpy(got, x, n * 2);
      rt_kernel(dt, ops[o])(got, y, n);
      for (size_t i = 0; i < n; i++) {
        ASSERTF(
            rt_same(dt, ops[o], (const unsigned char *)&got[i], (const unsigned char *)&want[i]),
            "[%s] %s %s: %04x op %04x = %04x, expected %04x", rt_isa, rt_dname(dt),
            rt_oname(ops[o]), x[i], y[i], got[i], want[i]);
      }
    });
  }
  free(x);
  free(y);
  free(want);
  free(got);
}

TEST_IMPL(reduce_half_kernels_exhaustive)
{
  /* The partner really is a tie: 1.0 + 2^-11 (fp16) and 1.0 + 2^-8 (bf16). */
  ASSERT(rt_tie_partner(COLLIE_FLOAT16, 0x3c00) == 0x1000);
  ASSERT(rt_tie_partner(COLLIE_FLOAT16, 0xbc01) == 0x9000);
  ASSERT(rt_tie_partner(COLLIE_FLOAT16, 0x0800) == 0x0001); /* 2^-13 + 2^-24 */
  ASSERT(rt_tie_partner(COLLIE_FLOAT16, 0x0400) == 0);      /* 2^-25: not a half */
  ASSERT(rt_tie_partner(COLLIE_FLOAT16, 0x7c00) == 0);
  ASSERT(rt_tie_partner(COLLIE_BFLOAT16, 0x3f80) == 0x3b80);
  ASSERT(rt_tie_partner(COLLIE_BFLOAT16, 0x0100) == 0x0001);
  rt_half_exhaustive(COLLIE_FLOAT16);
  rt_half_exhaustive(COLLIE_BFLOAT16);
}

/* ---- Dispatch ------------------------------------------------------------------ */

/* The x86 tables exist: what /proc/cpuinfo says decides which are offered. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(COLLIE_REDUCE_PORTABLE_ONLY)
#define RT_X86_TABLES 1
#endif

#ifdef RT_X86_TABLES
/* Does /proc/cpuinfo's first "flags" line list flag? -1 if it cannot be read
 * (not Linux, or not x86: no "flags" line). */
static int
rt_cpu_flag(const char *flag)
{
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return -1;
  static char line[16384];
  int found = -1;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5) != 0) continue;
    found = 0;
    size_t fl = strlen(flag);
    for (char *p = strstr(line, flag); p; p = strstr(p + 1, flag)) {
      if (p[-1] == ' ' && (p[fl] == ' ' || p[fl] == '\n' || p[fl] == '\0')) found = 1;
    }
    break;
  }
  fclose(f);
  return found;
}
#endif

TEST_IMPL(reduce_isa_dispatch)
{
  const char *isa = collie__reduce_isa();
  ASSERT(isa != NULL);
  ASSERTF(!strcmp(isa, "avx512") || !strcmp(isa, "avx2") || !strcmp(isa, "portable"), "isa %s",
          isa);
  ASSERT(collie__reduce_isa() == isa); /* fixed for the process */
  /* The chosen table is the best one available. */
  size_t best = RT_NISA;
  for (size_t i = 0; i < RT_NISA && best == RT_NISA; i++)
    if (rt_isa_available(rt_isas[i])) best = i;
  ASSERT(best < RT_NISA);
  ASSERTF(!strcmp(isa, rt_isas[best]), "dispatched %s, but %s is available", isa, rt_isas[best]);
  ASSERT(rt_isa_available("portable"));
  /* The dispatched kernels are that table's, pair by pair. */
  for (int dt = 0; dt < COLLIE_DTYPE_COUNT_; dt++)
    for (int op = 0; op < COLLIE_OP_COUNT_; op++)
      ASSERT(collie__reduce_kernel((collie_dtype_t)dt, (collie_op_t)op) ==
             collie__reduce_kernel_isa((collie_dtype_t)dt, (collie_op_t)op, isa));
  /* The tables are distinct code. */
  if (rt_isa_available("avx2"))
    ASSERT(collie__reduce_kernel_isa(COLLIE_FLOAT32, COLLIE_SUM, "avx2") !=
           collie__reduce_kernel_isa(COLLIE_FLOAT32, COLLIE_SUM, "portable"));
  /* Bad names. */
  ASSERT(collie__reduce_kernel_isa(COLLIE_FLOAT32, COLLIE_SUM, NULL) == NULL);
  ASSERT(collie__reduce_kernel_isa(COLLIE_FLOAT32, COLLIE_SUM, "") == NULL);
  ASSERT(collie__reduce_kernel_isa(COLLIE_FLOAT32, COLLIE_SUM, "sse9") == NULL);
  ASSERT(collie__reduce_kernel_isa(COLLIE_FLOAT32, COLLIE_SUM, "AVX2") == NULL);
  ASSERT(collie__reduce_kernel_isa(COLLIE_FLOAT32, COLLIE_SUM, "avx2 ") == NULL);
  ASSERT(collie__reduce_kernel_isa(COLLIE_FLOAT32, COLLIE_BAND, "portable") == NULL);
#ifdef RT_X86_TABLES
  /* What the kernel says this CPU (and OS) can do, read independently. (A
   * build with -DCOLLIE_REDUCE_PORTABLE_ONLY has no x86 tables at all.) */
  int avx2 = rt_cpu_flag("avx2"), fma = rt_cpu_flag("fma"), f16c = rt_cpu_flag("f16c");
  int a512 = rt_cpu_flag("avx512f"), bw = rt_cpu_flag("avx512bw"), vl = rt_cpu_flag("avx512vl"),
      dq = rt_cpu_flag("avx512dq");
  if (avx2 >= 0) {
    int want2 = avx2 && fma && f16c, want512 = want2 && a512 && bw && vl && dq;
    ASSERTF(rt_isa_available("avx2") == want2, "avx2 table %s, cpuinfo avx2 %d fma %d f16c %d",
            rt_isa_available("avx2") ? "offered" : "not offered", avx2, fma, f16c);
    ASSERTF(rt_isa_available("avx512") == want512,
            "avx512 table %s, cpuinfo f %d bw %d vl %d dq %d",
            rt_isa_available("avx512") ? "offered" : "not offered", a512, bw, vl, dq);
  }
#endif
}

/* ---- First use from many threads at once ----------------------------------------- */

#define RT_THREADS 8
static pthread_barrier_t rt_barrier;

struct rt_thread_out {
  collie__reduce_fn fn;
  const char *isa;
  float sum;
};

static void *
rt_thread_main(void *arg)
{
  struct rt_thread_out *out = arg;
  pthread_barrier_wait(&rt_barrier);
  out->fn = collie__reduce_kernel(COLLIE_FLOAT32, COLLIE_SUM);
  out->isa = collie__reduce_isa();
  float c[37], a[37];
  for (int i = 0; i < 37; i++) c[i] = (float)i, a[i] = 0.5f;
  out->fn(c, a, 37);
  out->sum = 0;
  for (int i = 0; i < 37; i++) out->sum += c[i];
  return NULL;
}

TEST_IMPL(reduce_isa_threads)
{
  /* No reduce call has run in this process yet (each test is a fresh
   * process), so the threads race on the very first lookup. */
  pthread_t th[RT_THREADS];
  struct rt_thread_out out[RT_THREADS];
  ASSERT(pthread_barrier_init(&rt_barrier, NULL, RT_THREADS) == 0);
  for (int i = 0; i < RT_THREADS; i++)
    ASSERT(pthread_create(&th[i], NULL, rt_thread_main, &out[i]) == 0);
  for (int i = 0; i < RT_THREADS; i++) ASSERT(pthread_join(th[i], NULL) == 0);
  pthread_barrier_destroy(&rt_barrier);
  for (int i = 0; i < RT_THREADS; i++) {
    ASSERT(out[i].fn == out[0].fn && out[i].fn != NULL);
    ASSERT(out[i].isa == out[0].isa);
    ASSERT(out[i].sum == 36 * 37 / 2 + 37 * 0.5f);
  }
  ASSERT(out[0].fn == collie__reduce_kernel(COLLIE_FLOAT32, COLLIE_SUM));
  ASSERT(!strcmp(out[0].isa, collie__reduce_isa()));
}

/* collie__reduce_into: dst = a op b in tiles (4 KiB) at every element size,
 * for lengths around the tile boundaries, into a separate buffer and in
 * place (dst == a). Expected values are computed here element by element:
 * SUM wraps for the integers; for float16, MAX of positive finite values,
 * whose order is the order of their bit patterns. */
static uint64_t
rt_into_expect(collie_dtype_t dt, uint64_t x, uint64_t y)
{
  switch (dt) {
  case COLLIE_UINT8:
    return (uint8_t)(x + y);
  case COLLIE_UINT32:
    return (uint32_t)(x + y);
  case COLLIE_UINT64:
    return x + y;
  default: /* COLLIE_FLOAT16, MAX */
    return x > y ? x : y;
  }
}

TEST_IMPL(reduce_into_tiles)
{
  static const collie_dtype_t dts[] = {COLLIE_UINT8, COLLIE_FLOAT16, COLLIE_UINT32, COLLIE_UINT64};
  for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
    collie_dtype_t dt = dts[d];
    size_t es = rt_size(dt), per = 4096 / es;
    collie__reduce_fn fn =
        collie__reduce_kernel(dt, dt == COLLIE_FLOAT16 ? COLLIE_MAX : COLLIE_SUM);
    ASSERT(fn != NULL);
    size_t lens[] = {0, 1, per - 1, per, per + 1, 3 * per + 7};
    for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
      size_t n = lens[li], bytes = n * es + 1;
      unsigned char *a = malloc(bytes), *b = malloc(bytes), *a0 = malloc(bytes),
                    *dst = malloc(bytes);
      ASSERT(a && b && a0 && dst);
      for (size_t i = 0; i < n; i++) {
        uint64_t x = (i * 2654435761u) >> 3, y = (i * 40503u + 17) >> 1;
        if (dt == COLLIE_FLOAT16) { /* positive finite halves */
          x %= 0x7c00;
          y %= 0x7c00;
        }
        rt_store_u(a + i * es, es, x);
        rt_store_u(b + i * es, es, y);
      }
      memcpy(a0, a, n * es);
      for (int in_place = 0; in_place < 2; in_place++) {
        unsigned char *out = in_place ? a : dst;
        collie__reduce_into(fn, out, a, b, n, es);
        for (size_t i = 0; i < n; i++) {
          uint64_t want = rt_into_expect(dt, rt_load_u(a0 + i * es, es), rt_load_u(b + i * es, es));
          ASSERTF(rt_load_u(out + i * es, es) == want,
                  "dtype %d, n %zu, %s: element %zu is %llx, want %llx", (int)dt, n,
                  in_place ? "in place" : "into dst", i,
                  (unsigned long long)rt_load_u(out + i * es, es), (unsigned long long)want);
        }
        if (!in_place) ASSERT(memcmp(a, a0, n * es) == 0); /* a is only read */
      }
      free(a);
      free(b);
      free(a0);
      free(dst);
    }
  }
}

/* The compressed allreduce's bulk conversions (src/reduce/wire.c) give
 * exactly the scalar conversions' bits, on whichever path this CPU takes
 * (8 lanes at a time and the tail), for every 16-bit value, its midpoints,
 * random float32 patterns, infinities and NaNs; decode_add adds in float32. */
TEST_IMPL(reduce_wire_bulk)
{
  enum { N = 65536 * 3 + 5 }; /* not a multiple of 8: the tail runs too */
  float *f = malloc(N * sizeof(float)), *back = malloc(N * sizeof(float));
  float *acc = malloc(N * sizeof(float));
  uint16_t *h = malloc(N * sizeof(uint16_t));
  ASSERT(f && back && acc && h);
  static const int wires[] = {COLLIE_WIRE_FLOAT16, COLLIE_WIRE_BFLOAT16};
  for (int wi = 0; wi < 2; wi++) {
    int wire = wires[wi];
    uint32_t rng = 12345;
    for (size_t i = 0; i < N; i++) {
      uint32_t bits;
      if (i < 65536) { /* every 16-bit value, widened */
        bits = wire == COLLIE_WIRE_FLOAT16 ? rt_fbits(collie__half_to_float((uint16_t)i))
                                           : (uint32_t)i << 16;
      } else if (i < 2 * 65536) { /* halfway to the next one: ties */
        bits = wire == COLLIE_WIRE_FLOAT16 ? rt_fbits(collie__half_to_float((uint16_t)i)) + 0x1000u
                                           : ((uint32_t)i << 16) + 0x8000u;
      } else {
        rng = rng * 1664525u + 1013904223u;
        bits = rng;
      }
      memcpy(&f[i], &bits, sizeof(bits));
      acc[i] = (float)(i % 97) - 48.5f;
    }
    collie__wire_encode(wire, h, f, N);
    for (size_t i = 0; i < N; i++) {
      uint16_t want =
          wire == COLLIE_WIRE_FLOAT16 ? collie__float_to_half(f[i]) : collie__float_to_bf16(f[i]);
      ASSERTF(h[i] == want, "wire %d encode [%zu] %08x -> %04x, scalar %04x (isa %s)", wire, i,
              rt_fbits(f[i]), h[i], want, collie__reduce_isa());
    }
    collie__wire_decode(wire, back, h, N);
    float *sum = malloc(N * sizeof(float));
    ASSERT(sum);
    memcpy(sum, acc, N * sizeof(float));
    collie__wire_decode_add(wire, sum, h, N);
    for (size_t i = 0; i < N; i++) {
      float want =
          wire == COLLIE_WIRE_FLOAT16 ? collie__half_to_float(h[i]) : collie__bf16_to_float(h[i]);
      if (isnan(want)) {
        ASSERTF(isnan(back[i]) && isnan(sum[i]), "wire %d decode [%zu] %04x: NaN lost", wire, i,
                h[i]);
        continue;
      }
      ASSERTF(rt_fbits(back[i]) == rt_fbits(want), "wire %d decode [%zu] %04x -> %08x, scalar %08x",
              wire, i, h[i], rt_fbits(back[i]), rt_fbits(want));
      float s = acc[i] + want;
      ASSERTF(rt_fbits(sum[i]) == rt_fbits(s), "wire %d decode_add [%zu]: %a, expected %a", wire, i,
              sum[i], s);
    }
    free(sum);
  }
  free(f);
  free(back);
  free(acc);
  free(h);
}
