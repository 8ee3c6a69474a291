/* linear.c - root talks to every rank directly (being written). */
#include "coll/stub.h"

COLLIE_ALGO_STUB(gather_linear, LINEAR, GATHER);
COLLIE_ALGO_STUB(scatter_linear, LINEAR, SCATTER);
