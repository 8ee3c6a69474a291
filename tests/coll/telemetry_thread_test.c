/*
 * telemetry_thread_test.c - the timing log opened, flushed and closed by one
 * thread while another records into it and a third runs collectives: no
 * crash, no deadlock, no data race (the suite runs this under TSan), one
 * header however often the file is reopened, and every row accounted for
 * (written or counted as dropped).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

struct tt_arg {
  collie_comm_t *comm;
  char dir[512];
  _Atomic int stop;
  long recorded;
};

static void *
tt_recorder(void *p)
{
  struct tt_arg *a = p;
  collie_timing_t rec = {.operation = "USER", .start_counter = 1.0, .end_counter = 1.25};
  while (!atomic_load(&a->stop)) {
    ASSERT_OK(collie_timing_record(a->comm, &rec));
    a->recorded++;
  }
  return NULL;
}

static void *
tt_toggler(void *p)
{
  struct tt_arg *a = p;
  for (int i = 0; i < 200; i++) {
    ASSERT_OK(collie_timing_flush(a->comm));
    ASSERT_OK(collie_timing_close(a->comm));
    ASSERT_OK(collie_timing_open(a->comm, a->dir));
  }
  return NULL;
}

/* Lines of path (header included). */
static long
tt_lines(const char *path, long *headers)
{
  FILE *f = fopen(path, "r");
  ASSERTF(f, "cannot open %s", path);
  char line[1024];
  long n = 0;
  *headers = 0;
  while (fgets(line, sizeof(line), f)) {
    n++;
    if (!strncmp(line, "timestamp,", 10)) (*headers)++;
  }
  fclose(f);
  return n;
}

TEST_IMPL(telemetry_timing_threads)
{
  struct tt_arg a = {0};
  snprintf(a.dir, sizeof(a.dir), "%s/tt", test_dir());
  setenv("COLLIE_TIMING_QUEUE", "64", 1);
  setenv("COLLIE_TIMING_FLUSH_MS", "1", 1);
  a.comm = test_comm();
  ASSERT_OK(collie_timing_open(a.comm, a.dir));
  pthread_t rec, tog;
  ASSERT(pthread_create(&rec, NULL, tt_recorder, &a) == 0);
  ASSERT(pthread_create(&tog, NULL, tt_toggler, &a) == 0);
  float x[4] = {1, 2, 3, 4};
  long ops = 0;
  for (int i = 0; i < 2000; i++, ops++)
    ASSERT_OK(collie_allreduce(a.comm, x, x, 4, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  pthread_join(tog, NULL);
  atomic_store(&a.stop, 1);
  pthread_join(rec, NULL);
  ASSERT_OK(collie_timing_close(a.comm));
  char path[600];
  snprintf(path, sizeof(path), "%s/timing-rank%d.csv", a.dir, test_rank());
  long headers, rows = tt_lines(path, &headers) - 1;
  ASSERTF(headers == 1, "%ld header lines after 200 reopenings", headers);
  /* Records made while the log was closed are not kept; every row written is
   * one of ours. */
  ASSERTF(rows > 0 && rows <= a.recorded + ops, "%ld rows for %ld records and %ld ops", rows,
          a.recorded, ops);
  ASSERT_OK(collie_comm_destroy(a.comm));
}
