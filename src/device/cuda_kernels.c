/*
 * cuda_kernels.c - the embedded device code at run time: one module per
 * (context, dtype), loaded with cuModuleLoadData the first time a context
 * reduces that dtype (the driver JIT-compiles the PTX for the device it
 * runs on, ~0.25 s, and caches the result on disk), and the launches of its
 * kernels.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda.h"
#include "device/cuda_int.h"
#include "util/error.h"

/* From the generated ptx_embed.c (or cmake/ptx_none.c). */
extern const int collie__cuda_ptx_count;
extern const char collie__cuda_ptx_desc[];
extern const unsigned char *const collie__cuda_ptx[];

#define KERNEL_SRCS 8 /* kernels.cu's COLLIE_KERNEL_SRCS */
#define KERNEL_CTXS 16

struct kernel_ptrs {
  const void *p[KERNEL_SRCS];
};

struct kernel_ctx {
  cu_ctx ctx;
  int sms;
  cu_module mod[COLLIE_DTYPE_COUNT_];
  cu_function fn[COLLIE_DTYPE_COUNT_][COLLIE_OP_COUNT_];
  cu_function copy_list; /* in the uint8 module */
};

/* kernels.cu's COLLIE_COPY_LIST. Large copies go in the list too: on an
 * H200 it beat one cuMemcpyAsync each at every size measured (256 KiB to
 * 16 MiB a copy: 1.0-5.3x, docs/gpu.md), as each call costs ~4-6 us. */
#define COPY_LIST 32
/* Unaligned copies from this size are not listed (see collie__cuda_copy_list). */
#define COPY_LIST_UNALIGNED_MAX ((size_t)256 << 10)

struct kernel_copies { /* kernels.cu's struct collie_copies */
  const void *src[COPY_LIST];
  void *dst[COPY_LIST];
  unsigned long long bytes[COPY_LIST];
};

static pthread_mutex_t kernel_mu = PTHREAD_MUTEX_INITIALIZER;
static struct kernel_ctx kernel_ctxs[KERNEL_CTXS];
static int kernel_nctx;

const char *
collie__cuda_device_code(void)
{
  return collie__cuda_ptx_desc;
}

int
collie__cuda_has_kernels(void)
{
  return collie__cuda_ptx_count == COLLIE_DTYPE_COUNT_;
}

void
collie__cuda_grid(size_t n, size_t esize, int aligned, int sms, unsigned *blocks, unsigned *threads)
{
  size_t per = aligned && esize && esize <= 16 ? 16 / esize : 1; /* elements per thread-step */
  size_t work = (n + per - 1) / per;
  *threads = 512;
  size_t b = (work + 511) / 512;
  /* Enough blocks to fill every multiprocessor a few times over; beyond
   * that the grid-stride loop gives each thread more steps. */
  size_t cap = (size_t)(sms > 0 ? sms : 1) * 4;
  if (b > cap) b = cap;
  if (b == 0) b = 1;
  *blocks = (unsigned)b;
}

/* The kernel for (dtype, op) in the current context, or collie_copy_list
 * with copy set (dtype uint8); loads the dtype's module on first use. */
static collie_result_t
kernel_fn(collie_dtype_t dtype, collie_op_t op, int copy, cu_function *fn, int *sms)
{
  cu_ctx ctx = NULL;
  cu_result rc = collie__cu.ctx_get_current(&ctx);
  if (rc != CU_SUCCESS || !ctx)
    return collie__cuda_fail(rc ? rc : 201, "finding the current context for a kernel");
  pthread_mutex_lock(&kernel_mu);
  struct kernel_ctx *k = NULL;
  for (int i = 0; i < kernel_nctx && !k; i++)
    if (kernel_ctxs[i].ctx == ctx) k = &kernel_ctxs[i];
  collie_result_t out = COLLIE_SUCCESS;
  if (!k) {
    if (kernel_nctx == KERNEL_CTXS) {
      pthread_mutex_unlock(&kernel_mu);
      return collie__err(COLLIE_UNSUPPORTED, "CUDA: more than %d contexts reduce on devices",
                         KERNEL_CTXS);
    }
    k = &kernel_ctxs[kernel_nctx++];
    memset(k, 0, sizeof(*k));
    k->ctx = ctx;
    cu_device dev = 0;
    k->sms = 1;
    if (collie__cu.ctx_get_device(&dev) == CU_SUCCESS)
      collie__cu.device_get_attribute(&k->sms, CU_DEV_ATTR_MULTIPROCESSOR_COUNT, dev);
  }
  cu_function *slot = copy ? &k->copy_list : &k->fn[dtype][op];
  if (!*slot) {
    if (!k->mod[dtype]) {
      rc = collie__cu.module_load_data(&k->mod[dtype], collie__cuda_ptx[dtype]);
      if (rc != CU_SUCCESS) {
        char what[96];
        snprintf(what, sizeof(what), "loading the %s kernels (cuModuleLoadData, %s)",
                 collie_dtype_name(dtype), collie__cuda_ptx_desc);
        out = collie__cuda_fail(rc, what);
      }
    }
    if (out == COLLIE_SUCCESS) {
      char name[64];
      if (copy)
        snprintf(name, sizeof(name), "collie_copy_list");
      else
        snprintf(name, sizeof(name), "collie_reduce_%s_%s", collie_dtype_name(dtype),
                 collie_op_name(op));
      rc = collie__cu.module_get_function(slot, k->mod[dtype], name);
      if (rc != CU_SUCCESS) out = collie__cuda_fail(rc, name);
    }
  }
  *fn = *slot;
  *sms = k->sms;
  pthread_mutex_unlock(&kernel_mu);
  return out;
}

/* One launch: every dsts[k] (k < nd <= KERNEL_SRCS) = srcs[0] op ... op
 * srcs[ns-1] (ns <= KERNEL_SRCS), / div when div > 1. */
static collie_result_t
kernel_launch(cu_function fn, int sms, void *const *dsts, int nd, const void *const *srcs, int ns,
              size_t n, size_t es, int div, void *stream, collie_dtype_t dtype, collie_op_t op)
{
  struct kernel_ptrs d = {{0}}, s = {{0}};
  int aligned = 1;
  for (int k = 0; k < nd; k++) {
    d.p[k] = dsts[k];
    aligned &= ((uintptr_t)dsts[k] & 15) == 0;
  }
  for (int k = 0; k < ns; k++) {
    s.p[k] = srcs[k];
    aligned &= ((uintptr_t)srcs[k] & 15) == 0;
  }
  unsigned blocks, threads;
  collie__cuda_grid(n, es, aligned, sms, &blocks, &threads);
  unsigned long long nn = n;
  void *args[] = {&d, &nd, &s, &ns, &nn, &div};
  cu_result rc =
      collie__cu.launch_kernel(fn, blocks, 1, 1, threads, 1, 1, 0, (cu_stream)stream, args, NULL);
  if (rc == CU_SUCCESS) return COLLIE_SUCCESS;
  char what[96];
  snprintf(what, sizeof(what), "launching the %s %s reduction of %zu elements",
           collie_dtype_name(dtype), collie_op_name(op), n);
  return collie__cuda_fail(rc, what);
}

collie_result_t
collie__cuda_reduce(void *const *dsts, int ndst, const void *const *srcs, int nsrc, size_t n,
                    collie_dtype_t dtype, collie_op_t op, int div, void *stream)
{
  if (!collie__cuda_has_kernels())
    return collie__err(COLLIE_UNSUPPORTED,
                       "CUDA: this libcollie has no device code (%s): rebuild with nvcc",
                       collie__cuda_ptx_desc);
  if (n == 0 || ndst < 1) return COLLIE_SUCCESS;
  if (nsrc < 1) return collie__err(COLLIE_INTERNAL_ERROR, "CUDA: a reduction of no sources");
  if (op == COLLIE_AVG) op = COLLIE_SUM; /* the division is the last pass's div */
  cu_function fn = NULL;
  int sms = 1;
  collie_result_t r = kernel_fn(dtype, op, 0, &fn, &sms);
  if (r != COLLIE_SUCCESS) return r;
  size_t es = collie_dtype_size(dtype);
  if (nsrc <= KERNEL_SRCS) /* one pass, up to KERNEL_SRCS destinations at a time */
    for (int k = 0; k < ndst && r == COLLIE_SUCCESS; k += KERNEL_SRCS)
      r = kernel_launch(fn, sms, dsts + k, ndst - k < KERNEL_SRCS ? ndst - k : KERNEL_SRCS, srcs,
                        nsrc, n, es, div, stream, dtype, op);
  if (nsrc <= KERNEL_SRCS || r != COLLIE_SUCCESS) return r;
  /* More sources than a pass takes: passes fold them into dsts[0], later
   * passes reading it back; the others get copies. A source that is
   * dsts[0] itself (an in-place call's own block) must be read by the first
   * pass, before dsts[0] is written: moved to the front when it would fall
   * in a later one. */
  void *dst = dsts[0];
  const void *few[64], **order = few;
  for (int k = KERNEL_SRCS; k < nsrc; k++)
    if (srcs[k] == dst) {
      if (nsrc > (int)(sizeof(few) / sizeof(few[0])) &&
          !(order = malloc((size_t)nsrc * sizeof(void *))))
        return collie__err(COLLIE_SYSTEM_ERROR, "CUDA: out of memory ordering %d sources", nsrc);
      order[0] = srcs[k];
      memcpy(order + 1, srcs, (size_t)k * sizeof(void *));
      memcpy(order + k + 1, srcs + k + 1, (size_t)(nsrc - k - 1) * sizeof(void *));
      srcs = order;
      break;
    }
  for (int first = 0; first < nsrc && r == COLLIE_SUCCESS;) {
    const void *pass[KERNEL_SRCS];
    int ns = 0;
    if (first > 0) pass[ns++] = dst;
    while (ns < KERNEL_SRCS && first < nsrc) pass[ns++] = srcs[first++];
    r = kernel_launch(fn, sms, &dst, 1, pass, ns, n, es, first == nsrc ? div : 0, stream, dtype,
                      op);
  }
  if (order != few) free(order);
  for (int k = 1; k < ndst && r == COLLIE_SUCCESS; k++)
    r = collie__cuda_copy_async(dsts[k], dst, n * es, stream, "copying a reduction's result");
  return r;
}

collie_result_t
collie__cuda_current_uuid(unsigned char uuid[16])
{
  cu_device dev = 0;
  cu_result rc = collie__cu.ctx_get_device(&dev);
  if (rc == CU_SUCCESS) rc = collie__cu.device_get_uuid(uuid, dev);
  return rc == CU_SUCCESS ? COLLIE_SUCCESS : collie__cuda_fail(rc, "cuDeviceGetUuid");
}

collie_result_t
collie__cuda_current_device(int *device)
{
  cu_device dev = 0;
  cu_result rc = collie__cu.ctx_get_device(&dev);
  if (rc != CU_SUCCESS) return collie__cuda_fail(rc, "cuCtxGetDevice");
  *device = (int)dev;
  return COLLIE_SUCCESS;
}

collie_result_t
collie__cuda_mem_alloc(void **p, size_t n)
{
  cu_ptr d = 0;
  cu_result rc = collie__cu.mem_alloc(&d, n);
  if (rc != CU_SUCCESS) return collie__cuda_fail(rc, "cuMemAlloc");
  *p = (void *)(uintptr_t)d;
  return COLLIE_SUCCESS;
}

collie_result_t
collie__cuda_mem_free(void *p)
{
  cu_result rc = collie__cu.mem_free((cu_ptr)(uintptr_t)p);
  return rc == CU_SUCCESS ? COLLIE_SUCCESS : collie__cuda_fail(rc, "cuMemFree");
}

collie_result_t
collie__cuda_copy_async(void *dst, const void *src, size_t n, void *stream, const char *what)
{
  if (n == 0 || dst == src) return COLLIE_SUCCESS;
  cu_result rc =
      collie__cu.memcpy_async((cu_ptr)(uintptr_t)dst, (cu_ptr)(uintptr_t)src, n, (cu_stream)stream);
  return rc == CU_SUCCESS ? COLLIE_SUCCESS : collie__cuda_fail(rc, what);
}

/* One launch of collie_copy_list for c's n (<= COPY_LIST) copies. */
static collie_result_t
copy_list_launch(cu_function fn, int sms, struct kernel_copies *c, int n, void *stream)
{
  int aligned = 1;
  size_t most = 0;
  for (int k = 0; k < n; k++) {
    aligned &= (((uintptr_t)c->src[k] | (uintptr_t)c->dst[k]) & 15) == 0;
    if (c->bytes[k] > most) most = c->bytes[k];
  }
  unsigned blocks, threads;
  collie__cuda_grid(most, 1, aligned, sms, &blocks, &threads);
  unsigned cap = (unsigned)(sms > 0 ? sms : 1) * 4 / (unsigned)n; /* the whole grid's cap */
  if (blocks > cap) blocks = cap ? cap : 1;
  void *args[] = {c, &n, &aligned};
  cu_result rc = collie__cu.launch_kernel(fn, blocks, (unsigned)n, 1, threads, 1, 1, 0,
                                          (cu_stream)stream, args, NULL);
  if (rc == CU_SUCCESS) return COLLIE_SUCCESS;
  char what[80];
  snprintf(what, sizeof(what), "launching a list of %d copies (largest %zu bytes)", n, most);
  return collie__cuda_fail(rc, what);
}

collie_result_t
collie__cuda_copy_list(void *const *dsts, const void *const *srcs, const size_t *bytes, int n,
                       void *stream, const char *what)
{
  cu_function fn = NULL;
  int sms = 1;
  collie_result_t r = COLLIE_SUCCESS;
  struct kernel_copies c;
  int m = 0;
  for (int k = 0; k < n && r == COLLIE_SUCCESS; k++) {
    if (!bytes[k] || dsts[k] == srcs[k]) continue;
    /* The list moves 16 bytes a thread only when every copy in it is
     * 16-byte aligned, else one byte: a large unaligned copy (an int8
     * block, an odd displacement) goes to the copy engines instead. */
    int unaligned = (((uintptr_t)srcs[k] | (uintptr_t)dsts[k]) & 15) != 0;
    if (!collie__cuda_has_kernels() || (unaligned && bytes[k] >= COPY_LIST_UNALIGNED_MAX)) {
      r = collie__cuda_copy_async(dsts[k], srcs[k], bytes[k], stream, what);
      continue;
    }
    if (!fn && (r = kernel_fn(COLLIE_UINT8, COLLIE_SUM, 1, &fn, &sms)) != COLLIE_SUCCESS) break;
    c.src[m] = srcs[k];
    c.dst[m] = dsts[k];
    c.bytes[m++] = bytes[k];
    if (m == COPY_LIST) {
      r = copy_list_launch(fn, sms, &c, m, stream);
      m = 0;
    }
  }
  if (r == COLLIE_SUCCESS && m) r = copy_list_launch(fn, sms, &c, m, stream);
  return r;
}
