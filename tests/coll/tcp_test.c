/*
 * tcp_test.c - multi-rank tests of the tcp transport, driven through its ops
 * table (collie__tcp_ops) without the net layer: each rank meets the others
 * in the runner's file store, opens the transport to all of them and runs
 * loops of post + progress + wait.
 *
 * Covered: contents of messages of 0 B .. 8 MiB + 5 around a ring (also with
 * every rank on a fake host of its own, so listeners publish a non-loopback
 * address); many messages in flight per channel, delivered in order; an
 * all-to-all among 8 ranks on 2 cores (waits must sleep); slot and length
 * mismatches; a peer that dies, closes or aborts (only what is posted to it
 * fails); a message held unread while its sender leaves (the wait must not
 * spin, the message still arrives); a peer that never opens
 * (TIMEOUT naming it); strangers connecting to a listener during open() with
 * a wrong token, garbage, a huge length or silence (refused, while the real
 * peers still connect); a rank with another token (REMOTE_ERROR); bad
 * requests; no descriptor left behind; and a ping-pong that prints latency
 * and bandwidth.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "runner.h"
#include "transport/tcp_proto.h"
#include "transport/transport.h"
#include "util/error.h"
#include "util/util.h"
#include "xport_fixture.h"

/* The transport under test: tcp, or the ofi transport where the test's
 * entry names it (tests/list_ofi.h runs the failure cases that hold for
 * any network transport on it). */
static const struct collie__xport_ops *tcpt_ops = &collie__tcp_ops;

/* Meets the other ranks (on fake hosts of their own when fake_host) and
 * fills the config as a communicator would for tcp: a store prefix view
 * "c1", transport "tcp" (or "ofi"). */
static void
tcpt_meet(struct xfix *t, int fake_host, int64_t setup_ms)
{
  const char *tr = getenv("COLLIE_TRANSPORT");
  if (tr && !strcmp(tr, "ofi")) tcpt_ops = &collie__ofi_ops;
  xfix_meet(t, tcpt_ops, fake_host);
  xfix_config(t, "c1", tcpt_ops->name, setup_ms);
}

/* The "host:port" rank published for its listener, read from the view. */
static void
tcpt_published_addr(struct xfix *t, int rank, char *addr, size_t len, int64_t wait_ms)
{
  void *v = NULL;
  size_t n = 0;
  char key[32];
  snprintf(key, sizeof(key), "tcp/addr/%d", rank);
  ASSERT_OK(collie__store_get(t->view, key, &v, &n, collie__deadline_after_ms(wait_ms)));
  ASSERT(n < len);
  snprintf(addr, len, "%.*s", (int)n, (char *)v);
  free(v);
}

TEST_IMPL(tcp_ring_sizes)
{
  struct xfix t;
  tcpt_meet(&t, 0, 10000);
  int fds = xfix_nfds();
  xfix_open(&t);
  ASSERT(xfix_nfds() == fds + t.size - 1); /* one socket per peer, no listener left */
  xfix_ring_sizes(&t, 0);
  xfix_barrier(&t, "end");
  tcpt_ops->close(t.x);
  t.x = NULL;
  ASSERT(xfix_nfds() == fds);
  xfix_done(&t);
}

/* Every rank on a host of its own: listeners publish a routable address. */
TEST_IMPL(tcp_ring_fake_hosts)
{
  struct xfix t;
  tcpt_meet(&t, 1, 10000);
  xfix_open(&t);
  if (t.rank < t.size - 1) {
    char addr[128], local[64];
    tcpt_published_addr(&t, t.rank, addr, sizeof(addr), 1000);
    ASSERT(collie__sock_local_addr(NULL, local, sizeof(local)) == 0);
    ASSERTF(strncmp(addr, local, strlen(local)) == 0, "published %s, local address is %s", addr,
            local);
  }
  xfix_ring_sizes(&t, 0);
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* The name of a non-loopback interface with an IPv4 address, or 0. */
static int
tcpt_real_ifname(char *name, size_t len)
{
  struct ifaddrs *ifa = NULL;
  int found = 0;
  if (getifaddrs(&ifa) != 0) return 0;
  for (struct ifaddrs *it = ifa; it && !found; it = it->ifa_next)
    if (it->ifa_addr && it->ifa_addr->sa_family == AF_INET && !(it->ifa_flags & IFF_LOOPBACK)) {
      snprintf(name, len, "%s", it->ifa_name);
      found = 1;
    }
  freeifaddrs(ifa);
  return found;
}

/* Every rank on one host, with COLLIE_SOCKET_IFNAME set: listeners publish
 * that interface's address, not loopback (ranks in separate network
 * namespaces of one host share its identity but not its loopback). */
TEST_IMPL(tcp_ifname_same_host)
{
  struct xfix t;
  char ifname[64];
  if (!tcpt_real_ifname(ifname, sizeof(ifname))) {
    printf("skipped: no non-loopback IPv4 interface\n");
    return;
  }
  tcpt_meet(&t, 0, 10000);
  t.cfg.ifname = ifname;
  xfix_open(&t);
  if (t.rank < t.size - 1) { /* the last rank only connects: it publishes nothing */
    char addr[128], local[64];
    tcpt_published_addr(&t, t.rank, addr, sizeof(addr), 1000);
    ASSERT(collie__sock_local_addr(ifname, local, sizeof(local)) == 0);
    ASSERTF(strncmp(addr, local, strlen(local)) == 0 && strncmp(addr, "127.", 4) != 0,
            "published %s, %s has %s", addr, ifname, local);
  }
  xfix_ring_sizes(&t, 0);
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* An interface that does not exist fails the open, naming it, also when
 * every peer shares the host (it used to be ignored there). The last rank
 * only connects, so it learns of it as a peer that never published. */
TEST_IMPL(tcp_ifname_missing)
{
  struct xfix t;
  tcpt_meet(&t, 0, 2000);
  t.cfg.ifname = "nosuchif0";
  collie_result_t rc = xfix_try_open(&t);
  if (t.rank < t.size - 1)
    ASSERTF(rc == COLLIE_SYSTEM_ERROR && strstr(collie__err_msg(), "nosuchif0"), "rc %d: %s", rc,
            collie__err_msg());
  else
    ASSERTF(rc != COLLIE_SUCCESS && strstr(collie__err_msg(), "never published"), "rc %d: %s", rc,
            collie__err_msg());
  ASSERT(t.x == NULL);
  /* The failed ranks stay alive meanwhile: a dead one would be named at once. */
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* Many messages of mixed sizes in flight on every channel at once. */
/* Ranks of one host over tcp see each other on their CPU through /proc. */
TEST_IMPL(tcp_crowded)
{
  struct xfix t;
  tcpt_meet(&t, 0, 10000);
  xfix_open(&t);
  xfix_crowded(&t);
  xfix_done(&t);
}

TEST_IMPL(tcp_many_inflight)
{
  enum { N = 300 };
  struct xfix t;
  tcpt_meet(&t, 0, 10000);
  xfix_open(&t);
  int np = t.size - 1;
  struct collie__req *reqs = calloc((size_t)(2 * N * np), sizeof(*reqs));
  unsigned char **bufs = calloc((size_t)(2 * N * np), sizeof(*bufs));
  ASSERT(reqs && bufs);
  int nr = 0;
  for (unsigned i = 0; i < N; i++) {
    size_t len = (i % 10 == 0) ? 0 : (i % 37 == 0) ? 300000 + i : (size_t)(i * 97) % 5000;
    for (int p = 0; p < t.size; p++) {
      if (p == t.rank) continue;
      uint64_t slot = collie__slot(COLLIE_KIND_ALLGATHER, i, i & 7);
      bufs[nr] = malloc(len + 1);
      ASSERT(bufs[nr]);
      xfix_fill(bufs[nr], len, t.rank, p, i);
      xfix_post(&t, &reqs[nr], p, 1, bufs[nr], len, slot);
      nr++;
      bufs[nr] = malloc(len + 1);
      ASSERT(bufs[nr]);
      xfix_post(&t, &reqs[nr], p, 0, bufs[nr], len, slot);
      nr++;
    }
  }
  ASSERT_OK(xfix_wait_n(&t, reqs, nr, 0, collie__deadline_after_ms(20000)));
  nr = 0;
  for (unsigned i = 0; i < N; i++) {
    for (int p = 0; p < t.size; p++) {
      if (p == t.rank) continue;
      ASSERT(reqs[nr + 1].off == reqs[nr + 1].len);
      xfix_check(bufs[nr + 1], reqs[nr + 1].len, p, t.rank, i);
      free(bufs[nr]);
      free(bufs[nr + 1]);
      nr += 2;
    }
  }
  free(bufs);
  free(reqs);
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* All-to-all among every rank at once, many rounds; on 2 cores with 8 ranks
 * this only finishes in time if waiting ranks sleep. */
TEST_IMPL(tcp_alltoall)
{
  enum { ROUNDS = 40 };
  struct xfix t;
  tcpt_meet(&t, 0, 10000);
  xfix_open(&t);
  /* Every 4th round of tiny messages. */
  double s = xfix_alltoall(&t, ROUNDS, 64 * 1024 + 1, 4, 0);
  if (t.rank == 0) printf("tcp alltoall: %d ranks, %d rounds in %.3f s\n", t.size, ROUNDS, s);
  ASSERTF(s < 10.0, "all-to-all took %.1f s", s);
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* Rank 0 sends one message; rank 1 expects another slot or length. */
static void
tcpt_mismatch(int same_slot)
{
  struct xfix t;
  tcpt_meet(&t, 0, 10000);
  xfix_open(&t);
  unsigned char buf[4096];
  memset(buf, 1, sizeof(buf));
  struct collie__req r;
  uint64_t sent = collie__slot(COLLIE_KIND_ALLREDUCE, 7, 1);
  uint64_t want = same_slot ? sent : collie__slot(COLLIE_KIND_BROADCAST, 7, 0);
  if (t.rank == 0) {
    xfix_post(&t, &r, 1, 1, buf, 4096, sent);
    ASSERT_OK(xfix_wait_n(&t, &r, 1, 0, collie__deadline_after_ms(10000)));
  } else {
    xfix_post(&t, &r, 0, 0, buf, same_slot ? 4000 : 4096, want);
    ASSERT_RC(COLLIE_INVALID_USAGE, "collectives mismatched across ranks",
              xfix_wait_n(&t, &r, 1, 0, collie__deadline_after_ms(10000)));
    ASSERT(strstr(collie_last_error(), "rank 0"));
    ASSERT(strstr(collie_last_error(), "allreduce #7 step 1"));
    if (same_slot) {
      ASSERT(strstr(collie_last_error(), "4096 bytes"));
      ASSERT(strstr(collie_last_error(), "4000 bytes"));
    } else {
      ASSERT(strstr(collie_last_error(), "broadcast #7 step 0"));
    }
    ASSERT(r.done && r.rc == COLLIE_INVALID_USAGE);
    /* The transport stays failed: later posts and progress say so. */
    xfix_assert_failed(&t, COLLIE_INVALID_USAGE, "mismatched", 0, 1, NULL, 0);
  }
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

TEST_IMPL(tcp_mismatch_slot)
{
  tcpt_mismatch(0);
}

TEST_IMPL(tcp_mismatch_len)
{
  tcpt_mismatch(1);
}

/* Drives progress and wait for ms with nothing posted; nothing may fail. */
static void
tcpt_idle(struct xfix *t, int ms)
{
  int64_t end = collie__deadline_after_ms(ms);
  while (collie__now_ns() < end) {
    int pending = -1;
    ASSERT_OK(tcpt_ops->progress(t->x, &pending));
    ASSERT(pending == 0);
    tcpt_ops->wait(t->x, end);
  }
}

/* The last rank dies by SIGKILL. Rank 0 waits for a message from it, rank 1
 * (when not the victim) sends it more than the sockets hold: both fail
 * naming it, fast. The other ranks are waiting, but not on the victim: they
 * notice the death without failing, and fail as soon as they post to it. */
TEST_IMPL(tcp_peer_dies)
{
  struct xfix t;
  tcpt_meet(&t, 0, 10000);
  xfix_open(&t);
  int victim = t.size - 1;
  xfix_barrier(&t, "open");
  if (t.rank == victim) {
    collie__sleep_ns(200000000);
    test_die_by_sigkill();
  }
  /* Beyond both sockets' buffers (4 MiB each way, which the kernel doubles). */
  size_t big = 64u << 20;
  unsigned char *buf = calloc(1, big);
  ASSERT(buf);
  struct collie__req r;
  uint64_t slot = collie__slot(COLLIE_KIND_BARRIER, 3, 0);
  int64_t t0 = collie__now_ns();
  if (t.rank == 0) {
    xfix_post(&t, &r, victim, 0, buf, 64, slot);
  } else if (t.rank == 1) {
    xfix_post(&t, &r, victim, 1, buf, big, slot);
  } else {
    tcpt_idle(&t, 700);
    t0 = collie__now_ns();
    xfix_post(&t, &r, victim, 0, buf, 64, slot);
  }
  char name[32];
  const char *victim_name = name;
  snprintf(name, sizeof(name), "rank %d", victim);
  ASSERT_RC(COLLIE_REMOTE_ERROR, victim_name,
            xfix_wait_n(&t, &r, 1, 0, collie__deadline_after_ms(10000)));
  ASSERT(strstr(collie_last_error(), "closed the connection"));
  ASSERT(strstr(collie_last_error(), "barrier #3 step 0"));
  double s = (double)(collie__now_ns() - t0) / 1e9;
  ASSERTF(s < (t.rank <= 1 ? 2.0 : 0.1), "noticed the death after %.2f s", s);
  ASSERT(r.done && r.rc == COLLIE_REMOTE_ERROR);
  free(buf);
  xfix_done(&t);
}

/* Rank 1 closes normally. The others keep talking among themselves (a clean
 * goodbye fails nothing), then rank 0 expects a message from rank 1. */
TEST_IMPL(tcp_peer_closes)
{
  struct xfix t;
  tcpt_meet(&t, 0, 10000);
  xfix_open(&t);
  if (t.rank == 1) {
    tcpt_ops->close(t.x);
    t.x = NULL;
    xfix_barrier(&t, "closed");
    xfix_done(&t);
    return;
  }
  xfix_barrier(&t, "closed");
  unsigned char a[100], b[100];
  struct collie__req r[2];
  if (t.size > 2) {
    /* Ranks 0 and 2 exchange after rank 1's goodbye has arrived. */
    if (t.rank == 0 || t.rank == 2) {
      int other = 2 - t.rank;
      for (int i = 0; i < 3; i++) {
        xfix_fill(a, sizeof(a), t.rank, other, (unsigned)i);
        xfix_post(&t, &r[0], other, 0, b, sizeof(b), collie__slot(COLLIE_KIND_GATHER, i, 0));
        xfix_post(&t, &r[1], other, 1, a, sizeof(a), collie__slot(COLLIE_KIND_GATHER, i, 0));
        ASSERT_OK(xfix_wait_n(&t, r, 2, 0, collie__deadline_after_ms(10000)));
        xfix_check(b, sizeof(b), other, t.rank, (unsigned)i);
        collie__sleep_ns(100000000);
      }
    }
  }
  if (t.rank == 0) {
    xfix_post(&t, &r[0], 1, 0, b, sizeof(b), collie__slot(COLLIE_KIND_SCATTER, 9, 2));
    ASSERT_RC(COLLIE_REMOTE_ERROR, "rank 1",
              xfix_wait_n(&t, r, 1, 0, collie__deadline_after_ms(10000)));
    ASSERT(strstr(collie_last_error(), "closed the connection"));
    ASSERT(strstr(collie_last_error(), "scatter #9 step 2"));
    /* A send to it fails too (the transport is failed now). */
    memset(&r[1], 0, sizeof(r[1]));
    r[1].peer = 1;
    r[1].is_send = 1;
    r[1].buf = a;
    r[1].len = 10;
    ASSERT_RC(COLLIE_REMOTE_ERROR, "rank 1", tcpt_ops->post(t.x, &r[1]));
  }
  xfix_done(&t);
}

/* Rank 1 aborts: its own posted request fails, and rank 0, waiting on it,
 * gets REMOTE_ERROR at once. */
TEST_IMPL(tcp_peer_aborts)
{
  struct xfix t;
  tcpt_meet(&t, 0, 10000);
  xfix_open(&t);
  unsigned char b[16];
  struct collie__req r;
  xfix_post(&t, &r, 1 - t.rank, 0, b, sizeof(b), collie__slot(COLLIE_KIND_REDUCE, 1, 0));
  xfix_barrier(&t, "posted");
  if (t.rank == 1) {
    collie__err_set_text("an earlier error");
    tcpt_ops->abort(t.x);
    tcpt_ops->abort(t.x);                                         /* idempotent */
    ASSERT(strcmp(collie_last_error(), "an earlier error") == 0); /* not overwritten */
    ASSERT(!r.done);
    /* The request's owner may be gone after abort: the transport must not
     * touch it again (a wild next pointer would crash it). */
    struct collie__req junk;
    memset(&r, 0xa5, sizeof(r));
    memset(&junk, 0xa5, sizeof(junk));
    int pending = -1;
    ASSERT_RC(COLLIE_INVALID_USAGE, "aborted", tcpt_ops->progress(t.x, &pending));
    ASSERT(pending == 0);
    tcpt_ops->wait(t.x, collie__deadline_after_ms(1000)); /* returns at once */
    ASSERT(memcmp(&r, &junk, sizeof(r)) == 0);
    /* New posts fail (and are completed: their owner is here). */
    struct collie__req r2;
    memset(&r2, 0, sizeof(r2));
    r2.peer = 0;
    ASSERT_RC(COLLIE_INVALID_USAGE, "aborted", tcpt_ops->post(t.x, &r2));
    ASSERT(r2.done && r2.rc == COLLIE_INVALID_USAGE);
    tcpt_ops->close(t.x);
    t.x = NULL;
    ASSERT(memcmp(&r, &junk, sizeof(r)) == 0);
  } else {
    int64_t t0 = collie__now_ns();
    ASSERT_RC(COLLIE_REMOTE_ERROR, "rank 1",
              xfix_wait_n(&t, &r, 1, 0, collie__deadline_after_ms(10000)));
    ASSERT(strstr(collie_last_error(), "reduce #1 step 0"));
    ASSERT((collie__now_ns() - t0) < 2000000000);
  }
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* A rank whose open fails after some of its channels are up tells those
 * peers why: rank 1 opens towards ranks 0 and 2, rank 0 towards rank 1 only
 * (its open completes), rank 2 never opens. Rank 1's open times out on rank
 * 2, and rank 0's first receive from rank 1 fails with rank 1's reason,
 * which names rank 2, the cause, not only "rank 1 closed the connection". */
TEST_IMPL(tcp_failed_open_tells_why)
{
  struct xfix t;
  tcpt_meet(&t, 0, 10000);
  if (t.rank == 0) {
    int peers[1] = {1};
    ASSERT_OK(tcpt_ops->open(&t.cfg, peers, 1, &t.x));
    unsigned char b[8];
    struct collie__req r;
    xfix_post(&t, &r, 1, 0, b, sizeof(b), collie__slot(COLLIE_KIND_REDUCE, 1, 0));
    ASSERT_RC(COLLIE_REMOTE_ERROR, "rank 1",
              xfix_wait_n(&t, &r, 1, 0, collie__deadline_after_ms(10000)));
    ASSERTF(strstr(collie_last_error(), "rank 2"), "rank 0 did not learn the cause: %s",
            collie_last_error());
  } else if (t.rank == 1) {
    int peers[2] = {0, 2};
    t.cfg.deadline_ns = collie__deadline_after_ms(1500); /* rank 2 never comes */
    ASSERT(tcpt_ops->open(&t.cfg, peers, 2, &t.x) != COLLIE_SUCCESS);
    ASSERT(t.x == NULL);
    ASSERTF(strstr(collie_last_error(), "rank 2"), "rank 1's own error: %s", collie_last_error());
  }
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

static void *
tcpt_abort_later(void *arg)
{
  collie__sleep_ns(300000000);
  tcpt_ops->abort((struct collie__xport *)arg);
  return NULL;
}

/* Rank 0's transport is aborted from another thread while rank 0 sleeps in
 * wait(): the wait ends at once with the abort, and rank 1, waiting on rank
 * 0, fails naming it. */
TEST_IMPL(tcp_abort_from_thread)
{
  struct xfix t;
  tcpt_meet(&t, 0, 10000);
  xfix_open(&t);
  unsigned char b[16];
  struct collie__req r;
  xfix_post(&t, &r, 1 - t.rank, 0, b, sizeof(b), collie__slot(COLLIE_KIND_ALLREDUCE, 4, 2));
  int64_t t0 = collie__now_ns();
  if (t.rank == 0) {
    pthread_t th;
    ASSERT(pthread_create(&th, NULL, tcpt_abort_later, t.x) == 0);
    ASSERT_RC(COLLIE_INVALID_USAGE, "aborted",
              xfix_wait_n(&t, &r, 1, 0, collie__deadline_after_ms(10000)));
    ASSERT(pthread_join(th, NULL) == 0);
  } else {
    ASSERT_RC(COLLIE_REMOTE_ERROR, "rank 0",
              xfix_wait_n(&t, &r, 1, 0, collie__deadline_after_ms(10000)));
    ASSERT(strstr(collie_last_error(), "allreduce #4 step 2"));
  }
  double s = (double)(collie__now_ns() - t0) / 1e9;
  ASSERTF(s > 0.25 && s < 1.0, "the wait ended after %.2f s (abort at 0.3 s)", s);
  xfix_done(&t);
}

/* Rank 0 sends rank 1 a message that rank 1 has not asked for yet, then
 * closes. Rank 1 meanwhile waits a second for rank 2: holding rank 0's
 * header and seeing its hang-up must not make the wait spin. Afterwards rank
 * 1 still gets the message sent before the goodbye, and only a receive
 * beyond it fails. */
TEST_IMPL(tcp_held_then_close)
{
  struct xfix t;
  tcpt_meet(&t, 0, 10000);
  xfix_open(&t);
  unsigned char a[1000], b[1000];
  struct collie__req r;
  uint64_t s1 = collie__slot(COLLIE_KIND_ALLGATHER, 1, 0),
           s2 = collie__slot(COLLIE_KIND_GATHER, 2, 0);
  if (t.rank == 0) {
    xfix_fill(a, sizeof(a), 0, 1, 1);
    xfix_post(&t, &r, 1, 1, a, sizeof(a), s1);
    ASSERT_OK(xfix_wait_n(&t, &r, 1, 0, collie__deadline_after_ms(10000)));
    tcpt_ops->close(t.x);
    t.x = NULL;
    xfix_barrier(&t, "closed");
  } else if (t.rank == 2) {
    xfix_barrier(&t, "closed");
    collie__sleep_ns(1000000000);
    xfix_fill(a, sizeof(a), 2, 1, 2);
    xfix_post(&t, &r, 1, 1, a, sizeof(a), s2);
    ASSERT_OK(xfix_wait_n(&t, &r, 1, 0, collie__deadline_after_ms(10000)));
  } else {
    xfix_barrier(&t, "closed");
    struct rusage u0, u1;
    getrusage(RUSAGE_SELF, &u0);
    xfix_post(&t, &r, 2, 0, b, sizeof(b), s2);
    ASSERT_OK(xfix_wait_n(&t, &r, 1, 0, collie__deadline_after_ms(10000)));
    getrusage(RUSAGE_SELF, &u1);
    xfix_check(b, sizeof(b), 2, 1, 2);
    double cpu = (double)(u1.ru_utime.tv_sec - u0.ru_utime.tv_sec + u1.ru_stime.tv_sec -
                          u0.ru_stime.tv_sec) +
                 (double)(u1.ru_utime.tv_usec - u0.ru_utime.tv_usec + u1.ru_stime.tv_usec -
                          u0.ru_stime.tv_usec) /
                     1e6;
    ASSERTF(cpu < 0.3, "a 1 s wait used %.2f s of CPU", cpu);
    xfix_post(&t, &r, 0, 0, b, sizeof(b), s1);
    ASSERT_OK(xfix_wait_n(&t, &r, 1, 0, collie__deadline_after_ms(10000)));
    xfix_check(b, sizeof(b), 0, 1, 1);
    xfix_post(&t, &r, 0, 0, b, sizeof(b), s2);
    ASSERT_RC(COLLIE_REMOTE_ERROR, "left the communicator normally",
              xfix_wait_n(&t, &r, 1, 0, collie__deadline_after_ms(10000)));
    ASSERT(strstr(collie_last_error(), "rank 0"));
    ASSERT(strstr(collie_last_error(), "gather #2 step 0"));
  }
  xfix_done(&t);
}

/* Rank 1 never opens: the others time out naming it. */
TEST_IMPL(tcp_open_timeout)
{
  struct xfix t;
  tcpt_meet(&t, 0, 1500);
  if (t.rank == 1) {
    /* Alive but absent: a dead rank of this host would be named at once. */
    xfix_barrier(&t, "end");
    xfix_done(&t);
    return;
  }
  int fds = xfix_nfds();
  int64_t t0 = collie__now_ns();
  ASSERT_RC(COLLIE_TIMEOUT, "rank 1", xfix_try_open(&t));
  ASSERT(t.x == NULL);
  ASSERT(xfix_nfds() == fds);
  double s = (double)(collie__now_ns() - t0) / 1e9;
  ASSERTF(s > 1.3 && s < 4.0, "open gave up after %.2f s with a 1.5 s deadline", s);
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* Rank 1 publishes its peer record (pid included) and is killed instead of
 * opening, as a rank dies while a communicator is set up; with published,
 * it first publishes a listen address where nothing listens any more (it
 * died after listening). The others' open, with a communicator's setup
 * deadline of 20 s, must fail at once with REMOTE_ERROR naming its rank,
 * world rank and pid, well within 5 s (before the fix: the 20 s): rank 0
 * waits for it to connect, rank 2 for its address or to accept. */
static void
tcpt_dies_before_open(int published)
{
  struct xfix t;
  tcpt_meet(&t, 0, 20000);
  int victim = 1;
  if (t.rank == victim) {
    if (published) {
      int port = 0, fd = collie__sock_listen("127.0.0.1", 0, &port);
      ASSERT(fd >= 0);
      close(fd); /* connects to it are refused from now on */
      char addr[32];
      snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
      ASSERT_OK(collie__store_set(t.cfg.store, "tcp/addr/1", addr, strlen(addr),
                                  collie__deadline_after_ms(10000)));
    }
    test_die_by_sigkill();
  }
  int fds = xfix_nfds();
  char want[96];
  snprintf(want, sizeof(want), "rank %d (world rank %d, pid %d", victim, victim,
           (int)t.peers[victim].pid);
  const char *wantp = want; /* a pointer: ASSERT_RC tests it for NULL */
  int64_t t0 = collie__now_ns();
  ASSERT_RC(COLLIE_REMOTE_ERROR, wantp, xfix_try_open(&t));
  double s = (double)(collie__now_ns() - t0) / 1e9;
  const char *how = t.rank == 0 ? "died before it connected to rank 0"
                    : published ? "died before it accepted our connection"
                                : "died before it published its listen address";
  ASSERTF(strstr(collie_last_error(), how), "\"%s\" lacks \"%s\"", collie_last_error(), how);
  ASSERTF(s < 5.0, "open named the dead rank after %.2f s (setup deadline 20 s)", s);
  ASSERT(t.x == NULL);
  ASSERT(xfix_nfds() == fds);
  xfix_barrier_n(&t, "end", t.size - 1);
  xfix_done(&t);
}

TEST_IMPL(tcp_open_peer_dead)
{
  tcpt_dies_before_open(0);
}

TEST_IMPL(tcp_open_peer_dead_listening)
{
  tcpt_dies_before_open(1);
}

/* Connects to addr, sends a hello built from the arguments plus `extra`
 * garbage, and returns the reply byte, -1 when the connection ended without
 * one, or -2 when no reply came in time. */
static int
tcpt_raw_hello(const char *addr, uint32_t magic, uint16_t version, const char *token,
               uint16_t claimed_len, uint64_t comm_hash, uint32_t from, uint32_t to)
{
  char host[64];
  int port = 0;
  ASSERT(collie__parse_hostport(addr, host, sizeof(host), &port) == 0);
  int fd = collie__sock_connect(host, port, collie__deadline_after_ms(3000));
  ASSERT(fd >= 0);
  struct collie__tcp_hello h;
  h.magic = htole32(magic);
  h.version = htole16(version);
  h.token_len = htole16(claimed_len);
  h.comm_hash = htole64(comm_hash);
  h.from_rank = htole32(from);
  h.to_rank = htole32(to);
  unsigned char buf[sizeof(h) + 256];
  memcpy(buf, &h, sizeof(h));
  size_t tl = strlen(token);
  memcpy(buf + sizeof(h), token, tl);
  ASSERT(collie__sock_send_all(fd, buf, sizeof(h) + tl, collie__deadline_after_ms(3000)) == 0);
  unsigned char reply;
  int rv;
  if (collie__sock_recv_all(fd, &reply, 1, collie__deadline_after_ms(3000)) == 0)
    rv = reply;
  else
    rv = errno == ETIMEDOUT ? -2 : -1;
  if (rv >= 0) {
    /* After a refusal the acceptor closes. */
    unsigned char more;
    if (rv != COLLIE_TCP_REPLY_ACCEPT)
      ASSERT(collie__sock_recv_all(fd, &more, 1, collie__deadline_after_ms(3000)) < 0 &&
             errno == ECONNRESET);
  }
  close(fd);
  return rv;
}

/* A second claim of a live rank's number: someone with the job token (an
 * insider, or a rank started twice) says hello as rank 1 after rank 1 came
 * in. Rank 0 refuses it as a duplicate, and the real channels work. */
struct tcpt_claim {
  char addr[128];
  uint64_t comm_hash;
  int reply;
};

static void *
tcpt_claim_main(void *arg)
{
  struct tcpt_claim *c = arg;
  usleep(400000); /* rank 1 is in by now; rank 2 comes at 1 s: the listener is open */
  const char *tok = getenv("COLLIE_JOB_TOKEN");
  c->reply = tcpt_raw_hello(c->addr, COLLIE_TCP_HELLO_MAGIC, COLLIE_TCP_PROTO_VERSION, tok,
                            (uint16_t)strlen(tok), c->comm_hash, 1, 0);
  return NULL;
}

TEST_IMPL(tcp_duplicate_claim)
{
  struct xfix t;
  tcpt_meet(&t, 0, 10000);
  struct tcpt_claim claim = {.comm_hash = t.cfg.comm_hash, .reply = 0};
  pthread_t th;
  if (t.rank == 1) {
    tcpt_published_addr(&t, 0, claim.addr, sizeof(claim.addr), 5000);
    ASSERT(pthread_create(&th, NULL, tcpt_claim_main, &claim) == 0);
  }
  if (t.rank == 2) usleep(1000000);
  xfix_open(&t);
  if (t.rank == 1) {
    pthread_join(th, NULL);
    ASSERTF(claim.reply == COLLIE_TCP_REPLY_DUPLICATE, "a second rank 1 got reply %d", claim.reply);
  }
  xfix_ring_sizes(&t, 0);
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* While rank 0 is in open(), strangers connect to its listener: a wrong
 * token, a bad magic, a huge token length, another communicator, a rank that
 * is not a higher peer, and one that says nothing. Each is refused (or
 * ignored), and the real peers still connect and talk. */
TEST_IMPL(tcp_bad_hello)
{
  struct xfix t;
  tcpt_meet(&t, 0, 10000);
  if (t.rank == 1) {
    char addr[128], host[64];
    int port = 0;
    tcpt_published_addr(&t, 0, addr, sizeof(addr), 5000);
    const char *tok = getenv("COLLIE_JOB_TOKEN");
    uint16_t tl = (uint16_t)strlen(tok);
    /* Strangers that connect and stay silent must not block anyone, even
     * more of them than rank 0 keeps (the oldest are dropped). */
    ASSERT(collie__parse_hostport(addr, host, sizeof(host), &port) == 0);
    int silent[20];
    for (int i = 0; i < 20; i++) {
      silent[i] = collie__sock_connect(host, port, collie__deadline_after_ms(3000));
      ASSERT(silent[i] >= 0);
    }
    ASSERT(tcpt_raw_hello(addr, COLLIE_TCP_HELLO_MAGIC, COLLIE_TCP_PROTO_VERSION,
                          "not-the-job-token", 17, 1, 1, 0) == COLLIE_TCP_REPLY_BAD_TOKEN);
    ASSERT(tcpt_raw_hello(addr, COLLIE_TCP_HELLO_MAGIC, COLLIE_TCP_PROTO_VERSION, "", 0, 1, 1, 0) ==
           COLLIE_TCP_REPLY_BAD_TOKEN);
    ASSERT(tcpt_raw_hello(addr, 0x54544547u /* "GETT" */, COLLIE_TCP_PROTO_VERSION, tok, tl, 1, 1,
                          0) == COLLIE_TCP_REPLY_BAD_VERSION);
    ASSERT(tcpt_raw_hello(addr, COLLIE_TCP_HELLO_MAGIC, COLLIE_TCP_PROTO_VERSION + 1, tok, tl, 1, 1,
                          0) == COLLIE_TCP_REPLY_BAD_VERSION);
    ASSERT(tcpt_raw_hello(addr, COLLIE_TCP_HELLO_MAGIC, COLLIE_TCP_PROTO_VERSION, tok, 60000, 1, 1,
                          0) == COLLIE_TCP_REPLY_BAD_TOKEN);
    ASSERT(tcpt_raw_hello(addr, COLLIE_TCP_HELLO_MAGIC, COLLIE_TCP_PROTO_VERSION, tok, tl, 2, 1,
                          0) == COLLIE_TCP_REPLY_BAD_COMM);
    ASSERT(tcpt_raw_hello(addr, COLLIE_TCP_HELLO_MAGIC, COLLIE_TCP_PROTO_VERSION, tok, tl, 1, 1,
                          5) == COLLIE_TCP_REPLY_BAD_COMM);
    ASSERT(tcpt_raw_hello(addr, COLLIE_TCP_HELLO_MAGIC, COLLIE_TCP_PROTO_VERSION, tok, tl, 1, 0,
                          0) == COLLIE_TCP_REPLY_BAD_COMM);
    /* A token that is right but one byte short, or too long. */
    char shorter[256], longer[256];
    snprintf(shorter, sizeof(shorter), "%.*s", (int)tl - 1, tok);
    snprintf(longer, sizeof(longer), "%sx", tok);
    ASSERT(tcpt_raw_hello(addr, COLLIE_TCP_HELLO_MAGIC, COLLIE_TCP_PROTO_VERSION, shorter,
                          (uint16_t)(tl - 1), 1, 1, 0) == COLLIE_TCP_REPLY_BAD_TOKEN);
    ASSERT(tcpt_raw_hello(addr, COLLIE_TCP_HELLO_MAGIC, COLLIE_TCP_PROTO_VERSION, longer,
                          (uint16_t)(tl + 1), 1, 1, 0) == COLLIE_TCP_REPLY_BAD_TOKEN);
    xfix_open(&t);
    for (int i = 0; i < 20; i++) close(silent[i]);
  } else {
    xfix_open(&t);
  }
  /* The channels that came up work both ways. */
  int other = 1 - t.rank;
  unsigned char a[1000], b[1000];
  struct collie__req r[2];
  xfix_fill(a, sizeof(a), t.rank, other, 5);
  xfix_post(&t, &r[0], other, 0, b, sizeof(b), collie__slot(COLLIE_KIND_BROADCAST, 5, 0));
  xfix_post(&t, &r[1], other, 1, a, sizeof(a), collie__slot(COLLIE_KIND_BROADCAST, 5, 0));
  ASSERT_OK(xfix_wait_n(&t, r, 2, 0, collie__deadline_after_ms(10000)));
  xfix_check(b, sizeof(b), other, t.rank, 5);
  if (t.rank == 0) {
    /* The listener is gone after open(): nobody else can get in. */
    char addr[128], host[64];
    int port = 0;
    tcpt_published_addr(&t, 0, addr, sizeof(addr), 1000);
    ASSERT(collie__parse_hostport(addr, host, sizeof(host), &port) == 0);
    int fd = collie__sock_connect(host, port, collie__deadline_after_ms(200));
    ASSERT(fd < 0);
  }
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* Rank 1 holds another job token: rank 0 refuses it. */
TEST_IMPL(tcp_wrong_token)
{
  struct xfix t;
  tcpt_meet(&t, 0, 2000);
  int fds = xfix_nfds();
  if (t.rank == 1) {
    t.cfg.token = "some-other-job";
    ASSERT_RC(COLLIE_REMOTE_ERROR, "refused our job token", xfix_try_open(&t));
    ASSERT(strstr(collie_last_error(), "rank 0"));
  } else {
    ASSERT_RC(COLLIE_TIMEOUT, "rank 1", xfix_try_open(&t));
  }
  ASSERT(t.x == NULL);
  ASSERT(xfix_nfds() == fds);
  /* Rank 1 stays alive meanwhile: a dead one would be named at once. */
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* Requests the transport cannot take fail clearly; the transport still works. */
TEST_IMPL(tcp_bad_input)
{
  struct xfix t;
  tcpt_meet(&t, 0, 10000);
  /* A malformed peer list. */
  int bad[2] = {t.rank, 1 - t.rank};
  struct collie__xport *x = (struct collie__xport *)&t;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "peer", tcpt_ops->open(&t.cfg, bad, 2, &x));
  ASSERT(x == NULL);
  xfix_open(&t);
  struct collie__req r;
  memset(&r, 0, sizeof(r));
  r.peer = t.rank; /* no channel to self */
  r.is_send = 1;
  ASSERT_RC(COLLIE_INTERNAL_ERROR, "no tcp channel", tcpt_ops->post(t.x, &r));
  r.peer = 7;
  ASSERT_RC(COLLIE_INTERNAL_ERROR, "rank 7", tcpt_ops->post(t.x, &r));
  r.peer = 1 - t.rank;
  r.len = 10;
  r.buf = NULL;
  ASSERT_RC(COLLIE_INTERNAL_ERROR, "no buffer", tcpt_ops->post(t.x, &r));
  /* Still usable. */
  unsigned char a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8];
  struct collie__req rr[2];
  xfix_post(&t, &rr[0], 1 - t.rank, 0, b, 8, collie__slot(COLLIE_KIND_P2P, 1, 0));
  xfix_post(&t, &rr[1], 1 - t.rank, 1, a, 8, collie__slot(COLLIE_KIND_P2P, 1, 0));
  ASSERT_OK(xfix_wait_n(&t, rr, 2, 0, collie__deadline_after_ms(10000)));
  ASSERT(memcmp(a, b, 8) == 0);
  xfix_barrier(&t, "end");
  xfix_done(&t);
}

/* Ping-pong between two ranks: prints latency (8 B, sleeping and spinning
 * waits) and bandwidth (8 MiB messages) for later tuning. */
TEST_IMPL(tcp_pingpong)
{
  struct xfix t;
  tcpt_meet(&t, 0, 10000);
  xfix_open(&t);
  int other = 1 - t.rank;
  unsigned char small[8] = {0};
  for (int mode = 0; mode < 2; mode++) {
    int spin = mode ? 1000 : 0; /* spinning: many progress calls, then sleep */
    int iters = mode ? 1000 : 3000;
    xfix_barrier(&t, mode ? "lat1" : "lat0");
    int64_t t0 = collie__now_ns();
    for (int i = 0; i < iters; i++) {
      uint64_t slot = collie__slot(COLLIE_KIND_P2P, (uint32_t)i, (uint32_t)mode);
      xfix_pingpong_round(&t, other, small, 8, slot, spin);
    }
    double us = (double)(collie__now_ns() - t0) / 1e3 / iters / 2;
    if (t.rank == 0)
      printf("tcp pingpong 8 B: %.1f us one way (%s)\n", us, mode ? "spinning" : "sleeping");
  }
  size_t big = 8u << 20;
  int nbig = 40;
  unsigned char *buf = malloc(big);
  ASSERT(buf);
  memset(buf, 3, big);
  xfix_barrier(&t, "bw");
  int64_t t0 = collie__now_ns();
  struct collie__req rs[4];
  for (int i = 0; i < nbig; i++) {
    uint64_t slot = collie__slot(COLLIE_KIND_BROADCAST, (uint32_t)i, 0);
    xfix_post(&t, &rs[0], other, t.rank == 0, buf, big, slot);
    ASSERT_OK(xfix_wait_n(&t, rs, 1, 0, collie__deadline_after_ms(10000)));
  }
  xfix_post(&t, &rs[0], other, t.rank == 1, small, 1, collie__slot(COLLIE_KIND_BARRIER, 0, 0));
  ASSERT_OK(xfix_wait_n(&t, rs, 1, 0, collie__deadline_after_ms(10000)));
  double s = (double)(collie__now_ns() - t0) / 1e9;
  if (t.rank == 0)
    printf("tcp bandwidth 8 MiB messages: %.2f GB/s one way\n", (double)big * nbig / s / 1e9);
  /* Both directions at once. */
  unsigned char *buf2 = malloc(big);
  ASSERT(buf2);
  xfix_barrier(&t, "bw2");
  t0 = collie__now_ns();
  for (int i = 0; i < nbig / 2; i++) {
    uint64_t slot = collie__slot(COLLIE_KIND_ALLGATHER, (uint32_t)i, 0);
    xfix_post(&t, &rs[0], other, 0, buf2, big, slot);
    xfix_post(&t, &rs[1], other, 1, buf, big, slot);
    ASSERT_OK(xfix_wait_n(&t, rs, 2, 0, collie__deadline_after_ms(10000)));
  }
  s = (double)(collie__now_ns() - t0) / 1e9;
  if (t.rank == 0)
    printf("tcp bandwidth 8 MiB messages: %.2f GB/s each way, both ways at once\n",
           (double)big * (nbig / 2) / s / 1e9);
  free(buf);
  free(buf2);
  xfix_barrier(&t, "end");
  xfix_done(&t);
}
