/*
 * wire.c - the compressed allreduce (issue 22): float32 data, 16-bit floats
 * on the wire (call->wire FLOAT16 or BFLOAT16), every sum taken in float32.
 *
 * The buffer is cut into p blocks; rank q owns block q. Two exchanges:
 *
 *   reduce-scatter  every rank encodes its whole input once and sends block
 *                   q, encoded, straight to rank q; rank q adds the p - 1
 *                   decoded blocks to its own block, read as float32 (its
 *                   own contribution is never rounded).
 *   allgather       rank q encodes its sum (AVG: its sum / p) once and sends
 *                   it to every rank; every rank, q included, decodes every
 *                   block from that encoding, so all ranks hold the same
 *                   bits (data-parallel replicas must not drift apart).
 *
 * So each contribution is rounded once and the result once: with u the
 * format's unit roundoff (2^-11 float16, 2^-8 bfloat16), the error against
 * the exact sum s of x_1..x_p is at most
 *     u sum|x_i| + u |s| + (p - 1) 2^-24 sum|x_i|   (+ float16's underflow,
 *                                                     2^-25 per rounding)
 * (docs/compression.md derives it; wire_test.c checks it). A ring that
 * passed partial sums along would round each of them again at every hop,
 * p - 1 times; the direct exchange sends the same bytes, (p - 1)/p of the
 * half-size buffer each way, in as many messages (p - 1 per exchange, all
 * posted at once).
 *
 * Cost: 2 (p - 1) alpha + 2 (p - 1)/p (S/2) beta, plus the encoding and
 * decoding passes over S (priced as copies at beta). It is the only
 * algorithm for a compressed call, and no other algorithm takes one
 * (COLLIE_NEEDS_WIRE).
 *
 * In place: the input is encoded whole before any byte of recvbuf is
 * written; the own block's float32 sum is formed element by element over
 * the same positions.
 */
#include <string.h>

#include "coll/coll.h"
#include "util/error.h"

enum { WIRE_STEP_RS = 0, WIRE_STEP_AG = 1 };

static collie_result_t
wire_allreduce_run(struct collie__call *c)
{
  int p = c->size, me = c->rank;
  size_t n = c->count, mo = collie__block_off(n, p, me), ml = collie__block_len(n, p, me);
  const float *in = c->sendbuf;
  float *out = c->recvbuf;
  if (p == 1) {
    /* Nothing crosses a wire, but the result is what it would be: rounded
     * once (AVG of one rank is the input). */
    uint16_t tmp[256];
    for (size_t i = 0; i < n; i += 256) {
      size_t k = n - i < 256 ? n - i : 256;
      collie__wire_encode(c->wire, tmp, in + i, k);
      collie__wire_decode(c->wire, out + i, tmp, k);
    }
    return COLLIE_SUCCESS;
  }
  /* Scratch: the encoded input (later: every rank's encoded result), the
   * p - 1 encoded blocks for this rank, and the requests. */
  size_t enc_bytes = (n * 2 + 63) & ~(size_t)63, in_bytes = ((size_t)(p - 1) * ml * 2 + 63) & ~63;
  size_t nreq = 2 * (size_t)(p - 1);
  char *base = collie__scratch_get(
      c->scratch,
      enc_bytes + in_bytes + nreq * (sizeof(struct collie__req) + sizeof(struct collie__req *)));
  if (!base) return COLLIE_SYSTEM_ERROR;
  uint16_t *enc = (uint16_t *)(void *)base, *got = (uint16_t *)(void *)(base + enc_bytes);
  struct collie__req *req = (struct collie__req *)(void *)(base + enc_bytes + in_bytes);
  struct collie__req **w = (struct collie__req **)(req + nreq);
  collie__wire_encode(c->wire, enc, in, n);

  uint64_t slot = collie__call_slot(c, WIRE_STEP_RS);
  collie_result_t rc = COLLIE_SUCCESS;
  int k = 0;
  for (int s = 1; s < p && rc == COLLIE_SUCCESS; s++) {
    int to = (me + s) % p, from = (me - s + p) % p;
    rc = collie__call_irecv(c, from, got + (size_t)(s - 1) * ml, ml * 2, slot, &req[k++]);
    if (rc == COLLIE_SUCCESS)
      rc = collie__call_isend(c, to, enc + collie__block_off(n, p, to),
                              collie__block_len(n, p, to) * 2, slot, &req[k++]);
  }
  for (int i = 0; i < k; i++) w[i] = &req[i];
  collie_result_t wrc = k ? collie__net_wait(c->net, w, k, c->deadline_ns) : COLLIE_SUCCESS;
  if (rc == COLLIE_SUCCESS) rc = wrc;
  if (rc != COLLIE_SUCCESS) return rc;

  /* This rank's block: its own float32 values plus the others' in rank
   * order from it (the same order on every run, so the same bits). */
  float *mine = out + mo;
  if (mine != in + mo && ml) memcpy(mine, in + mo, ml * sizeof(float));
  for (int s = 1; s < p; s++)
    collie__wire_decode_add(c->wire, mine, got + (size_t)(s - 1) * ml, ml);
  if (c->op == COLLIE_AVG) collie__reduce_avg_finish(mine, ml, COLLIE_FLOAT32, p);
  collie__wire_encode(c->wire, enc + mo, mine, ml);

  slot = collie__call_slot(c, WIRE_STEP_AG);
  k = 0;
  for (int s = 1; s < p && rc == COLLIE_SUCCESS; s++) {
    int to = (me + s) % p, from = (me - s + p) % p;
    rc = collie__call_irecv(c, from, enc + collie__block_off(n, p, from),
                            collie__block_len(n, p, from) * 2, slot, &req[k++]);
    if (rc == COLLIE_SUCCESS) rc = collie__call_isend(c, to, enc + mo, ml * 2, slot, &req[k++]);
  }
  for (int i = 0; i < k; i++) w[i] = &req[i];
  wrc = k ? collie__net_wait(c->net, w, k, c->deadline_ns) : COLLIE_SUCCESS;
  if (rc == COLLIE_SUCCESS) rc = wrc;
  if (rc != COLLIE_SUCCESS) return rc;
  collie__wire_decode(c->wire, out, enc, n);
  return COLLIE_SUCCESS;
}

static double
wire_allreduce_cost(const struct collie__call *c, const struct collie__model *m)
{
  double p = c->size, S = (double)collie__call_bytes(c);
  return 2 * (p - 1) * m->alpha_us + (p - 1) / p * S * m->beta_us + 2 * S * m->beta_us;
}

const struct collie__algo collie__algo_allreduce_compressed = {
    "compressed",      COLLIE_ALGO_COMPRESSED, COLLIE_KIND_ALLREDUCE,
    COLLIE_NEEDS_WIRE, wire_allreduce_cost,    wire_allreduce_run};
