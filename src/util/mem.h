/*
 * mem.h - memory kinds: where a call's buffers live. The API decides a
 * call's kind once (collie__mem_kind_of), and the places that touch the
 * bytes ask it: the algorithms' copies (collie__call_copy in coll/coll.h),
 * the reduction kernel chosen for the call (api.c), and the transports,
 * whose requests carry it (struct collie__req.mem). A device kind plugs in
 * there: its copy below, its kernels, and a transport path that moves its
 * memory. Host memory is the only kind today, and costs nothing: the kind
 * is a constant and every branch on it folds away.
 */
#ifndef COLLIE_UTIL_MEM_H
#define COLLIE_UTIL_MEM_H

#include <stddef.h>
#include <string.h>

#include "util/util.h"

typedef enum {
  COLLIE_MEM_HOST = 0, /* the process's own memory: malloc, mmap, collie_mem_alloc */
  COLLIE_MEM_CUDA,     /* CUDA device memory on the direct path (coll/cuda_ipc.c): only
                        * the algorithms that need COLLIE_NEEDS_DEVICE touch it */
  COLLIE_MEM_KIND_COUNT_
} collie__mem_kind_t;

/* The kind of a call's buffers (NULL ones ignored). A device kind would look
 * the pointers up here and the API refuse a mix of kinds. */
static inline collie__mem_kind_t
collie__mem_kind_of(const void *a, const void *b)
{
  (void)a;
  (void)b;
  return COLLIE_MEM_HOST;
}

/* Copies n bytes between buffers of kind k, whole blocks the caller reads
 * later (collie__copy: non-temporal stores when large). */
static inline void
collie__mem_copy(collie__mem_kind_t k, void *dst, const void *src, size_t n)
{
  switch (k) {
  case COLLIE_MEM_HOST:
  default:
    collie__copy(dst, src, n);
  }
}

/* The same for small or cache-resident pieces (memcpy on the host). */
static inline void
collie__mem_copy_small(collie__mem_kind_t k, void *dst, const void *src, size_t n)
{
  switch (k) {
  case COLLIE_MEM_HOST:
  default:
    memcpy(dst, src, n);
  }
}

#endif /* COLLIE_UTIL_MEM_H */
