/*
 * cbench_int.h - collie-bench's internals that its tests (tests/unit) reach:
 * the data patterns and buffers of one measured call (cbench_measure.c),
 * and the seams a test replaces to fake a measurement or corrupt a result.
 * The tools' code is a library (collie_bench_lib) the tests link; nothing
 * here is for other programs.
 */
#ifndef COLLIE_CBENCH_INT_H
#define COLLIE_CBENCH_INT_H

#include "cbench.h"
#include "core/introspect.h"

#define CB_PERIOD 1024 /* inputs repeat every CB_PERIOD elements */

/* What one point's data looks like. */
struct cb_meas_data {
  collie_dtype_t dt;
  collie_op_t op;
  int n;         /* ranks */
  double limit;  /* meas_limit(dt) */
  double modulo; /* data patterns run over [0, modulo) */
  /* reduction parameters (see meas_red_in) */
  int vmax, avg_base, prod_period;
  double expect[CB_PERIOD]; /* reduced value per residue of the element index */
};

/* One call, with its buffers. */
struct cb_meas_call {
  collie_comm_t *comm;
  int coll, rank, n, root;
  size_t count;
  collie_dtype_t dt;
  collie_op_t op;
  collie_opts_t opts;
  void *send, *recv; /* as passed (in place: aliased as the API defines) */
  /* alltoallv: counts[q] = count and displs[q] = q x count (n each), for both
   * sides; allocated once per point by cb_measure */
  const size_t *vcounts, *vdispls;
};

/* The send and receive areas cb_meas_buffers carves a call's buffers from
 * (grown as needed; a test points them at its own to play several ranks). */
extern void *cb_meas_sbuf, *cb_meas_rbuf;
/* Element i of buf (dtype dt) set to / read as a double. */
void cb_meas_put(collie_dtype_t dt, void *buf, size_t i, double v);
double cb_meas_get(collie_dtype_t dt, const void *buf, size_t i);
/* d's patterns for dtype dt, op, n ranks. */
void cb_meas_data_init(struct cb_meas_data *d, collie_dtype_t dt, collie_op_t op, int n);
/* Points c->send and c->recv at buffers for its count (in place: aliased). */
void cb_meas_buffers(struct cb_meas_call *c, int inplace);
/* Fills c's inputs with d's pattern. */
void cb_meas_fill(const struct cb_meas_call *c, const struct cb_meas_data *d);
/* Elements of c's result that differ from d's expectation (the first on stderr). */
long cb_meas_check(const struct cb_meas_call *c, const struct cb_meas_data *d, size_t bytes);
/* 1048576 -> "1,048,576" (cbench_output.c). */
void cb_out_thousands(char *buf, size_t len, size_t v);
/* Whether every rank can run algorithm a (cbench_fit.c). */
int cb_fit_can_run(const collie_comm_t *comm, const struct cb_opts *o,
                   const struct collie__algo *a);

/* Seams: the alltoall and alltoallv cb_measure runs (tests corrupt their
 * results), and the measurement --fit and --tune make (tests fake it). */
extern collie_result_t (*cb_meas_alltoall)(collie_comm_t *, const void *, void *, size_t,
                                           collie_dtype_t, const collie_opts_t *, collie_work_t **);
extern collie_result_t (*cb_meas_alltoallv)(collie_comm_t *, const void *, const size_t *,
                                            const size_t *, void *, const size_t *, const size_t *,
                                            collie_dtype_t, const collie_opts_t *,
                                            collie_work_t **);
extern int (*cb_fit_measure)(collie_comm_t *, const struct cb_opts *, int, int, size_t,
                             struct cb_point *);

#endif /* COLLIE_CBENCH_INT_H */
