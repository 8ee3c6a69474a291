/*
 * store_tcp.c - the tcp store's client: every rank (rank 0 included) talks to
 * the server rank 0 runs (store_tcp_server.c), or collierun for its jobs, over
 * TCP.
 *
 * A request runs on a connection taken from a small pool: one request at a
 * time per connection, one connection per concurrent caller, so a GET parked
 * by one thread (a communicator waiting at init) never delays a SET from
 * another thread (a split running beside it). A request that times out drops
 * its connection, so its late reply cannot be mistaken for the answer to a
 * later request; request ids are checked as well. A connection closed by the
 * server marks the store broken: later calls fail fast with REMOTE_ERROR.
 *
 * The wire format is in tcp_store_proto.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/store_int.h"
#include "bootstrap/tcp_store_proto.h"
#include "util/error.h"
#include "util/util.h"

#define TCP_HOST_MAX 256

struct tcp_pool_conn {
  struct tcp_pool_conn *next;
  int fd;
};

struct tcp_store {
  collie__store_t base;
  pthread_mutex_t lock; /* guards idle, broken, next_id */
  struct tcp_pool_conn *idle;
  int broken;
  uint64_t next_id;
  char url[COLLIE_STORE_TCP_URL_MAX];
  char host[TCP_HOST_MAX];
  int port;
  char token[COLLIE_STORE_MAX_TOKEN + 1];
  struct collie__store_tcp_server *server; /* the process that serves it only */
};

static void
tcp_mark_broken(struct tcp_store *ts)
{
  pthread_mutex_lock(&ts->lock);
  ts->broken = 1;
  pthread_mutex_unlock(&ts->lock);
}

static collie_result_t
tcp_closed_error(struct tcp_store *ts, const char *what)
{
  tcp_mark_broken(ts);
  return collie__err(COLLIE_REMOTE_ERROR,
                     "%s: store server %s closed the connection (the server, rank 0 or collierun, "
                     "exited or closed the store)",
                     what, ts->url);
}

/* Sends one frame: header, key, value. 0 or -1 with errno. */
static int
tcp_send_frame(int fd, uint16_t op, uint64_t id, const char *key, size_t klen, const void *val,
               size_t vlen, int64_t deadline_ns)
{
  unsigned char
      buf[sizeof(struct collie__store_hdr) + COLLIE_STORE_MAX_TOKEN + 1 + COLLIE_STORE_MAX_KEY + 8];
  struct collie__store_hdr h = {COLLIE_STORE_PROTO_MAGIC,
                                COLLIE_STORE_PROTO_VERSION,
                                op,
                                id,
                                (uint32_t)klen,
                                (uint32_t)vlen,
                                0,
                                0};
  collie__store_hdr_swap(&h);
  memcpy(buf, &h, sizeof(h));
  memcpy(buf + sizeof(h), key, klen);
  size_t n = sizeof(h) + klen;
  /* Small values travel in the same segment as the header (TCP_NODELAY is on). */
  if (vlen <= 8) {
    if (vlen) memcpy(buf + n, val, vlen);
    return collie__sock_send_all(fd, buf, n + vlen, deadline_ns);
  }
  if (collie__sock_send_all(fd, buf, n, deadline_ns) != 0) return -1;
  return collie__sock_send_all(fd, val, vlen, deadline_ns);
}

/* Receives one reply into *h (host order) and a malloc'd *val. 0, -1 with errno
 * (ETIMEDOUT, ECONNRESET), or -2 when the reply is malformed. */
static int
tcp_recv_reply(int fd, uint64_t id, struct collie__store_hdr *h, void **val, int64_t deadline_ns)
{
  *val = NULL;
  if (collie__sock_recv_all(fd, h, sizeof(*h), deadline_ns) != 0) return -1;
  collie__store_hdr_swap(h);
  if (h->magic != COLLIE_STORE_PROTO_MAGIC || h->id != id || h->key_len != 0 ||
      h->val_len > COLLIE_STORE_MAX_VALUE)
    return -2;
  *val = malloc(h->val_len ? h->val_len : 1);
  if (!*val) {
    errno = ENOMEM;
    return -1;
  }
  if (h->val_len && collie__sock_recv_all(fd, *val, h->val_len, deadline_ns) != 0) {
    free(*val);
    *val = NULL;
    return -1;
  }
  return 0;
}

static uint64_t
tcp_next_id(struct tcp_store *ts)
{
  pthread_mutex_lock(&ts->lock);
  uint64_t id = ++ts->next_id;
  pthread_mutex_unlock(&ts->lock);
  return id;
}

/* Connects and proves the token. Returns SUCCESS and *fd. */
static collie_result_t
tcp_connect(struct tcp_store *ts, int64_t deadline_ns, int *fdp)
{
  int64_t start = collie__now_ns();
  int fd = collie__sock_connect(ts->host, ts->port, deadline_ns);
  if (fd < 0) {
    if (errno == ETIMEDOUT || errno == ECONNREFUSED)
      return collie__err(COLLIE_TIMEOUT,
                         "store %s: no server answered within %.3f s (is its server, rank 0 or "
                         "collierun, running, and the address reachable?)",
                         ts->url, (double)(collie__now_ns() - start) / 1e9);
    return collie__err_errno(COLLIE_SYSTEM_ERROR, "store %s: cannot connect", ts->url);
  }
  uint64_t id = tcp_next_id(ts);
  struct collie__store_hdr h;
  void *val = NULL;
  collie_result_t rc = COLLIE_SUCCESS;
  int r = tcp_send_frame(fd, COLLIE_STORE_OP_HELLO, id, ts->token, strlen(ts->token), NULL, 0,
                         deadline_ns);
  if (r == 0) r = tcp_recv_reply(fd, id, &h, &val, deadline_ns);
  if (r == -1 && errno == ETIMEDOUT) {
    rc = collie__err(COLLIE_TIMEOUT, "store %s: the server did not answer the hello within %.3f s",
                     ts->url, (double)(collie__now_ns() - start) / 1e9);
  } else if (r == -1) {
    rc = collie__err_errno(COLLIE_REMOTE_ERROR,
                           "store %s: the server closed the connection during the hello (not a "
                           "collie store, or its server is exiting)",
                           ts->url);
  } else if (r == -2) {
    rc = collie__err(COLLIE_REMOTE_ERROR,
                     "store %s: malformed reply to the hello (is this a collie store?)", ts->url);
  } else if (h.op == COLLIE_STORE_OP_REFUSED) {
    rc = collie__err(COLLIE_REMOTE_ERROR,
                     "store at %s: job token refused (this process's COLLIE_JOB_TOKEN, or the "
                     "launcher's job id, differs from the server's)",
                     ts->url);
  } else if (h.op == COLLIE_STORE_OP_ERROR) {
    rc = collie__err(COLLIE_REMOTE_ERROR, "store at %s refused the connection: %.*s", ts->url,
                     (int)(h.val_len < COLLIE_STORE_MAX_ERRTEXT ? h.val_len : 200),
                     (const char *)val);
  } else if (h.op != COLLIE_STORE_OP_OK) {
    rc = collie__err(COLLIE_REMOTE_ERROR, "store %s: unexpected reply %u to the hello", ts->url,
                     (unsigned)h.op);
  }
  free(val);
  if (rc != COLLIE_SUCCESS) {
    close(fd);
    return rc;
  }
  *fdp = fd;
  return COLLIE_SUCCESS;
}

/* Takes an idle connection or opens a new one. */
static collie_result_t
tcp_acquire(struct tcp_store *ts, const char *what, int64_t deadline_ns, int *fd)
{
  pthread_mutex_lock(&ts->lock);
  int broken = ts->broken;
  struct tcp_pool_conn *pc = ts->idle;
  if (!broken && pc) ts->idle = pc->next;
  pthread_mutex_unlock(&ts->lock);
  if (broken)
    return collie__err(COLLIE_REMOTE_ERROR,
                       "%s: store server %s closed the connection earlier (the server, rank 0 or "
                       "collierun, exited or closed the store)",
                       what, ts->url);
  if (pc) {
    *fd = pc->fd;
    free(pc);
    return COLLIE_SUCCESS;
  }
  collie_result_t rc = tcp_connect(ts, deadline_ns, fd);
  if (rc != COLLIE_SUCCESS) collie__err_prefix("%s", what);
  return rc;
}

static void
tcp_release_conn(struct tcp_store *ts, int fd)
{
  struct tcp_pool_conn *pc = malloc(sizeof(*pc));
  if (!pc) {
    close(fd);
    return;
  }
  pc->fd = fd;
  pthread_mutex_lock(&ts->lock);
  pc->next = ts->idle;
  ts->idle = pc;
  pthread_mutex_unlock(&ts->lock);
}

/* One request-reply exchange. On SUCCESS *reply holds an OK reply's malloc'd value. */
static collie_result_t
tcp_request(struct tcp_store *ts, const char *what, const char *key, uint16_t op, const void *val,
            size_t vlen, int64_t deadline_ns, void **reply, size_t *reply_len)
{
  int fd = -1;
  int64_t start = collie__now_ns();
  collie_result_t rc = tcp_acquire(ts, what, deadline_ns, &fd);
  if (rc != COLLIE_SUCCESS) return rc;
  uint64_t id = tcp_next_id(ts);
  struct collie__store_hdr h;
  void *rv = NULL;
  int r = tcp_send_frame(fd, op, id, key, strlen(key), val, vlen, deadline_ns);
  if (r == 0) r = tcp_recv_reply(fd, id, &h, &rv, deadline_ns);
  if (r != 0) {
    int err = errno;
    close(fd); /* a late reply must never meet a later request */
    if (r == -2)
      return collie__err(COLLIE_REMOTE_ERROR, "%s: malformed reply from the store server %s", what,
                         ts->url);
    if (err == ETIMEDOUT) {
      double s = (double)(collie__now_ns() - start) / 1e9;
      if (op == COLLIE_STORE_OP_GET)
        return collie__err(COLLIE_TIMEOUT, "%s: the key was not set within %.3f s (deadline)", what,
                           s);
      return collie__err(COLLIE_TIMEOUT, "%s: no answer from the store server %s within %.3f s",
                         what, ts->url, s);
    }
    if (err == ENOMEM) return collie__err(COLLIE_SYSTEM_ERROR, "%s: out of memory", what);
    return tcp_closed_error(ts, what);
  }
  if (h.op == COLLIE_STORE_OP_OK) {
    tcp_release_conn(ts, fd);
    *reply = rv;
    *reply_len = h.val_len;
    return COLLIE_SUCCESS;
  }
  if (h.op == COLLIE_STORE_OP_ERROR) {
    collie_result_t code = h.status > COLLIE_SUCCESS && h.status <= COLLIE_INTERNAL_ERROR
                               ? (collie_result_t)h.status
                               : COLLIE_REMOTE_ERROR;
    rc = collie__err(code, "%s: %.*s", what, (int)(h.val_len < 300 ? h.val_len : 300),
                     (const char *)rv);
    tcp_release_conn(ts, fd);
    free(rv);
    return rc;
  }
  free(rv);
  close(fd);
  return collie__err(COLLIE_REMOTE_ERROR, "%s: unexpected reply %u from the store server %s", what,
                     (unsigned)h.op, ts->url);
}

static collie_result_t
tcp_set(collie__store_t *s, const char *key, const void *val, size_t len, int64_t deadline_ns)
{
  struct tcp_store *ts = (struct tcp_store *)s;
  char what[COLLIE_STORE_TCP_URL_MAX + COLLIE_STORE_MAX_KEY + 32];
  collie_result_t rc;
  snprintf(what, sizeof(what), "store set on %s", ts->url);
  if ((rc = collie__store_check_key(what, key)) != COLLIE_SUCCESS) return rc;
  if ((rc = collie__store_check_value(what, key, val, len)) != COLLIE_SUCCESS) return rc;
  snprintf(what, sizeof(what), "store set \"%s\" on %s", key, ts->url);
  void *reply = NULL;
  size_t rlen;
  rc = tcp_request(ts, what, key, COLLIE_STORE_OP_SET, val, len, deadline_ns, &reply, &rlen);
  free(reply);
  return rc;
}

static collie_result_t
tcp_get(collie__store_t *s, const char *key, void **val, size_t *len, int64_t deadline_ns)
{
  struct tcp_store *ts = (struct tcp_store *)s;
  char what[COLLIE_STORE_TCP_URL_MAX + COLLIE_STORE_MAX_KEY + 32];
  collie_result_t rc;
  snprintf(what, sizeof(what), "store get on %s", ts->url);
  if ((rc = collie__store_check_key(what, key)) != COLLIE_SUCCESS) return rc;
  if (!val || !len)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: key \"%s\": val or len is NULL", what, key);
  snprintf(what, sizeof(what), "store get \"%s\" on %s", key, ts->url);
  return tcp_request(ts, what, key, COLLIE_STORE_OP_GET, NULL, 0, deadline_ns, val, len);
}

static collie_result_t
tcp_add(collie__store_t *s, const char *key, int64_t delta, int64_t *out, int64_t deadline_ns)
{
  struct tcp_store *ts = (struct tcp_store *)s;
  char what[COLLIE_STORE_TCP_URL_MAX + COLLIE_STORE_MAX_KEY + 32];
  collie_result_t rc;
  snprintf(what, sizeof(what), "store add on %s", ts->url);
  if ((rc = collie__store_check_key(what, key)) != COLLIE_SUCCESS) return rc;
  snprintf(what, sizeof(what), "store add \"%s\" on %s", key, ts->url);
  unsigned char le[8];
  collie__store_put_i64(le, delta);
  void *reply = NULL;
  size_t rlen = 0;
  rc = tcp_request(ts, what, key, COLLIE_STORE_OP_ADD, le, sizeof(le), deadline_ns, &reply, &rlen);
  if (rc == COLLIE_SUCCESS && rlen != 8)
    rc = collie__err(COLLIE_REMOTE_ERROR, "%s: malformed reply (%zu bytes)", what, rlen);
  if (rc == COLLIE_SUCCESS && out) *out = collie__store_get_i64(reply);
  free(reply);
  return rc;
}

static collie_result_t
tcp_del_prefix(collie__store_t *s, const char *prefix, int64_t deadline_ns)
{
  struct tcp_store *ts = (struct tcp_store *)s;
  char what[COLLIE_STORE_TCP_URL_MAX + COLLIE_STORE_MAX_KEY + 40];
  collie_result_t rc;
  snprintf(what, sizeof(what), "store delete-prefix on %s", ts->url);
  if ((rc = collie__store_check_key(what, prefix)) != COLLIE_SUCCESS) return rc;
  snprintf(what, sizeof(what), "store delete-prefix \"%s\" on %s", prefix, ts->url);
  void *reply = NULL;
  size_t rlen = 0;
  rc = tcp_request(ts, what, prefix, COLLIE_STORE_OP_DELETE_PREFIX, NULL, 0, deadline_ns, &reply,
                   &rlen);
  free(reply);
  return rc;
}

static void
tcp_close(collie__store_t *s)
{
  struct tcp_store *ts = (struct tcp_store *)s;
  while (ts->idle) {
    struct tcp_pool_conn *pc = ts->idle;
    ts->idle = pc->next;
    close(pc->fd);
    free(pc);
  }
  if (ts->server) collie__store_tcp_server_stop(ts->server);
  pthread_mutex_destroy(&ts->lock);
  free(ts);
}

static const struct collie__store_ops tcp_ops = {.scheme = "tcp",
                                                 .set = tcp_set,
                                                 .get = tcp_get,
                                                 .add = tcp_add,
                                                 .close = tcp_close,
                                                 .del_prefix = tcp_del_prefix};

collie_result_t
collie__store_tcp_open(const char *url, const char *hostport, int serve, int size,
                       const char *token, int64_t deadline_ns, collie__store_t **out)
{
  char host[TCP_HOST_MAX];
  int port;
  if (strlen(url) >= COLLIE_STORE_TCP_URL_MAX ||
      collie__parse_hostport(hostport, host, sizeof(host), &port))
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "store url \"%s\" is malformed: expected tcp://host:port", url);
  if (port == 0 && size > 1)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "store url \"%s\": port 0 cannot be shared by %d ranks; name a port", url,
                       size);
  if (strlen(token) > COLLIE_STORE_MAX_TOKEN)
    return collie__err(COLLIE_INVALID_ARGUMENT, "store %s: job token is longer than %d bytes", url,
                       COLLIE_STORE_MAX_TOKEN);
  struct tcp_store *ts = calloc(1, sizeof(*ts));
  if (!ts) return collie__err(COLLIE_SYSTEM_ERROR, "store %s: out of memory", url);
  collie__store_init(&ts->base, &tcp_ops);
  pthread_mutex_init(&ts->lock, NULL);
  snprintf(ts->url, sizeof(ts->url), "%s", url);
  snprintf(ts->host, sizeof(ts->host), "%s", host);
  snprintf(ts->token, sizeof(ts->token), "%s", token);
  ts->port = port;
  collie_result_t rc;
  if (serve)
    COLLIE_CHECK_GOTO(
        collie__store_tcp_server_start(url, host, port, token, &ts->server, &ts->port), rc,
        out_free);
  /* Every rank, rank 0 included, is a plain client: one code path to test. */
  int fd = -1;
  COLLIE_CHECK_GOTO(tcp_connect(ts, deadline_ns, &fd), rc, out_stop);
  tcp_release_conn(ts, fd);
  *out = &ts->base;
  return COLLIE_SUCCESS;
out_stop:
  if (ts->server) collie__store_tcp_server_stop(ts->server);
out_free:
  pthread_mutex_destroy(&ts->lock);
  free(ts);
  return rc;
}
