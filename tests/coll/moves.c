/* moves.c - see moves.h. */
#include <string.h>

#include "coll/moves.h"
#include "coll/ref.h"
#include "runner.h"

void
moves_check(collie_comm_t *comm, float *s, float *d, size_t n, const collie_opts_t *rooted)
{
  int p = test_size(), me = test_rank();
  /* allgather: rank q's block is pattern q */
  ref_fill_pattern(s, n, COLLIE_FLOAT32, me);
  ASSERT_OK(collie_allgather(comm, s, d, n, COLLIE_FLOAT32, NULL, NULL));
  for (int q = 0; q < p; q++)
    ASSERTF(ref_pattern_diff(d + (size_t)q * n, n, COLLIE_FLOAT32, q) < 0,
            "allgather of %zu: block %d wrong", n, q);
  /* alltoall: block q of rank me is pattern me*p+q, lands in block me of q */
  for (int q = 0; q < p; q++) ref_fill_pattern(s + (size_t)q * n, n, COLLIE_FLOAT32, me * p + q);
  ASSERT_OK(collie_alltoall(comm, s, d, n, COLLIE_FLOAT32, NULL, NULL));
  for (int q = 0; q < p; q++)
    ASSERTF(ref_pattern_diff(d + (size_t)q * n, n, COLLIE_FLOAT32, q * p + me) < 0,
            "alltoall of %zu: block from %d wrong", n, q);
  /* broadcast from the last rank, out of s */
  if (me == p - 1)
    ref_fill_pattern(s, n, COLLIE_FLOAT32, 77);
  else
    memset(s, 0, n * sizeof(float));
  ASSERT_OK(collie_broadcast(comm, s, n, COLLIE_FLOAT32, p - 1, NULL, NULL));
  ASSERTF(ref_pattern_diff(s, n, COLLIE_FLOAT32, 77) < 0, "broadcast of %zu wrong", n);
  /* scatter and gather, rooted at rank 0 */
  if (me == 0)
    for (int q = 0; q < p; q++) ref_fill_pattern(s + (size_t)q * n, n, COLLIE_FLOAT32, 40 + q);
  memset(d, 0, n * sizeof(float));
  ASSERT_OK(collie_scatter(comm, s, d, n, COLLIE_FLOAT32, 0, rooted, NULL));
  ASSERTF(ref_pattern_diff(d, n, COLLIE_FLOAT32, 40 + me) < 0, "scatter of %zu wrong", n);
  ref_fill_pattern(s, n, COLLIE_FLOAT32, 60 + me);
  if (me == 0) memset(d, 0, n * (size_t)p * sizeof(float));
  ASSERT_OK(collie_gather(comm, s, d, n, COLLIE_FLOAT32, 0, rooted, NULL));
  for (int q = 0; q < p && me == 0; q++)
    ASSERTF(ref_pattern_diff(d + (size_t)q * n, n, COLLIE_FLOAT32, 60 + q) < 0,
            "gather of %zu: block %d wrong", n, q);
}
