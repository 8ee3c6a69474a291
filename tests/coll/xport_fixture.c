/*
 * xport_fixture.c - the scaffolding shared by the transport tests (see
 * xport_fixture.h): meeting in the runner's store, the config, open and
 * close, barriers, and the post + progress + wait loops.
 */
#include "xport_fixture.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include "runner.h"
#include "util/error.h"
#include "util/util.h"

void
xfix_meet(struct xfix *t, const struct collie__xport_ops *ops, int fake_host)
{
  memset(t, 0, sizeof(*t));
  t->ops = ops;
  t->rank = test_rank();
  t->size = test_size();
  int64_t dl = collie__deadline_after_ms(10000);
  ASSERT_OK(collie__store_open(getenv("COLLIE_STORE"), t->rank, t->size, getenv("COLLIE_JOB_TOKEN"),
                               dl, &t->store));
  struct collie__peer me;
  memset(&me, 0, sizeof(me));
  char fake[64];
  snprintf(fake, sizeof(fake), "fake-host-%d", t->rank);
  collie__host_id(fake_host ? fake : NULL, me.host, sizeof(me.host));
  me.pid = (int32_t)getpid();
  me.world_rank = t->rank;
  char key[64];
  snprintf(key, sizeof(key), "peer/%d", t->rank);
  ASSERT_OK(collie__store_set(t->store, key, &me, sizeof(me), dl));
  t->peers = calloc((size_t)t->size, sizeof(*t->peers));
  ASSERT(t->peers);
  for (int r = 0; r < t->size; r++) {
    void *v = NULL;
    size_t n = 0;
    snprintf(key, sizeof(key), "peer/%d", r);
    ASSERT_OK(collie__store_get(t->store, key, &v, &n, dl));
    ASSERT(n == sizeof(struct collie__peer));
    memcpy(&t->peers[r], v, n);
    free(v);
  }
}

void
xfix_config(struct xfix *t, const char *comm, const char *transport, int64_t setup_ms)
{
  if (t->view) collie__store_release(t->view);
  t->view = NULL;
  if (comm) ASSERT_OK(collie__store_prefix(t->store, comm, &t->view));
  t->cfg.rank = t->rank;
  t->cfg.size = t->size;
  t->cfg.peers = t->peers;
  t->cfg.store = comm ? t->view : t->store;
  t->cfg.token = getenv("COLLIE_JOB_TOKEN");
  t->cfg.comm_hash = 1;
  t->cfg.transport = transport;
  t->cfg.ifname = NULL;
  t->cfg.spin = 0;
  t->cfg.deadline_ns = collie__deadline_after_ms(setup_ms);
}

collie_result_t
xfix_try_open(struct xfix *t)
{
  int peers[64], np = 0;
  for (int r = 0; r < t->size; r++)
    if (r != t->rank) peers[np++] = r;
  t->x = NULL;
  return t->ops->open(&t->cfg, peers, np, &t->x);
}

void
xfix_open(struct xfix *t)
{
  ASSERT_OK(xfix_try_open(t));
  ASSERT(t->x != NULL);
}

void
xfix_done(struct xfix *t)
{
  if (t->x) t->ops->close(t->x);
  t->x = NULL;
  if (t->view) collie__store_release(t->view);
  t->view = NULL;
  collie__store_release(t->store);
  free(t->peers);
}

void
xfix_barrier_n(struct xfix *t, const char *name, int n)
{
  char key[96];
  int64_t v = 0, dl = collie__deadline_after_ms(10000);
  snprintf(key, sizeof(key), "barrier/%s", name);
  ASSERT_OK(collie__store_add(t->store, key, 1, &v, dl));
  while (v < n) {
    ASSERT(collie__now_ns() < dl);
    collie__sleep_ns(1000000);
    ASSERT_OK(collie__store_add(t->store, key, 0, &v, dl));
  }
}

void
xfix_barrier(struct xfix *t, const char *name)
{
  xfix_barrier_n(t, name, t->size);
}

collie_result_t
xfix_post_rc(struct xfix *t, struct collie__req *r, int peer, int is_send, void *buf, size_t len,
             uint64_t slot)
{
  memset(r, 0, sizeof(*r));
  r->peer = peer;
  r->is_send = is_send;
  r->buf = buf;
  r->len = len;
  r->slot = slot;
  return t->ops->post(t->x, r);
}

void
xfix_post(struct xfix *t, struct collie__req *r, int peer, int is_send, void *buf, size_t len,
          uint64_t slot)
{
  ASSERT_OK(xfix_post_rc(t, r, peer, is_send, buf, len, slot));
}

collie_result_t
xfix_wait_n(struct xfix *t, struct collie__req *reqs, int n, int spin, int64_t deadline)
{
  int spun = 0;
  for (;;) {
    int pending = 0;
    collie_result_t rc = t->ops->progress(t->x, &pending);
    if (rc != COLLIE_SUCCESS) return rc;
    int all = 1;
    for (int i = 0; i < n; i++) {
      if (!reqs[i].done)
        all = 0;
      else if (reqs[i].rc != COLLIE_SUCCESS)
        return reqs[i].rc;
    }
    if (all) return COLLIE_SUCCESS;
    ASSERT(pending > 0);
    if (collie__now_ns() >= deadline) return collie__err(COLLIE_TIMEOUT, "test wait timed out");
    if (spun < spin) {
      spun++;
      collie__cpu_relax();
      continue;
    }
    spun = 0;
    t->ops->wait(t->x, deadline);
  }
}

void
xfix_pingpong_round(struct xfix *t, int peer, void *buf, size_t len, uint64_t slot, int spin)
{
  struct collie__req r;
  for (int step = 0; step < 2; step++) {
    int is_send = (t->rank == 0) == (step == 0);
    xfix_post(t, &r, peer, is_send, buf, len, slot);
    ASSERT_OK(xfix_wait_n(t, &r, 1, spin, collie__deadline_after_ms(10000)));
  }
}

static const size_t xfix_sizes[] = {0, 1, 7, 64 * 1024 + 3, 8 * 1024 * 1024 + 5};
#define XFIX_NSIZES (sizeof(xfix_sizes) / sizeof(xfix_sizes[0]))

void
xfix_assert_failed(struct xfix *t, collie_result_t code, const char *substr, int peer, int is_send,
                   void *buf, size_t len)
{
  int pending = -1;
  ASSERT_RC(code, substr, t->ops->progress(t->x, &pending));
  ASSERT(pending == 0);
  struct collie__req r;
  memset(&r, 0, sizeof(r));
  r.peer = peer;
  r.is_send = is_send;
  r.buf = buf;
  r.len = len;
  ASSERT_RC(code, substr, t->ops->post(t->x, &r));
  ASSERT(r.done && r.rc == code);
}

void
xfix_ring_sizes(struct xfix *t, int spin)
{
  int next = (t->rank + 1) % t->size, prev = (t->rank + t->size - 1) % t->size;
  unsigned char *sb[XFIX_NSIZES], *rb[XFIX_NSIZES];
  for (size_t k = 0; k < XFIX_NSIZES; k++) {
    sb[k] = malloc(xfix_sizes[k] + 1);
    rb[k] = malloc(xfix_sizes[k] + 1);
    ASSERT(sb[k] && rb[k]);
  }
  for (int round = 0; round < 2; round++) {
    struct collie__req reqs[2 * XFIX_NSIZES];
    int nr = 0;
    for (size_t k = 0; k < XFIX_NSIZES; k++) {
      unsigned idx = (unsigned)(round * 100 + k);
      xfix_fill(sb[k], xfix_sizes[k], t->rank, next, idx);
      memset(rb[k], 0xee, xfix_sizes[k] + 1);
      uint64_t slot = collie__slot(COLLIE_KIND_ALLREDUCE, idx, 1);
      xfix_post(t, &reqs[nr++], prev, 0, rb[k], xfix_sizes[k], slot);
      xfix_post(t, &reqs[nr++], next, 1, sb[k], xfix_sizes[k], slot);
      if (round == 0) {
        ASSERT_OK(xfix_wait_n(t, &reqs[nr - 2], 2, spin, collie__deadline_after_ms(20000)));
        xfix_check(rb[k], xfix_sizes[k], prev, t->rank, idx);
        ASSERT(rb[k][xfix_sizes[k]] == 0xee); /* nothing written past the end */
        ASSERT(reqs[nr - 2].done && reqs[nr - 2].rc == COLLIE_SUCCESS && reqs[nr - 1].done);
      }
    }
    if (round == 1) {
      ASSERT_OK(xfix_wait_n(t, reqs, nr, spin, collie__deadline_after_ms(20000)));
      for (size_t k = 0; k < XFIX_NSIZES; k++) {
        xfix_check(rb[k], xfix_sizes[k], prev, t->rank, (unsigned)(100 + k));
        ASSERT(rb[k][xfix_sizes[k]] == 0xee);
      }
    }
  }
  for (size_t k = 0; k < XFIX_NSIZES; k++) {
    free(sb[k]);
    free(rb[k]);
  }
}

double
xfix_alltoall(struct xfix *t, int rounds, size_t len, int tiny_every, int spin)
{
  int n = t->size;
  unsigned char **sb = calloc((size_t)n, sizeof(*sb)), **rb = calloc((size_t)n, sizeof(*rb));
  struct collie__req *reqs = calloc(2 * (size_t)n, sizeof(*reqs));
  ASSERT(sb && rb && reqs);
  for (int p = 0; p < n; p++) {
    sb[p] = malloc(len + 64);
    rb[p] = malloc(len + 64);
    ASSERT(sb[p] && rb[p]);
  }
  int64_t t0 = collie__now_ns();
  for (int it = 0; it < rounds; it++) {
    int tiny = tiny_every > 0 && it % tiny_every == tiny_every - 1;
    int nr = 0;
    for (int k = 1; k < n; k++) {
      int to = (t->rank + k) % n, from = (t->rank + n - k) % n;
      size_t slen = tiny ? 8 : len + (size_t)((t->rank + to + it) % 64);
      size_t rlen = tiny ? 8 : len + (size_t)((from + t->rank + it) % 64);
      xfix_fill(sb[to], slen, t->rank, to, (unsigned)it);
      uint64_t sslot = collie__slot(COLLIE_KIND_ALLTOALL, (uint32_t)it, (uint32_t)t->rank);
      uint64_t rslot = collie__slot(COLLIE_KIND_ALLTOALL, (uint32_t)it, (uint32_t)from);
      xfix_post(t, &reqs[nr++], from, 0, rb[from], rlen, rslot);
      xfix_post(t, &reqs[nr++], to, 1, sb[to], slen, sslot);
    }
    ASSERT_OK(xfix_wait_n(t, reqs, nr, spin, collie__deadline_after_ms(20000)));
    for (int k = 0; k < nr; k += 2)
      xfix_check(rb[reqs[k].peer], reqs[k].len, reqs[k].peer, t->rank, (unsigned)it);
  }
  double secs = (double)(collie__now_ns() - t0) / 1e9;
  for (int p = 0; p < n; p++) {
    free(sb[p]);
    free(rb[p]);
  }
  free(sb);
  free(rb);
  free(reqs);
  return secs;
}

unsigned char
xfix_pat(int src, int dst, unsigned idx, size_t i)
{
  /* i >> 9 and i >> 17 keep the pattern from repeating every 256 bytes, so
   * a chunk landing at the wrong offset (64 KiB or 1 MiB away) shows. */
  return (unsigned char)((size_t)src * 131u + (size_t)dst * 31u + idx * 7u + i * 13u + (i >> 9) +
                         (i >> 17));
}

void
xfix_fill(unsigned char *b, size_t n, int src, int dst, unsigned idx)
{
  for (size_t i = 0; i < n; i++) b[i] = xfix_pat(src, dst, idx, i);
}

void
xfix_check(const unsigned char *b, size_t n, int src, int dst, unsigned idx)
{
  for (size_t i = 0; i < n; i++)
    ASSERTF(b[i] == xfix_pat(src, dst, idx, i),
            "message %u from rank %d: byte %zu of %zu is 0x%02x, expected 0x%02x", idx, src, i, n,
            b[i], xfix_pat(src, dst, idx, i));
}

int
xfix_nfds(void)
{
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  ASSERT(d);
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

/* Pins this thread to cpu; 1 when it runs there now. */
static int
xfix_pin(int cpu)
{
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0 && sched_getcpu() == cpu;
}

/* Whether crowded() settles at want within ten looks XFIX_CROWDED_SETTLE_US
 * apart (a peer's last CPU in /proc lags until it has run once since). */
static int
xfix_crowded_is(struct xfix *t, int want)
{
  for (int look = 0; look < 10; look++) {
    usleep(XFIX_CROWDED_SETTLE_US);
    if (t->ops->crowded(t->x) == want) return 1;
  }
  return 0;
}

void
xfix_crowded(struct xfix *t)
{
  ASSERT(t->ops->crowded != NULL);
  cpu_set_t allowed;
  ASSERT(sched_getaffinity(0, sizeof(allowed), &allowed) == 0);
  int cpus[2] = {-1, -1}, n = 0;
  for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
    if (CPU_ISSET(c, &allowed)) cpus[n++] = c;
  ASSERT(xfix_pin(cpus[0]));
  (void)t->ops->crowded(t->x);
  xfix_barrier(t, "one_cpu");
  ASSERTF(xfix_crowded_is(t, 1), "rank %d: both ranks on cpu %d, not seen as crowded", t->rank,
          cpus[0]);
  xfix_barrier(t, "seen");
  if (n == 2) {
    ASSERT(xfix_pin(cpus[t->rank % 2]));
    (void)t->ops->crowded(t->x);
    xfix_barrier(t, "two_cpus");
    ASSERTF(xfix_crowded_is(t, 0), "rank %d alone on cpu %d, seen as crowded", t->rank,
            cpus[t->rank % 2]);
  }
  ASSERT(sched_setaffinity(0, sizeof(allowed), &allowed) == 0);
  xfix_barrier(t, "end_crowded");
}
