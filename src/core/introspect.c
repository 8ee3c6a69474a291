/*
 * introspect.c - what a communicator would decide, asked from outside a
 * call: which algorithm the cost model picks for a shape, under the
 * communicator's own models or under others (a tuning file being judged).
 * And the facts tools read of a communicator (core/introspect.h), so that
 * they never see its struct. For tools (collie-bench), which link the static
 * library; nothing here communicates or changes the communicator.
 */
#include <string.h>

#include "core/core.h"
#include "device/cuda.h"

collie_result_t
collie__comm_select(collie_comm_t *comm, int kind, size_t count, collie_dtype_t dtype,
                    collie_op_t op, int root, const struct collie__models *models,
                    const struct collie__algo **out)
{
  collie_result_t rc = collie__comm_check(comm, "collie__comm_select");
  if (rc != COLLIE_SUCCESS) return rc;
  /* v-variants need per-rank arrays: tools ask about the regular ones. */
  if (kind <= COLLIE_KIND_NONE || kind >= COLLIE_KIND_P2P || kind == COLLIE_KIND_ALLGATHERV ||
      kind == COLLIE_KIND_ALLTOALLV)
    return collie__err(COLLIE_INVALID_ARGUMENT, "collie__comm_select: kind %d has no selection",
                       kind);
  struct collie__call call = {.kind = kind,
                              .count = count,
                              .dtype = dtype,
                              .op = op,
                              .esize = collie_dtype_size(dtype),
                              .root = root,
                              .rank = comm->rank,
                              .size = comm->size,
                              .cls = comm->cls,
                              .all_shm = comm->all_shm,
                              .topo = &comm->topo,
                              .net = comm->net, /* shm_flat asks it whether it can run */
                              .models = models ? models : &comm->models,
                              .reduce = collie__reduce_kernel(dtype, op)};
  struct collie__select_log quiet = {{0}};
  for (int k = 0; k < COLLIE_KIND_COUNT_; k++) quiet.logged[k] = ~(uint64_t)0; /* no INFO table */
  return collie__algo_select(&call, COLLIE_ALGO_AUTO, &comm->algos, models ? models : &comm->models,
                             &quiet, out);
}

collie_result_t
collie__comm_models_load(collie_comm_t *comm, const char *path, struct collie__models *out)
{
  collie_result_t rc = collie__comm_check(comm, "collie__comm_models_load");
  if (rc != COLLIE_SUCCESS) return rc;
  /* The constants only: the comm's own fit lines stay the comm's (a shallow
   * copy would share, and the load would free, its array). */
  memset(out, 0, sizeof(*out));
  memcpy(out->cls, comm->models.cls, sizeof(out->cls));
  return collie__models_load(path, out);
}

const char *
collie__device_code(void)
{
  return collie__cuda_device_code();
}

int
collie__comm_device_algo(const collie_comm_t *comm, int kind, size_t bytes)
{
  return collie__stage_device_algo(comm, kind, bytes, NULL);
}

int
collie__comm_met_over_ring(const collie_comm_t *comm)
{
  return comm->met_over_ring;
}

int
collie__comm_spin(const collie_comm_t *comm)
{
  return comm->spin;
}

int
collie__comm_machine_ranks(const collie_comm_t *comm, int rank)
{
  return rank >= 0 && rank < comm->size ? comm->peers[rank].machine_ranks : -1;
}

int
collie__comm_class(const collie_comm_t *comm)
{
  return comm->cls;
}

const char *
collie__comm_host(const collie_comm_t *comm, int rank)
{
  return rank >= 0 && rank < comm->size ? comm->peers[rank].host : NULL;
}

const char *
collie__comm_transport_of(const collie_comm_t *comm, int peer)
{
  return comm->net ? collie__net_transport_of(comm->net, peer) : "none";
}

const struct collie__models *
collie__comm_models(const collie_comm_t *comm)
{
  return &comm->models;
}

int
collie__launch_rank(void)
{
  struct collie__launch l;
  return collie__launch_detect(&l, NULL) == COLLIE_SUCCESS ? l.rank : -1;
}
