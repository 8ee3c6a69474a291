/*
 * ofi_test.c - the ofi transport's edges (issue 40): the network seam
 * (transport/netdev.h) driven directly on libfabric's pick here, two
 * endpoints of one process talking; and what a job is told when ofi
 * cannot run: no libfabric, ranks on different providers, a rank with
 * another job token, an address cut short.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll/xport_fixture.h"
#include "runner.h"
#include "transport/transport.h"
#include "transport/netdev.h"
#include "transport/netx_int.h"
#include "transport/shm.h"
#include "util/error.h"
#include "util/util.h"

#ifdef COLLIE_HAVE_LIBFABRIC

struct ot_done {
  int n;
  collie_result_t rc;
  size_t len;
};

static void
ot_done(struct collie__netdev_op *op, collie_result_t rc, size_t len)
{
  struct ot_done *d = op->arg;
  d->n++;
  d->rc = rc;
  d->len = len;
}

/* Progresses both devices until *flag reaches want or 5 s pass. */
static int
ot_until(struct collie__netdev *a, struct collie__netdev *b, const int *flag, int want)
{
  const struct collie__netdev_ops *o = &collie__ofi_netdev;
  int64_t end = collie__now_ns() + 5000000000LL;
  while (*flag < want && collie__now_ns() < end) {
    if (o->progress(a) != COLLIE_SUCCESS || o->progress(b) != COLLIE_SUCCESS) return -1;
  }
  return *flag >= want ? 0 : -1;
}

/* Starts an operation, progressing both devices while the device says again. */
#define OT_START(call)                                                                             \
  do {                                                                                             \
    collie_result_t rc_;                                                                           \
    int64_t end_ = collie__now_ns() + 5000000000LL;                                                \
    while ((rc_ = (call)) == COLLIE_NETDEV_AGAIN && collie__now_ns() < end_) {                     \
      o->progress(d0);                                                                             \
      o->progress(d1);                                                                             \
    }                                                                                              \
    ASSERTF(rc_ == COLLIE_SUCCESS, "%s -> %s: %s", #call, collie_result_string(rc_),               \
            collie__err_msg());                                                                    \
  } while (0)

/* Two endpoints of one process over the seam: an untagged message lands in
 * a receive posted for any source; tagged ones only in the receive of
 * their tag, whichever was posted first; registration (every buffer, as a
 * provider with FI_MR_LOCAL asks), a cancelled receive that never writes
 * its buffer, the wait descriptor, a peer address of the wrong length
 * refused naming the rank, an injected message, and receives directed at a
 * peer said gone refused. */
TEST_IMPL(ofi_netdev_pair)
{
  const struct collie__netdev_ops *o = &collie__ofi_netdev;
  struct collie__netdev_cfg c0 = {.rank = 0, .size = 2, .reg_all = 1}, c1 = c0;
  c1.rank = 1;
  char why[256];
  ASSERTF(o->available(&c0, why, sizeof(why), NULL), "ofi unavailable: %s", why);
  struct collie__netdev *d0, *d1;
  unsigned char a0[COLLIE_NETDEV_ADDR_MAX], a1[COLLIE_NETDEV_ADDR_MAX];
  size_t l0 = sizeof(a0), l1 = sizeof(a1);
  ASSERT_OK(o->listen(&c0, &d0, a0, &l0));
  ASSERT_OK(o->listen(&c1, &d1, a1, &l1));
  ASSERT(o->need_reg(d0) && o->need_reg(d1)); /* reg_all */
  ASSERTF(l0 == l1 && l0 > 0, "addresses of %zu and %zu bytes", l0, l1);
  ASSERT_RC(COLLIE_REMOTE_ERROR, "rank 1's address is", o->connect(d0, 1, a1, l1 - 1));
  ASSERT_OK(o->connect(d0, 1, a1, l1));
  ASSERT_OK(o->connect(d1, 0, a0, l0));

  enum { N = 1 << 16 };
  char *src = malloc(N), *dst = malloc(N), *other = malloc(N);
  ASSERT(src && dst && other);
  for (int i = 0; i < N; i++) src[i] = (char)(i * 7 + 1);
  memset(dst, 0, N);
  memset(other, 0x5a, N);
  struct collie__netdev_mr *ms, *md, *mo;
  ASSERT_OK(o->reg(d0, src, N, &ms));
  ASSERT_OK(o->reg(d1, dst, N, &md));
  ASSERT_OK(o->reg(d1, other, N, &mo));

  /* Untagged, into a receive for any source. */
  struct ot_done sd = {0}, rd = {0};
  struct collie__netdev_op sop = {.done = ot_done, .arg = &sd}, rop = {.done = ot_done, .arg = &rd};
  OT_START(o->recv_any(d1, dst, N, md, &rop));
  OT_START(o->send(d0, 1, src, 100, ms, &sop));
  ASSERT(ot_until(d0, d1, &rd.n, 1) == 0 && ot_until(d0, d1, &sd.n, 1) == 0);
  ASSERTF(rd.rc == COLLIE_SUCCESS && rd.len == 100 && !memcmp(dst, src, 100),
          "untagged: rc %d, %zu bytes", rd.rc, rd.len);

  /* Tagged: tag 9 posted first, then tag 8; the message of tag 8 goes to
   * the second receive, the first still waits. */
  memset(dst, 0, N);
  struct ot_done r9 = {0}, r8 = {0}, s8 = {0};
  struct collie__netdev_op o9 = {.done = ot_done, .arg = &r9}, o8 = {.done = ot_done, .arg = &r8},
                           os8 = {.done = ot_done, .arg = &s8};
  OT_START(o->trecv(d1, 0, other, N, 9, mo, &o9));
  OT_START(o->trecv(d1, 0, dst, N, 8, md, &o8));
  OT_START(o->tsend(d0, 1, src, N, 8, ms, &os8));
  ASSERT(ot_until(d0, d1, &r8.n, 1) == 0);
  ASSERTF(r8.rc == COLLIE_SUCCESS && r8.len == N && !memcmp(dst, src, N), "tag 8: %zu bytes",
          r8.len);
  ASSERT(ot_until(d0, d1, &s8.n, 1) == 0 && s8.rc == COLLIE_SUCCESS);
  ASSERT(r9.n == 0);
  /* The receive of tag 9, cancelled, never writes its buffer, even when a
   * message of its tag comes after. */
  o->cancel(d1, &o9);
  struct ot_done s9 = {0};
  struct collie__netdev_op os9 = {.done = ot_done, .arg = &s9};
  OT_START(o->tsend(d0, 1, src, 64, 9, ms, &os9));
  for (int i = 0; i < 2000; i++) {
    o->progress(d0);
    o->progress(d1);
  }
  ASSERT(r9.n == 0 || r9.rc != COLLIE_SUCCESS);
  for (int i = 0; i < N; i++) ASSERTF(other[i] == 0x5a, "cancelled receive wrote byte %d", i);

  /* The wait descriptor, where the provider has one, says when to look. */
  int fd = o->wait_fd(d1);
  if (fd >= 0) {
    struct ot_done r7 = {0}, s7 = {0};
    struct collie__netdev_op o7 = {.done = ot_done, .arg = &r7},
                             os7 = {.done = ot_done, .arg = &s7};
    OT_START(o->trecv(d1, 0, dst, 8, 7, md, &o7));
    OT_START(o->tsend(d0, 1, src, 8, 7, ms, &os7));
    ASSERT(ot_until(d0, d0, &s7.n, 1) == 0); /* only the sender progresses */
    int64_t end = collie__now_ns() + 5000000000LL;
    while (r7.n == 0 && collie__now_ns() < end) {
      if (o->trywait(d1)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        (void)poll(&p, 1, 50);
      }
      o->progress(d1);
    }
    ASSERTF(r7.n == 1 && r7.rc == COLLIE_SUCCESS, "tag 7 after the wait descriptor: %d", r7.n);
  }

  /* An injected message (no completion of its own) lands in a receive for
   * any source like a sent one; the buffer may change at once. */
  ASSERT(o->inject_max(d0) >= 64);
  memset(dst, 0, N);
  struct ot_done ri = {0};
  struct collie__netdev_op oi = {.done = ot_done, .arg = &ri};
  char small[64];
  memcpy(small, src, sizeof(small));
  OT_START(o->recv_any(d1, dst, N, md, &oi));
  OT_START(o->inject(d0, 1, small, sizeof(small)));
  memset(small, 0, sizeof(small));
  ASSERT(ot_until(d0, d1, &ri.n, 1) == 0);
  ASSERTF(ri.rc == COLLIE_SUCCESS && ri.len == sizeof(small) && !memcmp(dst, src, sizeof(small)),
          "injected: rc %d, %zu bytes", ri.rc, ri.len);

  /* A peer the transport says aborted: receives directed at it are refused
   * naming it (rxm crashed on them), untagged ones still work. */
  o->gone(d1, 0);
  struct ot_done r6 = {0}, s6 = {0}, ra = {0};
  struct collie__netdev_op o6 = {.done = ot_done, .arg = &r6}, os6 = {.done = ot_done, .arg = &s6},
                           oa = {.done = ot_done, .arg = &ra};
  ASSERT_RC(COLLIE_REMOTE_ERROR, "rank 0 aborted", o->trecv(d1, 0, dst, 8, 6, md, &o6));
  ASSERT(r6.n == 0);
  OT_START(o->recv_any(d1, dst, N, md, &oa));
  OT_START(o->send(d0, 1, src, 24, ms, &os6));
  ASSERT(ot_until(d0, d1, &ra.n, 1) == 0 && ra.rc == COLLIE_SUCCESS && ra.len == 24);
  ASSERT(ot_until(d0, d1, &s6.n, 1) == 0);

  o->dereg(d0, ms);
  o->dereg(d1, md);
  o->dereg(d1, mo);
  o->close(d0);
  o->close(d1);
  free(src);
  free(dst);
  free(other);
}

/* COLLIE_OFI_LIBRARY naming no library: init fails naming it. */
TEST_IMPL(ofi_missing)
{
  setenv("COLLIE_OFI_LIBRARY", "/nonexistent/libfabric.so.1", 1);
  collie_comm_t *comm = NULL;
  ASSERT_RC(COLLIE_UNSUPPORTED, "/nonexistent/libfabric.so.1 does not load",
            collie_comm_init(&comm));
}

/* Ranks on different providers: each is told which the other runs. */
TEST_IMPL(ofi_provider_mismatch)
{
  setenv("FI_PROVIDER", test_rank() == 0 ? "shm" : "tcp;ofi_rxm", 1);
  collie_comm_t *comm = NULL;
  ASSERT_RC(COLLIE_INVALID_USAGE, "every rank must use the same (FI_PROVIDER)",
            collie_comm_init(&comm));
}

/* A rank with another job token: each side refuses the other's hello,
 * naming it. */
TEST_IMPL(ofi_wrong_token)
{
  struct xfix t;
  xfix_meet(&t, &collie__ofi_ops, 0);
  xfix_config(&t, "c1", "ofi", 5000);
  if (t.rank == 1) t.cfg.token = "some-other-job";
  ASSERT_RC(COLLIE_REMOTE_ERROR, "another job token", xfix_try_open(&t));
  ASSERT(strstr(collie_last_error(), t.rank == 0 ? "rank 1" : "rank 0"));
  ASSERT(t.x == NULL);
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* An address cut short in the store: the rank reading it is told whose it
 * is and how long it should be, before anything is sent to it. */
TEST_IMPL(ofi_truncated_address)
{
  setenv("FI_PROVIDER", "tcp;ofi_rxm", 1);
  struct xfix t;
  xfix_meet(&t, &collie__ofi_ops, 0);
  xfix_config(&t, "c1", "ofi", 5000);
  if (t.rank == 1) {
    static const char cut[] = "tcp;ofi_rxm\0\x02\x00\x7f";
    ASSERT_OK(collie__store_set(t.view, "ofi/addr/1", cut, sizeof(cut) - 1,
                                collie__deadline_after_ms(5000)));
  } else {
    ASSERT_RC(COLLIE_REMOTE_ERROR, "rank 1's address is 3 bytes", xfix_try_open(&t));
    ASSERT(t.x == NULL);
  }
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* libfabric's device, its registrations of more than 2 MiB refused: the
 * control buffers register, a 4 MiB payload's does not. */
static struct collie__netdev_ops ot_refusing;

static collie_result_t
ot_reg_small(struct collie__netdev *d, void *buf, size_t len, struct collie__netdev_mr **out)
{
  if (len > ((size_t)2 << 20))
    return collie__err(COLLIE_SYSTEM_ERROR, "ot: %zu bytes refused (the test's device)", len);
  return collie__ofi_netdev.reg(d, buf, len, out);
}

static collie_result_t
ot_open_refusing(const struct collie__net_cfg *cfg, const int *peers, int npeers,
                 struct collie__xport **out)
{
  return collie__netx_open_on(&ot_refusing, cfg, peers, npeers, out);
}

/* Opens the ofi transport to the other rank on a device of the test's
 * (through ops, which the fixture keeps), every buffer registered. */
static void
ot_open_on(struct xfix *t, struct collie__xport_ops *ops,
           collie_result_t (*open)(const struct collie__net_cfg *, const int *, int,
                                   struct collie__xport **))
{
  *ops = collie__ofi_ops;
  ops->open = open;
  xfix_meet(t, ops, 0);
  xfix_config(t, "c1", "ofi", 5000);
  t->cfg.ofi_mr_all = 1;
  xfix_open(t);
}

/* A registration that fails (every buffer registered, as on verbs or EFA):
 * the send and the receive of that payload fail, each naming the operation,
 * the peer and the device's reason, as this rank's error (not the peer's);
 * nothing hangs, and small messages went through before. */
TEST_IMPL(ofi_registration_fails)
{
  ot_refusing = collie__ofi_netdev;
  ot_refusing.reg = ot_reg_small;
  struct collie__xport_ops ops;
  struct xfix t;
  ot_open_on(&t, &ops, ot_open_refusing);
  int peer = 1 - t.rank;
  char s[64] = "small", r[64] = "";
  struct collie__req q[2];
  xfix_post(&t, &q[0], peer, 1, s, sizeof(s), collie__slot(COLLIE_KIND_BROADCAST, 1, 0));
  xfix_post(&t, &q[1], peer, 0, r, sizeof(r), collie__slot(COLLIE_KIND_BROADCAST, 1, 0));
  ASSERT_OK(xfix_wait_n(&t, q, 2, 0, collie__deadline_after_ms(5000)));
  ASSERT(!strcmp(r, "small"));
  size_t n = (size_t)4 << 20;
  char *big = calloc(1, n);
  ASSERT(big);
  /* The send's header goes, then its payload fails to register, at post:
   * the post fails, and the transport stays failed. */
  ASSERT_RC(COLLIE_SYSTEM_ERROR, "registering the 4194304 bytes of broadcast #2 step 0 to rank",
            xfix_post_rc(&t, &q[0], peer, 1, big, n, collie__slot(COLLIE_KIND_BROADCAST, 2, 0)));
  ASSERT(strstr(collie_last_error(), "refused (the test's device)"));
  ASSERT(strstr(collie_last_error(), peer == 1 ? "rank 1" : "rank 0"));
  xfix_assert_failed(&t, COLLIE_SYSTEM_ERROR, "registering", peer, 0, big, n);
  xfix_barrier(&t, "end");
  xfix_done(&t);
  free(big);
}

/* Sends len bytes of msg from rank 1's endpoint to rank 0's, around rank
 * 1's transport (which shares the endpoint): what a stranger that reached
 * the endpoint, or a broken peer, would put into rank 0's control
 * receives. Progresses the device until the send completed. */
static void
ot_raw_send(struct xfix *t, const void *msg, size_t len)
{
  struct netx_xport *nx = (struct netx_xport *)t->x;
  const struct collie__netdev_ops *o = &collie__ofi_netdev;
  struct ot_done sd = {0};
  struct collie__netdev_op op = {.done = ot_done, .arg = &sd};
  collie_result_t rc;
  int64_t end = collie__now_ns() + 5000000000LL;
  while ((rc = o->send(nx->dev, 0, msg, len, NULL, &op)) == COLLIE_NETDEV_AGAIN &&
         collie__now_ns() < end)
    (void)o->progress(nx->dev);
  ASSERTF(rc == COLLIE_SUCCESS, "raw send: %s", collie__err_msg());
  while (sd.n == 0 && collie__now_ns() < end) (void)o->progress(nx->dev);
  ASSERTF(sd.n == 1 && sd.rc == COLLIE_SUCCESS, "raw send of %zu bytes: %d done", len, sd.n);
}

/* Control messages no rank of the communicator sent (too short, another
 * protocol, another version, another communicator, a rank it does not
 * have) are dropped and counted, and the transport goes on; a message in
 * this communicator's name that breaks the protocol (a type it does not
 * know) fails it, naming the rank it claims to come from. */
TEST_IMPL(ofi_stranger_messages)
{
  struct xfix t;
  xfix_meet(&t, &collie__ofi_ops, 0);
  xfix_config(&t, "c1", "ofi", 5000);
  xfix_open(&t);
  struct netx_xport *nx = (struct netx_xport *)t.x;
  char buf[64] = "";
  uint64_t slot = collie__slot(COLLIE_KIND_BROADCAST, 1, 0);
  if (t.rank == 1) {
    struct netx_hdr ok = {
        .magic = NETX_MAGIC, .version = NETX_VERSION, .type = NETX_BYE, .src = 1, .comm = nx->comm};
    struct netx_hdr h[5] = {ok, ok, ok, ok, ok};
    h[0].magic ^= 1;     /* another protocol */
    h[1].version += 1;   /* another version */
    h[2].comm ^= 0x5a5a; /* another communicator */
    h[3].src = 7;        /* a rank it does not have */
    h[4].src = -1;
    ot_raw_send(&t, "too short", 9);
    for (int i = 0; i < 5; i++) ot_raw_send(&t, &h[i], sizeof(h[i]));
  }
  xfix_barrier(&t, "sent");
  snprintf(buf, sizeof(buf), "after the strangers");
  xfix_pingpong_round(&t, 1 - t.rank, buf, sizeof(buf), slot, 0);
  ASSERT(!strcmp(buf, "after the strangers"));
  if (t.rank == 0) ASSERTF(nx->dropped == 6, "%u control messages dropped", nx->dropped);
  xfix_barrier(&t, "dropped");
  if (t.rank == 1) {
    struct netx_hdr bad = {
        .magic = NETX_MAGIC, .version = NETX_VERSION, .type = 99, .src = 1, .comm = nx->comm};
    ot_raw_send(&t, &bad, sizeof(bad));
  } else {
    struct collie__req q;
    xfix_post(&t, &q, 1, 0, buf, sizeof(buf), collie__slot(COLLIE_KIND_BROADCAST, 2, 0));
    ASSERT_RC(COLLIE_REMOTE_ERROR, "broke the protocol: a control message of an unknown type",
              xfix_wait_n(&t, &q, 1, 0, collie__deadline_after_ms(5000)));
    ASSERT(strstr(collie_last_error(), "rank 1"));
  }
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* libfabric's device, counting registrations of each size. */
static struct collie__netdev_ops ot_counting;
static int ot_regs_of[3], ot_deregs_of[3]; /* 1 MiB, 256 KiB, other */
static size_t ot_len_of_mr[64];
static struct collie__netdev_mr *ot_mrs[64];

static int
ot_size_class(size_t len)
{
  return len == ((size_t)1 << 20) ? 0 : len == ((size_t)256 << 10) ? 1 : 2;
}

static collie_result_t
ot_reg_count(struct collie__netdev *d, void *buf, size_t len, struct collie__netdev_mr **out)
{
  collie_result_t rc = collie__ofi_netdev.reg(d, buf, len, out);
  if (rc != COLLIE_SUCCESS) return rc;
  ot_regs_of[ot_size_class(len)]++;
  for (int i = 0; i < 64; i++)
    if (!ot_mrs[i]) {
      ot_mrs[i] = *out;
      ot_len_of_mr[i] = len;
      break;
    }
  return rc;
}

static void
ot_dereg_count(struct collie__netdev *d, struct collie__netdev_mr *mr)
{
  for (int i = 0; i < 64; i++)
    if (ot_mrs[i] == mr) {
      ot_deregs_of[ot_size_class(ot_len_of_mr[i])]++;
      ot_mrs[i] = NULL;
    }
  collie__ofi_netdev.dereg(d, mr);
}

static collie_result_t
ot_open_counting(const struct collie__net_cfg *cfg, const int *peers, int npeers,
                 struct collie__xport **out)
{
  return collie__netx_open_on(&ot_counting, cfg, peers, npeers, out);
}

/* Rank 0 sends 256 KiB to rank 1 n times from buf; rank 1 receives into rbuf. */
static void
ot_moves(struct xfix *t, char *buf, char *rbuf, int n, uint32_t seq)
{
  size_t len = (size_t)256 << 10;
  for (int i = 0; i < n; i++) {
    struct collie__req q;
    if (t->rank == 0) memset(buf, 'a' + i, len);
    xfix_post(t, &q, 1 - t->rank, t->rank == 0, t->rank == 0 ? buf : rbuf, len,
              collie__slot(COLLIE_KIND_BROADCAST, seq + (uint32_t)i, 0));
    ASSERT_OK(xfix_wait_n(t, &q, 1, 0, collie__deadline_after_ms(5000)));
    if (t->rank == 1) ASSERTF(rbuf[len - 1] == 'a' + i, "move %d: got %d", i, rbuf[len - 1]);
  }
}

/* The registration cache, every buffer registered: a buffer inside a
 * collie_mem_alloc region is registered once for the whole region however
 * often it moves, and kept; once the region is freed, a new one (at the
 * same address or not) is registered anew and the old registration goes
 * at that miss; a malloc'd buffer is registered for each payload and
 * deregistered after it. */
TEST_IMPL(ofi_registration_cache)
{
  ot_counting = collie__ofi_netdev;
  ot_counting.reg = ot_reg_count;
  ot_counting.dereg = ot_dereg_count;
  struct collie__xport_ops ops;
  struct xfix t;
  ot_open_on(&t, &ops, ot_open_counting);
  char *region = collie__shm_mem_alloc((size_t)1 << 20);
  char *plain = malloc((size_t)256 << 10);
  ASSERT(region && plain);
  ot_moves(&t, region + 4096, region + 4096, 5, 10);
  ASSERTF(ot_regs_of[0] == 1 && ot_deregs_of[0] == 0, "region: %d registrations, %d dropped",
          ot_regs_of[0], ot_deregs_of[0]);
  ot_moves(&t, plain, plain, 3, 20);
  ASSERTF(ot_regs_of[1] == 3 && ot_deregs_of[1] == 3, "malloc'd: %d registrations, %d dropped",
          ot_regs_of[1], ot_deregs_of[1]);
  ASSERT_OK(collie__shm_mem_free(region));
  region = collie__shm_mem_alloc((size_t)1 << 20);
  ASSERT(region);
  ot_moves(&t, region, region, 2, 30);
  ASSERTF(ot_regs_of[0] == 2 && ot_deregs_of[0] == 1,
          "after a free: %d registrations of a region, %d dropped", ot_regs_of[0], ot_deregs_of[0]);
  xfix_barrier(&t, "end");
  xfix_done(&t);
  ASSERTF(ot_deregs_of[0] == 2, "close left %d region registrations", 2 - ot_deregs_of[0]);
  ASSERT_OK(collie__shm_mem_free(region));
  free(plain);
}

#else /* a build without libfabric's headers */

TEST_IMPL(ofi_missing)
{
  collie_comm_t *comm = NULL;
  ASSERT_RC(COLLIE_UNSUPPORTED, "no libfabric support", collie_comm_init(&comm));
}

#endif

/* COLLIE_NET names the transport between hosts: a word that is no
 * transport, and shm, which reaches no other host, fail init naming it. */
TEST_IMPL(net_bad_value)
{
  collie_comm_t *comm = NULL;
  setenv("COLLIE_NET", "infiniband", 1);
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "COLLIE_NET=\"infiniband\" is not one of",
            collie_comm_init(&comm));
  setenv("COLLIE_NET", "shm", 1);
  ASSERT_RC(COLLIE_INVALID_ARGUMENT,
            "COLLIE_NET=shm: the transport between hosts is tcp, ofi or auto",
            collie_comm_init(&comm));
  unsetenv("COLLIE_NET");
}

/* Which pairs the ofi transport serves, from the records alone (pure, both
 * ranks of a pair alike): named, every pair; under auto with COLLIE_NET=ofi,
 * pairs of different hosts; with COLLIE_NET=auto, pairs of different hosts
 * where both ranks found a hardware fabric; with tcp, none. And which
 * libfabric providers are software. */
TEST_IMPL(ofi_auto_pairs)
{
  struct collie__peer p[4];
  memset(p, 0, sizeof(p));
  const char *host[4] = {"a", "b", "b", "a"};
  int fabric[4] = {1, 1, 0, 1};
  for (int i = 0; i < 4; i++) {
    snprintf(p[i].host, sizeof(p[i].host), "%s", host[i]);
    p[i].fabric = fabric[i];
  }
  struct collie__net_cfg cfg = {.size = 4, .peers = p, .transport = "auto", .net = "auto"};
  int (*ok)(const struct collie__net_cfg *, int) = collie__ofi_ops.can_connect;
  /* want[rank][peer] under COLLIE_NET=auto */
  static const int want[4][4] = {{0, 1, 0, 0}, {1, 0, 0, 1}, {0, 0, 0, 0}, {0, 1, 0, 0}};
  for (int r = 0; r < 4; r++)
    for (int q = 0; q < 4; q++) {
      if (q == r) continue;
      cfg.rank = r;
      ASSERTF(ok(&cfg, q) == want[r][q], "auto: rank %d -> %d: %d", r, q, ok(&cfg, q));
    }
  cfg.net = "ofi";
  for (int r = 0; r < 4; r++)
    for (int q = 0; q < 4; q++) {
      if (q == r) continue;
      cfg.rank = r;
      ASSERTF(ok(&cfg, q) == (strcmp(host[r], host[q]) != 0), "ofi: rank %d -> %d", r, q);
    }
  cfg.net = "tcp";
  cfg.rank = 0;
  ASSERT(!ok(&cfg, 1));
  cfg.transport = "ofi";
  ASSERT(ok(&cfg, 1) && ok(&cfg, 3)); /* named: every pair, one host too */
  cfg.transport = "tcp";
  cfg.net = "ofi";
  ASSERT(!ok(&cfg, 1));

  ASSERT(collie__ofi_software("tcp;ofi_rxm") && collie__ofi_software("shm") &&
         collie__ofi_software("udp;ofi_rxd") && collie__ofi_software("sockets") &&
         collie__ofi_software(NULL));
  ASSERT(!collie__ofi_software("verbs;ofi_rxm") && !collie__ofi_software("efa") &&
         !collie__ofi_software("cxi") && !collie__ofi_software("psm3") &&
         !collie__ofi_software("opx"));
}
