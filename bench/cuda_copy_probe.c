/* bench/cuda_copy_probe.c - where do small staged copies spend their time?
 * (issue 21: on an H200, calls staged through host memory took 165-275 us
 * at 4 KiB and less but 23-34 us at 32 KiB, whatever the host algorithm.)
 *
 * Times a round trip through page-locked host memory (cuMemcpyHtoD, then
 * cuMemcpyDtoH, synchronous as core/stage.c's) and the same pair queued with
 * cuMemcpyAsync on a non-blocking stream and waited for, at 8 B to 256 KiB,
 * in N processes on the same GPU at once (N = argv[1], default 1; start
 * together through a pipe). If N = 2 is much slower than N = 1 only for the
 * small sizes, the small copies share the GPU's engine between the
 * processes' contexts (time slices) while the large ones go to the copy
 * engines. The driver is opened at run time, as libcollie does. Never run
 * by CI (no GPU there):
 *
 *   cc -O2 -I/usr/local/cuda/include bench/cuda_copy_probe.c -o /tmp/copy -ldl
 *   /tmp/copy 1 && /tmp/copy 2
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda_probe_load.h"

static struct {
  CUresult (*init)(unsigned);
  CUresult (*device_get)(CUdevice *, int);
  CUresult (*primary_retain)(CUcontext *, CUdevice);
  CUresult (*ctx_set)(CUcontext);
  CUresult (*mem_alloc)(CUdeviceptr *, size_t);
  CUresult (*alloc_host)(void **, size_t);
  CUresult (*htod)(CUdeviceptr, const void *, size_t);
  CUresult (*dtoh)(void *, CUdeviceptr, size_t);
  CUresult (*htod_async)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*dtoh_async)(void *, CUdeviceptr, size_t, CUstream);
  CUresult (*stream_create)(CUstream *, unsigned);
  CUresult (*stream_sync)(CUstream);
} cu;

static void
ck(CUresult rc, const char *what)
{
  if (rc == CUDA_SUCCESS) return;
  printf("pid %d: %s failed: CUresult %d\n", (int)getpid(), what, (int)rc);
  exit(1);
}

static void
load(void)
{
  static const struct probe_sym want[] = {
      {"cuInit", (void **)&cu.init},
      {"cuDeviceGet", (void **)&cu.device_get},
      {"cuDevicePrimaryCtxRetain", (void **)&cu.primary_retain},
      {"cuCtxSetCurrent", (void **)&cu.ctx_set},
      {"cuMemAlloc", (void **)&cu.mem_alloc},
      {"cuMemAllocHost", (void **)&cu.alloc_host},
      {"cuMemcpyHtoD", (void **)&cu.htod},
      {"cuMemcpyDtoH", (void **)&cu.dtoh},
      {"cuMemcpyHtoDAsync", (void **)&cu.htod_async},
      {"cuMemcpyDtoHAsync", (void **)&cu.dtoh_async},
      {"cuStreamCreate", (void **)&cu.stream_create},
      {"cuStreamSynchronize", (void **)&cu.stream_sync},
  };
  probe_load(want, sizeof want / sizeof want[0]);
}

static void
run(int me, int nproc, int go)
{
  static const size_t sizes[] = {8, 512, 4096, 32768, 262144};
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr d;
  CUstream s;
  void *h;
  ck(cu.init(0), "cuInit");
  ck(cu.device_get(&dev, 0), "cuDeviceGet");
  ck(cu.primary_retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  ck(cu.ctx_set(ctx), "cuCtxSetCurrent");
  ck(cu.mem_alloc(&d, 262144), "cuMemAlloc");
  ck(cu.alloc_host(&h, 262144), "cuMemAllocHost");
  ck(cu.stream_create(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  char c;
  if (read(go, &c, 1) != 1) exit(1); /* every process starts at once */
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    const int iters = 2000;
    double t0 = probe_now_us();
    for (int k = 0; k < iters; k++) {
      ck(cu.htod(d, h, sizes[i]), "cuMemcpyHtoD");
      ck(cu.dtoh(h, d, sizes[i]), "cuMemcpyDtoH");
    }
    double t1 = probe_now_us();
    for (int k = 0; k < iters; k++) {
      ck(cu.htod_async(d, h, sizes[i], s), "cuMemcpyHtoDAsync");
      ck(cu.dtoh_async(h, d, sizes[i], s), "cuMemcpyDtoHAsync");
      ck(cu.stream_sync(s), "cuStreamSynchronize");
    }
    double t2 = probe_now_us();
    printf("copy_probe: %d process(es), process %d: %7zu B: sync pair %8.2f us, async pair + wait "
           "%8.2f us\n",
           nproc, me, sizes[i], (t1 - t0) / iters, (t2 - t1) / iters);
    fflush(stdout);
  }
}

int
main(int argc, char **argv)
{
  int nproc = argc > 1 ? atoi(argv[1]) : 1, fds[2];
  if (nproc < 1 || nproc > 16 || pipe(fds) != 0) return 2;
  load();
  for (int i = 0; i < nproc; i++)
    if (fork() == 0) {
      close(fds[1]);
      run(i, nproc, fds[0]);
      _exit(0);
    }
  close(fds[0]);
  sleep(2); /* contexts made */
  for (int i = 0; i < nproc; i++)
    if (write(fds[1], "g", 1) != 1) return 1;
  int bad = 0, st;
  while (wait(&st) > 0) bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  return bad;
}
