/*
 * capture_replay.c - the host node of a call captured into a CUDA graph
 * (core/capture.c records it): at each replay, on a thread of the
 * driver's, it runs the call's host collective on the call's host block,
 * through the public API, as a user's thread would (the driver calls it
 * through a function pointer; nothing in collie calls it). That thread may
 * make no CUDA call: collie__cuda_thread_off makes every buffer host memory
 * there. A replay that fails can tell nobody at once: it is logged, dumped
 * to the flight recorder, and poisons the communicator the call was
 * captured on, whose next call fails naming it.
 */
#include <stddef.h>

#include "core/capture.h"
#include "core/core.h"
#include "device/cuda.h"

void
collie__capture_replay(void *arg)
{
  struct collie__capture *c = arg;
  collie__cuda_thread_off(1);
  collie_opts_t o = c->opts;
  o.label = c->label[0] ? c->label : NULL;
  o.phase = c->phase[0] ? c->phase : NULL;
  o.cuda_stream = NULL;
  const void *s = c->hsend ? c->hsend : c->hrecv;
  const struct collie__call *k = &c->call;
  collie_result_t rc;
  switch (k->kind) {
  case COLLIE_KIND_ALLREDUCE:
    rc = collie_allreduce(c->graph, s, c->hrecv, k->count, k->dtype, k->op, &o, NULL);
    break;
  case COLLIE_KIND_ALLGATHER:
    rc = collie_allgather(c->graph, s, c->hrecv, k->count, k->dtype, &o, NULL);
    break;
  case COLLIE_KIND_REDUCE_SCATTER:
    rc = collie_reduce_scatter(c->graph, s, c->hrecv, k->count, k->dtype, k->op, &o, NULL);
    break;
  case COLLIE_KIND_BROADCAST:
    rc = collie_broadcast(c->graph, c->hrecv, k->count, k->dtype, k->root, &o, NULL);
    break;
  default: /* COLLIE_KIND_P2P */
    rc = c->hsend ? collie_send(c->graph, c->hsend, k->count, k->dtype, k->root, k->tag, &o, NULL)
                  : collie_recv(c->graph, c->hrecv, k->count, k->dtype, k->root, k->tag, &o, NULL);
    break;
  }
  collie__cuda_thread_off(0);
  if (rc == COLLIE_SUCCESS) return;
  collie__err_prefix("a captured %s failed in a CUDA graph's replay (its result on the device is "
                     "not valid)",
                     collie__kind_name(k->kind));
  COLLIE_WARN("GRAPH", "%s", collie__err_msg());
  collie__comm_flight_dump(c->graph, "a captured operation failed in a CUDA graph's replay");
  collie__comm_poison(c->owner, rc);
}
