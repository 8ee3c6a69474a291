/* scratch.c - a communicator's grow-only staging buffer: algorithms that need
 * temporary space take it from here, so steady-state calls never allocate. */
#include <stdlib.h>

#include "coll/coll.h"
#include "util/error.h"

/* Under AddressSanitizer every request gets a region of exactly its size,
 * so that an algorithm writing past what it asked for (inside the grown
 * buffer, invisible otherwise) or keeping a region across two requests is
 * caught. */
#if defined(__SANITIZE_ADDRESS__)
#define SCRATCH_EXACT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SCRATCH_EXACT 1
#endif
#endif

void *
collie__scratch_get(struct collie__scratch *s, size_t n)
{
#ifdef SCRATCH_EXACT
  if (n != s->cap || !s->buf) {
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 1) != 0) {
      collie__err(COLLIE_SYSTEM_ERROR, "cannot allocate %zu bytes of staging memory", n);
      return NULL;
    }
    free(s->buf);
    s->buf = p;
    s->cap = n;
  }
  return s->buf;
#else
  if (n <= s->cap) return s->buf;
  size_t cap = s->cap ? s->cap : 4096;
  while (cap < n) cap = cap > SIZE_MAX / 2 ? n : cap * 2;
  void *p = NULL;
  if (posix_memalign(&p, 64, cap) != 0) {
    collie__err(COLLIE_SYSTEM_ERROR, "cannot allocate %zu bytes of staging memory", cap);
    return NULL;
  }
  free(s->buf);
  s->buf = p;
  s->cap = cap;
  return p;
#endif
}

void
collie__scratch_free(struct collie__scratch *s)
{
  free(s->buf);
  s->buf = NULL;
  s->cap = 0;
}
