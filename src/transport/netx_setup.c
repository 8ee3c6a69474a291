/*
 * netx_setup.c - opening collie's network transport over a network device
 * (netx_int.h): the device's endpoint, its address published in the
 * communicator's store as "<name>/addr/<rank>", every peer's address made
 * reachable, and a hello to and from every peer carrying the job token
 * (the accept of a connectionless device). Waits look between slices at
 * whether a peer of this host died and whether a rank gave up on the
 * setup (setup_fail.c), and end by the setup deadline naming the ranks
 * that never came.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "transport/netx_int.h"
#include "util/util.h"

#define NETX_SLICE_NS (100 * 1000000LL)

int
collie__net_fabric_here(const char *library)
{
  struct collie__netdev_cfg dcfg = {.library = library};
  int hw = 0;
  return collie__ofi_netdev.available(&dcfg, NULL, 0, &hw) && hw;
}

int
collie__netx_can_connect(const struct collie__net_cfg *cfg, int peer)
{
  /* Named, it serves every peer (and says at open why it cannot); under
   * auto, the peers of other hosts where COLLIE_NET names it, or, with
   * COLLIE_NET=auto, where both ranks found a hardware fabric (their
   * records say so). Both ranks of a pair answer alike: hosts and fabrics
   * from the shared records, the settings every rank must share. */
  if (!cfg->transport) return 0;
  if (!strcmp(cfg->transport, "ofi")) return 1;
  if (strcmp(cfg->transport, "auto") != 0 || !cfg->net || !cfg->peers) return 0;
  const struct collie__peer *me = &cfg->peers[cfg->rank], *p = &cfg->peers[peer];
  if (!strcmp(p->host, me->host)) return 0; /* shared memory's */
  if (!strcmp(cfg->net, "ofi")) return 1;
  return !strcmp(cfg->net, "auto") && me->fabric && p->fabric;
}

static collie_result_t
netx_gave_up(const struct collie__net_cfg *cfg, const char *name, int who, const char *why)
{
  if (who < 0 || who >= cfg->size)
    return collie__err(COLLIE_REMOTE_ERROR, "%s: a rank gave up on this communicator's setup: %s",
                       name, why);
  return collie__err(COLLIE_REMOTE_ERROR,
                     "%s: rank %d (world rank %d) gave up on this communicator's setup: %s", name,
                     who, cfg->peers[who].world_rank, why);
}

/* Between slices of a wait: a dead peer of this host, or a rank that gave
 * up, ends it. */
static collie_result_t
netx_look(const struct collie__net_cfg *cfg, struct netx_xport *x, struct netx_chan *c,
          const char *doing)
{
  if (c && c->near && collie__proc_dead(c->pid)) {
    char who[160];
    collie__netx_peer_name(x, c, who, sizeof(who));
    return collie__err(COLLIE_REMOTE_ERROR, "%s: %s died %s", x->ops->name, who, doing);
  }
  char why[COLLIE_ERRMSG_LEN];
  int quit = -1;
  if (collie__setup_gave_up(cfg->store, &quit, why, sizeof(why)))
    return netx_gave_up(cfg, x->ops->name, quit, why);
  return COLLIE_SUCCESS;
}

static collie_result_t
netx_fetch_addr(const struct collie__net_cfg *cfg, struct netx_xport *x, struct netx_chan *c)
{
  char key[64], who[160];
  collie__fmt(key, sizeof(key), "%s/addr/%d", x->ops->name, c->peer);
  collie__netx_peer_name(x, c, who, sizeof(who));
  void *val = NULL;
  size_t len = 0;
  collie_result_t rc;
  for (;;) {
    int64_t end = collie__now_ns() + NETX_SLICE_NS;
    if (end > cfg->deadline_ns) end = cfg->deadline_ns;
    rc = collie__store_get(cfg->store, key, &val, &len, end);
    if (rc != COLLIE_TIMEOUT || end >= cfg->deadline_ns) break;
    if ((rc = netx_look(cfg, x, c, "before it published its address")) != COLLIE_SUCCESS) return rc;
  }
  if (rc != COLLIE_SUCCESS) {
    collie__err_prefix("%s: %s never published its address", x->ops->name, who);
    return rc;
  }
  const char *prov = val;
  size_t plen = val ? strnlen(prov, len) : 0;
  if (plen == len || plen > NETX_PROV_MAX || len - plen - 1 == 0 ||
      len - plen - 1 > COLLIE_NETDEV_ADDR_MAX) {
    free(val);
    return collie__err(COLLIE_REMOTE_ERROR,
                       "%s: %s published a malformed address of %zu bytes under %s", x->ops->name,
                       who, len, key);
  }
  const char *mine = x->ops->provider(x->dev);
  if (strcmp(prov, mine) != 0) {
    rc = collie__err(COLLIE_INVALID_USAGE,
                     "%s: %s runs libfabric's provider %s, this rank %s: every rank must use "
                     "the same (FI_PROVIDER)",
                     x->ops->name, who, prov, mine);
    free(val);
    return rc;
  }
  rc = x->ops->connect(x->dev, c->peer, (char *)val + plen + 1, len - plen - 1);
  free(val);
  return rc;
}

/* Runs the device until every peer's hello came, or the deadline. */
static collie_result_t
netx_await_hellos(const struct collie__net_cfg *cfg, struct netx_xport *x)
{
  int64_t next_look = collie__now_ns() + NETX_SLICE_NS;
  for (;;) {
    collie_result_t rc = x->ops->progress(x->dev);
    if (rc != COLLIE_SUCCESS) return rc;
    if (x->failed != COLLIE_SUCCESS) {
      collie__err_set_text(x->fail_msg);
      return x->failed;
    }
    int missing = 0;
    for (int i = 0; i < x->nchan; i++) {
      struct netx_chan *c = &x->chans[i];
      missing += !c->hello;
      if (!c->hello && c->aborted) { /* it gave up on this setup, and said why */
        char who[160];
        collie__netx_peer_name(x, c, who, sizeof(who));
        return c->why[0]
                   ? collie__err(COLLIE_REMOTE_ERROR,
                                 "%s: %s gave up on this communicator's setup: %s", x->ops->name,
                                 who, c->why)
                   : collie__err(COLLIE_REMOTE_ERROR, "%s: %s gave up on this communicator's setup",
                                 x->ops->name, who);
      }
    }
    if (!missing) return COLLIE_SUCCESS;
    int64_t now = collie__now_ns();
    if (now >= cfg->deadline_ns) {
      char list[256] = "";
      size_t used = 0;
      for (int i = 0; i < x->nchan && used + 16 < sizeof(list); i++)
        if (!x->chans[i].hello)
          used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%d", used ? ", " : "",
                                   x->chans[i].peer);
      return collie__err(COLLIE_TIMEOUT, "%s (%s): setup timed out: no hello from rank(s) %s of %d",
                         x->ops->name, x->ops->describe(x->dev), list, cfg->size);
    }
    if (now >= next_look) {
      next_look = now + NETX_SLICE_NS;
      for (int i = 0; i < x->nchan; i++)
        if (!x->chans[i].hello &&
            (rc = netx_look(cfg, x, &x->chans[i], "before its hello")) != COLLIE_SUCCESS)
          return rc;
    }
    collie__sleep_ns(20000);
  }
}

static collie_result_t
netx_setup(const struct collie__net_cfg *cfg, const int *peers, int npeers, struct netx_xport *x)
{
  collie_result_t rc;
  x->rank = cfg->rank;
  x->size = cfg->size;
  x->comm = cfg->comm_hash;
  x->sink = cfg->sink;
  x->failed = COLLIE_SUCCESS;
  x->token = cfg->token;
  if ((x->job_store = cfg->job_store) != NULL) collie__store_retain(x->job_store);
  if (cfg->token && strlen(cfg->token) > NETX_TOKEN_MAX)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: the job token is longer than %d bytes",
                       x->ops->name, NETX_TOKEN_MAX);
  x->nchan = npeers;
  x->chans = calloc((size_t)(npeers ? npeers : 1), sizeof(*x->chans));
  x->chan_of = malloc((size_t)cfg->size * sizeof(int));
  x->arena = aligned_alloc(64, (size_t)(NETX_RX_BUFS + NETX_TX_BUFS) * NETX_CTRL);
  if (!x->chans || !x->chan_of || !x->arena)
    return collie__err(COLLIE_SYSTEM_ERROR, "%s: out of memory opening channels", x->ops->name);
  for (int i = 0; i < cfg->size; i++) x->chan_of[i] = -1;
  const struct collie__peer *me = &cfg->peers[cfg->rank];
  for (int i = 0; i < npeers; i++) {
    struct netx_chan *c = &x->chans[i];
    const struct collie__peer *p = &cfg->peers[peers[i]];
    c->peer = peers[i];
    c->world_rank = p->world_rank;
    c->pid = p->pid;
    c->near = !strcmp(p->host, me->host) && me->pid == (int32_t)getpid();
    collie__peer_hostname(p, me, c->host, sizeof(c->host));
    x->chan_of[peers[i]] = i;
  }
  struct collie__netdev_cfg dcfg = {.rank = cfg->rank,
                                    .size = cfg->size,
                                    .library = cfg->ofi_library,
                                    .reg_all = cfg->ofi_mr_all};
  char why[256];
  if (!x->ops->available(&dcfg, why, sizeof(why), NULL))
    return collie__err(COLLIE_UNSUPPORTED, "COLLIE_TRANSPORT=%s: %s", x->ops->name, why);
  /* Published: the provider's name, a NUL, then the endpoint's address. */
  unsigned char pub[NETX_PROV_MAX + 1 + COLLIE_NETDEV_ADDR_MAX];
  size_t addrlen = COLLIE_NETDEV_ADDR_MAX;
  if ((rc = x->ops->listen(&dcfg, &x->dev, pub + NETX_PROV_MAX + 1, &addrlen)) != COLLIE_SUCCESS)
    return rc;
  size_t plen = strlen(x->ops->provider(x->dev));
  if (plen > NETX_PROV_MAX) plen = NETX_PROV_MAX;
  memcpy(pub, x->ops->provider(x->dev), plen);
  pub[plen] = '\0';
  memmove(pub + plen + 1, pub + NETX_PROV_MAX + 1, addrlen);
  x->need_reg = x->ops->need_reg(x->dev);
  x->inject_max = x->ops->inject ? x->ops->inject_max(x->dev) : 0;
  size_t arena_len = (size_t)(NETX_RX_BUFS + NETX_TX_BUFS) * NETX_CTRL;
  if (x->need_reg &&
      (rc = x->ops->reg(x->dev, x->arena, arena_len, &x->arena_mr)) != COLLIE_SUCCESS)
    return rc;
  for (int i = 0; i < NETX_TX_BUFS; i++) {
    struct netx_buf *b = &x->tx[i];
    b->x = x;
    b->mem = x->arena + (size_t)(NETX_RX_BUFS + i) * NETX_CTRL;
    b->op.done = collie__netx_tx_done;
    b->next_free = x->tx_free;
    x->tx_free = b;
  }
  for (int i = 0; i < NETX_RX_BUFS; i++) {
    struct netx_buf *b = &x->rx[i];
    b->x = x;
    b->mem = x->arena + (size_t)i * NETX_CTRL;
    b->op.done = collie__netx_rx_done;
    if ((rc = x->ops->recv_any(x->dev, b->mem, NETX_CTRL, x->arena_mr, &b->op)) != COLLIE_SUCCESS)
      return rc == COLLIE_NETDEV_AGAIN
                 ? collie__err(COLLIE_SYSTEM_ERROR,
                               "%s (%s): the device takes fewer than %d receives", x->ops->name,
                               x->ops->describe(x->dev), NETX_RX_BUFS)
                 : rc;
  }
  char key[64];
  collie__fmt(key, sizeof(key), "%s/addr/%d", x->ops->name, cfg->rank);
  if ((rc = collie__store_set(cfg->store, key, pub, plen + 1 + addrlen, cfg->deadline_ns)) !=
      COLLIE_SUCCESS)
    return rc;
  /* Each peer's hello goes as soon as its address is known, so that a peer
   * this rank reached is told if the setup fails on another (netx_open). */
  size_t toklen = cfg->token ? strlen(cfg->token) : 0;
  for (int i = 0; i < npeers; i++) {
    struct netx_chan *c = &x->chans[i];
    if ((rc = netx_fetch_addr(cfg, x, c)) != COLLIE_SUCCESS) return rc;
    for (;;) {
      rc = collie__netx_ctrl(x, c, NETX_HELLO, 0, 0, 0, cfg->token, (uint32_t)toklen);
      if (rc != COLLIE_NETDEV_AGAIN) break;
      if ((rc = x->ops->progress(x->dev)) != COLLIE_SUCCESS) return rc;
      if (collie__now_ns() >= cfg->deadline_ns) {
        char who[160];
        collie__netx_peer_name(x, c, who, sizeof(who));
        return collie__err(COLLIE_TIMEOUT, "%s: setup timed out: no room to send %s our hello",
                           x->ops->name, who);
      }
    }
    if (rc != COLLIE_SUCCESS) return rc;
    c->greeted = 1;
  }
  return netx_await_hellos(cfg, x);
}

collie_result_t
collie__netx_open(const struct collie__net_cfg *cfg, const int *peers, int npeers,
                  struct collie__xport **out)
{
  return collie__netx_open_on(&collie__ofi_netdev, cfg, peers, npeers, out);
}

collie_result_t
collie__netx_open_on(const struct collie__netdev_ops *dev, const struct collie__net_cfg *cfg,
                     const int *peers, int npeers, struct collie__xport **out)
{
  if (npeers > 0 && (!cfg->store || !cfg->peers || !peers))
    return collie__err(COLLIE_INTERNAL_ERROR, "ofi: open without %s",
                       !cfg->store   ? "the store"
                       : !cfg->peers ? "peer records"
                                     : "peers");
  struct netx_xport *x = calloc(1, sizeof(*x));
  if (!x) return collie__err(COLLIE_SYSTEM_ERROR, "ofi: out of memory opening channels");
  x->ops = dev;
  atomic_init(&x->aborted, 0);
  collie_result_t rc = netx_setup(cfg, peers, npeers, x);
  if (rc != COLLIE_SUCCESS) {
    /* The peers this rank said hello to learn why it gives up (the
     * thread's message), rather than only that it never comes. */
    char why[COLLIE_ERRMSG_LEN];
    collie__fmt(why, sizeof(why), "%s", collie__err_msg());
    if (x->dev) collie__netx_tell_greeted(x, why);
    collie__netx_free(x);
    collie__err_set_text(why);
    return rc;
  }
  COLLIE_INFO("INIT", "%s: %s, %d peer(s)%s", x->ops->name, x->ops->describe(x->dev), npeers,
              x->need_reg ? ", every buffer registered" : "");
  *out = (struct collie__xport *)x;
  return COLLIE_SUCCESS;
}
