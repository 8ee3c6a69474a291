/* shm_flat.c - the shm-only family (being written). */
#include "coll/stub.h"

COLLIE_ALGO_STUB(allreduce_shm_flat, SHM_FLAT, ALLREDUCE);
COLLIE_ALGO_STUB(reduce_scatter_shm_flat, SHM_FLAT, REDUCE_SCATTER);
COLLIE_ALGO_STUB(barrier_shm_flat, SHM_FLAT, BARRIER);
