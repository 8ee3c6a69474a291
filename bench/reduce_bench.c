/*
 * reduce_bench - memory bandwidth of the reduction kernels (src/reduce), per
 * instruction set, against a STREAM-add loop compiled in this file.
 *
 * Each kernel runs c[i] = c[i] op a[i] over arrays of -s bytes (default
 * 64 MiB, far beyond L2, so the loop streams from L3 or DRAM), -r times
 * (default 20); the best (shortest) repetition counts, as in STREAM. Two
 * bandwidths are printed (GB/s = 1e9 B/s):
 *   stream_GBps  STREAM's convention: bytes read + written, 3 arrays per
 *                pass (read c, read a, write c); write-allocate not counted.
 *   buf_GBps     one buffer per second (bytes / time): what a reduction
 *                step of an allreduce moves, comparable to its algbw.
 * The reference is STREAM's add, c[i] = a[i] + b[i] on float32 (3 arrays:
 * the same traffic as c += a), compiled here once per ISA with the same
 * target attributes the library uses; a float32 SUM kernel that is as fast
 * as the memory allows scores a ratio near 1, or above: STREAM's add writes
 * a third array, whose lines the CPU must also read before writing them
 * (write-allocate), while c += a writes lines it has just read. A second
 * reference, the plain loop c[i] += a[i] built the same way, has exactly the
 * kernel's traffic: the kernel's distance from it is the kernel's own cost.
 * ../shared/anchors/membw.c measures STREAM's add in its own program; see
 * bench/README.md.
 *
 * Every table the CPU can run is measured (collie__reduce_kernel_isa), not
 * only the one the library dispatches to, which is named in the header.
 * Not run in CI: timings depend on the machine and on what else runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collie.h"
#include "reduce/reduce.h"
#include "cli.h"

static const char *const bench_isas[] = {"avx512", "avx2", "portable"};
#define BENCH_NISA (sizeof bench_isas / sizeof bench_isas[0])

/* ---- STREAM add, per ISA --------------------------------------------------------------- */

typedef void (*bench_add_fn)(float *restrict c, const float *restrict a, const float *restrict b,
                             size_t n);
typedef void (*bench_acc_fn)(float *restrict c, const float *restrict a, size_t n);

/* The same loop three times, so that each ISA's kernels meet a reference
 * built with the same vector width. noinline keeps each a separate loop. */
#define BENCH_DEFINE_ADD(name, attr)                                                               \
  static __attribute__((noinline)) attr void name(float *restrict c, const float *restrict a,      \
                                                  const float *restrict b, size_t n)               \
  {                                                                                                \
    for (size_t i = 0; i < n; i++) c[i] = a[i] + b[i];                                             \
  }
#define BENCH_DEFINE_ACC(name, attr)                                                               \
  static __attribute__((noinline)) attr void name(float *restrict c, const float *restrict a,      \
                                                  size_t n)                                        \
  {                                                                                                \
    for (size_t i = 0; i < n; i++) c[i] += a[i];                                                   \
  }
#define BENCH_AVX2 __attribute__((target("avx2,fma,f16c")))
#define BENCH_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
BENCH_DEFINE_ADD(bench_add_portable, )
BENCH_DEFINE_ACC(bench_acc_portable, )
#if defined(__x86_64__) && defined(__GNUC__)
BENCH_DEFINE_ADD(bench_add_avx2, BENCH_AVX2)
BENCH_DEFINE_ACC(bench_acc_avx2, BENCH_AVX2)
BENCH_DEFINE_ADD(bench_add_avx512, BENCH_AVX512)
BENCH_DEFINE_ACC(bench_acc_avx512, BENCH_AVX512)
#endif

static bench_add_fn
bench_add_for(const char *isa)
{
#if defined(__x86_64__) && defined(__GNUC__)
  if (!strcmp(isa, "avx512")) return bench_add_avx512;
  if (!strcmp(isa, "avx2")) return bench_add_avx2;
#endif
  return bench_add_portable;
}

static bench_acc_fn
bench_acc_for(const char *isa)
{
#if defined(__x86_64__) && defined(__GNUC__)
  if (!strcmp(isa, "avx512")) return bench_acc_avx512;
  if (!strcmp(isa, "avx2")) return bench_acc_avx2;
#endif
  return bench_acc_portable;
}

/* ---- Timing and data ------------------------------------------------------------------- */

/* Values in [1, 1.5) in every dtype, so that no repetition of SUM or PROD
 * reaches a subnormal (slow on some CPUs) or leaves fp16's range (1.5^20 <
 * 65504). Integers: anything. */
static void
bench_fill(collie_dtype_t dt, void *buf, size_t n, unsigned seed)
{
  unsigned char *p = buf;
  for (size_t i = 0; i < n; i++) {
    unsigned r = (unsigned)(i * 2654435761u + seed);
    float f = 1.0f + (float)(r % 512) / 1024.0f;
    switch (dt) {
    case COLLIE_FLOAT16: {
      unsigned short h = collie__float_to_half(f);
      memcpy(p + 2 * i, &h, 2);
      break;
    }
    case COLLIE_BFLOAT16: {
      unsigned short h = collie__float_to_bf16(f);
      memcpy(p + 2 * i, &h, 2);
      break;
    }
    case COLLIE_FLOAT32:
      memcpy(p + 4 * i, &f, 4);
      break;
    case COLLIE_FLOAT64: {
      double d = f;
      memcpy(p + 8 * i, &d, 8);
      break;
    }
    default: {
      size_t sz = collie_dtype_size(dt);
      memcpy(p + sz * i, &r, sz < sizeof r ? sz : sizeof r);
      break;
    }
    }
  }
}

struct bench_row {
  const char *isa, *what;
  double best_s;
  size_t n;
};

static void
bench_print(const struct bench_row *r, size_t bytes)
{
  printf("%-9s %-16s %10.1f %12.2f %10.2f %9.3f\n", r->isa, r->what, r->best_s * 1e6,
         3.0 * (double)bytes / r->best_s / 1e9, (double)bytes / r->best_s / 1e9,
         (double)r->n / r->best_s / 1e9);
  fflush(stdout);
}

/* Best of reps of fn(c, a, n), after one warm-up call. */
static double
bench_kernel(collie__reduce_fn fn, void *c, const void *a, size_t n, int reps)
{
  double best = 1e30;
  fn(c, a, n);
  for (int r = 0; r < reps; r++) {
    double t0 = cli_now_s();
    fn(c, a, n);
    double t = cli_now_s() - t0;
    if (t < best) best = t;
  }
  return best;
}

static double
bench_stream_add(bench_add_fn fn, float *c, const float *a, const float *b, size_t n, int reps)
{
  double best = 1e30;
  fn(c, a, b, n);
  for (int r = 0; r < reps; r++) {
    double t0 = cli_now_s();
    fn(c, a, b, n);
    double t = cli_now_s() - t0;
    if (t < best) best = t;
  }
  return best;
}

static double
bench_stream_acc(bench_acc_fn fn, float *c, const float *a, size_t n, int reps)
{
  double best = 1e30;
  fn(c, a, n);
  for (int r = 0; r < reps; r++) {
    double t0 = cli_now_s();
    fn(c, a, n);
    double t = cli_now_s() - t0;
    if (t < best) best = t;
  }
  return best;
}

static void
bench_usage(const char *argv0)
{
  fprintf(stderr,
          "usage: %s [-s bytes] [-r reps] [-i isa]\n"
          "  -s  bytes per array, with K/M/G suffixes (default 64M)\n"
          "  -r  repetitions per kernel; the best counts (default 20)\n"
          "  -i  only this instruction set: avx512, avx2 or portable (default: all the CPU runs)\n",
          argv0);
}

int
main(int argc, char **argv)
{
  size_t bytes = 64u << 20;
  int reps = 20;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-s") && i + 1 < argc) {
      bytes = cli_size_arg("-s", argv[++i]);
    } else if (!strcmp(argv[i], "-r") && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "-i") && i + 1 < argc) {
      only = argv[++i];
    } else {
      bench_usage(argv[0]);
      return 2;
    }
  }
  if (bytes < 4096 || reps < 1) {
    bench_usage(argv[0]);
    return 2;
  }
  if (only && !collie__reduce_kernel_isa(COLLIE_FLOAT32, COLLIE_SUM, only)) {
    fprintf(stderr, "reduce_bench: instruction set \"%s\" is unknown or not supported here\n",
            only);
    return 2;
  }
  bytes &= ~(size_t)63; /* a whole number of every element size */

  void *c, *a, *b;
  if (posix_memalign(&c, 4096, bytes) || posix_memalign(&a, 4096, bytes) ||
      posix_memalign(&b, 4096, bytes)) {
    fprintf(stderr, "reduce_bench: cannot allocate 3 x %zu bytes\n", bytes);
    return 1;
  }
  memset(c, 0, bytes); /* first touch, so page faults stay out of the timings */
  memset(a, 0, bytes);
  memset(b, 0, bytes);

  printf("# reduce_bench: %zu bytes per array (%.1f MiB), best of %d, single thread\n", bytes,
         (double)bytes / 1048576.0, reps);
  printf("# dispatched ISA: %s\n", collie__reduce_isa());
  printf("# stream_GBps = 3 arrays (read c, read a, write c) per pass; buf_GBps = bytes/time\n");
  printf("%-9s %-16s %10s %12s %10s %9s\n", "isa", "kernel", "best_us", "stream_GBps", "buf_GBps",
         "Gelem/s");

  static const collie_dtype_t dts[] = {COLLIE_FLOAT16, COLLIE_BFLOAT16, COLLIE_FLOAT32,
                                       COLLIE_FLOAT64};
  static const collie_op_t ops[] = {COLLIE_SUM, COLLIE_PROD, COLLIE_MIN, COLLIE_MAX};
  double f32sum[BENCH_NISA] = {0}, add[BENCH_NISA] = {0}, acc[BENCH_NISA] = {0};
  double checksum = 0;
  for (size_t k = 0; k < BENCH_NISA; k++) {
    const char *isa = bench_isas[k];
    if (only && strcmp(only, isa)) continue;
    if (!collie__reduce_kernel_isa(COLLIE_FLOAT32, COLLIE_SUM, isa)) continue;

    /* The reference first, then the kernels. */
    size_t nf = bytes / 4;
    bench_fill(COLLIE_FLOAT32, a, nf, 1);
    bench_fill(COLLIE_FLOAT32, b, nf, 2);
    struct bench_row row = {isa, "stream-add f32", 0, nf};
    row.best_s = add[k] = bench_stream_add(bench_add_for(isa), c, a, b, nf, reps);
    bench_print(&row, bytes);
    checksum += ((float *)c)[nf / 3];
    bench_fill(COLLIE_FLOAT32, c, nf, 3);
    row.what = "loop c+=a f32";
    row.best_s = acc[k] = bench_stream_acc(bench_acc_for(isa), c, a, nf, reps);
    bench_print(&row, bytes);
    checksum += ((float *)c)[nf / 3];

    for (size_t d = 0; d < sizeof dts / sizeof dts[0] + 1; d++) {
      int int32 = d == sizeof dts / sizeof dts[0];
      collie_dtype_t dt = int32 ? COLLIE_INT32 : dts[d];
      size_t n = bytes / collie_dtype_size(dt);
      for (size_t o = 0; o < (int32 ? 1 : sizeof ops / sizeof ops[0]); o++) {
        collie__reduce_fn fn = collie__reduce_kernel_isa(dt, ops[o], isa);
        if (!fn) continue;
        bench_fill(dt, c, n, 3);
        bench_fill(dt, a, n, 4);
        char what[32];
        snprintf(what, sizeof what, "%s %s", collie_dtype_name(dt), collie_op_name(ops[o]));
        row.what = what;
        row.n = n;
        row.best_s = bench_kernel(fn, c, a, n, reps);
        if (dt == COLLIE_FLOAT32 && ops[o] == COLLIE_SUM) f32sum[k] = row.best_s;
        bench_print(&row, bytes);
        checksum += ((unsigned char *)c)[bytes / 3];
      }
    }
  }

  printf("# float32 sum bandwidth as a share of the reference loops' (same ISA, this process):\n");
  printf("#   %-9s %16s %16s\n", "isa", "vs stream-add", "vs loop c+=a");
  for (size_t k = 0; k < BENCH_NISA; k++) {
    if (f32sum[k] <= 0 || add[k] <= 0) continue;
    printf("#   %-9s %15.1f%% %15.1f%%%s\n", bench_isas[k], 100.0 * add[k] / f32sum[k],
           100.0 * acc[k] / f32sum[k],
           strcmp(bench_isas[k], collie__reduce_isa()) ? "" : "  (dispatched)");
  }
  printf("# checksum %g\n", checksum); /* keeps every result live */
  free(c);
  free(a);
  free(b);
  return 0;
}
