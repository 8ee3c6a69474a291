/* scratch.c - a communicator's grow-only staging buffer: algorithms that need
 * temporary space take it from here, so steady-state calls never allocate. */
#include <stdlib.h>

#include "coll/coll.h"
#include "util/error.h"

void *
collie__scratch_get(struct collie__scratch *s, size_t n)
{
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
}

void
collie__scratch_free(struct collie__scratch *s)
{
  free(s->buf);
  s->buf = NULL;
  s->cap = 0;
}
