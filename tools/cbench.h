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

/* Transport classes a tuning file may hold constants for (collie__net_class_count). */
#define CB_CLASS_MAX 4

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
  CB_ALLTOALLV, /* alltoall's shape through collie_alltoallv, every count equal */
  CB_NCOLL
};

/* "allreduce", "allgather", "reduce_scatter", "broadcast", "reduce",
 * "alltoall", "gather", "scatter", "barrier", "sendrecv", "alltoallv" (also
 * the -o names and the CSV's collective column). */
const char *cb_coll_name(int coll);
/* The collective named name (also "bcast" for broadcast), or -1. */
int cb_coll_parse(const char *name);
/* The name of its COLLIE_KIND_* in the flight recorder/COLLIE_ALGO sense
 * ("allreduce", "broadcast", ...); sendrecv: NULL (no algorithm choice). */
const char *cb_coll_kind_name(int coll);

/* nccl-tests' shape of a point: the requested size in bytes becomes the
 * element count passed to collie (per rank share for allgather,
 * reduce_scatter, alltoall and alltoallv (per peer block), gather, scatter: floor(bytes /
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
 * reduce_scatter, alltoall, alltoallv, gather, scatter (n-1)/n; broadcast, reduce,
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
  int mem_collie;            /* --mem collie: buffers from collie_mem_alloc */
  int device_cuda;           /* --device cuda: buffers in device memory (cbench_cuda.c) */
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
 * the library's own selection (the communicator's models; alltoallv, which
 * the selection answers per call from its counts: the model's prediction
 * for the communicator's hosts, or COLLIE_ALGO's choice). */
const char *cb_auto_algo(collie_comm_t *comm, int coll, const struct cb_shape *shape,
                         collie_dtype_t dtype, int *algo_id);

/* ---- collie-bench's own pieces (cbench_shape.c, cbench_measure.c,
 * cbench_output.c, cbench_plot.c) ---- */

/* The COLLIE_KIND_* of coll (COLLIE_KIND_P2P for sendrecv), or -1. */
int cb_coll_kind(int coll);
/* Whether coll combines values with the -r operation. */
int cb_coll_reduces(int coll);
/* Whether coll takes a root (broadcast, reduce, gather, scatter). */
int cb_coll_rooted(int coll);
/* COLLIE_ALGO_MAP's name of algo ("ring"; "auto" for COLLIE_ALGO_AUTO), "?"
 * out of range. */
const char *cb_algo_name(int algo);
/* The COLLIE_ALGO_* named name ("auto" included), or -1. */
int cb_algo_parse(const char *name);
/* The library's algorithms of coll (COLLIE_ALGO_* ids, in the library's
 * table order) into ids[0..max); returns how many there are (0 for
 * sendrecv, which has no choice). */
int cb_algos_of(int coll, int *ids, int max);
/* Whether coll has algorithm algo (AUTO: always). */
int cb_coll_has_algo(int coll, int algo);
/* The transports comm's ranks use between them: "shm", "tcp", "shm+tcp", or
 * "self" for one rank; the union over all ranks, in a static buffer valid
 * until the next call. Collective (one allreduce); NULL when it fails
 * (collie_last_error() says why). */
const char *cb_transport_used(collie_comm_t *comm);

/* The text table (stdout, rank 0), nccl-tests style: a comment naming coll
 * and the mode, then two header lines; one fixed-width row per point. */
void cb_table_header(FILE *f, int coll, int inplace);
void cb_table_row(FILE *f, const struct cb_point *p, const struct cb_opts *o);
/* --csv: the header line, and one row per point (the MPI anchors' collective
 * names: "bcast" for broadcast; wrong is -1 when checking was off). */
void cb_csv_header(FILE *f);
void cb_csv_row(FILE *f, const struct cb_point *p, const char *transport, int nranks);
/* The seed profile (docs/collie-bench.md): banner, configuration, then one
 * "Tensor Size" block per distinct element count among pts (in their
 * order), a line per point of that count. Returns 0, or -1 when writing
 * fails (errno set). */
int cb_profile_write(FILE *f, const struct cb_point *pts, int npts, int nranks,
                     const char *transport, collie_dtype_t dtype);
/* dir/profile_collie_world{N}_{YYYYmmdd_HHMMSS}.txt for local time when. */
void cb_profile_path(char *buf, size_t len, const char *dir, int nranks, long long when);
/* The progress line on f ("\r[k/N] allreduce 4 MiB ring", overwriting the
 * previous one); cb_progress_end erases it. The caller decides whether f is
 * a terminal worth writing to. */
void cb_progress(FILE *f, int k, int total, int coll, size_t bytes, const char *algo);
void cb_progress_end(FILE *f);

/* --plot: an SVG (two log-log panels: bus bandwidth and time against size,
 * one line per (collective, algorithm), legend) of the points with a size
 * (barrier has none). Returns 0, or -1 with a message on stderr naming path. */
int cb_plot_write(const char *path, const struct cb_point *pts, int npts, const char *title);

/* ---- cbench_fit.c: the alpha-beta model from measurements ---- */

/* Least squares of t = alpha + beta * m over n points. Returns 0, or -1 when
 * n < 2 or every m is equal. r2 is the coefficient of determination (1 when
 * the residuals are all 0). */
struct cb_fit {
  double alpha_us, beta_us_per_byte, r2;
  int n;
};
int cb_fit_line(const double *m, const double *t, int n, struct cb_fit *out);
/* As cb_fit_line, but minimising relative errors (weights 1/t^2), so that a
 * sweep over decades of sizes fits its small sizes (alpha) as well as its
 * large ones (beta), and with alpha, beta >= 0 (the better boundary line
 * when the free fit has a negative one). r2 is the weighted R^2. Returns 0,
 * or -1 when n < 2, every m is equal, or some t <= 0. */
int cb_fit_line_rel(const double *m, const double *t, int n, struct cb_fit *out);

/* One range of a piecewise model: time = alpha_us + beta_us_per_byte x bytes
 * for bytes in [lo, hi]. */
struct cb_seg {
  size_t lo, hi;
  double alpha_us, beta_us_per_byte;
};
/* Splits a sweep (m strictly increasing sizes in bytes, t > 0 times) into
 * runs of consecutive points, greedily from the smallest: a run grows while
 * its cb_fit_line_rel line stays within tol (relative) of every point of it,
 * so tol 0 reproduces every point. A run of one point gets the line through
 * it with the mean slope of its secants to its neighbours (kept within
 * [0, t/m], so alpha >= 0). Ranges meet halfway (geometric mean) between the
 * last point of one run and the first of the next; the first starts at m[0],
 * the last ends at m[n-1]. Every line has alpha, beta >= 0. Returns the
 * number of segments written to seg (at most n and maxseg), or -1 when
 * n < 1, m is not increasing, some t <= 0, or maxseg is too small. */
int cb_fit_segments(const double *m, const double *t, int n, double tol, struct cb_seg *seg,
                    int maxseg);

/* A tuning file's content (docs/tuning.md). Classes are COLLIE_CLASS_*
 * (0 shm, 1 tcp, src/coll/coll.h), kinds COLLIE_KIND_*, algorithms
 * COLLIE_ALGO_*. */
struct cb_tune_consts {
  int have[CB_CLASS_MAX]; /* class c's constants are written */
  double alpha_us[CB_CLASS_MAX], beta_us[CB_CLASS_MAX], gamma_us[CB_CLASS_MAX];
};
struct cb_tune_algo {
  int cls, nranks, kind, algo;
  int nseg;
  const struct cb_seg *seg;
};
/* Writes the '#'-comment lines of comment (may be NULL; several lines
 * allowed), the class constants, then one fit line per segment of each of
 * the na algorithms, numbers with 6 significant digits. Returns 0, or -1
 * (errno set) when writing fails or a class, kind or algorithm is out of
 * range. */
int cb_tune_write(FILE *f, const char *comment, const struct cb_tune_consts *c,
                  const struct cb_tune_algo *a, int na);

/* collie-bench --fit (tune_path NULL), --tune FILE (check_only 0) and
 * --tune-check FILE (check_only 1), run by every rank of comm (collective
 * calls: every rank passes the same arguments). --fit measures point-to-point
 * latency and bandwidth per transport class (a second communicator is made
 * for the other class when it can exist), the reduction kernels' cost per
 * dtype, and every algorithm of each collective selected in o over o's sweep,
 * and prints the fitted alpha, bandwidth and R^2 (rank 0, stdout). --tune
 * does the same and writes FILE (rank 0) in COLLIE_TUNING_FILE's format:
 * class constants and per-algorithm fit lines (docs/tuning.md).
 * --tune-check measures afresh and prints, per collective and size, the
 * default and tuned picks against the measured best. Blocks for the length
 * of the measurements. Returns the exit status, the same on every rank
 * (collie-bench's): 0; 1 when --tune-check finds a tuned pick more than
 * 10 % slower than the best, or a result was wrong (that point is left out
 * of the fits); 2 when FILE cannot be written or read; 3 when collie failed
 * (messages on stderr). */
/* collie-bench --model (cbench_model.c): the model's predictions for 8 to
 * max_ranks ranks at per_host a host, under this machine's constants and a
 * network of net_alpha_us and net_gbps between hosts; o's collectives,
 * sizes and dtype. No communicator. Returns the exit status. */
int cb_model_main(const struct cb_opts *o, int per_host, int max_ranks, double net_alpha_us,
                  double net_gbps);
int cb_fit_main(collie_comm_t *comm, const struct cb_opts *o, const char *tune_path,
                int check_only);

/* ---- cbench_cuda.c: --device cuda (the driver opened at run time) ---- */

/* Opens the driver and makes device local_rank % devices current; -1 with
 * the reason in err. */
int cb_cuda_open(int local_rank, char *err, size_t errlen);
const char *cb_cuda_name(void); /* the device's name */
void *cb_cuda_alloc(size_t n);  /* cuMemAlloc; NULL when out of memory */
void cb_cuda_free(void *p);
int cb_cuda_copy(void *dst, const void *src, size_t n); /* any direction; 0 or -1 */
double cb_cuda_copy_gbps(void); /* device-to-device copy bandwidth, GB/s (0: failed) */
double cb_cuda_launch_us(void); /* an empty kernel launched and waited for, us (< 0: failed) */

#endif /* COLLIE_CBENCH_H */
