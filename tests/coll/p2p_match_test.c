/* p2p_match_test.c - send and receive matched by source and tag, as MPI
 * matches them: tags are independent streams, one tag's messages keep
 * their order, COLLIE_ANY_SOURCE and COLLIE_ANY_TAG, the status of a
 * receive (a shorter message is fine, a longer one truncates), probes,
 * synchronous sends, a collective that meets a message sent before it, and
 * the bounded buffer for unexpected messages. Every test runs on shm and
 * tcp (list_coll.h). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner.h"

/* The value of element i of the k-th message with tag t from rank s. */
static int64_t
val(int s, int t, int k, size_t i)
{
  return ((int64_t)s << 40) + ((int64_t)t << 24) + ((int64_t)k << 20) + (int64_t)i;
}

static int64_t *
filled(size_t n, int s, int t, int k)
{
  int64_t *b = malloc(n * sizeof(*b) + 8);
  ASSERT(b != NULL);
  for (size_t i = 0; i < n; i++) b[i] = val(s, t, k, i);
  return b;
}

static void
check(const int64_t *b, size_t n, int s, int t, int k)
{
  for (size_t i = 0; i < n; i++)
    ASSERTF(b[i] == val(s, t, k, i), "message %d of tag %d from rank %d: [%zu] = %lld, want %lld",
            k, t, s, i, (long long)b[i], (long long)val(s, t, k, i));
}

/* The case: rank 0 sends tag 31 then tag 32, rank 1 receives tag 32
 * first. Then, small and large (1 MiB: several chunks, a single copy on
 * shm), three messages each of tags 5 and 6 interleaved, received all of
 * tag 6 first: each tag's messages in their order. */
TEST_IMPL(p2p_tags_independent)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  int64_t a = 31, b = 32;
  if (r == 0) {
    ASSERT_OK(collie_send(comm, &a, 1, COLLIE_INT64, 1, 31, NULL, NULL));
    ASSERT_OK(collie_send(comm, &b, 1, COLLIE_INT64, 1, 32, NULL, NULL));
  } else if (r == 1) {
    int64_t x = 0, y = 0;
    ASSERT_OK(collie_recv(comm, &y, 1, COLLIE_INT64, 0, 32, NULL, NULL));
    ASSERT_OK(collie_recv(comm, &x, 1, COLLIE_INT64, 0, 31, NULL, NULL));
    ASSERT(x == 31 && y == 32);
  }
  static const size_t sizes[] = {3, (size_t)1 << 17};
  for (size_t z = 0; z < 2; z++) {
    size_t n = sizes[z];
    if (r == 0) {
      collie_work_t *w[6];
      int64_t *m[6];
      for (int k = 0; k < 6; k++) {
        m[k] = filled(n, 0, 5 + k % 2, k / 2);
        ASSERT_OK(collie_send(comm, m[k], n, COLLIE_INT64, 1, 5 + k % 2, NULL, &w[k]));
      }
      for (int k = 0; k < 6; k++) {
        ASSERT_OK(collie_wait(w[k], -1));
        collie_work_free(w[k]);
        free(m[k]);
      }
    } else if (r == 1) {
      int64_t *got = malloc(n * sizeof(*got));
      ASSERT(got != NULL);
      for (int t = 6; t >= 5; t--)
        for (int k = 0; k < 3; k++) {
          ASSERT_OK(collie_recv(comm, got, n, COLLIE_INT64, 0, t, NULL, NULL));
          check(got, n, 0, t, k);
        }
      free(got);
    }
  }
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Receives with a status: from any rank with any tag (every other rank sends
 * one message of its own size and tag); a message shorter than the buffer
 * is taken and its size reported; COLLIE_ANY_TAG from a named rank keeps
 * that rank's order. */
TEST_IMPL(p2p_any_source_any_tag_status)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  if (r != 0) {
    int64_t *m = filled((size_t)r, r, 100 + r, 0);
    ASSERT_OK(collie_send(comm, m, (size_t)r, COLLIE_INT64, 0, 100 + r, NULL, NULL));
    int64_t one = 1, two = 2;
    ASSERT_OK(collie_send(comm, &one, 1, COLLIE_INT64, 0, 7, NULL, NULL));
    ASSERT_OK(collie_send(comm, &two, 1, COLLIE_INT64, 0, 3, NULL, NULL));
    free(m);
  } else {
    int seen[64] = {0};
    int64_t buf[64];
    for (int k = 1; k < p; k++) {
      collie_status_t st;
      ASSERT_OK(collie_recv_status(comm, buf, 64, COLLIE_INT64, COLLIE_ANY_SOURCE, COLLIE_ANY_TAG,
                                   &st, NULL, NULL));
      /* Each rank's first message is the one with its own tag. */
      ASSERTF(st.source > 0 && st.source < p && !seen[st.source], "source %d", st.source);
      ASSERTF(st.tag == 100 + st.source, "tag %d from rank %d", st.tag, st.source);
      ASSERTF(st.bytes == (size_t)st.source * 8, "%zu bytes from rank %d", st.bytes, st.source);
      check(buf, (size_t)st.source, st.source, st.tag, 0);
      seen[st.source] = 1;
      /* Its next two, with any tag: 7 then 3, in the order sent. */
      int64_t x = 0;
      ASSERT_OK(collie_recv_status(comm, &x, 1, COLLIE_INT64, st.source, COLLIE_ANY_TAG, &st, NULL,
                                   NULL));
      ASSERT(x == 1 && st.tag == 7);
      ASSERT_OK(collie_recv(comm, &x, 1, COLLIE_INT64, st.source, COLLIE_ANY_TAG, NULL, NULL));
      ASSERT(x == 2);
    }
  }
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  ASSERT_OK(collie_comm_destroy(comm));
}

/* A message longer than the receive's buffer fails it ("message truncated",
 * both sizes), and the communicator is poisoned as on any failed receive. */
TEST_IMPL(p2p_truncated)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  int64_t v[4] = {1, 2, 3, 4};
  if (r == 0) ASSERT_OK(collie_send(comm, v, 4, COLLIE_INT64, 1, 9, NULL, NULL));
  if (r == 1) {
    collie_status_t st;
    ASSERT_RC(COLLIE_INVALID_USAGE, "message truncated: rank 0 sent 32 bytes with tag 9",
              collie_recv_status(comm, v, 2, COLLIE_INT64, 0, 9, &st, NULL, NULL));
    ASSERTF(strstr(collie_last_error(), "room for 16"), "%s", collie_last_error());
  }
  collie_comm_destroy(comm);
}

/* A blocking receive from a named peer and tag with room for more than
 * comes (collie_recv_status: MPI's Recv) goes straight to the channel, and
 * the shorter message must still land in its buffer, whole, with the bytes
 * past it untouched and its true size in the status: small and large (a
 * single copy on shm, several frames on tcp), posted before the message
 * arrives (the sender waits a little) and after, then one of the full size. */
TEST_IMPL(p2p_short_direct)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  static const size_t counts[] = {3, 1000, ((size_t)1 << 17) - 5, (size_t)1 << 17};
  const size_t room = (size_t)1 << 17;
  for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
    if (r == 0) {
      int64_t *m = filled(counts[k], 0, 5, (int)k);
      if (k % 2 == 0) usleep(20000);
      ASSERT_OK(collie_send(comm, m, counts[k], COLLIE_INT64, 1, 5, NULL, NULL));
      free(m);
    } else if (r == 1) {
      int64_t *b = malloc(room * sizeof(*b));
      ASSERT(b != NULL);
      for (size_t i = 0; i < room; i++) b[i] = -7;
      collie_status_t st;
      ASSERT_OK(collie_recv_status(comm, b, room, COLLIE_INT64, 0, 5, &st, NULL, NULL));
      ASSERTF(st.source == 0 && st.tag == 5 && st.bytes == counts[k] * 8,
              "message %zu: source %d tag %d bytes %zu", k, st.source, st.tag, st.bytes);
      check(b, counts[k], 0, 5, (int)k);
      for (size_t i = counts[k]; i < room; i++)
        ASSERTF(b[i] == -7, "[%zu] written past the message", i);
      free(b);
    }
  }
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Probes: iprobe finds nothing before the sender sends; probe waits for the
 * message and tells its source, tag and size without taking it; the receive
 * posted next takes it. ANY_SOURCE and ANY_TAG probes too. */
TEST_IMPL(p2p_probe)
{
  collie_comm_t *comm = test_comm(), *side = NULL;
  int r = test_rank();
  ASSERT_OK(collie_comm_split(comm, 0, r, &side));
  collie_status_t st;
  int flag = -1;
  if (r == 1) {
    ASSERT_OK(collie_iprobe(comm, 0, 4, &flag, &st, NULL));
    ASSERT(flag == 0 && st.source == -1);
  }
  ASSERT_OK(collie_barrier(side, NULL, NULL)); /* rank 1 looked before rank 0 sent */
  if (r == 0) {
    int64_t *m = filled(5, 0, 4, 0);
    int64_t o = 77;
    ASSERT_OK(collie_send(comm, &o, 1, COLLIE_INT64, 1, 2, NULL, NULL));
    ASSERT_OK(collie_send(comm, m, 5, COLLIE_INT64, 1, 4, NULL, NULL));
    free(m);
  } else if (r == 1) {
    /* Tag 4 sits behind tag 2: the probe still sees it. */
    ASSERT_OK(collie_probe(comm, 0, 4, &st, NULL));
    ASSERT(st.source == 0 && st.tag == 4 && st.bytes == 40);
    ASSERT_OK(collie_iprobe(comm, COLLIE_ANY_SOURCE, COLLIE_ANY_TAG, &flag, &st, NULL));
    ASSERT(flag == 1 && st.source == 0 && st.tag == 2 && st.bytes == 8);
    int64_t got[5], o = 0;
    ASSERT_OK(collie_recv(comm, got, 5, COLLIE_INT64, 0, 4, NULL, NULL));
    check(got, 5, 0, 4, 0);
    ASSERT_OK(collie_recv(comm, &o, 1, COLLIE_INT64, 0, 2, NULL, NULL));
    ASSERT(o == 77);
    ASSERT_OK(collie_iprobe(comm, 0, COLLIE_ANY_TAG, &flag, &st, NULL));
    ASSERT(flag == 0);
  }
  /* The errors, which leave the communicator usable. */
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "status is NULL", collie_probe(comm, 0, 1, NULL, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "flag is NULL", collie_iprobe(comm, 0, 1, NULL, &st, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "tag = -2", collie_iprobe(comm, 0, -2, &flag, &st, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "source = 99", collie_probe(comm, 99, 1, &st, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "peer = -1",
            collie_send(comm, &flag, 1, COLLIE_INT32, COLLIE_ANY_SOURCE, 1, NULL, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "tag = -1 must be >= 0",
            collie_send(comm, &flag, 1, COLLIE_INT32, 0, COLLIE_ANY_TAG, NULL, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "status is NULL",
            collie_recv_status(comm, &flag, 1, COLLIE_INT32, 0, 1, NULL, NULL, NULL));
  ASSERT_OK(collie_group_start(comm));
  ASSERT_RC(COLLIE_INVALID_USAGE, "not inside a group",
            collie_recv(comm, &flag, 1, COLLIE_INT32, COLLIE_ANY_SOURCE, 1, NULL, NULL));
  ASSERT_RC(COLLIE_INVALID_USAGE, "not inside a group",
            collie_ssend(comm, &flag, 1, COLLIE_INT32, 0, 1, NULL, NULL));
  ASSERT_OK(collie_group_end(comm, NULL));
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  ASSERT_OK(collie_comm_destroy(side));
  ASSERT_OK(collie_comm_destroy(comm));
}

/* A synchronous send completes only once the receiver matched it: rank 0's
 * async ssend is still in progress after a barrier (on another
 * communicator) that rank 1 passes before it receives, and completes after.
 * A standard send of the same small message completes without a receive. */
TEST_IMPL(p2p_ssend)
{
  collie_comm_t *comm = test_comm(), *side = NULL;
  int r = test_rank();
  ASSERT_OK(collie_comm_split(comm, 0, r, &side));
  int64_t v = 5;
  if (r == 0) {
    collie_work_t *w = NULL, *s = NULL;
    ASSERT_OK(collie_send(comm, &v, 1, COLLIE_INT64, 1, 1, NULL, &s));
    ASSERT_OK(collie_wait(s, -1)); /* standard: out, nobody has received it */
    collie_work_free(s);
    ASSERT_OK(collie_ssend(comm, &v, 1, COLLIE_INT64, 1, 2, NULL, &w));
    ASSERT_OK(collie_barrier(side, NULL, NULL));
    usleep(50000);
    ASSERT_RC(COLLIE_IN_PROGRESS, "", collie_test(w));
    ASSERT_OK(collie_barrier(side, NULL, NULL));
    ASSERT_OK(collie_wait(w, -1));
    collie_work_free(w);
    ASSERT_OK(collie_ssend(comm, &v, 1, COLLIE_INT64, 1, 3, NULL, NULL)); /* blocking */
    usleep(50000); /* rank 1's receive is posted (and waits) before this one arrives */
    v = 7;
    ASSERT_OK(collie_ssend(comm, &v, 1, COLLIE_INT64, 1, 4, NULL, NULL));
  } else {
    ASSERT_OK(collie_barrier(side, NULL, NULL));
    ASSERT_OK(collie_barrier(side, NULL, NULL));
    if (r == 1) {
      int64_t x = 0;
      ASSERT_OK(collie_recv(comm, &x, 1, COLLIE_INT64, 0, 2, NULL, NULL));
      ASSERT_OK(collie_recv(comm, &x, 1, COLLIE_INT64, 0, 1, NULL, NULL));
      ASSERT_OK(collie_recv(comm, &x, 1, COLLIE_INT64, 0, 3, NULL, NULL));
      ASSERT(x == 5);
      ASSERT_OK(collie_recv(comm, &x, 1, COLLIE_INT64, 0, 4, NULL, NULL));
      ASSERT(x == 7);
    }
  }
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  ASSERT_OK(collie_comm_destroy(side));
  ASSERT_OK(collie_comm_destroy(comm));
}

/* A message sent before a collective, received after it: the collective's
 * receive meets it first in the channel and passes it (into the buffer for
 * unexpected messages). Large enough (4 MiB of allreduce) to go through
 * the pair channels on shm too. */
TEST_IMPL(p2p_before_collective)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  size_t n = (size_t)1 << 19;
  int64_t *x = malloc(n * sizeof(*x));
  ASSERT(x != NULL);
  for (size_t i = 0; i < n; i++) x[i] = r;
  int64_t v = 40 + r, got = 0;
  ASSERT_OK(collie_send(comm, &v, 1, COLLIE_INT64, (r + 1) % p, 8, NULL, NULL));
  ASSERT_OK(collie_allreduce(comm, x, x, n, COLLIE_INT64, COLLIE_SUM, NULL, NULL));
  ASSERT_OK(collie_recv(comm, &got, 1, COLLIE_INT64, (r + p - 1) % p, 8, NULL, NULL));
  ASSERT(got == 40 + (r + p - 1) % p);
  ASSERT(x[0] == (int64_t)p * (p - 1) / 2 && x[n - 1] == x[0]);
  free(x);
  ASSERT_OK(collie_comm_destroy(comm));
}

/* The buffer for unexpected messages is bounded (64 KiB here): receiving
 * tag 2 first buffers tag 1's 32 KiB and works; receiving tag 4 first
 * would need 96 KiB of the three before it, so the receive waits (the
 * sender is held back, nothing is dropped) and times out naming the
 * setting. */
TEST_IMPL(p2p_unexpected_bounded)
{
  setenv("COLLIE_P2P_UNEXPECTED_BYTES", "65536", 1);
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  size_t n = 4096; /* 32 KiB */
  int64_t *m[4];
  collie_work_t *w[4];
  for (int round = 0; round < 2; round++) {
    if (r == 0) {
      for (int t = 0; t < 4; t++) {
        m[t] = filled(n, 0, t + 1, round);
        ASSERT_OK(collie_send(comm, m[t], n, COLLIE_INT64, 1, t + 1, NULL, &w[t]));
      }
      for (int t = 0; t < 4; t++) {
        collie_result_t rc = collie_wait(w[t], -1);
        ASSERT(rc == COLLIE_SUCCESS || round == 1);
        collie_work_free(w[t]);
        free(m[t]);
      }
    } else if (r == 1) {
      int64_t *got = malloc(n * sizeof(*got));
      ASSERT(got != NULL);
      if (round == 0) {
        static const int order[] = {2, 1, 4, 3};
        for (int k = 0; k < 4; k++) {
          ASSERT_OK(collie_recv(comm, got, n, COLLIE_INT64, 0, order[k], NULL, NULL));
          check(got, n, 0, order[k], 0);
        }
      } else {
        collie_opts_t quick = {.timeout_ms = 500};
        ASSERT_RC(COLLIE_TIMEOUT, "COLLIE_P2P_UNEXPECTED_BYTES = 65536",
                  collie_recv(comm, got, n, COLLIE_INT64, 0, 4, &quick, NULL));
      }
      free(got);
    }
    if (round == 0) ASSERT_OK(collie_barrier(comm, NULL, NULL));
  }
  collie_comm_destroy(comm);
}

/* Nonblocking sends and receives complete in whatever order their messages
 * allow, as MPI's do: every rank posts a receive from the left, then a send
 * to the right, then waits for the receive first; 4 MiB each, more than the
 * channels hold, so issue order alone would deadlock. Then tags out of
 * order, both posted before either is waited on. */
TEST_IMPL(p2p_nonblocking_exchange)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank(), p = test_size();
  int left = (r + p - 1) % p, right = (r + 1) % p;
  size_t n = (size_t)1 << 19;
  int64_t *out = filled(n, r, 3, 0), *in = malloc(n * sizeof(*in));
  ASSERT(in != NULL);
  for (int round = 0; round < 3; round++) {
    collie_work_t *wr = NULL, *ws = NULL;
    memset(in, 0, n * sizeof(*in));
    ASSERT_OK(collie_recv(comm, in, n, COLLIE_INT64, left, 3, NULL, &wr));
    ASSERT_OK(collie_send(comm, out, n, COLLIE_INT64, right, 3, NULL, &ws));
    ASSERT_OK(collie_wait(wr, -1));
    ASSERT_OK(collie_wait(ws, -1));
    collie_work_free(wr);
    collie_work_free(ws);
    check(in, n, left, 3, 0);
  }
  if (r < 2) {
    int peer = 1 - r;
    int64_t *a = filled(n, r, 1, 0), *b = filled(n, r, 2, 0);
    collie_work_t *w[4];
    int64_t *ga = malloc(n * sizeof(*ga)), *gb = malloc(n * sizeof(*gb));
    ASSERT(ga && gb);
    ASSERT_OK(collie_send(comm, a, n, COLLIE_INT64, peer, 1, NULL, &w[0]));
    ASSERT_OK(collie_send(comm, b, n, COLLIE_INT64, peer, 2, NULL, &w[1]));
    ASSERT_OK(collie_recv(comm, gb, n, COLLIE_INT64, peer, 2, NULL, &w[2]));
    ASSERT_OK(collie_recv(comm, ga, n, COLLIE_INT64, peer, 1, NULL, &w[3]));
    for (int k = 3; k >= 0; k--) {
      ASSERT_OK(collie_wait(w[k], -1));
      collie_work_free(w[k]);
    }
    check(ga, n, peer, 1, 0);
    check(gb, n, peer, 2, 0);
    free(a);
    free(b);
    free(ga);
    free(gb);
  }
  free(out);
  free(in);
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  ASSERT_OK(collie_comm_destroy(comm));
}

/* A posted send progresses while this rank blocks in a receive (its own
 * wait drives the net), and collie_test alone completes a posted receive
 * (it drives the net when nothing else does). A send nobody waits for is
 * finished by destroy. */
TEST_IMPL(p2p_posted_progress)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  size_t n = (size_t)1 << 19;
  if (r < 2) {
    int peer = 1 - r;
    int64_t *out = filled(n, r, 4, 0), *in = malloc(n * sizeof(*in));
    ASSERT(in != NULL);
    collie_work_t *ws = NULL;
    ASSERT_OK(collie_send(comm, out, n, COLLIE_INT64, peer, 4, NULL, &ws));
    ASSERT_OK(collie_recv(comm, in, n, COLLIE_INT64, peer, 4, NULL, NULL));
    check(in, n, peer, 4, 0);
    ASSERT_OK(collie_wait(ws, -1));
    collie_work_free(ws);
    /* collie_test drives a posted receive to completion. */
    int64_t v = 0;
    collie_work_t *wr = NULL;
    if (r == 0) {
      ASSERT_OK(collie_recv(comm, &v, 1, COLLIE_INT64, 1, 5, NULL, &wr));
      collie_result_t rc;
      int64_t give_up = test_now_ms() + 20000;
      while ((rc = collie_test(wr)) == COLLIE_IN_PROGRESS && test_now_ms() < give_up) usleep(1000);
      ASSERT_OK(rc);
      ASSERT(v == 55);
      collie_work_free(wr);
    } else {
      usleep(50000);
      v = 55;
      ASSERT_OK(collie_send(comm, &v, 1, COLLIE_INT64, 0, 5, NULL, NULL));
    }
    /* Left posted: destroy waits for it. */
    v = 66 + r;
    ASSERT_OK(collie_send(comm, &v, 1, COLLIE_INT64, peer, 6, NULL, &ws));
    collie_work_free(ws);
    int64_t got = 0;
    ASSERT_OK(collie_recv(comm, &got, 1, COLLIE_INT64, peer, 6, NULL, NULL));
    ASSERT(got == 66 + peer);
    free(out);
    free(in);
  }
  ASSERT_OK(collie_comm_destroy(comm));
}

struct waited {
  collie_result_t rc;
  collie_work_t *w;
};

static void *
wait_thread(void *arg)
{
  struct waited *b = arg;
  b->rc = collie_wait(b->w, -1);
  return NULL;
}

/* Another thread waits on a posted receive whose message the peer sends
 * only after an allreduce, which this thread runs meanwhile: the waiter
 * drives the net in slices, so the allreduce gets its turn. */
TEST_IMPL(p2p_posted_wait_other_thread)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  int64_t v = 0, x = r, sum = 0;
  if (r == 0) {
    struct waited box = {COLLIE_IN_PROGRESS, NULL};
    ASSERT_OK(collie_recv(comm, &v, 1, COLLIE_INT64, 1, 9, NULL, &box.w));
    pthread_t t;
    ASSERT(pthread_create(&t, NULL, wait_thread, &box) == 0);
    usleep(20000); /* the waiter owns the net by now */
    ASSERT_OK(collie_allreduce(comm, &x, &sum, 1, COLLIE_INT64, COLLIE_SUM, NULL, NULL));
    pthread_join(t, NULL);
    ASSERT_OK(box.rc);
    collie_work_free(box.w);
    ASSERT(v == 99);
  } else {
    ASSERT_OK(collie_allreduce(comm, &x, &sum, 1, COLLIE_INT64, COLLIE_SUM, NULL, NULL));
    if (r == 1) {
      v = 99;
      ASSERT_OK(collie_send(comm, &v, 1, COLLIE_INT64, 0, 9, NULL, NULL));
    }
  }
  ASSERT(sum == (int64_t)test_size() * (test_size() - 1) / 2);
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Async sends and receives to this rank itself match each other, in either
 * order, by tag; a blocking one is refused at issue (the communicator stays
 * usable). */
TEST_IMPL(p2p_self_async)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  int64_t a = 10 + r, b = 20 + r, ga = 0, gb = 0;
  collie_work_t *w[4];
  ASSERT_OK(collie_send(comm, &a, 1, COLLIE_INT64, r, 1, NULL, &w[0]));
  ASSERT_OK(collie_send(comm, &b, 1, COLLIE_INT64, r, 2, NULL, &w[1]));
  ASSERT_OK(collie_recv(comm, &gb, 1, COLLIE_INT64, r, 2, NULL, &w[2]));
  ASSERT_OK(collie_recv(comm, &ga, 1, COLLIE_INT64, r, 1, NULL, &w[3]));
  for (int k = 3; k >= 0; k--) {
    ASSERT_OK(collie_wait(w[k], -1));
    collie_work_free(w[k]);
  }
  ASSERT(ga == 10 + r && gb == 20 + r);
  /* The receive first, then the send. */
  ASSERT_OK(collie_recv(comm, &ga, 1, COLLIE_INT64, r, 3, NULL, &w[0]));
  a = 30 + r;
  ASSERT_OK(collie_send(comm, &a, 1, COLLIE_INT64, r, 3, NULL, &w[1]));
  for (int k = 0; k < 2; k++) {
    ASSERT_OK(collie_wait(w[k], -1));
    collie_work_free(w[k]);
  }
  ASSERT(ga == 30 + r);
  /* A standard send to itself is complete before any receive (its bytes
   * were copied aside, as a small send to a peer is once out). */
  a = 40 + r;
  ASSERT_OK(collie_send(comm, &a, 1, COLLIE_INT64, r, 5, NULL, &w[0]));
  ASSERT_OK(collie_wait(w[0], -1));
  collie_work_free(w[0]);
  a = -1;
  ASSERT_OK(collie_recv(comm, &ga, 1, COLLIE_INT64, r, 5, NULL, &w[0]));
  ASSERT_OK(collie_wait(w[0], -1));
  collie_work_free(w[0]);
  ASSERT(ga == 40 + r);
  ASSERT_RC(COLLIE_INVALID_USAGE, "a blocking send to itself",
            collie_send(comm, &a, 1, COLLIE_INT64, r, 4, NULL, NULL));
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  ASSERT_OK(collie_comm_destroy(comm));
}
