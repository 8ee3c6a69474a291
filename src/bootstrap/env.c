/*
 * env.c - finds out which launcher started this process and reads rank,
 * size, local rank, store address and job token from its variables.
 *
 * Launchers are tried in a fixed order and the first whose rank/size pair is
 * present wins: collierun (COLLIE_*), torchrun, Open MPI, MPICH/PMI, Slurm.
 * The MPI launchers come before Slurm because they are the inner launcher
 * when both are present: a job step that runs mpirun inside an allocation
 * inherits SLURM_PROCID and SLURM_NTASKS from the allocation, and those would
 * give every rank the same number. A variable set to the empty string counts
 * as unset. Every value is checked (a whole integer, rank below size, size at
 * least 1), and a half pair (RANK without WORLD_SIZE, MASTER_ADDR without
 * MASTER_PORT) is an error rather than a guess: a silent default here would
 * turn into a hang at init. docs/bootstrap.md has the tables.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "util/error.h"

struct env_source {
  const char *name;
  const char *rank, *size;             /* the pair that identifies the launcher */
  const char *local_rank, *local_size; /* optional; NULL: read specially or never */
  const char *token;                   /* the launcher's job id, or NULL */
};

static const struct env_source env_sources[] = {
    {"collierun", "COLLIE_RANK", "COLLIE_WORLD_SIZE", "COLLIE_LOCAL_RANK", "COLLIE_LOCAL_SIZE",
     NULL},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid"},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_JOBID"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL, NULL},
};
#define ENV_NSOURCES (sizeof(env_sources) / sizeof(env_sources[0]))

static const char *
env_default_getenv(const char *name)
{
  return getenv(name);
}

/* The value of name, or NULL when it is unset or empty. */
static const char *
env_get(const char *(*get)(const char *), const char *name)
{
  const char *v = get(name);
  return v && *v ? v : NULL;
}

/* Parses a whole decimal integer in [lo, hi] from s. 0, or -1 when malformed. */
static int
env_parse_int(const char *s, long lo, long hi, int *out)
{
  char *end;
  if (!s || !((*s >= '0' && *s <= '9') || *s == '-')) return -1;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

/* Reads the integer variable name into *out (unchanged when unset). */
static collie_result_t
env_int(const char *(*get)(const char *), const char *name, long lo, int *out)
{
  const char *v = env_get(get, name);
  if (!v) return COLLIE_SUCCESS;
  if (env_parse_int(v, lo, 1L << 30, out) != 0)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "environment variable %s=\"%s\" is not an integer >= %ld", name, v, lo);
  return COLLIE_SUCCESS;
}

/* Slurm's task counts: "4", "4(x2)" or "4(x2),3" (per node, in node order).
 * Picks the entry of node nodeid (-1: unknown, then only a uniform list
 * answers). Writes -1 when it cannot tell. 0, or -1 when malformed. */
static int
env_slurm_tasks_per_node(const char *s, int nodeid, int *out)
{
  int node = 0, uniform = -1, found = -1;
  *out = -1;
  while (*s) {
    char *end;
    errno = 0;
    long n = strtol(s, &end, 10);
    if (errno || end == s || n < 1 || n > (1L << 30) || *s < '0' || *s > '9') return -1;
    long times = 1;
    s = end;
    if (*s == '(') {
      if (s[1] != 'x' || s[2] < '0' || s[2] > '9') return -1;
      times = strtol(s + 2, &end, 10);
      if (end == s + 2 || *end != ')' || times < 1 || times > (1L << 30)) return -1;
      s = end + 1;
    }
    if (*s == ',')
      s++;
    else if (*s)
      return -1;
    if (nodeid >= node && nodeid < node + times) found = (int)n;
    uniform = uniform == -1 ? (int)n : (uniform == n ? uniform : -2);
    node += (int)times;
  }
  if (uniform == -1) return -1; /* empty */
  *out = found != -1 ? found : (uniform >= 1 ? uniform : -1);
  return 0;
}

static collie_result_t
env_copy(char *dst, size_t cap, const char *name, const char *val)
{
  if (strlen(val) >= cap)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "environment variable %s is %zu characters long (max %zu)", name,
                       strlen(val), cap - 1);
  memcpy(dst, val, strlen(val) + 1);
  return COLLIE_SUCCESS;
}

static collie_result_t
env_store(struct collie__launch *out, const char *(*get)(const char *))
{
  const char *s = env_get(get, "COLLIE_STORE");
  if (s) return env_copy(out->store, sizeof(out->store), "COLLIE_STORE", s);
  const char *addr = env_get(get, "MASTER_ADDR"), *port = env_get(get, "MASTER_PORT");
  if (!addr && !port) return COLLIE_SUCCESS;
  if (!addr)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "environment variable MASTER_PORT=\"%s\" is set but MASTER_ADDR is not",
                       port);
  if (!port)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "environment variable MASTER_ADDR=\"%s\" is set but MASTER_PORT is not",
                       addr);
  int p;
  if (env_parse_int(port, 1, 65535, &p) != 0)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "environment variable MASTER_PORT=\"%s\" is not a port number (1-65535)",
                       port);
  /* An IPv6 address needs brackets before the port. */
  int v6 = strchr(addr, ':') != NULL && addr[0] != '[';
  int n = snprintf(out->store, sizeof(out->store), v6 ? "tcp://[%s]:%d" : "tcp://%s:%d", addr, p);
  if (n < 0 || (size_t)n >= sizeof(out->store))
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "environment variable MASTER_ADDR is %zu characters long (too long)",
                       strlen(addr));
  return COLLIE_SUCCESS;
}

static collie_result_t
env_token(struct collie__launch *out, const struct env_source *src,
          const char *(*get)(const char *))
{
  const char *t = env_get(get, "COLLIE_JOB_TOKEN");
  if (t) return env_copy(out->token, sizeof(out->token), "COLLIE_JOB_TOKEN", t);
  if (!strcmp(src->name, "slurm")) {
    const char *job = env_get(get, "SLURM_JOB_ID"), *step = env_get(get, "SLURM_STEP_ID");
    if (job) {
      int n = snprintf(out->token, sizeof(out->token), step ? "%s.%s" : "%s", job, step);
      if (n < 0 || (size_t)n >= sizeof(out->token))
        return collie__err(COLLIE_INVALID_ARGUMENT,
                           "environment variable SLURM_JOB_ID is too long");
      return COLLIE_SUCCESS;
    }
  } else if (src->token) {
    t = env_get(get, src->token);
    /* torchrun's default run id is the literal "none": shared by every job, so no token. */
    if (t && strcmp(t, "none") != 0) return env_copy(out->token, sizeof(out->token), src->token, t);
  }
  /* Nothing identifies the job: the store address is the best shared secret left. */
  int n = snprintf(out->token, sizeof(out->token), "collie:%s", out->store);
  if (n < 0 || (size_t)n >= sizeof(out->token))
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "store url \"%.64s...\" is too long to serve as the job token; set "
                       "COLLIE_JOB_TOKEN",
                       out->store);
  return COLLIE_SUCCESS;
}

collie_result_t
collie__launch_detect(struct collie__launch *out, const char *(*getenv_fn)(const char *name))
{
  const char *(*get)(const char *) = getenv_fn ? getenv_fn : env_default_getenv;
  collie_result_t rc;
  if (!out) return collie__err(COLLIE_INVALID_ARGUMENT, "launch detect: out is NULL");
  memset(out, 0, sizeof(*out));
  out->rank = out->size = out->local_rank = out->local_size = -1;

  const struct env_source *src = NULL;
  for (size_t i = 0; i < ENV_NSOURCES && !src; i++) {
    const char *r = env_get(get, env_sources[i].rank), *s = env_get(get, env_sources[i].size);
    if (r && !s)
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "environment variable %s=\"%s\" is set but %s is not (%s)",
                         env_sources[i].rank, r, env_sources[i].size, env_sources[i].name);
    if (s && !r)
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "environment variable %s=\"%s\" is set but %s is not (%s)",
                         env_sources[i].size, s, env_sources[i].rank, env_sources[i].name);
    if (r && s) src = &env_sources[i];
  }
  if (!src)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "no launcher environment found: set COLLIE_RANK/COLLIE_WORLD_SIZE/"
                       "COLLIE_STORE (collierun does), or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT "
                       "(torchrun), or run under Slurm (SLURM_PROCID/SLURM_NTASKS), Open MPI "
                       "(OMPI_COMM_WORLD_RANK/SIZE) or MPICH (PMI_RANK/PMI_SIZE)");
  out->source = src->name;

  if ((rc = env_int(get, src->size, 1, &out->size)) != COLLIE_SUCCESS) return rc;
  if ((rc = env_int(get, src->rank, 0, &out->rank)) != COLLIE_SUCCESS) return rc;
  if (out->rank >= out->size)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "environment variable %s=\"%d\" is not below %s=\"%d\"", src->rank,
                       out->rank, src->size, out->size);

  if ((rc = env_int(get, src->local_rank, 0, &out->local_rank)) != COLLIE_SUCCESS) return rc;
  if (src->local_size) {
    if ((rc = env_int(get, src->local_size, 1, &out->local_size)) != COLLIE_SUCCESS) return rc;
  } else {
    /* Slurm: tasks per node, as a list over nodes. */
    const char *names[] = {"SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE"};
    int nodeid = -1;
    if ((rc = env_int(get, "SLURM_NODEID", 0, &nodeid)) != COLLIE_SUCCESS) return rc;
    for (int i = 0; i < 2; i++) {
      const char *v = env_get(get, names[i]);
      if (!v) continue;
      if (env_slurm_tasks_per_node(v, nodeid, &out->local_size) != 0)
        return collie__err(COLLIE_INVALID_ARGUMENT,
                           "environment variable %s=\"%s\" is malformed (expected a list like "
                           "\"4\", \"4(x2)\" or \"4(x2),3\")",
                           names[i], v);
      break;
    }
  }
  const char *lsname = src->local_size ? src->local_size : "SLURM_NTASKS_PER_NODE";
  if (out->local_size > out->size)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "environment variable %s=\"%d\" is larger than %s=\"%d\"", lsname,
                       out->local_size, src->size, out->size);
  if (out->local_rank >= 0 && out->local_size >= 1 && out->local_rank >= out->local_size)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "environment variable %s=\"%d\" is not below %s=\"%d\"", src->local_rank,
                       out->local_rank, lsname, out->local_size);

  if ((rc = env_store(out, get)) != COLLIE_SUCCESS) return rc;
  if (!out->store[0] && out->size > 1) {
    if (!strcmp(src->name, "slurm"))
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "no store address: under Slurm (SLURM_PROCID/SLURM_NTASKS) you must set "
                         "COLLIE_STORE (tcp://host:port or file:///shared/dir) or "
                         "MASTER_ADDR/MASTER_PORT");
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "no store address for %d ranks (%s=%d, launcher %s): set COLLIE_STORE "
                       "(tcp://host:port or file:///shared/dir) or MASTER_ADDR/MASTER_PORT",
                       out->size, src->size, out->size, src->name);
  }
  return env_token(out, src, get);
}
