/*
 * store_tcp_server.c - the tcp store's server, which rank 0 runs in a thread
 * (store_tcp.c, the client, starts and stops it).
 *
 * One thread multiplexes the listening socket, every client connection and a
 * wake-up pipe with poll(). Sockets are non-blocking; each connection has an
 * input state machine (header, then key and value) and an output buffer, so a
 * slow or hostile client can never stall the others. A GET for a key that is
 * not set yet is parked in a waiter list and answered by the SET (or ADD)
 * that creates the key. Each connection first proves it knows the job token
 * (HELLO, compared in constant time); a wrong token is answered REFUSED,
 * logged and closed. A malformed frame closes its connection and nothing
 * else. Stopping writes to the pipe, joins the thread and frees everything;
 * clients see their connection close and fail at once with REMOTE_ERROR
 * instead of waiting for their deadline. The wire format is in
 * tcp_store_proto.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/store_int.h"
#include "bootstrap/tcp_store_proto.h"
#include "util/error.h"
#include "util/util.h"

#define TCP_OUT_LIMIT (64u << 20) /* a client that never reads its replies is dropped */

/* What a connection that has not proved the job token may cost the job: it
 * is dropped after tcp_auth_ns without a valid HELLO, and when more than
 * tcp_max_unauthed wait at once the oldest goes to make room, so idle or
 * trickling strangers can neither exhaust rank 0's descriptors nor stay for
 * ever. Ranks say HELLO as soon as they connect. Tests shorten them
 * (collie__store_tcp_server_limits). */
static int64_t tcp_auth_ns = 10 * 1000000000LL;
static size_t tcp_max_unauthed = 128;
/* After accept fails for want of descriptors: how long the listener rests. */
#define TCP_ACCEPT_REST_NS (100 * 1000000LL)

void
collie__store_tcp_server_limits(int64_t auth_ms, size_t max_unauthed)
{
  tcp_auth_ns = auth_ms * 1000000LL;
  tcp_max_unauthed = max_unauthed;
}

struct tcp_conn {
  int fd;
  int authed;
  int64_t since_ns; /* accepted at (an unauthenticated one is dropped after tcp_auth_ns) */
  int dead;         /* swept at the end of the poll round */
  int closing;      /* close once the output is flushed (after REFUSED) */
  char peer[64];
  struct collie__store_hdr hdr; /* host order once complete */
  size_t hdr_got;
  char key[COLLIE_STORE_MAX_KEY + 1]; /* NUL-terminated once the frame is complete */
  size_t key_got;
  unsigned char *val; /* malloc'd once the header is checked */
  size_t val_got;
  unsigned char *out;
  size_t out_len, out_off, out_cap;
};

struct tcp_entry {
  struct tcp_entry *next;
  char *key;
  void *val;
  size_t len;
};

struct tcp_waiter {
  struct tcp_waiter *next;
  struct tcp_conn *conn;
  uint64_t id;
  char key[];
};

struct collie__store_tcp_server {
  int lfd;
  int wake[2];
  pthread_t thread;
  int stop; /* atomic */
  char url[COLLIE_STORE_TCP_URL_MAX];
  unsigned char token[COLLIE_STORE_MAX_TOKEN + 1]; /* zero-padded for the constant-time compare */
  size_t token_len;
  struct tcp_conn **conns;
  size_t nconns, conns_cap;
  struct tcp_entry **buckets;
  size_t nbuckets, nentries;
  struct tcp_waiter *waiters;
  int64_t accept_rest_until; /* accept failed with EMFILE/ENFILE: listener rests */
  int64_t last_warn_ns;      /* refusals are logged at most once a second */
  size_t refused;            /* strangers dropped since the last log line */
  size_t clients;            /* connections that proved the token, at the last sweep (atomic) */
  int64_t last_request_ns;   /* monotonic time of the last frame handled (atomic) */
};

static struct tcp_entry **
tcp_map_slot(struct collie__store_tcp_server *sv, const char *key)
{
  size_t b = (size_t)collie__hash64(key, strlen(key), 0) & (sv->nbuckets - 1);
  struct tcp_entry **pp = &sv->buckets[b];
  while (*pp && strcmp((*pp)->key, key) != 0) pp = &(*pp)->next;
  return pp;
}

static void
tcp_map_grow(struct collie__store_tcp_server *sv)
{
  size_t nb = sv->nbuckets * 2;
  struct tcp_entry **nbk = calloc(nb, sizeof(*nbk));
  if (!nbk) return; /* longer chains, still correct */
  for (size_t i = 0; i < sv->nbuckets; i++) {
    struct tcp_entry *e = sv->buckets[i], *next;
    for (; e; e = next) {
      next = e->next;
      size_t b = (size_t)collie__hash64(e->key, strlen(e->key), 0) & (nb - 1);
      e->next = nbk[b];
      nbk[b] = e;
    }
  }
  free(sv->buckets);
  sv->buckets = nbk;
  sv->nbuckets = nb;
}

/* Stores a copy of val under key. Returns the entry, or NULL when out of memory. */
static struct tcp_entry *
tcp_map_put(struct collie__store_tcp_server *sv, const char *key, const void *val, size_t len)
{
  void *copy = malloc(len ? len : 1);
  if (!copy) return NULL;
  if (len) memcpy(copy, val, len);
  struct tcp_entry **pp = tcp_map_slot(sv, key);
  if (*pp) {
    free((*pp)->val);
    (*pp)->val = copy;
    (*pp)->len = len;
    return *pp;
  }
  struct tcp_entry *e = calloc(1, sizeof(*e));
  if (!e || !(e->key = collie__strdup(key))) {
    free(e);
    free(copy);
    return NULL;
  }
  e->val = copy;
  e->len = len;
  *pp = e;
  if (++sv->nentries > 2 * sv->nbuckets) tcp_map_grow(sv);
  return e;
}

/* Sends what the output buffer holds without blocking. -1 when the peer is gone. */
static int
tcp_conn_flush(struct tcp_conn *c)
{
  while (c->out_off < c->out_len) {
    ssize_t w =
        send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      c->out_off += (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1;
  }
  c->out_off = c->out_len = 0;
  return 0;
}

/* Queues one reply and tries to send it at once; marks the connection dead on failure. */
static void
tcp_conn_reply(struct tcp_conn *c, uint16_t op, uint64_t id, uint32_t status, const void *val,
               size_t len)
{
  if (c->dead) return;
  size_t need = c->out_len + sizeof(struct collie__store_hdr) + len;
  if (need > TCP_OUT_LIMIT) {
    c->dead = 1;
    return;
  }
  if (need > c->out_cap) {
    size_t cap = c->out_cap ? c->out_cap : 4096;
    while (cap < need) cap *= 2;
    unsigned char *p = realloc(c->out, cap);
    if (!p) {
      c->dead = 1;
      return;
    }
    c->out = p;
    c->out_cap = cap;
  }
  struct collie__store_hdr h = {
      COLLIE_STORE_PROTO_MAGIC, COLLIE_STORE_PROTO_VERSION, op, id, 0, (uint32_t)len, status, 0};
  collie__store_hdr_swap(&h);
  memcpy(c->out + c->out_len, &h, sizeof(h));
  if (len) memcpy(c->out + c->out_len + sizeof(h), val, len);
  c->out_len = need;
  if (tcp_conn_flush(c) != 0) c->dead = 1;
}

static void
tcp_conn_error(struct tcp_conn *c, uint64_t id, collie_result_t rc, const char *msg)
{
  tcp_conn_reply(c, COLLIE_STORE_OP_ERROR, id, (uint32_t)rc, msg, strlen(msg));
}

/* Answers every GET parked on key with entry e. */
static void
tcp_wake_waiters(struct collie__store_tcp_server *sv, const struct tcp_entry *e)
{
  struct tcp_waiter **pp = &sv->waiters;
  while (*pp) {
    struct tcp_waiter *w = *pp;
    if (strcmp(w->key, e->key) != 0) {
      pp = &w->next;
      continue;
    }
    tcp_conn_reply(w->conn, COLLIE_STORE_OP_OK, w->id, 0, e->val, e->len);
    *pp = w->next;
    free(w);
  }
}

static int
tcp_token_equal(const struct collie__store_tcp_server *sv, const unsigned char *tok, size_t len)
{
  /* Constant time: every byte of the padded buffers is compared, whatever matches. */
  unsigned char padded[COLLIE_STORE_MAX_TOKEN + 1] = {0};
  memcpy(padded, tok, len);
  unsigned diff = (unsigned)(len ^ sv->token_len);
  for (size_t i = 0; i < sizeof(padded); i++) diff |= (unsigned)(padded[i] ^ sv->token[i]);
  return diff == 0;
}

/* Handles one complete frame (c->hdr in host order, c->key, c->val). */
static void
tcp_handle_frame(struct collie__store_tcp_server *sv, struct tcp_conn *c)
{
  const struct collie__store_hdr *h = &c->hdr;
  const char *key = c->key;
  const unsigned char *val = c->val;
  char msg[COLLIE_STORE_MAX_ERRTEXT];

  __atomic_store_n(&sv->last_request_ns, collie__now_ns(), __ATOMIC_RELEASE);
  if (h->op == COLLIE_STORE_OP_HELLO) {
    if (h->version != COLLIE_STORE_PROTO_VERSION) {
      snprintf(msg, sizeof(msg), "the server speaks store protocol version %d, the client %u",
               COLLIE_STORE_PROTO_VERSION, (unsigned)h->version);
      COLLIE_WARN("BOOTSTRAP", "store %s: refused a connection from %s: %s", sv->url, c->peer, msg);
      tcp_conn_error(c, h->id, COLLIE_INVALID_USAGE, msg);
      c->closing = 1;
    } else if (!tcp_token_equal(sv, (const unsigned char *)c->key, h->key_len)) {
      COLLIE_WARN("BOOTSTRAP",
                  "store %s: refused a connection from %s: wrong job token (a process of "
                  "another job, or a stale one?)",
                  sv->url, c->peer);
      tcp_conn_reply(c, COLLIE_STORE_OP_REFUSED, h->id, 0, NULL, 0);
      c->closing = 1;
    } else {
      c->authed = 1;
      tcp_conn_reply(c, COLLIE_STORE_OP_OK, h->id, 0, NULL, 0);
    }
    return;
  }
  if (collie__store_check_key("store server", key) != COLLIE_SUCCESS) {
    COLLIE_WARN("BOOTSTRAP", "store %s: closing the connection from %s: %s", sv->url, c->peer,
                collie__err_msg());
    c->dead = 1;
    return;
  }
  struct tcp_entry **pp = tcp_map_slot(sv, key), *e;
  switch (h->op) {
  case COLLIE_STORE_OP_SET:
    if (!(e = tcp_map_put(sv, key, val, h->val_len))) {
      tcp_conn_error(c, h->id, COLLIE_SYSTEM_ERROR, "the store server is out of memory");
      return;
    }
    tcp_conn_reply(c, COLLIE_STORE_OP_OK, h->id, 0, NULL, 0);
    tcp_wake_waiters(sv, e);
    return;
  case COLLIE_STORE_OP_GET:
    if (*pp) {
      tcp_conn_reply(c, COLLIE_STORE_OP_OK, h->id, 0, (*pp)->val, (*pp)->len);
      return;
    }
    struct tcp_waiter *w = malloc(sizeof(*w) + h->key_len + 1);
    if (!w) {
      tcp_conn_error(c, h->id, COLLIE_SYSTEM_ERROR, "the store server is out of memory");
      return;
    }
    w->conn = c;
    w->id = h->id;
    memcpy(w->key, key, h->key_len + 1);
    w->next = sv->waiters;
    sv->waiters = w;
    return;
  case COLLIE_STORE_OP_ADD: {
    int64_t v = 0, delta = collie__store_get_i64(val);
    if (*pp && collie__store_parse_counter((*pp)->val, (*pp)->len, &v) != 0) {
      tcp_conn_error(c, h->id, COLLIE_INVALID_ARGUMENT,
                     "the key holds a value that is not an integer");
      return;
    }
    if (__builtin_add_overflow(v, delta, &v)) {
      snprintf(msg, sizeof(msg), "%lld overflows the counter", (long long)delta);
      tcp_conn_error(c, h->id, COLLIE_INVALID_ARGUMENT, msg);
      return;
    }
    char digits[32];
    int n = snprintf(digits, sizeof(digits), "%lld", (long long)v);
    if (!(e = tcp_map_put(sv, key, digits, (size_t)n))) {
      tcp_conn_error(c, h->id, COLLIE_SYSTEM_ERROR, "the store server is out of memory");
      return;
    }
    unsigned char le[8];
    collie__store_put_i64(le, v);
    tcp_conn_reply(c, COLLIE_STORE_OP_OK, h->id, 0, le, sizeof(le));
    tcp_wake_waiters(sv, e);
    return;
  }
  case COLLIE_STORE_OP_DELETE_PREFIX: {
    /* A GET parked on a removed key still waits: a later SET answers it. */
    size_t plen = h->key_len, removed = 0;
    for (size_t b = 0; b < sv->nbuckets; b++)
      for (struct tcp_entry **q = &sv->buckets[b]; *q;) {
        struct tcp_entry *x = *q;
        if (strncmp(x->key, key, plen) != 0) {
          q = &x->next;
          continue;
        }
        *q = x->next;
        free(x->key);
        free(x->val);
        free(x);
        sv->nentries--;
        removed++;
      }
    unsigned char le[8];
    collie__store_put_i64(le, (int64_t)removed);
    tcp_conn_reply(c, COLLIE_STORE_OP_OK, h->id, 0, le, sizeof(le));
    return;
  }
  default:
    c->dead = 1; /* checked with the header; not reached */
  }
}

/* Checks a just-completed header (host order). 0, or -1 with a reason in why. */
static int
tcp_check_hdr(const struct tcp_conn *c, const struct collie__store_hdr *h, const char **why)
{
  if (h->magic != COLLIE_STORE_PROTO_MAGIC) return *why = "bad magic (not a collie client?)", -1;
  if (h->op == COLLIE_STORE_OP_HELLO) {
    if (c->authed) return *why = "a second HELLO", -1;
    if (h->key_len > COLLIE_STORE_MAX_TOKEN || h->val_len != 0)
      return *why = "HELLO with bad lengths", -1;
    return 0; /* version is checked with the token, to reply with a reason */
  }
  if (h->version != COLLIE_STORE_PROTO_VERSION) return *why = "bad protocol version", -1;
  if (!c->authed) return *why = "a request before HELLO", -1;
  if (h->key_len == 0 || h->key_len > COLLIE_STORE_MAX_KEY) return *why = "bad key length", -1;
  switch (h->op) {
  case COLLIE_STORE_OP_SET:
    if (h->val_len > COLLIE_STORE_MAX_VALUE) return *why = "value too long", -1;
    return 0;
  case COLLIE_STORE_OP_GET:
    if (h->val_len != 0) return *why = "GET with a value", -1;
    return 0;
  case COLLIE_STORE_OP_ADD:
    if (h->val_len != 8) return *why = "ADD without an 8-byte delta", -1;
    return 0;
  case COLLIE_STORE_OP_DELETE_PREFIX:
    if (h->val_len != 0) return *why = "DELETE_PREFIX with a value", -1;
    return 0;
  default:
    return *why = "unknown op", -1;
  }
}

/* Reads what the socket has and handles each complete frame: header, then
 * key, then value, each read straight into place. */
static void
tcp_conn_read(struct collie__store_tcp_server *sv, struct tcp_conn *c)
{
  while (!c->dead && !c->closing) {
    unsigned char *dst;
    size_t want, *got;
    if (c->hdr_got < sizeof(c->hdr)) {
      dst = (unsigned char *)&c->hdr + c->hdr_got;
      want = sizeof(c->hdr) - c->hdr_got;
      got = &c->hdr_got;
    } else if (c->key_got < c->hdr.key_len) {
      dst = (unsigned char *)c->key + c->key_got;
      want = c->hdr.key_len - c->key_got;
      got = &c->key_got;
    } else if (c->val_got < c->hdr.val_len) {
      dst = c->val + c->val_got;
      want = c->hdr.val_len - c->val_got;
      got = &c->val_got;
    } else {
      c->key[c->hdr.key_len] = '\0';
      tcp_handle_frame(sv, c);
      free(c->val);
      c->val = NULL;
      c->hdr_got = c->key_got = c->val_got = 0;
      continue;
    }
    ssize_t r = recv(c->fd, dst, want, MSG_DONTWAIT);
    if (r == 0) {
      c->dead = 1; /* the client closed: normal at the end of a job */
      return;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) c->dead = 1;
      return;
    }
    *got += (size_t)r;
    if (got != &c->hdr_got || c->hdr_got < sizeof(c->hdr)) continue;
    /* The header is complete: check it before trusting its lengths. */
    collie__store_hdr_swap(&c->hdr);
    const char *why = NULL;
    if (tcp_check_hdr(c, &c->hdr, &why) != 0) {
      COLLIE_WARN("BOOTSTRAP", "store %s: closing the connection from %s: malformed frame (%s)",
                  sv->url, c->peer, why);
      c->dead = 1;
      return;
    }
    c->val = malloc(c->hdr.val_len ? c->hdr.val_len : 1);
    if (!c->val) c->dead = 1;
  }
}

static void
tcp_conn_free(struct tcp_conn *c)
{
  if (c->fd >= 0) close(c->fd);
  free(c->val);
  free(c->out);
  free(c);
}

/* A warning at most once a second (a flood must not flood the log too); the
 * strangers dropped meanwhile are counted into the next one. */
__attribute__((format(printf, 3, 4))) static void
tcp_warn(struct collie__store_tcp_server *sv, int64_t now, const char *fmt, ...)
{
  if (now - sv->last_warn_ns < 1000000000LL) return;
  sv->last_warn_ns = now;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  COLLIE_WARN("BOOTSTRAP", "store %s: %s (%zu connection(s) dropped without a valid HELLO so far)",
              sv->url, msg, sv->refused);
}

static size_t
tcp_count_unauthed(const struct collie__store_tcp_server *sv)
{
  size_t n = 0;
  for (size_t i = 0; i < sv->nconns; i++) n += !sv->conns[i]->authed && !sv->conns[i]->dead;
  return n;
}

/* Marks the longest-waiting unauthenticated connection dead (swept later). */
static void
tcp_drop_oldest_unauthed(struct collie__store_tcp_server *sv, const char *why)
{
  struct tcp_conn *old = NULL;
  for (size_t i = 0; i < sv->nconns; i++) {
    struct tcp_conn *c = sv->conns[i];
    if (!c->authed && !c->dead && (!old || c->since_ns < old->since_ns)) old = c;
  }
  if (!old) return;
  old->dead = 1;
  sv->refused++;
  tcp_warn(sv, collie__now_ns(), "dropped %s: %s", old->peer, why);
  /* Its descriptor goes now: the caller may need it at once. */
  close(old->fd);
  old->fd = -1;
}

static void
tcp_server_accept(struct collie__store_tcp_server *sv)
{
  for (;;) {
    int64_t now = collie__now_ns();
    int fd = collie__sock_accept(sv->lfd, now); /* one try: the listener is ready */
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        /* The listener stays readable: polling it again at once would spin.
         * Rest it, and free a descriptor from a stranger if there is one. */
        sv->accept_rest_until = now + TCP_ACCEPT_REST_NS;
        tcp_drop_oldest_unauthed(sv, "out of file descriptors");
        tcp_warn(sv, now, "cannot accept connections: %s (the listener rests %d ms)",
                 strerror(errno), (int)(TCP_ACCEPT_REST_NS / 1000000));
      }
      return;
    }
    if (tcp_count_unauthed(sv) >= tcp_max_unauthed)
      tcp_drop_oldest_unauthed(sv, "too many connections without a valid HELLO");
    struct tcp_conn *c = calloc(1, sizeof(*c));
    if (c && sv->nconns == sv->conns_cap) {
      size_t cap = sv->conns_cap ? sv->conns_cap * 2 : 16;
      struct tcp_conn **p = realloc(sv->conns, cap * sizeof(*p));
      if (p) {
        sv->conns = p;
        sv->conns_cap = cap;
      }
    }
    if (!c || sv->nconns == sv->conns_cap) {
      free(c);
      close(fd);
      continue;
    }
    c->fd = fd;
    c->since_ns = now;
    collie__sock_set_nonblock(fd, 1);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char ip[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
      if (ss.ss_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof(ip));
        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
      } else if (ss.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, ip, sizeof(ip));
        port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
      }
    }
    snprintf(c->peer, sizeof(c->peer), "%s:%d", ip, port);
    sv->conns[sv->nconns++] = c;
  }
}

/* Frees dead connections and the GETs they had parked. */
static void
tcp_server_sweep(struct collie__store_tcp_server *sv)
{
  int64_t now = collie__now_ns();
  for (size_t i = 0; i < sv->nconns;) {
    struct tcp_conn *c = sv->conns[i];
    if (c->closing && c->out_len == 0) c->dead = 1;
    if (!c->dead && !c->authed && now - c->since_ns > tcp_auth_ns) {
      c->dead = 1;
      sv->refused++;
      tcp_warn(sv, now, "dropped %s: no valid HELLO within %lld ms", c->peer,
               (long long)(tcp_auth_ns / 1000000));
    }
    if (!c->dead) {
      i++;
      continue;
    }
    for (struct tcp_waiter **pp = &sv->waiters; *pp;) {
      struct tcp_waiter *w = *pp;
      if (w->conn == c) {
        *pp = w->next;
        free(w);
      } else {
        pp = &w->next;
      }
    }
    tcp_conn_free(c);
    sv->conns[i] = sv->conns[--sv->nconns];
  }
  size_t authed = 0;
  for (size_t i = 0; i < sv->nconns; i++) authed += sv->conns[i]->authed;
  __atomic_store_n(&sv->clients, authed, __ATOMIC_RELEASE);
}

size_t
collie__store_tcp_server_clients(struct collie__store_tcp_server *sv)
{
  return __atomic_load_n(&sv->clients, __ATOMIC_ACQUIRE);
}

int64_t
collie__store_tcp_server_last_request(struct collie__store_tcp_server *sv)
{
  return __atomic_load_n(&sv->last_request_ns, __ATOMIC_ACQUIRE);
}

static void *
tcp_server_main(void *arg)
{
  struct collie__store_tcp_server *sv = arg;
  struct pollfd *pfd = NULL;
  size_t pfd_cap = 0;
  while (!__atomic_load_n(&sv->stop, __ATOMIC_ACQUIRE)) {
    size_t n = sv->nconns + 2;
    if (n > pfd_cap) {
      struct pollfd *p = realloc(pfd, n * 2 * sizeof(*p));
      if (!p) {
        collie__sleep_ns(10000000); /* out of memory: try again soon */
        continue;
      }
      pfd = p;
      pfd_cap = n * 2;
    }
    int64_t now = collie__now_ns();
    pfd[0] = (struct pollfd){sv->wake[0], POLLIN, 0};
    pfd[1] = (struct pollfd){sv->lfd, now < sv->accept_rest_until ? 0 : POLLIN, 0};
    for (size_t i = 0; i < sv->nconns; i++) {
      struct tcp_conn *c = sv->conns[i];
      short ev = c->closing ? 0 : POLLIN;
      if (c->out_len > c->out_off) ev |= POLLOUT;
      pfd[i + 2] = (struct pollfd){c->fd, ev, 0};
    }
    /* The pipe wakes us for close(); the timeout bounds a missed wake-up, a
     * resting listener and the HELLO deadline of strangers. */
    int r = poll(pfd, (nfds_t)n, now < sv->accept_rest_until || tcp_count_unauthed(sv) ? 50 : 1000);
    if (r < 0) {
      if (errno == EINTR) continue;
      COLLIE_WARN("BOOTSTRAP", "store %s: poll failed: %s", sv->url, strerror(errno));
      collie__sleep_ns(10000000);
      continue;
    }
    if (pfd[0].revents) {
      char buf[64];
      while (read(sv->wake[0], buf, sizeof(buf)) > 0) {
      }
    }
    size_t polled = sv->nconns; /* connections accepted below were not polled */
    for (size_t i = 0; i < polled; i++) {
      struct tcp_conn *c = sv->conns[i];
      short re = pfd[i + 2].revents;
      if (re & POLLOUT && tcp_conn_flush(c) != 0) c->dead = 1;
      if (!c->dead && re & (POLLIN | POLLHUP | POLLERR)) tcp_conn_read(sv, c);
      if (!c->dead && c->closing && re & (POLLHUP | POLLERR)) c->dead = 1;
    }
    if (pfd[1].revents & POLLIN) tcp_server_accept(sv);
    tcp_server_sweep(sv);
  }
  free(pfd);
  return NULL;
}

void
collie__store_tcp_server_stop(struct collie__store_tcp_server *sv)
{
  __atomic_store_n(&sv->stop, 1, __ATOMIC_RELEASE);
  ssize_t w;
  do {
    w = write(sv->wake[1], "x", 1);
  } while (w < 0 && errno == EINTR);
  pthread_join(sv->thread, NULL);
  for (size_t i = 0; i < sv->nconns; i++) tcp_conn_free(sv->conns[i]);
  free(sv->conns);
  while (sv->waiters) {
    struct tcp_waiter *w2 = sv->waiters;
    sv->waiters = w2->next;
    free(w2);
  }
  for (size_t i = 0; i < sv->nbuckets; i++) {
    struct tcp_entry *e = sv->buckets[i], *next;
    for (; e; e = next) {
      next = e->next;
      free(e->key);
      free(e->val);
      free(e);
    }
  }
  free(sv->buckets);
  close(sv->lfd);
  close(sv->wake[0]);
  close(sv->wake[1]);
  free(sv);
}

collie_result_t
collie__store_tcp_server_start(const char *url, const char *host, int port, const char *token,
                               struct collie__store_tcp_server **out, int *bound)
{
  struct collie__store_tcp_server *sv = calloc(1, sizeof(*sv));
  if (!sv) return collie__err(COLLIE_SYSTEM_ERROR, "store %s: out of memory", url);
  sv->wake[0] = sv->wake[1] = -1;
  snprintf(sv->url, sizeof(sv->url), "%s", url);
  sv->token_len = strlen(token);
  memcpy(sv->token, token, sv->token_len);
  sv->nbuckets = 64;
  sv->buckets = calloc(sv->nbuckets, sizeof(*sv->buckets));
  collie_result_t rc = COLLIE_SUCCESS;
  if (!sv->buckets) {
    rc = collie__err(COLLIE_SYSTEM_ERROR, "store %s: out of memory", url);
    goto out_free;
  }
  sv->lfd = collie__sock_listen(host, port, bound);
  if (sv->lfd < 0) {
    rc = errno == EADDRINUSE
             ? collie__err_errno(COLLIE_SYSTEM_ERROR,
                                 "store %s: rank 0 cannot listen on %s:%d (port in use by another "
                                 "job or process?)",
                                 url, host, port)
             : collie__err_errno(COLLIE_SYSTEM_ERROR, "store %s: rank 0 cannot listen on %s:%d",
                                 url, host, port);
    goto out_free;
  }
  if (pipe2(sv->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "store %s: pipe", url);
    goto out_close;
  }
  int err = pthread_create(&sv->thread, NULL, tcp_server_main, sv);
  if (err != 0) {
    errno = err;
    rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "store %s: cannot start the server thread", url);
    goto out_close;
  }
  *out = sv;
  return COLLIE_SUCCESS;
out_close:
  if (sv->wake[0] >= 0) close(sv->wake[0]);
  if (sv->wake[1] >= 0) close(sv->wake[1]);
  close(sv->lfd);
out_free:
  free(sv->buckets);
  free(sv);
  return rc;
}
