/*
 * nccl_id.c - ncclUniqueId: where the ranks of a new communicator meet.
 *
 * NCCL's id holds the address of a bootstrap thread in the process that
 * made it. collie's holds a store's: under collierun, the launcher's store
 * (which outlives every rank; each rank reads its address and token from
 * its own environment), else a tcp store this process serves from its first
 * ncclGetUniqueId on, for its life (as NCCL's root keeps its thread). Each
 * id adds a random nonce: its communicator's keys live under
 * "nccl-<nonce>/", so the ids of one process never mix. The id's bytes
 * (128, NCCL's size) are opaque to the program, which hands them to every
 * rank as NCCL asks (MPI_Bcast, torch's store, a file).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/store_int.h"
#include "nccl/nccl_int.h"
#include "util/util.h"

#define NCCL_ID_MAGIC "collie1"
#define NCCL_ID_LAUNCHER 1u /* the launcher's store: COLLIE_STORE and COLLIE_JOB_TOKEN */
#define NCCL_TOKEN_HEX 32
#define NCCL_SET_TIMEOUT_MS 120000

struct nccl_id_wire {
  char magic[8];
  uint32_t flags;
  uint32_t reserved;
  unsigned char nonce[16];
  char token[NCCL_TOKEN_HEX + 1]; /* the served store's and the job's token */
  char url[63];                   /* the served store ("" for the launcher's) */
};
_Static_assert(sizeof(struct nccl_id_wire) == NCCL_UNIQUE_ID_BYTES, "an id is NCCL's 128 bytes");

/* This process's store server: started by the first id, kept for life. */
static pthread_mutex_t nccl_serve_mu = PTHREAD_MUTEX_INITIALIZER;
static struct collie__store_tcp_server *nccl_server;
static char nccl_server_url[63], nccl_server_token[NCCL_TOKEN_HEX + 1];
static pid_t nccl_server_pid;

static void
nccl_hex(const unsigned char *b, size_t n, char *out)
{
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[b[i] >> 4];
    out[2 * i + 1] = digits[b[i] & 15];
  }
  out[2 * n] = '\0';
}

/* The interface to listen on: collie's setting, else NCCL's (a program
 * moved from NCCL keeps its NCCL_SOCKET_IFNAME). A NCCL prefix list
 * ("^docker", "=eth0") is not collie's syntax: only a plain name is used. */
static const char *
nccl_ifname(void)
{
  const char *s = getenv("COLLIE_SOCKET_IFNAME");
  if (s && *s) return s;
  s = getenv("NCCL_SOCKET_IFNAME");
  if (s && *s && !strchr(s, ',') && s[0] != '^' && s[0] != '=') return s;
  return NULL;
}

static ncclResult_t
nccl_serve(void)
{
  const char *fn = "ncclGetUniqueId";
  pthread_mutex_lock(&nccl_serve_mu);
  ncclResult_t r = ncclSuccess;
  if (nccl_server && nccl_server_pid == getpid()) goto out;
  nccl_server = NULL; /* a forked child's copy: the thread is its parent's */
  char host[64];
  unsigned char t[16];
  if (collie__sock_local_addr(nccl_ifname(), host, sizeof(host)) != 0) {
    r = nccl_fail(ncclSystemError, fn, "no address to serve the id's store on");
    goto out;
  }
  if (collie__random_bytes(t, sizeof(t)) != 0) {
    r = nccl_fail(ncclSystemError, fn, "no random bytes for the store's token");
    goto out;
  }
  nccl_hex(t, sizeof(t), nccl_server_token);
  int port = 0;
  struct collie__store_tcp_server *sv;
  collie_result_t rc =
      collie__store_tcp_server_start("nccl id store", host, 0, nccl_server_token, &sv, &port);
  if (rc != COLLIE_SUCCESS) {
    r = nccl_from_collie(rc, NULL, fn);
    goto out;
  }
  int n = strchr(host, ':')
              ? snprintf(nccl_server_url, sizeof(nccl_server_url), "tcp://[%s]:%d", host, port)
              : snprintf(nccl_server_url, sizeof(nccl_server_url), "tcp://%s:%d", host, port);
  if (n < 0 || (size_t)n >= sizeof(nccl_server_url)) {
    collie__store_tcp_server_stop(sv);
    r = nccl_fail(ncclSystemError, fn, "the store's address %s is too long for an id", host);
    goto out;
  }
  nccl_server = sv;
  nccl_server_pid = getpid();
out:
  pthread_mutex_unlock(&nccl_serve_mu);
  return r;
}

/* collierun serves its job's store and tells the ranks not to. */
static int
nccl_launcher_store(void)
{
  const char *store = getenv("COLLIE_STORE"), *serve = getenv("COLLIE_STORE_SERVE");
  return store && *store && serve && !strcmp(serve, "0") && getenv("COLLIE_JOB_TOKEN");
}

ncclResult_t
nccl_id_make(ncclUniqueId *id)
{
  struct nccl_id_wire w;
  memset(&w, 0, sizeof(w));
  memcpy(w.magic, NCCL_ID_MAGIC, sizeof(NCCL_ID_MAGIC));
  if (collie__random_bytes(w.nonce, sizeof(w.nonce)) != 0)
    return nccl_fail(ncclSystemError, "ncclGetUniqueId", "no random bytes for the id");
  if (nccl_launcher_store()) {
    w.flags = NCCL_ID_LAUNCHER;
  } else {
    ncclResult_t r = nccl_serve();
    if (r != ncclSuccess) return r;
    memcpy(w.url, nccl_server_url, sizeof(w.url));
    memcpy(w.token, nccl_server_token, sizeof(w.token));
  }
  memcpy(id->internal, &w, sizeof(w));
  return ncclSuccess;
}

/* ---- the id's store as collie_config_t's callbacks ---- */

struct nccl_store {
  collie__store_t *view;
  collie_store_callbacks_t cb;
  char token[300];
};

static int64_t
nccl_deadline(int64_t timeout_ms)
{
  return collie__deadline_after_ms(timeout_ms);
}

static collie_result_t
nccl_store_set(void *ctx, const char *key, const void *value, size_t len)
{
  struct nccl_store *s = ctx;
  return collie__store_set(s->view, key, value, len, nccl_deadline(NCCL_SET_TIMEOUT_MS));
}

static collie_result_t
nccl_store_get(void *ctx, const char *key, int64_t timeout_ms, void *buf, size_t cap, size_t *len)
{
  struct nccl_store *s = ctx;
  void *v = NULL;
  size_t n = 0;
  collie_result_t rc = collie__store_get(s->view, key, &v, &n, nccl_deadline(timeout_ms));
  if (rc != COLLIE_SUCCESS) return rc;
  memcpy(buf, v, n < cap ? n : cap);
  *len = n;
  free(v);
  return COLLIE_SUCCESS;
}

static collie_result_t
nccl_store_add(void *ctx, const char *key, int64_t delta, int64_t *out)
{
  struct nccl_store *s = ctx;
  return collie__store_add(s->view, key, delta, out, nccl_deadline(NCCL_SET_TIMEOUT_MS));
}

static void
nccl_store_release(void *ctx)
{
  struct nccl_store *s = ctx;
  collie__store_release(s->view);
  free(s);
}

ncclResult_t
nccl_id_open(const ncclUniqueId *id, int rank, int size, const char *fn, struct nccl_store **out,
             const collie_store_callbacks_t **cb, const char **token)
{
  struct nccl_id_wire w;
  memcpy(&w, id->internal, sizeof(w));
  if (memcmp(w.magic, NCCL_ID_MAGIC, sizeof(NCCL_ID_MAGIC)) != 0)
    return nccl_fail(ncclInvalidArgument, fn,
                     "commId is not an id of collie's ncclGetUniqueId (its first bytes are not "
                     "collie's mark: an id made by another NCCL library, or bytes that were not "
                     "copied whole)");
  w.url[sizeof(w.url) - 1] = '\0';
  w.token[sizeof(w.token) - 1] = '\0';
  struct nccl_store *s = calloc(1, sizeof(*s));
  if (!s) return nccl_fail(ncclSystemError, fn, "out of memory");
  const char *url = w.url;
  if (w.flags & NCCL_ID_LAUNCHER) {
    url = getenv("COLLIE_STORE");
    const char *t = getenv("COLLIE_JOB_TOKEN");
    if (!url || !*url || !t) {
      free(s);
      return nccl_fail(ncclInvalidUsage, fn,
                       "the id names its launcher's store (collierun's), but this process has no "
                       "COLLIE_STORE and COLLIE_JOB_TOKEN: every rank must run under the same "
                       "collierun job");
    }
    snprintf(s->token, sizeof(s->token), "%s", t);
  } else {
    snprintf(s->token, sizeof(s->token), "%s", w.token);
  }
  collie__store_t *base = NULL;
  collie_result_t rc = collie__store_open_serving(url, rank, size, s->token, 0,
                                                  nccl_deadline(NCCL_SET_TIMEOUT_MS), &base);
  if (rc != COLLIE_SUCCESS) {
    free(s);
    return nccl_from_collie(rc, NULL, fn);
  }
  char prefix[64];
  nccl_hex(w.nonce, sizeof(w.nonce), prefix + 5);
  memcpy(prefix, "nccl-", 5);
  rc = collie__store_prefix(base, prefix, &s->view);
  collie__store_release(base);
  if (rc != COLLIE_SUCCESS) {
    free(s);
    return nccl_from_collie(rc, NULL, fn);
  }
  s->cb.ctx = s;
  s->cb.set = nccl_store_set;
  s->cb.get = nccl_store_get;
  s->cb.add = nccl_store_add;
  s->cb.release = nccl_store_release;
  *out = s;
  *cb = &s->cb;
  *token = s->token;
  return ncclSuccess;
}

NCCL_EXPORT ncclResult_t
ncclGetUniqueId(ncclUniqueId *uniqueId)
{
  if (!uniqueId) return nccl_fail(ncclInvalidArgument, "ncclGetUniqueId", "uniqueId is NULL");
  return nccl_id_make(uniqueId);
}
