/* common.c - small pieces every algorithm family uses. */
#include "coll/coll.h"

size_t
collie__swap_chunk(const struct collie__call *c, size_t sl, size_t rl, size_t chunk)
{
  if (c->size != 2) return chunk;
  size_t whole = sl > rl ? sl : rl;
  return whole ? whole : 1;
}

double
collie__oversub_cost(const struct collie__call *c, const struct collie__model *m, double t,
                     double copies)
{
  if (m->cores <= 0) return t;
  double floor = copies * (double)collie__call_bytes(c) * m->beta_us / m->cores;
  return t > floor ? t : floor;
}

double
collie__overlap_us(const struct collie__model *m, double n, double window)
{
  if (n <= 0) return 0;
  double windows = window > 0 && n > window ? (double)(long long)((n + window - 1) / window) : 1;
  double msg = m->alpha_us < COLLIE_MSG_US ? m->alpha_us : COLLIE_MSG_US;
  return windows * m->alpha_us + (n - windows) * msg;
}

collie_result_t
collie__send_direct(struct collie__call *c, int to, const void *buf, size_t bytes, uint32_t step)
{
  struct collie__req s;
  struct collie__req *w = &s;
  collie_result_t rc = collie__call_isend_direct(c, to, buf, bytes, collie__call_slot(c, step), &s);
  return rc != COLLIE_SUCCESS ? rc : collie__net_wait(c->net, &w, 1, c->deadline_ns);
}

collie_result_t
collie__sendrecv(struct collie__call *c, int to, const void *sbuf, size_t sbytes, int from,
                 void *rbuf, size_t rbytes, uint32_t step)
{
  struct collie__req s, r;
  struct collie__req *w[2] = {NULL, NULL};
  uint64_t slot = collie__call_slot(c, step);
  collie_result_t rc;
  if (from >= 0) {
    if ((rc = collie__call_irecv(c, from, rbuf, rbytes, slot, &r)) != COLLIE_SUCCESS) return rc;
    w[0] = &r;
  }
  if (to >= 0) {
    if ((rc = collie__call_isend(c, to, sbuf, sbytes, slot, &s)) != COLLIE_SUCCESS) return rc;
    w[1] = &s;
  }
  return collie__net_wait(c->net, w, 2, c->deadline_ns);
}
