/* bootstrap_test.h - helpers shared by the bootstrap tests (bootstrap_*.c). */
#ifndef COLLIE_TEST_BOOTSTRAP_H
#define COLLIE_TEST_BOOTSTRAP_H

#include "bootstrap/bootstrap.h"

/* Runs the multi-rank store scenario on s: every rank sets its keys (one of
 * bigval bytes), reads everyone's, bumps a counter that must reach size, then
 * waits at a store barrier. */
void bootstrap_test_exercise(collie__store_t *s, int rank, int size, size_t bigval);
/* Every rank adds 1 to key, then waits until it reads size (polling add 0). */
void bootstrap_test_barrier(collie__store_t *s, const char *key, int size);
/* The last store call of a rank: rank 0 (a tcp server) returns only after every
 * rank has called it, so no rank loses the server while it still needs it. */
void bootstrap_test_finish(collie__store_t *s, int rank, int size);
/* Fills buf with a pattern that depends on seed. */
void bootstrap_test_fill(unsigned char *buf, size_t n, unsigned seed);

#endif
