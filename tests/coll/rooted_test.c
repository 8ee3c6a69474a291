/*
 * rooted_test.c - the rooted collectives (broadcast, reduce, gather,
 * scatter) from every root, with every algorithm of the tree, chain and
 * composite families, on the rank counts the binomial tree finds awkward
 * (6 and 7: subtrees cut short, ranges that wrap from rank p-1 to 0).
 *
 * The matrix test picks one root per count; here every root runs counts
 * below p (empty blocks), between p and 2p, and one that spans several
 * pipeline chunks, in place and out of place, with NULL for the root-only
 * buffer on every non-root. Wrong placement of a wrapped range, a missed
 * chunk or a write past the end shows as a wrong element or a touched guard.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/ref.h"
#include "runner.h"

#define ROOTED_GUARD 0x5a

struct rooted {
  collie_comm_t *comm;
  int rank, size, root, algo, inplace;
  size_t count;
};

static char *
rooted_alloc(size_t bytes)
{
  char *p = malloc(bytes + 64);
  ASSERT(p);
  memset(p, ROOTED_GUARD, bytes + 64);
  return p;
}

static void
rooted_expect_pattern(const struct rooted *k, const char *what, const void *got, size_t n, int src)
{
  int32_t *want = malloc(n * 4 + 4);
  ASSERT(want);
  ref_fill_pattern(want, n, COLLIE_INT32, src);
  for (size_t i = 0; i < n; i++)
    ASSERTF(!memcmp((const char *)got + i * 4, &want[i], 4),
            "%s: algorithm %d, root %d, count %zu, %s: element %zu of block %d wrong", what,
            k->algo, k->root, k->count, k->inplace ? "in place" : "out of place", i, src);
  free(want);
}

static void
rooted_expect_guard(const struct rooted *k, const char *what, const char *p)
{
  for (int i = 0; i < 64; i++)
    ASSERTF((unsigned char)p[i] == ROOTED_GUARD,
            "%s: algorithm %d, root %d, count %zu: wrote past the end", what, k->algo, k->root,
            k->count);
}

static void
rooted_broadcast(const struct rooted *k)
{
  collie_opts_t o = {.algorithm = k->algo};
  char *buf = rooted_alloc(k->count * 4);
  if (k->rank == k->root) ref_fill_pattern(buf, k->count, COLLIE_INT32, k->root);
  ASSERT_OK(collie_broadcast(k->comm, buf, k->count, COLLIE_INT32, k->root, &o, NULL));
  rooted_expect_pattern(k, "broadcast", buf, k->count, k->root);
  rooted_expect_guard(k, "broadcast", buf + k->count * 4);
  free(buf);
}

static void
rooted_reduce(const struct rooted *k, collie_op_t op)
{
  collie_opts_t o = {.algorithm = k->algo};
  size_t b = k->count * 4;
  int root = k->rank == k->root;
  char *s = rooted_alloc(b), *r = k->inplace ? s : rooted_alloc(b), why[200];
  ref_fill(s, k->count, COLLIE_INT32, op, k->rank);
  ASSERT_OK(
      collie_reduce(k->comm, s, root ? r : NULL, k->count, COLLIE_INT32, op, k->root, &o, NULL));
  if (root) {
    ASSERTF(ref_check(r, k->count, COLLIE_INT32, op, k->size, why, sizeof(why)) < 0,
            "reduce %s: algorithm %d, root %d, count %zu, %s: %s", collie_op_name(op), k->algo,
            k->root, k->count, k->inplace ? "in place" : "out of place", why);
    rooted_expect_guard(k, "reduce", r + b);
  }
  if (!k->inplace) free(r);
  free(s);
}

static void
rooted_gather(const struct rooted *k)
{
  collie_opts_t o = {.algorithm = k->algo};
  size_t b = k->count * 4, p = (size_t)k->size;
  int root = k->rank == k->root;
  char *r = root ? rooted_alloc(b * p) : NULL;
  char *s = root && k->inplace ? r + (size_t)k->root * b : rooted_alloc(b);
  ref_fill_pattern(s, k->count, COLLIE_INT32, k->rank);
  ASSERT_OK(collie_gather(k->comm, s, r, k->count, COLLIE_INT32, k->root, &o, NULL));
  if (root) {
    for (int q = 0; q < k->size; q++)
      rooted_expect_pattern(k, "gather", r + (size_t)q * b, k->count, q);
    rooted_expect_guard(k, "gather", r + p * b);
  } else {
    rooted_expect_pattern(k, "gather (sendbuf kept)", s, k->count, k->rank);
  }
  if (!(root && k->inplace)) free(s);
  free(r);
}

static void
rooted_scatter(const struct rooted *k)
{
  collie_opts_t o = {.algorithm = k->algo};
  size_t b = k->count * 4, p = (size_t)k->size;
  int root = k->rank == k->root;
  char *s = root ? rooted_alloc(b * p) : NULL;
  char *r = root && k->inplace ? s + (size_t)k->root * b : rooted_alloc(b);
  if (root)
    for (size_t q = 0; q < p; q++) ref_fill_pattern(s + q * b, k->count, COLLIE_INT32, (int)q);
  ASSERT_OK(collie_scatter(k->comm, s, r, k->count, COLLIE_INT32, k->root, &o, NULL));
  rooted_expect_pattern(k, "scatter", r, k->count, k->rank);
  if (root) /* the root's sendbuf is input only */
    for (size_t q = 0; q < p; q++)
      rooted_expect_pattern(k, "scatter (sendbuf kept)", s + q * b, k->count, (int)q);
  if (!(root && k->inplace)) {
    rooted_expect_guard(k, "scatter", r + b);
    free(r);
  }
  free(s);
}

TEST_IMPL(rooted_every_root)
{
  struct rooted k;
  memset(&k, 0, sizeof(k));
  k.comm = test_comm();
  k.rank = test_rank();
  k.size = test_size();
  size_t p = (size_t)k.size;
  /* Below p (empty blocks), between p and 2p (uneven blocks), several
   * 256 KiB pipeline chunks of int32 (reduce, chain, broadcast). */
  const size_t counts[] = {0, p - 1, 2 * p - 1, 3 * 65536 + 5};
  const int bcast[] = {COLLIE_ALGO_TREE, COLLIE_ALGO_SCATTER_ALLGATHER, COLLIE_ALGO_CHAIN};
  const int reduce[] = {COLLIE_ALGO_TREE, COLLIE_ALGO_REDUCE_SCATTER_GATHER};
  for (k.root = 0; k.root < k.size; k.root++)
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
      k.count = counts[c];
      k.inplace = 0;
      for (size_t a = 0; a < sizeof(bcast) / sizeof(bcast[0]); a++) {
        k.algo = bcast[a];
        rooted_broadcast(&k);
      }
      for (k.inplace = 0; k.inplace <= 1; k.inplace++) {
        for (size_t a = 0; a < sizeof(reduce) / sizeof(reduce[0]); a++) {
          k.algo = reduce[a];
          rooted_reduce(&k, (k.root + (int)c) % 2 ? COLLIE_SUM : COLLIE_AVG);
        }
        k.algo = COLLIE_ALGO_TREE;
        rooted_gather(&k);
        rooted_scatter(&k);
      }
    }
  ASSERT_OK(collie_comm_destroy(k.comm));
}

/* Naming an algorithm of another collective is an argument error found
 * before any communication: the communicator stays usable. */
TEST_IMPL(rooted_wrong_algorithm)
{
  collie_comm_t *comm = test_comm();
  int32_t v = test_rank(), out = -1;
  collie_opts_t chain = {.algorithm = COLLIE_ALGO_CHAIN};
  collie_opts_t sag = {.algorithm = COLLIE_ALGO_SCATTER_ALLGATHER};
  collie_opts_t rsg = {.algorithm = COLLIE_ALGO_REDUCE_SCATTER_GATHER};
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "chain",
            collie_reduce(comm, &v, &out, 1, COLLIE_INT32, COLLIE_SUM, 0, &chain, NULL));
  ASSERT_RC(
      COLLIE_INVALID_ARGUMENT, "scatter_allgather",
      collie_gather(comm, &v, test_rank() == 0 ? &out : NULL, 1, COLLIE_INT32, 0, &sag, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "reduce_scatter_gather",
            collie_broadcast(comm, &v, 1, COLLIE_INT32, 0, &rsg, NULL));
  /* Still usable, and the named algorithms run where they belong. */
  ASSERT_OK(collie_reduce(comm, &v, &out, 1, COLLIE_INT32, COLLIE_SUM, 0, &rsg, NULL));
  if (test_rank() == 0) ASSERT(out == test_size() * (test_size() - 1) / 2);
  v = test_rank() == 0 ? 77 : 0;
  ASSERT_OK(collie_broadcast(comm, &v, 1, COLLIE_INT32, 0, &chain, NULL));
  ASSERT(v == 77);
  ASSERT_OK(collie_comm_destroy(comm));
}
