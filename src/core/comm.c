/*
 * comm.c - communicator life cycle: init (from the environment or an
 * explicit config), split, destroy, abort. The state every call checks (the
 * registry of live communicators, poisoning) is comm_state.c's. Destroy and
 * split first let the communicator's async work (work.c) finish.
 *
 * Init: open the job's store, agree on a communicator id, publish this
 * rank's host identity and pid under the id's prefix, read everyone's, and
 * open the channels (shm with same-host peers, tcp with the rest).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "device/cuda.h"
#include "device/ipc_cache.h"
#include "device/pinned.h"

/* ---- The job store of world inits ---- */

/* The job's store, shared by every world communicator this process inits
 * (a second init must not serve the same tcp address again). The cache holds
 * a reference for the life of the process, or until an init with another
 * store takes its place: rank 0 serving the store only while it has
 * communicators made a program that destroys the world and inits it again
 * fail, because a faster rank reached the old server just before it closed
 * (or the port while it was down). Kept, the server also keeps the count of
 * world inits that tells the k-th init of every rank apart. Guarded by
 * comm_store_lock. */
static pthread_mutex_t comm_store_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  char key[1024]; /* url, token, rank */
  collie__store_t *store;
} comm_store_cache;

/* The cached job store for key, retained, or NULL. */
static collie__store_t *
comm_store_cached(const char *key)
{
  collie__store_t *s = NULL;
  pthread_mutex_lock(&comm_store_lock);
  if (comm_store_cache.store && !strcmp(comm_store_cache.key, key)) {
    s = comm_store_cache.store;
    collie__store_retain(s);
  }
  pthread_mutex_unlock(&comm_store_lock);
  return s;
}

/* Makes s the cached store for key (the cache takes its own reference); a
 * store cached for another key is let go (communicators still using it hold
 * references of their own). */
static void
comm_store_remember(const char *key, collie__store_t *s)
{
  collie__store_t *drop = NULL;
  pthread_mutex_lock(&comm_store_lock);
  if (comm_store_cache.store != s) {
    drop = comm_store_cache.store;
    snprintf(comm_store_cache.key, sizeof(comm_store_cache.key), "%s", key);
    comm_store_cache.store = s;
    collie__store_retain(s);
  }
  pthread_mutex_unlock(&comm_store_lock);
  if (drop) collie__store_release(drop);
}

/* ---- Construction ---- */

static void
comm_free(collie_comm_t *c)
{
  if (!c) return;
  if (c->flight) {
    collie__flight_unwatch(c->flight);
    collie__flight_free(c->flight);
  }
  collie__tele_release(c->tele);
  collie__net_close(c->net);
  if (c->store) collie__store_release(c->store);
  if (c->job_store) collie__store_release(c->job_store);
  collie__scratch_free(&c->scratch[0]);
  collie__scratch_free(&c->scratch[1]);
  collie__ipc_cache_free(c->dev.ipc); /* closes the peers' buffers this rank mapped */
  collie__ipc_cache_free(c->dev.ipc_p2p);
  collie__pinned_free(c->dev.pinned);
  collie__pinned_area_free(c->dev.stage);
  c->dev.ipc = NULL;
  c->dev.ipc_p2p = NULL;
  c->dev.pinned = NULL;
  c->dev.stage = NULL;
  collie__models_free(&c->models);
  free(c->peers);
  collie__topo_free(&c->topo);
  free(c->p2p_send_seq);
  free(c->p2p_recv_seq);
  collie__group_free(c->group);
  pthread_mutex_destroy(&c->poison_lock);
  c->magic = 0;
  free(c);
}

/* The cores of the smallest host that runs more of the peers than it has
 * cores, or 0 when none does. */
static int
comm_oversub_cores(const struct collie__peer *peers, int size)
{
  int cores = 0;
  for (int p = 0; p < size; p++) {
    int on_host = 0;
    for (int q = 0; q < size; q++) on_host += !strcmp(peers[q].host, peers[p].host);
    int n = peers[p].ncpus > 0 ? peers[p].ncpus : 1;
    if (on_host > n && (cores == 0 || n < cores)) cores = n;
  }
  return cores;
}

/* Opens a world communicator's telemetry (comms.csv, timing log); a failure is
 * written into me->fail so that every rank fails init with it. */
static collie_result_t
comm_tele_open(collie_comm_t *c, struct collie__peer *me)
{
  struct collie__tele_cfg cfg = {.log_dir = c->params.LOG_DIR,
                                 .comms_log = (int)c->params.COMMS_LOG,
                                 .timing_dir = c->params.TIMING_LOG,
                                 .rank = c->rank,
                                 .world_size = c->size,
                                 .host = me->host,
                                 .timing_queue = c->params.TIMING_QUEUE,
                                 .timing_flush_ms = c->params.TIMING_FLUSH_MS};
  collie_result_t rc = collie__tele_open(&cfg, &c->tele);
  if (rc != COLLIE_SUCCESS) snprintf(me->fail, sizeof(me->fail), "%s", collie__err_msg());
  return rc;
}

/* After the peer records are in: if any rank failed init locally, every rank
 * fails. Each rank that saw a failure says so in the store; rank 0, which may
 * serve the store, waits for all of them before it lets the store go. */
static collie_result_t
comm_init_verdict(collie_comm_t *c, collie_result_t own, int64_t deadline)
{
  int failed = -1;
  for (int p = 0; p < c->size && failed < 0; p++)
    if (c->peers[p].fail[0]) failed = p;
  if (failed < 0) return COLLIE_SUCCESS;
  char key[48], saved[COLLIE_ERRMSG_LEN];
  snprintf(saved, sizeof(saved), "%s", collie__err_msg());
  snprintf(key, sizeof(key), "init-fail-seen/%d", c->rank);
  collie__store_set(c->store, key, "1", 1, deadline);
  for (int p = 1; c->rank == 0 && p < c->size; p++) {
    void *val = NULL;
    size_t len;
    snprintf(key, sizeof(key), "init-fail-seen/%d", p);
    if (collie__store_get(c->store, key, &val, &len, deadline) == COLLIE_SUCCESS) free(val);
  }
  if (own != COLLIE_SUCCESS) {
    collie__err_set_text(saved);
    return own;
  }
  c->peers[failed].fail[sizeof(c->peers[failed].fail) - 1] = '\0';
  return collie__err(COLLIE_INVALID_USAGE, "rank %d could not initialise: %s", failed,
                     c->peers[failed].fail);
}

/* A collective that the library runs over c itself (a split's allgather,
 * the network's measurement): c's place and channels, host memory, kind
 * and algo named, at the next sequence number; buffers are the caller's. */
static struct collie__call
comm_internal_call(collie_comm_t *c, int kind, int algo, int64_t deadline)
{
  collie__net_set_mem(c->net, COLLIE_MEM_HOST);
  return (struct collie__call){.kind = kind,
                               .algo = algo,
                               .seq = c->seq++,
                               .dtype = COLLIE_UINT8,
                               .esize = 1,
                               .rank = c->rank,
                               .size = c->size,
                               .cls = c->cls,
                               .all_shm = c->all_shm,
                               .topo = &c->topo,
                               .net = c->net,
                               .scratch = c->scratch,
                               .deadline_ns = deadline};
}

collie_result_t
collie__comm_exchange(collie_comm_t *c, const void *mine, void *all, size_t bytes)
{
  struct collie__call call = comm_internal_call(c, COLLIE_KIND_ALLGATHER, COLLIE_ALGO_RING,
                                                collie__deadline_after_ms(c->timeout_ms));
  call.sendbuf = mine;
  call.recvbuf = all;
  call.count = bytes;
  if (c->size > 1) return collie__algo_allgather_ring.run(&call);
  if (bytes) memcpy(all, mine, bytes);
  return COLLIE_SUCCESS;
}

static int
comm_double_cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Bytes of the shift that measures the network's bandwidth at init: 8.4 ms
 * at 1 Gbit/s, several times a 1 ms link's latency, so that the latency
 * subtracted from it leaves a byte term to read, and four times the burst
 * a token bucket (the test bed's tbf) lets through at line rate. 0.4 ms
 * over loopback tcp, 170 ms of init at 100 Mbit/s (two shifts). */
#define COMM_MEASURE_BYTES ((size_t)1 << 20)

/* One crossing of COMM_MEASURE_BYTES per host, twice (the first warms the
 * channels and tcp's window): host h's local index 0 sends to host h+1's
 * and receives from host h-1's, so each host's link carries one stream each
 * way, the link's own rate (the model charges sharing itself). The
 * second's time less one latency (alpha_us), per byte; -1 on other ranks,
 * which take the same two sequence numbers. */
static collie_result_t
comm_measure_beta(collie_comm_t *c, double alpha_us, int64_t deadline, double *beta_us)
{
  const struct collie__topo *t = &c->topo;
  *beta_us = -1;
  if (t->local[c->rank] != 0) { /* every rank takes the shifts' sequence numbers */
    c->seq += 2;
    return COLLIE_SUCCESS;
  }
  const int *rail = t->by_rail + t->rail_first[0];
  int h = t->host[c->rank], H = t->nhosts;
  char *buf = calloc(2, COMM_MEASURE_BYTES);
  if (!buf) return collie__err(COLLIE_SYSTEM_ERROR, "out of memory measuring the network");
  collie_result_t rc = COLLIE_SUCCESS;
  for (int i = 0; i < 2 && rc == COLLIE_SUCCESS; i++) {
    struct collie__call call =
        comm_internal_call(c, COLLIE_KIND_ALLGATHER, COLLIE_ALGO_RING, deadline);
    int64_t t0 = collie__now_ns();
    rc = collie__sendrecv(&call, rail[(h + 1) % H], buf, COMM_MEASURE_BYTES, rail[(h + H - 1) % H],
                          buf + COMM_MEASURE_BYTES, COMM_MEASURE_BYTES, 0);
    double us = (double)(collie__now_ns() - t0) / 1e3 - alpha_us;
    if (i == 1) *beta_us = (us > 0 ? us : 0) / (double)COMM_MEASURE_BYTES;
  }
  free(buf);
  return rc;
}

/* The median of the n values of v at stride 2 from v[k] that are >= 0
 * (sorted in place in tmp), or -1 when none is. */
static double
comm_median_of(const double *v, int n, int k, double *tmp)
{
  int m = 0;
  for (int i = 0; i < n; i++)
    if (v[2 * i + k] >= 0) tmp[m++] = v[2 * i + k];
  if (m == 0) return -1;
  qsort(tmp, (size_t)m, sizeof(*tmp), comm_double_cmp);
  return tmp[m / 2];
}

/* The network's latency and bandwidth, measured once a communicator spans
 * hosts: the built-in model's constants between hosts are a fast network's
 * (8 us, 2.5 GB/s), and on slow links (1 ms) it priced extra crossings as
 * nothing, picking the hierarchical allreduce where flat recursive doubling
 * was twice as fast (docs/hosts.md), and at 1 Gbit/s it priced bytes 20
 * times too cheap, picking a one-shot exchange for 1 MiB shards where a
 * ring was faster. Latency: three dissemination barriers (every round has
 * a pair across hosts, so each round takes one crossing); the best of the
 * last two, per round, is this rank's estimate. Bandwidth: comm_measure_beta.
 * Every rank must pick alike, so the estimates are gathered and the
 * medians are taken; each replaces the model's constant only when over
 * twice as large (a fast network keeps the fitted default). Skipped with a
 * tuning file: its constants were measured. The sequence numbers used are
 * handed back: every message was consumed. */
static collie_result_t
comm_measure_net(collie_comm_t *c, int64_t deadline)
{
  if (c->topo.nhosts < 2 || c->params.TUNING_FILE) return COLLIE_SUCCESS;
  uint32_t seq0 = c->seq;
  int rounds = 0;
  for (int d = 1; d < c->size; d *= 2) rounds++;
  double mine[2] = {-1, -1}, *all = calloc((size_t)c->size * 3, sizeof(*all));
  if (!all) return collie__err(COLLIE_SYSTEM_ERROR, "out of memory measuring the network");
  collie_result_t rc = COLLIE_SUCCESS;
  for (int i = 0; i < 3 && rc == COLLIE_SUCCESS; i++) {
    struct collie__call call =
        comm_internal_call(c, COLLIE_KIND_BARRIER, COLLIE_ALGO_DISSEMINATION, deadline);
    int64_t t0 = collie__now_ns();
    rc = collie__algo_barrier_dissemination.run(&call);
    double us = (double)(collie__now_ns() - t0) / 1e3 / rounds;
    if (i > 0 && (mine[0] < 0 || us < mine[0])) mine[0] = us; /* the first warms the channels */
  }
  if (rc == COLLIE_SUCCESS) rc = comm_measure_beta(c, mine[0], deadline, &mine[1]);
  if (rc == COLLIE_SUCCESS) { /* recursive doubling: log2(p) steps, cheap at thousands of ranks */
    struct collie__call call =
        comm_internal_call(c, COLLIE_KIND_ALLGATHER, COLLIE_ALGO_RECURSIVE_DOUBLING, deadline);
    call.sendbuf = mine;
    call.recvbuf = all;
    call.count = sizeof(mine);
    rc = collie__algo_allgather_recursive_doubling.run(&call);
  }
  c->seq = seq0;
  if (rc != COLLIE_SUCCESS) {
    free(all);
    collie__err_prefix("measuring the network at init");
    return rc;
  }
  double alpha = comm_median_of(all, c->size, 0, all + 2 * c->size);
  double beta = comm_median_of(all, c->size, 1, all + 2 * c->size);
  free(all);
  struct collie__model *net = &c->models.cls[c->cls];
  if (alpha > 2 * net->alpha_us) {
    COLLIE_INFO("INIT",
                "the network takes %.1f us a step (measured at init, the ranks' median): "
                "the model's alpha between hosts goes from %.1f to %.1f us",
                alpha, net->alpha_us, alpha);
    net->alpha_us = alpha;
  }
  if (beta > 2 * net->beta_us) {
    COLLIE_INFO("INIT",
                "the network moves %.3f GB/s (measured at init, the median of the hosts' first "
                "ranks): the model's beta between hosts goes from %.6f to %.6f us/B",
                1e-3 / beta, net->beta_us, beta);
    net->beta_us = beta;
  }
  return COLLIE_SUCCESS;
}

/* Waits for a peer's record under key. When the peer is known beforehand
 * (expect: a split's or shrink's members) and shares this host, its process is looked at
 * while waiting, so that a member that died after the decision fails the
 * setup at once, named, instead of at the deadline. */
static collie_result_t
comm_get_peer(collie__store_t *store, const char *key, const struct collie__peer *expect,
              const struct collie__peer *me, int64_t deadline, void **val, size_t *len)
{
  if (!expect || strcmp(expect->host, me->host) != 0)
    return collie__store_get(store, key, val, len, deadline);
  for (;;) {
    int64_t slice = collie__now_ns() + 200 * 1000000LL;
    collie_result_t rc =
        collie__store_get(store, key, val, len, slice < deadline ? slice : deadline);
    if (rc != COLLIE_TIMEOUT || slice >= deadline) return rc;
    if (collie__proc_dead(expect->pid))
      return collie__err(COLLIE_REMOTE_ERROR,
                         "world rank %d (pid %d) exited before it joined the new communicator "
                         "(it died, or gave up on an error of its own)",
                         expect->world_rank, expect->pid);
  }
}

/* Init's error when rank q never came, whichever way the ranks meet. */
static collie_result_t
comm_never_joined(const collie_comm_t *c, int q, int64_t timeout_ms)
{
  return collie__err(COLLIE_TIMEOUT, "rank %d never joined within %lld ms (rank %d of %d waiting)",
                     q, (long long)timeout_ms, c->rank, c->size);
}

/* Every rank's peer record through the store: this rank's published under
 * "peer/<rank>", every other rank's read (N records a rank). */
static collie_result_t
comm_store_exchange(collie_comm_t *c, const struct collie__peer *me,
                    const struct collie__peer *expect, int64_t timeout_ms, int64_t deadline)
{
  char key[64];
  snprintf(key, sizeof(key), "peer/%d", c->rank);
  collie_result_t rc = collie__store_set(c->store, key, me, sizeof(*me), deadline);
  for (int p = 0; p < c->size && rc == COLLIE_SUCCESS; p++) {
    void *val = NULL;
    size_t len = 0;
    if (p == c->rank) continue;
    snprintf(key, sizeof(key), "peer/%d", p);
    rc = comm_get_peer(c->store, key, expect ? &expect[p] : NULL, me, deadline, &val, &len);
    if (rc == COLLIE_TIMEOUT) comm_never_joined(c, p, timeout_ms);
    if (rc != COLLIE_SUCCESS) return rc;
    if (len != sizeof(struct collie__peer)) {
      free(val);
      return collie__err(COLLIE_REMOTE_ERROR,
                         "rank %d published a malformed peer record (%zu bytes)", p, len);
    }
    memcpy(&c->peers[p], val, len);
    c->peers[p].host[COLLIE_HOSTID_LEN - 1] = '\0';
    free(val);
  }
  return rc;
}

/* A rank's record on the bootstrap ring: its peer record and the address
 * its listener (which tcp takes over) is on. */
struct comm_ring_rec {
  struct collie__peer peer;
  char addr[COLLIE_RING_ADDR_LEN];
};

/* Whether the ranks meet over the bootstrap ring (COLLIE_RING_BOOTSTRAP
 * ranks or more): every rank decides alike from the size and the
 * environment. A shrink's members keep the store (store_only), where a
 * member that died after the decision is named while the others wait. */
static int
comm_ring_wanted(const struct collie__params *params, int size, int store_only)
{
  return !store_only && params->RING_BOOTSTRAP > 0 && size >= params->RING_BOOTSTRAP;
}

/* After the ring failed: the first rank that never published its address
 * is the one the job waits for, named as the store's path names it (the
 * ring's own error may only name a neighbour that gave up first, its
 * connection reset). Returns COLLIE_TIMEOUT when it named one, else rc with
 * the ring's error kept. Quick: a present key answers at once. */
static collie_result_t
comm_ring_name_missing(collie_comm_t *c, int64_t timeout_ms, collie_result_t rc)
{
  char saved[COLLIE_ERRMSG_LEN], key[32];
  snprintf(saved, sizeof(saved), "%s", collie__err_msg());
  for (int q = 0; q < c->size; q++) {
    void *val = NULL;
    size_t len = 0;
    snprintf(key, sizeof(key), "ring/%d", q);
    if (collie__store_get(c->store, key, &val, &len, collie__deadline_after_ms(100)) ==
        COLLIE_SUCCESS) {
      free(val);
      continue;
    }
    return comm_never_joined(c, q, timeout_ms);
  }
  collie__err_set_text(saved);
  return rc;
}

/* Every rank's peer record and listen address over the bootstrap ring:
 * c->peers filled, *addrs (size x COLLIE_RING_ADDR_LEN, the caller frees)
 * and *ring (open, its listener for tcp) handed back. */
static collie_result_t
comm_ring_exchange(collie_comm_t *c, const struct collie__peer *me, int64_t timeout_ms,
                   int64_t deadline, collie__ring_t **ring, char **addrs)
{
  struct comm_ring_rec mine, *all = calloc((size_t)c->size, sizeof(*all));
  if (!all) return collie__err(COLLIE_SYSTEM_ERROR, "out of memory for %d peer records", c->size);
  collie_result_t rc = collie__ring_open(c->store, c->rank, c->size, c->token,
                                         c->params.SOCKET_IFNAME, deadline, ring);
  if (rc == COLLIE_SUCCESS) {
    memset(&mine, 0, sizeof(mine));
    mine.peer = *me;
    snprintf(mine.addr, sizeof(mine.addr), "%s", collie__ring_addr(*ring));
    rc = collie__ring_allgather(*ring, &mine, sizeof(mine), all, deadline);
  }
  if (rc == COLLIE_SUCCESS && !(*addrs = calloc((size_t)c->size, COLLIE_RING_ADDR_LEN)))
    rc = collie__err(COLLIE_SYSTEM_ERROR, "out of memory for %d addresses", c->size);
  if (rc == COLLIE_SUCCESS) {
    for (int p = 0; p < c->size; p++) {
      c->peers[p] = all[p].peer;
      c->peers[p].host[COLLIE_HOSTID_LEN - 1] = '\0';
      memcpy(*addrs + (size_t)p * COLLIE_RING_ADDR_LEN, all[p].addr, COLLIE_RING_ADDR_LEN);
      (*addrs)[(size_t)p * COLLIE_RING_ADDR_LEN + COLLIE_RING_ADDR_LEN - 1] = '\0';
    }
    c->met_over_ring = 1;
    COLLIE_INFO("INIT", "met %d ranks over the bootstrap ring (listening on %s)", c->size,
                collie__ring_addr(*ring));
  } else if (rc == COLLIE_TIMEOUT || rc == COLLIE_REMOTE_ERROR) {
    rc = comm_ring_name_missing(c, timeout_ms, rc);
  }
  free(all);
  return rc;
}

/* Builds a communicator of `size` ranks with id `hash` on top of the job store
 * `base`: publishes `me`, reads everyone's peer record and opens the channels.
 * Takes its own reference on base. A split passes its parent's telemetry
 * (tele); a world communicator (tele NULL) opens its own. */
collie_result_t
collie__comm_create(const struct collie__params *params, const char *token, int64_t timeout_ms,
                    const char *transport, collie__store_t *base, uint64_t hash, int rank, int size,
                    const struct collie__peer *me_in, const struct collie__comm_known *known,
                    struct collie__tele *tele, collie_comm_t **out)
{
  collie_result_t own = COLLIE_SUCCESS;
  collie__ring_t *ring = NULL; /* the bootstrap ring, until the channels are open */
  char *addrs = NULL;          /* its listen addresses, size x COLLIE_RING_ADDR_LEN */
  struct collie__peer me_rec = *me_in, *me = &me_rec;
  me_rec.fail[0] = '\0';
  collie_result_t rc;
  int exchanged = 0; /* the peer records are in: the others wait for this rank's setup now */
  int64_t deadline = collie__deadline_after_ms(timeout_ms);
  collie_comm_t *c = calloc(1, sizeof(*c));
  if (!c) return collie__err(COLLIE_SYSTEM_ERROR, "out of memory creating a communicator");
  c->magic = COLLIE_COMM_MAGIC;
  pthread_mutex_init(&c->poison_lock, NULL);
  c->rank = rank;
  c->size = size;
  c->hash = hash;
  collie__params_copy(&c->params, params);
  c->dev.chunk = (size_t)c->params.CUDA_CHUNK;
  c->dev.stage_max = (size_t)c->params.CUDA_STAGE_MAX;
  c->timeout_ms = timeout_ms;
  snprintf(c->token, sizeof(c->token), "%s", token);
  c->transport = collie__net_transport_name(transport);
  if (!c->transport) c->transport = "auto"; /* validated by the caller */
  snprintf(c->ctx, sizeof(c->ctx), "rank %d/%d comm %04" PRIx64, rank, size, hash & 0xffff);
  collie__log_context(c->ctx);
  c->peers = calloc((size_t)size, sizeof(*c->peers));
  c->p2p_send_seq = calloc((size_t)size, sizeof(uint32_t));
  c->p2p_recv_seq = calloc((size_t)size, sizeof(uint32_t));
  if (!c->peers || !c->p2p_send_seq || !c->p2p_recv_seq) {
    rc =
        collie__err(COLLIE_SYSTEM_ERROR, "out of memory creating a communicator of %d ranks", size);
    goto out_free;
  }
  COLLIE_CHECK_GOTO(collie__algo_parse(params->ALGO, &c->algos), rc, out_free);
  /* A bad tuning file fails init before anything waits on peers; it is read
   * again over the final defaults once oversubscription is known. */
  if (params->TUNING_FILE)
    COLLIE_CHECK_GOTO(collie__models_load(params->TUNING_FILE, &c->models), rc, out_free);
  if (tele) {
    collie__tele_retain(tele);
    c->tele = tele;
  } else {
    own = comm_tele_open(c, me);
    if (own != COLLIE_SUCCESS && size == 1) {
      rc = own;
      goto out_free;
    }
  }
  c->peers[rank] = *me;
  if (size > 1) {
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "c%016" PRIx64, hash);
    collie__store_retain(base);
    c->job_store = base;
    COLLIE_CHECK_GOTO(collie__store_prefix(base, prefix, &c->store), rc, out_free);
    if (comm_ring_wanted(params, size, known && known->store_only))
      rc = comm_ring_exchange(c, me, timeout_ms, deadline, &ring, &addrs);
    else
      rc = comm_store_exchange(c, me, known ? known->peers : NULL, timeout_ms, deadline);
    if (rc != COLLIE_SUCCESS) goto out_free;
    COLLIE_CHECK_GOTO(comm_init_verdict(c, own, deadline), rc, out_free);
    exchanged = 1;
    if (!tele) collie__place_spread(c); /* world init only: a split has the same processes */
    collie__count_machine_ranks(c->peers, size);
    c->spin = params->SPIN >= 0 ? (int)params->SPIN
                                : collie__spin_default(c->peers, size, rank, collie__ncpus());
    /* Every rank must pick the same algorithm, so the model may only depend on
     * what all ranks know: oversubscribed if any host has more of this
     * communicator's ranks than cores. */
    collie__models_default(&c->models, comm_oversub_cores(c->peers, size));
    struct collie__net_cfg cfg = {
        .rank = rank,
        .size = size,
        .peers = c->peers,
        .store = c->store,
        .job_store = collie__store_root(base),
        .token = c->token,
        .comm_hash = hash,
        .transport = c->transport,
        .net = params->NET,
        .ifname = params->SOCKET_IFNAME,
        .spin = c->spin,
        .cma_min = (size_t)params->SHM_CMA_MIN,
        .shm_bytes = (size_t)params->SHM_BYTES,
        .unexpected_bytes = (size_t)params->P2P_UNEXPECTED_BYTES,
        .tcp_reuse = params->TCP_REUSE != 0,
        .ofi_library = params->OFI_LIBRARY,
        .ofi_mr_all = params->OFI_MR_ALL != 0,
        .deadline_ns = deadline,
        .listen_addrs = addrs,
        .listen_fd = ring ? collie__ring_listener(ring) : -1,
    };
    rc = collie__net_open(&cfg, &c->net);
    collie__ring_close(ring); /* tcp took its own copy of the listener */
    ring = NULL;
    free(addrs);
    addrs = NULL;
    if (rc != COLLIE_SUCCESS) goto out_free;
  } else {
    collie__models_default(&c->models, 0);
    struct collie__net_cfg cfg = {.rank = 0,
                                  .size = 1,
                                  .peers = c->peers,
                                  .transport = transport,
                                  .token = c->token,
                                  .comm_hash = hash,
                                  .deadline_ns = deadline};
    COLLIE_CHECK_GOTO(collie__net_open(&cfg, &c->net), rc, out_free);
  }
  c->cls = collie__net_class(c->net);
  c->all_shm = c->cls == COLLIE_NET_CLASS_LOCAL;
  COLLIE_CHECK_GOTO(collie__topo_build(c->peers, size, &c->topo), rc, out_free);
  if (params->TUNING_FILE)
    COLLIE_CHECK_GOTO(collie__models_load(params->TUNING_FILE, &c->models), rc, out_free);
  if (params->FR_SIZE > 0 &&
      (c->flight = collie__flight_new((int)params->FR_SIZE, rank, size, hash))) {
    int *world = malloc((size_t)size * sizeof(*world));
    if (world) {
      for (int p = 0; p < size; p++) world[p] = c->peers[p].world_rank;
      collie__flight_set_world(c->flight, world);
      free(world);
    }
    const char **names = malloc((size_t)c->topo.nhosts * sizeof(*names));
    if (names) {
      for (int h = 0; h < c->topo.nhosts; h++)
        names[h] = c->peers[c->topo.by_host[c->topo.first[h]]].host;
      collie__flight_set_hosts(c->flight, c->topo.host, c->topo.nhosts, names);
      free(names);
    }
    collie__flight_watch(c->flight, params->LOG_DIR);
  }
  COLLIE_CHECK_GOTO(comm_measure_net(c, deadline), rc, out_free);
  COLLIE_CHECK_GOTO(collie__comm_register(c), rc, out_free);
  char hosts[160];
  collie__topo_describe(&c->topo, hosts, sizeof(hosts));
  /* What carries this rank's messages to another host (tcp or ofi, as net.c chose for that
   * peer), so that a user asking "did it use ofi?" reads it here. */
  const char *remote = NULL;
  for (int p = 0; p < size && !remote; p++)
    if (strcmp(c->peers[p].host, c->peers[rank].host) != 0)
      remote = collie__net_transport_of(c->net, p);
  COLLIE_INFO("INIT", "communicator ready (%s, transport %s%s%s; device code: %s)", hosts,
              transport, remote ? ", to other hosts " : "", remote ? remote : "",
              collie__cuda_device_code());
  *out = c;
  return COLLIE_SUCCESS;

out_free:
  /* Past the records' exchange the others wait for this rank in their
   * transports' setup: they read why it gave up in the store. Channels
   * already up: their peers may have finished their setup, and learn why
   * this rank did not (the cause is often a third rank's). */
  if (exchanged) collie__setup_failed(c->store, rank, collie__err_msg());
  collie__net_give_up(c->net, rc);
  collie__ring_close(ring);
  free(addrs);
  comm_free(c);
  return rc;
}

/* Hands the caller's store back where no store was made of it (a failed
 * check, a job of one rank): its release callback is called exactly once per
 * init either way. */
static void
comm_user_store_done(const collie_store_callbacks_t *user_store)
{
  if (user_store && user_store->release) user_store->release(user_store->ctx);
}

/* A world init through the caller's store: rank 0 draws a nonce and hands it
 * out under "nonce/<epoch>" (the k-th init of a process reads the k-th, as the
 * world-inits counter numbers them). Two callers' stores are two namespaces
 * with their own counters (torch gives each process group a fresh one), so
 * the nonce is what keeps the communicators' ids, and with them their shared
 * memory names, apart; without a job token it is the token too. */
static collie_result_t
comm_nonce_agree(collie__store_t *store, int rank, int64_t epoch, int64_t deadline, char *out,
                 size_t cap)
{
  char key[48];
  snprintf(key, sizeof(key), "nonce/%" PRId64, epoch);
  if (rank == 0) {
    unsigned char raw[16];
    if (collie__random_bytes(raw, sizeof(raw)) != 0)
      return collie__err(COLLIE_SYSTEM_ERROR, "init: no random bytes for a nonce: %s",
                         strerror(errno));
    for (size_t i = 0; i < sizeof(raw) && 2 * i + 2 < cap; i++)
      snprintf(out + 2 * i, 3, "%02x", raw[i]);
    return collie__store_set(store, key, out, strlen(out), deadline);
  }
  void *val = NULL;
  size_t len = 0;
  collie_result_t rc = collie__store_get(store, key, &val, &len, deadline);
  if (rc != COLLIE_SUCCESS) return rc;
  if (len == 0 || len >= cap) {
    free(val);
    return collie__err(COLLIE_REMOTE_ERROR,
                       "init: the nonce rank 0 handed out under \"%s\" "
                       "is %zu bytes (expected 1..%zu)",
                       key, len, cap - 1);
  }
  memcpy(out, val, len);
  out[len] = '\0';
  free(val);
  return COLLIE_SUCCESS;
}

/* Shared tail of both init entry points: everything is known and validated.
 * The store is the caller's (user_store, not NULL) or the one store_url names. */
static collie_result_t
comm_init_world(const struct collie__params *params, int rank, int size, const char *store_url,
                const collie_store_callbacks_t *user_store, collie_comm_t *parent,
                const char *token, int64_t timeout_ms, const char *transport, collie_comm_t **out)
{
  collie_result_t rc;
  collie__store_t *store = NULL;
  struct collie__peer me;
  char fallback_token[600], store_key[1024];
  memset(&me, 0, sizeof(me));
  collie__host_id(params->HOST_ID, me.host, sizeof(me.host));
  me.pid = (int32_t)getpid();
  /* A group of parent made apart from it: its ranks are named as parent names them. */
  me.world_rank = parent ? parent->peers[parent->rank].world_rank : rank;
  me.ncpus = collie__ncpus();
  collie__machine_id(me.machine, sizeof(me.machine));
  if (params->NET && !strcmp(params->NET, "auto"))
    me.fabric = collie__net_fabric_here(params->OFI_LIBRARY);
  if (!token || !*token) {
    snprintf(fallback_token, sizeof(fallback_token), "collie:%s", store_url ? store_url : "");
    token = fallback_token;
  }
  uint64_t hash = collie__hash64(token, strlen(token), 0);
  if (size > 1) {
    if (!user_store && (!store_url || !*store_url))
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "no store address: set COLLIE_STORE (tcp://host:port or file:///dir) or "
                         "MASTER_ADDR/MASTER_PORT, or pass collie_config_t.store");
    int64_t deadline = collie__deadline_after_ms(timeout_ms);
    if (user_store) {
      if ((rc = collie__store_user_open(user_store, &store)) != COLLIE_SUCCESS) {
        comm_user_store_done(user_store);
        return rc;
      }
    } else {
      snprintf(store_key, sizeof(store_key), "%s\n%s\n%d", store_url, token, rank);
      if (!(store = comm_store_cached(store_key))) {
        /* COLLIE_STORE_SERVE=0 says of COLLIE_STORE's address only that a
         * server runs there (collierun's); any other address rank 0 serves. */
        int serve = rank == 0 && (params->STORE_SERVE || !params->STORE ||
                                  strcmp(store_url, params->STORE) != 0);
        rc = collie__store_open_serving(store_url, rank, size, token, serve, deadline, &store);
        if (rc != COLLIE_SUCCESS) return rc;
      }
    }
    /* A process may init the world more than once; the k-th init of every rank
     * forms the same communicator. */
    char key[48];
    int64_t epoch = 0;
    snprintf(key, sizeof(key), "world-inits/%d", rank);
    rc = collie__store_add(store, key, 1, &epoch, deadline);
    if (rc != COLLIE_SUCCESS) goto out_release;
    if (user_store) {
      char nonce[33];
      rc = comm_nonce_agree(store, rank, epoch, deadline, nonce, sizeof(nonce));
      if (rc != COLLIE_SUCCESS) goto out_release;
      if (token == fallback_token) snprintf(fallback_token, sizeof(fallback_token), "%s", nonce);
      hash = collie__hash64(nonce, strlen(nonce), collie__hash64(token, strlen(token), 0));
    }
    hash = collie__hash64(&epoch, sizeof(epoch), hash);
  } else {
    comm_user_store_done(user_store); /* one rank: nobody to meet */
  }
  rc = collie__comm_create(params, token, timeout_ms, transport, store, hash, rank, size, &me, NULL,
                           parent ? parent->tele : NULL, out);
  if (rc == COLLIE_SUCCESS && store && !user_store) comm_store_remember(store_key, store);
out_release:
  if (store) collie__store_release(store);
  return rc;
}

collie_result_t
collie_comm_init(collie_comm_t **comm)
{
  struct collie__params params;
  struct collie__launch launch;
  collie_result_t rc;
  collie__log_context(NULL);
  if (!comm) return collie__err(COLLIE_INVALID_ARGUMENT, "collie_comm_init: comm is NULL");
  *comm = NULL;
  if ((rc = collie__params_load(&params, NULL)) != COLLIE_SUCCESS) return rc;
  collie__log_level = params.DEBUG;
  if ((rc = collie__launch_detect(&launch, NULL)) != COLLIE_SUCCESS) return rc;
  COLLIE_INFO("INIT", "launched by %s: rank %d of %d", launch.source, launch.rank, launch.size);
  return comm_init_world(&params, launch.rank, launch.size, launch.store, NULL, NULL, launch.token,
                         params.TIMEOUT_MS, params.TRANSPORT, comm);
}

/* The checks of a config that was initialised with COLLIE_CONFIG_INIT. */
static collie_result_t
config_check(const collie_config_t *cfg, const collie_store_callbacks_t *user_store,
             struct collie__params *params, const char **transport)
{
  collie_result_t rc;
  if (cfg->world_size <= 0)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "collie_comm_init_config: world_size = %d must be > 0", cfg->world_size);
  if (cfg->rank < 0 || cfg->rank >= cfg->world_size)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "collie_comm_init_config: rank = %d is outside 0..%d", cfg->rank,
                       cfg->world_size - 1);
  if (cfg->timeout_ms < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "collie_comm_init_config: timeout_ms = %lld must be >= 0 (0: default)",
                       (long long)cfg->timeout_ms);
  if (user_store && cfg->store)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "collie_comm_init_config: both store (\"%s\") and store_callbacks are set; "
                       "give one",
                       cfg->store);
  if ((rc = collie__params_load(params, NULL)) != COLLIE_SUCCESS) return rc;
  collie__log_level = params->DEBUG;
  *transport = params->TRANSPORT;
  if (cfg->transport) {
    char choices[128];
    if (!(*transport = collie__net_transport_name(cfg->transport)))
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "collie_comm_init_config: transport = \"%s\" is not %s", cfg->transport,
                         collie__net_transport_choices(choices, sizeof(choices)));
  }
  return COLLIE_SUCCESS;
}

collie_result_t
collie_comm_init_config(const collie_config_t *cfg, collie_comm_t **comm)
{
  struct collie__params params;
  const char *transport = NULL;
  collie__log_context(NULL);
  if (!comm) return collie__err(COLLIE_INVALID_ARGUMENT, "collie_comm_init_config: comm is NULL");
  *comm = NULL;
  if (!cfg) return collie__err(COLLIE_INVALID_ARGUMENT, "collie_comm_init_config: cfg is NULL");
  /* A cfg from an older header ends before store_callbacks. */
  size_t known = offsetof(collie_config_t, store_callbacks);
  if (cfg->magic != COLLIE_CONFIG_MAGIC || cfg->size < known)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "collie_comm_init_config: cfg was not initialised with COLLIE_CONFIG_INIT "
                       "(magic 0x%x, size %zu)",
                       cfg->magic, cfg->size);
#define CFG_HAS(field) (cfg->size >= offsetof(collie_config_t, field) + sizeof(cfg->field))
  const collie_store_callbacks_t *user_store =
      CFG_HAS(store_callbacks) ? cfg->store_callbacks : NULL;
  collie_comm_t *parent = CFG_HAS(parent) ? cfg->parent : NULL;
  int wire = CFG_HAS(wire) ? cfg->wire : COLLIE_WIRE_DEFAULT;
#undef CFG_HAS
  collie_result_t rc = config_check(cfg, user_store, &params, &transport);
  if (rc == COLLIE_SUCCESS && (wire < 0 || wire >= COLLIE_WIRE_COUNT_))
    rc = collie__err(COLLIE_INVALID_ARGUMENT,
                     "collie_comm_init_config: wire = %d is not a COLLIE_WIRE_* value", wire);
  if (wire != COLLIE_WIRE_DEFAULT) params.WIRE = wire;
  if (rc == COLLIE_SUCCESS && parent)
    rc = collie__comm_check(parent, "collie_comm_init_config: parent");
  if (rc != COLLIE_SUCCESS) {
    comm_user_store_done(user_store);
    return rc;
  }
  return comm_init_world(&params, cfg->rank, cfg->world_size,
                         cfg->store ? cfg->store : params.STORE, user_store, parent,
                         cfg->job_token ? cfg->job_token : params.JOB_TOKEN,
                         cfg->timeout_ms ? cfg->timeout_ms : params.TIMEOUT_MS, transport, comm);
}

/* ---- Split ---- */

struct comm_split_rec {
  int32_t color, key;
};

collie_result_t
collie_comm_split(collie_comm_t *comm, int color, int key, collie_comm_t **out)
{
  collie_result_t rc = collie__comm_check(comm, "collie_comm_split");
  if (rc != COLLIE_SUCCESS) return rc;
  if (!out) return collie__err(COLLIE_INVALID_ARGUMENT, "collie_comm_split: out is NULL");
  *out = NULL;
  if (color < COLLIE_SPLIT_NONE)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "collie_comm_split: color = %d must be >= 0 or COLLIE_SPLIT_NONE", color);
  if (comm->in_group)
    return collie__err(COLLIE_INVALID_USAGE, "collie_comm_split: called inside a group");
  /* The split's store traffic is ordered after this rank's async work. */
  if ((rc = collie__work_drain(comm, comm->timeout_ms)) != COLLIE_SUCCESS) {
    collie__err_prefix("collie_comm_split");
    return collie__comm_poison(comm, rc);
  }
  if ((rc = collie__comm_check(comm, "collie_comm_split")) != COLLIE_SUCCESS) return rc;

  uint32_t seq = ++comm->split_seq;
  struct comm_split_rec mine = {color, key}, *all = calloc((size_t)comm->size, sizeof(*all));
  int *members = calloc((size_t)comm->size, sizeof(int));
  if (!all || !members) {
    rc = collie__err(COLLIE_SYSTEM_ERROR, "collie_comm_split: out of memory");
    goto out_free;
  }
  /* Everyone's (color, key) by an allgather over the parent's own
   * channels, not the store: a rank that dies or freezes instead of
   * splitting is then found and named as in any collective (within the
   * transports' liveness checks), not after a store key's whole deadline;
   * and the split leaves nothing in the store. */
  collie__work_own_net(comm);
  rc = collie__comm_exchange(comm, &mine, all, sizeof(mine));
  collie__work_release_net(comm);
  if (rc != COLLIE_SUCCESS) goto out_poison;
  if (color == COLLIE_SPLIT_NONE) goto out_free;

  /* Members of my color, ordered by (key, parent rank): insertion sort keeps it
   * simple and stable; split is not on the hot path. */
  int n = 0, newrank = -1;
  for (int p = 0; p < comm->size; p++) {
    if (all[p].color != color) continue;
    int i = n++;
    while (i > 0 && all[members[i - 1]].key > all[p].key) {
      members[i] = members[i - 1];
      i--;
    }
    members[i] = p;
  }
  for (int i = 0; i < n; i++)
    if (members[i] == comm->rank) newrank = i;
  uint64_t h = collie__hash64(&seq, sizeof(seq), comm->hash);
  int32_t c32 = color;
  h = collie__hash64(&c32, sizeof(c32), h);
  /* The child's keys live beside the parent's in the job store, under its own id;
   * it keeps the parent's transport choice. */
  /* The members' records, so that one that dies before it publishes its
   * own (after the exchange above) is named at once. */
  struct collie__peer *recs = malloc((size_t)n * sizeof(*recs));
  if (!recs) {
    rc = collie__err(COLLIE_SYSTEM_ERROR, "collie_comm_split: out of memory");
    goto out_free;
  }
  for (int i = 0; i < n; i++) recs[i] = comm->peers[members[i]];
  struct collie__comm_known known = {recs, 0};
  rc = collie__comm_create(&comm->params, comm->token, comm->timeout_ms, comm->transport,
                           comm->job_store, h, newrank, n, &comm->peers[comm->rank], &known,
                           comm->tele, out);
  free(recs);
  collie__log_context(comm->ctx);
  if (rc != COLLIE_SUCCESS) goto out_poison;
  goto out_free;

out_poison:
  collie__err_prefix("collie_comm_split (color %d, key %d)", color, key);
  collie__comm_poison(comm, rc);
out_free:
  free(all);
  free(members);
  return rc;
}

/* ---- Destroy, abort, accessors ---- */

collie_result_t
collie_comm_destroy(collie_comm_t *comm)
{
  if (!comm) return collie__err(COLLIE_INVALID_ARGUMENT, "collie_comm_destroy: comm is NULL");
  if (!collie__comm_unregister(comm))
    return collie__err(COLLIE_INVALID_USAGE,
                       "collie_comm_destroy: communicator %p was destroyed or never initialised",
                       (void *)comm);
  collie__log_context(comm->ctx);
  if (comm->graph_comm) {
    /* Its graphs' replays are over (docs/gpu.md: a communicator outlives the
     * replays of the graphs it was captured into). */
    collie_comm_destroy(comm->graph_comm);
    comm->graph_comm = NULL;
    collie__log_context(comm->ctx);
  }
  collie__capture_free_all(comm, 1);
  if (comm->workq) {
    /* Async work first (each op bounded by its deadline); a poisoned comm
     * waits for nothing: abort makes the running op fail, the rest fail fast. */
    if (collie__comm_poisoned(comm) == COLLIE_SUCCESS &&
        collie__work_drain(comm, comm->timeout_ms + 2000) != COLLIE_SUCCESS) {
      collie__err_prefix("collie_comm_destroy");
      collie__comm_poison(comm, COLLIE_TIMEOUT);
    }
    collie__work_finish_posted(comm); /* sends and receives still posted */
    if (collie__comm_poisoned(comm) != COLLIE_SUCCESS) collie__net_abort(comm->net);
    collie__work_stop(comm);
  }
  if (collie__comm_poisoned(comm) == COLLIE_SUCCESS && comm->size > 1) {
    /* A closing barrier: no rank tears down channels (or rank 0 its store)
     * while a peer still finishes its last operation over them. */
    struct collie__call call = {.kind = COLLIE_KIND_BARRIER,
                                .algo = COLLIE_ALGO_DISSEMINATION,
                                .seq = comm->seq++,
                                .step0 = COLLIE_STEP_CLOSING,
                                .rank = comm->rank,
                                .size = comm->size,
                                .net = comm->net,
                                .deadline_ns = collie__deadline_after_ms(comm->timeout_ms)};
    if (collie__algo_barrier_dissemination.run(&call) != COLLIE_SUCCESS)
      COLLIE_WARN("INIT", "destroy: closing barrier failed (%s); closing anyway",
                  collie__err_msg());
    else if (comm->rank == 0 && comm->store &&
             collie__store_del_prefix(comm->store, "", collie__deadline_after_ms(2000)) !=
                 COLLIE_SUCCESS)
      /* Everyone is past its last use of the communicator's keys: they go,
       * so that a job of many splits does not grow rank 0's store. */
      COLLIE_INFO("INIT", "destroy: could not remove the communicator's store keys (%s)",
                  collie__err_msg());
  } else if (collie__comm_poisoned(comm) != COLLIE_SUCCESS) {
    collie__net_abort(comm->net);
  }
  comm_free(comm);
  collie__log_context(NULL);
  return COLLIE_SUCCESS;
}

/* collie_comm_abort and collie_comm_abort_reason (fn: which, for messages):
 * why, when given, goes to the peers first, unless the communicator failed
 * already (the peers were told its first cause then). */
static collie_result_t
comm_abort(collie_comm_t *comm, const char *why, const char *fn)
{
  collie_result_t rc = collie__comm_check(comm, fn);
  if (rc == COLLIE_INVALID_USAGE && comm && collie__comm_live(comm) &&
      collie__comm_poisoned(comm) != COLLIE_SUCCESS)
    rc = COLLIE_SUCCESS; /* aborting a poisoned communicator is fine */
  if (rc != COLLIE_SUCCESS) return rc;
  if (why && *why && collie__comm_poisoned(comm) == COLLIE_SUCCESS)
    collie__net_tell(comm->net, why);
  if (comm->graph_comm) comm_abort(comm->graph_comm, why, fn); /* a replay waiting fails too */
  collie__net_abort(comm->net);
  collie__err(COLLIE_INVALID_USAGE, "the communicator was aborted by %s", fn);
  collie__comm_poison(comm, COLLIE_INVALID_USAGE);
  collie__err_clear();
  return COLLIE_SUCCESS;
}

collie_result_t
collie_comm_abort(collie_comm_t *comm)
{
  return comm_abort(comm, NULL, "collie_comm_abort");
}

collie_result_t
collie_comm_abort_reason(collie_comm_t *comm, const char *why)
{
  return comm_abort(comm, why, "collie_comm_abort_reason");
}

int
collie_comm_rank(const collie_comm_t *comm)
{
  return comm && collie__comm_live(comm) ? comm->rank : -1;
}

int
collie_comm_size(const collie_comm_t *comm)
{
  return comm && collie__comm_live(comm) ? comm->size : -1;
}

/* ---- Flight recorder ---- */

collie_result_t
collie_flight_dump(collie_comm_t *comm)
{
  if (!comm) return collie__err(COLLIE_INVALID_ARGUMENT, "collie_flight_dump: comm is NULL");
  if (!collie__comm_live(comm))
    return collie__err(COLLIE_INVALID_USAGE,
                       "collie_flight_dump: communicator %p was destroyed or never initialised",
                       (void *)comm);
  if (!comm->flight)
    return collie__err(COLLIE_INVALID_USAGE,
                       "collie_flight_dump: the flight recorder is off (COLLIE_FR_SIZE=0)");
  return collie__flight_dump(comm->flight, comm->params.LOG_DIR, "user");
}
