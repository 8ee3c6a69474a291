/*
 * shm_bytes_test.c - COLLIE_SHM_BYTES, the bound on a communicator's shared
 * segment, seen from the public API: with a small budget (smaller slots, a
 * smaller or no flat area) every collective still moves messages spanning
 * many slots intact, and the segment the transport laid out (its INFO line)
 * is the layout function's and within local ranks x budget; bad values fail
 * init naming the variable (and, too small, the minimum); ranks of one host
 * with different values fail init at once, naming it; and a 1 GiB allreduce
 * streams through the default segment and through the smallest one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "coll/ref.h"
#include "runner.h"
#include "transport/shm_int.h"

/* What the transport's INFO line said about the segment. */
struct sb_seg {
  int nlocal;
  size_t bytes, budget, slot, flat_kib;
};

struct sb_init {
  collie_comm_t *comm;
  collie_result_t rc;
  char err[COLLIE_ERRMSG_LEN];
};

static void
sb_init_fn(void *arg)
{
  struct sb_init *s = arg;
  s->rc = collie_comm_init(&s->comm);
  if (s->rc != COLLIE_SUCCESS) snprintf(s->err, sizeof(s->err), "%s", collie_last_error());
}

/* collie_comm_init with COLLIE_SHM_BYTES=budget (NULL: unset) and INFO
 * logging, reading the segment's line from what init logged. */
static collie_comm_t *
sb_comm(const char *budget, struct sb_seg *seg)
{
  if (budget)
    setenv("COLLIE_SHM_BYTES", budget, 1);
  else
    unsetenv("COLLIE_SHM_BYTES");
  setenv("COLLIE_DEBUG", "INFO", 1);
  struct sb_init s = {NULL, COLLIE_SUCCESS, ""};
  char *out = test_capture_stderr(sb_init_fn, &s);
  setenv("COLLIE_DEBUG", "WARN", 1);
  ASSERTF(s.rc == COLLIE_SUCCESS, "init with COLLIE_SHM_BYTES=%s: %s: %s", budget ? budget : "-",
          collie_result_string(s.rc), s.err);
  const char *p = strstr(out, "segment /collie-");
  ASSERTF(p, "no segment line in what init logged:\n%s", out);
  p = strchr(p, ':');
  unsigned nslots = 0;
  int me = -1;
  ASSERTF(p && sscanf(p,
                      ": %d local ranks (this is index %d), %zu bytes (COLLIE_SHM_BYTES=%zu per "
                      "local rank), %u x %zu-byte slots per ring, flat area of 2 x %zu KiB",
                      &seg->nlocal, &me, &seg->bytes, &seg->budget, &nslots, &seg->slot,
                      &seg->flat_kib) == 7,
          "cannot read the segment line: %s", p ? p : "(none)");
  ASSERT(nslots == COLLIE_SHM_NSLOTS && me == test_rank());
  free(out);
  return s.comm;
}

/* The segment is the layout function's for this many ranks and budget, and
 * within the bound. */
static void
sb_check_segment(const struct sb_seg *seg, size_t budget)
{
  int p = test_size();
  struct collie__shm_layout want;
  ASSERT_OK(collie__shm_layout(p, 1, budget, &want));
  ASSERT(seg->nlocal == p);
  ASSERTF(seg->budget == budget, "segment says COLLIE_SHM_BYTES=%zu, set %zu", seg->budget, budget);
  ASSERTF(seg->bytes <= (size_t)p * budget, "segment of %zu bytes, bound %d x %zu", seg->bytes, p,
          budget);
  ASSERTF(seg->bytes == want.bytes && seg->slot == want.slot_bytes &&
              seg->flat_kib * 1024 == want.flat_buf_bytes,
          "segment %zu bytes, %zu-byte slots, %zu KiB flat buffers; layout says %zu, %zu, %zu",
          seg->bytes, seg->slot, seg->flat_kib, want.bytes, want.slot_bytes, want.flat_buf_bytes);
}

/* Each collective at sizes up to 1 MiB + a bit (hundreds of small slots),
 * with the algorithms that use the rings (forced) and, when the segment has
 * a flat area, the shm-only ones; without one, naming shm_flat is refused. */
static void
sb_collectives(collie_comm_t *comm, int flat)
{
  int p = test_size(), me = test_rank();
  static const size_t counts[] = {1, 4099, 262147};
  collie_opts_t ring = {.algorithm = COLLIE_ALGO_RING};
  collie_opts_t fl = {.algorithm = COLLIE_ALGO_SHM_FLAT};
  collie_opts_t pw = {.algorithm = COLLIE_ALGO_PAIRWISE};
  const collie_opts_t *reduce_algos[] = {NULL, &ring, flat ? &fl : NULL};
  char why[256];
  for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
    size_t n = counts[k], all = n * (size_t)p;
    float *s = malloc(all * sizeof(float)), *d = malloc(all * sizeof(float));
    ASSERT(s && d);
    for (int a = 0; a < 3; a++) {
      if (a == 2 && !flat) break;
      const collie_opts_t *o = reduce_algos[a];
      ref_fill(s, n, COLLIE_FLOAT32, COLLIE_SUM, me);
      ASSERT_OK(collie_allreduce(comm, s, d, n, COLLIE_FLOAT32, COLLIE_SUM, o, NULL));
      ASSERTF(ref_check(d, n, COLLIE_FLOAT32, COLLIE_SUM, p, why, sizeof(why)) < 0,
              "allreduce of %zu (algo %d): %s", n, o ? o->algorithm : 0, why);
      /* In place too. */
      ref_fill(d, n, COLLIE_FLOAT32, COLLIE_SUM, me);
      ASSERT_OK(collie_allreduce(comm, d, d, n, COLLIE_FLOAT32, COLLIE_SUM, o, NULL));
      ASSERTF(ref_check(d, n, COLLIE_FLOAT32, COLLIE_SUM, p, why, sizeof(why)) < 0,
              "in-place allreduce of %zu (algo %d): %s", n, o ? o->algorithm : 0, why);
      /* reduce_scatter: rank me gets block me of the reduction. */
      ref_fill(s, all, COLLIE_FLOAT32, COLLIE_SUM, me);
      ASSERT_OK(collie_reduce_scatter(comm, s, d, n, COLLIE_FLOAT32, COLLIE_SUM, o, NULL));
      ASSERTF(ref_check_at(d, (size_t)me * n, n, COLLIE_FLOAT32, COLLIE_SUM, p, why, sizeof(why)) <
                  0,
              "reduce_scatter of %zu (algo %d): %s", n, o ? o->algorithm : 0, why);
    }
    const collie_opts_t *move_algos[] = {NULL, &ring, flat ? &fl : NULL};
    for (int a = 0; a < 3; a++) {
      if (a == 2 && !flat) break;
      const collie_opts_t *o = move_algos[a];
      ref_fill_pattern(s, n, COLLIE_FLOAT32, me);
      ASSERT_OK(collie_allgather(comm, s, d, n, COLLIE_FLOAT32, o, NULL));
      for (int q = 0; q < p; q++)
        ASSERTF(ref_pattern_diff(d + (size_t)q * n, n, COLLIE_FLOAT32, q) < 0,
                "allgather of %zu (algo %d): block %d wrong", n, o ? o->algorithm : 0, q);
    }
    const collie_opts_t *a2a_algos[] = {NULL, &pw, flat ? &fl : NULL};
    for (int a = 0; a < 3; a++) {
      if (a == 2 && !flat) break;
      const collie_opts_t *o = a2a_algos[a];
      for (int q = 0; q < p; q++)
        ref_fill_pattern(s + (size_t)q * n, n, COLLIE_FLOAT32, me * p + q);
      ASSERT_OK(collie_alltoall(comm, s, d, n, COLLIE_FLOAT32, o, NULL));
      for (int q = 0; q < p; q++)
        ASSERTF(ref_pattern_diff(d + (size_t)q * n, n, COLLIE_FLOAT32, q * p + me) < 0,
                "alltoall of %zu (algo %d): block from %d wrong", n, o ? o->algorithm : 0, q);
    }
    for (int root = 0; root<p; root += p - 1> 0 ? p - 1 : 1) {
      if (me == root)
        ref_fill_pattern(d, n, COLLIE_FLOAT32, 77 + root);
      else
        memset(d, 0, n * sizeof(float));
      ASSERT_OK(collie_broadcast(comm, d, n, COLLIE_FLOAT32, root, NULL, NULL));
      ASSERTF(ref_pattern_diff(d, n, COLLIE_FLOAT32, 77 + root) < 0,
              "broadcast of %zu from %d wrong", n, root);
    }
    free(s);
    free(d);
  }
  if (!flat) {
    float x = 1;
    ASSERT_RC(COLLIE_INVALID_ARGUMENT, "shm_flat",
              collie_allreduce(comm, &x, &x, 1, COLLIE_FLOAT32, COLLIE_SUM, &fl, NULL));
  }
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
}

/* The collectives with COLLIE_SHM_BYTES=budget, slots only (no single-copy
 * shortcut, so every byte crosses the small slots). */
static void
sb_run(size_t budget, int expect_flat)
{
  char v[32];
  snprintf(v, sizeof(v), "%zu", budget);
  setenv("COLLIE_SHM_CMA_MIN", "0", 1);
  struct sb_seg seg;
  collie_comm_t *comm = sb_comm(v, &seg);
  sb_check_segment(&seg, budget);
  ASSERTF(seg.slot < COLLIE_SHM_SLOT_BYTES_DEFAULT, "budget %zu kept %zu-byte slots", budget,
          seg.slot);
  ASSERTF((seg.flat_kib > 0) == expect_flat, "budget %zu: flat area of 2 x %zu KiB", budget,
          seg.flat_kib);
  sb_collectives(comm, expect_flat);
  ASSERT_OK(collie_comm_destroy(comm));
}

/* The smallest budget 4 ranks accept: 4 KiB slots, no flat area at 4 ranks,
 * and no flat area (but 8 KiB slots) at 2. */
TEST_IMPL(shm_bytes_min4)
{
  sb_run(collie__shm_layout_min(4), 0);
}

/* 1 MiB per rank: smaller slots and a smaller flat area, kept. */
TEST_IMPL(shm_bytes_1mib)
{
  sb_run((size_t)1 << 20, 1);
}

/* Unset: today's geometry, and its segment's line says so. */
TEST_IMPL(shm_bytes_default)
{
  struct sb_seg seg;
  collie_comm_t *comm = sb_comm(NULL, &seg);
  sb_check_segment(&seg, COLLIE_SHM_BYTES_DEFAULT);
  ASSERT(seg.slot == 64 * 1024 && seg.flat_kib == 1024);
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Malformed, non-positive and too small values fail init with a message
 * naming the variable and the value (and, too small, the minimum). */
TEST_IMPL(shm_bytes_bad_env)
{
  collie_comm_t *comm = NULL;
  static const char *const malformed[] = {"abc", "64M", "", "99999999999999999999G",
                                          "99999999999999999999"};
  char want[96];
  for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
    setenv("COLLIE_SHM_BYTES", malformed[i], 1);
    snprintf(want, sizeof(want), "COLLIE_SHM_BYTES=\"%s\" is not an integer", malformed[i]);
    ASSERT_RC(COLLIE_INVALID_ARGUMENT, want, collie_comm_init(&comm));
    ASSERT(comm == NULL);
  }
  static const char *const nonpositive[] = {"0", "-1", "-99999"};
  for (size_t i = 0; i < sizeof(nonpositive) / sizeof(nonpositive[0]); i++) {
    setenv("COLLIE_SHM_BYTES", nonpositive[i], 1);
    snprintf(want, sizeof(want), "COLLIE_SHM_BYTES=%s must be > 0", nonpositive[i]);
    ASSERT_RC(COLLIE_INVALID_ARGUMENT, want, collie_comm_init(&comm));
    ASSERT(comm == NULL);
  }
  /* Too small: found when the segment is laid out (the minimum depends on
   * the local rank count), on every rank of the host alike, and fast. */
  setenv("COLLIE_SHM_BYTES", "1", 1);
  size_t min = collie__shm_layout_min(test_size());
  snprintf(want, sizeof(want), "set COLLIE_SHM_BYTES >= %zu", min);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, want, collie_comm_init(&comm));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  ASSERT(comm == NULL);
  ASSERT(strstr(collie_last_error(), "COLLIE_SHM_BYTES=1 is too small"));
  double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  ASSERTF(dt < 5.0, "the refusal took %.2f s", dt);
  unsetenv("COLLIE_SHM_BYTES");
}

/* Ranks of one host with different budgets (different layouts) fail init
 * at once on both sides, naming COLLIE_SHM_BYTES, instead of waiting for
 * the setup deadline. Rank 0 (the leader) keeps the default. */
TEST_IMPL(shm_bytes_mismatch)
{
  char v[32];
  snprintf(v, sizeof(v), "%zu", collie__shm_layout_min(test_size()));
  if (test_rank() == 1)
    setenv("COLLIE_SHM_BYTES", v, 1);
  else
    unsetenv("COLLIE_SHM_BYTES");
  collie_comm_t *comm = NULL;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  collie_result_t rc = collie_comm_init(&comm);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  ASSERTF(rc != COLLIE_SUCCESS, "init succeeded with different COLLIE_SHM_BYTES");
  ASSERT(comm == NULL);
  const char *msg = collie_last_error();
  ASSERTF(strstr(msg, "COLLIE_SHM_BYTES") && strstr(msg, "same"), "message: %s", msg);
  /* The leader hears of the mismatch from rank 1 one of two ways, whichever comes first: rank
   * 1's refusal written into the segment ("refused"), or its note in the store that it gave
   * up (setup_fail.c). Either names rank 1 and its budget. */
  if (test_rank() == 0)
    ASSERTF((strstr(msg, "refused the shared-memory segment") || strstr(msg, "gave up")) &&
                strstr(msg, "rank 1") && strstr(msg, v),
            "message: %s", msg);
  double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  ASSERTF(dt < 5.0, "the failure took %.2f s", dt);
}

/* ---- 1 GiB ---- */

/* A 1 GiB float32 allreduce in place, the buffer the only large memory:
 * small integers, so every sum is exact; checked at both ends, around the
 * middle, and every 1 Mi-th element. */
static void
sb_large(const char *budget, const char *cma_min)
{
  struct sb_seg seg;
  setenv("COLLIE_SHM_CMA_MIN", cma_min, 1);
  collie_comm_t *comm = sb_comm(budget, &seg);
  size_t b = budget ? strtoull(budget, NULL, 10) : COLLIE_SHM_BYTES_DEFAULT;
  sb_check_segment(&seg, b);
  int p = test_size(), me = test_rank();
  size_t n = ((size_t)1 << 30) / sizeof(float);
  float *buf = malloc(n * sizeof(float));
  ASSERT(buf);
  for (size_t i = 0; i < n; i++) buf[i] = (float)((i % 61) + (size_t)me * 3);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ASSERT_OK(collie_allreduce(comm, buf, buf, n, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  size_t pick[3] = {0, n / 2 - 32, n - 64};
  for (int k = 0; k < 3; k++)
    for (size_t i = pick[k]; i < pick[k] + 64; i++) {
      float want = (float)((size_t)p * (i % 61) + 3 * (size_t)p * (size_t)(p - 1) / 2);
      ASSERTF(buf[i] == want, "element %zu is %g, want %g", i, (double)buf[i], (double)want);
    }
  for (size_t i = 0; i < n; i += (size_t)1 << 20) {
    float want = (float)((size_t)p * (i % 61) + 3 * (size_t)p * (size_t)(p - 1) / 2);
    ASSERTF(buf[i] == want, "element %zu is %g, want %g", i, (double)buf[i], (double)want);
  }
  /* Nothing else grew with the message: the buffer, the segment, a little. */
  struct rusage ru;
  ASSERT(getrusage(RUSAGE_SELF, &ru) == 0);
  size_t peak = (size_t)ru.ru_maxrss * 1024;
  fprintf(stderr, "rank %d: 1 GiB allreduce in %.3f s, %zu-byte segment, peak RSS %zu MiB\n", me,
          dt, seg.bytes, peak >> 20);
  ASSERTF(peak < ((size_t)1 << 30) + seg.bytes + ((size_t)64 << 20),
          "peak RSS %zu bytes for a 1 GiB buffer and a %zu-byte segment", peak, seg.bytes);
  free(buf);
  ASSERT_OK(collie_comm_destroy(comm));
}

/* The default budget: 64 KiB slots and the 1 MiB flat area. */
TEST_IMPL(large_allreduce_1gib)
{
  sb_large(NULL, "65536");
}

/* The smallest segment 2 ranks accept (4 KiB slots, no flat area), every
 * byte through the slots. */
TEST_IMPL(large_allreduce_1gib_small)
{
  char v[32];
  snprintf(v, sizeof(v), "%zu", collie__shm_layout_min(test_size()));
  sb_large(v, "0");
}
