/*
 * fake_cuda.c - a stand-in CUDA driver for tests on machines without a GPU
 * (built as libcuda.so.1 in the build tree; tests/unit/cuda_fake_test.c
 * loads it): "device memory" is shared memory (a memfd per allocation), an
 * IPC handle names the exporting process's fd so that a peer opens it
 * through /proc, copies are memmove, and a "kernel" launch runs collie's
 * reduction on the CPU. Enough of the driver for collie's device path
 * (src/device) to run end to end, its direct path included, so that CI
 * checks the logic a GPU would run; what a real GPU adds (streams, the PTX,
 * the speed) is for scripts/gpu_check.sh.
 *
 * FAKE_CUDA_GPU_PER_PROCESS=1 gives every process a GPU of its own (the
 * direct path's plan for several GPUs; by default all share one).
 * FAKE_CUDA_NO_IPC=1 makes allocations unshareable (as cuMemCreate's are),
 * FAKE_CUDA_FAIL_OPEN=1 makes cuIpcOpenMemHandle fail: the two ways the
 * direct path must fall back to the host on every rank.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FAKE_EXPORT __attribute__((visibility("default")))
#define MAXMAP 512

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct {
  char reserved[64];
} CUipcMemHandle;

struct fake_map {
  uintptr_t base;
  size_t size;
  int fd; /* own allocations: the memfd; imports: -1 */
  unsigned long long id;
  int imported;
};

static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fake_map fake_maps[MAXMAP];
static unsigned long long fake_next_id = 1;
static int fake_ctx_token;
static long fake_launches, fake_opens, fake_closes, fake_copy_lists;
/* Contexts pushed and not popped, every thread together: collie pushes a
 * buffer's context around each use and must pop it on every path. A pop
 * with none pushed is an error, as the driver's (no current context). */
static long fake_ctx_depth;

struct fake_handle {
  int pid, fd;
  size_t size;
  unsigned long long id;
};

struct fake_fn {
  char dtype[16], op[8];
};
static struct fake_fn fake_fns[64];
static struct fake_fn fake_copy_fn = {"copy", "list"};
static int fake_nfns;

static struct fake_map *
fake_find(uintptr_t p)
{
  for (int i = 0; i < MAXMAP; i++)
    if (fake_maps[i].base && p >= fake_maps[i].base && p < fake_maps[i].base + fake_maps[i].size)
      return &fake_maps[i];
  return NULL;
}

static struct fake_map *
fake_slot(void)
{
  for (int i = 0; i < MAXMAP; i++)
    if (!fake_maps[i].base) return &fake_maps[i];
  return NULL;
}

FAKE_EXPORT long
fake_cuda_launches(void)
{
  return fake_launches;
}

/* Launches of collie_copy_list (counted in fake_cuda_launches too). */
FAKE_EXPORT long
fake_cuda_copy_lists(void)
{
  return fake_copy_lists;
}

FAKE_EXPORT long
fake_cuda_ctx_depth(void)
{
  return __atomic_load_n(&fake_ctx_depth, __ATOMIC_RELAXED);
}

FAKE_EXPORT long
fake_cuda_opens(void)
{
  return fake_opens - fake_closes; /* mappings held now */
}

static CUresult
f_init(unsigned flags)
{
  (void)flags;
  return 0;
}

FAKE_EXPORT CUresult
cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
  size_t size = (n + 4095) / 4096 * 4096;
  int fd = memfd_create("fake-cuda", 0);
  if (fd < 0 || ftruncate(fd, (off_t)size) != 0) return 2; /* out of memory */
  void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return 2;
  pthread_mutex_lock(&fake_mu);
  struct fake_map *s = fake_slot();
  if (s) *s = (struct fake_map){(uintptr_t)m, size, fd, fake_next_id++, 0};
  pthread_mutex_unlock(&fake_mu);
  if (!s) return 2;
  *p = (CUdeviceptr)(uintptr_t)m;
  return 0;
}

FAKE_EXPORT CUresult
cuMemFree_v2(CUdeviceptr p)
{
  pthread_mutex_lock(&fake_mu);
  struct fake_map *m = fake_find((uintptr_t)p);
  if (!m || m->imported || m->base != (uintptr_t)p) {
    pthread_mutex_unlock(&fake_mu);
    return 1;
  }
  munmap((void *)m->base, m->size);
  close(m->fd);
  memset(m, 0, sizeof(*m));
  pthread_mutex_unlock(&fake_mu);
  return 0;
}

static CUresult
f_pointer_get_attribute(void *data, int attr, CUdeviceptr p)
{
  pthread_mutex_lock(&fake_mu);
  struct fake_map *m = fake_find((uintptr_t)p);
  struct fake_map copy = m ? *m : (struct fake_map){0};
  pthread_mutex_unlock(&fake_mu);
  if (!m) return 1; /* CUDA_ERROR_INVALID_VALUE: not the driver's */
  switch (attr) {
  case 1:
    *(void **)data = &fake_ctx_token;
    break; /* CONTEXT */
  case 2:
    *(unsigned *)data = 2;
    break; /* MEMORY_TYPE: device */
  case 7:
    *(unsigned long long *)data = copy.id;
    break; /* BUFFER_ID */
  case 8:
    *(unsigned *)data = 0;
    break; /* IS_MANAGED */
  case 9:
    *(int *)data = 0;
    break; /* DEVICE_ORDINAL */
  case 10:
    *(int *)data = !getenv("FAKE_CUDA_NO_IPC") && !copy.imported;
    break; /* IPC capable */
  case 11:
    *(CUdeviceptr *)data = copy.base;
    break; /* RANGE_START_ADDR */
  case 12:
    *(size_t *)data = copy.size;
    break; /* RANGE_SIZE */
  default:
    return 1;
  }
  return 0;
}

static CUresult
f_ctx_push(void *ctx)
{
  if (ctx != &fake_ctx_token) return 201;
  __atomic_add_fetch(&fake_ctx_depth, 1, __ATOMIC_RELAXED);
  return 0;
}

static CUresult
f_ctx_pop(void **ctx)
{
  if (__atomic_sub_fetch(&fake_ctx_depth, 1, __ATOMIC_RELAXED) < 0) {
    __atomic_add_fetch(&fake_ctx_depth, 1, __ATOMIC_RELAXED);
    return 201;
  }
  if (ctx) *ctx = &fake_ctx_token;
  return 0;
}

static CUresult
f_ctx_get_current(void **ctx)
{
  *ctx = &fake_ctx_token;
  return 0;
}

static CUresult
f_ctx_get_device(int *dev)
{
  *dev = 0;
  return 0;
}

static CUresult
f_device_get_attribute(int *v, int attr, int dev)
{
  (void)attr;
  (void)dev;
  *v = 4;
  return 0;
}

static void fake_capture_touch(void);
static int fake_capture_node(void *stream, void *dst, const void *src, size_t n, void (*fn)(void *),
                             void *arg);

static CUresult
f_memcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
  fake_capture_touch();
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  return 0;
}

static CUresult
f_memcpy_async(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream)
{
  if (fake_capture_node(stream, (void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, NULL,
                        NULL))
    return 0;
  if (!stream) fake_capture_touch();
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  return 0;
}

/* Every fake copy and kernel is done when its call returns; the stream
 * FAKE_CUDA_BUSY_STREAM (a handle tests pass) never finishes, as a stream
 * behind a kernel that hangs. */
#define FAKE_CUDA_BUSY_STREAM ((void *)0xb5b5)

static CUresult
f_query(void *stream_or_event)
{
  fake_capture_touch();
  return stream_or_event == FAKE_CUDA_BUSY_STREAM ? 600 /* CUDA_ERROR_NOT_READY */ : 0;
}

/* Stream capture, as far as collie uses it (core/capture.c): between
 * fake_cuda_capture_begin(stream) and fake_cuda_capture_end(), async copies
 * and host functions queued on that stream become the nodes of a graph
 * that fake_cuda_graph_replay runs (in order, on the calling thread) and
 * fake_cuda_graph_destroy frees, running the destructors of the user
 * objects the graph was given. The legacy default stream answers as the
 * driver's does while a capture runs in global mode
 * (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT). Whatever a capture forbids, done
 * while one runs, counts as a break (fake_cuda_capture_breaks): a stream
 * query, a synchronous copy, a kernel on the capturing stream, a copy on
 * the legacy stream, page-locking memory in the thread's global mode. */
#define FAKE_CUDA_CAPTURE_STREAM ((void *)0xca97)
struct fake_node {
  void *dst;
  const void *src;
  size_t n;
  void (*fn)(void *); /* a host node when set */
  void *arg;
};
struct fake_owned {
  void *ptr;
  void (*destroy)(void *);
};
struct fake_graph {
  struct fake_node nodes[256];
  int n;
  struct fake_owned owned[256];
  int nowned;
};
static pthread_mutex_t fake_cap_mu = PTHREAD_MUTEX_INITIALIZER;
static void *fake_cap_stream; /* the capturing stream (NULL: no capture) */
static struct fake_graph *fake_cap_graph;
static long fake_capture_breaks;
static __thread int fake_thread_mode; /* 0 global, 1 thread-local, 2 relaxed */

FAKE_EXPORT void
fake_cuda_capture_begin(void *stream)
{
  pthread_mutex_lock(&fake_cap_mu);
  fake_cap_graph = calloc(1, sizeof(*fake_cap_graph));
  fake_cap_stream = stream;
  pthread_mutex_unlock(&fake_cap_mu);
}

FAKE_EXPORT void *
fake_cuda_capture_end(void)
{
  pthread_mutex_lock(&fake_cap_mu);
  void *g = fake_cap_graph;
  fake_cap_graph = NULL;
  fake_cap_stream = NULL;
  pthread_mutex_unlock(&fake_cap_mu);
  return g;
}

FAKE_EXPORT int
fake_cuda_graph_nodes(void *graph)
{
  return ((struct fake_graph *)graph)->n;
}

FAKE_EXPORT void
fake_cuda_graph_replay(void *graph)
{
  struct fake_graph *g = graph;
  for (int i = 0; i < g->n; i++) {
    struct fake_node *nd = &g->nodes[i];
    if (nd->fn)
      nd->fn(nd->arg);
    else
      memmove(nd->dst, nd->src, nd->n);
  }
}

FAKE_EXPORT void
fake_cuda_graph_destroy(void *graph)
{
  struct fake_graph *g = graph;
  for (int i = 0; i < g->nowned; i++)
    if (g->owned[i].destroy) g->owned[i].destroy(g->owned[i].ptr);
  free(g);
}

FAKE_EXPORT long
fake_cuda_capture_breaks(void)
{
  return __atomic_load_n(&fake_capture_breaks, __ATOMIC_RELAXED);
}

static int
fake_capturing(void)
{
  return __atomic_load_n(&fake_cap_stream, __ATOMIC_RELAXED) != NULL;
}

static void
fake_capture_touch(void)
{
  if (fake_capturing()) __atomic_add_fetch(&fake_capture_breaks, 1, __ATOMIC_RELAXED);
}

/* Appends a node to the graph stream captures into: 1 when it did. */
static int
fake_capture_node(void *stream, void *dst, const void *src, size_t n, void (*fn)(void *), void *arg)
{
  pthread_mutex_lock(&fake_cap_mu);
  int mine =
      fake_cap_stream && stream == fake_cap_stream && fake_cap_graph && fake_cap_graph->n < 256;
  if (mine) fake_cap_graph->nodes[fake_cap_graph->n++] = (struct fake_node){dst, src, n, fn, arg};
  pthread_mutex_unlock(&fake_cap_mu);
  return mine;
}

static CUresult
f_stream_is_capturing(void *stream, int *status)
{
  *status = 0;
  if (!fake_capturing()) return 0;
  if (stream == fake_cap_stream) {
    *status = 1; /* CU_STREAM_CAPTURE_STATUS_ACTIVE */
    return 0;
  }
  return stream == NULL ? 906 /* CUDA_ERROR_STREAM_CAPTURE_IMPLICIT */ : 0;
}

static CUresult
f_stream_get_capture_info(void *stream, int *status, unsigned long long *id, void **graph,
                          const void **deps, size_t *ndeps)
{
  CUresult rc = f_stream_is_capturing(stream, status);
  if (id) *id = *status ? 1 : 0;
  if (graph) *graph = *status ? fake_cap_graph : NULL;
  if (deps) *deps = NULL;
  if (ndeps) *ndeps = 0;
  return rc;
}

static CUresult
f_thread_exchange_capture_mode(int *mode)
{
  int old = fake_thread_mode;
  fake_thread_mode = *mode;
  *mode = old;
  return 0;
}

static CUresult
f_launch_host_func(void *stream, void (*fn)(void *), void *arg)
{
  if (!fake_capture_node(stream, NULL, NULL, 0, fn, arg)) fn(arg);
  return 0;
}

static CUresult
f_user_object_create(void **obj, void *ptr, void (*destroy)(void *), unsigned refs, unsigned flags)
{
  (void)refs, (void)flags;
  struct fake_owned *o = malloc(sizeof(*o));
  if (!o) return 2;
  *o = (struct fake_owned){ptr, destroy};
  *obj = o;
  return 0;
}

static CUresult
f_graph_retain_user_object(void *graph, void *obj, unsigned count, unsigned flags)
{
  (void)count, (void)flags;
  struct fake_graph *g = graph;
  if (!g || g->nowned == 256) return 1; /* CUDA_ERROR_INVALID_VALUE */
  g->owned[g->nowned++] = *(struct fake_owned *)obj;
  free(obj); /* moved into the graph */
  return 0;
}

static CUresult
f_ipc_get(CUipcMemHandle *h, CUdeviceptr base)
{
  pthread_mutex_lock(&fake_mu);
  struct fake_map *m = fake_find((uintptr_t)base);
  struct fake_handle fh = {getpid(), m ? m->fd : -1, m ? m->size : 0, m ? m->id : 0};
  pthread_mutex_unlock(&fake_mu);
  if (!m || m->imported) return 1;
  memset(h, 0, sizeof(*h));
  memcpy(h->reserved, &fh, sizeof(fh));
  return 0;
}

static CUresult
f_ipc_open(CUdeviceptr *p, CUipcMemHandle h, unsigned flags)
{
  (void)flags;
  struct fake_handle fh;
  memcpy(&fh, h.reserved, sizeof(fh));
  if (getenv("FAKE_CUDA_FAIL_OPEN")) return 205; /* CUDA_ERROR_MAP_FAILED */
  if (fh.pid == getpid()) return 201;            /* as CUDA: not in the exporting process */
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", fh.pid, fh.fd);
  int fd = open(path, O_RDWR);
  if (fd < 0) return 400; /* CUDA_ERROR_INVALID_HANDLE */
  void *m = mmap(NULL, fh.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return 205;
  pthread_mutex_lock(&fake_mu);
  struct fake_map *s = fake_slot();
  if (s) *s = (struct fake_map){(uintptr_t)m, fh.size, -1, fh.id, 1};
  fake_opens++;
  pthread_mutex_unlock(&fake_mu);
  *p = (CUdeviceptr)(uintptr_t)m;
  return 0;
}

static CUresult
f_ipc_close(CUdeviceptr p)
{
  pthread_mutex_lock(&fake_mu);
  struct fake_map *m = fake_find((uintptr_t)p);
  if (!m || !m->imported) {
    pthread_mutex_unlock(&fake_mu);
    return 1;
  }
  munmap((void *)m->base, m->size);
  memset(m, 0, sizeof(*m));
  fake_closes++;
  pthread_mutex_unlock(&fake_mu);
  return 0;
}

static CUresult
f_module_load(void **mod, const void *image)
{
  *mod = (void *)image;
  return image ? 0 : 218; /* CUDA_ERROR_INVALID_PTX */
}

static CUresult
f_module_get_function(void **fn, void *mod, const char *name)
{
  (void)mod;
  if (!strcmp(name, "collie_copy_list")) {
    *fn = &fake_copy_fn;
    return 0;
  }
  const char *pre = "collie_reduce_";
  if (strncmp(name, pre, strlen(pre))) return 500; /* CUDA_ERROR_NOT_FOUND */
  const char *dt = name + strlen(pre), *us = strrchr(dt, '_');
  if (!us || (size_t)(us - dt) >= sizeof(fake_fns[0].dtype) || fake_nfns == 64) return 500;
  struct fake_fn *f = &fake_fns[fake_nfns++];
  memcpy(f->dtype, dt, (size_t)(us - dt));
  f->dtype[us - dt] = '\0';
  snprintf(f->op, sizeof(f->op), "%s", us + 1);
  *fn = f;
  return 0;
}

#define FAKE_REDUCE(T)                                                                             \
  for (unsigned long long i = 0; i < n; i++) {                                                     \
    T acc = ((const T *)srcs[0])[i];                                                               \
    for (int k = 1; k < ns; k++) {                                                                 \
      T x = ((const T *)srcs[k])[i];                                                               \
      acc = sum ? acc + x : prod ? acc * x : mx ? (x > acc ? x : acc) : (x < acc ? x : acc);       \
    }                                                                                              \
    if (div > 1) acc = (T)(acc / (T)div);                                                          \
    for (int k = 0; k < nd; k++) ((T *)dsts[k])[i] = acc;                                          \
  }

/* collie_reduce_<dtype>_<op>(dsts, nd, srcs, ns, n, div), as kernels.cu. */
static CUresult
f_launch(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
         unsigned shmem, void *stream, void **params, void **extra)
{
  (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem, (void)extra;
  if (stream && stream == __atomic_load_n(&fake_cap_stream, __ATOMIC_RELAXED)) fake_capture_touch();
  const struct fake_fn *f = fn;
  if (f == &fake_copy_fn) { /* collie_copy_list(copies, n, aligned), as kernels.cu */
    const struct {
      const void *src[32];
      void *dst[32];
      unsigned long long bytes[32];
    } *c = params[0];
    int n = *(int *)params[1];
    if (n < 1 || n > 32 || gy != (unsigned)n) return 1; /* CUDA_ERROR_INVALID_VALUE */
    for (int k = 0; k < n; k++) memmove(c->dst[k], c->src[k], c->bytes[k]);
    __atomic_add_fetch(&fake_copy_lists, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&fake_launches, 1, __ATOMIC_RELAXED);
    return 0;
  }
  void *const *dsts = (void *const *)params[0]; /* a struct of 8 pointers */
  int nd = *(int *)params[1];
  const void *const *srcs = (const void *const *)params[2];
  int ns = *(int *)params[3];
  unsigned long long n = *(unsigned long long *)params[4];
  int div = *(int *)params[5];
  int sum = !strcmp(f->op, "sum"), prod = !strcmp(f->op, "prod"), mx = !strcmp(f->op, "max");
  if (!sum && !prod && !mx && strcmp(f->op, "min")) return 801; /* CUDA_ERROR_NOT_SUPPORTED */
  if (ns < 1 || ns > 8 || nd < 1 || nd > 8) return 1;
  if (!strcmp(f->dtype, "float32")) {
    FAKE_REDUCE(float)
  } else if (!strcmp(f->dtype, "float64")) {
    FAKE_REDUCE(double)
  } else if (!strcmp(f->dtype, "int32")) {
    FAKE_REDUCE(int32_t)
  } else if (!strcmp(f->dtype, "int64")) {
    FAKE_REDUCE(int64_t)
  } else {
    return 801;
  }
  __atomic_add_fetch(&fake_launches, 1, __ATOMIC_RELAXED);
  return 0;
}

/* One GPU for every process, unless FAKE_CUDA_GPU_PER_PROCESS is set (then
 * each process has its own: the plan for several GPUs). */
static CUresult
f_device_get_uuid(unsigned char *uuid, int dev)
{
  (void)dev;
  memset(uuid, 0x5a, 16);
  if (getenv("FAKE_CUDA_GPU_PER_PROCESS")) {
    int pid = getpid();
    memcpy(uuid, &pid, sizeof(pid));
  }
  return 0;
}

/* Streams and events: every fake copy is done when it returns, so there is
 * nothing to wait for; they only have to exist and be counted. */
static long fake_streams, fake_events, fake_pinned, fake_pinned_made, fake_pinned_tries;

FAKE_EXPORT long
fake_cuda_objects(void)
{
  return fake_streams + fake_events + fake_pinned; /* alive now */
}

FAKE_EXPORT long
fake_cuda_pinned_made(void)
{
  return fake_pinned_made; /* page-locked allocations ever made */
}

FAKE_EXPORT long
fake_cuda_pinned_tries(void)
{
  return fake_pinned_tries; /* cuMemAllocHost calls, failed ones too */
}

static CUresult
f_stream_create(void **s, unsigned flags)
{
  (void)flags;
  *s = malloc(1);
  __atomic_add_fetch(&fake_streams, 1, __ATOMIC_RELAXED);
  return 0;
}

static CUresult
f_stream_destroy(void *s)
{
  free(s);
  __atomic_sub_fetch(&fake_streams, 1, __ATOMIC_RELAXED);
  return 0;
}

static CUresult
f_stream_wait_event(void *s, void *e, unsigned flags)
{
  (void)s, (void)e, (void)flags;
  return 0;
}

static CUresult
f_event_create(void **e, unsigned flags)
{
  (void)flags;
  *e = malloc(1);
  __atomic_add_fetch(&fake_events, 1, __ATOMIC_RELAXED);
  return 0;
}

static CUresult
f_event_record(void *e, void *s)
{
  (void)e, (void)s;
  return 0;
}

static CUresult
f_event_destroy(void *e)
{
  free(e);
  __atomic_sub_fetch(&fake_events, 1, __ATOMIC_RELAXED);
  return 0;
}

static CUresult
f_mem_alloc_host(void **p, size_t n)
{
  __atomic_add_fetch(&fake_pinned_tries, 1, __ATOMIC_RELAXED);
  if (fake_thread_mode != 2) fake_capture_touch(); /* page-locking is forbidden in global mode */
  if (getenv("FAKE_CUDA_FAIL_PINNED")) return 2;   /* CUDA_ERROR_OUT_OF_MEMORY */
  *p = malloc(n ? n : 1);
  if (!*p) return 2;
  __atomic_add_fetch(&fake_pinned, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&fake_pinned_made, 1, __ATOMIC_RELAXED);
  return 0;
}

static CUresult
f_mem_free_host(void *p)
{
  free(p);
  __atomic_sub_fetch(&fake_pinned, 1, __ATOMIC_RELAXED);
  return 0;
}

static CUresult
f_error_string(CUresult rc, const char **s)
{
  *s = rc == 205 ? "mapping failed (fake)" : rc == 201 ? "invalid context (fake)" : "error (fake)";
  return 0;
}

/* The plain entry points a tool resolves with dlsym (tools/cbench_cuda.c:
 * collie-bench --device cuda), beside libcollie's cuGetProcAddress. One
 * device, one context. */
FAKE_EXPORT CUresult
cuInit(unsigned flags)
{
  return f_init(flags);
}

FAKE_EXPORT CUresult
cuDeviceGetCount(int *n)
{
  *n = 1;
  return 0;
}

FAKE_EXPORT CUresult
cuDeviceGet(int *dev, int ordinal)
{
  if (ordinal != 0) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *dev = 0;
  return 0;
}

FAKE_EXPORT CUresult
cuDeviceGetName(char *name, int len, int dev)
{
  (void)dev;
  snprintf(name, (size_t)len, "fake GPU (tests/fakecuda)");
  return 0;
}

FAKE_EXPORT CUresult
cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
  (void)dev;
  return f_ctx_get_current(ctx);
}

FAKE_EXPORT CUresult
cuCtxSetCurrent(void *ctx)
{
  (void)ctx;
  return 0;
}

FAKE_EXPORT CUresult
cuCtxSynchronize(void)
{
  return 0; /* every fake operation is done when it returns */
}

FAKE_EXPORT CUresult
cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
  return f_memcpy(dst, src, n);
}

FAKE_EXPORT CUresult
cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
  return f_memcpy(dst, src, n);
}

FAKE_EXPORT CUresult
cuModuleLoadData(void **mod, const void *image)
{
  return f_module_load(mod, image);
}

FAKE_EXPORT CUresult
cuModuleGetFunction(void **fn, void *mod, const char *name)
{
  return f_module_get_function(fn, mod, name);
}

FAKE_EXPORT CUresult
cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
               unsigned bz, unsigned shmem, void *stream, void **params, void **extra)
{
  return f_launch(fn, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
}

FAKE_EXPORT CUresult
cuGetProcAddress_v2(const char *name, void **fn, int version, unsigned long long flags, int *status)
{
  (void)version;
  (void)flags;
  static const struct {
    const char *name;
    void *fn;
  } table[] = {
      {"cuInit", (void *)f_init},
      {"cuPointerGetAttribute", (void *)f_pointer_get_attribute},
      {"cuCtxPushCurrent", (void *)f_ctx_push},
      {"cuCtxPopCurrent", (void *)f_ctx_pop},
      {"cuCtxGetCurrent", (void *)f_ctx_get_current},
      {"cuCtxGetDevice", (void *)f_ctx_get_device},
      {"cuDeviceGetAttribute", (void *)f_device_get_attribute},
      {"cuDeviceGetUuid", (void *)f_device_get_uuid},
      {"cuMemcpy", (void *)f_memcpy},
      {"cuMemcpyAsync", (void *)f_memcpy_async},
      {"cuStreamQuery", (void *)f_query},
      {"cuStreamCreate", (void *)f_stream_create},
      {"cuStreamDestroy", (void *)f_stream_destroy},
      {"cuStreamWaitEvent", (void *)f_stream_wait_event},
      {"cuStreamIsCapturing", (void *)f_stream_is_capturing},
      {"cuStreamGetCaptureInfo", (void *)f_stream_get_capture_info},
      {"cuThreadExchangeStreamCaptureMode", (void *)f_thread_exchange_capture_mode},
      {"cuLaunchHostFunc", (void *)f_launch_host_func},
      {"cuUserObjectCreate", (void *)f_user_object_create},
      {"cuGraphRetainUserObject", (void *)f_graph_retain_user_object},
      {"cuEventCreate", (void *)f_event_create},
      {"cuEventRecord", (void *)f_event_record},
      {"cuEventQuery", (void *)f_query},
      {"cuEventDestroy", (void *)f_event_destroy},
      {"cuMemAllocHost", (void *)f_mem_alloc_host},
      {"cuMemFreeHost", (void *)f_mem_free_host},
      {"cuMemAlloc", (void *)cuMemAlloc_v2},
      {"cuMemFree", (void *)cuMemFree_v2},
      {"cuIpcGetMemHandle", (void *)f_ipc_get},
      {"cuIpcOpenMemHandle", (void *)f_ipc_open},
      {"cuIpcCloseMemHandle", (void *)f_ipc_close},
      {"cuModuleLoadData", (void *)f_module_load},
      {"cuModuleGetFunction", (void *)f_module_get_function},
      {"cuLaunchKernel", (void *)f_launch},
      {"cuGetErrorString", (void *)f_error_string},
  };
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
    if (!strcmp(table[i].name, name)) {
      *fn = table[i].fn;
      if (status) *status = 0;
      return 0;
    }
  *fn = NULL;
  return 500;
}
