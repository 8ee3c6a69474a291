/*
 * matrix_test.c - every collective x algorithm x dtype x op x count x
 * in-place/out-of-place, checked against the serial reference of ref.c.
 *
 * Algorithms are not listed here: each case tries every COLLIE_ALGO_* value
 * (AUTO included) through opts->algorithm, and skips the ones the library
 * refuses with INVALID_ARGUMENT ("has no algorithm" / "cannot run this
 * call"), a refusal that every rank makes alike and that leaves the
 * communicator usable. A new algorithm is therefore tested the day it lands.
 *
 * The CI subset runs every algorithm on a few (dtype, op) pairs at counts 0,
 * 1, 7, 4097, every pair with the automatic choice, and 1M+3 elements once
 * per algorithm. COLLIE_TEST_FULL=1 runs the whole product (docs/testing.md).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/ref.h"
#include "runner.h"

#define MATRIX_SENTINEL 0x6b

struct matrix_case {
  collie_comm_t *comm;
  int rank, size, algo, inplace;
  collie_dtype_t dtype;
  collie_op_t op;
  size_t count;
  size_t es;
};

static int
matrix_full(void)
{
  const char *f = getenv("COLLIE_TEST_FULL");
  return f && *f == '1';
}

/* Buffers of the running case, freed by the driver after it, whether the case
 * ran or was refused early. */
static void *matrix_bufs[16];
static int matrix_nbufs;

static void *
matrix_alloc(size_t bytes)
{
  char *p = malloc(bytes + 64);
  ASSERT(p && matrix_nbufs < 16);
  memset(p, MATRIX_SENTINEL, bytes + 64);
  matrix_bufs[matrix_nbufs++] = p;
  return p;
}

static void
matrix_release(void)
{
  while (matrix_nbufs > 0) free(matrix_bufs[--matrix_nbufs]);
}

/* The library's answer to an algorithm it cannot run: skip, on every rank alike. */
static int
matrix_skip(collie_result_t rc, const struct matrix_case *k)
{
  if (rc != COLLIE_INVALID_ARGUMENT) return 0;
  ASSERTF(k->algo != COLLIE_ALGO_AUTO, "automatic choice refused: %s", collie_last_error());
  ASSERTF(strstr(collie_last_error(), "has no algorithm") ||
              strstr(collie_last_error(), "cannot run this call"),
          "unexpected refusal: %s", collie_last_error());
  return 1;
}

#define MATRIX_RUN(k, call)                                                                        \
  do {                                                                                             \
    collie_result_t rc_ = (call);                                                                  \
    if (matrix_skip(rc_, k)) return 0;                                                             \
    if (rc_ != COLLIE_SUCCESS)                                                                     \
      test_fail(__FILE__, __LINE__, "%s: %s", collie_result_string(rc_), collie_last_error());     \
  } while (0)

static void __attribute__((noreturn, format(printf, 3, 4)))
matrix_fail(const struct matrix_case *k, int line, const char *fmt, ...)
{
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  test_fail(__FILE__, line, "algorithm %d, %s %s, count %zu, %s: %s", k->algo,
            collie_dtype_name(k->dtype), collie_op_name(k->op), k->count,
            k->inplace ? "in place" : "out of place", msg);
}

#define MATRIX_EXPECT(k, cond, ...)                                                                \
  do {                                                                                             \
    if (!(cond)) matrix_fail(k, __LINE__, __VA_ARGS__);                                            \
  } while (0)

static int
matrix_untouched(const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != MATRIX_SENTINEL) return 0;
  return 1;
}

/* Each returns 1 when the case ran (and passed), 0 when the algorithm was refused. */

static int
matrix_allreduce(const struct matrix_case *k)
{
  collie_opts_t o = {.algorithm = k->algo};
  size_t n = k->count, b = n * k->es;
  char *s = matrix_alloc(b), *r = k->inplace ? s : matrix_alloc(b), why[200];
  ref_fill(s, n, k->dtype, k->op, k->rank);
  MATRIX_RUN(k, collie_allreduce(k->comm, s, r, n, k->dtype, k->op, &o, NULL));
  MATRIX_EXPECT(k, ref_check(r, n, k->dtype, k->op, k->size, why, sizeof(why)) < 0, "%s", why);
  MATRIX_EXPECT(k, matrix_untouched(r + b, 64), "wrote past the end of recvbuf");
  return 1;
}

static int
matrix_reduce(const struct matrix_case *k)
{
  collie_opts_t o = {.algorithm = k->algo};
  size_t n = k->count, b = n * k->es;
  int root = (int)(k->count % (size_t)k->size);
  char *s = matrix_alloc(b), *r = k->inplace ? s : matrix_alloc(b), why[200];
  ref_fill(s, n, k->dtype, k->op, k->rank);
  /* Non-roots may pass NULL for recvbuf; do so on one of them. */
  void *rb = k->rank == root || k->rank % 2 ? (void *)r : NULL;
  MATRIX_RUN(k, collie_reduce(k->comm, s, rb, n, k->dtype, k->op, root, &o, NULL));
  if (k->rank == root) {
    MATRIX_EXPECT(k, ref_check(r, n, k->dtype, k->op, k->size, why, sizeof(why)) < 0, "root %d: %s",
                  root, why);
    MATRIX_EXPECT(k, matrix_untouched(r + b, 64), "wrote past the end of recvbuf");
  }
  return 1;
}

static int
matrix_reduce_scatter(const struct matrix_case *k)
{
  collie_opts_t o = {.algorithm = k->algo};
  size_t n = k->count, p = (size_t)k->size, b = n * k->es;
  char *s = matrix_alloc(b * p), *r = k->inplace ? s + (size_t)k->rank * b : matrix_alloc(b);
  char why[200];
  ref_fill(s, n * p, k->dtype, k->op, k->rank);
  MATRIX_RUN(k, collie_reduce_scatter(k->comm, s, r, n, k->dtype, k->op, &o, NULL));
  MATRIX_EXPECT(
      k, ref_check_at(r, (size_t)k->rank * n, n, k->dtype, k->op, k->size, why, sizeof(why)) < 0,
      "%s", why);
  if (!k->inplace) {
    MATRIX_EXPECT(k, matrix_untouched(r + b, 64), "wrote past the end of recvbuf");
  }
  return 1;
}

static int
matrix_allgather(const struct matrix_case *k)
{
  collie_opts_t o = {.algorithm = k->algo};
  size_t n = k->count, p = (size_t)k->size, b = n * k->es;
  char *r = matrix_alloc(b * p), *s = k->inplace ? r + (size_t)k->rank * b : matrix_alloc(b);
  ref_fill_pattern(s, n, k->dtype, k->rank);
  MATRIX_RUN(k, collie_allgather(k->comm, s, r, n, k->dtype, &o, NULL));
  for (int q = 0; q < k->size; q++) {
    long bad = ref_pattern_diff(r + (size_t)q * b, n, k->dtype, q);
    MATRIX_EXPECT(k, bad < 0, "block of rank %d wrong at element %ld", q, bad);
  }
  MATRIX_EXPECT(k, matrix_untouched(r + p * b, 64), "wrote past the end of recvbuf");
  return 1;
}

static int
matrix_broadcast(const struct matrix_case *k)
{
  collie_opts_t o = {.algorithm = k->algo};
  size_t n = k->count, b = n * k->es;
  int root = (int)((k->count / 3) % (size_t)k->size);
  char *buf = matrix_alloc(b);
  if (k->rank == root) ref_fill_pattern(buf, n, k->dtype, root);
  MATRIX_RUN(k, collie_broadcast(k->comm, buf, n, k->dtype, root, &o, NULL));
  long bad = ref_pattern_diff(buf, n, k->dtype, root);
  MATRIX_EXPECT(k, bad < 0, "root %d: element %ld wrong", root, bad);
  MATRIX_EXPECT(k, matrix_untouched(buf + b, 64), "wrote past the end of buf");
  return 1;
}

static int
matrix_alltoall(const struct matrix_case *k)
{
  collie_opts_t o = {.algorithm = k->algo};
  size_t n = k->count, p = (size_t)k->size, b = n * k->es;
  char *s = matrix_alloc(b * p), *r = k->inplace ? s : matrix_alloc(b * p);
  for (size_t q = 0; q < p; q++)
    ref_fill_pattern(s + q * b, n, k->dtype, k->rank * k->size + (int)q);
  MATRIX_RUN(k, collie_alltoall(k->comm, s, r, n, k->dtype, &o, NULL));
  for (int q = 0; q < k->size; q++) {
    long bad = ref_pattern_diff(r + (size_t)q * b, n, k->dtype, q * k->size + k->rank);
    MATRIX_EXPECT(k, bad < 0, "block from rank %d wrong at element %ld", q, bad);
  }
  MATRIX_EXPECT(k, matrix_untouched(r + p * b, 64), "wrote past the end of recvbuf");
  return 1;
}

static int
matrix_gather(const struct matrix_case *k)
{
  collie_opts_t o = {.algorithm = k->algo};
  size_t n = k->count, p = (size_t)k->size, b = n * k->es;
  int root = (int)((k->count + 1) % (size_t)k->size);
  char *r = matrix_alloc(b * p),
       *s = k->inplace && k->rank == root ? r + (size_t)root * b : matrix_alloc(b);
  ref_fill_pattern(s, n, k->dtype, k->rank);
  void *rb = k->rank == root ? (void *)r : NULL;
  MATRIX_RUN(k, collie_gather(k->comm, s, rb, n, k->dtype, root, &o, NULL));
  if (k->rank == root) {
    for (int q = 0; q < k->size; q++) {
      long bad = ref_pattern_diff(r + (size_t)q * b, n, k->dtype, q);
      MATRIX_EXPECT(k, bad < 0, "root %d: block of rank %d wrong at %ld", root, q, bad);
    }
    MATRIX_EXPECT(k, matrix_untouched(r + p * b, 64), "wrote past the end of recvbuf");
  } else {
    MATRIX_EXPECT(k, matrix_untouched(r, p * b), "a non-root's recvbuf was written");
  }
  return 1;
}

static int
matrix_scatter(const struct matrix_case *k)
{
  collie_opts_t o = {.algorithm = k->algo};
  size_t n = k->count, p = (size_t)k->size, b = n * k->es;
  int root = (int)((k->count + 2) % (size_t)k->size);
  char *s = matrix_alloc(b * p),
       *r = k->inplace && k->rank == root ? s + (size_t)root * b : matrix_alloc(b);
  if (k->rank == root)
    for (size_t q = 0; q < p; q++) ref_fill_pattern(s + q * b, n, k->dtype, (int)q);
  void *sb = k->rank == root ? (void *)s : NULL;
  MATRIX_RUN(k, collie_scatter(k->comm, sb, r, n, k->dtype, root, &o, NULL));
  long bad = ref_pattern_diff(r, n, k->dtype, k->rank);
  MATRIX_EXPECT(k, bad < 0, "root %d: element %ld wrong", root, bad);
  if (!(k->inplace && k->rank == root)) {
    MATRIX_EXPECT(k, matrix_untouched(r + b, 64), "wrote past the end of recvbuf");
  }
  return 1;
}

/* Per-rank counts of the v-variants: some zero, none equal, from count. */
static size_t
matrix_vcount(size_t count, int a, int b)
{
  return ((size_t)(a * 3 + b * 5) % 4) * count / 2 + (size_t)((a + b) % 2);
}

static int
matrix_allgatherv(const struct matrix_case *k)
{
  collie_opts_t o = {.algorithm = k->algo};
  int p = k->size;
  size_t *counts = matrix_alloc((size_t)p * sizeof(size_t)),
         *displs = matrix_alloc((size_t)p * sizeof(size_t));
  size_t total = 0;
  ASSERT(counts && displs);
  for (int q = 0; q < p; q++) { /* blocks in reverse order, with gaps of 3 */
    counts[q] = matrix_vcount(k->count, q, 1);
  }
  for (int q = p - 1; q >= 0; q--) {
    displs[q] = total;
    total += counts[q] + 3;
  }
  char *r = matrix_alloc(total * k->es);
  char *s = k->inplace ? r + displs[k->rank] * k->es : matrix_alloc(counts[k->rank] * k->es);
  ref_fill_pattern(s, counts[k->rank], k->dtype, k->rank);
  MATRIX_RUN(k,
             collie_allgatherv(k->comm, s, counts[k->rank], r, counts, displs, k->dtype, &o, NULL));
  for (int q = 0; q < p; q++) {
    long bad = ref_pattern_diff(r + displs[q] * k->es, counts[q], k->dtype, q);
    MATRIX_EXPECT(k, bad < 0, "block of rank %d wrong at element %ld", q, bad);
    MATRIX_EXPECT(k, matrix_untouched(r + (displs[q] + counts[q]) * k->es, 3 * k->es),
                  "gap after block %d written", q);
  }
  return 1;
}

static int
matrix_alltoallv(const struct matrix_case *k)
{
  collie_opts_t o = {.algorithm = k->algo};
  int p = k->size, me = k->rank;
  size_t *sc = matrix_alloc((size_t)p * sizeof(size_t)),
         *sd = matrix_alloc((size_t)p * sizeof(size_t));
  size_t *rc = matrix_alloc((size_t)p * sizeof(size_t)),
         *rd = matrix_alloc((size_t)p * sizeof(size_t));
  size_t st = 0, rt = 0;
  ASSERT(sc && sd && rc && rd);
  for (int q = 0; q < p; q++) {
    sc[q] = matrix_vcount(k->count, me, q); /* what me sends to q */
    rc[q] = matrix_vcount(k->count, q, me); /* what q sends to me */
  }
  for (int q = p - 1; q >= 0; q--) { /* reverse order, gaps of 1 */
    sd[q] = st;
    st += sc[q] + 1;
    rd[q] = rt;
    rt += rc[q] + 1;
  }
  char *s = matrix_alloc(st * k->es), *r = matrix_alloc(rt * k->es);
  for (int q = 0; q < p; q++) ref_fill_pattern(s + sd[q] * k->es, sc[q], k->dtype, me * p + q);
  MATRIX_RUN(k, collie_alltoallv(k->comm, s, sc, sd, r, rc, rd, k->dtype, &o, NULL));
  for (int q = 0; q < p; q++) {
    long bad = ref_pattern_diff(r + rd[q] * k->es, rc[q], k->dtype, q * p + me);
    MATRIX_EXPECT(k, bad < 0, "block from rank %d wrong at element %ld", q, bad);
    MATRIX_EXPECT(k, matrix_untouched(r + (rd[q] + rc[q]) * k->es, k->es), "gap after block %d", q);
  }
  return 1;
}

typedef int (*matrix_fn)(const struct matrix_case *k);

/* Runs fn over the matrix; reduces says whether ops vary; inplace whether the
 * collective has an in-place form. */
static void
matrix_drive(matrix_fn fn, int reduces, int has_inplace)
{
  static const size_t counts[] = {0, 1, 7, 4097};
  static const struct {
    collie_dtype_t d;
    collie_op_t op;
  } subset[] = {{COLLIE_FLOAT32, COLLIE_SUM},  {COLLIE_INT64, COLLIE_MAX},
                {COLLIE_BFLOAT16, COLLIE_AVG}, {COLLIE_UINT8, COLLIE_BXOR},
                {COLLIE_FLOAT16, COLLIE_PROD}, {COLLIE_INT32, COLLIE_AVG}};
  struct matrix_case k;
  memset(&k, 0, sizeof(k));
  k.comm = test_comm();
  k.rank = test_rank();
  k.size = test_size();
  int full = matrix_full(), ran_algos = 0;
  for (k.algo = 0; k.algo < COLLIE_ALGO_COUNT_; k.algo++) {
    int ran = 0;
    size_t nsub = sizeof(subset) / sizeof(subset[0]);
    size_t ncases = full ? (size_t)COLLIE_DTYPE_COUNT_ * COLLIE_OP_COUNT_ : nsub;
    for (size_t c = 0; c < ncases; c++) {
      k.dtype = full ? (collie_dtype_t)(c / COLLIE_OP_COUNT_) : subset[c].d;
      k.op = full ? (collie_op_t)(c % COLLIE_OP_COUNT_) : subset[c].op;
      if (!reduces) { /* the dtype is all that varies */
        if (full && c % COLLIE_OP_COUNT_) continue;
        k.op = COLLIE_SUM;
      }
      if (reduces && ref_is_float(k.dtype) && k.op >= COLLIE_BAND) continue;
      k.es = collie_dtype_size(k.dtype);
      for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        k.count = counts[i];
        for (k.inplace = 0; k.inplace <= has_inplace; k.inplace++) {
          int ran_case = fn(&k);
          matrix_release();
          if (!ran_case) goto next_algo; /* refused: the same for every case */
          ran = 1;
        }
      }
    }
    /* One large case per algorithm: pipelined chunks, uneven blocks. */
    k.dtype = COLLIE_FLOAT32;
    k.op = COLLIE_SUM;
    k.es = 4;
    k.count = (1u << 20) + 3;
    if (k.size > 4 && !full) k.count = (1u << 18) + 3; /* 8 ranks on 2 cores: keep it short */
    k.inplace = has_inplace;
    if (fn(&k)) ran = 1;
    matrix_release();
  next_algo:
    ran_algos += ran;
  }
  /* AUTO plus at least one named algorithm ran. */
  ASSERTF(ran_algos >= 2, "only %d algorithm(s) ran", ran_algos);
  /* Every dtype x op with the automatic choice. */
  if (!full && reduces) {
    k.algo = COLLIE_ALGO_AUTO;
    k.count = 7;
    for (int d = 0; d < COLLIE_DTYPE_COUNT_; d++)
      for (int op = 0; op < COLLIE_OP_COUNT_; op++) {
        k.dtype = (collie_dtype_t)d;
        k.op = (collie_op_t)op;
        k.es = collie_dtype_size(k.dtype);
        if (ref_is_float(k.dtype) && k.op >= COLLIE_BAND) continue;
        k.inplace = 0;
        ASSERT(fn(&k));
        matrix_release();
      }
  }
  ASSERT_OK(collie_comm_destroy(k.comm));
}

TEST_IMPL(matrix_allreduce)
{
  matrix_drive(matrix_allreduce, 1, 1);
}
TEST_IMPL(matrix_reduce)
{
  matrix_drive(matrix_reduce, 1, 1);
}
TEST_IMPL(matrix_reduce_scatter)
{
  matrix_drive(matrix_reduce_scatter, 1, 1);
}
TEST_IMPL(matrix_allgather)
{
  matrix_drive(matrix_allgather, 0, 1);
}
TEST_IMPL(matrix_allgatherv)
{
  matrix_drive(matrix_allgatherv, 0, 1);
}
TEST_IMPL(matrix_broadcast)
{
  matrix_drive(matrix_broadcast, 0, 0);
}
TEST_IMPL(matrix_alltoall)
{
  matrix_drive(matrix_alltoall, 0, 1);
}
TEST_IMPL(matrix_alltoallv)
{
  matrix_drive(matrix_alltoallv, 0, 0);
}
TEST_IMPL(matrix_gather)
{
  matrix_drive(matrix_gather, 0, 1);
}
TEST_IMPL(matrix_scatter)
{
  matrix_drive(matrix_scatter, 0, 1);
}
