/*
 * collie-bench.c - the collective profiler: nccl-tests' sweep for collie.
 *
 *   collierun -n 4 build/collie-bench -b 8 -e 64M -f 2 -o allreduce,allgather --csv out.csv
 *
 * This file is the command line and the sweep: it parses the options (every
 * rank parses the same argv, so a bad option stops every rank before any
 * collective, and only rank 0 says why), creates the communicator, prints
 * the header that makes a result reproducible (version, argv, COLLIE_*
 * environment, host, ranks, transport, date), plans the points (collective x
 * size x algorithm), measures each with cb_measure (cbench_measure.c), and
 * hands the results to the writers (cbench_output.c, cbench_plot.c). The
 * alpha-beta fit and tuning file (--fit, --tune, --tune-check) are
 * cbench_fit.c's; their options are parsed here so there is one command
 * line.
 *
 * Without a size option and without -o it runs the seed profile instead of a
 * sweep: 1M, 4M and 16M elements through AllReduce, AllGather and
 * ReduceScatter, written to profile_collie_world{N}_{timestamp}.txt in the
 * seed tool's format (docs/collie-bench.md).
 *
 * Exit status: 0; 1 when a result was wrong; 2 for bad usage (or an output
 * file that cannot be written); 3 when collie failed.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cbench.h"
#include "cli.h"
#include "core/introspect.h"

#ifndef COLLIE_VERSION_STRING
#define COLLIE_VERSION_STRING "unknown"
#endif

#define BENCH_EXIT_WRONG 1
#define BENCH_EXIT_USAGE 2
#define BENCH_EXIT_COLLIE 3

extern char **environ;

static const char bench_help[] =
    "Usage: collierun -n N collie-bench [options]\n"
    "\n"
    "Times collie's collectives over a range of sizes, nccl-tests style: per size the\n"
    "time of one call (the slowest rank's mean over a loop of back-to-back calls), the\n"
    "algorithm and bus bandwidth, the number of wrong result elements, and the spread\n"
    "of single calls (min, median, 99th percentile). Rank 0 prints; every rank runs.\n"
    "\n"
    "Sizes (bytes; K, M, G suffixes are binary: 64M = 64 MiB):\n"
    "  -b, --minbytes S       smallest size (default 8)\n"
    "  -e, --maxbytes S       largest size (default 64M)\n"
    "  -f, --stepfactor F     multiply the size by F (> 1) each step (default 2)\n"
    "What to run:\n"
    "  -o, --ops LIST         comma list of allreduce, allgather, reduce_scatter,\n"
    "                         broadcast, reduce, alltoall, alltoallv, gather, scatter,\n"
    "                         barrier, sendrecv, or all (default allreduce)\n"
    "  -d, --dtype T          int8 uint8 int32 uint32 int64 uint64 float16 bfloat16\n"
    "                         float32 float64 (default float32)\n"
    "  -r, --redop OP         sum prod min max avg band bor bxor (default sum; the\n"
    "                         bitwise ones need an integer dtype)\n"
    "      --algo NAME        force one algorithm on every collective that has it\n"
    "                         (others are skipped with a note); all: every algorithm of\n"
    "                         each collective, one line each (default: what collie picks)\n"
    "      --root N           root of broadcast, reduce, gather, scatter (default 0)\n"
    "      --inplace          in-place calls (sendbuf == recvbuf, as collie.h defines)\n"
    "      --mem KIND         malloc (default, as the MPI anchors) or collie: buffers from\n"
    "                         collie_mem_alloc, which shm peers read in place\n"
    "      --device KIND      cpu (default) or cuda: buffers in CUDA device memory, every\n"
    "                         rank on device LOCAL_RANK % GPUs (several ranks may share\n"
    "                         one); prints the GPU's copy bandwidth and launch latency\n"
    "      --transport T      auto, shm, ofi or tcp (sets COLLIE_TRANSPORT before init)\n"
    "How long:\n"
    "  -n, --iters N          timed calls per size; 0: enough for -t seconds (default 0)\n"
    "  -t, --time S           seconds per size when -n is 0 (default 0.1)\n"
    "  -w, --warmup N         untimed calls first (default 20 up to 1 MiB, 4 above)\n"
    "  -c, --check 0|1        check every result once after timing (default 1)\n"
    "Output (the table always goes to stdout):\n"
    "      --csv FILE         one line per (collective, algorithm, size), with the MPI\n"
    "                         anchors' collective names: impl,collective,algorithm,\n"
    "                         transport,nranks,bytes,count,time_us,algbw_GBps,busbw_GBps,wrong\n"
    "      --plot FILE.svg    bus bandwidth and time against size, one line per\n"
    "                         (collective, algorithm)\n"
    "      --profile-dir DIR  where the seed profile file goes (default .)\n"
    "Model fitting (docs/tuning.md):\n"
    "      --fit              fit alpha-beta per transport and per algorithm; print it\n"
    "      --tune FILE        as --fit, then write FILE for COLLIE_TUNING_FILE\n"
    "      --tune-check FILE  compare FILE's picks with measured best and default picks\n"
    "      --model            no run: the cost model's time of every algorithm, and the\n"
    "                         pick, at --per-host N ranks a host (8) for 8 to\n"
    "                         --max-ranks ranks (4096), with this machine's constants\n"
    "                         and a datacenter's between hosts (--net ALPHA_US,GBPS: 5,25)\n"
    "  -h, --help             print this help and exit\n"
    "      --version          print the version and the device code this libcollie\n"
    "                         carries (none when built without nvcc), and exit\n"
    "\n"
    "Without -b, -e, -f and -o it runs the seed profile: 1M, 4M and 16M elements through\n"
    "allreduce, allgather and reduce_scatter, also written to\n"
    "profile_collie_world{N}_{YYYYmmdd_HHMMSS}.txt (docs/collie-bench.md).\n"
    "\n"
    "size, count, algbw and busbw follow nccl-tests: size is the largest buffer of a rank\n"
    "(allgather, reduce_scatter, alltoall, alltoallv, gather, scatter: the whole n-fold\n"
    "buffer, each rank's share rounded down to whole elements); algbw = size / time\n"
    "(GB/s = 1e9 B/s); busbw = algbw x 2(n-1)/n (allreduce), (n-1)/n (allgather,\n"
    "reduce_scatter, alltoall, alltoallv, gather, scatter), 1 (broadcast, reduce,\n"
    "sendrecv). sendrecv is a ring shift: each rank sends size bytes to rank+1 and\n"
    "receives from rank-1. alltoallv is alltoall's call through collie_alltoallv, every\n"
    "per-peer count equal (count is that count); --model and --fit leave it out.\n"
    "\n"
    "Progress goes to stderr (rank 0) when it is a terminal. collie-bench sets\n"
    "COLLIE_COMMS_LOG=0 unless it is set (it marks no training steps).\n"
    "\n"
    "Exit status: 0; 1 when a result was wrong; 2 on a usage error; 3 when collie failed.\n";

struct bench_args {
  struct cb_opts o;
  int sizes_given, ops_given, algo_all;
  const char *transport, *csv, *plot, *profile_dir, *tune_path;
  int fit_mode; /* 0 none, 1 --fit, 2 --tune, 3 --tune-check */
  long root_arg;
  int model;                     /* --model: predictions only, no communicator */
  int model_opts;                /* --per-host, --max-ranks or --net given */
  long per_host, max_ranks;      /* --per-host, --max-ranks */
  double net_alpha_us, net_gbps; /* --net */
};

static int bench_rank0 = 1; /* only rank 0 speaks */

static int __attribute__((format(printf, 1, 2))) bench_usage(const char *fmt, ...)
{
  if (bench_rank0) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "collie-bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'collie-bench --help' for more information.\n");
    va_end(ap);
  }
  return -1;
}

/* The exit status for a usage error that every rank found alike: rank 0
 * says why and exits 2; the others exit 0, because a launcher stops the
 * whole job at the first rank that fails, which could cut rank 0 off before
 * it printed the reason (collierun's status is the failed rank's: 2). */
static int
bench_usage_status(void)
{
  return bench_rank0 ? BENCH_EXIT_USAGE : 0;
}

/* ---- Option values ---- */

/* A size as cli_parse_size reads it, at most 1 TiB. Returns 0, or -1
 * (message printed). */
static int
bench_parse_size(const char *opt, const char *s, size_t *out)
{
  char why[96];
  if (cli_parse_size(s, out, why, sizeof(why)) != 0) return bench_usage("%s: '%s' %s", opt, s, why);
  if (*out > ((size_t)1 << 40)) return bench_usage("%s: '%s' is more than 1 TiB", opt, s);
  return 0;
}

static int
bench_parse_long(const char *opt, const char *s, long lo, long hi, long *out)
{
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno) return bench_usage("%s: '%s' is not an integer", opt, s);
  if (v < lo || v > hi) return bench_usage("%s: %ld is out of range (%ld..%ld)", opt, v, lo, hi);
  *out = v;
  return 0;
}

static int
bench_parse_dtype(const char *s, collie_dtype_t *out)
{
  static const struct {
    const char *alias;
    collie_dtype_t dt;
  } aliases[] = {{"float", COLLIE_FLOAT32}, {"fp32", COLLIE_FLOAT32},  {"half", COLLIE_FLOAT16},
                 {"fp16", COLLIE_FLOAT16},  {"bf16", COLLIE_BFLOAT16}, {"double", COLLIE_FLOAT64},
                 {"fp64", COLLIE_FLOAT64},  {"int", COLLIE_INT32},     {"uint", COLLIE_UINT32},
                 {"char", COLLIE_INT8}};
  for (int d = 0; d < COLLIE_DTYPE_COUNT_; d++)
    if (!strcmp(s, collie_dtype_name((collie_dtype_t)d))) {
      *out = (collie_dtype_t)d;
      return 0;
    }
  for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
    if (!strcmp(s, aliases[i].alias)) {
      *out = aliases[i].dt;
      return 0;
    }
  return bench_usage("-d: unknown dtype '%s' (int8 uint8 int32 uint32 int64 uint64 float16 "
                     "bfloat16 float32 float64)",
                     s);
}

static int
bench_parse_redop(const char *s, collie_op_t *out)
{
  for (int r = 0; r < COLLIE_OP_COUNT_; r++)
    if (!strcmp(s, collie_op_name((collie_op_t)r))) {
      *out = (collie_op_t)r;
      return 0;
    }
  return bench_usage("-r: unknown reduction '%s' (sum prod min max avg band bor bxor)", s);
}

static int
bench_parse_ops(const char *s, int *ops)
{
  char buf[512];
  if (strlen(s) >= sizeof(buf)) return bench_usage("-o: list too long");
  snprintf(buf, sizeof(buf), "%s", s);
  memset(ops, 0, sizeof(int) * CB_NCOLL);
  int any = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (!strcmp(tok, "all")) {
      for (int c = 0; c < CB_NCOLL; c++) ops[c] = 1;
      any = 1;
      continue;
    }
    int c = cb_coll_parse(tok);
    if (c < 0)
      return bench_usage("-o: unknown collective '%s' (allreduce allgather reduce_scatter "
                         "broadcast reduce alltoall alltoallv gather scatter barrier sendrecv "
                         "all)",
                         tok);
    ops[c] = 1;
    any = 1;
  }
  if (!any) return bench_usage("-o: empty list of collectives");
  return 0;
}

static void
bench_param_line(const char *name, const char *def, const char *help, void *arg)
{
  (void)arg;
  printf("  %-22s %s (default: %s)\n", name, help, def);
}

static int
bench_parse_args(int argc, char **argv, struct bench_args *a)
{
  enum {
    OPT_ALGO = 256,
    OPT_INPLACE,
    OPT_MEM,
    OPT_DEVICE,
    OPT_VERSION,
    OPT_TRANSPORT,
    OPT_CSV,
    OPT_PLOT,
    OPT_ROOT,
    OPT_PROFILE_DIR,
    OPT_FIT,
    OPT_TUNE,
    OPT_TUNE_CHECK,
    OPT_MODEL,
    OPT_PER_HOST,
    OPT_MAX_RANKS,
    OPT_NET
  };
  static const struct option longopts[] = {
      {"minbytes", required_argument, NULL, 'b'},
      {"maxbytes", required_argument, NULL, 'e'},
      {"stepfactor", required_argument, NULL, 'f'},
      {"ops", required_argument, NULL, 'o'},
      {"dtype", required_argument, NULL, 'd'},
      {"redop", required_argument, NULL, 'r'},
      {"iters", required_argument, NULL, 'n'},
      {"warmup", required_argument, NULL, 'w'},
      {"check", required_argument, NULL, 'c'},
      {"time", required_argument, NULL, 't'},
      {"help", no_argument, NULL, 'h'},
      {"algo", required_argument, NULL, OPT_ALGO},
      {"inplace", no_argument, NULL, OPT_INPLACE},
      {"mem", required_argument, NULL, OPT_MEM},
      {"device", required_argument, NULL, OPT_DEVICE},
      {"version", no_argument, NULL, OPT_VERSION},
      {"transport", required_argument, NULL, OPT_TRANSPORT},
      {"csv", required_argument, NULL, OPT_CSV},
      {"plot", required_argument, NULL, OPT_PLOT},
      {"root", required_argument, NULL, OPT_ROOT},
      {"profile-dir", required_argument, NULL, OPT_PROFILE_DIR},
      {"fit", no_argument, NULL, OPT_FIT},
      {"tune", required_argument, NULL, OPT_TUNE},
      {"tune-check", required_argument, NULL, OPT_TUNE_CHECK},
      {"model", no_argument, NULL, OPT_MODEL},
      {"per-host", required_argument, NULL, OPT_PER_HOST},
      {"max-ranks", required_argument, NULL, OPT_MAX_RANKS},
      {"net", required_argument, NULL, OPT_NET},
      {NULL, 0, NULL, 0}};
  struct cb_opts *o = &a->o;
  memset(a, 0, sizeof(*a));
  o->minbytes = 8;
  o->maxbytes = (size_t)64 << 20;
  o->stepfactor = 2;
  o->ops[CB_ALLREDUCE] = 1;
  o->dtype = COLLIE_FLOAT32;
  o->redop = COLLIE_SUM;
  o->warmup = -1;
  o->target_s = 0.1;
  o->check = 1;
  o->algo = COLLIE_ALGO_AUTO;
  a->per_host = 8;
  a->max_ranks = 4096;
  a->net_alpha_us = 5;
  a->net_gbps = 25;
  int c, redop_given = 0;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":b:e:f:o:d:r:n:w:c:t:h", longopts, NULL)) != -1) {
    switch (c) {
    case 'b':
      if (bench_parse_size("-b", optarg, &o->minbytes)) return -1;
      a->sizes_given = 1;
      break;
    case 'e':
      if (bench_parse_size("-e", optarg, &o->maxbytes)) return -1;
      a->sizes_given = 1;
      break;
    case 'f': {
      char *end;
      errno = 0;
      double f = strtod(optarg, &end);
      if (end == optarg || *end || errno || !isfinite(f))
        return bench_usage("-f: '%s' is not a number", optarg);
      if (f <= 1) return bench_usage("-f: step factor %s must be greater than 1", optarg);
      o->stepfactor = f;
      a->sizes_given = 1;
      break;
    }
    case 'o':
      if (bench_parse_ops(optarg, o->ops)) return -1;
      a->ops_given = 1;
      break;
    case 'd':
      if (bench_parse_dtype(optarg, &o->dtype)) return -1;
      break;
    case 'r':
      if (bench_parse_redop(optarg, &o->redop)) return -1;
      redop_given = 1;
      break;
    case 'n':
      if (bench_parse_long("-n", optarg, 0, 100000000, &o->iters)) return -1;
      break;
    case 'w':
      if (bench_parse_long("-w", optarg, 0, 100000000, &o->warmup)) return -1;
      break;
    case 'c':
      if (strcmp(optarg, "0") && strcmp(optarg, "1"))
        return bench_usage("-c: '%s' must be 0 or 1", optarg);
      o->check = optarg[0] == '1';
      break;
    case 't': {
      char *end;
      errno = 0;
      double t = strtod(optarg, &end);
      if (end == optarg || *end || errno || !isfinite(t) || t <= 0 || t > 3600)
        return bench_usage("-t: '%s' must be a number of seconds in (0, 3600]", optarg);
      o->target_s = t;
      break;
    }
    case 'h':
      if (bench_rank0) {
        fputs(bench_help, stdout);
        printf("\nEvery COLLIE_* variable the library reads (docs/env.md):\n");
        collie__params_describe(bench_param_line, NULL);
      }
      exit(0);
    case OPT_ALGO:
      if (!strcmp(optarg, "all")) {
        a->algo_all = 1;
        o->algo = COLLIE_ALGO_AUTO;
      } else if ((o->algo = cb_algo_parse(optarg)) < 0) {
        char names[512] = "";
        for (int k = 0; k < COLLIE_ALGO_COUNT_; k++) {
          strncat(names, cb_algo_name(k), sizeof(names) - strlen(names) - 2);
          strncat(names, " ", sizeof(names) - strlen(names) - 1);
        }
        return bench_usage("--algo: unknown algorithm '%s' (%sall)", optarg, names);
      }
      break;
    case OPT_INPLACE:
      o->inplace = 1;
      break;
    case OPT_MEM:
      if (strcmp(optarg, "malloc") && strcmp(optarg, "collie"))
        return bench_usage("--mem: '%s' is not malloc or collie", optarg);
      o->mem_collie = !strcmp(optarg, "collie");
      break;
    case OPT_DEVICE:
      if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda"))
        return bench_usage("--device: '%s' is not cpu or cuda", optarg);
      o->device_cuda = !strcmp(optarg, "cuda");
      break;
    case OPT_VERSION:
      printf("collie-bench %s (collie %d.%d.%d)\ndevice code: %s\n", COLLIE_VERSION_STRING,
             COLLIE_VERSION_MAJOR, COLLIE_VERSION_MINOR, COLLIE_VERSION_PATCH,
             collie__device_code());
      exit(0);
    case OPT_TRANSPORT:
      if (!collie__net_transport_name(optarg)) {
        char choices[128];
        return bench_usage("--transport: '%s' is not %s", optarg,
                           collie__net_transport_choices(choices, sizeof(choices)));
      }
      a->transport = optarg;
      break;
    case OPT_CSV:
      a->csv = optarg;
      break;
    case OPT_PLOT:
      a->plot = optarg;
      break;
    case OPT_ROOT:
      if (bench_parse_long("--root", optarg, 0, 1 << 30, &a->root_arg)) return -1;
      o->root = (int)a->root_arg;
      break;
    case OPT_PROFILE_DIR:
      a->profile_dir = optarg;
      break;
    case OPT_FIT:
    case OPT_TUNE:
    case OPT_TUNE_CHECK:
      if (a->fit_mode) return bench_usage("--fit, --tune and --tune-check exclude each other");
      a->fit_mode = c == OPT_FIT ? 1 : c == OPT_TUNE ? 2 : 3;
      a->tune_path = c == OPT_FIT ? NULL : optarg;
      break;
    case OPT_MODEL:
      a->model = 1;
      break;
    case OPT_PER_HOST:
      a->model_opts = 1;
      if (bench_parse_long("--per-host", optarg, 1, 1 << 16, &a->per_host)) return -1;
      break;
    case OPT_MAX_RANKS:
      a->model_opts = 1;
      if (bench_parse_long("--max-ranks", optarg, 1, 1 << 20, &a->max_ranks)) return -1;
      break;
    case OPT_NET: {
      a->model_opts = 1;
      char *end = NULL;
      a->net_alpha_us = strtod(optarg, &end);
      if (end == optarg || *end != ',' || !(a->net_alpha_us >= 0))
        return bench_usage("--net %s: expected ALPHA_US,GBPS (e.g. 5,25)", optarg);
      const char *g = end + 1;
      a->net_gbps = strtod(g, &end);
      if (end == g || *end || !(a->net_gbps > 0))
        return bench_usage("--net %s: expected ALPHA_US,GBPS (e.g. 5,25)", optarg);
      break;
    }
    case ':':
      return bench_usage("option '%s' needs a value", argv[optind - 1]);
    default:
      if (optopt) return bench_usage("unknown option '-%c'", optopt);
      return bench_usage("unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind < argc) return bench_usage("unexpected argument '%s'", argv[optind]);
  if (a->model && a->fit_mode) return bench_usage("--model and --fit/--tune exclude each other");
  if (!a->model && a->model_opts)
    return bench_usage("--per-host, --max-ranks and --net go with --model");
  if (a->model && a->per_host > a->max_ranks)
    return bench_usage("--per-host %ld is more than --max-ranks %ld", a->per_host, a->max_ranks);
  if (a->model && !a->ops_given) { /* the bandwidth collectives of issue 20's benchmark */
    memset(o->ops, 0, sizeof(o->ops));
    o->ops[CB_ALLREDUCE] = o->ops[CB_ALLGATHER] = o->ops[CB_REDUCE_SCATTER] = 1;
    o->ops[CB_BROADCAST] = o->ops[CB_ALLTOALL] = 1;
  }
  if (a->model && !a->sizes_given) o->stepfactor = 8;
  if (o->minbytes > o->maxbytes)
    return bench_usage("-b %zu is larger than -e %zu", o->minbytes, o->maxbytes);
  if (collie_dtype_size(o->dtype) > o->maxbytes && a->sizes_given)
    return bench_usage("-e %zu is smaller than one %s element", o->maxbytes,
                       collie_dtype_name(o->dtype));
  if ((o->redop == COLLIE_BAND || o->redop == COLLIE_BOR || o->redop == COLLIE_BXOR) &&
      (o->dtype == COLLIE_FLOAT16 || o->dtype == COLLIE_BFLOAT16 || o->dtype == COLLIE_FLOAT32 ||
       o->dtype == COLLIE_FLOAT64))
    return bench_usage("-r %s needs an integer dtype, not -d %s", collie_op_name(o->redop),
                       collie_dtype_name(o->dtype));
  (void)redop_given;
  return 0;
}

/* ---- Rank before init ---- */

/* Whether some launcher announced a rank; if so, *rank is it (0 when its
 * variables are malformed: then init will say so, and rank 0 must speak). */
static int
bench_launcher_rank(int *rank)
{
  static const char *const vars[] = {"COLLIE_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                     "SLURM_PROCID"};
  int any = 0;
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
    if (getenv(vars[i])) any = 1;
  *rank = 0;
  if (!any) return 0;
  int r = collie__launch_rank();
  if (r >= 0) *rank = r;
  return 1;
}

/* ---- Header ---- */

static void
bench_print_arg(FILE *f, const char *s)
{
  int plain = *s != '\0';
  for (const char *p = s; *p; p++)
    if (!(isalnum((unsigned char)*p) || strchr("-_=./,:+@%", *p))) plain = 0;
  if (plain) {
    fputs(s, f);
    return;
  }
  fputc('\'', f);
  for (const char *p = s; *p; p++) {
    if (*p == '\'')
      fputs("'\\''", f);
    else
      fputc(*p, f);
  }
  fputc('\'', f);
}

static void
bench_header(FILE *f, int argc, char **argv, const struct bench_args *a, int nranks,
             const char *transport, int standalone, int comms_log_ours)
{
  const struct cb_opts *o = &a->o;
  fprintf(f, "# collie-bench %s (collie %d.%d.%d)\n# argv:", COLLIE_VERSION_STRING,
          COLLIE_VERSION_MAJOR, COLLIE_VERSION_MINOR, COLLIE_VERSION_PATCH);
  for (int i = 0; i < argc; i++) {
    fputc(' ', f);
    bench_print_arg(f, argv[i]);
  }
  fputc('\n', f);
  int nenv = 0;
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "COLLIE_", 7)) continue;
    /* The job token is a credential: say that it is set, not what it is. */
    if (!strncmp(*e, "COLLIE_JOB_TOKEN=", 17))
      fprintf(f, "# env: COLLIE_JOB_TOKEN=(set, not shown)\n");
    else if (comms_log_ours && !strncmp(*e, "COLLIE_COMMS_LOG=", 17))
      fprintf(f, "# env: %s (set by collie-bench: it marks no steps)\n", *e);
    else
      fprintf(f, "# env: %s\n", *e);
    nenv++;
  }
  if (!nenv) fprintf(f, "# env: no COLLIE_* variable set\n");
  char host[256] = "?";
  if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "?");
  host[sizeof(host) - 1] = '\0';
  time_t now = time(NULL);
  struct tm tm;
  char date[64] = "?";
  if (localtime_r(&now, &tm)) strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %z", &tm);
  fprintf(f, "# host: %s\n# nranks: %d%s\n# transport: %s\n# date: %s\n", host, nranks,
          standalone ? " (no launcher environment: one rank alone)" : "", transport, date);
  char warm[64], iters[64];
  if (o->warmup >= 0)
    snprintf(warm, sizeof(warm), "%ld", o->warmup);
  else
    snprintf(warm, sizeof(warm), "20 up to 1 MiB, 4 above");
  if (o->iters > 0)
    snprintf(iters, sizeof(iters), "%ld", o->iters);
  else
    snprintf(iters, sizeof(iters), "auto, %g s per size", o->target_s);
  fprintf(f,
          "# dtype %s, redop %s, root %d, %s, iterations %s, warm-up %s, check %s, algorithm "
          "%s\n",
          collie_dtype_name(o->dtype), collie_op_name(o->redop), o->root,
          o->inplace ? "in place" : "out of place", iters, warm, o->check ? "on" : "off",
          a->algo_all                   ? "all"
          : o->algo == COLLIE_ALGO_AUTO ? "auto (collie's pick)"
                                        : cb_algo_name(o->algo));
  fflush(f);
}

/* ---- The plan ---- */

struct bench_item {
  int coll, algo;
  size_t req;
};

struct bench_plan {
  struct bench_item *it;
  int n, cap;
};

static int
bench_plan_add(struct bench_plan *p, int coll, int algo, size_t req)
{
  if (p->n == p->cap) {
    int cap = p->cap ? 2 * p->cap : 64;
    struct bench_item *it = realloc(p->it, (size_t)cap * sizeof(*it));
    if (!it) return -1;
    p->it = it;
    p->cap = cap;
  }
  p->it[p->n++] = (struct bench_item){coll, algo, req};
  return 0;
}

/* The algorithms one collective runs with: ids[], how many (0: skip it). */
static int
bench_algos(const struct bench_args *a, int coll, int *ids)
{
  if (coll == CB_SENDRECV) {
    /* No choice to make: it runs unless one named algorithm was asked for. */
    if (!a->algo_all && a->o.algo != COLLIE_ALGO_AUTO) return 0;
    ids[0] = COLLIE_ALGO_AUTO;
    return 1;
  }
  if (a->algo_all) return cb_algos_of(coll, ids, COLLIE_ALGO_COUNT_);
  if (!cb_coll_has_algo(coll, a->o.algo)) return 0;
  ids[0] = a->o.algo;
  return 1;
}

static int
bench_build_plan(const struct bench_args *a, int nranks, int profile, struct bench_plan *p)
{
  const struct cb_opts *o = &a->o;
  size_t esize = collie_dtype_size(o->dtype);
  if (profile) {
    static const size_t elems[] = {(size_t)1 << 20, (size_t)4 << 20, (size_t)16 << 20};
    static const int colls[] = {CB_ALLREDUCE, CB_ALLGATHER, CB_REDUCE_SCATTER};
    for (int s = 0; s < 3; s++)
      for (int k = 0; k < 3; k++) {
        int ids[COLLIE_ALGO_COUNT_], na = bench_algos(a, colls[k], ids);
        /* The seed's tensor of N elements: allreduce's buffer, the per-rank
         * shard of allgather's output and reduce_scatter's input. */
        size_t req = elems[s] * esize * (colls[k] == CB_ALLREDUCE ? 1 : (size_t)nranks);
        for (int j = 0; j < na; j++)
          if (bench_plan_add(p, colls[k], ids[j], req)) return -1;
      }
    return 0;
  }
  for (int c = 0; c < CB_NCOLL; c++) {
    if (!o->ops[c]) continue;
    int ids[COLLIE_ALGO_COUNT_], na = bench_algos(a, c, ids);
    if (c == CB_BARRIER) { /* no size dimension */
      for (int j = 0; j < na; j++)
        if (bench_plan_add(p, c, ids[j], 0)) return -1;
      continue;
    }
    double b = (double)o->minbytes;
    while (b <= (double)o->maxbytes) {
      for (int j = 0; j < na; j++)
        if (bench_plan_add(p, c, ids[j], (size_t)b)) return -1;
      double next = floor(b * o->stepfactor);
      b = next > b ? next : b + 1; /* a factor near 1 still moves on */
    }
  }
  return 0;
}

/* ---- Main ---- */

int
main(int argc, char **argv)
{
  /* getopt_long permutes argv; the header shows it as typed. */
  char **argv0 = malloc(((size_t)argc + 1) * sizeof(char *));
  if (!argv0) return BENCH_EXIT_COLLIE;
  memcpy(argv0, argv, ((size_t)argc + 1) * sizeof(char *));

  int rank = 0, launched = bench_launcher_rank(&rank);
  bench_rank0 = rank == 0;
  struct bench_args a;
  if (bench_parse_args(argc, argv, &a)) {
    free(argv0);
    return bench_usage_status();
  }
  struct cb_opts *o = &a.o;
  if (a.model) {
    free(argv0);
    return cb_model_main(o, (int)a.per_host, (int)a.max_ranks, a.net_alpha_us, a.net_gbps);
  }
  if (a.transport) setenv("COLLIE_TRANSPORT", a.transport, 1);
  if (o->device_cuda) { /* before init: the library finds the driver loaded */
    const char *lr = getenv("COLLIE_LOCAL_RANK");
    char err[256];
    if (cb_cuda_open(lr ? atoi(lr) : 0, err, sizeof(err)) != 0) {
      fprintf(stderr, "collie-bench: rank %d: %s\n", rank, err);
      free(argv0);
      return BENCH_EXIT_COLLIE;
    }
  }
  /* The benchmark marks no training steps, so comms.csv would only be an
   * empty file left in the working directory: off unless asked for. */
  int comms_log_ours = !getenv("COLLIE_COMMS_LOG");
  if (comms_log_ours) setenv("COLLIE_COMMS_LOG", "0", 0);

  collie_comm_t *comm = NULL;
  collie_result_t rc;
  if (launched) {
    rc = collie_comm_init(&comm);
  } else {
    collie_config_t cfg = COLLIE_CONFIG_INIT;
    cfg.rank = 0;
    cfg.world_size = 1;
    rc = collie_comm_init_config(&cfg, &comm);
  }
  if (rc != COLLIE_SUCCESS) {
    fprintf(stderr, "collie-bench: rank %d: init failed: %s: %s\n", rank, collie_result_string(rc),
            collie_last_error());
    free(argv0);
    return BENCH_EXIT_COLLIE;
  }
  rank = collie_comm_rank(comm);
  bench_rank0 = rank == 0;
  int nranks = collie_comm_size(comm), status = 0;
  FILE *csv = NULL;
  struct bench_plan plan = {0};
  struct cb_point *pts = NULL;
  int npts = 0;

  if (o->root >= nranks) {
    bench_usage("--root %d is not a rank of this %d-rank job", o->root, nranks);
    status = bench_usage_status();
    goto out_destroy;
  }
  const char *transport = cb_transport_used(comm);
  if (!transport) {
    fprintf(stderr, "collie-bench: rank %d: %s\n", rank, collie_last_error());
    status = BENCH_EXIT_COLLIE;
    goto out_destroy;
  }
  int profile = !a.sizes_given && !a.ops_given && !a.fit_mode;

  /* Output files are opened before anything is measured, and every rank
   * learns whether rank 0 could, so that a typo costs no benchmark time. */
  int32_t bad = 0;
  if (rank == 0) {
    if (a.csv && !(csv = fopen(a.csv, "w"))) {
      fprintf(stderr, "collie-bench: --csv %s: %s\n", a.csv, strerror(errno));
      bad = 1;
    }
    struct stat st;
    if (profile && a.profile_dir && (stat(a.profile_dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
      fprintf(stderr, "collie-bench: --profile-dir %s: not a directory\n", a.profile_dir);
      bad = 1;
    }
    if (a.plot) {
      FILE *pf = fopen(a.plot, "a");
      if (!pf) {
        fprintf(stderr, "collie-bench: --plot %s: %s\n", a.plot, strerror(errno));
        bad = 1;
      } else {
        fclose(pf);
      }
    }
  }
  if ((rc = collie_allreduce(comm, &bad, &bad, 1, COLLIE_INT32, COLLIE_MAX, NULL, NULL)) !=
      COLLIE_SUCCESS) {
    fprintf(stderr, "collie-bench: rank %d: %s\n", rank, collie_last_error());
    status = BENCH_EXIT_COLLIE;
    goto out_destroy;
  }
  if (bad) {
    status = bench_usage_status();
    goto out_destroy;
  }

  if (rank == 0)
    bench_header(stdout, argc, argv0, &a, nranks, transport, !launched, comms_log_ours);
  if (rank == 0 && o->device_cuda) {
    double launch = cb_cuda_launch_us();
    char launch_s[80] = "no empty-kernel latency (the driver refused the kernel)";
    if (launch >= 0)
      snprintf(launch_s, sizeof(launch_s),
               "empty kernel launched and waited for %.2f us (best of 2000)", launch);
    printf("# device: cuda, %s (every rank on device LOCAL_RANK %% GPUs); device code: %s\n"
           "# device reference: copy device-to-device %.1f GB/s (256 MiB, best of 5); %s\n",
           cb_cuda_name(), collie__device_code(), cb_cuda_copy_gbps(), launch_s);
  }

  if (a.fit_mode) {
    status = cb_fit_main(comm, o, a.tune_path, a.fit_mode == 3);
    goto out_destroy;
  }

  if (bench_build_plan(&a, nranks, profile, &plan) ||
      !(pts = calloc((size_t)(plan.n ? plan.n : 1), sizeof(*pts)))) {
    fprintf(stderr, "collie-bench: rank %d: out of memory\n", rank);
    status = BENCH_EXIT_COLLIE;
    goto out_destroy;
  }
  if (rank == 0) {
    if (profile) printf("# seed profile: 1M, 4M, 16M elements\n");
    for (int c = 0; c < CB_NCOLL; c++) {
      int ids[COLLIE_ALGO_COUNT_];
      int runs =
          profile ? c == CB_ALLREDUCE || c == CB_ALLGATHER || c == CB_REDUCE_SCATTER : o->ops[c];
      if (runs && !bench_algos(&a, c, ids))
        printf("# note: %s has no algorithm \"%s\"; skipped\n", cb_coll_name(c),
               cb_algo_name(o->algo));
    }
    if (csv) cb_csv_header(csv);
  }

  int progress = rank == 0 && isatty(2), last_coll = -1;
  long total_wrong = 0;
  /* (collective, algorithm) pairs the library refused: not retried at other sizes. */
  unsigned char refused[CB_NCOLL][COLLIE_ALGO_COUNT_];
  memset(refused, 0, sizeof(refused));
  for (int k = 0; k < plan.n; k++) {
    const struct bench_item *it = &plan.it[k];
    if (refused[it->coll][it->algo]) continue;
    if (progress) {
      struct cb_shape sh;
      cb_shape(it->coll, it->req, nranks, collie_dtype_size(o->dtype), &sh);
      const char *an = it->algo == COLLIE_ALGO_AUTO
                           ? cb_auto_algo(comm, it->coll, &sh, o->dtype, NULL)
                           : cb_algo_name(it->algo);
      cb_progress(stderr, k + 1, plan.n, it->coll, sh.bytes, an);
    }
    struct cb_point pt;
    int r = cb_measure(comm, o, it->coll, it->algo, it->req, &pt);
    if (r == 1) continue; /* too small to give every rank an element */
    if (r < 0) {
      if (collie__comm_poisoned(comm) != COLLIE_SUCCESS) {
        if (progress) cb_progress_end(stderr);
        if (rank == 0) fprintf(stderr, "collie-bench: collie failed; stopping\n");
        status = BENCH_EXIT_COLLIE;
        goto out_destroy;
      }
      refused[it->coll][it->algo] = 1;
      if (rank == 0) {
        if (progress) cb_progress_end(stderr);
        printf("# note: %s with %s not measured (see stderr); skipped at every size\n",
               cb_coll_name(it->coll), cb_algo_name(it->algo));
      }
      continue;
    }
    pts[npts++] = pt;
    if (pt.wrong > 0) total_wrong += pt.wrong;
    if (rank == 0) {
      if (progress) cb_progress_end(stderr);
      if (it->coll != last_coll) cb_table_header(stdout, it->coll, o->inplace);
      last_coll = it->coll;
      cb_table_row(stdout, &pt, o);
      if (csv) cb_csv_row(csv, &pt, transport, nranks);
    }
  }
  if (progress) cb_progress_end(stderr);

  if (rank == 0) {
    double sum = 0;
    int nbw = 0;
    for (int i = 0; i < npts; i++)
      if (pts[i].shape.bytes > 0) {
        sum += pts[i].busbw;
        nbw++;
      }
    printf("#\n# points: %d, average busbw: %.2f GB/s\n", npts, nbw ? sum / nbw : 0.0);
    if (o->check)
      printf("# wrong elements: %ld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
    else
      printf("# results not checked (-c 0)\n");
    if (profile) {
      char path[4096];
      cb_profile_path(path, sizeof(path), a.profile_dir, nranks, (long long)time(NULL));
      FILE *pf = fopen(path, "w");
      if (!pf || cb_profile_write(pf, pts, npts, nranks, transport, o->dtype) != 0) {
        fprintf(stderr, "collie-bench: %s: %s\n", path, strerror(errno));
        status = BENCH_EXIT_USAGE;
      }
      if (pf && fclose(pf) != 0 && !status) {
        fprintf(stderr, "collie-bench: %s: %s\n", path, strerror(errno));
        status = BENCH_EXIT_USAGE;
      }
      printf("\n");
      cb_profile_write(stdout, pts, npts, nranks, transport, o->dtype);
      if (!status) printf("\n# profile written to %s\n", path);
    }
    if (a.plot) {
      char title[256];
      snprintf(title, sizeof(title), "collie-bench: %d ranks, %s, %s%s", nranks, transport,
               collie_dtype_name(o->dtype), o->inplace ? ", in place" : "");
      if (cb_plot_write(a.plot, pts, npts, title) != 0) status = BENCH_EXIT_USAGE;
    }
    if (csv && (fflush(csv) != 0 || ferror(csv))) {
      fprintf(stderr, "collie-bench: --csv %s: write failed: %s\n", a.csv, strerror(errno));
      status = BENCH_EXIT_USAGE;
    }
    fflush(stdout);
  }
  if (!status && total_wrong > 0) {
    if (rank == 0)
      fprintf(stderr, "collie-bench: %ld result elements were wrong (the #wrong column)\n",
              total_wrong);
    status = BENCH_EXIT_WRONG;
  }

out_destroy:
  if (csv) fclose(csv);
  free(plan.it);
  free(pts);
  free(argv0);
  collie_comm_destroy(comm);
  return status;
}
