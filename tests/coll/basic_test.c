/* basic_test.c - barrier, broadcast, send/recv, groups and split across ranks. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner.h"
#include "util/util.h"

/* Nobody leaves the barrier before everybody arrived: each rank leaves a mark
 * before it enters, and looks for every mark after it leaves. Rank r sleeps r
 * ms first so that arrivals are spread out. */
TEST_IMPL(barrier_waits_for_all)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  for (int round = 0; round < 3; round++) {
    char path[512];
    usleep((useconds_t)(((r + round) % p) * 3000));
    snprintf(path, sizeof(path), "%s/arrived-%d-%d", test_dir(), round, r);
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    ASSERT(fd >= 0);
    close(fd);
    ASSERT_OK(collie_barrier(comm, NULL, NULL));
    for (int q = 0; q < p; q++) {
      snprintf(path, sizeof(path), "%s/arrived-%d-%d", test_dir(), round, q);
      ASSERTF(access(path, F_OK) == 0, "left barrier %d before rank %d arrived", round, q);
    }
  }
  ASSERT_OK(collie_comm_destroy(comm));
}

TEST_IMPL(broadcast_roots)
{
  static const size_t counts[] = {0, 1, 7, 4097, (1u << 20) + 3};
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
    size_t n = counts[c];
    int32_t *buf = malloc(n * sizeof(int32_t) + 4);
    ASSERT(buf);
    for (int root = 0; root < p; root++) {
      if (n > 100000 && root > 1) break; /* large: two roots are enough */
      for (size_t i = 0; i < n; i++) buf[i] = r == root ? (int32_t)(i * 7 + (size_t)root) : -1;
      ASSERT_OK(collie_broadcast(comm, buf, n, COLLIE_INT32, root, NULL, NULL));
      for (size_t i = 0; i < n; i++)
        ASSERTF(buf[i] == (int32_t)(i * 7 + (size_t)root), "root %d count %zu: buf[%zu] = %d", root,
                n, i, buf[i]);
    }
    free(buf);
  }
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Messages around the ring, with tags, in blocking calls (even ranks send
 * first, odd ranks receive first, so blocking calls cannot deadlock). */
TEST_IMPL(sendrecv_ring)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  if (p < 2) {
    ASSERT_OK(collie_comm_destroy(comm));
    return;
  }
  int right = (r + 1) % p, left = (r + p - 1) % p;
  size_t n = 300000;
  int64_t *out = malloc(n * 8), *in = malloc(n * 8);
  ASSERT(out && in);
  for (int iter = 0; iter < 3; iter++) {
    for (size_t i = 0; i < n; i++) out[i] = (int64_t)(r * 1000003 + (int)i + iter);
    memset(in, 0, n * 8);
    if (r % 2 == 0) {
      ASSERT_OK(collie_send(comm, out, n, COLLIE_INT64, right, 40 + iter, NULL, NULL));
      ASSERT_OK(collie_recv(comm, in, n, COLLIE_INT64, left, 40 + iter, NULL, NULL));
    } else {
      ASSERT_OK(collie_recv(comm, in, n, COLLIE_INT64, left, 40 + iter, NULL, NULL));
      ASSERT_OK(collie_send(comm, out, n, COLLIE_INT64, right, 40 + iter, NULL, NULL));
    }
    for (size_t i = 0; i < n; i++)
      ASSERTF(in[i] == (int64_t)(left * 1000003 + (int)i + iter), "in[%zu] = %lld", i,
              (long long)in[i]);
  }
  free(out);
  free(in);
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Everyone sends right and receives left at once, in one group, with large
 * messages, plus a message to itself: must not deadlock. */
TEST_IMPL(group_ring_exchange)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  size_t n = 2u << 20;
  uint8_t *out = malloc(n), *in = malloc(n), self_in[16], self_out[16];
  ASSERT(out && in);
  memset(out, r + 1, n);
  memset(self_out, 0x40 + r, sizeof(self_out));
  collie_work_t *work = NULL;
  ASSERT_OK(collie_group_start(comm));
  ASSERT_OK(collie_send(comm, out, n, COLLIE_UINT8, (r + 1) % p, 1, NULL, NULL));
  ASSERT_OK(collie_recv(comm, in, n, COLLIE_UINT8, (r + p - 1) % p, 1, NULL, NULL));
  ASSERT_OK(collie_send(comm, self_out, sizeof(self_out), COLLIE_UINT8, r, 2, NULL, NULL));
  ASSERT_OK(collie_recv(comm, self_in, sizeof(self_in), COLLIE_UINT8, r, 2, NULL, NULL));
  ASSERT_OK(collie_group_end(comm, &work));
  ASSERT(work != NULL);
  ASSERT_OK(collie_wait(work, -1));
  collie_work_free(work);
  for (size_t i = 0; i < n; i += 4093)
    ASSERTF(in[i] == (uint8_t)((r + p - 1) % p + 1), "in[%zu] = %d", i, in[i]);
  ASSERT(memcmp(self_in, self_out, sizeof(self_in)) == 0);
  /* Work inside a group is refused without poisoning. */
  ASSERT_OK(collie_group_start(comm));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "inside a group",
            collie_send(comm, out, 1, COLLIE_UINT8, 0, 0, NULL, &work));
  ASSERT_OK(collie_group_end(comm, NULL));
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  free(out);
  free(in);
  ASSERT_OK(collie_comm_destroy(comm));
}

/* A recv for a tag nobody sends waits, as in MPI, and times out at its
 * deadline naming its tag and the message that did come (another tag,
 * unexpected); the timeout poisons the communicator. A recv whose size
 * differs from the send it matches fails with INVALID_USAGE naming both. */
TEST_IMPL(sendrecv_mismatch)
{
  collie_comm_t *comm = test_comm(), *c2 = NULL;
  int r = test_rank();
  int32_t v[4] = {1, 2, 3, 4};
  collie_opts_t quick = {.timeout_ms = 300};
  ASSERT_OK(collie_comm_split(comm, 0, r, &c2));
  if (r == 0) {
    ASSERT_OK(collie_send(comm, v, 4, COLLIE_INT32, 1, 5, NULL, NULL));
  } else if (r == 1) {
    ASSERT_RC(COLLIE_TIMEOUT, "tag 6", collie_recv(comm, v, 4, COLLIE_INT32, 0, 6, &quick, NULL));
    ASSERTF(
        strstr(collie_last_error(), "unexpected message here (from rank 0 with tag 5, 16 bytes)"),
        "%s", collie_last_error());
    ASSERT_RC(COLLIE_INVALID_USAGE, "earlier error", collie_barrier(comm, NULL, NULL));
  }
  if (r == 0) {
    ASSERT_OK(collie_send(c2, v, 4, COLLIE_INT32, 1, 5, NULL, NULL));
  } else if (r == 1) {
    ASSERT_RC(COLLIE_INVALID_USAGE, "rank 0 sent 16 bytes with tag 5, this receive takes 12",
              collie_recv(c2, v, 3, COLLIE_INT32, 0, 5, NULL, NULL));
    ASSERT_RC(COLLIE_INVALID_USAGE, "earlier error", collie_barrier(c2, NULL, NULL));
  }
  collie_comm_destroy(c2);
  collie_comm_destroy(comm);
}

/* Split into even and odd ranks (key reverses the order), use both halves
 * and the parent interleaved; COLLIE_SPLIT_NONE leaves a rank out. */
TEST_IMPL(split_even_odd)
{
  collie_comm_t *comm = test_comm(), *half = NULL, *solo = NULL;
  int r = test_rank(), p = test_size();
  ASSERT_OK(collie_comm_split(comm, r % 2, -r, &half));
  ASSERT(half != NULL);
  int hsize = (p + 1 - r % 2) / 2;
  ASSERT(collie_comm_size(half) == hsize);
  /* key -r: the highest parent rank comes first. */
  int members_above = 0;
  for (int q = r + 2; q < p; q += 2) members_above++;
  ASSERT(collie_comm_rank(half) == members_above);
  for (int iter = 0; iter < 3; iter++) {
    int64_t x = r, sum = 0, all = 0;
    ASSERT_OK(collie_allreduce(half, &x, &sum, 1, COLLIE_INT64, COLLIE_SUM, NULL, NULL));
    int64_t want = 0;
    for (int q = r % 2; q < p; q += 2) want += q;
    ASSERT(sum == want);
    ASSERT_OK(collie_allreduce(comm, &x, &all, 1, COLLIE_INT64, COLLIE_SUM, NULL, NULL));
    ASSERT(all == (int64_t)p * (p - 1) / 2);
    int32_t b = r == 0 ? 1234 + iter : 0;
    ASSERT_OK(collie_broadcast(half, &b, 1, COLLIE_INT32, 0, NULL, NULL));
  }
  /* Only rank 0 joins; the others pass COLLIE_SPLIT_NONE. */
  ASSERT_OK(collie_comm_split(comm, r == 0 ? 0 : COLLIE_SPLIT_NONE, 0, &solo));
  ASSERT((solo != NULL) == (r == 0));
  if (solo) {
    ASSERT(collie_comm_size(solo) == 1);
    float f = 2.5f, g = 0;
    ASSERT_OK(collie_allreduce(solo, &f, &g, 1, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
    ASSERT(g == 2.5f);
    ASSERT_OK(collie_comm_destroy(solo));
  }
  ASSERT_OK(collie_comm_destroy(half));
  ASSERT_OK(collie_comm_destroy(comm));
}

/* A process may init the world twice: the k-th init of every rank forms one
 * communicator, and the two are independent. */
TEST_IMPL(init_twice)
{
  collie_comm_t *a = test_comm(), *b = test_comm();
  int r = test_rank(), p = test_size();
  ASSERT(a != b);
  int64_t x = r + 1, sa = 0, sb = 0;
  ASSERT_OK(collie_allreduce(b, &x, &sb, 1, COLLIE_INT64, COLLIE_SUM, NULL, NULL));
  ASSERT_OK(collie_allreduce(a, &x, &sa, 1, COLLIE_INT64, COLLIE_MAX, NULL, NULL));
  ASSERT(sb == (int64_t)p * (p + 1) / 2 && sa == p);
  ASSERT_OK(collie_comm_destroy(a));
  ASSERT_OK(collie_barrier(b, NULL, NULL));
  ASSERT_OK(collie_comm_destroy(b));
}

/* A process may destroy every communicator and init the world again, over
 * and over (test suites and frameworks do): each round is a new world of all
 * ranks, even when one rank starts the next round while another still
 * destroys the last (over the tcp store that used to find rank 0's server
 * closing, or gone). */
TEST_IMPL(init_again)
{
  int r = test_rank(), p = test_size();
  for (int round = 0; round < 6; round++) {
    collie_comm_t *comm = test_comm();
    int64_t x = r + round, s = 0;
    ASSERT_OK(collie_allreduce(comm, &x, &s, 1, COLLIE_INT64, COLLIE_SUM, NULL, NULL));
    ASSERTF(s == (int64_t)p * (p - 1) / 2 + (int64_t)p * round, "round %d: sum %lld", round,
            (long long)s);
    if (r == 0 && round % 2) collie__sleep_ns(20 * 1000000LL); /* rank 0 destroys last */
    ASSERT_OK(collie_comm_destroy(comm));
  }
}

/* Files under dir, counted (the file store keeps one per key). */
static int
basic_count_files(const char *dir)
{
  char cmd[700];
  snprintf(cmd, sizeof(cmd), "find '%s' -type f | wc -l", dir);
  FILE *f = popen(cmd, "r");
  ASSERT(f);
  int n = -1;
  ASSERT(fscanf(f, "%d", &n) == 1);
  pclose(f);
  return n;
}

/* The store forgets a communicator when it is destroyed (issue 19: every
 * split left its keys on rank 0 for ever, so 1,000 split/destroy cycles
 * grew only rank 0): after many cycles the store holds as many keys as
 * after the first. The runner's store is a file store: a file per key. */
TEST_IMPL(split_destroy_store_flat)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  const char *url = getenv("COLLIE_STORE");
  ASSERT(url && !strncmp(url, "file://", 7));
  const char *dir = url + 7;
  int after_first = 0;
  for (int i = 0; i < 12; i++) {
    collie_comm_t *sub = NULL;
    ASSERT_OK(collie_comm_split(comm, r % 2, r, &sub));
    int32_t x = 1, s = 0;
    ASSERT_OK(collie_allreduce(sub, &x, &s, 1, COLLIE_INT32, COLLIE_SUM, NULL, NULL));
    ASSERT_OK(collie_comm_destroy(sub));
    ASSERT_OK(collie_barrier(comm, NULL, NULL)); /* every destroy done before counting */
    if (i == 0) after_first = basic_count_files(dir);
    ASSERT_OK(collie_barrier(comm, NULL, NULL));
  }
  int now = basic_count_files(dir);
  ASSERTF(now <= after_first, "the store grew from %d to %d files over 11 split/destroy cycles",
          after_first, now);
  ASSERT_OK(collie_comm_destroy(comm));
}
