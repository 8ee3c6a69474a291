/*
 * kernels.cu - collie's device code (issue 21): the reduction kernels of the
 * direct CUDA path, one per (dtype, op), compiled by nvcc at build time to
 * PTX that is embedded in libcollie (CMakeLists.txt) and loaded with
 * cuModuleLoadData the first time a context needs it. Nothing here is
 * linked: the library still depends on libc and pthreads only.
 *
 * collie_reduce_<dtype>_<op>(dsts, nd, srcs, ns, n, div): for i < n, every
 * dsts[k][i] (k < nd) = srcs[0][i] op srcs[1][i] op ... op srcs[ns-1][i],
 * combined left to right in the order given (one order per element, so the
 * bits never depend on the launch), then divided by div when div > 1 (AVG's
 * last pass). A destination may be one of the sources: every element is
 * read, then written, by one thread. With one source it is a copy to nd
 * places (what broadcast and allgather use on one GPU).
 *
 * The arithmetic is the CPU kernels' (src/reduce/kernels_gen.h): integer SUM
 * and PROD wrap (done unsigned), MIN and MAX propagate NaN, fp16 and bf16
 * are widened to fp32, combined, and rounded to nearest even after every
 * combine, as the host path does; AVG divides in the dtype's division type
 * (truncating for integers).
 *
 * Each thread moves 16 bytes per source and step when every pointer is
 * 16-byte aligned (the host checks), else one element; a grid-stride loop
 * covers any n with any grid.
 *
 * collie_copy_list(copies, n, aligned) (in the uint8 module): copy k < n,
 * blockIdx.y = k, moves copies.bytes[k] bytes from copies.src[k] to
 * copies.dst[k] (16 at a time when every pointer is 16-byte aligned, then
 * the tail byte by byte): the many small copies of a gather, scatter or
 * alltoall run by one rank on one GPU, in one launch instead of one driver
 * call each.
 */
#include <stdint.h>

#define COLLIE_KERNEL_SRCS 8

struct collie_ptrs {
  const void *p[COLLIE_KERNEL_SRCS];
};

__device__ __forceinline__ float
h2f(uint16_t h)
{
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

__device__ __forceinline__ uint16_t
f2h(float f)
{
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

__device__ __forceinline__ float
bf2f(uint16_t b)
{
  return __uint_as_float((uint32_t)b << 16);
}

__device__ __forceinline__ uint16_t
f2bf(float f)
{
  uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u); /* quiet NaN */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* Storage S, compute type T, arithmetic type U (unsigned for integers, so
 * SUM and PROD wrap), division type D. */
template <class S, class TT, class UU, class DD>
struct Plain {
  typedef S Store;
  typedef TT T;
  typedef UU U;
  typedef DD D;
  static __device__ __forceinline__ T w(S s) { return (T)s; }
  static __device__ __forceinline__ S n(T t) { return (S)t; }
};
struct Half {
  typedef uint16_t Store;
  typedef float T, U, D;
  static __device__ __forceinline__ T w(Store s) { return h2f(s); }
  static __device__ __forceinline__ Store n(T t) { return f2h(t); }
};
struct BF16 {
  typedef uint16_t Store;
  typedef float T, U, D;
  static __device__ __forceinline__ T w(Store s) { return bf2f(s); }
  static __device__ __forceinline__ Store n(T t) { return f2bf(t); }
};

struct Sum {
  template <class K>
  static __device__ __forceinline__ typename K::T f(typename K::T a, typename K::T b)
  {
    return (typename K::T)((typename K::U)a + (typename K::U)b);
  }
};
struct Prod {
  template <class K>
  static __device__ __forceinline__ typename K::T f(typename K::T a, typename K::T b)
  {
    return (typename K::T)((typename K::U)a * (typename K::U)b);
  }
};
/* b when it wins or is NaN, else a: NaN on either side gives NaN. */
struct Min {
  template <class K>
  static __device__ __forceinline__ typename K::T f(typename K::T a, typename K::T b)
  {
    return (b < a || b != b) ? b : a;
  }
};
struct Max {
  template <class K>
  static __device__ __forceinline__ typename K::T f(typename K::T a, typename K::T b)
  {
    return (b > a || b != b) ? b : a;
  }
};
struct Band {
  template <class K>
  static __device__ __forceinline__ typename K::T f(typename K::T a, typename K::T b)
  {
    return a & b;
  }
};
struct Bor {
  template <class K>
  static __device__ __forceinline__ typename K::T f(typename K::T a, typename K::T b)
  {
    return a | b;
  }
};
struct Bxor {
  template <class K>
  static __device__ __forceinline__ typename K::T f(typename K::T a, typename K::T b)
  {
    return a ^ b;
  }
};

template <class K, class OP>
__device__ __forceinline__ typename K::Store
combine(typename K::Store a, typename K::Store b)
{
  return K::n(OP::template f<K>(K::w(a), K::w(b)));
}

template <class K>
__device__ __forceinline__ typename K::Store
divide(typename K::Store a, int div)
{
  return K::n((typename K::T)((typename K::D)K::w(a) / (typename K::D)div));
}

template <class K, class OP>
__device__ void
reduce_n(collie_ptrs d, int nd, collie_ptrs s, int ns, unsigned long long n, int div)
{
  typedef typename K::Store S;
  const int V = 16 / sizeof(S);
  union Vec {
    uint4 u;
    S e[16 / sizeof(S)];
  };
  int aligned = 1;
#pragma unroll
  for (int k = 0; k < COLLIE_KERNEL_SRCS; k++) {
    if (k < ns) aligned &= ((uintptr_t)s.p[k] & 15) == 0;
    if (k < nd) aligned &= ((uintptr_t)d.p[k] & 15) == 0;
  }
  unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long nv = aligned ? n / V : 0;
  for (unsigned long long v = tid; v < nv; v += stride) {
    Vec acc, x;
    acc.u = ((const uint4 *)s.p[0])[v];
    for (int k = 1; k < ns; k++) { /* not unrolled: 58 kernels stay small */
      x.u = ((const uint4 *)s.p[k])[v];
#pragma unroll
      for (int j = 0; j < V; j++) acc.e[j] = combine<K, OP>(acc.e[j], x.e[j]);
    }
    if (div > 1)
#pragma unroll
      for (int j = 0; j < V; j++) acc.e[j] = divide<K>(acc.e[j], div);
#pragma unroll
    for (int k = 0; k < COLLIE_KERNEL_SRCS; k++)
      if (k < nd) ((uint4 *)d.p[k])[v] = acc.u;
  }
  for (unsigned long long i = nv * V + tid; i < n; i += stride) {
    S acc = ((const S *)s.p[0])[i];
    for (int k = 1; k < ns; k++) acc = combine<K, OP>(acc, ((const S *)s.p[k])[i]);
    if (div > 1) acc = divide<K>(acc, div);
    for (int k = 0; k < nd; k++) ((S *)d.p[k])[i] = acc;
  }
}

#define COLLIE_KERNEL(NAME, K, OP)                                                                 \
  extern "C" __global__ void __launch_bounds__(512)                                                \
      collie_reduce_##NAME(collie_ptrs d, int nd, collie_ptrs s, int ns, unsigned long long n,     \
                           int div)                                                                \
  {                                                                                                \
    reduce_n<K, OP>(d, nd, s, ns, n, div);                                                         \
  }

#define COLLIE_KERNELS_ARITH(NAME, K)                                                              \
  COLLIE_KERNEL(NAME##_sum, K, Sum)                                                                \
  COLLIE_KERNEL(NAME##_prod, K, Prod)                                                              \
  COLLIE_KERNEL(NAME##_min, K, Min)                                                                \
  COLLIE_KERNEL(NAME##_max, K, Max)
#define COLLIE_KERNELS_INT(NAME, K)                                                                \
  COLLIE_KERNELS_ARITH(NAME, K)                                                                    \
  COLLIE_KERNEL(NAME##_band, K, Band)                                                              \
  COLLIE_KERNEL(NAME##_bor, K, Bor)                                                                \
  COLLIE_KERNEL(NAME##_bxor, K, Bxor)

typedef Plain<int8_t, int8_t, unsigned, int> I8;
typedef Plain<uint8_t, uint8_t, unsigned, unsigned> U8;
typedef Plain<int32_t, int32_t, uint32_t, int32_t> I32;
typedef Plain<uint32_t, uint32_t, uint32_t, uint32_t> U32;
typedef Plain<int64_t, int64_t, uint64_t, int64_t> I64;
typedef Plain<uint64_t, uint64_t, uint64_t, uint64_t> U64;
typedef Plain<float, float, float, float> F32;
typedef Plain<double, double, double, double> F64;

/* One dtype per module (COLLIE_KERNEL_SET: its collie_dtype_t value), so a
 * context JIT-compiles only the dtypes it uses (~0.25 s each on first use;
 * the driver caches the result); without it, all of them. */
#ifndef COLLIE_KERNEL_SET
#define COLLIE_KERNEL_ALL 1
#define COLLIE_KERNEL_SET -1
#else
#define COLLIE_KERNEL_ALL 0
#endif
#if COLLIE_KERNEL_ALL || COLLIE_KERNEL_SET == 0
COLLIE_KERNELS_INT(int8, I8)
#endif
#if COLLIE_KERNEL_ALL || COLLIE_KERNEL_SET == 1
COLLIE_KERNELS_INT(uint8, U8)

#define COLLIE_COPY_LIST 32 /* cuda_kernels.c's COPY_LIST */

struct collie_copies {
  const void *src[COLLIE_COPY_LIST];
  void *dst[COLLIE_COPY_LIST];
  unsigned long long bytes[COLLIE_COPY_LIST];
};

extern "C" __global__ void
collie_copy_list(struct collie_copies c, int n, int aligned)
{
  int k = blockIdx.y;
  if (k >= n) return;
  const unsigned char *s = (const unsigned char *)c.src[k];
  unsigned char *d = (unsigned char *)c.dst[k];
  unsigned long long len = c.bytes[k], body = 0;
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  if (aligned) {
    body = len / 16;
    const uint4 *s4 = (const uint4 *)s;
    uint4 *d4 = (uint4 *)d;
    for (unsigned long long j = i; j < body; j += stride) d4[j] = s4[j];
    body *= 16;
  }
  for (unsigned long long j = body + i; j < len; j += stride) d[j] = s[j];
}
#endif
#if COLLIE_KERNEL_ALL || COLLIE_KERNEL_SET == 2
COLLIE_KERNELS_INT(int32, I32)
#endif
#if COLLIE_KERNEL_ALL || COLLIE_KERNEL_SET == 3
COLLIE_KERNELS_INT(uint32, U32)
#endif
#if COLLIE_KERNEL_ALL || COLLIE_KERNEL_SET == 4
COLLIE_KERNELS_INT(int64, I64)
#endif
#if COLLIE_KERNEL_ALL || COLLIE_KERNEL_SET == 5
COLLIE_KERNELS_INT(uint64, U64)
#endif
#if COLLIE_KERNEL_ALL || COLLIE_KERNEL_SET == 6
COLLIE_KERNELS_ARITH(float16, Half)
#endif
#if COLLIE_KERNEL_ALL || COLLIE_KERNEL_SET == 7
COLLIE_KERNELS_ARITH(bfloat16, BF16)
#endif
#if COLLIE_KERNEL_ALL || COLLIE_KERNEL_SET == 8
COLLIE_KERNELS_ARITH(float32, F32)
#endif
#if COLLIE_KERNEL_ALL || COLLIE_KERNEL_SET == 9
COLLIE_KERNELS_ARITH(float64, F64)
#endif
