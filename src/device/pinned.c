/*
 * pinned.c - the pinned staging of pinned.h.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "device/cuda.h"
#include "device/cuda_int.h"
#include "device/pinned.h"
#include "util/error.h"

struct collie__pinned {
  cu_ctx ctx;
  size_t chunk;
  void *buf[2];
  cu_event out_done[2]; /* recorded after each copy out of buf[i] */
  cu_stream in, out;
};

void
collie__pinned_free(struct collie__pinned *p)
{
  if (!p) return;
  /* In its own context: the communicator may go on a thread with none. */
  int pushed = p->ctx && collie__cu.ctx_push(p->ctx) == CU_SUCCESS;
  for (int i = 0; i < 2; i++) {
    if (p->buf[i]) collie__cu.mem_free_host(p->buf[i]);
    if (p->out_done[i]) collie__cu.event_destroy(p->out_done[i]);
  }
  if (p->in) collie__cu.stream_destroy(p->in);
  if (p->out) collie__cu.stream_destroy(p->out);
  if (pushed) collie__cuda_pop();
  free(p);
}

collie_result_t
collie__pinned_get(struct collie__pinned **pp, size_t chunk)
{
  cu_ctx ctx = NULL;
  cu_result rc = collie__cu.ctx_get_current(&ctx);
  if (rc != CU_SUCCESS) return collie__cuda_fail(rc, "finding the context for pinned staging");
  struct collie__pinned *p = *pp;
  if (p && p->ctx == ctx && p->chunk >= chunk) return COLLIE_SUCCESS;
  collie__pinned_free(p);
  *pp = NULL;
  if (!(p = calloc(1, sizeof(*p))))
    return collie__err(COLLIE_SYSTEM_ERROR, "out of memory for pinned staging");
  p->ctx = ctx;
  p->chunk = chunk;
  const char *what = "page-locking 2 staging buffers (cuMemAllocHost)";
  for (int i = 0; i < 2 && rc == CU_SUCCESS; i++) {
    rc = collie__cu.mem_alloc_host(&p->buf[i], chunk);
    if (rc == CU_SUCCESS) rc = collie__cu.event_create(&p->out_done[i], CU_EVENT_DISABLE_TIMING);
  }
  if (rc == CU_SUCCESS) {
    what = "creating the staging streams (cuStreamCreate)";
    rc = collie__cu.stream_create(&p->in, CU_STREAM_NON_BLOCKING);
    if (rc == CU_SUCCESS) rc = collie__cu.stream_create(&p->out, CU_STREAM_NON_BLOCKING);
  }
  if (rc != CU_SUCCESS) {
    collie__pinned_free(p);
    return collie__cuda_fail(rc, what);
  }
  *pp = p;
  return COLLIE_SUCCESS;
}

void *
collie__pinned_buf(struct collie__pinned *p, int i)
{
  return p->buf[i & 1];
}

collie_result_t
collie__pinned_in(struct collie__pinned *p, int i, size_t off, const void *src, size_t n)
{
  i &= 1;
  cu_result rc = collie__cu.stream_wait_event(p->in, p->out_done[i], 0);
  if (rc == CU_SUCCESS)
    rc = collie__cu.memcpy_async((cu_ptr)(uintptr_t)((char *)p->buf[i] + off),
                                 (cu_ptr)(uintptr_t)src, n, p->in);
  return rc == CU_SUCCESS ? COLLIE_SUCCESS : collie__cuda_fail(rc, "copying a chunk to the host");
}

collie_result_t
collie__pinned_wait_in(struct collie__pinned *p, int64_t deadline_ns)
{
  return collie__cuda_poll(collie__cu.stream_query, p->in, deadline_ns,
                           "a chunk's copy to the host");
}

collie_result_t
collie__pinned_out(struct collie__pinned *p, int i, size_t off, void *dst, size_t n)
{
  i &= 1;
  cu_result rc = collie__cu.memcpy_async((cu_ptr)(uintptr_t)dst,
                                         (cu_ptr)(uintptr_t)((char *)p->buf[i] + off), n, p->out);
  if (rc == CU_SUCCESS) rc = collie__cu.event_record(p->out_done[i], p->out);
  return rc == CU_SUCCESS ? COLLIE_SUCCESS : collie__cuda_fail(rc, "copying a chunk to the device");
}

collie_result_t
collie__pinned_wait_buf(struct collie__pinned *p, int i, int64_t deadline_ns)
{
  return collie__cuda_poll(collie__cu.event_query, p->out_done[i & 1], deadline_ns,
                           "a chunk's copy to the device");
}

collie_result_t
collie__pinned_wait_out(struct collie__pinned *p, int64_t deadline_ns)
{
  return collie__cuda_poll(collie__cu.stream_query, p->out, deadline_ns,
                           "a chunk's copy to the device");
}

struct collie__pinned_area {
  cu_ctx ctx;
  size_t bytes;
  void *buf;
};

void
collie__pinned_area_free(struct collie__pinned_area *a)
{
  if (!a) return;
  int pushed = a->ctx && collie__cu.ctx_push(a->ctx) == CU_SUCCESS;
  if (a->buf) collie__cu.mem_free_host(a->buf);
  if (pushed) collie__cuda_pop();
  free(a);
}

collie_result_t
collie__pinned_area_get(struct collie__pinned_area **ap, size_t bytes, size_t cap, void **buf)
{
  cu_ctx ctx = NULL;
  cu_result rc = collie__cu.ctx_get_current(&ctx);
  if (rc != CU_SUCCESS) return collie__cuda_fail(rc, "finding the context for pinned staging");
  struct collie__pinned_area *a = *ap;
  if (a && a->ctx == ctx && a->bytes >= bytes) {
    *buf = a->buf;
    return COLLIE_SUCCESS;
  }
  /* Grown by half again at least, so a job whose calls grow a little at a
   * time does not page-lock memory on every call. */
  size_t want = bytes;
  if (a && a->ctx == ctx && bytes < a->bytes + a->bytes / 2) want = a->bytes + a->bytes / 2;
  if (want > cap && cap >= bytes) want = cap;
  collie__pinned_area_free(a);
  *ap = NULL;
  if (!(a = calloc(1, sizeof(*a))))
    return collie__err(COLLIE_SYSTEM_ERROR, "out of memory for pinned staging");
  a->ctx = ctx;
  rc = collie__cu.mem_alloc_host(&a->buf, want ? want : 1);
  if (rc != CU_SUCCESS) {
    a->buf = NULL;
    collie__pinned_area_free(a);
    char what[96];
    snprintf(what, sizeof(what), "page-locking %zu bytes to stage a call (cuMemAllocHost)", want);
    return collie__cuda_fail(rc, what);
  }
  a->bytes = want;
  *ap = a;
  *buf = a->buf;
  return COLLIE_SUCCESS;
}
