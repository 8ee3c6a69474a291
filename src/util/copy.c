/* copy.c - copies of whole blocks into buffers the caller reads later, if at
 * all: non-temporal stores from COLLIE__COPY_NT_MIN bytes up.
 *
 * A large copy with ordinary stores reads every destination line before it
 * writes it (the cache allocates on write), a third stream of memory traffic
 * on top of the read and the write. Non-temporal stores skip that read and
 * leave the cache to the source. Measured on the 2-core reference machine
 * (one thread, destination cold): 32 MiB 4.8-5.9 GB/s with glibc's memcpy,
 * 9.4-12.8 with these stores; 2 MiB 13.8 vs 19.3 (source warm). glibc
 * switches to them itself only above three quarters of the last-level
 * cache per thread, which a VM may report as hundreds of MiB. Below the
 * threshold the destination may still be in cache when the caller reads it,
 * and memcpy is faster there (256 KiB: 40 vs 20 GB/s). */
#include <string.h>

#include "util/util.h"

#if defined(__x86_64__)
#include <emmintrin.h>

void
collie__copy_stream(void *dst, const void *src, size_t n)
{
  char *d = dst;
  const char *s = src;
  /* Align the destination to a cache line: whole lines go out at once. */
  size_t head = (size_t)(-(uintptr_t)d & 63);
  if (head > n) head = n;
  memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  for (; n >= 64; n -= 64, d += 64, s += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
    __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
    _mm_stream_si128((__m128i *)(void *)d, a);
    _mm_stream_si128((__m128i *)(void *)(d + 16), b);
    _mm_stream_si128((__m128i *)(void *)(d + 32), c);
    _mm_stream_si128((__m128i *)(void *)(d + 48), e);
  }
  memcpy(d, s, n);
  /* The stores are weakly ordered: make them visible before whatever
   * publishes the copy (a flag another rank reads, a completed request). */
  _mm_sfence();
}

#else

void
collie__copy_stream(void *dst, const void *src, size_t n)
{
  memcpy(dst, src, n);
}

#endif

void
collie__copy(void *dst, const void *src, size_t n)
{
  collie__copy_part(dst, src, n, n);
}
