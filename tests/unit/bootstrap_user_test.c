/* bootstrap_user_test.c - collie_config_t.store_callbacks: init and split
 * through the caller's store (here: callbacks over the test's file store, as
 * a framework's store would be), the nonce that keeps two such stores'
 * communicators apart, release exactly once, and the callbacks' errors. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "core/core.h"
#include "runner.h"
#include "util/util.h"

/* The caller's store: a namespace ("a/", "b/") of a collie file store, with
 * counts of what collie asked of it. fail_* make a callback return a code. */
struct user_ctx {
  collie__store_t *fs;
  char ns[16];
  int sets, gets, adds, releases;
  collie_result_t fail_set, fail_get;
};

static void
user_key(const struct user_ctx *u, const char *key, char *out, size_t cap)
{
  snprintf(out, cap, "%s%s", u->ns, key);
}

static collie_result_t
user_set(void *ctx, const char *key, const void *value, size_t len)
{
  struct user_ctx *u = ctx;
  char k[300];
  u->sets++;
  if (u->fail_set) return u->fail_set;
  user_key(u, key, k, sizeof(k));
  return collie__store_set(u->fs, k, value, len, collie__deadline_after_ms(5000));
}

static collie_result_t
user_get(void *ctx, const char *key, int64_t timeout_ms, void *buf, size_t cap, size_t *len)
{
  struct user_ctx *u = ctx;
  char k[300];
  void *val = NULL;
  size_t n = 0;
  u->gets++;
  if (u->fail_get) return u->fail_get;
  user_key(u, key, k, sizeof(k));
  collie_result_t rc = collie__store_get(u->fs, k, &val, &n, collie__deadline_after_ms(timeout_ms));
  if (rc != COLLIE_SUCCESS) return rc;
  memcpy(buf, val, n < cap ? n : cap);
  *len = n;
  free(val);
  return COLLIE_SUCCESS;
}

static collie_result_t
user_add(void *ctx, const char *key, int64_t delta, int64_t *out)
{
  struct user_ctx *u = ctx;
  char k[300];
  u->adds++;
  user_key(u, key, k, sizeof(k));
  return collie__store_add(u->fs, k, delta, out, collie__deadline_after_ms(5000));
}

static void
user_release(void *ctx)
{
  ((struct user_ctx *)ctx)->releases++;
}

static void
user_open(struct user_ctx *u, const char *ns, collie_store_callbacks_t *cb)
{
  memset(u, 0, sizeof(*u));
  snprintf(u->ns, sizeof(u->ns), "%s", ns);
  ASSERT_OK(collie__store_open(getenv("COLLIE_STORE"), test_rank(), test_size(),
                               getenv("COLLIE_JOB_TOKEN"), collie__deadline_after_ms(5000),
                               &u->fs));
  *cb = (collie_store_callbacks_t){u, user_set, user_get, user_add, user_release};
}

static collie_comm_t *
user_init(const collie_store_callbacks_t *cb, const char *token)
{
  collie_config_t cfg = COLLIE_CONFIG_INIT;
  collie_comm_t *c = NULL;
  cfg.rank = test_rank();
  cfg.world_size = test_size();
  cfg.store_callbacks = cb;
  cfg.job_token = token;
  ASSERT_OK(collie_comm_init_config(&cfg, &c));
  return c;
}

/* The sum over ranks of (rank + 1) * (i + 1) at every i. */
static void
user_check_allreduce(collie_comm_t *c, int scale)
{
  int n = c ? collie_comm_size(c) : 0;
  int32_t v[1000];
  for (int i = 0; i < 1000; i++) v[i] = (collie_comm_rank(c) + 1) * (i + 1) * scale;
  ASSERT_OK(collie_allreduce(c, v, v, 1000, COLLIE_INT32, COLLIE_SUM, NULL, NULL));
  for (int i = 0; i < 1000; i++) ASSERT(v[i] == n * (n + 1) / 2 * (i + 1) * scale);
}

/* Init, split and a collective through the caller's store, without a job
 * token (the ranks agree on one through it); a second round on the same
 * store; and two communicators of two stores alive at once with the same
 * token, as torch's process groups are: without the nonce both would have one
 * id and the same shared-memory names. */
TEST_IMPL(bootstrap_user_store_ranks)
{
  struct user_ctx a, b, c;
  collie_store_callbacks_t cba, cbb, cbc;
  user_open(&a, "a/", &cba);
  user_open(&b, "b/", &cbb);
  user_open(&c, "c/", &cbc);
  char token[64];
  snprintf(token, sizeof(token), "%s", getenv("COLLIE_JOB_TOKEN"));
  unsetenv("COLLIE_JOB_TOKEN");

  collie_comm_t *w = user_init(&cba, NULL);
  ASSERT(a.sets > 0 && a.gets > 0 && a.adds > 0);
  user_check_allreduce(w, 1);
  collie_comm_t *half = NULL;
  int gets_before = a.gets;
  ASSERT_OK(collie_comm_split(w, test_rank() % 2, 0, &half));
  /* The new communicator's ranks met through the same store (a rank alone
   * in its color has nobody to meet; the colors themselves go over the
   * parent's channels). */
  ASSERT(collie_comm_size(half) == 1 || a.gets > gets_before);
  user_check_allreduce(half, 2);

  /* The same token on two fresh stores (the first init of each), both alive. */
  collie_comm_t *x = user_init(&cbb, token), *y = user_init(&cbc, token);
  ASSERT(b.adds > 0 && c.adds > 0);
  user_check_allreduce(x, 3);
  user_check_allreduce(y, 4);
  user_check_allreduce(x, 5);

  int half_size = collie_comm_size(half);
  ASSERT_OK(collie_comm_destroy(w));
  /* A split of several ranks still uses w's store (one of one rank never did). */
  ASSERT(a.releases == (half_size > 1 ? 0 : 1));
  ASSERT_OK(collie_comm_destroy(half));
  ASSERT(a.releases == 1);
  ASSERT_OK(collie_comm_destroy(x));
  ASSERT_OK(collie_comm_destroy(y));
  ASSERT(b.releases == 1 && c.releases == 1);
  /* A second round on store a. */
  collie_comm_t *again = user_init(&cba, token);
  user_check_allreduce(again, 6);
  ASSERT_OK(collie_comm_destroy(again));
  ASSERT(a.releases == 2);
  collie__store_release(a.fs);
  collie__store_release(b.fs);
  collie__store_release(c.fs);
}

/* Errors, in one process: each names what was wrong, and release is called
 * once per init whatever happened. */
TEST_IMPL(bootstrap_user_store_errors)
{
  static const char *const store = "file:///nonexistent-not-used";
  struct user_ctx u;
  memset(&u, 0, sizeof(u));
  collie_store_callbacks_t cb = {&u, user_set, user_get, user_add, user_release};
  collie_config_t cfg = COLLIE_CONFIG_INIT;
  collie_comm_t *c = NULL;
  cfg.rank = 1;
  cfg.world_size = 2;
  cfg.timeout_ms = 500;
  cfg.store_callbacks = &cb;

  cfg.store = store;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "both store", collie_comm_init_config(&cfg, &c));
  ASSERT(u.releases == 1 && c == NULL);
  cfg.store = NULL;

  collie_store_callbacks_t no_get = cb;
  no_get.get = NULL;
  cfg.store_callbacks = &no_get;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "get is NULL", collie_comm_init_config(&cfg, &c));
  ASSERT(u.releases == 2);
  cfg.store_callbacks = &cb;

  /* A store that never has the key: rank 1 waits for rank 0's nonce. */
  char dir[512];
  snprintf(dir, sizeof(dir), "file://%s", test_path("store"));
  ASSERT_OK(collie__store_open(dir, 1, 2, "t", collie__deadline_after_ms(1000), &u.fs));
  snprintf(u.ns, sizeof(u.ns), "e/");
  ASSERT_RC(COLLIE_TIMEOUT, "store get \"nonce/1\" (the caller's store): not set",
            collie_comm_init_config(&cfg, &c));
  ASSERT(u.releases == 3 && c == NULL);

  u.fail_get = COLLIE_REMOTE_ERROR;
  ASSERT_RC(COLLIE_REMOTE_ERROR, "callback returned remote error",
            collie_comm_init_config(&cfg, &c));
  u.fail_get = (collie_result_t)99; /* not a result code */
  ASSERT_RC(COLLIE_SYSTEM_ERROR, "store get \"nonce/3\"", collie_comm_init_config(&cfg, &c));
  ASSERT(u.releases == 5);

  cfg.rank = 0; /* rank 0 sets the nonce */
  u.fail_set = COLLIE_SYSTEM_ERROR;
  ASSERT_RC(COLLIE_SYSTEM_ERROR, "store set \"nonce/", collie_comm_init_config(&cfg, &c));
  ASSERT(u.releases == 6);

  /* One rank: no store is needed, release at once. */
  cfg.world_size = 1;
  ASSERT_OK(collie_comm_init_config(&cfg, &c));
  ASSERT(u.releases == 7);
  ASSERT_OK(collie_comm_destroy(c));
  ASSERT(u.releases == 7);

  /* A cfg from a header without store_callbacks (its smaller size) is read
   * without the field. */
  collie_config_t old = COLLIE_CONFIG_INIT;
  old.size = offsetof(collie_config_t, store_callbacks);
  old.rank = 0;
  old.world_size = 1;
  old.store_callbacks = &cb; /* beyond the old size: never read */
  ASSERT_OK(collie_comm_init_config(&old, &c));
  ASSERT(u.releases == 7);
  ASSERT_OK(collie_comm_destroy(c));
  old.size = offsetof(collie_config_t, store_callbacks) - 1;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "COLLIE_CONFIG_INIT", collie_comm_init_config(&old, &c));
  collie__store_release(u.fs);
}

/* collie_config_t.parent: a communicator of some of the world's ranks, made
 * apart from the world (as torch's new_group makes one, on the members only),
 * shares the world's telemetry and names ranks by their world rank. World
 * ranks 1 and 2 form it in reverse order, so its rank 0 is world rank 2:
 * without the parent, its timing rows would go to timing-rank0.csv. */
TEST_IMPL(bootstrap_user_store_parent)
{
  char dir[512];
  snprintf(dir, sizeof(dir), "%s", test_path("timing"));
  setenv("COLLIE_TIMING_LOG", dir, 1);
  struct user_ctx w, g;
  collie_store_callbacks_t cbw, cbg;
  user_open(&w, "w/", &cbw);
  user_open(&g, "g/", &cbg);
  collie_comm_t *world = user_init(&cbw, NULL);
  collie_comm_t *group = NULL;
  if (test_rank() > 0) {
    collie_config_t cfg = COLLIE_CONFIG_INIT;
    cfg.rank = test_rank() == 2 ? 0 : 1;
    cfg.world_size = 2;
    cfg.store_callbacks = &cbg;
    cfg.parent = world;
    ASSERT_OK(collie_comm_init_config(&cfg, &group));
    collie_opts_t o = {.label = "group-op"};
    int32_t v = 1;
    ASSERT_OK(collie_allreduce(group, &v, &v, 1, COLLIE_INT32, COLLIE_SUM, &o, NULL));
    ASSERT(v == 2);
    /* Ranks are named by their world rank: a peer that dies is "world rank 1". */
    ASSERT(group->peers[0].world_rank == 2 && group->peers[1].world_rank == 1);
    ASSERT_OK(collie_comm_destroy(group));
  }
  ASSERT_OK(collie_barrier(world, NULL, NULL));
  ASSERT_OK(collie_comm_destroy(world));
  /* The world's timing logs are closed: rows of the group are in the files of
   * world ranks 1 and 2, none in world rank 0's. */
  char path[600];
  snprintf(path, sizeof(path), "%s/timing-rank%d.csv", dir, test_rank());
  char *text = test_read_file(path, NULL);
  ASSERTF(text, "no %s", path);
  ASSERTF((strstr(text, "group-op") != NULL) == (test_rank() > 0), "rank %d: %s", test_rank(),
          text);
  free(text);
  collie__store_release(w.fs);
  collie__store_release(g.fs);

  /* A destroyed parent is refused, naming the field. */
  collie_config_t bad = COLLIE_CONFIG_INIT;
  bad.rank = 0;
  bad.world_size = 1;
  bad.parent = world;
  collie_comm_t *c = NULL;
  ASSERT_RC(COLLIE_INVALID_USAGE, "parent", collie_comm_init_config(&bad, &c));
}
