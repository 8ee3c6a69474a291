/*
 * sparse_test.c - collie_sparse_allreduce (src/coll/sparse.c,
 * docs/sparse.md) against dense references that each rank builds from
 * every rank's data (regenerated from the same seeds):
 *
 *   - topk_allgather: the exact sum, index by index (duplicates within a
 *     rank summed too), sorted, float32 and float64;
 *   - gtopk: the gTop-k tree computed on dense vectors (fold of the ranks
 *     past the largest power of two, then recursive doubling, each merge
 *     cut to the k largest magnitudes, ties to the smaller index), at
 *     powers of two and not;
 *   - every rank the same result; misuse refused by name before any
 *     communication; the index bytes charged to bytes_topr_indices.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/csv_read.h"
#include "runner.h"

#define SP_DIM 4000

/* Rank r's pairs: k indices (distinct when distinct, else some repeated)
 * and values of both signs. */
static void
sp_gen(int r, size_t k, int distinct, int64_t *idx, double *val)
{
  uint32_t s = 0x12345u + (uint32_t)r * 7919u + (uint32_t)k;
  for (size_t i = 0; i < k; i++) {
    for (;;) {
      s = s * 1664525u + 1013904223u;
      idx[i] = (int64_t)((s >> 8) % (distinct ? SP_DIM : 64)); /* 64: overlaps a lot */
      size_t j = 0;
      while (distinct && j < i && idx[j] != idx[i]) j++;
      if (!distinct || j == i) break;
    }
    s = s * 1664525u + 1013904223u;
    val[i] = ((double)(s >> 9) / 8388608.0 - 1.0) * 100.0;
  }
}

static void
sp_vals(collie_dtype_t dt, const double *v, size_t k, void *out)
{
  for (size_t i = 0; i < k; i++) {
    if (dt == COLLIE_FLOAT32)
      ((float *)out)[i] = (float)v[i];
    else
      ((double *)out)[i] = v[i];
  }
}

static double
sp_val(collie_dtype_t dt, const void *v, size_t i)
{
  return dt == COLLIE_FLOAT32 ? (double)((const float *)v)[i] : ((const double *)v)[i];
}

/* The value as the call's dtype holds it. */
static double
sp_round(collie_dtype_t dt, double x)
{
  return dt == COLLIE_FLOAT32 ? (double)(float)x : x;
}

/* Checks the result: sorted, want[i] != 0 or present exactly where
 * present[i], values equal; and the same on every rank. */
static void
sp_check(collie_comm_t *comm, collie_dtype_t dt, const int64_t *oi, const void *ov, size_t on,
         const double *want, const char *present, const char *what)
{
  size_t n = 0;
  for (size_t d = 0; d < SP_DIM; d++) n += present[d] != 0;
  ASSERTF(on == n, "%s: %zu entries, want %zu", what, on, n);
  for (size_t i = 0; i < on; i++) {
    ASSERTF(oi[i] >= 0 && oi[i] < SP_DIM && present[oi[i]], "%s: [%zu] index %lld not expected",
            what, i, (long long)oi[i]);
    ASSERTF(i == 0 || oi[i] > oi[i - 1], "%s: not sorted at %zu", what, i);
    ASSERTF(sp_val(dt, ov, i) == want[oi[i]], "%s: index %lld = %.17g, want %.17g", what,
            (long long)oi[i], sp_val(dt, ov, i), want[oi[i]]);
  }
  uint64_t h = 1469598103934665603ull, *all = malloc((size_t)test_size() * 8);
  ASSERT(all);
  for (size_t i = 0; i < on; i++) h = (h ^ (uint64_t)oi[i]) * 1099511628211ull;
  for (size_t i = 0; i < on * collie_dtype_size(dt); i++)
    h = (h ^ ((const unsigned char *)ov)[i]) * 1099511628211ull;
  ASSERT_OK(collie_allgather(comm, &h, all, 1, COLLIE_UINT64, NULL, NULL));
  for (int r = 0; r < test_size(); r++) ASSERTF(all[r] == h, "%s: rank %d differs", what, r);
  free(all);
}

TEST_IMPL(sparse_topk_allgather_exact)
{
  static const size_t ks[] = {0, 1, 7, 300};
  static const collie_dtype_t dts[] = {COLLIE_FLOAT32, COLLIE_FLOAT64};
  collie_comm_t *comm = test_comm();
  int me = test_rank(), p = test_size();
  for (size_t ki = 0; ki < 4; ki++)
    for (int di = 0; di < 2; di++)
      for (int distinct = 0; distinct < 2; distinct++) {
        size_t k = ks[ki];
        collie_dtype_t dt = dts[di];
        int64_t *idx = malloc((k + 1) * 8), *oi = malloc(((size_t)p * k + 1) * 8);
        double *v = malloc((k + 1) * 8), *want = calloc(SP_DIM, 8);
        char *present = calloc(SP_DIM, 1);
        void *vals = malloc((k + 1) * 8), *ov = malloc(((size_t)p * k + 1) * 8);
        ASSERT(idx && oi && v && want && present && vals && ov);
        /* The reference: every rank's values in rank order, summed in double. */
        for (int r = 0; r < p; r++) {
          sp_gen(r, k, distinct, idx, v);
          sp_vals(dt, v, k, vals);
          for (size_t i = 0; i < k; i++) {
            want[idx[i]] += sp_val(dt, vals, i);
            present[idx[i]] = 1;
          }
        }
        for (size_t d = 0; d < SP_DIM; d++) want[d] = sp_round(dt, want[d]);
        sp_gen(me, k, distinct, idx, v);
        sp_vals(dt, v, k, vals);
        size_t on = 12345;
        ASSERT_OK(collie_sparse_allreduce(comm, COLLIE_SPARSE_TOPK_ALLGATHER, idx, vals, k, SP_DIM,
                                          oi, ov, (size_t)p * k, &on, dt, NULL, NULL));
        char what[64];
        snprintf(what, sizeof(what), "allgather k %zu %s distinct %d", k, collie_dtype_name(dt),
                 distinct);
        sp_check(comm, dt, oi, ov, on, want, present, what);
        free(idx);
        free(oi);
        free(v);
        free(want);
        free(present);
        free(vals);
        free(ov);
      }
  ASSERT_OK(collie_comm_destroy(comm));
}

/* dense[] cut to its k largest magnitudes (ties: the smaller index). */
static void
sp_topk(double *dense, size_t k)
{
  size_t nz = 0;
  for (size_t d = 0; d < SP_DIM; d++) nz += dense[d] != 0;
  while (nz > k) { /* drop the smallest magnitude, the larger index on ties */
    size_t worst = SP_DIM;
    for (size_t d = 0; d < SP_DIM; d++)
      if (dense[d] != 0 && (worst == SP_DIM || fabs(dense[d]) <= fabs(dense[worst]))) worst = d;
    dense[worst] = 0;
    nz--;
  }
}

/* a += b, each sum rounded to the dtype. */
static void
sp_add(collie_dtype_t dt, double *a, const double *b)
{
  for (size_t d = 0; d < SP_DIM; d++) a[d] = sp_round(dt, a[d] + b[d]);
}

TEST_IMPL(sparse_gtopk_tree)
{
  static const collie_dtype_t dts[] = {COLLIE_FLOAT32, COLLIE_FLOAT64};
  collie_comm_t *comm = test_comm();
  int me = test_rank(), p = test_size();
  size_t k = 40;
  for (int di = 0; di < 2; di++) {
    collie_dtype_t dt = dts[di];
    double **set = malloc((size_t)p * sizeof(double *));
    int64_t idx[40], oi[40];
    double v[40];
    float fv[40];
    double dv[40], ov[40];
    ASSERT(set);
    /* Each rank's own set: its values (duplicates summed), cut to k. */
    for (int r = 0; r < p; r++) {
      set[r] = calloc(SP_DIM, sizeof(double));
      ASSERT(set[r]);
      sp_gen(r, k, 1, idx, v);
      for (size_t i = 0; i < k; i++) set[r][idx[i]] = sp_round(dt, v[i]);
      sp_topk(set[r], k);
    }
    int q = 1;
    while (q * 2 <= p) q *= 2;
    for (int r = q; r < p; r++) { /* the fold */
      sp_add(dt, set[r - q], set[r]);
      sp_topk(set[r - q], k);
    }
    for (int m = 1; m < q; m <<= 1) /* recursive doubling: partners end alike */
      for (int r = 0; r < q; r++)
        if (r < (r ^ m)) {
          sp_add(dt, set[r], set[r ^ m]);
          sp_topk(set[r], k);
          memcpy(set[r ^ m], set[r], SP_DIM * sizeof(double));
        }
    char *present = calloc(SP_DIM, 1);
    ASSERT(present);
    for (size_t d = 0; d < SP_DIM; d++) present[d] = set[0][d] != 0;
    sp_gen(me, k, 1, idx, v);
    for (size_t i = 0; i < k; i++) {
      fv[i] = (float)v[i];
      dv[i] = v[i];
    }
    size_t on = 999;
    void *out = dt == COLLIE_FLOAT32 ? (void *)fv : (void *)ov;
    float ofv[40];
    if (dt == COLLIE_FLOAT32) out = ofv;
    ASSERT_OK(collie_sparse_allreduce(comm, COLLIE_SPARSE_GTOPK, idx,
                                      dt == COLLIE_FLOAT32 ? (void *)fv : (void *)dv, k, SP_DIM, oi,
                                      out, k, &on, dt, NULL, NULL));
    sp_check(comm, dt, oi, out, on, set[0], present,
             dt == COLLIE_FLOAT32 ? "gtopk f32" : "gtopk f64");
    ASSERT(on == k); /* at least k distinct indices in all: k kept */
    for (int r = 0; r < p; r++) free(set[r]);
    free(set);
    free(present);
  }
  /* Ties of magnitude go to the smaller index, at every merge: of rank
   * r's {r, r+10, r+20, r+30}, all of magnitude 1, the 4 smallest indices
   * of the union survive. */
  {
    int64_t ti[4] = {me + 30, me, me + 20, me + 10}, to[4];
    double tv[4] = {1, -1, 1, -1}, tw[4];
    size_t tn = 0;
    ASSERT_OK(collie_sparse_allreduce(comm, COLLIE_SPARSE_GTOPK, ti, tv, 4, SP_DIM, to, tw, 4, &tn,
                                      COLLIE_FLOAT64, NULL, NULL));
    int64_t want[4];
    size_t w = 0;
    for (int64_t d = 0; d < 40 && w < 4; d++)
      if (d % 10 < p) want[w++] = d;
    ASSERT(tn == 4);
    for (size_t i = 0; i < 4; i++)
      ASSERTF(to[i] == want[i] && fabs(tw[i]) == 1, "tie [%zu] = %lld, want %lld", i,
              (long long)to[i], (long long)want[i]);
  }
  /* Every rank the same k indices: nothing to drop, the exact sum, sorted. */
  int64_t one[2] = {5, 3}, oi[2];
  double val[2] = {1.5, 2.0}, ov[2];
  size_t on = 0;
  ASSERT_OK(collie_sparse_allreduce(comm, COLLIE_SPARSE_GTOPK, one, val, 2, SP_DIM, oi, ov, 2, &on,
                                    COLLIE_FLOAT64, NULL, NULL));
  ASSERT(on == 2 && oi[0] == 3 && oi[1] == 5 && ov[0] == 2.0 * p && ov[1] == 1.5 * p);
  (void)me;
  ASSERT_OK(collie_comm_destroy(comm));
}

TEST_IMPL(sparse_refused)
{
  collie_comm_t *comm = test_comm();
  int p = test_size();
  int64_t idx[2] = {1, 2}, oi[64];
  float v[2] = {1, 2}, ov[64];
  int32_t iv[2] = {1, 2};
  size_t on;
  ASSERT_RC(
      COLLIE_INVALID_ARGUMENT, "mode = 7 is neither COLLIE_SPARSE_TOPK_ALLGATHER nor",
      collie_sparse_allreduce(comm, 7, idx, v, 2, 10, oi, ov, 64, &on, COLLIE_FLOAT32, NULL, NULL));
  ASSERT_RC(COLLIE_UNSUPPORTED, "dtype int32: sparse values are float32 or float64",
            collie_sparse_allreduce(comm, COLLIE_SPARSE_GTOPK, idx, iv, 2, 10, oi, ov, 64, &on,
                                    COLLIE_INT32, NULL, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "out_cap = 1, but the result may hold 2 entries (nnz)",
            collie_sparse_allreduce(comm, COLLIE_SPARSE_GTOPK, idx, v, 2, 10, oi, ov, 1, &on,
                                    COLLIE_FLOAT32, NULL, NULL));
  if (p > 1)
    ASSERT_RC(COLLIE_INVALID_ARGUMENT, "(size x nnz)",
              collie_sparse_allreduce(comm, COLLIE_SPARSE_TOPK_ALLGATHER, idx, v, 2, 10, oi, ov, 2,
                                      &on, COLLIE_FLOAT32, NULL, NULL));
  idx[1] = 10;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "indices[1] = 10 is outside 0..9 (dim = 10)",
            collie_sparse_allreduce(comm, COLLIE_SPARSE_GTOPK, idx, v, 2, 10, oi, ov, 64, &on,
                                    COLLIE_FLOAT32, NULL, NULL));
  idx[1] = -3;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "indices[1] = -3 is outside",
            collie_sparse_allreduce(comm, COLLIE_SPARSE_GTOPK, idx, v, 2, 10, oi, ov, 64, &on,
                                    COLLIE_FLOAT32, NULL, NULL));
  idx[1] = 2;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "out_nnz is NULL",
            collie_sparse_allreduce(comm, COLLIE_SPARSE_GTOPK, idx, v, 2, 10, oi, ov, 64, NULL,
                                    COLLIE_FLOAT32, NULL, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "indices is NULL but count is 2",
            collie_sparse_allreduce(comm, COLLIE_SPARSE_GTOPK, NULL, v, 2, 10, oi, ov, 64, &on,
                                    COLLIE_FLOAT32, NULL, NULL));
  collie_opts_t o = {.algorithm = COLLIE_ALGO_GTOPK};
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "cannot run this call",
            collie_sparse_allreduce(comm, COLLIE_SPARSE_TOPK_ALLGATHER, idx, v, 2, 10, oi, ov, 64,
                                    &on, COLLIE_FLOAT32, &o, NULL));
  /* Nothing above took a sequence number: the communicator goes on. */
  ASSERT_OK(collie_sparse_allreduce(comm, COLLIE_SPARSE_TOPK_ALLGATHER, idx, v, 2, 10, oi, ov, 64,
                                    &on, COLLIE_FLOAT32, NULL, NULL));
  ASSERT(on == 2 && oi[0] == 1 && ov[0] == (float)p && ov[1] == 2.0f * (float)p);
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Rank 0's comms.csv rows: a sparse call's index bytes under
 * bytes_topr_indices, its value bytes under its own category (other), all
 * of it under bytes_all_reduce; topk_allgather sends p - 1 blocks, gtopk
 * ceil(log2 p). Every rank's timing log names the calls as the seeds' logs
 * do, in the sparse phase. */
TEST_IMPL(sparse_telemetry_indices)
{
  collie_comm_t *comm = test_comm();
  int me = test_rank(), p = test_size();
  int64_t idx[50], oi[50 * 8];
  float v[50], ov[50 * 8];
  for (int i = 0; i < 50; i++) {
    idx[i] = i * 3 + me;
    v[i] = 1.0f;
  }
  size_t on;
  ASSERT(p <= 8);
  ASSERT_OK(collie_timing_open(comm, test_dir()));
  for (int step = 1; step <= 2; step++) {
    ASSERT_OK(collie_step_begin(comm, step, 0));
    ASSERT_OK(collie_sparse_allreduce(
        comm, step == 1 ? COLLIE_SPARSE_TOPK_ALLGATHER : COLLIE_SPARSE_GTOPK, idx, v, 50, 1000, oi,
        ov, 50 * 8, &on, COLLIE_FLOAT32, NULL, NULL));
    ASSERT_OK(collie_step_end(comm));
  }
  ASSERT_OK(collie_comm_destroy(comm));
  char path[512];
  struct csv_table t;
  snprintf(path, sizeof(path), "%s/timing-rank%d.csv", test_dir(), me);
  ASSERTF(csv_load(path, &t) == 0, "%s", path);
  ASSERTF(t.nrows == 2, "%s: %d rows", path, t.nrows);
  ASSERT(!strcmp(csv_cell(&t, 0, "operation"), "TOPK_SPARSE_ALLREDUCE"));
  ASSERT(!strcmp(csv_cell(&t, 1, "operation"), "GTOPK_SPARSE_ALLREDUCE"));
  ASSERT(!strcmp(csv_cell(&t, 0, "phase"), "sparse") &&
         !strcmp(csv_cell(&t, 1, "phase"), "sparse"));
  csv_free(&t);
  if (me != 0) return;
  snprintf(path, sizeof(path), "%s/comms.csv", test_dir());
  ASSERTF(csv_load(path, &t) == 0, "%s", path);
  ASSERT(t.nrows == 2);
  int log2p = 0;
  while ((1 << log2p) < p) log2p++;
  for (int row = 0; row < 2; row++) {
    long long blocks = row == 0 ? p - 1 : log2p;
    long long idxb = atoll(csv_cell(&t, row, "bytes_topr_indices")),
              other = atoll(csv_cell(&t, row, "bytes_other")),
              all = atoll(csv_cell(&t, row, "bytes_all_reduce"));
    ASSERTF(idxb == blocks * 50 * 8, "step %d: bytes_topr_indices %lld", row + 1, idxb);
    ASSERTF(other == blocks * 50 * 4, "step %d: bytes_other %lld", row + 1, other);
    ASSERTF(all == idxb + other, "step %d: bytes_all_reduce %lld", row + 1, all);
  }
  csv_free(&t);
}

/* Ranks that pass different nnz fail, every one of them, with the
 * mismatch (or a peer's failure over it) rather than hanging or reading a
 * short block: rank 0 passes 2 pairs, the others 3. */
TEST_IMPL(sparse_nnz_mismatch)
{
  static const collie_sparse_mode_t modes[] = {COLLIE_SPARSE_TOPK_ALLGATHER, COLLIE_SPARSE_GTOPK};
  for (int m = 0; m < 2; m++) {
    collie_comm_t *comm = test_comm();
    int me = test_rank(), p = test_size();
    int64_t idx[3] = {1, 2, 3}, oi[3 * 8];
    double v[3] = {1, 2, 3}, ov[3 * 8];
    size_t on, nnz = me == 0 ? 2 : 3;
    ASSERT(p <= 8);
    collie_result_t rc = collie_sparse_allreduce(comm, modes[m], idx, v, nnz, 10, oi, ov, 3 * 8,
                                                 &on, COLLIE_FLOAT64, NULL, NULL);
    ASSERTF(rc == COLLIE_INVALID_USAGE || rc == COLLIE_REMOTE_ERROR, "mode %d: %s: %s", m,
            collie_result_string(rc), collie_last_error());
    collie_comm_destroy(comm);
  }
}
