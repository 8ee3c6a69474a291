/*
 * runner.c - runs the tests of test-list.h, each in its own process group
 * with a timeout, so a hang fails fast and a crash fails one test only.
 *
 *   collie_tests                 run every test, print "N passed, N failed"
 *   collie_tests NAME [NAME...]  run the named tests
 *   collie_tests --list          print every test name
 *   collie_tests --as-rank NAME  run NAME's function once in this process, as one
 *                                rank of a job that a launcher (collierun) started
 *
 * For a test of N ranks the runner makes a private temp directory, forks N
 * processes in one new process group with the launcher environment set (a
 * file store in that directory, a fresh job token), and waits for all of
 * them until the timeout, after which it kills the whole group. A test
 * passes when every rank exits 0 (or died by test_die_by_sigkill) and no
 * shared-memory file of its job is left in /dev/shm.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"
#include "util/util.h"
#include "test-list.h"

struct test_entry {
  const char *name;
  void (*fn)(void);
  int ranks;
  const char *transport;
  int timeout_s;
};

static const struct test_entry runner_tests[] = {
#define XX_ENTRY(name, fn, ranks, transport, timeout)                                              \
  {#name, test_fn_##fn, ranks, transport, timeout},
    TEST_LIST(XX_ENTRY)
#undef XX_ENTRY
};
#define RUNNER_NTESTS (sizeof(runner_tests) / sizeof(runner_tests[0]))

static char runner_dir[256];
static int runner_rank = -1, runner_size = 0;

int
test_rank(void)
{
  return runner_rank;
}

int
test_size(void)
{
  return runner_size;
}

const char *
test_dir(void)
{
  return runner_dir;
}

void
test_fail(const char *file, int line, const char *fmt, ...)
{
  va_list ap;
  fprintf(stderr, "[rank %d] %s:%d: ", runner_rank, file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(stderr);
  _exit(1);
}

collie_comm_t *
test_comm(void)
{
  collie_comm_t *comm = NULL;
  ASSERT_OK(collie_comm_init(&comm));
  ASSERT(comm != NULL);
  ASSERT(collie_comm_rank(comm) == runner_rank);
  ASSERT(collie_comm_size(comm) == runner_size);
  return comm;
}

/* The runner's sign that this rank's death is on purpose. */
static void
runner_mark_death(void)
{
  char path[512];
  snprintf(path, sizeof(path), "%s/expected-death-%d", runner_dir, runner_rank);
  int fd = open(path, O_CREAT | O_WRONLY, 0600);
  if (fd >= 0) close(fd);
}

void
test_die_by_sigkill(void)
{
  runner_mark_death();
  kill(getpid(), SIGKILL);
  _exit(99); /* not reached */
}

void
test_die_after_us(unsigned us)
{
  runner_mark_death();
  pid_t me = getpid();
  if (fork() == 0) {
    usleep(us);
    kill(me, SIGKILL);
    _exit(0);
  }
}

/* Everything left in f, NUL-terminated (the caller frees), growing as it goes. */
static char *
runner_read_all(FILE *f, size_t *len)
{
  size_t cap = 1 << 16, n = 0, got;
  char *buf = malloc(cap);
  ASSERT(buf != NULL);
  while ((got = fread(buf + n, 1, cap - 1 - n, f)) > 0) {
    n += got;
    if (n + 1 == cap) {
      buf = realloc(buf, cap *= 2);
      ASSERT(buf != NULL);
    }
  }
  buf[n] = '\0';
  if (len) *len = n;
  return buf;
}

char *
test_read_file(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = runner_read_all(f, len);
  fclose(f);
  return buf;
}

const char *
test_path(const char *name)
{
  static char buf[4][1024];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof(buf[k]), "%s/%s", test_dir(), name);
  return buf[k];
}

void
test_write_file(const char *path, const char *text)
{
  FILE *f = fopen(path, "w");
  ASSERTF(f, "%s: %s", path, strerror(errno));
  ASSERT(fputs(text, f) >= 0);
  ASSERT(fclose(f) == 0);
}

int
test_shell(const char *cmd, char **out)
{
  FILE *p = popen(cmd, "r");
  ASSERTF(p != NULL, "cannot run %s", cmd);
  *out = runner_read_all(p, NULL);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

char *
test_capture_stderr(void (*fn)(void *arg), void *arg)
{
  char path[512];
  snprintf(path, sizeof(path), "%s/stderr-%d-%d", runner_dir, runner_rank, (int)getpid());
  fflush(stderr);
  int saved = dup(2), fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
  ASSERT(saved >= 0 && fd >= 0);
  dup2(fd, 2);
  close(fd);
  fn(arg);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  FILE *f = fopen(path, "r");
  ASSERT(f);
  char *buf = calloc(1, 1 << 16);
  ASSERT(buf);
  size_t n = fread(buf, 1, (1 << 16) - 1, f);
  buf[n] = '\0';
  fclose(f);
  unlink(path);
  return buf;
}

unsigned
test_rand(unsigned *state)
{
  *state = *state * 1103515245u + 12345u;
  return (*state >> 8) & 0xffffff;
}

TEST_IMPL(runner_selftest)
{
  ASSERT(test_rank() >= 0 && test_rank() < test_size());
  ASSERT(getenv("COLLIE_STORE") != NULL);
  ASSERT(getenv("COLLIE_JOB_TOKEN") != NULL);
}

static int64_t
runner_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
test_now_ms(void)
{
  return runner_now_ms();
}

static void
runner_rmrf(const char *path)
{
  DIR *d = opendir(path);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char sub[1024];
      snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
      struct stat st;
      if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
        runner_rmrf(sub);
      else
        unlink(sub);
    }
    closedir(d);
  }
  rmdir(path);
}

static void
runner_make_token(char *out, size_t len)
{
  unsigned char raw[16];
  int fd = open("/dev/urandom", O_RDONLY);
  if (fd < 0 || read(fd, raw, sizeof(raw)) != (ssize_t)sizeof(raw)) {
    for (size_t i = 0; i < sizeof(raw); i++) raw[i] = (unsigned char)(rand() ^ getpid());
  }
  if (fd >= 0) close(fd);
  size_t o = 0;
  for (size_t i = 0; i < sizeof(raw) && o + 2 < len; i++)
    o += (size_t)snprintf(out + o, len - o, "%02x", raw[i]);
}

/* Counts /dev/shm entries whose name contains needle. */
static int
runner_count_shm(const char *needle)
{
  DIR *d = opendir("/dev/shm");
  int n = 0;
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strstr(e->d_name, needle)) n++;
  closedir(d);
  return n;
}

static int
runner_timeout_mult(void)
{
  const char *m = getenv("COLLIE_TEST_TIMEOUT_MULT");
  int v = m ? atoi(m) : 1;
  return v > 0 ? v : 1;
}

/* Runs one test; returns 0 when it passed. */
static int
runner_run(const struct test_entry *t)
{
  char token[64];
  snprintf(runner_dir, sizeof(runner_dir), "/tmp/collie-test-XXXXXX");
  if (!mkdtemp(runner_dir)) {
    fprintf(stderr, "%s: mkdtemp: %s\n", t->name, strerror(errno));
    return 1;
  }
  runner_make_token(token, sizeof(token));
  int nproc = t->ranks > 0 ? t->ranks : 1;
  pid_t pids[64];
  pid_t pgid = 0;
  int64_t start = runner_now_ms();
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < nproc; r++) {
    pid_t pid = fork();
    if (pid < 0) {
      fprintf(stderr, "%s: fork: %s\n", t->name, strerror(errno));
      if (pgid) kill(-pgid, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      setpgid(0, pgid);
      alarm((unsigned)(t->timeout_s * runner_timeout_mult() + 5)); /* backstop */
      setenv("COLLIE_LOG_DIR", runner_dir, 1); /* flight-recorder dumps stay with the test */
      if (t->ranks > 0) {
        char buf[600];
        runner_rank = r;
        runner_size = t->ranks;
        snprintf(buf, sizeof(buf), "%d", r);
        setenv("COLLIE_RANK", buf, 1);
        setenv("COLLIE_LOCAL_RANK", buf, 1);
        snprintf(buf, sizeof(buf), "%d", t->ranks);
        setenv("COLLIE_WORLD_SIZE", buf, 1);
        setenv("COLLIE_LOCAL_SIZE", buf, 1);
        snprintf(buf, sizeof(buf), "file://%s/store", runner_dir);
        setenv("COLLIE_STORE", buf, 1);
        setenv("COLLIE_JOB_TOKEN", token, 1);
        if (!strcmp(t->transport, "mixed") || !strcmp(t->transport, "netofi")) {
          /* Two fake hosts on this machine: ranks of one parity share memory,
           * the others are reached over tcp (netofi: over the ofi transport,
           * COLLIE_NET=ofi), so one communicator uses both. */
          snprintf(buf, sizeof(buf), "test-host-%d", r % 2);
          setenv("COLLIE_HOST_ID", buf, 1);
          setenv("COLLIE_TRANSPORT", "auto", 1);
          if (!strcmp(t->transport, "netofi")) setenv("COLLIE_NET", "ofi", 1);
        } else {
          setenv("COLLIE_TRANSPORT", t->transport, 1);
        }
        if (!getenv("COLLIE_TIMEOUT_MS")) setenv("COLLIE_TIMEOUT_MS", "20000", 1);
      }
      t->fn();
      fflush(stdout);
      fflush(stderr);
      _exit(0);
    }
    if (r == 0) pgid = pid;
    setpgid(pid, pgid);
    pids[r] = pid;
  }

  int failed = 0, left = nproc;
  int64_t deadline = start + (int64_t)t->timeout_s * 1000 * runner_timeout_mult();
  while (left > 0) {
    int status;
    pid_t pid = waitpid(-pgid, &status, WNOHANG);
    if (pid < 0 && errno != EINTR) break;
    if (pid <= 0) {
      if (runner_now_ms() > deadline) {
        fprintf(stderr, "%s: TIMEOUT after %d s; killing its ranks\n", t->name,
                t->timeout_s * runner_timeout_mult());
        kill(-pgid, SIGKILL);
        while (waitpid(-pgid, &status, 0) > 0) {
        }
        failed = 1;
        break;
      }
      usleep(2000);
      continue;
    }
    left--;
    int r = 0;
    while (r < nproc && pids[r] != pid) r++;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
      char path[512];
      snprintf(path, sizeof(path), "%s/expected-death-%d", runner_dir, r);
      if (access(path, F_OK) == 0) continue;
    }
    if (WIFSIGNALED(status))
      fprintf(stderr, "%s: rank %d killed by signal %d (%s)\n", t->name, r, WTERMSIG(status),
              strsignal(WTERMSIG(status)));
    else
      fprintf(stderr, "%s: rank %d exited with status %d\n", t->name, r, WEXITSTATUS(status));
    failed = 1;
  }
  /* A failed rank may leave the others waiting: end the group either way. */
  kill(-pgid, SIGKILL);
  while (waitpid(-pgid, NULL, 0) > 0) {
  }
  /* Shared-memory segments are named after the token (see src/transport/shm.c). */
  char needle[32];
  snprintf(needle, sizeof(needle), "collie-%016llx",
           (unsigned long long)collie__hash64(token, strlen(token), 0));
  if (runner_count_shm(needle) > 0) {
    fprintf(stderr, "%s: shared-memory file of the job left in /dev/shm\n", t->name);
    failed = 1;
  }
  runner_rmrf(runner_dir);
  printf("%s %s (%.2f s)\n", failed ? "FAIL" : "ok  ", t->name,
         (double)(runner_now_ms() - start) / 1000.0);
  fflush(stdout);
  return failed;
}

int
main(int argc, char **argv)
{
  int passed = 0, failed = 0;
  signal(SIGPIPE, SIG_IGN);
  if (argc == 3 && !strcmp(argv[1], "--as-rank")) {
    /* The launcher set the environment; the test function runs as a user program would. */
    const char *dir = getenv("COLLIE_TEST_DIR");
    runner_rank = getenv("COLLIE_RANK") ? atoi(getenv("COLLIE_RANK")) : 0;
    runner_size = getenv("COLLIE_WORLD_SIZE") ? atoi(getenv("COLLIE_WORLD_SIZE")) : 1;
    snprintf(runner_dir, sizeof(runner_dir), "%s", dir ? dir : "/tmp");
    for (size_t i = 0; i < RUNNER_NTESTS; i++)
      if (!strcmp(argv[2], runner_tests[i].name)) {
        runner_tests[i].fn();
        return 0;
      }
    fprintf(stderr, "no test named %s (see --list)\n", argv[2]);
    return 2;
  }
  if (argc > 1 && !strcmp(argv[1], "--list")) {
    for (size_t i = 0; i < RUNNER_NTESTS; i++) printf("%s\n", runner_tests[i].name);
    return 0;
  }
  for (size_t i = 0; i < RUNNER_NTESTS; i++) {
    int selected = argc == 1;
    for (int a = 1; a < argc; a++)
      if (!strcmp(argv[a], runner_tests[i].name)) selected = 1;
    if (!selected) continue;
    if (runner_run(&runner_tests[i]) == 0)
      passed++;
    else
      failed++;
  }
  for (int a = 1; a < argc; a++) {
    size_t i = 0;
    while (i < RUNNER_NTESTS && strcmp(argv[a], runner_tests[i].name)) i++;
    if (i == RUNNER_NTESTS) {
      fprintf(stderr, "no test named %s (see --list)\n", argv[a]);
      failed++;
    }
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
