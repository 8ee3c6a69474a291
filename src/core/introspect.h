/*
 * introspect.h - what collie's tools (collie-bench, collierun) may ask of
 * the library beyond include/collie.h, and all they may include of it: a
 * communicator's facts through functions (its struct stays private to
 * src/core), what it would select, and the contracts they measure (the
 * algorithm table, the kinds and the cost model of coll/coll.h, with
 * coll/topo.h's hosts for the model's predictions; the
 * kernels of reduce/reduce.h; the COLLIE_* variables of core/params.h).
 * scripts/check_layers.sh refuses any other private header in tools/.
 * introspect.c implements the communicator's part; nothing here
 * communicates or changes a communicator. store_serve.c lets collierun
 * serve its job's store.
 */
#ifndef COLLIE_CORE_INTROSPECT_H
#define COLLIE_CORE_INTROSPECT_H

#include "coll/coll.h"
#include "coll/topo.h"
#include "collie.h"
#include "core/params.h"
#include "reduce/reduce.h"

/* comm's cost-model class (collie__net_class: COLLIE_NET_CLASS_LOCAL when
 * shared memory serves every rank). */
int collie__comm_class(const collie_comm_t *comm);
/* The host identity rank published (ranks with equal hosts share memory);
 * NULL outside 0..size-1. */
const char *collie__comm_host(const collie_comm_t *comm, int rank);
/* Which transport serves peer ("shm", "tcp", "self", "none"). */
const char *collie__comm_transport_of(const collie_comm_t *comm, int peer);
/* The device code this libcollie carries: "PTX compute_75 (nvcc release
 * 13.0)", or "none (built without nvcc)". */
const char *collie__device_code(void);
/* The device algorithm comm runs for a call of kind (COLLIE_KIND_*) on
 * device buffers of `bytes`: COLLIE_ALGO_CUDA_IPC, COLLIE_ALGO_CUDA_PIPELINE,
 * or 0 (staged whole through host memory). */
int collie__comm_device_algo(const collie_comm_t *comm, int kind, size_t bytes);
/* Whether comm's ranks met over the bootstrap ring (COLLIE_RING_BOOTSTRAP)
 * rather than through the store. */
int collie__comm_met_over_ring(const collie_comm_t *comm);
/* Polls comm's waits make before they sleep (COLLIE_SPIN, or core/crowd.c's
 * pick), and how many ranks of its world share rank's machine (its boot
 * id); -1 outside 0..size-1. */
int collie__comm_spin(const collie_comm_t *comm);
int collie__comm_machine_ranks(const collie_comm_t *comm, int rank);
/* comm's cost model (built-in constants, COLLIE_TUNING_FILE's). */
const struct collie__models *collie__comm_models(const collie_comm_t *comm);
/* The poison code (COLLIE_SUCCESS while healthy). */
collie_result_t collie__comm_poisoned(const collie_comm_t *comm);
/* The algorithm comm would run for a regular collective of this shape (kind
 * COLLIE_KIND_*, count as the collie_* call takes it) under models (NULL:
 * comm's own), honouring COLLIE_ALGO. Local, no communication, no log.
 * Errors: those of collie__algo_select; INVALID_ARGUMENT for p2p and the
 * v-variants. */
collie_result_t collie__comm_select(collie_comm_t *comm, int kind, size_t count,
                                    collie_dtype_t dtype, collie_op_t op, int root,
                                    const struct collie__models *models,
                                    const struct collie__algo **out);
/* The models a tuning file gives this communicator: path loaded over a copy
 * of comm's class constants (the built-in defaults, or COLLIE_TUNING_FILE's
 * over them), without comm's own fit lines. Fills out (overwritten; the
 * caller frees it with collie__models_free). Local, no communication.
 * Errors: collie__models_load's; INVALID_USAGE for a dead comm. */
collie_result_t collie__comm_models_load(collie_comm_t *comm, const char *path,
                                         struct collie__models *out);
/* This process's rank as its launcher says (before any init), or -1. */
int collie__launch_rank(void);

/* collierun's store (store_serve.c): serves the tcp store url names on
 * host:port, proving token, from a thread of this process until stopped.
 * Errors: SYSTEM_ERROR (the port is taken, no thread), naming the url. */
struct collie__store_tcp_server;
collie_result_t collie__store_serve(const char *url, const char *host, int port, const char *token,
                                    struct collie__store_tcp_server **out);
/* Stops it (clients' next calls fail at once); NULL is a no-op. */
void collie__store_serve_stop(struct collie__store_tcp_server *server);
/* The clients (ranks, launchers) connected to it now; 0 for NULL. */
size_t collie__store_serve_clients(struct collie__store_tcp_server *server);
/* When it last handled a request (monotonic ns), or 0 (none, or NULL). */
int64_t collie__store_serve_last_request(struct collie__store_tcp_server *server);
/* collierun's note that world_rank of a job of world_size ranks ended with
 * code (exit status, or 128 + signal), written into the job's store at url
 * (proving token) before deadline_ns, for peers that wait for it on other
 * hosts (bootstrap.h, "exit notes"). Errors: the store's. */
collie_result_t collie__store_note_exit(const char *url, const char *token, int world_rank,
                                        int world_size, int code, int64_t deadline_ns);

#endif /* COLLIE_CORE_INTROSPECT_H */
