/*
 * kinds.h - the one list of operation kinds. A kind tags every message of a
 * collective (transport's slots), picks its algorithms (coll's table), and
 * says what telemetry charges it to: the comms.csv collective (collie.h's
 * COLLIE_COLLECTIVE_MAP) and the operation name of the timing log. Adding a
 * collective is one line here (and one in collie.h when it needs a comms.csv
 * column of its own).
 */
#ifndef COLLIE_UTIL_KINDS_H
#define COLLIE_UTIL_KINDS_H

#include "collie.h"

/* XX(name, text, collective, timing-log operation). text is what slots,
 * logs, COLLIE_ALGO and tuning files say; collective is a COLLIE_COLL_* name
 * (COUNT_: none, the kind is never charged); a send/recv's operation is SEND
 * or RECV by its direction (dispatch.c). */
#define COLLIE_KIND_MAP(XX)                                                                        \
  XX(NONE, "none", COUNT_, "")                                                                     \
  XX(ALLREDUCE, "allreduce", ALLREDUCE, "ALLREDUCE")                                               \
  XX(ALLGATHER, "allgather", ALLGATHER, "ALLGATHER")                                               \
  XX(ALLGATHERV, "allgatherv", ALLGATHER, "ALLGATHER")                                             \
  XX(REDUCE_SCATTER, "reduce_scatter", REDUCE_SCATTER, "REDUCE_SCATTER")                           \
  XX(BROADCAST, "broadcast", BROADCAST, "BCAST")                                                   \
  XX(REDUCE, "reduce", REDUCE, "REDUCE")                                                           \
  XX(ALLTOALL, "alltoall", ALLTOALL, "ALLTOALL")                                                   \
  XX(ALLTOALLV, "alltoallv", ALLTOALL, "ALLTOALL")                                                 \
  XX(GATHER, "gather", GATHER, "GATHER")                                                           \
  XX(SCATTER, "scatter", SCATTER, "SCATTER")                                                       \
  XX(BARRIER, "barrier", BARRIER, "BARRIER")                                                       \
  XX(P2P, "send/recv", SEND_RECV, "SEND")                                                          \
  XX(SPARSE_ALLREDUCE, "sparse_allreduce", ALLREDUCE, "ALLREDUCE")                                 \
  XX(WINDOW, "window", COUNT_, "")                                                                 \
  XX(INTERNAL, "internal", COUNT_, "")

typedef enum {
#define COLLIE_XX_(name, str, coll, op) COLLIE_KIND_##name,
  COLLIE_KIND_MAP(COLLIE_XX_)
#undef COLLIE_XX_
      COLLIE_KIND_COUNT_
} collie__kind_t;

/* "allreduce", ...; "unknown" outside the enum. */
const char *collie__kind_name(int kind);
/* The comms.csv collective a kind is charged to (COLLIE_COLL_COUNT_: none). */
collie_collective_t collie__kind_collective(int kind);
/* The timing log's operation name ("ALLREDUCE", "BCAST", ...; "" for none). */
const char *collie__kind_opname(int kind);

#endif /* COLLIE_UTIL_KINDS_H */
