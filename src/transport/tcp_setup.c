/*
 * tcp_setup.c - setting up the tcp transport: which peers it can link, and
 * open(), which listens, publishes its address, connects and authenticates
 * one connection per peer. Kept apart from the data path (tcp.c) because it
 * runs once per communicator and may block and use the store, which the
 * data path never does; it is also where strangers are kept out.
 *
 * Each rank that expects connections listens on a free port and publishes
 * "tcp/addr/<rank>" = "host:port" in the communicator's store; the host is
 * 127.0.0.1 when all its tcp peers share its host, else the address of
 * COLLIE_SOCKET_IFNAME (or the first non-loopback one). In each pair the higher
 * rank connects and sends a hello carrying the job token; the lower rank checks
 * it (constant-time compare) before the socket becomes a channel, and answers
 * with one byte. The order - connect to every lower rank and send hellos, then
 * accept every higher rank, then read the replies - cannot deadlock: a connect
 * completes in the listener's kernel backlog without the peer calling accept,
 * and a rank answers hellos without waiting for its own replies. Accepting is
 * done with poll() over all unauthenticated connections at once, so a stranger
 * that connects and stays silent delays nobody.
 */
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "transport/tcp_int.h"
#include "transport/tcp_proto.h"
#include "transport/transport.h"
#include "util/error.h"
#include "util/util.h"

#define TCP_HELLO ((size_t)sizeof(struct collie__tcp_hello))
/* How often a setup wait looks whether the peers it waits for still live;
 * a wait in the store less often: each slice of it that ends empty costs
 * a tcp store a new connection (comm.c's wait for peer records does the
 * same). */
#define TCP_LIVENESS_POLL_MS 100
#define TCP_STORE_SLICE_NS (200 * 1000000LL)

/* The ops' can_connect: tcp reaches any rank. Pure. */
int
collie__tcp_can_connect(const struct collie__net_cfg *cfg, int peer)
{
  (void)cfg;
  (void)peer;
  return 1; /* TCP reaches any rank; net.c asks shm first */
}

/* ---- open ---- */

/* Whether c's peer can be looked at by pid while open() waits for it: it
 * shares this host (c->near: equal host identity, a known pid) and our own
 * record carries our pid, so that the records' pids are of this pid
 * namespace. A peer on another host is only ever waited for. */
static int
tcp_peer_watched(const struct collie__net_cfg *cfg, const struct collie__tcp_chan *c)
{
  return c->near && cfg->peers[cfg->rank].pid == (int32_t)getpid();
}

/* Whether c's peer is watched and its process has exited (a zombie counts). */
static int
tcp_peer_dead(const struct collie__net_cfg *cfg, const struct collie__tcp_chan *c)
{
  return tcp_peer_watched(cfg, c) && collie__proc_dead(c->pid);
}

/* The end of the next slice of a wait for c's peer (slice_ns from now, or
 * the setup deadline): between slices the wait looks at the peer's process
 * when it is watched, and in the store whether it gave up on the setup
 * (setup_fail.c), wherever it runs. */
static int64_t
tcp_slice_end(const struct collie__net_cfg *cfg, const struct collie__tcp_chan *c, int64_t slice_ns)
{
  (void)c;
  int64_t end = collie__now_ns() + slice_ns;
  return end < cfg->deadline_ns ? end : cfg->deadline_ns;
}

/* The error of a setup another rank gave up on (setup_fail.c). */
static collie_result_t
tcp_gave_up(const struct collie__net_cfg *cfg, int who, const char *why)
{
  if (who < 0 || who >= cfg->size)
    return collie__err(COLLIE_REMOTE_ERROR, "tcp: a rank gave up on this communicator's setup: %s",
                       why);
  return collie__err(COLLIE_REMOTE_ERROR,
                     "tcp: rank %d (world rank %d) gave up on this communicator's setup: %s", who,
                     cfg->peers[who].world_rank, why);
}

/* "ip:port" or "[ip6]:port" of an accepted connection, for messages. */
static void
tcp_sockaddr_str(const struct sockaddr_storage *ss, socklen_t sl, char *buf, size_t len)
{
  char host[64], serv[16];
  if (getnameinfo((const struct sockaddr *)ss, sl, host, sizeof(host), serv, sizeof(serv),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    collie__fmt(buf, len, "an unknown address");
    return;
  }
  if (ss->ss_family == AF_INET6)
    collie__fmt(buf, len, "[%s]:%s", host, serv);
  else
    collie__fmt(buf, len, "%s:%s", host, serv);
}

/* Socket buffers of a channel, each way. Both directions of an exchange of
 * MiB-sized messages then stay in flight at once: with the kernel's
 * autotuned sizes a 2-rank allgather of 2 MiB over loopback ran at half
 * speed in about half the runs (560 against 280 us), and at 16 MiB 1.5-1.8x
 * slower; small messages do not notice. */
#define TCP_SOCKET_BUFFER (4 << 20)

/* Listens where peers can reach us and publishes the address; with the
 * bootstrap ring, takes its listener, whose address every rank has. */
static collie_result_t
tcp_listen_publish(struct collie__tcp_xport *t, const struct collie__net_cfg *cfg, int *lfd,
                   char *laddr, size_t laddr_len)
{
  if (cfg->listen_addrs) {
    if ((*lfd = dup(cfg->listen_fd)) < 0)
      return collie__err_errno(COLLIE_SYSTEM_ERROR, "tcp: taking the bootstrap ring's listener");
    collie__fmt(laddr, laddr_len, "%s",
                cfg->listen_addrs + (size_t)cfg->rank * COLLIE_RING_ADDR_LEN);
    return COLLIE_SUCCESS;
  }
  char host[64];
  int same_host = 1;
  const char *me = cfg->peers[cfg->rank].host;
  for (int i = 0; i < t->nchan; i++)
    if (strncmp(cfg->peers[t->chans[i].peer].host, me, COLLIE_HOSTID_LEN) != 0) same_host = 0;
  /* Loopback only when every peer shares the host and no interface was
   * named: ranks in separate network namespaces of one host share its
   * identity (hostname, boot id) but not its loopback, and name their
   * interfaces (COLLIE_SOCKET_IFNAME). */
  if (same_host && !(cfg->ifname && cfg->ifname[0])) {
    collie__fmt(host, sizeof(host), "127.0.0.1"); /* nobody else needs to reach us */
  } else if (collie__sock_local_addr(cfg->ifname, host, sizeof(host)) < 0) {
    return collie__err_errno(COLLIE_SYSTEM_ERROR,
                             "tcp: no IPv4 address on interface \"%s\" (COLLIE_SOCKET_IFNAME)",
                             cfg->ifname ? cfg->ifname : "");
  }
  int port = 0;
  *lfd = collie__sock_listen(host, 0, &port);
  if (*lfd < 0) return collie__err_errno(COLLIE_SYSTEM_ERROR, "tcp: cannot listen on %s", host);
  if (strchr(host, ':'))
    collie__fmt(laddr, laddr_len, "[%s]:%d", host, port);
  else
    collie__fmt(laddr, laddr_len, "%s:%d", host, port);
  char key[64];
  collie__fmt(key, sizeof(key), "tcp/addr/%d", cfg->rank);
  collie_result_t rc = collie__store_set(cfg->store, key, laddr, strlen(laddr), cfg->deadline_ns);
  if (rc != COLLIE_SUCCESS) collie__err_prefix("tcp: publishing %s as %s", laddr, key);
  return rc;
}

/* Sends our hello for this communicator on c's connection. */
static int
tcp_send_hello(const struct collie__tcp_xport *t, const struct collie__net_cfg *cfg,
               const struct collie__tcp_chan *c, const unsigned char *token, size_t token_len)
{
  unsigned char buf[sizeof(struct collie__tcp_hello) + COLLIE_TCP_TOKEN_MAX];
  struct collie__tcp_hello h;
  h.magic = htole32(COLLIE_TCP_HELLO_MAGIC);
  h.version = htole16(COLLIE_TCP_PROTO_VERSION);
  h.token_len = htole16((uint16_t)token_len);
  h.comm_hash = htole64(cfg->comm_hash);
  h.from_rank = htole32((uint32_t)t->rank);
  h.to_rank = htole32((uint32_t)c->peer);
  memcpy(buf, &h, sizeof(h));
  memcpy(buf + sizeof(h), token, token_len);
  return collie__sock_send_all(c->fd, buf, sizeof(h) + token_len, cfg->deadline_ns);
}

/* Connects to c's (lower) peer at the address it published and sends our
 * hello; its reply comes later. */
static collie_result_t
tcp_dial(struct collie__tcp_xport *t, const struct collie__net_cfg *cfg, struct collie__tcp_chan *c,
         const unsigned char *hello_token, size_t token_len)
{
  char key[64], who[160], host[64];
  void *val = NULL;
  size_t len = 0;
  int port = 0;
  collie__fmt(key, sizeof(key), "tcp/addr/%d", c->peer);
  collie__tcp_peer_name(c, who, sizeof(who));
  collie_result_t rc = COLLIE_SUCCESS;
  if (cfg->listen_addrs) { /* the bootstrap ring brought every address */
    const char *a = cfg->listen_addrs + (size_t)c->peer * COLLIE_RING_ADDR_LEN;
    len = strnlen(a, COLLIE_RING_ADDR_LEN);
    if ((val = malloc(len + 1)))
      memcpy(val, a, len);
    else
      rc = collie__err(COLLIE_SYSTEM_ERROR, "tcp: out of memory");
  } else {
    for (;;) { /* in slices, looking between them whether the peer still lives */
      int64_t end = tcp_slice_end(cfg, c, TCP_STORE_SLICE_NS);
      rc = collie__store_get(cfg->store, key, &val, &len, end);
      if (rc != COLLIE_TIMEOUT || end >= cfg->deadline_ns) break;
      if (tcp_peer_dead(cfg, c))
        return collie__err(COLLIE_REMOTE_ERROR,
                           "tcp: %s died before it published its listen address", who);
      char why[COLLIE_ERRMSG_LEN];
      int quit = -1;
      if (collie__setup_gave_up(cfg->store, &quit, why, sizeof(why)))
        return tcp_gave_up(cfg, quit, why);
    }
  }
  if (rc != COLLIE_SUCCESS) {
    collie__err_prefix("tcp: %s never published its listen address", who);
    return rc;
  }
  if (len == 0 || len >= sizeof(c->addr)) {
    free(val);
    return collie__err(COLLIE_REMOTE_ERROR,
                       "tcp: %s published a malformed address of %zu bytes under %s", who, len,
                       key);
  }
  memcpy(c->addr, val, len);
  c->addr[len] = '\0';
  free(val);
  collie__tcp_peer_name(c, who, sizeof(who));
  if (collie__parse_hostport(c->addr, host, sizeof(host), &port) < 0 || port == 0)
    return collie__err(COLLIE_REMOTE_ERROR, "tcp: %s published a malformed address \"%s\"", who,
                       c->addr);
  for (;;) { /* a dead peer's port refuses until the deadline: look at it in between */
    int64_t end = tcp_slice_end(cfg, c, TCP_LIVENESS_POLL_MS * 1000000LL);
    c->fd = collie__sock_connect(host, port, end);
    if (c->fd >= 0 || end >= cfg->deadline_ns || (errno != ETIMEDOUT && errno != ECONNREFUSED))
      break;
    if (tcp_peer_dead(cfg, c))
      return collie__err(COLLIE_REMOTE_ERROR, "tcp: %s died before it accepted our connection",
                         who);
    char why[COLLIE_ERRMSG_LEN];
    int quit = -1;
    if (collie__setup_gave_up(cfg->store, &quit, why, sizeof(why)))
      return tcp_gave_up(cfg, quit, why);
  }
  if (c->fd < 0)
    return collie__err_errno(errno == ETIMEDOUT ? COLLIE_TIMEOUT : COLLIE_SYSTEM_ERROR,
                             "tcp: cannot connect to %s", who);
  if (tcp_send_hello(t, cfg, c, hello_token, token_len) < 0)
    return collie__err_errno(errno == ETIMEDOUT ? COLLIE_TIMEOUT : COLLIE_REMOTE_ERROR,
                             "tcp: sending our hello to %s", who);
  c->ready = 1;
  return COLLIE_SUCCESS;
}

/* Sends our hello to c's (lower) peer on a connection kept from an earlier
 * communicator of our two processes (tcp_pool.c); 0 when none is ready. */
static int
tcp_reuse_kept(struct collie__tcp_xport *t, const struct collie__net_cfg *cfg,
               struct collie__tcp_chan *c, const unsigned char *hello_token, size_t token_len)
{
  struct collie__tcp_idle e;
  if (!t->reuse || c->pid <= 0 || !collie__tcp_pool_take(c->hostid, c->pid, t->token, &e)) return 0;
  c->fd = e.fd;
  collie__fmt(c->addr, sizeof(c->addr), "%s", e.addr);
  if (tcp_send_hello(t, cfg, c, hello_token, token_len) < 0) {
    close(c->fd); /* it went away meanwhile: connect anew */
    c->fd = -1;
    return 0;
  }
  c->reused = 1;
  c->ready = 1;
  return 1;
}

/* Says hello to every lower rank, on a kept connection or a new one;
 * replies come later. */
static collie_result_t
tcp_connect_lower(struct collie__tcp_xport *t, const struct collie__net_cfg *cfg,
                  const unsigned char *hello_token, size_t token_len)
{
  for (int i = 0; i < t->nchan; i++) {
    struct collie__tcp_chan *c = &t->chans[i];
    if (c->peer > t->rank) break;
    if (tcp_reuse_kept(t, cfg, c, hello_token, token_len)) continue;
    collie_result_t rc = tcp_dial(t, cfg, c, hello_token, token_len);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  return COLLIE_SUCCESS;
}

/* A connection accepted but not yet authenticated. */
struct tcp_pending {
  int fd;
  size_t got;
  int64_t since;
  char addr[80];
  unsigned char buf[sizeof(struct collie__tcp_hello) + COLLIE_TCP_TOKEN_MAX];
  /* A connection borrowed from the pool (tcp_pool.c): the peer's BYE of the
   * last communicator comes first, then perhaps a hello. */
  int kept;
  struct collie__tcp_idle idle;
};

static void
tcp_refuse(struct tcp_pending *pe, unsigned char reply, const char *why)
{
  COLLIE_WARN("TCP", "tcp: refused a connection from %s: %s", pe->addr, why);
  ssize_t w = send(pe->fd, &reply, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)w;
  close(pe->fd);
  pe->fd = -1;
}

/* Reads what pe has sent of its hello; on a complete one, refuses it or makes
 * it the channel of its rank (returns 1). */
static int
tcp_pending_read(struct collie__tcp_xport *t, const struct collie__net_cfg *cfg,
                 struct tcp_pending *pe, const unsigned char *token, size_t token_len)
{
  struct collie__tcp_hello h;
  if (pe->kept && !pe->idle.bye) {
    int st = collie__tcp_idle_read_bye(&pe->idle);
    if (st == 0) return 0;
    if (st < 0) { /* closed, or not at a clean end: not reusable */
      close(pe->fd);
      pe->fd = -1;
      return 0;
    }
  }
  for (;;) {
    size_t need = TCP_HELLO;
    if (pe->got >= TCP_HELLO) {
      memcpy(&h, pe->buf, sizeof(h));
      need += le16toh(h.token_len);
    }
    if (pe->got == need) break;
    ssize_t n = recv(pe->fd, pe->buf + pe->got, need - pe->got, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n <= 0) {
      COLLIE_INFO("TCP", "tcp: a connection from %s ended before its hello", pe->addr);
      close(pe->fd);
      pe->fd = -1;
      return 0;
    }
    pe->got += (size_t)n;
    if (pe->got == TCP_HELLO) {
      /* Check the fixed part before trusting its length field. */
      memcpy(&h, pe->buf, sizeof(h));
      char why[96];
      if (le32toh(h.magic) != COLLIE_TCP_HELLO_MAGIC) {
        tcp_refuse(pe, COLLIE_TCP_REPLY_BAD_VERSION, "not a collie tcp hello (bad magic)");
        return 0;
      }
      if (le16toh(h.version) != COLLIE_TCP_PROTO_VERSION) {
        collie__fmt(why, sizeof(why), "protocol version %u, ours is %u", le16toh(h.version),
                    COLLIE_TCP_PROTO_VERSION);
        tcp_refuse(pe, COLLIE_TCP_REPLY_BAD_VERSION, why);
        return 0;
      }
      if (le16toh(h.token_len) > COLLIE_TCP_TOKEN_MAX) {
        collie__fmt(why, sizeof(why), "malformed hello (token of %u bytes, at most %u)",
                    le16toh(h.token_len), COLLIE_TCP_TOKEN_MAX);
        tcp_refuse(pe, COLLIE_TCP_REPLY_BAD_TOKEN, why);
        return 0;
      }
    }
  }
  memcpy(&h, pe->buf, sizeof(h));
  if (!collie__equal_ct(pe->buf + TCP_HELLO, le16toh(h.token_len), token, token_len)) {
    tcp_refuse(pe, COLLIE_TCP_REPLY_BAD_TOKEN, "wrong job token");
    return 0;
  }
  char why[160];
  uint32_t from = le32toh(h.from_rank), to = le32toh(h.to_rank);
  if (le64toh(h.comm_hash) != cfg->comm_hash || to != (uint32_t)t->rank) {
    collie__fmt(why, sizeof(why),
                "it is for communicator %016llx rank %u, this is communicator "
                "%016llx rank %d",
                (unsigned long long)le64toh(h.comm_hash), to, (unsigned long long)cfg->comm_hash,
                t->rank);
    tcp_refuse(pe, COLLIE_TCP_REPLY_BAD_COMM, why);
    return 0;
  }
  if (from <= (uint32_t)t->rank || from >= (uint32_t)t->size || t->chan_of[from] < 0) {
    collie__fmt(why, sizeof(why), "it claims rank %u, which is not a higher tcp peer of rank %d",
                from, t->rank);
    tcp_refuse(pe, COLLIE_TCP_REPLY_BAD_COMM, why);
    return 0;
  }
  struct collie__tcp_chan *c = &t->chans[t->chan_of[from]];
  if (c->fd >= 0) {
    collie__fmt(why, sizeof(why), "rank %u is already connected (from %s)", from, c->addr);
    tcp_refuse(pe, COLLIE_TCP_REPLY_DUPLICATE, why);
    return 0;
  }
  unsigned char ok = COLLIE_TCP_REPLY_ACCEPT;
  if (send(pe->fd, &ok, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
    COLLIE_INFO("TCP", "tcp: rank %u (%s) left before our reply: %s", from, pe->addr,
                strerror(errno));
    close(pe->fd);
    pe->fd = -1;
    return 0;
  }
  c->fd = pe->fd;
  c->ready = 1;
  c->reused = pe->kept;
  collie__fmt(c->addr, sizeof(c->addr), "%s", pe->addr);
  pe->fd = -1;
  COLLIE_TRACE("TCP", "tcp: rank %u connected from %s", from, c->addr);
  return 1;
}

/* Higher peers not connected yet. */
static int
tcp_missing(const struct collie__tcp_xport *t)
{
  int missing = 0;
  for (int i = 0; i < t->nchan; i++) missing += t->chans[i].peer > t->rank && t->chans[i].fd < 0;
  return missing;
}

/* Takes from the pool (tcp_pool.c) the kept connections to the higher
 * peers still missing, into free entries of kept[kmax], so that a hello on
 * one of them is read as on a new connection. */
static void
tcp_borrow_kept(struct collie__tcp_xport *t, const struct collie__net_cfg *cfg,
                struct tcp_pending *kept, int kmax, const unsigned char *token, size_t token_len)
{
  for (int i = 0; i < t->nchan; i++) {
    const struct collie__tcp_chan *c = &t->chans[i];
    if (c->peer < t->rank || c->fd >= 0 || c->pid <= 0) continue;
    for (int k = 0; k < kmax; k++) {
      if (kept[k].fd >= 0) continue;
      struct collie__tcp_idle e;
      if (!collie__tcp_pool_borrow(c->hostid, c->pid, t->token, &e)) break;
      struct tcp_pending *pe = &kept[k];
      pe->fd = e.fd;
      pe->got = 0;
      pe->since = collie__now_ns();
      pe->kept = 1;
      pe->idle = e;
      collie__fmt(pe->addr, sizeof(pe->addr), "%s", e.addr);
    }
  }
  for (int k = 0; k < kmax; k++) /* the hello may be there already */
    if (kept[k].fd >= 0 && kept[k].got == 0) tcp_pending_read(t, cfg, &kept[k], token, token_len);
}

/* Accepts connections until every higher rank has proved the token. */
static collie_result_t
tcp_accept_higher(struct collie__tcp_xport *t, const struct collie__net_cfg *cfg, int lfd,
                  const char *laddr, const unsigned char *token, size_t token_len)
{
  int missing = tcp_missing(t);
  if (missing == 0) return COLLIE_SUCCESS;
  /* Room for every expected peer to be half-way through its hello at once,
   * plus a few strangers; beyond that the oldest connection is dropped. */
  int maxp = COLLIE_TCP_MAX_PENDING + missing;
  /* Kept connections to the missing peers: looked for again at each look
   * at the peers, since a communicator of this process may close meanwhile. */
  int kmax = t->reuse ? missing * COLLIE_TCP_POOL_PER_PEER : 0;
  struct tcp_pending *pend = calloc((size_t)maxp, sizeof(*pend));
  struct tcp_pending *kept = calloc((size_t)kmax + 1, sizeof(*kept));
  struct pollfd *pf = calloc((size_t)(maxp + kmax) + 1, sizeof(*pf));
  int *idx = calloc((size_t)(maxp + kmax) + 1, sizeof(*idx));
  collie_result_t rc = COLLIE_SUCCESS;
  if (!pend || !kept || !pf || !idx) {
    rc = collie__err(COLLIE_SYSTEM_ERROR, "tcp: out of memory accepting connections");
    missing = 0;
  }
  for (int i = 0; pend && i < maxp; i++) pend[i].fd = -1;
  for (int k = 0; kept && k < kmax; k++) kept[k].fd = -1;
  if (kmax && missing > 0) {
    tcp_borrow_kept(t, cfg, kept, kmax, token, token_len);
    missing = tcp_missing(t);
  }
  int64_t next_look = collie__now_ns() + TCP_LIVENESS_POLL_MS * 1000000LL;
  while (missing > 0) {
    /* A higher rank of this host that died before it connected never will:
     * name it now rather than at the deadline. */
    int watched = 0;
    if (collie__now_ns() >= next_look) {
      next_look = collie__now_ns() + TCP_LIVENESS_POLL_MS * 1000000LL;
      for (int i = 0; i < t->nchan && rc == COLLIE_SUCCESS; i++) {
        const struct collie__tcp_chan *c = &t->chans[i];
        if (c->peer < t->rank || c->fd >= 0) continue;
        if (tcp_peer_dead(cfg, c))
          rc = collie__err(COLLIE_REMOTE_ERROR,
                           "tcp: rank %d (world rank %d, pid %d) died before it connected to "
                           "rank %d at %s",
                           c->peer, c->world_rank, (int)c->pid, t->rank, laddr);
      }
      char why[COLLIE_ERRMSG_LEN];
      int quit = -1;
      if (rc == COLLIE_SUCCESS && collie__setup_gave_up(cfg->store, &quit, why, sizeof(why)))
        rc = tcp_gave_up(cfg, quit, why);
      if (rc != COLLIE_SUCCESS) break;
      if (kmax) {
        tcp_borrow_kept(t, cfg, kept, kmax, token, token_len);
        if ((missing = tcp_missing(t)) == 0) break;
      }
    }
    /* Any missing peer is looked at (its process, or its notice in the store). */
    for (int i = 0; i < t->nchan; i++) watched |= t->chans[i].peer > t->rank && t->chans[i].fd < 0;
    int left = collie__ms_until(cfg->deadline_ns);
    int ms = watched && left > TCP_LIVENESS_POLL_MS ? TCP_LIVENESS_POLL_MS : left;
    if (left == 0) {
      char names[400];
      size_t o = 0;
      names[0] = '\0';
      for (int i = 0; i < t->nchan && o < sizeof(names); i++) {
        const struct collie__tcp_chan *c = &t->chans[i];
        if (c->peer < t->rank || c->fd >= 0) continue;
        o += (size_t)snprintf(names + o, sizeof(names) - o, "%srank %d (world rank %d, pid %d)",
                              o ? ", " : "", c->peer, c->world_rank, (int)c->pid);
      }
      rc = collie__err(COLLIE_TIMEOUT, "tcp: timed out waiting for %s to connect to rank %d at %s",
                       names, t->rank, laddr);
      break;
    }
    int np = 1;
    pf[0].fd = lfd;
    pf[0].events = POLLIN;
    for (int i = 0; i < maxp; i++) {
      if (pend[i].fd < 0) continue;
      pf[np].fd = pend[i].fd;
      pf[np].events = POLLIN;
      idx[np++] = i;
    }
    for (int k = 0; k < kmax; k++) { /* idx -1 - k: kept[k] */
      if (kept[k].fd < 0) continue;
      pf[np].fd = kept[k].fd;
      pf[np].events = POLLIN;
      idx[np++] = -1 - k;
    }
    int n = poll(pf, (nfds_t)np, ms);
    if (n < 0 && errno != EINTR) {
      rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "tcp: poll while accepting connections");
      break;
    }
    if (n <= 0) continue;
    for (int k = 1; k < np; k++) {
      struct tcp_pending *pe = idx[k] >= 0 ? &pend[idx[k]] : &kept[-1 - idx[k]];
      if (pf[k].revents && pe->fd >= 0) missing -= tcp_pending_read(t, cfg, pe, token, token_len);
    }
    if (!(pf[0].revents & POLLIN)) continue;
    for (;;) {
      struct sockaddr_storage ss;
      socklen_t sl = sizeof(ss);
      int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        /* Out of descriptors or memory: the listener stays readable, so do not
         * spin on it; EAGAIN and the rest are retried by the next poll(). */
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
          collie__sleep_ns(10000000);
        break;
      }
      int slot = -1;
      for (int i = 0; i < maxp; i++) {
        if (pend[i].fd < 0) {
          slot = i;
          break;
        }
        if (slot < 0 || pend[i].since < pend[slot].since) slot = i;
      }
      if (pend[slot].fd >= 0) {
        COLLIE_WARN("TCP",
                    "tcp: too many unauthenticated connections; dropped the "
                    "one from %s",
                    pend[slot].addr);
        close(pend[slot].fd);
      }
      struct tcp_pending *pe = &pend[slot];
      pe->fd = fd;
      pe->got = 0;
      pe->since = collie__now_ns();
      tcp_sockaddr_str(&ss, sl, pe->addr, sizeof(pe->addr));
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      /* The hello usually arrives with the connection. */
      missing -= tcp_pending_read(t, cfg, pe, token, token_len);
    }
  }
  for (int i = 0; pend && i < maxp; i++)
    if (pend[i].fd >= 0) close(pend[i].fd);
  /* Kept connections that carried no hello for us go back for another
   * communicator; one that began a hello is no longer at a clean start. */
  for (int k = 0; kept && k < kmax; k++) {
    if (kept[k].fd < 0) continue;
    if (kept[k].got == 0)
      collie__tcp_pool_give_back(&kept[k].idle);
    else
      close(kept[k].fd);
  }
  free(kept);
  free(pend);
  free(pf);
  free(idx);
  return rc;
}

/* Reads c's (lower) peer's answer to our hello. */
static collie_result_t
tcp_read_reply(struct collie__tcp_xport *t, const struct collie__net_cfg *cfg,
               struct collie__tcp_chan *c)
{
  char who[160];
  unsigned char reply = 0;
  collie__tcp_peer_name(c, who, sizeof(who));
  if (collie__sock_recv_all(c->fd, &reply, 1, cfg->deadline_ns) < 0) {
    if (errno == ETIMEDOUT)
      return collie__err(COLLIE_TIMEOUT,
                         "tcp: timed out waiting for %s to answer our hello (is it still "
                         "connecting to others?)",
                         who);
    return collie__err_errno(COLLIE_REMOTE_ERROR,
                             "tcp: %s closed the connection during the handshake", who);
  }
  switch (reply) {
  case COLLIE_TCP_REPLY_ACCEPT:
    break;
  case COLLIE_TCP_REPLY_BAD_TOKEN:
    return collie__err(COLLIE_REMOTE_ERROR,
                       "tcp: %s refused our job token (were the ranks "
                       "started with different "
                       "COLLIE_JOB_TOKEN values?)",
                       who);
  case COLLIE_TCP_REPLY_BAD_VERSION:
    return collie__err(COLLIE_REMOTE_ERROR,
                       "tcp: %s refused our tcp protocol version %u (mixed collie builds?)", who,
                       COLLIE_TCP_PROTO_VERSION);
  case COLLIE_TCP_REPLY_BAD_COMM:
    return collie__err(COLLIE_REMOTE_ERROR,
                       "tcp: %s refused the connection: it does not expect this rank in "
                       "communicator %016llx",
                       who, (unsigned long long)cfg->comm_hash);
  case COLLIE_TCP_REPLY_DUPLICATE:
    return collie__err(COLLIE_REMOTE_ERROR,
                       "tcp: %s refused the connection: another process already connected "
                       "to it as rank %d",
                       who, t->rank);
  default:
    return collie__err(COLLIE_REMOTE_ERROR, "tcp: %s answered our hello with 0x%02x", who, reply);
  }
  return COLLIE_SUCCESS;
}

/* Reads each lower rank's answer to our hello. A kept connection that fails
 * before its answer (the peer closed it, or read a hello of another
 * communicator of ours on it and refused) is dropped for a new one. */
static collie_result_t
tcp_read_replies(struct collie__tcp_xport *t, const struct collie__net_cfg *cfg,
                 const unsigned char *token, size_t token_len)
{
  for (int i = 0; i < t->nchan; i++) {
    struct collie__tcp_chan *c = &t->chans[i];
    if (c->peer > t->rank) break;
    collie_result_t rc;
    while ((rc = tcp_read_reply(t, cfg, c)) != COLLIE_SUCCESS && c->reused) {
      COLLIE_INFO("TCP", "tcp: the kept connection to rank %d failed (%s); connecting anew",
                  c->peer, collie__err_msg());
      close(c->fd);
      c->fd = -1;
      c->reused = 0;
      c->ready = 0;
      if ((rc = tcp_dial(t, cfg, c, token, token_len)) != COLLIE_SUCCESS) return rc;
    }
    if (rc != COLLIE_SUCCESS) return rc;
  }
  return COLLIE_SUCCESS;
}

/* The ops' open (see transport.h for the contract): listens if a higher
 * rank will connect, connects to and says hello to every lower rank,
 * accepts and checks every higher one, then reads the replies; blocks until
 * every channel is up or cfg->deadline_ns. The job token must fit a hello
 * (COLLIE_TCP_TOKEN_MAX). On failure every socket is closed. */
collie_result_t
collie__tcp_open(const struct collie__net_cfg *cfg, const int *peers, int npeers,
                 struct collie__xport **out)
{
  collie_result_t rc = COLLIE_SUCCESS;
  int lfd = -1;
  char laddr[96] = "";
  *out = NULL;
  const char *token = cfg->token ? cfg->token : "";
  size_t token_len = strlen(token);
  if (token_len > COLLIE_TCP_TOKEN_MAX)
    return collie__err(COLLIE_INVALID_ARGUMENT, "tcp: the job token is %zu bytes (at most %u)",
                       token_len, COLLIE_TCP_TOKEN_MAX);
  if (npeers < 0 || cfg->size <= 0 || cfg->rank < 0 || cfg->rank >= cfg->size)
    return collie__err(COLLIE_INVALID_ARGUMENT, "tcp: open: rank %d of %d with %d peers", cfg->rank,
                       cfg->size, npeers);
  if (npeers > 0 && (!cfg->store || !cfg->peers || !peers))
    return collie__err(COLLIE_INVALID_ARGUMENT, "tcp: open: %s is NULL",
                       !cfg->store   ? "the store"
                       : !cfg->peers ? "the peer table"
                                     : "peers");
  struct collie__tcp_xport *t = calloc(1, sizeof(*t));
  if (!t) return collie__err(COLLIE_SYSTEM_ERROR, "tcp: out of memory");
  atomic_init(&t->aborted, 0);
  t->rank = cfg->rank;
  t->size = cfg->size;
  t->sink = cfg->sink;
  t->reuse = cfg->tcp_reuse;
  t->token = collie__tcp_token_hash(token);
  t->chans = calloc((size_t)(npeers ? npeers : 1), sizeof(*t->chans));
  t->pfds = calloc((size_t)(npeers ? npeers : 1), sizeof(*t->pfds));
  t->chan_of = malloc((size_t)cfg->size * sizeof(int));
  if (!t->chans || !t->pfds || !t->chan_of) {
    rc = collie__err(COLLIE_SYSTEM_ERROR, "tcp: out of memory for %d channels", npeers);
    goto out_free;
  }
  for (int p = 0; p < cfg->size; p++) t->chan_of[p] = -1;
  int nhigh = 0;
  for (int i = 0; i < npeers; i++) {
    int p = peers[i];
    if (p < 0 || p >= cfg->size || p == cfg->rank || (i > 0 && p <= peers[i - 1])) {
      rc = collie__err(COLLIE_INVALID_ARGUMENT,
                       "tcp: open: peer %d is rank %d (peers must be ascending "
                       "ranks in 0..%d "
                       "other than this rank %d)",
                       i, p, cfg->size - 1, cfg->rank);
      goto out_free;
    }
    struct collie__tcp_chan *c = &t->chans[i];
    c->peer = p;
    c->world_rank = cfg->peers[p].world_rank;
    c->pid = cfg->peers[p].pid;
    c->near = !strcmp(cfg->peers[p].host, cfg->peers[cfg->rank].host) && c->pid > 0;
    collie__fmt(c->hostid, sizeof(c->hostid), "%.*s", COLLIE_HOSTID_LEN - 1, cfg->peers[p].host);
    collie__peer_hostname(&cfg->peers[p], &cfg->peers[cfg->rank], c->host, sizeof(c->host));
    c->fd = -1;
    t->chan_of[p] = i;
    t->nchan++;
    if (p > cfg->rank) nhigh++;
  }
  if (nhigh > 0)
    COLLIE_CHECK_GOTO(tcp_listen_publish(t, cfg, &lfd, laddr, sizeof(laddr)), rc, out_free);
  COLLIE_CHECK_GOTO(tcp_connect_lower(t, cfg, (const unsigned char *)token, token_len), rc,
                    out_free);
  COLLIE_CHECK_GOTO(tcp_accept_higher(t, cfg, lfd, laddr, (const unsigned char *)token, token_len),
                    rc, out_free);
  if (lfd >= 0) close(lfd); /* nobody else may join: strangers now get "refused" */
  lfd = -1;
  COLLIE_CHECK_GOTO(tcp_read_replies(t, cfg, (const unsigned char *)token, token_len), rc,
                    out_free);
  for (int i = 0; i < t->nchan; i++) {
    int one = 1;
    collie__sock_set_nonblock(t->chans[i].fd, 1);
    setsockopt(t->chans[i].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* Best effort: the kernel caps it at net.core.[rw]mem_max. */
    int bufsz = TCP_SOCKET_BUFFER;
    setsockopt(t->chans[i].fd, SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof(bufsz));
    setsockopt(t->chans[i].fd, SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof(bufsz));
  }
  COLLIE_INFO("TCP", "tcp: rank %d connected to %d peer(s)%s%s", t->rank, t->nchan,
              laddr[0] ? ", listened on " : "", laddr);
  *out = (struct collie__xport *)(void *)t;
  return COLLIE_SUCCESS;

out_free:
  if (lfd >= 0) close(lfd);
  /* The peers whose channels are up have finished their own open, or will:
   * they learn why this rank gave up (its error names the cause, a third
   * rank as often as not), not only that it closed. */
  collie__tcp_tell(t, collie__err_msg());
  collie__tcp_drain(t);
  collie__tcp_free(t);
  return rc;
}
