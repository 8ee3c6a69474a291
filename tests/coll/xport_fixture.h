/*
 * xport_fixture.h - what the multi-rank transport tests (shm_test.c,
 * tcp_test.c) share: they drive a transport through its ops table, without
 * the net layer, so each needs the same scaffolding around it - meet the
 * other ranks in the runner's file store, build a struct collie__net_cfg,
 * open the transport to every other rank, post requests and drive
 * progress + wait until they are done, and fill and check message data.
 * One copy here keeps the two suites testing their transports the same way.
 *
 * Every helper fails the test (ASSERT) on an unexpected error, except those
 * that return a collie_result_t: those are for tests that expect failures.
 */
#ifndef COLLIE_TEST_XPORT_FIXTURE_H
#define COLLIE_TEST_XPORT_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "transport/transport.h"

/* One rank's view of a transport under test. */
struct xfix {
  const struct collie__xport_ops *ops; /* the transport under test */
  int rank, size;
  collie__store_t *store;     /* the runner's store */
  collie__store_t *view;      /* a prefix view per open, as a communicator has; or NULL */
  struct collie__peer *peers; /* size entries, by rank */
  struct collie__net_cfg cfg; /* set by xfix_config; tests may change it before opening */
  struct collie__xport *x;    /* the open transport, or NULL */
};

/* Zeroes t, opens the runner's store and exchanges every rank's struct
 * collie__peer; a nonzero fake_host gives each rank a host identity of its
 * own. Blocks until every rank published (10 s at most). */
void xfix_meet(struct xfix *t, const struct collie__xport_ops *ops, int fake_host);
/* Fills t->cfg for an open: comm_hash 1, spin 0, the given transport name
 * ("auto", "tcp") and a setup deadline setup_ms from now. With a comm name
 * the store is a fresh prefix view "comm" of the runner's store (the
 * previous view is released); with NULL it is the runner's store itself. */
void xfix_config(struct xfix *t, const char *comm, const char *transport, int64_t setup_ms);
/* Opens the transport to every other rank into t->x; returns open's result. */
collie_result_t xfix_try_open(struct xfix *t);
/* The same, asserting success. */
void xfix_open(struct xfix *t);
/* Closes t->x if open, releases the stores and frees the peer table. */
void xfix_done(struct xfix *t);

/* A store barrier among the first n ranks to arrive (all: xfix_barrier),
 * named so that successive ones differ. Sleeps between polls; 10 s at most. */
void xfix_barrier_n(struct xfix *t, const char *name, int n);
void xfix_barrier(struct xfix *t, const char *name);

/* Zeroes r, fills it in and posts it; asserts the post succeeds. buf must
 * stay valid until r is done. */
/* Posts without asserting: the transport's result (a receive that finds a
 * mismatched message already there fails at post). */
collie_result_t xfix_post_rc(struct xfix *t, struct collie__req *r, int peer, int is_send,
                             void *buf, size_t len, uint64_t slot);
void xfix_post(struct xfix *t, struct collie__req *r, int peer, int is_send, void *buf, size_t len,
               uint64_t slot);
/* Drives progress until reqs[0..n) are done, making `spin` progress calls
 * between sleeps in wait(); returns the first failure (the transport's or a
 * request's), or TIMEOUT at deadline (monotonic ns). */
collie_result_t xfix_wait_n(struct xfix *t, struct collie__req *reqs, int n, int spin,
                            int64_t deadline);
/* One round trip of len bytes of buf with peer: rank 0 sends, then receives
 * the answer; the other rank receives, then sends it back. Asserts each
 * step completes within 10 s. */
void xfix_pingpong_round(struct xfix *t, int peer, void *buf, size_t len, uint64_t slot, int spin);

/* Asserts the transport stays failed with code (its message containing
 * substr): progress() returns it with nothing pending, and a new request
 * (peer, is_send, buf, len) is refused and completed with it. */
void xfix_assert_failed(struct xfix *t, collie_result_t code, const char *substr, int peer,
                        int is_send, void *buf, size_t len);

/* Sends messages of 0, 1, 7, 64 KiB + 3 and 8 MiB + 5 bytes to the next rank
 * and receives them from the previous one, first one size at a time, then
 * all sizes in flight at once, waiting with `spin`; checks every byte and
 * that nothing is written past the end. */
void xfix_ring_sizes(struct xfix *t, int spin);

/* `rounds` all-to-all exchanges among every rank: in each, every rank sends
 * every other rank a message of len + (0..63) bytes (8 bytes in every
 * tiny_every-th round when tiny_every > 0), waits with `spin` and checks
 * what it received. Returns the seconds taken. */
double xfix_alltoall(struct xfix *t, int rounds, size_t len, int tiny_every, int spin);

/* The byte at index i of message idx from src to dst: every (src, dst, idx,
 * offset) differs, so misplaced or misrouted data shows. */
unsigned char xfix_pat(int src, int dst, unsigned idx, size_t i);
void xfix_fill(unsigned char *b, size_t n, int src, int dst, unsigned idx);
/* Asserts b[0..n) holds message idx from src to dst, naming the first wrong byte. */
void xfix_check(const unsigned char *b, size_t n, int src, int dst, unsigned idx);

/* Open file descriptors of this process: close() and failed opens must not leak. */
int xfix_nfds(void);

/* The transport's crowded op (two ranks): both pinned to one CPU, each
 * must see the other there; pinned to two CPUs (when there are two),
 * neither may. Each rank looks once first (shm: says where it runs), then,
 * after a barrier, looks every XFIX_CROWDED_SETTLE_US (tcp keeps a look at
 * /proc for 10 ms) until it sees the answer, ten looks at most. */
#define XFIX_CROWDED_SETTLE_US 15000
void xfix_crowded(struct xfix *t);

#endif /* COLLIE_TEST_XPORT_FIXTURE_H */
