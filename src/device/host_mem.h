/*
 * host_mem.h - memory that is host memory by where it lies (host_mem.c),
 * answered inline: every collective asks it of its buffers before anything
 * else (api.c), so the answer is a few loads and compares, no call.
 */
#ifndef COLLIE_DEVICE_HOST_MEM_H
#define COLLIE_DEVICE_HOST_MEM_H

#include <stdatomic.h>
#include <stdint.h>

/* The program's image [image_lo, image_hi) and where the brk heap starts
 * (it ends at the current break, read each time: the heap also shrinks);
 * all 0 when unknown. Set once (ready), by collie__host_span_init. */
struct collie__host_span {
  atomic_int ready;
  uintptr_t image_lo, image_hi, heap_lo;
};
extern struct collie__host_span collie__host_span;
void collie__host_span_init(void);

/* glibc's current break, which sbrk(0) returns: read directly, it is one
 * load instead of a call (weak: another libc has none, and sbrk(0)
 * answers). */
extern void *__curbrk __attribute__((weak));
uintptr_t collie__host_brk_slow(void);

static inline uintptr_t
collie__host_brk(void)
{
  if (&__curbrk && __curbrk) return (uintptr_t)__curbrk;
  return collie__host_brk_slow();
}

static inline int
collie__host_plain_at(uintptr_t a, uintptr_t brk)
{
  const struct collie__host_span *s = &collie__host_span;
  return !a || (a >= s->image_lo && a < s->image_hi) || (s->heap_lo && a >= s->heap_lo && a < brk);
}

/* Whether a and b (a collective's two buffers; NULL counts) lie in the
 * program's image or the brk heap: memory that is never a device's, known
 * without the driver or the loader. 0 says nothing: ask collie__cuda_live
 * and collie__cuda_is_device. The first call reads /proc/self/maps once. */
static inline int
collie__host_mem_plain_both(const void *a, const void *b)
{
  if (!atomic_load_explicit(&collie__host_span.ready, memory_order_acquire))
    collie__host_span_init();
  uintptr_t brk = collie__host_brk();
  return collie__host_plain_at((uintptr_t)a, brk) &&
         (a == b || collie__host_plain_at((uintptr_t)b, brk));
}

/* The same for one buffer. */
int collie__host_mem_plain(const void *p);

#endif /* COLLIE_DEVICE_HOST_MEM_H */
