/*
 * cbench_shape.c - the collectives collie-bench knows and nccl-tests' rules
 * for turning a requested size into a call: which element count the collie
 * call takes, which byte size the "size" column shows, and the factor that
 * turns algorithm bandwidth into bus bandwidth.
 *
 * The rules are nccl-tests' (and the MPI anchors'), so that a collie line and
 * an MPI line with the same size compare the same amount of data: the size
 * is the largest buffer one rank holds. Collectives whose buffer is shared
 * out among the ranks (allgather, reduce_scatter, alltoall, alltoallv,
 * gather, scatter) give each rank floor(size / esize / nranks) elements, and the size shown is
 * what that rounds down to; a size too small to give each rank one element is
 * skipped rather than run with an empty call.
 *
 * Bus bandwidth is the bandwidth each rank's links would need if the
 * collective were run by the optimal ring algorithm, which makes it
 * comparable across rank counts: allreduce moves 2(n-1)/n of the buffer per
 * rank, the shared ones (n-1)/n, the rooted and point-to-point ones the whole
 * buffer once.
 */
#include <string.h>

#include "cbench.h"
#include "core/introspect.h" /* COLLIE_KIND_* */

static const char *const shape_names[CB_NCOLL] = {
    "allreduce", "allgather", "reduce_scatter", "broadcast", "reduce",   "alltoall",
    "gather",    "scatter",   "barrier",        "sendrecv",  "alltoallv"};

static const int shape_kinds[CB_NCOLL] = {
    COLLIE_KIND_ALLREDUCE, COLLIE_KIND_ALLGATHER, COLLIE_KIND_REDUCE_SCATTER, COLLIE_KIND_BROADCAST,
    COLLIE_KIND_REDUCE,    COLLIE_KIND_ALLTOALL,  COLLIE_KIND_GATHER,         COLLIE_KIND_SCATTER,
    COLLIE_KIND_BARRIER,   COLLIE_KIND_P2P,       COLLIE_KIND_ALLTOALLV};

const char *
cb_coll_name(int coll)
{
  return coll >= 0 && coll < CB_NCOLL ? shape_names[coll] : "?";
}

int
cb_coll_parse(const char *name)
{
  if (!name) return -1;
  for (int c = 0; c < CB_NCOLL; c++)
    if (!strcmp(name, shape_names[c])) return c;
  /* The MPI spelling, as the anchors' CSV writes it. */
  if (!strcmp(name, "bcast")) return CB_BROADCAST;
  return -1;
}

const char *
cb_coll_kind_name(int coll)
{
  if (coll < 0 || coll >= CB_NCOLL || coll == CB_SENDRECV) return NULL;
  return shape_names[coll]; /* the kind names are the collective names */
}

int
cb_coll_kind(int coll)
{
  return coll >= 0 && coll < CB_NCOLL ? shape_kinds[coll] : -1;
}

int
cb_coll_reduces(int coll)
{
  return coll == CB_ALLREDUCE || coll == CB_REDUCE_SCATTER || coll == CB_REDUCE;
}

int
cb_coll_rooted(int coll)
{
  return coll == CB_BROADCAST || coll == CB_REDUCE || coll == CB_GATHER || coll == CB_SCATTER;
}

/* Whether coll's buffer is shared out among the ranks (count per rank). */
static int
shape_is_shared(int coll)
{
  return coll == CB_ALLGATHER || coll == CB_REDUCE_SCATTER || coll == CB_ALLTOALL ||
         coll == CB_ALLTOALLV || coll == CB_GATHER || coll == CB_SCATTER;
}

int
cb_shape(int coll, size_t req_bytes, int nranks, size_t esize, struct cb_shape *out)
{
  out->count = 0;
  out->bytes = 0;
  if (coll < 0 || coll >= CB_NCOLL || nranks < 1 || esize == 0) return 0;
  if (coll == CB_BARRIER) return 1;
  if (shape_is_shared(coll)) {
    out->count = req_bytes / esize / (size_t)nranks;
    out->bytes = out->count * esize * (size_t)nranks;
  } else {
    out->count = req_bytes / esize;
    out->bytes = out->count * esize;
  }
  return out->count > 0;
}

double
cb_busbw_factor(int coll, int nranks)
{
  if (nranks < 1) return 0;
  double n = nranks;
  switch (coll) {
  case CB_ALLREDUCE:
    return 2.0 * (n - 1) / n;
  case CB_ALLGATHER:
  case CB_REDUCE_SCATTER:
  case CB_ALLTOALL:
  case CB_ALLTOALLV:
  case CB_GATHER:
  case CB_SCATTER:
    return (n - 1) / n;
  case CB_BROADCAST:
  case CB_REDUCE:
  case CB_SENDRECV:
    return 1.0;
  default:
    return 0.0;
  }
}

double
cb_algbw(size_t bytes, double time_us)
{
  /* bytes / (time_us * 1e-6 s) / 1e9 */
  return time_us > 0 ? (double)bytes / time_us / 1e3 : 0.0;
}
