/* composite.c - collectives built from two others (being written). */
#include "coll/stub.h"

COLLIE_ALGO_STUB(broadcast_scatter_allgather, SCATTER_ALLGATHER, BROADCAST);
COLLIE_ALGO_STUB(reduce_reduce_scatter_gather, REDUCE_SCATTER_GATHER, REDUCE);
