/*
 * ofi.c - the libfabric (OFI) network device behind netdev.h: one RDM
 * endpoint per communicator, tagged and untagged messages, an address
 * vector indexed by communicator rank, a completion queue driven by
 * progress() (manual progress) with its wait descriptor where the provider
 * has one, and registrations in the modes a provider asks for.
 *
 * libfabric.so.1 is opened at run time (dlopen): libcollie links only libc
 * and pthreads, and a machine without libfabric loses this device alone,
 * which then says why. Only six functions are the library's own symbols;
 * everything else in libfabric's API is an inline call through the
 * objects' operation tables, compiled here from its headers. Without those
 * headers at build time the device is built as "not available" (below).
 */
#include "transport/netdev.h"

#include <stdio.h>
#include <string.h>

#include "util/error.h"
#include "util/util.h"

/* Whether a provider name ("tcp;ofi_rxm", "verbs;ofi_rxm", "efa") is made
 * only of software providers: sockets, UDP or shared memory, and the
 * utility layers over them. */
int
collie__ofi_software(const char *prov)
{
  static const char *const soft[] = {"tcp", "sockets", "udp", "shm", "sm2",  "ofi_rxm", "ofi_rxd",
                                     "net", "rxm",     "rxd", "lnx", "hook", "ofi_hook"};
  if (!prov || !*prov) return 1;
  char buf[128];
  collie__fmt(buf, sizeof(buf), "%s", prov ? prov : "");
  char *save = NULL;
  for (char *tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
    int found = 0;
    for (size_t i = 0; i < sizeof(soft) / sizeof(soft[0]); i++)
      if (!strcmp(tok, soft[i]) || !strncmp(tok, "ofi_hook", 8)) found = 1;
    if (!found) return 0;
  }
  return 1;
}

#ifdef COLLIE_HAVE_LIBFABRIC

#include <dlfcn.h>
#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <stdlib.h>

_Static_assert(sizeof(((struct collie__netdev_op *)0)->dev) >= sizeof(struct fi_context2),
               "an op's device space holds libfabric's FI_CONTEXT2");

/* The library's own symbols, resolved once. */
static struct {
  int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
                 struct fi_info **);
  void (*freeinfo)(struct fi_info *);
  struct fi_info *(*dupinfo)(const struct fi_info *);
  int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
  const char *(*strerror)(int);
  uint32_t (*version)(void);
} lib;

/* What the first look found, for every communicator after it. */
static pthread_mutex_t ofi_lock = PTHREAD_MUTEX_INITIALIZER;
static int ofi_looked;
static int ofi_ok;
static int ofi_hw;
static char ofi_why[256];
static struct fi_info *ofi_pick; /* the provider's answer every endpoint starts from */
static uint32_t ofi_version;

struct collie__netdev {
  struct fi_info *info;
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_av *av;
  struct fid_cq *cq;
  struct fid_ep *ep;
  int fd; /* the completion queue's wait descriptor, or -1 */
  int rank, size;
  fi_addr_t *addr; /* by comm rank; FI_ADDR_NOTAVAIL until connect */
  /* By comm rank: 1 once the transport said the peer aborted (gone). rxm
   * of libfabric 1.17 crashed in fi_trecv directed at such a peer (1 in 12
   * runs of mismatch_count_ofi_3), so none is posted. */
  unsigned char *gone;
  int mr_local;   /* every buffer needs a descriptor */
  size_t addrlen; /* of this endpoint's address: every peer's is as long */
  uint64_t next_key;
  char desc[160];
};

struct collie__netdev_mr {
  struct fid_mr *mr;
  void *desc;
};

/* The hints every endpoint asks with: tagged and untagged messages, receives
 * directed at a source, RDM; and every memory-registration mode collie
 * honours, so that providers which need them are offered. */
static struct fi_info *
ofi_hints(void)
{
  struct fi_info *h = lib.dupinfo(NULL);
  if (!h) return NULL;
  h->caps = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV;
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->ep_attr->type = FI_EP_RDM;
  h->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
  h->domain_attr->control_progress = FI_PROGRESS_MANUAL;
  h->tx_attr->msg_order = FI_ORDER_SAS;
  h->rx_attr->msg_order = FI_ORDER_SAS;
  return h;
}

static void
ofi_look(const char *name)
{
  if (!name || !*name) name = "libfabric.so.1";
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    collie__fmt(ofi_why, sizeof(ofi_why), "%s does not load (%s)", name, dlerror());
    return;
  }
  lib.getinfo = (int (*)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
                         struct fi_info **))dlsym(h, "fi_getinfo");
  lib.freeinfo = (void (*)(struct fi_info *))dlsym(h, "fi_freeinfo");
  lib.dupinfo = (struct fi_info * (*)(const struct fi_info *)) dlsym(h, "fi_dupinfo");
  lib.fabric =
      (int (*)(struct fi_fabric_attr *, struct fid_fabric **, void *))dlsym(h, "fi_fabric");
  lib.strerror = (const char *(*)(int))dlsym(h, "fi_strerror");
  lib.version = (uint32_t(*)(void))dlsym(h, "fi_version");
  if (!lib.getinfo || !lib.freeinfo || !lib.dupinfo || !lib.fabric || !lib.strerror ||
      !lib.version) {
    collie__fmt(ofi_why, sizeof(ofi_why), "%s lacks libfabric's fi_getinfo and friends", name);
    return;
  }
  /* Ask in the version these headers describe, or the library's if older. */
  uint32_t have = lib.version(), want = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
  ofi_version = have < want ? have : want;
  if (ofi_version < FI_VERSION(1, 9)) {
    collie__fmt(ofi_why, sizeof(ofi_why), "%s is libfabric %u.%u; collie needs 1.9 or later", name,
                FI_MAJOR(have), FI_MINOR(have));
    return;
  }
  struct fi_info *hints = ofi_hints(), *got = NULL;
  if (!hints) {
    collie__fmt(ofi_why, sizeof(ofi_why), "libfabric: out of memory");
    return;
  }
  int rc = lib.getinfo(ofi_version, NULL, NULL, 0, hints, &got);
  lib.freeinfo(hints);
  if (rc != 0 || !got) {
    const char *prov = getenv("FI_PROVIDER");
    collie__fmt(ofi_why, sizeof(ofi_why),
                "no libfabric provider%s%s%s offers reliable tagged messages (fi_getinfo: %s)",
                prov ? " matching FI_PROVIDER=" : "", prov ? prov : "", prov ? "" : " here",
                lib.strerror(-rc));
    return;
  }
  /* libfabric lists its best first; keep that one alone. */
  ofi_pick = lib.dupinfo(got);
  lib.freeinfo(got);
  if (!ofi_pick) {
    collie__fmt(ofi_why, sizeof(ofi_why), "libfabric: out of memory");
    return;
  }
  ofi_hw = !collie__ofi_software(ofi_pick->fabric_attr->prov_name);
  ofi_ok = 1;
}

static int
ofi_available(const struct collie__netdev_cfg *cfg, char *why, size_t len, int *hardware)
{
  pthread_mutex_lock(&ofi_lock);
  if (!ofi_looked) ofi_look(cfg ? cfg->library : NULL);
  ofi_looked = 1;
  pthread_mutex_unlock(&ofi_lock);
  if (hardware) *hardware = ofi_ok && ofi_hw;
  if (!ofi_ok && why) collie__fmt(why, len, "%s", ofi_why);
  return ofi_ok;
}

/* A libfabric failure as collie's error: what was called and its text. */
static collie_result_t
ofi_err(collie_result_t code, const struct collie__netdev *d, const char *what, int rc)
{
  return collie__err(code, "ofi (%s): %s failed: %s", d ? d->desc : "libfabric", what,
                     lib.strerror(rc < 0 ? -rc : rc));
}

static void
ofi_close(struct collie__netdev *d)
{
  if (!d) return;
  if (d->ep && d->cq) { /* what completed is read first: rxm frees its requests then */
    struct fi_cq_tagged_entry e[16];
    struct fi_cq_err_entry ee;
    for (int i = 0; i < 64; i++) {
      ssize_t n = fi_cq_read(d->cq, e, 16);
      if (n == -FI_EAVAIL) {
        memset(&ee, 0, sizeof(ee));
        (void)fi_cq_readerr(d->cq, &ee, 0);
      } else if (n <= 0) {
        break;
      }
    }
  }
  if (d->ep) fi_close(&d->ep->fid);
  if (d->av) fi_close(&d->av->fid);
  if (d->cq) fi_close(&d->cq->fid);
  if (d->domain) fi_close(&d->domain->fid);
  if (d->fabric) fi_close(&d->fabric->fid);
  if (d->info) lib.freeinfo(d->info);
  free(d->addr);
  free(d->gone);
  free(d);
}

static collie_result_t
ofi_listen(const struct collie__netdev_cfg *cfg, struct collie__netdev **out, void *addr,
           size_t *addrlen)
{
  char why[256];
  if (!ofi_available(cfg, why, sizeof(why), NULL))
    return collie__err(COLLIE_UNSUPPORTED, "ofi transport: %s", why);
  struct collie__netdev *d = calloc(1, sizeof(*d));
  if (!d || !(d->addr = malloc((size_t)cfg->size * sizeof(*d->addr))) ||
      !(d->gone = calloc((size_t)cfg->size, 1))) {
    if (d) free(d->addr);
    free(d);
    return collie__err(COLLIE_SYSTEM_ERROR, "ofi: out of memory opening an endpoint");
  }
  d->fd = -1;
  d->rank = cfg->rank;
  d->size = cfg->size;
  for (int i = 0; i < cfg->size; i++) d->addr[i] = FI_ADDR_NOTAVAIL;
  collie_result_t rc = COLLIE_SUCCESS;
  int r;
  d->info = lib.dupinfo(ofi_pick);
  if (!d->info) {
    rc = collie__err(COLLIE_SYSTEM_ERROR, "ofi: out of memory opening an endpoint");
    goto fail;
  }
  collie__fmt(d->desc, sizeof(d->desc), "%s on %s", d->info->fabric_attr->prov_name,
              d->info->domain_attr->name ? d->info->domain_attr->name : "?");
  d->mr_local = (d->info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
  if (cfg->reg_all) d->mr_local = 1;
  if ((r = lib.fabric(d->info->fabric_attr, &d->fabric, NULL)) != 0) {
    rc = ofi_err(COLLIE_SYSTEM_ERROR, d, "fi_fabric", r);
    goto fail;
  }
  if ((r = fi_domain(d->fabric, d->info, &d->domain, NULL)) != 0) {
    rc = ofi_err(COLLIE_SYSTEM_ERROR, d, "fi_domain", r);
    goto fail;
  }
  /* A wait descriptor where the provider has one (tcp does, shm does not). */
  struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_FD, .size = 0};
  if (fi_cq_open(d->domain, &cqa, &d->cq, NULL) == 0) {
    if (fi_control(&d->cq->fid, FI_GETWAIT, &d->fd) != 0) d->fd = -1;
  } else {
    cqa.wait_obj = FI_WAIT_NONE;
    if ((r = fi_cq_open(d->domain, &cqa, &d->cq, NULL)) != 0) {
      rc = ofi_err(COLLIE_SYSTEM_ERROR, d, "fi_cq_open", r);
      goto fail;
    }
  }
  struct fi_av_attr ava = {.type = FI_AV_TABLE, .count = (size_t)cfg->size};
  if ((r = fi_av_open(d->domain, &ava, &d->av, NULL)) != 0) {
    rc = ofi_err(COLLIE_SYSTEM_ERROR, d, "fi_av_open", r);
    goto fail;
  }
  if ((r = fi_endpoint(d->domain, d->info, &d->ep, NULL)) != 0) {
    rc = ofi_err(COLLIE_SYSTEM_ERROR, d, "fi_endpoint", r);
    goto fail;
  }
  if ((r = fi_ep_bind(d->ep, &d->av->fid, 0)) != 0 ||
      (r = fi_ep_bind(d->ep, &d->cq->fid, FI_TRANSMIT | FI_RECV)) != 0) {
    rc = ofi_err(COLLIE_SYSTEM_ERROR, d, "fi_ep_bind", r);
    goto fail;
  }
  if ((r = fi_enable(d->ep)) != 0) {
    rc = ofi_err(COLLIE_SYSTEM_ERROR, d, "fi_enable", r);
    goto fail;
  }
  size_t len = *addrlen;
  if ((r = fi_getname(&d->ep->fid, addr, &len)) != 0) {
    rc = r == -FI_ETOOSMALL ? collie__err(COLLIE_UNSUPPORTED,
                                          "ofi (%s): its addresses take %zu bytes, more than "
                                          "collie's %zu",
                                          d->desc, len, *addrlen)
                            : ofi_err(COLLIE_SYSTEM_ERROR, d, "fi_getname", r);
    goto fail;
  }
  *addrlen = d->addrlen = len;
  *out = d;
  return COLLIE_SUCCESS;
fail:
  ofi_close(d);
  return rc;
}

static collie_result_t
ofi_connect(struct collie__netdev *d, int peer, const void *addr, size_t addrlen)
{
  /* The provider reads its own address format's length from the buffer
   * whatever it is given: a shorter one is refused here. */
  if (addrlen != d->addrlen)
    return collie__err(COLLIE_REMOTE_ERROR,
                       "ofi (%s): rank %d's address is %zu bytes; this provider's are %zu", d->desc,
                       peer, addrlen, d->addrlen);
  fi_addr_t a = FI_ADDR_NOTAVAIL;
  int r = fi_av_insert(d->av, addr, 1, &a, 0, NULL);
  if (r != 1 || a == FI_ADDR_NOTAVAIL)
    return collie__err(COLLIE_REMOTE_ERROR,
                       "ofi (%s): rank %d's address (%zu bytes) is not one this provider takes "
                       "(fi_av_insert: %s)",
                       d->desc, peer, addrlen, r < 0 ? lib.strerror(-r) : "not inserted");
  d->addr[peer] = a;
  return COLLIE_SUCCESS;
}

static inline void *
ofi_desc(struct collie__netdev_mr *mr)
{
  return mr ? mr->desc : NULL;
}

/* A posting's result: started, try again, or the failure. */
static collie_result_t
ofi_posted(struct collie__netdev *d, ssize_t r, const char *what, int peer)
{
  if (r == 0) return COLLIE_SUCCESS;
  if (r == -FI_EAGAIN) return COLLIE_NETDEV_AGAIN;
  return collie__err(COLLIE_REMOTE_ERROR, "ofi (%s): %s rank %d failed: %s", d->desc, what, peer,
                     lib.strerror((int)-r));
}

static collie_result_t
ofi_send(struct collie__netdev *d, int peer, const void *buf, size_t len,
         struct collie__netdev_mr *mr, struct collie__netdev_op *op)
{
  return ofi_posted(d, fi_send(d->ep, buf, len, ofi_desc(mr), d->addr[peer], op), "a send to",
                    peer);
}

static collie_result_t
ofi_inject(struct collie__netdev *d, int peer, const void *buf, size_t len)
{
  return ofi_posted(d, fi_inject(d->ep, buf, len, d->addr[peer]), "a send to", peer);
}

static size_t
ofi_inject_max(const struct collie__netdev *d)
{
  return d->info->tx_attr->inject_size;
}

static collie_result_t
ofi_recv_any(struct collie__netdev *d, void *buf, size_t len, struct collie__netdev_mr *mr,
             struct collie__netdev_op *op)
{
  op->peer = -1;
  return ofi_posted(d, fi_recv(d->ep, buf, len, ofi_desc(mr), FI_ADDR_UNSPEC, op), "a receive from",
                    -1);
}

static collie_result_t
ofi_tsend(struct collie__netdev *d, int peer, const void *buf, size_t len, uint64_t tag,
          struct collie__netdev_mr *mr, struct collie__netdev_op *op)
{
  return ofi_posted(d, fi_tsend(d->ep, buf, len, ofi_desc(mr), d->addr[peer], tag, op), "a send to",
                    peer);
}

static collie_result_t
ofi_trecv(struct collie__netdev *d, int peer, void *buf, size_t len, uint64_t tag,
          struct collie__netdev_mr *mr, struct collie__netdev_op *op)
{
  op->peer = peer;
  if (d->gone[peer])
    return collie__err(COLLIE_REMOTE_ERROR,
                       "ofi (%s): rank %d aborted: no receive is directed at it any more", d->desc,
                       peer);
  return ofi_posted(d, fi_trecv(d->ep, buf, len, ofi_desc(mr), d->addr[peer], tag, 0, op),
                    "a receive from", peer);
}

static collie_result_t
ofi_progress(struct collie__netdev *d)
{
  for (;;) {
    struct fi_cq_tagged_entry e[16];
    ssize_t n = fi_cq_read(d->cq, e, 16);
    if (n == -FI_EAGAIN) return COLLIE_SUCCESS;
    if (n == -FI_EAVAIL) {
      struct fi_cq_err_entry ee;
      memset(&ee, 0, sizeof(ee));
      if (fi_cq_readerr(d->cq, &ee, 0) != 1) continue;
      struct collie__netdev_op *op = ee.op_context;
      char detail[160] = "";
      const char *pe = fi_cq_strerror(d->cq, ee.prov_errno, ee.err_data, detail, sizeof(detail));
      collie_result_t rc =
          collie__err(COLLIE_REMOTE_ERROR, "ofi (%s): %s%s%s", d->desc, lib.strerror(ee.err),
                      pe && *pe ? ": " : "", pe && *pe ? pe : "");
      if (op)
        op->done(op, rc, 0);
      else /* an injected send (no context): the device's failure */
        return rc;
      continue;
    }
    if (n < 0) return ofi_err(COLLIE_SYSTEM_ERROR, d, "fi_cq_read", (int)n);
    for (ssize_t i = 0; i < n; i++) {
      struct collie__netdev_op *op = e[i].op_context;
      if (op) op->done(op, COLLIE_SUCCESS, e[i].len);
    }
  }
}

static void
ofi_cancel(struct collie__netdev *d, struct collie__netdev_op *op)
{
  (void)fi_cancel(&d->ep->fid, op);
}

static void
ofi_gone(struct collie__netdev *d, int peer)
{
  if (peer >= 0 && peer < d->size) d->gone[peer] = 1;
}

static collie_result_t
ofi_reg(struct collie__netdev *d, void *buf, size_t len, struct collie__netdev_mr **out)
{
  struct collie__netdev_mr *m = calloc(1, sizeof(*m));
  if (!m) return collie__err(COLLIE_SYSTEM_ERROR, "ofi: out of memory registering memory");
  /* A key of our own where the provider does not choose them. */
  uint64_t key = (d->info->domain_attr->mr_mode & FI_MR_PROV_KEY) ? 0 : ++d->next_key;
  int r = fi_mr_reg(d->domain, buf, len, FI_SEND | FI_RECV, 0, key, 0, &m->mr, NULL);
  if (r == 0 && (d->info->domain_attr->mr_mode & FI_MR_ENDPOINT)) {
    r = fi_mr_bind(m->mr, &d->ep->fid, 0);
    if (r == 0) r = fi_mr_enable(m->mr);
  }
  if (r != 0) {
    if (m->mr) fi_close(&m->mr->fid);
    free(m);
    return collie__err(COLLIE_SYSTEM_ERROR, "ofi (%s): registering %zu bytes at %p failed: %s",
                       d->desc, len, buf, lib.strerror(-r));
  }
  m->desc = fi_mr_desc(m->mr);
  *out = m;
  return COLLIE_SUCCESS;
}

static void
ofi_dereg(struct collie__netdev *d, struct collie__netdev_mr *m)
{
  (void)d;
  if (!m) return;
  fi_close(&m->mr->fid);
  free(m);
}

static int
ofi_need_reg(const struct collie__netdev *d)
{
  return d->mr_local;
}

static int
ofi_wait_fd(struct collie__netdev *d)
{
  return d->fd;
}

static int
ofi_trywait(struct collie__netdev *d)
{
  if (d->fd < 0) return 0;
  struct fid *f = &d->cq->fid;
  return fi_trywait(d->fabric, &f, 1) == FI_SUCCESS;
}

static const char *
ofi_describe(const struct collie__netdev *d)
{
  return d->desc;
}

static const char *
ofi_provider(const struct collie__netdev *d)
{
  return d->info->fabric_attr->prov_name;
}

const struct collie__netdev_ops collie__ofi_netdev = {
    .name = "ofi",
    .available = ofi_available,
    .provider = ofi_provider,
    .listen = ofi_listen,
    .connect = ofi_connect,
    .send = ofi_send,
    .inject = ofi_inject,
    .inject_max = ofi_inject_max,
    .recv_any = ofi_recv_any,
    .tsend = ofi_tsend,
    .trecv = ofi_trecv,
    .progress = ofi_progress,
    .cancel = ofi_cancel,
    .gone = ofi_gone,
    .reg = ofi_reg,
    .dereg = ofi_dereg,
    .need_reg = ofi_need_reg,
    .wait_fd = ofi_wait_fd,
    .trywait = ofi_trywait,
    .describe = ofi_describe,
    .close = ofi_close,
};

#else /* !COLLIE_HAVE_LIBFABRIC */

/* Built without libfabric's headers: the device is never available and
 * says why; the transport's other entry points are never reached. */
static int
ofi_available(const struct collie__netdev_cfg *cfg, char *why, size_t len, int *hardware)
{
  (void)cfg;
  if (hardware) *hardware = 0;
  if (why)
    collie__fmt(why, len,
                "this build of collie has no libfabric support (built without libfabric's "
                "headers, rdma/fabric.h: install libfabric-dev and rebuild)");
  return 0;
}

const struct collie__netdev_ops collie__ofi_netdev = {
    .name = "ofi",
    .available = ofi_available,
};

#endif
