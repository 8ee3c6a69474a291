/* slot.c - names for slots (their kinds: util/kinds.c), for error messages that say
 * which operation a stray message belonged to. */
#include <stdio.h>

#include "transport/transport.h"
#include "util/error.h"

static const char *slot_algo_names[] = {
#define COLLIE_XX_(name, str) str,
    COLLIE_ALGO_MAP(COLLIE_XX_)
#undef COLLIE_XX_
};

void
collie__slot_describe(uint64_t slot, char *buf, size_t len)
{
  int kind = (int)(slot >> 56);
  unsigned mid = (unsigned)(slot >> 24);
  unsigned low = (unsigned)((slot >> 8) & 0xffff);
  if (kind == COLLIE_KIND_P2P) {
    static const char *const how[] = {"", " (synchronous)", " (acknowledgement)"};
    unsigned mode = (unsigned)(slot & 0xff);
    if (mid == 0xffffffffu)
      snprintf(buf, len, "send/recv any tag");
    else
      snprintf(buf, len, "send/recv tag %u%s", mid, mode < 3 ? how[mode] : "");
  } else if (collie__slot_closing(slot))
    snprintf(buf, len, "the closing barrier of collie_comm_destroy (step %u)",
             low - COLLIE_STEP_CLOSING);
  else if ((slot & 0xff) != 0 && (slot & 0xff) < COLLIE_ALGO_COUNT_)
    snprintf(buf, len, "%s #%u step %u (%s)", collie__kind_name(kind), mid, low,
             slot_algo_names[slot & 0xff]);
  else
    snprintf(buf, len, "%s #%u step %u", collie__kind_name(kind), mid, low);
}

collie_result_t
collie__slot_closed_err(const char *closer, const char *runner, const char *op)
{
  return collie__err(COLLIE_REMOTE_ERROR,
                     "%s closed the communicator (collie_comm_destroy, or its process exiting) "
                     "while %s ran %s: every rank must finish the same operations before "
                     "destroying it",
                     closer, runner, op);
}

collie_result_t
collie__slot_mismatch_err(const char *who, int me, uint64_t got, uint64_t got_len, uint64_t want,
                          size_t want_len)
{
  char got_s[96], want_s[96];
  collie__slot_describe(got, got_s, sizeof(got_s));
  collie__slot_describe(want, want_s, sizeof(want_s));
  if (collie__slot_closing(got) != collie__slot_closing(want)) {
    char mine[32];
    collie__fmt(mine, sizeof(mine), "rank %d", me);
    return collie__slot_closing(got) ? collie__slot_closed_err(who, "this rank", want_s)
                                     : collie__slot_closed_err(mine, who, got_s);
  }
  return collie__err(COLLIE_INVALID_USAGE,
                     "collectives mismatched across ranks: %s sent %s (%llu bytes), this rank "
                     "expected %s (%zu bytes)",
                     who, got_s, (unsigned long long)got_len, want_s, want_len);
}
