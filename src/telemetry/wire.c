/*
 * wire.c - the wire model: how many bytes one rank moves for a call, by the
 * ring algorithm's traffic. These are the bytes nccl-tests divides by time
 * for bus bandwidth, so comms.csv's effective bandwidth reads like a busbw
 * figure whatever algorithm actually ran (docs/telemetry.md has the table).
 */
#include "telemetry/telemetry.h"

static const char *const wire_columns[COLLIE_TC_COUNT_] = {
    "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
    "all_to_all", "gather",     "scatter",        "send_recv", "barrier"};

const char *
collie__tc_column(int tc)
{
  return tc >= 0 && tc < COLLIE_TC_COUNT_ ? wire_columns[tc] : "?";
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
  case COLLIE_TC_ALL_REDUCE:
    return wire_scale(size, 2 * (n - 1), n);
  case COLLIE_TC_ALL_GATHER: /* size: the rank's shard */
  case COLLIE_TC_REDUCE_SCATTER:
  case COLLIE_TC_GATHER:
  case COLLIE_TC_SCATTER:
    return wire_scale(size, n - 1, 1);
  case COLLIE_TC_ALL_TO_ALL: /* size: the whole send buffer of p blocks */
    return wire_scale(size, n - 1, n);
  case COLLIE_TC_BROADCAST:
  case COLLIE_TC_REDUCE:
  case COLLIE_TC_SEND_RECV:
    return size;
  default:
    return 0;
  }
}
