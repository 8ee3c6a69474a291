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
 * store is the one place both sides reach. The notice is a key of the
 * communicator's own store, "setup-fail/<rank>", holding the reason; the
 * waits that already look at an awaited rank's process every 50-200 ms
 * (shm_setup.c, tcp_setup.c) look at its key too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "transport/transport.h"
#include "util/error.h"
#include "util/util.h"

void
collie__setup_failed(collie__store_t *store, int rank, const char *why)
{
  if (!store) return;
  char key[48];
  snprintf(key, sizeof(key), "setup-fail/%d", rank);
  char saved[COLLIE_ERRMSG_LEN];
  snprintf(saved, sizeof(saved), "%s", collie__err_msg());
  /* A short deadline of its own: the store may be what failed. */
  (void)collie__store_set(store, key, why, strlen(why), collie__now_ns() + 1000000000LL);
  collie__err_set_text(saved);
}

int
collie__setup_gave_up(collie__store_t *store, int peer, char *why, size_t len)
{
  if (!store || len == 0) return 0;
  char key[48], saved[COLLIE_ERRMSG_LEN];
  snprintf(key, sizeof(key), "setup-fail/%d", peer);
  snprintf(saved, sizeof(saved), "%s", collie__err_msg());
  void *val = NULL;
  size_t n = 0;
  /* Briefly: a key that is not there is the common answer. */
  collie_result_t rc = collie__store_get(store, key, &val, &n, collie__now_ns() + 5000000LL);
  collie__err_set_text(saved);
  if (rc != COLLIE_SUCCESS) return 0;
  snprintf(why, len, "%.*s", (int)n, (const char *)val);
  free(val);
  return 1;
}
