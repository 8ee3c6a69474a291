/*
 * check.c - COLLIE_CHECK=1: before each collective, ranks exchange a
 * fingerprint of their call (collective, dtype, count, op, root, algorithm)
 * and fail together with COLLIE_INVALID_USAGE, a message naming each
 * differing rank's call, instead of hanging or computing garbage.
 *
 * The exchange is a ring allgather of fixed 40-byte records on the
 * communicator's own channels, tagged with the internal kind and the call's
 * sequence number, so it matches across ranks whatever collective each one
 * is about to run. Cost: (p-1) message steps before every collective
 * (measured in docs/algorithms.md); off by default.
 */
#include <stdio.h>
#include <string.h>

#include "core/core.h"

struct check_print {
  int32_t kind, dtype, op, root, algo, pad;
  uint64_t count; /* elements (the v-variants: a hash of the counts all ranks share) */
  uint64_t shape; /* allgatherv: hash of recvcounts; 0 otherwise */
};
_Static_assert(sizeof(struct check_print) == 40, "fingerprint is 40 bytes on the wire");

static void
check_fill(const struct collie__call *c, struct check_print *f)
{
  memset(f, 0, sizeof(*f));
  f->kind = c->kind;
  f->dtype = (int32_t)c->dtype;
  f->algo = c->algo;
  f->count = c->count;
  switch (c->kind) {
  case COLLIE_KIND_ALLREDUCE:
  case COLLIE_KIND_REDUCE_SCATTER:
    f->op = (int32_t)c->op;
    break;
  case COLLIE_KIND_REDUCE:
    f->op = (int32_t)c->op;
    f->root = c->root;
    break;
  case COLLIE_KIND_BROADCAST:
  case COLLIE_KIND_GATHER:
  case COLLIE_KIND_SCATTER:
    f->root = c->root;
    break;
  case COLLIE_KIND_ALLGATHERV:
    f->count = 0; /* each rank's sendcount differs; the layout must not */
    f->shape = collie__hash64(c->recvcounts, (size_t)c->size * sizeof(size_t), 0);
    break;
  case COLLIE_KIND_ALLTOALLV:
    f->count = 0;
    break; /* counts are per pair */
  default:
    break;
  }
}

static int
check_describe(const struct check_print *f, char *buf, size_t len)
{
  static const char *algos[] = {
#define COLLIE_XX_(name, str) str,
      COLLIE_ALGO_MAP(COLLIE_XX_)
#undef COLLIE_XX_
  };
  return snprintf(buf, len, "%s(%llu x %s%s%s, root %d, %s)", collie__kind_name(f->kind),
                  (unsigned long long)f->count, collie_dtype_name((collie_dtype_t)f->dtype),
                  f->op || f->kind == COLLIE_KIND_ALLREDUCE ? ", " : "",
                  f->op || f->kind == COLLIE_KIND_ALLREDUCE ? collie_op_name((collie_op_t)f->op)
                                                            : "",
                  f->root, f->algo >= 0 && f->algo < COLLIE_ALGO_COUNT_ ? algos[f->algo] : "?");
}

collie_result_t
collie__check_call(const struct collie__call *c)
{
  int p = c->size;
  if (p == 1) return COLLIE_SUCCESS;
  struct check_print *all = collie__scratch_get(c->scratch, (size_t)p * sizeof(*all));
  if (!all) return COLLIE_SYSTEM_ERROR;
  check_fill(c, &all[c->rank]);
  /* A ring allgather of the records, under the internal kind. */
  struct collie__call x = *c;
  x.kind = COLLIE_KIND_INTERNAL;
  x.algo = COLLIE_ALGO_RING;
  int right = (c->rank + 1) % p, left = (c->rank + p - 1) % p;
  for (int s = 0; s < p - 1; s++) {
    int sb = (c->rank - s + p) % p, rb = (c->rank - s - 1 + p) % p;
    collie_result_t rc = collie__sendrecv(&x, right, &all[sb], sizeof(*all), left, &all[rb],
                                          sizeof(*all), (uint32_t)s);
    if (rc != COLLIE_SUCCESS) return rc;
  }
  int differ = 0;
  for (int q = 0; q < p; q++) differ |= memcmp(&all[q], &all[0], sizeof(*all)) != 0;
  if (!differ) return COLLIE_SUCCESS;
  char msg[COLLIE_ERRMSG_LEN];
  size_t o =
      (size_t)snprintf(msg, sizeof(msg), "collectives mismatched across ranks (COLLIE_CHECK):");
  for (int q = 0; q < p && o < sizeof(msg); q++) {
    if (q > 0 && !memcmp(&all[q], &all[q - 1], sizeof(*all))) continue; /* runs of equal calls */
    int last = q;
    while (last + 1 < p && !memcmp(&all[last + 1], &all[q], sizeof(*all))) last++;
    o += (size_t)snprintf(msg + o, sizeof(msg) - o,
                          last > q ? " ranks %d-%d called " : " rank %d called ", q, last);
    if (o < sizeof(msg)) o += (size_t)check_describe(&all[q], msg + o, sizeof(msg) - o);
    if (o < sizeof(msg) && last + 1 < p) o += (size_t)snprintf(msg + o, sizeof(msg) - o, ";");
  }
  return collie__err(COLLIE_INVALID_USAGE, "%s", msg);
}
