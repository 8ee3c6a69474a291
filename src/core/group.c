/*
 * group.c - batched send/recv (collie_group_start / collie_group_end in api.c),
 * as NCCL groups: the record and the run half. Inside a group, send and recv
 * only record; group_end posts every
 * recorded message at once and waits for all of them together, so a ring
 * exchange (everyone sends right and receives left) cannot deadlock however
 * large the messages are. The record arrays are kept by the communicator and
 * reused, so steady-state groups do not allocate. Every message takes its
 * pair's sequence number when the group ends (on the caller's thread, in call
 * order); an async group (collie_group_end with a work handle) then hands its
 * record to the communicator's queue (work.c) and the comm starts a new one.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "device/cuda.h"
#include "device/ipc_cache.h"

struct collie__group_op {
  const void *sbuf; /* NULL for a recv */
  void *rbuf;
  /* A message on device memory: dev is the caller's buffer, and sbuf or
   * rbuf a host buffer of the group's that stands in for it, copied from
   * dev before the group posts its messages (a send) or to dev after they
   * have all arrived (a receive). NULL otherwise. */
  void *dev;
  /* A device send that goes as a device message (stage_p2p.c): its record,
   * made when the group runs. */
  struct collie__ipc_rec *rec;
  size_t bytes;
  int peer, tag;
};

struct collie__group {
  struct collie__group_op *ops;
  struct collie__p2p_op *reqs;     /* each message's, as posted to the net's matching */
  struct collie__req **wait;       /* up to 2 per message (collie__p2p_reqs) */
  struct collie__timing_rec *rows; /* each message's timing row */
  size_t n, cap;
  struct collie__tele_op tele; /* the group as one send/recv operation */
  int64_t fr_id;               /* its flight-recorder record (-1: none) */
};

collie_result_t
collie__group_add(collie_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                  collie_dtype_t dtype, int peer, int tag, const collie_opts_t *opts)
{
  struct collie__group *g = comm->group;
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 16;
    struct collie__group_op *ops = realloc(g->ops, cap * sizeof(*ops));
    if (ops) g->ops = ops;
    struct collie__p2p_op *reqs = realloc(g->reqs, cap * sizeof(*reqs));
    if (reqs) g->reqs = reqs;
    struct collie__req **w = realloc(g->wait, 2 * cap * sizeof(*w));
    if (w) g->wait = w;
    struct collie__timing_rec *rows = realloc(g->rows, cap * sizeof(*rows));
    if (rows) g->rows = rows;
    if (!ops || !reqs || !w || !rows)
      return collie__err(COLLIE_SYSTEM_ERROR, "out of memory recording a group of %zu operations",
                         cap);
    g->cap = cap;
  }
  size_t bytes = count * collie_dtype_size(dtype);
  void *dev = NULL;
  if (bytes && !collie__host_mem_plain(sbuf ? sbuf : rbuf) && collie__cuda_live() &&
      collie__cuda_is_device(sbuf ? sbuf : rbuf, NULL)) {
    if (collie__cuda_capturing(opts ? opts->cuda_stream : NULL))
      return collie__cuda_refuse_capture(sbuf ? "send in a group" : "recv in a group",
                                         opts ? opts->cuda_stream : NULL);
    void *host = malloc(bytes);
    if (!host)
      return collie__err(COLLIE_SYSTEM_ERROR,
                         "out of memory staging %zu bytes of a group's device buffer", bytes);
    dev = sbuf ? (void *)sbuf : rbuf;
    collie__stage_p2p_ready(comm, dev); /* peers may send this rank device messages */
    if (sbuf)
      sbuf = host;
    else
      rbuf = host;
  }
  struct collie__group_op *op = &g->ops[g->n++];
  op->sbuf = sbuf;
  op->rbuf = rbuf;
  op->dev = dev;
  op->rec = NULL;
  op->bytes = bytes;
  op->peer = peer;
  op->tag = tag;
  /* The group is charged to the category of its first message that names one. */
  if (opts && opts->category != COLLIE_CAT_OTHER && g->tele.category == COLLIE_CAT_OTHER)
    g->tele.category = opts->category;
  if (collie__tele_timing_on(comm->tele))
    collie__tele_row_init(&g->rows[g->n - 1], sbuf ? "SEND" : "RECV", op->bytes,
                          opts ? opts->category : COLLIE_CAT_OTHER, opts ? opts->label : NULL,
                          opts ? opts->phase : NULL);
  return COLLIE_SUCCESS;
}

/* At issue: the group is one send/recv operation of all its messages' bytes
 * (each end counts its message once); its rows are the messages'. */
static void
group_tele_issue(collie_comm_t *comm, struct collie__group *g)
{
  uint64_t bytes = 0;
  if (!collie__tele_wanted(comm->tele)) {
    g->tele.active = 0;
    return;
  }
  for (size_t i = 0; i < g->n; i++) bytes += g->ops[i].bytes;
  g->tele.tc = COLLIE_COLL_SEND_RECV;
  g->tele.opname = NULL;
  g->tele.size = bytes;
  g->tele.wire = collie__wire_bytes(COLLIE_COLL_SEND_RECV, 2, bytes);
  g->tele.index_wire = 0;
  collie__tele_issue(comm->tele, &g->tele, NULL, NULL, collie__now_ns());
}

/* At completion (or when the group will never run): rows, then the step. */
static void
group_tele_done(collie_comm_t *comm, struct collie__group *g, int failed)
{
  g->tele.category = COLLIE_CAT_OTHER;
  if (!g->tele.active) return; /* nothing recorded it: no clock read */
  int64_t now = collie__now_ns();
  if (g->tele.timed)
    for (size_t i = 0; i < g->n; i++) collie__tele_push_row(comm->tele, &g->tele, &g->rows[i], now);
  collie__tele_complete(comm->tele, &g->tele, failed, now);
}

/* Frees the host buffers that stand in for device ones. */
static void
group_unstage(struct collie__group *g)
{
  for (size_t i = 0; i < g->n; i++)
    if (g->ops[i].dev) {
      free(g->ops[i].sbuf ? (void *)g->ops[i].sbuf : g->ops[i].rbuf);
      free(g->ops[i].rec);
      g->ops[i].dev = NULL;
      g->ops[i].rec = NULL;
    }
}

void
collie__group_skipped(collie_comm_t *comm, struct collie__group *g)
{
  if (comm->flight && g->fr_id >= 0)
    collie__flight_state(comm->flight, g->fr_id, COLLIE_FR_FAILED, NULL);
  group_tele_done(comm, g, 1);
  group_unstage(g);
  g->n = 0;
}

struct collie__group *
collie__group_new(void)
{
  return calloc(1, sizeof(struct collie__group));
}

void
collie__group_begin(struct collie__group *g)
{
  g->fr_id = -1;
  group_unstage(g); /* a group abandoned after an error while recording */
  g->n = 0;
  g->tele.category = COLLIE_CAT_OTHER;
}

void
collie__group_seal(collie_comm_t *comm, struct collie__group *g)
{
  uint32_t first = 0;
  size_t bytes = 0;
  for (size_t i = 0; i < g->n; i++) {
    struct collie__group_op *op = &g->ops[i];
    uint32_t *seq = op->sbuf ? &comm->p2p_send_seq[op->peer] : &comm->p2p_recv_seq[op->peer];
    if (i == 0) first = *seq;
    (*seq)++; /* the flight recorder's numbers */
    bytes += op->bytes;
  }
  group_tele_issue(comm, g);
  /* The flight recorder sees the group as one operation: a failed group
   * dumps the recorder as a failed send or recv does, and collie-report
   * lists it with the ranks' other point-to-point operations. */
  g->fr_id = -1;
  if (comm->flight) {
    struct collie__flight_op fo = {.seq = first,
                                   .kind = "send/recv group",
                                   .dtype = "uint8",
                                   .count = bytes,
                                   .bytes = bytes,
                                   .root = g->n ? g->ops[0].peer : -1};
    g->fr_id = collie__flight_queued(comm->flight, &fo);
  }
}

/* The device sends: each as a device message where it can (its record
 * made), else copied to its host stand-in. */
static collie_result_t
group_stage_sends(collie_comm_t *comm, struct collie__group *g, int64_t deadline)
{
  for (size_t i = 0; i < g->n; i++) {
    struct collie__group_op *op = &g->ops[i];
    if (!op->dev || !op->sbuf) continue;
    if (!op->rec && !(op->rec = malloc(sizeof(*op->rec))))
      return collie__err(COLLIE_SYSTEM_ERROR, "out of memory for a device message's record");
    int shared = 0;
    collie_result_t rc =
        collie__stage_p2p_share(comm, op->peer, op->dev, op->bytes, deadline, op->rec, &shared);
    if (rc != COLLIE_SUCCESS) return rc;
    if (shared) continue;
    free(op->rec);
    op->rec = NULL;
    rc = collie__cuda_copy((void *)op->sbuf, op->dev, op->bytes,
                           "copying a group's device send buffer to the host");
    if (rc != COLLIE_SUCCESS) return rc;
  }
  return COLLIE_SUCCESS;
}

collie_result_t
collie__group_run(collie_comm_t *comm, struct collie__group *g, int64_t timeout_ms)
{
  collie_result_t rc = COLLIE_SUCCESS;
  int64_t deadline = collie__deadline_after_ms(timeout_ms);
  if (comm->flight && g->fr_id >= 0)
    collie__flight_state(comm->flight, g->fr_id, COLLIE_FR_STARTED, NULL);
  rc = group_stage_sends(comm, g, deadline);
  size_t posted = 0;
  int nwait = 0;
  for (size_t i = 0; i < g->n && rc == COLLIE_SUCCESS; i++, posted++) {
    struct collie__group_op *op = &g->ops[i];
    struct collie__p2p_op *p = &g->reqs[i];
    memset(p, 0, sizeof(*p));
    p->peer = op->peer;
    p->tag = op->tag;
    p->len = op->bytes;
    collie__net_set_mem(comm->net, collie__mem_kind_of(op->sbuf, op->rbuf)); /* each its own */
    if (op->sbuf) {
      p->buf = op->rec ? (void *)op->rec : (void *)op->sbuf;
      p->reclen = op->rec ? sizeof(*op->rec) : 0;
      p->dev = op->rec ? op->dev : NULL;
      rc = collie__p2p_isend(comm->net, p);
    } else {
      p->buf = op->rbuf;
      p->dev = op->dev && collie__stage_p2p_on(comm) ? op->dev : NULL;
      p->exact = 1;
      rc = collie__p2p_irecv(comm->net, p);
    }
    nwait += collie__p2p_reqs(p, g->wait + nwait);
  }
  if (rc == COLLIE_SUCCESS)
    rc = collie__net_wait(comm->net, g->wait, nwait, deadline);
  else /* the messages posted so far must not outlive the group's arrays */
    collie__net_give_up(comm->net, rc);
  if (rc != COLLIE_SUCCESS) /* the net aborted and forgot them: what it took for them is ours */
    for (size_t i = 0; i < posted; i++) {
      free(g->reqs[i].sreq.own);
      g->reqs[i].sreq.own = NULL;
    }
  for (size_t i = 0; i < g->n && rc == COLLIE_SUCCESS; i++) /* device receives, from the host */
    if (g->ops[i].dev && !g->ops[i].sbuf && !g->reqs[i].on_dev)
      rc = collie__cuda_copy(g->ops[i].dev, g->ops[i].rbuf, g->ops[i].bytes,
                             "copying a group's received data to the device");
  if (rc != COLLIE_SUCCESS) {
    collie__err_prefix("group of %zu send/recv", g->n);
    collie__comm_poison(comm, rc);
  }
  if (comm->flight && g->fr_id >= 0) {
    collie__flight_state(comm->flight, g->fr_id,
                         rc == COLLIE_SUCCESS ? COLLIE_FR_COMPLETED : COLLIE_FR_FAILED, NULL);
    if (rc != COLLIE_SUCCESS)
      collie__comm_flight_dump(comm, rc == COLLIE_TIMEOUT ? "timeout" : "failure");
  }
  group_tele_done(comm, g, rc != COLLIE_SUCCESS);
  group_unstage(g);
  g->n = 0;
  return rc;
}

void
collie__group_free(struct collie__group *g)
{
  if (!g) return;
  group_unstage(g);
  free(g->ops);
  free(g->reqs);
  free(g->wait);
  free(g->rows);
  free(g);
}
