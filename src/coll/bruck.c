/*
 * bruck.c - Bruck's allgather and alltoall: ceil(log2 p) rounds for any p.
 *
 * allgather. After round k a rank r holds the 2^k blocks r, r+1, ...,
 * r+2^k-1 (mod p). In round k (distance d = 2^k) it sends the first
 * n = min(d, p-d) of them to rank r-d and receives blocks r+d .. r+d+n-1
 * from rank r+d, which holds exactly those as its own first ones. After
 * ceil(log2 p) rounds every rank holds all p. The textbook version keeps the
 * blocks in that rotated order in a temporary buffer and rotates them into
 * rank order at the end; here every block goes straight to its final place
 * in recvbuf (block j at j * count), so there is no temporary buffer and no
 * rotation copy. The price: a run of blocks that wraps past block p-1 is two
 * byte ranges, so a round may carry two messages instead of one (posted
 * together, they share the round's latency). In place (sendbuf == recvbuf +
 * rank*count) the own block is already where it belongs.
 *   cost: ceil(log2 p) alpha + (p-1)/p S beta     (S = p * count * esize)
 * The same bytes as the ring in log2 instead of linear steps; what the model
 * does not see is that each round waits for the previous one and moves up to
 * S/2 in one message, with no chunk pipelining.
 *
 * alltoall. Three phases over a temporary copy tmp of the p send blocks:
 *  1. rotate: tmp[i] = the block for rank (r+i) mod p;
 *  2. in round k (d = 2^k) send every tmp[i] with bit k of i set to rank
 *     r+d and receive the same indices from rank r-d. A block for rank b
 *     starting at rank a has index b-a, and travels d for each bit of it, so
 *     it arrives at b; the indices of a round are packed into one message;
 *  3. unrotate: the block from rank j is tmp[(r-j) mod p].
 * A round moves at most half of the blocks, so log2 p rounds move about
 * S/2 log2 p bytes against the pairwise exchange's S, for log2 p instead of
 * p-1 latencies: the small-message algorithm.
 *   cost: ceil(log2 p) (alpha + S/2 beta) + copies, where the copies (the
 *   rotation S, the unrotation S, and per round a pack and an unpack of
 *   S/2 each) run at beta/2: ceil(log2 p) alpha + (ceil(log2 p) + 1) S beta.
 * Scratch: tmp (S) and two packing buffers (S/2 each). In place works since
 * recvbuf is written only in phase 3, after sendbuf was read in phase 1.
 *
 * Both work for any p >= 1 and any count (count 0 returns at once: every
 * rank passes it). A round's messages use the round as their step.
 *
 * On several hosts (ranks placed host by host) the round of distance d
 * sends across a host boundary from the min(d, L) ranks of each host whose
 * partner r - d is on another host, so those share the host's link; the
 * others' messages stay inside it. Every round has such a pair, so every
 * round pays the network's alpha, but its bytes are priced at min(d, L)
 * times the network's beta, where select.c would price every round at L
 * times (COLLIE_ONE_LINK: bruck prices its link itself).
 */
#include <string.h>

#include "coll/coll.h"
#include "coll/topo.h"
#include "util/error.h"
#include "util/util.h"

/* ---- allgather ---- */

/* Posts the transfer of blocks first, first+1, ..., first+n-1 (mod p) of
 * buf with peer: one message, or two when the run wraps past block p-1.
 * Both ends split the run alike, since the sender's first is the receiver's. */
static collie_result_t
bruck_post_run(struct collie__call *c, int send, int peer, char *buf, size_t blk, int first, int n,
               uint64_t slot, struct collie__req req[2], struct collie__req **w)
{
  int p = c->size, n1 = first + n <= p ? n : p - first;
  int part_first[2] = {first, 0}, part_n[2] = {n1, n - n1};
  collie_result_t rc;
  for (int i = 0; i < 2; i++) {
    w[i] = NULL;
    if (part_n[i] == 0) continue;
    char *b = buf + (size_t)part_first[i] * blk;
    size_t len = (size_t)part_n[i] * blk;
    rc = send ? collie__call_isend(c, peer, b, len, slot, &req[i])
              : collie__call_irecv(c, peer, b, len, slot, &req[i]);
    if (rc != COLLIE_SUCCESS) return rc;
    w[i] = &req[i];
  }
  return COLLIE_SUCCESS;
}

static collie_result_t
bruck_allgather_run(struct collie__call *c)
{
  int p = c->size, r = c->rank;
  size_t blk = c->count * c->esize;
  char *buf = c->recvbuf;
  collie_result_t rc;
  if (blk == 0) return COLLIE_SUCCESS;
  if (c->sendbuf != buf + (size_t)r * blk)
    collie__call_copy(c, buf + (size_t)r * blk, c->sendbuf, blk);
  uint32_t round = 0;
  for (int d = 1; d < p; d <<= 1, round++) {
    int n = d < p - d ? d : p - d, to = (r - d + p) % p, from = (r + d) % p;
    uint64_t slot = collie__call_slot(c, round);
    struct collie__req sreq[2], rreq[2];
    struct collie__req *w[4];
    if ((rc = bruck_post_run(c, 0, from, buf, blk, from, n, slot, rreq, w)) != COLLIE_SUCCESS)
      return rc;
    if ((rc = bruck_post_run(c, 1, to, buf, blk, r, n, slot, sreq, w + 2)) != COLLIE_SUCCESS)
      return rc;
    if ((rc = collie__net_wait(c->net, w, 4, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
  }
  return COLLIE_SUCCESS;
}

/* How many ranks of a host share its link in the round of distance d: 1
 * on one host (a round then moves through memory, one pair each). */
static double
bruck_share(const struct collie__call *c, int d)
{
  const struct collie__topo *t = c->topo;
  if (!t || t->nhosts < 2) return 1;
  return d < t->max_local ? d : t->max_local;
}

static double
bruck_allgather_cost(const struct collie__call *c, const struct collie__model *m)
{
  int p = c->size;
  double blk = (double)collie__call_bytes(c) / p, t = 0;
  for (int d = 1; d < p; d <<= 1) {
    int n = d < p - d ? d : p - d; /* blocks a rank sends in this round */
    t += m->alpha_us + n * blk * m->beta_us * bruck_share(c, d);
  }
  return t;
}

const struct collie__algo collie__algo_allgather_bruck = {
    "bruck",         COLLIE_ALGO_BRUCK,    COLLIE_KIND_ALLGATHER,
    COLLIE_ONE_LINK, bruck_allgather_cost, bruck_allgather_run};

/* ---- alltoall ---- */

static collie_result_t
bruck_alltoall_run(struct collie__call *c)
{
  int p = c->size, r = c->rank;
  size_t blk = c->count * c->esize;
  const char *in = c->sendbuf;
  char *out = c->recvbuf;
  collie_result_t rc;
  if (blk == 0) return COLLIE_SUCCESS;
  if (p == 1) {
    if (in != out) collie__call_copy(c, out, in, blk);
    return COLLIE_SUCCESS;
  }
  /* A round carries the indices with one bit set: at most floor(p/2) blocks. */
  size_t half = (size_t)(p / 2) * blk;
  char *tmp = collie__scratch_get(c->scratch, (size_t)p * blk + 2 * half);
  if (!tmp) return COLLIE_SYSTEM_ERROR;
  char *spack = tmp + (size_t)p * blk, *rpack = spack + half;

  for (int i = 0; i < p; i++)
    collie__call_copy_small(c, tmp + (size_t)i * blk, in + (size_t)((r + i) % p) * blk, blk);
  uint32_t round = 0;
  for (int d = 1; d < p; d <<= 1, round++) {
    size_t n = 0;
    for (int i = d; i < p; i++)
      if (i & d) collie__call_copy_small(c, spack + blk * n++, tmp + (size_t)i * blk, blk);
    rc = collie__sendrecv(c, (r + d) % p, spack, n * blk, (r - d + p) % p, rpack, n * blk, round);
    if (rc != COLLIE_SUCCESS) return rc;
    n = 0;
    for (int i = d; i < p; i++)
      if (i & d) collie__call_copy_small(c, tmp + (size_t)i * blk, rpack + blk * n++, blk);
  }
  for (int j = 0; j < p; j++)
    collie__call_copy(c, out + (size_t)j * blk, tmp + (size_t)((r - j + p) % p) * blk, blk);
  return COLLIE_SUCCESS;
}

static double
bruck_alltoall_cost(const struct collie__call *c, const struct collie__model *m)
{
  /* Per round: S/2 on the wire (shared by the ranks that cross) and S/2 of
   * packing and unpacking; the rotations S once. */
  double S = (double)collie__call_bytes(c), t = S * m->beta_us;
  for (int d = 1; d < c->size; d <<= 1)
    t += m->alpha_us + S / 2 * m->beta_us * (bruck_share(c, d) + 1);
  return t;
}

const struct collie__algo collie__algo_alltoall_bruck = {
    "bruck",         COLLIE_ALGO_BRUCK,   COLLIE_KIND_ALLTOALL,
    COLLIE_ONE_LINK, bruck_alltoall_cost, bruck_alltoall_run};
