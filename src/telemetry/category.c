/*
 * category.c - payload categories: the built-in seed schema and the ones a
 * program registers by name (collie_category_register). The registry is
 * process-wide and only grows, so a name read once stays valid for the life
 * of the process and readers need no lock: the count is published with
 * release after the name is stored.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "telemetry/telemetry.h"
#include "util/error.h"

#define CATEGORY_MAX_REGISTERED 32
#define CATEGORY_NAME_MAX 32

static const char *const category_builtin[COLLIE_CAT_BUILTIN_COUNT_] = {
    [COLLIE_CAT_OTHER] = "other",
    [COLLIE_CAT_FEATURES_ALLGATHER] = "features_allgather",
    [COLLIE_CAT_MOMENTS_MU] = "moments_mu",
    [COLLIE_CAT_MOMENTS_SIGMA_FULL] = "moments_sigma_full",
    [COLLIE_CAT_MOMENTS_SIGMA_DIAG] = "moments_sigma_diag",
    [COLLIE_CAT_MIXTURE_MU_K] = "mixture_muK",
    [COLLIE_CAT_MIXTURE_SIGMA_K] = "mixture_sigmaK",
    [COLLIE_CAT_THIRD_MOMENT_SKETCH] = "third_moment_sketch",
    [COLLIE_CAT_TOPR_INDICES] = "topr_indices",
};

static pthread_mutex_t category_lock = PTHREAD_MUTEX_INITIALIZER;
static char category_names[CATEGORY_MAX_REGISTERED][CATEGORY_NAME_MAX + 1];
static _Atomic int category_registered;

int
collie__category_count(void)
{
  return COLLIE_CAT_BUILTIN_COUNT_ +
         atomic_load_explicit(&category_registered, memory_order_acquire);
}

const char *
collie__category_name(int id)
{
  if (id < 0) return NULL;
  if (id < COLLIE_CAT_BUILTIN_COUNT_) return category_builtin[id];
  if (id - COLLIE_CAT_BUILTIN_COUNT_ >=
      atomic_load_explicit(&category_registered, memory_order_acquire))
    return NULL;
  return category_names[id - COLLIE_CAT_BUILTIN_COUNT_];
}

collie_result_t
collie_category_register(const char *name, int *category)
{
  static const char fn[] = "collie_category_register";
  if (!name) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: name is NULL", fn);
  if (!category) return collie__err(COLLIE_INVALID_ARGUMENT, "%s: category is NULL", fn);
  size_t len = strlen(name);
  if (len == 0 || len > CATEGORY_NAME_MAX)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: name \"%.40s\" must have 1 to %d characters",
                       fn, name, CATEGORY_NAME_MAX);
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "%s: name \"%s\" has '%c' at %zu: only letters, digits and _ make a "
                         "comms.csv column name",
                         fn, name, c, i);
  }
  for (int i = 0; i < COLLIE_CAT_BUILTIN_COUNT_; i++)
    if (!strcmp(name, category_builtin[i]))
      return collie__err(COLLIE_INVALID_ARGUMENT, "%s: \"%s\" is a built-in category (id %d)", fn,
                         name, i);
  collie_result_t rc = COLLIE_SUCCESS;
  pthread_mutex_lock(&category_lock);
  int n = atomic_load_explicit(&category_registered, memory_order_relaxed), i;
  for (i = 0; i < n && strcmp(category_names[i], name); i++) {
  }
  if (i == n) {
    if (n == CATEGORY_MAX_REGISTERED) {
      rc = collie__err(COLLIE_UNSUPPORTED,
                       "%s: \"%s\" would be category %d: at most %d can be "
                       "registered",
                       fn, name, COLLIE_CAT_BUILTIN_COUNT_ + n, CATEGORY_MAX_REGISTERED);
    } else {
      memcpy(category_names[n], name, len + 1);
      atomic_store_explicit(&category_registered, n + 1, memory_order_release);
    }
  }
  pthread_mutex_unlock(&category_lock);
  if (rc == COLLIE_SUCCESS) *category = COLLIE_CAT_BUILTIN_COUNT_ + i;
  return rc;
}
