/*
 * nccl_api_test.c - libcollie-nccl as an NCCL program uses it, on the
 * stand-in CUDA driver (tests/fakecuda): the parent forks the ranks, rank 0
 * makes the unique id and hands it to the others, and each rank
 * initialises from it and runs NCCL's calls on "device" buffers, checking
 * every result against the values it expects. Cases (argv[1]):
 *   calls N   every collective, send/recv in a group, split, the queries
 *   errors    each bad argument's result code and ncclGetLastError's text
 *   graph N   calls captured into a CUDA graph on a stream (the stand-in
 *             driver's capture), replayed with new inputs, as vLLM's pynccl
 *             captures its allreduce; PreMulSum refused at capture
 *   dead N    the last rank exits after init: the others' call fails with
 *             ncclRemoteError or ncclTimeout naming it, the async error says
 *             so, and each writes a flight-recorder dump that names it
 * Logs go to a folder of the test's own (COLLIE_LOG_DIR), removed after.
 * Exit 0 when every rank passed.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl/nccl_abi.h"
#include "nccl/nccl_api.def"

#define NCCL_PROTO_(ret, name, params, args) ret name params;
NCCL_IMPLEMENTED(NCCL_PROTO_)
NCCL_UNSUPPORTED(NCCL_PROTO_)
#undef NCCL_PROTO_

#define FAKE_LIB COLLIE_BUILD_DIR "/tests/fakecuda/libcuda.so.1"

static int me = -1;

static void __attribute__((format(printf, 1, 2), noreturn)) die(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "rank %d: FAIL: ", me);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  _exit(1);
}

#define OK(call)                                                                                   \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess)                                                                         \
      die("%s:%d: %s = %d (%s): %s", __FILE__, __LINE__, #call, (int)r_, ncclGetErrorString(r_),   \
          ncclGetLastError(NULL));                                                                 \
  } while (0)

#define EXPECT(cond, ...)                                                                          \
  do {                                                                                             \
    if (!(cond)) die(__VA_ARGS__);                                                                 \
  } while (0)

static int (*fk_alloc)(unsigned long long *, size_t);

static void
fake_load(void)
{
  void *h = dlopen(FAKE_LIB, RTLD_NOW | RTLD_GLOBAL);
  EXPECT(h, "cannot load the stand-in driver %s: %s", FAKE_LIB, dlerror());
  fk_alloc = (int (*)(unsigned long long *, size_t))dlsym(h, "cuMemAlloc_v2");
  EXPECT(fk_alloc, "the stand-in driver has no cuMemAlloc_v2");
}

/* "Device" memory: the stand-in's is shared memory the CPU reads too. */
static void *
dev(size_t bytes)
{
  unsigned long long p = 0;
  EXPECT(fk_alloc(&p, bytes ? bytes : 1) == 0, "cuMemAlloc(%zu) failed", bytes);
  return (void *)(uintptr_t)p;
}

static float
val(int r, size_t i)
{
  return (float)((r * 7 + (int)(i % 13)) % 11 + 1);
}

static void
check_f(const char *what, const float *got, size_t n, float (*want)(size_t, void *), void *arg)
{
  for (size_t i = 0; i < n; i++)
    if (got[i] != want(i, arg))
      die("%s: element %zu is %g, expected %g", what, i, got[i], want(i, arg));
}

static int g_p;
static float
want_sum(size_t i, void *arg)
{
  (void)arg;
  float s = 0;
  for (int q = 0; q < g_p; q++) s += val(q, i);
  return s;
}
static float
want_max(size_t i, void *arg)
{
  (void)arg;
  float m = val(0, i);
  for (int q = 1; q < g_p; q++)
    if (val(q, i) > m) m = val(q, i);
  return m;
}
static float
want_rank(size_t i, void *arg)
{
  return val(*(int *)arg, i);
}

static void
fill(float *b, int r, size_t n)
{
  for (size_t i = 0; i < n; i++) b[i] = val(r, i);
}

/* ---- calls ---- */

static void
case_calls(ncclComm_t comm, int p, int r)
{
  const size_t n = 1000;
  g_p = p;
  float *a = dev(n * 4), *b = dev(n * 4 * (size_t)p), *c = dev(n * 4 * (size_t)p);
  cudaStream_t s = NULL;
  int count = -1, rank = -1, device = -2, version = 0;
  OK(ncclCommCount(comm, &count));
  OK(ncclCommUserRank(comm, &rank));
  OK(ncclCommCuDevice(comm, &device));
  OK(ncclGetVersion(&version));
  EXPECT(count == p && rank == r && device == 0, "count %d rank %d device %d", count, rank, device);
  EXPECT(version >= 22300, "ncclGetVersion says %d", version);

  /* allreduce out of place and in place, sum and max */
  fill(a, r, n);
  OK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, comm, s));
  check_f("allreduce sum", b, n, want_sum, NULL);
  OK(ncclAllReduce(a, a, n, ncclFloat, ncclMax, comm, s));
  check_f("allreduce max in place", a, n, want_max, NULL);

  /* broadcast from each root, out of place, and ncclBcast */
  for (int root = 0; root < p; root++) {
    fill(a, r, n);
    memset(b, 0, n * 4);
    OK(ncclBroadcast(a, b, n, ncclFloat32, root, comm, s));
    check_f("broadcast", b, n, want_rank, &root);
    fill(a, r, n);
    OK(ncclBcast(a, n, ncclFloat32, root, comm, s));
    check_f("bcast", a, n, want_rank, &root);
  }

  /* reduce to the last rank */
  fill(a, r, n);
  memset(b, 0, n * 4);
  OK(ncclReduce(a, b, n, ncclFloat32, ncclSum, p - 1, comm, s));
  if (r == p - 1) check_f("reduce", b, n, want_sum, NULL);

  /* allgather: block q is rank q's */
  fill(a, r, n);
  OK(ncclAllGather(a, b, n, ncclFloat32, comm, s));
  for (int q = 0; q < p; q++) check_f("allgather", b + (size_t)q * n, n, want_rank, &q);

  /* reduce_scatter: every rank sends p blocks of its values */
  for (int q = 0; q < p; q++) fill(c + (size_t)q * n, r, n);
  OK(ncclReduceScatter(c, a, n, ncclFloat32, ncclSum, comm, s));
  check_f("reduce_scatter", a, n, want_sum, NULL);

  /* alltoall: block q of rank r's send is val(r); block q received is val(q) */
  for (int q = 0; q < p; q++) fill(c + (size_t)q * n, r, n);
  OK(ncclAlltoAll(c, b, n, ncclFloat32, comm, s));
  for (int q = 0; q < p; q++) check_f("alltoall", b + (size_t)q * n, n, want_rank, &q);

  /* gather to rank 0, scatter from rank 0 */
  fill(a, r, n);
  OK(ncclGather(a, b, n, ncclFloat32, 0, comm, s));
  if (r == 0)
    for (int q = 0; q < p; q++) check_f("gather", b + (size_t)q * n, n, want_rank, &q);
  if (r == 0)
    for (int q = 0; q < p; q++) fill(c + (size_t)q * n, q, n);
  OK(ncclScatter(c, a, n, ncclFloat32, 0, comm, s));
  check_f("scatter", a, n, want_rank, &r);

  /* a ring of sends and receives in one group: each sends before it
   * receives, which only a group lets progress */
  int next = (r + 1) % p, prev = (r + p - 1) % p;
  fill(a, r, n);
  memset(b, 0, n * 4);
  OK(ncclGroupStart());
  OK(ncclSend(a, n, ncclFloat32, next, comm, s));
  OK(ncclRecv(b, n, ncclFloat32, prev, comm, s));
  OK(ncclGroupEnd());
  check_f("send/recv ring", b, n, want_rank, &prev);

  /* a group of two collectives, nested groups */
  fill(a, r, n);
  OK(ncclGroupStart());
  OK(ncclGroupStart());
  OK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, comm, s));
  OK(ncclGroupEnd());
  OK(ncclAllGather(a, c, n, ncclFloat32, comm, s));
  OK(ncclGroupEnd());
  check_f("grouped allreduce", b, n, want_sum, NULL);
  for (int q = 0; q < p; q++) check_f("grouped allgather", c + (size_t)q * n, n, want_rank, &q);

  /* integer AVG */
  int32_t *ia = dev(n * 4);
  for (size_t i = 0; i < n; i++) ia[i] = (int32_t)(r * 10 + (int)i);
  OK(ncclAllReduce(ia, ia, n, ncclInt32, ncclAvg, comm, s));
  for (size_t i = 0; i < n; i++) {
    int64_t sum = 0;
    for (int q = 0; q < p; q++) sum += q * 10 + (int)i;
    EXPECT(ia[i] == (int32_t)(sum / p), "int32 avg element %zu: %d, expected %lld", i, ia[i],
           (long long)(sum / p));
  }

  /* split: even and odd ranks, keyed in reverse; NOCOLOR leaves rank 0 out */
  ncclComm_t half = NULL;
  OK(ncclCommSplit(comm, r % 2, -r, &half, NULL));
  int hn = 0, hr = -1;
  OK(ncclCommCount(half, &hn));
  OK(ncclCommUserRank(half, &hr));
  EXPECT(hn == (p - r % 2 + 1) / 2, "split: %d ranks", hn);
  fill(a, r, n);
  OK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, half, s));
  for (size_t i = 0; i < n; i++) {
    float w = 0;
    for (int q = r % 2; q < p; q += 2) w += val(q, i);
    EXPECT(b[i] == w, "split allreduce element %zu: %g, expected %g", i, b[i], w);
  }
  OK(ncclCommDestroy(half));
  ncclComm_t none = (ncclComm_t)&none;
  OK(ncclCommSplit(comm, r == 0 ? NCCL_SPLIT_NOCOLOR : 1, 0, &none, NULL));
  EXPECT((r == 0) == (none == NULL), "NOCOLOR split: comm %p", (void *)none);
  if (none) OK(ncclCommDestroy(none));

  /* PreMulSum: every rank's input times its own scalar, then summed */
  float sc = 0.5f * (float)(r + 1);
  ncclRedOp_t pm;
  OK(ncclRedOpCreatePreMulSum(&pm, &sc, ncclFloat32, ncclScalarHostImmediate, comm));
  sc = 100; /* host-immediate: read at creation */
  fill(a, r, n);
  OK(ncclAllReduce(a, b, n, ncclFloat32, pm, comm, s));
  for (size_t i = 0; i < n; i++) {
    float w = 0;
    for (int q = 0; q < p; q++) w += 0.5f * (float)(q + 1) * val(q, i);
    EXPECT(b[i] == w, "premulsum allreduce element %zu: %g, expected %g", i, b[i], w);
  }
  OK(ncclRedOpDestroy(pm, comm));
  /* a scalar in device memory, read when the call runs; reduce_scatter */
  float *dsc = dev(4);
  *dsc = 7;
  OK(ncclRedOpCreatePreMulSum(&pm, dsc, ncclFloat32, ncclScalarDevice, comm));
  *dsc = 2;
  for (int q = 0; q < p; q++) fill(c + (size_t)q * n, r, n);
  OK(ncclReduceScatter(c, a, n, ncclFloat32, pm, comm, s));
  for (size_t i = 0; i < n; i++)
    EXPECT(a[i] == 2 * want_sum(i, NULL), "premulsum reduce_scatter element %zu: %g", i, a[i]);
  OK(ncclRedOpDestroy(pm, comm));
  /* integers, to a root, the operator destroyed inside the group that uses it */
  int32_t k3 = 3;
  int32_t *ib = dev(n * 4);
  OK(ncclRedOpCreatePreMulSum(&pm, &k3, ncclInt32, ncclScalarHostImmediate, comm));
  for (size_t i = 0; i < n; i++) ia[i] = (int32_t)(r + (int)i);
  OK(ncclGroupStart());
  OK(ncclReduce(ia, ib, n, ncclInt32, pm, 0, comm, s));
  OK(ncclRedOpDestroy(pm, comm));
  OK(ncclGroupEnd());
  if (r == 0)
    for (size_t i = 0; i < n; i++) {
      int32_t w = 0;
      for (int q = 0; q < p; q++) w += 3 * (q + (int)i);
      EXPECT(ib[i] == w, "premulsum int32 reduce element %zu: %d, expected %d", i, ib[i], w);
    }

  ncclResult_t async = ncclInternalError;
  OK(ncclCommGetAsyncError(comm, &async));
  EXPECT(async == ncclSuccess, "async error %d after good calls", (int)async);
  OK(ncclCommFinalize(comm));
}

/* ---- errors ---- */

static void
expect_err(ncclResult_t got, ncclResult_t want, const char *needle, const char *what)
{
  EXPECT(got == want, "%s: result %d, expected %d (%s)", what, (int)got, (int)want,
         ncclGetLastError(NULL));
  EXPECT(strstr(ncclGetLastError(NULL), needle), "%s: last error '%s' lacks '%s'", what,
         ncclGetLastError(NULL), needle);
}

static void
case_errors(ncclComm_t comm, int p)
{
  float *a = dev(64);
  expect_err(ncclAllReduce(a, a, 4, ncclFloat8e4m3, ncclSum, comm, NULL), ncclInvalidArgument,
             "ncclAllReduce: datatype ncclFloat8e4m3", "fp8");
  expect_err(ncclAllReduce(a, a, 4, (ncclDataType_t)42, ncclSum, comm, NULL), ncclInvalidArgument,
             "datatype = 42", "bad dtype");
  expect_err(ncclAllReduce(a, a, 4, ncclFloat32, (ncclRedOp_t)9, comm, NULL), ncclInvalidArgument,
             "op = 9", "bad op");
  expect_err(ncclBroadcast(a, a, 4, ncclFloat32, p, comm, NULL), ncclInvalidArgument,
             "ncclBroadcast: root = ", "root out of range");
  expect_err(ncclSend(a, 4, ncclFloat32, -1, comm, NULL), ncclInvalidArgument,
             "ncclSend: peer = -1", "peer out of range");
  expect_err(ncclAllReduce(a, a, 4, ncclFloat32, ncclSum, NULL, NULL), ncclInvalidArgument,
             "comm is NULL", "NULL comm");
  expect_err(ncclCommRevoke(comm, 0), ncclInvalidUsage, "ncclCommRevoke: not supported",
             "unsupported call");
  float two = 2;
  ncclRedOp_t pm;
  expect_err(ncclRedOpCreatePreMulSum(&pm, &two, ncclFloat8e4m3, ncclScalarHostImmediate, comm),
             ncclInvalidArgument, "ncclRedOpCreatePreMulSum: datatype ncclFloat8e4m3",
             "premulsum fp8");
  expect_err(ncclRedOpCreatePreMulSum(&pm, NULL, ncclFloat32, ncclScalarHostImmediate, comm),
             ncclInvalidArgument, "scalar is NULL", "premulsum NULL scalar");
  OK(ncclRedOpCreatePreMulSum(&pm, &two, ncclFloat32, ncclScalarHostImmediate, comm));
  expect_err(ncclAllReduce(a, a, 4, ncclFloat64, pm, comm, NULL), ncclInvalidArgument,
             "made for float32, the call is on float64", "premulsum dtype");
  OK(ncclRedOpDestroy(pm, comm));
  expect_err(ncclAllReduce(a, a, 4, ncclFloat32, pm, comm, NULL), ncclInvalidArgument,
             "live ncclRedOpCreatePreMulSum operator", "destroyed premulsum");
  expect_err(ncclRedOpDestroy(pm, comm), ncclInvalidArgument, "not a live PreMulSum",
             "premulsum destroyed twice");
  expect_err(ncclGroupEnd(), ncclInvalidUsage, "no group is open", "group end alone");
  expect_err(ncclCommInitAll(&comm, 2, NULL), ncclInvalidUsage, "one GPU per process", "initall");
  ncclUniqueId junk;
  memset(&junk, 7, sizeof(junk));
  ncclComm_t c2 = NULL;
  expect_err(ncclCommInitRank(&c2, 2, junk, 0), ncclInvalidArgument, "not an id of collie",
             "foreign id");
  expect_err(ncclCommInitRank(&c2, 2, junk, 5), ncclInvalidArgument, "rank = 5", "rank range");
  ncclConfig_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.size = sizeof(cfg);
  expect_err(ncclCommSplit(comm, 0, 0, &c2, &cfg), ncclInvalidArgument, "NCCL_CONFIG_INITIALIZER",
             "config without magic");
  expect_err(ncclCommInitRankScalable(&c2, 2, 0, 0, &junk, NULL), ncclInvalidArgument,
             "at least one is needed", "scalable init without ids");
  ncclComm_t shrunk = NULL;
  expect_err(ncclCommShrink(comm, NULL, 0, &shrunk, NULL, 4), ncclInvalidArgument,
             "shrinkFlags = 0x4", "shrink flags");
  expect_err(ncclCommShrink(comm, NULL, 2, &shrunk, NULL, 0), ncclInvalidArgument,
             "excludeRanksCount = 2", "shrink without a list");
  ncclCollConfig_t ccfg;
  memset(&ccfg, 0, sizeof(ccfg));
  ccfg.size = sizeof(ccfg);
  expect_err(ncclAllReduceConfig(a, a, 4, ncclFloat32, ncclSum, comm, NULL, &ccfg),
             ncclInvalidArgument, "NCCL_COLLCONFIG_INITIALIZER", "per-call config without magic");
  expect_err(ncclCommRegister(comm, a, 64, NULL), ncclInvalidArgument, "handle is NULL",
             "register without a handle");
  expect_err(ncclCommCount(comm, NULL), ncclInvalidArgument, "count is NULL", "count NULL");
  /* a refused call inside a group fails the group's end too */
  OK(ncclGroupStart());
  ncclResult_t in = ncclAllReduce(a, a, 4, ncclFloat8e5m2, ncclSum, comm, NULL);
  EXPECT(in == ncclInvalidArgument, "refused call in a group: %d", (int)in);
  expect_err(ncclGroupEnd(), ncclInvalidArgument, "ncclFloat8e5m2", "group of a refused call");
  EXPECT(strcmp(ncclGetErrorString(ncclRemoteError), ncclGetErrorString(ncclTimeout)) != 0,
         "error strings");
  /* the communicator still works after argument errors */
  float *b = dev(64);
  for (int i = 0; i < 4; i++) a[i] = 1;
  OK(ncclAllReduce(a, b, 4, ncclFloat32, ncclSum, comm, NULL));
  EXPECT(b[0] == (float)p, "allreduce after errors: %g", b[0]);
  /* a destroyed communicator is refused, not used */
  ncclComm_t dup = NULL;
  OK(ncclCommSplit(comm, 0, 0, &dup, NULL));
  OK(ncclCommDestroy(dup));
}

/* ---- graph ---- */

#define CAP_STREAM ((cudaStream_t)0xca97)

static void
case_graph(ncclComm_t comm, int p, int r)
{
  void (*begin)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "fake_cuda_capture_begin");
  void *(*end)(void) = (void *(*)(void))dlsym(RTLD_DEFAULT, "fake_cuda_capture_end");
  void (*replay)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "fake_cuda_graph_replay");
  void (*destroy)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "fake_cuda_graph_destroy");
  EXPECT(begin && end && replay && destroy, "the stand-in driver's capture calls");
  const size_t n = 512;
  float *a = dev(n * 4), *g = dev(n * 4 * (size_t)p), *rs = dev(n * 4 * (size_t)p);
  float *ro = dev(n * 4), *bi = dev(n * 4), *bo = dev(n * 4);
  for (size_t i = 0; i < n; i++) a[i] = bi[i] = bo[i] = -5;
  float two = 2;
  ncclRedOp_t pm;
  OK(ncclRedOpCreatePreMulSum(&pm, &two, ncclFloat32, ncclScalarHostImmediate, comm));
  begin(CAP_STREAM);
  OK(ncclAllReduce(a, a, n, ncclFloat32, ncclSum, comm, CAP_STREAM));
  OK(ncclAllGather(a, g, n, ncclFloat32, comm, CAP_STREAM));
  OK(ncclReduceScatter(rs, ro, n, ncclFloat32, ncclSum, comm, CAP_STREAM));
  OK(ncclBroadcast(bi, bo, n, ncclFloat32, p - 1, comm, CAP_STREAM)); /* out of place */
  ncclResult_t refused = ncclAllReduce(a, a, n, ncclFloat32, pm, comm, CAP_STREAM);
  void *graph = end();
  EXPECT(refused == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "cannot be captured"),
         "PreMulSum at capture: %d (%s)", (int)refused, ncclGetLastError(NULL));
  EXPECT(a[0] == -5 && bo[0] == -5, "the capture ran the calls (a[0] = %g)", a[0]);
  for (int k = 0; k < 20; k++) {
    for (size_t i = 0; i < n; i++) a[i] = val(r + k, i);
    for (size_t i = 0; i < n * (size_t)p; i++) rs[i] = val(r + k, i % n) + (float)(i / n);
    for (size_t i = 0; i < n; i++) bi[i] = val(r + 2 * k, i);
    replay(graph);
    for (size_t i = 0; i < n; i++) {
      float sum = 0, rsw = 0;
      for (int q = 0; q < p; q++) sum += val(q + k, i);
      for (int q = 0; q < p; q++) rsw += val(q + k, i) + (float)r;
      EXPECT(a[i] == sum, "replay %d: allreduce [%zu] = %g, want %g", k, i, a[i], sum);
      for (int q = 0; q < p; q++)
        EXPECT(g[(size_t)q * n + i] == sum, "replay %d: allgather [%d][%zu]", k, q, i);
      EXPECT(ro[i] == rsw, "replay %d: reduce_scatter [%zu] = %g, want %g", k, i, ro[i], rsw);
      EXPECT(bo[i] == val(p - 1 + 2 * k, i), "replay %d: broadcast [%zu] = %g", k, i, bo[i]);
    }
  }
  destroy(graph);
  OK(ncclRedOpDestroy(pm, comm));
}

/* ---- dead ---- */

static void
case_dead(ncclComm_t comm, int p, int r)
{
  float *a = dev(4096);
  OK(ncclAllReduce(a, a, 1024, ncclFloat32, ncclSum, comm, NULL)); /* every rank is up */
  if (r == p - 1) _exit(0);                                        /* gone, without a word */
  ncclResult_t got = ncclAllReduce(a, a, 1024, ncclFloat32, ncclSum, comm, NULL);
  EXPECT(got == ncclRemoteError || got == ncclTimeout, "allreduce with rank %d gone: %d (%s)",
         p - 1, (int)got, ncclGetLastError(comm));
  char want[32];
  snprintf(want, sizeof(want), "rank %d", p - 1);
  EXPECT(strstr(ncclGetLastError(comm), want), "last error '%s' does not name %s",
         ncclGetLastError(comm), want);
  ncclResult_t async = ncclSuccess;
  OK(ncclCommGetAsyncError(comm, &async));
  EXPECT(async == got, "async error %d, the call said %d", (int)async, (int)got);
  OK(ncclCommAbort(comm));
  _exit(0);
}

/* Rank 0 makes the id (and so serves its store, as NCCL's root keeps its
 * bootstrap thread) and hands it to the others through pipes, as a program
 * would through MPI or a file. The parent forks before any thread exists:
 * a fork beside a running thread could copy a lock it holds. */
static int
run_rank(const char *what, int (*pipes)[2], int p, int r)
{
  me = r;
  alarm(90);
  fake_load();
  ncclUniqueId id;
  if (r == 0) {
    OK(ncclGetUniqueId(&id));
    for (int q = 1; q < p; q++)
      EXPECT(write(pipes[q][1], &id, sizeof(id)) == (ssize_t)sizeof(id), "writing the id");
  } else {
    EXPECT(read(pipes[r][0], &id, sizeof(id)) == (ssize_t)sizeof(id), "reading the id");
  }
  ncclComm_t comm = NULL;
  OK(ncclCommInitRank(&comm, p, id, r));
  if (!strcmp(what, "calls")) case_calls(comm, p, r);
  if (!strcmp(what, "errors")) case_errors(comm, p);
  if (!strcmp(what, "dead")) case_dead(comm, p, r);
  if (!strcmp(what, "graph")) case_graph(comm, p, r);
  OK(ncclCommDestroy(comm));
  expect_err(ncclCommCount(comm, &p), ncclInvalidUsage, "destroyed", "destroyed comm");
  return 0;
}

int
main(int argc, char **argv)
{
  int p = argc > 2 ? atoi(argv[2]) : 2;
  if (argc < 2 || p < 1 || p > 16) {
    fprintf(stderr, "usage: nccl_api_test calls|errors|graph|dead [NRANKS <= 16]\n");
    return 2;
  }
  char logs[] = "/tmp/nccl_api_test.XXXXXX";
  if (!mkdtemp(logs)) {
    perror("mkdtemp");
    return 1;
  }
  setenv("COLLIE_LOG_DIR", logs, 1);
  int pipes[16][2];
  for (int r = 0; r < p; r++)
    if (pipe(pipes[r]) != 0) {
      perror("pipe");
      return 1;
    }
  pid_t kids[16];
  for (int r = 0; r < p; r++) {
    kids[r] = fork();
    if (kids[r] == 0) _exit(run_rank(argv[1], pipes, p, r));
  }
  int bad = 0;
  for (int r = 0; r < p; r++) {
    int st = 0;
    if (waitpid(kids[r], &st, 0) != kids[r]) st = 1 << 8;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "rank %d: %s %d\n", r, WIFEXITED(st) ? "exit" : "signal",
              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
      bad = 1;
    }
  }
  /* The survivors of "dead" dumped their flight recorders, naming the
   * operation and the rank that went; nothing is left behind. */
  int dumps = 0;
  DIR *d = opendir(logs);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[512], text[65536];
    snprintf(path, sizeof(path), "%s/%s", logs, e->d_name);
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
    if (f) fclose(f);
    text[got] = '\0';
    char want[32];
    snprintf(want, sizeof(want), "rank %d", p - 1);
    if (!strncmp(e->d_name, "flight-rank", 11) && strstr(text, "allreduce") && strstr(text, want))
      dumps++;
    unlink(path);
  }
  if (d) closedir(d);
  rmdir(logs);
  if (!strcmp(argv[1], "dead") && dumps != p - 1) {
    fprintf(stderr, "dead: %d flight dumps name the allreduce and rank %d, expected %d\n", dumps,
            p - 1, p - 1);
    bad = 1;
  }
  printf("nccl_api_test %s at %d ranks: %s\n", argv[1], p, bad ? "FAILED" : "passed");
  return bad;
}
