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
struct collie__host_span collie__host_span;

uintptr_t
collie__host_brk_slow(void)
{
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
    if (!collie__host_span.image_lo || lo < collie__host_span.image_lo)
      collie__host_span.image_lo = lo;
    if (hi > collie__host_span.image_hi) collie__host_span.image_hi = hi;
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
      collie__host_span.heap_lo = lo;
      break;
    }
  }
  if (f) fclose(f);
  if (!collie__host_span.heap_lo) collie__host_span.heap_lo = collie__host_brk();
  atomic_store_explicit(&collie__host_span.ready, 1, memory_order_release);
}

void
collie__host_span_init(void)
{
  pthread_once(&host_once, host_init);
}

int
collie__host_mem_plain(const void *p)
{
  return collie__host_mem_plain_both(p, p);
}
