/*
 * dissemination.c - the dissemination barrier.
 *
 * In round k (distance d = 2^k) every rank sends an empty message to
 * rank + d and waits for one from rank - d. After ceil(log2 p) rounds every
 * rank has heard, directly or through others, from every rank, so none can
 * leave before all have arrived. Works for any p; no rank is special.
 * Cost: ceil(log2 p) alpha.
 */
#include "coll/coll.h"

static collie_result_t
dissemination_run(struct collie__call *c)
{
  int p = c->size;
  uint32_t round = 0;
  for (int d = 1; d < p; d <<= 1, round++) {
    struct collie__req s, r;
    struct collie__req *w[2] = {&r, &s};
    uint64_t slot = collie__call_slot(c, round);
    collie_result_t rc = collie__call_irecv(c, (c->rank - d + p) % p, NULL, 0, slot, &r);
    if (rc == COLLIE_SUCCESS) rc = collie__call_isend(c, (c->rank + d) % p, NULL, 0, slot, &s);
    if (rc == COLLIE_SUCCESS) rc = collie__net_wait(c->net, w, 2, c->deadline_ns);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  return COLLIE_SUCCESS;
}

static double
dissemination_cost(const struct collie__call *c, const struct collie__model *m)
{
  return collie__log2_ceil(c->size) * m->alpha_us;
}

const struct collie__algo collie__algo_barrier_dissemination = {
    "dissemination",    COLLIE_ALGO_DISSEMINATION, COLLIE_KIND_BARRIER, 0,
    dissemination_cost, dissemination_run};
