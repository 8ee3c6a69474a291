/* chain.c - pipelined chain broadcast (being written). */
#include "coll/stub.h"

COLLIE_ALGO_STUB(broadcast_chain, CHAIN, BROADCAST);
