/*
 * telemetry_cost.c - what telemetry costs the thread that runs collectives.
 * A one-rank communicator makes an allreduce pure library overhead (no peer,
 * no wait), so the difference between configurations is the price of the
 * hooks: comms.csv off, comms.csv on outside a step, on inside a step, and
 * the timing log on. Then collie_timing_record on its own: with the log
 * open (queue push), with the queue full (the drop path) and with no log
 * (a no-op). Runs alone, no launcher needed:
 *
 *   build/bench/telemetry_cost [iterations]      (default 1000000)
 *
 * Each figure is the best of 5 runs of `iterations` calls, in ns per call.
 * Files go to a temporary directory that is removed at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collie.h"

static double
tc_now_ns(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

#define TC_CHECK(call)                                                                             \
  do {                                                                                             \
    if ((call) != COLLIE_SUCCESS) {                                                                \
      fprintf(stderr, "telemetry_cost: %s: %s\n", #call, collie_last_error());                     \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static collie_comm_t *
tc_comm(const char *comms_log, const char *timing_dir, const char *queue)
{
  collie_comm_t *c;
  setenv("COLLIE_COMMS_LOG", comms_log, 1);
  if (timing_dir)
    setenv("COLLIE_TIMING_LOG", timing_dir, 1);
  else
    unsetenv("COLLIE_TIMING_LOG");
  setenv("COLLIE_TIMING_QUEUE", queue, 1);
  collie_config_t cfg = COLLIE_CONFIG_INIT;
  cfg.rank = 0;
  cfg.world_size = 1;
  TC_CHECK(collie_comm_init_config(&cfg, &c));
  return c;
}

/* Best ns per 8-byte allreduce over 5 runs of n calls. */
static double
tc_allreduce(collie_comm_t *c, long n, int in_step)
{
  float x[2] = {1, 2};
  double best = 1e30;
  for (int run = 0; run < 5; run++) {
    if (in_step) TC_CHECK(collie_step_begin(c, run + 1, 0));
    double t0 = tc_now_ns();
    for (long i = 0; i < n; i++)
      TC_CHECK(collie_allreduce(c, x, x, 2, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
    double per = (tc_now_ns() - t0) / (double)n;
    if (in_step) TC_CHECK(collie_step_end(c));
    if (per < best) best = per;
  }
  return best;
}

/* Best ns per collie_timing_record over 5 runs of n calls (flushing between runs). */
static double
tc_record(collie_comm_t *c, long n)
{
  collie_timing_t rec = {.operation = "COMPRESS",
                         .layer_name = "layer.0",
                         .message_size_bytes = 64,
                         .start_counter = 1.0,
                         .end_counter = 1.001};
  double best = 1e30;
  for (int run = 0; run < 5; run++) {
    TC_CHECK(collie_timing_flush(c));
    double t0 = tc_now_ns();
    for (long i = 0; i < n; i++) TC_CHECK(collie_timing_record(c, &rec));
    double per = (tc_now_ns() - t0) / (double)n;
    if (per < best) best = per;
  }
  return best;
}

int
main(int argc, char **argv)
{
  long n = argc > 1 ? atol(argv[1]) : 1000000;
  if (n <= 0) {
    fprintf(stderr, "usage: telemetry_cost [iterations > 0]\n");
    return 2;
  }
  char dir[] = "/tmp/collie-telemetry-cost-XXXXXX", timing[64], big[32];
  if (!mkdtemp(dir)) {
    perror("telemetry_cost: mkdtemp");
    return 1;
  }
  snprintf(timing, sizeof(timing), "%s/timing", dir);
  snprintf(big, sizeof(big), "%ld", n + 16);
  setenv("COLLIE_LOG_DIR", dir, 1);
  setenv("COLLIE_FR_SIZE", "2000", 1);

  printf("# telemetry_cost: %ld calls per run, best of 5, ns per call (1 rank: pure overhead)\n",
         n);
  printf("%-44s %10s %10s\n", "configuration", "ns/call", "vs off");
  collie_comm_t *c = tc_comm("0", NULL, big);
  double off = tc_allreduce(c, n, 0);
  printf("%-44s %10.1f %10s\n", "allreduce 8 B, comms.csv off, no timing log", off, "-");
  double off_step = tc_allreduce(c, n, 1);
  printf("%-44s %10.1f %+10.1f\n", "  same, inside a step (log off)", off_step, off_step - off);
  TC_CHECK(collie_comm_destroy(c));

  c = tc_comm("1", NULL, big);
  double on = tc_allreduce(c, n, 0);
  printf("%-44s %10.1f %+10.1f\n", "allreduce 8 B, comms.csv on, outside a step", on, on - off);
  double step = tc_allreduce(c, n, 1);
  printf("%-44s %10.1f %+10.1f\n", "allreduce 8 B, comms.csv on, inside a step", step, step - off);
  TC_CHECK(collie_comm_destroy(c));

  c = tc_comm("1", timing, big);
  double timed = tc_allreduce(c, n / 5 > 0 ? n / 5 : 1, 1);
  printf("%-44s %10.1f %+10.1f\n", "allreduce 8 B, comms.csv + timing log on", timed, timed - off);
  double rec = tc_record(c, n);
  printf("%-44s %10.1f\n", "collie_timing_record, log open", rec);
  TC_CHECK(collie_comm_destroy(c));

  c = tc_comm("1", timing, "1");
  collie_timing_t one = {.operation = "X", .start_counter = 1, .end_counter = 2};
  TC_CHECK(collie_timing_record(c, &one)); /* fills the queue of 1 */
  double full = tc_record(c, n);
  printf("%-44s %10.1f\n", "collie_timing_record, queue full (dropped)", full);
  TC_CHECK(collie_timing_close(c));
  double closed = tc_record(c, n);
  printf("%-44s %10.1f\n", "collie_timing_record, no log open (no-op)", closed);
  TC_CHECK(collie_comm_destroy(c));

  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "telemetry_cost: could not remove %s\n", dir);
  return 0;
}
