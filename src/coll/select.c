/*
 * select.c - which algorithm runs a call.
 *
 * Every algorithm estimates its own time with the alpha-beta-gamma model:
 * alpha per message step (latency), beta per byte moved, gamma per byte
 * reduced, with one set of constants per transport class (shm when every
 * rank of the communicator shares a host, tcp otherwise). The call runs the
 * cheapest, unless its opts or COLLIE_ALGO name an algorithm; a name that is
 * unknown, belongs to another collective, or cannot run this call is an
 * error, never a silent fallback.
 *
 * The default constants were measured on the reference machine (2 cores,
 * docs/algorithms.md says how); COLLIE_TUNING_FILE replaces them with what
 * collie-bench measures on yours. Oversubscription (more local ranks than
 * cores) raises alpha: a step then waits for the peer to get a core.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "util/error.h"

static const struct collie__algo *const select_table[] = {
#define COLLIE_XX_(name) &collie__algo_##name,
    COLLIE_ALGOS(COLLIE_XX_)
#undef COLLIE_XX_
};
#define SELECT_N (int)(sizeof(select_table) / sizeof(select_table[0]))

static const char *select_algo_names[] = {
#define COLLIE_XX_(name, str) str,
    COLLIE_ALGO_MAP(COLLIE_XX_)
#undef COLLIE_XX_
};

static const struct collie__algo *
select_find(int kind, int id)
{
  for (int i = 0; i < SELECT_N; i++)
    if (select_table[i]->kind == kind && select_table[i]->id == id) return select_table[i];
  return NULL;
}

/* ---- The model ---- */

void
collie__models_default(struct collie__models *m, int oversubscribed)
{
  /* shm: a step is a flag handoff (~1 us busy; ~3 us oversubscribed, where
   * waits yield the core to the peer before they sleep); bytes go through a
   * slot (two copies at ~10 GB/s each). tcp over loopback: ~8 us a step busy,
   * ~15 us oversubscribed, ~2.5 GB/s a stream. Reducing float32 runs at
   * ~10 GB/s of input. */
  m->cls[COLLIE_CLASS_SHM] = (struct collie__model){oversubscribed ? 3.0 : 1.0, 2.0e-4, 1.0e-4};
  m->cls[COLLIE_CLASS_TCP] = (struct collie__model){oversubscribed ? 15.0 : 8.0, 4.0e-4, 1.0e-4};
}

static const char *select_class_names[COLLIE_CLASS_COUNT_] = {"shm", "tcp"};

collie_result_t
collie__models_load(const char *path, struct collie__models *m)
{
  FILE *f = fopen(path, "r");
  if (!f) return collie__err_errno(COLLIE_SYSTEM_ERROR, "COLLIE_TUNING_FILE %s", path);
  char line[256];
  int lineno = 0;
  collie_result_t rc = COLLIE_SUCCESS;
  while (rc == COLLIE_SUCCESS && fgets(line, sizeof(line), f)) {
    char cls[16], key[32], *end;
    lineno++;
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char *p = line + strspn(line, " \t\r\n");
    if (!*p) continue;
    char *eq = strchr(p, '=');
    int n = 0;
    if (!eq || sscanf(p, "%15[a-z].%31[a-z_] %n", cls, key, &n) != 2 || p + n != eq) {
      rc = collie__err(COLLIE_INVALID_ARGUMENT,
                       "%s:%d: expected \"<shm|tcp>.<alpha_us|beta_us|gamma_us> = <number>\"", path,
                       lineno);
      break;
    }
    errno = 0;
    double v = strtod(eq + 1, &end);
    end += strspn(end, " \t\r\n");
    if (errno || end == eq + 1 || *end || !(v >= 0) || isinf(v)) {
      rc = collie__err(COLLIE_INVALID_ARGUMENT, "%s:%d: \"%s\" is not a non-negative number", path,
                       lineno, eq + 1 + strspn(eq + 1, " \t"));
      break;
    }
    int c = -1;
    for (int i = 0; i < COLLIE_CLASS_COUNT_; i++)
      if (!strcmp(cls, select_class_names[i])) c = i;
    double *field = NULL;
    if (c >= 0 && !strcmp(key, "alpha_us")) field = &m->cls[c].alpha_us;
    if (c >= 0 && !strcmp(key, "beta_us")) field = &m->cls[c].beta_us;
    if (c >= 0 && !strcmp(key, "gamma_us")) field = &m->cls[c].gamma_us;
    if (!field)
      rc = collie__err(COLLIE_INVALID_ARGUMENT, "%s:%d: unknown key \"%s.%s\"", path, lineno, cls,
                       key);
    else
      *field = v;
  }
  fclose(f);
  return rc;
}

size_t
collie__call_bytes(const struct collie__call *c)
{
  size_t n = 0;
  switch (c->kind) {
  case COLLIE_KIND_ALLGATHER:
  case COLLIE_KIND_REDUCE_SCATTER:
  case COLLIE_KIND_ALLTOALL:
  case COLLIE_KIND_GATHER:
  case COLLIE_KIND_SCATTER:
    n = c->count * (size_t)c->size;
    break;
  case COLLIE_KIND_ALLGATHERV:
    for (int q = 0; q < c->size; q++) n += c->recvcounts[q];
    break;
  case COLLIE_KIND_ALLTOALLV:
    /* Rank-local; only the transport-independent shape matters for the model. */
    for (int q = 0; q < c->size; q++) n += c->sendcounts[q];
    break;
  default:
    n = c->count;
    break;
  }
  return n * c->esize;
}

/* ---- COLLIE_ALGO ---- */

collie_result_t
collie__algo_parse(const char *spec, struct collie__algo_table *out)
{
  memset(out, 0, sizeof(*out));
  if (!spec) return COLLIE_SUCCESS;
  const char *p = spec;
  while (*p) {
    char item[128], *eq;
    size_t n = strcspn(p, ",");
    if (n == 0 || n >= sizeof(item))
      return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_ALGO=\"%s\": empty or overlong item",
                         spec);
    memcpy(item, p, n);
    item[n] = '\0';
    p += n + (p[n] == ',');
    if (!(eq = strchr(item, '=')))
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "COLLIE_ALGO=\"%s\": \"%s\" is not collective=algorithm", spec, item);
    *eq = '\0';
    int kind = -1, id = -1;
    for (int k = 1; k < COLLIE_KIND_COUNT_; k++)
      if (!strcmp(item, collie__kind_name(k))) kind = k;
    for (int a = 0; a < COLLIE_ALGO_COUNT_; a++)
      if (!strcmp(eq + 1, select_algo_names[a])) id = a;
    if (kind < 0)
      return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_ALGO=\"%s\": unknown collective \"%s\"",
                         spec, item);
    if (id < 0)
      return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_ALGO=\"%s\": unknown algorithm \"%s\"",
                         spec, eq + 1);
    if (id != COLLIE_ALGO_AUTO && !select_find(kind, id))
      return collie__err(COLLIE_INVALID_ARGUMENT, "COLLIE_ALGO=\"%s\": %s has no algorithm \"%s\"",
                         spec, item, eq + 1);
    out->forced[kind] = id;
  }
  return COLLIE_SUCCESS;
}

/* ---- Selection ---- */

static double
select_cost(const struct collie__algo *a, const struct collie__call *c,
            const struct collie__model *m)
{
  if ((a->needs & COLLIE_NEEDS_ALL_SHM) && !c->all_shm) return -1;
  if ((a->needs & COLLIE_NEEDS_REDUCE) && !c->reduce) return -1;
  return a->cost_us(c, m);
}

/* Logs every candidate's estimate once per (collective, size bucket). */
static void
select_log_table(const struct collie__call *c, const struct collie__model *m, int cls,
                 const struct collie__algo *chosen, struct collie__select_log *log)
{
  size_t bytes = collie__call_bytes(c);
  int bucket = 0;
  while (bucket < 63 && ((size_t)2 << bucket) <= bytes) bucket++;
  if (log->logged[c->kind] & (1ull << bucket)) return;
  log->logged[c->kind] |= 1ull << bucket;
  char line[768];
  size_t o = 0;
  for (int i = 0; i < SELECT_N && o < sizeof(line); i++) {
    const struct collie__algo *a = select_table[i];
    if (a->kind != c->kind) continue;
    double t = select_cost(a, c, m);
    if (t < 0)
      o += (size_t)snprintf(line + o, sizeof(line) - o, " %s n/a", a->name);
    else
      o += (size_t)snprintf(line + o, sizeof(line) - o, " %s %.1f us%s", a->name, t,
                            a == chosen ? " <-" : "");
  }
  COLLIE_INFO("COLL", "%s of %zu bytes (%zu x %s, %d ranks, %s model):%s",
              collie__kind_name(c->kind), bytes, c->count, collie_dtype_name(c->dtype), c->size,
              select_class_names[cls], line);
}

collie_result_t
collie__algo_select(const struct collie__call *call, int opts_algo,
                    const struct collie__algo_table *table, const struct collie__models *models,
                    struct collie__select_log *log, const struct collie__algo **out)
{
  int cls = call->all_shm ? COLLIE_CLASS_SHM : COLLIE_CLASS_TCP;
  const struct collie__model *m = &models->cls[cls];
  int id = opts_algo != COLLIE_ALGO_AUTO ? opts_algo : table->forced[call->kind];
  if (id < 0 || id >= COLLIE_ALGO_COUNT_)
    return collie__err(COLLIE_INVALID_ARGUMENT, "opts->algorithm = %d is not a COLLIE_ALGO_* value",
                       id);
  if (id != COLLIE_ALGO_AUTO) {
    const struct collie__algo *a = select_find(call->kind, id);
    if (!a)
      return collie__err(COLLIE_INVALID_ARGUMENT, "%s has no algorithm \"%s\"",
                         collie__kind_name(call->kind), select_algo_names[id]);
    if (select_cost(a, call, m) < 0)
      return collie__err(COLLIE_INVALID_ARGUMENT, "%s algorithm \"%s\" cannot run this call%s",
                         collie__kind_name(call->kind), a->name,
                         (a->needs & COLLIE_NEEDS_ALL_SHM) && !call->all_shm
                             ? " (it needs every rank on one host)"
                             : "");
    *out = a;
    return COLLIE_SUCCESS;
  }
  const struct collie__algo *best = NULL;
  double best_t = 0;
  for (int i = 0; i < SELECT_N; i++) {
    const struct collie__algo *a = select_table[i];
    if (a->kind != call->kind) continue;
    double t = select_cost(a, call, m);
    /* Ties go to the earlier entry, so every rank breaks them the same way. */
    if (t >= 0 && (!best || t < best_t)) {
      best = a;
      best_t = t;
    }
  }
  if (!best)
    return collie__err(COLLIE_INTERNAL_ERROR, "no algorithm can run %s",
                       collie__kind_name(call->kind));
  if (collie__log_level >= COLLIE_LOG_INFO) select_log_table(call, m, cls, best, log);
  *out = best;
  return COLLIE_SUCCESS;
}
