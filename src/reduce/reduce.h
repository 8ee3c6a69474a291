/*
 * reduce.h - element-wise reduction kernels, one per (dtype, op).
 *
 * A kernel combines n elements of `in` into `inout`: inout[i] = inout[i] op in[i].
 * The buffers may be unaligned and must not overlap (unless equal). fp16 and
 * bf16 are widened to fp32, combined, and rounded to nearest even. Integer SUM
 * and PROD wrap (computed as unsigned). MIN/MAX on floats propagate NaN: if
 * either operand is NaN the result is NaN. AVG combines as SUM; the caller
 * finishes with collie__reduce_avg_finish once, on the full sum.
 * BAND/BOR/BXOR exist only for integer dtypes.
 *
 * Every kernel exists once per instruction set (portable, AVX2, AVX-512),
 * generated from one table (kernels_gen.h); the best set this CPU runs is
 * picked once, at the first lookup (isa.c). All sets give the same results.
 */
#ifndef COLLIE_REDUCE_H
#define COLLIE_REDUCE_H

#include <stddef.h>

#include "collie.h"

typedef void (*collie__reduce_fn)(void *inout, const void *in, size_t n);

/* The kernel for (dtype, op), or NULL when the pair is not supported (bitwise
 * ops on floating types) or either value is out of range. Thread-safe, never
 * blocks; the pointer stays valid for the life of the process. */
collie__reduce_fn collie__reduce_kernel(collie_dtype_t dtype, collie_op_t op);

/* The instruction set whose kernels collie__reduce_kernel hands out:
 * "avx512", "avx2" or "portable". Chosen from the CPU at the first call of
 * either function (thread-safe), then fixed for the process. For logs and
 * benchmarks. Never NULL. */
const char *collie__reduce_isa(void);

/* For tests and benchmarks only: the kernel for (dtype, op) from the table of
 * one named instruction set ("avx512", "avx2", "portable"), or NULL when the
 * name is unknown or NULL, this build or CPU cannot run that set, or the pair
 * is not supported. So every table the machine can run can be checked
 * against a reference, whichever one the dispatcher picked. */
collie__reduce_fn collie__reduce_kernel_isa(collie_dtype_t dtype, collie_op_t op, const char *isa);

/* dst = a op b over n elements of es bytes with kernel fn (from
 * collie__reduce_kernel), in L1-sized tiles: memory traffic of a fused
 * three-operand kernel (tiled.c). dst may equal a (then it is fn(dst, b));
 * otherwise dst must overlap neither a nor b, and b must not overlap a. */
void collie__reduce_into(collie__reduce_fn fn, void *dst, const void *a, const void *b, size_t n,
                         size_t es);

/* Divides n elements of buf by p in place: floats as x / p (fp16/bf16 in fp32,
 * rounded to nearest even), integers as C division (truncated toward zero). */
void collie__reduce_avg_finish(void *buf, size_t n, collie_dtype_t dtype, int p);

/* fp16 / bf16 <-> fp32, round to nearest even, NaN and infinities preserved. */
float collie__half_to_float(unsigned short h);
unsigned short collie__float_to_half(float f);
float collie__bf16_to_float(unsigned short h);
unsigned short collie__float_to_bf16(float f);

/* The compressed allreduce's wire (wire.c): wire is COLLIE_WIRE_FLOAT16 or
 * COLLIE_WIRE_BFLOAT16, dst/src hold n 16-bit values. encode rounds to
 * nearest even (fp16 past 65504: infinity); decode is exact; decode_add
 * adds each decoded value to acc[i] in float32. */
void collie__wire_encode(int wire, void *dst, const float *src, size_t n);
void collie__wire_decode(int wire, float *dst, const void *src, size_t n);
void collie__wire_decode_add(int wire, float *acc, const void *src, size_t n);

#endif /* COLLIE_REDUCE_H */
