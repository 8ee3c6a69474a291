/*
 * fuzz_tcp_handshake.c - the tcp transport's connection setup
 * (collie__tcp_open, tcp_setup.c) on what a stranger or a broken peer may
 * send, over real loopback connections. The first byte picks the side:
 *
 * - even: this process opens rank 0 of 3, which listens and expects ranks 1
 *   and 2. The rest of the input is up to FUZZ_MAX_CONNS records, each a
 *   connection made before the real peers': a flags byte (bit 0: end the
 *   stream after the bytes; bit 1: reset it at once; else it stays open and
 *   silent), a little-endian u16 length, and that many bytes sent as they
 *   are. Then the real ranks 1 and 2 connect with valid hellos. open() must
 *   succeed whatever the records said (strangers never keep a peer out or
 *   stall setup), and a real peer answered 'A' must own its rank's channel;
 *   one answered 'D', or not at all because setup was over, must have lost
 *   it to a record that proved the token first.
 * - odd: this process opens rank 1 of 2, which connects to a "rank 0" played
 *   here: it waits for the hello its encoder must send, byte for byte (a
 *   connection that says anything else is another process of this host that
 *   found the port, and is reset), answers with the rest of the input (none:
 *   it resets the connection), and resets the connection once open() has
 *   returned. open() must succeed on an 'A' and fail with REMOTE_ERROR on
 *   anything else.
 *
 * Everything is bounded by deadlines; a setup that ever waits for one is a
 * finding (abort). The store is an in-memory one of this file.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "fuzz_log.h"
#include "transport/tcp_int.h"
#include "transport/tcp_proto.h"
#include "transport/transport.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

#define FUZZ_TOKEN "fuzz-token"
#define FUZZ_HASH 0x0123456789abcdefull
#define FUZZ_MAX_CONNS 24 /* more than open() keeps pending: the oldest are dropped */

/* ---- A one-key store in memory: setup publishes and reads tcp/addr/<rank> ---- */

struct fuzz_store {
  struct collie__store base;
  pthread_mutex_t mu;
  char key[64];
  char val[128];
  size_t len;
  int has;
};

static collie_result_t
fuzz_store_set(collie__store_t *s, const char *key, const void *val, size_t len,
               int64_t deadline_ns)
{
  struct fuzz_store *fs = (struct fuzz_store *)(void *)s;
  (void)deadline_ns;
  if (len >= sizeof(fs->val) || strlen(key) >= sizeof(fs->key)) abort();
  pthread_mutex_lock(&fs->mu);
  snprintf(fs->key, sizeof(fs->key), "%s", key);
  memcpy(fs->val, val, len);
  fs->len = len;
  fs->has = 1;
  pthread_mutex_unlock(&fs->mu);
  return COLLIE_SUCCESS;
}

static collie_result_t
fuzz_store_get(collie__store_t *s, const char *key, void **val, size_t *len, int64_t deadline_ns)
{
  struct fuzz_store *fs = (struct fuzz_store *)(void *)s;
  for (;;) {
    pthread_mutex_lock(&fs->mu);
    if (fs->has && !strcmp(fs->key, key)) {
      *val = malloc(fs->len + 1);
      if (!*val) abort();
      memcpy(*val, fs->val, fs->len);
      *len = fs->len;
      pthread_mutex_unlock(&fs->mu);
      return COLLIE_SUCCESS;
    }
    pthread_mutex_unlock(&fs->mu);
    if (collie__now_ns() >= deadline_ns) return COLLIE_TIMEOUT;
    collie__sleep_ns(20000);
  }
}

static collie_result_t
fuzz_store_add(collie__store_t *s, const char *key, int64_t delta, int64_t *out,
               int64_t deadline_ns)
{
  (void)s;
  (void)key;
  (void)delta;
  (void)out;
  (void)deadline_ns;
  abort(); /* setup never counts */
}

static void
fuzz_store_close(collie__store_t *s)
{
  (void)s;
}

static const struct collie__store_ops fuzz_store_ops = {
    .scheme = "fuzz",
    .set = fuzz_store_set,
    .get = fuzz_store_get,
    .add = fuzz_store_add,
    .close = fuzz_store_close,
};

static struct fuzz_store fuzz_st = {.base = {.ops = &fuzz_store_ops, .refs = 1},
                                    .mu = PTHREAD_MUTEX_INITIALIZER};

/* ---- Helpers ---- */

static void
fuzz_cfg(struct collie__net_cfg *cfg, struct collie__peer *peers, int rank, int size)
{
  memset(cfg, 0, sizeof(*cfg));
  memset(peers, 0, (size_t)size * sizeof(*peers));
  for (int p = 0; p < size; p++) {
    snprintf(peers[p].host, sizeof(peers[p].host), "fuzz-host");
    peers[p].pid = 0; /* nobody to look up in /proc */
    peers[p].world_rank = p;
    peers[p].ncpus = 1;
  }
  cfg->rank = rank;
  cfg->size = size;
  cfg->peers = peers;
  cfg->store = &fuzz_st.base;
  cfg->token = FUZZ_TOKEN;
  cfg->comm_hash = FUZZ_HASH;
  cfg->transport = "tcp";
  cfg->deadline_ns = collie__deadline_after_ms(5000);
}

static void
fuzz_hello(unsigned char *buf, uint32_t from, uint32_t to)
{
  struct collie__tcp_hello h;
  h.magic = htole32(COLLIE_TCP_HELLO_MAGIC);
  h.version = htole16(COLLIE_TCP_PROTO_VERSION);
  h.token_len = htole16((uint16_t)strlen(FUZZ_TOKEN));
  h.comm_hash = htole64(FUZZ_HASH);
  h.from_rank = htole32(from);
  h.to_rank = htole32(to);
  memcpy(buf, &h, sizeof(h));
  memcpy(buf + sizeof(h), FUZZ_TOKEN, strlen(FUZZ_TOKEN));
}

/* ---- Even: the library accepts ---- */

/* A connection to 127.0.0.1:port, or -1 at once when it is refused (the
 * listener is closed once every peer is in). */
static int
fuzz_connect(int port)
{
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) abort();
  if (connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int
fuzz_local_port(int fd)
{
  struct sockaddr_in sa;
  socklen_t sl = sizeof(sa);
  if (getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) abort();
  return ntohs(sa.sin_port);
}

/* Closes with a reset, never a FIN: a socket of this side then never lingers
 * in TIME_WAIT, nor does the library's end it resets, so hours of fuzzing do
 * not run this host out of ports. */
static void
fuzz_reset(int fd)
{
  struct linger lg = {.l_onoff = 1, .l_linger = 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  close(fd);
}

struct fuzz_accept {
  const uint8_t *data;
  size_t n;
  int fds[FUZZ_MAX_CONNS + 2];
  int nfds;
  unsigned char replies[2]; /* what the real ranks 1 and 2 were answered (0: nothing) */
  int ports[2];             /* their local ports (0: they could not connect) */
};

static void *
fuzz_accept_peers(void *arg)
{
  struct fuzz_accept *a = arg;
  void *val = NULL;
  size_t len = 0;
  int64_t dl = collie__deadline_after_ms(5000);
  if (fuzz_store_get(&fuzz_st.base, "tcp/addr/0", &val, &len, dl) != COLLIE_SUCCESS) abort();
  char addr[128], host[64];
  int port = 0;
  memcpy(addr, val, len);
  addr[len] = '\0';
  free(val);
  if (collie__parse_hostport(addr, host, sizeof(host), &port) < 0 || strcmp(host, "127.0.0.1"))
    abort();
  const uint8_t *p = a->data, *end = a->data + a->n;
  while (p < end && a->nfds < FUZZ_MAX_CONNS) {
    unsigned flags = *p++;
    size_t rec = 0;
    if (end - p >= 2) rec = (size_t)p[0] | (size_t)p[1] << 8;
    p += end - p >= 2 ? 2 : end - p;
    if (rec > (size_t)(end - p)) rec = (size_t)(end - p);
    int fd = fuzz_connect(port);
    if (fd >= 0 && rec) (void)collie__sock_send_all(fd, p, rec, dl);
    p += rec;
    if (fd < 0) continue; /* records took both ranks: setup is over */
    if (flags & 2) {
      fuzz_reset(fd);
      continue;
    }
    if (flags & 1) shutdown(fd, SHUT_WR);
    a->fds[a->nfds++] = fd;
  }
  for (uint32_t r = 1; r <= 2; r++) {
    unsigned char hello[sizeof(struct collie__tcp_hello) + sizeof(FUZZ_TOKEN)];
    fuzz_hello(hello, r, 0);
    int fd = fuzz_connect(port);
    if (fd < 0) continue;
    a->fds[a->nfds++] = fd;
    a->ports[r - 1] = fuzz_local_port(fd);
    if (collie__sock_send_all(fd, hello, sizeof(struct collie__tcp_hello) + strlen(FUZZ_TOKEN),
                              dl) < 0 ||
        collie__sock_recv_all(fd, &a->replies[r - 1], 1, dl) < 0)
      a->replies[r - 1] = 0; /* setup was over before it was read */
  }
  return NULL;
}

static void
fuzz_as_acceptor(const uint8_t *data, size_t n)
{
  struct collie__net_cfg cfg;
  struct collie__peer peers[3];
  struct fuzz_accept a = {.data = data, .n = n};
  fuzz_cfg(&cfg, peers, 0, 3);
  pthread_t th;
  if (pthread_create(&th, NULL, fuzz_accept_peers, &a) != 0) abort();
  static const int higher[] = {1, 2};
  struct collie__xport *x = NULL;
  collie_result_t rc = collie__tcp_ops.open(&cfg, higher, 2, &x);
  pthread_join(th, NULL);
  if (rc != COLLIE_SUCCESS) {
    fprintf(stderr, "fuzz_tcp_handshake: open failed despite the real peers: %s\n",
            collie__err_msg());
    abort();
  }
  /* A real peer answered 'A' owns its rank's channel; one answered 'D' or
   * not at all lost it to a record that proved the token first. */
  const struct collie__tcp_xport *t = (const struct collie__tcp_xport *)(const void *)x;
  for (int r = 0; r < 2; r++) {
    const struct collie__tcp_chan *c = &t->chans[t->chan_of[r + 1]];
    const char *colon = strrchr(c->addr, ':');
    int mine = colon && a.ports[r] && atoi(colon + 1) == a.ports[r];
    int ok = a.replies[r] == COLLIE_TCP_REPLY_ACCEPT                           ? mine
             : a.replies[r] == COLLIE_TCP_REPLY_DUPLICATE || a.replies[r] == 0 ? !mine
                                                                               : 0;
    if (c->fd < 0 || !ok) {
      fprintf(stderr, "fuzz_tcp_handshake: real rank %d was answered 0x%02x, channel from %s\n",
              r + 1, a.replies[r], c->addr);
      abort();
    }
  }
  collie__tcp_ops.close(x);
  for (int i = 0; i < a.nfds; i++) fuzz_reset(a.fds[i]);
}

/* ---- Odd: the library connects ---- */

struct fuzz_connect {
  int lfd;
  int fd;    /* the library's connection, kept until its open() returns */
  int found; /* its hello came, as ours says it */
  const uint8_t *data;
  size_t n;
};

static void *
fuzz_answer_hello(void *arg)
{
  struct fuzz_connect *c = arg;
  int64_t dl = collie__deadline_after_ms(5000);
  unsigned char want[sizeof(struct collie__tcp_hello) + sizeof(FUZZ_TOKEN)], got[sizeof(want)];
  size_t len = sizeof(struct collie__tcp_hello) + strlen(FUZZ_TOKEN);
  fuzz_hello(want, 1, 0);
  for (;;) {
    int fd = collie__sock_accept(c->lfd, dl);
    if (fd < 0) return NULL; /* open() then fails, and the caller says so */
    /* Our own encoder must say exactly this. Anything else is another
     * process of this host that found the port (tests that play hostile
     * peers do): a stranger to this rank too. */
    if (collie__sock_recv_all(fd, got, len, collie__deadline_after_ms(1000)) == 0 &&
        memcmp(got, want, len) == 0) {
      c->fd = fd;
      c->found = 1;
      break;
    }
    fuzz_reset(fd);
  }
  if (c->n == 0) { /* no answer at all */
    fuzz_reset(c->fd);
    c->fd = -1;
    return NULL;
  }
  (void)collie__sock_send_all(c->fd, c->data, c->n, dl);
  return NULL;
}

static void
fuzz_as_connector(const uint8_t *data, size_t n)
{
  struct collie__net_cfg cfg;
  struct collie__peer peers[2];
  fuzz_cfg(&cfg, peers, 1, 2);
  int port = 0;
  struct fuzz_connect c = {
      .lfd = collie__sock_listen("127.0.0.1", 0, &port), .fd = -1, .data = data, .n = n};
  if (c.lfd < 0) abort();
  char addr[64];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
  fuzz_store_set(&fuzz_st.base, "tcp/addr/0", addr, strlen(addr), 0);
  pthread_t th;
  if (pthread_create(&th, NULL, fuzz_answer_hello, &c) != 0) abort();
  static const int lower[] = {0};
  struct collie__xport *x = NULL;
  collie_result_t rc = collie__tcp_ops.open(&cfg, lower, 1, &x);
  pthread_join(th, NULL);
  close(c.lfd);
  int accepted = n >= 1 && data[0] == COLLIE_TCP_REPLY_ACCEPT;
  if (accepted ? rc != COLLIE_SUCCESS : rc != COLLIE_REMOTE_ERROR) {
    fprintf(stderr, "fuzz_tcp_handshake: answer 0x%02x gave %s: %s (hello %s)\n", n ? data[0] : 0,
            collie_result_string(rc), collie__err_msg(),
            c.found ? "as expected" : "never came, or differed from ours");
    abort();
  }
  if (rc == COLLIE_SUCCESS) collie__tcp_ops.close(x);
  if (c.fd >= 0) fuzz_reset(c.fd);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
  if (n < 1) return 0;
  fuzz_log_level();
  pthread_mutex_lock(&fuzz_st.mu);
  fuzz_st.has = 0;
  pthread_mutex_unlock(&fuzz_st.mu);
  if (data[0] & 1)
    fuzz_as_connector(data + 1, n - 1);
  else
    fuzz_as_acceptor(data + 1, n - 1);
  return 0;
}
