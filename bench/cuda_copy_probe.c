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
 * engines. To tell which path would avoid that, each size is also timed
 * one direction at a time, as a device-to-device copy whose host side is
 * the mapped device address of the page-locked buffer, and as a kernel
 * (argv[2]: the PTX of bench/cuda_copy_probe_kernels.cu) that copies the
 * bytes through that mapping; beside them an empty kernel's launch. Then the
 * ways around a slow host-to-device copy: a 32 KiB one into a scratch
 * buffer and a device-to-device copy of the bytes wanted, a device-to-device
 * copy alone, cuMemcpyBatchAsync asked to prefer the copy engines (CUDA
 * 12.8+), and a copy from pageable memory. argv[3] "lockstep" starts every
 * round in all processes together (as ranks in a collective), "turns" lets
 * one process at a time copy. The
 * driver is opened at run time, as libcollie does. Never run by CI (no GPU
 * there):
 *
 *   cc -O2 -I/usr/local/cuda/include bench/cuda_copy_probe.c -o /tmp/copy -ldl
 *   nvcc -ptx bench/cuda_copy_probe_kernels.cu -o /tmp/copy.ptx
 *   /tmp/copy 1 /tmp/copy.ptx && /tmp/copy 2 /tmp/copy.ptx
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda_probe_load.h"

static struct {
  CUresult (*mem_alloc)(CUdeviceptr *, size_t);
  CUresult (*host_alloc)(void **, size_t, unsigned);
  CUresult (*host_devptr)(CUdeviceptr *, void *, unsigned);
  CUresult (*dtod_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*module_load)(CUmodule *, const void *);
  CUresult (*module_fn)(CUfunction *, CUmodule, const char *);
  CUresult (*batch)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *, size_t *,
                    size_t, CUstream);
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                     unsigned, CUstream, void **, void **);
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
      {"cuMemAlloc", (void **)&cu.mem_alloc},
      {"cuMemHostAlloc", (void **)&cu.host_alloc},
      {"cuMemHostGetDevicePointer", (void **)&cu.host_devptr},
      {"cuMemcpyDtoDAsync", (void **)&cu.dtod_async},
      {"cuModuleLoadData", (void **)&cu.module_load},
      {"cuModuleGetFunction", (void **)&cu.module_fn},
      {"cuLaunchKernel", (void **)&cu.launch},
      {"cuMemcpyHtoD", (void **)&cu.htod},
      {"cuMemcpyDtoH", (void **)&cu.dtoh},
      {"cuMemcpyHtoDAsync", (void **)&cu.htod_async},
      {"cuMemcpyDtoHAsync", (void **)&cu.dtoh_async},
      {"cuStreamCreate", (void **)&cu.stream_create},
      {"cuStreamSynchronize", (void **)&cu.stream_sync},
  };
  probe_load(want, sizeof want / sizeof want[0]);
  static const struct probe_sym want13[] = {{"cuMemcpyBatchAsync", (void **)&cu.batch}};
  probe_load_version(want13, 1, 13000); /* the form without failIdx */
}

/* The ways one size is moved, each timed alone (iters rounds, then the
 * mean of one round printed). */
enum way {
  SYNC_PAIR,     /* cuMemcpyHtoD then cuMemcpyDtoH, as core/stage.c */
  ASYNC_PAIR,    /* both queued on a stream, one wait */
  HTOD,          /* cuMemcpyHtoD alone */
  DTOH,          /* cuMemcpyDtoH alone */
  MAPPED_PAIR,   /* cuMemcpyDtoDAsync to and from the mapped host address */
  KERNEL_PAIR,   /* probe_copy to and from the mapped host address */
  NOOP,          /* an empty kernel and a wait */
  HTOD_SCRATCH,  /* 32 KiB host to a device scratch, then device to device */
  DTOD,          /* device to device alone */
  HTOD_BATCH,    /* cuMemcpyBatchAsync, PREFER_OVERLAP_WITH_COMPUTE */
  HTOD_PAGEABLE, /* cuMemcpyHtoD from malloc'd memory */
  NWAYS
};
static const char *const way_name[NWAYS] = {
    "sync pair",    "async pair",       "htod", "dtoh",       "mapped dtod pair", "kernel pair",
    "empty kernel", "htod via scratch", "dtod", "htod batch", "htod pageable"};

struct probe {
  CUdeviceptr d, hd; /* device buffer; the host buffer's mapped address */
  CUdeviceptr scratch, d2;
  void *h, *pageable;
  CUstream s;
  CUfunction noop, copy; /* NULL without PTX */
};

static void
launch_copy(struct probe *p, CUdeviceptr dst, CUdeviceptr src, size_t n)
{
  unsigned long long nn = n;
  void *args[] = {&dst, &src, &nn};
  unsigned block = 256, grid = (unsigned)((n + block - 1) / block);
  ck(cu.launch(p->copy, grid, 1, 1, block, 1, 1, 0, p->s, args, NULL), "cuLaunchKernel");
}

static void
once(struct probe *p, enum way w, size_t n)
{
  switch (w) {
  case SYNC_PAIR:
    ck(cu.htod(p->d, p->h, n), "cuMemcpyHtoD");
    ck(cu.dtoh(p->h, p->d, n), "cuMemcpyDtoH");
    return;
  case ASYNC_PAIR:
    ck(cu.htod_async(p->d, p->h, n, p->s), "cuMemcpyHtoDAsync");
    ck(cu.dtoh_async(p->h, p->d, n, p->s), "cuMemcpyDtoHAsync");
    break;
  case HTOD:
    ck(cu.htod(p->d, p->h, n), "cuMemcpyHtoD");
    return;
  case DTOH:
    ck(cu.dtoh(p->h, p->d, n), "cuMemcpyDtoH");
    return;
  case MAPPED_PAIR:
    ck(cu.dtod_async(p->d, p->hd, n, p->s), "cuMemcpyDtoDAsync");
    ck(cu.dtod_async(p->hd, p->d, n, p->s), "cuMemcpyDtoDAsync");
    break;
  case KERNEL_PAIR:
    launch_copy(p, p->d, p->hd, n);
    launch_copy(p, p->hd, p->d, n);
    break;
  case NOOP:
    ck(cu.launch(p->noop, 1, 1, 1, 1, 1, 1, 0, p->s, NULL, NULL), "cuLaunchKernel");
    break;
  case HTOD_SCRATCH:
    ck(cu.htod_async(p->scratch, p->h, 32768, p->s), "cuMemcpyHtoDAsync");
    ck(cu.dtod_async(p->d, p->scratch, n, p->s), "cuMemcpyDtoDAsync");
    break;
  case DTOD:
    ck(cu.dtod_async(p->d2, p->d, n, p->s), "cuMemcpyDtoDAsync");
    break;
  case HTOD_BATCH: {
    CUdeviceptr dst = p->d, src = (CUdeviceptr)(uintptr_t)p->h;
    size_t size = n, idx = 0;
    CUmemcpyAttributes a;
    memset(&a, 0, sizeof a);
    a.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    a.flags = CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE;
    ck(cu.batch(&dst, &src, &size, 1, &a, &idx, 1, p->s), "cuMemcpyBatchAsync");
    break;
  }
  case HTOD_PAGEABLE:
    ck(cu.htod(p->d, p->pageable, n), "cuMemcpyHtoD(pageable)");
    return;
  case NWAYS:
    return;
  }
  ck(cu.stream_sync(p->s), "cuStreamSynchronize");
}

/* Reads the PTX file at path into a NUL-terminated string. */
static char *
read_ptx(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = malloc(1 << 20);
  size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
  fclose(f);
  if (buf) buf[n] = 0;
  return buf;
}

/* How the processes' rounds line up (argv[3]): "free" (each at its own
 * pace), "lockstep" (all start each round together, as ranks in a
 * collective do) or "turns" (one process at a time, round robin). */
enum pace { FREE, LOCKSTEP, TURNS };
static const char *const pace_name[3] = {"free", "lockstep", "turns"};
static struct shared {
  _Atomic unsigned long arrived, turn;
} * sh;

static void
pace_before(enum pace pace, int me, int nproc, unsigned long round)
{
  unsigned long want = (round + 1) * (unsigned long)nproc,
                turn = round * (unsigned long)nproc + (unsigned long)me;
  if (pace == LOCKSTEP) atomic_fetch_add(&sh->arrived, 1);
  if (pace == FREE) return;
  /* A peer that died never arrives: give up after 10 s rather than spin on. */
  double give_up = probe_now_us() + 10e6;
  while (pace == LOCKSTEP ? atomic_load(&sh->arrived) < want : atomic_load(&sh->turn) != turn)
    if (probe_now_us() > give_up) {
      printf("pid %d: the other processes stopped arriving (round %lu)\n", (int)getpid(), round);
      exit(1);
    }
}

static void
pace_after(enum pace pace)
{
  if (pace == TURNS) atomic_fetch_add(&sh->turn, 1);
}

static void
run(int me, int nproc, int go, const char *ptx_path, enum pace pace)
{
  static const size_t sizes[] = {8, 4096, 16384, 32768};
  const size_t max = 262144;
  struct probe p = {0};
  CUresult rc;
  const char *failed = probe_context(&rc);
  if (failed) ck(rc, failed);
  ck(cu.mem_alloc(&p.d, max), "cuMemAlloc");
  ck(cu.host_alloc(&p.h, max, CU_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc");
  ck(cu.host_devptr(&p.hd, p.h, 0), "cuMemHostGetDevicePointer");
  ck(cu.mem_alloc(&p.scratch, max), "cuMemAlloc");
  ck(cu.mem_alloc(&p.d2, max), "cuMemAlloc");
  p.pageable = calloc(1, max);
  ck(cu.stream_create(&p.s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  char *ptx = ptx_path ? read_ptx(ptx_path) : NULL;
  if (ptx) {
    CUmodule m;
    ck(cu.module_load(&m, ptx), "cuModuleLoadData");
    ck(cu.module_fn(&p.noop, m, "probe_noop"), "cuModuleGetFunction(probe_noop)");
    ck(cu.module_fn(&p.copy, m, "probe_copy"), "cuModuleGetFunction(probe_copy)");
  }
  char c;
  if (read(go, &c, 1) != 1) exit(1); /* every process starts at once */
  unsigned long round = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    for (int w = 0; w < NWAYS; w++) {
      if ((w == KERNEL_PAIR || w == NOOP) && !ptx) continue;
      if (w == NOOP && i > 0) continue; /* no size */
      const int iters = 500;
      if (pace != FREE && w != SYNC_PAIR && w != HTOD && w != DTOD && w != NOOP) continue;
      once(&p, (enum way)w, sizes[i]); /* warm */
      double t0 = probe_now_us();
      for (int k = 0; k < iters; k++) {
        pace_before(pace, me, nproc, round++);
        once(&p, (enum way)w, sizes[i]);
        pace_after(pace);
      }
      double t1 = probe_now_us();
      printf("copy_probe: %s, %d process(es), process %d: %7zu B: %-16s %8.2f us\n",
             pace_name[pace], nproc, me, sizes[i], way_name[w], (t1 - t0) / iters);
      fflush(stdout);
    }
  free(ptx);
  free(p.pageable);
}

int
main(int argc, char **argv)
{
  int nproc = argc > 1 ? atoi(argv[1]) : 1, fds[2];
  if (nproc < 1 || nproc > 16 || pipe(fds) != 0) return 2;
  enum pace pace = FREE;
  for (int k = 0; k < 3; k++)
    if (argc > 3 && strcmp(argv[3], pace_name[k]) == 0) pace = (enum pace)k;
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 2;
  load();
  for (int i = 0; i < nproc; i++)
    if (fork() == 0) {
      close(fds[1]);
      run(i, nproc, fds[0], argc > 2 ? argv[2] : NULL, pace);
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
