/*
 * p2p.c - point-to-point send, receive and probe as calls: each posts its
 * message to the net's matching (transport/match.c), which pairs sends and
 * receives by source and tag as MPI does, and waits for it. An async send
 * or receive is posted and left (collie__p2p_post), and finished once its
 * requests are done (collie__p2p_done; core/work.c).
 */
#include <stdlib.h>

#include "coll/coll.h"
#include "util/error.h"

static collie_result_t
p2p_wait(struct collie__call *c, struct collie__p2p_op *op)
{
  struct collie__req *reqs[2];
  int k = collie__p2p_reqs(op, reqs);
  return collie__net_wait(c->net, reqs, k, c->deadline_ns);
}

collie_result_t
collie__p2p_post(struct collie__call *c, struct collie__p2p_op *op, int now)
{
  collie_result_t rc;
  /* Field by field: a compound literal would zero the whole op (two
   * requests) on every send and receive. */
  op->peer = c->root;
  op->tag = c->tag;
  op->len = c->count * c->esize;
  op->sync = 0;
  op->exact = 0;
  op->now = now;
  op->reclen = 0;
  op->dev = NULL;
  if (c->sendbuf) {
    op->sync = c->p2p_sync;
    op->buf = (void *)c->sendbuf;
    if (c->p2p_rec) {
      op->buf = (void *)c->p2p_rec;
      op->reclen = c->p2p_reclen;
      op->dev = c->p2p_dev;
    }
    rc = collie__p2p_isend(c->net, op);
  } else {
    /* With a status a shorter message is fine and its size reported;
     * without one the sizes must be equal. */
    op->buf = c->recvbuf;
    op->dev = c->p2p_dev;
    op->exact = !c->p2p_status;
    rc = collie__p2p_irecv(c->net, op);
  }
  /* What was posted must not outlive the call: the net forgets it. */
  if (rc != COLLIE_SUCCESS) collie__net_give_up(c->net, rc);
  return rc;
}

collie_result_t
collie__p2p_done(struct collie__call *c, struct collie__p2p_op *op, collie_result_t rc)
{
  /* A failed wait aborted the net, which forgets the send without touching
   * it: host memory the transport took for it (a refused device send) is
   * ours to free. A completed send has none. */
  free(op->sreq.own);
  op->sreq.own = NULL;
  if (rc != COLLIE_SUCCESS || c->sendbuf) return rc;
  collie__p2p_settle(c->net, op);
  c->p2p_on_dev = op->on_dev;
  if (c->source) *c->source = op->st.source;
  if (c->p2p_status)
    *c->p2p_status =
        (collie_status_t){.source = op->st.source, .tag = op->st.tag, .bytes = op->st.len};
  return COLLIE_SUCCESS;
}

/* A send or receive run to completion: posted, waited for, finished. */
static collie_result_t
p2p_run(struct collie__call *c)
{
  struct collie__p2p_op op;
  collie_result_t rc = collie__p2p_post(c, &op, 1);
  if (rc != COLLIE_SUCCESS) return rc;
  return collie__p2p_done(c, &op, p2p_wait(c, &op));
}

collie_result_t
collie__p2p_send(struct collie__call *c)
{
  return p2p_run(c);
}

/* A probe (c->p2p_probe: 1 blocking, 2 once): the status of the message a
 * receive from c->root with c->tag would take, left where it is. */
static collie_result_t
p2p_probe(struct collie__call *c)
{
  struct collie__p2p_status st;
  int found = 0;
  collie_result_t rc =
      collie__p2p_probe(c->net, c->root, c->tag, c->p2p_probe == 1, &found, &st, c->deadline_ns);
  if (rc != COLLIE_SUCCESS) return rc;
  if (c->p2p_flag) *c->p2p_flag = found;
  if (found && c->p2p_status)
    *c->p2p_status = (collie_status_t){.source = st.source, .tag = st.tag, .bytes = st.len};
  return COLLIE_SUCCESS;
}

collie_result_t
collie__p2p_recv(struct collie__call *c)
{
  return c->p2p_probe ? p2p_probe(c) : p2p_run(c);
}
