/*
 * params.c - the one parser of COLLIE_* environment variables, generated from
 * params.def. A malformed value fails init with a message naming the variable
 * and the value: never a silent default.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"

extern char **environ;

static const char *params_levels[] = {"NONE", "WARN", "INFO", "TRACE"};
/* COLLIE_WIRE's words, from COLLIE_WIRE_NATIVE on. */
static const char *params_wires[] = {"native", "float16", "bfloat16"};

static collie_result_t
params_int(const char *name, const char *v, int64_t *out)
{
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end != '\0')
    return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_%s=\"%s\" is not an integer", name, v);
  *out = x;
  return COLLIE_SUCCESS;
}

static collie_result_t
params_word(const char *name, const char *v, const char *const *words, int nwords, int *out)
{
  for (int i = 0; i < nwords; i++)
    if (!strcasecmp(v, words[i])) {
      *out = i;
      return COLLIE_SUCCESS;
    }
  char allowed[128] = "";
  for (int i = 0; i < nwords; i++) {
    strncat(allowed, words[i], sizeof(allowed) - strlen(allowed) - 1);
    if (i + 1 < nwords) strncat(allowed, ", ", sizeof(allowed) - strlen(allowed) - 1);
  }
  return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_%s=\"%s\" is not one of %s", name, v,
                     allowed);
}

/* Each typed setter: parse v (the environment's or the default) into field. */
static collie_result_t
params_set_INT(struct collie__params *p, size_t *used, const char *name, const char *v,
               int64_t *field)
{
  (void)p;
  (void)used;
  return params_int(name, v, field);
}
static collie_result_t
params_set_STR(struct collie__params *p, size_t *used, const char *name, const char *v,
               const char **field)
{
  /* Copied: the environment may change after init (a Python program setting
   * os.environ), and the communicator keeps these strings. */
  size_t n = strlen(v) + 1;
  if (n > sizeof(p->strings_) - *used)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "COLLIE_%s is %zu bytes long: the COLLIE_* strings together may take %zu",
                       name, n - 1, sizeof(p->strings_) - 1);
  memcpy(p->strings_ + *used, v, n);
  *field = p->strings_ + *used;
  *used += n;
  return COLLIE_SUCCESS;
}
static collie_result_t
params_set_LEVEL(struct collie__params *p, size_t *used, const char *name, const char *v,
                 collie__loglevel_t *field)
{
  (void)p;
  (void)used;
  int i = 0;
  collie_result_t rc = params_word(name, v, params_levels, 4, &i);
  if (rc == COLLIE_SUCCESS) *field = (collie__loglevel_t)i;
  return rc;
}
static collie_result_t
params_set_TRANSPORT(struct collie__params *p, size_t *used, const char *name, const char *v,
                     const char **field)
{
  (void)p;
  (void)used;
  const char *t = collie__net_transport_name(v);
  char choices[128];
  if (!t)
    return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_%s=\"%s\" is not one of %s", name, v,
                       collie__net_transport_choices(choices, sizeof(choices)));
  *field = t;
  return COLLIE_SUCCESS;
}

static collie_result_t
params_set_WIRE(struct collie__params *p, size_t *used, const char *name, const char *v, int *field)
{
  (void)p;
  (void)used;
  int i = 0;
  collie_result_t rc = params_word(name, v, params_wires, 3, &i);
  if (rc == COLLIE_SUCCESS) *field = COLLIE_WIRE_NATIVE + i;
  return rc;
}

#define PARAMS_DEF_INT(def) #def
#define PARAMS_DEF_STR(def) def
#define PARAMS_DEF_LEVEL(def) def
#define PARAMS_DEF_TRANSPORT(def) def
#define PARAMS_DEF_WIRE(def) def

/* Range checks that the types alone do not express. */
static collie_result_t
params_check(const struct collie__params *p)
{
  if (p->TIMEOUT_MS <= 0)
    return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_TIMEOUT_MS=%lld must be > 0 (milliseconds)",
                       (long long)p->TIMEOUT_MS);
  if (p->SPIN < -1)
    return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_SPIN=%lld must be >= -1",
                       (long long)p->SPIN);
  if (p->FR_SIZE < 0 || p->FR_SIZE > 10000000)
    return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_FR_SIZE=%lld must be 0..10000000",
                       (long long)p->FR_SIZE);
  if (p->CHECK != 0 && p->CHECK != 1)
    return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_CHECK=%lld must be 0 or 1",
                       (long long)p->CHECK);
  if (p->STORE_SERVE != 0 && p->STORE_SERVE != 1)
    return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_STORE_SERVE=%lld must be 0 or 1",
                       (long long)p->STORE_SERVE);
  if (p->SPREAD != 0 && p->SPREAD != 1)
    return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_SPREAD=%lld must be 0 or 1",
                       (long long)p->SPREAD);
  if (p->COMMS_LOG != 0 && p->COMMS_LOG != 1)
    return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_COMMS_LOG=%lld must be 0 or 1",
                       (long long)p->COMMS_LOG);
  if (p->CUDA_CHUNK < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_CUDA_CHUNK=%lld must be >= 0 (bytes)",
                       (long long)p->CUDA_CHUNK);
  if (p->RING_BOOTSTRAP < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_RING_BOOTSTRAP=%lld must be >= 0 (ranks)",
                       (long long)p->RING_BOOTSTRAP);
  if (p->CUDA_P2P_MIN < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_CUDA_P2P_MIN=%lld must be >= 0 (bytes)",
                       (long long)p->CUDA_P2P_MIN);
  if (p->CUDA_STAGE_MAX < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_CUDA_STAGE_MAX=%lld must be >= 0 (bytes)",
                       (long long)p->CUDA_STAGE_MAX);
  if (p->CUDA_IPC != 0 && p->CUDA_IPC != 1)
    return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_CUDA_IPC=%lld must be 0 or 1",
                       (long long)p->CUDA_IPC);
  if (p->SHM_CMA_MIN < 0)
    return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_SHM_CMA_MIN=%lld must be >= 0 (bytes)",
                       (long long)p->SHM_CMA_MIN);
  /* The minimum depends on the local rank count: the shm transport checks it. */
  if (p->P2P_UNEXPECTED_BYTES <= 0)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "COLLIE_P2P_UNEXPECTED_BYTES=%lld must be > 0 (bytes of unexpected "
                       "send/recv messages a communicator buffers)",
                       (long long)p->P2P_UNEXPECTED_BYTES);
  if (p->SHM_BYTES <= 0)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "COLLIE_SHM_BYTES=%lld must be > 0 (bytes of shared memory per local rank)",
                       (long long)p->SHM_BYTES);
  if (p->TIMING_QUEUE <= 0 || p->TIMING_QUEUE > COLLIE_TIMING_QUEUE_MAX)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "COLLIE_TIMING_QUEUE=%lld must be 1..%d (records, ~250 bytes each, "
                       "allocated at init)",
                       (long long)p->TIMING_QUEUE, COLLIE_TIMING_QUEUE_MAX);
  if (p->TIMING_FLUSH_MS <= 0 || p->TIMING_FLUSH_MS > 86400000)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "COLLIE_TIMING_FLUSH_MS=%lld must be 1..86400000 (milliseconds)",
                       (long long)p->TIMING_FLUSH_MS);
  return COLLIE_SUCCESS;
}

static const char *
params_getenv(const char *name)
{
  return getenv(name);
}

collie_result_t
collie__params_load(struct collie__params *p, const char *(*getenv_fn)(const char *name))
{
  collie_result_t rc;
  const char *v;
  size_t used = 0;
  if (!getenv_fn) getenv_fn = params_getenv;
  memset(p, 0, sizeof(*p));
#define X(name, type, def, help)                                                                   \
  v = getenv_fn("COLLIE_" #name);                                                                  \
  if (!v) v = PARAMS_DEF_##type(def);                                                              \
  if (v && (rc = params_set_##type(p, &used, #name, v, &p->name)) != COLLIE_SUCCESS) return rc;
#include "core/params.def"
#undef X
  rc = params_check(p);
  if (rc != COLLIE_SUCCESS) return rc;

  /* A misspelt variable silently ignored is a classic lost afternoon: warn. */
  if (getenv_fn == params_getenv && p->DEBUG >= COLLIE_LOG_WARN) {
    for (char **e = environ; e && *e; e++) {
      /* COLLIE_TEST_* belong to the test harness, COLLIE_LIBRARY to the Python binding,
       * COLLIE_TORCH_* to collie.torch (COLLIE_TORCH_FAST) and its tests, COLLIE_MPI_FAST
       * to collie.MPI. */
      if (strncmp(*e, "COLLIE_", 7) != 0 || !strncmp(*e, "COLLIE_TEST_", 12) ||
          !strncmp(*e, "COLLIE_LIBRARY=", 15) || !strncmp(*e, "COLLIE_TORCH_", 13) ||
          !strncmp(*e, "COLLIE_MPI_FAST=", 16))
        continue;
      size_t n = strcspn(*e + 7, "=");
      int known = 0;
#define X(name, type, def, help)                                                                   \
  if (n == strlen(#name) && !strncmp(*e + 7, #name, n)) known = 1;
#include "core/params.def"
#undef X
      if (!known)
        collie__log(COLLIE_LOG_WARN, "INIT", "%.*s is not a collie variable (misspelt?)",
                    (int)(n + 7), *e);
    }
  }
  return COLLIE_SUCCESS;
}

/* A string field of dst that points into src's copies points into dst's. */
static void
params_rebase(struct collie__params *dst, const struct collie__params *src, const char **field)
{
  if (*field >= src->strings_ && *field < src->strings_ + sizeof(src->strings_))
    *field = dst->strings_ + (*field - src->strings_);
}
#define PARAMS_REBASE_INT(name)
#define PARAMS_REBASE_LEVEL(name)
#define PARAMS_REBASE_STR(name) params_rebase(dst, src, &dst->name);
#define PARAMS_REBASE_TRANSPORT(name) params_rebase(dst, src, &dst->name);
#define PARAMS_REBASE_WIRE(name)

void
collie__params_copy(struct collie__params *dst, const struct collie__params *src)
{
  *dst = *src;
#define X(name, type, def, help) PARAMS_REBASE_##type(name)
#include "core/params.def"
#undef X
}

void
collie__params_describe(void (*line)(const char *name, const char *def, const char *help,
                                     void *arg),
                        void *arg)
{
  const char *d;
#define X(name, type, def, help)                                                                   \
  d = PARAMS_DEF_##type(def);                                                                      \
  line("COLLIE_" #name, d ? d : "(unset)", help, arg);
#include "core/params.def"
#undef X
}

int
collie_setting_known(const char *name)
{
  if (!name) return 0;
  if (!strncasecmp(name, "COLLIE_", 7)) name += 7;
#define X(pname, type, def, help)                                                                  \
  if (!strcasecmp(name, #pname)) return 1;
#include "core/params.def"
#undef X
  return 0;
}
