/*
 * p2p.c - point-to-point send and receive. Messages of a pair match in the
 * order they were issued; the slot carries the user's tag and the pair's
 * message counter, so a receive posted for another tag or a different size
 * fails with a clear mismatch instead of taking the wrong bytes.
 */
#include "coll/coll.h"

static collie_result_t
p2p_run(struct collie__call *c, int is_send)
{
  struct collie__req r;
  struct collie__req *w = &r;
  uint64_t slot = collie__slot_p2p((uint32_t)c->tag, c->p2p_seq);
  size_t bytes = c->count * c->esize;
  collie_result_t rc = is_send ? collie__net_isend(c->net, c->root, c->sendbuf, bytes, slot, &r)
                               : collie__net_irecv(c->net, c->root, c->recvbuf, bytes, slot, &r);
  if (rc != COLLIE_SUCCESS) return rc;
  return collie__net_wait(c->net, &w, 1, c->deadline_ns);
}

collie_result_t
collie__p2p_send(struct collie__call *c)
{
  return p2p_run(c, 1);
}

collie_result_t
collie__p2p_recv(struct collie__call *c)
{
  return p2p_run(c, 0);
}
