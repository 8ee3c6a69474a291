/*
 * ring.c - ring allreduce: a reduce-scatter followed by an allgather, both
 * around the ring rank -> rank+1.
 *
 * The buffer of n elements is cut into p blocks (block i: collie__block_off /
 * collie__block_len). In reduce-scatter step s (0 <= s < p-1) every rank sends
 * block (rank - s) mod p to its right neighbour and receives block
 * (rank - s - 1) mod p from its left one, which it combines into its own copy.
 * After p-1 steps rank r holds the full reduction of block (r + 1) mod p. The
 * allgather then circulates the finished blocks for another p-1 steps,
 * received straight into the output buffer.
 *
 * Each block transfer is cut into chunks of at most RING_CHUNK bytes and
 * double-buffered: while chunk c is on the wire, chunk c-1 is being reduced,
 * so copying and reducing overlap and the staging space stays at two chunks.
 *
 * Cost (alpha latency, beta seconds per byte, gamma reduce seconds per byte,
 * S bytes): 2(p-1) alpha + 2 (p-1)/p S beta + (p-1)/p S gamma. Bandwidth-
 * optimal for large S; the 2(p-1) latency terms make it a poor choice for
 * small messages on many ranks (the selection issue adds alternatives).
 * Correct for any p >= 1 and any n, including n < p (empty blocks travel as
 * zero-length messages, which keeps every rank's step count equal).
 */
#include <string.h>

#include "coll/coll.h"
#include "util/error.h"

#define RING_CHUNK ((size_t)256 * 1024)

/* Sends block sb and receives block rb (combining into buf when reducing) for one step. */
static collie_result_t
ring_step(struct collie__call *c, char *buf, char *tmp, int sb, int rb, uint32_t step, int reducing)
{
  int right = (c->rank + 1) % c->size, left = (c->rank + c->size - 1) % c->size;
  size_t es = c->esize, n = c->count;
  size_t s_off = collie__block_off(n, c->size, sb) * es, s_len = collie__block_len(n, c->size, sb) * es;
  size_t r_off = collie__block_off(n, c->size, rb) * es, r_len = collie__block_len(n, c->size, rb) * es;
  /* Chunk so that both sides agree on chunk boundaries (same size, same rule) and a
   * chunk holds whole elements. */
  size_t chunk = RING_CHUNK - RING_CHUNK % es;
  size_t ns = s_len ? (s_len + chunk - 1) / chunk : 1, nr = r_len ? (r_len + chunk - 1) / chunk : 1;
  size_t nmax = ns > nr ? ns : nr;
  struct collie__req sreq[2], rreq[2];
  struct collie__req *w[2];
  uint64_t slot = collie__slot(c->kind, c->seq, step);
  collie_result_t rc;

  for (size_t k = 0; k <= nmax; k++) {
    if (k < nmax) {
      if (k < nr) {
        size_t o = k * chunk, l = r_len - o < chunk ? r_len - o : chunk;
        void *dst = reducing ? tmp + (k & 1) * chunk : buf + r_off + o;
        rc = collie__net_irecv(c->net, left, dst, l, slot, &rreq[k & 1]);
        if (rc != COLLIE_SUCCESS) return rc;
      }
      if (k < ns) {
        size_t o = k * chunk, l = s_len - o < chunk ? s_len - o : chunk;
        rc = collie__net_isend(c->net, right, buf + s_off + o, l, slot, &sreq[k & 1]);
        if (rc != COLLIE_SUCCESS) return rc;
      }
    }
    if (k == 0) continue;
    /* Finish chunk k-1 while chunk k moves. */
    size_t j = k - 1;
    w[0] = j < nr ? &rreq[j & 1] : NULL;
    w[1] = j < ns ? &sreq[j & 1] : NULL;
    rc = collie__net_wait(c->net, w, 2, c->deadline_ns);
    if (rc != COLLIE_SUCCESS) return rc;
    if (reducing && j < nr) {
      size_t o = j * chunk, l = r_len - o < chunk ? r_len - o : chunk;
      c->reduce(buf + r_off + o, tmp + (j & 1) * chunk, l / es);
    }
  }
  return COLLIE_SUCCESS;
}

collie_result_t
collie__allreduce_ring(struct collie__call *c)
{
  int p = c->size, r = c->rank;
  char *buf = c->recvbuf;
  size_t bytes = c->count * c->esize;
  collie_result_t rc;
  if (c->sendbuf != c->recvbuf && bytes) memcpy(buf, c->sendbuf, bytes);
  if (p > 1) {
    size_t chunk = RING_CHUNK - RING_CHUNK % c->esize;
    size_t maxblk = collie__block_len(c->count, p, 0) * c->esize;
    char *tmp = collie__scratch_get(c->scratch, 2 * (maxblk < chunk ? maxblk : chunk) + 64);
    if (!tmp) return COLLIE_SYSTEM_ERROR;
    for (int s = 0; s < p - 1; s++) {
      rc = ring_step(c, buf, tmp, (r - s + p) % p, (r - s - 1 + 2 * p) % p, (uint32_t)s, 1);
      if (rc != COLLIE_SUCCESS) return rc;
    }
  }
  int own = (r + 1) % p;
  if (c->op == COLLIE_AVG)
    collie__reduce_avg_finish(buf + collie__block_off(c->count, p, own) * c->esize,
                              collie__block_len(c->count, p, own), c->dtype, p);
  for (int s = 0; s < p - 1; s++) {
    rc = ring_step(c, buf, NULL, (r + 1 - s + p) % p, (r - s + p) % p, (uint32_t)(p - 1 + s), 0);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  return COLLIE_SUCCESS;
}
