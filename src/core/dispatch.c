/*
 * dispatch.c - from a validated call to a finished one, in two halves. The
 * issue half (collie__dispatch_prepare) runs on the caller's thread when the
 * call is made: it picks the algorithm and takes the sequence number, because
 * every rank must agree on the order of collectives and only the order of
 * calls is shared by all of them, not the timing of a worker thread. The run
 * half (collie__dispatch_run) runs on whichever thread owns the
 * communicator's channels at the time (the caller, or the worker of work.c):
 * deadline, run, and on failure a message that names the operation
 * ("allreduce #5 (1048576 x float32, ring)") in front of the transport's
 * diagnosis, then poisoning of the communicator.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/core.h"
#include "device/cuda.h"

/* How the flight recorder describes call (all but seq and started), with
 * the algorithm picked for it (NULL for send/recv). */
static void
dispatch_flight_shape(const struct collie__call *c, const struct collie__algo *algo,
                      struct collie__flight_op *fo)
{
  int p2p = c->kind == COLLIE_KIND_P2P;
  *fo = (struct collie__flight_op){
      .kind = p2p ? (c->p2p_probe ? "probe"
                     : c->sendbuf ? "send"
                                  : "recv")
                  : collie__kind_name(c->kind),
      .dtype = collie_dtype_name(c->dtype),
      .op = c->reduce ? collie_op_name(c->op) : NULL,
      .algo = algo ? algo->name : NULL,
      .count = c->count,
      .bytes = p2p ? c->count * c->esize : collie__call_bytes(c),
      .root = (c->kind == COLLIE_KIND_BROADCAST || c->kind == COLLIE_KIND_REDUCE ||
               c->kind == COLLIE_KIND_GATHER || c->kind == COLLIE_KIND_SCATTER || p2p)
                  ? c->root
                  : -1,
  };
}

/* The flight recorder's entry for an issued operation (state QUEUED). */
static void
dispatch_record(collie_comm_t *comm, struct collie__op *op, const struct collie__flight_op *shape)
{
  const struct collie__call *c = &op->call;
  op->fr_id = collie__flight_queued_as(comm->flight, shape,
                                       c->kind == COLLIE_KIND_P2P ? c->p2p_seq : c->seq,
                                       op->at_once, op->t_issue);
}

/* The operation in telemetry's terms: which comms.csv column, the caller's
 * buffer bytes and the wire-model bytes (docs/telemetry.md), then the issue
 * stamp. */
static void
dispatch_tele_timed(collie_comm_t *comm, struct collie__op *op, const collie_opts_t *opts)
{
  const struct collie__call *c = &op->call;
  struct collie__tele_op *t = &op->tele;
  uint64_t es = c->esize, n = c->count * es, wire = UINT64_MAX; /* MAX: the model's */
  const char *phase = opts ? opts->phase : NULL;
  t->tc = (int)collie__kind_collective(c->kind);
  t->opname = c->kind == COLLIE_KIND_P2P && !c->sendbuf ? "RECV" : collie__kind_opname(c->kind);
  t->category = opts ? opts->category : COLLIE_CAT_OTHER;
  t->index_wire = 0;
  switch (c->kind) {
  case COLLIE_KIND_ALLTOALL:
    n *= (uint64_t)c->size;
    break;
  case COLLIE_KIND_ALLGATHERV: /* the v-variants charge exactly what leaves for others */
    wire = 0;
    for (int q = 0; q < c->size; q++) wire += q == c->rank ? 0 : c->recvcounts[q] * es;
    n = c->recvcounts[c->rank] * es;
    break;
  case COLLIE_KIND_ALLTOALLV:
    n = wire = 0;
    for (int q = 0; q < c->size; q++) {
      n += c->sendcounts[q] * es;
      wire += q == c->rank ? 0 : c->sendcounts[q] * es;
    }
    break;
  case COLLIE_KIND_BARRIER:
    n = 0;
    break;
  case COLLIE_KIND_SPARSE_ALLREDUCE: {
    /* Indices and values, the indices' share to TOPR_INDICES; named as the
     * seeds' timing logs name them, in the sparse phase unless told. */
    int gtopk = c->root == COLLIE_SPARSE_GTOPK;
    uint64_t k = c->count, sent = c->size < 2 ? 0
                                  : gtopk     ? (uint64_t)collie__log2_ceil(c->size)
                                              : (uint64_t)(c->size - 1);
    n = k * (8 + es);
    wire = sent * n;
    t->index_wire = sent * k * 8;
    t->opname = gtopk ? "GTOPK_SPARSE_ALLREDUCE" : "TOPK_SPARSE_ALLREDUCE";
    if (!phase) phase = "sparse";
    break;
  }
  default:
    break;
  }
  t->size = n;
  t->wire = wire != UINT64_MAX ? wire : collie__wire_bytes(t->tc, c->size, n);
  collie__tele_issue(comm->tele, t, opts ? opts->label : NULL, phase, op->t_issue);
}

/* Untimed (telemetry off): only marks op so, in line; the timed half is
 * out of line (a call whose prologue came before this test cost an
 * untimed call ~18 instructions). */
static inline void
dispatch_tele_issue(collie_comm_t *comm, struct collie__op *op, const collie_opts_t *opts)
{
  if (op->precise)
    dispatch_tele_timed(comm, op, opts);
  else
    op->tele.active = 0;
}

/* Ends the records with the outcome; a failure also dumps the recorder, so the
 * ranks' dumps tell collie-report who was stuck where. */
static collie_result_t
dispatch_done(collie_comm_t *comm, struct collie__op *op, collie_result_t rc)
{
  int64_t now = collie__dispatch_now(op);
  if (op->tele.active) collie__tele_complete(comm->tele, &op->tele, rc != COLLIE_SUCCESS, now);
  if (!comm->flight) return rc;
  if (op->at_once && rc == COLLIE_SUCCESS) {
    collie__flight_end_at_issue(comm->flight, op->fr_id, now);
    return rc;
  }
  collie__flight_state_at(comm->flight, op->fr_id,
                          rc == COLLIE_SUCCESS ? COLLIE_FR_COMPLETED : COLLIE_FR_FAILED, NULL, now);
  if (rc != COLLIE_SUCCESS)
    collie__comm_flight_dump(comm, rc == COLLIE_TIMEOUT ? "timeout" : "failure");
  return rc;
}

void
collie__dispatch_skipped(collie_comm_t *comm, struct collie__op *op)
{
  int64_t now = collie__dispatch_now(op);
  collie__tele_complete(comm->tele, &op->tele, 1, now);
  if (comm->flight) collie__flight_state_at(comm->flight, op->fr_id, COLLIE_FR_FAILED, NULL, now);
}

/* The algorithm for call, with its flight-recorder shape. Training loops
 * repeat the same calls, so the last decision per collective is kept and
 * reused when the shape is the same (the models and COLLIE_ALGO never change
 * after init); the v-variants, whose cost depends on per-rank counts, always
 * ask the model (into *fresh). */
static collie_result_t
dispatch_select(collie_comm_t *comm, const struct collie__call *call, int opts_algo,
                struct collie__select_memo *fresh, const struct collie__select_memo **out)
{
  struct collie__select_memo *m = &comm->select_memo[call->kind];
  int memo = call->kind != COLLIE_KIND_ALLGATHERV && call->kind != COLLIE_KIND_ALLTOALLV;
  if (memo && m->algo && m->count == call->count && m->dtype == call->dtype && m->op == call->op &&
      m->root == call->root && m->opts_algo == opts_algo && m->mem == call->mem &&
      m->wire == call->wire) {
    *out = m;
    return COLLIE_SUCCESS;
  }
  const struct collie__algo *algo;
  collie_result_t rc =
      collie__algo_select(call, opts_algo, &comm->algos, &comm->models, &comm->select_log, &algo);
  if (rc != COLLIE_SUCCESS) return rc;
  if (!memo) m = fresh;
  m->algo = algo;
  m->count = call->count;
  m->dtype = call->dtype;
  m->op = call->op;
  m->root = call->root;
  m->opts_algo = opts_algo;
  m->mem = call->mem;
  m->wire = call->wire;
  dispatch_flight_shape(call, algo, &m->fr);
  *out = m;
  return COLLIE_SUCCESS;
}

collie_result_t
collie__dispatch_prepare(collie_comm_t *comm, struct collie__op *op, const collie_opts_t *opts,
                         int blocking)
{
  struct collie__call *call = &op->call;
  int opts_algo = opts ? opts->algorithm : COLLIE_ALGO_AUTO;

  op->algo = NULL;
  op->stage_dev = NULL; /* stage.c sets it after, for a device send/recv */
  op->precise = collie__tele_wanted(comm->tele);
  op->t_issue = collie__dispatch_now(op);
  /* Runs at once on this thread (collie__work_issue): the recorder takes it
   * as started at issue, one record update less. */
  op->at_once = blocking && !comm->workq;
  op->timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : comm->timeout_ms;
  call->rank = comm->rank;
  call->size = comm->size;
  call->net = comm->net;
  call->scratch = comm->scratch;
  call->cls = comm->cls;
  call->all_shm = comm->all_shm;
  call->topo = &comm->topo;
  call->models = &comm->models;
  call->esize = collie__dtype_bytes(call->dtype);
  op->fr_id = -1;
  if (call->kind == COLLIE_KIND_P2P) { /* api.c counted the pair */
    if (comm->flight) {
      struct collie__flight_op shape;
      dispatch_flight_shape(call, NULL, &shape);
      dispatch_record(comm, op, &shape);
    }
    /* A probe moves no data: telemetry does not count it (a polling loop
     * of iprobes would fill the timing log with empty receives). */
    if (call->p2p_probe)
      op->tele.active = 0;
    else
      dispatch_tele_issue(comm, op, opts);
    return COLLIE_SUCCESS;
  }
  /* An unusable algorithm choice is an argument error: reported before the
   * call takes a sequence number, so the communicator stays usable. */
  struct collie__select_memo fresh;
  const struct collie__select_memo *m;
  collie_result_t rc = dispatch_select(comm, call, opts_algo, &fresh, &m);
  if (rc != COLLIE_SUCCESS) return rc;
  op->algo = m->algo;
  call->algo = op->algo->id;
  call->seq = comm->seq++;
  if (comm->flight) dispatch_record(comm, op, &m->fr);
  dispatch_tele_issue(comm, op, opts);
  return COLLIE_SUCCESS;
}

int64_t
collie__dispatch_now(const struct collie__op *op)
{
  return op->precise ? collie__now_ns() : collie__now_coarse_ns();
}

/* The end of a send, receive or probe: on failure, the message names it,
 * and the communicator is poisoned. */
static collie_result_t
dispatch_p2p_end(collie_comm_t *comm, struct collie__op *op, collie_result_t rc)
{
  struct collie__call *call = &op->call;
  if (rc == COLLIE_SUCCESS) return dispatch_done(comm, op, rc);
  char peer[32], tag[24];
  if (call->root == COLLIE_ANY_SOURCE)
    snprintf(peer, sizeof(peer), "any rank");
  else
    snprintf(peer, sizeof(peer), "rank %d", call->root);
  if (call->tag == COLLIE_ANY_TAG)
    snprintf(tag, sizeof(tag), "any tag");
  else
    snprintf(tag, sizeof(tag), "tag %d", call->tag);
  if (call->p2p_probe)
    collie__err_prefix("probe for a message from %s (%s)", peer, tag);
  else
    collie__err_prefix("%s %s (%s, %zu x %s)",
                       call->sendbuf ? (call->p2p_sync ? "ssend to" : "send to") : "recv from",
                       peer, tag, call->count, collie_dtype_name(call->dtype));
  collie__comm_poison(comm, rc);
  return dispatch_done(comm, op, rc);
}

/* The deadline, the recorder's STARTED and the memory kind of op's
 * requests, as the op starts running at `now`. */
static void
dispatch_start(collie_comm_t *comm, struct collie__op *op, int64_t now)
{
  /* A coarse stamp is up to a tick behind, more when a VM delivers the tick
   * late (5.2 ms seen against a 4 ms tick): moved by two ticks, a timeout
   * does not fire before its time. */
  op->call.deadline_ns =
      collie__deadline_from(op->precise ? now : now + 2 * collie__coarse_lag_ns(), op->timeout_ms);
  if (comm->flight && !op->at_once)
    collie__flight_state_at(comm->flight, op->fr_id, COLLIE_FR_STARTED, NULL, now);
  collie__net_set_mem(comm->net, op->call.mem); /* its requests carry where its buffers live */
}

int
collie__dispatch_postable(const struct collie__op *op)
{
  return op->call.kind == COLLIE_KIND_P2P && !op->call.p2p_probe && !op->stage_dev;
}

collie_result_t
collie__dispatch_post(collie_comm_t *comm, struct collie__op *op, int64_t now)
{
  dispatch_start(comm, op, now);
  collie_result_t rc = collie__p2p_post(&op->call, &op->p2p, 0);
  return rc == COLLIE_SUCCESS ? rc : dispatch_p2p_end(comm, op, rc);
}

collie_result_t
collie__dispatch_posted_end(collie_comm_t *comm, struct collie__op *op, collie_result_t rc)
{
  return dispatch_p2p_end(comm, op, collie__p2p_done(&op->call, &op->p2p, rc));
}

collie_result_t
collie__dispatch_run(collie_comm_t *comm, struct collie__op *op, int64_t now)
{
  struct collie__call *call = &op->call;
  const struct collie__algo *algo = op->algo;
  collie_result_t rc;

  dispatch_start(comm, op, now);
  if (call->kind == COLLIE_KIND_P2P) {
    rc = op->stage_dev ? collie__stage_p2p_run(comm, op)
                       : (call->sendbuf ? collie__p2p_send : collie__p2p_recv)(call);
    return dispatch_p2p_end(comm, op, rc);
  }
  COLLIE_TRACE("COLL", "%s #%u: %zu x %s, algorithm %s", collie__kind_name(call->kind), call->seq,
               call->count, collie_dtype_name(call->dtype), algo->name);
  rc = comm->params.CHECK ? collie__check_call(call) : COLLIE_SUCCESS;
  if (rc == COLLIE_SUCCESS) rc = algo->run(call);
  if (rc == COLLIE_SUCCESS) return dispatch_done(comm, op, rc);
  collie__err_prefix("%s #%u (%zu x %s, %s, timeout %lld ms)", collie__kind_name(call->kind),
                     call->seq, call->count, collie_dtype_name(call->dtype), algo->name,
                     (long long)op->timeout_ms);
  collie__comm_poison(comm, rc);
  return dispatch_done(comm, op, rc);
}
