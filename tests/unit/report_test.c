/*
 * report_test.c - `collie-report hang` run as a black box on dumps written
 * here: hand-made JSON for 4 ranks in the situations the tool must explain
 * (a rank that never joined, all done, a rank that failed), bad input
 * (malformed file, missing directory), and dumps written by the recorder
 * itself so the tool and the writer cannot drift apart. Each verdict is
 * checked word for word, with the exit status (0 nothing stuck, 1 stuck or
 * failed, 2 bad input).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "runner.h"
#include "telemetry/telemetry.h"

#define RT_BIN COLLIE_BUILD_DIR "/collie-report"

/* Runs collie-report with args (a shell fragment); returns its exit status and
 * sets *out to stdout+stderr (caller frees). */
static int
rt_run(const char *args, char **out)
{
  char cmd[2048];
  snprintf(cmd, sizeof(cmd), "'%s' %s 2>&1", RT_BIN, args);
  return test_shell(cmd, out);
}

/* Writes rank r's dump of communicator "00000000000000aa" (4 ranks) with
 * ops_json, extra (",\"key\":value" fields, or "") after "reason", written
 * at time (ISO 8601). */
static void
rt_dump_at(int r, const char *extra, const char *time, const char *ops_json)
{
  char path[1024];
  snprintf(path, sizeof(path), "%s/flight-rank%d-00000000000000aa.json", test_dir(), r);
  FILE *f = fopen(path, "w");
  ASSERT(f != NULL);
  fprintf(f,
          "{\"version\":1,\"rank\":%d,\"size\":4,\"comm\":\"00000000000000aa\","
          "\"reason\":\"timeout\"%s,\"time\":\"%s\",\"pid\":%d,\"ops\":[%s]}\n",
          r, extra, time, 100 + r, ops_json);
  fclose(f);
}

static void
rt_dump_with(int r, const char *extra, const char *ops_json)
{
  rt_dump_at(r, extra, "2026-11-26T00:00:00.000000Z", ops_json);
}

static void
rt_dump(int r, const char *ops_json)
{
  rt_dump_with(r, "", ops_json);
}

#define RT_OP(id, seq, kind, bytes, state)                                                         \
  "{\"id\":" #id ",\"seq\":" #seq ",\"kind\":\"" kind "\",\"dtype\":\"float32\",\"op\":\"sum\","   \
  "\"count\":1,\"bytes\":" #bytes ",\"root\":-1,\"algo\":\"ring\",\"state\":\"" state "\","        \
  "\"t_queued\":1,\"t_started\":2,\"t_done\":null}"
#define RT_BCAST4 RT_OP(3, 4, "broadcast", 1024, "completed")
#define RT_AR5(state) RT_OP(4, 5, "allreduce", 4194304, state)

static void
rt_expect(const char *args, int code, const char *text)
{
  char *out;
  int rc = rt_run(args, &out);
  ASSERTF(rc == code, "collie-report %s: exit %d, expected %d; output:\n%s", args, rc, code, out);
  ASSERTF(strstr(out, text) != NULL, "collie-report %s: output lacks \"%s\":\n%s", args, text, out);
  free(out);
}

static char *
rt_dir_arg(void)
{
  static char buf[1100];
  snprintf(buf, sizeof(buf), "hang '%s'", test_dir());
  return buf;
}

TEST_IMPL(report_hang_never_joined)
{
  rt_dump(0, RT_BCAST4 "," RT_AR5("started"));
  rt_dump(1, RT_BCAST4 "," RT_AR5("started"));
  rt_dump(2, RT_BCAST4);
  rt_dump(3, RT_BCAST4 "," RT_AR5("started"));
  rt_expect(rt_dir_arg(), 1, "communicator 00000000000000aa: 4 ranks, 4 dumps\n");
  rt_expect(rt_dir_arg(), 1,
            "  stuck: allreduce #5 (4 MiB float32): ranks 0,1,3 started; rank 2 never joined: "
            "its last op was broadcast #4 (completed)\n");
}

TEST_IMPL(report_hang_all_completed)
{
  for (int r = 0; r < 4; r++) rt_dump(r, RT_BCAST4 "," RT_AR5("completed"));
  rt_expect(rt_dir_arg(), 0,
            "  all ranks completed everything (last: allreduce #5 (4 MiB float32))\n");
}

TEST_IMPL(report_hang_rank_failed)
{
  rt_dump(0, RT_BCAST4 "," RT_AR5("started"));
  rt_dump(1, RT_BCAST4 "," RT_AR5("started"));
  rt_dump(2, RT_BCAST4 "," RT_AR5("failed"));
  rt_dump(3, RT_BCAST4 "," RT_AR5("started"));
  rt_expect(rt_dir_arg(), 1,
            "  stuck: allreduce #5 (4 MiB float32): ranks 0,1,3 started; rank 2 failed\n");
}

TEST_IMPL(report_hang_missing_rank_and_queued)
{
  /* Rank 1 left no dump; rank 3's worker has not reached #5 (queued behind #4). */
  rt_dump(0, RT_BCAST4 "," RT_AR5("completed"));
  rt_dump(2, RT_BCAST4 "," RT_AR5("started"));
  rt_dump(3, RT_OP(3, 4, "broadcast", 1024, "started") "," RT_AR5("queued"));
  rt_expect(rt_dir_arg(), 1, "communicator 00000000000000aa: 4 ranks, 3 dumps\n");
  rt_expect(rt_dir_arg(), 1,
            "  stuck: allreduce #5 (4 MiB float32): rank 2 started; rank 3 queued it; "
            "rank 0 completed; rank 1 left no dump\n");
}

/* A split's dumps carry each rank's world rank: the verdict names the
 * missing rank as the job knows it, and a map that does not fit is refused. */
TEST_IMPL(report_hang_split_world_ranks)
{
  const char *map = ",\"world_ranks\":[1,3,5,7]";
  rt_dump_with(0, map, RT_BCAST4 "," RT_AR5("failed"));
  rt_dump_with(2, map, RT_BCAST4 "," RT_AR5("failed"));
  rt_dump_with(3, map, RT_BCAST4 "," RT_AR5("failed"));
  rt_expect(rt_dir_arg(), 1,
            "communicator 00000000000000aa: 4 ranks (world ranks 1,3,5,7), 3 dumps\n");
  rt_expect(rt_dir_arg(), 1,
            "  stuck: allreduce #5 (4 MiB float32): ranks 0,2,3 failed; rank 1 (world rank 3) "
            "left no dump\n");
  /* The identity map (the world itself) reads as before. */
  const char *same = ",\"world_ranks\":[0,1,2,3]";
  for (int r = 0; r < 4; r += 2) rt_dump_with(r, same, RT_BCAST4 "," RT_AR5("failed"));
  rt_dump_with(3, same, RT_BCAST4 "," RT_AR5("failed"));
  rt_expect(rt_dir_arg(), 1, "communicator 00000000000000aa: 4 ranks, 3 dumps\n");
  rt_expect(rt_dir_arg(), 1, "; rank 1 left no dump\n");
  rt_dump_with(0, ",\"world_ranks\":[1,3]", RT_BCAST4);
  rt_expect(rt_dir_arg(), 2,
            "flight-rank0-00000000000000aa.json: \"world_ranks\": expected an array of 4 integers "
            "(one per rank)");
  rt_dump_with(0, ",\"world_ranks\":[1,3,-5,7]", RT_BCAST4);
  rt_expect(rt_dir_arg(), 2,
            "flight-rank0-00000000000000aa.json: \"world_ranks\"[2]: expected a non-negative "
            "integer");
}

TEST_IMPL(report_hang_malformed)
{
  rt_dump(0, RT_BCAST4);
  char path[1024];
  snprintf(path, sizeof(path), "%s/flight-rank1-00000000000000aa.json", test_dir());
  FILE *f = fopen(path, "w");
  ASSERT(f != NULL);
  fputs("{\"version\":1,\"rank\":1,\"size\":4,\"comm\":\"00000000000000aa\",\"ops\":[{\"id\":", f);
  fclose(f);
  rt_expect(rt_dir_arg(), 2,
            "flight-rank1-00000000000000aa.json: line 1, column 71: unexpected end");
  /* Valid JSON, wrong content: named by field. */
  rt_dump(1, "{\"id\":1,\"seq\":1,\"kind\":\"allreduce\",\"state\":\"stuck\"}");
  rt_expect(rt_dir_arg(), 2,
            "flight-rank1-00000000000000aa.json: ops[0].\"state\": \"stuck\" is not queued, "
            "started, completed or failed");
  rt_dump(1, "{\"id\":1,\"kind\":\"allreduce\",\"state\":\"started\"}");
  rt_expect(rt_dir_arg(), 2, "flight-rank1-00000000000000aa.json: ops[0].\"seq\": missing");
  f = fopen(path, "w");
  fputs("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", f);
  fclose(f);
  rt_expect(rt_dir_arg(), 2, "nested deeper than 64");
}

TEST_IMPL(report_hang_bad_usage)
{
  char args[1200];
  snprintf(args, sizeof(args), "hang '%s/nowhere'", test_dir());
  rt_expect(args, 2, "cannot open directory");
  snprintf(args, sizeof(args), "hang '%s'", test_dir());
  rt_expect(args, 2, "no flight-rank*.json dump in");
  rt_expect("hang", 2, "expected one directory");
  rt_expect("frobnicate", 2, "unknown command 'frobnicate'");
  rt_expect("", 2, "usage: collie-report");
  rt_expect("--help", 0, "hang");
  rt_expect("hang --help", 0, "usage: collie-report hang DIR");
}

TEST_IMPL(report_hang_from_recorder)
{
  /* Four ranks' recorders in one process, two communicators: the world (all
   * four at #2, rank 3 behind at #1) and a split of world ranks {2,3} that
   * completed (its recorders know their world ranks). */
  const uint64_t world = 0x1111, pair = 0x2222;
  for (int r = 0; r < 4; r++) {
    struct collie__flight *fr = collie__flight_new(8, r, 4, world);
    ASSERT(fr != NULL);
    for (uint32_t s = 1; s <= (r == 3 ? 1u : 2u); s++) {
      struct collie__flight_op op = {.seq = s,
                                     .kind = s == 1 ? "barrier" : "allgather",
                                     .dtype = s == 1 ? NULL : "int32",
                                     .count = 256,
                                     .bytes = s == 1 ? 0 : 1536,
                                     .root = -1};
      int64_t id = collie__flight_queued(fr, &op);
      collie__flight_state(fr, id, COLLIE_FR_STARTED, "ring");
      if (s == 1) collie__flight_state(fr, id, COLLIE_FR_COMPLETED, NULL);
    }
    ASSERT_OK(collie__flight_dump(fr, test_dir(), "timeout"));
    collie__flight_free(fr);
  }
  for (int r = 0; r < 2; r++) {
    struct collie__flight *fr = collie__flight_new(8, r, 2, pair);
    const int in_world[2] = {2, 3};
    collie__flight_set_world(fr, in_world);
    struct collie__flight_op op = {.seq = 1,
                                   .kind = "reduce",
                                   .dtype = "float64",
                                   .op = "max",
                                   .count = 3,
                                   .bytes = 24,
                                   .root = 0};
    collie__flight_state(fr, collie__flight_queued(fr, &op), COLLIE_FR_COMPLETED, "tree");
    ASSERT_OK(collie__flight_dump(fr, test_dir(), "user"));
    collie__flight_free(fr);
  }
  rt_expect(rt_dir_arg(), 1,
            "communicator 0000000000001111: 4 ranks, 4 dumps\n"
            "  stuck: allgather #2 (1.5 KiB int32): ranks 0,1,2 started; rank 3 never joined: its "
            "last op was barrier #1 (completed)\n"
            "communicator 0000000000002222: 2 ranks (world ranks 2,3), 2 dumps\n"
            "  all ranks completed everything (last: reduce #1 (24 B float64))\n");
}

TEST_IMPL(report_hang_overwritten_and_p2p)
{
  /* Rank 1's ring no longer holds #5 (its oldest is a queued #6); rank 2 recorded nothing;
   * rank 3 also has a send that never finished, which is listed but never picks the verdict. */
  rt_dump(0, RT_AR5("started"));
  rt_dump(1, RT_OP(9, 6, "allreduce", 4194304, "queued"));
  rt_dump(2, "");
  rt_dump(3,
          "{\"id\":1,\"seq\":2,\"kind\":\"send\",\"dtype\":\"float32\",\"op\":null,\"count\":256,"
          "\"bytes\":1024,\"root\":0,\"algo\":null,\"state\":\"started\"}," RT_AR5("started"));
  rt_expect(rt_dir_arg(), 1,
            "  stuck: allreduce #5 (4 MiB float32): ranks 0,3 started; rank 1 moved past it (its "
            "record was overwritten); rank 2 never joined: it recorded no operation\n"
            "  rank 3: send #2 (1 KiB float32) with peer 0 started\n");
}

/* Fails unless collie-report's output for args lacks text. */
static void
rt_expect_absent(const char *args, const char *text)
{
  char *out;
  rt_run(args, &out);
  ASSERTF(strstr(out, text) == NULL, "collie-report %s: output has \"%s\":\n%s", args, text, out);
  free(out);
}

/* Rank r's failed dump, hosts h0..h2 placed by host_of, failing ms milliseconds
 * after a second with error. */
static void
rt_dump_cut(int r, const char *host_of, int ms, const char *error)
{
  char extra[1024], time[64];
  snprintf(extra, sizeof(extra),
           ",\"hosts\":[\"h0\",\"h1\",\"h2\"],\"host_of\":%s,\"error\":\"%s\"", host_of, error);
  snprintf(time, sizeof(time), "2026-11-26T00:00:01.%06dZ", ms * 1000);
  rt_dump_at(r, extra, time, RT_BCAST4 "," RT_AR5("failed"));
}

#define RT_WAITED(w, h)                                                                            \
  "allreduce #5: timed out waiting for recv from rank " #w " (world rank " #w ", host " h ")"

/* A lost host link: every rank dumps a failure naming a rank on another host. */
TEST_IMPL(report_hang_network)
{
  /* Hosts h0 {0,1}, h1 {2}, h2 {3}; h1 is cut off. Its rank fails first;
   * rank 1's error quotes its neighbour's first (the last rank named is the
   * root cause). */
  const char *three = "[0,0,1,2]";
  rt_dump_cut(2, three, 0, RT_WAITED(3, "h2"));
  rt_dump_cut(3, three, 50, RT_WAITED(2, "h1"));
  rt_dump_cut(0, three, 100, RT_WAITED(2, "h1"));
  rt_dump_cut(
      1, three, 110,
      "shm: rank 0 (world rank 0, pid 100) aborted its communicator, after: " RT_WAITED(2, "h1"));
  rt_expect(rt_dir_arg(), 1,
            "  rank 2 (host h1): allreduce #5: timed out waiting for recv from rank 3 (world rank "
            "3, host h2)\n");
  rt_expect(rt_dir_arg(), 1,
            "network: every rank failed naming a rank on another host (4 failures): host h1 "
            "accounts for every one: it lost its link to the other hosts (a cut link, a down "
            "interface or a partition), not a rank\n");
  /* h2 is cut off, but rank 0's deadline came first: it names rank 2 (h1),
   * which was alive and still waiting on h2 when rank 0 gave up. Without
   * the times, h1 would be on every edge and alone blamed. */
  rt_dump_cut(0, three, 0, RT_WAITED(2, "h1"));
  rt_dump_cut(1, three, 10, "shm: rank 0 (world rank 0) aborted its communicator");
  rt_dump_cut(2, three, 300, RT_WAITED(3, "h2"));
  rt_dump_cut(3, three, 305, RT_WAITED(2, "h1"));
  rt_expect(rt_dir_arg(), 1,
            "network: every rank failed naming a rank on another host (4 failures): the link "
            "between hosts h1 and h2 was lost");
  /* Hosts h0 {0}, h1 {1}, h2 {2,3}; h0 is cut off. Rank 1's deadline came
   * first (rank 0 was alive, waiting on h2), so h2 explains every edge as
   * well as h0 does; but rank 1's abort reached rank 3: h1 and h2 still
   * talked, so h2 was not the one cut off. */
  const char *split = "[0,1,2,2]";
  rt_dump_cut(1, split, 0, RT_WAITED(0, "h0"));
  rt_dump_cut(2, split, 50, RT_WAITED(0, "h0"));
  rt_dump_cut(3, split, 60,
              "allreduce #5: tcp: rank 1 (world rank 1, host h1) aborted its communicator, after: "
              "" RT_WAITED(0, "h0"));
  rt_dump_cut(0, split, 100, RT_WAITED(2, "h2"));
  rt_expect(rt_dir_arg(), 1,
            "network: every rank failed naming a rank on another host (4 failures): host h0 "
            "accounts for every one");
  /* The news is followed to its sender: rank 2 gave up on h0 first and
   * closed its connections; rank 1 heard that (h1 and h2 talked), so its
   * failure is rank 2's, and h0, not h2, accounts for every one. */
  rt_dump_cut(2, split, 0, RT_WAITED(0, "h0"));
  rt_dump_cut(3, split, 2, "shm: rank 2 (world rank 2, pid 9) aborted its communicator");
  rt_dump_cut(1, split, 5,
              "allreduce #5: tcp: rank 2 (world rank 2, host h2) closed the connection during "
              "allreduce #5 step 1 (it died, aborted or failed)");
  rt_dump_cut(0, split, 10, RT_WAITED(2, "h2"));
  rt_expect(rt_dir_arg(), 1,
            "network: every rank failed naming a rank on another host (4 failures): host h0 "
            "accounts for every one");
  /* A chain of ranks each alive and waiting on the next: rank 3 (h2) on
   * rank 1 (h1), on rank 2 (h2), on rank 0 (h0), which waited on h2. Both h0
   * and h2 cut off explain it: the verdict names the link, not h2 alone. */
  rt_dump_cut(3, split, 0, RT_WAITED(1, "h1"));
  rt_dump_cut(1, split, 10, RT_WAITED(2, "h2"));
  rt_dump_cut(2, split, 20, RT_WAITED(0, "h0"));
  rt_dump_cut(0, split, 30, RT_WAITED(2, "h2"));
  rt_expect(rt_dir_arg(), 1,
            "network: every rank failed naming a rank on another host (4 failures): the link "
            "between hosts h0 and h2 was lost");
  /* Two hosts: the link between them, whichever side was cut. */
  const char *two = "[0,0,1,1]";
  rt_dump_cut(0, two, 0, RT_WAITED(2, "h1"));
  rt_dump_cut(1, two, 0, RT_WAITED(3, "h1"));
  rt_dump_cut(2, two, 0, RT_WAITED(0, "h0"));
  rt_dump_cut(3, two, 0, RT_WAITED(1, "h0"));
  rt_expect(rt_dir_arg(), 1,
            "network: every rank failed naming a rank on another host (4 failures): the link "
            "between hosts h0 and h1 was lost");
  /* A rank blames its own host's rank, which blames it back: a rank's failure. */
  rt_dump_cut(0, two, 0, RT_WAITED(1, "h0"));
  rt_dump_cut(1, two, 0, RT_WAITED(0, "h0"));
  rt_expect_absent(rt_dir_arg(), "network:");
  /* A rank left no dump (it died): the verdict is its, not the network's. */
  rt_dump_cut(0, two, 0, RT_WAITED(2, "h1"));
  rt_dump_cut(1, two, 0, RT_WAITED(3, "h1"));
  rt_expect(rt_dir_arg(), 1, "network: ");
  char path[1100];
  snprintf(path, sizeof(path), "%s/flight-rank1-00000000000000aa.json", test_dir());
  ASSERT(remove(path) == 0);
  rt_expect(rt_dir_arg(), 1, "; rank 1 left no dump\n");
  rt_expect_absent(rt_dir_arg(), "network:");
  /* The fields checked: both or neither, indices in range. */
  rt_dump_with(1, ",\"hosts\":[\"h0\"]", RT_BCAST4);
  rt_expect(rt_dir_arg(), 2,
            "flight-rank1-00000000000000aa.json: \"hosts\": present without \"host_of\"");
  rt_dump_with(1, ",\"hosts\":[\"h0\",\"h1\"],\"host_of\":[0,0,2,1]", RT_BCAST4);
  rt_expect(rt_dir_arg(), 2,
            "flight-rank1-00000000000000aa.json: \"host_of\"[2]: expected an index of \"hosts\" "
            "(0 to 1)");
  rt_dump_with(1, ",\"hosts\":[\"h0\",\"h1\"],\"host_of\":[0,0,1]", RT_BCAST4);
  rt_expect(rt_dir_arg(), 2, "\"host_of\": expected an array of 4 integers (one per rank)");
  rt_dump_with(1, ",\"hosts\":[\"h0\",7],\"host_of\":[0,0,1,1]", RT_BCAST4);
  rt_expect(rt_dir_arg(), 2, "\"hosts\"[1]: expected a string");
}

/* The recorder writes what the verdict reads: hosts (cut at '/', the boot
 * id's separator) and the error. */
TEST_IMPL(report_hang_network_from_recorder)
{
  const char *names[2] = {"alpha/boot-1", "beta/boot-2"};
  const int host_of[2] = {0, 1};
  const char *errors[2] = {"allreduce #1: timed out waiting for rank 1 (world rank 1, host beta)",
                           "allreduce #1: timed out waiting for rank 0 (world rank 0, host alpha)"};
  for (int r = 0; r < 2; r++) {
    struct collie__flight *fr = collie__flight_new(8, r, 2, 0x3333);
    ASSERT(fr != NULL);
    collie__flight_set_hosts(fr, host_of, 2, names);
    struct collie__flight_op op = {
        .seq = 1, .kind = "allreduce", .dtype = "float32", .count = 4, .bytes = 16, .root = -1};
    collie__flight_state(fr, collie__flight_queued(fr, &op), COLLIE_FR_FAILED, "ring");
    ASSERT_OK(collie__flight_dump_error(fr, test_dir(), "timeout", errors[r]));
    collie__flight_free(fr);
  }
  rt_expect(rt_dir_arg(), 1,
            "  rank 0 (host alpha): allreduce #1: timed out waiting for rank 1 (world rank 1, "
            "host beta)\n"
            "  rank 1 (host beta): allreduce #1: timed out waiting for rank 0 (world rank 0, host "
            "alpha)\n"
            "network: every rank failed naming a rank on another host (2 failures): the link "
            "between hosts alpha and beta was lost");
}
