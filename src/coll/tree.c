/*
 * tree.c - binomial-tree broadcast, pipelined in chunks.
 *
 * Ranks are renumbered relative to the root (v = (rank - root) mod p). Rank v
 * receives from v minus its lowest set bit and sends to v + 2^k for every 2^k
 * below that bit (largest subtree first), so the data reaches all p ranks in
 * ceil(log2 p) rounds. Large buffers are cut into chunks of TREE_CHUNK bytes:
 * a rank forwards chunk c to its children as soon as it has it, while chunk
 * c+1 is still arriving, so the rounds overlap like a pipeline.
 *
 * Cost: ceil(log2 p) (alpha + S beta) unpipelined; with k chunks roughly
 * (ceil(log2 p) + k - 1)(alpha + S/k beta). Good for small and medium
 * messages; scatter+allgather variants for large ones come with the
 * selection issue.
 */
#include "coll/coll.h"
#include "coll/stub.h"
#include "util/error.h"

#define TREE_CHUNK ((size_t)512 * 1024)
#define TREE_MAXCHILD 32

static collie_result_t
tree_broadcast_run(struct collie__call *c)
{
  int p = c->size, v = (c->rank - c->root + p) % p;
  size_t bytes = c->count * c->esize;
  char *buf = c->recvbuf;
  int parent = -1, nchild = 0, child[TREE_MAXCHILD];
  int mask = 1;
  collie_result_t rc;
  if (p == 1) return COLLIE_SUCCESS;
  while (mask < p) {
    if (v & mask) {
      parent = (v - mask + c->root) % p;
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < p) child[nchild++] = (v + mask + c->root) % p;

  size_t chunk = TREE_CHUNK - TREE_CHUNK % c->esize;
  size_t nchunks = bytes ? (bytes + chunk - 1) / chunk : 1;
  uint64_t slot = collie__call_slot(c, 0);
  struct collie__req rreq, sreq[2][TREE_MAXCHILD];
  struct collie__req *w[TREE_MAXCHILD];
  for (size_t k = 0; k < nchunks; k++) {
    size_t o = k * chunk, l = bytes - o < chunk ? bytes - o : chunk;
    if (parent >= 0) {
      struct collie__req *rr = &rreq;
      if ((rc = collie__net_irecv(c->net, parent, buf + o, l, slot, &rreq)) != COLLIE_SUCCESS)
        return rc;
      if ((rc = collie__net_wait(c->net, &rr, 1, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
    }
    for (int i = 0; i < nchild; i++)
      if ((rc = collie__net_isend(c->net, child[i], buf + o, l, slot, &sreq[k & 1][i])) !=
          COLLIE_SUCCESS)
        return rc;
    if (k > 0) { /* keep at most two chunks of sends in flight */
      for (int i = 0; i < nchild; i++) w[i] = &sreq[(k - 1) & 1][i];
      if ((rc = collie__net_wait(c->net, w, nchild, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
    }
  }
  for (int i = 0; i < nchild; i++) w[i] = &sreq[(nchunks - 1) & 1][i];
  return collie__net_wait(c->net, w, nchild, c->deadline_ns);
}

static double
tree_broadcast_cost(const struct collie__call *c, const struct collie__model *m)
{
  double S = (double)collie__call_bytes(c), depth = collie__log2_ceil(c->size);
  double k = S > TREE_CHUNK ? S / TREE_CHUNK : 1; /* chunks in the pipeline */
  return (depth + k - 1) * (m->alpha_us + S / k * m->beta_us);
}

const struct collie__algo collie__algo_broadcast_tree = {
    "tree", COLLIE_ALGO_TREE, COLLIE_KIND_BROADCAST, 0, tree_broadcast_cost, tree_broadcast_run};

COLLIE_ALGO_STUB(reduce_tree, TREE, REDUCE);
COLLIE_ALGO_STUB(gather_tree, TREE, GATHER);
COLLIE_ALGO_STUB(scatter_tree, TREE, SCATTER);
