/*
 * dispatch.c - from a validated call to a finished one: sequence number,
 * deadline, algorithm choice, run, and on failure a message that names the
 * operation ("allreduce #5 (1048576 x float32, ring)") in front of the
 * transport's diagnosis, then poisoning of the communicator.
 */
#include <stdio.h>

#include "core/core.h"

collie_result_t
collie__dispatch(collie_comm_t *comm, struct collie__call *call, const collie_opts_t *opts)
{
  const struct collie__algo *algo = NULL;
  collie_result_t rc;
  int opts_algo = opts ? opts->algorithm : COLLIE_ALGO_AUTO;
  int64_t timeout = opts && opts->timeout_ms > 0 ? opts->timeout_ms : comm->timeout_ms;

  call->rank = comm->rank;
  call->size = comm->size;
  call->net = comm->net;
  call->scratch = &comm->scratch;
  call->all_shm = comm->all_shm;
  call->esize = collie_dtype_size(call->dtype);
  call->deadline_ns = collie__deadline_after_ms(timeout);
  if (call->kind == COLLIE_KIND_P2P) {
    rc = (call->sendbuf ? collie__p2p_send : collie__p2p_recv)(call);
    if (rc != COLLIE_SUCCESS) goto out_fail;
    return rc;
  }
  /* An unusable algorithm choice is an argument error: reported before the
   * call takes a sequence number, so the communicator stays usable. */
  rc = collie__algo_select(call, opts_algo, &comm->algos, &comm->models, &comm->select_log, &algo);
  if (rc != COLLIE_SUCCESS) return rc;
  call->algo = algo->id;
  call->seq = comm->seq++;
  COLLIE_TRACE("COLL", "%s #%u: %zu x %s, algorithm %s", collie__kind_name(call->kind), call->seq,
               call->count, collie_dtype_name(call->dtype), algo->name);
  rc = algo->run(call);
  if (rc == COLLIE_SUCCESS) return rc;

out_fail:
  if (call->kind == COLLIE_KIND_P2P)
    collie__err_prefix("%s rank %d (tag %d, %zu x %s)", call->sendbuf ? "send to" : "recv from",
                       call->root, call->tag, call->count, collie_dtype_name(call->dtype));
  else
    collie__err_prefix("%s #%u (%zu x %s, %s, timeout %lld ms)", collie__kind_name(call->kind),
                       call->seq, call->count, collie_dtype_name(call->dtype), algo->name,
                       (long long)timeout);
  return collie__comm_poison(comm, rc);
}
