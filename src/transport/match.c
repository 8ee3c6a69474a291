/*
 * match.c - point-to-point messages matched by source and tag, as MPI
 * matches them, on top of the ordered channels of the net.
 *
 * Channels deliver a pair's messages in the order they were sent. A
 * receive instead wants the first message of its source and tag, which
 * may sit behind others. So every P2P message that no posted request
 * expects goes through the transports' sink (transport.h) to take(): into
 * the posted receive it matches, straight into the receive's buffer (the
 * common case: the receive was there first), or else into the buffer for
 * unexpected messages. The transports only ask while something needs the
 * channel past the message: a posted receive that could take a later
 * message of that peer (the net "catches" the peer), a probe, a synchronous
 * send waiting for its acknowledgement, or a collective's receive behind
 * it. So a pair that sends and receives in the same order never copies a
 * message twice, and the unexpected buffer holds only what must be passed.
 *
 * The buffer is bounded (cfg->unexpected_bytes): a message that would
 * overflow it stays in its channel, and its sender waits, until receives
 * drain the buffer. A synchronous send's message asks for an
 * acknowledgement (an empty message back with its tag and id), which the
 * receiver sends once a receive matched it.
 *
 * Everything here runs on the thread that drives the net. take() runs
 * inside a transport's progress and must not call a transport: starting or
 * stopping catching and sending acknowledgements wait for
 * collie__match_progress, which runs after each progress round.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collie.h"
#include "transport/match.h"
#include "util/error.h"

/* A P2P message taken from a channel (or sent to this rank itself). */
struct collie__match_msg {
  struct collie__req req; /* what the transport fills */
  int peer;
  uint32_t tag;
  uint16_t id;
  int mode;                         /* enum collie__p2p_mode */
  size_t len;                       /* the message's bytes */
  void *data;                       /* our copy (unexpected; a receive too small): malloc'd */
  int counted;                      /* data counts against the buffer's limit */
  int arrived;                      /* all its bytes are in */
  struct collie__p2p_op *op;        /* the receive it goes to; NULL: unexpected so far */
  struct collie__p2p_op *from;      /* a message to self: its send, whose buf holds the bytes */
  struct collie__match_msg *next;   /* the unexpected list, in arrival order */
  struct collie__match_msg *flight; /* the list of messages whose bytes are arriving */
};

/* A zero-length acknowledgement on its way out. */
struct match_ack {
  struct collie__req req;
  struct match_ack *next;
};

/* A declined message at the head of a peer's channel (the buffer was full). */
struct match_held {
  int valid;
  uint64_t slot;
  size_t len;
};

struct collie__match {
  struct collie__net *n;
  int rank, size;
  struct collie__net_sink sink;
  struct collie__p2p_op *posted, **posted_tail; /* receives waiting for a message */
  struct collie__match_msg *unexp, **unexp_tail;
  struct collie__match_msg *flight;
  struct collie__p2p_op *syncs;  /* synchronous sends waiting for their acknowledgement */
  struct collie__p2p_op *direct; /* receives posted straight to their channel (op->sreq) */
  struct collie__p2p_op *probes; /* blocking probes (op->st gets what they found) */
  struct match_ack *acks;
  struct match_held *held; /* per peer */
  int *want;               /* per peer: why the net should catch its messages now */
  char *caught;            /* per peer: whether the transport catches them */
  char *sated;             /* per peer: take() told the transport no more */
  uint16_t *sync_next;     /* per peer: the id of the next synchronous send */
  size_t used, limit;
  int nunexp;
  struct collie__match_msg *spare; /* records to reuse (match_msg_free) */
  int nspare;
  int dirty; /* want changed since match_apply */
  /* Something for collie__match_progress to do (set with every change of
   * flight, probes, acks or dirty; recomputed there): net.c reads it on
   * every progress round, so that collectives' waits skip the call. */
  int work;
  char dummy;
};

static const char *
match_tag_text(int tag, char *buf, size_t len)
{
  if (tag == COLLIE_ANY_TAG)
    snprintf(buf, len, "any tag");
  else
    snprintf(buf, len, "tag %d", tag);
  return buf;
}

static int
match_fits(const struct collie__p2p_op *op, int peer, uint32_t tag)
{
  return (op->peer == COLLIE_ANY_SOURCE || op->peer == peer) &&
         (op->tag == COLLIE_ANY_TAG || (uint32_t)op->tag == tag);
}

/* ---- Catching: whether the transports hand a peer's messages to take() ---- */

/* Counts a reason to catch peer's messages (or all peers' for
 * COLLIE_ANY_SOURCE); match_apply tells the transports. */
static void
match_want(struct collie__match *m, int peer, int delta)
{
  for (int p = 0; p < m->size; p++)
    if (p != m->rank && (peer == COLLIE_ANY_SOURCE || peer == p)) m->want[p] += delta;
  m->dirty = 1;
  m->work = 1;
}

static void
match_apply(struct collie__match *m)
{
  if (!m->dirty) return;
  m->dirty = 0;
  for (int p = 0; p < m->size; p++) {
    int on = m->want[p] > 0;
    if (on == m->caught[p] && !(on && m->sated[p])) continue;
    /* A transport told "no more" by take() hands nothing over until told
     * again: leave it caught, which spares the pair that sends and
     * receives in step a call per message on its critical path. */
    if (!on && m->sated[p]) continue;
    m->caught[p] = (char)on;
    m->sated[p] = 0;
    collie__net_catch(m->n, p, on);
  }
}

/* ---- Finishing receives ---- */

static void
match_ack_send(struct collie__match *m, int peer, uint32_t tag, uint16_t id)
{
  struct match_ack *a = calloc(1, sizeof(*a));
  if (!a) return; /* the sender times out, naming the synchronous send */
  a->next = m->acks;
  m->acks = a;
  m->work = 1;
  (void)collie__net_isend(m->n, peer, &m->dummy, 0, collie__slot_p2p(tag, id, COLLIE_P2P_ACK),
                          &a->req);
}

/* Records are kept for reuse, a few: a pair that sends and receives in
 * step takes one per message, which should not cost an allocation. */
#define MATCH_SPARE_MAX 32

static void
match_msg_free(struct collie__match *m, struct collie__match_msg *g)
{
  if (g->counted) m->used -= g->len;
  free(g->data);
  if (m->nspare < MATCH_SPARE_MAX) {
    g->next = m->spare;
    m->spare = g;
    m->nspare++;
  } else {
    free(g);
  }
}

/* g's bytes are all in and op is its receive: op completes. */
static collie_result_t
match_finish(struct collie__match *m, struct collie__match_msg *g, struct collie__p2p_op *op)
{
  collie_result_t rc = COLLIE_SUCCESS;
  op->st.source = g->peer;
  op->st.tag = (int)g->tag;
  op->st.len = g->len;
  if (op->exact && g->len != op->len)
    rc = collie__err(
        COLLIE_INVALID_USAGE,
        "sizes differ: rank %d sent %zu bytes with tag %u, this receive takes %zu bytes "
        "(a receive with a status takes fewer)",
        g->peer, g->len, g->tag, op->len);
  else if (g->len > op->len)
    rc = collie__err(COLLIE_INVALID_USAGE,
                     "message truncated: rank %d sent %zu bytes with tag %u, the receive has room "
                     "for %zu bytes",
                     g->peer, g->len, g->tag, op->len);
  else if (g->from)
    memcpy(op->buf, g->from->buf, g->len);
  else if (g->data)
    memcpy(op->buf, g->data, g->len);
  else
    op->on_dev = g->req.on_dev;
  if (g->from) { /* a send to self completes once taken */
    g->from->done.done = 1;
    g->from->done.rc = COLLIE_SUCCESS;
  }
  if (g->mode == COLLIE_P2P_SYNC && !g->from && rc == COLLIE_SUCCESS)
    match_ack_send(m, g->peer, g->tag, g->id);
  op->done.rc = rc;
  op->done.done = 1;
  if (op->replaced) { /* its waiter waits on the request it had posted */
    op->sreq.rc = rc;
    op->sreq.done = 1;
  }
  match_msg_free(m, g);
  return rc;
}

/* ---- What the transports hand over ---- */

static struct collie__req *match_take_msg(struct collie__match *m, int peer, uint64_t slot,
                                          size_t len);
static struct collie__req *match_take_for(struct collie__match *m, int peer, uint64_t slot,
                                          size_t len, struct collie__p2p_op *op);

static struct collie__match_msg *
match_msg_new(struct collie__match *m, int peer, uint64_t slot, size_t len)
{
  struct collie__match_msg *g = m->spare;
  if (g) {
    m->spare = g->next;
    m->nspare--;
    memset(g, 0, sizeof(*g));
  } else if (!(g = calloc(1, sizeof(*g)))) {
    return NULL;
  }
  g->peer = peer;
  g->tag = (uint32_t)(slot >> 24);
  g->id = (uint16_t)(slot >> 8);
  g->mode = (int)(slot & 0xff);
  g->len = len;
  g->req.slot = slot;
  g->req.len = len;
  g->req.mem = COLLIE_MEM_HOST;
  return g;
}

static void
match_unexp_push(struct collie__match *m, struct collie__match_msg *g)
{
  *m->unexp_tail = g;
  m->unexp_tail = &g->next;
  m->nunexp++;
}

/* The direct receive whose request is head, if it would take a message of
 * peer with tag: unlinked from the direct list, no longer direct. */
static struct collie__p2p_op *
match_direct_taker(struct collie__match *m, const struct collie__req *head, int peer, uint32_t tag)
{
  if (!head) return NULL;
  for (struct collie__p2p_op **pp = &m->direct; *pp; pp = &(*pp)->next) {
    struct collie__p2p_op *op = *pp;
    if (&op->sreq != head) continue;
    if (!match_fits(op, peer, tag)) return NULL;
    *pp = op->next;
    op->next = NULL;
    op->direct = 0;
    op->replaced = 1;
    return op;
  }
  return NULL;
}

static struct collie__req *
match_take(void *ctx, int peer, uint64_t slot, size_t len, struct collie__req *head, int *more,
           int *replace)
{
  struct collie__match *m = ctx;
  if (peer < 0 || peer >= m->size) return NULL;
  struct collie__req *r;
  /* A message that a direct receive at the head expected by source and tag
   * but not by slot (a synchronous send, another size) is still its: the
   * receive's request gives way to one for this message. */
  struct collie__p2p_op *op = (int)(slot & 0xff) == COLLIE_P2P_ACK
                                  ? NULL
                                  : match_direct_taker(m, head, peer, (uint32_t)(slot >> 24));
  if (op) {
    r = match_take_for(m, peer, slot, len, op);
    *replace = r != NULL;
    if (!r) { /* out of memory: it stays the direct receive, asked again later */
      op->direct = 1;
      op->replaced = 0;
      op->next = m->direct;
      m->direct = op;
    }
  } else {
    r = match_take_msg(m, peer, slot, len);
  }
  /* Once the receive that caught the peer has its message, the messages
   * behind it stay in the channel (a receive posted later takes them
   * straight), until something else wants them. */
  *more = m->want[peer] > 0;
  if (!*more) {
    m->sated[peer] = 1;
    m->dirty = 1;
    m->work = 1;
  }
  return r;
}

/* g goes to the receive op: straight into its buffer, or, when it does not
 * fit, whole into one of its own (the receive then fails, naming both
 * sizes, and the channel goes on past it). 0 when out of memory (g freed). */
static int
match_bind(struct collie__match *m, struct collie__match_msg *g, struct collie__p2p_op *op)
{
  g->op = op;
  if (g->len > op->len || (op->exact && g->len != op->len)) {
    if (!(g->data = malloc(g->len ? g->len : 1))) {
      match_msg_free(m, g);
      return 0;
    }
    g->req.buf = g->data;
  } else {
    g->req.buf = op->buf;
    g->req.dev = op->dev;
  }
  return 1;
}

/* take() for a message that goes to the direct receive op. */
static struct collie__req *
match_take_for(struct collie__match *m, int peer, uint64_t slot, size_t len,
               struct collie__p2p_op *op)
{
  m->held[peer].valid = 0;
  struct collie__match_msg *g = match_msg_new(m, peer, slot, len);
  if (!g || !match_bind(m, g, op)) return NULL;
  g->flight = m->flight;
  m->flight = g;
  m->work = 1;
  return &g->req;
}

/* take() for a message of peer: the request its bytes go to, or NULL. */
static struct collie__req *
match_take_msg(struct collie__match *m, int peer, uint64_t slot, size_t len)
{
  m->held[peer].valid = 0;
  struct collie__match_msg *g = match_msg_new(m, peer, slot, len);
  if (!g) return NULL;
  if (g->mode == COLLIE_P2P_ACK) {
    g->req.buf = &m->dummy;
    g->req.len = 0;
  } else {
    struct collie__p2p_op **pp = &m->posted, *op = NULL;
    for (; *pp; pp = &(*pp)->next)
      if (match_fits(*pp, peer, g->tag)) break;
    if ((op = *pp) != NULL) {
      *pp = op->next;
      if (!*pp) m->posted_tail = pp;
      match_want(m, op->peer, -1);
      if (!match_bind(m, g, op)) return NULL;
    } else {
      if (m->used + len > m->limit || !(g->data = malloc(len ? len : 1))) {
        m->held[peer] = (struct match_held){1, slot, len};
        match_msg_free(m, g);
        return NULL;
      }
      g->counted = 1;
      m->used += len;
      g->req.buf = g->data;
      match_unexp_push(m, g);
    }
  }
  g->flight = m->flight;
  m->flight = g;
  m->work = 1;
  return &g->req;
}

/* ---- Progress ---- */

static void
match_acked(struct collie__match *m, const struct collie__match_msg *g)
{
  for (struct collie__p2p_op **pp = &m->syncs; *pp; pp = &(*pp)->next) {
    struct collie__p2p_op *op = *pp;
    if (op->peer != g->peer || op->id != g->id) continue;
    *pp = op->next;
    match_want(m, op->peer, -1);
    op->done.done = 1;
    op->done.rc = COLLIE_SUCCESS;
    return;
  }
  COLLIE_WARN("P2P", "an acknowledgement from rank %d (tag %u, id %u) for no synchronous send",
              g->peer, g->tag, g->id);
}

/* A direct receive's request is done: so is the receive. */
static void
match_direct_done(struct collie__p2p_op *op)
{
  op->direct = 0;
  op->st = (struct collie__p2p_status){op->peer, op->tag, op->len};
  op->on_dev = op->sreq.on_dev;
  op->done.rc = op->sreq.rc;
  op->done.done = 1;
}

/* The first unexpected message a probe or receive for (peer, tag) would take. */
static struct collie__match_msg *
match_find(const struct collie__match *m, int peer, int tag)
{
  for (struct collie__match_msg *g = m->unexp; g; g = g->next) {
    struct collie__p2p_op probe = {.peer = peer, .tag = tag};
    if (match_fits(&probe, g->peer, g->tag)) return g;
  }
  return NULL;
}

/* A message held back in a channel (the buffer full) that (peer, tag) would take. */
static int
match_find_held(const struct collie__match *m, int peer, int tag, struct collie__p2p_status *st)
{
  for (int p = 0; p < m->size; p++) {
    const struct match_held *h = &m->held[p];
    struct collie__p2p_op probe = {.peer = peer, .tag = tag};
    if (!h->valid || !match_fits(&probe, p, (uint32_t)(h->slot >> 24)) ||
        (int)(h->slot & 0xff) == COLLIE_P2P_ACK)
      continue;
    *st = (struct collie__p2p_status){p, (int)(uint32_t)(h->slot >> 24), h->len};
    return 1;
  }
  return 0;
}

collie_result_t
collie__match_progress(struct collie__match *m)
{
  collie_result_t rc = COLLIE_SUCCESS;
  if (!m->flight && !m->probes && !m->acks && !m->dirty) {
    m->work = 0;
    return rc;
  }
  for (struct collie__match_msg **gp = &m->flight, *g; (g = *gp) != NULL;) {
    if (!g->req.done) {
      gp = &g->flight;
      continue;
    }
    *gp = g->flight;
    g->arrived = 1;
    if (g->req.rc != COLLIE_SUCCESS) continue; /* the net fails with it */
    if (g->mode == COLLIE_P2P_ACK) {
      match_acked(m, g);
      match_msg_free(m, g);
    } else if (g->op) {
      collie_result_t r = match_finish(m, g, g->op);
      if (rc == COLLIE_SUCCESS) rc = r;
    }
  }
  for (struct collie__p2p_op **pp = &m->probes, *op; (op = *pp) != NULL;) {
    struct collie__match_msg *g = match_find(m, op->peer, op->tag);
    if (g) op->st = (struct collie__p2p_status){g->peer, (int)g->tag, g->len};
    if (g || match_find_held(m, op->peer, op->tag, &op->st)) {
      *pp = op->next;
      op->done.done = 1;
      op->done.rc = COLLIE_SUCCESS;
    } else {
      pp = &op->next;
    }
  }
  for (struct match_ack **ap = &m->acks, *a; (a = *ap) != NULL;) {
    if (a->req.done) {
      *ap = a->next;
      free(a);
    } else {
      ap = &a->next;
    }
  }
  match_apply(m);
  m->work = m->flight || m->probes || m->acks || m->dirty;
  return rc;
}

int *
collie__match_work(struct collie__match *m)
{
  return &m->work;
}

/* ---- Sends and receives ---- */

static uint64_t
match_slot_of(const struct collie__p2p_op *op)
{
  return collie__slot_p2p(op->tag == COLLIE_ANY_TAG ? 0xffffffffu : (uint32_t)op->tag, 0,
                          COLLIE_P2P_STANDARD);
}

/* The op's done request, pending, named as a receive from (or a send to)
 * op->peer for a timeout message. */
static void
match_op_start(struct collie__p2p_op *op, int is_send)
{
  /* Field by field, as the hot path wants (no memset of the requests:
   * collie__net_isend and _irecv fill sreq when it is posted). */
  op->done.done = 0;
  op->done.rc = COLLIE_SUCCESS;
  op->done.peer = op->peer;
  op->done.is_send = is_send;
  op->done.slot = match_slot_of(op);
  op->done.len = op->len;
  op->done.off = 0;
  op->done.own = NULL;
  op->sreq.done = 0;
  op->sreq.own = NULL;
  op->st = (struct collie__p2p_status){-1, -1, 0};
  op->on_dev = 0;
  op->self = 0;
  op->direct = 0;
  op->replaced = 0;
  op->next = NULL;
}

collie_result_t
collie__p2p_isend(struct collie__net *n, struct collie__p2p_op *op)
{
  struct collie__match *m = collie__net_match(n);
  match_op_start(op, 1);
  if (op->tag < 0 || op->peer < 0 || op->peer >= m->size)
    return collie__err(COLLIE_INTERNAL_ERROR, "send to rank %d with tag %d", op->peer, op->tag);
  if (op->peer == m->rank) {
    /* To self: straight into a receive posted for it; else a standard send
     * is copied into the unexpected buffer and complete (as a small send to
     * a peer is once out), and a synchronous one, or one the buffer cannot
     * hold, is held (its bytes stay in the sender's buffer) until one is. */
    op->self = 1;
    struct collie__match_msg *g = match_msg_new(m, m->rank, match_slot_of(op), op->len);
    if (!g) return collie__err(COLLIE_SYSTEM_ERROR, "send to this rank itself: out of memory");
    g->from = op;
    g->arrived = 1;
    for (struct collie__p2p_op **pp = &m->posted; *pp; pp = &(*pp)->next) {
      struct collie__p2p_op *r = *pp;
      if (!match_fits(r, m->rank, g->tag)) continue;
      *pp = r->next;
      if (!*pp) m->posted_tail = pp;
      match_want(m, r->peer, -1);
      return match_finish(m, g, r);
    }
    if (!op->sync && m->used + op->len <= m->limit && (g->data = malloc(op->len ? op->len : 1))) {
      memcpy(g->data, op->buf, op->len);
      g->counted = 1;
      m->used += op->len;
      g->from = NULL;
      op->done.done = 1;
    }
    match_unexp_push(m, g);
    return COLLIE_SUCCESS;
  }
  uint16_t id = 0;
  if (op->sync) {
    id = m->sync_next[op->peer]++;
    op->id = id;
    op->next = m->syncs;
    m->syncs = op;
    match_want(m, op->peer, 1); /* its acknowledgement comes on the peer's channel */
    match_apply(m);
  }
  uint64_t slot =
      collie__slot_p2p((uint32_t)op->tag, id, op->sync ? COLLIE_P2P_SYNC : COLLIE_P2P_STANDARD);
  return op->reclen ? collie__net_isend_device(n, op->peer, op->buf, op->reclen, op->dev, op->len,
                                               slot, &op->sreq)
                    : collie__net_isend(n, op->peer, op->buf, op->len, slot, &op->sreq);
}

/* Whether op may go straight to its channel: a blocking receive (nothing
 * else is posted to the channel until it is done, so its request is the
 * channel's only one) from a named peer with a named tag, that no receive
 * posted before it would take the message from. A receive of up to len
 * bytes (collie_recv_status) goes too: its request expects len, and a
 * shorter message arrives through take(), which binds it to the same
 * buffer (no copy either way). */
static int
match_direct_ok(const struct collie__match *m, const struct collie__p2p_op *op)
{
  if (!op->now || op->peer < 0 || op->peer == m->rank || op->tag < 0 || (op->dev && !op->exact))
    return 0;
  for (const struct collie__p2p_op *p = m->posted; p; p = p->next)
    if (match_fits(p, op->peer, (uint32_t)op->tag)) return 0;
  return 1;
}

collie_result_t
collie__p2p_irecv(struct collie__net *n, struct collie__p2p_op *op)
{
  struct collie__match *m = collie__net_match(n);
  match_op_start(op, 0);
  for (struct collie__match_msg **gp = &m->unexp, *g; (g = *gp) != NULL; gp = &g->next) {
    if (!match_fits(op, g->peer, g->tag)) continue;
    *gp = g->next;
    if (!*gp) m->unexp_tail = gp;
    m->nunexp--;
    g->next = NULL;
    if (g->arrived) return match_finish(m, g, op);
    g->op = op; /* its bytes are still arriving: it finishes in progress */
    return COLLIE_SUCCESS;
  }
  if (match_direct_ok(m, op)) {
    /* The same-tag path: the channel's next message is most likely this
     * one, so the receive goes to the channel as it stands, and the
     * transport takes the bytes with no matching at all. Anything else
     * arriving first goes to take(), as for any receive. */
    uint64_t slot = collie__slot_p2p((uint32_t)op->tag, 0, COLLIE_P2P_STANDARD);
    /* Listed first: the post may take a message already there, and take()
     * must know the request as this receive's. */
    op->direct = 1;
    op->next = m->direct;
    m->direct = op;
    return op->dev
               ? collie__net_irecv_device(n, op->peer, op->buf, op->dev, op->len, slot, &op->sreq)
           : op->exact ? collie__net_irecv(n, op->peer, op->buf, op->len, slot, &op->sreq)
                       : collie__net_irecv_upto(n, op->peer, op->buf, op->len, slot, &op->sreq);
  }
  *m->posted_tail = op;
  m->posted_tail = &op->next;
  match_want(m, op->peer, 1);
  match_apply(m);
  return COLLIE_SUCCESS;
}

void
collie__p2p_settle(struct collie__net *n, struct collie__p2p_op *op)
{
  if (!op->direct) return;
  struct collie__match *m = collie__net_match(n);
  for (struct collie__p2p_op **pp = &m->direct; *pp; pp = &(*pp)->next)
    if (*pp == op) {
      *pp = op->next;
      break;
    }
  match_direct_done(op);
}

int
collie__p2p_reqs(struct collie__p2p_op *op, struct collie__req **reqs)
{
  int k = 0;
  if (op->direct || op->replaced) { /* a direct receive: its own request */
    reqs[0] = &op->sreq;
    return 1;
  }
  if (op->done.is_send && !op->self) reqs[k++] = &op->sreq;
  if (!op->done.is_send || op->self || op->sync) reqs[k++] = &op->done;
  return k;
}

collie_result_t
collie__p2p_probe(struct collie__net *n, int source, int tag, int block, int *found,
                  struct collie__p2p_status *st, int64_t deadline_ns)
{
  struct collie__match *m = collie__net_match(n);
  struct collie__p2p_op op = {.peer = source, .tag = tag};
  match_op_start(&op, 0);
  *found = 0;
  /* Catching while it looks makes messages queued behind others visible. */
  match_want(m, source, 1);
  match_apply(m);
  op.next = m->probes;
  m->probes = &op;
  m->work = 1;
  collie_result_t rc = collie__net_poll(n);
  if (rc == COLLIE_SUCCESS && !op.done.done && block) {
    struct collie__req *w = &op.done;
    rc = collie__net_wait(n, &w, 1, deadline_ns);
  }
  if (rc != COLLIE_SUCCESS) return rc; /* the net failed: m forgot the probe */
  for (struct collie__p2p_op **pp = &m->probes; *pp; pp = &(*pp)->next)
    if (*pp == &op) {
      *pp = op.next;
      break;
    }
  match_want(m, source, -1);
  match_apply(m);
  if (op.done.done) {
    *found = 1;
    *st = op.st;
  }
  return COLLIE_SUCCESS;
}

/* ---- Life ---- */

struct collie__match *
collie__match_new(struct collie__net *n, int rank, int size, size_t unexpected_bytes)
{
  struct collie__match *m = calloc(1, sizeof(*m));
  if (!m) return NULL;
  m->n = n;
  m->rank = rank;
  m->size = size;
  m->limit = unexpected_bytes;
  m->posted_tail = &m->posted;
  m->unexp_tail = &m->unexp;
  m->sink = (struct collie__net_sink){m, match_take};
  m->held = calloc((size_t)size, sizeof(*m->held));
  m->want = calloc((size_t)size, sizeof(*m->want));
  m->caught = calloc((size_t)size, 1);
  m->sated = calloc((size_t)size, 1);
  m->sync_next = calloc((size_t)size, sizeof(*m->sync_next));
  if (!m->held || !m->want || !m->caught || !m->sated || !m->sync_next) {
    collie__match_free(m);
    return NULL;
  }
  return m;
}

const struct collie__net_sink *
collie__match_sink(struct collie__match *m)
{
  return &m->sink;
}

void
collie__match_describe(const struct collie__match *m, char *buf, size_t len)
{
  size_t o = 0;
  buf[0] = '\0';
  if (!m) return;
  if (m->nunexp > 0) {
    o += (size_t)snprintf(buf, len, "; %d unexpected message%s here (", m->nunexp,
                          m->nunexp == 1 ? "" : "s");
    int shown = 0;
    for (const struct collie__match_msg *g = m->unexp; g && o < len; g = g->next) {
      if (shown == 4) {
        o += (size_t)snprintf(buf + o, len - o, ", ...");
        break;
      }
      o += (size_t)snprintf(buf + o, len - o, "%sfrom rank %d with tag %u, %zu bytes",
                            shown ? "; " : "", g->peer, g->tag, g->len);
      shown++;
    }
    if (o < len) o += (size_t)snprintf(buf + o, len - o, ")");
  }
  for (int p = 0; p < m->size && o < len; p++) {
    if (!m->held[p].valid) continue;
    char t[32];
    o += (size_t)snprintf(buf + o, len - o,
                          "; rank %d's message with %s (%zu bytes) waits in its channel: the "
                          "buffer for unexpected messages (COLLIE_P2P_UNEXPECTED_BYTES = %zu) "
                          "holds %zu",
                          p, match_tag_text((int)(uint32_t)(m->held[p].slot >> 24), t, sizeof(t)),
                          m->held[p].len, m->limit, m->used);
  }
}

void
collie__match_forget(struct collie__match *m)
{
  if (!m) return;
  m->posted = NULL;
  m->posted_tail = &m->posted;
  m->syncs = NULL;
  m->probes = NULL;
  m->direct = NULL;
  /* Messages bound for a receive that is forgotten become plain garbage. */
  for (struct collie__match_msg *g = m->unexp; g; g = g->next) g->from = NULL;
}

void
collie__match_free(struct collie__match *m)
{
  if (!m) return;
  struct collie__match_msg *g, *next;
  /* A message in flight is on the flight list, and maybe the unexpected
   * list too: free each once. */
  for (g = m->flight; g; g = next) {
    next = g->flight;
    if (!g->op && !g->from && g->counted) continue; /* on the unexpected list: freed below */
    match_msg_free(m, g);
  }
  for (g = m->unexp; g; g = next) {
    next = g->next;
    match_msg_free(m, g);
  }
  for (struct match_ack *a = m->acks, *an; a; a = an) {
    an = a->next;
    free(a);
  }
  for (g = m->spare; g; g = next) {
    next = g->next;
    free(g);
  }
  free(m->held);
  free(m->want);
  free(m->caught);
  free(m->sated);
  free(m->sync_next);
  free(m);
}
