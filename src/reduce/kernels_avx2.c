/*
 * kernels_avx2.c - the kernel table for AVX2 + FMA + F16C: the template
 * kernels_gen.h compiled with those instructions enabled on every kernel
 * (256-bit vectors; fp16 through vcvtph2ps / vcvtps2ph, 8 lanes at a time).
 *
 * The ISA is set per function (target attribute) rather than per file, so
 * the build needs no special flags and nothing else in this file can leak
 * AVX2 code into paths that run before isa.c has checked the CPU. Only
 * isa.c calls into this table, and only after that check.
 */
#include "reduce/kernels_int.h"

#ifdef REDUCE_HAVE_X86
#define REDUCE_GEN_ISA avx2
#define REDUCE_GEN_TARGET __attribute__((target("avx2,fma,f16c")))
#define REDUCE_GEN_F16C 8
#include "reduce/kernels_gen.h"
#else
/* Not x86-64: isa.c offers the portable table only. */
typedef int reduce_avx2_unused;
#endif
