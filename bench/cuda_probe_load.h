/* bench/cuda_probe_load.h - the CUDA probes' driver loader: libcuda.so.1
 * opened at run time and each entry point resolved through
 * cuGetProcAddress_v2 (the versioned symbols the driver chooses), as
 * libcollie does. Header-only: the probes are single files built by
 * scripts/gpu_check.sh with `cc ... -ldl`. */
#ifndef CUDA_PROBE_LOAD_H
#define CUDA_PROBE_LOAD_H

#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct probe_sym {
  const char *name;
  void **slot;
};

/* Resolves want[0..n) as the driver API of `version` (12000: CUDA 12.0)
 * defines them; exits 2 naming what is missing. */
static void
probe_load_version(const struct probe_sym *want, size_t n, int version)
{
  typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t,
                                  CUdriverProcAddressQueryResult *);
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    printf("no driver: %s\n", dlerror());
    exit(2);
  }
  get_proc_fn gp = (get_proc_fn)dlsym(h, "cuGetProcAddress_v2");
  if (!gp) {
    printf("libcuda.so.1 has no cuGetProcAddress_v2 (driver older than CUDA 12)\n");
    exit(2);
  }
  for (size_t i = 0; i < n; i++) {
    CUdriverProcAddressQueryResult st;
    CUresult rc = gp(want[i].name, want[i].slot, version, CU_GET_PROC_ADDRESS_DEFAULT, &st);
    if (rc != CUDA_SUCCESS || !*want[i].slot) {
      printf("cuGetProcAddress(%s) failed: %d status %d\n", want[i].name, (int)rc, (int)st);
      exit(2);
    }
  }
}

static void
probe_load(const struct probe_sym *want, size_t n)
{
  probe_load_version(want, n, 12000);
}

/* Makes device 0's primary context current in the calling process (after
 * any fork: a context does not survive one). NULL on success, else the
 * name of the call that failed, its result in *rc. */
static const char *
probe_context(CUresult *rc)
{
  CUresult (*init)(unsigned) = NULL;
  CUresult (*device_get)(CUdevice *, int) = NULL;
  CUresult (*primary_retain)(CUcontext *, CUdevice) = NULL;
  CUresult (*ctx_set)(CUcontext) = NULL;
  const struct probe_sym want[] = {
      {"cuInit", (void **)&init},
      {"cuDeviceGet", (void **)&device_get},
      {"cuDevicePrimaryCtxRetain", (void **)&primary_retain},
      {"cuCtxSetCurrent", (void **)&ctx_set},
  };
  probe_load(want, sizeof want / sizeof want[0]);
  CUdevice dev;
  CUcontext ctx;
  if ((*rc = init(0)) != CUDA_SUCCESS) return "cuInit";
  if ((*rc = device_get(&dev, 0)) != CUDA_SUCCESS) return "cuDeviceGet";
  if ((*rc = primary_retain(&ctx, dev)) != CUDA_SUCCESS) return "cuDevicePrimaryCtxRetain";
  if ((*rc = ctx_set(ctx)) != CUDA_SUCCESS) return "cuCtxSetCurrent";
  return NULL;
}

/* Monotonic microseconds. */
static double
probe_now_us(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

#endif
