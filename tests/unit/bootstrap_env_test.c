/* bootstrap_env_test.c - launcher detection over a fake environment, and the
 * host identity. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "runner.h"

/* The fake environment: "NAME=value" strings, NULL-terminated. */
static const char *const *env_table;

static const char *
env_fake_getenv(const char *name)
{
  size_t n = strlen(name);
  for (const char *const *p = env_table; p && *p; p++)
    if (!strncmp(*p, name, n) && (*p)[n] == '=') return *p + n + 1;
  return NULL;
}

static collie_result_t
env_detect(const char *const *table, struct collie__launch *out)
{
  env_table = table;
  return collie__launch_detect(out, env_fake_getenv);
}

#define ENV_OK(out, ...)                                                                           \
  do {                                                                                             \
    static const char *const tbl_[] = {__VA_ARGS__, NULL};                                         \
    ASSERT_OK(env_detect(tbl_, (out)));                                                            \
  } while (0)
#define ENV_BAD(substr, ...)                                                                       \
  do {                                                                                             \
    static const char *const tbl_[] = {__VA_ARGS__, NULL};                                         \
    struct collie__launch l_;                                                                      \
    ASSERT_RC(COLLIE_INVALID_ARGUMENT, substr, env_detect(tbl_, &l_));                             \
  } while (0)

TEST_IMPL(bootstrap_env_launchers)
{
  struct collie__launch l;

  ENV_OK(&l, "COLLIE_RANK=2", "COLLIE_WORLD_SIZE=4", "COLLIE_LOCAL_RANK=0", "COLLIE_LOCAL_SIZE=2",
         "COLLIE_STORE=file:///tmp/s", "COLLIE_JOB_TOKEN=abc");
  ASSERT(!strcmp(l.source, "collierun") && l.rank == 2 && l.size == 4);
  ASSERT(l.local_rank == 0 && l.local_size == 2);
  ASSERT(!strcmp(l.store, "file:///tmp/s") && !strcmp(l.token, "abc"));

  ENV_OK(&l, "RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=4", "MASTER_ADDR=node01",
         "MASTER_PORT=29500", "TORCHELASTIC_RUN_ID=run7");
  ASSERT(!strcmp(l.source, "torchrun") && l.rank == 3 && l.size == 8);
  ASSERT(l.local_rank == 1 && l.local_size == 4);
  ASSERT(!strcmp(l.store, "tcp://node01:29500") && !strcmp(l.token, "run7"));

  ENV_OK(&l, "SLURM_PROCID=5", "SLURM_NTASKS=8", "SLURM_LOCALID=1", "SLURM_NTASKS_PER_NODE=4(x2)",
         "SLURM_JOB_ID=1234", "SLURM_STEP_ID=0", "MASTER_ADDR=10.0.0.1", "MASTER_PORT=1234");
  ASSERT(!strcmp(l.source, "slurm") && l.rank == 5 && l.size == 8);
  ASSERT(l.local_rank == 1 && l.local_size == 4);
  ASSERT(!strcmp(l.store, "tcp://10.0.0.1:1234") && !strcmp(l.token, "1234.0"));

  /* Heterogeneous nodes: SLURM_NODEID picks the entry; without it, no local size. */
  ENV_OK(&l, "SLURM_PROCID=5", "SLURM_NTASKS=7", "SLURM_TASKS_PER_NODE=2(x2),3", "SLURM_NODEID=2",
         "COLLIE_STORE=tcp://h:1", "SLURM_JOB_ID=9");
  ASSERT(l.local_size == 3 && l.local_rank == -1 && !strcmp(l.token, "9"));
  ENV_OK(&l, "SLURM_PROCID=5", "SLURM_NTASKS=7", "SLURM_TASKS_PER_NODE=2(x2),3",
         "COLLIE_STORE=tcp://h:1");
  ASSERT(l.local_size == -1);
  ENV_OK(&l, "SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_NTASKS_PER_NODE=4",
         "COLLIE_STORE=tcp://h:1");
  ASSERT(l.local_size == 4);

  ENV_OK(&l, "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=1",
         "OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_MCA_ess_base_jobid=4242", "COLLIE_STORE=file:///d");
  ASSERT(!strcmp(l.source, "openmpi") && l.rank == 1 && l.size == 2 && l.local_rank == 1 &&
         l.local_size == 2 && !strcmp(l.token, "4242"));

  ENV_OK(&l, "PMI_RANK=0", "PMI_SIZE=3", "MPI_LOCALRANKID=0", "MPI_LOCALNRANKS=3",
         "MASTER_ADDR=::1", "MASTER_PORT=80", "PMI_JOBID=kvs_1");
  ASSERT(!strcmp(l.source, "pmi") && l.rank == 0 && l.size == 3 && l.local_size == 3);
  ASSERT(!strcmp(l.store, "tcp://[::1]:80") && !strcmp(l.token, "kvs_1"));

  /* One rank needs no store. */
  ENV_OK(&l, "RANK=0", "WORLD_SIZE=1");
  ASSERT(l.size == 1 && l.store[0] == '\0' && l.local_rank == -1 && l.local_size == -1);
}

TEST_IMPL(bootstrap_env_precedence)
{
  struct collie__launch l;
  /* COLLIE_* wins over torchrun, and over Slurm. */
  ENV_OK(&l, "RANK=1", "WORLD_SIZE=2", "COLLIE_RANK=3", "COLLIE_WORLD_SIZE=4", "SLURM_PROCID=0",
         "SLURM_NTASKS=9", "COLLIE_STORE=tcp://a:1", "MASTER_ADDR=b", "MASTER_PORT=2");
  ASSERT(!strcmp(l.source, "collierun") && l.rank == 3 && l.size == 4);
  ASSERT(!strcmp(l.store, "tcp://a:1")); /* COLLIE_STORE over MASTER_ADDR */
  /* torchrun inside a Slurm allocation. */
  ENV_OK(&l, "SLURM_PROCID=0", "SLURM_NTASKS=1", "RANK=5", "WORLD_SIZE=6", "MASTER_ADDR=b",
         "MASTER_PORT=2", "SLURM_JOB_ID=77");
  ASSERT(!strcmp(l.source, "torchrun") && l.rank == 5);
  /* mpirun inside a Slurm allocation: the inherited SLURM_PROCID is not the rank. */
  ENV_OK(&l, "SLURM_PROCID=0", "SLURM_NTASKS=4", "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4",
         "COLLIE_STORE=tcp://h:5");
  ASSERT(!strcmp(l.source, "openmpi") && l.rank == 3);
  /* Empty values count as unset. */
  ENV_OK(&l, "COLLIE_RANK=", "COLLIE_WORLD_SIZE=", "RANK=0", "WORLD_SIZE=2",
         "COLLIE_STORE=", "MASTER_ADDR=m", "MASTER_PORT=9");
  ASSERT(!strcmp(l.source, "torchrun") && !strcmp(l.store, "tcp://m:9"));
}

TEST_IMPL(bootstrap_env_tokens)
{
  struct collie__launch l;
  /* COLLIE_JOB_TOKEN always wins. */
  ENV_OK(&l, "RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=9", "TORCHELASTIC_RUN_ID=r",
         "COLLIE_JOB_TOKEN=mine");
  ASSERT(!strcmp(l.token, "mine"));
  ENV_OK(&l, "SLURM_PROCID=0", "SLURM_NTASKS=2", "COLLIE_STORE=tcp://h:1", "SLURM_JOB_ID=1",
         "SLURM_STEP_ID=2", "COLLIE_JOB_TOKEN=mine");
  ASSERT(!strcmp(l.token, "mine"));
  /* No job id: the store address. torchrun's default run id "none" is no id. */
  ENV_OK(&l, "RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=9",
         "TORCHELASTIC_RUN_ID=none");
  ASSERT(!strcmp(l.token, "collie:tcp://m:9"));
  ENV_OK(&l, "COLLIE_RANK=0", "COLLIE_WORLD_SIZE=2", "COLLIE_STORE=file:///x");
  ASSERT(!strcmp(l.token, "collie:file:///x"));
  ENV_OK(&l, "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1");
  ASSERT(!strcmp(l.token, "collie:"));
  /* A token longer than the struct holds is an error, not a truncation. */
  static char longtok[400];
  memset(longtok, 'a', sizeof(longtok) - 1);
  memcpy(longtok, "COLLIE_JOB_TOKEN=", 17);
  static const char *tbl[] = {"RANK=0", "WORLD_SIZE=1", longtok, NULL};
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "COLLIE_JOB_TOKEN", env_detect(tbl, &l));
}

TEST_IMPL(bootstrap_env_errors)
{
  struct collie__launch l;
  static const char *const empty[] = {NULL};
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "no launcher environment found", env_detect(empty, &l));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "COLLIE_RANK/COLLIE_WORLD_SIZE/COLLIE_STORE",
            env_detect(empty, &l));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "MASTER_ADDR/MASTER_PORT", env_detect(empty, &l));
  /* Half pairs name the missing variable. */
  ENV_BAD("WORLD_SIZE", "RANK=0");
  ENV_BAD("RANK", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=1");
  ENV_BAD("COLLIE_WORLD_SIZE", "COLLIE_RANK=1", "RANK=0", "WORLD_SIZE=1");
  ENV_BAD("SLURM_NTASKS", "SLURM_PROCID=1");
  ENV_BAD("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE=3");
  ENV_BAD("PMI_SIZE", "PMI_RANK=3");
  ENV_BAD("MASTER_PORT", "RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m");
  ENV_BAD("MASTER_ADDR", "RANK=0", "WORLD_SIZE=2", "MASTER_PORT=5");
  /* Malformed and inconsistent values name the variable and its value. */
  ENV_BAD("RANK=\"x\"", "RANK=x", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=1");
  ENV_BAD("RANK=\"1x\"", "RANK=1x", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=1");
  ENV_BAD("RANK=\" 1\"", "RANK= 1", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=1");
  ENV_BAD("RANK=\"-1\"", "RANK=-1", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=1");
  ENV_BAD("WORLD_SIZE=\"0\"", "RANK=0", "WORLD_SIZE=0");
  ENV_BAD("WORLD_SIZE=\"99999999999\"", "RANK=0", "WORLD_SIZE=99999999999");
  ENV_BAD("COLLIE_RANK=\"4\"", "COLLIE_RANK=4", "COLLIE_WORLD_SIZE=4", "COLLIE_STORE=file:///x");
  ENV_BAD("COLLIE_LOCAL_RANK=\"2\"", "COLLIE_RANK=0", "COLLIE_WORLD_SIZE=4",
          "COLLIE_STORE=file:///x", "COLLIE_LOCAL_RANK=2", "COLLIE_LOCAL_SIZE=2");
  ENV_BAD("COLLIE_LOCAL_SIZE=\"8\"", "COLLIE_RANK=0", "COLLIE_WORLD_SIZE=4",
          "COLLIE_STORE=file:///x", "COLLIE_LOCAL_SIZE=8");
  ENV_BAD("LOCAL_RANK=\"a\"", "RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=a");
  ENV_BAD("MASTER_PORT=\"http\"", "RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=http");
  ENV_BAD("MASTER_PORT=\"70000\"", "RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=70000");
  ENV_BAD("SLURM_NTASKS_PER_NODE=\"4(x\"", "SLURM_PROCID=0", "SLURM_NTASKS=4",
          "SLURM_NTASKS_PER_NODE=4(x", "COLLIE_STORE=tcp://h:1");
  ENV_BAD("SLURM_TASKS_PER_NODE=\"a\"", "SLURM_PROCID=0", "SLURM_NTASKS=4",
          "SLURM_TASKS_PER_NODE=a", "COLLIE_STORE=tcp://h:1");
  ENV_BAD("SLURM_NODEID", "SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_NODEID=z",
          "COLLIE_STORE=tcp://h:1");
  /* No store for several ranks. */
  ENV_BAD("COLLIE_STORE", "COLLIE_RANK=0", "COLLIE_WORLD_SIZE=2");
  ENV_BAD("under Slurm", "SLURM_PROCID=0", "SLURM_NTASKS=2");
  ENV_BAD("MASTER_ADDR/MASTER_PORT", "SLURM_PROCID=0", "SLURM_NTASKS=2");
  ENV_BAD("COLLIE_STORE", "PMI_RANK=0", "PMI_SIZE=2");
  /* A NULL out, and the real environment (the runner gives unit tests none). */
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "NULL", collie__launch_detect(NULL, NULL));
  unsetenv("COLLIE_RANK");
  unsetenv("RANK");
  unsetenv("SLURM_PROCID");
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("PMI_RANK");
  setenv("PMI_SIZE", "2", 1);
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "PMI_SIZE", collie__launch_detect(&l, NULL));
}

TEST_IMPL(bootstrap_host_id)
{
  char a[512], b[512], host[256] = "";
  collie__host_id("fake-host-3", a, sizeof(a));
  ASSERT(!strcmp(a, "fake-host-3"));
  collie__host_id("", a, sizeof(a));
  collie__host_id(NULL, b, sizeof(b));
  ASSERT(!strcmp(a, b)); /* stable, and "" means no override */
  gethostname(host, sizeof(host) - 1);
  size_t hl = strlen(host);
  ASSERTF(!strncmp(a, host, hl), "host id %s does not start with %s", a, host);
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    char boot[64] = "";
    ASSERT(fgets(boot, sizeof(boot), f) != NULL);
    fclose(f);
    boot[strcspn(boot, "\n")] = '\0';
    ASSERTF(a[hl] == '/' && !strcmp(a + hl + 1, boot), "host id %s, boot id %s", a, boot);
  } else {
    ASSERT(!strcmp(a, host));
  }
  /* Truncation keeps a NUL; a zero-length buffer is left alone. */
  collie__host_id("abcdef", a, 4);
  ASSERT(!strcmp(a, "abc"));
  collie__host_id("abcdef", a, 0);
}
