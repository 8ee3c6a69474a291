/*
 * cbench.h - what the pieces of collie-bench share. collie-bench is the
 * collective profiler (docs/collie-bench.md): nccl-tests' size, count, algbw
 * and busbw conventions (cbench_shape.c), the measurement of one point
 * (cbench_measure.c), the sweep and its outputs (collie-bench.c,
 * cbench_output.c, cbench_plot.c), and the alpha-beta fit and tuning file
 * (cbench_fit.c). It links the static library and may use internal headers
 * (src/) for what no public call offers: which algorithm AUTO picks, and the
 * cost model's selection with a given tuning file.
 */
#ifndef COLLIE_CBENCH_H
#define COLLIE_CBENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "collie.h"

/* ---- cbench_shape.c: the collectives and nccl-tests' conventions ---- */

enum {
  CB_ALLREDUCE = 0,
  CB_ALLGATHER,
  CB_REDUCE_SCATTER,
  CB_BROADCAST,
  CB_REDUCE,
  CB_ALLTOALL,
  CB_GATHER,
  CB_SCATTER,
  CB_BARRIER,
  CB_SENDRECV,
  CB_NCOLL
};

/* "allreduce", "allgather", "reduce_scatter", "broadcast", "reduce",
 * "alltoall", "gather", "scatter", "barrier", "sendrecv" (also the -o names
 * and the CSV's collective column). */
const char *cb_coll_name(int coll);
/* The collective named name (also "bcast" for broadcast), or -1. */
int cb_coll_parse(const char *name);
/* The name of its COLLIE_KIND_* in the flight recorder/COLLIE_ALGO sense
 * ("allreduce", "broadcast", ...); sendrecv: NULL (no algorithm choice). */
const char *cb_coll_kind_name(int coll);

/* nccl-tests' shape of a point: the requested size in bytes becomes the
 * element count passed to collie (per rank share for allgather,
 * reduce_scatter, alltoall (per peer block), gather, scatter: floor(bytes /
 * esize / nranks); the whole buffer for allreduce, broadcast, reduce,
 * sendrecv), and `bytes` the size actually used (count x esize, x nranks for
 * the shared ones; 0 for barrier). A point whose count would be 0 (but not
 * barrier) is skipped: returns 0. Returns 1 when it runs. */
struct cb_shape {
  size_t count; /* what the collie_* call takes */
  size_t bytes; /* nccl-tests' size column */
};
int cb_shape(int coll, size_t req_bytes, int nranks, size_t esize, struct cb_shape *out);
/* nccl-tests' bus bandwidth factor: allreduce 2(n-1)/n; allgather,
 * reduce_scatter, alltoall, gather, scatter (n-1)/n; broadcast, reduce,
 * sendrecv 1; barrier 0. */
double cb_busbw_factor(int coll, int nranks);
/* algbw in GB/s (1e9) = bytes / time; 0 when time_us <= 0. */
double cb_algbw(size_t bytes, double time_us);

/* ---- cbench_measure.c: one point ---- */

struct cb_opts {
  size_t minbytes, maxbytes; /* sweep range (-b, -e) */
  double stepfactor;         /* -f (> 1) */
  int ops[CB_NCOLL];         /* -o: which collectives run */
  collie_dtype_t dtype;      /* -d */
  collie_op_t redop;         /* -r */
  int root;                  /* rooted collectives (0) */
  long iters;                /* -n: 0 = pick from -t target time */
  long warmup;               /* -w: < 0 = 20 up to 1 MiB, 4 above (as the anchors) */
  double target_s;           /* time per point when iters == 0 (0.1) */
  int check;                 /* -c (1) */
  int algo;                  /* --algo: COLLIE_ALGO_AUTO or one id */
  int inplace;               /* --inplace */
};

/* One measured point. Times are in microseconds per call: time_us is the
 * max over ranks of each rank's mean over the timed loop (nccl-tests);
 * min_us, p50_us, p99_us are each rank's minimum / median / 99th percentile
 * (nearest rank) of its per-iteration times, then the max over ranks (the
 * slowest rank's view). */
struct cb_point {
  int coll;
  int algo;              /* COLLIE_ALGO_* that ran (AUTO resolved) */
  char algo_name[32];    /* its name ("ring"); "-" for sendrecv */
  struct cb_shape shape; /* count and nccl-tests bytes */
  int root;
  long iters;
  double time_us, min_us, p50_us, p99_us;
  double algbw, busbw; /* GB/s */
  long wrong;          /* elements that differ from the expected result, summed over ranks */
};

/* Measures (coll, algo) at req_bytes on comm, as every rank must (a
 * collective call: all ranks pass the same arguments). Returns 0 and fills
 * out on every rank; 1 when the shape is skipped (count 0); -1 with a message
 * on stderr when collie fails (the algorithm cannot run the call: out->algo
 * names it and collie_last_error() says why). Buffers are allocated per
 * call (and reused across calls of one process). */
int cb_measure(collie_comm_t *comm, const struct cb_opts *o, int coll, int algo, size_t req_bytes,
               struct cb_point *out);

/* Which algorithm AUTO picks for coll at this shape on comm ("ring"), from
 * the library's own selection (the communicator's models). */
const char *cb_auto_algo(collie_comm_t *comm, int coll, const struct cb_shape *shape,
                         collie_dtype_t dtype, int *algo_id);

/* ---- cbench_fit.c: the alpha-beta model from measurements ---- */

/* Least squares of t = alpha + beta * m over n points. Returns 0, or -1 when
 * n < 2 or every m is equal. r2 is the coefficient of determination (1 when
 * the residuals are all 0). */
struct cb_fit {
  double alpha_us, beta_us_per_byte, r2;
  int n;
};
int cb_fit_line(const double *m, const double *t, int n, struct cb_fit *out);

#endif /* COLLIE_CBENCH_H */
