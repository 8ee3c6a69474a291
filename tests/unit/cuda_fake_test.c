/*
 * cuda_fake_test.c - the device path end to end on a CPU, with the stand-in
 * driver of tests/fakecuda (libcuda.so.1 over shared memory): every rank
 * loads it as torch would load the real one, allocates "device" buffers, and
 * runs the collectives of the direct path (coll/cuda_ipc.c) and the staged
 * ones, against expected values. What a GPU adds (real kernels, streams,
 * speed) is scripts/gpu_check.sh's; what this proves is the logic: the
 * records, the handle caches, the agreement, the blocks each rank reduces,
 * in place and out of place, the fallback to the host on every rank when one
 * cannot share, and that everything mapped is closed with the communicator.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/introspect.h"
#include "runner.h"
#include "transport/shm_int.h"
#include "util/util.h"

#define FAKE_LIB COLLIE_BUILD_DIR "/tests/fakecuda/libcuda.so.1"

static int (*fk_alloc)(unsigned long long *, size_t);
static int (*fk_free)(unsigned long long);
static long (*fk_launches)(void);
static long (*fk_held)(void);
static long (*fk_objects)(void);
static long (*fk_copy_lists)(void);
static long (*fk_ctx_depth)(void);

static void
fk_load(void)
{
  void *h = dlopen(FAKE_LIB, RTLD_NOW | RTLD_GLOBAL);
  ASSERTF(h, "cannot load the fake driver: %s", dlerror());
  fk_alloc = (int (*)(unsigned long long *, size_t))dlsym(h, "cuMemAlloc_v2");
  fk_free = (int (*)(unsigned long long))dlsym(h, "cuMemFree_v2");
  fk_launches = (long (*)(void))dlsym(h, "fake_cuda_launches");
  fk_held = (long (*)(void))dlsym(h, "fake_cuda_opens");
  fk_objects = (long (*)(void))dlsym(h, "fake_cuda_objects");
  fk_copy_lists = (long (*)(void))dlsym(h, "fake_cuda_copy_lists");
  fk_ctx_depth = (long (*)(void))dlsym(h, "fake_cuda_ctx_depth");
  ASSERT(fk_alloc && fk_free && fk_launches && fk_held && fk_objects && fk_copy_lists &&
         fk_ctx_depth);
}

static void *
dev_alloc(size_t n)
{
  unsigned long long p = 0;
  ASSERT(fk_alloc(&p, n ? n : 1) == 0);
  return (void *)(uintptr_t)p;
}

static void
dev_free(void *p)
{
  ASSERT(fk_free((unsigned long long)(uintptr_t)p) == 0);
}

/* Rank r's element i (small integers: exact in float32). */
static float
fk_val(int r, size_t i)
{
  return (float)((r * 5 + (int)(i % 11)) % 9 + 1);
}

/* reduce (float32 sum, int32 AVG), gather and scatter from every root, in
 * and out of place at the root; every rank's result checked. */
static void
fk_rooted(collie_comm_t *comm, size_t n)
{
  int p = collie_comm_size(comm), r = collie_comm_rank(comm);
  float *all = dev_alloc(n * 4 * (size_t)p), *one = dev_alloc(n * 4);
  for (int root = 0; root < p; root++)
    for (int inplace = 0; inplace < 2; inplace++) {
      const char *how = inplace ? " in place" : "";
      /* reduce: the root's recvbuf is its sendbuf in place */
      for (size_t i = 0; i < n; i++) one[i] = fk_val(r, i);
      for (size_t i = 0; i < n; i++) all[i] = -1;
      float *rs = r == root && inplace ? all : one;
      if (rs == all)
        for (size_t i = 0; i < n; i++) all[i] = fk_val(r, i);
      ASSERT_OK(collie_reduce(comm, rs, all, n, COLLIE_FLOAT32, COLLIE_SUM, root, NULL, NULL));
      for (size_t i = 0; i < n; i++) {
        float want = 0;
        for (int q = 0; q < p; q++) want += fk_val(q, i);
        if (r != root) want = -1; /* a non-root's recvbuf is left alone */
        ASSERTF(all[i] == want, "reduce n=%zu root %d%s: [%zu] = %g, want %g", n, root, how, i,
                all[i], want);
      }
      int32_t *iv = (int32_t *)one;
      for (size_t i = 0; i < n; i++) iv[i] = (int32_t)(p * fk_val(r, i));
      ASSERT_OK(collie_reduce(comm, iv, iv, n, COLLIE_INT32, COLLIE_AVG, root, NULL, NULL));
      if (r == root)
        for (size_t i = 0; i < n; i++) {
          int32_t want = 0;
          for (int q = 0; q < p; q++) want += (int32_t)fk_val(q, i);
          ASSERTF(iv[i] == want, "reduce int32 avg n=%zu root %d: [%zu] = %d, want %d", n, root, i,
                  iv[i], want);
        }
      /* gather: in place, the root's block of recvbuf is its sendbuf */
      float *gs = r == root && inplace ? all + (size_t)root * n : one;
      for (size_t i = 0; i < n * (size_t)p; i++) all[i] = -1;
      for (size_t i = 0; i < n; i++) gs[i] = fk_val(r, i);
      ASSERT_OK(collie_gather(comm, gs, all, n, COLLIE_FLOAT32, root, NULL, NULL));
      for (size_t i = 0; i < n * (size_t)p; i++) {
        float want = r == root ? fk_val((int)(i / n), i % n) : -1; /* a non-root's: left alone */
        ASSERTF(all[i] == want, "gather n=%zu root %d%s: [%zu] = %g, want %g", n, root, how, i,
                all[i], want);
      }
      /* scatter: in place, the root's recvbuf is its block of sendbuf */
      for (size_t i = 0; i < n * (size_t)p; i++) all[i] = r == root ? fk_val((int)(i / n), i) : -1;
      float *sr = r == root && inplace ? all + (size_t)root * n : one;
      if (sr == one)
        for (size_t i = 0; i < n; i++) one[i] = -1;
      ASSERT_OK(collie_scatter(comm, all, sr, n, COLLIE_FLOAT32, root, NULL, NULL));
      for (size_t i = 0; i < n; i++)
        ASSERTF(sr[i] == fk_val(r, (size_t)r * n + i), "scatter n=%zu root %d%s: [%zu] = %g", n,
                root, how, i, sr[i]);
    }
  dev_free(one);
  dev_free(all);
}

/* alltoall out of place (the direct path) and in place (the host path, as
 * every rank's buffers overlap); every block checked. */
static void
fk_alltoall(collie_comm_t *comm, size_t n)
{
  int p = collie_comm_size(comm), r = collie_comm_rank(comm);
  size_t len = n * (size_t)p;
  float *s = dev_alloc(len * 4), *d = dev_alloc(len * 4);
  for (int inplace = 0; inplace < 2; inplace++) {
    float *out = inplace ? s : d;
    for (size_t i = 0; i < len; i++) s[i] = (float)(r * 1000) + (float)i;
    if (!inplace)
      for (size_t i = 0; i < len; i++) d[i] = -1;
    ASSERT_OK(collie_alltoall(comm, s, out, n, COLLIE_FLOAT32, NULL, NULL));
    /* block q of rank r's result = block r of rank q's sendbuf */
    for (size_t i = 0; i < len; i++) {
      size_t q = i / n, k = i % n;
      float want = (float)(q * 1000) + (float)((size_t)r * n + k);
      ASSERTF(out[i] == want, "alltoall n=%zu%s: [%zu] = %g, want %g", n,
              inplace ? " in place" : "", i, out[i], want);
    }
  }
  dev_free(d);
  dev_free(s);
}

/* alltoallv's count from rank `from` to rank `to`, and its values. */
static size_t
fk_vcount(int from, int to, size_t n)
{
  return (size_t)((from + 2 * to) % 3) + 1 + n / 100;
}

static float
fk_vval(int from, int to, size_t k)
{
  return (float)(from * 10000 + to * 1000) + (float)k;
}

/* allgatherv (uneven blocks with gaps between them, in and out of place)
 * and alltoallv (uneven counts, gaps on both sides): every element checked,
 * the gaps left alone. */
static void
fk_vcolls(collie_comm_t *comm, size_t n)
{
  int p = collie_comm_size(comm), r = collie_comm_rank(comm);
  size_t counts[16], displs[16], total = 0;
  ASSERT(p <= 16);
  for (int q = 0; q < p; q++) {
    counts[q] = n + (size_t)q;
    displs[q] = total + 3; /* a gap of 3 before every block */
    total = displs[q] + counts[q];
  }
  float *all = dev_alloc(total * 4), *mine = dev_alloc(counts[r] * 4);
  for (int inplace = 0; inplace < 2; inplace++) {
    for (size_t i = 0; i < total; i++) all[i] = -7;
    float *src = inplace ? all + displs[r] : mine;
    for (size_t k = 0; k < counts[r]; k++) src[k] = fk_val(r, k);
    ASSERT_OK(
        collie_allgatherv(comm, src, counts[r], all, counts, displs, COLLIE_FLOAT32, NULL, NULL));
    for (int q = 0; q < p; q++) {
      size_t lo = q ? displs[q - 1] + counts[q - 1] : 0;
      for (size_t i = lo; i < displs[q]; i++)
        ASSERTF(all[i] == -7, "allgatherv n=%zu: gap [%zu] = %g", n, i, all[i]);
      for (size_t k = 0; k < counts[q]; k++)
        ASSERTF(all[displs[q] + k] == fk_val(q, k), "allgatherv n=%zu%s: block %d [%zu] = %g", n,
                inplace ? " in place" : "", q, k, all[displs[q] + k]);
    }
  }
  dev_free(mine);
  dev_free(all);

  size_t sc[16], sd[16], rc[16], rd[16], stot = 0, rtot = 0;
  for (int q = 0; q < p; q++) {
    sc[q] = fk_vcount(r, q, n);
    sd[q] = stot + 1;
    stot = sd[q] + sc[q];
    rc[q] = fk_vcount(q, r, n);
    rd[q] = rtot + 2;
    rtot = rd[q] + rc[q];
  }
  float *s = dev_alloc(stot * 4), *d = dev_alloc(rtot * 4);
  for (int q = 0; q < p; q++)
    for (size_t k = 0; k < sc[q]; k++) s[sd[q] + k] = fk_vval(r, q, k);
  for (size_t i = 0; i < rtot; i++) d[i] = -7;
  ASSERT_OK(collie_alltoallv(comm, s, sc, sd, d, rc, rd, COLLIE_FLOAT32, NULL, NULL));
  for (int q = 0; q < p; q++) {
    size_t lo = q ? rd[q - 1] + rc[q - 1] : 0;
    for (size_t i = lo; i < rd[q]; i++)
      ASSERTF(d[i] == -7, "alltoallv n=%zu: gap [%zu] = %g", n, i, d[i]);
    for (size_t k = 0; k < rc[q]; k++)
      ASSERTF(d[rd[q] + k] == fk_vval(q, r, k), "alltoallv n=%zu: from %d [%zu] = %g, want %g", n,
              q, k, d[rd[q] + k], fk_vval(q, r, k));
  }
  dev_free(d);
  dev_free(s);
}

/* The collectives of the direct path on p ranks, float32 and int32, sum and
 * max, in and out of place, counts around the 64-byte cut; each result
 * checked on every rank. */
static void
fk_matrix(collie_comm_t *comm, int quick)
{
  int p = collie_comm_size(comm), r = collie_comm_rank(comm);
  const size_t counts[] = {1, 5, 17, 1027, 70001};
  for (size_t ci = quick ? 3 : 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
    size_t n = counts[ci];
    for (int inplace = 0; inplace < 2; inplace++) {
      /* allreduce, float32 sum and int32 max */
      float *s = dev_alloc(n * 4), *d = inplace ? s : dev_alloc(n * 4);
      for (size_t i = 0; i < n; i++) s[i] = fk_val(r, i);
      ASSERT_OK(collie_allreduce(comm, s, d, n, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
      for (size_t i = 0; i < n; i++) {
        float want = 0;
        for (int q = 0; q < p; q++) want += fk_val(q, i);
        ASSERTF(d[i] == want, "allreduce n=%zu%s: [%zu] = %g, want %g", n,
                inplace ? " in place" : "", i, d[i], want);
      }
      int32_t *is = (int32_t *)s, *id = (int32_t *)d;
      for (size_t i = 0; i < n; i++) is[i] = (int32_t)fk_val(r, i) * (r % 2 ? -1 : 1);
      ASSERT_OK(collie_allreduce(comm, is, id, n, COLLIE_INT32, COLLIE_MAX, NULL, NULL));
      for (size_t i = 0; i < n; i++) {
        int32_t want = INT32_MIN;
        for (int q = 0; q < p; q++) {
          int32_t v = (int32_t)fk_val(q, i) * (q % 2 ? -1 : 1);
          if (v > want) want = v;
        }
        ASSERTF(id[i] == want, "allreduce int32 max n=%zu: [%zu] = %d, want %d", n, i, id[i], want);
      }
      if (!inplace) dev_free(d);
      dev_free(s);

      /* reduce_scatter (AVG: the kernel's last pass divides) and allgather */
      float *all = dev_alloc(n * 4 * (size_t)p),
            *mine = inplace ? all + (size_t)r * n : dev_alloc(n * 4);
      for (size_t i = 0; i < n * (size_t)p; i++) all[i] = (float)p * fk_val(r, i);
      ASSERT_OK(collie_reduce_scatter(comm, all, mine, n, COLLIE_FLOAT32, COLLIE_AVG, NULL, NULL));
      for (size_t i = 0; i < n; i++) {
        float want = 0;
        for (int q = 0; q < p; q++) want += fk_val(q, (size_t)r * n + i);
        ASSERTF(mine[i] == want, "reduce_scatter avg n=%zu%s: [%zu] = %g, want %g", n,
                inplace ? " in place" : "", i, mine[i], want);
      }
      for (size_t i = 0; i < n; i++) mine[i] = fk_val(r, i);
      for (size_t i = 0; i < n * (size_t)p; i++)
        if (!inplace || i / n != (size_t)r) all[i] = -1;
      ASSERT_OK(collie_allgather(comm, mine, all, n, COLLIE_FLOAT32, NULL, NULL));
      for (size_t i = 0; i < n * (size_t)p; i++)
        ASSERTF(all[i] == fk_val((int)(i / n), i % n), "allgather n=%zu%s: [%zu] = %g", n,
                inplace ? " in place" : "", i, all[i]);
      if (!inplace) dev_free(mine);
      dev_free(all);
    }
    fk_rooted(comm, n);
    fk_alltoall(comm, n);
    fk_vcolls(comm, n);
    /* broadcast from every root */
    float *b = dev_alloc(n * 4);
    for (int root = 0; root < p; root++) {
      for (size_t i = 0; i < n; i++) b[i] = r == root ? fk_val(root, i) : -1;
      ASSERT_OK(collie_broadcast(comm, b, n, COLLIE_FLOAT32, root, NULL, NULL));
      for (size_t i = 0; i < n; i++)
        ASSERTF(b[i] == fk_val(root, i), "broadcast n=%zu root %d: [%zu] = %g", n, root, i, b[i]);
    }
    dev_free(b);
  }
}

/* New buffers every call (the caches' churn: freed allocations announced and
 * closed, least recently used evicted); the same buffers many times (hits). */
static void
fk_churn(collie_comm_t *comm)
{
  int p = collie_comm_size(comm);
  for (int it = 0; it < 80; it++) {
    float *s = dev_alloc(4096), *d = dev_alloc(4096);
    for (int i = 0; i < 1024; i++) s[i] = (float)it;
    ASSERT_OK(collie_allreduce(comm, s, d, 1024, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
    ASSERTF(d[1023] == (float)(it * p), "churn %d: %g", it, d[1023]);
    dev_free(s);
    dev_free(d);
    /* Mappings stay bounded: at most the caps per peer. */
    ASSERTF(fk_held() <= 2L * 32 * (p - 1), "held %ld mappings after %d calls", fk_held(), it);
  }
}

/* Sends and receives on device memory: blocking, async (staged when they
 * run, so a ring of them progresses), in a group (blocking and async), and
 * a receive from any source. */
static void
fk_p2p(collie_comm_t *comm)
{
  int p = collie_comm_size(comm), r = collie_comm_rank(comm);
  if (p < 2) return;
  int next = (r + 1) % p, prev = (r + p - 1) % p;
  const size_t n = 70001;
  float *s = dev_alloc(n * 4), *d = dev_alloc(n * 4);
  for (size_t i = 0; i < n; i++) s[i] = fk_val(r, i);
  for (int mode = 0; mode < 3; mode++) {
    for (size_t i = 0; i < n; i++) d[i] = -1;
    if (mode == 0) { /* async ring (run in issue order): even ranks send first */
      collie_work_t *wr = NULL, *ws = NULL;
      if (r % 2 == 0) ASSERT_OK(collie_send(comm, s, n, COLLIE_FLOAT32, next, 3, NULL, &ws));
      ASSERT_OK(collie_recv(comm, d, n, COLLIE_FLOAT32, prev, 3, NULL, &wr));
      if (r % 2 == 1) ASSERT_OK(collie_send(comm, s, n, COLLIE_FLOAT32, next, 3, NULL, &ws));
      ASSERT_OK(collie_wait(ws, -1));
      ASSERT_OK(collie_wait(wr, -1));
      collie_work_free(ws);
      collie_work_free(wr);
    } else { /* a group ring: blocking, then async */
      collie_work_t *w = NULL;
      ASSERT_OK(collie_group_start(comm));
      ASSERT_OK(collie_send(comm, s, n, COLLIE_FLOAT32, next, 4, NULL, NULL));
      ASSERT_OK(collie_recv(comm, d, n, COLLIE_FLOAT32, prev, 4, NULL, NULL));
      ASSERT_OK(collie_group_end(comm, mode == 2 ? &w : NULL));
      if (w) {
        ASSERT_OK(collie_wait(w, -1));
        collie_work_free(w);
      }
    }
    for (size_t i = 0; i < n; i++)
      ASSERTF(d[i] == fk_val(prev, i), "p2p mode %d: [%zu] = %g, want %g", mode, i, d[i],
              fk_val(prev, i));
  }
  /* Rank 0 receives from any source, async, one at a time. */
  if (r == 0) {
    for (int k = 1; k < p; k++) {
      int src = -1;
      collie_work_t *w = NULL;
      ASSERT_OK(collie_recv_any(comm, d, n, COLLIE_FLOAT32, 5, &src, NULL, &w));
      ASSERT_OK(collie_wait(w, -1));
      collie_work_free(w);
      ASSERT(src > 0 && src < p);
      ASSERTF(d[n - 1] == fk_val(src, n - 1), "recv_any from %d: %g", src, d[n - 1]);
    }
  } else {
    ASSERT_OK(collie_send(comm, s, n, COLLIE_FLOAT32, 0, 5, NULL, NULL));
  }
  dev_free(s);
  dev_free(d);
}

/* Telemetry and the flight recorder on device buffers: a marked step of
 * two allreduces of n floats writes comms.csv's row with their bytes (rank
 * 0), and the flight dump names the device algorithm that ran. */
static void
fk_telemetry(collie_comm_t *comm, size_t n, const char *algo)
{
  float *s = dev_alloc(n * 4);
  for (size_t i = 0; i < n; i++) s[i] = 1;
  ASSERT_OK(collie_step_begin(comm, 1, 0));
  ASSERT_OK(collie_allreduce(comm, s, s, n, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  ASSERT_OK(collie_allreduce(comm, s, s, n, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  ASSERT_OK(collie_step_end(comm));
  dev_free(s);
  ASSERT_OK(collie_flight_dump(comm));
  char *out = NULL;
  char cmd[512];
  snprintf(cmd, sizeof(cmd), "cat %s/flight-rank%d-*.json", test_dir(), collie_comm_rank(comm));
  ASSERT(test_shell(cmd, &out) == 0 && out);
  ASSERTF(strstr(out, algo), "the flight dump does not name %s:\n%.2000s", algo, out);
  free(out);
  if (collie_comm_rank(comm) != 0) return;
  char *csv = test_read_file(test_path("comms.csv"), NULL);
  ASSERT(csv);
  /* comms.csv counts the bytes a ring allreduce moves: 2 (p-1)/p of each
   * call's buffer (docs/telemetry.md). */
  int p = collie_comm_size(comm);
  size_t per = n * 4 * 2 * (size_t)(p - 1) / (size_t)p;
  char want[64];
  snprintf(want, sizeof(want), "\n1,0,%d,%zu,", p, 2 * per);
  ASSERTF(strstr(csv, want), "comms.csv has no row starting %s:\n%s", want + 1, csv);
  free(csv);
}

/* A persistent allreduce on device buffers (docs/persistent.md): planned
 * once, started with new contents each time, on whichever device path the
 * communicator takes. */
static void
fk_plan(collie_comm_t *comm, size_t n)
{
  int p = collie_comm_size(comm), r = collie_comm_rank(comm);
  float *s = dev_alloc(n * 4), *d = dev_alloc(n * 4);
  collie_plan_t *plan = NULL;
  ASSERT_OK(collie_allreduce_init(comm, s, d, n, COLLIE_FLOAT32, COLLIE_SUM, NULL, &plan));
  for (int it = 0; it < 3; it++) {
    for (size_t i = 0; i < n; i++) s[i] = fk_val(r, i) + (float)it;
    ASSERT_OK(collie_start(plan, NULL));
    for (size_t i = 0; i < n; i++) {
      float want = (float)(p * it);
      for (int q = 0; q < p; q++) want += fk_val(q, i);
      ASSERTF(d[i] == want, "planned allreduce start %d: [%zu] = %g, want %g", it, i, d[i], want);
    }
  }
  collie_plan_free(plan);
  dev_free(s);
  dev_free(d);
  /* A persistent alltoall too (the direct path's pulls, or staged). */
  size_t len = n * (size_t)p;
  s = dev_alloc(len * 4);
  d = dev_alloc(len * 4);
  ASSERT_OK(collie_alltoall_init(comm, s, d, n, COLLIE_FLOAT32, NULL, &plan));
  for (int it = 0; it < 3; it++) {
    for (size_t i = 0; i < len; i++) s[i] = (float)(r * 100000 + it) + (float)i;
    ASSERT_OK(collie_start(plan, NULL));
    for (size_t i = 0; i < len; i++) {
      float want = (float)((i / n) * 100000 + (size_t)it) + (float)((size_t)r * n + i % n);
      ASSERTF(d[i] == want, "planned alltoall start %d: [%zu] = %g, want %g", it, i, d[i], want);
    }
  }
  collie_plan_free(plan);
  dev_free(s);
  dev_free(d);
}

/* mode: 0 direct expected (one GPU), 1 every allocation unshareable, 2
 * opening fails, 3 direct expected, a GPU per rank */
static void
fk_run(int mode, int quick)
{
  if (mode == 1) setenv("FAKE_CUDA_NO_IPC", "1", 1);
  if (mode == 2) setenv("FAKE_CUDA_FAIL_OPEN", "1", 1);
  if (mode == 3) setenv("FAKE_CUDA_GPU_PER_PROCESS", "1", 1);
  fk_load();
  setenv("COLLIE_LOG_DIR", test_dir(), 1);
  collie_comm_t *comm = test_comm();
  int direct = collie__comm_device_algo(comm, COLLIE_KIND_ALLREDUCE, 4) == COLLIE_ALGO_CUDA_IPC;
  int has_code = strncmp(collie__device_code(), "none", 4) != 0;
  ASSERTF(direct == has_code, "direct path %d with device code \"%s\"", direct,
          collie__device_code());
  static const int direct_kinds[] = {
      COLLIE_KIND_REDUCE_SCATTER, COLLIE_KIND_ALLGATHER,  COLLIE_KIND_BROADCAST,
      COLLIE_KIND_REDUCE,         COLLIE_KIND_GATHER,     COLLIE_KIND_SCATTER,
      COLLIE_KIND_ALLTOALL,       COLLIE_KIND_ALLGATHERV, COLLIE_KIND_ALLTOALLV};
  for (size_t k = 0; k < sizeof direct_kinds / sizeof direct_kinds[0]; k++)
    ASSERTF((collie__comm_device_algo(comm, direct_kinds[k], 1 << 20) == COLLIE_ALGO_CUDA_IPC) ==
                direct,
            "%s of 1 MiB does not take the path allreduce takes",
            collie__kind_name(direct_kinds[k]));
  /* At every size (staging lost to the copy lists at every size measured,
   * docs/gpu.md): the sizes where staging once paid included. */
  int p0 = collie_comm_size(comm);
  static const size_t sizes[] = {4, 16 << 10, 64 << 10};
  for (size_t k = 0; direct && p0 > 1 && k < sizeof sizes / sizeof sizes[0]; k++) {
    ASSERTF(collie__comm_device_algo(comm, COLLIE_KIND_GATHER, sizes[k]) == COLLIE_ALGO_CUDA_IPC,
            "gather of %zu bytes staged", sizes[k]);
    ASSERTF(collie__comm_device_algo(comm, COLLIE_KIND_ALLTOALL, sizes[k]) == COLLIE_ALGO_CUDA_IPC,
            "alltoall of %zu bytes staged", sizes[k]);
    ASSERTF(collie__comm_device_algo(comm, COLLIE_KIND_SCATTER, sizes[k]) == COLLIE_ALGO_CUDA_IPC,
            "scatter of %zu bytes staged", sizes[k]);
  }
  fk_matrix(comm, quick);
  long launches = fk_launches();
  /* One GPU: rank 0 does the work (broadcast's root too); a GPU each: every
   * rank its share; the host path: no kernel. One rank alone only copies. */
  int p = collie_comm_size(comm), r = collie_comm_rank(comm);
  if (direct && p > 1 && (mode == 3 || (mode == 0 && r == 0)))
    ASSERTF(launches > 0, "the direct path never launched a kernel on rank %d", r);
  if (!direct || mode == 1 || mode == 2)
    ASSERTF(launches == 0, "%ld kernels launched on the host path (mode %d)", launches, mode);
  /* The plans' small copies go out as lists: alltoall's by rank 0 on one
   * GPU, by every rank with a GPU each. */
  if (direct && p > 1 && (mode == 3 || (mode == 0 && r == 0)))
    ASSERTF(fk_copy_lists() > 0, "no copy list launched on rank %d (mode %d)", r, mode);
  if (!quick) {
    fk_churn(comm);
    fk_p2p(comm);
    fk_telemetry(comm, 4096, direct ? "cuda_ipc" : "\"algo\"");
    fk_plan(comm, 5000);
  }
  /* The direct path asked for by name runs, or says why it cannot. */
  collie_opts_t o = {.algorithm = COLLIE_ALGO_CUDA_IPC};
  float *x = dev_alloc(64);
  x[0] = 1;
  collie_result_t rc = collie_allreduce(comm, x, x, 16, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL);
  if (direct)
    ASSERT_OK(rc);
  else
    ASSERT(rc == COLLIE_INVALID_ARGUMENT);
  dev_free(x);
  ASSERT_OK(collie_comm_destroy(comm));
  ASSERTF(fk_held() == 0, "%ld peer buffers still mapped after destroy", fk_held());
  ASSERTF(fk_ctx_depth() == 0, "%ld contexts left pushed (mode %d)", fk_ctx_depth(), mode);
}

/* alltoallv whose counts disagree (rank 0 expects one element more from
 * rank 1 than rank 1 sends it): on the direct path every rank fails with
 * the same INVALID_USAGE naming the pair, before any copy. */
TEST_IMPL(cuda_fake_alltoallv_mismatch)
{
  fk_load();
  collie_comm_t *comm = test_comm();
  int p = collie_comm_size(comm), r = collie_comm_rank(comm);
  if (collie__comm_device_algo(comm, COLLIE_KIND_ALLTOALLV, 4) != COLLIE_ALGO_CUDA_IPC) {
    collie_comm_destroy(comm); /* no device code: the host path's own checks apply */
    return;
  }
  size_t c[16], dsp[16], rc2[16];
  ASSERT(p >= 2 && p <= 16);
  for (int q = 0; q < p; q++) {
    c[q] = 2;
    dsp[q] = 3 * (size_t)q;
    rc2[q] = r == 0 && q == 1 ? 3 : 2;
  }
  float *s = dev_alloc(3 * (size_t)p * 4), *d = dev_alloc(3 * (size_t)p * 4);
  ASSERT_RC(COLLIE_INVALID_USAGE, "alltoallv: rank 1 sends 2 elements to rank 0, which expects 3",
            collie_alltoallv(comm, s, c, dsp, d, rc2, dsp, COLLIE_FLOAT32, NULL, NULL));
  dev_free(d);
  dev_free(s);
  collie_comm_destroy(comm);
}

TEST_IMPL(cuda_fake_direct)
{
  fk_run(0, 0);
}

TEST_IMPL(cuda_fake_direct_quick)
{
  fk_run(0, 1);
}

TEST_IMPL(cuda_fake_gpu_each)
{
  fk_run(3, 0);
}

TEST_IMPL(cuda_fake_gpu_each_quick)
{
  fk_run(3, 1);
}

TEST_IMPL(cuda_fake_unshareable)
{
  fk_run(1, 1);
}

TEST_IMPL(cuda_fake_open_fails)
{
  fk_run(2, 1);
}

/* allgather and reduce_scatter across hosts, whose pipeline chunks each
 * rank's block (COLLIE_CUDA_CHUNK / p bytes of each): counts whose whole
 * buffer is one chunk or less (staged whole), several chunks, a short last
 * one; in and out of place; every element checked, the bytes around the
 * output left alone. */
static void
fk_pipeline_blocks(collie_comm_t *comm)
{
  int p = collie_comm_size(comm), r = collie_comm_rank(comm);
  const size_t counts[] = {300, 1000, 1025, 5000};
  for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
    size_t n = counts[ci], all_n = n * (size_t)p;
    for (int inplace = 0; inplace < 2; inplace++) {
      /* allgather: an extra element on each side of the output. */
      float *out = dev_alloc((all_n + 2) * 4),
            *in = inplace ? out + 1 + (size_t)r * n : dev_alloc(n * 4);
      for (size_t i = 0; i < all_n + 2; i++) out[i] = -3;
      for (size_t i = 0; i < n; i++) in[i] = fk_val(r, i);
      ASSERT_OK(collie_allgather(comm, in, out + 1, n, COLLIE_FLOAT32, NULL, NULL));
      ASSERT(out[0] == -3 && out[all_n + 1] == -3);
      for (size_t i = 0; i < all_n; i++)
        ASSERTF(out[1 + i] == fk_val((int)(i / n), i % n), "allgather n=%zu%s across hosts: [%zu]",
                n, inplace ? " in place" : "", i);
      if (!inplace) dev_free(in);
      dev_free(out);
      /* reduce_scatter: block q of rank r is fk_val(r, q * n + i). */
      float *big = dev_alloc(all_n * 4), *res = inplace ? big + (size_t)r * n : dev_alloc(n * 4);
      for (size_t i = 0; i < all_n; i++) big[i] = fk_val(r, i);
      if (!inplace)
        for (size_t i = 0; i < n; i++) res[i] = -1;
      ASSERT_OK(collie_reduce_scatter(comm, big, res, n, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
      for (size_t i = 0; i < n; i++) {
        float want = 0;
        for (int q = 0; q < p; q++) want += fk_val(q, (size_t)r * n + i);
        ASSERTF(res[i] == want, "reduce_scatter n=%zu%s across hosts: [%zu] = %g, want %g", n,
                inplace ? " in place" : "", i, res[i], want);
      }
      if (!inplace) dev_free(res);
      dev_free(big);
    }
  }
}

/* Ranks on two (fake) hosts: allreduce, broadcast and reduce larger than a
 * chunk go through the pinned pipeline (COLLIE_CUDA_CHUNK set small, so a
 * few KiB make several chunks, the last one short), in and out of place,
 * every root; a call of one chunk, and allgather and reduce_scatter, are
 * staged whole; everything is right, and the pinned buffers, streams and
 * events go with the communicator. */
TEST_IMPL(cuda_fake_pipeline)
{
  setenv("COLLIE_CUDA_CHUNK", "4096", 1);
  setenv("COLLIE_LOG_DIR", test_dir(), 1);
  fk_load();
  collie_comm_t *comm = test_comm();
  int p = collie_comm_size(comm), r = collie_comm_rank(comm);
  ASSERT(collie__comm_device_algo(comm, COLLIE_KIND_ALLREDUCE, 4097) == COLLIE_ALGO_CUDA_PIPELINE);
  ASSERT(collie__comm_device_algo(comm, COLLIE_KIND_ALLREDUCE, 4096) == 0);
  ASSERT(collie__comm_device_algo(comm, COLLIE_KIND_REDUCE, 1 << 20) == COLLIE_ALGO_CUDA_PIPELINE);
  ASSERT(collie__comm_device_algo(comm, COLLIE_KIND_ALLGATHER, 4097) == COLLIE_ALGO_CUDA_PIPELINE);
  ASSERT(collie__comm_device_algo(comm, COLLIE_KIND_REDUCE_SCATTER, 4096 / (size_t)p) == 0);
  const size_t counts[] = {1000, 1025, 5000, 70001};
  for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
    size_t n = counts[ci];
    for (int inplace = 0; inplace < 2; inplace++) {
      float *s = dev_alloc(n * 4), *d = inplace ? s : dev_alloc(n * 4);
      for (size_t i = 0; i < n; i++) s[i] = (float)p * fk_val(r, i);
      if (!inplace)
        for (size_t i = 0; i < n; i++) d[i] = -1;
      ASSERT_OK(collie_allreduce(comm, s, d, n, COLLIE_FLOAT32, COLLIE_AVG, NULL, NULL));
      for (size_t i = 0; i < n; i++) {
        float want = 0;
        for (int q = 0; q < p; q++) want += fk_val(q, i);
        ASSERTF(d[i] == want, "allreduce avg n=%zu%s: [%zu] = %g, want %g", n,
                inplace ? " in place" : "", i, d[i], want);
      }
      for (int root = 0; root < p; root++) {
        for (size_t i = 0; i < n; i++) s[i] = fk_val(r, i);
        if (!inplace)
          for (size_t i = 0; i < n; i++) d[i] = -7;
        ASSERT_OK(collie_reduce(comm, s, d, n, COLLIE_FLOAT32, COLLIE_MAX, root, NULL, NULL));
        for (size_t i = 0; i < n; i++) {
          float want = 0;
          for (int q = 0; q < p; q++)
            if (fk_val(q, i) > want) want = fk_val(q, i);
          if (r == root)
            ASSERTF(d[i] == want, "reduce n=%zu root %d: [%zu] = %g", n, root, i, d[i]);
          else if (!inplace)
            ASSERTF(d[i] == -7, "reduce n=%zu: a non-root's recvbuf changed", n);
        }
        for (size_t i = 0; i < n; i++) d[i] = r == root ? fk_val(root, i) : -1;
        ASSERT_OK(collie_broadcast(comm, d, n, COLLIE_FLOAT32, root, NULL, NULL));
        for (size_t i = 0; i < n; i++)
          ASSERTF(d[i] == fk_val(root, i), "broadcast n=%zu root %d: [%zu] = %g", n, root, i, d[i]);
      }
      if (!inplace) dev_free(d);
      dev_free(s);
    }
  }
  fk_pipeline_blocks(comm);
  fk_telemetry(comm, 5000, "cuda_pipeline");
  fk_plan(comm, 5000);        /* over one chunk: the pipeline */
  ASSERT(fk_launches() == 0); /* nothing here runs a kernel */
  ASSERT(fk_objects() > 0);   /* the pinned staging exists... */
  ASSERT_OK(collie_comm_destroy(comm));
  ASSERTF(fk_objects() == 0, "%ld pinned buffers, streams or events left after destroy",
          fk_objects()); /* ...and goes with the communicator */
}

/* A float32 SUM allreduce of n elements on device buffers s and d (inputs
 * fk_val shifted by `shift`, d poisoned first), checked on this rank. */
static void
fk_sum_check(collie_comm_t *comm, float *s, float *d, size_t n, size_t shift, const char *what)
{
  int p = collie_comm_size(comm), r = collie_comm_rank(comm);
  for (size_t i = 0; i < n; i++) s[i] = fk_val(r, i + shift), d[i] = -1;
  ASSERT_OK(collie_allreduce(comm, s, d, n, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  for (size_t i = 0; i < n; i++) {
    float want = 0;
    for (int q = 0; q < p; q++) want += fk_val(q, i + shift);
    ASSERTF(d[i] == want, "%s, n=%zu: [%zu] = %g, want %g", what, n, i, d[i], want);
  }
}

/* Whole calls staged through the host (one host, COLLIE_CUDA_IPC=0) use
 * the communicator's page-locked area: made by the first call, reused by the
 * next ones (not page-locked again), grown by a larger one, not used over
 * COLLIE_CUDA_STAGE_MAX (pageable memory: still right), freed with the
 * communicator. Out of place the receive buffer is not copied in where the
 * collective writes all of it; allgatherv's gaps and a non-root's reduce
 * buffer, which it leaves alone, come back unchanged. */
TEST_IMPL(cuda_fake_staged_area)
{
  setenv("COLLIE_CUDA_IPC", "0", 1);
  setenv("COLLIE_CUDA_STAGE_MAX", "65536", 1);
  fk_load();
  long (*made)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "fake_cuda_pinned_made");
  ASSERT(made);
  collie_comm_t *comm = test_comm();
  int p = collie_comm_size(comm), r = collie_comm_rank(comm);
  long made0 = made();
  const size_t n = 1000, big = 20000; /* 8 KB staged; 160 KB, over the cap */
  float *s = dev_alloc(big * 4), *d = dev_alloc(big * 4);
  for (int iter = 0; iter < 12; iter++)
    fk_sum_check(comm, s, d, n, (size_t)iter, "staged allreduce");
  ASSERTF(made() == made0 + 1, "%ld page-locked allocations for 12 calls of one size (want 1)",
          made() - made0);
  ASSERT(fk_objects() == 1);
  /* In place: the input is the receive buffer's old contents. */
  for (size_t i = 0; i < 3000; i++) s[i] = fk_val(r, i);
  ASSERT_OK(collie_allreduce(comm, s, s, 3000, COLLIE_FLOAT32, COLLIE_MAX, NULL, NULL));
  for (size_t i = 0; i < 3000; i++) {
    float want = 0;
    for (int q = 0; q < p; q++)
      if (fk_val(q, i) > want) want = fk_val(q, i);
    ASSERTF(s[i] == want, "staged allreduce in place: [%zu] = %g, want %g", i, s[i], want);
  }
  ASSERTF(made() == made0 + 2, "a larger call did not grow the area once (%ld allocations)",
          made() - made0);
  /* allgatherv with a gap of 3 elements after each block. */
  size_t counts[16], displs[16], m = 700;
  for (int q = 0; q < p; q++)
    counts[q] = m + (size_t)q, displs[q] = q ? displs[q - 1] + counts[q - 1] + 3 : 0;
  size_t end = displs[p - 1] + counts[p - 1];
  for (size_t i = 0; i < end; i++) d[i] = -5;
  for (size_t i = 0; i < counts[r]; i++) s[i] = fk_val(r, i);
  ASSERT_OK(collie_allgatherv(comm, s, counts[r], d, counts, displs, COLLIE_FLOAT32, NULL, NULL));
  for (int q = 0; q < p; q++) {
    for (size_t i = 0; i < counts[q]; i++)
      ASSERTF(d[displs[q] + i] == fk_val(q, i), "staged allgatherv: block %d [%zu]", q, i);
    if (q < p - 1)
      for (size_t g = 0; g < 3; g++)
        ASSERTF(d[displs[q] + counts[q] + g] == -5,
                "staged allgatherv wrote the gap after block %d", q);
  }
  /* A reduce's non-root buffer is not touched. */
  for (size_t i = 0; i < n; i++) s[i] = fk_val(r, i), d[i] = -9;
  ASSERT_OK(collie_reduce(comm, s, d, n, COLLIE_FLOAT32, COLLIE_SUM, 0, NULL, NULL));
  for (size_t i = 0; i < n; i++) {
    float want = 0;
    for (int q = 0; q < p; q++) want += fk_val(q, i);
    ASSERTF(d[i] == (r == 0 ? want : -9), "staged reduce: rank %d [%zu] = %g", r, i, d[i]);
  }
  /* Over the cap: pageable memory, the area neither grown nor dropped. */
  long before = made();
  fk_sum_check(comm, s, d, big, 0, "allreduce over the cap");
  ASSERT(made() == before && fk_objects() == 1);
  dev_free(s);
  dev_free(d);
  ASSERT_OK(collie_comm_destroy(comm));
  ASSERTF(fk_objects() == 0, "%ld page-locked buffers left after destroy", fk_objects());
}

/* Page-locking fails (the stand-in's cuMemAllocHost runs out): staged calls
 * go on through pageable memory, right, and the communicator does not try
 * again on every call (each try costs milliseconds on a real driver). */
TEST_IMPL(cuda_fake_staged_area_fails)
{
  setenv("COLLIE_CUDA_IPC", "0", 1);
  setenv("FAKE_CUDA_FAIL_PINNED", "1", 1);
  fk_load();
  long (*tries)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "fake_cuda_pinned_tries");
  ASSERT(tries);
  collie_comm_t *comm = test_comm();
  long tries0 = tries();
  const size_t n = 5000;
  float *s = dev_alloc(n * 4), *d = dev_alloc(n * 4);
  for (int iter = 0; iter < 5; iter++)
    fk_sum_check(comm, s, d, n, (size_t)iter, "allreduce without page-locked memory");
  ASSERTF(tries() == tries0 + 1, "page-locking tried %ld times for 5 calls (want once)",
          tries() - tries0);
  ASSERT(fk_objects() == 0);
  dev_free(s);
  dev_free(d);
  ASSERT_OK(collie_comm_destroy(comm));
}

/* A call ordered after a stream whose work never finishes (the stand-in's
 * busy stream, as behind a hung kernel) fails at its deadline with
 * COLLIE_TIMEOUT naming the wait, instead of waiting for ever. */
TEST_IMPL(cuda_fake_stream_deadline)
{
  fk_load();
  collie_comm_t *comm = test_comm();
  float *s = dev_alloc(64 * 4);
  collie_opts_t o = {.timeout_ms = 300, .cuda_stream = (void *)0xb5b5};
  int64_t t0 = collie__now_ns();
  ASSERT_RC(COLLIE_TIMEOUT, "the GPU's work was not done by the deadline",
            collie_allreduce(comm, s, s, 64, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL));
  double secs = (double)(collie__now_ns() - t0) / 1e9;
  ASSERTF(secs >= 0.25 && secs < 5, "the wait ended after %.2f s, its deadline 0.3 s", secs);
  ASSERTF(fk_ctx_depth() == 0, "%ld contexts left pushed after the failed wait", fk_ctx_depth());
  dev_free(s);
  collie_comm_destroy(comm);
}

/* Ranks that disagree on the kind of memory of one collective (rank 0 on
 * the device, the others on the host) pick different algorithms: every
 * rank fails (a mismatch where both sides use the flat area, else the
 * deadline), none hangs or returns a wrong result as success. Without
 * device code both sides are staged and the call works. */
static uint64_t
device_reads(void)
{
  return atomic_load_explicit(&collie__shm_device_reads, memory_order_relaxed);
}

/* One exchange round of n floats: every rank sends to the next and
 * receives from the previous, its buffers of the kinds asked (dev: device),
 * blocking (odd ranks receive first), async (0, 1, 2: how) or as a group;
 * then checks what arrived. */
static void
p2p_round(collie_comm_t *comm, size_t n, int send_dev, int recv_dev, int async, int tag)
{
  int p = collie_comm_size(comm), r = collie_comm_rank(comm);
  int next = (r + 1) % p, prev = (r + p - 1) % p;
  float *s = send_dev ? dev_alloc(n * 4) : malloc(n * 4 + 4);
  float *d = recv_dev ? dev_alloc(n * 4) : malloc(n * 4 + 4);
  ASSERT(s && d);
  for (size_t i = 0; i < n; i++) {
    s[i] = fk_val(r, i);
    d[i] = -1;
  }
  if (async == 2) { /* a group: both at once */
    ASSERT_OK(collie_group_start(comm));
    ASSERT_OK(collie_send(comm, s, n, COLLIE_FLOAT32, next, tag, NULL, NULL));
    ASSERT_OK(collie_recv(comm, d, n, COLLIE_FLOAT32, prev, tag, NULL, NULL));
    ASSERT_OK(collie_group_end(comm, NULL));
  } else if (async) { /* run in issue order: even ranks send first */
    collie_work_t *ws = NULL, *wr = NULL;
    if (r % 2 == 0) ASSERT_OK(collie_send(comm, s, n, COLLIE_FLOAT32, next, tag, NULL, &ws));
    ASSERT_OK(collie_recv(comm, d, n, COLLIE_FLOAT32, prev, tag, NULL, &wr));
    if (r % 2 == 1) ASSERT_OK(collie_send(comm, s, n, COLLIE_FLOAT32, next, tag, NULL, &ws));
    ASSERT_OK(collie_wait(ws, -1));
    ASSERT_OK(collie_wait(wr, -1));
    collie_work_free(ws);
    collie_work_free(wr);
  } else if (r % 2) {
    ASSERT_OK(collie_recv(comm, d, n, COLLIE_FLOAT32, prev, tag, NULL, NULL));
    ASSERT_OK(collie_send(comm, s, n, COLLIE_FLOAT32, next, tag, NULL, NULL));
  } else {
    ASSERT_OK(collie_send(comm, s, n, COLLIE_FLOAT32, next, tag, NULL, NULL));
    ASSERT_OK(collie_recv(comm, d, n, COLLIE_FLOAT32, prev, tag, NULL, NULL));
  }
  for (size_t i = 0; i < n; i++)
    ASSERTF(d[i] == fk_val(prev, i), "%s -> %s%s, n=%zu: [%zu] = %g, want %g",
            send_dev ? "device" : "host", recv_dev ? "device" : "host",
            async == 2 ? ", group"
            : async    ? ", async"
                       : "",
            n, i, d[i], fk_val(prev, i));
  if (send_dev)
    dev_free(s);
  else
    free(s);
  if (recv_dev)
    dev_free(d);
  else
    free(d);
  ASSERTF(fk_ctx_depth() == 0, "%ld contexts left pushed after a round", fk_ctx_depth());
}

/* Send and receive between every pair of kinds, once a device allreduce
 * has made every rank take device messages (stage_p2p.c). Over shm a
 * device send goes as a device message that the receiver copies, into
 * device or host memory alike (the counter proves it), and a host send as
 * host bytes (staged into a device receive); over tcp everything is host
 * bytes. Blocking, async and grouped, at sizes from one element to
 * several slots; sends under COLLIE_CUDA_P2P_MIN (4 KiB here) are host
 * bytes too, and so is everything between ranks on different GPUs
 * (gpu_each: a peer's memory on another GPU may not map). A receiver that
 * cannot map a sender's buffer (no_open) refuses the device message and
 * the sender's bytes follow in its place, every result still right. */
static void
p2p_kinds(int gpu_each, int no_open)
{
  if (gpu_each) setenv("FAKE_CUDA_GPU_PER_PROCESS", "1", 1);
  if (no_open) setenv("FAKE_CUDA_FAIL_OPEN", "1", 1);
  fk_load();
  setenv("COLLIE_CUDA_P2P_MIN", "4096", 1);
  collie_comm_t *comm = test_comm();
  int shm = strcmp(getenv("COLLIE_TRANSPORT"), "shm") == 0;
  float *x = dev_alloc(64);
  for (int i = 0; i < 16; i++) x[i] = 1;
  ASSERT_OK(collie_allreduce(comm, x, x, 16, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  dev_free(x);
  static const size_t sizes[] = {1, 1023, 1024, 200001}; /* floats */
  int tag = 10;
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    for (int kinds = 0; kinds < 4; kinds++) {
      int send_dev = kinds & 1, recv_dev = (kinds >> 1) & 1;
      for (int async = 0; async < 3; async++) {
        uint64_t before = device_reads();
        p2p_round(comm, sizes[k], send_dev, recv_dev, async, tag++);
        uint64_t got = device_reads() - before;
        int want = shm && !gpu_each && !no_open && send_dev && sizes[k] * 4 >= 4096;
        ASSERTF(got == (uint64_t)want,
                "%s -> %s over %s, %zu bytes: %llu device messages received, want %d",
                send_dev ? "device" : "host", recv_dev ? "device" : "host", shm ? "shm" : "tcp",
                sizes[k] * 4, (unsigned long long)got, want);
      }
    }
  }
  ASSERT_OK(collie_comm_destroy(comm));
  ASSERTF(fk_held() == 0, "%ld peer buffers still mapped after destroy", fk_held());
}

TEST_IMPL(cuda_fake_p2p_kinds)
{
  p2p_kinds(0, 0);
}

TEST_IMPL(cuda_fake_p2p_gpu_each)
{
  p2p_kinds(1, 0);
}

TEST_IMPL(cuda_fake_p2p_open_fails)
{
  p2p_kinds(0, 1);
}

/* A device send whose sender gave up (its own timeout: it aborts, and its
 * buffer is its caller's again, here overwritten) is not taken from its
 * buffer by a receive posted later: the receive fails naming the sender. */
TEST_IMPL(cuda_fake_p2p_sender_gave_up)
{
  fk_load();
  setenv("COLLIE_CUDA_P2P_MIN", "4096", 1);
  collie_comm_t *comm = test_comm();
  int r = collie_comm_rank(comm);
  const size_t n = 4096;
  float *b = dev_alloc(n * 4);
  for (size_t i = 0; i < n; i++) b[i] = 7;
  ASSERT_OK(collie_allreduce(comm, b, b, 16, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  uint64_t before = device_reads();
  if (r == 0) {
    collie_opts_t o = {.timeout_ms = 300};
    ASSERT_RC(COLLIE_TIMEOUT, "rank 1", collie_send(comm, b, n, COLLIE_FLOAT32, 1, 3, &o, NULL));
    for (size_t i = 0; i < n; i++) b[i] = -99; /* the caller's again */
  } else {
    usleep(1000 * 1000);
    ASSERT_RC(COLLIE_REMOTE_ERROR, "before this rank had copied",
              collie_recv(comm, b, n, COLLIE_FLOAT32, 0, 3, NULL, NULL));
    ASSERTF(device_reads() == before, "a device message was taken from a sender that gave up");
    ASSERTF(b[0] != -99, "the receive took the sender's reused buffer");
  }
  ASSERTF(fk_ctx_depth() == 0, "%ld contexts left pushed after the failures", fk_ctx_depth());
  dev_free(b);
  collie_comm_destroy(comm);
}

/* A device send completes only once its receiver has copied it: an async
 * one stays in progress while the receiver has not posted (a staged send
 * of that size would have completed at once). Then a receive from any
 * source takes device messages too. */
TEST_IMPL(cuda_fake_p2p_completion)
{
  fk_load();
  setenv("COLLIE_CUDA_P2P_MIN", "4096", 1);
  collie_comm_t *comm = test_comm();
  int r = collie_comm_rank(comm), p = collie_comm_size(comm);
  const size_t n = 2048; /* 8 KiB: host bytes of this size would go out at once (slots) */
  float *b = dev_alloc(n * 4);
  for (size_t i = 0; i < n; i++) b[i] = fk_val(r, i);
  ASSERT_OK(collie_allreduce(comm, b, b, 16, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  for (size_t i = 0; i < n; i++) b[i] = fk_val(r, i);
  char go[1024];
  snprintf(go, sizeof(go), "%s/go", test_dir());
  if (r == 0) {
    collie_work_t *w = NULL;
    ASSERT_OK(collie_send(comm, b, n, COLLIE_FLOAT32, 1, 4, NULL, &w));
    usleep(300 * 1000);
    ASSERTF(collie_test(w) == COLLIE_IN_PROGRESS,
            "a device send completed before its receiver posted (%s)",
            collie_result_string(collie_test(w)));
    /* Not a collective: it would queue behind the send. A file says go. */
    FILE *f = fopen(go, "w");
    ASSERT(f != NULL);
    fclose(f);
    ASSERT_OK(collie_wait(w, -1));
    collie_work_free(w);
  } else if (r == 1) {
    float *d = dev_alloc(n * 4);
    for (int i = 0; i < 1000 && access(go, F_OK) != 0; i++) usleep(10 * 1000);
    ASSERT_OK(collie_recv(comm, d, n, COLLIE_FLOAT32, 0, 4, NULL, NULL));
    for (size_t i = 0; i < n; i++) ASSERTF(d[i] == fk_val(0, i), "[%zu] = %g", i, d[i]);
    dev_free(d);
  }
  /* Every other rank sends rank 0 a device message; it takes them from any
   * source. */
  uint64_t before = device_reads();
  if (r == 0) {
    float *d = dev_alloc(n * 4);
    for (int k = 1; k < p; k++) {
      int src = -1;
      ASSERT_OK(collie_recv_any(comm, d, n, COLLIE_FLOAT32, 5, &src, NULL, NULL));
      ASSERT(src > 0 && src < p);
      for (size_t i = 0; i < n; i++)
        ASSERTF(d[i] == fk_val(src, i), "from %d: [%zu] = %g", src, i, d[i]);
    }
    ASSERTF(device_reads() - before == (uint64_t)(p - 1), "%llu device messages from any source",
            (unsigned long long)(device_reads() - before));
    dev_free(d);
  } else {
    ASSERT_OK(collie_send(comm, b, n, COLLIE_FLOAT32, 0, 5, NULL, NULL));
  }
  dev_free(b);
  ASSERT_OK(collie_comm_destroy(comm));
}

TEST_IMPL(cuda_fake_kinds_differ)
{
  fk_load();
  collie_comm_t *comm = test_comm();
  int r = collie_comm_rank(comm);
  size_t n = 16;
  float host[16], *buf = r == 0 ? dev_alloc(n * 4) : host;
  for (size_t i = 0; i < n; i++) buf[i] = 1;
  collie_opts_t o = {.timeout_ms = 1500};
  int64_t t0 = collie__now_ns();
  collie_result_t rc = collie_allreduce(comm, buf, buf, n, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL);
  double secs = (double)(collie__now_ns() - t0) / 1e9;
  if (strncmp(collie__device_code(), "none", 4) == 0) { /* no direct path: both staged, right */
    ASSERT_OK(rc);
    for (size_t i = 0; i < n; i++)
      ASSERTF(buf[i] == (float)collie_comm_size(comm), "[%zu] = %g", i, buf[i]);
  } else {
    ASSERTF(rc == COLLIE_INVALID_USAGE || rc == COLLIE_TIMEOUT || rc == COLLIE_REMOTE_ERROR,
            "rank %d: %s (%s)", r, collie_result_string(rc), collie_last_error());
  }
  ASSERTF(secs < 10, "rank %d returned after %.2f s", r, secs);
  if (r == 0) dev_free(buf);
  collie_comm_destroy(comm);
}

/* The host-only features on device buffers: a wire format named in opts is
 * refused by name, the communicator's default leaves the call exact;
 * sparse allreduce and windows refuse device memory. */
TEST_IMPL(cuda_fake_host_only_features)
{
  fk_load();
  setenv("COLLIE_WIRE", "bfloat16", 1);
  collie_comm_t *comm = test_comm();
  unsetenv("COLLIE_WIRE");
  int p = collie_comm_size(comm);
  float *d = dev_alloc(4 * sizeof(float));
  for (int i = 0; i < 4; i++) d[i] = 1000.25f;
  collie_opts_t o = {.wire = COLLIE_WIRE_FLOAT16};
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "applies to host memory only",
            collie_allreduce(comm, d, d, 4, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL));
  ASSERT_OK(collie_allreduce(comm, d, d, 4, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  ASSERTF(d[0] == 1000.25f * (float)p, "the default wire compressed a device call: %.9g", d[0]);
  int64_t idx[1] = {0}, oi[16];
  size_t on;
  ASSERT_RC(COLLIE_UNSUPPORTED, "device memory",
            collie_sparse_allreduce(comm, COLLIE_SPARSE_GTOPK, idx, d, 1, 4, oi, d + 1, 1, &on,
                                    COLLIE_FLOAT32, NULL, NULL));
  collie_window_t *w = NULL;
  ASSERT_RC(COLLIE_UNSUPPORTED, "base is device memory",
            collie_window_create(comm, d, 4 * sizeof(float), &w));
  ASSERT(w == NULL);
  dev_free(d);
  ASSERT_OK(collie_comm_destroy(comm));
}

/* The stand-in driver's capture (tests/fakecuda): begin on a stream, end
 * with the graph, replay it, destroy it. */
static void (*cap_begin)(void *);
static void *(*cap_end)(void);
static void (*cap_replay)(void *);
static void (*cap_destroy)(void *);
static int (*cap_nodes)(void *);
static long (*cap_breaks)(void);
#define CAP_STREAM ((void *)0xca97)

static void
cap_load(void)
{
  fk_load();
  cap_begin = (void (*)(void *))dlsym(RTLD_DEFAULT, "fake_cuda_capture_begin");
  cap_end = (void *(*)(void))dlsym(RTLD_DEFAULT, "fake_cuda_capture_end");
  cap_replay = (void (*)(void *))dlsym(RTLD_DEFAULT, "fake_cuda_graph_replay");
  cap_destroy = (void (*)(void *))dlsym(RTLD_DEFAULT, "fake_cuda_graph_destroy");
  cap_nodes = (int (*)(void *))dlsym(RTLD_DEFAULT, "fake_cuda_graph_nodes");
  cap_breaks = (long (*)(void))dlsym(RTLD_DEFAULT, "fake_cuda_capture_breaks");
  ASSERT(cap_begin && cap_end && cap_replay && cap_destroy && cap_nodes && cap_breaks);
}

/* What cannot be captured is refused before any CUDA call (which would
 * invalidate the capture): a collective other than allreduce, allgather,
 * reduce_scatter, broadcast, send and recv; a call on the legacy default
 * stream; a group's send or receive. Host calls go on during a capture;
 * after it, the communicator works as before. */
TEST_IMPL(cuda_fake_capture_refused)
{
  cap_load();
  collie_comm_t *comm = test_comm();
  int p = collie_comm_size(comm), r = collie_comm_rank(comm);
  float *d = dev_alloc(4 * sizeof(float) * (size_t)p);
  for (int i = 0; i < 4 * p; i++) d[i] = 1;
  collie_opts_t on_capture = {.cuda_stream = CAP_STREAM};
  cap_begin(CAP_STREAM);
  long before = cap_breaks();
  ASSERT_RC(COLLIE_UNSUPPORTED,
            "alltoall on CUDA device memory cannot be captured into a CUDA graph",
            collie_alltoall(comm, d, d + 2 * p, 1, COLLIE_FLOAT32, &on_capture, NULL));
  ASSERT_RC(COLLIE_UNSUPPORTED, "reduce on CUDA device memory cannot be captured",
            collie_reduce(comm, d, d, 4, COLLIE_FLOAT32, COLLIE_SUM, 0, &on_capture, NULL));
  collie_work_t *w = NULL;
  ASSERT_RC(COLLIE_UNSUPPORTED, "while a stream of this process is capturing a CUDA graph",
            collie_allreduce(comm, d, d, 4, COLLIE_FLOAT32, COLLIE_SUM, NULL, &w));
  ASSERT(w == NULL);
  ASSERT_OK(collie_group_start(comm));
  collie_result_t rc =
      collie_recv(comm, d, 4, COLLIE_FLOAT32, (r + p - 1) % p, 0, &on_capture, NULL);
  ASSERT_OK(collie_group_end(comm, NULL)); /* nothing was recorded: an empty group */
  ASSERTF(rc == COLLIE_UNSUPPORTED && strstr(collie_last_error(), "recv in a group"),
          "a group's recv during a capture: %s (%s)", collie_result_string(rc),
          collie_last_error());
  ASSERTF(cap_breaks() == before, "%ld stream queries or copies during the capture",
          cap_breaks() - before);
  float h[4] = {1, 1, 1, 1};
  ASSERT_OK(collie_allreduce(comm, h, h, 4, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  ASSERTF(h[0] == (float)p, "host allreduce during the capture: %g", h[0]);
  void *g = cap_end();
  ASSERTF(cap_nodes(g) == 0, "the refused calls left %d nodes in the graph", cap_nodes(g));
  cap_destroy(g);
  ASSERT_OK(collie_allreduce(comm, d, d, 4, COLLIE_FLOAT32, COLLIE_SUM, &on_capture, NULL));
  ASSERTF(d[0] == (float)p, "device allreduce after the capture: %g, want %d", d[0], p);
  dev_free(d);
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Rank r's element i in replay k (small integers: exact in float32). */
static float
cap_val(int r, int k, size_t i)
{
  return (float)((r * 7 + k * 3 + (int)(i % 13)) % 11 + 1);
}

/* allreduce (in place), allgather (of that result), reduce_scatter,
 * broadcast and a send/recv pair captured into one graph, then replayed
 * 100 times with new inputs, with host calls on the same communicator in
 * between: every replay's results are right on every rank, nothing the
 * capture forbids was done, the capture left the buffers alone, and the
 * graph's host blocks are freed once the graph is. */
TEST_IMPL(cuda_fake_capture_replay)
{
  cap_load();
  collie_comm_t *comm = test_comm();
  int p = collie_comm_size(comm), r = collie_comm_rank(comm);
  size_t n = 1000, pn = n * (size_t)p;
  float *a = dev_alloc(n * 4), *g = dev_alloc(pn * 4), *rsi = dev_alloc(pn * 4);
  float *rso = dev_alloc(n * 4), *b = dev_alloc(n * 4), *pp = dev_alloc(n * 4);
  for (size_t i = 0; i < n; i++) a[i] = b[i] = pp[i] = -5;
  collie_opts_t o = {.cuda_stream = CAP_STREAM};
  int root = p - 1;
  cap_begin(CAP_STREAM);
  long before = cap_breaks();
  ASSERT_OK(collie_allreduce(comm, a, a, n, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL));
  ASSERT_OK(collie_allgather(comm, a, g, n, COLLIE_FLOAT32, &o, NULL));
  ASSERT_OK(collie_reduce_scatter(comm, rsi, rso, n, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL));
  collie_work_t *w = NULL;
  ASSERT_OK(collie_broadcast(comm, b, n, COLLIE_FLOAT32, root, &o, &w));
  ASSERTF(w && collie_test(w) == COLLIE_SUCCESS, "a captured call's work is complete at once");
  collie_work_free(w);
  if (p >= 2 && r == 0) ASSERT_OK(collie_send(comm, pp, n, COLLIE_FLOAT32, 1, 3, &o, NULL));
  if (p >= 2 && r == 1) ASSERT_OK(collie_recv(comm, pp, n, COLLIE_FLOAT32, 0, 3, &o, NULL));
  void *graph = cap_end();
  ASSERTF(cap_breaks() == before, "%ld calls the capture forbids", cap_breaks() - before);
  ASSERTF(a[0] == -5 && b[0] == -5, "the capture ran the calls (a[0] = %g)", a[0]);
  ASSERTF(cap_nodes(graph) >= 12, "the graph has %d nodes", cap_nodes(graph));
  for (int k = 0; k < 100; k++) {
    for (size_t i = 0; i < n; i++) a[i] = cap_val(r, k, i);
    for (size_t i = 0; i < pn; i++) rsi[i] = cap_val(r, k, i) + (float)(i / n);
    for (size_t i = 0; i < n; i++) b[i] = r == root ? cap_val(r, k + 1, i) : -1;
    for (size_t i = 0; i < n; i++) pp[i] = r == 0 ? cap_val(0, k + 2, i) : -1;
    cap_replay(graph);
    for (size_t i = 0; i < n; i += 37) {
      float sum = 0, rs = 0;
      for (int q = 0; q < p; q++) sum += cap_val(q, k, i);
      for (int q = 0; q < p; q++) rs += cap_val(q, k, (size_t)r * n + i) + (float)r;
      ASSERTF(a[i] == sum, "replay %d: allreduce [%zu] = %g, want %g", k, i, a[i], sum);
      for (int q = 0; q < p; q++)
        ASSERTF(g[(size_t)q * n + i] == sum, "replay %d: allgather [%d][%zu] = %g, want %g", k, q,
                i, g[(size_t)q * n + i], sum);
      ASSERTF(rso[i] == rs, "replay %d: reduce_scatter [%zu] = %g, want %g", k, i, rso[i], rs);
      ASSERTF(b[i] == cap_val(root, k + 1, i), "replay %d: broadcast [%zu] = %g", k, i, b[i]);
      if (p >= 2 && r == 1)
        ASSERTF(pp[i] == cap_val(0, k + 2, i), "replay %d: recv [%zu] = %g", k, i, pp[i]);
    }
    if (k % 10 == 0) { /* the caller's own calls between replays */
      float h[2] = {1, 1};
      ASSERT_OK(collie_allreduce(comm, h, h, 2, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
      ASSERTF(h[1] == (float)p, "a host allreduce between replays: %g", h[1]);
    }
  }
  cap_destroy(graph);
  float *fs[] = {a, g, rsi, rso, b, pp};
  for (int i = 0; i < 6; i++) dev_free(fs[i]);
  ASSERT_OK(collie_comm_destroy(comm)); /* frees the graph communicator and the host blocks */
}

/* A replay whose peer never replays fails at the captured call's deadline:
 * nobody can be told then, so it is logged and poisons the communicator
 * the call was captured on, whose next call fails naming it. */
TEST_IMPL(cuda_fake_capture_replay_fails)
{
  cap_load();
  collie_comm_t *comm = test_comm();
  int r = collie_comm_rank(comm);
  float *a = dev_alloc(64 * 4);
  collie_opts_t o = {.cuda_stream = CAP_STREAM, .timeout_ms = 300};
  cap_begin(CAP_STREAM);
  ASSERT_OK(collie_allreduce(comm, a, a, 64, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL));
  void *graph = cap_end();
  if (r == 0) {
    int64_t t0 = collie__now_ns();
    cap_replay(graph); /* rank 1 never replays */
    double secs = (double)(collie__now_ns() - t0) / 1e9;
    ASSERTF(secs < 5, "the replay returned after %.2f s with a 0.3 s deadline", secs);
    float h[1] = {1};
    ASSERT_RC(COLLIE_INVALID_USAGE, "a captured allreduce failed in a CUDA graph's replay",
              collie_allreduce(comm, h, h, 1, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  } else {
    usleep(1500 * 1000); /* past rank 0's deadline */
  }
  cap_destroy(graph);
  dev_free(a);
  ASSERT_OK(collie_comm_destroy(comm));
}
