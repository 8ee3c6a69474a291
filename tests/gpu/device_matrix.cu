// device_matrix.cu - collie's collectives on CUDA device memory, checked
// against a host reference (issue 21; run by scripts/gpu_check.sh on a GPU
// machine, under collierun, every rank on device 0: several ranks per GPU).
//
//   nvcc -O2 -Iinclude tests/gpu/device_matrix.cu -Lbuild -lcollie -o device_matrix
//   collierun -n 4 ./device_matrix
//
// Every collective; allreduce and reduce_scatter in dtypes float32, float64,
// int32, int64, float16 and bfloat16 x ops sum, max, min and prod; in place
// and out of place, counts 1, 5, 1027 and 70001 (around chunk and block
// boundaries), roots on every rank; send and
// receive, blocking, async and in a group; the error of a device buffer
// beside a host one; the host-only features' refusals (wire, sparse, windows). Inputs are small
// integers, so every result is exact in every dtype and is compared byte for byte; outputs are
// poisoned first. Prints one line per failure and a summary; exit 1 on any failure.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vector>

extern "C" {
#include "collie.h"
}

static int g_rank, g_size, g_fail, g_checks;
static collie_comm_t *g_comm;

#define CUDA_OK(x)                                                                                 \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      printf("rank %d: %s: %s\n", g_rank, #x, cudaGetErrorString(e_));                             \
      exit(2);                                                                                     \
    }                                                                                              \
  } while (0)

static const collie_dtype_t kDtypes[] = {COLLIE_FLOAT32, COLLIE_FLOAT64, COLLIE_INT32,
                                         COLLIE_INT64,   COLLIE_FLOAT16, COLLIE_BFLOAT16};
static const collie_op_t kOps[] = {COLLIE_SUM, COLLIE_MAX, COLLIE_MIN, COLLIE_PROD};
static const size_t kCounts[] = {1, 5, 1027, 70001};

// The value rank r contributes at element i (small: sums and products stay exact).
static double
val(int r, size_t i, collie_op_t op)
{
  return op == COLLIE_PROD ? (double)((r + i) % 2 + 1) : (double)((r * 3 + i) % 7 + 1);
}

static void
put(collie_dtype_t t, void *base, size_t i, double v)
{
  switch (t) {
  case COLLIE_FLOAT32:
    ((float *)base)[i] = (float)v;
    break;
  case COLLIE_FLOAT64:
    ((double *)base)[i] = v;
    break;
  case COLLIE_INT32:
    ((int *)base)[i] = (int)v;
    break;
  case COLLIE_INT64:
    ((long long *)base)[i] = (long long)v;
    break;
  case COLLIE_FLOAT16:
    ((__half *)base)[i] = __float2half((float)v);
    break;
  case COLLIE_BFLOAT16:
    ((__nv_bfloat16 *)base)[i] = __float2bfloat16((float)v);
    break;
  default:
    break;
  }
}

static double
reduce_ref(collie_op_t op, int nranks, size_t i)
{
  double a = val(0, i, op);
  for (int r = 1; r < nranks; r++) {
    double b = val(r, i, op);
    a = op == COLLIE_SUM    ? a + b
        : op == COLLIE_PROD ? a * b
        : op == COLLIE_MAX  ? (a > b ? a : b)
                            : (a < b ? a : b);
  }
  return a;
}

// A device buffer of n bytes holding host bytes h (or poison when h is NULL).
static void *
dev_of(const std::vector<unsigned char> *h, size_t n)
{
  void *d = NULL;
  CUDA_OK(cudaMalloc(&d, n ? n : 1));
  if (h)
    CUDA_OK(cudaMemcpy(d, h->data(), n, cudaMemcpyHostToDevice));
  else
    CUDA_OK(cudaMemset(d, 0xAB, n ? n : 1));
  return d;
}

static void
expect(const char *what, void *d, const std::vector<unsigned char> &want)
{
  std::vector<unsigned char> got(want.size());
  CUDA_OK(cudaMemcpy(got.data(), d, want.size(), cudaMemcpyDefault)); // d: device or host
  g_checks++;
  if (memcmp(got.data(), want.data(), want.size()) != 0) {
    size_t k = 0;
    while (k < want.size() && got[k] == want[k]) k++;
    printf("rank %d: FAIL %s: byte %zu is 0x%02x, want 0x%02x\n", g_rank, what, k, got[k], want[k]);
    g_fail++;
  }
}

static void
ok(const char *what, collie_result_t rc)
{
  if (rc != COLLIE_SUCCESS) {
    printf("rank %d: FAIL %s: %s: %s\n", g_rank, what, collie_result_string(rc),
           collie_last_error());
    g_fail++;
  }
}

// Rank r's input of n elements (op decides the values), as bytes.
static std::vector<unsigned char>
input(collie_dtype_t t, collie_op_t op, int r, size_t n, size_t shift = 0)
{
  std::vector<unsigned char> b(n * collie_dtype_size(t));
  for (size_t i = 0; i < n; i++) put(t, b.data(), i, val(r, i + shift, op));
  return b;
}

static void
allreduce_cases(void)
{
  for (collie_dtype_t t : kDtypes)
    for (collie_op_t op : kOps)
      for (size_t n : kCounts)
        for (int inplace = 0; inplace < 2; inplace++) {
          char what[160];
          snprintf(what, sizeof(what), "allreduce %s %s n=%zu%s", collie_dtype_name(t),
                   collie_op_name(op), n, inplace ? " in place" : "");
          std::vector<unsigned char> in = input(t, op, g_rank, n), want(in.size());
          for (size_t i = 0; i < n; i++) put(t, want.data(), i, reduce_ref(op, g_size, i));
          void *s = dev_of(&in, in.size()), *d = inplace ? s : dev_of(NULL, in.size());
          ok(what, collie_allreduce(g_comm, s, d, n, t, op, NULL, NULL));
          expect(what, d, want);
          cudaFree(s);
          if (!inplace) cudaFree(d);
        }
}

// reduce_scatter in every dtype and op (the kernels the direct path runs for
// it), in place (recvbuf = sendbuf's block rank) and out of place.
static void
reduce_scatter_cases(void)
{
  for (collie_dtype_t t : kDtypes)
    for (collie_op_t op : kOps)
      for (size_t n : {(size_t)1, (size_t)1027})
        for (int inplace = 0; inplace < 2; inplace++) {
          size_t es = collie_dtype_size(t);
          char what[160];
          snprintf(what, sizeof(what), "reduce_scatter %s %s n=%zu%s", collie_dtype_name(t),
                   collie_op_name(op), n, inplace ? " in place" : "");
          std::vector<unsigned char> sendv(n * es * g_size), want(n * es);
          for (int j = 0; j < g_size; j++) {
            std::vector<unsigned char> x = input(t, op, g_rank, n, j * n);
            memcpy(sendv.data() + j * n * es, x.data(), x.size());
          }
          for (size_t i = 0; i < n; i++)
            put(t, want.data(), i, reduce_ref(op, g_size, i + g_rank * n));
          char *s = (char *)dev_of(&sendv, sendv.size());
          void *d = inplace ? (void *)(s + g_rank * n * es) : dev_of(NULL, want.size());
          ok(what, collie_reduce_scatter(g_comm, s, d, n, t, op, NULL, NULL));
          expect(what, d, want);
          cudaFree(s);
          if (!inplace) cudaFree(d);
        }
}

static void
rooted_and_data_cases(void)
{
  const collie_dtype_t t = COLLIE_FLOAT32;
  const size_t es = 4;
  for (size_t n : kCounts) {
    char what[160];
    for (int root = 0; root < g_size; root++) {
      // broadcast: the root's input everywhere.
      std::vector<unsigned char> mine = input(t, COLLIE_SUM, g_rank, n),
                                 theirs = input(t, COLLIE_SUM, root, n);
      void *b = dev_of(&mine, mine.size());
      snprintf(what, sizeof(what), "broadcast n=%zu root %d", n, root);
      ok(what, collie_broadcast(g_comm, b, n, t, root, NULL, NULL));
      expect(what, b, theirs);
      cudaFree(b);
      // reduce (sum) to root; a non-root's recvbuf is left alone.
      void *s = dev_of(&mine, mine.size()), *d = dev_of(NULL, mine.size());
      snprintf(what, sizeof(what), "reduce n=%zu root %d", n, root);
      ok(what, collie_reduce(g_comm, s, d, n, t, COLLIE_SUM, root, NULL, NULL));
      std::vector<unsigned char> want(mine.size(), 0xAB);
      if (g_rank == root)
        for (size_t i = 0; i < n; i++) put(t, want.data(), i, reduce_ref(COLLIE_SUM, g_size, i));
      expect(what, d, want);
      cudaFree(s);
      cudaFree(d);
      // gather and scatter through root.
      std::vector<unsigned char> all(g_size * n * es);
      for (int r = 0; r < g_size; r++) {
        std::vector<unsigned char> x = input(t, COLLIE_SUM, r, n);
        memcpy(all.data() + r * n * es, x.data(), x.size());
      }
      s = dev_of(&mine, mine.size());
      d = dev_of(NULL, all.size());
      snprintf(what, sizeof(what), "gather n=%zu root %d", n, root);
      ok(what, collie_gather(g_comm, s, d, n, t, root, NULL, NULL));
      expect(what, d, g_rank == root ? all : std::vector<unsigned char>(all.size(), 0xAB));
      cudaFree(s);
      cudaFree(d);
      s = dev_of(&all, all.size());
      d = dev_of(NULL, mine.size());
      snprintf(what, sizeof(what), "scatter n=%zu root %d", n, root);
      ok(what, collie_scatter(g_comm, s, d, n, t, root, NULL, NULL));
      expect(what, d, mine);
      cudaFree(s);
      cudaFree(d);
    }
    // allgather (out of place and in place), alltoall, reduce_scatter.
    std::vector<unsigned char> mine = input(t, COLLIE_SUM, g_rank, n), all(g_size * n * es);
    for (int r = 0; r < g_size; r++) {
      std::vector<unsigned char> x = input(t, COLLIE_SUM, r, n);
      memcpy(all.data() + r * n * es, x.data(), x.size());
    }
    void *s = dev_of(&mine, mine.size()), *d = dev_of(NULL, all.size());
    snprintf(what, sizeof(what), "allgather n=%zu", n);
    ok(what, collie_allgather(g_comm, s, d, n, t, NULL, NULL));
    expect(what, d, all);
    cudaFree(d);
    std::vector<unsigned char> placed(all.size(), 0xAB);
    memcpy(placed.data() + g_rank * n * es, mine.data(), mine.size());
    d = dev_of(&placed, placed.size());
    snprintf(what, sizeof(what), "allgather n=%zu in place", n);
    ok(what, collie_allgather(g_comm, (char *)d + g_rank * n * es, d, n, t, NULL, NULL));
    expect(what, d, all);
    cudaFree(d);
    cudaFree(s);
    // alltoall: block j of rank r holds input(r, shift j*n); rank r gets block r of each.
    std::vector<unsigned char> sendv(g_size * n * es), recvv(g_size * n * es);
    for (int j = 0; j < g_size; j++) {
      std::vector<unsigned char> x = input(t, COLLIE_SUM, g_rank, n, j * n);
      memcpy(sendv.data() + j * n * es, x.data(), x.size());
      std::vector<unsigned char> y = input(t, COLLIE_SUM, j, n, g_rank * n);
      memcpy(recvv.data() + j * n * es, y.data(), y.size());
    }
    s = dev_of(&sendv, sendv.size());
    d = dev_of(NULL, recvv.size());
    snprintf(what, sizeof(what), "alltoall n=%zu", n);
    ok(what, collie_alltoall(g_comm, s, d, n, t, NULL, NULL));
    expect(what, d, recvv);
    cudaFree(s);
    cudaFree(d);
    // reduce_scatter: rank r gets the sum over ranks of block r.
    for (int j = 0; j < g_size; j++) {
      std::vector<unsigned char> x = input(t, COLLIE_SUM, g_rank, n, j * n);
      memcpy(sendv.data() + j * n * es, x.data(), x.size());
    }
    std::vector<unsigned char> want(n * es);
    for (size_t i = 0; i < n; i++) {
      double a = 0;
      for (int r = 0; r < g_size; r++) a += val(r, i + g_rank * n, COLLIE_SUM);
      put(t, want.data(), i, a);
    }
    s = dev_of(&sendv, sendv.size());
    d = dev_of(NULL, want.size());
    snprintf(what, sizeof(what), "reduce_scatter n=%zu", n);
    ok(what, collie_reduce_scatter(g_comm, s, d, n, t, COLLIE_SUM, NULL, NULL));
    expect(what, d, want);
    cudaFree(s);
    cudaFree(d);
    // allgatherv with uneven counts (rank r sends n + r) and a gap between blocks.
    std::vector<size_t> counts(g_size), displs(g_size);
    size_t at = 0;
    for (int r = 0; r < g_size; r++) {
      counts[r] = n + r;
      displs[r] = at;
      at += counts[r] + 3;
    }
    std::vector<unsigned char> vall(at * es, 0xAB);
    for (int r = 0; r < g_size; r++) {
      std::vector<unsigned char> x = input(t, COLLIE_SUM, r, counts[r]);
      memcpy(vall.data() + displs[r] * es, x.data(), x.size());
    }
    std::vector<unsigned char> vmine = input(t, COLLIE_SUM, g_rank, counts[g_rank]);
    s = dev_of(&vmine, vmine.size());
    d = dev_of(NULL, vall.size());
    snprintf(what, sizeof(what), "allgatherv n=%zu", n);
    ok(what, collie_allgatherv(g_comm, s, counts[g_rank], d, counts.data(), displs.data(), t, NULL,
                               NULL));
    expect(what, d, vall);
    cudaFree(s);
    cudaFree(d);
    // alltoallv: rank a sends cnt(a, b) elements to rank b, the blocks apart
    // by a gap on both sides; b gets block b of a's input.
    auto cnt = [&](int a, int b) { return n / 2 + (size_t)((a + 2 * b) % 3); };
    auto layout = [&](int a, bool send, std::vector<size_t> &c, std::vector<size_t> &dsp) {
      size_t end = 0;
      c.assign(g_size, 0);
      dsp.assign(g_size, 0);
      for (int b = 0; b < g_size; b++) {
        c[b] = send ? cnt(a, b) : cnt(b, a);
        dsp[b] = end + (send ? 1 : 2);
        end = dsp[b] + c[b];
      }
      return end;
    };
    std::vector<size_t> sc, sd, rc, rd;
    size_t stot = layout(g_rank, true, sc, sd), rtot = layout(g_rank, false, rc, rd);
    std::vector<unsigned char> vin = input(t, COLLIE_SUM, g_rank, stot), vwant(rtot * es, 0xAB);
    for (int q = 0; q < g_size; q++) {
      std::vector<size_t> qc, qd;
      std::vector<unsigned char> qin = input(t, COLLIE_SUM, q, layout(q, true, qc, qd));
      memcpy(vwant.data() + rd[q] * es, qin.data() + qd[g_rank] * es, rc[q] * es);
    }
    s = dev_of(&vin, vin.size());
    d = dev_of(NULL, vwant.size());
    snprintf(what, sizeof(what), "alltoallv n=%zu", n);
    ok(what, collie_alltoallv(g_comm, s, sc.data(), sd.data(), d, rc.data(), rd.data(), t, NULL,
                              NULL));
    expect(what, d, vwant);
    cudaFree(s);
    cudaFree(d);
  }
}

static void
p2p_and_error_cases(void)
{
  const collie_dtype_t t = COLLIE_INT32;
  char what[160];
  // Sizes: one of a few KiB and one of several MiB (several shm slots, or
  // one device message on the direct path).
  for (size_t n : {(size_t)1027, (size_t)(1 << 20) + 5}) {
    if (g_size < 2) break;
    // A ring: even ranks send first, odd ranks receive first.
    int to = (g_rank + 1) % g_size, from = (g_rank + g_size - 1) % g_size;
    std::vector<unsigned char> mine = input(t, COLLIE_SUM, g_rank, n),
                               theirs = input(t, COLLIE_SUM, from, n);
    void *s = dev_of(&mine, mine.size()), *d = dev_of(NULL, mine.size());
    snprintf(what, sizeof(what), "send/recv ring n=%zu", n);
    for (int phase = 0; phase < 2; phase++) {
      if ((g_rank % 2 == 0) == (phase == 0))
        ok(what, collie_send(g_comm, s, n, t, to, 7, NULL, NULL));
      else
        ok(what, collie_recv(g_comm, d, n, t, from, 7, NULL, NULL));
    }
    expect(what, d, theirs);
    // Async on device memory (staged when it runs): even ranks send first.
    CUDA_OK(cudaMemset(d, 0xAB, mine.size()));
    collie_work_t *ws = NULL, *wr = NULL;
    snprintf(what, sizeof(what), "async send/recv ring n=%zu", n);
    if (g_rank % 2 == 0) ok(what, collie_send(g_comm, s, n, t, to, 8, NULL, &ws));
    ok(what, collie_recv(g_comm, d, n, t, from, 8, NULL, &wr));
    if (g_rank % 2 == 1) ok(what, collie_send(g_comm, s, n, t, to, 8, NULL, &ws));
    if (ws) ok(what, collie_wait(ws, -1)), collie_work_free(ws);
    if (wr) ok(what, collie_wait(wr, -1)), collie_work_free(wr);
    expect(what, d, theirs);
    // A group ring (every rank sends and receives at once), async.
    CUDA_OK(cudaMemset(d, 0xAB, mine.size()));
    snprintf(what, sizeof(what), "group send/recv ring n=%zu", n);
    collie_work_t *wg = NULL;
    ok(what, collie_group_start(g_comm));
    ok(what, collie_send(g_comm, s, n, t, to, 9, NULL, NULL));
    ok(what, collie_recv(g_comm, d, n, t, from, 9, NULL, NULL));
    ok(what, collie_group_end(g_comm, &wg));
    if (wg) ok(what, collie_wait(wg, -1)), collie_work_free(wg);
    expect(what, d, theirs);
    // The pair's kinds differ: device to host (a device message copied into
    // host memory on one host) and host to device (host bytes, staged).
    for (int dir = 0; dir < 2; dir++) {
      std::vector<unsigned char> hostbuf(mine.size(), 0xAB);
      CUDA_OK(cudaMemset(d, 0xAB, mine.size()));
      void *sb = dir ? (void *)mine.data() : s, *rb = dir ? d : (void *)hostbuf.data();
      snprintf(what, sizeof(what), "send/recv ring n=%zu, %s", n,
               dir ? "host to device" : "device to host");
      for (int phase = 0; phase < 2; phase++) {
        if ((g_rank % 2 == 0) == (phase == 0))
          ok(what, collie_send(g_comm, sb, n, t, to, 10 + dir, NULL, NULL));
        else
          ok(what, collie_recv(g_comm, rb, n, t, from, 10 + dir, NULL, NULL));
      }
      expect(what, rb, theirs);
    }
    cudaFree(s);
    cudaFree(d);
  }
  const size_t n = 1027;
  // A device buffer beside a host one: refused by name, nothing run.
  std::vector<float> host(n);
  void *d = dev_of(NULL, n * 4);
  collie_result_t rc =
      collie_allreduce(g_comm, d, host.data(), n, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL);
  g_checks++;
  if (rc != COLLIE_INVALID_ARGUMENT ||
      !strstr(collie_last_error(), "sendbuf is CUDA device memory")) {
    printf("rank %d: FAIL mixed buffers: %s: %s\n", g_rank, collie_result_string(rc),
           collie_last_error());
    g_fail++;
  }
  // An async allreduce on device memory: complete when it returns.
  std::vector<unsigned char> in = input(COLLIE_FLOAT32, COLLIE_SUM, g_rank, n), want(in.size());
  for (size_t i = 0; i < n; i++)
    put(COLLIE_FLOAT32, want.data(), i, reduce_ref(COLLIE_SUM, g_size, i));
  void *s = dev_of(&in, in.size());
  collie_work_t *w = NULL;
  ok("async allreduce", collie_allreduce(g_comm, s, d, n, COLLIE_FLOAT32, COLLIE_SUM, NULL, &w));
  if (w) {
    ok("async allreduce: test",
       collie_test(w) == COLLIE_SUCCESS ? COLLIE_SUCCESS : COLLIE_INTERNAL_ERROR);
    ok("async allreduce: wait", collie_wait(w, -1));
    collie_work_free(w);
  }
  expect("async allreduce", d, want);
  cudaFree(s);
  cudaFree(d);
}

// The host-only features refuse device buffers by name (docs/gpu.md): an
// explicit 16-bit wire, sparse allreduce and windows. The communicator runs
// with COLLIE_WIRE=bfloat16 (main), which calls on device memory must
// ignore: 1000.25 does not survive bfloat16, so a compressed sum shows.
static int
refused(const char *what, collie_result_t rc, collie_result_t want, const char *text)
{
  g_checks++;
  if (rc == want && strstr(collie_last_error(), text)) return 1;
  printf("rank %d: FAIL %s: got %s (%s), want %s naming '%s'\n", g_rank, what,
         collie_result_string(rc), collie_last_error(), collie_result_string(want), text);
  g_fail++;
  return 0;
}

static void
host_only_cases(void)
{
  const size_t n = 4;
  std::vector<unsigned char> in(n * 4), want(n * 4);
  for (size_t i = 0; i < n; i++)
    put(COLLIE_FLOAT32, in.data(), i, 1000.25),
        put(COLLIE_FLOAT32, want.data(), i, 1000.25 * g_size);
  float *d = (float *)dev_of(&in, in.size());
  collie_opts_t o = {};
  o.wire = COLLIE_WIRE_FLOAT16;
  refused("wire=float16 on device memory",
          collie_allreduce(g_comm, d, d, n, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL),
          COLLIE_INVALID_ARGUMENT, "applies to host memory only");
  ok("allreduce under COLLIE_WIRE=bfloat16",
     collie_allreduce(g_comm, d, d, n, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  expect("allreduce under COLLIE_WIRE=bfloat16 (not compressed)", d, want);
  int64_t idx[1] = {0}, oi[16];
  size_t on = 0;
  refused("sparse allreduce on device memory",
          collie_sparse_allreduce(g_comm, COLLIE_SPARSE_GTOPK, idx, d, 1, n, oi, d + 1, 1, &on,
                                  COLLIE_FLOAT32, NULL, NULL),
          COLLIE_UNSUPPORTED, "device memory");
  collie_window_t *w = NULL;
  refused("window on device memory", collie_window_create(g_comm, d, n * 4, &w), COLLIE_UNSUPPORTED,
          "base is device memory");
  if (w) printf("rank %d: FAIL window on device memory: a window came back\n", g_rank), g_fail++;
  cudaFree(d);
}

// Whether calls on device buffers take the direct path (COLLIE_CUDA_IPC,
// default 1); the matrix runs both ways.
static int
direct_expected(void)
{
  const char *e = getenv("COLLIE_CUDA_IPC");
  return !(e && !strcmp(e, "0"));
}

// What the summary calls this run (DEVICE_MATRIX_LABEL names a layout).
static const char *
label(void)
{
  const char *l = getenv("DEVICE_MATRIX_LABEL");
  return l ? l : direct_expected() ? "direct" : "staged";
}

// The direct path asked for by name: it runs (and is right) where it
// should, and is an argument error, naming what it needs, where it cannot.
static void
forced_cases(void)
{
  const size_t n = 70001;
  collie_opts_t o;
  memset(&o, 0, sizeof(o));
  o.algorithm = COLLIE_ALGO_CUDA_IPC;
  std::vector<unsigned char> in = input(COLLIE_FLOAT32, COLLIE_SUM, g_rank, n), want(in.size());
  for (size_t i = 0; i < n; i++)
    put(COLLIE_FLOAT32, want.data(), i, reduce_ref(COLLIE_SUM, g_size, i));
  void *s = dev_of(&in, in.size()), *d = dev_of(NULL, in.size());
  collie_result_t rc = collie_allreduce(g_comm, s, d, n, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL);
  g_checks++;
  if (direct_expected()) {
    ok("allreduce forced cuda_ipc", rc);
    expect("allreduce forced cuda_ipc", d, want);
  } else if (rc != COLLIE_INVALID_ARGUMENT || !strstr(collie_last_error(), "CUDA device buffers")) {
    printf("rank %d: FAIL forced cuda_ipc with COLLIE_CUDA_IPC=0: %s: %s\n", g_rank,
           collie_result_string(rc), collie_last_error());
    g_fail++;
  }
  cudaFree(s);
  cudaFree(d);
}

// The same buffers over and over (the IPC caches' hits), buffers at
// different offsets of one allocation on every rank (a tensor view), one at
// a 4-byte offset (the kernels' element-wise path), and the call ordered
// after a non-blocking stream whose copy into the input is still running.
static void
reuse_and_stream_cases(void)
{
  const collie_dtype_t t = COLLIE_FLOAT32;
  const size_t n = 1 << 20, bytes = n * 4;
  char *base = NULL;
  CUDA_OK(cudaMalloc((void **)&base, 3 * bytes + 8192));
  size_t off = 256 * (size_t)(g_rank + 1) + (g_rank % 2 ? 4 : 0);
  void *s = base + off, *d = base + off + bytes + 4096;
  char what[160];
  for (int iter = 0; iter < 40; iter++) {
    std::vector<unsigned char> in = input(t, COLLIE_SUM, g_rank, n, (size_t)iter), want(bytes);
    for (size_t i = 0; i < n; i++) {
      double v = 0;
      for (int r = 0; r < g_size; r++) v += val(r, i + (size_t)iter, COLLIE_SUM);
      put(t, want.data(), i, v);
    }
    CUDA_OK(cudaMemcpy(s, in.data(), bytes, cudaMemcpyHostToDevice));
    snprintf(what, sizeof(what), "allreduce reused buffers (offset %zu) iteration %d", off, iter);
    ok(what, collie_allreduce(g_comm, s, d, n, t, COLLIE_SUM, NULL, NULL));
    if (iter % 13 == 0) expect(what, d, want);
  }
  // Ordered after a stream: the input's copy is queued on it, not waited for.
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  unsigned char *pinned = NULL;
  CUDA_OK(cudaMallocHost((void **)&pinned, bytes));
  for (int iter = 0; iter < 4; iter++) {
    std::vector<unsigned char> in = input(t, COLLIE_SUM, g_rank, n, 100 + (size_t)iter),
                               want(bytes);
    for (size_t i = 0; i < n; i++) {
      double v = 0;
      for (int r = 0; r < g_size; r++) v += val(r, i + 100 + (size_t)iter, COLLIE_SUM);
      put(t, want.data(), i, v);
    }
    memcpy(pinned, in.data(), bytes);
    CUDA_OK(cudaMemsetAsync(d, 0, bytes, st));
    CUDA_OK(cudaMemcpyAsync(s, pinned, bytes, cudaMemcpyHostToDevice, st));
    collie_opts_t o;
    memset(&o, 0, sizeof(o));
    o.cuda_stream = st;
    snprintf(what, sizeof(what), "allreduce after a non-blocking stream, iteration %d", iter);
    ok(what, collie_allreduce(g_comm, s, s, n, t, COLLIE_SUM, &o, NULL));
    CUDA_OK(cudaStreamSynchronize(st));
    expect(what, s, want);
  }
  CUDA_OK(cudaStreamDestroy(st));
  CUDA_OK(cudaFreeHost(pinned));
  cudaFree(base);
}

// A failure on device buffers (argv[1] "timeout" or "kill"; collierun
// --keep-going): rank 0 never calls (it sleeps, or dies), every other rank's
// allreduce fails within its deadline naming rank 0, nothing hangs, and its
// device memory is all given back.
static int
failure_case(const char *how)
{
  const size_t n = 1 << 20;
  size_t free0 = 0, free1 = 0, total = 0;
  CUDA_OK(cudaMemGetInfo(&free0, &total));
  void *s = dev_of(NULL, n * 4);
  if (g_rank == 0) {
    if (!strcmp(how, "kill")) raise(SIGKILL);
    sleep(6);
    cudaFree(s);
    collie_comm_destroy(g_comm);
    return 0;
  }
  collie_opts_t o;
  memset(&o, 0, sizeof(o));
  o.timeout_ms = 2000;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  collie_result_t rc = collie_allreduce(g_comm, s, s, n, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  const char *msg = collie_last_error();
  int good = rc != COLLIE_SUCCESS && secs < 4.5 && strstr(msg, "rank 0");
  printf("device_matrix %s: rank %d: %s after %.2f s: %s\n", how, g_rank, collie_result_string(rc),
         secs, msg);
  cudaFree(s);
  collie_comm_destroy(g_comm);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemGetInfo(&free1, &total));
  long long lost = ((long long)free0 - (long long)free1) >> 20;
  printf("device_matrix %s: rank %d: %s; device memory free %zu MiB before, %zu after\n", how,
         g_rank, good ? "reported as expected" : "FAIL", free0 >> 20, free1 >> 20);
  return good && lost < 64 ? 0 : 1;
}

int
main(int argc, char **argv)
{
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaFree(0));                 // the context, before collie looks for the driver
  setenv("COLLIE_WIRE", "bfloat16", 0); // device calls must ignore it (host_only_cases)
  if (collie_comm_init(&g_comm) != COLLIE_SUCCESS) {
    printf("device_matrix: init: %s\n", collie_last_error());
    return 2;
  }
  g_rank = collie_comm_rank(g_comm);
  g_size = collie_comm_size(g_comm);
  if (argc > 1) return failure_case(argv[1]);
  size_t free0 = 0, total = 0;
  CUDA_OK(cudaMemGetInfo(&free0, &total));
  const char *quick = getenv("DEVICE_MATRIX_QUICK"); // many ranks: allreduce only
  if (quick) {
    allreduce_cases();
    reuse_and_stream_cases();
    collie_barrier(g_comm, NULL, NULL);
    collie_comm_destroy(g_comm);
    if (g_rank == 0 || g_fail)
      printf("device_matrix (quick, %s): rank %d of %d: %d checks, %d failed\n",
             label(), g_rank, g_size, g_checks, g_fail);
    return g_fail ? 1 : 0;
  }
  allreduce_cases();
  reduce_scatter_cases();
  forced_cases();
  reuse_and_stream_cases();
  rooted_and_data_cases();
  p2p_and_error_cases();
  host_only_cases();
  CUDA_OK(cudaDeviceSynchronize());
  // Free memory after the communicator is gone: the peers' mappings of
  // buffers freed during the matrix are closed with it (docs/gpu.md).
  collie_barrier(g_comm, NULL, NULL);
  collie_comm_destroy(g_comm);
  size_t free1 = 0;
  CUDA_OK(cudaMemGetInfo(&free1, &total));
  if (g_rank == 0 || g_fail)
    printf("device_matrix (%s): rank %d of %d: %d checks, %d failed; device memory free %zu MiB "
           "before, %zu after\n",
           label(), g_rank, g_size, g_checks, g_fail, free0 >> 20,
           free1 >> 20);
  return g_fail ? 1 : 0;
}
