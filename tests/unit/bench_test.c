/*
 * bench_test.c - collie-bench: nccl-tests' shape and bandwidth rules against
 * values worked out by hand; the data check (inputs, expected values and the
 * count of wrong elements) against a serial model of every collective for
 * every dtype, operation and several rank counts, in and out of place, and
 * made to see a corrupted element; the writers (table, CSV, profile, SVG) on
 * points made up here; cb_measure called directly by ranks, once with a
 * collective that corrupts its result (alltoall's and alltoallv's seams); and
 * the tool run as a black box under collierun: a sweep with --csv and --plot
 * whose files are parsed back, alltoallv's rows on 2 and 3 ranks, the seed
 * profile file, bad options (exit 2, one message, from rank 0 only) and
 * running alone without a launcher.
 *
 * cbench_measure.c and cbench_output.c are compiled into this file (the
 * tool's other pieces come from tools_impl.c). collie_alltoall is renamed
 * inside cbench_measure.c to a wrapper that can damage one element of its
 * result, so the path from a wrong element to the #wrong count is tested
 * against a real collective.
 */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner.h"

static collie_result_t bt_alltoall(collie_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t count, collie_dtype_t dtype, const collie_opts_t *opts,
                                   collie_work_t **work);
#include "../../tools/cbench_int.h"
#include "../../tools/units.h"

#define BT_BENCH COLLIE_BUILD_DIR "/collie-bench"
#define BT_RUN COLLIE_BUILD_DIR "/collierun"

/* When > 0, the next alltoall of this rank changes element 0 of its result. */
static int bt_corrupt;

static collie_result_t
bt_alltoall(collie_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
            collie_dtype_t dtype, const collie_opts_t *opts, collie_work_t **work)
{
  collie_result_t rc = collie_alltoall(comm, sendbuf, recvbuf, count, dtype, opts, work);
  if (rc == COLLIE_SUCCESS && bt_corrupt > 0 && count > 0) {
    bt_corrupt--;
    cb_meas_put(dtype, recvbuf, 0, cb_meas_get(dtype, recvbuf, 0) + 1);
  }
  return rc;
}

/* When > 0, the next alltoallv of this rank changes the last element of the
 * block it received from the last rank. bt_v_seen records the arrays the
 * calls were given, to check that cb_measure passes alltoall's layout. */
static int bt_corrupt_v;
static struct {
  long calls, bad_layout;
  const size_t *counts; /* the first call's sendcounts: the same array every call */
  int new_arrays;       /* a later call came with other arrays */
} bt_v_seen;

static collie_result_t
bt_alltoallv(collie_comm_t *comm, const void *sendbuf, const size_t *sendcounts,
             const size_t *sdispls, void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
             collie_dtype_t dtype, const collie_opts_t *opts, collie_work_t **work)
{
  int n = collie_comm_size(comm);
  size_t cnt = sendcounts[0];
  for (int q = 0; q < n; q++)
    if (sendcounts[q] != cnt || recvcounts[q] != cnt || sdispls[q] != (size_t)q * cnt ||
        rdispls[q] != (size_t)q * cnt)
      bt_v_seen.bad_layout++;
  if (!bt_v_seen.calls++)
    bt_v_seen.counts = sendcounts;
  else if (sendcounts != bt_v_seen.counts)
    bt_v_seen.new_arrays = 1;
  collie_result_t rc = collie_alltoallv(comm, sendbuf, sendcounts, sdispls, recvbuf, recvcounts,
                                        rdispls, dtype, opts, work);
  if (rc == COLLIE_SUCCESS && bt_corrupt_v > 0 && cnt > 0) {
    bt_corrupt_v--;
    size_t at = rdispls[n - 1] + recvcounts[n - 1] - 1;
    cb_meas_put(dtype, recvbuf, at, cb_meas_get(dtype, recvbuf, at) + 1);
  }
  return rc;
}

/* ---- Small helpers ---- */

static char *
bt_slurp(const char *path)
{
  return test_read_file(path, NULL);
}

/* Runs the shell command cmd in the test directory (at most 90 s); returns
 * its exit status, stdout in *out and stderr in *err (caller frees). */
static int
bt_sh(const char *cmd, char **out, char **err)
{
  char full[8192];
  snprintf(full, sizeof(full),
           "cd '%s' && env -u COLLIE_RANK -u COLLIE_WORLD_SIZE -u COLLIE_STORE -u "
           "COLLIE_JOB_TOKEN -u COLLIE_LOCAL_RANK -u COLLIE_LOCAL_SIZE -u COLLIE_TRANSPORT "
           "timeout -k 5 90 %s > '%s' 2> '%s'",
           test_dir(), cmd, test_path("stdout.txt"), test_path("stderr.txt"));
  int st = system(full);
  *out = bt_slurp(test_path("stdout.txt"));
  *err = bt_slurp(test_path("stderr.txt"));
  ASSERT(*out && *err);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int
bt_count(const char *hay, const char *needle)
{
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

static int
bt_close(double got, double want, double rel, double abs_tol)
{
  return fabs(got - want) <= rel * fabs(want) + abs_tol;
}

/* ---- Shapes and bandwidths, by hand ---- */

TEST_IMPL(bench_shape_rules)
{
  static const int ns[] = {1, 2, 3, 4, 8};
  /* 100 bytes of float32 = 25 elements: the whole buffer for allreduce,
   * broadcast, reduce, sendrecv; 25 / n whole elements per rank otherwise. */
  static const size_t per_rank[] = {25, 12, 8, 6, 3};
  static const size_t shared_bytes[] = {100, 96, 96, 96, 96};
  /* bus bandwidth factors: 2(n-1)/n and (n-1)/n */
  static const double f_ar[] = {0, 1, 4.0 / 3, 1.5, 1.75};
  static const double f_sh[] = {0, 0.5, 2.0 / 3, 0.75, 0.875};
  struct cb_shape s;
  for (int k = 0; k < 5; k++) {
    int n = ns[k];
    for (int c = 0; c < CB_NCOLL; c++) {
      int whole = c == CB_ALLREDUCE || c == CB_BROADCAST || c == CB_REDUCE || c == CB_SENDRECV;
      ASSERT(cb_shape(c, 100, n, 4, &s) == 1);
      if (c == CB_BARRIER)
        ASSERT(s.count == 0 && s.bytes == 0);
      else if (whole)
        ASSERTF(s.count == 25 && s.bytes == 100, "%s n=%d: %zu %zu", cb_coll_name(c), n, s.count,
                s.bytes);
      else
        ASSERTF(s.count == per_rank[k] && s.bytes == shared_bytes[k], "%s n=%d: %zu %zu",
                cb_coll_name(c), n, s.count, s.bytes);
      double f = cb_busbw_factor(c, n), want = c == CB_ALLREDUCE ? f_ar[k]
                                               : c == CB_BARRIER ? 0
                                               : whole           ? 1
                                                                 : f_sh[k];
      ASSERTF(fabs(f - want) < 1e-12, "%s n=%d factor %g, want %g", cb_coll_name(c), n, f, want);
    }
    /* 8 bytes of float32 is 2 elements: fewer than one per rank from 3 ranks on. */
    ASSERT(cb_shape(CB_ALLGATHER, 8, n, 4, &s) == (n <= 2));
    ASSERT(cb_shape(CB_ALLTOALL, 8, n, 4, &s) == (n <= 2));
    /* alltoallv has alltoall's shape: count is one peer block. */
    struct cb_shape sv;
    ASSERT(cb_shape(CB_ALLTOALLV, 1000, n, 4, &sv) == 1 && cb_shape(CB_ALLTOALL, 1000, n, 4, &s));
    ASSERT(sv.count == s.count && sv.bytes == s.bytes && sv.count == 250 / (size_t)n);
    ASSERT(cb_busbw_factor(CB_ALLTOALLV, n) == cb_busbw_factor(CB_ALLTOALL, n));
    ASSERT(cb_shape(CB_ALLREDUCE, 8, n, 4, &s) == 1 && s.count == 2);
    /* Rounding down: 7 bytes hold one float32; 3 bytes none. */
    ASSERT(cb_shape(CB_ALLREDUCE, 7, n, 4, &s) == 1 && s.count == 1 && s.bytes == 4);
    ASSERT(cb_shape(CB_BROADCAST, 3, n, 4, &s) == 0 && s.count == 0 && s.bytes == 0);
    ASSERT(cb_shape(CB_BARRIER, 3, n, 4, &s) == 1 && s.bytes == 0);
  }
  /* 1 MiB of float64 from 3 ranks: 131072 / 3 = 43690 per rank, 1048560 bytes. */
  ASSERT(cb_shape(CB_REDUCE_SCATTER, 1 << 20, 3, 8, &s) == 1);
  ASSERT(s.count == 43690 && s.bytes == 1048560);
  ASSERT(cb_shape(CB_GATHER, 1 << 20, 8, 2, &s) == 1 && s.count == 65536 && s.bytes == 1 << 20);
  /* Bad input is a skip, not a crash. */
  ASSERT(cb_shape(-1, 100, 2, 4, &s) == 0 && cb_shape(CB_NCOLL, 100, 2, 4, &s) == 0);
  ASSERT(cb_shape(CB_ALLREDUCE, 100, 0, 4, &s) == 0 && cb_shape(CB_ALLREDUCE, 100, 2, 0, &s) == 0);
  ASSERT(cb_busbw_factor(CB_ALLREDUCE, 0) == 0 && cb_busbw_factor(99, 4) == 0);
  /* algbw: GB/s = bytes / us / 1e3. */
  ASSERT(fabs(cb_algbw(1000000, 1000) - 1.0) < 1e-12);
  ASSERT(fabs(cb_algbw(4194304, 64.75) - 64.776) < 1e-3);
  ASSERT(cb_algbw(100, 0) == 0 && cb_algbw(100, -1) == 0);
}

TEST_IMPL(bench_names)
{
  static const char *names[CB_NCOLL] = {"allreduce", "allgather", "reduce_scatter", "broadcast",
                                        "reduce",    "alltoall",  "gather",         "scatter",
                                        "barrier",   "sendrecv",  "alltoallv"};
  /* The existing numbering is kept: alltoallv comes last. */
  ASSERT(CB_SENDRECV == 9 && CB_ALLTOALLV == 10 && CB_NCOLL == 11);
  for (int c = 0; c < CB_NCOLL; c++) {
    ASSERT(!strcmp(cb_coll_name(c), names[c]));
    ASSERT(cb_coll_parse(names[c]) == c);
  }
  ASSERT(cb_coll_parse("bcast") == CB_BROADCAST);
  ASSERT(cb_coll_parse("allreduc") == -1 && cb_coll_parse("") == -1 && cb_coll_parse(NULL) == -1);
  ASSERT(!strcmp(cb_coll_name(-1), "?") && !strcmp(cb_coll_name(CB_NCOLL), "?"));
  ASSERT(cb_coll_kind_name(CB_SENDRECV) == NULL &&
         !strcmp(cb_coll_kind_name(CB_BROADCAST), "broadcast"));
  ASSERT(cb_algo_parse("ring") == COLLIE_ALGO_RING && cb_algo_parse("auto") == COLLIE_ALGO_AUTO);
  ASSERT(cb_algo_parse("rings") == -1 && cb_algo_parse(NULL) == -1);
  ASSERT(!strcmp(cb_algo_name(COLLIE_ALGO_SHM_FLAT), "shm_flat") && !strcmp(cb_algo_name(-3), "?"));
  /* The library's table, as docs/algorithms.md lists it. */
  int ids[COLLIE_ALGO_COUNT_];
  int n = cb_algos_of(CB_ALLREDUCE, ids, COLLIE_ALGO_COUNT_);
  ASSERTF(n == 6, "allreduce has %d algorithms", n);
  int seen = 0;
  for (int i = 0; i < n; i++) seen |= 1 << ids[i];
  ASSERT(seen == (1 << COLLIE_ALGO_RING | 1 << COLLIE_ALGO_RECURSIVE_DOUBLING |
                  1 << COLLIE_ALGO_RABENSEIFNER | 1 << COLLIE_ALGO_SHM_FLAT |
                  1 << COLLIE_ALGO_HIERARCHICAL | 1 << COLLIE_ALGO_LINEAR));
  ASSERT(cb_algos_of(CB_BROADCAST, ids, COLLIE_ALGO_COUNT_) == 5);
  /* alltoallv: its own kind, and both of the library's algorithms. */
  ASSERT(cb_coll_kind(CB_ALLTOALLV) == COLLIE_KIND_ALLTOALLV &&
         !strcmp(cb_coll_kind_name(CB_ALLTOALLV), "alltoallv"));
  ASSERT(!cb_coll_reduces(CB_ALLTOALLV) && !cb_coll_rooted(CB_ALLTOALLV));
  n = cb_algos_of(CB_ALLTOALLV, ids, COLLIE_ALGO_COUNT_);
  ASSERTF(n == 2 && ids[0] == COLLIE_ALGO_PAIRWISE && ids[1] == COLLIE_ALGO_HIERARCHICAL,
          "alltoallv has %d algorithms", n);
  ASSERT(cb_algos_of(CB_BARRIER, ids, COLLIE_ALGO_COUNT_) == 3);
  ASSERT(cb_algos_of(CB_SENDRECV, ids, COLLIE_ALGO_COUNT_) == 0);
  ASSERT(cb_coll_has_algo(CB_BROADCAST, COLLIE_ALGO_CHAIN) &&
         !cb_coll_has_algo(CB_BROADCAST, COLLIE_ALGO_RING));
  ASSERT(cb_coll_has_algo(CB_SENDRECV, COLLIE_ALGO_AUTO) &&
         !cb_coll_has_algo(CB_SENDRECV, COLLIE_ALGO_RING));
  ASSERT(cb_coll_reduces(CB_REDUCE) && !cb_coll_reduces(CB_GATHER));
  ASSERT(cb_coll_rooted(CB_SCATTER) && !cb_coll_rooted(CB_ALLGATHER));
}

/* ---- The data check against a serial model ---- */

/* Rank r's result of collective coll computed serially from every rank's
 * inputs (in[q]: rank q's input as doubles, in its send-buffer layout). */
static double
bt_model(int coll, collie_op_t op, int n, int r, int root, size_t cnt, double *const *in, size_t i)
{
  switch (coll) {
  case CB_ALLREDUCE:
  case CB_REDUCE:
  case CB_REDUCE_SCATTER: {
    size_t g = coll == CB_REDUCE_SCATTER ? (size_t)r * cnt + i : i;
    double acc = in[0][g];
    int64_t bits = (int64_t)acc;
    for (int q = 1; q < n; q++) {
      double v = in[q][g];
      if (op == COLLIE_SUM || op == COLLIE_AVG) acc += v;
      if (op == COLLIE_PROD) acc *= v;
      if (op == COLLIE_MIN) acc = fmin(acc, v);
      if (op == COLLIE_MAX) acc = fmax(acc, v);
      if (op == COLLIE_BAND) bits &= (int64_t)v;
      if (op == COLLIE_BOR) bits |= (int64_t)v;
      if (op == COLLIE_BXOR) bits ^= (int64_t)v;
    }
    if (op == COLLIE_BAND || op == COLLIE_BOR || op == COLLIE_BXOR) return (double)bits;
    return op == COLLIE_AVG ? trunc(acc / n) : acc;
  }
  case CB_ALLGATHER:
  case CB_GATHER:
    return in[i / cnt][i % cnt];
  case CB_BROADCAST:
    return in[root][i];
  case CB_SCATTER:
    return in[root][(size_t)r * cnt + i];
  case CB_ALLTOALL:
  case CB_ALLTOALLV:
    return in[i / cnt][(size_t)r * cnt + i % cnt];
  default: /* sendrecv */
    return in[(r + n - 1) % n][i];
  }
}

/* Fills every rank's buffers as cb_measure would, writes each rank's result
 * from the serial model, and expects cb_meas_check to find nothing wrong; then
 * damages one element of one rank's result and expects exactly one. */
static void
bt_check_case(int coll, collie_dtype_t dt, collie_op_t op, int n, size_t cnt, int inplace)
{
  size_t esize = collie_dtype_size(dt), tot = cnt * (size_t)n;
  int root = n - 1;
  struct cb_meas_data *d = calloc(1, sizeof(*d));
  void *sb[8], *rb[8];
  double *in[8];
  struct cb_meas_call c[8];
  ASSERT(d && n <= 8);
  cb_meas_data_init(d, dt, op, n);
  for (int r = 0; r < n; r++) {
    sb[r] = calloc(tot, esize);
    rb[r] = calloc(tot, esize);
    in[r] = calloc(tot, sizeof(double));
    ASSERT(sb[r] && rb[r] && in[r]);
    cb_meas_sbuf = sb[r];
    cb_meas_rbuf = rb[r];
    c[r] = (struct cb_meas_call){
        .coll = coll, .rank = r, .n = n, .root = root, .count = cnt, .dt = dt, .op = op};
    cb_meas_buffers(&c[r], inplace);
    cb_meas_fill(&c[r], d);
    /* What this rank contributes, read before any result overwrites it. */
    size_t len = coll == CB_ALLREDUCE || coll == CB_REDUCE || coll == CB_ALLGATHER ||
                         coll == CB_GATHER || coll == CB_SENDRECV || coll == CB_BROADCAST
                     ? cnt
                     : tot;
    const void *src = coll == CB_BROADCAST ? c[r].recv : c[r].send;
    if (coll == CB_SCATTER && r != root) len = 0;
    for (size_t i = 0; i < len; i++) in[r][i] = cb_meas_get(dt, src, i);
  }
  cb_meas_sbuf = cb_meas_rbuf = NULL;
  for (int r = 0; r < n; r++) {
    if ((coll == CB_REDUCE || coll == CB_GATHER) && r != root) continue;
    size_t len =
        coll == CB_ALLGATHER || coll == CB_GATHER || coll == CB_ALLTOALL || coll == CB_ALLTOALLV
            ? tot
            : cnt;
    for (size_t i = 0; i < len; i++)
      cb_meas_put(dt, c[r].recv, i, bt_model(coll, op, n, r, root, cnt, in, i));
  }
  for (int r = 0; r < n; r++) {
    long w = cb_meas_check(&c[r], d, tot * esize);
    ASSERTF(w == 0, "%s %s %s n=%d count=%zu%s: rank %d finds %ld wrong", cb_coll_name(coll),
            collie_dtype_name(dt), collie_op_name(op), n, cnt, inplace ? " in place" : "", r, w);
  }
  int victim = coll == CB_REDUCE || coll == CB_GATHER ? root : n / 2;
  size_t at = cnt - 1;
  cb_meas_put(dt, c[victim].recv, at, cb_meas_get(dt, c[victim].recv, at) == 3 ? 4 : 3);
  long w = cb_meas_check(&c[victim], d, tot * esize);
  ASSERTF(w == 1, "%s %s %s n=%d: a damaged element counted %ld times", cb_coll_name(coll),
          collie_dtype_name(dt), collie_op_name(op), n, w);
  for (int r = 0; r < n; r++) {
    free(sb[r]);
    free(rb[r]);
    free(in[r]);
  }
  free(d);
}

static void
bt_check_all(void *arg)
{
  (void)arg;
  static const int ns[] = {1, 2, 3, 5, 8};
  for (int k = 0; k < 5; k++)
    for (int coll = 0; coll < CB_NCOLL; coll++) {
      if (coll == CB_BARRIER) continue;
      for (int dt = 0; dt < COLLIE_DTYPE_COUNT_; dt++)
        for (int op = 0; op < COLLIE_OP_COUNT_; op++) {
          if (!cb_coll_reduces(coll) && op > 0) break; /* the op does not matter */
          int isfloat = dt == COLLIE_FLOAT16 || dt == COLLIE_BFLOAT16 || dt == COLLIE_FLOAT32 ||
                        dt == COLLIE_FLOAT64;
          if (isfloat && op >= COLLIE_BAND) continue;
          /* 1100 elements cross the period of the inputs (CB_PERIOD). */
          size_t cnt = (k + dt + op) % 3 == 0 ? 1100 : 37;
          bt_check_case(coll, (collie_dtype_t)dt, (collie_op_t)op, ns[k], cnt, (dt + op) % 2);
        }
    }
}

TEST_IMPL(bench_check_model)
{
  /* cb_meas_check reports damaged elements on stderr; keep the test log short. */
  char *err = test_capture_stderr(bt_check_all, NULL);
  ASSERTF(!strstr(err, "Assertion") && !strstr(err, "assertion"), "%s", err);
  /* Exactly one report per damaged case, each naming the element and values. */
  ASSERTF(strstr(err, "1 of ") && strstr(err, "expected"), "%s", err);
  free(err);
}

/* ---- Writers on made-up points ---- */

static struct cb_point
bt_point(int coll, const char *algo, size_t count, size_t bytes, double us, int n)
{
  struct cb_point p;
  memset(&p, 0, sizeof(p));
  p.coll = coll;
  snprintf(p.algo_name, sizeof(p.algo_name), "%s", algo);
  p.shape.count = count;
  p.shape.bytes = bytes;
  p.root = cb_coll_rooted(coll) ? 0 : -1;
  p.time_us = p.min_us = p.p50_us = p.p99_us = us;
  p.algbw = cb_algbw(bytes, us);
  p.busbw = p.algbw * cb_busbw_factor(coll, n);
  p.iters = 5;
  return p;
}

TEST_IMPL(bench_output_formats)
{
  char buf[64];
  tool_bytes_label(buf, sizeof(buf), 8);
  ASSERT(!strcmp(buf, "8 B"));
  tool_bytes_label(buf, sizeof(buf), 4096);
  ASSERT(!strcmp(buf, "4 KiB"));
  tool_bytes_label(buf, sizeof(buf), 3 << 19);
  ASSERT(!strcmp(buf, "1.5 MiB"));
  cb_out_thousands(buf, sizeof(buf), 16777216);
  ASSERT(!strcmp(buf, "16,777,216"));
  cb_out_thousands(buf, sizeof(buf), 999);
  ASSERT(!strcmp(buf, "999"));

  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ASSERT(f);
  struct cb_point p = bt_point(CB_BROADCAST, "tree", 256, 1024, 2.5, 4);
  cb_csv_header(f);
  cb_csv_row(f, &p, "shm", 4);
  p.wrong = -1;
  cb_csv_row(f, &p, "tcp", 4);
  fclose(f);
  ASSERTF(!strcmp(text, "impl,collective,algorithm,transport,nranks,bytes,count,time_us,"
                        "algbw_GBps,busbw_GBps,wrong\n"
                        "collie,bcast,tree,shm,4,1024,256,2.500,0.4096,0.4096,0\n"
                        "collie,bcast,tree,tcp,4,1024,256,2.500,0.4096,0.4096,-1\n"),
          "%s", text);
  free(text);
  /* alltoallv: its own name in the CSV and the profile; busbw (n-1)/n. */
  struct cb_point v = bt_point(CB_ALLTOALLV, "pairwise", 256, 2048, 2, 2);
  f = open_memstream(&text, &len);
  cb_csv_row(f, &v, "shm", 2);
  ASSERT(cb_profile_write(f, &v, 1, 2, "shm", COLLIE_FLOAT32) == 0);
  fclose(f);
  ASSERTF(!strncmp(text, "collie,alltoallv,pairwise,shm,2,2048,256,2.000,1.0240,0.5120,0\n", 63) &&
              strstr(text, "\n  AllToAllv:     0.002 ms | AlgBW: 1.02 GB/s | BusBW: 0.51 GB/s\n"),
          "%s", text);
  free(text);

  /* The seed profile, byte for byte: MB are MiB; 2 ranks. */
  struct cb_point pts[6] = {
      bt_point(CB_ALLREDUCE, "ring", 1 << 20, 4 << 20, 90, 2),
      bt_point(CB_ALLGATHER, "ring", 1 << 20, 8 << 20, 179, 2),
      bt_point(CB_REDUCE_SCATTER, "ring", 1 << 20, 8 << 20, 174, 2),
      bt_point(CB_ALLREDUCE, "ring", 4 << 20, 16 << 20, 1234.5678, 2),
      bt_point(CB_ALLGATHER, "ring", 4 << 20, 32 << 20, 2000, 2),
      bt_point(CB_REDUCE_SCATTER, "ring", 4 << 20, 32 << 20, 2100, 2),
  };
  f = open_memstream(&text, &len);
  ASSERT(cb_profile_write(f, pts, 6, 2, "shm", COLLIE_FLOAT32) == 0);
  fclose(f);
  const char *want =
      "================================================================================\n"
      "Configuration: World Size=2\n"
      "Backend: collie (shm)\n"
      "================================================================================\n"
      "\n"
      "Tensor Size: 1,048,576 elements (4.00 MB)\n"
      "  AllReduce:     0.090 ms | AlgBW: 46.60 GB/s | BusBW: 46.60 GB/s\n"
      "  AllGather:     0.179 ms | AlgBW: 46.86 GB/s | BusBW: 23.43 GB/s\n"
      "  ReduceScatter: 0.174 ms | AlgBW: 48.21 GB/s | BusBW: 24.11 GB/s\n"
      "\n"
      "Tensor Size: 4,194,304 elements (16.00 MB)\n"
      "  AllReduce:     1.235 ms | AlgBW: 13.59 GB/s | BusBW: 13.59 GB/s\n"
      "  AllGather:     2.000 ms | AlgBW: 16.78 GB/s | BusBW: 8.39 GB/s\n"
      "  ReduceScatter: 2.100 ms | AlgBW: 15.98 GB/s | BusBW: 7.99 GB/s\n";
  ASSERTF(!strcmp(text, want), "got:\n%s\nwant:\n%s", text, want);
  free(text);

  char path[256];
  cb_profile_path(path, sizeof(path), "/tmp/x", 8, 86400LL * 365);
  ASSERTF(!strncmp(path, "/tmp/x/profile_collie_world8_1971", 33) &&
              strlen(path) == strlen("/tmp/x/profile_collie_world8_19710101_000000.txt"),
          "%s", path);
  cb_profile_path(path, sizeof(path), "d/", 8, 86400LL * 365);
  ASSERTF(!strncmp(path, "d/profile_", 10), "%s", path);
  cb_profile_path(path, sizeof(path), NULL, 2, 1700000000);
  ASSERTF(!strncmp(path, "profile_collie_world2_2023111", 29) && !strcmp(path + 37, ".txt"), "%s",
          path);

  /* A table row has the 13 columns of the header, in its widths. */
  struct cb_opts o = {.dtype = COLLIE_FLOAT32, .redop = COLLIE_MAX};
  struct cb_point r = bt_point(CB_ALLREDUCE, "recursive_doubling", 2, 8, 1.234, 2);
  f = open_memstream(&text, &len);
  cb_table_header(f, CB_ALLREDUCE, 0);
  cb_table_row(f, &r, &o);
  r.wrong = -1;
  r.coll = CB_GATHER;
  r.root = 1;
  cb_table_row(f, &r, &o);
  fclose(f);
  char *row = strstr(text, "\n  ");
  ASSERT(row);
  char sz[32], cnt[32], ty[32], red[32], root[32], alg[32], t[32], a[32], b[32], w[32], mn[32],
      p50[32], p99[32];
  ASSERT(sscanf(row, "%31s %31s %31s %31s %31s %31s %31s %31s %31s %31s %31s %31s %31s", sz, cnt,
                ty, red, root, alg, t, a, b, w, mn, p50, p99) == 13);
  ASSERT(!strcmp(sz, "8") && !strcmp(cnt, "2") && !strcmp(ty, "float32") && !strcmp(red, "max"));
  ASSERT(!strcmp(root, "-1") && !strcmp(alg, "recursive_doubling") && !strcmp(t, "1.23"));
  ASSERT(!strcmp(w, "0") && !strcmp(p99, "1.23"));
  row = strstr(row + 3, "\n  ");
  ASSERT(row && sscanf(row, "%31s %31s %31s %31s %31s %31s %31s %31s %31s %31s", sz, cnt, ty, red,
                       root, alg, t, a, b, w) == 10);
  ASSERT(!strcmp(red, "none") && !strcmp(root, "1") && !strcmp(w, "N/A"));
  /* Header and row line up: "time" ends where the times end. */
  const char *h = strstr(text, "time");
  const char *line = strstr(text, "\n  ") + 1;
  const char *hl = h;
  while (hl > text && hl[-1] != '\n') hl--;
  ASSERT((h + 4 - hl) == (strstr(line, "1.23") + 4 - line));
  free(text);

  /* The progress line overwrites itself and is erased at the end. */
  f = open_memstream(&text, &len);
  cb_progress(f, 1, 20, CB_ALLREDUCE, 4 << 20, "ring");
  cb_progress(f, 2, 20, CB_SENDRECV, 8, "-");
  cb_progress_end(f);
  fclose(f);
  ASSERTF(!strncmp(text, "\r[1/20] allreduce 4 MiB ring\r[2/20] sendrecv 8 B -", 49), "%s", text);
  ASSERT(text[len - 1] == '\r' && !strchr(text, '\n'));
  free(text);
}

/* Well-formed enough: every tag closed in order, quotes balanced, no stray '&'. */
static int
bt_xml_ok(const char *s, char *why, size_t wlen)
{
  char stack[64][48];
  int depth = 0, roots = 0;
  for (const char *p = s; *p; p++) {
    if (*p == '&' &&
        !(strncmp(p, "&lt;", 4) == 0 || strncmp(p, "&gt;", 4) == 0 || strncmp(p, "&amp;", 5) == 0 ||
          strncmp(p, "&quot;", 6) == 0 || strncmp(p, "&apos;", 6) == 0)) {
      snprintf(why, wlen, "stray & at %ld", (long)(p - s));
      return 0;
    }
    if (*p != '<') continue;
    const char *e = strchr(p, '>');
    if (!e) {
      snprintf(why, wlen, "unterminated tag");
      return 0;
    }
    int quotes = 0;
    for (const char *q = p; q < e; q++) quotes += *q == '"';
    if (quotes % 2) {
      snprintf(why, wlen, "unbalanced quotes at %ld", (long)(p - s));
      return 0;
    }
    if (p[1] == '?' || p[1] == '!') {
      p = e;
      continue;
    }
    char name[48];
    int closing = p[1] == '/', k = 0;
    for (const char *q = p + 1 + closing;
         *q && !isspace((unsigned char)*q) && *q != '>' && *q != '/' && k < 47; q++)
      name[k++] = *q;
    name[k] = '\0';
    if (closing) {
      if (depth == 0 || strcmp(stack[depth - 1], name)) {
        snprintf(why, wlen, "</%s> closes %s", name, depth ? stack[depth - 1] : "nothing");
        return 0;
      }
      depth--;
    } else if (e[-1] != '/') {
      if (depth == 0) roots++;
      if (depth == 64) return 0;
      snprintf(stack[depth++], sizeof(stack[0]), "%s", name);
    }
    p = e;
  }
  if (depth || roots != 1) {
    snprintf(why, wlen, "depth %d at the end, %d roots", depth, roots);
    return 0;
  }
  return 1;
}

/* The number of <path> elements inside <g ... id="id">. */
static int
bt_paths_in(const char *svg, const char *id)
{
  char key[64];
  snprintf(key, sizeof(key), "id=\"%s\"", id);
  const char *g = strstr(svg, key), *end = g ? strstr(g, "</g>") : NULL;
  if (!g || !end) return -1;
  int n = 0;
  for (const char *p = g; (p = strstr(p, "<path")) && p < end; p++) n++;
  return n;
}

TEST_IMPL(bench_plot_svg)
{
  struct cb_point pts[9] = {
      bt_point(CB_ALLREDUCE, "ring", 2, 8, 1.5, 2),
      bt_point(CB_ALLREDUCE, "ring", 256, 1024, 3, 2),
      bt_point(CB_ALLREDUCE, "ring", 1 << 20, 4 << 20, 900, 2),
      bt_point(CB_ALLREDUCE, "shm_flat", 2, 8, 1, 2),
      bt_point(CB_ALLREDUCE, "shm_flat", 1 << 20, 4 << 20, 700, 2),
      bt_point(CB_ALLGATHER, "a<b&\"c\"", 4, 32, 2, 2),  /* one point, awkward name */
      bt_point(CB_BARRIER, "dissemination", 0, 0, 1, 2), /* no size: not drawn */
      bt_point(CB_SENDRECV, "-", 2, 8, 1, 2),
      bt_point(CB_SENDRECV, "-", 2048, 8192, 4, 2),
  };
  const char *path = test_path("plot.svg");
  ASSERT(cb_plot_write(path, pts, 9, "2 ranks <shm> & more") == 0);
  char *svg = bt_slurp(path), why[128] = "";
  ASSERT(svg);
  ASSERTF(bt_xml_ok(svg, why, sizeof(why)), "%s\n%s", why, svg);
  /* Four series (barrier has no size), one path each in each panel. */
  ASSERTF(bt_paths_in(svg, "busbw") == 4 && bt_paths_in(svg, "time") == 4, "%d %d",
          bt_paths_in(svg, "busbw"), bt_paths_in(svg, "time"));
  ASSERT(bt_count(svg, "<path") == 8 && bt_count(svg, "<circle") == 2 * 8);
  ASSERT(strstr(svg, "data-series=\"allreduce/shm_flat\""));
  ASSERT(strstr(svg, "a&lt;b&amp;&quot;c&quot;") && strstr(svg, "2 ranks &lt;shm&gt; &amp; more"));
  ASSERT(!strstr(svg, "dissemination"));
  /* Log axes with labels: sizes from 8 B to 4 MiB, powers of ten of time. */
  ASSERT(strstr(svg, ">16 B<") && strstr(svg, ">1 MiB<") && strstr(svg, ">4 MiB<") &&
         strstr(svg, ">1000<"));
  free(svg);

  /* One rank: no bus bandwidth, so that panel says so instead of drawing. */
  struct cb_point one = bt_point(CB_ALLREDUCE, "ring", 256, 1024, 3, 1);
  /* A title that is not UTF-8 and holds a control character XML forbids. */
  ASSERT(cb_plot_write(path, &one, 1, "one \xff\x01") == 0);
  svg = bt_slurp(path);
  ASSERTF(bt_xml_ok(svg, why, sizeof(why)), "%s", why);
  ASSERT(bt_paths_in(svg, "busbw") == 0 && bt_paths_in(svg, "time") == 1);
  ASSERT(strstr(svg, "nothing to show"));
  ASSERT(strstr(svg, ">one \xEF\xBF\xBD?</text>") && !strchr(svg, '\x01'));
  free(svg);
  /* Nothing at all, and an unwritable path. */
  ASSERT(cb_plot_write(path, pts + 6, 1, NULL) == 0);
  svg = bt_slurp(path);
  ASSERT(bt_xml_ok(svg, why, sizeof(why)) && strstr(svg, "no point"));
  free(svg);
  ASSERT(cb_plot_write(test_path("no/such/dir/x.svg"), pts, 9, "x") == -1);
}

/* ---- cb_measure on real ranks ---- */

TEST_IMPL(bench_measure_ranks)
{
  collie_comm_t *comm = test_comm();
  int n = collie_comm_size(comm), me = collie_comm_rank(comm);
  struct cb_opts o = {.dtype = COLLIE_FLOAT32,
                      .redop = COLLIE_SUM,
                      .root = n - 1,
                      .iters = 7,
                      .warmup = 2,
                      .target_s = 0.01,
                      .check = 1,
                      .algo = COLLIE_ALGO_AUTO};
  struct cb_point p;
  for (int c = 0; c < CB_NCOLL; c++) {
    int r = cb_measure(comm, &o, c, COLLIE_ALGO_AUTO, 4096, &p);
    ASSERTF(r == 0, "%s: %d", cb_coll_name(c), r);
    ASSERT(p.coll == c && p.iters == 7 && p.wrong == 0);
    ASSERT(p.time_us > 0 && p.min_us > 0 && p.min_us <= p.p50_us && p.p50_us <= p.p99_us);
    ASSERT(p.root == (cb_coll_rooted(c) ? n - 1 : -1));
    struct cb_shape s;
    cb_shape(c, 4096, n, 4, &s);
    ASSERT(p.shape.bytes == s.bytes && p.shape.count == s.count);
    ASSERT(p.algbw == cb_algbw(p.shape.bytes, p.time_us));
    ASSERT(p.busbw == p.algbw * cb_busbw_factor(c, n));
    /* AUTO is resolved to the library's own pick. */
    if (c == CB_SENDRECV) {
      ASSERT(!strcmp(p.algo_name, "-"));
    } else {
      int id;
      const char *name = cb_auto_algo(comm, c, &p.shape, COLLIE_FLOAT32, &id);
      ASSERTF(name && !strcmp(p.algo_name, name) && p.algo == id && id != COLLIE_ALGO_AUTO,
              "%s: %s vs %s", cb_coll_name(c), p.algo_name, name ? name : "NULL");
    }
  }
  /* Every algorithm by name, in place, auto iterations, another dtype. */
  o.iters = 0;
  o.inplace = 1;
  o.dtype = COLLIE_BFLOAT16;
  o.redop = COLLIE_MAX;
  int ids[COLLIE_ALGO_COUNT_], na = cb_algos_of(CB_ALLREDUCE, ids, COLLIE_ALGO_COUNT_);
  for (int i = 0; i < na; i++) {
    int r = cb_measure(comm, &o, CB_ALLREDUCE, ids[i], 1000, &p);
    if (r < 0) { /* only shm_flat may refuse (off shm), and hierarchical (on one host) */
      ASSERT((ids[i] == COLLIE_ALGO_SHM_FLAT && strstr(collie_last_error(), "shm_flat")) ||
             (ids[i] == COLLIE_ALGO_HIERARCHICAL && strstr(collie_last_error(), "hierarchical")));
      continue;
    }
    ASSERT(r == 0 && p.wrong == 0 && p.algo == ids[i] && p.iters >= 5);
    ASSERT(!strcmp(p.algo_name, cb_algo_name(ids[i])));
  }
  /* A size too small for every rank: skipped, no call made. */
  ASSERT(cb_measure(comm, &o, CB_ALLGATHER, COLLIE_ALGO_AUTO, (size_t)n * 2 - 1, &p) == 1);

  /* One damaged element on one rank shows as one wrong element on every rank. */
  o.inplace = 0;
  o.iters = 3;
  o.dtype = COLLIE_INT32;
  bt_corrupt = 0;
  cb_meas_alltoall = bt_alltoall; /* the seam: this test's alltoall may damage a result */
  ASSERT(cb_measure(comm, &o, CB_ALLTOALL, COLLIE_ALGO_AUTO, 1024, &p) == 0 && p.wrong == 0);
  /* Rank n-1's alltoall damages one element of every result it returns:
   * the checked call's among them. */
  if (me == n - 1) bt_corrupt = 1000;
  ASSERT(cb_measure(comm, &o, CB_ALLTOALL, COLLIE_ALGO_AUTO, 1024, &p) == 0);
  bt_corrupt = 0;
  ASSERTF(p.wrong == 1, "wrong = %ld", p.wrong);
  /* Without the check there is no count. */
  o.check = 0;
  ASSERT(cb_measure(comm, &o, CB_ALLTOALL, COLLIE_ALGO_AUTO, 1024, &p) == 0 && p.wrong == -1);

  /* alltoallv through its seam, out of place and in place: every call gets
   * alltoall's layout (each count the point's count, block q at q x count)
   * in the same arrays (made once per point), the result checks clean, and
   * one damaged element on one rank is one wrong element everywhere. */
  o.check = 1;
  cb_meas_alltoallv = bt_alltoallv;
  for (int inplace = 0; inplace < 2; inplace++) {
    o.inplace = inplace;
    memset(&bt_v_seen, 0, sizeof(bt_v_seen));
    bt_corrupt_v = 0;
    ASSERT(cb_measure(comm, &o, CB_ALLTOALLV, COLLIE_ALGO_PAIRWISE, 1024, &p) == 0);
    ASSERTF(p.wrong == 0 && p.algo == COLLIE_ALGO_PAIRWISE && !strcmp(p.algo_name, "pairwise"),
            "in place %d: wrong %ld, %s", inplace, p.wrong, p.algo_name);
    ASSERT(p.shape.count == 1024 / 4 / (size_t)n && p.shape.bytes == p.shape.count * 4 * (size_t)n);
    ASSERTF(bt_v_seen.calls > o.iters && !bt_v_seen.bad_layout && !bt_v_seen.new_arrays,
            "%ld calls, %ld bad layouts, new arrays %d", bt_v_seen.calls, bt_v_seen.bad_layout,
            bt_v_seen.new_arrays);
    if (me == n - 1) bt_corrupt_v = 1000;
    ASSERT(cb_measure(comm, &o, CB_ALLTOALLV, COLLIE_ALGO_AUTO, 1024, &p) == 0);
    bt_corrupt_v = 0;
    ASSERTF(p.wrong == 1, "in place %d: wrong = %ld", inplace, p.wrong);
  }
  o.inplace = 0;
  cb_meas_alltoallv = collie_alltoallv;
  /* Its hierarchical algorithm needs several hosts: refused here, comm intact. */
  ASSERT(cb_measure(comm, &o, CB_ALLTOALLV, COLLIE_ALGO_HIERARCHICAL, 1024, &p) == -1);
  ASSERT(strstr(collie_last_error(), "hierarchical"));
  ASSERT(collie__comm_poisoned(comm) == COLLIE_SUCCESS);

  /* An algorithm another collective owns is refused, and the comm stays usable. */
  o.check = 1;
  ASSERT(cb_measure(comm, &o, CB_BROADCAST, COLLIE_ALGO_RING, 1024, &p) == -1);
  ASSERT(collie__comm_poisoned(comm) == COLLIE_SUCCESS);
  ASSERT(cb_measure(comm, &o, CB_BROADCAST, COLLIE_ALGO_AUTO, 1024, &p) == 0 && p.wrong == 0);
  const char *t = cb_transport_used(comm);
  ASSERT(t && !strcmp(t, n == 1 ? "self" : getenv("COLLIE_TRANSPORT")));
  ASSERT_OK(collie_comm_destroy(comm));
}

/* ---- The tool, as a black box ---- */

/* Splits a CSV line into at most max fields in place; returns how many. */
static int
bt_split(char *line, char **f, int max)
{
  int n = 0;
  for (char *save = NULL, *t = strtok_r(line, ",", &save); t && n < max;
       t = strtok_r(NULL, ",", &save))
    f[n++] = t;
  return n;
}

/* The algorithms of collective c that can run on one host: all but the
 * hierarchical one, which needs two hosts and is skipped with a note. */
static int
bt_algos_one_host(int c)
{
  int ids[COLLIE_ALGO_COUNT_], n = cb_algos_of(c, ids, COLLIE_ALGO_COUNT_), k = 0;
  for (int i = 0; i < n; i++) k += ids[i] != COLLIE_ALGO_HIERARCHICAL;
  return k;
}

/* --device cuda on the stand-in driver (tests/fakecuda, loaded through
 * LD_LIBRARY_PATH as the real one would be): every collective on "device"
 * buffers, each result checked by the bench; the header names the device;
 * each buffer collective's algorithm is the direct path's (cuda_ipc) or
 * staged+<host algorithm>, the direct path appearing exactly when the
 * library has device code. */
TEST_IMPL(bench_run_device_fake)
{
  char *out, *err;
  int rc = bt_sh("env LD_LIBRARY_PATH='" COLLIE_BUILD_DIR "/tests/fakecuda' '" BT_RUN
                 "' -n 2 '" BT_BENCH "' --device cuda -b 8 -e 64K -f 64 -o all -n 3 -w 1 "
                 "--csv dev.csv",
                 &out, &err);
  ASSERTF(rc == 0, "exit %d\n%s\n%s", rc, out, err);
  ASSERTF(strstr(out, "# device: cuda, fake GPU (tests/fakecuda)"), "%s", out);
  ASSERTF(strstr(out, "# wrong elements: 0 OK"), "%s", out);
  char *csv = bt_slurp(test_path("dev.csv"));
  ASSERT(csv);
  int direct = 0, staged = 0, rows = 0;
  char *save = NULL;
  for (char *line = strtok_r(strchr(csv, '\n') + 1, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    char copy[512], *f[16];
    snprintf(copy, sizeof(copy), "%s", line);
    ASSERTF(bt_split(copy, f, 16) == 11, "row: %s", line);
    rows++;
    ASSERTF(!strcmp(f[10], "0"), "wrong elements: %s", line);
    if (!strcmp(f[1], "sendrecv") || !strcmp(f[1], "barrier")) {
      ASSERTF(strncmp(f[2], "staged+", 7), "a call without device buffers named staged: %s", line);
      continue;
    }
    if (!strcmp(f[2], "cuda_ipc"))
      direct++;
    else
      ASSERTF(!strncmp(f[2], "staged+", 7), "algorithm of a device call: %s", line);
    staged += !strncmp(f[2], "staged+", 7);
  }
  int has_code = strncmp(collie__device_code(), "none", 4) != 0;
  ASSERTF(rows >= 20 && (direct > 0) == has_code && (has_code || staged > 0),
          "%d rows, %d direct, %d staged, device code %s\n%s", rows, direct, staged,
          collie__device_code(), csv);
  free(csv);
  free(out);
  free(err);
}

TEST_IMPL(bench_run_csv)
{
  char *out, *err;
  int rc = bt_sh("'" BT_RUN "' -n 2 '" BT_BENCH "' -b 8 -e 4K -f 4 -o all -n 5 -w 2 "
                 "--csv run.csv --plot run.svg --algo all",
                 &out, &err);
  ASSERTF(rc == 0, "exit %d\n%s\n%s", rc, out, err);
  /* The header. */
  ASSERT(strstr(out, "# collie-bench ") && strstr(out, "# argv: ") && strstr(out, "--csv run.csv"));
  ASSERT(strstr(out, "# env: COLLIE_WORLD_SIZE=2") && strstr(out, "# nranks: 2"));
  ASSERT(strstr(out, "# transport: shm") && strstr(out, "# host: ") && strstr(out, "# date: "));
  ASSERT(strstr(out, "COLLIE_JOB_TOKEN=(set, not shown)"));
  ASSERT(strstr(out, "# wrong elements: 0 OK"));
  /* An algorithm that cannot run here (hierarchical on one host) is said once per collective,
   * not at each of the 5 sizes. */
  int refusals = 0;
  for (const char *p = strstr(err, "allreduce of "); p; p = strstr(p + 1, "allreduce of "))
    refusals += strstr(p, "(algorithm hierarchical)") == strchr(p, '(');
  ASSERTF(refusals == 1, "allreduce's hierarchical refused %d times:\n%s", refusals, err);

  char *csv = bt_slurp(test_path("run.csv"));
  ASSERT(csv);
  const char *hdr = "impl,collective,algorithm,transport,nranks,bytes,count,time_us,algbw_GBps,"
                    "busbw_GBps,wrong\n";
  ASSERTF(!strncmp(csv, hdr, strlen(hdr)), "%s", csv);
  static const size_t reqs[] = {8, 32, 128, 512, 2048};
  int rows = 0, per[CB_NCOLL] = {0};
  char *save = NULL;
  for (char *line = strtok_r(csv + strlen(hdr), "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    char copy[512], *f[16];
    snprintf(copy, sizeof(copy), "%s", line);
    ASSERTF(bt_split(copy, f, 16) == 11, "row: %s", line);
    int c = cb_coll_parse(f[1]);
    ASSERTF(c >= 0 && strcmp(f[1], "broadcast"), "collective %s", f[1]);
    ASSERT(!strcmp(f[0], "collie") && !strcmp(f[3], "shm") && !strcmp(f[4], "2"));
    ASSERTF(c == CB_SENDRECV ? !strcmp(f[2], "-") : cb_algo_parse(f[2]) > 0, "algo %s", f[2]);
    size_t bytes = strtoull(f[5], NULL, 10), count = strtoull(f[6], NULL, 10);
    double t = atof(f[7]), alg = atof(f[8]), bus = atof(f[9]);
    /* bytes is what the shape rule makes of one of the requested sizes. */
    int found = 0;
    for (int k = 0; k < 5; k++) {
      struct cb_shape s;
      if (cb_shape(c, c == CB_BARRIER ? 0 : reqs[k], 2, 4, &s) && s.bytes == bytes &&
          s.count == count)
        found = 1;
    }
    ASSERTF(found, "%s: bytes %zu count %zu fit no requested size", f[1], bytes, count);
    ASSERT(t > 0 && !strcmp(f[10], "0"));
    /* The time is printed to 0.001 us: a call of 0.18 us is known to 0.3 %. */
    ASSERTF(bt_close(alg, bytes / t / 1e3, 0.002 + 0.0005 / t, 1e-4),
            "%s: algbw %s for %zu B in %s us", f[1], f[8], bytes, f[7]);
    ASSERTF(bt_close(bus, alg * cb_busbw_factor(c, 2), 1e-3, 1.5e-4), "%s: busbw %g algbw %g", f[1],
            bus, alg);
    per[c]++;
    rows++;
  }
  /* Every algorithm of every collective at every size (allgather and the
   * like start at 8 B = one float32 per rank), barrier once per algorithm. */
  for (int c = 0; c < CB_NCOLL; c++) {
    int na = c == CB_SENDRECV ? 1 : bt_algos_one_host(c);
    ASSERTF(per[c] == na * (c == CB_BARRIER ? 1 : 5), "%s: %d rows", cb_coll_name(c), per[c]);
  }

  /* The text table has the same rows, each with 13 columns that parse. */
  int trows = 0;
  save = NULL;
  for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (line[0] == '#') continue;
    char v[13][64];
    ASSERTF(sscanf(line, "%63s %63s %63s %63s %63s %63s %63s %63s %63s %63s %63s %63s %63s", v[0],
                   v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12]) == 13,
            "row: %s", line);
    char *end;
    strtoull(v[0], &end, 10);
    ASSERT(!*end);
    for (int k = 6; k < 13; k++) {
      if (k == 9) continue;
      strtod(v[k], &end);
      ASSERTF(!*end, "column %d: %s", k, v[k]);
    }
    ASSERT(!strcmp(v[2], "float32") && !strcmp(v[9], "0"));
    trows++;
  }
  ASSERTF(trows == rows, "table %d rows, csv %d", trows, rows);

  /* The plot: one path per (collective, algorithm) with a size, per panel. */
  char *svg = bt_slurp(test_path("run.svg")), why[128];
  ASSERT(svg && bt_xml_ok(svg, why, sizeof(why)));
  int series = 0;
  for (int c = 0; c < CB_NCOLL; c++) {
    if (c != CB_BARRIER) series += c == CB_SENDRECV ? 1 : bt_algos_one_host(c);
  }
  ASSERTF(bt_paths_in(svg, "busbw") == series && bt_paths_in(svg, "time") == series,
          "%d series, %d/%d paths", series, bt_paths_in(svg, "busbw"), bt_paths_in(svg, "time"));
  free(svg);
  free(csv);
  free(out);
  free(err);
}

/* --mem collie: the buffers come from collie_mem_alloc, grow (each growth
 * frees the old regions) and every result is still checked right. */
TEST_IMPL(bench_run_mem_collie)
{
  char *out, *err;
  int rc = bt_sh("'" BT_RUN "' -n 2 '" BT_BENCH "' --mem collie -b 8 -e 1M -f 16 "
                 "-o allgather,alltoall,scatter,sendrecv -n 3 -w 1",
                 &out, &err);
  ASSERTF(rc == 0, "exit %d\n%s\n%s", rc, out, err);
  ASSERTF(strstr(out, "--mem collie") && strstr(out, "# wrong elements: 0 OK"), "%s", out);
  free(out);
  free(err);
}

TEST_IMPL(bench_run_profile)
{
  char *out, *err;
  int rc = bt_sh("'" BT_RUN "' -n 2 '" BT_BENCH "' -n 2 -w 1 --profile-dir prof", &out, &err);
  ASSERTF(rc == 2 && strstr(err, "--profile-dir prof: not a directory"), "%d: %s", rc, err);
  free(out);
  free(err);
  ASSERT(mkdir(test_path("prof"), 0755) == 0);
  rc = bt_sh("'" BT_RUN "' -n 2 '" BT_BENCH "' -n 2 -w 1 --profile-dir prof", &out, &err);
  ASSERTF(rc == 0, "exit %d\n%s\n%s", rc, out, err);
  const char *at = strstr(out, "# profile written to prof/profile_collie_world2_");
  ASSERTF(at, "%s", out);
  char name[256];
  ASSERT(sscanf(at, "# profile written to %255s", name) == 1);
  ASSERT(strlen(name) == strlen("prof/profile_collie_world2_20260101_000000.txt"));
  char *text = bt_slurp(test_path(name));
  ASSERTF(text, "no %s", name);
  /* The same block is on stdout. */
  ASSERT(strstr(out, text));

  char *save = NULL, *lines[32];
  int nl = 0;
  for (char *l = strtok_r(text, "\n", &save); l && nl < 32; l = strtok_r(NULL, "\n", &save))
    lines[nl++] = l;
  ASSERTF(nl == 16, "%d non-empty lines", nl);
  static const char rule[] =
      "================================================================================";
  ASSERT(!strcmp(lines[0], rule) && !strcmp(lines[3], rule));
  ASSERT(!strcmp(lines[1], "Configuration: World Size=2"));
  ASSERT(!strcmp(lines[2], "Backend: collie (shm)"));
  static const char *sizes[3] = {"Tensor Size: 1,048,576 elements (4.00 MB)",
                                 "Tensor Size: 4,194,304 elements (16.00 MB)",
                                 "Tensor Size: 16,777,216 elements (64.00 MB)"};
  static const char *names[3] = {"AllReduce:     ", "AllGather:     ", "ReduceScatter: "};
  for (int b = 0; b < 3; b++) {
    ASSERT(!strcmp(lines[4 + 4 * b], sizes[b]));
    double elems = (double)(1u << (20 + 2 * b));
    for (int k = 0; k < 3; k++) {
      const char *l = lines[5 + 4 * b + k];
      double ms, alg, bus;
      ASSERTF(!strncmp(l, "  ", 2) && !strncmp(l + 2, names[k], 15), "%s", l);
      ASSERTF(sscanf(l + 17, "%lf ms | AlgBW: %lf GB/s | BusBW: %lf GB/s", &ms, &alg, &bus) == 3,
              "%s", l);
      /* The seed's tensor is N elements per rank: allgather's and
       * reduce_scatter's nccl-tests size is N x 4 x 2 ranks. */
      double bytes = elems * 4 * (k == 0 ? 1 : 2);
      ASSERTF(bt_close(alg, bytes / (ms * 1e6), 0.01, 0.006), "%s: %g vs %g", l, alg,
              bytes / (ms * 1e6));
      ASSERTF(bt_close(bus, alg * (k == 0 ? 1.0 : 0.5), 0.01, 0.006), "%s", l);
    }
  }
  free(text);
  text = bt_slurp(test_path(name));
  ASSERT(strstr(text, "(4.00 MB)\n  AllReduce") && strstr(text, "GB/s\n\nTensor Size: 4,194,304"));
  free(text);
  free(out);
  free(err);
}

/* One bad command line: exit 2, the message (once), nothing on stdout. */
static void
bt_bad(const char *args, const char *msg, int ranks)
{
  char cmd[1024], *out, *err;
  if (ranks)
    snprintf(cmd, sizeof(cmd), "'%s' -n %d '%s' %s", BT_RUN, ranks, BT_BENCH, args);
  else
    snprintf(cmd, sizeof(cmd), "'%s' %s", BT_BENCH, args);
  int rc = bt_sh(cmd, &out, &err);
  ASSERTF(rc == 2, "'%s' exited %d\n%s", args, rc, err);
  ASSERTF(strstr(err, msg), "'%s': message lacks \"%s\":\n%s", args, msg, err);
  ASSERTF(bt_count(err, "collie-bench: ") == 1, "'%s': not one message:\n%s", args, err);
  ASSERTF(!strstr(out, "size"), "'%s' measured something:\n%s", args, out);
  free(out);
  free(err);
}

TEST_IMPL(bench_bad_options)
{
  bt_bad("-o allreduce,foo", "-o: unknown collective 'foo'", 0);
  bt_bad("-o ,", "-o: empty list", 0);
  bt_bad("-b 12Q", "-b: '12Q' is not a size", 0);
  bt_bad("-e -5", "-e: '-5' is not a size", 0);
  bt_bad("-b 0", "-b: '0' must be at least 1 byte", 0);
  bt_bad("-b 1M -e 1K", "-b 1048576 is larger than -e 1024", 0);
  bt_bad("-f 1", "-f: step factor 1 must be greater than 1", 0);
  bt_bad("-f 0.5", "greater than 1", 0);
  bt_bad("-f two", "-f: 'two' is not a number", 0);
  bt_bad("-d float33", "-d: unknown dtype 'float33'", 0);
  bt_bad("-r sumx", "-r: unknown reduction 'sumx'", 0);
  bt_bad("-r band -d float32", "-r band needs an integer dtype, not -d float32", 0);
  bt_bad("--algo fancy", "--algo: unknown algorithm 'fancy'", 0);
  bt_bad("-c 2", "-c: '2' must be 0 or 1", 0);
  bt_bad("-n -1", "-n: -1 is out of range", 0);
  bt_bad("-w x", "-w: 'x' is not an integer", 0);
  bt_bad("-t 0", "-t: '0' must be a number of seconds", 0);
  bt_bad("--transport udp", "--transport: 'udp' is not auto, shm, ofi or tcp", 0);
  bt_bad("--mem huge", "--mem: 'huge' is not malloc or collie", 0);
  bt_bad("--device gpu", "--device: 'gpu' is not cpu or cuda", 0);
  bt_bad("--frobnicate", "unknown option '--frobnicate'", 0);
  bt_bad("-x", "unknown option '-x'", 0);
  bt_bad("-b", "option '-b' needs a value", 0);
  bt_bad("extra", "unexpected argument 'extra'", 0);
  bt_bad("--fit --tune t.txt", "exclude each other", 0);
  /* Under a launcher every rank stops, and only rank 0 speaks. */
  bt_bad("-o nope", "-o: unknown collective 'nope'", 3);
  bt_bad("--root 2", "--root 2 is not a rank of this 2-rank job", 2);
  bt_bad("--csv no/such/dir/x.csv -o barrier", "--csv no/such/dir/x.csv", 2);
}

TEST_IMPL(bench_help_and_alone)
{
  char *out, *err;
  int rc = bt_sh("'" BT_BENCH "' --help", &out, &err);
  ASSERT(rc == 0 && strstr(out, "Usage: ") && strstr(out, "--minbytes") && strstr(out, "--csv"));
  ASSERT(strstr(out, "sendrecv") && strstr(out, "Exit status"));
  free(out);
  free(err);
  /* No launcher: one rank, alone, still a full run with a checked result. */
  rc = bt_sh("'" BT_BENCH "' -b 64 -e 256 -o allreduce,sendrecv,barrier -n 3 -w 1", &out, &err);
  ASSERTF(rc == 0, "%d\n%s\n%s", rc, out, err);
  ASSERT(strstr(out, "# nranks: 1 (no launcher environment") && strstr(out, "# transport: self"));
  ASSERT(strstr(out, "# wrong elements: 0 OK"));
  ASSERT(strstr(out, "# env: COLLIE_COMMS_LOG=0 (set by collie-bench"));
  ASSERT(access(test_path("comms.csv"), F_OK) != 0); /* no empty telemetry file left behind */
  free(out);
  free(err);
  /* -c 0: nothing is checked, and the table says so. */
  rc = bt_sh("'" BT_BENCH "' -b 64 -e 64 -n 3 -w 0 -c 0 -t 0.01", &out, &err);
  ASSERTF(rc == 0 && strstr(out, " N/A ") && strstr(out, "not checked"), "%s", out);
  free(out);
  free(err);
}

TEST_IMPL(bench_run_tcp_refused)
{
  /* Over tcp shm_flat cannot run: noted once, not retried, the rest runs. */
  char *out, *err;
  int rc = bt_sh("'" BT_RUN "' -n 3 '" BT_BENCH "' --transport tcp -o allreduce,barrier,broadcast "
                 "--algo all -b 64 -e 1K -f 4 -n 3 -w 1 --csv t.csv",
                 &out, &err);
  ASSERTF(rc == 0, "exit %d\n%s\n%s", rc, out, err);
  ASSERT(strstr(out, "# transport: tcp") && strstr(out, "# env: COLLIE_TRANSPORT=tcp"));
  ASSERT(bt_count(out, "# note: allreduce with shm_flat not measured") == 1);
  ASSERT(bt_count(out, "# note: barrier with shm_flat not measured") == 1);
  ASSERT(bt_count(err, "needs every rank on one host") == 2); /* rank 0 only, once each */
  char *csv = bt_slurp(test_path("t.csv"));
  ASSERT(csv && !strstr(csv, "shm_flat") && !strstr(csv, ",shm,"));
  /* 4 allreduce algorithms x 3 sizes (64, 256, 1024), 4 broadcast x 3, 1 barrier. */
  ASSERTF(bt_count(csv, "\ncollie,allreduce,") == 12 && bt_count(csv, "\ncollie,bcast,") == 12 &&
              bt_count(csv, "\ncollie,barrier,dissemination,tcp,3,0,0,") == 1,
          "%s", csv);
  free(csv);
  free(out);
  free(err);
}

/* collie-bench -o alltoallv on `ranks` ranks with more options `extra`:
 * exit 0; one table row per requested size (64 B to 16 KiB by 4) with
 * alltoall's size and count (count: one peer block), the algorithm `algo`
 * and #wrong 0; the CSV has the same rows. Returns stdout and stderr. */
static void
bt_run_alltoallv(int ranks, const char *extra, const char *transport, const char *algo, char **outp,
                 char **errp)
{
  char cmd[1024], *out, *err;
  snprintf(cmd, sizeof(cmd),
           "'%s' -n %d '%s' -o alltoallv -b 64 -e 16K -f 4 -n 3 -w 1 --csv v.csv %s", BT_RUN, ranks,
           BT_BENCH, extra);
  int rc = bt_sh(cmd, &out, &err);
  ASSERTF(rc == 0, "exit %d\n%s\n%s", rc, out, err);
  ASSERTF(strstr(out, "# wrong elements: 0 OK"), "%s", out);
  static const size_t reqs[] = {64, 256, 1024, 4096, 16384};
  int rows = 0;
  char *save = NULL, *text = strdup(out);
  ASSERT(text);
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (line[0] == '#') continue;
    char v[13][64];
    ASSERTF(sscanf(line, "%63s %63s %63s %63s %63s %63s %63s %63s %63s %63s %63s %63s %63s", v[0],
                   v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12]) == 13,
            "row: %s", line);
    ASSERTF(rows < 5, "more rows than sizes: %s", line);
    struct cb_shape s;
    ASSERT(cb_shape(CB_ALLTOALLV, reqs[rows], ranks, 4, &s) == 1);
    ASSERTF(strtoull(v[0], NULL, 10) == s.bytes && strtoull(v[1], NULL, 10) == s.count,
            "%zu B requested: row %s", reqs[rows], line);
    ASSERTF(s.count == reqs[rows] / 4 / (size_t)ranks, "%zu", s.count);
    ASSERTF(!strcmp(v[2], "float32") && !strcmp(v[3], "none") && !strcmp(v[4], "-1") &&
                !strcmp(v[5], algo) && !strcmp(v[9], "0"),
            "row: %s", line);
    ASSERTF(atof(v[6]) > 0, "row: %s", line);
    char want[128];
    snprintf(want, sizeof(want), "\ncollie,alltoallv,%s,%s,%d,%zu,%zu,", algo, transport, ranks,
             s.bytes, s.count);
    char *csv = bt_slurp(test_path("v.csv"));
    const char *at = csv ? strstr(csv, want) : NULL;
    ASSERTF(at, "CSV lacks %s:\n%s", want + 1, csv ? csv : "(none)");
    size_t ll = strcspn(at + 1, "\n"); /* the row; its last field is wrong */
    ASSERTF(ll > 2 && !strncmp(at + 1 + ll - 2, ",0", 2), "CSV row: %.*s", (int)ll, at + 1);
    free(csv);
    rows++;
  }
  ASSERTF(rows == 5, "%d rows\n%s", rows, out);
  free(text);
  *outp = out;
  *errp = err;
}

/* 2 ranks over shm with --algo all: pairwise at every size; hierarchical,
 * which needs several hosts, refused once with a note. */
TEST_IMPL(bench_run_alltoallv_shm_2)
{
  char *out, *err;
  bt_run_alltoallv(2, "--algo all", "shm", "pairwise", &out, &err);
  ASSERTF(strstr(out, "# alltoallv, out of place") && strstr(out, "# transport: shm"), "%s", out);
  ASSERTF(bt_count(out, "# note: alltoallv with hierarchical not measured") == 1, "%s", out);
  ASSERTF(bt_count(err, "alltoallv algorithm \"hierarchical\" cannot run") == 1, "%s", err);
  free(out);
  free(err);
}

/* 3 ranks over tcp, in place, collie's pick (resolved to its name). */
TEST_IMPL(bench_run_alltoallv_tcp_3)
{
  char *out, *err;
  bt_run_alltoallv(3, "--transport tcp --inplace", "tcp", "pairwise", &out, &err);
  ASSERTF(strstr(out, "# alltoallv, in place") && strstr(out, "# transport: tcp"), "%s", out);
  ASSERT(!strstr(out, "# note:"));
  free(out);
  free(err);
}

/* --model and --fit leave alltoallv out with a note, and run the rest. */
TEST_IMPL(bench_alltoallv_not_modelled)
{
  char *out, *err;
  int rc =
      bt_sh("'" BT_BENCH "' --model -o alltoallv,alltoall --max-ranks 16 -b 1K -e 1K", &out, &err);
  ASSERTF(rc == 0, "%d\n%s\n%s", rc, out, err);
  ASSERTF(bt_count(out, "# note: alltoallv not modelled") == 1, "%s", out);
  ASSERTF(!strstr(out, "\nalltoallv ") && bt_count(out, "\nalltoall ") == 2 * 2, "%s", out);
  free(out);
  free(err);
  rc = bt_sh("'" BT_BENCH "' --fit -o alltoallv,barrier -b 8 -e 64 -t 0.002 -w 2", &out, &err);
  ASSERTF(rc == 0, "%d\n%s\n%s", rc, out, err);
  ASSERTF(bt_count(out, "# note: alltoallv is not fitted") == 1, "%s", out);
  ASSERTF(strstr(out, "| barrier | dissemination |") && !strstr(out, "| alltoallv |"), "%s", out);
  free(out);
  free(err);
}

/* One line of --model's table: collective, ranks, hosts, bytes, pick, its
 * time, then name=time for every algorithm that can run it. */
static int
bt_model_line(const char *line, char *coll, int *ranks, int *hosts, char *pick, double *t,
              double *min_t, int *has_hier)
{
  size_t bytes;
  int n = 0;
  if (sscanf(line, "%31s %d %d %zu %31s %lf %n", coll, ranks, hosts, &bytes, pick, t, &n) != 6)
    return 0;
  *min_t = -1;
  *has_hier = 0;
  for (const char *p = line + n; *p;) {
    const char *eq = strchr(p, '=');
    if (!eq) break;
    double v = strtod(eq + 1, NULL);
    if (*min_t < 0 || v < *min_t) *min_t = v;
    if (!strncmp(p, "hierarchical=", 13)) *has_hier = 1;
    p = strchr(eq, ' ');
    if (!p) break;
    p++;
  }
  return 1;
}

/* --model: no communicator, one line per (model, collective, ranks, size);
 * the pick is the cheapest line item; one host never lists hierarchical,
 * several hosts do; --net moves only the rows of several hosts. */
TEST_IMPL(bench_model)
{
  char *out, *err, *out2, *err2;
  int rc = bt_sh("'" BT_BENCH "' --model --max-ranks 64 -b 4K -e 1M -f 16", &out, &err);
  ASSERTF(rc == 0, "%d\n%s\n%s", rc, out, err);
  ASSERT(bt_count(out, "# model \"") == 2 && strstr(out, "datacenter: 5 us, 25 GB/s"));
  rc = bt_sh("'" BT_BENCH "' --model --max-ranks 64 -b 4K -e 1M -f 16 --net 50,1", &out2, &err2);
  ASSERTF(rc == 0, "%d\n%s", rc, err2);
  int rows = 0, hier_rows = 0, half = 0;
  char *save = NULL, *save2 = NULL;
  char *l2 = strtok_r(out2, "\n", &save2);
  for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    while (l2 && l2[0] == '#') l2 = strtok_r(NULL, "\n", &save2);
    if (line[0] == '#') {
      if (strstr(line, "datacenter")) half = 1;
      continue;
    }
    char coll[32], pick[32], coll2[32], pick2[32];
    int ranks, hosts, hh, ranks2, hosts2, hh2;
    double t, tmin, t2, tmin2;
    ASSERTF(bt_model_line(line, coll, &ranks, &hosts, pick, &t, &tmin, &hh), "line: %s", line);
    ASSERTF(l2 && bt_model_line(l2, coll2, &ranks2, &hosts2, pick2, &t2, &tmin2, &hh2), "%s", line);
    ASSERT(!strcmp(coll, coll2) && ranks == ranks2 && hosts == hosts2);
    ASSERTF(t == tmin, "%s: pick %s %.1f, cheapest %.1f", line, pick, t, tmin);
    ASSERTF(hosts == (ranks + 7) / 8, "%s", line);
    ASSERTF(hosts == 1 ? !hh : hh, "%s: hierarchical %s", line, hh ? "listed" : "missing");
    if (half) /* the datacenter half: another network changes the rows of several hosts only */
      ASSERTF(hosts == 1 ? t == t2 : t != t2, "%s vs %s", line, l2);
    hier_rows += hh;
    rows++;
    l2 = strtok_r(NULL, "\n", &save2);
  }
  /* 5 collectives x 3 sizes (4K, 64K, 1M) x 4 rank counts (8..64, one
   * of them one host) x 2 models. */
  ASSERTF(rows == 5 * 3 * 4 * 2 && hier_rows == 5 * 3 * 3 * 2, "%d rows, %d hierarchical", rows,
          hier_rows);
  free(out);
  free(err);
  free(out2);
  free(err2);
  /* Bad values name the option. */
  ASSERT(bt_sh("'" BT_BENCH "' --model --net 5", &out, &err) == 2 && strstr(err, "--net 5"));
  free(out);
  free(err);
  ASSERT(bt_sh("'" BT_BENCH "' --per-host 4", &out, &err) == 2 && strstr(err, "go with --model"));
  free(out);
  free(err);
  ASSERT(bt_sh("'" BT_BENCH "' --model --per-host 0", &out, &err) == 2 &&
         strstr(err, "--per-host"));
  free(out);
  free(err);
  ASSERT(bt_sh("'" BT_BENCH "' --model --fit", &out, &err) == 2 && strstr(err, "exclude"));
  free(out);
  free(err);
}
