/* bruck.c - Bruck's allgather and alltoall (being written). */
#include "coll/stub.h"

COLLIE_ALGO_STUB(allgather_bruck, BRUCK, ALLGATHER);
COLLIE_ALGO_STUB(alltoall_bruck, BRUCK, ALLTOALL);
