/*
 * cuda.c - the CUDA driver at run time: found when the process has loaded
 * it, opened with dlopen, its entry points resolved by cuGetProcAddress (the
 * driver picks the versioned symbol, e.g. cuMemcpy's, for the API version
 * asked), and used for the little the device path needs: what a pointer
 * is, and copies between device and host.
 *
 * Why "has loaded it" and not "can load it": a buffer can be device memory
 * only in a process that already uses CUDA, and loading the driver into
 * every process that calls collie would cost each one its initialisation.
 * The check must be cheap enough for the host path (an 8-byte broadcast is
 * ~160 ns): dl_iterate_phdr reports how many objects the process has ever
 * loaded (dlpi_adds); only when that count moves is the driver looked for
 * by name (dlopen RTLD_NOLOAD, ~20 us, so never per call).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "device/cuda.h"
#include "device/cuda_int.h"
#include "util/error.h"
#include "util/util.h"

typedef cu_result (*get_proc_v2_fn)(const char *, void **, int, unsigned long long, int *);
typedef cu_result (*get_proc_v1_fn)(const char *, void **, int, unsigned long long);

struct collie__cu collie__cu;
#define cu collie__cu

static pthread_mutex_t cuda_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int cuda_state;           /* 0 not seen, 1 live, -1 seen but unusable */
static atomic_ullong cuda_adds = ~0ULL; /* dlpi_adds when last looked */
static char cuda_why[512];              /* why the driver is unusable (state -1) */

static int
cuda_adds_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  (void)size;
  *(unsigned long long *)data = info->dlpi_adds;
  return 1; /* the first object says it: stop there */
}

collie_result_t
collie__cuda_open(const char *path)
{
  const char *lib = path ? path : "libcuda.so.1";
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return collie__err(COLLIE_UNSUPPORTED, "CUDA: cannot open the driver %s: %s", lib, dlerror());
  get_proc_v2_fn gp2 = (get_proc_v2_fn)dlsym(h, "cuGetProcAddress_v2");
  get_proc_v1_fn gp1 = (get_proc_v1_fn)dlsym(h, "cuGetProcAddress");
  if (!gp2 && !gp1) {
    dlclose(h);
    return collie__err(COLLIE_UNSUPPORTED,
                       "CUDA: the driver %s has no cuGetProcAddress (a driver for CUDA 11.3 or "
                       "newer is needed)",
                       lib);
  }
  struct {
    const char *name;
    void **slot;
  } want[] = {
      {"cuPointerGetAttribute", (void **)&cu.pointer_get_attribute},
      {"cuCtxPushCurrent", (void **)&cu.ctx_push},
      {"cuCtxPopCurrent", (void **)&cu.ctx_pop},
      {"cuCtxGetDevice", (void **)&cu.ctx_get_device},
      {"cuCtxGetCurrent", (void **)&cu.ctx_get_current},
      {"cuDeviceGetAttribute", (void **)&cu.device_get_attribute},
      {"cuDeviceGetUuid", (void **)&cu.device_get_uuid},
      {"cuMemcpy", (void **)&cu.memcpy},
      {"cuMemcpyAsync", (void **)&cu.memcpy_async},
      {"cuStreamQuery", (void **)&cu.stream_query},
      {"cuStreamCreate", (void **)&cu.stream_create},
      {"cuStreamDestroy", (void **)&cu.stream_destroy},
      {"cuStreamWaitEvent", (void **)&cu.stream_wait_event},
      {"cuStreamIsCapturing", (void **)&cu.stream_is_capturing},
      {"cuStreamGetCaptureInfo", (void **)&cu.stream_get_capture_info},
      {"cuThreadExchangeStreamCaptureMode", (void **)&cu.thread_exchange_capture_mode},
      {"cuLaunchHostFunc", (void **)&cu.launch_host_func},
      {"cuUserObjectCreate", (void **)&cu.user_object_create},
      {"cuGraphRetainUserObject", (void **)&cu.graph_retain_user_object},
      {"cuEventCreate", (void **)&cu.event_create},
      {"cuEventRecord", (void **)&cu.event_record},
      {"cuEventQuery", (void **)&cu.event_query},
      {"cuEventDestroy", (void **)&cu.event_destroy},
      {"cuMemAllocHost", (void **)&cu.mem_alloc_host},
      {"cuMemFreeHost", (void **)&cu.mem_free_host},
      {"cuMemAlloc", (void **)&cu.mem_alloc},
      {"cuMemFree", (void **)&cu.mem_free},
      {"cuIpcGetMemHandle", (void **)&cu.ipc_get_mem_handle},
      {"cuIpcOpenMemHandle", (void **)&cu.ipc_open_mem_handle},
      {"cuIpcCloseMemHandle", (void **)&cu.ipc_close_mem_handle},
      {"cuModuleLoadData", (void **)&cu.module_load_data},
      {"cuModuleGetFunction", (void **)&cu.module_get_function},
      {"cuLaunchKernel", (void **)&cu.launch_kernel},
      {"cuGetErrorString", (void **)&cu.error_string},
  };
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    void *fn = NULL;
    int status = 0;
    cu_result rc = gp2 ? gp2(want[i].name, &fn, CU_API_VERSION, 0, &status)
                       : gp1(want[i].name, &fn, CU_API_VERSION, 0);
    if (rc != CU_SUCCESS || !fn) {
      memset(&cu, 0, sizeof(cu));
      dlclose(h);
      return collie__err(COLLIE_UNSUPPORTED,
                         "CUDA: the driver %s has no entry point %s for CUDA %d.%d (error %d)", lib,
                         want[i].name, CU_API_VERSION / 1000, CU_API_VERSION % 1000 / 10, rc);
    }
    *want[i].slot = fn;
  }
  return COLLIE_SUCCESS; /* the handle stays open for the process's life */
}

/* Set on a thread that must make no driver call: the driver's own thread
 * running a graph's host node (device/cuda_graph.c), where collie runs host
 * collectives on host buffers and a pointer query could deadlock. */
static __thread int cuda_thread_off;

void
collie__cuda_thread_off(int off)
{
  cuda_thread_off = off;
}

int
collie__cuda_live(void)
{
  if (cuda_thread_off) return 0;
  int state = atomic_load_explicit(&cuda_state, memory_order_acquire);
  if (state != 0) return state > 0;
  unsigned long long adds = 0;
  dl_iterate_phdr(cuda_adds_cb, &adds);
  if (adds == atomic_load_explicit(&cuda_adds, memory_order_relaxed)) return 0;
  pthread_mutex_lock(&cuda_mu);
  state = atomic_load_explicit(&cuda_state, memory_order_relaxed);
  if (state == 0) {
    void *loaded = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    if (loaded) {
      dlclose(loaded); /* only a reference: the process keeps it loaded */
      if (collie__cuda_open(NULL) == COLLIE_SUCCESS) {
        state = 1;
      } else {
        snprintf(cuda_why, sizeof(cuda_why), "%s", collie__err_msg());
        state = -1;
      }
      atomic_store_explicit(&cuda_state, state, memory_order_release);
    }
    atomic_store_explicit(&cuda_adds, adds, memory_order_relaxed);
  }
  pthread_mutex_unlock(&cuda_mu);
  return state > 0;
}

int
collie__cuda_is_device(const void *p, int *device)
{
  if (!p || cuda_thread_off || atomic_load_explicit(&cuda_state, memory_order_acquire) <= 0)
    return 0;
  unsigned type = 0, managed = 0;
  if (cu.pointer_get_attribute(&type, CU_ATTR_MEMORY_TYPE, (cu_ptr)(uintptr_t)p) != CU_SUCCESS)
    return 0; /* not the driver's: plain host memory */
  if (type != CU_MEMORYTYPE_DEVICE) return 0;
  if (cu.pointer_get_attribute(&managed, CU_ATTR_IS_MANAGED, (cu_ptr)(uintptr_t)p) == CU_SUCCESS &&
      managed)
    return 0; /* managed memory: the CPU reads it in place */
  int ordinal = -1;
  cu.pointer_get_attribute(&ordinal, CU_ATTR_DEVICE_ORDINAL, (cu_ptr)(uintptr_t)p);
  if (device) *device = ordinal;
  return 1;
}

int
collie__cuda_ready(void)
{
  return atomic_load_explicit(&cuda_state, memory_order_acquire) > 0;
}

collie_result_t
collie__cuda_fail(cu_result rc, const char *what)
{
  const char *s = NULL;
  if (cu.error_string) cu.error_string(rc, &s);
  return collie__err(COLLIE_SYSTEM_ERROR, "CUDA: %s failed: %s (error %d)", what,
                     s ? s : "unknown error", rc);
}

collie_result_t
collie__cuda_push_ctx_of(const void *p, const char *what)
{
  cu_ctx ctx = NULL;
  cu_result rc = cu.pointer_get_attribute(&ctx, CU_ATTR_CONTEXT, (cu_ptr)(uintptr_t)p);
  if (rc == CU_SUCCESS && !ctx) rc = 201; /* CUDA_ERROR_INVALID_CONTEXT */
  if (rc == CU_SUCCESS) rc = cu.ctx_push(ctx);
  return rc == CU_SUCCESS ? COLLIE_SUCCESS : collie__cuda_fail(rc, what);
}

collie_result_t
collie__cuda_ctx_of(const void *p, void **ctx, const char *what)
{
  cu_ctx c = NULL;
  cu_result rc = cu.pointer_get_attribute(&c, CU_ATTR_CONTEXT, (cu_ptr)(uintptr_t)p);
  if (rc == CU_SUCCESS && !c) rc = 201; /* CUDA_ERROR_INVALID_CONTEXT */
  *ctx = c;
  return rc == CU_SUCCESS ? COLLIE_SUCCESS : collie__cuda_fail(rc, what);
}

collie_result_t
collie__cuda_push_ctx(void *ctx, const char *what)
{
  cu_result rc = cu.ctx_push((cu_ctx)ctx);
  return rc == CU_SUCCESS ? COLLIE_SUCCESS : collie__cuda_fail(rc, what);
}

void
collie__cuda_pop(void)
{
  cu_ctx popped;
  cu.ctx_pop(&popped);
}

collie_result_t
collie__cuda_copy(void *dst, const void *src, size_t n, const char *what)
{
  if (!collie__cuda_ready())
    return collie__err(COLLIE_UNSUPPORTED, "CUDA: %s: no driver in this process%s%s", what,
                       cuda_why[0] ? ": " : "", cuda_why);
  if (n == 0) return COLLIE_SUCCESS;
  /* The copy runs in the context the device buffer belongs to, whatever
   * this thread has current (a worker thread has none): dst's, or, when the
   * driver does not know dst (host memory), src's. */
  cu_ctx ctx = NULL;
  cu_result rc = cu.pointer_get_attribute(&ctx, CU_ATTR_CONTEXT, (cu_ptr)(uintptr_t)dst);
  int to_device = rc == CU_SUCCESS && ctx;
  if (!to_device) rc = cu.pointer_get_attribute(&ctx, CU_ATTR_CONTEXT, (cu_ptr)(uintptr_t)src);
  if (rc == CU_SUCCESS) rc = cu.ctx_push(ctx);
  if (rc == CU_SUCCESS) {
    rc = cu.memcpy((cu_ptr)(uintptr_t)dst, (cu_ptr)(uintptr_t)src, n);
    /* cuMemcpy into device memory may return before the bytes are there
     * (device to device; from pageable memory, once they are staged for
     * DMA): wait for the stream it went on, so that "done when it returns"
     * holds for every stream, and for a peer that reuses the source. */
    collie_result_t done = COLLIE_SUCCESS;
    if (rc == CU_SUCCESS && to_device)
      done = collie__cuda_poll(cu.stream_query, NULL, collie__now_ns() + 60 * 1000000000LL, what);
    collie__cuda_pop();
    if (done != COLLIE_SUCCESS) return done;
  }
  if (rc == CU_SUCCESS) return COLLIE_SUCCESS;
  char what_n[160];
  snprintf(what_n, sizeof(what_n), "%s (%zu bytes)", what, n);
  return collie__cuda_fail(rc, what_n);
}

collie_result_t
collie__cuda_poll(cu_result (*query)(void *), void *handle, int64_t deadline_ns, const char *what)
{
  for (unsigned i = 1;; i++) {
    cu_result rc = query(handle);
    if (rc == CU_SUCCESS) return COLLIE_SUCCESS;
    if (rc != CU_ERROR_NOT_READY) return collie__cuda_fail(rc, what);
    if (i % 64 == 0 && collie__now_coarse_ns() > deadline_ns)
      return collie__err(COLLIE_TIMEOUT, "CUDA: %s: the GPU's work was not done by the deadline",
                         what);
    sched_yield();
  }
}

int
collie__cuda_capturing(void *stream)
{
  if (!collie__cuda_ready()) return 0;
  int status = 0; /* CU_STREAM_CAPTURE_STATUS_NONE */
  cu_result rc = cu.stream_is_capturing(stream, &status);
  if (rc == CU_SUCCESS) return status != 0; /* ACTIVE, or INVALIDATED by an earlier step */
  return rc >= CU_ERROR_CAPTURE_FIRST && rc <= CU_ERROR_CAPTURE_LAST;
}

collie_result_t
collie__cuda_stream_sync(void *stream, int64_t deadline_ns, const char *what)
{
  return collie__cuda_poll(cu.stream_query, stream, deadline_ns, what);
}
