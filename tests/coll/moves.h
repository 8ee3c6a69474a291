/*
 * moves.h - one check of every collective that only moves data (allgather,
 * alltoall, broadcast, scatter, gather), for tests that vary where the
 * buffers live or how the transport copies them.
 */
#ifndef COLLIE_TEST_MOVES_H
#define COLLIE_TEST_MOVES_H

#include <stddef.h>

#include "collie.h"

/* Runs each data-moving collective once on n float32 per block and asserts
 * every received block: s and d hold n x size floats each (s is the source,
 * and broadcast's buffer; d the destination). scatter and gather are rooted
 * at rank 0 with rooted (NULL: collie's pick), broadcast at the last rank. */
void moves_check(collie_comm_t *comm, float *s, float *d, size_t n, const collie_opts_t *rooted);

#endif
