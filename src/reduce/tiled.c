/*
 * tiled.c - dst = a op b with a two-operand kernel (inout op= in), at the
 * memory cost of a three-operand one.
 *
 * Collectives often start a reduction from a buffer they may not write (the
 * caller's send buffer) and land it somewhere else (a shared buffer, the
 * receive buffer). Copying a into dst and then combining b into it reads dst
 * back from memory when the block is larger than the caches. Done in tiles
 * that stay in L1 between the copy and the combine, memory sees one read of
 * a and of b and one write of dst, as with a fused kernel, without a second
 * table of kernels per instruction set.
 */
#include <string.h>

#include "reduce/reduce.h"

/* Bytes per tile: three streams of it fit a 32 KiB L1 with room to spare. */
#define TILED_BYTES 4096

void
collie__reduce_into(collie__reduce_fn fn, void *dst, const void *a, const void *b, size_t n,
                    size_t es)
{
  if (dst == a) {
    fn(dst, b, n);
    return;
  }
  if (n * es <= TILED_BYTES) { /* one tile: no division on a small call's path */
    memcpy(dst, a, n * es);
    fn(dst, b, n);
    return;
  }
  size_t per = TILED_BYTES / es; /* es is 1, 2, 4 or 8: whole elements */
  char *d = dst;
  const char *x = a, *y = b;
  for (size_t i = 0; i < n; i += per) {
    size_t m = n - i < per ? n - i : per;
    memcpy(d + i * es, x + i * es, m * es);
    fn(d + i * es, y + i * es, m);
  }
}
