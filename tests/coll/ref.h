/*
 * ref.h - test data and an independent serial reference for reductions.
 * Inputs are small integers (exact in every dtype, fp16 and bf16 included),
 * chosen per (rank, index, op) so that sums and products stay exact; the
 * reference combines them in double or in the wrapped integer type, with its
 * own conversions (_Float16, bf16 by truncating float bits), never with the
 * library's kernels.
 */
#ifndef COLLIE_TEST_REF_H
#define COLLIE_TEST_REF_H

#include <stddef.h>
#include <stdint.h>

#include "collie.h"

/* The input value of rank r at index i for op. */
int64_t ref_value(int r, size_t i, collie_op_t op);
/* Stores v into element i of buf of dtype. */
void ref_store(void *buf, size_t i, collie_dtype_t dtype, int64_t v);
/* Fills n elements of buf with rank r's input. */
void ref_fill(void *buf, size_t n, collie_dtype_t dtype, collie_op_t op, int r);
/* Checks n elements of buf against the reduction over p ranks; returns the
 * first wrong index, or -1. Describes the mismatch into why. */
long ref_check(const void *buf, size_t n, collie_dtype_t dtype, collie_op_t op, int p, char *why,
               size_t whylen);
/* As ref_check for elements first..first+n-1 of the ranks' inputs (buf[0] is
 * element `first`). */
long ref_check_at(const void *buf, size_t first, size_t n, collie_dtype_t dtype, collie_op_t op,
                  int p, char *why, size_t whylen);
/* As ref_fill for elements first..first+n-1 of rank r's input. */
void ref_fill_at(void *buf, size_t first, size_t n, collie_dtype_t dtype, collie_op_t op, int r);

/* Data-movement pattern: the value that source `src` puts at index i (small
 * integers, exact in every dtype), and a whole block of them. */
int64_t ref_pattern(int src, size_t i);
void ref_fill_pattern(void *buf, size_t n, collie_dtype_t dtype, int src);
/* Compares n elements at got with src's pattern: -1, or the first bad index. */
long ref_pattern_diff(const void *got, size_t n, collie_dtype_t dtype, int src);
int ref_is_float(collie_dtype_t dtype);

#endif
