/*
 * shm_int.h - the layout of the shared-memory segment of the shm transport
 * (shm.c). One segment exists per host per communicator; every local rank
 * of that communicator maps it. Everything here lives in shared memory and
 * is read and written by several processes at once, so every word that
 * more than one process touches is a C11 atomic, and every word written by
 * a different process than its neighbours sits on its own cache line(s).
 *
 *   offset 0                     struct collie__shm_header
 *   shm_layout.ranks_off         int32_t ranks[nlocal]: comm rank of each local index
 *   shm_layout.ctrl_off          struct collie__shm_ctrl ctrl[nlocal]
 *   shm_layout.rings_off         rings, one per ordered pair (i -> j), i != j
 *
 * A ring is a single-producer single-consumer FIFO of COLLIE_SHM_NSLOTS slots.
 * The producer (rank i) owns tail, the consumer (rank j) owns head; both count
 * slots from 0 and never wrap (64 bits), so tail - head is the fill level.
 * A slot holds one chunk: a header (which message, where in it) and up to
 * COLLIE_SHM_SLOT_BYTES of payload.
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

/* Tunables. 8 x 64 KiB per direction per pair: deep enough that a sender
 * rarely waits on a receiver that is merely late. The segment grows with the
 * square of the local rank count and is reserved up front (posix_fallocate):
 * 2 ranks 1 MiB, 8 ranks 28 MiB, 16 ranks 120 MiB, 64 ranks 2 GiB; large
 * nodes will want fewer or smaller slots (see the tuning issue). */
#define COLLIE_SHM_NSLOTS 8u
#define COLLIE_SHM_SLOT_BYTES (64u * 1024u)

/* 128, not 64: x86 prefetches cache lines in pairs, so words written by
 * different processes are kept 128 bytes apart to avoid false sharing. */
#define COLLIE_SHM_LINE 128u
#define COLLIE_SHM_PAGE 4096u

#define COLLIE_SHM_REASON_LEN 256u

#define COLLIE_SHM_MAGIC 0x636f6c6c69657368ull /* "collie" "sh" */
#define COLLIE_SHM_VERSION 1u

/* Values of collie__shm_ctrl.state. 0 means the rank has not attached yet. */
enum {
  COLLIE_SHM_UNATTACHED = 0,
  COLLIE_SHM_ALIVE = 1,
  COLLIE_SHM_CLOSED = 2,  /* close(): left normally */
  COLLIE_SHM_ABORTED = 3, /* abort(), or open() failed after attaching */
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
  uint32_t pad0_;
  char pad1_[COLLIE_SHM_LINE - 56];
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
  /* Non-zero while the owner is inside wait(): producers only pay for
   * futex_wake when it is set. */
  _Atomic uint32_t sleeping;
  _Atomic uint32_t state; /* COLLIE_SHM_UNATTACHED, _ALIVE, _CLOSED, _ABORTED */
  int32_t pid;            /* owner's pid, written before state becomes ALIVE */
  char pad_[COLLIE_SHM_LINE - 16];
  /* Why the owner aborted, when it knows (its own failure, e.g. "rank 3
   * died"): written before state becomes ABORTED, so a rank that only waited
   * on the owner can still name the root cause. NUL-terminated. */
  char reason[COLLIE_SHM_REASON_LEN];
};

/* Header of one slot: one chunk of one message. */
struct collie__shm_chunk {
  uint64_t slot;  /* the message's slot tag (collie__slot) */
  uint64_t total; /* the message's length */
  uint64_t off;   /* where this chunk starts within the message */
  uint32_t len;   /* payload bytes in this chunk (0 only for an empty message) */
  uint32_t pad0_;
  char pad1_[64 - 32];
};

struct collie__shm_ring {
  _Atomic uint64_t tail; /* slots published by the producer */
  char pad0_[COLLIE_SHM_LINE - 8];
  _Atomic uint64_t head; /* slots consumed by the consumer */
  char pad1_[COLLIE_SHM_LINE - 8];
  /* followed by COLLIE_SHM_NSLOTS x (struct collie__shm_chunk + COLLIE_SHM_SLOT_BYTES) */
};

#define COLLIE_SHM_SLOT_STRIDE (sizeof(struct collie__shm_chunk) + COLLIE_SHM_SLOT_BYTES)
#define COLLIE_SHM_ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))
#define COLLIE_SHM_RING_BYTES                                                                      \
  COLLIE_SHM_ALIGN_UP(sizeof(struct collie__shm_ring) +                                            \
                          COLLIE_SHM_NSLOTS * COLLIE_SHM_SLOT_STRIDE,                              \
                      COLLIE_SHM_PAGE)

_Static_assert(sizeof(struct collie__shm_header) == 3 * COLLIE_SHM_LINE, "header: 3 lines");
_Static_assert(offsetof(struct collie__shm_header, attached) == COLLIE_SHM_LINE,
               "attached: own line");
_Static_assert(offsetof(struct collie__shm_header, events) == 2 * COLLIE_SHM_LINE,
               "events: own line");
_Static_assert(sizeof(struct collie__shm_ctrl) == COLLIE_SHM_LINE + COLLIE_SHM_REASON_LEN &&
                   COLLIE_SHM_REASON_LEN % COLLIE_SHM_LINE == 0,
               "ctrl: one line of hot words, then whole lines of reason");
_Static_assert(sizeof(struct collie__shm_chunk) == 64, "chunk header: one 64-byte line");
_Static_assert(sizeof(struct collie__shm_ring) == 2 * COLLIE_SHM_LINE, "ring: head, tail lines");
_Static_assert(offsetof(struct collie__shm_ring, head) == COLLIE_SHM_LINE, "head: own line");
_Static_assert(sizeof(_Atomic uint32_t) == sizeof(uint32_t), "futex words are plain 32-bit");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
               "shared counters must be lock-free: a lock would live in one process only");
_Static_assert((COLLIE_SHM_NSLOTS & (COLLIE_SHM_NSLOTS - 1)) == 0, "NSLOTS: power of two");
_Static_assert(COLLIE_SHM_SLOT_BYTES % 64 == 0 && COLLIE_SHM_SLOT_BYTES <= UINT32_MAX,
               "slot payload: whole lines, fits the 32-bit chunk length");

/* Where each part of a segment of nlocal ranks lives (shm.c computes it). */
struct collie__shm_layout {
  size_t ranks_off, ctrl_off, rings_off, bytes;
};

#endif /* COLLIE_TRANSPORT_SHM_INT_H */
