/* pairwise.c - pairwise-exchange alltoall(v) (being written). */
#include "coll/stub.h"

COLLIE_ALGO_STUB(alltoall_pairwise, PAIRWISE, ALLTOALL);
COLLIE_ALGO_STUB(alltoallv_pairwise, PAIRWISE, ALLTOALLV);
