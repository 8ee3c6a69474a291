/*
 * wire.c - the wire model: how many bytes one rank moves for a call, by the
 * ring algorithm's traffic. These are the bytes nccl-tests divides by time
 * for bus bandwidth, so comms.csv's effective bandwidth reads like a busbw
 * figure whatever algorithm actually ran (docs/telemetry.md has the table).
 */
#include "telemetry/telemetry.h"

static const char *const wire_columns[COLLIE_COLL_COUNT_] = {
#define COLLIE_XX_(name, column) column,
    COLLIE_COLLECTIVE_MAP(COLLIE_XX_)
#undef COLLIE_XX_
};

const char *
collie__tc_column(int tc)
{
  return tc >= 0 && tc < COLLIE_COLL_COUNT_ ? wire_columns[tc] : "?";
}

/* size * num / den without overflow for any size below 2^64 and small p. */
static uint64_t
wire_scale(uint64_t size, uint64_t num, uint64_t den)
{
  return (uint64_t)((unsigned __int128)size * num / den);
}

uint64_t
collie__wire_bytes(int tc, int p, uint64_t size)
{
  uint64_t n = p > 0 ? (uint64_t)p : 1;
  switch (tc) {
  case COLLIE_COLL_ALLREDUCE:
    return wire_scale(size, 2 * (n - 1), n);
  case COLLIE_COLL_ALLGATHER: /* size: the rank's shard */
  case COLLIE_COLL_REDUCE_SCATTER:
  case COLLIE_COLL_GATHER:
  case COLLIE_COLL_SCATTER:
    return wire_scale(size, n - 1, 1);
  case COLLIE_COLL_ALLTOALL: /* size: the whole send buffer of p blocks */
    return wire_scale(size, n - 1, n);
  case COLLIE_COLL_BROADCAST:
  case COLLIE_COLL_REDUCE:
  case COLLIE_COLL_SEND_RECV:
    return size;
  default:
    return 0;
  }
}
