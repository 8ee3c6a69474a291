/*
 * half.c - the exported fp16 / bf16 <-> fp32 conversions of reduce.h.
 *
 * The conversions themselves are inline in kernels_int.h so that the kernels
 * can inline them into their loops; these wrappers give the rest of the
 * library (tests, tools, the Python binding's checks) one out-of-line entry.
 */
#include <stdint.h>

#include "reduce/reduce.h"
#include "reduce/kernels_int.h"

/* The inline widenings leave a signalling NaN signalling (the kernels quiet
 * it on the way back); callers of the exported ones get a quiet NaN. */
static float
half_quiet(float f)
{
  uint32_t u = reduce_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) u |= 0x00400000u;
  return reduce_f32_from_bits(u);
}

float
collie__half_to_float(unsigned short h)
{
  return half_quiet(reduce_h2f(h));
}

unsigned short
collie__float_to_half(float f)
{
  return reduce_f2h(f);
}

float
collie__bf16_to_float(unsigned short h)
{
  return half_quiet(reduce_bf2f(h));
}

unsigned short
collie__float_to_bf16(float f)
{
  return reduce_f2bf(f);
}
