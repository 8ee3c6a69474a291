/*
 * collierun.c - the launcher: starts N local ranks of a program with the COLLIE_* environment
 * set (rank, world size, local rank/size, store address, job token) and torchrun's variables
 * beside it (RANK, ..., MASTER_ADDR, and a MASTER_PORT for torch's own store that is never
 * collie's), watches them, and ends the whole job as soon as one rank fails, a signal arrives
 * or a timeout passes.
 *
 * It depends on libc and, for the list of COLLIE_* variables its --help prints, on
 * core/params.h from the library's static archive (one table of variables, params.def);
 * it calls nothing else of the library, so a rank's failure can never take it down.
 *
 * Process model. Each rank runs in a process group of its own whose id is the rank's pid, so
 * that a signal to the rank also reaches the children it forks itself (a shell pipeline, data
 * loader workers): collierun always signals -pgid, never a bare pid. When a rank's first process
 * exits, whatever is left in its group is killed with SIGKILL before that process is reaped;
 * the zombie keeps the group id reserved meanwhile, so the kill can never hit a stranger whose
 * pid reused the number. Three things keep anything from outliving collierun:
 *   - every rank has PR_SET_PDEATHSIG = SIGKILL, set before exec, so a SIGKILL of collierun
 *     still takes the ranks down;
 *   - a small sentinel process (in its own process group, ignoring SIGINT/SIGTERM/SIGHUP)
 *     holds the read end of a pipe that only collierun writes to. It learns each rank's group
 *     id through that pipe, and when the pipe reaches EOF (collierun is gone, however it died)
 *     it sends SIGKILL to every group still registered. This covers the ranks' own children,
 *     which PDEATHSIG does not;
 *   - on every normal path collierun terminates the groups itself: SIGTERM (or the signal it
 *     received), then SIGKILL after a grace period.
 * Processes that leave their rank's process group on purpose (setsid, daemons) are not tracked.
 *
 * Ranks are separate process groups, so a terminal's Ctrl-C reaches collierun only; collierun
 * forwards it. For the same reason a rank cannot read a terminal (it would be stopped by
 * SIGTTIN): global rank 0 inherits stdin unless it is a terminal, every other rank reads
 * /dev/null.
 *
 * Output. Without --tag-output the ranks write straight to collierun's stdout and stderr. With
 * it, each rank's stdout and stderr are pipes that collierun reads in one poll() loop; complete
 * lines are written out with a "[rank] " prefix, and since collierun is the only writer and
 * writes whole lines, lines of different ranks never interleave mid-line.
 *
 * Signals are blocked and read from a signalfd in the same poll() loop, so SIGCHLD, SIGINT and
 * SIGTERM are handled synchronously, with no async-signal-safety concerns.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/introspect.h"
#include "core/params.h"

#define RUN_MAX_NPROC 1024
#define RUN_MAX_NNODES 65536
#define RUN_DEFAULT_GRACE_S 3.0
/* A line longer than this is written out in pieces rather than buffered without bound. */
#define RUN_MAX_LINE (1u << 20)
/* After the last rank is reaped, how long its output pipes may stay open (held by processes
 * that left the rank's group) before collierun stops reading them. */
#define RUN_DRAIN_MS 1000

/* Exit codes of collierun itself (a failed rank's own status is passed through). */
#define RUN_EXIT_ERROR 1
#define RUN_EXIT_USAGE 2
#define RUN_EXIT_TIMEOUT 124
#define RUN_EXIT_NOEXEC 126
#define RUN_EXIT_NOTFOUND 127

static const char run_help[] =
    "Usage: collierun [options] program [args...]\n"
    "\n"
    "Starts N local ranks of program, each with the COLLIE_* and torchrun variables below set,\n"
    "and waits for all of them. collierun serves the job's rendezvous store at the store\n"
    "address itself (node 0's collierun, with --nnodes > 1), so the store outlives any rank:\n"
    "survivors of a rank 0 that died can shrink and go on (a --store given is served by\n"
    "rank 0, or is a file store); node 0's collierun goes on serving it after its own ranks\n"
    "end while other nodes' ranks use it. If a rank exits non-zero or is killed by a\n"
    "signal, collierun notes how it ended in the store (peers on other hosts read it), the\n"
    "other ranks are terminated (SIGTERM, then SIGKILL after the grace period) and collierun\n"
    "exits with that rank's status (its exit code, or 128+signal).\n"
    "\n"
    "Options:\n"
    "  -n, --nproc N          ranks to start on this node (1..1024, default 1);\n"
    "                         also spelled --nproc-per-node\n"
    "      --nnodes M         nodes in the job, each running its own collierun (default 1)\n"
    "      --nprocs LIST      every node's rank count, the same list on every node, for\n"
    "                         nodes of uneven sizes (e.g. 2,1,3): sets --nnodes and this\n"
    "                         node's -n; global rank = the counts of the nodes before + local\n"
    "      --node-rank I      this node's index, 0..M-1 (default 0);\n"
    "                         global rank = I*N + local rank, world size = N*M\n"
    "      --master-addr A    host where node 0's collierun serves the store (default\n"
    "                         127.0.0.1)\n"
    "      --master-port P    its port (1..65535). Default with --nnodes 1: a free port,\n"
    "                         found by binding port 0 on A. Required when --nnodes > 1\n"
    "      --torch-port P     MASTER_PORT for torch.distributed (1..65535), where torch's\n"
    "                         rank 0 binds its own store; never collie's port. Default:\n"
    "                         MASTER_PORT if set in collierun's environment, else with\n"
    "                         --nnodes 1 another free port on MASTER_ADDR, with\n"
    "                         --nnodes > 1 the store's port + 1\n"
    "      --store URL        use this store instead of tcp://A:P: tcp://host:port or\n"
    "                         file:///dir (a directory every rank can reach)\n"
    "      --tag-output       prefix every line of every rank's stdout and stderr with\n"
    "                         \"[rank] \" (global rank); lines are never interleaved mid-line\n"
    "      --bind-to cpu|none cpu: pin local rank i to the i-th CPU collierun may run on\n"
    "                         (round robin when ranks outnumber them); none (default): the\n"
    "                         kernel places and moves ranks\n"
    "      --timeout S        stop the whole job after S seconds (may be fractional), exit 124\n"
    "      --grace S          seconds between SIGTERM and SIGKILL when stopping ranks\n"
    "                         (default 3)\n"
    "      --keep-going       a rank that fails does not stop the others: collierun waits\n"
    "                         for every rank and exits with the first failure's status\n"
    "                         (jobs that go on after a rank dies: collie_comm_shrink)\n"
    "  -h, --help             print this help and exit\n"
    "      --                 end of options: the next argument is the program\n"
    "\n"
    "Set by collierun for each rank:\n"
    "  COLLIE_RANK            global rank: node_rank*N + local rank (--nprocs: the\n"
    "                         counts of the nodes before + local rank)\n"
    "  COLLIE_WORLD_SIZE      ranks in the job: N*nnodes (--nprocs: their sum)\n"
    "  COLLIE_LOCAL_RANK      rank on this node, 0..N-1\n"
    "  COLLIE_LOCAL_SIZE      ranks on this node: N\n"
    "  COLLIE_STORE           rendezvous store: tcp://host:port (served by node 0's\n"
    "                         collierun; a --store url by rank 0) or file:///dir\n"
    "  COLLIE_STORE_SERVE     0 when collierun serves the store (rank 0 then does not)\n"
    "  COLLIE_JOB_TOKEN       secret shared by the job's ranks: 32 hex characters from\n"
    "                         /dev/urandom, fresh for every run, unless COLLIE_JOB_TOKEN is\n"
    "                         already set in collierun's environment. With --nnodes > 1 it\n"
    "                         must be set, to the same value, on every node\n"
    "  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE\n"
    "                         as COLLIE_RANK, COLLIE_WORLD_SIZE, COLLIE_LOCAL_RANK and\n"
    "                         COLLIE_LOCAL_SIZE, under torchrun's names\n"
    "  GROUP_RANK             this node's index: --node-rank\n"
    "  MASTER_ADDR            --master-addr A if given, else an inherited MASTER_ADDR, else\n"
    "                         the host of a --store tcp:// url, else 127.0.0.1\n"
    "  MASTER_PORT            torch's port: see --torch-port\n"
    "  So collierun -n 4 python3 train.py runs torch.distributed's env:// init unchanged.\n"
    "\n"
    "Read by the library (pass them through collierun's environment): see below.\n"
    "\n"
    "Exit status: 0 when every rank exits 0; a failed rank's status (exit code or 128+signal);\n"
    "124 on --timeout; 128+signal when collierun got SIGINT, SIGTERM or SIGHUP (forwarded to\n"
    "every rank); 127 when the program is not found, 126 when it cannot be executed; 2 on a\n"
    "usage error; 1 on any other error of collierun itself.\n"
    "\n"
    "Examples:\n"
    "  collierun -n 4 ./train\n"
    "  collierun -n 2 --tag-output --timeout 600 python3 train.py --epochs 3\n"
    "  export COLLIE_JOB_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n')  # on all nodes\n"
    "  collierun -n 8 --nnodes 2 --node-rank 0 --master-addr node0 --master-port 29500 ./train\n";

/* The library's variables, from the one list the library parses them with. */
static void
run_param_line(const char *name, const char *def, const char *help, void *arg)
{
  (void)arg;
  printf("  %-22s %s (default: %s)\n", name, help, def);
}

static void
run_print_params(void)
{
  printf("\nEvery COLLIE_* variable the library reads (docs/env.md):\n");
  collie__params_describe(run_param_line, NULL);
}

struct run_opts {
  int nproc, nnodes, node_rank;
  const char *nprocs;      /* --nprocs: every node's rank count ("2,1,3"), or NULL */
  long rank_base;          /* global rank of this node's local rank 0 */
  long world_size;         /* ranks in the job */
  const char *master_addr; /* NULL: 127.0.0.1 */
  int master_port;         /* 0: pick a free one */
  int torch_port;          /* --torch-port, or 0 */
  const char *store;       /* --store, or NULL */
  int tag_output;
  int bind_cpu;     /* --bind-to cpu: each rank on one CPU of collierun's own set */
  double timeout_s; /* 0: none */
  double grace_s;
  int keep_going; /* --keep-going: a failed rank does not stop the others */
  char **prog_argv;
};

/* One output stream of a rank (stdout or stderr) under --tag-output. */
struct run_stream {
  int fd; /* read end of the rank's pipe; -1 once closed */
  char *buf;
  size_t len, cap;
};

struct run_rank {
  int rank;  /* global */
  pid_t pid; /* also its process group id; 0 when never started */
  int alive; /* started and not reaped yet */
  int exec_failed;
  struct run_stream out[2]; /* [0] -> our stdout, [1] -> our stderr */
};

enum run_phase { RUN_RUNNING, RUN_STOPPING, RUN_KILLED };

struct run_job {
  struct run_opts o;
  char store_url[600];
  char token[300];
  /* torchrun's MASTER_ADDR and MASTER_PORT for the ranks; "" leaves the variable as inherited
   * (unset when collierun cannot tell: a file store across nodes). */
  char torch_addr[300];
  char torch_port[16];
  struct run_rank *ranks;
  int nstarted, nalive;
  enum run_phase phase;
  int exit_code;
  int64_t timeout_at, kill_at, drain_at; /* monotonic ms; 0: none */
  int sigfd;
  int sentinel_fd; /* write end of the sentinel's pipe; -1: none */
  pid_t sentinel_pid;
  int dest_dead[2]; /* our stdout / stderr failed (EPIPE): stop forwarding there */
  struct sigaction orig_pipe, orig_chld;
  sigset_t orig_mask;
  /* The store collierun serves (its own tcp url, node 0), or NULL; serving (set on every node
   * then) says the ranks must not serve it themselves. */
  struct collie__store_tcp_server *store_server;
  int store_serving;
};

/* Messages of the sentinel protocol: fixed size, well below PIPE_BUF, so writes are atomic. */
struct run_sentinel_msg {
  int32_t op; /* RUN_SENTINEL_ADD or RUN_SENTINEL_DEL */
  int32_t pgid;
};
#define RUN_SENTINEL_ADD 1
#define RUN_SENTINEL_DEL 2

static int64_t
run_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Writes all of buf to fd; returns 0 or -1 with errno set. */
static int
run_write_all(int fd, const char *buf, size_t n)
{
  while (n > 0) {
    ssize_t w = write(fd, buf, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        poll(&p, 1, 100);
        continue;
      }
      return -1;
    }
    buf += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Prints "collierun: <msg>\n" to stderr with one write, so it never splits a rank's line. */
static void __attribute__((format(printf, 1, 2))) run_msg(const char *fmt, ...)
{
  char buf[1024];
  int n = snprintf(buf, sizeof(buf), "collierun: ");
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (m < 0) m = 0;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof(buf) - 2) len = sizeof(buf) - 2;
  buf[len++] = '\n';
  (void)run_write_all(STDERR_FILENO, buf, len);
}

/* The value of environment variable name, or NULL when it is unset or empty (the library
 * treats an empty variable as unset too). */
static const char *
run_getenv(const char *name)
{
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* ---- options ---- */

static int __attribute__((format(printf, 1, 2))) run_usage_error(const char *fmt, ...)
{
  char buf[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  run_msg("%s", buf);
  fprintf(stderr, "Try 'collierun --help' for more information.\n");
  return -1;
}

/* Parses a decimal integer in [lo, hi] for option name; 0 or -1 (usage error printed). */
static int
run_parse_int(const char *name, const char *s, long lo, long hi, int *out)
{
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || errno == ERANGE)
    return run_usage_error("%s: '%s' is not an integer", name, s);
  if (v < lo || v > hi)
    return run_usage_error("%s: %ld is out of range (%ld..%ld)", name, v, lo, hi);
  *out = (int)v;
  return 0;
}

/* Parses a number of seconds (fractions allowed), > 0 or >= 0 as allow_zero says. */
static int
run_parse_seconds(const char *name, const char *s, int allow_zero, double *out)
{
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (*s == '\0' || *end != '\0' || errno == ERANGE || !isfinite(v) || v < 0 ||
      (v == 0 && !allow_zero) || v > 1e9)
    return run_usage_error("%s: '%s' is not a %s number of seconds", name, s,
                           allow_zero ? "non-negative" : "positive");
  *out = v;
  return 0;
}

enum run_optid {
  OPT_NPROC,
  OPT_NPROCS,
  OPT_NNODES,
  OPT_NODE_RANK,
  OPT_MASTER_ADDR,
  OPT_MASTER_PORT,
  OPT_TORCH_PORT,
  OPT_STORE,
  OPT_TAG_OUTPUT,
  OPT_BIND_TO,
  OPT_TIMEOUT,
  OPT_GRACE,
  OPT_KEEP_GOING,
  OPT_HELP
};

static const struct {
  const char *name;
  int has_value;
  enum run_optid id;
} run_optable[] = {
    {"-n", 1, OPT_NPROC},
    {"--nproc", 1, OPT_NPROC},
    {"--nproc-per-node", 1, OPT_NPROC},
    {"--nprocs", 1, OPT_NPROCS},
    {"--nnodes", 1, OPT_NNODES},
    {"--node-rank", 1, OPT_NODE_RANK},
    {"--master-addr", 1, OPT_MASTER_ADDR},
    {"--master-port", 1, OPT_MASTER_PORT},
    {"--torch-port", 1, OPT_TORCH_PORT},
    {"--store", 1, OPT_STORE},
    {"--tag-output", 0, OPT_TAG_OUTPUT},
    {"--bind-to", 1, OPT_BIND_TO},
    {"--timeout", 1, OPT_TIMEOUT},
    {"--grace", 1, OPT_GRACE},
    {"--keep-going", 0, OPT_KEEP_GOING},
    {"-h", 0, OPT_HELP},
    {"--help", 0, OPT_HELP},
};

/* --nprocs LIST: every node's rank count, the same list on every node (nodes
 * of uneven sizes). It gives --nnodes (its length) and this node's -n (its
 * entry at --node-rank); either, when given too, must agree. */
static int
run_parse_nprocs(struct run_opts *o, int have_nproc, int have_nnodes)
{
  const char *p = o->nprocs;
  long world = 0, base = 0;
  int n = 0, mine = 0;
  while (*p) {
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || errno || v < 1 || v > RUN_MAX_NPROC || (*end && *end != ','))
      return run_usage_error("--nprocs '%s': entry %d is not a count of ranks in 1..%d "
                             "(expected e.g. 2,1,3)",
                             o->nprocs, n + 1, RUN_MAX_NPROC);
    if (n == o->node_rank) {
      mine = (int)v;
      base = world;
    }
    world += v;
    if (++n > RUN_MAX_NNODES || world > INT_MAX)
      return run_usage_error("--nprocs '%s': too many nodes or ranks", o->nprocs);
    p = *end ? end + 1 : end;
    if (*end && !*p) return run_usage_error("--nprocs '%s' ends with a comma", o->nprocs);
  }
  if (n == 0) return run_usage_error("--nprocs is empty");
  if (have_nnodes && o->nnodes != n)
    return run_usage_error("--nnodes %d but --nprocs '%s' lists %d nodes", o->nnodes, o->nprocs, n);
  if (o->node_rank >= n)
    return run_usage_error("--node-rank %d is out of range for --nprocs '%s' (%d nodes)",
                           o->node_rank, o->nprocs, n);
  if (have_nproc && o->nproc != mine)
    return run_usage_error("-n %d but --nprocs '%s' gives node %d %d ranks", o->nproc, o->nprocs,
                           o->node_rank, mine);
  o->nnodes = n;
  o->nproc = mine;
  o->rank_base = base;
  o->world_size = world;
  return 0;
}

/* Fills o from argv. Returns 0 to run, 1 when --help was printed, -1 on a usage error (the
 * message, naming the option, is already printed). Options end at the first argument that
 * does not start with '-', or after "--". Accepts "--opt value", "--opt=value" and "-nN". */
static int
run_parse_args(int argc, char **argv, struct run_opts *o)
{
  memset(o, 0, sizeof(*o));
  o->nproc = 1;
  o->nnodes = 1;
  o->grace_s = RUN_DEFAULT_GRACE_S;
  int have_addr = 0, have_nproc = 0, have_nnodes = 0, i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || a[1] == '\0') break;
    if (!strcmp(a, "--")) {
      i++;
      break;
    }
    char name[64];
    const char *val = NULL;
    const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
    if (eq) {
      snprintf(name, sizeof(name), "%.*s", (int)(eq - a), a);
      val = eq + 1;
    } else if (a[1] != '-' && a[2] != '\0') { /* -n4 */
      snprintf(name, sizeof(name), "%.2s", a);
      val = a + 2;
    } else {
      snprintf(name, sizeof(name), "%s", a);
    }
    size_t k = 0, nopt = sizeof(run_optable) / sizeof(run_optable[0]);
    while (k < nopt && strcmp(run_optable[k].name, name)) k++;
    if (k == nopt) return run_usage_error("unknown option '%s'", a);
    if (run_optable[k].has_value && !val) {
      if (i + 1 >= argc) return run_usage_error("option %s needs a value", name);
      val = argv[++i];
    } else if (!run_optable[k].has_value && val) {
      return run_usage_error("option %s takes no value", name);
    }
    switch (run_optable[k].id) {
    case OPT_NPROC:
      if (run_parse_int(name, val, 1, RUN_MAX_NPROC, &o->nproc)) return -1;
      have_nproc = 1;
      break;
    case OPT_NPROCS:
      o->nprocs = val;
      break;
    case OPT_NNODES:
      if (run_parse_int(name, val, 1, RUN_MAX_NNODES, &o->nnodes)) return -1;
      have_nnodes = 1;
      break;
    case OPT_NODE_RANK:
      if (run_parse_int(name, val, 0, RUN_MAX_NNODES - 1, &o->node_rank)) return -1;
      break;
    case OPT_MASTER_ADDR:
      if (val[0] == '\0' || strlen(val) > 255 || strpbrk(val, " \t\n/"))
        return run_usage_error("%s: '%s' is not a host name or address", name, val);
      o->master_addr = val;
      have_addr = 1;
      break;
    case OPT_MASTER_PORT:
      if (run_parse_int(name, val, 1, 65535, &o->master_port)) return -1;
      break;
    case OPT_TORCH_PORT:
      if (run_parse_int(name, val, 1, 65535, &o->torch_port)) return -1;
      break;
    case OPT_STORE:
      if ((strncmp(val, "tcp://", 6) || strlen(val) <= 6) &&
          (strncmp(val, "file:///", 8) || strlen(val) <= 7))
        return run_usage_error("%s: '%s' is neither tcp://host:port nor file:///dir", name, val);
      if (strlen(val) > 512) return run_usage_error("%s: the url is too long", name);
      o->store = val;
      break;
    case OPT_TAG_OUTPUT:
      o->tag_output = 1;
      break;
    case OPT_BIND_TO:
      if (strcmp(val, "cpu") && strcmp(val, "none"))
        return run_usage_error("%s: '%s' is neither cpu nor none", name, val);
      o->bind_cpu = !strcmp(val, "cpu");
      break;
    case OPT_TIMEOUT:
      if (run_parse_seconds(name, val, 0, &o->timeout_s)) return -1;
      break;
    case OPT_GRACE:
      if (run_parse_seconds(name, val, 1, &o->grace_s)) return -1;
      break;
    case OPT_KEEP_GOING:
      o->keep_going = 1;
      break;
    case OPT_HELP:
      fputs(run_help, stdout);
      run_print_params();
      fflush(stdout);
      return 1;
    }
  }
  if (i >= argc) return run_usage_error("missing the program to run");
  o->prog_argv = argv + i;
  if (o->nprocs && run_parse_nprocs(o, have_nproc, have_nnodes) != 0) return -1;
  if (o->node_rank >= o->nnodes)
    return run_usage_error("--node-rank %d is out of range for --nnodes %d (0..%d)", o->node_rank,
                           o->nnodes, o->nnodes - 1);
  if (o->store && (have_addr || o->master_port))
    return run_usage_error("--store cannot be combined with --master-addr or --master-port");
  if (!o->nprocs) {
    if ((long)o->nproc * o->nnodes > INT_MAX)
      return run_usage_error("-n %d times --nnodes %d is too many ranks", o->nproc, o->nnodes);
    o->rank_base = (long)o->node_rank * o->nproc;
    o->world_size = (long)o->nproc * o->nnodes;
  }
  if (o->nnodes > 1 && !o->store && !o->master_port)
    return run_usage_error("--nnodes %d needs --master-port (or --store): every node must use "
                           "the same store, so no free port can be picked on one node",
                           o->nnodes);
  if (o->torch_port && o->torch_port == o->master_port)
    return run_usage_error("--torch-port %d is also --master-port: torch's rank 0 and collie's "
                           "both bind a store there, so they need different ports",
                           o->torch_port);
  if (o->nnodes > 1 && !getenv("COLLIE_JOB_TOKEN"))
    return run_usage_error("--nnodes %d needs COLLIE_JOB_TOKEN set, to the same value, on every "
                           "node (a token made up by each node would not match)",
                           o->nnodes);
  return 0;
}

/* ---- job identity: token and store ---- */

/* Sets j->token from COLLIE_JOB_TOKEN or 16 random bytes. Returns 0 or -1 (message printed). */
static int
run_make_token(struct run_job *j)
{
  const char *env = getenv("COLLIE_JOB_TOKEN");
  if (env) {
    if (env[0] == '\0' || strlen(env) >= sizeof(j->token)) {
      run_msg("COLLIE_JOB_TOKEN is set but %s", env[0] ? "too long" : "empty");
      return -1;
    }
    snprintf(j->token, sizeof(j->token), "%s", env);
    return 0;
  }
  unsigned char raw[16];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t got = fd >= 0 ? read(fd, raw, sizeof(raw)) : -1;
  int err = errno;
  if (fd >= 0) close(fd);
  if (got != (ssize_t)sizeof(raw)) {
    run_msg("cannot read a job token from /dev/urandom: %s",
            got < 0 ? strerror(err) : "short read");
    return -1;
  }
  for (size_t k = 0; k < sizeof(raw); k++) snprintf(j->token + 2 * k, 3, "%02x", raw[k]);
  return 0;
}

/* Finds a free TCP port on addr by binding port 0 and closing the socket again, one other
 * than avoid (0: any). Nothing holds the port afterwards, so another program may take it
 * before rank 0 binds it; that race is accepted (torchrun has it too). what names where addr
 * came from and option the option that sets the port instead, for the message. Returns the
 * port, or -1 (message printed). */
static int
run_free_port(const char *addr, const char *what, const char *option, int avoid)
{
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int gai = getaddrinfo(addr, "0", &hints, &res);
  if (gai != 0) {
    run_msg("%s %s: %s", what, addr, gai_strerror(gai));
    return -1;
  }
  int port = -1, err = 0;
  /* The kernel may hand out the avoided port again now that it is free; a few more tries
   * make that vanishingly unlikely. */
  for (int tries = 0; tries < 16 && port < 0; tries++) {
    for (struct addrinfo *ai = res; ai && port < 0; ai = ai->ai_next) {
      int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0) {
        err = errno;
        continue;
      }
      struct sockaddr_storage ss;
      socklen_t sl = sizeof(ss);
      if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
          getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET)
          port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6)
          port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        if (port == avoid) {
          port = -1;
          err = EADDRINUSE;
        }
      } else {
        err = errno;
      }
      close(fd);
    }
    if (port < 0 && err != EADDRINUSE) break; /* bind itself fails: retrying will not help */
  }
  freeaddrinfo(res);
  if (port <= 0)
    run_msg("cannot find a free port on %s %s: %s (is it an address of this host? otherwise "
            "pass %s)",
            what, addr, strerror(err), option);
  return port > 0 ? port : -1;
}

/* Sets j->store_url; a free port it picks is not avoid (0: any). Returns collie's store port
 * (0 for a file store, or a tcp url whose port collierun cannot read), or -1 (message
 * printed). */
static int
run_make_store(struct run_job *j, int avoid)
{
  if (j->o.store) {
    snprintf(j->store_url, sizeof(j->store_url), "%s", j->o.store);
    if (strncmp(j->o.store, "tcp://", 6)) return 0;
    const char *colon = strrchr(j->o.store + 6, ':'), *bracket = strrchr(j->o.store + 6, ']');
    char *end = NULL;
    long port = colon && (!bracket || bracket < colon) ? strtol(colon + 1, &end, 10) : 0;
    return port > 0 && port <= 65535 && *end == '\0' ? (int)port : 0;
  }
  const char *addr = j->o.master_addr ? j->o.master_addr : "127.0.0.1";
  int port = j->o.master_port;
  if (port == 0 && (port = run_free_port(addr, "--master-addr", "--master-port", avoid)) < 0)
    return -1;
  /* An IPv6 literal needs brackets to be told apart from the port. */
  int v6 = strchr(addr, ':') && addr[0] != '[';
  snprintf(j->store_url, sizeof(j->store_url), "tcp://%s%s%s:%d", v6 ? "[" : "", addr,
           v6 ? "]" : "", port);
  return port;
}

/* Serves the store of j->store_url here, when collierun made it (a tcp url of its own): on node
 * 0 it starts the library's store server on it, in a thread of this process, which outlives
 * every rank (so that the survivors of a rank 0 that died can still meet and shrink); on every
 * node the ranks are told not to serve it (COLLIE_STORE_SERVE=0). A --store url is left to rank
 * 0, as before. Returns 0, or -1 (message printed: the port is taken, say). */
static int
run_serve_store(struct run_job *j, const char *host, int port)
{
  if (j->o.store) return 0;
  j->store_serving = 1;
  if (j->o.node_rank != 0) return 0;
  if (collie__store_serve(j->store_url, host, port, j->token, &j->store_server) != COLLIE_SUCCESS) {
    run_msg("cannot serve the store at %s: %s", j->store_url, collie_last_error());
    return -1;
  }
  return 0;
}

/* The host of a tcp:// store url, without the brackets of an IPv6 literal, into out (cap
 * bytes); "" when url is no tcp url. */
static void
run_store_host(const char *url, char *out, size_t cap)
{
  out[0] = '\0';
  if (strncmp(url, "tcp://", 6)) return;
  const char *h = url + 6, *colon = strrchr(h, ':');
  if (!colon) return;
  size_t n = (size_t)(colon - h);
  if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
    h++;
    n -= 2;
  }
  snprintf(out, cap, "%.*s", (int)n, h);
}

/* The port torch must use whatever else happens: --torch-port, else MASTER_PORT from
 * collierun's environment (checked to be a port). 0 when neither is set; -1 on a bad
 * MASTER_PORT (message printed). */
static int
run_fixed_torch_port(const struct run_opts *o)
{
  if (o->torch_port) return o->torch_port;
  const char *env = run_getenv("MASTER_PORT");
  if (!env) return 0;
  char *end;
  errno = 0;
  long v = strtol(env, &end, 10);
  if (*end != '\0' || errno == ERANGE || v < 1 || v > 65535) {
    run_msg("MASTER_PORT='%s' in collierun's environment is not a port (1..65535); torch's "
            "rank 0 would fail to bind it. Unset it or pass --torch-port",
            env);
    return -1;
  }
  return (int)v;
}

/* Sets j->torch_addr and j->torch_port, torchrun's MASTER_ADDR and MASTER_PORT, where torch's
 * rank 0 binds its own TCPStore (env:// init). It must not be collie's store port: rank 0 of a
 * collie job binds that one inside the library. fixed is run_fixed_torch_port's answer,
 * collie_port run_make_store's. Returns 0, or collierun's exit code (message printed):
 * RUN_EXIT_USAGE when the ports collide, RUN_EXIT_ERROR when no free port is found. */
static int
run_make_torch(struct run_job *j, int fixed, int collie_port)
{
  const struct run_opts *o = &j->o;
  const char *env_addr = run_getenv("MASTER_ADDR");
  if (o->master_addr)
    snprintf(j->torch_addr, sizeof(j->torch_addr), "%s", o->master_addr);
  else if (env_addr)
    snprintf(j->torch_addr, sizeof(j->torch_addr), "%s", env_addr);
  else if (o->store)
    run_store_host(o->store, j->torch_addr, sizeof(j->torch_addr));
  else
    snprintf(j->torch_addr, sizeof(j->torch_addr), "127.0.0.1");
  /* One node with a file store: rank 0 is here. */
  if (!j->torch_addr[0] && o->nnodes == 1)
    snprintf(j->torch_addr, sizeof(j->torch_addr), "127.0.0.1");

  if (fixed && fixed == collie_port) {
    if (o->torch_port)
      run_msg("--torch-port %d is also the port of collie's store %s: torch's rank 0 and "
              "collie's both bind a store there, so they need different ports",
              fixed, j->store_url);
    else
      run_msg("MASTER_PORT=%s in collierun's environment is also the port of collie's store "
              "%s: torch's rank 0 and collie's both bind a store there. Unset MASTER_PORT, "
              "or pass another --master-port or a --torch-port",
              run_getenv("MASTER_PORT"), j->store_url);
    return RUN_EXIT_USAGE;
  }
  if (fixed && !o->torch_port) {
    snprintf(j->torch_port, sizeof(j->torch_port), "%s", run_getenv("MASTER_PORT"));
    return 0; /* passed on unchanged */
  }
  int port = fixed;
  if (!port && o->nnodes == 1) {
    port = run_free_port(j->torch_addr, o->master_addr ? "--master-addr" : "MASTER_ADDR",
                         "--torch-port", collie_port);
    if (port < 0) return RUN_EXIT_ERROR;
  } else if (!port && collie_port) {
    /* Several nodes: every node's collierun must derive the same port without talking, hence
     * a fixed offset from the one port they already share. */
    if (collie_port == 65535) {
      run_msg("--nnodes %d: torch's port defaults to collie's store port + 1, and %s leaves "
              "none; pass --torch-port",
              o->nnodes, j->store_url);
      return RUN_EXIT_USAGE;
    }
    port = collie_port + 1;
  }
  if (port) snprintf(j->torch_port, sizeof(j->torch_port), "%d", port);
  return 0;
}

/* ---- the sentinel ---- */

/* Body of the sentinel process: collects group ids until the pipe closes, then kills the
 * groups still registered. Never returns. */
static void __attribute__((noreturn)) run_sentinel_main(int rfd, int max)
{
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  int null = open("/dev/null", O_RDWR);
  if (null >= 0) {
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
  }
  /* Holding no copy of a pipe collierun's caller reads from, the sentinel never delays that
   * caller's EOF. */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  if (rfd > 3) close_range(3, (unsigned)rfd - 1, 0);
  close_range((unsigned)rfd + 1, ~0u, 0);
#else
  long maxfd = sysconf(_SC_OPEN_MAX);
  if (maxfd < 0 || maxfd > 65536) maxfd = 65536;
  for (int fd = 3; fd < maxfd; fd++)
    if (fd != rfd) close(fd);
#endif
  pid_t *pg = calloc((size_t)max, sizeof(*pg));
  int n = 0;
  for (;;) {
    struct run_sentinel_msg m;
    ssize_t r = read(rfd, &m, sizeof(m));
    if (r < 0 && errno == EINTR) continue;
    if (r != (ssize_t)sizeof(m)) break;
    if (m.op == RUN_SENTINEL_ADD && pg && n < max) {
      pg[n++] = m.pgid;
    } else if (m.op == RUN_SENTINEL_DEL && pg) {
      for (int k = 0; k < n; k++)
        if (pg[k] == m.pgid) pg[k--] = pg[--n];
    }
  }
  for (int k = 0; k < n; k++) kill(-pg[k], SIGKILL);
  free(pg);
  _exit(0);
}

/* Starts the sentinel. Must run before any rank pipe or the signalfd exists. Returns 0 or -1
 * (message printed). */
static int
run_sentinel_start(struct run_job *j)
{
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    run_msg("pipe: %s", strerror(errno));
    return -1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    run_msg("fork: %s", strerror(errno));
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (pid == 0) {
    close(p[1]);
    /* Its own group: a kill of collierun's group (a test runner's timeout, a shell's job
     * control) must leave it alive to clean up. */
    setpgid(0, 0);
    run_sentinel_main(p[0], j->o.nproc);
  }
  setpgid(pid, pid);
  close(p[0]);
  j->sentinel_fd = p[1];
  j->sentinel_pid = pid;
  return 0;
}

static void
run_sentinel_send(struct run_job *j, int op, pid_t pgid)
{
  if (j->sentinel_fd < 0) return;
  struct run_sentinel_msg m = {.op = op, .pgid = (int32_t)pgid};
  if (run_write_all(j->sentinel_fd, (const char *)&m, sizeof(m)) != 0) {
    close(j->sentinel_fd); /* the sentinel died; PDEATHSIG still covers the ranks */
    j->sentinel_fd = -1;
  }
}

/* ---- starting ranks ---- */

/* A rank's environment, built by collierun before the fork: the child of a process with
 * threads (the store's server) may only make async-signal-safe calls until exec, and setenv
 * allocates. A child that forked while the server's thread held the allocator's lock waited on
 * it forever before exec (seen under ASan's allocator, which does not reset its locks at fork),
 * and collierun with it. */
struct run_env {
  char **vars; /* NULL-terminated, for execvpe */
  char *own;   /* the strings collierun adds, one block */
};

static void
run_env_free(struct run_env *e)
{
  free(e->vars);
  free(e->own);
  e->vars = NULL;
  e->own = NULL;
}

/* Builds local rank `local`'s environment: collierun's own with the names below replaced.
 * Returns 0, or -1 when out of memory. */
static int
run_env_make(const struct run_job *j, int local, struct run_env *e)
{
  extern char **environ;
  long rank = (long)j->o.rank_base + local;
  /* name, value; value NULL: not set by collierun (the inherited one, if any, stays). */
  char num[9][24];
  const char *set[][2] = {
      {"COLLIE_RANK", num[0]},
      {"COLLIE_WORLD_SIZE", num[1]},
      {"COLLIE_LOCAL_RANK", num[2]},
      {"COLLIE_LOCAL_SIZE", num[3]},
      {"COLLIE_STORE", j->store_url},
      {"COLLIE_JOB_TOKEN", j->token},
      {"COLLIE_STORE_SERVE", j->store_serving ? "0" : NULL},
      /* torchrun's names, so torch.distributed's env:// init works unchanged. */
      {"RANK", num[4]},
      {"WORLD_SIZE", num[5]},
      {"LOCAL_RANK", num[6]},
      {"LOCAL_WORLD_SIZE", num[7]},
      {"GROUP_RANK", num[8]},
      {"MASTER_ADDR", j->torch_addr[0] ? j->torch_addr : NULL},
      {"MASTER_PORT", j->torch_port[0] ? j->torch_port : NULL},
  };
  const long nums[9] = {
      rank,       (long)j->o.world_size, local, j->o.nproc, rank, (long)j->o.world_size, local,
      j->o.nproc, (long)j->o.node_rank};
  enum { NSET = sizeof(set) / sizeof(set[0]) };
  for (int k = 0; k < 9; k++) snprintf(num[k], sizeof(num[k]), "%ld", nums[k]);
  size_t bytes = 0, ninherit = 0;
  for (int k = 0; k < NSET; k++)
    if (set[k][1]) bytes += strlen(set[k][0]) + 1 + strlen(set[k][1]) + 1;
  for (char **v = environ; *v; v++) ninherit++;
  e->vars = calloc(ninherit + NSET + 1, sizeof(*e->vars));
  e->own = malloc(bytes);
  if (!e->vars || !e->own) {
    run_env_free(e);
    return -1;
  }
  size_t n = 0;
  for (char **v = environ; *v; v++) {
    int replaced = 0;
    for (int k = 0; k < NSET && !replaced; k++) {
      size_t len = strlen(set[k][0]);
      replaced = set[k][1] && strncmp(*v, set[k][0], len) == 0 && (*v)[len] == '=';
    }
    if (!replaced) e->vars[n++] = *v;
  }
  char *at = e->own;
  for (int k = 0; k < NSET; k++) {
    if (!set[k][1]) continue;
    e->vars[n++] = at;
    at += sprintf(at, "%s=%s", set[k][0], set[k][1]) + 1;
  }
  e->vars[n] = NULL;
  return 0;
}

/* A message on stderr from the forked child, where stdio's locks and strerror's translation
 * may be held by a thread that no longer exists: formatted on the stack, one write. */
static void __attribute__((format(printf, 1, 2))) run_child_say(const char *fmt, ...)
{
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0) return;
  (void)!write(STDERR_FILENO, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* strerror without locale or lock, for the forked child. */
static const char *
run_child_errstr(int err)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  const char *d = strerrordesc_np(err);
  return d ? d : "unknown error";
#else
  (void)err;
  return "error";
#endif
}

/* --bind-to cpu, in the forked child: pins this process to the (local mod n)-th of the n CPUs
 * it may run on (its inherited affinity: a cgroup's or taskset's set, not the whole host), so
 * that ranks which wait by spinning neither share a CPU nor migrate (two small-message ranks
 * placed on one CPU ran several times slower until the kernel moved one). Returns 0, or -1
 * with a message on stderr. */
static int
run_bind_cpu(int local)
{
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    run_child_say("collierun: --bind-to cpu: sched_getaffinity: %s\n", run_child_errstr(errno));
    return -1;
  }
  int n = CPU_COUNT(&set), want = local % (n > 0 ? n : 1), seen = 0;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, &set) || seen++ != want) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    if (sched_setaffinity(0, sizeof(one), &one) == 0) return 0;
    run_child_say("collierun: --bind-to cpu: pinning local rank %d to CPU %d: %s\n", local, c,
                  run_child_errstr(errno));
    return -1;
  }
  run_child_say("collierun: --bind-to cpu: no CPU for local rank %d\n", local);
  return -1;
}

/* In the forked child: sets the rank up and execs the program with environment env. Only
 * async-signal-safe calls (see struct run_env). Never returns; on exec failure writes errno to
 * st_w and exits 127. */
static void __attribute__((noreturn))
run_child(struct run_job *j, int local, char **env, const int *out_w, int st_w, pid_t parent)
{
  int rank = (int)j->o.rank_base + local;
  setpgid(0, 0);
  /* Die with collierun, even by SIGKILL. If it died before prctl took effect, getppid()
   * already shows the new parent. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(RUN_EXIT_ERROR);
  sigaction(SIGPIPE, &j->orig_pipe, NULL);
  sigaction(SIGCHLD, &j->orig_chld, NULL);
  sigprocmask(SIG_SETMASK, &j->orig_mask, NULL);
  if (rank != 0 || isatty(STDIN_FILENO)) {
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0 && null != STDIN_FILENO) {
      dup2(null, STDIN_FILENO);
      close(null);
    }
  }
  if (out_w) {
    /* Stdio fds 0-2 are always open in collierun, so the pipe ends are above 2 and dup2
     * gives copies without O_CLOEXEC. */
    dup2(out_w[0], STDOUT_FILENO);
    dup2(out_w[1], STDERR_FILENO);
  }
  if (j->o.bind_cpu && run_bind_cpu(local) != 0) _exit(RUN_EXIT_ERROR);
  execvpe(j->o.prog_argv[0], j->o.prog_argv, env);
  int err = errno;
  (void)!write(st_w, &err, sizeof(err));
  _exit(RUN_EXIT_NOTFOUND);
}

/* How long a forked rank may take to reach exec: only a few system calls lie between. */
#define RUN_EXEC_WAIT_MS 30000

/* run_spawn's answers besides 0 and an exec errno: the rank could not be started (message
 * printed); it was started and killed before its exec, because it did not get there
 * (message printed) or because --timeout or a stopping signal came first (the main loop says
 * which and acts on it). */
enum { RUN_SPAWN_FAILED = -1, RUN_SPAWN_STUCK = -2, RUN_SPAWN_STOPPED = -3 };

/* Whether --timeout has passed or SIGINT, SIGTERM or SIGHUP is pending (left pending for the
 * signalfd). */
static int
run_stop_pending(const struct run_job *j, int64_t now)
{
  if (j->timeout_at && now >= j->timeout_at) return 1;
  sigset_t pending;
  if (sigpending(&pending) != 0) return 0;
  return sigismember(&pending, SIGINT) == 1 || sigismember(&pending, SIGTERM) == 1 ||
         sigismember(&pending, SIGHUP) == 1;
}

/* Starts local rank `local`. Returns 0 when it runs the program, the errno of a failed exec
 * (the child then exits on its own and is reaped as usual), or a RUN_SPAWN_* value. */
static int
run_spawn(struct run_job *j, int local)
{
  struct run_rank *r = &j->ranks[local];
  int pout[2] = {-1, -1}, perr[2] = {-1, -1}, st[2];
  if (j->o.tag_output && (pipe2(pout, O_CLOEXEC) != 0 || pipe2(perr, O_CLOEXEC) != 0)) {
    run_msg("pipe for rank %d: %s", r->rank, strerror(errno));
    goto fail;
  }
  struct run_env env = {0};
  if (run_env_make(j, local, &env) != 0) {
    run_msg("out of memory for rank %d's environment", r->rank);
    goto fail;
  }
  if (pipe2(st, O_CLOEXEC) != 0) {
    run_msg("pipe for rank %d: %s", r->rank, strerror(errno));
    run_env_free(&env);
    goto fail;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    run_msg("fork for rank %d: %s", r->rank, strerror(errno));
    close(st[0]);
    close(st[1]);
    run_env_free(&env);
    goto fail;
  }
  if (pid == 0) {
    close(st[0]);
    int w[2] = {pout[1], perr[1]};
    run_child(j, local, env.vars, j->o.tag_output ? w : NULL, st[1], parent);
  }
  run_env_free(&env);
  /* Also from here, so no signal can be sent to a group that does not exist yet. */
  setpgid(pid, pid);
  r->pid = pid;
  r->alive = 1;
  j->nstarted++;
  j->nalive++;
  run_sentinel_send(j, RUN_SENTINEL_ADD, pid);
  close(st[1]);
  if (j->o.tag_output) {
    close(pout[1]);
    close(perr[1]);
    r->out[0].fd = pout[0];
    r->out[1].fd = perr[0];
    fcntl(pout[0], F_SETFL, O_NONBLOCK);
    fcntl(perr[0], F_SETFL, O_NONBLOCK);
  }
  /* The status pipe closes on a successful exec (O_CLOEXEC) or carries the exec errno. The
   * wait is bounded, and it gives way to --timeout and to SIGINT, SIGTERM or SIGHUP (looked
   * at, not taken: the main loop acts on them as at any time), so no child can hold collierun
   * before its exec. */
  int err = 0, why = 0; /* why: 0 an answer, 1 RUN_EXEC_WAIT_MS passed, 2 timeout or signal */
  ssize_t n = -1;
  int64_t give_up = run_now_ms() + RUN_EXEC_WAIT_MS;
  for (;;) {
    int64_t now = run_now_ms(), slice = give_up - now < 100 ? give_up - now : 100;
    if (run_stop_pending(j, now)) {
      why = 2;
      break;
    }
    if (slice <= 0) {
      why = 1;
      break;
    }
    struct pollfd p = {.fd = st[0], .events = POLLIN};
    int ready = poll(&p, 1, (int)slice);
    if (ready < 0 && errno != EINTR) {
      run_msg("poll on rank %d's exec status: %s", r->rank, strerror(errno));
      why = 1;
      break;
    }
    if (ready <= 0) continue;
    n = read(st[0], &err, sizeof(err));
    if (!(n < 0 && errno == EINTR)) break;
  }
  close(st[0]);
  if (why) {
    if (why == 1)
      run_msg("rank %d did not reach exec within %d s of its fork; killing it", r->rank,
              RUN_EXEC_WAIT_MS / 1000);
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    r->exec_failed = 1; /* it never ran the program: its SIGKILL is not the job's failure */
    return why == 1 ? RUN_SPAWN_STUCK : RUN_SPAWN_STOPPED;
  }
  if (n == (ssize_t)sizeof(err)) {
    r->exec_failed = 1;
    return err ? err : ENOEXEC;
  }
  return 0;

fail:
  for (int k = 0; k < 2; k++) {
    if (pout[k] >= 0) close(pout[k]);
    if (perr[k] >= 0) close(perr[k]);
  }
  return RUN_SPAWN_FAILED;
}

/* ---- stopping ranks ---- */

/* Sends sig to the group of every rank still running and, unless it is SIGKILL, arms the
 * grace timer after which the rest get SIGKILL. */
static void
run_signal_all(struct run_job *j, int sig)
{
  for (int k = 0; k < j->nstarted; k++)
    if (j->ranks[k].alive) kill(-j->ranks[k].pid, sig);
  if (sig == SIGKILL) {
    j->phase = RUN_KILLED;
    j->kill_at = 0;
  } else {
    j->phase = RUN_STOPPING;
    j->kill_at = run_now_ms() + (int64_t)(j->o.grace_s * 1000.0);
  }
}

static const char *
run_plural(int n)
{
  return n == 1 ? "" : "s";
}

static const char *
run_signame(int sig)
{
  switch (sig) {
  case SIGINT:
    return "SIGINT";
  case SIGTERM:
    return "SIGTERM";
  case SIGHUP:
    return "SIGHUP";
  default:
    return "a signal";
  }
}

/* ---- output under --tag-output ---- */

/* Writes the complete lines of s (all of it when final, or when the pending line is too long
 * to keep buffering), each prefixed "[rank] ", to dest with one write. */
static void
run_stream_emit(struct run_job *j, struct run_rank *r, int which, int final)
{
  struct run_stream *s = &r->out[which];
  if (s->len == 0) return;
  size_t end = s->len;
  while (end > 0 && s->buf[end - 1] != '\n') end--;
  if (final || s->len >= RUN_MAX_LINE) end = s->len;
  if (end == 0) return;
  if (j->dest_dead[which]) {
    memmove(s->buf, s->buf + end, s->len - end);
    s->len -= end;
    return;
  }
  char prefix[32];
  int plen = snprintf(prefix, sizeof(prefix), "[%d] ", r->rank);
  size_t lines = 1;
  for (size_t k = 0; k < end; k++) lines += s->buf[k] == '\n';
  char *out = malloc(end + lines * (size_t)plen + 1);
  if (!out) return; /* keep it buffered; retried on the next read */
  size_t o = 0, start = 0;
  while (start < end) {
    size_t nl = start;
    while (nl < end && s->buf[nl] != '\n') nl++;
    memcpy(out + o, prefix, (size_t)plen);
    o += (size_t)plen;
    memcpy(out + o, s->buf + start, nl - start);
    o += nl - start;
    out[o++] = '\n'; /* a final line without one gets one */
    start = nl + 1;
  }
  if (run_write_all(which == 0 ? STDOUT_FILENO : STDERR_FILENO, out, o) != 0) {
    /* Our output is gone (a reader like `head` quit): close every rank's pipe to it, so the
     * ranks see EPIPE/SIGPIPE as they would writing there directly. */
    j->dest_dead[which] = 1;
    for (int k = 0; k < j->nstarted; k++) {
      struct run_stream *t = &j->ranks[k].out[which];
      if (t->fd >= 0 && t != s) {
        close(t->fd);
        t->fd = -1;
      }
    }
  }
  free(out);
  memmove(s->buf, s->buf + end, s->len - end);
  s->len -= end;
}

static void
run_stream_close(struct run_job *j, struct run_rank *r, int which)
{
  struct run_stream *s = &r->out[which];
  run_stream_emit(j, r, which, 1);
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
  free(s->buf);
  s->buf = NULL;
  s->len = s->cap = 0;
}

/* Reads what is available on one stream (until EAGAIN, at most a few reads so one chatty rank
 * cannot starve the others) and emits its complete lines. Closes it at EOF. */
static void
run_stream_read(struct run_job *j, struct run_rank *r, int which)
{
  struct run_stream *s = &r->out[which];
  for (int rounds = 0; rounds < 16 && s->fd >= 0; rounds++) {
    if (s->cap - s->len < 4096) {
      size_t ncap = s->cap ? s->cap * 2 : 8192;
      char *nb = realloc(s->buf, ncap);
      if (!nb) return;
      s->buf = nb;
      s->cap = ncap;
    }
    ssize_t n = read(s->fd, s->buf + s->len, s->cap - s->len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {
      run_stream_close(j, r, which);
      return;
    }
    s->len += (size_t)n;
    run_stream_emit(j, r, which, 0);
    if (j->dest_dead[which] && s->fd >= 0) {
      run_stream_close(j, r, which);
      return;
    }
  }
}

static int
run_streams_open(const struct run_job *j)
{
  for (int k = 0; k < j->nstarted; k++)
    if (j->ranks[k].out[0].fd >= 0 || j->ranks[k].out[1].fd >= 0) return 1;
  return 0;
}

/* ---- events ---- */

static struct run_rank *
run_find(struct run_job *j, pid_t pid)
{
  for (int k = 0; k < j->nstarted; k++)
    if (j->ranks[k].pid == pid) return &j->ranks[k];
  return NULL;
}

/* Notes in the job's store that rank ended with code, for its peers on other hosts: a network
 * that does not tell them of a dead process (libfabric's reliable datagrams) leaves them
 * waiting until their deadline otherwise. Best effort, within a second. */
static void
run_note_exit(struct run_job *j, int rank, int code)
{
  if (!j->store_url[0]) return;
  int64_t deadline = run_now_ms() * 1000000 + 1000000000LL;
  if (collie__store_note_exit(j->store_url, j->token, rank, (int)j->o.world_size, code, deadline) !=
      COLLIE_SUCCESS)
    run_msg("could not note rank %d's end in the store at %s (%s): its peers on other hosts "
            "learn of it at their deadline",
            rank, j->store_url, collie_last_error());
}

/* Handles the end of rank r with wait status st: the first failure while running decides the
 * exit code and stops the others. */
static void
run_rank_ended(struct run_job *j, struct run_rank *r, int st)
{
  int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  if (code == 0 || r->exec_failed || j->phase != RUN_RUNNING) return;
  char how[160];
  if (WIFEXITED(st))
    snprintf(how, sizeof(how), "exited with status %d", code);
  else
    snprintf(how, sizeof(how), "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  run_note_exit(j, r->rank, code);
  if (j->o.keep_going) { /* the others go on; the first failure decides the exit status */
    run_msg("rank %d (pid %d) %s; the other %d rank%s go on (--keep-going)", r->rank, (int)r->pid,
            how, j->nalive, run_plural(j->nalive));
    if (j->exit_code == 0) j->exit_code = code;
    return;
  }
  if (j->nalive > 0)
    run_msg("rank %d (pid %d) %s; terminating the other %d rank%s", r->rank, (int)r->pid, how,
            j->nalive, run_plural(j->nalive));
  else
    run_msg("rank %d (pid %d) %s", r->rank, (int)r->pid, how);
  j->exit_code = code;
  run_signal_all(j, SIGTERM);
}

/* Reaps every child that has ended. A rank's leftover group members are killed while its
 * zombie still reserves the group id, and its buffered output is written before any message
 * about its end. */
static void
run_reap(struct run_job *j)
{
  for (;;) {
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      return; /* ECHILD */
    }
    if (si.si_pid == 0) return;
    pid_t pid = si.si_pid;
    struct run_rank *r = run_find(j, pid);
    if (r && r->alive) {
      kill(-pid, SIGKILL);
      run_sentinel_send(j, RUN_SENTINEL_DEL, pid);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (pid == j->sentinel_pid) j->sentinel_pid = 0;
    if (!r || !r->alive) continue;
    r->alive = 0;
    j->nalive--;
    for (int w = 0; w < 2; w++)
      if (r->out[w].fd >= 0) run_stream_read(j, r, w);
    run_rank_ended(j, r, st);
  }
}

static void
run_on_signal(struct run_job *j, int sig)
{
  if (sig == SIGCHLD) {
    run_reap(j);
    return;
  }
  if (j->nalive == 0) return;
  if (j->phase == RUN_RUNNING) {
    run_msg("got %s; forwarding it to %d rank%s", run_signame(sig), j->nalive,
            run_plural(j->nalive));
    j->exit_code = 128 + sig;
    run_signal_all(j, sig);
  } else if (j->phase == RUN_STOPPING) {
    run_msg("got %s while stopping; killing %d rank%s now", run_signame(sig), j->nalive,
            run_plural(j->nalive));
    run_signal_all(j, SIGKILL);
  }
}

static void
run_on_timers(struct run_job *j)
{
  int64_t now = run_now_ms();
  if (j->phase == RUN_RUNNING && j->timeout_at && now >= j->timeout_at) {
    run_msg("timeout: the job is still running after %g s (--timeout); terminating %d rank%s",
            j->o.timeout_s, j->nalive, run_plural(j->nalive));
    j->exit_code = RUN_EXIT_TIMEOUT;
    run_signal_all(j, SIGTERM);
  } else if (j->phase == RUN_STOPPING && j->kill_at && now >= j->kill_at) {
    run_msg("%d rank%s still running %g s after being told to stop; sending SIGKILL", j->nalive,
            run_plural(j->nalive), j->o.grace_s);
    run_signal_all(j, SIGKILL);
  }
}

/* How long node 0's collierun goes on serving the store with no request coming. */
#define RUN_LINGER_IDLE_MS 2000

/* Node 0's collierun serves the store: once its own ranks have ended, it goes on serving while
 * ranks of other nodes use it (they read exit notes in it, meet in it to shrink), until none is
 * connected, none has asked anything for RUN_LINGER_IDLE_MS (a cut link leaves its connections
 * open but silent), the --timeout passes, or a signal says stop. */
static void
run_linger(struct run_job *j)
{
  if (!j->store_server || j->o.nnodes < 2) return;
  int64_t start = run_now_ms();
  int said = 0;
  for (;;) {
    size_t left = collie__store_serve_clients(j->store_server);
    int64_t now = run_now_ms();
    int64_t last = collie__store_serve_last_request(j->store_server) / 1000000;
    if (last < start) last = start;
    if (left == 0 || now - last >= RUN_LINGER_IDLE_MS || (j->timeout_at && now >= j->timeout_at))
      return;
    if (!said && now - start >= 1000) {
      run_msg("this node's ranks have ended; serving the store to %zu connection%s of other "
              "nodes' ranks while they use it",
              left, left == 1 ? "" : "s");
      said = 1;
    }
    struct pollfd p = {.fd = j->sigfd, .events = POLLIN};
    if (poll(&p, 1, 100) > 0) {
      struct signalfd_siginfo si;
      while (read(j->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM || si.ssi_signo == SIGHUP) {
          run_msg("stopping the store on signal %d", (int)si.ssi_signo);
          return;
        }
      }
    }
  }
}

/* The main loop: waits for signals, output and timers until every rank is reaped and its
 * output written. */
static void
run_loop(struct run_job *j)
{
  size_t cap = 1 + 2 * (size_t)j->nstarted;
  struct pollfd *pfd = calloc(cap, sizeof(*pfd));
  int *who = calloc(cap, sizeof(*who)); /* pfd[i] is stream who[i] % 2 of rank who[i] / 2 */
  if (!pfd || !who) {
    run_msg("out of memory");
    run_signal_all(j, SIGKILL);
  }
  while (j->nalive > 0 || run_streams_open(j)) {
    int64_t now = run_now_ms();
    if (j->nalive == 0 && j->drain_at == 0) j->drain_at = now + RUN_DRAIN_MS;
    int64_t wake = INT64_MAX;
    if (j->phase == RUN_RUNNING && j->timeout_at) wake = j->timeout_at;
    if (j->phase == RUN_STOPPING && j->kill_at < wake) wake = j->kill_at;
    if (j->drain_at && j->drain_at < wake) wake = j->drain_at;
    int tmo =
        wake == INT64_MAX ? -1 : (int)(wake <= now ? 0 : (wake - now > 60000 ? 60000 : wake - now));

    size_t n = 0;
    if (pfd) {
      pfd[n++] = (struct pollfd){.fd = j->sigfd, .events = POLLIN};
      for (int k = 0; k < j->nstarted; k++)
        for (int w = 0; w < 2; w++)
          if (j->ranks[k].out[w].fd >= 0) {
            who[n] = 2 * k + w;
            pfd[n++] = (struct pollfd){.fd = j->ranks[k].out[w].fd, .events = POLLIN};
          }
      if (poll(pfd, n, tmo) < 0 && errno != EINTR) {
        run_msg("poll: %s", strerror(errno));
        run_signal_all(j, SIGKILL);
        usleep(10000);
      }
    } else {
      usleep(10000);
    }
    /* Output first, so a rank's last lines come before any message about its end. */
    for (size_t k = 1; k < n; k++) {
      struct run_rank *r = &j->ranks[who[k] / 2];
      int w = who[k] % 2;
      /* fd < 0: closed meanwhile because our own output went away. */
      if ((pfd[k].revents & (POLLIN | POLLHUP | POLLERR)) && r->out[w].fd >= 0)
        run_stream_read(j, r, w);
    }
    struct signalfd_siginfo si;
    while (read(j->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
      run_on_signal(j, (int)si.ssi_signo);
    /* A SIGCHLD may be coalesced with one already read; reaping is cheap, so always try. */
    run_reap(j);
    run_on_timers(j);
    if (j->nalive == 0 && j->drain_at && run_now_ms() >= j->drain_at) {
      for (int k = 0; k < j->nstarted; k++)
        for (int w = 0; w < 2; w++)
          if (j->ranks[k].out[w].fd >= 0) run_stream_close(j, &j->ranks[k], w);
    }
  }
  free(pfd);
  free(who);
}

/* Makes sure fds 0-2 are open, so no pipe or socket of ours lands on them by accident. */
static void
run_fix_stdio(void)
{
  for (int fd = 0; fd < 3; fd++) {
    if (fcntl(fd, F_GETFD) >= 0) continue;
    int null = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (null >= 0 && null != fd) {
      dup2(null, fd);
      close(null);
    }
  }
}

int
main(int argc, char **argv)
{
  static struct run_job job;
  struct run_job *j = &job;
  run_fix_stdio();
  int pr = run_parse_args(argc, argv, &j->o);
  if (pr != 0) return pr > 0 ? 0 : RUN_EXIT_USAGE;
  if (run_make_token(j) != 0) return RUN_EXIT_ERROR;
  int torch_fixed = run_fixed_torch_port(&j->o);
  if (torch_fixed < 0) return RUN_EXIT_USAGE;
  int collie_port = run_make_store(j, torch_fixed);
  if (collie_port < 0) return RUN_EXIT_ERROR;
  int torch_rc = run_make_torch(j, torch_fixed, collie_port);
  if (torch_rc != 0) return torch_rc;
  j->ranks = calloc((size_t)j->o.nproc, sizeof(*j->ranks));
  if (!j->ranks) {
    run_msg("out of memory");
    return RUN_EXIT_ERROR;
  }
  for (int k = 0; k < j->o.nproc; k++) {
    j->ranks[k].rank = (int)j->o.rank_base + k;
    j->ranks[k].out[0].fd = j->ranks[k].out[1].fd = -1;
  }
  j->sentinel_fd = -1;
  j->phase = RUN_RUNNING;

  /* Signals: SIGPIPE ignored (a rank's closed pipe or our closed stdout is an error code, not
   * our death); SIGCHLD at its default so waitpid works even if our parent ignored it; the
   * four we act on blocked from now on and read through the signalfd. The originals are
   * restored in each rank before exec. */
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &sa, &j->orig_pipe);
  sa.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &sa, &j->orig_chld);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigprocmask(SIG_BLOCK, &set, &j->orig_mask);

  if (run_sentinel_start(j) != 0) return RUN_EXIT_ERROR;
  /* After the sentinel's fork (it must not hold the listener) and with the signals blocked (the
   * server's thread must not take them from the signalfd). */
  if (run_serve_store(j, j->o.master_addr ? j->o.master_addr : "127.0.0.1", collie_port) != 0)
    return RUN_EXIT_ERROR;
  j->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (j->sigfd < 0) {
    run_msg("signalfd: %s", strerror(errno));
    return RUN_EXIT_ERROR;
  }

  if (j->o.timeout_s > 0) j->timeout_at = run_now_ms() + (int64_t)(j->o.timeout_s * 1000.0);
  for (int k = 0; k < j->o.nproc; k++) {
    int err = run_spawn(j, k);
    if (err == 0) continue;
    if (err == RUN_SPAWN_STOPPED) break; /* the main loop acts on the timeout or the signal */
    if (err > 0) {
      run_msg("cannot execute '%s' (rank %d): %s", j->o.prog_argv[0], j->ranks[k].rank,
              strerror(err));
      j->exit_code = (err == ENOENT || err == ENOTDIR) ? RUN_EXIT_NOTFOUND : RUN_EXIT_NOEXEC;
    } else {
      j->exit_code = RUN_EXIT_ERROR;
    }
    /* A rank that failed its exec, or was killed before it, is still to be reaped. */
    int others = j->nalive - (err > 0 || err == RUN_SPAWN_STUCK);
    if (others > 0)
      run_msg("terminating the %d rank%s already started", others, run_plural(others));
    run_signal_all(j, SIGTERM);
    break;
  }
  run_loop(j);

  /* Every rank is reaped and its group cleaned up, so the sentinel has nothing left to kill:
   * closing its pipe makes it exit, and it is reaped here rather than left to init. */
  if (j->sentinel_fd >= 0) close(j->sentinel_fd);
  if (j->sentinel_pid > 0)
    while (waitpid(j->sentinel_pid, NULL, 0) < 0 && errno == EINTR) {
    }
  run_linger(j);
  collie__store_serve_stop(j->store_server);
  return j->exit_code;
}
