/*
 * p2p.c - point-to-point send and receive. Messages of a pair match in the
 * order they were issued; the slot carries the user's tag and the pair's
 * message counter, so a receive posted for another tag or a different size
 * fails with a clear mismatch instead of taking the wrong bytes. A receive
 * from any source takes its peer, and that peer's counter, when it runs.
 */
#include <stdio.h>
#include <stdlib.h>

#include "coll/coll.h"
#include "util/error.h"

static collie_result_t
p2p_run(struct collie__call *c, int is_send)
{
  struct collie__req r;
  struct collie__req *w = &r;
  uint64_t slot = collie__slot_p2p((uint32_t)c->tag, c->p2p_seq);
  size_t bytes = c->count * c->esize;
  collie_result_t rc;
  if (is_send)
    rc = c->p2p_rec ? collie__net_isend_device(c->net, c->root, c->p2p_rec, c->p2p_reclen,
                                               c->p2p_dev, bytes, slot, &r)
                    : collie__net_isend(c->net, c->root, c->sendbuf, bytes, slot, &r);
  else
    rc = c->p2p_dev
             ? collie__net_irecv_device(c->net, c->root, c->recvbuf, c->p2p_dev, bytes, slot, &r)
             : collie__net_irecv(c->net, c->root, c->recvbuf, bytes, slot, &r);
  if (rc != COLLIE_SUCCESS) return rc;
  rc = collie__net_wait(c->net, &w, 1, c->deadline_ns);
  if (!is_send) c->p2p_on_dev = r.on_dev;
  /* A failed wait aborted the net, which forgets r without touching it:
   * host memory the transport took for it (a refused device send) is ours
   * to free. A completed r has none. */
  free(r.own);
  return rc;
}

collie_result_t
collie__p2p_send(struct collie__call *c)
{
  return p2p_run(c, 1);
}

/* A receive from any source (root < 0): waits until some peer's next message
 * is the one its pair counter expects with this tag, takes that peer's
 * number, then receives it like any other. The peers are looked at from the
 * next rank on, round robin. */
static collie_result_t
p2p_recv_any(struct collie__call *c)
{
  uint64_t stack[64], *slots = c->size <= 64 ? stack : calloc((size_t)c->size, sizeof(uint64_t));
  if (!slots) return collie__err(COLLIE_SYSTEM_ERROR, "recv from any source: out of memory");
  for (int p = 0; p < c->size; p++)
    slots[p] = p == c->rank ? 0 : collie__slot_p2p((uint32_t)c->tag, c->p2p_recv_seqs[p]);
  char want[96];
  snprintf(want, sizeof(want), "a message with tag %d from any rank", c->tag);
  int peer = -1;
  size_t len = 0;
  collie_result_t rc =
      collie__net_wait_any(c->net, slots, c->rank + 1, want, &peer, &len, c->deadline_ns);
  if (slots != stack) free(slots);
  if (rc != COLLIE_SUCCESS) return rc;
  if (len != c->count * c->esize)
    return collie__err(COLLIE_INVALID_USAGE,
                       "recv from any source (tag %d): rank %d sent %zu bytes, this receive "
                       "takes %zu (%zu x %s)",
                       c->tag, peer, len, c->count * c->esize, c->count,
                       collie_dtype_name(c->dtype));
  c->root = peer;
  c->p2p_seq = c->p2p_recv_seqs[peer]++;
  *c->source = peer;
  return p2p_run(c, 0);
}

collie_result_t
collie__p2p_recv(struct collie__call *c)
{
  return c->root < 0 ? p2p_recv_any(c) : p2p_run(c, 0);
}
