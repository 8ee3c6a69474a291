/*
 * netx.c - the data path of collie's network transport over a network
 * device (netdev.h; the protocol is in netx_int.h): requests in, headers
 * and payloads out through the device, headers matched with receives in
 * channel order, and the transport's ops for net.c. Setup and close are
 * netx_setup.c's.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "transport/netx_int.h"
#include "util/util.h"

static inline struct netx_xport *
netx_x(struct collie__xport *x)
{
  return (struct netx_xport *)x;
}

void
collie__netx_peer_name(const struct netx_xport *x, const struct netx_chan *c, char *buf, size_t len)
{
  (void)x;
  collie__fmt(buf, len, "rank %d (world rank %d, pid %d on %s)", c->peer, c->world_rank,
              (int)c->pid, c->host[0] ? c->host : "this host");
}

static void
netx_complete(struct netx_xport *x, struct collie__req *r, collie_result_t rc)
{
  r->rc = rc;
  r->done = 1;
  x->npending--;
}

collie_result_t
collie__netx_fail(struct netx_xport *x, collie_result_t rc, int touch)
{
  if (x->failed != COLLIE_SUCCESS) {
    collie__err_set_text(x->fail_msg);
    return x->failed;
  }
  x->failed = rc;
  collie__fmt(x->fail_msg, sizeof(x->fail_msg), "%s", collie__err_msg());
  /* Payloads in flight must never land in buffers their callers took back:
   * receives are withdrawn (their completions, if any, are ignored). */
  for (struct netx_bulk *b = x->bulk_live; b; b = b->next) {
    if (!b->is_send && b->r && x->ops->cancel) x->ops->cancel(x->dev, &b->op);
    b->r = NULL;
  }
  for (int i = 0; i < x->nchan; i++) {
    struct netx_chan *c = &x->chans[i];
    for (struct netx_bulk *b = c->rdv_head; b; b = b->next) b->r = NULL;
    if (!touch) continue;
    for (struct collie__req *r = c->sq_head, *n; r; r = n) {
      n = r->next;
      r->rc = rc;
      r->done = 1;
    }
    for (struct collie__req *r = c->rq_head, *n; r; r = n) {
      n = r->next;
      r->rc = rc;
      r->done = 1;
    }
    c->sq_head = c->sq_tail = c->rq_head = c->rq_tail = NULL;
  }
  collie__err_set_text(x->fail_msg);
  return rc;
}

static int
netx_check_abort(struct netx_xport *x)
{
  if (!atomic_load_explicit(&x->aborted, memory_order_acquire)) return 0;
  if (x->failed == COLLIE_SUCCESS)
    collie__netx_fail(
        x,
        collie__err(COLLIE_INVALID_USAGE, "%s: this rank aborted the communicator", x->ops->name),
        0);
  return 1;
}

/* Whether x has failed (an abort() of this rank counted): its failure, with
 * its message in the thread's slot; else SUCCESS. */
static collie_result_t
netx_failure(struct netx_xport *x)
{
  if (!netx_check_abort(x) && x->failed == COLLIE_SUCCESS) return COLLIE_SUCCESS;
  collie__err_set_text(x->fail_msg);
  return x->failed;
}

/* " during allreduce #3 step 1" for the oldest request of c's: a receive
 * not yet matched, a payload in flight, a send not yet out; or "". */
static void
netx_chan_doing(const struct netx_xport *x, const struct netx_chan *c, char *buf, size_t len)
{
  const struct collie__req *r = c->rq_head;
  for (const struct netx_bulk *b = x->bulk_live; b && !r; b = b->next)
    if (b->c == c && b->r) r = b->r;
  if (!r) r = c->sq_head;
  buf[0] = '\0';
  if (!r) return;
  char s[96];
  collie__slot_describe(r->slot, s, sizeof(s));
  collie__fmt(buf, len, " during %s", s);
}

/* A peer's failure: every message names it, what this rank was doing with
 * it, and why where the peer said. */
static collie_result_t
netx_fail_peer(struct netx_xport *x, struct netx_chan *c, const char *what_in)
{
  char who[160], doing[128], what[COLLIE_ERRMSG_LEN];
  collie__fmt(what, sizeof(what), "%s", what_in); /* often the thread's message, rewritten below */
  collie__netx_peer_name(x, c, who, sizeof(who));
  netx_chan_doing(x, c, doing, sizeof(doing));
  if (c->aborted && c->why[0])
    return collie__netx_fail(x,
                             collie__err(COLLIE_REMOTE_ERROR,
                                         "%s: %s aborted its communicator%s, after: %s",
                                         x->ops->name, who, doing, c->why),
                             1);
  if (c->aborted)
    return collie__netx_fail(x,
                             collie__err(COLLIE_REMOTE_ERROR, "%s: %s aborted its communicator%s",
                                         x->ops->name, who, doing),
                             1);
  return collie__netx_fail(
      x, collie__err(COLLIE_REMOTE_ERROR, "%s: %s %s%s", x->ops->name, who, what, doing), 1);
}

/* ---- Control messages ---- */

collie_result_t
collie__netx_ctrl(struct netx_xport *x, struct netx_chan *c, int type, uint32_t k, uint64_t slot,
                  uint64_t len, const void *buf, uint32_t inl)
{
  struct netx_buf *b = x->tx_free;
  if (!b) return COLLIE_NETDEV_AGAIN;
  struct netx_hdr h = {.magic = NETX_MAGIC,
                       .version = NETX_VERSION,
                       .type = (uint8_t)type,
                       .src = x->rank,
                       .k = k,
                       .comm = x->comm,
                       .slot = slot,
                       .len = len,
                       .inl = inl};
  memcpy(b->mem, &h, NETX_HDR);
  if (inl) memcpy(b->mem + NETX_HDR, buf, inl);
  b->op.peer = c->peer;
  /* A data header goes without a completion (b stays free): a completion
   * per message cost ~2 us of a 14 us exchange. BYE and ABORT keep theirs:
   * close waits for them to be out before the endpoint goes. */
  if ((type == NETX_EAGER_MSG || type == NETX_RTS) && NETX_HDR + inl <= x->inject_max)
    return x->ops->inject(x->dev, c->peer, b->mem, NETX_HDR + inl);
  collie_result_t rc = x->ops->send(x->dev, c->peer, b->mem, NETX_HDR + inl, x->arena_mr, &b->op);
  if (rc != COLLIE_SUCCESS) return rc;
  x->tx_free = b->next_free;
  x->tx_busy++;
  return COLLIE_SUCCESS;
}

void
collie__netx_tx_done(struct collie__netdev_op *op, collie_result_t rc, size_t n)
{
  (void)n;
  struct netx_buf *b = (struct netx_buf *)op;
  struct netx_xport *x = b->x;
  b->next_free = x->tx_free;
  x->tx_free = b;
  x->tx_busy--;
  if (rc != COLLIE_SUCCESS && op->peer >= 0 && op->peer < x->size && x->chan_of[op->peer] >= 0)
    netx_fail_peer(x, &x->chans[x->chan_of[op->peer]], collie__err_msg());
  else if (rc != COLLIE_SUCCESS)
    collie__netx_fail(x, rc, 1);
}

/* ---- Payloads ---- */

static struct netx_bulk *
netx_bulk_get(struct netx_xport *x)
{
  struct netx_bulk *b = x->bulk_free;
  if (b)
    x->bulk_free = b->next;
  else if (!(b = calloc(1, sizeof(*b))))
    return NULL;
  memset(b, 0, sizeof(*b));
  b->x = x;
  return b;
}

static void
netx_bulk_unlink(struct netx_xport *x, struct netx_bulk *b)
{
  for (struct netx_bulk **p = &x->bulk_live; *p; p = &(*p)->next)
    if (*p == b) {
      *p = b->next;
      break;
    }
  collie__netx_mr_put(x, b->mr, b->mr_cached);
  b->mr = NULL;
  b->next = x->bulk_free;
  x->bulk_free = b;
}

static void
netx_bulk_done(struct collie__netdev_op *op, collie_result_t rc, size_t n)
{
  struct netx_bulk *b = (struct netx_bulk *)op;
  struct netx_xport *x = b->x;
  struct collie__req *r = b->r;
  struct netx_chan *c = b->c;
  c->inflight--;
  netx_bulk_unlink(x, b);
  if (!r) return; /* the transport failed meanwhile */
  if (rc != COLLIE_SUCCESS) {
    netx_fail_peer(x, c, collie__err_msg());
    return;
  }
  if (!b->is_send && n != r->len) {
    char who[160];
    collie__netx_peer_name(x, c, who, sizeof(who));
    collie__netx_fail(x,
                      collie__err(COLLIE_REMOTE_ERROR,
                                  "%s: %s's payload brought %zu bytes where its header said %zu",
                                  x->ops->name, who, n, r->len),
                      1);
    return;
  }
  r->off = r->len;
  netx_complete(x, r, COLLIE_SUCCESS);
}

/* Starts b's tagged payload; AGAIN leaves it to start later. */
static collie_result_t
netx_bulk_start(struct netx_xport *x, struct netx_bulk *b, uint32_t k)
{
  struct collie__req *r = b->r;
  if (x->need_reg && r->len && !b->mr) {
    collie_result_t rc = collie__netx_mr_get(x, r->buf, r->len, &b->mr, &b->mr_cached);
    if (rc != COLLIE_SUCCESS) { /* ours, not the peer's: said as such, and first */
      char who[160], doing[96], why[COLLIE_ERRMSG_LEN];
      collie__fmt(why, sizeof(why), "%s", collie__err_msg());
      collie__netx_peer_name(x, b->c, who, sizeof(who));
      collie__slot_describe(r->slot, doing, sizeof(doing));
      return collie__netx_fail(
          x,
          collie__err(COLLIE_SYSTEM_ERROR, "%s: registering the %zu bytes of %s %s %s failed: %s",
                      x->ops->name, r->len, doing, b->is_send ? "to" : "from", who, why),
          1);
    }
  }
  b->op.done = netx_bulk_done;
  collie_result_t rc = b->is_send
                           ? x->ops->tsend(x->dev, b->c->peer, r->buf, r->len, k, b->mr, &b->op)
                           : x->ops->trecv(x->dev, b->c->peer, r->buf, r->len, k, b->mr, &b->op);
  if (rc != COLLIE_SUCCESS) return rc;
  b->next = x->bulk_live;
  x->bulk_live = b;
  b->c->inflight++;
  return COLLIE_SUCCESS;
}

/* Whether c's peer still owes this rank something, or this rank it: a
 * receive, a catch, a payload in flight, a send not yet out. */
static int
netx_expects(const struct netx_chan *c)
{
  return c->rq_head || c->sq_head || c->inflight || (c->catching && !c->sated);
}

/* ---- Sends ---- */

/* Starts c's queued sends in order, as far as buffers and the device allow. */
static collie_result_t
netx_tx(struct netx_xport *x, struct netx_chan *c)
{
  while (c->sq_head) {
    struct collie__req *r = c->sq_head;
    collie_result_t rc;
    if (r->len <= NETX_EAGER) {
      rc = collie__netx_ctrl(x, c, NETX_EAGER_MSG, c->send_k, r->slot, r->len, r->buf,
                             (uint32_t)r->len);
      if (rc == COLLIE_NETDEV_AGAIN) return COLLIE_SUCCESS;
      if (rc != COLLIE_SUCCESS) return netx_fail_peer(x, c, collie__err_msg());
      c->send_k++;
      c->sq_head = r->next;
      if (!c->sq_head) c->sq_tail = NULL;
      r->off = r->len;
      netx_complete(x, r, COLLIE_SUCCESS); /* the bytes are in our buffer */
      continue;
    }
    if (!c->head_rts) {
      rc = collie__netx_ctrl(x, c, NETX_RTS, c->send_k, r->slot, r->len, NULL, 0);
      if (rc == COLLIE_NETDEV_AGAIN) return COLLIE_SUCCESS;
      if (rc != COLLIE_SUCCESS) return netx_fail_peer(x, c, collie__err_msg());
      c->head_rts = 1;
    }
    struct netx_bulk *b = netx_bulk_get(x);
    if (!b)
      return collie__netx_fail(
          x, collie__err(COLLIE_SYSTEM_ERROR, "%s: out of memory sending", x->ops->name), 1);
    b->r = r;
    b->c = c;
    b->is_send = 1;
    rc = netx_bulk_start(x, b, c->send_k);
    if (rc != COLLIE_SUCCESS) {
      netx_bulk_unlink(x, b);
      if (rc == COLLIE_NETDEV_AGAIN) return COLLIE_SUCCESS;
      return netx_fail_peer(x, c, collie__err_msg());
    }
    c->head_rts = 0;
    c->send_k++;
    c->sq_head = r->next;
    if (!c->sq_head) c->sq_tail = NULL;
  }
  return COLLIE_SUCCESS;
}

/* ---- Receives ---- */

/* A sink's request s for the held header, put in front of c's receives. */
static void
netx_adopt(struct netx_xport *x, struct netx_chan *c, struct collie__req *s)
{
  collie__req_adopt(s, c->peer, &c->rq_head, &c->rq_tail);
  x->npending++;
}

static collie_result_t
netx_mismatch(struct netx_xport *x, struct netx_chan *c, const struct netx_msg *m,
              const struct collie__req *r)
{
  char who[160];
  collie__netx_peer_name(x, c, who, sizeof(who));
  return collie__netx_fail(
      x, collie__slot_mismatch_err(who, x->rank, m->slot, m->len, r->slot, r->len), 1);
}

/* The device refused to start b, a payload's receive: its request goes
 * back to the front of c's receives, so that the failure names it and
 * ends it. */
static collie_result_t
netx_rx_refused(struct netx_xport *x, struct netx_chan *c, struct netx_bulk *b)
{
  struct collie__req *r = b->r;
  netx_bulk_unlink(x, b);
  r->next = c->rq_head;
  c->rq_head = r;
  if (!c->rq_tail) c->rq_tail = r;
  return netx_fail_peer(x, c, collie__err_msg());
}

/* Matches c's arrived headers with its receives, in order. */
static collie_result_t
netx_rx(struct netx_xport *x, struct netx_chan *c)
{
  while (c->rdv_head) { /* payloads the device had no room for */
    struct netx_bulk *b = c->rdv_head;
    c->rdv_head = b->next;
    collie_result_t rc = netx_bulk_start(x, b, (uint32_t)b->r->xseq);
    if (rc == COLLIE_NETDEV_AGAIN) {
      b->next = c->rdv_head;
      c->rdv_head = b;
      return COLLIE_SUCCESS;
    }
    if (!c->rdv_head) c->rdv_tail = NULL;
    if (rc != COLLIE_SUCCESS) return netx_rx_refused(x, c, b);
  }
  /* A peer that aborted sends nothing more: its eager messages from before
   * the abort are still taken, but a payload it may never have sent is
   * not waited for. */
  if (c->aborted && c->inflight) return netx_fail_peer(x, c, "aborted");
  while (c->inbox && c->inbox->k == c->recv_k) {
    struct netx_msg *m = c->inbox;
    struct collie__req *r = c->rq_head;
    if (x->sink && collie__slot_is_p2p(m->slot) && (r || (c->catching && !c->sated)) &&
        (!r || m->slot != r->slot || m->len != (uint64_t)r->len)) {
      /* A point-to-point message nobody posted for: the net's matching takes it. */
      int more = 1, replace = 0;
      struct collie__req *s =
          x->sink->take(x->sink->ctx, c->peer, m->slot, (size_t)m->len, r, &more, &replace);
      if (!s) return COLLIE_SUCCESS; /* not now: it waits here */
      if (!more) c->sated = 1;
      netx_adopt(x, c, s);
      if (replace && r) { /* the net's receive r gives way to s (it has not started) */
        s->next = r->next;
        if (c->rq_tail == r) c->rq_tail = s;
        x->npending--;
      }
      r = s;
    }
    if (!r) return COLLIE_SUCCESS; /* held until a receive is posted (peek sees it) */
    if (m->slot != r->slot || m->len != (uint64_t)r->len) return netx_mismatch(x, c, m, r);
    c->rq_head = r->next;
    if (!c->rq_head) c->rq_tail = NULL;
    c->inbox = m->next;
    if (!c->inbox) c->inbox_tail = NULL;
    c->recv_k++;
    if (m->type == NETX_EAGER_MSG) {
      if (m->len) memcpy(r->buf, m->data, (size_t)m->len);
      r->off = r->len;
      netx_complete(x, r, COLLIE_SUCCESS);
      free(m);
      continue;
    }
    struct netx_bulk *b = netx_bulk_get(x);
    if (!b) {
      free(m);
      return collie__netx_fail(
          x, collie__err(COLLIE_SYSTEM_ERROR, "%s: out of memory receiving", x->ops->name), 1);
    }
    b->r = r;
    b->c = c;
    r->xseq = m->k;
    free(m);
    collie_result_t rc =
        c->rdv_head ? COLLIE_NETDEV_AGAIN : netx_bulk_start(x, b, (uint32_t)r->xseq);
    if (rc == COLLIE_NETDEV_AGAIN) {
      b->next = NULL;
      if (c->rdv_tail)
        c->rdv_tail->next = b;
      else
        c->rdv_head = b;
      c->rdv_tail = b;
      continue;
    }
    if (rc != COLLIE_SUCCESS) return netx_rx_refused(x, c, b);
    if (c->aborted) return netx_fail_peer(x, c, "aborted"); /* (the payload may never come) */
  }
  /* Gone, and still expected to send: a receive or a catch with nothing to take. */
  if (((c->aborted && (int32_t)(c->recv_k - c->abort_k) >= 0) ||
       (c->bye && (int32_t)(c->recv_k - c->bye_k) >= 0)) &&
      netx_expects(c) && (!c->inbox || c->inbox->k != c->recv_k)) {
    if (c->aborted) return netx_fail_peer(x, c, "aborted");
    char who[160], want[96] = "a message";
    collie__netx_peer_name(x, c, who, sizeof(who));
    if (c->rq_head) collie__slot_describe(c->rq_head->slot, want, sizeof(want));
    return collie__netx_fail(x,
                             collie__err(COLLIE_REMOTE_ERROR,
                                         "%s: %s closed its communicator while this rank "
                                         "expected %s from it",
                                         x->ops->name, who, want),
                             1);
  }
  return COLLIE_SUCCESS;
}

/* An eager message that is the next of its channel, for the receive at the
 * head of its queue (same slot and length), is copied straight into it
 * from the control buffer: 1. Otherwise (anything ahead of it, no receive
 * yet, a point-to-point message the net's matching may take, a mismatch
 * to report) it goes through the inbox and netx_rx: 0. */
static int
netx_take_now(struct netx_xport *x, struct netx_chan *c, const struct netx_hdr *h,
              const char *payload)
{
  struct collie__req *r = c->rq_head;
  if (c->inbox || h->k != c->recv_k || !r || r->slot != h->slot || (uint64_t)r->len != h->len ||
      (x->sink && collie__slot_is_p2p(h->slot)))
    return 0;
  if (h->len) memcpy(r->buf, payload, (size_t)h->len);
  r->off = r->len;
  c->rq_head = r->next;
  if (!c->rq_head) c->rq_tail = NULL;
  c->recv_k++;
  netx_complete(x, r, COLLIE_SUCCESS);
  return 1;
}

/* Puts a data header (and eager payload) into c's inbox, in k order. */
static int
netx_inbox(struct netx_chan *c, const struct netx_hdr *h, const char *payload)
{
  size_t extra = h->type == NETX_EAGER_MSG ? (size_t)h->len : 0;
  struct netx_msg *m = malloc(sizeof(*m) + extra);
  if (!m) return -1;
  m->next = NULL;
  m->k = h->k;
  m->type = h->type;
  m->slot = h->slot;
  m->len = h->len;
  if (extra) memcpy(m->data, payload, extra);
  /* Devices keep a pair's messages in order (FI_ORDER_SAS); in case one
   * does not, a header that overtook an earlier one is put before it. */
  if (!c->inbox_tail || (int32_t)(h->k - c->inbox_tail->k) > 0) {
    if (c->inbox_tail)
      c->inbox_tail->next = m;
    else
      c->inbox = m;
    c->inbox_tail = m;
    return 0;
  }
  struct netx_msg **p = &c->inbox;
  while (*p && (int32_t)(h->k - (*p)->k) > 0) p = &(*p)->next;
  m->next = *p;
  *p = m;
  return 0;
}

static collie_result_t
netx_proto(struct netx_xport *x, struct netx_chan *c, const char *what)
{
  char who[160];
  collie__netx_peer_name(x, c, who, sizeof(who));
  return collie__netx_fail(
      x, collie__err(COLLIE_REMOTE_ERROR, "%s: %s broke the protocol: %s", x->ops->name, who, what),
      1);
}

/* A control message that no rank of this communicator can have sent: too
 * short, of another protocol or version, of another communicator, or from
 * a rank it does not have. Anyone who reaches the endpoint can send one
 * (a connectionless device says nothing of who did), so it is dropped, not
 * fatal: logged the first NETX_DROPS_LOGGED times. */
#define NETX_DROPS_LOGGED 8
static void
netx_drop(struct netx_xport *x, const char *what, const struct netx_hdr *h)
{
  if (++x->dropped > NETX_DROPS_LOGGED) return;
  if (h)
    COLLIE_WARN("NET", "%s: dropped %s (from rank %d of communicator %llx)%s", x->ops->name, what,
                (int)h->src, (unsigned long long)h->comm,
                x->dropped == NETX_DROPS_LOGGED ? "; further ones are not logged" : "");
  else
    COLLIE_WARN("NET", "%s: dropped %s%s", x->ops->name, what,
                x->dropped == NETX_DROPS_LOGGED ? "; further ones are not logged" : "");
}

void
collie__netx_rx_done(struct collie__netdev_op *op, collie_result_t rc, size_t n)
{
  struct netx_buf *b = (struct netx_buf *)op;
  struct netx_xport *x = b->x;
  if (rc != COLLIE_SUCCESS) {
    if (x->failed == COLLIE_SUCCESS) collie__netx_fail(x, rc, 1);
    return;
  }
  struct netx_hdr h;
  struct netx_chan *c = NULL;
  if (n < NETX_HDR) {
    netx_drop(x, "a control message shorter than a header", NULL);
    goto repost;
  }
  memcpy(&h, b->mem, NETX_HDR);
  if (h.magic != NETX_MAGIC || h.version != NETX_VERSION) {
    netx_drop(x, "a control message of another protocol or version", NULL);
    goto repost;
  }
  if (h.src < 0 || h.src >= x->size || x->chan_of[h.src] < 0 || h.comm != x->comm) {
    /* Another communicator's endpoint reused the address, or a stranger. */
    netx_drop(x, "a control message not of this communicator", &h);
    goto repost;
  }
  c = &x->chans[x->chan_of[h.src]];
  if ((size_t)h.inl != n - NETX_HDR) {
    netx_proto(x, c, "a control message whose length disagrees with its header");
    goto repost;
  }
  switch (h.type) {
  case NETX_HELLO: {
    char tok[NETX_TOKEN_MAX + 1];
    size_t tl = h.inl < NETX_TOKEN_MAX ? h.inl : NETX_TOKEN_MAX;
    memcpy(tok, b->mem + NETX_HDR, tl);
    tok[tl] = '\0';
    const char *want = x->token ? x->token : "";
    if (c->hello || h.inl > NETX_TOKEN_MAX || !collie__equal_ct(tok, tl, want, strlen(want))) {
      char who[160];
      collie__netx_peer_name(x, c, who, sizeof(who));
      collie__netx_fail(x,
                        collie__err(COLLIE_REMOTE_ERROR, "%s: refused a hello from %s: %s",
                                    x->ops->name, who,
                                    c->hello ? "a second hello" : "it presented another job token"),
                        1);
      break;
    }
    c->hello = 1;
    break;
  }
  case NETX_EAGER_MSG:
  case NETX_RTS:
    if (!c->hello || (h.type == NETX_EAGER_MSG ? h.len != h.inl : h.inl != 0)) {
      netx_proto(x, c,
                 c->hello ? "a data header whose length disagrees with its payload"
                          : "data before its hello");
      break;
    }
    if (h.type == NETX_EAGER_MSG && netx_take_now(x, c, &h, b->mem + NETX_HDR)) break;
    if (netx_inbox(c, &h, b->mem + NETX_HDR) != 0)
      collie__netx_fail(
          x, collie__err(COLLIE_SYSTEM_ERROR, "%s: out of memory receiving", x->ops->name), 1);
    break;
  case NETX_BYE:
    c->bye = 1;
    c->bye_k = h.k;
    break;
  case NETX_ABORT: {
    if (c->aborted) break; /* its first word stands */
    c->abort_k = h.k;
    size_t l = h.inl < NETX_REASON_MAX ? h.inl : NETX_REASON_MAX;
    memcpy(c->why, b->mem + NETX_HDR, l);
    c->why[l] = '\0'; /* "": a plain collie_comm_abort */
    c->aborted = 1;
    if (x->ops->gone) x->ops->gone(x->dev, c->peer);
    break;
  }
  default:
    netx_proto(x, c, "a control message of an unknown type");
  }
repost:
  rc = x->ops->recv_any(x->dev, b->mem, NETX_CTRL, x->arena_mr, &b->op);
  if (rc != COLLIE_SUCCESS && x->failed == COLLIE_SUCCESS)
    collie__netx_fail(x,
                      rc == COLLIE_NETDEV_AGAIN
                          ? collie__err(COLLIE_SYSTEM_ERROR,
                                        "%s: the device took no more receive buffers", x->ops->name)
                          : rc,
                      1);
}

/* ---- Who drives the device ---- */

/* Tells every peer that this rank aborted (once; best effort). */
static void
netx_tell_abort(struct netx_xport *x)
{
  if (x->told) return;
  x->told = 1;
  for (int i = 0; i < x->nchan; i++)
    (void)collie__netx_ctrl(x, &x->chans[i], NETX_ABORT, x->chans[i].send_k, 0, 0, NULL, 0);
  (void)x->ops->progress(x->dev);
}

/* The driving thread takes the device: 0, or -1 when abort() holds it. */
static int
netx_enter(struct netx_xport *x)
{
  int idle = 0;
  return atomic_compare_exchange_strong(&x->owner, &idle, 1) ? 0 : -1;
}

static void
netx_leave(struct netx_xport *x)
{
  if (atomic_load_explicit(&x->aborted, memory_order_acquire)) {
    netx_tell_abort(x); /* an abort() came while we held the device */
    atomic_store(&x->owner, 2);
    return;
  }
  atomic_store(&x->owner, 0);
}

/* A peer on another host that its launcher noted as ended (collierun,
 * through the job's store), among those this rank expects something of,
 * fails the transport naming it and how it ended. Looked at every
 * NETX_NOTE_NS of waiting, after the first: one read of the job's note
 * count; only when it moved, one read per peer on another host not yet
 * known to have ended, whose answers are kept (a note, once there, stays),
 * so that a wait that starts later on a peer noted earlier still sees it. */
#define NETX_NOTE_NS (500 * 1000000LL)
static collie_result_t
netx_notes(struct netx_xport *x, int64_t now)
{
  int first = x->next_note == 0;
  x->next_note = now + NETX_NOTE_NS;
  if (first) return COLLIE_SUCCESS;
  int64_t count;
  if (collie__exit_note_count(x->job_store, &count, collie__deadline_after_ms(100)) != 0)
    return COLLIE_SUCCESS; /* the store did not answer: the deadline still holds */
  if (count != x->notes_seen) {
    for (int i = 0; i < x->nchan; i++) {
      struct netx_chan *c = &x->chans[i];
      if (c->near || c->noted) continue;
      int code = 0, got = collie__exit_note_get(x->job_store, c->world_rank, &code,
                                                collie__deadline_after_ms(100));
      if (got < 0) return COLLIE_SUCCESS; /* the store did not answer: look again next time */
      if (got > 0) c->noted = code + 1;
    }
    x->notes_seen = count;
  }
  for (int i = 0; i < x->nchan; i++) {
    struct netx_chan *c = &x->chans[i];
    if (!c->noted || !netx_expects(c)) continue;
    char how[96], what[160];
    collie__exit_note_describe(c->noted - 1, how, sizeof(how));
    collie__fmt(what, sizeof(what), "died (its launcher saw it %s) while this rank waited for it",
                how);
    return netx_fail_peer(x, c, what);
  }
  return COLLIE_SUCCESS;
}

/* A peer of this host whose process is gone, among those c expects
 * something of, fails the transport naming it. Looked at every
 * NETX_WATCH_NS of a wait: a message from a dead process never comes, and
 * libfabric's sockets providers do not say so (rxm retries the connection).
 * Peers on other hosts: their launchers' notes (netx_notes). */
#define NETX_WATCH_NS (100 * 1000000LL)
static collie_result_t
netx_watch(struct netx_xport *x)
{
  int64_t now = collie__now_coarse_ns();
  if (x->job_store && now >= x->next_note) {
    collie_result_t rc = netx_notes(x, now);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  if (now < x->next_watch) return COLLIE_SUCCESS;
  int first = x->next_watch == 0; /* a wait's first call: look from the next round on */
  x->next_watch = now + NETX_WATCH_NS;
  if (first) return COLLIE_SUCCESS;
  for (int i = 0; i < x->nchan; i++) {
    struct netx_chan *c = &x->chans[i];
    if (netx_expects(c) && c->near && collie__proc_dead(c->pid))
      return netx_fail_peer(x, c, "died (its process exited) while this rank waited for it");
  }
  return COLLIE_SUCCESS;
}

/* ---- The ops ---- */

static collie_result_t netx_post_locked(struct netx_xport *x, struct collie__req *r);

static collie_result_t
netx_post(struct collie__xport *xp, struct collie__req *r)
{
  struct netx_xport *x = netx_x(xp);
  if (netx_enter(x) != 0) { /* abort() holds the device: the transport has failed */
    r->done = 1;
    return r->rc = netx_failure(x);
  }
  collie_result_t rc = netx_post_locked(x, r);
  netx_leave(x);
  return rc;
}

static collie_result_t
netx_post_locked(struct netx_xport *x, struct collie__req *r)
{
  if ((r->rc = netx_failure(x)) != COLLIE_SUCCESS) {
    r->done = 1;
    return r->rc;
  }
  if (r->peer < 0 || r->peer >= x->size || x->chan_of[r->peer] < 0 || (r->len && !r->buf)) {
    r->rc = collie__err(
        COLLIE_INTERNAL_ERROR, "%s: %s of %zu bytes %s rank %d, which it cannot take", x->ops->name,
        r->is_send ? "send" : "receive", r->len, r->is_send ? "to" : "from", r->peer);
    r->done = 1;
    return r->rc;
  }
  struct netx_chan *c = &x->chans[x->chan_of[r->peer]];
  r->done = 0;
  r->rc = COLLIE_SUCCESS;
  r->off = 0;
  r->next = NULL;
  x->npending++;
  if (r->is_send) {
    if (c->sq_tail)
      c->sq_tail->next = r;
    else
      c->sq_head = r;
    c->sq_tail = r;
    return c->sq_head == r ? netx_tx(x, c) : COLLIE_SUCCESS;
  }
  if (c->rq_tail)
    c->rq_tail->next = r;
  else
    c->rq_head = r;
  c->rq_tail = r;
  return netx_rx(x, c);
}

static collie_result_t netx_progress_locked(struct netx_xport *x, int *pending);

static collie_result_t
netx_progress(struct collie__xport *xp, int *pending)
{
  struct netx_xport *x = netx_x(xp);
  *pending = 0;
  if (netx_enter(x) != 0) return netx_failure(x); /* abort() holds the device */
  collie_result_t rc = netx_progress_locked(x, pending);
  netx_leave(x);
  return rc;
}

static collie_result_t
netx_progress_locked(struct netx_xport *x, int *pending)
{
  collie_result_t rc = netx_failure(x);
  if (rc != COLLIE_SUCCESS) return rc;
  rc = x->ops->progress(x->dev);
  if (rc != COLLIE_SUCCESS) return collie__netx_fail(x, rc, 1);
  if (x->failed != COLLIE_SUCCESS) {
    collie__err_set_text(x->fail_msg);
    return x->failed;
  }
  for (int i = 0; i < x->nchan; i++) {
    struct netx_chan *c = &x->chans[i];
    if (c->sq_head && (rc = netx_tx(x, c)) != COLLIE_SUCCESS) return rc;
    if ((rc = netx_rx(x, c)) != COLLIE_SUCCESS) return rc;
  }
  *pending = x->npending + x->ncatch;
  return *pending ? netx_watch(x) : COLLIE_SUCCESS;
}

/* Whether the device may be slept on now: it has a descriptor and nothing
 * inside it waits for progress. */
static int
netx_can_sleep(struct netx_xport *x)
{
  if (x->ops->wait_fd(x->dev) < 0 || netx_enter(x) != 0) return 0;
  int can = x->ops->trywait(x->dev);
  netx_leave(x);
  return can;
}

static void
netx_wait(struct collie__xport *xp, int64_t until_ns)
{
  struct netx_xport *x = netx_x(xp);
  int64_t now = collie__now_ns();
  if (until_ns <= now) return;
  if (netx_can_sleep(x)) {
    int64_t ms = (until_ns - now + 999999) / 1000000;
    struct pollfd p = {.fd = x->ops->wait_fd(x->dev), .events = POLLIN};
    (void)poll(&p, 1, ms > 100 ? 100 : (int)ms);
    return;
  }
  /* No descriptor (or work inside the device): a short nap, then progress. */
  int64_t nap = until_ns - now < 50000 ? until_ns - now : 50000;
  collie__sleep_ns(nap);
}

static int
netx_poll_arm(struct collie__xport *xp, struct pollfd *fds, int max, int64_t *until_ns)
{
  struct netx_xport *x = netx_x(xp);
  (void)until_ns;
  if (x->failed != COLLIE_SUCCESS || atomic_load_explicit(&x->aborted, memory_order_acquire))
    return -1;
  if (x->ops->wait_fd(x->dev) < 0 || max < 1) return -2;
  if (netx_enter(x) != 0) return -1;
  int can = x->ops->trywait(x->dev);
  netx_leave(x);
  if (!can) return -1;
  fds[0].fd = x->ops->wait_fd(x->dev);
  fds[0].events = POLLIN;
  fds[0].revents = 0;
  return 1;
}

static void
netx_poll_done(struct collie__xport *xp, const struct pollfd *fds, int n)
{
  (void)xp;
  (void)fds;
  (void)n; /* the next progress reads the completion queue either way */
}

static void
netx_abort(struct collie__xport *xp)
{
  struct netx_xport *x = netx_x(xp);
  atomic_store_explicit(&x->aborted, 1, memory_order_release);
  int idle = 0;
  if (atomic_compare_exchange_strong(&x->owner, &idle, 2)) netx_tell_abort(x);
  /* else the driving thread tells them as it leaves the device */
}

static void
netx_tell(struct collie__xport *xp, const char *why)
{
  struct netx_xport *x = netx_x(xp);
  size_t l = strlen(why);
  if (l > NETX_REASON_MAX) l = NETX_REASON_MAX;
  if (x->told || netx_enter(x) != 0) return;
  x->told = 1;
  for (int i = 0; i < x->nchan; i++)
    (void)collie__netx_ctrl(x, &x->chans[i], NETX_ABORT, x->chans[i].send_k, 0, 0, why,
                            (uint32_t)l);
  (void)x->ops->progress(x->dev); /* best effort: let them leave */
  netx_leave(x);
}

void
collie__netx_tell_greeted(struct netx_xport *x, const char *why)
{
  size_t l = strlen(why);
  if (l > NETX_REASON_MAX) l = NETX_REASON_MAX;
  for (int i = 0; i < x->nchan; i++)
    if (x->chans[i].greeted)
      (void)collie__netx_ctrl(x, &x->chans[i], NETX_ABORT, x->chans[i].send_k, 0, 0, why,
                              (uint32_t)l);
  /* A little progress, so that the messages leave before the endpoint closes. */
  int64_t end = collie__now_ns() + 20000000LL;
  while (x->tx_busy && collie__now_ns() < end && x->ops->progress(x->dev) == COLLIE_SUCCESS)
    collie__sleep_ns(100000);
}

static int
netx_peek(struct collie__xport *xp, int peer, uint64_t *slot, size_t *len)
{
  struct netx_xport *x = netx_x(xp);
  if (peer < 0 || peer >= x->size || x->chan_of[peer] < 0) return 0;
  struct netx_chan *c = &x->chans[x->chan_of[peer]];
  if (c->rq_head || !c->inbox || c->inbox->k != c->recv_k) return 0;
  *slot = c->inbox->slot;
  *len = (size_t)c->inbox->len;
  return 1;
}

static void
netx_catch_p2p(struct collie__xport *xp, int peer, int on)
{
  struct netx_xport *x = netx_x(xp);
  if (peer < 0 || peer >= x->size || x->chan_of[peer] < 0) return;
  struct netx_chan *c = &x->chans[x->chan_of[peer]];
  if (on && !c->catching) x->ncatch++;
  if (!on && c->catching) x->ncatch--;
  c->catching = on;
  if (on) c->sated = 0;
}

static void
netx_close(struct collie__xport *xp)
{
  struct netx_xport *x = netx_x(xp);
  if (!x) return;
  if (x->failed == COLLIE_SUCCESS && !atomic_load(&x->aborted)) {
    /* Goodbye to every peer, then a short while for it (and our last
     * payloads) to leave. */
    for (int i = 0; i < x->nchan; i++)
      (void)collie__netx_ctrl(x, &x->chans[i], NETX_BYE, x->chans[i].send_k, 0, 0, NULL, 0);
    int64_t end = collie__now_ns() + 200000000LL;
    while ((x->tx_busy || x->bulk_live) && x->failed == COLLIE_SUCCESS && collie__now_ns() < end) {
      if (x->ops->progress(x->dev) != COLLIE_SUCCESS) break;
      if (x->tx_busy || x->bulk_live) collie__sleep_ns(20000);
    }
  }
  collie__netx_free(x);
}

void
collie__netx_free(struct netx_xport *x)
{
  if (!x) return;
  if (x->dev) {
    if (x->arena_mr) x->ops->dereg(x->dev, x->arena_mr);
    for (struct netx_bulk *b = x->bulk_live; b; b = b->next)
      if (b->mr && !b->mr_cached) x->ops->dereg(x->dev, b->mr);
    collie__netx_mr_clear(x);
    x->ops->close(x->dev);
  }
  for (struct netx_bulk *b = x->bulk_live, *n; b; b = n) {
    n = b->next;
    free(b);
  }
  for (struct netx_bulk *b = x->bulk_free, *n; b; b = n) {
    n = b->next;
    free(b);
  }
  for (int i = 0; i < x->nchan; i++) {
    for (struct netx_msg *m = x->chans[i].inbox, *n; m; m = n) {
      n = m->next;
      free(m);
    }
    for (struct netx_bulk *b = x->chans[i].rdv_head, *n; b; b = n) {
      n = b->next;
      free(b);
    }
  }
  free(x->arena);
  free(x->chans);
  free(x->chan_of);
  if (x->job_store) collie__store_release(x->job_store);
  free(x);
}

const struct collie__xport_ops collie__ofi_ops = {
    .name = "ofi",
    /* tcp;ofi_rxm over loopback, until measured on a fabric. */
    .cost = {.alpha_us = 10.0, .alpha_oversub_us = 20.0, .beta_us = 4.0e-4},
    .can_connect = collie__netx_can_connect,
    .open = collie__netx_open,
    .post = netx_post,
    .progress = netx_progress,
    .wait = netx_wait,
    .poll_arm = netx_poll_arm,
    .poll_done = netx_poll_done,
    .abort = netx_abort,
    .close = netx_close,
    .tell = netx_tell,
    .peek = netx_peek,
    .catch_p2p = netx_catch_p2p,
};
