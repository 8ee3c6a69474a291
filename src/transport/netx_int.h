/*
 * netx_int.h - collie's network transport over a network device
 * (netdev.h): the state shared by its setup (netx_setup.c) and its data
 * path (netx.c).
 *
 * Messages. Every message of a channel (an ordered pair of ranks) has a
 * number k, counted by both sides. Its header travels as an untagged
 * control message into buffers posted for any source: with up to
 * NETX_EAGER bytes of payload behind it (eager), or alone (RTS) with the
 * payload following as a tagged message (tag k, directed at the sender)
 * that the receiver posts straight into the receive's buffer once the
 * header matched it. Headers are taken in k order, so a channel delivers
 * in the order messages were posted, whatever order the device completes
 * them in. An arrived header waits in its channel's inbox until a receive
 * takes it (or the net's sink, for point-to-point messages); the sender of
 * an RTS waits with it, as a tcp sender waits on its socket.
 *
 * Control messages also carry the setup's hello (the job token), a clean
 * goodbye (BYE: after k messages) and an abort's reason (ABORT).
 */
#ifndef COLLIE_TRANSPORT_NETX_INT_H
#define COLLIE_TRANSPORT_NETX_INT_H

#include <stdatomic.h>
#include <stdint.h>

#include "transport/netdev.h"
#include "transport/transport.h"
#include "util/error.h"

/* Payload bytes sent inside a control message; larger ones go tagged. */
#define NETX_EAGER 8192
/* Control buffers posted for receiving, and kept for sending. */
#define NETX_RX_BUFS 64
#define NETX_TX_BUFS 64
/* The longest reason an ABORT carries, and the longest job token. */
#define NETX_REASON_MAX 400
#define NETX_TOKEN_MAX 256
/* The longest provider name published with an address. */
#define NETX_PROV_MAX 63

#define NETX_MAGIC 0xc011e0f1u
#define NETX_VERSION 1
enum netx_type {
  NETX_HELLO = 1, /* payload: the job token */
  NETX_EAGER_MSG = 2,
  NETX_RTS = 3,
  NETX_BYE = 4,   /* k: messages sent before it */
  NETX_ABORT = 5, /* k: messages sent before it; payload: the reason */
};

/* A control message's header (host byte order: every rank of a job runs
 * the same build on one architecture; the magic catches anything else). */
struct netx_hdr {
  uint32_t magic;
  uint8_t version, type;
  uint16_t pad;
  int32_t src;   /* the sender's comm rank */
  uint32_t k;    /* the message's number in its channel */
  uint64_t comm; /* the communicator's hash: another communicator's is refused */
  uint64_t slot;
  uint64_t len; /* the message's bytes */
  uint32_t inl; /* bytes following this header in the control message */
  uint32_t pad2;
};
#define NETX_HDR ((uint32_t)sizeof(struct netx_hdr))
#define NETX_CTRL (NETX_HDR + NETX_EAGER)

/* An arrived data header (and an eager payload) waiting in its channel. */
struct netx_msg {
  struct netx_msg *next;
  uint32_t k;
  uint8_t type;
  uint64_t slot, len;
  char data[]; /* eager: len bytes */
};

/* A control buffer: one posted receive, or one send in flight. */
struct netx_buf {
  struct collie__netdev_op op; /* first: the device's context */
  struct netx_xport *x;
  char *mem; /* NETX_CTRL bytes in the arena */
  struct netx_buf *next_free;
};

/* A registration kept for a region of collie_mem_alloc memory (netx_mr.c). */
#define NETX_MRC 8
struct netx_mrc {
  uint64_t id; /* the region's (never reused) */
  void *base;
  struct collie__netdev_mr *mr;
  int users;     /* payloads in flight with it */
  uint64_t last; /* when last used, for eviction */
};

/* A tagged payload in flight: a request's send or receive. */
struct netx_bulk {
  struct collie__netdev_op op;
  struct netx_xport *x;
  struct collie__req *r; /* NULL once the transport failed (its done is ignored) */
  struct netx_chan *c;
  struct collie__netdev_mr *mr; /* registered for this payload, or NULL */
  int mr_cached;                /* mr is the cache's (netx_mr.c), not this payload's own */
  int is_send;
  struct netx_bulk *next; /* in flight, or free */
};

struct netx_chan {
  int peer;
  int world_rank;
  int32_t pid;
  char host[48]; /* the peer's hostname, for messages */
  int near;      /* on this host, its pid of our namespace: its death can be seen */
  int noted;     /* its launcher's exit note: the code + 1, or 0 while none was read */
  int hello;     /* its hello arrived */
  int greeted;   /* ours went to it */
  /* Sends not yet started (waiting for a control buffer or the device); the
   * head may have its header out already (head_rts). */
  struct collie__req *sq_head, *sq_tail;
  int head_rts;
  uint32_t send_k, recv_k;
  struct collie__req *rq_head, *rq_tail; /* receives not yet matched */
  struct netx_msg *inbox, *inbox_tail;   /* arrived headers, in k order */
  /* RTS payloads matched but not yet started (the device said again). */
  struct netx_bulk *rdv_head, *rdv_tail;
  int catching, sated;
  int inflight; /* tagged payloads started and not yet done */
  int bye;      /* its goodbye came: bye_k messages before it */
  uint32_t bye_k;
  int aborted; /* its ABORT came, with why, after abort_k messages */
  uint32_t abort_k;
  char why[NETX_REASON_MAX + 1];
};

struct netx_xport {
  const struct collie__netdev_ops *ops;
  struct collie__netdev *dev;
  int rank, size;
  uint64_t comm;
  int nchan;
  struct netx_chan *chans; /* nchan, by ascending peer */
  int *chan_of;            /* size entries: index into chans, or -1 */
  int npending;            /* posted requests not yet done */
  int ncatch;
  const struct collie__net_sink *sink;
  collie_result_t failed;
  char fail_msg[COLLIE_ERRMSG_LEN];
  atomic_int aborted; /* abort() from any thread; the driver turns it into failed */
  /* Who uses the device: 0 nobody, 1 the driving thread (progress, post,
   * poll_arm), 2 abort(), which took it to tell the peers and keeps it. An
   * abort() that finds the driver inside leaves the telling to it
   * (netx_leave), so the device is never used from two threads. */
  atomic_int owner;
  int told;           /* the peers were told of our abort */
  int64_t next_watch; /* when waits next look at the peers' processes */
  /* The job's store (retained), where a launcher notes a rank's end, and
   * when waits next read the notes of peers on other hosts; or NULL. */
  struct collie__store *job_store;
  int64_t next_note;
  int64_t notes_seen; /* the job's exit-note count when the peers' notes were last read */
  /* Control buffers: receives posted, sends free or in flight. */
  char *arena; /* (NETX_RX_BUFS + NETX_TX_BUFS) x NETX_CTRL */
  struct collie__netdev_mr *arena_mr;
  struct netx_buf rx[NETX_RX_BUFS], tx[NETX_TX_BUFS];
  struct netx_buf *tx_free;
  int tx_busy;
  struct netx_bulk *bulk_live, *bulk_free;
  const char *token;
  int need_reg;
  size_t inject_max; /* control messages up to this size go without a completion (0: none) */
  unsigned dropped;  /* control messages dropped as a stranger's (netx_drop) */
  struct netx_mrc mrc[NETX_MRC]; /* netx_mr.c */
  int nmrc;
  uint64_t mrc_clock;
};

/* ---- netx.c ---- */

/* "rank 3 (world rank 5, pid 123 on host h)" into buf. */
void collie__netx_peer_name(const struct netx_xport *x, const struct netx_chan *c, char *buf,
                            size_t len);
/* Takes back a control buffer whose send completed. */
void collie__netx_tx_done(struct collie__netdev_op *op, collie_result_t rc, size_t n);
/* Handles a completed control receive (b's bytes, n of them). */
void collie__netx_rx_done(struct collie__netdev_op *op, collie_result_t rc, size_t n);
/* A control message to c's peer: header of type with k, slot and len, and
 * inl bytes of payload from buf. COLLIE_NETDEV_AGAIN when no buffer or the
 * device has no room (nothing sent). */
collie_result_t collie__netx_ctrl(struct netx_xport *x, struct netx_chan *c, int type, uint32_t k,
                                  uint64_t slot, uint64_t len, const void *buf, uint32_t inl);
/* Tells the peers our hello went to that this rank gives up (why), best
 * effort; for a setup that fails. */
void collie__netx_tell_greeted(struct netx_xport *x, const char *why);
/* Fails the transport with rc (the thread's message); every posted request
 * is completed with it where touch is set. Returns rc. */
collie_result_t collie__netx_fail(struct netx_xport *x, collie_result_t rc, int touch);
/* Frees everything of x (the device too); never touches requests. */
void collie__netx_free(struct netx_xport *x);

/* ---- netx_mr.c ---- */

/* A registration for len bytes at buf: the cache's, for a buffer inside a
 * live collie_mem_alloc region (*cached 1), else one of its own. */
collie_result_t collie__netx_mr_get(struct netx_xport *x, void *buf, size_t len,
                                    struct collie__netdev_mr **mr, int *cached);
/* Done with mr (from collie__netx_mr_get with cached). */
void collie__netx_mr_put(struct netx_xport *x, struct collie__netdev_mr *mr, int cached);
/* Deregisters every cached registration (close). */
void collie__netx_mr_clear(struct netx_xport *x);

/* ---- netx_setup.c ---- */

int collie__netx_can_connect(const struct collie__net_cfg *cfg, int peer);
collie_result_t collie__netx_open(const struct collie__net_cfg *cfg, const int *peers, int npeers,
                                  struct collie__xport **out);
/* The same on another device: tests wrap libfabric's to inject faults. */
collie_result_t collie__netx_open_on(const struct collie__netdev_ops *dev,
                                     const struct collie__net_cfg *cfg, const int *peers,
                                     int npeers, struct collie__xport **out);

#endif /* COLLIE_TRANSPORT_NETX_INT_H */
