/*
 * stage_p2p.c - send and receive on CUDA device memory (issue 21;
 * docs/gpu.md, "Send and receive"), and the pinned area whole staged calls
 * use (stage.c).
 *
 * Between ranks of one host a send of device memory goes as a device
 * message (transport/transport.h): a record of the buffer's CUDA IPC handle
 * that the receiver maps and copies from, one copy on the device, in
 * whatever memory the receive has (device or host). The send completes
 * once the receiver has copied, so the buffer is the sender's again.
 *
 * The receiver must be ready for such messages: its net carries this file's
 * ops, installed by its first call on device memory (any kind), which also
 * keeps that call's context for receives into host memory. A peer that has
 * not installed them (a rank that never used device memory, another host,
 * COLLIE_CUDA_IPC=0) gets the bytes as before: copied to host memory by the
 * sender and sent as host bytes, and a device receive copies them to the
 * device after. So every pair of kinds works, and no rank needs the other's
 * kind in advance.
 *
 * Ordering: the sender waits for the legacy default stream before it shares
 * its buffer (the staged path's cuMemcpy had the same order); the receiver's
 * copy is synchronous, so the data is in place when the receive returns.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "device/cuda.h"
#include "device/ipc_cache.h"
#include "device/pinned.h"

collie_result_t
collie__stage_area(collie_comm_t *comm, const void *dev, size_t need, char **host)
{
  *host = NULL;
  if (!need || need > comm->dev.stage_max) return COLLIE_SUCCESS;
  collie_result_t rc = collie__cuda_push_ctx_of(dev, "entering the buffer's context");
  if (rc != COLLIE_SUCCESS) return rc;
  void *buf = NULL;
  if (collie__pinned_area_get(&comm->dev.stage, need, comm->dev.stage_max, &buf) ==
      COLLIE_SUCCESS) {
    *host = buf;
  } else { /* not tried again on this communicator: each try costs milliseconds */
    COLLIE_WARN("COLL", "staging device buffers through pageable memory from now on: %s",
                collie__err_msg());
    collie__err_clear(); /* the call goes on and succeeds */
    comm->dev.stage_max = 0;
  }
  collie__cuda_pop();
  return COLLIE_SUCCESS;
}

/* The net's read op: maps peer's buffer (cached per allocation) in the
 * kept context, on the GPU the sender checked against (p2p_install), and
 * copies out of it into dst, whatever its device (cuMemcpy crosses GPUs). */
static collie_result_t
p2p_read(void *ctx, int peer, const void *record, size_t reclen, void *dst, size_t len)
{
  collie_comm_t *comm = ctx;
  struct collie__ipc_rec rec;
  if (reclen != sizeof(rec))
    return collie__err(COLLIE_INTERNAL_ERROR,
                       "device message from rank %d: a record of %zu bytes, this build's are %zu",
                       peer, reclen, sizeof(rec));
  memcpy(&rec, record, sizeof(rec)); /* the ring's payload slot is not ours to keep */
  collie_result_t rc = collie__cuda_push_ctx(comm->dev.p2p_ctx, "entering the kept context");
  if (rc != COLLIE_SUCCESS) return rc;
  void *mapped[COLLIE_IPC_BUFS] = {NULL, NULL};
  rc = collie__ipc_map(comm->dev.ipc_p2p, peer, &rec, mapped);
  collie__cuda_pop();
  if (rc == COLLIE_SUCCESS && !mapped[0])
    rc = collie__err(COLLIE_INTERNAL_ERROR, "device message from rank %d names no buffer", peer);
  if (rc != COLLIE_SUCCESS) {
    /* Refused: the sender sends the bytes instead (transport.h). Once per
     * process in the log: a loop would flood it. */
    static atomic_int warned;
    if (!atomic_exchange(&warned, 1))
      COLLIE_WARN("COLL",
                  "mapping rank %d's send buffer (CUDA IPC): %s; it sends its bytes instead, and "
                  "this rank takes its peers' device sends through host memory from now on",
                  peer, collie__err_msg());
    collie__err_clear();
    return COLLIE_UNSUPPORTED;
  }
  return collie__cuda_copy(dst, mapped[0], len, "copying a device message");
}

/* The net's fetch op: a refused device send's bytes, to send instead. */
static collie_result_t
p2p_fetch(void *ctx, void *host, const void *dev, size_t len)
{
  (void)ctx;
  return collie__cuda_copy(host, dev, len, "copying a refused device send to the host");
}

/* Installs the read op on the net, once per communicator, with dev's
 * context kept. Where it cannot (said once in the INFO log), peers send
 * this rank host bytes, as before. */
static void
p2p_install(collie_comm_t *comm, const void *dev)
{
  struct collie__cuda_state *d = &comm->dev;
  if (collie__stage_p2p_on(comm) || d->p2p_off || !comm->params.CUDA_IPC) return;
  unsigned char uuid[16];
  collie_result_t rc = COLLIE_SYSTEM_ERROR;
  if ((d->ipc_p2p || (d->ipc_p2p = collie__ipc_cache_new(collie__cuda_ipc_ops(), comm->size))) &&
      collie__cuda_ctx_of(dev, &d->p2p_ctx, "finding the buffer's context") == COLLIE_SUCCESS &&
      collie__cuda_push_ctx(d->p2p_ctx, "entering the buffer's context") == COLLIE_SUCCESS) {
    rc = collie__cuda_current_uuid(uuid);
    collie__cuda_pop();
  }
  if (rc != COLLIE_SUCCESS) { /* once: every device call would try again */
    COLLIE_INFO("COLL", "sends of device memory to this rank are staged: %s", collie__err_msg());
    collie__err_clear();
    d->p2p_off = 1;
    return;
  }
  d->p2p_ops.ctx = comm;
  d->p2p_ops.read = p2p_read;
  d->p2p_ops.fetch = p2p_fetch;
  collie__net_set_device(comm->net, &d->p2p_ops, uuid);
  /* Released: a worker thread that runs a queued send or receive reads it. */
  __atomic_store_n(&d->p2p_on, 1, __ATOMIC_RELEASE);
}

int
collie__stage_p2p_on(const collie_comm_t *comm)
{
  return __atomic_load_n(&comm->dev.p2p_on, __ATOMIC_ACQUIRE);
}

void
collie__stage_p2p_ready(collie_comm_t *comm, const void *dev)
{
  if (!collie__stage_p2p_on(comm)) p2p_install(comm, dev);
}

collie_result_t
collie__stage_p2p_share(collie_comm_t *comm, int peer, const void *dev, size_t bytes,
                        int64_t deadline_ns, struct collie__ipc_rec *rec, int *shared)
{
  *shared = 0;
  if (!bytes || bytes < (size_t)comm->params.CUDA_P2P_MIN || !collie__stage_p2p_on(comm) ||
      peer < 0)
    return COLLIE_SUCCESS;
  collie_result_t rc = collie__cuda_push_ctx_of(dev, "entering the send buffer's context");
  if (rc != COLLIE_SUCCESS) return rc;
  /* Only to a peer on the same GPU: mapping another GPU's memory needs peer
   * access, which the receiver cannot refuse once the message is sent. */
  unsigned char uuid[16];
  if ((rc = collie__cuda_current_uuid(uuid)) != COLLIE_SUCCESS ||
      !collie__net_device_peer(comm->net, peer, uuid)) {
    collie__cuda_pop();
    return rc;
  }
  rc = collie__cuda_stream_sync(NULL, deadline_ns, "waiting for the default stream");
  if (rc == COLLIE_SUCCESS) {
    const void *bufs[COLLIE_IPC_BUFS] = {dev, NULL};
    if (collie__ipc_publish_to(comm->dev.ipc_p2p, peer, bufs, 1, rec) == COLLIE_SUCCESS)
      *shared = !rec->unshared;
    else
      collie__err_clear(); /* a driver refusal: the host path carries it */
  }
  collie__cuda_pop();
  return rc;
}

collie_result_t
collie__stage_p2p_run(collie_comm_t *comm, struct collie__op *op)
{
  struct collie__call *call = &op->call;
  size_t bytes = call->count * call->esize;
  void *dev = op->stage_dev;
  int send = call->sendbuf != NULL;
  collie_result_t rc = COLLIE_SUCCESS;
  /* The ops were installed at issue (stage.c, on the caller's thread): this
   * may be the worker thread, which must not race it for them. */
  if (send) {
    struct collie__ipc_rec rec;
    int shared = 0;
    rc = collie__stage_p2p_share(comm, call->root, dev, bytes, call->deadline_ns, &rec, &shared);
    if (rc != COLLIE_SUCCESS) return rc;
    if (shared) {
      call->p2p_rec = &rec;
      call->p2p_reclen = sizeof(rec);
      call->p2p_dev = dev; /* for the transport, should the receiver refuse the record */
      rc = collie__p2p_send(call);
      call->p2p_rec = NULL;
      call->p2p_dev = NULL;
      return rc;
    }
  }
  /* Through host memory: the pinned area for a blocking call (the caller
   * waits: nothing else uses the area meanwhile), else a buffer of its own. */
  char *host = NULL, *heap = NULL;
  if (op->stage_blocking && (rc = collie__stage_area(comm, dev, bytes, &host)) != COLLIE_SUCCESS)
    return rc;
  if (!host && !(host = heap = malloc(bytes ? bytes : 1)))
    return collie__err(COLLIE_SYSTEM_ERROR, "out of memory staging %zu bytes", bytes);
  if (send) {
    call->sendbuf = host;
    rc = collie__cuda_copy(host, dev, bytes, "copying sendbuf to the host");
    if (rc == COLLIE_SUCCESS) rc = collie__p2p_send(call);
    call->sendbuf = dev;
  } else {
    call->recvbuf = host;
    call->p2p_dev = collie__stage_p2p_on(comm) ? dev : NULL;
    call->p2p_on_dev = 0;
    rc = collie__p2p_recv(call);
    if (rc == COLLIE_SUCCESS && !call->p2p_on_dev)
      rc = collie__cuda_copy(dev, host, bytes, "copying the received data to the device");
    call->p2p_dev = NULL;
    call->recvbuf = dev;
  }
  free(heap);
  return rc;
}
