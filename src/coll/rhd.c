/* rhd.c - recursive halving and doubling (being written). */
#include "coll/stub.h"

COLLIE_ALGO_STUB(allreduce_recursive_doubling, RECURSIVE_DOUBLING, ALLREDUCE);
COLLIE_ALGO_STUB(allreduce_rabenseifner, RABENSEIFNER, ALLREDUCE);
COLLIE_ALGO_STUB(allgather_recursive_doubling, RECURSIVE_DOUBLING, ALLGATHER);
COLLIE_ALGO_STUB(reduce_scatter_recursive_halving, RECURSIVE_HALVING, REDUCE_SCATTER);
