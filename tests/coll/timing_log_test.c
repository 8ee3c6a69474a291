/* timing_log_test.c - collie_timing_log_*: the timing log with no
 * communicator writes timing-rank{rank}.csv with the iteration and epoch the
 * caller gives; a communicator of the process logging to the same directory
 * and rank shares the file (one writer: the .meta counts every row); and the
 * errors, each naming what was wrong. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/csv_read.h"
#include "runner.h"

/* The row of dir/timing-rank{rank}.csv whose operation is op (-1: none). */
static int
tl_find(const struct csv_table *t, const char *op)
{
  for (int r = 0; r < t->nrows; r++)
    if (!strcmp(csv_cell(t, r, "operation"), op)) return r;
  return -1;
}

/* No communicator at all: rank 5 of a job that runs on something else. */
TEST_IMPL(timing_log_alone)
{
  const char *dir = test_path("tl");
  collie_timing_log_t *log = NULL;
  ASSERT_OK(collie_timing_log_open(dir, 5, 0, 0, &log));
  double t0 = csv_now_mono();
  collie_timing_t rec = {.operation = "ALLREDUCE",
                         .layer_name = "layer1",
                         .phase = "dense",
                         .message_size_bytes = 110280000,
                         .start_counter = t0 - 0.005234,
                         .end_counter = t0};
  ASSERT_OK(collie_timing_log_record(log, &rec, 100, 2));
  rec.operation = "MPI_Bcast";
  ASSERT_OK(collie_timing_log_record(log, &rec, 0, 0));
  ASSERT_OK(collie_timing_log_flush(log));
  collie_timing_log_close(log);

  char path[600];
  snprintf(path, sizeof(path), "%s/timing-rank5.csv", dir);
  struct csv_table t;
  ASSERTF(csv_load(path, &t) == 0, "%s: %s", path, strerror(errno));
  ASSERT(t.nrows == 2);
  int r = tl_find(&t, "ALLREDUCE");
  ASSERT(r >= 0);
  ASSERT(!strcmp(csv_cell(&t, r, "iteration"), "100") && !strcmp(csv_cell(&t, r, "epoch"), "2"));
  ASSERT(!strcmp(csv_cell(&t, r, "layer_name"), "layer1"));
  ASSERT(!strcmp(csv_cell(&t, r, "message_size_bytes"), "110280000"));
  ASSERTF(!strcmp(csv_cell(&t, r, "elapsed_ms"), "5.234"), "elapsed_ms %s",
          csv_cell(&t, r, "elapsed_ms"));
  csv_free(&t);

  /* The errors. */
  collie_timing_log_t *bad = NULL;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "dir is NULL", collie_timing_log_open(NULL, 0, 0, 0, &bad));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "dir is empty", collie_timing_log_open("", 0, 0, 0, &bad));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "rank = -1", collie_timing_log_open(dir, -1, 0, 0, &bad));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "queue = -5", collie_timing_log_open(dir, 0, -5, 0, &bad));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "queue = 100000000",
            collie_timing_log_open(dir, 0, 100000000, 0, &bad));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "out is NULL", collie_timing_log_open(dir, 0, 0, 0, NULL));
  ASSERT_RC(COLLIE_SYSTEM_ERROR, "/proc/collie-no",
            collie_timing_log_open("/proc/collie-no", 0, 0, 0, &bad));
  ASSERT(bad == NULL);
  ASSERT_OK(collie_timing_log_open(dir, 6, 16, 50, &log));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "log is NULL", collie_timing_log_record(NULL, &rec, 0, 0));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "iteration = -1", collie_timing_log_record(log, &rec, -1, 0));
  rec.operation = "";
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "operation is empty",
            collie_timing_log_record(log, &rec, 0, 0));
  rec.operation = "X";
  rec.end_counter = rec.start_counter - 1;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "not at or after", collie_timing_log_record(log, &rec, 0, 0));
  collie_timing_log_close(log);
  collie_timing_log_close(NULL);
}

/* A communicator logging to the same directory (COLLIE_TIMING_LOG) and the
 * standalone log of the same rank share one log: its rows and the
 * communicator's operations are in one file, and the .meta sidecar, which
 * one writer keeps, counts all of them. */
TEST_IMPL(timing_log_shared_with_comm)
{
  const char *dir = test_path("shared");
  setenv("COLLIE_TIMING_LOG", dir, 1);
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  collie_timing_log_t *log = NULL;
  ASSERT_OK(collie_timing_log_open(dir, r, 0, 0, &log));
  double t0 = csv_now_mono();
  collie_timing_t rec = {
      .operation = "USER_REGION", .start_counter = t0 - 0.001, .end_counter = t0};
  ASSERT_OK(collie_timing_log_record(log, &rec, 7, 1));
  int32_t v = 1;
  ASSERT_OK(collie_allreduce(comm, &v, &v, 1, COLLIE_INT32, COLLIE_SUM, NULL, NULL));
  ASSERT_OK(collie_comm_destroy(comm));
  ASSERT_OK(collie_timing_log_record(log, &rec, 8, 1)); /* still open: the log outlives the comm */
  collie_timing_log_close(log);

  char path[600];
  snprintf(path, sizeof(path), "%s/timing-rank%d.csv", dir, r);
  struct csv_table t;
  ASSERTF(csv_load(path, &t) == 0, "%s: %s", path, strerror(errno));
  int user = 0, ops = 0;
  for (int i = 0; i < t.nrows; i++) {
    if (!strcmp(csv_cell(&t, i, "operation"), "USER_REGION"))
      user++;
    else if (!strcmp(csv_cell(&t, i, "operation"), "ALLREDUCE"))
      ops++;
  }
  ASSERTF(user == 2 && ops >= 1, "rows: %d user, %d allreduce", user, ops);
  snprintf(path, sizeof(path), "%s/timing-rank%d.meta", dir, r);
  char *meta = csv_slurp(path, NULL), v2[64];
  ASSERT(meta && csv_meta_get(meta, "records_written", v2, sizeof(v2)) == 0);
  ASSERTF(strtol(v2, NULL, 10) == t.nrows, "records_written=%s, rows %d: two writers", v2, t.nrows);
  free(meta);
  csv_free(&t);
}
