/*
 * collierun_test.c - tests of the launcher, run as a black box: each test starts the built
 * collierun binary with /bin/sh -c scripts as ranks, and checks its exit status, its output and
 * what the ranks left in files under test_dir() (their environment, their pids).
 *
 * The ranks are collierun's children, not ours, so a rank that is gone may still show up as a
 * zombie of whatever adopted it (PID 1 of a container does not always reap): cr_alive() counts
 * a zombie as dead. Ranks write their pid files through a rename, so a file that exists is
 * complete.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "runner.h"
#include "util/util.h"

#define CR_BIN COLLIE_BUILD_DIR "/collierun"

/* The shell snippet every rank script starts with: records $$ as pid.<rank> (atomically). */
#define CR_RECORD_PID                                                                              \
  "echo $$ > \"$1/tmp.$COLLIE_RANK\" && mv \"$1/tmp.$COLLIE_RANK\" \"$1/pid.$COLLIE_RANK\"; "
/* Waits (at most ~5 s) until N pid files exist; N is the script's $2. */
#define CR_WAIT_ALL                                                                                \
  "i=0; while [ $(ls \"$1\" | grep -c '^pid\\.') -lt $2 ] && [ $i -lt 100 ]; do sleep 0.05; "      \
  "i=$((i+1)); done; "

struct cr_result {
  int code; /* exit code, 128+signal, or -1 when it had to be killed after the test's timeout */
  char *out, *err;
  double secs;
};

static double
cr_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Reads a whole file; "" when it does not exist. Caller frees. */
static char *
cr_slurp(const char *path)
{
  char *s = test_read_file(path, NULL);
  if (!s) ASSERT((s = calloc(1, 1)) != NULL);
  return s;
}

/* Starts collierun with argv (argv[0] is ignored), its stdout and stderr going to files
 * out.txt and err.txt in the test dir. token: COLLIE_JOB_TOKEN for it, or NULL to unset. The
 * variables collierun sets for its ranks are unset in its own environment (this process may
 * itself run under a launcher), then env, a NULL-terminated list of "NAME=value" (or NULL), is
 * added. */
static pid_t
cr_start_env(const char *const *argv, const char *token, const char *const *env)
{
  const char *outp = test_path("out.txt"), *errp = test_path("err.txt");
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    int in = open("/dev/null", O_RDONLY);
    int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || o < 0 || e < 0) _exit(98);
    dup2(in, 0);
    dup2(o, 1);
    dup2(e, 2);
    const char *clear[] = {
        "COLLIE_RANK",  "COLLIE_WORLD_SIZE",  "COLLIE_LOCAL_RANK", "COLLIE_LOCAL_SIZE",
        "COLLIE_STORE", "COLLIE_STORE_SERVE", "COLLIE_JOB_TOKEN",  "RANK",
        "WORLD_SIZE",   "LOCAL_RANK",         "LOCAL_WORLD_SIZE",  "GROUP_RANK",
        "MASTER_ADDR",  "MASTER_PORT"};
    for (size_t k = 0; k < sizeof(clear) / sizeof(clear[0]); k++) unsetenv(clear[k]);
    if (token) setenv("COLLIE_JOB_TOKEN", token, 1);
    for (; env && *env; env++) putenv((char *)*env);
    execv(CR_BIN, (char *const *)argv);
    _exit(99);
  }
  return pid;
}

static pid_t
cr_start(const char *const *argv, const char *token)
{
  return cr_start_env(argv, token, NULL);
}

/* Waits for collierun at most timeout_s; kills it after that (code -1). */
static int
cr_wait(pid_t pid, double timeout_s)
{
  double end = cr_now() + timeout_s;
  int st;
  for (;;) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    ASSERTF(r == 0, "waitpid: %s", strerror(errno));
    if (cr_now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    usleep(5000);
  }
  ASSERTF(!(WIFEXITED(st) && WEXITSTATUS(st) == 99), "cannot exec %s", CR_BIN);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Runs collierun to the end (at most 10 s), with env added as cr_start_env does. Free out/err
 * with cr_free. */
static struct cr_result
cr_run_env(const char *const *argv, const char *token, const char *const *env)
{
  struct cr_result r;
  double t0 = cr_now();
  pid_t pid = cr_start_env(argv, token, env);
  r.code = cr_wait(pid, 10);
  r.secs = cr_now() - t0;
  r.out = cr_slurp(test_path("out.txt"));
  r.err = cr_slurp(test_path("err.txt"));
  return r;
}

static struct cr_result
cr_run(const char *const *argv, const char *token)
{
  return cr_run_env(argv, token, NULL);
}

static void
cr_free(struct cr_result *r)
{
  free(r->out);
  free(r->err);
}

/* Whether pid is a live process (a zombie counts as dead). */
static int
cr_alive(pid_t pid)
{
  if (kill(pid, 0) != 0) return errno != ESRCH;
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* state follows "pid (comm)" */
  return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

/* The pid in file name of the test dir, or 0 when it does not exist. */
static pid_t
cr_read_pid(const char *name)
{
  char *s = cr_slurp(test_path(name));
  pid_t pid = (pid_t)atoi(s);
  free(s);
  return pid;
}

/* Waits until the files pid.0 .. pid.<n-1> exist (at most 5 s). */
static void
cr_wait_pidfiles(int n)
{
  double end = cr_now() + 5;
  for (int r = 0; r < n; r++) {
    char name[32];
    snprintf(name, sizeof(name), "pid.%d", r);
    while (access(test_path(name), F_OK) != 0) {
      ASSERTF(cr_now() < end, "rank %d never wrote its pid file", r);
      usleep(10000);
    }
  }
}

/* Asserts that every pid in the files <prefix>0 .. <prefix><n-1> (those that exist, at least
 * `need` of them) is dead within 3 s. */
static void
cr_assert_dead(const char *prefix, int n, int need)
{
  int found = 0;
  for (int r = 0; r < n; r++) {
    char name[64];
    snprintf(name, sizeof(name), "%s%d", prefix, r);
    pid_t pid = cr_read_pid(name);
    if (pid <= 0) continue;
    found++;
    double end = cr_now() + 3;
    while (cr_alive(pid) && cr_now() < end) usleep(10000);
    ASSERTF(!cr_alive(pid), "%s (pid %d) is still alive", name, (int)pid);
  }
  ASSERTF(found >= need, "only %d of %d pid files named %s* were written", found, need, prefix);
}

static int
cr_is_hex32(const char *s)
{
  if (strlen(s) != 32) return 0;
  for (int k = 0; k < 32; k++)
    if (!isxdigit((unsigned char)s[k]) || isupper((unsigned char)s[k])) return 0;
  return 1;
}

/* Each rank writes its six variables to env.<rank>; checks them against the expectations
 * and returns the store url of rank first (caller frees) and the token in tok (64 bytes). */
static const char cr_env_script[] =
    "printf '%s|%s|%s|%s|%s|%s\\n' \"$COLLIE_RANK\" \"$COLLIE_WORLD_SIZE\" "
    "\"$COLLIE_LOCAL_RANK\" \"$COLLIE_LOCAL_SIZE\" \"$COLLIE_STORE\" \"$COLLIE_JOB_TOKEN\" "
    "> \"$1/env.$COLLIE_RANK\"";

static void
cr_check_env(int first, int n, int world, char *store, char *tok)
{
  for (int l = 0; l < n; l++) {
    char name[32];
    snprintf(name, sizeof(name), "env.%d", first + l);
    char *s = cr_slurp(test_path(name));
    int rank, ws, lr, ls;
    char st[600], tk[300];
    ASSERTF(sscanf(s, "%d|%d|%d|%d|%599[^|]|%299[^\n]", &rank, &ws, &lr, &ls, st, tk) == 6,
            "%s: unexpected content '%s'", name, s);
    ASSERT(rank == first + l);
    ASSERT(ws == world);
    ASSERT(lr == l);
    ASSERT(ls == n);
    if (l == 0) {
      strcpy(store, st);
      strcpy(tok, tk);
    }
    ASSERTF(!strcmp(st, store), "rank %d: store %s differs from %s", rank, st, store);
    ASSERTF(!strcmp(tk, tok), "rank %d: token %s differs from %s", rank, tk, tok);
    free(s);
  }
}

TEST_IMPL(collierun_env)
{
  char store[600], tok[300], tok2[300];
  struct cr_result r = cr_run(
      (const char *[]){"", "-n", "3", "/bin/sh", "-c", cr_env_script, "sh", test_dir(), NULL},
      NULL);
  ASSERTF(r.code == 0, "exit %d, stderr: %s", r.code, r.err);
  cr_check_env(0, 3, 3, store, tok);
  int port = 0;
  char tail = 0;
  ASSERTF(sscanf(store, "tcp://127.0.0.1:%d%c", &port, &tail) == 1 && port > 0 && port < 65536,
          "store %s", store);
  ASSERTF(cr_is_hex32(tok), "token '%s' is not 32 lowercase hex characters", tok);
  cr_free(&r);

  /* A second run gets a fresh token; an inherited COLLIE_JOB_TOKEN is passed on as is. */
  r = cr_run(
      (const char *[]){"", "-n", "2", "/bin/sh", "-c", cr_env_script, "sh", test_dir(), NULL},
      NULL);
  ASSERT(r.code == 0);
  cr_check_env(0, 2, 2, store, tok2);
  ASSERTF(cr_is_hex32(tok2) && strcmp(tok, tok2), "token not fresh: %s then %s", tok, tok2);
  cr_free(&r);
  r = cr_run(
      (const char *[]){"", "-n", "2", "/bin/sh", "-c", cr_env_script, "sh", test_dir(), NULL},
      "inherited-token-1");
  ASSERT(r.code == 0);
  cr_check_env(0, 2, 2, store, tok2);
  ASSERT(!strcmp(tok2, "inherited-token-1"));
  cr_free(&r);

  /* Inside another job's rank (stale COLLIE_RANK, RANK, COLLIE_STORE inherited), each rank's
   * environment as exec gave it (env(1), not a shell, which would hide a duplicate) holds its
   * own values, each name once, and the rest of the environment as it was. */
  const char *stale[] = {"COLLIE_RANK=7",
                         "RANK=9",
                         "COLLIE_STORE=tcp://192.0.2.1:1",
                         "LOCAL_RANK=5",
                         "COLLIE_TEST_PASSED_ON=kept",
                         NULL};
  r = cr_run_env((const char *[]){"", "-n", "2", "--tag-output", "env", NULL}, NULL, stale);
  ASSERTF(r.code == 0, "exit %d, stderr: %s", r.code, r.err);
  for (int k = 0; k < 2; k++) {
    const char *names[] = {"COLLIE_RANK", "RANK", "LOCAL_RANK", "COLLIE_STORE",
                           "COLLIE_TEST_PASSED_ON"};
    for (int v = 0; v < 5; v++) {
      char prefix[64];
      int len = snprintf(prefix, sizeof(prefix), "[%d] %s=", k, names[v]), seen = 0;
      for (const char *p = strstr(r.out, prefix); p; p = strstr(p + 1, prefix)) {
        if (p != r.out && p[-1] != '\n') continue;
        seen++;
        const char *val = p + len;
        if (v < 3)
          ASSERTF(atoi(val) == k && val[0] == (char)('0' + k), "rank %d: %s%.8s", k, prefix, val);
        else if (v == 3)
          ASSERTF(strncmp(val, "tcp://192.0.2.1:1\n", 18), "rank %d kept the stale store", k);
        else
          ASSERTF(!strncmp(val, "kept\n", 5), "rank %d: %s%.8s", k, prefix, val);
      }
      ASSERTF(seen == 1, "rank %d has %s %d times in:\n%s", k, names[v], seen, r.out);
    }
  }
  cr_free(&r);
}

/* collierun serves the store of its job itself: while its ranks (plain shells, no collie in
 * them) wait, a client with the job's token sets and reads a key at the store address, and
 * every rank was told not to serve it (COLLIE_STORE_SERVE=0); with --store the ranks are told
 * nothing (rank 0 serves a tcp url given, as before). examples/python/elastic.py --kill-rank 0
 * (tests/python/test_examples.py) is the job that outlives its rank 0 so. */
static const char cr_serve_script[] =
    "printf '%s|%s\\n' \"$COLLIE_STORE\" \"${COLLIE_STORE_SERVE-unset}\" > "
    "\"$1/serve.$COLLIE_RANK\"; "
    "i=0; while [ ! -e \"$1/serve.done\" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done";

TEST_IMPL(collierun_serves_store)
{
  const char *argv[] = {"", "-n", "2", "/bin/sh", "-c", cr_serve_script, "sh", test_dir(), NULL};
  pid_t pid = cr_start(argv, "serve-token");
  char url[600] = "", serve[32] = "";
  for (int rank = 0; rank < 2; rank++) {
    char name[32];
    snprintf(name, sizeof(name), "serve.%d", rank);
    int64_t until = collie__deadline_after_ms(10000);
    while (access(test_path(name), F_OK) != 0 && collie__now_ns() < until) usleep(10000);
    usleep(20000); /* (the line is one printf: written whole by now) */
    char *s = cr_slurp(test_path(name));
    ASSERTF(sscanf(s, "%599[^|]|%31[^\n]", url, serve) == 2, "%s: '%s'", name, s);
    ASSERTF(!strcmp(serve, "0"), "rank %d: COLLIE_STORE_SERVE=%s, want 0", rank, serve);
    free(s);
  }
  collie__store_t *st = NULL;
  ASSERT_OK(collie__store_open_serving(url, 1, 2, "serve-token", 0, collie__deadline_after_ms(5000),
                                       &st));
  void *val = NULL;
  size_t len = 0;
  ASSERT_OK(collie__store_set(st, "k", "served", 6, collie__deadline_after_ms(5000)));
  ASSERT_OK(collie__store_get(st, "k", &val, &len, collie__deadline_after_ms(5000)));
  ASSERT(len == 6 && !memcmp(val, "served", 6));
  free(val);
  collie__store_release(st);
  FILE *f = fopen(test_path("serve.done"), "w");
  ASSERT(f != NULL);
  fclose(f);
  ASSERTF(cr_wait(pid, 20) == 0, "collierun did not exit 0");

  /* --store tcp://...: the ranks serve it, as before (nothing is set). */
  unlink(test_path("serve.0"));
  const char *given[] = {"",
                         "--store",
                         "tcp://127.0.0.1:1",
                         "-n",
                         "1",
                         "/bin/sh",
                         "-c",
                         "printf '%s\\n' \"${COLLIE_STORE_SERVE-unset}\" > \"$1/serve.0\"",
                         "sh",
                         test_dir(),
                         NULL};
  struct cr_result r = cr_run(given, NULL);
  ASSERTF(r.code == 0, "exit %d, stderr: %s", r.code, r.err);
  char *s = cr_slurp(test_path("serve.0"));
  ASSERTF(!strcmp(s, "unset\n"), "with --store: COLLIE_STORE_SERVE=%s", s);
  free(s);
  cr_free(&r);
}

TEST_IMPL(collierun_env_multinode)
{
  char store[600], tok[300];
  struct cr_result r =
      cr_run((const char *[]){"", "--nnodes", "3", "--node-rank=1", "--master-addr", "10.1.2.3",
                              "--master-port", "29555", "-n2", "/bin/sh", "-c", cr_env_script, "sh",
                              test_dir(), NULL},
             "shared-token");
  ASSERTF(r.code == 0, "exit %d, stderr: %s", r.code, r.err);
  cr_check_env(2, 2, 6, store, tok);
  ASSERTF(!strcmp(store, "tcp://10.1.2.3:29555"), "store %s", store);
  ASSERT(!strcmp(tok, "shared-token"));
  cr_free(&r);

  /* Nodes of uneven sizes: --nprocs gives every node's count. */
  r = cr_run((const char *[]){"", "--nprocs", "2,1,3", "--node-rank=2", "--master-port", "29555",
                              "/bin/sh", "-c", cr_env_script, "sh", test_dir(), NULL},
             "shared-token");
  ASSERTF(r.code == 0, "exit %d, stderr: %s", r.code, r.err);
  cr_check_env(3, 3, 6, store, tok);
  cr_free(&r);
  r = cr_run((const char *[]){"", "--nprocs", "2,1,3", "--nnodes", "3", "--node-rank", "1", "-n",
                              "1", "--master-port", "29555", "/bin/sh", "-c", cr_env_script, "sh",
                              test_dir(), NULL},
             "shared-token");
  ASSERTF(r.code == 0, "exit %d, stderr: %s", r.code, r.err);
  cr_check_env(2, 1, 6, store, tok);
  cr_free(&r);

  /* --store is passed through unchanged. */
  r = cr_run((const char *[]){"", "--store", "file:///tmp/somewhere", "-n", "1", "/bin/sh", "-c",
                              cr_env_script, "sh", test_dir(), NULL},
             NULL);
  ASSERTF(r.code == 0, "exit %d, stderr: %s", r.code, r.err);
  cr_check_env(0, 1, 1, store, tok);
  ASSERTF(!strcmp(store, "file:///tmp/somewhere"), "store %s", store);
  cr_free(&r);
}

/* torchrun's variables as a rank saw them: each rank writes them to torch.<COLLIE_RANK>, in the
 * order of struct cr_torch, with COLLIE_RANK and COLLIE_STORE to compare against. */
static const char cr_torch_script[] =
    "printf '%s|%s|%s|%s|%s|%s|%s|%s|%s\\n' \"$COLLIE_RANK\" \"$RANK\" \"$WORLD_SIZE\" "
    "\"$LOCAL_RANK\" \"$LOCAL_WORLD_SIZE\" \"$GROUP_RANK\" \"$MASTER_ADDR\" \"$MASTER_PORT\" "
    "\"$COLLIE_STORE\" > \"$1/torch.$COLLIE_RANK\"";

struct cr_torch {
  int collie_rank, rank, world, local_rank, local_world, group_rank, port;
  char addr[300], store[600];
  int store_port; /* the port of a tcp:// COLLIE_STORE, else 0 */
};

/* The whole of s as an integer; fails the test (naming what) when it is not one. */
static int
cr_int(const char *s, const char *what, int rank)
{
  char *end;
  long v = strtol(s, &end, 10);
  ASSERTF(*s && !*end, "rank %d: %s is '%s', not an integer", rank, what, s);
  return (int)v;
}

/* Reads torch.<rank> of the test dir into t. */
static void
cr_read_torch(int rank, struct cr_torch *t)
{
  char name[32];
  snprintf(name, sizeof(name), "torch.%d", rank);
  char *s = cr_slurp(test_path(name)), *p = s, *f[9];
  ASSERTF(*s, "rank %d wrote no %s", rank, name);
  s[strcspn(s, "\n")] = '\0';
  for (int k = 0; k < 9; k++) {
    f[k] = strsep(&p, "|");
    ASSERTF(f[k], "%s: too few fields", name);
  }
  ASSERTF(!p, "%s: too many fields", name);
  t->collie_rank = cr_int(f[0], "COLLIE_RANK", rank);
  t->rank = cr_int(f[1], "RANK", rank);
  t->world = cr_int(f[2], "WORLD_SIZE", rank);
  t->local_rank = cr_int(f[3], "LOCAL_RANK", rank);
  t->local_world = cr_int(f[4], "LOCAL_WORLD_SIZE", rank);
  t->group_rank = cr_int(f[5], "GROUP_RANK", rank);
  t->port = cr_int(f[7], "MASTER_PORT", rank);
  snprintf(t->addr, sizeof(t->addr), "%s", f[6]);
  snprintf(t->store, sizeof(t->store), "%s", f[8]);
  const char *colon = strrchr(t->store, ':');
  t->store_port = !strncmp(t->store, "tcp://", 6) && colon ? atoi(colon + 1) : 0;
  free(s);
}

/* Checks torch.<first> .. torch.<first+n-1>: ranks of node group in a world of world ranks,
 * MASTER_ADDR addr, and MASTER_PORT port on every rank (port 0: any valid port, the same on
 * every rank, other than collie's store port). Returns the MASTER_PORT. */
static int
cr_check_torch(int first, int n, int world, int group, const char *addr, int port)
{
  int seen = 0;
  for (int l = 0; l < n; l++) {
    struct cr_torch t;
    cr_read_torch(first + l, &t);
    ASSERTF(t.collie_rank == first + l && t.rank == t.collie_rank,
            "rank %d: RANK %d, COLLIE_RANK %d", first + l, t.rank, t.collie_rank);
    ASSERTF(t.world == world, "rank %d: WORLD_SIZE %d, expected %d", t.rank, t.world, world);
    ASSERTF(t.local_rank == l, "rank %d: LOCAL_RANK %d, expected %d", t.rank, t.local_rank, l);
    ASSERTF(t.local_world == n, "rank %d: LOCAL_WORLD_SIZE %d, expected %d", t.rank, t.local_world,
            n);
    ASSERTF(t.group_rank == group, "rank %d: GROUP_RANK %d, expected %d", t.rank, t.group_rank,
            group);
    ASSERTF(!strcmp(t.addr, addr), "rank %d: MASTER_ADDR '%s', expected '%s'", t.rank, t.addr,
            addr);
    ASSERTF(t.port >= 1 && t.port <= 65535, "rank %d: MASTER_PORT %d", t.rank, t.port);
    ASSERTF(!port || t.port == port, "rank %d: MASTER_PORT %d, expected %d", t.rank, t.port, port);
    ASSERTF(t.port != t.store_port, "rank %d: MASTER_PORT %d is collie's store port too (%s)",
            t.rank, t.port, t.store);
    ASSERTF(!seen || t.port == seen, "rank %d: MASTER_PORT %d, rank %d had %d", t.rank, t.port,
            first, seen);
    seen = t.port;
  }
  return seen;
}

/* Runs collierun with args (NULL-terminated, at most 12) and then the torch script as the
 * program; env as cr_run_env takes it. Asserts it exits 0. */
static void
cr_run_torch(const char *const *args, const char *token, const char *const *env)
{
  const char *argv[20] = {""};
  int k = 1;
  for (; *args; args++) argv[k++] = *args;
  const char *tail[] = {"/bin/sh", "-c", cr_torch_script, "sh", test_dir(), NULL};
  for (int i = 0; tail[i]; i++) argv[k++] = tail[i];
  struct cr_result r = cr_run_env(argv, token, env);
  ASSERTF(r.code == 0, "exit %d, stderr: %s", r.code, r.err);
  cr_free(&r);
}

/* One node: torchrun's variables per rank, MASTER_ADDR's choice and a free MASTER_PORT that is
 * not collie's store port. */
TEST_IMPL(collierun_torch_env)
{
  /* Per-rank values inherited from collierun's own environment are replaced. */
  const char *stale[] = {
      "RANK=99", "WORLD_SIZE=99", "LOCAL_RANK=99", "LOCAL_WORLD_SIZE=99", "GROUP_RANK=99", NULL};
  cr_run_torch((const char *[]){"-n", "3", NULL}, NULL, stale);
  cr_check_torch(0, 3, 3, 0, "127.0.0.1", 0);

  /* With collie's port given, torch's is still another one. */
  cr_run_torch((const char *[]){"-n", "2", "--master-port", "29561", NULL}, NULL, NULL);
  struct cr_torch t;
  cr_read_torch(0, &t);
  ASSERTF(t.store_port == 29561, "store %s", t.store);
  cr_check_torch(0, 2, 2, 0, "127.0.0.1", 0);

  /* An inherited MASTER_ADDR is passed on; --master-addr wins over it. */
  cr_run_torch((const char *[]){"-n", "2", NULL}, NULL,
               (const char *[]){"MASTER_ADDR=localhost", NULL});
  cr_check_torch(0, 2, 2, 0, "localhost", 0);
  cr_run_torch((const char *[]){"-n", "1", "--master-addr", "127.0.0.1", NULL}, NULL,
               (const char *[]){"MASTER_ADDR=localhost", NULL});
  cr_check_torch(0, 1, 1, 0, "127.0.0.1", 0);

  /* A file store has no port of its own; torch still gets an address and a free port. */
  cr_run_torch((const char *[]){"-n", "2", "--store", "file:///tmp/collie-cr-unused", NULL}, NULL,
               NULL);
  cr_check_torch(0, 2, 2, 0, "127.0.0.1", 0);
}

/* MASTER_PORT in collierun's own environment is passed on unchanged, one node or several; it
 * may not be collie's store port; --torch-port wins over it. */
TEST_IMPL(collierun_torch_port_env)
{
  const char *env[] = {"MASTER_PORT=29517", NULL};
  cr_run_torch((const char *[]){"-n", "2", NULL}, NULL, env);
  cr_check_torch(0, 2, 2, 0, "127.0.0.1", 29517);
  cr_run_torch((const char *[]){"--nnodes", "2", "--master-port", "29555", "-n", "1", NULL},
               "shared-token", env);
  cr_check_torch(0, 1, 2, 0, "127.0.0.1", 29517); /* not the default 29556 */
  /* Unchanged: the very string, not a number printed again. */
  cr_run_torch((const char *[]){"-n", "1", NULL}, NULL,
               (const char *[]){"MASTER_PORT=029517", NULL});
  char *raw = cr_slurp(test_path("torch.0"));
  ASSERTF(strstr(raw, "|029517|"), "MASTER_PORT=029517 was not passed on as is: %s", raw);
  free(raw);
  cr_run_torch((const char *[]){"-n", "1", "--torch-port", "30007", NULL}, NULL, env);
  cr_check_torch(0, 1, 1, 0, "127.0.0.1", 30007);

  struct cr_result r =
      cr_run_env((const char *[]){"", "--master-port", "29517", "true", NULL}, NULL, env);
  ASSERTF(r.code == 2 && strstr(r.err, "MASTER_PORT=29517") && strstr(r.err, "collie's store"),
          "exit %d, stderr: %s", r.code, r.err);
  cr_free(&r);
  r = cr_run_env((const char *[]){"", "true", NULL}, NULL, (const char *[]){"MASTER_PORT=x", NULL});
  ASSERTF(r.code == 2 && strstr(r.err, "MASTER_PORT='x'"), "exit %d, stderr: %s", r.code, r.err);
  cr_free(&r);
}

/* Several nodes: MASTER_PORT is collie's master port + 1 on every node, or --torch-port. */
TEST_IMPL(collierun_torch_port_multinode)
{
  cr_run_torch((const char *[]){"--nnodes", "3", "--node-rank", "1", "--master-addr", "10.1.2.3",
                                "--master-port", "29555", "-n", "2", NULL},
               "shared-token", NULL);
  cr_check_torch(2, 2, 6, 1, "10.1.2.3", 29556);
  cr_run_torch((const char *[]){"--nnodes", "2", "--node-rank", "1", "--master-addr", "10.1.2.3",
                                "--master-port", "29555", "--torch-port=30001", "-n", "2", NULL},
               "shared-token", NULL);
  cr_check_torch(2, 2, 4, 1, "10.1.2.3", 30001);
  cr_run_torch((const char *[]){"--nnodes", "2", "--node-rank", "0", "--torch-port", "30002",
                                "--master-port", "29555", "-n", "1", NULL},
               "shared-token", NULL);
  cr_check_torch(0, 1, 2, 0, "127.0.0.1", 30002);
  /* A tcp --store: its host and its port + 1. */
  cr_run_torch(
      (const char *[]){"--nnodes", "2", "--store", "tcp://10.1.2.3:29600", "-n", "1", NULL},
      "shared-token", NULL);
  cr_check_torch(0, 1, 2, 0, "10.1.2.3", 29601);
}

/* Bad --torch-port values and ports that would collide with collie's store fail with a usage
 * error that names the option and the value. */
TEST_IMPL(collierun_torch_port_bad)
{
  static const struct {
    const char *args[10];
    const char *value;
  } cases[] = {
      {{"--torch-port", "0", "true"}, "0"},
      {{"--torch-port", "70000", "true"}, "70000"},
      {{"--torch-port", "x", "true"}, "'x'"},
      {{"--torch-port=", "true"}, "''"},
      {{"--torch-port", "-1", "true"}, "-1"},
      {{"--torch-port"}, "needs a value"},
      {{"--master-port", "29500", "--torch-port", "29500", "true"}, "29500"},
      {{"--store", "tcp://127.0.0.1:29500", "--torch-port", "29500", "true"}, "29500"},
      {{"--nnodes", "2", "--master-port", "65535", "true"}, "65535"},
      {{"--nnodes", "2", "--store", "tcp://10.1.2.3:65535", "true"}, "65535"},
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    const char *argv[12] = {""};
    for (int k = 0; k < 10 && cases[c].args[k]; k++) argv[k + 1] = cases[c].args[k];
    struct cr_result r = cr_run(argv, "tok");
    ASSERTF(r.code == 2, "case %zu (%s %s): exit %d, stderr: %s", c, cases[c].args[0],
            cases[c].args[1] ? cases[c].args[1] : "", r.code, r.err);
    ASSERTF(strstr(r.err, "collierun: ") && strstr(r.err, "--torch-port") &&
                strstr(r.err, cases[c].value),
            "case %zu: stderr lacks '--torch-port' or '%s': %s", c, cases[c].value, r.err);
    cr_free(&r);
  }
}

/* Checks that every line of text starts with "[r] " for a rank r < n and that what follows
 * names the same rank ("...-<r>..."). */
static void
cr_check_tagged(const char *text, int n)
{
  const char *p = text;
  int lines = 0;
  while (*p) {
    const char *nl = strchr(p, '\n');
    ASSERTF(nl, "output does not end with a newline: '%s'", p);
    int r = -1, off = 0;
    ASSERTF(sscanf(p, "[%d] %n", &r, &off) == 1 && off > 0 && r >= 0 && r < n,
            "untagged line: '%.*s'", (int)(nl - p), p);
    char want[16];
    snprintf(want, sizeof(want), "-%d-", r);
    const char *hit = strstr(p + off, want);
    ASSERTF(hit && hit < nl, "line tagged [%d] holds another rank's text: '%.*s'", r, (int)(nl - p),
            p);
    lines++;
    p = nl + 1;
  }
  ASSERT(lines > 0);
}

TEST_IMPL(collierun_tag_output)
{
  /* Each rank writes one line in two pieces with a pause in between, while the others write
   * whole lines, and ends stdout without a newline. */
  const char *script = "r=$COLLIE_RANK; echo \"out-$r-first\"; sleep 0.$r; printf 'part-%s-' $r; "
                       "sleep 0.2; echo 'end'; echo \"err-$r-x\" >&2; "
                       "for i in 1 2 3 4 5; do echo \"loop-$r-$i\"; done; printf 'tail-%s-' $r";
  struct cr_result r =
      cr_run((const char *[]){"", "-n", "3", "--tag-output", "/bin/sh", "-c", script, NULL}, NULL);
  ASSERTF(r.code == 0, "exit %d, stderr: %s", r.code, r.err);
  cr_check_tagged(r.out, 3);
  cr_check_tagged(r.err, 3);
  for (int k = 0; k < 3; k++) {
    char want[64];
    snprintf(want, sizeof(want), "[%d] part-%d-end\n", k, k);
    ASSERTF(strstr(r.out, want), "no line '%s' in:\n%s", want, r.out);
    snprintf(want, sizeof(want), "[%d] tail-%d-\n", k, k);
    ASSERTF(strstr(r.out, want), "no line '%s' in:\n%s", want, r.out);
    snprintf(want, sizeof(want), "[%d] loop-%d-5\n", k, k);
    ASSERTF(strstr(r.out, want), "no line '%s' in:\n%s", want, r.out);
    snprintf(want, sizeof(want), "[%d] err-%d-x\n", k, k);
    ASSERTF(strstr(r.err, want), "no line '%s' in stderr:\n%s", want, r.err);
  }
  cr_free(&r);

  /* Without the option nothing is prefixed. */
  r = cr_run((const char *[]){"", "-n", "2", "/bin/sh", "-c", "echo plain", NULL}, NULL);
  ASSERT(r.code == 0);
  ASSERTF(!strcmp(r.out, "plain\nplain\n"), "stdout: '%s'", r.out);
  cr_free(&r);
}

/* --bind-to cpu pins local rank i to the (i mod n)-th of the n CPUs collierun may use (its
 * own affinity, not the host's); --bind-to none and no option leave a rank's affinity as
 * collierun's. Each rank writes its Cpus_allowed_list to a file. */
static void
cr_check_bind(const char *mode, int n)
{
  const char *script =
      "grep Cpus_allowed_list /proc/self/status | cut -f2 > \"$1/cpus.$COLLIE_LOCAL_RANK\"";
  char nstr[8];
  snprintf(nstr, sizeof(nstr), "%d", n);
  struct cr_result r = mode ? cr_run((const char *[]){"", "-n", nstr, "--bind-to", mode, "/bin/sh",
                                                      "-c", script, "sh", test_dir(), NULL},
                                     NULL)
                            : cr_run((const char *[]){"", "-n", nstr, "/bin/sh", "-c", script, "sh",
                                                      test_dir(), NULL},
                                     NULL);
  ASSERTF(r.code == 0, "--bind-to %s: exit %d, stderr: %s", mode ? mode : "(unset)", r.code, r.err);
  cr_free(&r);
  cpu_set_t mine;
  ASSERT(sched_getaffinity(0, sizeof(mine), &mine) == 0);
  int ncpu = CPU_COUNT(&mine), cpus[CPU_SETSIZE], k = 0;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &mine)) cpus[k++] = c;
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof(name), "cpus.%d", i);
    char *got = cr_slurp(test_path(name));
    ASSERT(got);
    got[strcspn(got, "\n")] = '\0';
    if (mode && !strcmp(mode, "cpu")) {
      char want[16];
      snprintf(want, sizeof(want), "%d", cpus[i % ncpu]);
      ASSERTF(!strcmp(got, want), "local rank %d: allowed '%s', want CPU %s", i, got, want);
    } else {
      ASSERTF(ncpu < 2 || strchr(got, '-') || strchr(got, ','),
              "--bind-to %s: local rank %d pinned to '%s'", mode ? mode : "(unset)", i, got);
    }
    free(got);
  }
}

TEST_IMPL(collierun_bind_to)
{
  cr_check_bind("cpu", 3); /* more ranks than this runner's 2 CPUs: round robin */
  cr_check_bind("none", 2);
  cr_check_bind(NULL, 2);
}

TEST_IMPL(collierun_all_succeed)
{
  /* Ranks ending at different times, all with 0: collierun waits for the last and exits 0. */
  struct cr_result r =
      cr_run((const char *[]){"", "-n", "4", "/bin/sh", "-c",
                              "sleep 0.$COLLIE_RANK; touch \"$1/done.$COLLIE_RANK\"", "sh",
                              test_dir(), NULL},
             NULL);
  ASSERTF(r.code == 0, "exit %d, stderr: %s", r.code, r.err);
  ASSERTF(r.err[0] == '\0', "unexpected stderr: %s", r.err);
  for (int k = 0; k < 4; k++) {
    char name[32];
    snprintf(name, sizeof(name), "done.%d", k);
    ASSERTF(access(test_path(name), F_OK) == 0, "rank %d did not run to the end", k);
  }
  cr_free(&r);
}

TEST_IMPL(collierun_rank_exit_code)
{
  /* Rank 2 fails once everyone runs; the others sleep in a child of their own, which must die
   * with them (process group). */
  const char *script =
      CR_RECORD_PID CR_WAIT_ALL "if [ $COLLIE_RANK = 2 ]; then exit 3; fi; "
                                "sleep 30 & echo $! > \"$1/child.$COLLIE_RANK\"; wait";
  struct cr_result r = cr_run(
      (const char *[]){"", "-n", "4", "/bin/sh", "-c", script, "sh", test_dir(), "4", NULL}, NULL);
  ASSERTF(r.code == 3, "exit %d, stderr: %s", r.code, r.err);
  ASSERTF(r.secs < 8, "took %.1f s", r.secs);
  ASSERTF(strstr(r.err, "rank 2 (pid ") && strstr(r.err, "exited with status 3") &&
              strstr(r.err, "terminating the other 3 ranks"),
          "stderr: %s", r.err);
  cr_assert_dead("pid.", 4, 4);
  cr_assert_dead("child.", 4, 0);
  cr_free(&r);
}

TEST_IMPL(collierun_rank_killed)
{
  const char *script =
      CR_RECORD_PID CR_WAIT_ALL "if [ $COLLIE_RANK = 1 ]; then kill -9 $$; fi; exec sleep 30";
  struct cr_result r = cr_run(
      (const char *[]){"", "-n", "3", "/bin/sh", "-c", script, "sh", test_dir(), "3", NULL}, NULL);
  ASSERTF(r.code == 137, "exit %d, stderr: %s", r.code, r.err);
  ASSERTF(r.secs < 8, "took %.1f s", r.secs);
  ASSERTF(strstr(r.err, "rank 1 (pid ") && strstr(r.err, "killed by signal 9"), "stderr: %s",
          r.err);
  cr_assert_dead("pid.", 3, 3);
  cr_free(&r);
}

/* --keep-going: a killed rank does not stop the others, which run to their
 * end (what shrink-and-continue needs); the exit status is the first
 * failure's. Without it the same job is stopped at once (collierun_rank_killed). */
TEST_IMPL(collierun_keep_going)
{
  const char *script = CR_RECORD_PID CR_WAIT_ALL
      "if [ $COLLIE_RANK = 1 ]; then kill -9 $$; fi; sleep 0.5; "
      "if [ $COLLIE_RANK = 2 ]; then exit 5; fi; touch \"$1/done.$COLLIE_RANK\"";
  struct cr_result r = cr_run((const char *[]){"", "-n", "4", "--keep-going", "/bin/sh", "-c",
                                               script, "sh", test_dir(), "4", NULL},
                              NULL);
  ASSERTF(r.code == 137, "exit %d (want the first failure's, 137), stderr: %s", r.code, r.err);
  ASSERTF(strstr(r.err, "rank 1 (pid ") && strstr(r.err, "killed by signal 9") &&
              strstr(r.err, "go on (--keep-going)") && strstr(r.err, "exited with status 5"),
          "stderr: %s", r.err);
  char name[32];
  for (int k = 0; k < 4; k += 3) {
    snprintf(name, sizeof(name), "done.%d", k);
    ASSERTF(access(test_path(name), F_OK) == 0, "rank %d was stopped", k);
  }
  cr_free(&r);
}

TEST_IMPL(collierun_grace_sigkill)
{
  /* Ranks that ignore SIGTERM get SIGKILL after --grace. */
  const char *script =
      CR_RECORD_PID "trap '' TERM; " CR_WAIT_ALL
                    "if [ $COLLIE_RANK = 0 ]; then exit 5; fi; while :; do sleep 0.1; done";
  struct cr_result r = cr_run((const char *[]){"", "-n", "3", "--grace", "0.5", "/bin/sh", "-c",
                                               script, "sh", test_dir(), "3", NULL},
                              NULL);
  ASSERTF(r.code == 5, "exit %d, stderr: %s", r.code, r.err);
  ASSERTF(r.secs >= 0.4 && r.secs < 5, "took %.1f s", r.secs);
  ASSERTF(strstr(r.err, "SIGKILL"), "stderr: %s", r.err);
  cr_assert_dead("pid.", 3, 3);
  cr_free(&r);
}

TEST_IMPL(collierun_sigterm_forwarded)
{
  const char *script = "trap 'touch \"$1/term.$COLLIE_RANK\"; exit 0' TERM; " CR_RECORD_PID
                       "while :; do sleep 0.1; done";
  pid_t pid = cr_start(
      (const char *[]){"", "-n", "3", "/bin/sh", "-c", script, "sh", test_dir(), NULL}, NULL);
  cr_wait_pidfiles(3);
  ASSERT(kill(pid, SIGTERM) == 0);
  int code = cr_wait(pid, 8);
  char *err = cr_slurp(test_path("err.txt"));
  ASSERTF(code == 128 + SIGTERM, "exit %d, stderr: %s", code, err);
  ASSERTF(strstr(err, "SIGTERM"), "stderr: %s", err);
  for (int k = 0; k < 3; k++) {
    char name[32];
    snprintf(name, sizeof(name), "term.%d", k);
    ASSERTF(access(test_path(name), F_OK) == 0, "rank %d never saw SIGTERM", k);
  }
  cr_assert_dead("pid.", 3, 3);
  free(err);
}

TEST_IMPL(collierun_timeout)
{
  const char *script = CR_RECORD_PID "sleep 30 & echo $! > \"$1/child.$COLLIE_RANK\"; wait";
  struct cr_result r = cr_run((const char *[]){"", "-n", "2", "--timeout", "1", "/bin/sh", "-c",
                                               script, "sh", test_dir(), NULL},
                              NULL);
  ASSERTF(r.code == 124, "exit %d, stderr: %s", r.code, r.err);
  ASSERTF(r.secs >= 0.9 && r.secs < 5, "took %.1f s", r.secs);
  ASSERTF(strstr(r.err, "timeout"), "stderr: %s", r.err);
  cr_assert_dead("pid.", 2, 2);
  cr_assert_dead("child.", 2, 2);
  cr_free(&r);
}

/* A forked rank held before its exec (tests/shim/exec_stall_shim.c stops local rank 1 there
 * for 30 s, as a child that deadlocked between fork and exec did) does not hold collierun:
 * --timeout still ends the job with 124, a SIGTERM with 143, within seconds, and nothing is
 * left running. */
TEST_IMPL(collierun_exec_stalled)
{
  char preload[1200], asan[600];
  snprintf(preload, sizeof(preload), "LD_PRELOAD=%s/tests/libexec_stall_shim.so", COLLIE_BUILD_DIR);
  /* Under ASan collierun's runtime must come first; the shim carries none. */
  const char *prev = getenv("ASAN_OPTIONS");
  snprintf(asan, sizeof(asan), "ASAN_OPTIONS=%s%sverify_asan_link_order=0", prev ? prev : "",
           prev && *prev ? ":" : "");
  const char *env[] = {preload, asan, "COLLIE_TEST_EXEC_STALL=1", NULL};
  const char *script = CR_RECORD_PID "exec sleep 30";

  struct cr_result r = cr_run_env((const char *[]){"", "-n", "2", "--timeout", "1", "/bin/sh", "-c",
                                                   script, "sh", test_dir(), NULL},
                                  NULL, env);
  ASSERTF(r.code == 124, "exit %d after %.1f s, stderr: %s", r.code, r.secs, r.err);
  ASSERTF(r.secs < 6, "took %.1f s", r.secs);
  ASSERTF(strstr(r.err, "timeout"), "stderr: %s", r.err);
  cr_assert_dead("pid.", 1, 1);
  cr_free(&r);

  unlink(test_path("pid.0"));
  pid_t pid = cr_start_env(
      (const char *[]){"", "-n", "2", "/bin/sh", "-c", script, "sh", test_dir(), NULL}, NULL, env);
  cr_wait_pidfiles(1); /* rank 0 runs; rank 1 waits before its exec */
  double t0 = cr_now();
  ASSERT(kill(pid, SIGTERM) == 0);
  int code = cr_wait(pid, 10);
  ASSERTF(code == 128 + SIGTERM, "exit %d after SIGTERM", code);
  ASSERTF(cr_now() - t0 < 5, "took %.1f s after SIGTERM", cr_now() - t0);
  cr_assert_dead("pid.", 1, 1);
}

TEST_IMPL(collierun_sigkill_no_orphans)
{
  /* SIGKILL of collierun itself: PDEATHSIG takes the ranks down, the sentinel their children. */
  const char *script = "sleep 30 & echo $! > \"$1/child.$COLLIE_RANK\"; " CR_RECORD_PID "wait";
  pid_t pid = cr_start(
      (const char *[]){"", "-n", "3", "/bin/sh", "-c", script, "sh", test_dir(), NULL}, NULL);
  cr_wait_pidfiles(3);
  ASSERT(kill(pid, SIGKILL) == 0);
  ASSERT(cr_wait(pid, 5) == 128 + SIGKILL);
  cr_assert_dead("pid.", 3, 3);
  cr_assert_dead("child.", 3, 3);
}

/* The children of parent (from /proc) that are not listed in pid files pid.0 .. pid.<n-1>. */
static int
cr_other_children(pid_t parent, int n, pid_t *out, int max)
{
  int found = 0;
  DIR *d = opendir("/proc");
  ASSERT(d != NULL);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int pid = atoi(e->d_name);
    if (pid <= 0) continue;
    char path[300], buf[512];
    snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = '\0';
    const char *p = strrchr(buf, ')');
    int ppid = 0;
    char state;
    if (!p || sscanf(p + 1, " %c %d", &state, &ppid) != 2 || ppid != parent) continue;
    int rank = 0;
    for (int r = 0; r < n; r++) {
      char name[32];
      snprintf(name, sizeof(name), "pid.%d", r);
      if (cr_read_pid(name) == pid) rank = 1;
    }
    if (!rank && found < max) out[found++] = pid;
  }
  closedir(d);
  return found;
}

TEST_IMPL(collierun_pdeathsig)
{
  /* With the sentinel gone first, the ranks still die with collierun: PR_SET_PDEATHSIG. */
  const char *script = CR_RECORD_PID "exec sleep 30";
  pid_t pid = cr_start(
      (const char *[]){"", "-n", "2", "/bin/sh", "-c", script, "sh", test_dir(), NULL}, NULL);
  cr_wait_pidfiles(2);
  pid_t other[4];
  int n = cr_other_children(pid, 2, other, 4);
  ASSERTF(n == 1, "expected one sentinel next to the ranks, found %d", n);
  ASSERT(kill(other[0], SIGKILL) == 0);
  usleep(50000);
  ASSERT(kill(pid, SIGKILL) == 0);
  ASSERT(cr_wait(pid, 5) == 128 + SIGKILL);
  cr_assert_dead("pid.", 2, 2);
}

TEST_IMPL(collierun_bad_options)
{
  static const struct {
    const char *args[8];
    const char *needle;
  } cases[] = {
      {{"-n", "0", "true"}, "-n"},
      {{"-n", "abc", "true"}, "-n"},
      {{"-n", "4x", "true"}, "-n"},
      {{"-n"}, "-n"},
      {{"-n", "2"}, "program"},
      {{"--bogus", "true"}, "--bogus"},
      {{"--timeout", "-1", "true"}, "--timeout"},
      {{"--timeout", "soon", "true"}, "--timeout"},
      {{"--master-port", "70000", "true"}, "--master-port"},
      {{"--nnodes", "0", "true"}, "--nnodes"},
      {{"--nnodes", "2", "true"}, "--master-port"},
      {{"--nnodes", "2", "--node-rank", "2", "--master-port", "29500", "true"}, "--node-rank"},
      {{"--tag-output=yes", "true"}, "--tag-output"},
      {{"--store", "http://x", "true"}, "--store"},
      {{"--bind-to", "core", "true"}, "--bind-to"},
      {{"--bind-to"}, "--bind-to"},
      {{"--nprocs", "2,x", "true"}, "--nprocs '2,x': entry 2 is not a count"},
      {{"--nprocs", "2,,1", "true"}, "entry 2 is not a count"},
      {{"--nprocs", "2,0", "true"}, "entry 2 is not a count"},
      {{"--nprocs", "2,1,", "true"}, "ends with a comma"},
      {{"--nprocs", "", "true"}, "--nprocs is empty"},
      {{"--nprocs", "2,1", "--nnodes", "3", "true"}, "--nnodes 3 but --nprocs '2,1' lists 2"},
      {{"--nprocs", "2,1", "-n", "1", "true"}, "-n 1 but --nprocs '2,1' gives node 0 2 ranks"},
      {{"--nprocs", "2,1", "--node-rank", "2", "true"}, "--node-rank 2 is out of range"},
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    const char *argv[10] = {""};
    for (int k = 0; k < 8 && cases[c].args[k]; k++) argv[k + 1] = cases[c].args[k];
    struct cr_result r = cr_run(argv, "tok"); /* a token, so only the option is wrong */
    ASSERTF(r.code == 2, "case %zu (%s %s): exit %d", c, cases[c].args[0],
            cases[c].args[1] ? cases[c].args[1] : "", r.code);
    ASSERTF(strstr(r.err, "collierun: ") && strstr(r.err, cases[c].needle),
            "case %zu: stderr lacks '%s': %s", c, cases[c].needle, r.err);
    cr_free(&r);
  }
  /* Several nodes without a shared token is an error too. */
  struct cr_result r =
      cr_run((const char *[]){"", "--nnodes", "2", "--master-port", "29500", "true", NULL}, NULL);
  ASSERTF(r.code == 2 && strstr(r.err, "COLLIE_JOB_TOKEN"), "exit %d, stderr: %s", r.code, r.err);
  cr_free(&r);
}

TEST_IMPL(collierun_not_found)
{
  struct cr_result r =
      cr_run((const char *[]){"", "-n", "2", "collie-no-such-program", "arg", NULL}, NULL);
  ASSERTF(r.code == 127, "exit %d, stderr: %s", r.code, r.err);
  ASSERTF(strstr(r.err, "collie-no-such-program") && strstr(r.err, "No such file"), "stderr: %s",
          r.err);
  cr_free(&r);
  r = cr_run((const char *[]){"", "-n", "1", "/nonexistent/dir/prog", NULL}, NULL);
  ASSERTF(r.code == 127 && strstr(r.err, "/nonexistent/dir/prog"), "exit %d, stderr: %s", r.code,
          r.err);
  cr_free(&r);
  /* Found but not executable: 126, as a shell does. */
  r = cr_run((const char *[]){"", "-n", "1", test_dir(), NULL}, NULL);
  ASSERTF(r.code == 126 && strstr(r.err, test_dir()), "exit %d, stderr: %s", r.code, r.err);
  cr_free(&r);
}

TEST_IMPL(collierun_help)
{
  struct cr_result r = cr_run((const char *[]){"", "--help", NULL}, NULL);
  ASSERT(r.code == 0);
  static const char *const words[] = {"COLLIE_RANK",
                                      "COLLIE_WORLD_SIZE",
                                      "COLLIE_LOCAL_RANK",
                                      "COLLIE_LOCAL_SIZE",
                                      "COLLIE_STORE",
                                      "tcp://host:port",
                                      "file:///dir",
                                      "COLLIE_JOB_TOKEN",
                                      "COLLIE_DEBUG",
                                      "TRACE",
                                      "COLLIE_TIMEOUT_MS",
                                      "300000",
                                      "COLLIE_TRANSPORT",
                                      "COLLIE_SOCKET_IFNAME",
                                      "COLLIE_HOST_ID",
                                      "COLLIE_SPIN",
                                      "-n,",
                                      "--nnodes",
                                      "--node-rank",
                                      "--master-addr",
                                      "--master-port",
                                      "--torch-port",
                                      "RANK",
                                      "LOCAL_WORLD_SIZE",
                                      "GROUP_RANK",
                                      "MASTER_ADDR",
                                      "MASTER_PORT",
                                      "env://",
                                      "--store",
                                      "--tag-output",
                                      "--timeout",
                                      "--grace",
                                      "--help",
                                      "124",
                                      "127"};
  for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++)
    ASSERTF(strstr(r.out, words[k]), "--help does not mention %s", words[k]);
  cr_free(&r);
}

/* Names of /dev/shm entries that look like collie segments, as one string. */
static void
cr_list_shm(char *out, size_t len)
{
  DIR *d = opendir("/dev/shm");
  size_t o = 0;
  out[0] = '\0';
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (!strncmp(e->d_name, "collie-", 7) && o < len)
      o += (size_t)snprintf(out + o, len - o, "%s\n", e->d_name);
  closedir(d);
}

/* Lists /dev/shm's collie segments into now (len bytes); 1 when one of them
 * is not in before, a newline-separated list from cr_list_shm. */
static int
cr_has_new_name(const char *before, char *now, size_t len)
{
  cr_list_shm(now, len);
  for (const char *p = now; *p;) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    int found = 0;
    for (const char *q = before; *q && !found;) {
      const char *qn = strchr(q, '\n');
      size_t m = qn ? (size_t)(qn - q) : strlen(q);
      found = m == n && !strncmp(p, q, n);
      q += m + (qn != NULL);
    }
    if (!found) return 1;
    p += n + (nl != NULL);
  }
  return 0;
}

/* A real job of two "nodes" of uneven sizes (2 and 1 ranks), each its own
 * collierun, meeting at one store: the demo's collectives are right. */
TEST_IMPL(collierun_uneven_nodes)
{
  int port = 0;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof(a);
  ASSERT(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
         getsockname(fd, (struct sockaddr *)&a, &alen) == 0);
  port = ntohs(a.sin_port);
  close(fd);
  char cmd[2048], *out = NULL;
  snprintf(cmd, sizeof(cmd),
           "cd '%s' && export COLLIE_JOB_TOKEN=uneven-nodes-token; "
           "'%s/collierun' --nprocs 2,1 --node-rank 1 --master-port %d --timeout 60 "
           "'%s/collie-demo' > node1.out 2>&1 & "
           "'%s/collierun' --nprocs 2,1 --node-rank 0 --master-port %d --timeout 60 "
           "'%s/collie-demo' > node0.out 2>&1; a=$?; wait $!; b=$?; "
           "echo \"exit $a $b\"; cat node0.out node1.out",
           test_dir(), COLLIE_BUILD_DIR, port, COLLIE_BUILD_DIR, COLLIE_BUILD_DIR, port,
           COLLIE_BUILD_DIR);
  ASSERT(test_shell(cmd, &out) == 0);
  ASSERTF(strstr(out, "exit 0 0"), "the two nodes: %s", out);
  ASSERTF(strstr(out, "all results correct") && strstr(out, "3 ranks"), "demo output: %s", out);
  free(out);
}

/* Real collie ranks under collierun: a job that succeeds exits 0; a job whose
 * last rank is SIGKILLed mid-allreduce exits 137 naming that rank. Neither
 * leaves a collie segment in /dev/shm or a rank process behind. */
TEST_IMPL(collierun_real_job)
{
  char before[8192], after[8192];
  cr_list_shm(before, sizeof(before));
  setenv("COLLIE_TEST_DIR", test_dir(), 1);
  setenv("COLLIE_LOG_DIR", test_dir(), 1); /* flight dumps of the killed job stay in the test dir */

  const char *demo[] = {"collierun", "-n", "4", COLLIE_BUILD_DIR "/collie-demo", NULL};
  struct cr_result r = cr_run(demo, NULL);
  ASSERTF(r.code == 0, "collie-demo under collierun exited %d: %s", r.code, r.err);
  ASSERTF(strstr(r.out, "all results correct"), "demo output: %s", r.out);
  cr_free(&r);

  /* Over the tcp store rank 0 serves: two world communicators in one
   * process, and destroying the world and initing it again, round after
   * round. */
  static const struct {
    const char *ranks, *test;
  } tcp_store_jobs[] = {{"2", "init_twice_tcp_2"}, {"3", "init_again_shm_3"}};
  for (size_t i = 0; i < sizeof(tcp_store_jobs) / sizeof(tcp_store_jobs[0]); i++) {
    const char *job[] = {"collierun",
                         "-n",
                         tcp_store_jobs[i].ranks,
                         COLLIE_BUILD_DIR "/tests/collie_tests",
                         "--as-rank",
                         tcp_store_jobs[i].test,
                         NULL};
    r = cr_run(job, NULL);
    ASSERTF(r.code == 0, "%s over the tcp store exited %d: %s", tcp_store_jobs[i].test, r.code,
            r.err);
    cr_free(&r);
  }

  const char *killed[] = {"collierun", "-n",
                          "3",         "--grace",
                          "1",         COLLIE_BUILD_DIR "/tests/collie_tests",
                          "--as-rank", "kill_rank_tcp_4",
                          NULL};
  r = cr_run(killed, NULL);
  ASSERTF(r.code == 137, "expected 137 (rank killed by SIGKILL), got %d: %s", r.code, r.err);
  ASSERTF(strstr(r.err, "rank 2") && strstr(r.err, "signal 9"), "collierun said: %s", r.err);
  cr_free(&r);

  /* Tests running beside this one create and unlink segments of their own
   * (a segment lives until its ranks have mapped it: milliseconds), so a
   * name that was not there before counts only if it stays. */
  int64_t until = collie__deadline_after_ms(3000);
  while (cr_has_new_name(before, after, sizeof(after)) && collie__now_ns() < until)
    collie__sleep_ns(50 * 1000000LL);
  ASSERTF(!cr_has_new_name(before, after, sizeof(after)),
          "shared-memory files left behind:\n%s\n(before:\n%s)", after, before);
  FILE *ps = popen("pgrep -f -- '[-]-as-rank kill_rank_tcp_4' | wc -l", "r");
  int alive = -1;
  ASSERT(ps && fscanf(ps, "%d", &alive) == 1);
  pclose(ps);
  ASSERTF(alive == 0, "%d rank process(es) of the killed job still alive", alive);
}
