/*
 * cbench_cuda.c - collie-bench --device cuda: buffers in CUDA device memory
 * (issue 21), so the sweep measures collie's device path as nccl-tests
 * measures NCCL's. The tool opens the driver itself (dlopen), as the
 * library does: collie-bench links nothing CUDA either. Every rank uses
 * device LOCAL_RANK % devices, so several ranks share a GPU when there are
 * more ranks than GPUs (what NCCL refuses and collie supports).
 *
 * The references printed beside the table: the GPU's device-to-device copy
 * bandwidth (cuMemcpyDtoD of 256 MiB, best of 5) and a kernel launch's
 * latency (an empty kernel, launched and waited for, best of 2000), both
 * measured by this rank alone before the sweep starts.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cbench_int.h"

typedef int cu_result;
typedef unsigned long long cu_ptr;

static struct {
  void *lib;
  cu_result (*init)(unsigned);
  cu_result (*device_get_count)(int *);
  cu_result (*device_get)(int *, int);
  cu_result (*device_get_name)(char *, int, int);
  cu_result (*primary_ctx_retain)(void **, int);
  cu_result (*ctx_set_current)(void *);
  cu_result (*ctx_synchronize)(void);
  cu_result (*mem_alloc)(cu_ptr *, size_t);
  cu_result (*mem_free)(cu_ptr);
  cu_result (*memcpy)(cu_ptr, cu_ptr, size_t);
  cu_result (*memcpy_dtod)(cu_ptr, cu_ptr, size_t);
  cu_result (*module_load_data)(void **, const void *);
  cu_result (*module_get_function)(void **, void *, const char *);
  cu_result (*launch_kernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, void *, void **, void **);
} cu;

static char cuda_device_name[128];

/* An empty kernel, in PTX any driver since CUDA 11 takes. */
static const char cuda_empty_ptx[] = ".version 7.0\n"
                                     ".target sm_52\n"
                                     ".address_size 64\n"
                                     ".visible .entry collie_bench_empty()\n"
                                     "{\n"
                                     "  ret;\n"
                                     "}\n";

static double
cuda_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int
cb_cuda_open(int local_rank, char *err, size_t errlen)
{
  cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!cu.lib) {
    snprintf(err, errlen, "--device cuda: cannot open the CUDA driver: %s", dlerror());
    return -1;
  }
  struct {
    const char *name;
    void **slot;
  } want[] = {
      {"cuInit", (void **)&cu.init},
      {"cuDeviceGetCount", (void **)&cu.device_get_count},
      {"cuDeviceGet", (void **)&cu.device_get},
      {"cuDeviceGetName", (void **)&cu.device_get_name},
      {"cuDevicePrimaryCtxRetain", (void **)&cu.primary_ctx_retain},
      {"cuCtxSetCurrent", (void **)&cu.ctx_set_current},
      {"cuCtxSynchronize", (void **)&cu.ctx_synchronize},
      {"cuMemAlloc_v2", (void **)&cu.mem_alloc},
      {"cuMemFree_v2", (void **)&cu.mem_free},
      {"cuMemcpy", (void **)&cu.memcpy},
      {"cuMemcpyDtoD_v2", (void **)&cu.memcpy_dtod},
      {"cuModuleLoadData", (void **)&cu.module_load_data},
      {"cuModuleGetFunction", (void **)&cu.module_get_function},
      {"cuLaunchKernel", (void **)&cu.launch_kernel},
  };
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
    if (!(*want[i].slot = dlsym(cu.lib, want[i].name))) {
      snprintf(err, errlen, "--device cuda: the driver has no %s", want[i].name);
      return -1;
    }
  int n = 0, dev = 0;
  void *ctx = NULL;
  cu_result rc = cu.init(0);
  if (rc == 0) rc = cu.device_get_count(&n);
  if (rc == 0 && n < 1) rc = 100; /* CUDA_ERROR_NO_DEVICE */
  if (rc == 0) rc = cu.device_get(&dev, (local_rank < 0 ? 0 : local_rank) % n);
  if (rc == 0) rc = cu.primary_ctx_retain(&ctx, dev);
  if (rc == 0) rc = cu.ctx_set_current(ctx);
  if (rc != 0) {
    snprintf(err, errlen, "--device cuda: no usable GPU (CUDA driver error %d)", rc);
    return -1;
  }
  cu.device_get_name(cuda_device_name, (int)sizeof(cuda_device_name), dev);
  return 0;
}

const char *
cb_cuda_name(void)
{
  return cuda_device_name;
}

void *
cb_cuda_alloc(size_t n)
{
  cu_ptr p = 0;
  return cu.mem_alloc(&p, n ? n : 1) == 0 ? (void *)(uintptr_t)p : NULL;
}

void
cb_cuda_free(void *p)
{
  if (p) cu.mem_free((cu_ptr)(uintptr_t)p);
}

int
cb_cuda_copy(void *dst, const void *src, size_t n)
{
  return n == 0 || cu.memcpy((cu_ptr)(uintptr_t)dst, (cu_ptr)(uintptr_t)src, n) == 0 ? 0 : -1;
}

double
cb_cuda_copy_gbps(void)
{
  size_t n = (size_t)256 << 20;
  void *a = cb_cuda_alloc(n), *b = cb_cuda_alloc(n);
  double best = 0;
  for (int i = 0; a && b && i < 6; i++) {
    double t0 = cuda_now();
    if (cu.memcpy_dtod((cu_ptr)(uintptr_t)b, (cu_ptr)(uintptr_t)a, n) != 0 ||
        cu.ctx_synchronize() != 0)
      break;
    double gbps = (double)n / (cuda_now() - t0) / 1e9;
    if (i > 0 && gbps > best) best = gbps; /* the first warms up */
  }
  cb_cuda_free(a);
  cb_cuda_free(b);
  return best;
}

double
cb_cuda_launch_us(void)
{
  void *mod = NULL, *fn = NULL;
  if (cu.module_load_data(&mod, cuda_empty_ptx) != 0 ||
      cu.module_get_function(&fn, mod, "collie_bench_empty") != 0)
    return -1;
  double best = 1e9;
  for (int i = 0; i < 2000; i++) {
    double t0 = cuda_now();
    if (cu.launch_kernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != 0 ||
        cu.ctx_synchronize() != 0)
      return -1;
    double us = (cuda_now() - t0) * 1e6;
    if (us < best) best = us;
  }
  return best;
}
