/*
 * chain.c - pipelined chain broadcast: root -> root+1 -> ... -> root+p-1.
 *
 * The buffer is cut into k chunks of CHAIN_CHUNK bytes. Every rank but the
 * root receives chunk c from its predecessor straight into the buffer and
 * forwards it to its successor at once, while chunks c+1, c+2, ... are
 * already arriving: up to CHAIN_WINDOW receives and CHAIN_WINDOW sends are in
 * flight per rank, so a slow hop does not stall the ones behind it. No
 * staging: chunks land where they belong.
 *
 * After p-1 hops of the first chunk the pipeline is full and one chunk
 * leaves the last rank per step:
 *   cost (p - 1) alpha + (p - 1 + k - 1) S/k beta (the fill pays the latency).
 * Every link carries S once and every rank sends at most one copy, so for
 * large buffers it approaches S beta whatever p (the binomial tree sends
 * ceil(log2 p) copies from the root); the p-1 latency makes it a poor choice
 * for small buffers.
 *
 * CHAIN_CHUNK: 256 KiB, measured by timing broadcast with chunks of 64 KiB
 * to 1 MiB on the 2-core reference machine (2, 4 and 8 ranks, 4 and 64 MiB,
 * shm and tcp; best of 5-20 runs, while other jobs loaded the machine, so
 * differences under ~20% are noise). 256 and 512 KiB were the best or close
 * to it almost everywhere; 64 KiB paid for its steps (shm, 8 ranks, 64 MiB:
 * 88 ms against 51 ms), 1 MiB filled the pipeline too slowly (shm, 2 ranks,
 * 4 MiB: 1.8 ms against 0.31 ms). The smaller of the two keeps the pipeline
 * fill short on many ranks, and matches ring.c's chunk.
 */
#include "coll/coll.h"
#include "util/error.h"

#define CHAIN_CHUNK ((size_t)256 * 1024)
#define CHAIN_WINDOW 4

static collie_result_t
chain_broadcast_run(struct collie__call *c)
{
  int p = c->size, v = collie__root_rel(c);
  size_t bytes = c->count * c->esize;
  char *buf = c->recvbuf;
  if (p == 1 || bytes == 0) return COLLIE_SUCCESS;
  int prev = v > 0 ? (c->rank - 1 + p) % p : -1, next = v < p - 1 ? (c->rank + 1) % p : -1;
  size_t chunk = CHAIN_CHUNK - CHAIN_CHUNK % c->esize;
  size_t nchunks = (bytes + chunk - 1) / chunk;
  uint64_t slot = collie__call_slot(c, 0);
  struct collie__req rreq[CHAIN_WINDOW], sreq[CHAIN_WINDOW];
  struct collie__req *w[CHAIN_WINDOW];
  int sactive[CHAIN_WINDOW] = {0};
  collie_result_t rc;

  if (prev >= 0)
    for (size_t k = 0; k < nchunks && k < CHAIN_WINDOW; k++) {
      size_t o = k * chunk, l = bytes - o < chunk ? bytes - o : chunk;
      if ((rc = collie__call_irecv(c, prev, buf + o, l, slot, &rreq[k])) != COLLIE_SUCCESS)
        return rc;
    }
  for (size_t k = 0; k < nchunks; k++) {
    int i = (int)(k % CHAIN_WINDOW);
    size_t o = k * chunk, l = bytes - o < chunk ? bytes - o : chunk;
    if (prev >= 0) {
      w[0] = &rreq[i];
      if ((rc = collie__net_wait(c->net, w, 1, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
      size_t k2 = k + CHAIN_WINDOW;
      if (k2 < nchunks) {
        size_t o2 = k2 * chunk, l2 = bytes - o2 < chunk ? bytes - o2 : chunk;
        if ((rc = collie__call_irecv(c, prev, buf + o2, l2, slot, &rreq[i])) != COLLIE_SUCCESS)
          return rc;
      }
    }
    if (next >= 0) {
      if (sactive[i]) {
        w[0] = &sreq[i];
        if ((rc = collie__net_wait(c->net, w, 1, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
      }
      if ((rc = collie__call_isend(c, next, buf + o, l, slot, &sreq[i])) != COLLIE_SUCCESS)
        return rc;
      sactive[i] = 1;
    }
  }
  int n = 0;
  for (int i = 0; i < CHAIN_WINDOW; i++)
    if (sactive[i]) w[n++] = &sreq[i];
  return collie__net_wait(c->net, w, n, c->deadline_ns);
}

static double
chain_broadcast_cost(const struct collie__call *c, const struct collie__model *m)
{
  double p = c->size, S = (double)collie__call_bytes(c);
  double k = S > (double)CHAIN_CHUNK ? S / (double)CHAIN_CHUNK : 1;
  /* As the tree: the fill pays the latency, each chunk its bytes. */
  return collie__oversub_cost(c, m, (p - 1) * m->alpha_us + (p - 1 + k - 1) * S / k * m->beta_us,
                              2 * (p - 1));
}

const struct collie__algo collie__algo_broadcast_chain = {
    "chain",         COLLIE_ALGO_CHAIN,    COLLIE_KIND_BROADCAST,
    COLLIE_ONE_LINK, chain_broadcast_cost, chain_broadcast_run};
