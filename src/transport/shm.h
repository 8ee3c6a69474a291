/*
 * shm.h - the shm transport's "flat area", for the shm-only algorithms
 * (src/coll/shm_flat.c is the one file outside src/transport that may
 * include this header; scripts/check_layers.sh enforces it).
 *
 * When every rank of a communicator shares one host, its shm segment also
 * holds, per rank, a region of two buffers that every other rank can read
 * directly, and one 64-bit phase word per rank. Algorithms then skip the
 * message rings: each rank writes its data into its own region, meets the
 * others at a "sync" (everyone has published phase n), and reads what it
 * needs straight out of the others' regions.
 *
 * Rules an algorithm follows (they are what makes the buffers safe to reuse
 * without more synchronisation than one sync per piece):
 * - A rank writes only its own region, and only into the buffer that
 *   collie__shm_flat_next_buf handed it for the current piece.
 * - A piece is: write own buffer, sync, read others' buffers (then
 *   optionally write own buffer again, sync, read others' again). Reading
 *   a piece's buffers ends before the rank's first sync of the next piece.
 *   Because buffers alternate, the buffer a rank writes for piece g was last
 *   read during piece g-2, and every rank finished that before it published
 *   the first sync of piece g-1, which the writer has passed.
 * - Every rank runs the same sequence of flat operations, pieces and syncs
 *   (they depend only on the call, which all ranks agree on). A rank that
 *   runs something else is caught: collie__shm_flat_begin records what the
 *   call is, and the first sync of each call compares it with every other
 *   rank's record.
 *
 * Threads: the thread driving the communicator's net, as for every net call.
 */
#ifndef COLLIE_TRANSPORT_SHM_H
#define COLLIE_TRANSPORT_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "collie.h"

struct collie__net;
struct collie__xport;
struct collie__shm_flat; /* one rank's view of the flat area; opaque */

/* What a flat call is, as every rank must agree: compared at its first sync.
 * Lives in shared memory, so it has a fixed layout. */
struct collie__shm_flat_desc {
  uint64_t slot;  /* collie__call_slot(call, 0): kind, sequence, algorithm */
  uint64_t count; /* the call's count */
  int32_t dtype, op, root;
  uint32_t shape; /* how the algorithm cuts the call (piece size, mode): must agree too */
  char pad_[64 - 32];
};
_Static_assert(sizeof(struct collie__shm_flat_desc) == 64, "flat descriptor: one 64-byte line");

/* The flat area of n's shm transport when every other rank of the
 * communicator is served by shm and the segment has one; else NULL (a
 * communicator of one rank, tcp or mixed hosts). Never blocks; n may be NULL.
 * Every rank of a communicator gets the same answer (they share the segment).
 * Defined in net.c. */
struct collie__shm_flat *collie__net_shm_flat(struct collie__net *n);

/* The flat area of one shm transport, or NULL as above. Defined in shm.c;
 * only net.c calls it. */
struct collie__shm_flat *collie__shm_flat_of(struct collie__xport *x);

/* The host's core count, as the rank that created the segment counted it:
 * the same answer on every rank, so algorithms may shape calls by it (more
 * ranks than cores: syncs cost wake-ups). Never blocks. */
int collie__shm_flat_cores(const struct collie__shm_flat *f);
/* Bytes of each of a rank's two buffers: 1 MiB unless COLLIE_SHM_BYTES made
 * the segment's layout shrink them (to 64 KiB at least), a multiple of the
 * page size. The same on every rank. */
size_t collie__shm_flat_buf_bytes(const struct collie__shm_flat *f);
/* Buffer b (0 or 1) of comm rank `rank`'s region; page-aligned. Others'
 * buffers are read-only for the caller. */
void *collie__shm_flat_buf(const struct collie__shm_flat *f, int rank, int b);
/* Pieces of at most this many bytes travel in the cache line of the
 * owner's phase word (collie__shm_flat_piece): a peer's sync brings them
 * over with the phase, one transfer between cores instead of two. */
#define COLLIE_SHM_FLAT_INLINE 16
/* Where comm rank `rank` puts a piece of len bytes (the same len on every
 * rank) for buffer b: beside its phase word when len <= COLLIE_SHM_FLAT_INLINE,
 * else buffer b (collie__shm_flat_buf). Others' pieces are read-only. */
void *collie__shm_flat_piece(const struct collie__shm_flat *f, int rank, int b, size_t len);
/* Which buffer (0 or 1) this rank writes for its next piece: alternates over
 * every piece of every flat call of the communicator (the counter lives here
 * so that it continues across calls). */
int collie__shm_flat_next_buf(struct collie__shm_flat *f);

/* Starts a flat call: records d for the mismatch check of the next sync.
 * Never blocks. */
void collie__shm_flat_begin(struct collie__shm_flat *f, const struct collie__shm_flat_desc *d);
/* Publishes this rank's next phase and waits until every rank of the
 * communicator has published it: spins for the transport's spin count (at
 * most ~20 us), then sleeps on this rank's doorbell (publishers wake
 * sleepers), checking peers for death or departure. The first sync after collie__shm_flat_begin
 * also compares every rank's descriptor with ours. Errors (the transport then fails for good, and
 * peers learn at once that this rank gave up): TIMEOUT at deadline_ns naming the ranks that never
 * arrived; REMOTE_ERROR when one of them died, closed or aborted; INVALID_USAGE ("collectives
 * mismatched across ranks") when a rank runs another call, or a message of
 * a non-flat collective of this call or a later one arrives; whatever failed
 * the transport before (abort from another thread included). A sync that
 * every rank reached succeeds even if one left right after (what it wrote
 * stays readable); one that cannot complete fails as soon as any rank has
 * aborted, naming it and its reason, instead of waiting for the deadline. */
collie_result_t collie__shm_flat_sync(struct collie__shm_flat *f, int64_t deadline_ns);

/* collie_mem_alloc / collie_mem_free (shm_mem.c): memory of this process that
 * shm peers map and copy from in place. Errors as collie.h says. */
/* Whether another local rank last ran on this rank's CPU (and tells the
 * others where this one runs): collie__shm_ops.crowded, here for tests. */
int collie__shm_crowded(struct collie__xport *x);

void *collie__shm_mem_alloc(size_t bytes);
collie_result_t collie__shm_mem_free(void *ptr);
/* A region of it: its id (never reused in this process, so a freed region's
 * id matches nothing after), its length, and where a buffer lies in it. */
struct collie__shm_mem_ref {
  uint64_t id;
  size_t region_len;
  size_t off;
};
/* Whether [buf, buf+len) lies inside one live region (then fills out).
 * Lock-free "no" while no region exists. The ofi transport's registration
 * cache keys on it (netx_mr.c). */
int collie__shm_mem_find(const void *buf, size_t len, struct collie__shm_mem_ref *out);

#endif /* COLLIE_TRANSPORT_SHM_H */
