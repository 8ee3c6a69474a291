/* device/host_mem.c: what is host memory by where it lies (the program's
 * image, the brk heap up to the current break) and what it must leave to
 * the driver's checks (mappings, memory above a break that went down). */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device/cuda.h"
#include "runner.h"

static char host_static[4096];

TEST_IMPL(host_mem_plain)
{
  ASSERT(collie__host_mem_plain(NULL));
  ASSERT(collie__host_mem_plain(host_static));
  ASSERT(collie__host_mem_plain(host_static + sizeof(host_static) - 1));
  /* A mapping may be a device's (the driver maps them): never known. */
  char *m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT(m != MAP_FAILED);
  ASSERT(!collie__host_mem_plain(m));
  ASSERT(!collie__host_mem_plain(m + 4096));
  munmap(m, 1 << 16);
  /* The heap as it grows and shrinks: memory past the break is no longer
   * the heap's, and must not be taken for it. */
  char *top = sbrk(0);
  ASSERT(top != (char *)-1);
  if (sbrk(1 << 16) != (void *)-1) {
    ASSERT(collie__host_mem_plain(top));
    ASSERT(collie__host_mem_plain(top + (1 << 16) - 1));
    ASSERT(!collie__host_mem_plain(top + (1 << 16)));
    ASSERT(sbrk(-(1 << 16)) != (void *)-1);
    ASSERT(!collie__host_mem_plain(top + 4096));
  }
}
