/*
 * a2a_test.c - what the collective matrix does not reach for alltoall(v):
 * alltoallv in place (sendbuf == recvbuf, send and receive regions laid out
 * differently in one buffer), ranks that disagree on in-place alltoall with
 * blocks larger than a pairwise chunk, a rank's block to itself whose
 * send and receive counts differ, and counts that disagree between two
 * ranks on different hosts yet add up alike per host.
 */
#include <stdlib.h>
#include <string.h>

#include "coll/ref.h"
#include "runner.h"

/* Elements rank a sends to rank b: some zero, some above a 256 KiB chunk. */
static size_t
a2a_vcount(int a, int b, size_t big)
{
  switch ((a * 7 + b * 3) % 5) {
  case 0:
    return 0;
  case 1:
    return 1;
  case 2:
    return 13;
  case 3:
    return big;
  default:
    return big / 3 + 5;
  }
}

/* alltoallv with sendbuf == recvbuf: send blocks packed forward, receive
 * blocks packed backward over the same bytes, so receives overwrite data
 * still to be sent unless the algorithm stages it. */
static void
a2a_v_inplace_case(collie_comm_t *comm, collie_dtype_t d, size_t big)
{
  int p = collie_comm_size(comm), me = collie_comm_rank(comm);
  size_t es = collie_dtype_size(d);
  size_t *sc = calloc((size_t)p, sizeof(size_t)), *sd = calloc((size_t)p, sizeof(size_t));
  size_t *rc = calloc((size_t)p, sizeof(size_t)), *rd = calloc((size_t)p, sizeof(size_t));
  ASSERT(sc && sd && rc && rd);
  size_t st = 0, rt = 0;
  for (int q = 0; q < p; q++) {
    sc[q] = a2a_vcount(me, q, big);
    rc[q] = a2a_vcount(q, me, big);
    /* The block to itself must match: make it so. */
    if (q == me) rc[q] = sc[q];
    sd[q] = st;
    st += sc[q];
  }
  for (int q = p - 1; q >= 0; q--) {
    rd[q] = rt;
    rt += rc[q];
  }
  size_t total = st > rt ? st : rt;
  char *buf = malloc(total * es + 1);
  ASSERT(buf);
  for (int q = 0; q < p; q++) ref_fill_pattern(buf + sd[q] * es, sc[q], d, me * p + q);
  collie_opts_t o = {.algorithm = COLLIE_ALGO_PAIRWISE};
  ASSERT_OK(collie_alltoallv(comm, buf, sc, sd, buf, rc, rd, d, &o, NULL));
  for (int q = 0; q < p; q++) {
    long bad = ref_pattern_diff(buf + rd[q] * es, rc[q], d, q * p + me);
    ASSERTF(bad < 0, "%s, big %zu: block from rank %d wrong at element %ld", collie_dtype_name(d),
            big, q, bad);
  }
  free(buf);
  free(sc);
  free(sd);
  free(rc);
  free(rd);
}

TEST_IMPL(a2a_alltoallv_inplace)
{
  collie_comm_t *comm = test_comm();
  a2a_v_inplace_case(comm, COLLIE_FLOAT32, 7);
  a2a_v_inplace_case(comm, COLLIE_UINT8, 300000);  /* blocks of two chunks and more */
  a2a_v_inplace_case(comm, COLLIE_FLOAT64, 70000); /* blocks across chunk boundaries */
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Odd ranks in place, even ranks not: the pairwise exchange posts the same
 * messages either way (a chunked, staged swap), and Bruck does not care. */
TEST_IMPL(a2a_alltoall_mixed_inplace)
{
  static const int algos[] = {COLLIE_ALGO_PAIRWISE, COLLIE_ALGO_BRUCK, COLLIE_ALGO_AUTO};
  static const size_t counts[] = {1, 5, 100003}; /* 100003 floats: two chunks per block */
  collie_comm_t *comm = test_comm();
  int p = collie_comm_size(comm), me = collie_comm_rank(comm), inplace = me % 2;
  for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++)
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
      size_t n = counts[i], b = n * 4;
      char *s = malloc(b * (size_t)p + 64), *r = inplace ? s : malloc(b * (size_t)p + 64);
      ASSERT(s && r);
      for (int q = 0; q < p; q++)
        ref_fill_pattern(s + (size_t)q * b, n, COLLIE_FLOAT32, me * p + q);
      memset(r + b * (size_t)p, 0x6b, 64);
      collie_opts_t o = {.algorithm = algos[a]};
      ASSERT_OK(collie_alltoall(comm, s, r, n, COLLIE_FLOAT32, &o, NULL));
      for (int q = 0; q < p; q++) {
        long bad = ref_pattern_diff(r + (size_t)q * b, n, COLLIE_FLOAT32, q * p + me);
        ASSERTF(bad < 0, "algorithm %d, count %zu, %s: block from rank %d wrong at %ld", algos[a],
                n, inplace ? "in place" : "out of place", q, bad);
      }
      for (int k = 0; k < 64; k++) ASSERTF((unsigned char)r[b * (size_t)p + k] == 0x6b, "overrun");
      /* out of place leaves sendbuf alone */
      if (!inplace)
        for (int q = 0; q < p; q++)
          ASSERT(ref_pattern_diff(s + (size_t)q * b, n, COLLIE_FLOAT32, me * p + q) < 0);
      free(s);
      if (!inplace) free(r);
    }
  ASSERT_OK(collie_comm_destroy(comm));
}

/* A rank's block to itself with different send and receive counts is an
 * argument error, named, on every rank that passed it (here: all of them). */
TEST_IMPL(a2a_alltoallv_self_mismatch)
{
  collie_comm_t *comm = test_comm();
  int p = collie_comm_size(comm), me = collie_comm_rank(comm);
  size_t *sc = calloc((size_t)p, sizeof(size_t)), *rc = calloc((size_t)p, sizeof(size_t));
  size_t *dz = calloc((size_t)p, sizeof(size_t));
  float s[4] = {0}, r[4] = {0};
  ASSERT(sc && rc && dz);
  sc[me] = 1;
  rc[me] = 2;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "differs from recvcounts",
            collie_alltoallv(comm, s, sc, dz, r, rc, dz, COLLIE_FLOAT32, NULL, NULL));
  /* Found before any communication: the communicator is still usable. */
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  free(sc);
  free(rc);
  free(dz);
  collie_comm_destroy(comm);
}

/* On hosts {0,2} and {1,3}: ranks 0 and 2 send rank 1 three elements and
 * one, rank 1 expects two of each. The hierarchical exchange carries both
 * blocks in one message whose length matches; rank 1 must still refuse the
 * split (the blocks would land in the wrong place), naming rank 0. The
 * others had what they expected. */
TEST_IMPL(a2a_alltoallv_pair_mismatch)
{
  collie_comm_t *comm = test_comm();
  int p = collie_comm_size(comm), me = collie_comm_rank(comm);
  ASSERT(p == 4);
  size_t sc[4], sd[4], rc[4], rd[4];
  for (int q = 0; q < 4; q++) {
    sc[q] = rc[q] = 2;
    sd[q] = rd[q] = (size_t)q * 4;
  }
  if (me == 0) sc[1] = 3;
  if (me == 2) sc[1] = 1;
  float s[16] = {0}, r[16] = {0};
  collie_opts_t o = {.algorithm = COLLIE_ALGO_HIERARCHICAL};
  collie_result_t got = collie_alltoallv(comm, s, sc, sd, r, rc, rd, COLLIE_FLOAT32, &o, NULL);
  if (me == 1) {
    ASSERTF(got == COLLIE_INVALID_USAGE, "rank 1: %s: %s", collie_result_string(got),
            collie_last_error());
    ASSERTF(strstr(collie_last_error(), "rank 0 sends this rank 3 elements, but recvcounts[0] "
                                        "here is 2"),
            "rank 1: %s", collie_last_error());
  } else {
    ASSERT_OK(got);
  }
  collie_comm_destroy(comm);
}
