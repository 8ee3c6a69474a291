/*
 * tcp.c - the data path of the tcp transport: framing messages onto the
 * connections that tcp_setup.c opened (tcp_proto.h, docs/wire.md), and
 * post, progress, wait, abort and close. Kept apart from setup because this
 * is the hot path: everything here is non-blocking and runs per message.
 *
 * Data. A message goes out as frames of at most COLLIE_TCP_CHUNK bytes; the
 * receiver lands each payload directly in the posted buffer (no staging copy).
 * When no receive is posted the next header may be read and held, but no
 * payload: the sender then stalls on a full socket, which is the backpressure.
 * Since the chunking rule is fixed, a receiver that expects a message reads
 * the header and the predicted payload with one recvmsg(); a header that does
 * not match fails the whole transport, so a wrong guess never goes unnoticed.
 *
 * Leaving. close() sends a BYE frame on each channel, so that a peer can tell
 * "left normally" from "crashed or aborted" (a stream that ends without BYE)
 * in its message. Either way the peer fails what it has posted, or later
 * posts, to the rank that left - within one wait(), since every socket is
 * polled - and nothing else: as with shm, a failure spreads to the ranks that
 * wait on the failed one (they abort in turn), not by broadcast.
 */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "transport/tcp_int.h"
#include "transport/tcp_proto.h"
#include "transport/transport.h"
#include "util/error.h"
#include "util/util.h"

#define TCP_HDR ((uint32_t)sizeof(struct collie__tcp_frame))

static inline struct collie__tcp_xport *
tcp_x(struct collie__xport *x)
{
  return (struct collie__tcp_xport *)(void *)x;
}

/* ---- Naming ---- */

/* Names c's peer for messages: "rank 3 (world rank 5, pid 123, ip:port)",
 * with ", host NAME" before the address when it is on another host. Writes
 * at most len bytes of buf, NUL-terminated. Never fails. */
void
collie__tcp_peer_name(const struct collie__tcp_chan *c, char *buf, size_t len)
{
  collie__fmt(buf, len, "rank %d (world rank %d, pid %d, %s%s%s%s)", c->peer, c->world_rank,
              (int)c->pid, c->host[0] ? "host " : "", c->host, c->host[0] ? ", " : "",
              c->addr[0] ? c->addr : "not connected");
}

/* " during allreduce #3 step 1" for the oldest request on c, or "". */
static void
tcp_chan_doing(const struct collie__tcp_chan *c, char *buf, size_t len)
{
  const struct collie__req *r = c->rq_head ? c->rq_head : c->sq_head;
  buf[0] = '\0';
  if (!r) return;
  char s[96];
  collie__slot_describe(r->slot, s, sizeof(s));
  collie__fmt(buf, len, " during %s", s);
}

/* ---- Failure: one failure makes the whole transport unusable ---- */

/* Completes every posted request with the transport's failure; or, after
 * abort(), forgets them without touching them (their owners may be gone). */
static void
tcp_fail_all(struct collie__tcp_xport *t, int touch)
{
  for (int i = 0; i < t->nchan; i++) {
    struct collie__tcp_chan *c = &t->chans[i];
    struct collie__req *lists[2] = {c->sq_head, c->rq_head};
    for (int k = 0; k < 2 && touch; k++) {
      for (struct collie__req *r = lists[k], *next; r; r = next) {
        next = r->next;
        r->next = NULL;
        r->rc = t->failed;
        r->done = 1;
      }
    }
    c->sq_head = c->sq_tail = c->rq_head = c->rq_tail = NULL;
  }
  t->npending = 0;
}

/* In the driving thread: turns an abort() into the transport's failure. An
 * I/O error seen after abort() is our own shutdown(), not the peer's doing,
 * so the abort is what gets reported. Returns nonzero when aborted. */
static int
tcp_check_abort(struct collie__tcp_xport *t)
{
  if (!atomic_load_explicit(&t->aborted, memory_order_acquire)) return 0;
  if (t->failed == COLLIE_SUCCESS) {
    t->failed = COLLIE_INVALID_USAGE;
    collie__fmt(t->fail_msg, sizeof(t->fail_msg), "tcp: this rank aborted the communicator");
  }
  tcp_fail_all(t, 0);
  return 1;
}

/* Records rc with the thread's current message as the transport's first
 * failure (a later one keeps the first), fails every posted request and
 * returns the first failure with its message in the thread's slot. */
static collie_result_t
tcp_fail(struct collie__tcp_xport *t, collie_result_t rc)
{
  if (!tcp_check_abort(t)) {
    if (t->failed == COLLIE_SUCCESS) {
      t->failed = rc;
      collie__fmt(t->fail_msg, sizeof(t->fail_msg), "%s", collie__err_msg());
      COLLIE_INFO("TCP", "%s", t->fail_msg);
    }
    tcp_fail_all(t, 1);
  }
  collie__err_set_text(t->fail_msg);
  return t->failed;
}

/* The peer's end of c broke: err 0 is an end of stream, else an errno. */
static collie_result_t
tcp_fail_peer(struct collie__tcp_xport *t, struct collie__tcp_chan *c, int err, int mid_frame)
{
  char who[160], doing[128];
  collie__tcp_peer_name(c, who, sizeof(who));
  tcp_chan_doing(c, doing, sizeof(doing));
  if (c->why[0]) /* it said why it gave up: its first cause is ours too */
    return tcp_fail(t, collie__err(COLLIE_REMOTE_ERROR,
                                   "tcp: %s aborted its communicator%s, after: %s", who, doing,
                                   c->why));
  if (err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH)
    /* Nothing came from the peer: the network between us failed. Not
     * "closed the connection", which says the peer's end was heard from
     * (collie-report reads it so: the link worked). */
    return tcp_fail(t, collie__err(COLLIE_REMOTE_ERROR,
                                   "tcp: lost the connection to %s%s: %s (a link down or its host "
                                   "unreachable)",
                                   who, doing, strerror(err)));
  if (err == 0 || err == ECONNRESET || err == EPIPE || err == ECONNABORTED)
    return tcp_fail(
        t, collie__err(COLLIE_REMOTE_ERROR,
                       "tcp: %s closed the connection%s%s%s (it died, aborted or failed)", who,
                       doing, mid_frame ? " in the middle of a frame" : "",
                       err ? (err == EPIPE ? ": broken pipe" : ": connection reset") : ""));
  errno = err;
  return tcp_fail(t,
                  collie__err_errno(COLLIE_SYSTEM_ERROR, "tcp: I/O with %s failed%s", who, doing));
}

static collie_result_t
tcp_fail_proto(struct collie__tcp_xport *t, struct collie__tcp_chan *c, const char *what)
{
  char who[160];
  collie__tcp_peer_name(c, who, sizeof(who));
  return tcp_fail(t, collie__err(COLLIE_REMOTE_ERROR,
                                 "tcp: protocol error from %s: %s (a corrupted stream or "
                                 "another collie version); the connection is unusable",
                                 who, what));
}

/* The peer of c said BYE (it left normally) while r, its head send or head
 * receive, still needs it. */
static collie_result_t
tcp_fail_left(struct collie__tcp_xport *t, struct collie__tcp_chan *c, const struct collie__req *r)
{
  char who[160], s[96];
  collie__tcp_peer_name(c, who, sizeof(who));
  if (!r) /* nothing posted, but the net catches its send/recv messages */
    return tcp_fail(t, collie__err(COLLIE_REMOTE_ERROR,
                                   "tcp: %s closed the connection (it left the communicator "
                                   "normally) while this rank expects send/recv messages from it",
                                   who));
  collie__slot_describe(r->slot, s, sizeof(s));
  return tcp_fail(t, collie__err(COLLIE_REMOTE_ERROR,
                                 "tcp: %s closed the connection (it left the communicator "
                                 "normally) while this rank %s %s%s",
                                 who, r->is_send ? "still sends it" : "expects", s,
                                 r->is_send ? "" : " from it"));
}

/* ---- Frames ---- */

static uint32_t
tcp_chunk_at(size_t len, size_t start)
{
  size_t left = len - start;
  return left > COLLIE_TCP_CHUNK ? COLLIE_TCP_CHUNK : (uint32_t)left;
}

static void
tcp_frame_encode(struct collie__tcp_frame *h, uint8_t type, uint32_t chunk, uint64_t slot,
                 uint64_t total, uint64_t offset)
{
  h->version = COLLIE_TCP_PROTO_VERSION;
  h->type = type;
  h->flags = 0;
  h->chunk_len = htole32(chunk);
  h->slot = htole64(slot);
  h->total_len = htole64(total);
  h->offset = htole64(offset);
}

static void
tcp_complete(struct collie__tcp_xport *t, struct collie__req *r)
{
  r->next = NULL;
  r->rc = COLLIE_SUCCESS;
  r->done = 1;
  t->npending--;
}

/* Completes the head request of the FIFO head..tail once all its bytes have
 * moved. */
static void
tcp_finish_head(struct collie__tcp_xport *t, struct collie__req **head, struct collie__req **tail)
{
  struct collie__req *r = *head;
  if (r->off != r->len) return;
  *head = r->next;
  if (!*head) *tail = NULL;
  tcp_complete(t, r);
}

static collie_result_t tcp_rx(struct collie__tcp_xport *t, struct collie__tcp_chan *c);

/* ---- Send path ---- */

/* Accounts n bytes written by sendmsg() against the head frames of c. */
static void
tcp_tx_advance(struct collie__tcp_xport *t, struct collie__tcp_chan *c, size_t n)
{
  struct collie__req *r;
  while ((r = c->sq_head) != NULL) {
    size_t take = TCP_HDR - c->s_hdr_sent;
    if (take > n) take = n;
    c->s_hdr_sent += (uint32_t)take;
    n -= take;
    if (c->s_hdr_sent < TCP_HDR) return;
    uint32_t chunk = tcp_chunk_at(r->len, r->off - c->s_pay_sent);
    take = chunk - c->s_pay_sent;
    if (take > n) take = n;
    c->s_pay_sent += (uint32_t)take;
    r->off += take;
    n -= take;
    if (c->s_pay_sent < chunk) return;
    c->s_hdr_sent = c->s_pay_sent = 0;
    tcp_finish_head(t, &c->sq_head, &c->sq_tail);
  }
}

/* Writes as many queued frames of c as the socket takes, without blocking:
 * up to COLLIE_TCP_BATCH frames (headers and payloads) per sendmsg(). */
static collie_result_t
tcp_tx(struct collie__tcp_xport *t, struct collie__tcp_chan *c)
{
  while (c->sq_head) {
    if (c->told) return COLLIE_SUCCESS; /* our ABORT went out: sends wait for the abort */
    if (c->gone) return tcp_fail_peer(t, c, c->gone_err, c->gone_mid);
    if (c->bye) return tcp_fail_left(t, c, c->sq_head);
    struct iovec iov[2 * COLLIE_TCP_BATCH];
    int niov = 0;
    size_t want = 0;
    struct collie__req *r = c->sq_head;
    size_t start = r->off - c->s_pay_sent;
    uint32_t hdone = c->s_hdr_sent, pdone = c->s_pay_sent;
    for (int f = 0; f < COLLIE_TCP_BATCH && r; f++) {
      uint32_t chunk = tcp_chunk_at(r->len, start);
      tcp_frame_encode(&c->shdr[f], COLLIE_TCP_FRAME_DATA, chunk, r->slot, r->len, start);
      if (hdone < TCP_HDR) {
        iov[niov].iov_base = (char *)&c->shdr[f] + hdone;
        iov[niov++].iov_len = TCP_HDR - hdone;
        want += TCP_HDR - hdone;
      }
      if (pdone < chunk) {
        iov[niov].iov_base = (char *)r->buf + start + pdone;
        iov[niov++].iov_len = chunk - pdone;
        want += chunk - pdone;
      }
      hdone = pdone = 0;
      start += chunk;
      if (start >= r->len) {
        r = r->next;
        start = 0;
      }
    }
    struct msghdr mh;
    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = iov;
    mh.msg_iovlen = (size_t)niov;
    ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      int err = errno;
      if (err == EINTR) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return COLLIE_SUCCESS;
      if ((err == EPIPE || err == ECONNRESET) && !c->rq_head && c->r_hdr_got == 0) {
        /* It may have said goodbye first: read on, so the message says so. */
        collie_result_t rc = tcp_rx(t, c);
        if (rc != COLLIE_SUCCESS) return rc;
        if (c->bye || c->gone) continue;
      }
      return tcp_fail_peer(t, c, err, 0);
    }
    tcp_tx_advance(t, c, (size_t)n);
    if ((size_t)n < want) return COLLIE_SUCCESS; /* the socket is full */
  }
  return COLLIE_SUCCESS;
}

/* ---- Receive path ---- */

/* Reads into iov without blocking, as recvmsg() does: the bytes given back
 * by tcp_unread first (and then only those), else the socket's. */
static ssize_t
tcp_read(struct collie__tcp_chan *c, struct iovec *iov, int niov)
{
  if (c->stash_off < c->stash_len) {
    size_t got = 0;
    for (int i = 0; i < niov && c->stash_off < c->stash_len; i++) {
      size_t k = c->stash_len - c->stash_off;
      if (k > iov[i].iov_len) k = iov[i].iov_len;
      memcpy(iov[i].iov_base, c->stash + c->stash_off, k);
      c->stash_off += k;
      got += k;
      if (k < iov[i].iov_len) break;
    }
    c->from_stash = 1;
    return (ssize_t)got;
  }
  c->stash_off = c->stash_len = 0;
  c->from_stash = 0;
  struct msghdr mh;
  memset(&mh, 0, sizeof(mh));
  mh.msg_iov = iov;
  mh.msg_iovlen = (size_t)niov;
  return recvmsg(c->fd, &mh, MSG_DONTWAIT);
}

/* Gives back the last n bytes the last tcp_read returned (a copy of them is
 * at bytes): the next read returns them first. They were read ahead, into
 * the head receive's buffer, behind the header of a frame that goes to
 * another request (the sink's) or waits. 0, or -1 when out of memory. */
static int
tcp_unread(struct collie__tcp_chan *c, const void *bytes, size_t n)
{
  if (!n) return 0;
  if (c->from_stash) { /* they are still there, just before stash_off */
    c->stash_off -= n;
    return 0;
  }
  char *p = realloc(c->stash, n); /* the stash is empty: the read came from the socket */
  if (!p) return -1;
  memcpy(p, bytes, n);
  c->stash = p;
  c->stash_off = 0;
  c->stash_len = n;
  return 0;
}

/* Whether the stash holds bytes to read before the socket's. */
static int
tcp_stashed(const struct collie__tcp_chan *c)
{
  return c->stash_off < c->stash_len;
}

/* Puts s, the sink's request for the message whose header is held, in front
 * of c's posted receives, counted as a posted one (transport.h: the sink). */
static void
tcp_adopt(struct collie__tcp_xport *t, struct collie__tcp_chan *c, struct collie__req *s)
{
  collie__req_adopt(s, c->peer, &c->rq_head, &c->rq_tail);
  t->npending++;
}

/* The complete header in c->rhdr starts a P2P message (slot, total bytes)
 * that the head receive r (NULL: none posted) does not expect: asks the
 * sink for a request to take it. spec bytes of its payload were read ahead
 * into r's buffer. Returns the request, now at the head with those bytes
 * in it (*spec: how many; any beyond the frame's are given back), or NULL
 * when the sink said not now (the bytes read ahead are given back: the
 * header stays held). */
static struct collie__req *
tcp_sink(struct collie__tcp_xport *t, struct collie__tcp_chan *c, struct collie__req *r,
         uint64_t slot, uint64_t total, uint32_t chunk, size_t *spec, collie_result_t *rc)
{
  const char *ahead = r ? (const char *)r->buf + r->off : NULL;
  int more = 1, replace = 0;
  struct collie__req *s =
      t->sink->take(t->sink->ctx, c->peer, slot, (size_t)total, r, &more, &replace);
  if (s && !more) c->sated = 1;
  size_t mine = s ? (*spec < chunk ? *spec : chunk) : 0;
  if (mine) memmove(s->buf, ahead, mine); /* the same buffer when s replaces r */
  if (tcp_unread(c, ahead + mine, *spec - mine) != 0) {
    *rc = tcp_fail(t, collie__err(COLLIE_SYSTEM_ERROR,
                                  "tcp: out of memory keeping %zu bytes read ahead from rank %d",
                                  *spec - mine, c->peer));
    return NULL;
  }
  *spec = mine;
  if (s) tcp_adopt(t, c, s);
  if (s && replace && r) { /* the net's receive r gives way to s (it has not started) */
    s->next = r->next;
    if (c->rq_tail == r) c->rq_tail = s;
    t->npending--;
  }
  return s;
}

/* The peer said BYE: nothing more may arrive but its end of stream. */
static collie_result_t
tcp_rx_after_bye(struct collie__tcp_xport *t, struct collie__tcp_chan *c)
{
  if (c->rq_head || (c->catching && !c->sated)) return tcp_fail_left(t, c, c->rq_head);
  while (!c->eof) {
    char b;
    ssize_t n = recv(c->fd, &b, 1, MSG_DONTWAIT);
    if (n > 0) return tcp_fail_proto(t, c, "data after its BYE frame");
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    c->eof = 1; /* end of stream, or a reset: either way it is gone, as it said */
  }
  return COLLIE_SUCCESS;
}

/* The current frame of the head receive is complete. */
static void
tcp_rx_frame_done(struct collie__tcp_xport *t, struct collie__tcp_chan *c)
{
  tcp_finish_head(t, &c->rq_head, &c->rq_tail);
}

/* Checks the complete header in c->rhdr against the head receive r (may be
 * NULL: the header is then held) and enters its payload; spec payload bytes
 * were already read into r's buffer with the header. */
static collie_result_t
tcp_rx_header(struct collie__tcp_xport *t, struct collie__tcp_chan *c, size_t spec, int *held)
{
  const struct collie__tcp_frame *h = &c->rhdr;
  uint32_t chunk = le32toh(h->chunk_len);
  uint64_t slot = le64toh(h->slot), total = le64toh(h->total_len), offset = le64toh(h->offset);
  char what[160];
  *held = 0;
  if (h->version != COLLIE_TCP_PROTO_VERSION) {
    collie__fmt(what, sizeof(what), "frame of protocol version %u, ours is %u", h->version,
                COLLIE_TCP_PROTO_VERSION);
    return tcp_fail_proto(t, c, what);
  }
  if (h->type == COLLIE_TCP_FRAME_BYE) {
    if (spec || h->flags || chunk || slot || total || offset)
      return tcp_fail_proto(t, c, "malformed BYE frame");
    c->bye = 1;
    c->r_hdr_got = 0;
    c->parked = 0;
    return COLLIE_SUCCESS;
  }
  if (h->type == COLLIE_TCP_FRAME_ABORT) {
    if (h->flags || slot || total || offset || chunk > COLLIE_TCP_REASON_MAX)
      return tcp_fail_proto(t, c, "malformed ABORT frame");
    /* The reason: what the header read took into the head receive's buffer,
     * then the rest, which the peer sent in the same write just before it
     * closed (so a short wait suffices; a reason cut short is still kept). */
    size_t got = spec < chunk ? spec : chunk;
    if (got) memcpy(c->why, (char *)c->rq_head->buf + c->rq_head->off, got);
    if (got < chunk &&
        collie__sock_recv_all(c->fd, c->why + got, chunk - got, collie__now_ns() + 100000000) == 0)
      got = chunk;
    c->why[got] = '\0';
    if (!c->why[0]) collie__fmt(c->why, sizeof(c->why), "(no reason given)");
    c->r_hdr_got = 0;
    c->gone = 1;
    c->aborted = 1;
    c->gone_err = 0;
    return c->rq_head ? tcp_fail_peer(t, c, 0, 0) : COLLIE_SUCCESS;
  }
  if (h->type != COLLIE_TCP_FRAME_DATA) {
    collie__fmt(what, sizeof(what), "unknown frame type %u", h->type);
    return tcp_fail_proto(t, c, what);
  }
  struct collie__req *r = c->rq_head;
  if (t->sink && collie__slot_is_p2p(slot) && offset == 0 && (r || (c->catching && !c->sated)) &&
      (!r || (r->off == 0 && (slot != r->slot || total != (uint64_t)r->len)))) {
    /* A point-to-point message nobody posted for: the net's matching takes it. */
    collie_result_t rc = COLLIE_SUCCESS;
    r = tcp_sink(t, c, r, slot, total, chunk, &spec, &rc);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  if (!r) {
    *held = 1;
    c->stalled = 1;
    return COLLIE_SUCCESS;
  }
  if (slot != r->slot || total != (uint64_t)r->len) {
    char who[160];
    collie__tcp_peer_name(c, who, sizeof(who));
    return tcp_fail(t, collie__slot_mismatch_err(who, t->rank, slot, total, r->slot, r->len));
  }
  if (h->flags != 0 || offset != (uint64_t)r->off || chunk != tcp_chunk_at(r->len, r->off)) {
    collie__fmt(what, sizeof(what),
                "frame of %u bytes at offset %llu (flags 0x%x) where a chunk of %u bytes at "
                "offset %zu was due",
                chunk, (unsigned long long)offset, h->flags, tcp_chunk_at(r->len, r->off), r->off);
    return tcp_fail_proto(t, c, what);
  }
  c->r_hdr_got = 0;
  c->parked = 0;
  r->off += spec;
  c->r_pay_left = chunk - (uint32_t)spec;
  if (c->r_pay_left == 0) tcp_rx_frame_done(t, c);
  return COLLIE_SUCCESS;
}

/* Reads what the socket of c holds for its posted receives, without blocking;
 * with no receive posted, reads at most the next header (to see a BYE). */
static collie_result_t
tcp_rx(struct collie__tcp_xport *t, struct collie__tcp_chan *c)
{
  c->stalled = 0; /* this look decides again */
  for (;;) {
    if (c->bye) return tcp_rx_after_bye(t, c);
    if (c->gone)
      return c->rq_head || (c->catching && !c->sated)
                 ? tcp_fail_peer(t, c, c->gone_err, c->gone_mid)
                 : COLLIE_SUCCESS;
    struct collie__req *r = c->rq_head;
    if (c->r_pay_left > 0) {
      struct iovec iov = {.iov_base = (char *)r->buf + r->off, .iov_len = c->r_pay_left};
      ssize_t n = tcp_read(c, &iov, 1);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return COLLIE_SUCCESS;
        return tcp_fail_peer(t, c, n == 0 ? 0 : errno, 1);
      }
      r->off += (size_t)n;
      c->r_pay_left -= (uint32_t)n;
      if (c->r_pay_left == 0) tcp_rx_frame_done(t, c);
      continue;
    }
    size_t spec = 0;
    if (c->r_hdr_got < TCP_HDR) {
      struct iovec iov[2];
      int niov = 1;
      iov[0].iov_base = (char *)&c->rhdr + c->r_hdr_got;
      iov[0].iov_len = TCP_HDR - c->r_hdr_got;
      if (r && !(r->upto && r->off == 0)) {
        uint32_t guess = tcp_chunk_at(r->len, r->off);
        if (guess) {
          iov[1].iov_base = (char *)r->buf + r->off;
          iov[1].iov_len = guess;
          niov = 2;
        }
      }
      ssize_t n = tcp_read(c, iov, niov);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return COLLIE_SUCCESS;
        int err = n == 0 ? 0 : errno;
        if (!r && !tcp_check_abort(t)) {
          /* It left without a goodbye, but we expect nothing from it (yet):
           * like shm, fail only what is or will be posted to it. */
          c->gone = 1;
          c->gone_err = err;
          c->gone_mid = c->r_hdr_got > 0;
          COLLIE_INFO("TCP", "tcp: rank %d (world rank %d) closed the connection without a goodbye",
                      c->peer, c->world_rank);
          return COLLIE_SUCCESS;
        }
        return tcp_fail_peer(t, c, err, c->r_hdr_got > 0);
      }
      size_t need = TCP_HDR - c->r_hdr_got;
      if ((size_t)n < need) {
        c->r_hdr_got += (uint32_t)n;
        continue;
      }
      c->r_hdr_got = TCP_HDR;
      spec = (size_t)n - need;
    }
    int held;
    collie_result_t rc = tcp_rx_header(t, c, spec, &held);
    if (rc != COLLIE_SUCCESS || held) return rc;
  }
}

/* ---- The ops ---- */

static collie_result_t
tcp_post(struct collie__xport *xp, struct collie__req *r)
{
  struct collie__tcp_xport *t = tcp_x(xp);
  if (tcp_check_abort(t) || t->failed != COLLIE_SUCCESS) {
    r->rc = t->failed;
    r->done = 1;
    collie__err_set_text(t->fail_msg);
    return t->failed;
  }
  if (r->peer < 0 || r->peer >= t->size || t->chan_of[r->peer] < 0) {
    r->rc = collie__err(COLLIE_INTERNAL_ERROR,
                        "tcp: %s of %zu bytes %s rank %d, which has no tcp channel from rank %d",
                        r->is_send ? "send" : "receive", r->len, r->is_send ? "to" : "from",
                        r->peer, t->rank);
    r->done = 1;
    return r->rc;
  }
  if (r->len && !r->buf) {
    r->rc =
        collie__err(COLLIE_INTERNAL_ERROR, "tcp: %s of %zu bytes %s rank %d has no buffer",
                    r->is_send ? "send" : "receive", r->len, r->is_send ? "to" : "from", r->peer);
    r->done = 1;
    return r->rc;
  }
  struct collie__tcp_chan *c = &t->chans[t->chan_of[r->peer]];
  r->done = 0;
  r->rc = COLLIE_SUCCESS;
  r->off = 0;
  r->next = NULL;
  t->npending++;
  if (r->is_send) {
    int was_idle = c->sq_head == NULL;
    if (c->sq_tail)
      c->sq_tail->next = r;
    else
      c->sq_head = r;
    c->sq_tail = r;
    /* Write at once: a lone small message then leaves before anyone waits. */
    if (was_idle) return tcp_tx(t, c);
  } else {
    if (c->rq_tail)
      c->rq_tail->next = r;
    else
      c->rq_head = r;
    c->rq_tail = r;
  }
  return COLLIE_SUCCESS;
}

static collie_result_t
tcp_progress(struct collie__xport *xp, int *pending)
{
  struct collie__tcp_xport *t = tcp_x(xp);
  *pending = 0;
  if (tcp_check_abort(t) || t->failed != COLLIE_SUCCESS) {
    collie__err_set_text(t->fail_msg);
    return t->failed;
  }
  for (int i = 0; i < t->nchan; i++) {
    struct collie__tcp_chan *c = &t->chans[i];
    collie_result_t rc = COLLIE_SUCCESS;
    if (c->sq_head) rc = tcp_tx(t, c);
    if (rc == COLLIE_SUCCESS && (c->rq_head || c->catching || tcp_stashed(c) ||
                                 (c->revents & (POLLIN | POLLRDHUP | POLLERR | POLLHUP))))
      rc = tcp_rx(t, c);
    c->revents = 0;
    if (rc != COLLIE_SUCCESS) return rc;
  }
  *pending = t->npending + t->ncatch;
  return COLLIE_SUCCESS;
}

/* What a sleep of this rank waits for on each channel, into fds[0..nchan):
 * nchan, or -1 when progress() has work that needs no I/O (do not sleep). */
static int
tcp_arm(struct collie__tcp_xport *t, struct pollfd *fds)
{
  if (t->failed != COLLIE_SUCCESS || atomic_load_explicit(&t->aborted, memory_order_acquire))
    return -1;
  for (int i = 0; i < t->nchan; i++) {
    struct collie__tcp_chan *c = &t->chans[i];
    struct pollfd *p = &fds[i];
    int held = c->r_hdr_got == TCP_HDR;
    p->fd = c->fd;
    p->events = 0;
    p->revents = 0;
    /* Work that progress() can do without any I/O: do not sleep on it. A
     * held header that waits (stalled) is none: only news from it is. */
    int wants = c->rq_head || (c->catching && !c->sated);
    if ((wants && ((held && !c->stalled) || c->bye || c->gone)) ||
        (c->sq_head && (c->bye || c->gone)) || tcp_stashed(c))
      return -1;
    if (c->gone) {
      p->fd = -1; /* nothing will ever come from it */
      continue;
    }
    if (c->sq_head) p->events |= POLLOUT;
    if (wants && !held)
      p->events |= POLLIN | POLLRDHUP;
    else if (held)
      p->events |= c->parked ? 0 : POLLRDHUP; /* only a hang-up matters until a receive comes */
    else if (!c->eof)
      p->events |= POLLIN | POLLRDHUP;                   /* a header, a BYE or an end of stream */
    if (!p->events && (c->eof || c->parked)) p->fd = -1; /* nothing to learn from it now */
  }
  return t->nchan;
}

/* Takes the events a sleep found on fds[0..nchan) for progress(). */
static void
tcp_take(struct collie__tcp_xport *t, const struct pollfd *fds)
{
  for (int i = 0; i < t->nchan; i++) {
    struct collie__tcp_chan *c = &t->chans[i];
    short ev = fds[i].revents;
    if (!ev || fds[i].fd < 0) continue;
    c->revents |= ev;
    if (!c->rq_head && c->r_hdr_got == TCP_HDR && (ev & (POLLRDHUP | POLLERR | POLLHUP)))
      c->parked = 1;
  }
}

static void
tcp_wait(struct collie__xport *xp, int64_t until_ns)
{
  struct collie__tcp_xport *t = tcp_x(xp);
  if (tcp_arm(t, t->pfds) < 0) return;
  int64_t now = collie__now_ns();
  int64_t end = until_ns < now + COLLIE_TCP_WAIT_CAP_NS ? until_ns : now + COLLIE_TCP_WAIT_CAP_NS;
  int64_t left = end > now ? end - now : 0;
  struct timespec ts = {(time_t)(left / 1000000000), (long)(left % 1000000000)};
  if (ppoll(t->pfds, (nfds_t)t->nchan, &ts, NULL) > 0) tcp_take(t, t->pfds);
}

static int
tcp_poll_arm(struct collie__xport *xp, struct pollfd *fds, int max, int64_t *until_ns)
{
  struct collie__tcp_xport *t = tcp_x(xp);
  if (max < t->nchan) return -2;
  int n = tcp_arm(t, fds);
  if (n < 0) return -1;
  int64_t cap = collie__now_ns() + COLLIE_TCP_WAIT_CAP_NS;
  if (*until_ns > cap) *until_ns = cap;
  return n;
}

static void
tcp_poll_done(struct collie__xport *xp, const struct pollfd *fds, int n)
{
  (void)n; /* tcp_poll_arm armed nchan of them */
  tcp_take(tcp_x(xp), fds);
}

/* Only an atomic flag and shutdown(): safe while another thread is inside
 * progress() or wait() (the shutdown wakes its poll), and it never touches
 * a request. Peers see the end of stream without a BYE. */
static void
tcp_abort(struct collie__xport *xp)
{
  if (!xp) return;
  struct collie__tcp_xport *t = tcp_x(xp);
  if (atomic_exchange_explicit(&t->aborted, 1, memory_order_acq_rel)) return;
  for (int i = 0; i < t->nchan; i++)
    if (t->chans[i].fd >= 0) shutdown(t->chans[i].fd, SHUT_RDWR);
}

/* Closes every channel's socket and frees t (NULL is a no-op). Never touches
 * posted requests and sends nothing (close() says goodbye first). Used by
 * close() and a failed open(). */
void
collie__tcp_free(struct collie__tcp_xport *t)
{
  if (!t) return;
  for (int i = 0; i < t->nchan; i++) {
    if (t->chans[i].fd >= 0) close(t->chans[i].fd);
    free(t->chans[i].stash);
  }
  free(t->chans);
  free(t->chan_of);
  free(t->pfds);
  free(t);
}

/* Whether c's connection is at a clean end both ways once both sides said
 * BYE: nothing posted, queued, half-sent or half-read, no failure. */
static int
tcp_chan_clean(const struct collie__tcp_chan *c)
{
  return c->fd >= 0 && c->ready && !c->sq_head && !c->rq_head && !c->s_hdr_sent && !c->s_pay_sent &&
         c->r_hdr_got == 0 && c->r_pay_left == 0 && c->stash_off >= c->stash_len && !c->gone &&
         !c->eof && !c->told && !c->aborted && !c->parked && c->pid > 0;
}

static void
tcp_close(struct collie__xport *xp)
{
  if (!xp) return;
  struct collie__tcp_xport *t = tcp_x(xp);
  int aborted = atomic_load_explicit(&t->aborted, memory_order_acquire);
  if (t->npending && !aborted)
    COLLIE_WARN("TCP", "tcp: closed with %d request(s) still posted; they never complete",
                t->npending);
  if (t->failed == COLLIE_SUCCESS && !aborted) {
    /* Say goodbye where the stream is at a frame boundary, so peers can tell a
     * normal exit from a crash; both sides say it, even after the peer's, so
     * that a connection where both did is clean and can be kept for the next
     * communicator of the two processes (tcp_pool.c). Bounded: a peer that
     * reads nothing cannot hold us. */
    int64_t deadline = collie__now_ns() + 200000000;
    struct collie__tcp_frame bye;
    tcp_frame_encode(&bye, COLLIE_TCP_FRAME_BYE, 0, 0, 0, 0);
    for (int i = 0; i < t->nchan; i++) {
      struct collie__tcp_chan *c = &t->chans[i];
      if (c->fd < 0 || c->sq_head || c->s_hdr_sent || c->gone || c->eof) continue;
      if (collie__sock_send_all(c->fd, &bye, sizeof(bye), deadline) < 0) {
        COLLIE_TRACE("TCP", "tcp: could not say goodbye to rank %d: %s", c->peer, strerror(errno));
        continue;
      }
      if (!t->reuse || !tcp_chan_clean(c)) continue;
      struct collie__tcp_idle e = {.fd = c->fd, .pid = c->pid, .token = t->token, .bye = c->bye};
      memcpy(e.host, c->hostid, sizeof(e.host));
      memcpy(e.addr, c->addr, sizeof(e.addr));
      if (collie__tcp_pool_put(&e)) c->fd = -1; /* kept: neither drained nor closed */
    }
  }
  collie__tcp_drain(t);
  collie__tcp_free(t);
}

void
collie__tcp_drain(struct collie__tcp_xport *t)
{
  for (int i = 0; i < t->nchan; i++) {
    char sink[4096];
    for (int k = 0; k < 16 && t->chans[i].fd >= 0; k++)
      if (recv(t->chans[i].fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0) break;
  }
}

/* How long a look at /proc for the near peers' CPUs stays good: a look
 * costs ~10 us, taken inside a wait's spin (every 1 ms cost a 2-rank tcp
 * allreduce of 8 B ~3 %); ranks that share a CPU stay so for ~0.1 s, and
 * each handoff between them spun out 20 us. */
#define TCP_CROWDED_LOOK_NS (10 * 1000 * 1000LL)

/* The ops' crowded: whether a peer on this host last ran on this rank's
 * CPU, as /proc said at most TCP_CROWDED_LOOK_NS ago (tcp has no shared
 * memory where ranks could say it, as shm's do). */
static int
tcp_crowded(struct collie__xport *xp)
{
  struct collie__tcp_xport *t = tcp_x(xp);
  int64_t now = collie__now_ns();
  if (t->crowded_at && now - t->crowded_at < TCP_CROWDED_LOOK_NS) return t->crowded;
  t->crowded_at = now;
  t->crowded = 0;
  int cpu = sched_getcpu();
  for (int i = 0; i < t->nchan && cpu >= 0 && !t->crowded; i++)
    t->crowded = t->chans[i].near && collie__proc_cpu(t->chans[i].pid) == cpu;
  return t->crowded;
}

/* A header read while no receive was posted is held in c->rhdr (tcp_rx_header). */
static void
tcp_catch_p2p(struct collie__xport *xp, int peer, int on)
{
  struct collie__tcp_xport *t = tcp_x(xp);
  if (peer < 0 || peer >= t->size || t->chan_of[peer] < 0) return;
  struct collie__tcp_chan *c = &t->chans[t->chan_of[peer]];
  if (c->catching != !!on) t->ncatch += on ? 1 : -1;
  c->catching = !!on;
  c->sated = 0;
  c->stalled = 0;
}

static int
tcp_peek(struct collie__xport *xp, int peer, uint64_t *slot, size_t *len)
{
  struct collie__tcp_xport *t = tcp_x(xp);
  if (peer < 0 || peer >= t->size || t->chan_of[peer] < 0) return 0;
  const struct collie__tcp_chan *c = &t->chans[t->chan_of[peer]];
  if (c->rq_head || c->r_hdr_got != TCP_HDR || c->r_pay_left || c->bye || c->gone ||
      c->rhdr.type != COLLIE_TCP_FRAME_DATA)
    return 0;
  *slot = le64toh(c->rhdr.slot);
  *len = (size_t)le64toh(c->rhdr.total_len);
  return 1;
}

void
collie__tcp_tell(struct collie__tcp_xport *t, const char *why)
{
  struct {
    struct collie__tcp_frame h;
    char why[COLLIE_TCP_REASON_MAX];
  } f;
  size_t n = why ? strnlen(why, COLLIE_TCP_REASON_MAX) : 0;
  tcp_frame_encode(&f.h, COLLIE_TCP_FRAME_ABORT, (uint32_t)n, 0, 0, 0);
  if (n) memcpy(f.why, why, n);
  for (int i = 0; i < t->nchan; i++) {
    struct collie__tcp_chan *c = &t->chans[i];
    /* A peer that aborted is told too: it listens for a while after its own
     * timeout (net.c's grace), and a peer that gave up waiting on this rank
     * learns from this rank's reason whom this rank waited on (deadlines of
     * a chain pass together: the rank it blamed names the rank further
     * down). A socket it closed meanwhile only refuses the bytes. */
    if (c->fd < 0 || !c->ready || c->told || c->s_hdr_sent || c->s_pay_sent || c->bye ||
        (c->gone && !c->aborted))
      continue;
    ssize_t w;
    do {
      w = send(c->fd, &f, sizeof(f.h) + n, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (w < 0 && errno == EINTR);
    c->told = 1; /* whole or not, the stream ends here: no frame may follow */
  }
}

/* Before abort, on a failure of this rank's own. */
static void
tcp_tell(struct collie__xport *xp, const char *why)
{
  collie__tcp_tell(tcp_x(xp), why);
}

const struct collie__xport_ops collie__tcp_ops = {
    .name = "tcp",
    /* Over loopback: ~8 us a step busy, ~15 us oversubscribed, ~2.5 GB/s a stream. */
    .cost = {.alpha_us = 8.0, .alpha_oversub_us = 15.0, .beta_us = 4.0e-4},
    .can_connect = collie__tcp_can_connect,
    .open = collie__tcp_open,
    .post = tcp_post,
    .progress = tcp_progress,
    .wait = tcp_wait,
    .poll_arm = tcp_poll_arm,
    .poll_done = tcp_poll_done,
    .abort = tcp_abort,
    .close = tcp_close,
    .tell = tcp_tell,
    .peek = tcp_peek,
    .catch_p2p = tcp_catch_p2p,
    .crowded = tcp_crowded,
};
