/*
 * ring.c - the bootstrap ring of bootstrap.h.
 *
 * The two sockets of a rank: `next`, which it connected and sends on, and
 * `prev`, which it accepted and receives on (at 2 ranks both lead to the
 * other rank). Each connection opens with a hello: magic, the sender's rank
 * and the ring's size, and a hash of the job token, so that a stranger (or
 * a rank of another job that found the port) is closed, not believed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "util/error.h"
#include "util/util.h"

#define RING_MAGIC 0x31474e52u /* "RNG1" */

struct collie__ring {
  int rank, size;
  int lfd, next, prev;
  char addr[COLLIE_RING_ADDR_LEN];
};

struct ring_hello {
  uint32_t magic;
  int32_t rank, size;
  uint32_t pad;
  uint64_t token_hash;
};

static uint64_t
ring_token_hash(const char *token)
{
  return collie__hash64(token, strlen(token), 0x636f6c6c69652d72ull); /* "collie-r" */
}

void
collie__ring_close(collie__ring_t *r)
{
  if (!r) return;
  if (r->next >= 0) close(r->next);
  if (r->prev >= 0) close(r->prev);
  if (r->lfd >= 0) close(r->lfd);
  free(r);
}

const char *
collie__ring_addr(const collie__ring_t *r)
{
  return r->addr;
}

int
collie__ring_listener(const collie__ring_t *r)
{
  return r->lfd;
}

/* Connects to the next rank at the address it published. */
static collie_result_t
ring_connect_next(collie__ring_t *r, collie__store_t *store, const char *token, int64_t deadline)
{
  int next = (r->rank + 1) % r->size;
  char key[32], host[COLLIE_RING_ADDR_LEN];
  void *val = NULL;
  size_t len = 0;
  int port = 0;
  snprintf(key, sizeof(key), "ring/%d", next);
  collie_result_t rc = collie__store_get(store, key, &val, &len, deadline);
  if (rc != COLLIE_SUCCESS) {
    collie__err_prefix("bootstrap ring: rank %d never published its address", next);
    return rc;
  }
  char addr[COLLIE_RING_ADDR_LEN];
  snprintf(addr, sizeof(addr), "%.*s", (int)(len < sizeof(addr) - 1 ? len : sizeof(addr) - 1),
           (const char *)val);
  free(val);
  if (len == 0 || len >= sizeof(addr) ||
      collie__parse_hostport(addr, host, sizeof(host), &port) < 0 || port <= 0)
    return collie__err(COLLIE_REMOTE_ERROR,
                       "bootstrap ring: rank %d published a malformed address \"%s\"", next, addr);
  if ((r->next = collie__sock_connect(host, port, deadline)) < 0)
    return collie__err_errno(errno == ETIMEDOUT ? COLLIE_TIMEOUT : COLLIE_SYSTEM_ERROR,
                             "bootstrap ring: cannot connect to rank %d at %s", next, addr);
  struct ring_hello h = {RING_MAGIC, r->rank, r->size, 0, ring_token_hash(token)};
  if (collie__sock_send_all(r->next, &h, sizeof(h), deadline) < 0)
    return collie__err_errno(COLLIE_REMOTE_ERROR, "bootstrap ring: greeting rank %d at %s", next,
                             addr);
  return COLLIE_SUCCESS;
}

/* Accepts the previous rank; anyone else who connects is closed. */
static collie_result_t
ring_accept_prev(collie__ring_t *r, const char *token, int64_t deadline)
{
  int prev = (r->rank + r->size - 1) % r->size;
  uint64_t want = ring_token_hash(token);
  for (;;) {
    int fd = collie__sock_accept(r->lfd, deadline);
    if (fd < 0)
      return collie__err_errno(errno == ETIMEDOUT ? COLLIE_TIMEOUT : COLLIE_SYSTEM_ERROR,
                               "bootstrap ring: rank %d never connected", prev);
    /* A silent stranger must not hold the ring up: a second for its hello. */
    int64_t hello_by = collie__deadline_after_ms(1000);
    struct ring_hello h;
    if (collie__sock_recv_all(fd, &h, sizeof(h), hello_by < deadline ? hello_by : deadline) == 0 &&
        h.magic == RING_MAGIC && h.rank == prev && h.size == r->size && h.token_hash == want) {
      r->prev = fd;
      return COLLIE_SUCCESS;
    }
    COLLIE_WARN("INIT",
                "bootstrap ring: closed a connection that did not prove it is rank %d of "
                "this job (wrong token, rank or size)",
                prev);
    close(fd);
  }
}

collie_result_t
collie__ring_open(collie__store_t *store, int rank, int size, const char *token, const char *ifname,
                  int64_t deadline_ns, collie__ring_t **out)
{
  *out = NULL;
  if (!store || size < 2 || rank < 0 || rank >= size)
    return collie__err(COLLIE_INVALID_ARGUMENT, "bootstrap ring: rank %d of %d%s", rank, size,
                       store ? "" : " without a store");
  collie__ring_t *r = calloc(1, sizeof(*r));
  if (!r) return collie__err(COLLIE_SYSTEM_ERROR, "bootstrap ring: out of memory");
  r->rank = rank;
  r->size = size;
  r->next = r->prev = -1;
  char host[48];
  if (collie__sock_local_addr(ifname, host, sizeof(host)) < 0) {
    if (ifname && ifname[0]) {
      collie__ring_close(r);
      return collie__err_errno(COLLIE_SYSTEM_ERROR,
                               "bootstrap ring: no IPv4 address on interface \"%s\" "
                               "(COLLIE_SOCKET_IFNAME)",
                               ifname);
    }
    snprintf(host, sizeof(host), "127.0.0.1");
  }
  int port = 0;
  if ((r->lfd = collie__sock_listen(host, 0, &port)) < 0) {
    collie_result_t rc =
        collie__err_errno(COLLIE_SYSTEM_ERROR, "bootstrap ring: cannot listen on %s", host);
    collie__ring_close(r);
    return rc;
  }
  snprintf(r->addr, sizeof(r->addr), "%s:%d", host, port);
  char key[32];
  snprintf(key, sizeof(key), "ring/%d", rank);
  collie_result_t rc = collie__store_set(store, key, r->addr, strlen(r->addr), deadline_ns);
  if (rc == COLLIE_SUCCESS) rc = ring_connect_next(r, store, token, deadline_ns);
  if (rc == COLLIE_SUCCESS) rc = ring_accept_prev(r, token, deadline_ns);
  if (rc != COLLIE_SUCCESS) {
    collie__ring_close(r);
    return rc;
  }
  *out = r;
  return COLLIE_SUCCESS;
}

collie_result_t
collie__ring_allgather(collie__ring_t *r, const void *mine, size_t len, void *all,
                       int64_t deadline_ns)
{
  char *a = all;
  int p = r->size, prev = (r->rank + p - 1) % p, next = (r->rank + 1) % p;
  memcpy(a + (size_t)r->rank * len, mine, len);
  for (int k = 0; k < p - 1; k++) {
    int out = (r->rank - k + p) % p, in = (r->rank - k - 1 + p) % p;
    if (collie__sock_send_all(r->next, a + (size_t)out * len, len, deadline_ns) < 0)
      return collie__err_errno(errno == ETIMEDOUT ? COLLIE_TIMEOUT : COLLIE_REMOTE_ERROR,
                               "bootstrap ring: step %d of %d: sending rank %d's record to rank %d",
                               k + 1, p - 1, out, next);
    if (collie__sock_recv_all(r->prev, a + (size_t)in * len, len, deadline_ns) < 0)
      return collie__err_errno(errno == ETIMEDOUT ? COLLIE_TIMEOUT : COLLIE_REMOTE_ERROR,
                               "bootstrap ring: step %d of %d: waiting for rank %d's record from "
                               "rank %d",
                               k + 1, p - 1, in, prev);
  }
  return COLLIE_SUCCESS;
}
