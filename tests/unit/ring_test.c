/* ring_test.c - the bootstrap ring (bootstrap/ring.c): every rank's record
 * around the ring at several sizes, a stranger on a rank's listener closed
 * while the ring forms, and communicators built over it (world, split,
 * tcp taking the ring's listener), whose ranks report the one that never
 * came. */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "core/introspect.h"
#include "runner.h"
#include "util/util.h"

/* Rank r's record: len bytes from its rank and the round. */
static void
rt_fill(unsigned char *b, size_t len, int r, int round)
{
  for (size_t i = 0; i < len; i++) b[i] = (unsigned char)(r * 31 + round * 7 + (int)i);
}

/* Every rank of the test meets over the ring through the runner's store, then
 * gathers records of 1, 540 and 3000 bytes: each one checked. */
TEST_IMPL(ring_bootstrap_allgather)
{
  int r = test_rank(), p = test_size();
  collie__store_t *s = NULL;
  int64_t dl = collie__deadline_after_ms(15000);
  ASSERT_OK(collie__store_open(getenv("COLLIE_STORE"), r, p, getenv("COLLIE_JOB_TOKEN"), dl, &s));
  collie__ring_t *ring = NULL;
  ASSERT_OK(collie__ring_open(s, r, p, getenv("COLLIE_JOB_TOKEN"), NULL, dl, &ring));
  ASSERT(collie__ring_listener(ring) >= 0 && strchr(collie__ring_addr(ring), ':'));
  const size_t lens[] = {1, 540, 3000};
  for (int round = 0; round < 3; round++) {
    size_t len = lens[round];
    unsigned char *mine = malloc(len), *all = malloc(len * (size_t)p), *want = malloc(len);
    ASSERT(mine && all && want);
    rt_fill(mine, len, r, round);
    memset(all, 0xEE, len * (size_t)p);
    ASSERT_OK(collie__ring_allgather(ring, mine, len, all, dl));
    for (int q = 0; q < p; q++) {
      rt_fill(want, len, q, round);
      ASSERTF(!memcmp(all + (size_t)q * len, want, len), "round %d: rank %d's record is wrong",
              round, q);
    }
    free(mine);
    free(all);
    free(want);
  }
  collie__ring_close(ring);
  collie__store_release(s);
}

struct rt_peer {
  const char *url;
  int rank;
  collie_result_t rc;
  int got[2];
};

/* One rank of a ring of 2, on its own thread. */
static void *
rt_rank(void *arg)
{
  struct rt_peer *a = arg;
  collie__store_t *s = NULL;
  collie__ring_t *ring = NULL;
  int64_t dl = collie__deadline_after_ms(10000);
  a->rc = collie__store_open(a->url, a->rank, 2, "tok", dl, &s);
  if (a->rc == COLLIE_SUCCESS) a->rc = collie__ring_open(s, a->rank, 2, "tok", NULL, dl, &ring);
  if (a->rc == COLLIE_SUCCESS)
    a->rc = collie__ring_allgather(ring, &a->rank, sizeof(a->rank), a->got, dl);
  collie__ring_close(ring);
  if (s) collie__store_release(s);
  return NULL;
}

/* Someone connects to rank 1's listener before rank 0 does, with a hello of
 * the right shape but the wrong token: once rank 0 is there, rank 1 takes
 * the stranger first (the older connection), closes it at once, and the
 * ring still forms. */
TEST_IMPL(ring_bootstrap_stranger)
{
  char url[600];
  snprintf(url, sizeof(url), "file://%s/store", test_dir());
  struct rt_peer a1 = {url, 1, COLLIE_INTERNAL_ERROR, {-1, -1}};
  struct rt_peer a0 = {url, 0, COLLIE_INTERNAL_ERROR, {-1, -1}};
  pthread_t t1, t0;
  ASSERT(pthread_create(&t1, NULL, rt_rank, &a1) == 0);
  collie__store_t *s = NULL;
  int64_t dl = collie__deadline_after_ms(10000);
  ASSERT_OK(collie__store_open(url, 0, 2, "tok", dl, &s));
  void *val = NULL;
  size_t len = 0;
  ASSERT_OK(collie__store_get(s, "ring/1", &val, &len, dl));
  char addr[64], host[64];
  int port = 0;
  snprintf(addr, sizeof(addr), "%.*s", (int)len, (const char *)val);
  free(val);
  ASSERT(collie__parse_hostport(addr, host, sizeof(host), &port) == 0);
  int fd = collie__sock_connect(host, port, dl);
  ASSERT(fd >= 0);
  struct {
    uint32_t magic;
    int32_t rank, size;
    uint32_t pad;
    uint64_t token_hash;
  } hello = {0x31474e52u, 0, 2, 0, 12345};
  ASSERT(collie__sock_send_all(fd, &hello, sizeof(hello), dl) == 0);
  ASSERT(pthread_create(&t0, NULL, rt_rank, &a0) == 0);
  char byte;
  int64_t t = collie__now_ns();
  ASSERT(collie__sock_recv_all(fd, &byte, 1, collie__deadline_after_ms(8000)) < 0);
  double secs = (double)(collie__now_ns() - t) / 1e9;
  ASSERTF(secs < 6, "the stranger's connection was not closed (%.2f s)", secs);
  close(fd);
  ASSERT(pthread_join(t0, NULL) == 0 && pthread_join(t1, NULL) == 0);
  ASSERTF(a0.rc == COLLIE_SUCCESS && a1.rc == COLLIE_SUCCESS, "ranks: %s, %s",
          collie_result_string(a0.rc), collie_result_string(a1.rc));
  ASSERT(a0.got[0] == 0 && a0.got[1] == 1 && a1.got[0] == 0 && a1.got[1] == 1);
  collie__store_release(s);
}

/* Communicators built over the ring (COLLIE_RING_BOOTSTRAP=2): the world,
 * whose tcp channels accept on the ring's listener, and a split; each
 * allreduce right. */
TEST_IMPL(ring_bootstrap_comm)
{
  setenv("COLLIE_RING_BOOTSTRAP", "2", 1);
  collie_comm_t *comm = test_comm();
  int r = collie_comm_rank(comm), p = collie_comm_size(comm);
  ASSERT(collie__comm_met_over_ring(comm));
  int64_t v = r + 1;
  ASSERT_OK(collie_allreduce(comm, &v, &v, 1, COLLIE_INT64, COLLIE_SUM, NULL, NULL));
  ASSERT(v == (int64_t)p * (p + 1) / 2);
  collie_comm_t *half = NULL;
  ASSERT_OK(collie_comm_split(comm, r % 2, r, &half));
  int hp = collie_comm_size(half);
  ASSERT(hp == 1 || collie__comm_met_over_ring(half));
  v = r;
  ASSERT_OK(collie_allreduce(half, &v, &v, 1, COLLIE_INT64, COLLIE_SUM, NULL, NULL));
  int64_t want = 0;
  for (int q = r % 2; q < p; q += 2) want += q;
  ASSERTF(v == want, "split allreduce %lld, want %lld", (long long)v, (long long)want);
  ASSERT_OK(collie_comm_destroy(half));
  ASSERT_OK(collie_comm_destroy(comm));
  unsetenv("COLLIE_RING_BOOTSTRAP");
  /* Under the threshold: the store, as before. */
  setenv("COLLIE_RING_BOOTSTRAP", "64", 1);
  comm = test_comm();
  ASSERT(!collie__comm_met_over_ring(comm));
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Three of four ranks arrive (COLLIE_RING_BOOTSTRAP=2): each fails at the
 * deadline naming rank 3, the neighbours of the gap (2 waits to connect to
 * it, 0 to be connected from it) and the rank that only waits for records
 * (1) alike. */
TEST_IMPL(ring_bootstrap_missing_rank)
{
  setenv("COLLIE_RING_BOOTSTRAP", "2", 1);
  char url[600];
  snprintf(url, sizeof(url), "file://%s/ring-store", test_dir());
  collie_config_t cfg = COLLIE_CONFIG_INIT;
  cfg.rank = test_rank();
  cfg.world_size = 4;
  cfg.store = url;
  cfg.job_token = "tok";
  cfg.timeout_ms = 1500;
  collie_comm_t *comm = NULL;
  int64_t t0 = collie__now_ns();
  ASSERT_RC(COLLIE_TIMEOUT, "rank 3 never joined", collie_comm_init_config(&cfg, &comm));
  double secs = (double)(collie__now_ns() - t0) / 1e9;
  ASSERTF(secs < 5, "rank %d gave up after %.2f s with a 1.5 s timeout", test_rank(), secs);
  ASSERT(comm == NULL);
}
