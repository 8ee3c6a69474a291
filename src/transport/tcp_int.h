/*
 * tcp_int.h - the state of the tcp transport, shared by its setup
 * (tcp_setup.c) and its data path (tcp.c): one socket per peer,
 * each with a FIFO of posted sends and one of posted receives, and the
 * partial-frame progress of each direction, so that non-blocking I/O can stop
 * anywhere (mid-header, mid-payload) and resume on the next progress().
 *
 * Invariants of a channel:
 * - Sends: the head send's current frame starts at off - s_pay_sent; s_hdr_sent
 *   of its 32 header bytes and s_pay_sent of its payload are in the kernel.
 *   Frame headers are a pure function of (slot, len, frame start), so they are
 *   rebuilt rather than stored.
 * - Receives: r_hdr_got bytes of the next frame header are in rhdr. A complete
 *   header (r_hdr_got == 32) that is not yet matched is "held": no receive is
 *   posted, and no payload is read until one is (backpressure through the
 *   socket; there is no staging buffer). r_pay_left > 0 means the header was
 *   matched with the head receive and its payload goes straight into that
 *   receive's buffer.
 */
#ifndef COLLIE_TRANSPORT_TCP_INT_H
#define COLLIE_TRANSPORT_TCP_INT_H

#include <poll.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/tcp_proto.h"
#include "transport/transport.h"
#include "util/error.h"

/* Frames written by one sendmsg() at most: batches small messages in flight. */
#define COLLIE_TCP_BATCH 16
/* Unauthenticated connections open at once during open(), beyond one per
 * expected peer; the oldest is dropped beyond that, so strangers cannot
 * exhaust descriptors. */
#define COLLIE_TCP_MAX_PENDING 16
/* Connections kept per peer process between communicators (tcp_pool.c). */
#define COLLIE_TCP_POOL_PER_PEER 4
/* Longest sleep in wait(): a bound on how late anything can be noticed. */
#define COLLIE_TCP_WAIT_CAP_NS 100000000ll

struct collie__tcp_chan {
  int peer;       /* comm rank */
  int world_rank; /* for messages */
  int32_t pid;    /* for messages, and for tcp_crowded's look at /proc */
  int near;       /* on this host (tcp_crowded) */
  int fd;         /* -1 until connected */
  int ready;      /* the peer reads frames from us next: our hello or our ACCEPT went out */
  char addr[80];  /* the socket's remote end, "ip:port" */
  char host[48];  /* the peer's hostname (its host identity before '/'), when not this host's */
  char hostid[COLLIE_HOSTID_LEN]; /* the peer's whole host identity: with pid, its kept
                                     connections' key (tcp_pool.c) */
  int reused;                     /* the connection was kept from an earlier communicator */
  /* Send side. */
  struct collie__req *sq_head, *sq_tail;
  uint32_t s_hdr_sent;                             /* header bytes of the current frame written */
  uint32_t s_pay_sent;                             /* payload bytes of the current frame written */
  struct collie__tcp_frame shdr[COLLIE_TCP_BATCH]; /* headers of one sendmsg() batch */
  /* Receive side. */
  struct collie__req *rq_head, *rq_tail;
  struct collie__tcp_frame rhdr; /* the next frame's header, as received (little-endian) */
  uint32_t r_hdr_got;            /* bytes of rhdr received */
  uint32_t r_pay_left;           /* payload bytes of the matched frame still to read */
  /* Bytes read ahead of a frame that went elsewhere (tcp.c: tcp_unread),
   * read again before the socket: stash[stash_off..stash_len). */
  char *stash;
  size_t stash_len, stash_off;
  int from_stash; /* the last read came from the stash */
  int catching;   /* catch_p2p: P2P messages with no receive go to the sink */
  int sated;      /* ... until the sink said no more (the next catch_p2p on clears it) */
  int stalled;    /* the held header waits (the sink said not now, or nothing takes it) */
  /* Lifecycle of the peer's side. */
  int bye;      /* the peer sent BYE: it closed the communicator cleanly */
  int eof;      /* the peer's FIN was read (after BYE): the socket is silent for good */
  int gone;     /* the stream ended without BYE (crash, abort) while nothing was posted */
  int gone_err; /* how: 0 for an end of stream, else the errno */
  int gone_mid; /* it ended inside a frame header */
  char why[COLLIE_TCP_REASON_MAX + 1]; /* its ABORT frame's reason ("" when it sent none) */
  int aborted;   /* it sent ABORT: it gave up, and still listens (its timeout's grace) */
  int told;      /* we sent it our ABORT: nothing more goes out */
  int parked;    /* a header is held and the peer hung up or errored: stop polling until a
                    receive is posted, or wait() would return at once forever */
  short revents; /* events seen by the last wait(), handled by the next progress() */
};

/* The tcp transport's state for one communicator (struct collie__xport to net.c). */
struct collie__tcp_xport {
  int rank, size;
  int nchan;
  struct collie__tcp_chan *chans;      /* nchan entries, by ascending peer rank */
  int *chan_of;                        /* size entries: index into chans, or -1 */
  struct pollfd *pfds;                 /* nchan entries, reused by every wait() */
  int npending;                        /* posted requests not yet done */
  int ncatch;                          /* channels catching P2P messages (they count as pending) */
  const struct collie__net_sink *sink; /* cfg->sink */
  collie_result_t failed;              /* first failure; the transport is unusable after it */
  char fail_msg[COLLIE_ERRMSG_LEN];
  /* Set by abort(), possibly from another thread while progress() runs: the
   * only field abort() writes. The driving thread turns it into `failed`. */
  atomic_int aborted;
  /* Keep clean connections for the next communicator at close (tcp_pool.c);
   * the job token's hash is the pool's key with the peer's process. */
  int reuse;
  uint64_t token;
  /* What tcp_crowded's last look at /proc found, and when (0: never). */
  int crowded;
  int64_t crowded_at;
};

/* ---- tcp_setup.c ---- */

/* The ops' can_connect: tcp reaches any rank. Pure. */
int collie__tcp_can_connect(const struct collie__net_cfg *cfg, int peer);
/* The ops' open (see transport.h for the contract): listens if a higher
 * rank will connect, connects to and says hello to every lower rank,
 * accepts and checks every higher one, then reads the replies; blocks until
 * every channel is up or cfg->deadline_ns. The job token must fit a hello
 * (COLLIE_TCP_TOKEN_MAX). On failure every socket is closed. */
collie_result_t collie__tcp_open(const struct collie__net_cfg *cfg, const int *peers, int npeers,
                                 struct collie__xport **out);

/* ---- tcp_pool.c ---- */

/* A connection kept for a later communicator of the same two processes. */
struct collie__tcp_idle {
  int fd;
  int32_t pid;                  /* the peer's process ... */
  char host[COLLIE_HOSTID_LEN]; /* ... on this host identity */
  uint64_t token;               /* collie__tcp_token_hash of the job token it proved */
  char addr[80];                /* its remote end, for messages */
  int bye;                      /* the peer's BYE of the last communicator was read */
  uint32_t bye_got;             /* bytes of that BYE read so far */
  struct collie__tcp_frame byebuf;
};

/* The pool's key for a job token. Pure. */
uint64_t collie__tcp_token_hash(const char *token);
/* Keeps e (takes its fd): 1, or 0 when the pool holds enough for that peer
 * already or is full (the caller closes the fd). */
int collie__tcp_pool_put(const struct collie__tcp_idle *e);
/* The connecting side: removes and returns in *out a kept connection to that
 * peer whose BYE was read (reading what arrived of it); 1 when found. */
int collie__tcp_pool_take(const char *host, int32_t pid, uint64_t token,
                          struct collie__tcp_idle *out);
/* The accepting side: removes and returns in *out a kept connection to that
 * peer, its BYE read or not, so that a hello on it is read; 1 when found. */
int collie__tcp_pool_borrow(const char *host, int32_t pid, uint64_t token,
                            struct collie__tcp_idle *out);
/* Puts a borrowed connection back (closes it when the pool is full). */
void collie__tcp_pool_give_back(const struct collie__tcp_idle *e);
/* Reads what arrived of e's BYE without blocking: 1 once read whole and
 * valid, 0 not yet, -1 when the connection closed or carried anything else
 * (it is then not reusable). */
int collie__tcp_idle_read_bye(struct collie__tcp_idle *e);
/* Connections kept now (tests). */
int collie__tcp_pool_count(void);

/* ---- tcp.c ---- */

/* Names c's peer for messages: "rank 3 (world rank 5, pid 123, ip:port)".
 * Writes at most len bytes of buf, NUL-terminated. Never fails. */
void collie__tcp_peer_name(const struct collie__tcp_chan *c, char *buf, size_t len);
/* Closes every channel's socket and frees t (NULL is a no-op). Never touches
 * posted requests and sends nothing (close() says goodbye first). Used by
 * close() and a failed open(). */
void collie__tcp_free(struct collie__tcp_xport *t);
/* An ABORT frame carrying why to every ready peer whose stream is at a frame
 * boundary (one non-blocking send each; a peer we are in the middle of a
 * frame with sees the close alone). Used before abort, and by a failed
 * open() for the channels already up, so that those peers learn why this
 * rank gave up rather than only that it closed. */
void collie__tcp_tell(struct collie__tcp_xport *t, const char *why);
/* Reads away what is waiting on t's sockets: unread bytes at close() make
 * the kernel reset the connection instead of ending it, and a reset can cost
 * the peer what we sent last (a BYE, an ABORT). */
void collie__tcp_drain(struct collie__tcp_xport *t);

#endif /* COLLIE_TRANSPORT_TCP_INT_H */
