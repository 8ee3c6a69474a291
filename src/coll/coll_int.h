/*
 * coll_int.h - internal phases that one algorithm family lends another
 * (SQLite's btreeInt.h idea: visible inside src/coll only, never exported
 * through coll.h). Composite algorithms (composite.c) are built from the ring
 * reduce-scatter phase of ring.c and the binomial phases of tree.c; each function here
 * works on a call that is already running, uses the step numbers it is given
 * (so two phases of one call never share a slot), and waits only until
 * c->deadline_ns.
 */
#ifndef COLLIE_COLL_INT_H
#define COLLIE_COLL_INT_H

#include "coll/coll.h"

/* ---- ring.c ---- */

/* Bytes of staging that collie__ring_reduce_scatter_phase needs as `tmp` for
 * a buffer of `total` elements cut into c->size blocks (two chunks, or two of
 * the largest block, plus alignment slack). */
size_t collie__ring_staging_bytes(const struct collie__call *c, size_t total);
/* p-1 ring reduce-scatter steps over buf (total elements, cut into c->size
 * blocks by collie__block_off/len; reduced in place with c->reduce), using
 * steps 0..p-2. With shift -1, rank r ends up owning block r fully reduced
 * (AVG not finished). tmp: collie__ring_staging_bytes bytes, not overlapping
 * buf. Blocks; returns the first transport error. */
collie_result_t collie__ring_reduce_scatter_phase(struct collie__call *c, char *buf, size_t total,
                                                  char *tmp, int shift);

/* p-1 ring allgather steps over buf (total elements in c->size blocks, as
 * above), steps 0..p-2 (after c->step0): with shift -1, rank r starts owning
 * block r and ends holding every block. Blocks; returns the first transport
 * error. */
collie_result_t collie__ring_allgather_phase(struct collie__call *c, char *buf, size_t total,
                                             int shift);

/* ---- tree.c: binomial scatter and gather of blocks ----
 *
 * The buffer of `total` elements is cut into c->size blocks (block q starts
 * at collie__block_off(total, p, q)); block q belongs to rank q. Ranks are
 * renumbered relative to c->root, and the subtree of relative rank v holds
 * the relative ranks [v, v + its size), which are consecutive absolute ranks
 * except for one possible wrap from p-1 to 0. A rank's buffer `base` is laid
 * out either
 *   absolute (compact == 0): block q at base + collie__block_off(total, p, q)
 *     * esize, the whole buffer present (roots, and composites that keep the
 *     full buffer on every rank);
 *   compact (compact != 0): only the rank's own subtree, in relative order
 *     starting with its own block at base (non-roots of gather and scatter,
 *     which hold just what passes through them).
 * A subtree's blocks travel as at most two messages (split at the wrap), on
 * steps step0 and step0 + 1.
 */

/* Bytes that a compact buffer of the calling rank needs (its subtree). */
size_t collie__tree_subtree_bytes(const struct collie__call *c, size_t total);
/* Binomial gather towards c->root: receives each child's subtree into base,
 * then (non-roots) sends the own subtree, own block included, to the parent.
 * The caller puts its own block in place first. Blocks until sent. */
collie_result_t collie__tree_gather_phase(struct collie__call *c, size_t total, char *base,
                                          int compact, uint32_t step0);
/* Binomial scatter from c->root: (non-roots) receives the own subtree from
 * the parent into base, then sends each child its subtree, largest first. The
 * caller takes its own block from base afterwards. Blocks until sent. */
collie_result_t collie__tree_scatter_phase(struct collie__call *c, size_t total, char *base,
                                           int compact, uint32_t step0);

/* ---- hier_handler.c: alltoall and reduce_scatter on hosts of different sizes ---- */

/* The per-host-pair exchange of alltoallv, for an alltoall whose hosts are
 * not all of one size (hier.c's rail alltoall takes equal ones): its cost
 * (< 0 where it does not apply) and its run. */
double collie__hier_alltoall_uneven_cost(const struct collie__call *c);
collie_result_t collie__hier_alltoall_uneven_run(struct collie__call *c);
/* reduce_scatter on hosts of different sizes, through the same handlers:
 * each host's partial sum for a rank made by its handler there, one block
 * per other host to each rank. */
double collie__hier_reduce_scatter_uneven_cost(const struct collie__call *c);
collie_result_t collie__hier_reduce_scatter_uneven_run(struct collie__call *c);

#endif /* COLLIE_COLL_INT_H */
