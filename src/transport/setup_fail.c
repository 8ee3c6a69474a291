/*
 * setup_fail.c - a rank that gives up on a communicator's setup for an error
 * of its own says so in the store, and the ranks waiting for it in their
 * transports' setup read it there.
 *
 * Why. A rank whose split (or init) fails after the peer records were
 * exchanged - its shared memory may not fit, its listener cannot be made -
 * lives on, so the others' liveness checks (by pid) see nothing wrong, and
 * they waited for it until the setup deadline (20 s; issue 38). Where
 * channels were up it told them (collie__net_give_up); before that the
 * store is the one place both sides reach. The notice is one key of the
 * communicator's own store, "setup-fail", holding "<rank>:<reason>" of the
 * first rank that gave up (one key, not one a rank: a wait asks once per
 * look however many ranks it misses); the waits that already look at an
 * awaited rank's process every 50-200 ms (shm_setup.c, tcp_setup.c) look at
 * it too. Whoever gave up, the setup cannot complete: a wait fails at once
 * naming it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "transport/transport.h"
#include "util/error.h"
#include "util/util.h"

void
collie__setup_failed(struct collie__store *store, int rank, const char *why)
{
  if (!store) return;
  char val[COLLIE_ERRMSG_LEN + 16], saved[COLLIE_ERRMSG_LEN];
  snprintf(saved, sizeof(saved), "%s", collie__err_msg());
  int n = snprintf(val, sizeof(val), "%d:%s", rank, why);
  size_t len = n < 0 ? 0 : (size_t)n < sizeof(val) ? (size_t)n : sizeof(val) - 1;
  /* A short deadline of its own: the store may be what failed. */
  (void)collie__store_set(store, "setup-fail", val, len, collie__now_ns() + 1000000000LL);
  collie__err_set_text(saved);
}

int
collie__setup_gave_up(struct collie__store *store, int *rank, char *why, size_t len)
{
  if (!store || len == 0) return 0;
  char saved[COLLIE_ERRMSG_LEN];
  snprintf(saved, sizeof(saved), "%s", collie__err_msg());
  void *val = NULL;
  size_t n = 0;
  /* Briefly: a key that is not there is the common answer. */
  collie_result_t rc =
      collie__store_get(store, "setup-fail", &val, &n, collie__now_ns() + 5000000LL);
  collie__err_set_text(saved);
  if (rc != COLLIE_SUCCESS) return 0;
  const char *v = val, *colon = memchr(v, ':', n);
  *rank = colon ? atoi(v) : -1;
  if (colon) {
    n -= (size_t)(colon + 1 - v);
    v = colon + 1;
  }
  snprintf(why, len, "%.*s", (int)n, v);
  free(val);
  return 1;
}
