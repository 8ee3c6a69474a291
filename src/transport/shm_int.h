/*
 * shm_int.h - the internals of the shm transport, shared by its setup
 * (shm_setup.c) and its data path (shm.c): the layout of the shared-memory
 * segment, and each rank's private state for it. One segment exists per host per communicator;
 * every local rank of that communicator maps it. Everything here lives in shared memory and is read
 * and written by several processes at once, so every word that more than one process touches is a
 * C11 atomic, and every word written by a different process than its neighbours sits on its own
 * cache line(s).
 *
 *   offset 0                     struct collie__shm_header
 *   shm_layout.ranks_off         int32_t ranks[nlocal]: comm rank of each local index
 *   shm_layout.ctrl_off          struct collie__shm_ctrl ctrl[nlocal]
 *   shm_layout.rings_off         rings, one per ordered pair (i -> j), i != j
 *   shm_layout.flat_ctrl_off     struct collie__shm_flat_ctrl fctrl[nlocal]   (only when the
 *   shm_layout.flat_off          nlocal x 2 buffers of flat_buf_bytes          group is the
 *                                                                 whole communicator)
 *
 * A ring is a single-producer single-consumer FIFO of chunks in an array of
 * COLLIE_SHM_NCELLS header cells. The producer (rank i) owns tail, the
 * consumer (rank j) owns head; both count cells from 0 and never wrap (64
 * bits), so tail - head is the fill level. The chunk at position k has its
 * header in cell k mod NCELLS (which message, where in it, and a small
 * payload inline); a payload of up to COLLIE_SHM_CELLS_INLINE bytes goes on
 * in the cells after it, a larger one in payload slot k mod
 * COLLIE_SHM_NSLOTS of slot_bytes. So a chunk with a payload slot may be
 * written only while fewer than NSLOTS cells are in flight (the chunks
 * before it then sit at other residues), any chunk only while its cells are
 * free.
 *
 * Size. The segment is bounded by COLLIE_SHM_BYTES per local rank
 * (collie__shm_layout): today's geometry (64 KiB slots, 1 MiB flat buffers)
 * whenever it fits, which with the default 64 MiB is up to 124 local ranks;
 * beyond, or with a smaller budget, slots and flat buffers shrink by halves
 * (the flat area goes last). Slot and flat buffer sizes are therefore
 * runtime values: the leader records them in the header and every joiner
 * checks them against its own layout.
 *
 * The flat area (see shm.h) serves the shm-only algorithms: per rank a phase
 * word and two buffers that every other rank reads directly. It exists only
 * when every rank of the communicator is in the group, the one case where
 * those algorithms run.
 *
 * The layout is versioned (COLLIE_SHM_VERSION) and every rank checks the
 * header before using a segment, so a library of another build refuses it
 * instead of corrupting memory.
 */
#ifndef COLLIE_TRANSPORT_SHM_INT_H
#define COLLIE_TRANSPORT_SHM_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "transport/shm.h"
#include "transport/transport.h"
#include "util/error.h"
#include "util/util.h"

/* Tunables. 8 slots per direction per pair: deep enough that a sender
 * rarely waits on a receiver that is merely late. The slot size is chosen
 * per segment by collie__shm_layout: 64 KiB (a chunk that large amortises its
 * bookkeeping and a wake-up) unless the budget forces it down, by halves, to
 * at least 4 KiB. The rings grow with the square of the local rank count:
 * at 64 KiB slots a rank's share is ~0.5 MiB per peer (2 ranks: 1 MiB of
 * rings, 8 ranks 28 MiB, 64 ranks 2 GiB in all). */
#define COLLIE_SHM_NSLOTS 8u
/* Chunk headers per ring, in one contiguous array apart from the payloads:
 * a chunk whose payload fits its header (a small message) takes a header
 * only, so the sender may run 32 small messages ahead, and a receiver that
 * drains them reads consecutive lines, which the hardware prefetches. With
 * each header in front of its 64 KiB payload, every small message cost a
 * full cross-core line transfer that nothing overlapped: a two-process
 * ring of 8-byte messages with some other work per message moved them
 * about 1.7 times as fast with the headers packed (and published without a
 * locked instruction, below).
 * 32 keeps a ring within the pages its 8 payload slots and their headers
 * took before (the default geometry still fits 124 local ranks). */
#define COLLIE_SHM_NCELLS 32u
#define COLLIE_SHM_SLOT_BYTES_DEFAULT (64u * 1024u)
#define COLLIE_SHM_SLOT_BYTES_MIN (4u * 1024u)

/* Each buffer of a rank's flat region (two per rank). 1 MiB: a piece that
 * large amortises a sync (~1 us busy, ~30 us through wake-ups) over enough
 * bytes, and the flat area grows only linearly: 2 MiB per rank, so 8 ranks
 * add 16 MiB to their 28 MiB of rings. Reserved with the rest, and only in a
 * segment that serves the whole communicator (the only case where the
 * shm-only algorithms run). Under a tight budget it shrinks by halves to
 * 64 KiB (below that, syncs would cost more than the pieces save), then the
 * area is left out and the message algorithms serve every call. */
#define COLLIE_SHM_FLAT_BUF_BYTES_DEFAULT (1u << 20)
#define COLLIE_SHM_FLAT_BUF_BYTES_MIN (64u * 1024u)

/* COLLIE_SHM_BYTES' default (params.def repeats it as a literal; a unit test
 * checks they agree): the most one local rank's share of a segment takes. */
#define COLLIE_SHM_BYTES_DEFAULT ((size_t)64 << 20)

/* 128, not 64: x86 prefetches cache lines in pairs, so words written by
 * different processes are kept 128 bytes apart to avoid false sharing. */
#define COLLIE_SHM_LINE 128u
#define COLLIE_SHM_PAGE 4096u

#define COLLIE_SHM_REASON_LEN 256u

#define COLLIE_SHM_MAGIC 0x636f6c6c69657368ull /* "collie" "sh" */
#define COLLIE_SHM_VERSION 10u

/* Values of collie__shm_ctrl.state. 0 means the rank has not attached yet. */
enum {
  COLLIE_SHM_UNATTACHED = 0,
  COLLIE_SHM_ALIVE = 1,
  COLLIE_SHM_CLOSED = 2,  /* close(): left normally */
  COLLIE_SHM_ABORTED = 3, /* abort(), or open() failed after attaching */
  COLLIE_SHM_REFUSED = 4, /* never attached: the segment's layout is not the one it computed
                             (reason says how); the others fail open at once */
};

/* Written once by the leader before magic; afterwards only attached and
 * events change. */
struct collie__shm_header {
  _Atomic uint64_t magic; /* COLLIE_SHM_MAGIC, stored last (release) by the leader */
  uint64_t nonce;         /* per creation; also published in the store, tells a
                             stale segment of a crashed job from ours */
  uint64_t comm_hash;
  uint64_t seg_bytes;
  uint32_t version;
  uint32_t nlocal;
  uint32_t nslots;
  uint32_t slot_bytes;
  int32_t leader_pid;
  uint32_t flat_buf_bytes; /* 0: no flat area */
  uint32_t ncpus;          /* the host's cores as the leader counted them: one answer for all */
  uint32_t pad0_;
  uint64_t shm_bytes; /* the leader's COLLIE_SHM_BYTES: named when a joiner's layout differs */
  char pad1_[COLLIE_SHM_LINE - 72];
  /* Own line: bumped by every rank as it maps the segment; futex word. */
  _Atomic uint32_t attached;
  char pad2_[COLLIE_SHM_LINE - 4];
  /* Own line: bumped by close() and abort() of any rank, so progress() notices
   * a departure with one load instead of polling every peer's state. */
  _Atomic uint32_t events;
  char pad3_[COLLIE_SHM_LINE - 4];
};

/* One per local rank, written by others (doorbell) and by its owner. */
struct collie__shm_ctrl {
  /* Futex word of the owner: bumped by any rank that changed something the
   * owner may be waiting on (data in, space freed, a departure). */
  _Atomic uint32_t doorbell;
  /* Non-zero while the owner is inside wait(): producers only pay for a
   * wake-up when it is set. COLLIE_SHM_SLEEP_FUTEX: futex_wake the doorbell;
   * COLLIE_SHM_SLEEP_POLL: the owner sleeps in poll() with sockets of other
   * transports too, and a byte to its wake-up socket wakes it (shm_wake.c). */
  _Atomic uint32_t sleeping;
  _Atomic uint32_t state; /* COLLIE_SHM_UNATTACHED, _ALIVE, _CLOSED, _ABORTED */
  int32_t pid;            /* owner's pid, written before state becomes ALIVE */
  /* Address, in the owner's memory, of collie__shm_cma_probe: a peer that
   * reads the right value there with process_vm_readv may read the owner's
   * buffers directly (written before state becomes ALIVE). */
  uint64_t cma_addr;
  /* 1: the owner registered for membarrier (collie__membarrier_register);
   * written before state becomes ALIVE. */
  uint32_t membarrier;
  /* The CPU the owner ran on when it last looked (shm_crowded), -1: not
   * known. Stored only when it changed, so the line stays shared. */
  _Atomic int32_t cpu;
  /* 1 once the owner takes device messages of memory on the GPU dev_uuid
   * names (its net has device ops: collie__net_set_device); dev_uuid is
   * written first and does not change. Back to 0 for good when the owner
   * refused a message (it could not map a peer's buffer). */
  _Atomic uint32_t dev_rx;
  unsigned char dev_uuid[16];
  char pad_[COLLIE_SHM_LINE - 52];
  /* Why the owner aborted, when it knows (its own failure, e.g. "rank 3
   * died"): written before state becomes ABORTED, so a rank that only waited
   * on the owner can still name the root cause. NUL-terminated. */
  char reason[COLLIE_SHM_REASON_LEN];
};

/* One per local rank in the flat area, written only by its owner. */
struct collie__shm_flat_ctrl {
  /* The line a peer's wait reads, so that one transfer of it brings all a
   * small call needs. Syncs published so far (collie__shm_flat_sync);
   * monotonic, never wraps. */
  _Atomic uint64_t phase;
  /* Hash of desc[i] below: the mismatch check compares these and reads a
   * full descriptor only to explain a mismatch. */
  _Atomic uint64_t digest[2];
  /* Pieces of at most COLLIE_SHM_FLAT_INLINE bytes, by buffer parity
   * (collie__shm_flat_piece). */
  unsigned char inline_piece[2][COLLIE_SHM_FLAT_INLINE];
  char pad0_[COLLIE_SHM_LINE - 24 - 2 * COLLIE_SHM_FLAT_INLINE];
  /* What the owner's current and previous flat calls are (indexed by the
   * parity of its call counter): written before the call's first phase,
   * read by the others after they see that phase. A rank is at most one
   * call ahead of a rank that still reads, so two entries suffice. */
  struct collie__shm_flat_desc desc[2];
};

/* Header of one chunk of one message (one cell of a ring's header array). */
struct collie__shm_chunk {
  uint64_t slot;  /* the message's slot tag (collie__slot) */
  uint32_t len;   /* payload bytes in this chunk (0 for an empty or a single-copy message) */
  uint32_t flags; /* COLLIE_SHM_CHUNK_* below */
  /* The ring position + 1 once this chunk is complete: stored last, with
   * release, so the receiver polls the slot itself and a small message costs
   * it one cache line (this one) instead of the ring's tail, the header and
   * the payload. Positions never repeat, so a stale value never matches. */
  _Atomic uint64_t seq;
  union {
    /* COLLIE_SHM_CHUNK_WHOLE: the chunk is the whole message (len bytes,
     * offset 0), inline: its first COLLIE_SHM_WHOLE_INLINE bytes here, the
     * rest in the cells after it. Most small messages: a 40-byte one takes
     * one cell, where the long form below held 16. */
    unsigned char whole[64 - 24];
    struct {
      uint64_t total; /* the message's length */
      uint64_t off;   /* where this chunk starts within the message */
      uint64_t addr;  /* single copy: the message's address in the sender's memory */
      /* A payload of at most COLLIE_SHM_CHUNK_INLINE bytes; up to
       * COLLIE_SHM_CELLS_INLINE continue in the cells after the header
       * (whole cells, wrapping at the end of the array), larger ones are in
       * the chunk's payload slot. */
      unsigned char inline_payload[64 - 48];
    } part;
  } u;
};
#define COLLIE_SHM_WHOLE_INLINE (64 - 24)
#define COLLIE_SHM_CHUNK_INLINE (64 - 48)
/* A continuation cell carries 56 payload bytes: the 16 before its seq word
 * and the 40 after it; the seq word it keeps 0 (shm.c: shm_inline_move). */
#define COLLIE_SHM_CELL_LO 16
#define COLLIE_SHM_CELL_PAYLOAD (64 - 8)
/* 296: a 256-byte message in 5 cells (whole) or 6 (part); from there on a
 * payload slot: at 2 ranks, 512 B through a slot already beat Open MPI's
 * time, while 32-256 B through a slot lost to it (docs/performance.md has
 * the comparison). */
#define COLLIE_SHM_CELLS_INLINE (COLLIE_SHM_CHUNK_INLINE + 5 * COLLIE_SHM_CELL_PAYLOAD)

/* CMA: no payload; read `total` bytes at addr instead. MAPPED (with CMA): the
 * bytes lie in a collie_mem_alloc region of the sender: inline_payload holds
 * its id and length (two uint64), off the offset within it (shm_mem.c).
 * WHOLE: the union holds the message itself (see above). */
/* COLLIE_SHM_CHUNK_DEVICE: a device message, len 0, its record (u.part.addr
 * bytes) in the chunk's payload slot; the receiver copies the bytes itself
 * (struct collie__net_dev_ops) and the head passing it completes the send,
 * as a single copy's. */
enum {
  COLLIE_SHM_CHUNK_CMA = 1u,
  COLLIE_SHM_CHUNK_MAPPED = 2u,
  COLLIE_SHM_CHUNK_WHOLE = 4u,
  COLLIE_SHM_CHUNK_DEVICE = 8u,
  /* Set by the receiver in a DEVICE chunk it could not map, before it
   * passes it: the sender then sends the bytes in its place. */
  COLLIE_SHM_CHUNK_REFUSED = 16u
};

struct collie__shm_ring {
  _Atomic uint64_t tail; /* slots published by the producer */
  char pad0_[COLLIE_SHM_LINE - 8];
  _Atomic uint64_t head; /* slots consumed by the consumer */
  /* Set by the consumer once it proved it can read the producer's memory
   * (process_vm_readv): the producer may then send large messages as an
   * address instead of copying them into slots. */
  _Atomic uint32_t cma_ok;
  char pad1_[COLLIE_SHM_LINE - 12];
  /* followed by COLLIE_SHM_NCELLS x struct collie__shm_chunk, then
   * COLLIE_SHM_NSLOTS payload slots of the layout's slot_bytes */
};

#define COLLIE_SHM_ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))

_Static_assert(sizeof(struct collie__shm_header) == 3 * COLLIE_SHM_LINE, "header: 3 lines");
_Static_assert(offsetof(struct collie__shm_header, attached) == COLLIE_SHM_LINE,
               "attached: own line");
_Static_assert(offsetof(struct collie__shm_header, events) == 2 * COLLIE_SHM_LINE,
               "events: own line");
_Static_assert(sizeof(struct collie__shm_ctrl) == COLLIE_SHM_LINE + COLLIE_SHM_REASON_LEN &&
                   COLLIE_SHM_REASON_LEN % COLLIE_SHM_LINE == 0,
               "ctrl: one line of hot words, then whole lines of reason");
_Static_assert(sizeof(struct collie__shm_chunk) == 64, "chunk header: one 64-byte line");
_Static_assert(offsetof(struct collie__shm_chunk, seq) == COLLIE_SHM_CELL_LO &&
                   offsetof(struct collie__shm_chunk, u.whole) == COLLIE_SHM_CELL_LO + 8 &&
                   offsetof(struct collie__shm_chunk, u.part.inline_payload) ==
                       64 - COLLIE_SHM_CHUNK_INLINE,
               "a continuation cell's payload surrounds seq; the whole form fills the rest");
_Static_assert(sizeof(struct collie__shm_flat_ctrl) == 2 * COLLIE_SHM_LINE,
               "flat ctrl: a phase line, then a line of descriptors");
_Static_assert(COLLIE_SHM_FLAT_BUF_BYTES_MIN % COLLIE_SHM_PAGE == 0 &&
                   (COLLIE_SHM_FLAT_BUF_BYTES_MIN & (COLLIE_SHM_FLAT_BUF_BYTES_MIN - 1)) == 0 &&
                   COLLIE_SHM_FLAT_BUF_BYTES_DEFAULT % COLLIE_SHM_FLAT_BUF_BYTES_MIN == 0,
               "flat buffers: whole pages at every halving");
_Static_assert(sizeof(struct collie__shm_ring) == 2 * COLLIE_SHM_LINE, "ring: head, tail lines");
_Static_assert(offsetof(struct collie__shm_ring, head) == COLLIE_SHM_LINE, "head: own line");
_Static_assert(sizeof(_Atomic uint32_t) == sizeof(uint32_t), "futex words are plain 32-bit");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
               "shared counters must be lock-free: a lock would live in one process only");
_Static_assert((COLLIE_SHM_NSLOTS & (COLLIE_SHM_NSLOTS - 1)) == 0, "NSLOTS: power of two");
_Static_assert(COLLIE_SHM_SLOT_BYTES_MIN % 64 == 0 &&
                   (COLLIE_SHM_SLOT_BYTES_MIN & (COLLIE_SHM_SLOT_BYTES_MIN - 1)) == 0 &&
                   COLLIE_SHM_SLOT_BYTES_DEFAULT % COLLIE_SHM_SLOT_BYTES_MIN == 0 &&
                   COLLIE_SHM_SLOT_BYTES_DEFAULT <= UINT32_MAX,
               "slot payload: whole lines at every halving, fits the 32-bit chunk length");

/* A segment's geometry and where each part of it lives, for nlocal ranks:
 * computed once, by collie__shm_layout, and read from here by everything
 * else (the data path reads payload_off and slot_bytes per chunk). */
struct collie__shm_layout {
  size_t ranks_off, ctrl_off, rings_off;
  size_t flat_ctrl_off, flat_off; /* 0 without a flat area */
  size_t slot_bytes;              /* payload of one slot */
  size_t payload_off;             /* from a ring's start to its first payload slot */
  size_t ring_bytes;              /* one ring with its slots, whole pages */
  size_t flat_buf_bytes;          /* each of a rank's two flat buffers; 0 without a flat area */
  size_t bytes;                   /* the whole segment */
};

/* ---- This rank's private state (not in shared memory) ---- */

/* A channel: this rank's two rings with one peer, and its posted requests. */
/* A peer's collie_mem_alloc region mapped here (shm_mem.c). */
#define COLLIE__SHM_MEM_MAPS 8
struct collie__shm_mem_map {
  uint64_t id;
  size_t len;
  const char *base; /* NULL: unused */
};

struct collie__shm_chan {
  int rank;                     /* the peer's comm rank */
  int world_rank;               /* for messages */
  int local;                    /* the peer's index in the segment */
  int pid;                      /* the peer's pid, as it wrote it when attaching */
  int pidfd;                    /* pidfd of the peer, or -1 (then kill(2) / /proc) */
  int pid_check;                /* 0 when the pid is not ours to check (other pid namespace) */
  int cma;                      /* out->cma_ok seen set: large sends go as addresses */
  struct collie__shm_ring *out; /* this rank -> peer: we produce */
  struct collie__shm_ring *in;  /* peer -> this rank: we consume */
  uint64_t out_tail;            /* our copy of out->tail (we own it) */
  uint64_t out_head_seen;       /* out->head as last read */
  uint64_t in_head;             /* chunks of in consumed so far */
  uint64_t in_pub;              /* in->head as last published (shm.c: shm_publish_head) */
  struct collie__req *sendq, *sendq_last;
  struct collie__req *recvq, *recvq_last;
  int catching; /* catch_p2p: P2P messages with no receive go to the sink */
  int sated;    /* ... until the sink said no more (the next catch_p2p on clears it) */
  int stalled;  /* the sink said not now to the head message; stall_tail: in->tail then */
  uint64_t stall_tail;
  struct collie__shm_mem_map maps[COLLIE__SHM_MEM_MAPS]; /* the peer's regions we mapped */
  int maps_next;                                         /* the entry replaced next */
  int maps_failed; /* pidfd_getfd refused once: read the peer's regions with the kernel */
};

/* This rank's view of the flat area (shm.h), inside its transport state. */
struct collie__shm_flat {
  struct collie__shm_xport *x;
  struct collie__shm_flat_ctrl *ctrl; /* nlocal entries; local index == comm rank */
  char *regions;                      /* nlocal x 2 x buf_bytes */
  size_t buf_bytes;
  uint64_t phase;  /* the last phase this rank published */
  uint64_t calls;  /* flat calls begun (selects desc[calls & 1]) */
  uint64_t pieces; /* buffers handed out (selects buffer pieces & 1) */
  int check;       /* the next sync compares descriptors */
  uint32_t step;   /* syncs of the current call so far, for messages */
  int hint;        /* the rank that was missing last time: checked first */
  struct collie__shm_flat_desc cur;
  uint64_t cur_digest; /* hash of cur */
};

/* The transport state of one communicator on this rank. struct collie__xport
 * is opaque to the rest of the library; shm.c's shm_of() converts. */
struct collie__shm_xport {
  int rank, comm_size;
  int nlocal, me;                 /* group size and this rank's index in it */
  int *chan_of_rank;              /* comm rank -> index into chans, or -1 */
  struct collie__shm_chan *chans; /* nlocal - 1 channels, ascending comm rank */
  int nchans;
  char name[64];
  int spin;       /* cfg->spin: polls before sleeping in a flat sync */
  size_t cma_min; /* cfg->cma_min: single-copy sends from this size (0: never) */
  int cores;      /* the host's cores (hdr->ncpus): more local ranks means oversubscribed */
  /* Publishes without a fence (shm.c: "Wake-ups"): every rank of the segment
   * registered for membarrier and no core is oversubscribed. The same on
   * every rank: it comes from the segment alone. */
  int fence_free;
  int my_cpu;                                /* what ctrl[me].cpu says (shm_crowded) */
  const struct collie__net_dev_ops *dev_ops; /* collie__net_set_device's; NULL: none */
  void *base;
  size_t bytes;     /* layout.bytes once laid out: what is mapped at base */
  size_t shm_bytes; /* the budget per local rank (cfg->shm_bytes, or the default) */
  struct collie__shm_layout layout;
  struct collie__shm_flat flat; /* usable when flat.ctrl is set */
  struct collie__shm_header *hdr;
  struct collie__shm_ctrl *ctrl;
  uint32_t events_seen; /* hdr->events at the last peer check */
  int64_t next_check_ns;
  int npending;
  int nrecvs;                          /* posted receives not complete yet (of npending) */
  int ncatch;                          /* channels catching P2P messages (they count as pending) */
  const struct collie__net_sink *sink; /* cfg->sink */
  collie_result_t failed;              /* first failure; errmsg holds its text */
  char errmsg[COLLIE_ERRMSG_LEN];
  /* The only words touched by two threads of this process: abort() may come
   * from another thread (collie_comm_abort) while the driving thread is in
   * progress() or wait(). busy serialises abort() with post() and progress(),
   * which take it uncontended otherwise; stopped lets wait() skip sleeping. */
  _Atomic int busy;
  _Atomic int stopped;
  _Atomic int left;              /* our state is CLOSED or ABORTED already */
  int wake_fd;                   /* the wake-up socket (shm_wake.c), or -1 */
  int wake_bound;                /* it is bound to this rank's address (it can sleep in poll()) */
  struct sockaddr_un *wake_addr; /* [nlocal]: each local rank's wake-up address */
  socklen_t *wake_len;           /* [nlocal] */
};

#define COLLIE_SHM_SLEEP_FUTEX 1u
#define COLLIE_SHM_SLEEP_POLL 2u
/* The longest sleep of a fenced wait when membarrier fails (shm.c). */
#define SHM_UNFENCED_SLEEP_NS (1000000LL)

/* A futex word of the segment, as the kernel sees it: same size and
 * representation (asserted above); the kernel only compares and sleeps. */
static inline uint32_t *
collie__shm_futex_word(_Atomic uint32_t *w)
{
  return (uint32_t *)(void *)w;
}

/* ---- shm_wake.c: one sleep with other transports ---- */

/* Binds this rank's wake-up socket (x->wake_fd, -1 when it cannot). */
void collie__shm_wake_open(struct collie__shm_xport *x);
void collie__shm_wake_close(struct collie__shm_xport *x);
/* Sends local index `local`'s wake-up socket a byte (never blocks). */
void collie__shm_wake_ring(struct collie__shm_xport *x, int local);
/* The transport ops poll_arm and poll_done (transport.h). */
struct pollfd;
int collie__shm_poll_arm(struct collie__xport *xp, struct pollfd *fds, int max, int64_t *until_ns);
void collie__shm_poll_done(struct collie__xport *xp, const struct pollfd *fds, int n);
/* Whether anything a waiter could act on moved (shm.c's shm_look, under
 * the transport's lock). */
int collie__shm_look_locked(struct collie__shm_xport *x);

/* ---- shm_setup.c ---- */

/* Lays out the segment of nlocal (>= 1) local ranks within budget bytes per
 * local rank (COLLIE_SHM_BYTES; 0 means the default), so that out->bytes <=
 * nlocal x budget, with a flat area when flat is set and the budget allows
 * one. Today's geometry (64 KiB slots, 1 MiB flat buffers) when it fits;
 * else, repeatedly, the larger share of a rank (its rings or its two flat
 * buffers) is halved, down to COLLIE_SHM_SLOT_BYTES_MIN and
 * COLLIE_SHM_FLAT_BUF_BYTES_MIN; when even that does not fit, the flat area
 * is left out and the slots are sized again without it. Pure (the same
 * arguments give the same layout on every rank); never blocks. Error:
 * INVALID_ARGUMENT when even the smallest layout does not fit, naming
 * COLLIE_SHM_BYTES, the value, nlocal and the minimum (out is untouched). */
collie_result_t collie__shm_layout(int nlocal, int flat, size_t budget,
                                   struct collie__shm_layout *out);
/* The smallest COLLIE_SHM_BYTES collie__shm_layout accepts for nlocal (>= 1)
 * local ranks (smallest slots, no flat area). Pure. */
size_t collie__shm_layout_min(int nlocal);

/* The value a peer must read at our collie__shm_ctrl.cma_addr to prove that
 * single-copy reads of our memory work (same user, no ptrace restriction). */
extern const uint64_t collie__shm_cma_probe;

/* The ops' can_connect: a peer on the same host (equal host identity),
 * never this rank itself, never when COLLIE_TRANSPORT forces tcp. Pure. */
int collie__shm_can_connect(const struct collie__net_cfg *cfg, int peer);
/* The ops' open (see transport.h for the contract): validates the peer
 * list, then the leader creates the segment and the others attach; blocks
 * until every local rank attached or cfg->deadline_ns. With no peers it
 * returns a transport that owns no segment. On failure nothing is left
 * behind (the name is unlinked, peers see this rank ABORTED). */
collie_result_t collie__shm_open(const struct collie__net_cfg *cfg, const int *peers, int npeers,
                                 struct collie__xport **out);

/* ---- shm.c ---- */

/* Announces that this rank left (state CLOSED or ABORTED, with an optional
 * reason, NUL-terminated, copied) and wakes everyone. Non-blocking; only
 * the first call of either kind counts; a no-op before the segment is
 * mapped. Used by abort(), close() and a failed open(). */
void collie__shm_leave(struct collie__shm_xport *x, uint32_t state, const char *reason);
/* Unmaps the segment, closes the pidfds of the first x->nchans channels and
 * frees x. Never touches posted requests; does not announce anything
 * (collie__shm_leave does). Used by close() and a failed open(). */
void collie__shm_free(struct collie__shm_xport *x);

/* ---- shm.c's helpers shared with shm_flat_area.c ---- */

/* How often a rank with outstanding requests looks for dead peers, and the
 * longest single sleep in wait() (a death rings no doorbell). */
#define SHM_CHECK_NS (50 * 1000000LL)

static inline struct collie__shm_xport *
shm_of(struct collie__xport *x)
{
  return (struct collie__shm_xport *)(void *)x;
}

static inline void
shm_lock(struct collie__shm_xport *x)
{
  /* Held only by post/progress (never blocking) or abort: a short spin. */
  while (atomic_exchange_explicit(&x->busy, 1, memory_order_acquire)) collie__cpu_relax();
}

static inline void
shm_unlock(struct collie__shm_xport *x)
{
  atomic_store_explicit(&x->busy, 0, memory_order_release);
}

/* The header of chunk seq of ring r. */
static inline struct collie__shm_chunk *
shm_chunk(struct collie__shm_ring *r, uint64_t seq)
{
  return (struct collie__shm_chunk *)(void *)(r + 1) + (seq & (COLLIE_SHM_NCELLS - 1));
}

/* Payload bytes a header holds: a whole message's 40, a part's 16. */
static inline size_t
shm_head_bytes(int whole)
{
  return whole ? COLLIE_SHM_WHOLE_INLINE : COLLIE_SHM_CHUNK_INLINE;
}

/* Cells a chunk of len payload bytes takes: its header, and the cells its
 * payload continues in when it is inline (shm_int.h). */
static inline uint64_t
shm_cells(size_t len, int whole)
{
  size_t head = shm_head_bytes(whole);
  if (len <= head || len > COLLIE_SHM_CELLS_INLINE) return 1;
  return 1 + (len - head + COLLIE_SHM_CELL_PAYLOAD - 1) / COLLIE_SHM_CELL_PAYLOAD;
}

/* The same for a chunk already in the ring. */
static inline uint64_t
shm_chunk_cells(const struct collie__shm_chunk *c)
{
  return shm_cells(c->len, (c->flags & COLLIE_SHM_CHUNK_WHOLE) != 0);
}

/* The message length and this chunk's offset in it, in either form. */
static inline uint64_t
shm_chunk_total(const struct collie__shm_chunk *c)
{
  return c->flags & COLLIE_SHM_CHUNK_WHOLE ? c->len : c->u.part.total;
}

/* The peers a check found gone: a death is reported in preference to a
 * departure (a peer that aborted because a third rank died should not hide
 * the root cause). Shared by the message and the flat checks. */
struct collie__shm_departure {
  struct collie__shm_chan *gone, *left;
  uint32_t left_state;
};

void collie__shm_departure_note(struct collie__shm_departure *d, struct collie__shm_chan *ch,
                                uint32_t st);
/* The channel to report (NULL: nobody left), how it left, and an aborting
 * peer's own reason (", after: ...") into why. */
struct collie__shm_chan *collie__shm_departure_verdict(struct collie__shm_xport *x,
                                                       const struct collie__shm_departure *d,
                                                       const char **how, char *why, size_t whylen);
/* Whether the peer's process has exited (a zombie counts). Never blocks. */
int collie__shm_peer_exited(struct collie__shm_chan *ch);
/* Records the transport's first failure (the thread's message) and fails
 * every posted request with rc. Later calls return the same error. Called
 * with the transport locked. */
collie_result_t collie__shm_fail(struct collie__shm_xport *x, collie_result_t rc);
/* Wakes local rank `local` if it sleeps (its doorbell). */
void collie__shm_notify(struct collie__shm_xport *x, int local);

/* ---- shm_mem.c: collie_mem_alloc regions ---- */

/* Where a buffer lies in a region of this process. */
/* The peer's region id (region_len bytes) mapped here, mapping it on first
 * use; NULL when it cannot be (the caller reads the sender's address). */
const char *collie__shm_mem_map(struct collie__shm_chan *ch, uint64_t id, size_t region_len);
void collie__shm_mem_unmap_all(struct collie__shm_chan *ch);
/* Copies served from a mapping instead of the kernel, and blocks written into
 * a peer's memory (write_peer): tests prove the paths are taken. */
extern _Atomic uint64_t collie__shm_mem_mapped_reads;
extern _Atomic uint64_t collie__shm_peer_writes;
/* Device messages received (copied by this rank out of a peer's buffer). */
extern _Atomic uint64_t collie__shm_device_reads;

#endif /* COLLIE_TRANSPORT_SHM_INT_H */
