/*
 * net.c - all channels of one communicator. It picks a transport per peer
 * from an ordered table (shm first, then tcp: the first whose can_connect
 * accepts the peer), opens each transport for its peers, loops messages to
 * self through memory, and waits for requests: a brief spin of progress
 * calls, then sleeping in the transport's wait() so that eight ranks on two
 * cores do not grind. A wait on requests of two transports sleeps once, in
 * poll() on what each of them arms (poll_arm), and wakes on whichever moves
 * first. Every wait ends by its deadline.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "transport/match.h"
#include "transport/shm.h"
#include "transport/transport.h"
#include "util/error.h"
#include "util/util.h"

/* ofi before tcp: where both may serve a peer (a fabric between hosts,
 * once auto picks it), the fabric is the faster; tcp, which reaches every
 * pair, stays last. */
static const struct collie__xport_ops *const net_table[] = {&collie__shm_ops, &collie__ofi_ops,
                                                            &collie__tcp_ops};
#define NET_NX (int)(sizeof(net_table) / sizeof(net_table[0]))

struct collie__net {
  int rank, size;
  int spin;
  int single_copy;        /* COLLIE_SHM_CMA_MIN > 0 */
  collie__mem_kind_t mem; /* of the buffers posted now (collie__net_set_mem) */
  struct collie__xport *xp[NET_NX];
  signed char *peer_xp;             /* index into net_table per peer; -1 for self */
  int32_t *world;                   /* each peer's world rank, for messages */
  const struct collie__peer *peers; /* cfg->peers (the communicator's, which outlives the net) */
  /* Messages to self: FIFOs of posted sends and receives, matched in order. */
  struct collie__req *self_send, *self_recv;
  collie_result_t failed; /* first transport failure; the net is unusable after it */
  char fail_msg[COLLIE_ERRMSG_LEN];
  struct pollfd *pfds; /* one sleep across transports: npfds entries */
  int npfds;
  struct collie__match *match; /* send/recv matched by source and tag (match.c) */
  const int *match_work;       /* collie__match_work(match) */
};

/* The buffer for unexpected send/recv messages when cfg says 0. */
#define NET_UNEXPECTED_DEFAULT ((size_t)256 << 20)

collie_result_t
collie__net_open(const struct collie__net_cfg *cfg, struct collie__net **out)
{
  collie_result_t rc = COLLIE_SUCCESS;
  struct collie__net *n = calloc(1, sizeof(*n));
  int *peers = calloc((size_t)cfg->size, sizeof(int));
  if (!n || !peers || !(n->peer_xp = calloc((size_t)cfg->size, 1))) {
    free(peers);
    if (n) free(n->peer_xp);
    free(n);
    return collie__err(COLLIE_SYSTEM_ERROR, "out of memory opening channels");
  }
  n->rank = cfg->rank;
  n->size = cfg->size;
  n->peers = cfg->peers;
  /* Room for every peer's socket and a few wake-up descriptors. */
  n->npfds = cfg->size + 2 * NET_NX;
  n->pfds = calloc((size_t)n->npfds, sizeof(*n->pfds));
  n->world = calloc((size_t)cfg->size, sizeof(*n->world));
  if (!n->pfds || !n->world) {
    rc = collie__err(COLLIE_SYSTEM_ERROR, "out of memory opening channels");
    goto out_close; /* no transport is open yet: close frees what is here */
  }
  for (int p = 0; p < cfg->size; p++) n->world[p] = cfg->peers ? cfg->peers[p].world_rank : p;
  n->spin = cfg->spin;
  n->single_copy = cfg->cma_min > 0;
  n->match =
      collie__match_new(n, cfg->rank, cfg->size,
                        cfg->unexpected_bytes ? cfg->unexpected_bytes : NET_UNEXPECTED_DEFAULT);
  if (!n->match) {
    rc = collie__err(COLLIE_SYSTEM_ERROR, "out of memory opening channels");
    goto out_close;
  }
  n->match_work = collie__match_work(n->match);
  struct collie__net_cfg with_sink = *cfg;
  with_sink.sink = collie__match_sink(n->match);
  if (cfg->net && strcmp(cfg->net, "tcp") != 0 && strcmp(cfg->net, "ofi") != 0 &&
      strcmp(cfg->net, "auto") != 0) {
    rc = collie__err(COLLIE_INVALID_ARGUMENT,
                     "COLLIE_NET=%s: the transport between hosts is tcp, ofi or auto", cfg->net);
    goto out_close;
  }
  for (int p = 0; p < cfg->size; p++) {
    n->peer_xp[p] = -1;
    if (p == cfg->rank) continue;
    for (int i = 0; i < NET_NX && n->peer_xp[p] < 0; i++) {
      if (strcmp(cfg->transport, "auto") != 0 && strcmp(cfg->transport, net_table[i]->name) != 0)
        continue; /* COLLIE_TRANSPORT names another: only it may serve */
      if (net_table[i]->can_connect(cfg, p)) n->peer_xp[p] = (signed char)i;
    }
    if (n->peer_xp[p] < 0) {
      rc = collie__err(COLLIE_INVALID_ARGUMENT,
                       "COLLIE_TRANSPORT=%s cannot reach rank %d (host %s) from host %s",
                       cfg->transport, p, cfg->peers[p].host, cfg->peers[cfg->rank].host);
      goto out_close;
    }
  }
  /* Every rank opens the transports in table order, so the collective opens
   * (shm among a host's ranks, tcp among hosts) cannot wait on each other. */
  for (int i = 0; i < NET_NX; i++) {
    int np = 0;
    for (int p = 0; p < cfg->size; p++)
      if (n->peer_xp[p] == i) peers[np++] = p;
    if (np == 0) continue;
    COLLIE_CHECK_GOTO(net_table[i]->open(&with_sink, peers, np, &n->xp[i]), rc, out_close);
    COLLIE_INFO("INIT", "%s channels to %d peer(s) up", net_table[i]->name, np);
  }
  free(peers);
  *out = n;
  return COLLIE_SUCCESS;

out_close:
  free(peers);
  collie__net_close(n);
  return rc;
}

void
collie__net_set_mem(struct collie__net *n, collie__mem_kind_t mem)
{
  n->mem = mem;
}

void
collie__net_set_device(struct collie__net *n, const struct collie__net_dev_ops *ops,
                       const unsigned char uuid[16])
{
  for (int i = 0; i < NET_NX; i++)
    if (n->xp[i] && net_table[i]->set_device) net_table[i]->set_device(n->xp[i], ops, uuid);
}

int
collie__net_device_peer(const struct collie__net *n, int peer, const unsigned char uuid[16])
{
  if (peer < 0 || peer >= n->size || n->peer_xp[peer] < 0 || n->failed != COLLIE_SUCCESS) return 0;
  int i = n->peer_xp[peer];
  return net_table[i]->device_peer && net_table[i]->device_peer(n->xp[i], peer, uuid);
}

const char *
collie__net_transport_name(const char *name)
{
  if (!name) return NULL;
  if (!strcasecmp(name, "auto")) return "auto";
  for (int i = 0; i < NET_NX; i++)
    if (!strcasecmp(name, net_table[i]->name)) return net_table[i]->name;
  return NULL;
}

const char *
collie__net_transport_choices(char *buf, size_t len)
{
  size_t n = (size_t)snprintf(buf, len, "auto");
  for (int i = 0; i < NET_NX && n < len; i++)
    n += (size_t)snprintf(buf + n, len - n, "%s%s", i == NET_NX - 1 ? " or " : ", ",
                          net_table[i]->name);
  return buf;
}

int
collie__net_class_count(void)
{
  return NET_NX;
}

const char *
collie__net_class_name(int cls)
{
  return cls >= 0 && cls < NET_NX ? net_table[cls]->name : "?";
}

int
collie__net_class_index(const char *name)
{
  for (int i = 0; name && i < NET_NX; i++)
    if (!strcmp(name, net_table[i]->name)) return i;
  return -1;
}

const struct collie__xport_cost *
collie__net_class_cost(int cls)
{
  return cls >= 0 && cls < NET_NX ? &net_table[cls]->cost : NULL;
}

int
collie__net_class_remote(void)
{
  /* The transport net_open would give a peer of another host: the first
   * whose can_connect takes it, asked about two ranks on two hosts. */
  struct collie__peer two[2];
  memset(two, 0, sizeof(two));
  snprintf(two[0].host, sizeof(two[0].host), "a");
  snprintf(two[1].host, sizeof(two[1].host), "b");
  struct collie__net_cfg cfg = {.rank = 0, .size = 2, .peers = two, .transport = "auto"};
  for (int i = 0; i < NET_NX; i++)
    if (net_table[i]->can_connect(&cfg, 1)) return i;
  return NET_NX - 1;
}

int
collie__net_class(const struct collie__net *n)
{
  int cls = 0;
  for (int p = 0; p < n->size; p++)
    if (n->peer_xp[p] > cls) cls = n->peer_xp[p];
  return cls;
}

const char *
collie__net_transport_of(const struct collie__net *n, int peer)
{
  if (peer < 0 || peer >= n->size) return "none";
  return n->peer_xp[peer] < 0 ? "self" : net_table[(int)n->peer_xp[peer]]->name;
}

/* The flat area of the shm transport, when it serves every peer (shm.h).
 * The shm transport keeps one only when its group is the whole communicator. */
struct collie__shm_flat *
collie__net_shm_flat(struct collie__net *n)
{
  if (!n) return NULL;
  for (int i = 0; i < NET_NX; i++)
    if (net_table[i] == &collie__shm_ops && n->xp[i]) return collie__shm_flat_of(n->xp[i]);
  return NULL;
}

static void
net_fifo_push(struct collie__req **head, struct collie__req *r)
{
  while (*head) head = &(*head)->next;
  *head = r;
}

/* Matches self-sends with self-receives in order, copying the bytes. */
static collie_result_t
net_self_match(struct collie__net *n)
{
  while (n->self_send && n->self_recv) {
    struct collie__req *s = n->self_send, *r = n->self_recv;
    n->self_send = s->next;
    n->self_recv = r->next;
    if (s->slot != r->slot || s->len != r->len) {
      char a[96], b[96];
      collie__slot_describe(s->slot, a, sizeof(a));
      collie__slot_describe(r->slot, b, sizeof(b));
      s->rc = r->rc = collie__err(COLLIE_INVALID_USAGE,
                                  "collectives mismatched: this rank sent itself %s (%zu bytes) "
                                  "but expected %s (%zu bytes)",
                                  a, s->len, b, r->len);
      s->done = r->done = 1;
      return s->rc;
    }
    if (s->len) memcpy(r->buf, s->buf, s->len);
    s->done = r->done = 1;
  }
  return COLLIE_SUCCESS;
}

/* The first failure breaks the net for good. Every transport is aborted right
 * here, while the failed operation's requests (on its caller's stack) are
 * still alive: aborting detaches them, so nothing touches them later, and
 * peers learn at once that this rank gave up. */
static collie_result_t
net_fail(struct collie__net *n, collie_result_t rc)
{
  if (n->failed == COLLIE_SUCCESS) {
    n->failed = rc;
    snprintf(n->fail_msg, sizeof(n->fail_msg), "%s", collie__err_msg());
    for (int i = 0; i < NET_NX; i++) {
      if (!n->xp[i]) continue;
      if (net_table[i]->tell) net_table[i]->tell(n->xp[i], n->fail_msg); /* why, not only who */
      net_table[i]->abort(n->xp[i]);
    }
    n->self_send = n->self_recv = NULL;
    collie__match_forget(n->match);
  }
  return rc;
}

/* dev, devrec: a device message's (struct collie__req). */
static collie_result_t
net_post(struct collie__net *n, int peer, void *buf, size_t len, uint64_t slot, int is_send,
         int direct, void *dev, size_t devrec, struct collie__req *r)
{
  /* Field by field, not memset: a request of this size is zeroed with
   * `rep stos`, whose start-up was half of an 8-byte message's post (one
   * in each isend and irecv; issue 38 point 5). */
  r->done = 0;
  r->rc = COLLIE_SUCCESS;
  r->peer = peer;
  r->is_send = is_send;
  r->direct = is_send && direct;
  r->upto = !is_send && direct;
  r->mem = n->mem;
  r->slot = slot;
  r->buf = buf;
  r->len = len;
  r->off = 0;
  r->xseq = 0;
  r->devrec = (uint32_t)devrec;
  r->on_dev = 0;
  r->dev = dev;
  r->own = NULL;
  r->next = NULL;
  if (n->failed != COLLIE_SUCCESS) {
    collie__err_set_text(n->fail_msg);
    r->done = 1;
    return r->rc = n->failed;
  }
  if (peer < 0 || peer >= n->size)
    return collie__err(COLLIE_INTERNAL_ERROR, "message to rank %d outside 0..%d", peer,
                       n->size - 1);
  if (n->peer_xp[peer] < 0) {
    net_fifo_push(is_send ? &n->self_send : &n->self_recv, r);
    return net_self_match(n);
  }
  int i = n->peer_xp[peer];
  collie_result_t rc = net_table[i]->post(n->xp[i], r);
  return rc == COLLIE_SUCCESS ? rc : net_fail(n, rc);
}

/* A field added to struct collie__req must be set in net_post. */
_Static_assert(sizeof(void *) != 8 || sizeof(struct collie__req) == 104,
               "struct collie__req changed: update net_post");

collie_result_t
collie__net_isend(struct collie__net *n, int peer, const void *buf, size_t len, uint64_t slot,
                  struct collie__req *r)
{
  return net_post(n, peer, (void *)buf, len, slot, 1, 0, NULL, 0, r);
}

collie_result_t
collie__net_isend_direct(struct collie__net *n, int peer, const void *buf, size_t len,
                         uint64_t slot, struct collie__req *r)
{
  return net_post(n, peer, (void *)buf, len, slot, 1, 1, NULL, 0, r);
}

collie_result_t
collie__net_irecv(struct collie__net *n, int peer, void *buf, size_t len, uint64_t slot,
                  struct collie__req *r)
{
  return net_post(n, peer, buf, len, slot, 0, 0, NULL, 0, r);
}

collie_result_t
collie__net_irecv_upto(struct collie__net *n, int peer, void *buf, size_t len, uint64_t slot,
                       struct collie__req *r)
{
  return net_post(n, peer, buf, len, slot, 0, 1, NULL, 0, r);
}

collie_result_t
collie__net_isend_device(struct collie__net *n, int peer, const void *rec, size_t reclen,
                         const void *dev, size_t len, uint64_t slot, struct collie__req *r)
{
  if (peer < 0 || peer >= n->size || n->peer_xp[peer] < 0 ||
      !net_table[(int)n->peer_xp[peer]]->device_peer || !reclen ||
      reclen > COLLIE_NET_DEV_REC_MAX) {
    memset(r, 0, sizeof(*r)); /* as every post leaves r: a caller may read it after a failure */
    return collie__err(COLLIE_INTERNAL_ERROR,
                       "device message of %zu bytes to rank %d: no transport for it, or a record "
                       "of %zu bytes",
                       len, peer, reclen);
  }
  return net_post(n, peer, (void *)rec, len, slot, 1, 0, (void *)dev, reclen, r);
}

collie_result_t
collie__net_irecv_device(struct collie__net *n, int peer, void *buf, void *dev, size_t len,
                         uint64_t slot, struct collie__req *r)
{
  return net_post(n, peer, buf, len, slot, 0, 0, dev, 0, r);
}

collie_result_t
collie__net_write_peer(struct collie__net *n, int peer, uint64_t addr, const void *buf, size_t len)
{
  if (peer < 0 || peer >= n->size)
    return collie__err(COLLIE_INVALID_ARGUMENT, "write to rank %d of %d", peer, n->size);
  int i = n->peer_xp[peer];
  if (i < 0 || !net_table[i]->write_peer)
    return collie__err(COLLIE_UNSUPPORTED, "rank %d's memory is not reachable over %s", peer,
                       i < 0 ? "self" : net_table[i]->name);
  return net_table[i]->write_peer(n->xp[i], peer, addr, buf, len);
}

int
collie__net_single_copy(const struct collie__net *n)
{
  return n->single_copy;
}

/* Names up to a few pending requests, for a timeout message: each peer by
 * its rank here and in the world, as every other message does. */
static void
net_describe_pending(const struct collie__net *n, struct collie__req *const *reqs, int nreq,
                     char *buf, size_t len)
{
  size_t o = 0;
  int shown = 0;
  buf[0] = '\0';
  for (int i = 0; i < nreq && shown < 4; i++) {
    if (!reqs[i] || reqs[i]->done) continue;
    char s[96], host[80] = "";
    collie__slot_describe(reqs[i]->slot, s, sizeof(s));
    /* A peer on another host is named with its host: a lost link or host
     * shows as every rank of it going silent at once. */
    int p = reqs[i]->peer;
    if (p < 0) { /* a receive from any source */
      o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%srecv from any rank (%s)",
                            shown ? "; " : "", s);
      shown++;
      continue;
    }
    if (n->peers && p >= 0 && p < n->size) {
      char name[61];
      collie__peer_hostname(&n->peers[p], &n->peers[n->rank], name, sizeof(name));
      if (name[0]) snprintf(host, sizeof(host), ", host %s", name);
    }
    /* A send whose bytes are all out waits for the receiver to take them
     * (a single copy or a device message is read by the receiver). */
    int handed = reqs[i]->is_send && reqs[i]->off == reqs[i]->len && reqs[i]->len;
    char moved[64];
    if (handed)
      snprintf(moved, sizeof(moved), "%zu bytes, waiting for the receiver to take them",
               reqs[i]->len);
    else
      snprintf(moved, sizeof(moved), "%zu of %zu bytes", reqs[i]->off, reqs[i]->len);
    o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s rank %d (world rank %d%s) (%s, %s)",
                          shown ? "; " : "", reqs[i]->is_send ? "send to" : "recv from", p,
                          n->world[p], host, s, moved);
    shown++;
    if (o >= len) break;
  }
}

/* How long a rank whose deadline passed listens before it reports its own
 * timeout: peers waiting in a chain time out together, and the one that
 * waits on the frozen rank must be heard by the ones that wait on it. */
#define NET_TIMEOUT_GRACE_NS (200 * 1000000LL)

/* The world rank a peer's failure blames: the first rank its reason names
 * (the text after ", after: " in the transports' "rank R aborted its
 * communicator ..., after: <reason>"): the rank it waited on first, or the
 * peer whose cause it took. -1 when the failure carries no reason (a peer
 * that died) or the reason names no rank. */
int
collie__net_blamed(const char *msg)
{
  const char *why = strstr(msg, ", after: ");
  const char *at = why ? strstr(why, "(world rank ") : NULL;
  return at ? atoi(at + strlen("(world rank ")) : -1;
}

/* The thread's message is this rank's timeout. Tells every peer why now
 * (so that ranks waiting on this one learn the cause), then keeps reading
 * for NET_TIMEOUT_GRACE_NS: a peer this rank waits on that gave up first,
 * on a cause of its own, says so, and that cause, which names the rank
 * further down the chain, becomes this rank's error. A peer's reason that
 * blames this rank (it waited on us) teaches nothing: our timeout stands.
 * Only whom the reason blames counts: a reason that lists this rank among
 * its other pending requests still names the rank further down. */
static collie_result_t
net_timeout_grace(struct collie__net *n)
{
  char own[COLLIE_ERRMSG_LEN];
  snprintf(own, sizeof(own), "%s", collie__err_msg());
  for (int i = 0; i < NET_NX; i++)
    if (n->xp[i] && net_table[i]->tell) net_table[i]->tell(n->xp[i], own);
  int64_t until = collie__now_ns() + NET_TIMEOUT_GRACE_NS;
  /* A transport whose failure teaches nothing (a local peer that gave up on
   * our own word) is done; another may still bring the cause from across
   * the chain (a rank of another host that timed out on the lost one). */
  int spent[NET_NX] = {0}, live = 0;
  for (int i = 0; i < NET_NX; i++) live += n->xp[i] != NULL;
  while (live > 0) {
    for (int i = 0; i < NET_NX; i++) {
      if (!n->xp[i] || spent[i]) continue;
      int pending = 0;
      collie_result_t rc = net_table[i]->progress(n->xp[i], &pending);
      if (rc == COLLIE_SUCCESS) continue;
      if (rc == COLLIE_REMOTE_ERROR && collie__net_blamed(collie__err_msg()) != n->world[n->rank])
        return rc;
      spent[i] = 1;
      live--;
    }
    int64_t now = collie__now_ns();
    if (now >= until || live == 0) break;
    int64_t nap = now + 10000000 < until ? now + 10000000 : until;
    for (int i = 0; i < NET_NX; i++)
      if (n->xp[i] && !spent[i]) net_table[i]->wait(n->xp[i], nap);
  }
  collie__err_set_text(own);
  return COLLIE_TIMEOUT;
}

/* Whether a transport says a peer shares this rank's CPU (backoff.c). */
static int
net_crowded(void *arg)
{
  struct collie__net *n = arg;
  for (int i = 0; i < NET_NX; i++)
    if (n->xp[i] && net_table[i]->crowded && net_table[i]->crowded(n->xp[i])) return 1;
  return 0;
}

/* One sleep on every active transport at once, until something moves on
 * any of them, deadline_ns, or a transport's own limit. Returns 0 when some
 * transport cannot share a sleep (nothing slept), else 1. */
static int
net_sleep_across(struct collie__net *n, const int *active, int64_t deadline_ns)
{
  int start[NET_NX], count[NET_NX], nf = 0, shared = 1, ready = 0;
  int64_t until = deadline_ns;
  /* The table's later transports first: tcp arms without a system call and
   * often finds work, sparing shm its announcement (a membarrier, a look
   * under its lock) and the drain after. */
  for (int i = NET_NX - 1; i >= 0; i--) {
    count[i] = -1;
    if (!active[i] || ready || !shared) continue;
    const struct collie__xport_ops *ops = net_table[i];
    int k = ops->poll_arm ? ops->poll_arm(n->xp[i], n->pfds + nf, n->npfds - nf, &until) : -2;
    if (k == -2) shared = 0;
    if (k == -1) ready = 1;
    if (k < 0) continue;
    start[i] = nf;
    count[i] = k;
    nf += k;
  }
  if (shared && !ready) {
    int64_t left = until - collie__now_ns();
    if (left > 0) {
      struct timespec ts = {(time_t)(left / 1000000000), (long)(left % 1000000000)};
      (void)ppoll(n->pfds, (nfds_t)nf, &ts, NULL);
    }
  }
  for (int i = 0; i < NET_NX; i++)
    if (count[i] >= 0) net_table[i]->poll_done(n->xp[i], n->pfds + start[i], count[i]);
  return shared;
}

/* hard: the deadline fails the net (TIMEOUT, naming what is pending);
 * else it only returns TIMEOUT. */
static collie_result_t
net_wait(struct collie__net *n, struct collie__req *const *reqs, int nreq, int64_t deadline_ns,
         int hard)
{
  struct collie__backoff b;
  /* Already done (a send that went out whole at post, as most small ones do):
   * no progress round, which would only take the transports' locks. */
  int done = n->failed == COLLIE_SUCCESS;
  for (int i = 0; i < nreq && done; i++)
    done = !reqs[i] || (reqs[i]->done && reqs[i]->rc == COLLIE_SUCCESS);
  if (done) return COLLIE_SUCCESS;
  collie__backoff_init_crowded(&b, n->spin, net_crowded, n);
  for (;;) {
    int active[NET_NX] = {0}, nactive = 0;
    if (n->failed != COLLIE_SUCCESS) {
      collie__err_set_text(n->fail_msg);
      return n->failed;
    }
    for (int i = 0; i < NET_NX; i++) {
      if (!n->xp[i]) continue;
      int pending = 0;
      collie_result_t rc = net_table[i]->progress(n->xp[i], &pending);
      if (rc != COLLIE_SUCCESS) return net_fail(n, rc);
      if (pending) {
        active[i] = 1;
        nactive++;
      }
    }
    collie_result_t mrc = *n->match_work ? collie__match_progress(n->match) : COLLIE_SUCCESS;
    if (mrc != COLLIE_SUCCESS) return net_fail(n, mrc);
    int all = 1;
    for (int i = 0; i < nreq; i++) {
      if (!reqs[i]) continue;
      if (!reqs[i]->done) {
        all = 0;
      } else if (reqs[i]->rc != COLLIE_SUCCESS) {
        return net_fail(n, reqs[i]->rc);
      }
    }
    if (all) return COLLIE_SUCCESS;
    if (collie__backoff_next(&b, deadline_ns)) continue;
    int64_t now = collie__now_ns();
    if (now >= deadline_ns && !hard) return COLLIE_TIMEOUT;
    if (now >= deadline_ns) {
      char what[400], more[600];
      net_describe_pending(n, reqs, nreq, what, sizeof(what));
      collie__match_describe(n->match, more, sizeof(more));
      collie__err(COLLIE_TIMEOUT, "timed out waiting for %s%s", what, more);
      return net_fail(n, net_timeout_grace(n));
    }
    if (nactive == 1) {
      for (int i = 0; i < NET_NX; i++)
        if (active[i]) net_table[i]->wait(n->xp[i], deadline_ns);
    } else if (nactive > 1) {
      if (!net_sleep_across(n, active, deadline_ns))
        /* A transport that cannot share a sleep: take short turns. */
        for (int i = 0; i < NET_NX; i++)
          if (active[i]) net_table[i]->wait(n->xp[i], now + 50000);
    } else {
      /* Only messages to self remain, and their other half was never posted. */
      return net_fail(n, collie__err(COLLIE_INVALID_USAGE,
                                     "a message to this rank itself has no matching %s",
                                     n->self_send ? "recv" : "send"));
    }
  }
}

collie_result_t
collie__net_failure(const struct collie__net *n)
{
  if (n->failed != COLLIE_SUCCESS) collie__err_set_text(n->fail_msg);
  return n->failed;
}

collie_result_t
collie__net_wait_soft(struct collie__net *n, struct collie__req *const *reqs, int nreq,
                      int64_t until_ns)
{
  return net_wait(n, reqs, nreq, until_ns, 0);
}

void
collie__net_catch(struct collie__net *n, int peer, int on)
{
  if (peer < 0 || peer >= n->size || n->peer_xp[peer] < 0 || n->failed != COLLIE_SUCCESS) return;
  int i = n->peer_xp[peer];
  if (net_table[i]->catch_p2p) net_table[i]->catch_p2p(n->xp[i], peer, on);
}

collie_result_t
collie__net_poll(struct collie__net *n)
{
  if (n->failed != COLLIE_SUCCESS) {
    collie__err_set_text(n->fail_msg);
    return n->failed;
  }
  for (int i = 0; i < NET_NX; i++) {
    int pending = 0;
    if (!n->xp[i]) continue;
    collie_result_t rc = net_table[i]->progress(n->xp[i], &pending);
    if (rc != COLLIE_SUCCESS) return net_fail(n, rc);
  }
  collie_result_t rc = collie__match_progress(n->match);
  return rc == COLLIE_SUCCESS ? rc : net_fail(n, rc);
}

struct collie__match *
collie__net_match(struct collie__net *n)
{
  return n->match;
}

collie_result_t
collie__net_wait(struct collie__net *n, struct collie__req *const *reqs, int nreq,
                 int64_t deadline_ns)
{
  return net_wait(n, reqs, nreq, deadline_ns, 1);
}

void
collie__net_give_up(struct collie__net *n, collie_result_t rc)
{
  if (n && rc != COLLIE_SUCCESS) net_fail(n, rc);
}

void
collie__net_abort(struct collie__net *n)
{
  if (!n) return;
  for (int i = 0; i < NET_NX; i++)
    if (n->xp[i]) net_table[i]->abort(n->xp[i]);
}

void
collie__net_tell(struct collie__net *n, const char *why)
{
  if (!n || !why) return;
  for (int i = 0; i < NET_NX; i++)
    if (n->xp[i] && net_table[i]->tell) net_table[i]->tell(n->xp[i], why);
}

void
collie__net_close(struct collie__net *n)
{
  if (!n) return;
  for (int i = 0; i < NET_NX; i++)
    if (n->xp[i]) net_table[i]->close(n->xp[i]);
  collie__match_free(n->match);
  free(n->peer_xp);
  free(n->world);
  free(n->pfds);
  free(n);
}
