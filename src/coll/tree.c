/*
 * tree.c - the binomial-tree family: broadcast and reduce (pipelined in
 * chunks), gather and scatter (subtrees aggregated).
 *
 * The tree. Ranks are renumbered relative to the root (v = (rank - root) mod
 * p). Rank v > 0 hangs below v minus its lowest set bit, and its children are
 * v + 2^j for every 2^j below that bit (the root: every 2^j < p), as long as
 * they are < p. The subtree of v is then the consecutive relative ranks
 * [v, v + min(lowbit(v), p - v)), and the tree is ceil(log2 p) deep. Children
 * are listed largest subtree first: the one with the farthest to go starts
 * first.
 *
 * broadcast. Each rank receives the buffer from its parent and forwards it to
 * its children. Cut into chunks of TREE_CHUNK bytes: a rank forwards chunk c
 * as soon as it has it while chunk c+1 is still arriving, so the rounds
 * overlap like a pipeline.
 *   cost: ceil(log2 p) (alpha + S beta) unpipelined; with k chunks
 *   ceil(log2 p) alpha + (ceil(log2 p) + k - 1) S/k beta: only the pipeline's
 *   fill pays the latency, later chunks are posted while earlier ones travel
 *   (measured on 2-8 ranks: the tree is the fastest broadcast from tens of
 *   KiB up; below, linear.c's eager fan-out is as fast or faster).
 *
 * reduce. The mirror image: every rank combines its children's partial
 * results with its own input and sends the sum to its parent; the root's sum
 * is the answer (AVG is divided once, at the root). Cut into chunks of
 * TREE_RCHUNK bytes and pipelined: the receives of chunk c+1 are posted
 * before chunk c is combined, and chunk c travels up while c+1 comes in. The
 * partial sum of a chunk is built in the buffer that child 0's chunk arrived
 * in (no copy of the own input), so a rank with n children holds
 * TREE_NSET x n chunks of scratch, whatever the size of the buffer
 * (TREE_NSET = 3: one set arriving, one being combined, one on its way up).
 * TREE_RCHUNK is ring.c's 256 KiB: per-chunk overhead stays small against a
 * chunk's copy and reduce, and the root of 8 ranks holds 2.25 MiB of scratch.
 * Leaves send straight from sendbuf; the root combines into recvbuf.
 * Non-roots never touch recvbuf (it may be NULL).
 *   cost: ceil(log2 p)(alpha + S (beta + gamma)) unpipelined; with k chunks
 *   ceil(log2 p) alpha + (ceil(log2 p) + k - 1) S/k (beta + gamma).
 *
 * gather and scatter. Block q of the root's buffer belongs to rank q. A
 * subtree's blocks are consecutive in relative order, so they travel up
 * (gather) or down (scatter) as one range: a non-root holds its subtree's
 * blocks in scratch in relative order (leaves use their own buffer), and the
 * root sends or receives straight from or into its rank-ordered buffer. For
 * root != 0 a relative range may wrap from rank p-1 to rank 0; it then
 * travels as two messages (before and after the wrap), which lands every
 * block at its place in the root's buffer with no rotation copy.
 *   cost: ceil(log2 p) alpha + S beta: a subtree's blocks move once all of
 *   them are in, so the root's S/2 + S/4 + ... arrive one level after the
 *   other (linear.c's (p-1)/p S arrive at once: it wins for large S).
 * The block phases are lent to the composites (coll_int.h) with a layout
 * flag: there every rank keeps the whole buffer, "absolute" layout.
 *
 * Every algorithm is correct for any p >= 1 and count, including empty
 * blocks; a count of 0 moves nothing (every rank passes 0).
 */
#include <string.h>

#include "coll/coll.h"
#include "coll/coll_int.h"
#include "util/error.h"
#include "util/util.h"

#define TREE_CHUNK ((size_t)512 * 1024)
#define TREE_RCHUNK ((size_t)256 * 1024)
/* Every element size (1, 2, 4 or 8 bytes) divides the chunks, so a chunk
 * never splits an element and needs no rounding (a division by the element
 * size is 25-90 cycles; see collie__root_rel for the rank count's). */
_Static_assert(TREE_CHUNK % 8 == 0 && TREE_RCHUNK % 8 == 0, "tree chunks must hold whole elements");
#define TREE_NSET 3
#define TREE_MAXCHILD 32

/* One rank's place in the binomial tree, relative ranks (0 = root). */
struct tree_node {
  int v;      /* this rank */
  int parent; /* -1 at the root */
  int nchild;
  int child[TREE_MAXCHILD]; /* largest subtree first */
};

static void
tree_node_of(int p, int v, struct tree_node *t)
{
  int mask = 1;
  t->v = v;
  t->parent = -1;
  t->nchild = 0;
  while (mask < p) {
    if (v & mask) {
      t->parent = v - mask;
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < p) t->child[t->nchild++] = v + mask;
}

/* Relative ranks in the subtree of v: [v, v + tree_subtree(p, v)). */
static int
tree_subtree(int p, int v)
{
  if (v == 0) return p;
  int low = v & -v;
  return low < p - v ? low : p - v;
}

/* ---- broadcast ---- */

static collie_result_t
tree_broadcast_run(struct collie__call *c)
{
  int p = c->size;
  size_t bytes = c->count * c->esize;
  char *buf = c->recvbuf;
  struct tree_node t;
  collie_result_t rc;
  if (p == 1) return COLLIE_SUCCESS;
  tree_node_of(p, collie__root_rel(c), &t);
  int parent = t.parent >= 0 ? collie__root_abs(c, t.parent) : -1, nchild = t.nchild;
  int child[TREE_MAXCHILD];
  for (int i = 0; i < nchild; i++) child[i] = collie__root_abs(c, t.child[i]);

  size_t chunk = TREE_CHUNK;
  size_t nchunks = bytes <= chunk ? 1 : (bytes + chunk - 1) / chunk;
  uint64_t slot = collie__call_slot(c, 0);
  struct collie__req rreq, sreq[2][TREE_MAXCHILD];
  struct collie__req *w[TREE_MAXCHILD];
  for (size_t k = 0; k < nchunks; k++) {
    size_t o = k * chunk, l = bytes - o < chunk ? bytes - o : chunk;
    if (parent >= 0) {
      struct collie__req *rr = &rreq;
      if ((rc = collie__call_irecv(c, parent, buf + o, l, slot, &rreq)) != COLLIE_SUCCESS)
        return rc;
      if ((rc = collie__net_wait(c->net, &rr, 1, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
    }
    /* One chunk is the whole call: nothing to pipeline, so one copy. */
    for (int i = 0; i < nchild; i++)
      if ((rc = (nchunks == 1 ? collie__call_isend_direct : collie__call_isend)(
               c, child[i], buf + o, l, slot, &sreq[k & 1][i])) != COLLIE_SUCCESS)
        return rc;
    if (k > 0) { /* keep at most two chunks of sends in flight */
      for (int i = 0; i < nchild; i++) w[i] = &sreq[(k - 1) & 1][i];
      if ((rc = collie__net_wait(c->net, w, nchild, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
    }
  }
  for (int i = 0; i < nchild; i++) w[i] = &sreq[(nchunks - 1) & 1][i];
  return collie__net_wait(c->net, w, nchild, c->deadline_ns);
}

/* Chunks a pipelined transfer of S bytes is cut into (at least 1). */
static double
tree_chunks(double S, size_t chunk)
{
  return S > (double)chunk ? S / (double)chunk : 1;
}

static double
tree_broadcast_cost(const struct collie__call *c, const struct collie__model *m)
{
  double S = (double)collie__call_bytes(c), depth = collie__log2_ceil(c->size);
  double k = tree_chunks(S, TREE_CHUNK);
  /* Only the pipeline's fill pays the latency: later chunks are posted while
   * earlier ones travel, so each costs its bytes. */
  return collie__oversub_cost(c, m, depth * m->alpha_us + (depth + k - 1) * S / k * m->beta_us,
                              2 * (c->size - 1));
}

const struct collie__algo collie__algo_broadcast_tree = {
    "tree", COLLIE_ALGO_TREE, COLLIE_KIND_BROADCAST, 0, tree_broadcast_cost, tree_broadcast_run};

/* ---- reduce ---- */

/* State of one pipelined reduce on this rank. */
struct tree_reduce {
  struct collie__call *c;
  struct tree_node t;
  int child[TREE_MAXCHILD], parent; /* absolute ranks */
  const char *in;
  char *out; /* the root's recvbuf, else NULL */
  char *scr; /* TREE_NSET sets of nchild chunks */
  size_t bytes, chunk;
  uint64_t slot;
  struct collie__req rreq[TREE_NSET][TREE_MAXCHILD];
  struct collie__req sreq[TREE_NSET];
  int sactive[TREE_NSET];
};

static char *
tree_reduce_rbuf(struct tree_reduce *r, int set, int i)
{
  return r->scr + ((size_t)set * (size_t)r->t.nchild + (size_t)i) * r->chunk;
}

/* Where child 0's part of chunk k lands: straight in the root's recvbuf when
 * that does not hold the root's own input, else in scratch. */
static char *
tree_reduce_dst0(struct tree_reduce *r, size_t k)
{
  if (r->out && r->out != r->in) return r->out + k * r->chunk;
  return tree_reduce_rbuf(r, (int)(k % TREE_NSET), 0);
}

static collie_result_t
tree_reduce_post_recvs(struct tree_reduce *r, size_t k)
{
  int set = (int)(k % TREE_NSET);
  size_t o = k * r->chunk, l = r->bytes - o < r->chunk ? r->bytes - o : r->chunk;
  for (int i = 0; i < r->t.nchild; i++) {
    char *dst = i == 0 ? tree_reduce_dst0(r, k) : tree_reduce_rbuf(r, set, i);
    collie_result_t rc = collie__call_irecv(r->c, r->child[i], dst, l, r->slot, &r->rreq[set][i]);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  return COLLIE_SUCCESS;
}

static collie_result_t
tree_reduce_wait_send(struct tree_reduce *r, int set)
{
  if (!r->sactive[set]) return COLLIE_SUCCESS;
  struct collie__req *w = &r->sreq[set];
  r->sactive[set] = 0;
  return collie__net_wait(r->c->net, &w, 1, r->c->deadline_ns);
}

static collie_result_t
tree_reduce_run(struct collie__call *c)
{
  int p = c->size;
  size_t es = c->esize;
  struct tree_reduce r;
  collie_result_t rc;
  /* Not memset: the request arrays are ~9 KiB, and zeroing them (each post
   * sets up its own request) was most of a small reduce's own time. */
  r.c = c;
  r.in = c->sendbuf;
  r.out = c->rank == c->root ? c->recvbuf : NULL;
  r.scr = NULL;
  r.bytes = c->count * es;
  for (int s = 0; s < TREE_NSET; s++) r.sactive[s] = 0;
  if (p == 1) {
    if (r.bytes && r.out != r.in) collie__call_copy(c, r.out, r.in, r.bytes);
    if (r.bytes && c->op == COLLIE_AVG) collie__reduce_avg_finish(r.out, c->count, c->dtype, p);
    return COLLIE_SUCCESS;
  }
  if (r.bytes == 0) return COLLIE_SUCCESS;
  tree_node_of(p, collie__root_rel(c), &r.t);
  r.parent = r.t.parent >= 0 ? collie__root_abs(c, r.t.parent) : -1;
  for (int i = 0; i < r.t.nchild; i++) r.child[i] = collie__root_abs(c, r.t.child[i]);
  /* Every rank cuts the same chunks: they depend on bytes and esize only. */
  r.chunk = r.bytes < TREE_RCHUNK ? r.bytes : TREE_RCHUNK;
  size_t nchunks = r.bytes <= TREE_RCHUNK ? 1 : (r.bytes + TREE_RCHUNK - 1) / TREE_RCHUNK;
  r.slot = collie__call_slot(c, 0);
  if (r.t.nchild) {
    r.scr = collie__scratch_get(c->scratch, (size_t)TREE_NSET * (size_t)r.t.nchild * r.chunk);
    if (!r.scr) return COLLIE_SYSTEM_ERROR;
    if ((rc = tree_reduce_post_recvs(&r, 0)) != COLLIE_SUCCESS) return rc;
  }

  for (size_t k = 0; k < nchunks; k++) {
    int set = (int)(k % TREE_NSET);
    size_t o = k * r.chunk, l = r.bytes - o < r.chunk ? r.bytes - o : r.chunk, n = l / es;
    const char *acc = r.in + o; /* a leaf sends its input as is */
    if (r.t.nchild && k + 1 < nchunks) {
      /* The set chunk k+1 arrives in last carried chunk k-2 up: it must have left. */
      if ((rc = tree_reduce_wait_send(&r, (int)((k + 1) % TREE_NSET))) != COLLIE_SUCCESS) return rc;
      if ((rc = tree_reduce_post_recvs(&r, k + 1)) != COLLIE_SUCCESS) return rc;
    }
    if (r.t.nchild) {
      struct collie__req *w[TREE_MAXCHILD];
      for (int i = 0; i < r.t.nchild; i++) w[i] = &r.rreq[set][i];
      if ((rc = collie__net_wait(c->net, w, r.t.nchild, c->deadline_ns)) != COLLIE_SUCCESS)
        return rc;
      char *sum;
      int first = 1;
      if (r.out && r.out == r.in) { /* the root in place: its input is the sum so far */
        sum = r.out + o;
        first = 0;
      } else {
        sum = tree_reduce_dst0(&r, k);
        c->reduce(sum, r.in + o, n);
      }
      for (int i = first; i < r.t.nchild; i++) c->reduce(sum, tree_reduce_rbuf(&r, set, i), n);
      acc = sum;
    }
    if (r.parent < 0) {
      if (c->op == COLLIE_AVG) collie__reduce_avg_finish(r.out + o, n, c->dtype, p);
      continue;
    }
    if ((rc = tree_reduce_wait_send(&r, set)) != COLLIE_SUCCESS) return rc;
    /* One chunk is the whole call: one copy (as broadcast's). */
    rc = (nchunks == 1 ? collie__call_isend_direct : collie__call_isend)(c, r.parent, acc, l,
                                                                         r.slot, &r.sreq[set]);
    if (rc != COLLIE_SUCCESS) return rc;
    r.sactive[set] = 1;
  }
  for (int s = 0; s < TREE_NSET; s++)
    if ((rc = tree_reduce_wait_send(&r, s)) != COLLIE_SUCCESS) return rc;
  return COLLIE_SUCCESS;
}

static double
tree_reduce_cost(const struct collie__call *c, const struct collie__model *m)
{
  double S = (double)collie__call_bytes(c), depth = collie__log2_ceil(c->size);
  double k = tree_chunks(S, TREE_RCHUNK);
  return depth * m->alpha_us + (depth + k - 1) * S / k * (m->beta_us + m->gamma_us);
}

const struct collie__algo collie__algo_reduce_tree = {
    "tree",           COLLIE_ALGO_TREE, COLLIE_KIND_REDUCE, COLLIE_NEEDS_REDUCE,
    tree_reduce_cost, tree_reduce_run};

/* ---- gather and scatter: the block phases ---- */

/* Byte offset of block q (0 <= q <= p) of a buffer of total elements. */
static size_t
tree_boff(const struct collie__call *c, size_t total, int q)
{
  return collie__block_off(total, c->size, q) * c->esize;
}

/* Bytes of n blocks from absolute block a on, wrapping past p-1 to 0. */
static size_t
tree_span(const struct collie__call *c, size_t total, int a, int n)
{
  int p = c->size;
  if (a + n <= p) return tree_boff(c, total, a + n) - tree_boff(c, total, a);
  return tree_boff(c, total, p) - tree_boff(c, total, a) + tree_boff(c, total, a + n - p);
}

size_t
collie__tree_subtree_bytes(const struct collie__call *c, size_t total)
{
  int p = c->size, v = collie__root_rel(c);
  return tree_span(c, total, c->rank, tree_subtree(p, v));
}

/* Posts the one or two messages that carry the subtree of relative rank x
 * between this rank (buffer base in the given layout) and peer; w[0..2) get
 * the requests to wait for (NULL for a piece with no bytes: both ends skip it
 * alike, since they compute the same sizes). */
static collie_result_t
tree_range_post(struct collie__call *c, size_t total, char *base, int compact, int x, int peer,
                int is_send, uint32_t step0, struct collie__req req[2], struct collie__req **w)
{
  int p = c->size, v = collie__root_rel(c), n = tree_subtree(p, x), a = collie__root_abs(c, x);
  int n1 = n < p - a ? n : p - a, n2 = n - n1;
  size_t len[2] = {tree_span(c, total, a, n1), tree_boff(c, total, n2)};
  char *at[2];
  if (compact) { /* this rank's subtree from its own block on, wrapping like the blocks */
    at[0] = base + tree_span(c, total, c->rank, x - v);
    at[1] = at[0] + len[0];
  } else {
    at[0] = base + tree_boff(c, total, a);
    at[1] = base;
  }
  w[0] = w[1] = NULL;
  for (int i = 0; i < 2; i++) {
    if (!len[i]) continue;
    uint64_t slot = collie__call_slot(c, step0 + (uint32_t)i);
    collie_result_t rc = is_send ? collie__call_isend(c, peer, at[i], len[i], slot, &req[i])
                                 : collie__call_irecv(c, peer, at[i], len[i], slot, &req[i]);
    if (rc != COLLIE_SUCCESS) return rc;
    w[i] = &req[i];
  }
  return COLLIE_SUCCESS;
}

collie_result_t
collie__tree_gather_phase(struct collie__call *c, size_t total, char *base, int compact,
                          uint32_t step0)
{
  int p = c->size;
  struct tree_node t;
  struct collie__req req[TREE_MAXCHILD][2], *w[2 * TREE_MAXCHILD] = {NULL};
  collie_result_t rc;
  if (p == 1) return COLLIE_SUCCESS;
  tree_node_of(p, collie__root_rel(c), &t);
  for (int i = 0; i < t.nchild; i++) {
    rc = tree_range_post(c, total, base, compact, t.child[i], collie__root_abs(c, t.child[i]), 0,
                         step0, req[i], &w[2 * i]);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  if ((rc = collie__net_wait(c->net, w, 2 * t.nchild, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
  if (t.parent < 0) return COLLIE_SUCCESS;
  rc = tree_range_post(c, total, base, compact, t.v, collie__root_abs(c, t.parent), 1, step0,
                       req[0], w);
  if (rc != COLLIE_SUCCESS) return rc;
  return collie__net_wait(c->net, w, 2, c->deadline_ns);
}

collie_result_t
collie__tree_scatter_phase(struct collie__call *c, size_t total, char *base, int compact,
                           uint32_t step0)
{
  int p = c->size;
  struct tree_node t;
  struct collie__req req[TREE_MAXCHILD][2], *w[2 * TREE_MAXCHILD] = {NULL};
  collie_result_t rc;
  if (p == 1) return COLLIE_SUCCESS;
  tree_node_of(p, collie__root_rel(c), &t);
  if (t.parent >= 0) {
    rc = tree_range_post(c, total, base, compact, t.v, collie__root_abs(c, t.parent), 0, step0,
                         req[0], w);
    if (rc != COLLIE_SUCCESS) return rc;
    if ((rc = collie__net_wait(c->net, w, 2, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
  }
  for (int i = 0; i < t.nchild; i++) {
    rc = tree_range_post(c, total, base, compact, t.child[i], collie__root_abs(c, t.child[i]), 1,
                         step0, req[i], &w[2 * i]);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  return collie__net_wait(c->net, w, 2 * t.nchild, c->deadline_ns);
}

/* ---- gather ---- */

static collie_result_t
tree_gather_run(struct collie__call *c)
{
  int p = c->size, v = collie__root_rel(c);
  size_t blk = c->count * c->esize, total = c->count * (size_t)p;
  const char *in = c->sendbuf;
  char *base;
  if (blk == 0) return COLLIE_SUCCESS;
  if (v == 0) { /* the root's buffer is the destination, rank order */
    base = (char *)c->recvbuf;
    char *own = base + (size_t)c->rank * blk;
    if (own != in) collie__call_copy(c, own, in, blk);
    return collie__tree_gather_phase(c, total, base, 0, 0);
  }
  if (tree_subtree(p, v) == 1) /* a leaf sends its input as is */
    return collie__tree_gather_phase(c, total, (char *)in, 1, 0);
  base = collie__scratch_get(c->scratch, collie__tree_subtree_bytes(c, total));
  if (!base) return COLLIE_SYSTEM_ERROR;
  collie__call_copy_small(c, base, in, blk);
  return collie__tree_gather_phase(c, total, base, 1, 0);
}

/* Shared by gather and scatter: log-depth latency, every byte but the root's
 * own block through the root's link once. */
static double
tree_blocks_cost(const struct collie__call *c, const struct collie__model *m)
{
  double S = (double)collie__call_bytes(c);
  /* A subtree's blocks travel once they are all in, level after level: the
   * root's S/2 + S/4 + ... adds up to about S, against linear's (p-1)/p S
   * arriving at once (measured: linear ~2x faster from 2 MiB on 4 ranks). */
  return collie__log2_ceil(c->size) * m->alpha_us + S * m->beta_us;
}

const struct collie__algo collie__algo_gather_tree = {"tree", COLLIE_ALGO_TREE, COLLIE_KIND_GATHER,
                                                      0,      tree_blocks_cost, tree_gather_run};

/* ---- scatter ---- */

static collie_result_t
tree_scatter_run(struct collie__call *c)
{
  int p = c->size, v = collie__root_rel(c);
  size_t blk = c->count * c->esize, total = c->count * (size_t)p;
  char *out = c->recvbuf, *base;
  collie_result_t rc;
  if (blk == 0) return COLLIE_SUCCESS;
  if (v == 0) { /* only read from: the root's rank-ordered sendbuf */
    base = (char *)c->sendbuf;
    if ((rc = collie__tree_scatter_phase(c, total, base, 0, 0)) != COLLIE_SUCCESS) return rc;
    char *own = base + (size_t)c->rank * blk;
    if (own != out) collie__call_copy(c, out, own, blk);
    return COLLIE_SUCCESS;
  }
  if (tree_subtree(p, v) == 1) /* a leaf receives its block where it belongs */
    return collie__tree_scatter_phase(c, total, out, 1, 0);
  base = collie__scratch_get(c->scratch, collie__tree_subtree_bytes(c, total));
  if (!base) return COLLIE_SYSTEM_ERROR;
  if ((rc = collie__tree_scatter_phase(c, total, base, 1, 0)) != COLLIE_SUCCESS) return rc;
  collie__call_copy(c, out, base, blk);
  return COLLIE_SUCCESS;
}

const struct collie__algo collie__algo_scatter_tree = {
    "tree", COLLIE_ALGO_TREE, COLLIE_KIND_SCATTER, 0, tree_blocks_cost, tree_scatter_run};
