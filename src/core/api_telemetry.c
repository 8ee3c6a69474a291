/*
 * api_telemetry.c - the public entry points of telemetry: training steps and
 * the timing log of a communicator tree, and the two logs a process gets
 * without a communicator (collie_timing_log_*, collie_comms_log_*), for jobs
 * whose communication runs on MPI, NCCL or Gloo. Each checks its arguments,
 * naming them, and hands over to src/telemetry, which owns the file formats:
 * a communicator's rows and these are written by the same code.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"

/* ---- Steps and the timing log of a communicator tree ---- */

collie_result_t
collie_step_begin(collie_comm_t *comm, int64_t step, int64_t epoch)
{
  API_TRY(collie__comm_check(comm, "collie_step_begin"));
  if (step < 1)
    return collie__err(COLLIE_INVALID_ARGUMENT, "collie_step_begin: step = %lld must be >= 1",
                       (long long)step);
  if (epoch < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT, "collie_step_begin: epoch = %lld must be >= 0",
                       (long long)epoch);
  return collie__tele_step_begin(comm->tele, step, epoch);
}

collie_result_t
collie_step_end(collie_comm_t *comm)
{
  API_TRY(collie__comm_check(comm, "collie_step_end"));
  return collie__tele_step_end(comm->tele);
}

/* The checks of a user-timed region, shared by both ways of recording one. */
static collie_result_t
api_timing_rec(const char *fn, const collie_timing_t *rec)
{
  if (!rec) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: rec is NULL", fn);
  if (!rec->operation || !*rec->operation)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: rec->operation is empty", fn);
  if (!(rec->end_counter >= rec->start_counter))
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: end_counter %.6f is not at or after start_counter %.6f", fn,
                       rec->end_counter, rec->start_counter);
  return COLLIE_SUCCESS;
}

collie_result_t
collie_timing_record(collie_comm_t *comm, const collie_timing_t *rec)
{
  API_TRY(collie__comm_check(comm, "collie_timing_record"));
  API_TRY(api_timing_rec("collie_timing_record", rec));
  collie__tele_user_record(comm->tele, rec->operation, rec->layer_name, rec->phase,
                           rec->message_size_bytes, rec->start_counter, rec->end_counter);
  return COLLIE_SUCCESS;
}

collie_result_t
collie_timing_open(collie_comm_t *comm, const char *dir)
{
  API_TRY(collie__comm_check(comm, "collie_timing_open"));
  if (!dir || !*dir)
    return collie__err(COLLIE_INVALID_ARGUMENT, "collie_timing_open: dir is %s",
                       dir ? "empty" : "NULL");
  return collie__tele_timing_open(comm->tele, dir);
}

collie_result_t
collie_timing_flush(collie_comm_t *comm)
{
  API_TRY(collie__comm_check(comm, "collie_timing_flush"));
  return collie__tele_timing_flush(comm->tele);
}

collie_result_t
collie_timing_close(collie_comm_t *comm)
{
  API_TRY(collie__comm_check(comm, "collie_timing_close"));
  collie__tele_timing_close(comm->tele);
  return COLLIE_SUCCESS;
}

/* ---- The timing log without a communicator ---- */

collie_result_t
collie_timing_log_open(const char *dir, int rank, int64_t queue, int64_t flush_ms,
                       collie_timing_log_t **out)
{
  static const char fn[] = "collie_timing_log_open";
  struct collie__params params;
  char host[COLLIE_HOSTID_LEN];
  if (!out) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: out is NULL", fn);
  *out = NULL;
  if (!dir || !*dir)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: dir is %s", fn, dir ? "empty" : "NULL");
  if (rank < 0) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: rank = %d must be >= 0", fn, rank);
  if (queue < 0 || flush_ms < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: queue = %lld and flush_ms = %lld must be >= 0 (0: the default)", fn,
                       (long long)queue, (long long)flush_ms);
  if (queue > COLLIE_TIMING_QUEUE_MAX)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: queue = %lld records is above %d (~250 bytes each, allocated at open)",
                       fn, (long long)queue, COLLIE_TIMING_QUEUE_MAX);
  API_TRY(collie__params_load(&params, NULL));
  collie__host_id(params.HOST_ID, host, sizeof(host));
  struct collie__timing_cfg cfg = {.rank = rank,
                                   .world_size = 0, /* unknown without a communicator */
                                   .host = host,
                                   .capacity = queue ? queue : params.TIMING_QUEUE,
                                   .flush_ms = flush_ms ? flush_ms : params.TIMING_FLUSH_MS};
  return collie__timing_open(dir, &cfg, out);
}

collie_result_t
collie_timing_log_record(collie_timing_log_t *log, const collie_timing_t *rec, int64_t iteration,
                         int64_t epoch)
{
  static const char fn[] = "collie_timing_log_record";
  if (!log) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: log is NULL", fn);
  API_TRY(api_timing_rec(fn, rec));
  if (iteration < 0 || epoch < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: iteration = %lld and epoch = %lld must be >= 0", fn,
                       (long long)iteration, (long long)epoch);
  struct collie__timing_rec row;
  collie__tele_row_init(&row, rec->operation, rec->message_size_bytes, -1, rec->layer_name,
                        rec->phase);
  row.iteration = iteration;
  row.epoch = epoch;
  row.start = rec->start_counter;
  row.end = rec->end_counter;
  collie__timing_push(log, &row);
  return COLLIE_SUCCESS;
}

collie_result_t
collie_timing_log_flush(collie_timing_log_t *log)
{
  if (!log) return collie__err(COLLIE_INVALID_ARGUMENT, "collie_timing_log_flush: log is NULL");
  return collie__timing_flush(log);
}

void
collie_timing_log_close(collie_timing_log_t *log)
{
  collie__timing_close(log);
}

/* ---- comms.csv without a communicator ---- */

uint64_t
collie_wire_bytes(collie_collective_t coll, int p, uint64_t size)
{
  return collie__wire_bytes((int)coll, p, size);
}

collie_result_t
collie_comms_log_open(const char *dir, int rank, int world_size, collie_comms_log_t **out)
{
  static const char fn[] = "collie_comms_log_open";
  char path[1200];
  if (!out) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: out is NULL", fn);
  *out = NULL;
  if (rank < 0) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: rank = %d must be >= 0", fn, rank);
  if (world_size < 1 || rank >= world_size)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: world_size = %d must be >= 1 and above rank = %d", fn, world_size,
                       rank);
  if (rank != 0) return collie__steps_open(NULL, world_size, out); /* numbers only, no file */
  if (!dir || !*dir) dir = ".";
  if (strlen(dir) > sizeof(path) - 16)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: dir is %zu bytes long, above %zu", fn,
                       strlen(dir), sizeof(path) - 16);
  if (collie__mkdir_one(dir) != 0)
    return collie__err_errno(COLLIE_SYSTEM_ERROR,
                             errno == ENOENT ? "%s: cannot create directory %s: its parent does "
                                               "not exist (one level is made)"
                                             : "%s: cannot create directory %s",
                             fn, dir);
  snprintf(path, sizeof(path), "%s/comms.csv", dir);
  return collie__steps_open(path, world_size, out);
}

collie_result_t
collie_comms_log_step_begin(collie_comms_log_t *log, int64_t step, int64_t epoch)
{
  static const char fn[] = "collie_comms_log_step_begin";
  if (!log) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: log is NULL", fn);
  if (step < 1)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: step = %lld must be >= 1", fn,
                       (long long)step);
  if (epoch < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: epoch = %lld must be >= 0", fn,
                       (long long)epoch);
  return collie__steps_begin(log, step, epoch);
}

collie_result_t
collie_comms_log_step_end(collie_comms_log_t *log)
{
  if (!log) return collie__err(COLLIE_INVALID_ARGUMENT, "collie_comms_log_step_end: log is NULL");
  return collie__steps_end(log);
}

collie_result_t
collie_comms_log_step(collie_comms_log_t *log, int64_t *step, int64_t *epoch)
{
  if (!log) return collie__err(COLLIE_INVALID_ARGUMENT, "collie_comms_log_step: log is NULL");
  int64_t s, e;
  collie__steps_numbers(log, &s, &e);
  if (step) *step = s;
  if (epoch) *epoch = e;
  return COLLIE_SUCCESS;
}

/* The checks shared by charge and record. */
static collie_result_t
api_comms_call(const char *fn, collie_comms_log_t *log, collie_collective_t coll, int category,
               int group_size)
{
  if (!log) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: log is NULL", fn);
  if ((unsigned)coll >= (unsigned)COLLIE_COLL_COUNT_)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: coll = %d is not a collie_collective_t value",
                       fn, (int)coll);
  if (category < 0 || category >= collie__steps_categories(log)) {
    const char *name = collie__category_name(category);
    if (name)
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "%s: category = %d ('%s') was registered after this log was opened, so "
                         "its comms.csv has no column for it; register categories before opening",
                         fn, category, name);
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: category = %d is neither a COLLIE_CAT_* value nor a registered "
                       "category",
                       fn, category);
  }
  if (group_size < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s: group_size = %d must be >= 1 (0: the log's world size)", fn,
                       group_size);
  return COLLIE_SUCCESS;
}

collie_result_t
collie_comms_log_charge(collie_comms_log_t *log, collie_collective_t coll, int category,
                        int group_size, uint64_t size, collie_comms_charge_t **charge)
{
  static const char fn[] = "collie_comms_log_charge";
  if (!charge) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: charge is NULL", fn);
  *charge = NULL;
  API_TRY(api_comms_call(fn, log, coll, category, group_size));
  int p = group_size ? group_size : collie__steps_world_size(log);
  int64_t step, epoch;
  *charge = collie__steps_charge(log, (int)coll, category, collie__wire_bytes((int)coll, p, size),
                                 &step, &epoch);
  return COLLIE_SUCCESS;
}

collie_result_t
collie_comms_log_done(collie_comms_log_t *log, collie_comms_charge_t *charge,
                      collie_collective_t coll, int64_t elapsed_ns)
{
  static const char fn[] = "collie_comms_log_done";
  if (!log) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: log is NULL", fn);
  if ((unsigned)coll >= (unsigned)COLLIE_COLL_COUNT_)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: coll = %d is not a collie_collective_t value",
                       fn, (int)coll);
  if (elapsed_ns < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: elapsed_ns = %lld must be >= 0", fn,
                       (long long)elapsed_ns);
  collie__steps_done(log, charge, (int)coll, elapsed_ns);
  return COLLIE_SUCCESS;
}

collie_result_t
collie_comms_log_record(collie_comms_log_t *log, collie_collective_t coll, int category,
                        int group_size, uint64_t size, int64_t elapsed_ns)
{
  static const char fn[] = "collie_comms_log_record";
  collie_comms_charge_t *charge;
  if (elapsed_ns < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: elapsed_ns = %lld must be >= 0", fn,
                       (long long)elapsed_ns);
  API_TRY(api_comms_call(fn, log, coll, category, group_size));
  int p = group_size ? group_size : collie__steps_world_size(log);
  int64_t step, epoch;
  charge = collie__steps_charge(log, (int)coll, category, collie__wire_bytes((int)coll, p, size),
                                &step, &epoch);
  collie__steps_done(log, charge, (int)coll, elapsed_ns);
  return COLLIE_SUCCESS;
}

void
collie_comms_log_close(collie_comms_log_t *log)
{
  collie__steps_close(log);
}
