/*
 * host_mem.c - memory that is host memory by where it lies, answered without
 * the CUDA driver or the loader: the program's own image (its static
 * arrays) and the heap that grows with brk (malloc's main arena, where most
 * small buffers live). A device allocation is always a mapping the driver
 * made, never either of these, so a call whose buffers lie there skips the
 * device checks: collie__cuda_live's look at the loader (dl_iterate_phdr:
 * its lock and a callback, ~230 instructions a call; issue 38 found it was
 * most of what an 8-byte broadcast had grown by) and, where the driver is
 * loaded, two pointer queries. Everything else (mmap'd buffers, other
 * threads' arenas, stacks) takes the exact checks as before.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "device/cuda.h"

static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static atomic_int host_ready;
/* The program's image [image_lo, image_hi) and where the brk heap starts
 * (it ends at the current break, read each time: the heap also shrinks);
 * all 0 when unknown. */
static uintptr_t image_lo, image_hi, heap_lo;
/* glibc's current break, which sbrk(0) returns: read directly, it is one
 * load instead of a call through the PLT (weak: another libc has none, and
 * sbrk(0) answers). */
extern void *__curbrk __attribute__((weak));

static uintptr_t
host_brk(void)
{
  if (&__curbrk && __curbrk) return (uintptr_t)__curbrk;
  void *b = sbrk(0);
  return b == (void *)-1 ? 0 : (uintptr_t)b;
}

static int
host_image_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  (void)size;
  (void)data;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (!image_lo || lo < image_lo) image_lo = lo;
    if (hi > image_hi) image_hi = hi;
  }
  return 1; /* the first object is the program */
}

static void
host_init(void)
{
  dl_iterate_phdr(host_image_cb, NULL);
  /* The heap's start, as the kernel reports it; before the first brk there
   * is none and it will start at the current break. */
  FILE *f = fopen("/proc/self/maps", "re");
  char line[512];
  while (f && fgets(line, sizeof(line), f)) {
    unsigned long lo, hi;
    if (strstr(line, "[heap]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2) {
      heap_lo = lo;
      break;
    }
  }
  if (f) fclose(f);
  if (!heap_lo) heap_lo = host_brk();
  atomic_store_explicit(&host_ready, 1, memory_order_release);
}

int
collie__host_mem_plain(const void *p)
{
  if (!p) return 1;
  if (!atomic_load_explicit(&host_ready, memory_order_acquire)) pthread_once(&host_once, host_init);
  uintptr_t a = (uintptr_t)p;
  if (a >= image_lo && a < image_hi) return 1;
  return heap_lo && a >= heap_lo && a < host_brk();
}
