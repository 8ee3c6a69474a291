/*
 * copy_test.c - util/copy.c: the non-temporal copy moves exactly n bytes for
 * every source and destination alignment and every length around a cache
 * line (head, whole lines, tail), touches nothing past either end, and
 * collie__copy / collie__copy_part agree with memcpy on both sides of the
 * threshold.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"
#include "util/util.h"

#define COPY_PAD 64

static void
copy_fill(unsigned char *p, size_t n, unsigned seed)
{
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 131u + seed * 7u + 1u);
}

/* Copies n bytes from src+so to dst+doff with fn and checks the destination
 * buffer byte for byte: the copy inside, the poison outside. */
static void
copy_check(void (*fn)(void *, const void *, size_t), size_t n, size_t so, size_t doff,
           const char *what)
{
  size_t len = n + 2 * COPY_PAD + 64;
  unsigned char *src = calloc(1, len), *dst = malloc(len);
  ASSERT(src && dst);
  copy_fill(src, len, (unsigned)n);
  memset(dst, 0xA5, len);
  fn(dst + COPY_PAD + doff, src + COPY_PAD + so, n);
  for (size_t i = 0; i < len; i++) {
    size_t at = COPY_PAD + doff;
    unsigned char want = i >= at && i < at + n ? src[COPY_PAD + so + (i - at)] : 0xA5;
    ASSERTF(dst[i] == want, "%s of %zu bytes (src +%zu, dst +%zu): byte %zd is %#x, want %#x", what,
            n, so, doff, (ssize_t)i - (ssize_t)at, dst[i], want);
  }
  free(src);
  free(dst);
}

TEST_IMPL(copy_stream_every_alignment)
{
  static const size_t lens[] = {0, 1, 15, 16, 63, 64, 65, 127, 128, 129, 1000, 4096 + 17};
  for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++)
    for (size_t so = 0; so < 64; so += 7)
      for (size_t doff = 0; doff < 64; doff += 5)
        copy_check(collie__copy_stream, lens[k], so, doff, "collie__copy_stream");
}

static void
copy_part_large(void *dst, const void *src, size_t n)
{
  collie__copy_part(dst, src, n, COLLIE__COPY_NT_MIN);
}

TEST_IMPL(copy_around_threshold)
{
  static const size_t lens[] = {COLLIE__COPY_NT_MIN - 1, COLLIE__COPY_NT_MIN,
                                COLLIE__COPY_NT_MIN + 63};
  for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
    copy_check(collie__copy, lens[k], 3, 0, "collie__copy");
    copy_check(collie__copy, lens[k], 0, 9, "collie__copy");
  }
  /* a part of a large output goes non-temporal whatever its own size */
  copy_check(copy_part_large, 100, 1, 2, "collie__copy_part");
}
