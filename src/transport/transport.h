/*
 * transport.h - channels between the ranks of one communicator.
 *
 * Algorithms (src/coll) see only the "net" of a communicator: post a send or a
 * receive of a byte range to a peer, tagged with a slot, then wait for a set
 * of requests. Underneath, each peer is served by the first transport in
 * net.c's table whose can_connect() accepts it: shm for ranks on the same
 * host, tcp for the rest (COLLIE_TRANSPORT=<name> uses that one alone).
 *
 * Matching. Messages between an ordered pair of ranks are delivered in the
 * order they were posted, to receives taken in the order they were posted:
 * there is no reordering, except that a point-to-point message no posted
 * receive expects goes to the net's sink, and the net matches those by
 * source and tag (match.c, "Point to point" below). Every message carries a
 * 64-bit slot (collective kind, sequence number, algorithm step; see collie__slot) and its length;
 * a receive whose slot or length differs from the arriving message fails with COLLIE_INVALID_USAGE
 * ("collectives mismatched across ranks"), never with silent corruption. Zero-length messages are
 * legal.
 *
 * Threads. A net is driven by one thread at a time (the communicator's
 * caller or its worker); nothing here takes locks on the hot path.
 */
#ifndef COLLIE_TRANSPORT_H
#define COLLIE_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "collie.h"
#include "util/kinds.h"
#include "util/mem.h"

struct collie__store;

/* ---- Slots: the tag every message carries ---- */

/* Collective kinds (util/kinds.h, the one list) go in a slot's top 8 bits. P2P
 * carries the user's tag. */

/* Collective slot: 8 bits kind | 32 bits op sequence | 16 bits algorithm step | 8 bits
 * left for the algorithm's id (collie__call_slot in coll/coll.h sets them; slot.c decodes). */
static inline uint64_t
collie__slot(int kind, uint32_t seq, uint32_t step)
{
  return ((uint64_t)(kind & 0xff) << 56) | ((uint64_t)seq << 24) | ((uint64_t)(step & 0xffff) << 8);
}
/* P2P slot (the matching envelope, match.c): kind P2P | 32 bits user tag |
 * 16 bits id | 8 bits mode. A synchronous send's id numbers it among the
 * pair's synchronous sends, and its acknowledgement echoes tag and id. */
enum collie__p2p_mode {
  COLLIE_P2P_STANDARD = 0, /* complete once the bytes are out */
  COLLIE_P2P_SYNC = 1,     /* complete once the receiver matched it: it acknowledges */
  COLLIE_P2P_ACK = 2,      /* the receiver's acknowledgement of a SYNC message; 0 bytes */
};
static inline uint64_t
collie__slot_p2p(uint32_t tag, uint32_t id, enum collie__p2p_mode mode)
{
  return ((uint64_t)COLLIE_KIND_P2P << 56) | ((uint64_t)tag << 24) |
         ((uint64_t)(id & 0xffff) << 8) | (uint64_t)mode;
}
static inline int
collie__slot_is_p2p(uint64_t slot)
{
  return (int)(slot >> 56) == COLLIE_KIND_P2P;
}
/* The steps of collie_comm_destroy's closing barrier start here, so that a
 * peer that meets it in a collective knows this rank left rather than ran
 * another collective (no barrier has this many steps of its own). */
#define COLLIE_STEP_CLOSING 0xff00u
/* Whether slot is a step of a closing barrier. */
static inline int
collie__slot_closing(uint64_t slot)
{
  return (int)(slot >> 56) == COLLIE_KIND_BARRIER && ((slot >> 8) & 0xffff) >= COLLIE_STEP_CLOSING;
}
/* Human text for a slot: "allreduce #12 step 3" or "send/recv tag 7". */
void collie__slot_describe(uint64_t slot, char *buf, size_t len);
/* The error for a closing-barrier message met by a collective's, either
 * way round: closer ("rank 3 (world rank 3)", or "this rank") closed the
 * communicator while runner ran op (a collie__slot_describe text).
 * REMOTE_ERROR. Transports use it where their slots disagree and one side's
 * is a closing barrier's, instead of "collectives mismatched". */
collie_result_t collie__slot_closed_err(const char *closer, const char *runner, const char *op);
/* The error for a message from who (slot got, got_len bytes) that this
 * rank's (comm rank me) receive (slot want, want_len bytes) does not take:
 * a closing barrier's met by a collective's, either way round, else
 * INVALID_USAGE "collectives mismatched across ranks" naming both. */
collie_result_t collie__slot_mismatch_err(const char *who, int me, uint64_t got, uint64_t got_len,
                                          uint64_t want, size_t want_len);

/* ---- Peers ---- */

#define COLLIE_HOSTID_LEN 192

/* What each rank publishes about itself at init and split. */
struct collie__peer {
  char host[COLLIE_HOSTID_LEN]; /* host identity: equal means shared memory works */
  int32_t pid;
  int32_t world_rank; /* rank in the world communicator, for messages */
  int32_t ncpus;      /* online CPUs of its host: with host, tells who is oversubscribed */
  /* The kernel it runs on (boot id; "" when unknown): hosts that are
   * namespaces or containers of one machine share its cores. */
  char machine[40];
  /* Ranks of its world communicator on that machine, once known (0 before):
   * a split keeps counting every process that competes for the cores. */
  int32_t machine_ranks;
  /* 1: under COLLIE_NET=auto, this rank's libfabric picks a hardware
   * provider (ofi serves a pair of hosts where both ranks say so). */
  int32_t fabric;
  char fail[192]; /* non-empty: this rank failed init locally (why); everyone fails */
};

/* Peer p's hostname for messages (its host identity without the boot id),
 * at most len - 1 bytes of it; "" when p shares me's host. */
static inline void
collie__peer_hostname(const struct collie__peer *p, const struct collie__peer *me, char *out,
                      size_t len)
{
  if (!len) return;
  size_t n = 0;
  if (strcmp(p->host, me->host) != 0) {
    n = strcspn(p->host, "/");
    if (n >= len) n = len - 1;
    memcpy(out, p->host, n);
  }
  out[n] = '\0';
}

/* ---- Requests ---- */

/* One posted send or receive. The caller owns the struct and keeps it (and
 * buf) alive until done is set or the net fails; the fields below "private"
 * belong to the transport while the request is posted. */
struct collie__req {
  int done;           /* set to 1 by progress when complete (or failed) */
  collie_result_t rc; /* result once done */
  /* private to the transport */
  int peer;
  int is_send;
  int direct; /* a send to copy once if the transport can (collie__net_isend_direct) */
  int upto;   /* a receive that may be given a shorter message (collie__net_irecv_upto):
               * nothing is read ahead into buf past what the message holds */
  collie__mem_kind_t
      mem; /* where buf lives (collie__net_set_mem); host is all any transport moves today */
  uint64_t slot;
  void *buf;
  size_t len;
  size_t off;    /* bytes moved so far */
  uint64_t xseq; /* transport's own use (shm: a single-copy send's slot + 1) */
  /* Device messages (collie__net_isend_device, collie__net_irecv_device):
   * a send whose buf holds the record of devrec bytes that describes its
   * len bytes of device memory at dev; a receive's device memory (dev), and
   * whether its bytes landed there (on_dev) rather than in buf. own: host
   * memory the transport took for r (a refused device send's bytes), freed
   * when r completes; after a failed wait (the net aborted, r forgotten)
   * the caller frees it. */
  uint32_t devrec;
  int on_dev;
  void *dev;
  void *own;
  struct collie__req *next; /* the channel's FIFO of posted requests */
};

/* Puts s, the net's sink's request for a message held at the head of a
 * channel to peer, in front of that channel's posted receives (head, tail),
 * as if it had been posted there (transport.h: the sink). */
static inline void
collie__req_adopt(struct collie__req *s, int peer, struct collie__req **head,
                  struct collie__req **tail)
{
  s->done = 0;
  s->rc = COLLIE_SUCCESS;
  s->peer = peer;
  s->is_send = 0;
  s->off = 0;
  s->next = *head;
  *head = s;
  if (!*tail) *tail = s;
}

/* ---- The per-transport plug-in contract ---- */

/* Everything a transport needs to set up channels for one communicator. */
struct collie__net_cfg {
  int rank, size;
  const struct collie__peer *peers; /* size entries, indexed by comm rank */
  struct collie__store *store;      /* prefixed for this comm; setup only */
  /* The job's root store (collie__store_root), or NULL: where a launcher
   * notes a rank's end (bootstrap.h, exit notes); a transport may keep it. */
  struct collie__store *job_store;
  const char *token;       /* job token: connections must prove it */
  uint64_t comm_hash;      /* unique per communicator within the job */
  const char *transport;   /* "auto" or one transport's name (only it is used) */
  const char *net;         /* under auto, the transport between hosts: "tcp" or "ofi" */
  const char *ifname;      /* COLLIE_SOCKET_IFNAME or NULL */
  int spin;                /* polls before sleeping in wait (0: sleep at once) */
  size_t cma_min;          /* shm: single-copy (CMA) from this many bytes; 0: never */
  size_t shm_bytes;        /* shm: segment budget per local rank; 0: the default */
  size_t unexpected_bytes; /* buffer for unexpected send/recv messages (match.c) */
  int tcp_reuse;           /* tcp: keep clean connections for later communicators */
  const char *ofi_library; /* ofi: the libfabric to open, or NULL: libfabric.so.1 */
  int ofi_mr_all;          /* ofi: register every buffer, whatever the provider asks */
  int64_t deadline_ns;     /* setup deadline */
  /* With the bootstrap ring (bootstrap/bootstrap.h): every rank's listen
   * address, size x COLLIE_RING_ADDR_LEN bytes ("host:port"), and this
   * rank's listening socket, which tcp takes (dup) instead of listening and
   * publishing through the store. NULL: the store (listen_fd unused). */
  const char *listen_addrs;
  int listen_fd;
  /* Set by collie__net_open for every transport it opens. */
  const struct collie__net_sink *sink;
};

struct collie__xport; /* a transport's state for one communicator */

/* Where a transport hands point-to-point messages that no posted request
 * expects (match.c, the net's matching of sends and receives by source and
 * tag). A transport calls take() on the thread that drives it, when the
 * first chunk or header of a message whose slot is a P2P slot
 * (collie__slot_is_p2p) is at the head of peer's channel and either no
 * receive is posted to peer while the net catches that peer's messages
 * (catch_p2p), or the head receive has not started and expects another slot
 * or length (blocked: 1; a collective's receive behind a message that was
 * sent before it; head is that receive, else NULL). take() returns a
 * request, owned by the net, with buf and
 * len set for this message's len bytes and slot; the transport puts it at
 * the head of the channel, in front of any posted receive, as if it had been
 * posted there, and completes it as any other; with *replace set, head is the
 * net's own receive and this message goes to the request returned instead:
 * the transport drops head from its queue without touching it (it has not
 * started); *more says whether the net
 * still catches peer's messages after this one (0: stop handing them over
 * until the next catch_p2p call). Or NULL: not now (the net's
 * buffer for unexpected messages is full); the message stays where it is
 * and its sender waits, and the transport asks again on a later progress.
 * take() never calls the transport back. */
struct collie__net_sink {
  void *ctx;
  struct collie__req *(*take)(void *ctx, int peer, uint64_t slot, size_t len,
                              struct collie__req *head, int *more, int *replace);
};

/* Device messages (issue 21; docs/gpu.md, "Send and receive"): a send of
 * device memory travels as a record that lets the receiver copy the bytes
 * itself (a CUDA IPC handle and an offset), on transports that reach the
 * peer's device (shm: the same host). What the record is and how it is
 * read is core's (core/stage_p2p.c), installed on the net, so that no
 * transport calls the device module. */
#define COLLIE_NET_DEV_REC_MAX 512
struct collie__net_dev_ops {
  void *ctx;
  /* Copies the len bytes that peer's record (rec, reclen bytes) describes
   * into dst, device or host memory, and returns once they are there.
   * COLLIE_UNSUPPORTED: peer's buffer cannot be mapped here (nothing
   * copied, error cleared): the transport refuses the message, and the
   * sender sends its bytes instead; this rank takes no more device
   * messages. */
  collie_result_t (*read)(void *ctx, int peer, const void *rec, size_t reclen, void *dst,
                          size_t len);
  /* Copies len bytes of this rank's device memory dev into host memory. */
  collie_result_t (*fetch)(void *ctx, void *host, const void *dev, size_t len);
};
struct pollfd;

/* What the cost model (coll/select.c) assumes of a transport's channels until
 * a tuning file says otherwise: the latency of one message step, busy and
 * when some host runs more ranks than cores, and the time per byte moved. */
struct collie__xport_cost {
  double alpha_us, alpha_oversub_us, beta_us;
};

struct collie__xport_ops {
  const char *name; /* "shm", "tcp": logs, COLLIE_TRANSPORT, tuning-file classes */
  struct collie__xport_cost cost;
  /* Pure predicate, no side effects: may this transport link cfg->rank and peer? */
  int (*can_connect)(const struct collie__net_cfg *cfg, int peer);
  /* Sets up channels to peers[0..npeers) (comm ranks, ascending, never cfg->rank).
   * Collective among the ranks that pick this transport for each other; blocks
   * until all channels are up or cfg->deadline_ns passes. Uses cfg->store to
   * exchange addresses. Errors: TIMEOUT (naming the peers that never came),
   * REMOTE_ERROR (a peer refused our token), SYSTEM_ERROR. */
  collie_result_t (*open)(const struct collie__net_cfg *cfg, const int *peers, int npeers,
                          struct collie__xport **out);
  /* Queues r (peer, is_send, buf, len, slot set) behind earlier requests on its
   * channel. Never blocks; may move bytes at once. Errors only for a failed transport. */
  collie_result_t (*post)(struct collie__xport *x, struct collie__req *r);
  /* Moves every posted request forward as far as it can without blocking and marks
   * finished ones done. Sets *pending to the number of requests still posted.
   * Returns the first failure: REMOTE_ERROR (peer died, closed or aborted: the message
   * names it), INVALID_USAGE (slot or length mismatch: the message names both
   * slots), SYSTEM_ERROR. After a failure every posted request is done with an error. */
  collie_result_t (*progress)(struct collie__xport *x, int *pending);
  /* Sleeps until something may have changed for this rank (data arrived, space
   * freed, a peer died) or until until_ns. No event posted after the last progress()
   * may be missed (level-triggered, or snapshot-and-compare). May return early. */
  void (*wait)(struct collie__xport *x, int64_t until_ns);
  /* Marks this rank as gone for peers (they fail with REMOTE_ERROR soon) and forgets
   * every posted request WITHOUT touching it: the caller may already have returned
   * and its requests (on its stack) be gone. Later progress() calls return the
   * failure. Non-blocking, idempotent; may be called from another thread than the
   * one driving progress (collie_comm_abort). */
  void (*abort)(struct collie__xport *x);
  /* Frees everything, tells peers we left. Never touches posted requests either. */
  void (*close)(struct collie__xport *x);
  /* Optional (NULL: peers learn only that this rank left). Called on the
   * thread driving progress, just before abort, when this rank gives up on a
   * failure of its own: tells peers why (why: this rank's message, which
   * names the first cause), so that a peer's error carries it rather than
   * only "rank q closed the connection". Best effort; never blocks. */
  void (*tell)(struct collie__xport *x, const char *why);
  /* Optional (NULL: cannot). Copies len bytes from buf into peer's memory at
   * addr, an address the peer handed over in a message, and returns once they
   * are there. Synchronous, on the caller's core. Errors: UNSUPPORTED when this
   * rank may not reach the peer's memory, REMOTE_ERROR when the copy fails. */
  collie_result_t (*write_peer)(struct collie__xport *x, int peer, uint64_t addr, const void *buf,
                                size_t len);
  /* Optional (NULL: this transport cannot tell, and a receive from any source
   * never matches its peers). The slot and total length of the next message
   * from peer, once its first chunk or header has arrived, while no receive
   * is posted to peer; the message stays where it is. Returns 1 and fills
   * slot/len, else 0. Never blocks, takes no lock; call progress before. */
  int (*peek)(struct collie__xport *x, int peer, uint64_t *slot, size_t *len);
  /* Starts (on: 1) or stops (0) catching peer's point-to-point messages:
   * while on, a P2P message at the head of peer's channel with no receive
   * posted goes to the sink (until the sink says no more: *more), and the
   * channel counts as pending (progress and wait watch it as they watch a
   * posted receive; a peer's death fails the transport). A call with on
   * set starts again after a "no more". */
  void (*catch_p2p)(struct collie__xport *x, int peer, int on);
  /* Optional (NULL: never). Whether a peer this rank may wait for last ran
   * on the CPU this rank runs on: a waiter then yields at once instead of
   * spinning (util/backoff.c). Cheap (a few loads); called every 64 polls. */
  int (*crowded)(struct collie__xport *x);
  /* Optional pair (NULL: this transport sleeps only in its own wait(), and
   * a net waiting on it and another takes short turns between them). For
   * one sleep across transports (net.c): poll_arm fills fds[0..max) with
   * what would wake this transport, announces the sleep to its peers and
   * may lower *until_ns to its own limit; it returns how many fds it used,
   * -1 when something can be done without sleeping (do not sleep), or -2
   * when it cannot share a sleep now. poll_done, after the sleep (or when
   * another transport's arm said not to sleep), takes the events of its
   * fds and withdraws the announcement. Called only by the driving thread. */
  int (*poll_arm)(struct collie__xport *x, struct pollfd *fds, int max, int64_t *until_ns);
  void (*poll_done)(struct collie__xport *x, const struct pollfd *fds, int n);
  /* Optional pair (NULL: this transport moves host memory only). set_device
   * hands it the net's device ops (collie__net_set_device) and tells its
   * peers that this rank now takes device messages of memory on the GPU
   * with this UUID; device_peer says whether peer has told so for uuid.
   * Never block. */
  void (*set_device)(struct collie__xport *x, const struct collie__net_dev_ops *ops,
                     const unsigned char uuid[16]);
  int (*device_peer)(struct collie__xport *x, int peer, const unsigned char uuid[16]);
};

extern const struct collie__xport_ops collie__shm_ops;
extern const struct collie__xport_ops collie__tcp_ops;
extern const struct collie__xport_ops collie__ofi_ops; /* netx.c over ofi.c's device */

/* ---- The net: all channels of one communicator (net.c) ---- */

struct collie__net;

/* Whether this process finds a network fabric for COLLIE_NET=auto: the ofi
 * device loads (library: COLLIE_OFI_LIBRARY, or NULL) and libfabric's pick
 * drives hardware of its own. Probes once per process (~0.1-0.2 s). */
int collie__net_fabric_here(const char *library);
/* Picks a transport per peer, opens each transport for its peers. */
collie_result_t collie__net_open(const struct collie__net_cfg *cfg, struct collie__net **out);
/* The memory kind of the buffers posted from now on (the running call's,
 * util/mem.h): each request carries it, for the transport to move that
 * memory its way. Host until set. */
void collie__net_set_mem(struct collie__net *n, collie__mem_kind_t mem);
/* Installs ops (kept by pointer: they outlive the net) and tells the peers
 * this rank takes device messages of memory on the GPU whose UUID is uuid
 * (its own: the receiver maps the sender's buffer, which only the same GPU
 * is sure to allow). Once. */
void collie__net_set_device(struct collie__net *n, const struct collie__net_dev_ops *ops,
                            const unsigned char uuid[16]);
/* Whether a device message of memory on GPU uuid to peer may go now: its
 * transport moves them and peer installed device ops for that GPU. Never
 * blocks. */
int collie__net_device_peer(const struct collie__net *n, int peer, const unsigned char uuid[16]);
/* Sends the len bytes of device memory at dev as the record rec of reclen
 * bytes (<= COLLIE_NET_DEV_REC_MAX; the caller keeps it, and the memory,
 * until r is done), to a peer for which collie__net_device_peer said yes
 * (else INTERNAL_ERROR). The request completes once the receiver has copied
 * the bytes; a receiver that cannot map them refuses, and the transport
 * sends them as host bytes instead (the ops' fetch), in the message's
 * place. */
collie_result_t collie__net_isend_device(struct collie__net *n, int peer, const void *rec,
                                         size_t reclen, const void *dev, size_t len, uint64_t slot,
                                         struct collie__req *r);
/* A receive of len bytes into buf, or into dev (device memory) when the
 * message is a device message: r->on_dev then says so once r is done. */
collie_result_t collie__net_irecv_device(struct collie__net *n, int peer, void *buf, void *dev,
                                         size_t len, uint64_t slot, struct collie__req *r);

/* ---- Transport names and classes: the table in net.c is the only list ----
 *
 * The table is ordered by reach: each transport serves pairs of ranks the
 * ones before it cannot (shared memory within a host first, then sockets),
 * and a peer gets the first that accepts it. A transport's position is its
 * cost-model class: a communicator's class is the slowest (last) transport
 * any of its ranks uses, which every rank computes alike, since a rank that
 * needs a later transport for one peer makes every rank need it. */

/* name ("auto" or a transport's, any case) as the static string it is stored
 * as; NULL when no transport has that name. */
const char *collie__net_transport_name(const char *name);
/* "auto, shm or tcp" in buf: the values COLLIE_TRANSPORT takes, for messages. */
const char *collie__net_transport_choices(char *buf, size_t len);
/* Classes: one per transport, in table order. */
int collie__net_class_count(void);
/* The class's transport name; "?" outside 0..count-1. */
const char *collie__net_class_name(int cls);
/* The class named name, or -1. */
int collie__net_class_index(const char *name);
/* The class's default cost constants; NULL outside 0..count-1. */
const struct collie__xport_cost *collie__net_class_cost(int cls);
/* The class that serves a peer on another host (COLLIE_TRANSPORT=auto):
 * the network's, for the model's predictions (collie-bench --model). */
int collie__net_class_remote(void);
/* The class of the communicator these channels serve (0 with no peer). */
int collie__net_class(const struct collie__net *n);
/* The class in which every peer shares this host's memory (the table's first):
 * what shm-only algorithms need of the whole communicator. */
#define COLLIE_NET_CLASS_LOCAL 0
/* Which transport serves peer ("shm", "tcp", "self"). */
const char *collie__net_transport_of(const struct collie__net *n, int peer);
collie_result_t collie__net_isend(struct collie__net *n, int peer, const void *buf, size_t len,
                                  uint64_t slot, struct collie__req *r);
collie_result_t collie__net_irecv(struct collie__net *n, int peer, void *buf, size_t len,
                                  uint64_t slot, struct collie__req *r);
/* The world rank a peer's failure message blames: the first "(world rank N"
 * after its ", after: " (the transports' "rank R aborted its communicator
 * ..., after: <reason>"); -1 when it has no reason or the reason names no
 * rank. How a rank in its timeout's grace tells a peer's cause that names
 * the rank further down the chain from one that blames itself. */
int collie__net_blamed(const char *msg);
/* As collie__net_irecv, for a receive of up to len bytes (MPI's Recv): a
 * message of another size is handed to the sink (the net's matching), which
 * may put it in buf; so the transport must not write buf ahead of knowing
 * the message's size (tcp reads no payload ahead with the header). */
collie_result_t collie__net_irecv_upto(struct collie__net *n, int peer, void *buf, size_t len,
                                       uint64_t slot, struct collie__req *r);
/* As collie__net_isend, for a message that should move in one copy if the
 * transport can do it (shm: the receiver reads buf itself), even where a
 * one-way stream would rather split the copying between the two cores: the
 * sender has work of its own meanwhile (a root copying its own block), the
 * receiver takes such messages from many ranks (a gather root), or the
 * message is a whole call in itself (no pipeline to fill). */
collie_result_t collie__net_isend_direct(struct collie__net *n, int peer, const void *buf,
                                         size_t len, uint64_t slot, struct collie__req *r);
/* Writes len bytes of buf into peer's memory at addr (an address the peer sent
 * us), with this rank's core doing the copy: a receiver fed by many, such as a
 * gather root, then copies only its own share. Errors: UNSUPPORTED where the
 * peer's transport cannot (tcp, self, COLLIE_SHM_CMA_MIN=0, no permission to
 * read the peer's memory), REMOTE_ERROR when the copy fails. A caller falls
 * back to a message on any error. */
collie_result_t collie__net_write_peer(struct collie__net *n, int peer, uint64_t addr,
                                       const void *buf, size_t len);
/* Whether this net may use single copies at all (COLLIE_SHM_CMA_MIN > 0): the
 * same on every rank of a job that sets the same environment, so algorithms
 * may pick a protocol by it. */
int collie__net_single_copy(const struct collie__net *n);
/* Drives every transport until all of reqs[0..n) are done, spinning briefly and
 * then sleeping; fails with TIMEOUT at deadline_ns (the message names the
 * pending peers) or with the first transport failure. NULL entries are skipped. */
collie_result_t collie__net_wait(struct collie__net *n, struct collie__req *const *reqs, int nreq,
                                 int64_t deadline_ns);
/* ---- Point to point, matched by source and tag (match.c) ----
 *
 * Sends and receives between ranks match as MPI's do: a receive takes the
 * first message from its source (or any, COLLIE_ANY_SOURCE) with its tag
 * (or any, COLLIE_ANY_TAG) in the order the messages arrived; messages of
 * one source and tag are never overtaken. A message that arrives before its
 * receive is posted is unexpected: it waits in its channel until something
 * needs the channel past it (a posted receive that could take a later
 * message of that peer, a collective's receive behind it, a probe), then
 * goes into the net's buffer for unexpected messages, up to
 * unexpected_bytes; past that it stays in the channel and its sender waits
 * (flow control) until receives take what is buffered. */

/* Where a receive's message came from (filled once the receive is done). */
struct collie__p2p_status {
  int source, tag;
  size_t len;
};

struct collie__match_msg; /* match.c */

/* A send or receive of the matching. The caller owns it and keeps it (and
 * its buffers) until collie__net_wait on its requests (collie__p2p_reqs)
 * returned, as with struct collie__req. */
struct collie__p2p_op {
  int peer;      /* send: the receiver; receive: the source or COLLIE_ANY_SOURCE */
  int tag;       /* receive: COLLIE_ANY_TAG takes any */
  void *buf;     /* send: len bytes (a device send: its record, reclen bytes); receive: room */
  size_t len;    /* receive: the room in buf */
  void *dev;     /* device memory (core/stage_p2p.c): a receive's, a device send's */
  size_t reclen; /* a device send: its record is buf, reclen bytes (0: a host send) */
  int sync;      /* send: complete only once the receiver matched it */
  int exact;     /* receive: the message must be len bytes (else INVALID_USAGE naming both) */
  int now;       /* receive: the caller waits for it at once, before posting anything else */
  /* Receive, once done. */
  struct collie__p2p_status st;
  int on_dev; /* the bytes landed in dev (a device message) */
  /* private to match.c */
  struct collie__req done; /* completes the op (receives, synchronous sends, sends to self) */
  struct collie__req sreq; /* a send's message */
  uint16_t id;
  int self;
  int direct;   /* a receive posted to its channel as it stands (match.c: the same-tag path) */
  int replaced; /* ... whose message came as another request (take(): *replace) */
  struct collie__p2p_op *next;
};

/* Posts a send of op->buf (len bytes, tag) to op->peer, which may be this
 * rank (matched with its receives in memory; the send completes once one
 * takes it). */
collie_result_t collie__p2p_isend(struct collie__net *n, struct collie__p2p_op *op);
/* Posts a receive: the first message already here that it matches, else the
 * first that arrives. */
collie_result_t collie__p2p_irecv(struct collie__net *n, struct collie__p2p_op *op);
/* The requests to pass collie__net_wait for op: up to 2, into reqs. */
int collie__p2p_reqs(struct collie__p2p_op *op, struct collie__req **reqs);
/* After that wait returned SUCCESS: op's results are final (a receive that
 * went straight to its channel learns its status here). */
void collie__p2p_settle(struct collie__net *n, struct collie__p2p_op *op);
/* Whether a message from source (or COLLIE_ANY_SOURCE) with tag (or
 * COLLIE_ANY_TAG) has arrived, without receiving it: *found 1 and *st
 * filled, else *found 0. block: wait until one has, or deadline_ns
 * (TIMEOUT naming what was awaited); else look once. */
collie_result_t collie__p2p_probe(struct collie__net *n, int source, int tag, int block, int *found,
                                  struct collie__p2p_status *st, int64_t deadline_ns);

/* As collie__net_wait, but reaching until_ns only returns COLLIE_TIMEOUT
 * (the net goes on: a caller's own short wait). */
collie_result_t collie__net_wait_soft(struct collie__net *n, struct collie__req *const *reqs,
                                      int nreq, int64_t until_ns);
/* One progress round of every transport and of the matching, never
 * blocking. Returns the net's failure, if any. */
collie_result_t collie__net_poll(struct collie__net *n);
/* The net's failure (its message in the thread's slot), or SUCCESS. */
collie_result_t collie__net_failure(const struct collie__net *n);

/* A failure outside n's operations (a communicator's setup after its
 * channels opened) ends n as a failed operation would: every peer is told
 * why (the thread's error message) and the transports are aborted, so that
 * closing n says no clean goodbye. */
void collie__net_give_up(struct collie__net *n, collie_result_t rc);
/* A communicator's setup that this rank gives up on for an error of its own
 * (why), after the peer records were exchanged: said in the communicator's
 * store ("setup-fail"), best effort, so that the ranks waiting in their
 * transports' setup fail at once naming it and why (setup_fail.c). */
void collie__setup_failed(struct collie__store *store, int rank, const char *why);
/* Whether a rank said so: 1 with its comm rank in *rank (-1 unknown) and its
 * reason in why (len bytes). Asks store once, for at most 5 ms; the
 * transports' setup waits ask between their liveness looks. */
int collie__setup_gave_up(struct collie__store *store, int *rank, char *why, size_t len);
void collie__net_abort(struct collie__net *n);
/* Tells every peer why this rank is about to abort (their errors carry it);
 * call collie__net_abort after. */
void collie__net_tell(struct collie__net *n, const char *why);
void collie__net_close(struct collie__net *n);

#endif /* COLLIE_TRANSPORT_H */
