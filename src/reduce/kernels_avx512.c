/*
 * kernels_avx512.c - the kernel table for AVX-512 (F, BW, VL, DQ) plus AVX2,
 * FMA and F16C: the template kernels_gen.h compiled with 512-bit vectors
 * (BW for the 8- and 16-bit lanes of int8 and bf16, DQ for 64-bit integer
 * multiplies; fp16 converts 16 lanes at a time).
 *
 * As in kernels_avx2.c, the ISA is a per-function target attribute, and only
 * isa.c calls into this table, after checking the CPU.
 */
#include "reduce/kernels_int.h"

#ifdef REDUCE_HAVE_X86
#define REDUCE_GEN_ISA avx512
#define REDUCE_GEN_TARGET                                                                          \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define REDUCE_GEN_F16C 16
#include "reduce/kernels_gen.h"
#else
/* Not x86-64: isa.c offers the portable table only. */
typedef int reduce_avx512_unused;
#endif
