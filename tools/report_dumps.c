/*
 * report_dumps.c - loads a directory of flight-recorder dumps
 * (flight-rank*.json, the format docs/flight-recorder.md defines) into plain
 * structs, checking every field it uses so that the subcommands can trust
 * what they get: a file that is not such a dump is an error naming the file
 * and the field, never a guess and never a crash.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

static const char *const rd_states[] = {"queued", "started", "completed", "failed"};

const char *
rd_state_name(int state)
{
  return state >= 0 && state <= RD_FAILED ? rd_states[state] : "unknown";
}

int
rd_is_p2p(const char *kind)
{
  return strncmp(kind, "send", 4) == 0 || strncmp(kind, "recv", 4) == 0;
}

/* Field getters: each fails with a message naming the field. */
static int
rd_int(const struct rj_val *obj, const char *key, int64_t *out, const char *where, char *err,
       size_t errlen)
{
  const struct rj_val *v = rj_get(obj, key);
  if (!v || v->type != RJ_NUM || !v->is_int) {
    snprintf(err, errlen, "%s\"%s\": %s", where, key, v ? "expected an integer" : "missing");
    return -1;
  }
  *out = v->i;
  return 0;
}

/* Optional integer: null or absent gives 0. */
static int
rd_int_opt(const struct rj_val *obj, const char *key, int64_t *out, const char *where, char *err,
           size_t errlen)
{
  const struct rj_val *v = rj_get(obj, key);
  *out = 0;
  if (!v || v->type == RJ_NULL) return 0;
  return rd_int(obj, key, out, where, err, errlen);
}

/* A string field; when nullable, null or absent gives "". */
static int
rd_str(const struct rj_val *obj, const char *key, char *out, size_t outlen, int nullable,
       const char *where, char *err, size_t errlen)
{
  const struct rj_val *v = rj_get(obj, key);
  out[0] = '\0';
  if (nullable && (!v || v->type == RJ_NULL)) return 0;
  if (!v || v->type != RJ_STR) {
    snprintf(err, errlen, "%s\"%s\": %s", where, key, v ? "expected a string" : "missing");
    return -1;
  }
  snprintf(out, outlen, "%s", v->str);
  return 0;
}

static int
rd_op_parse(const struct rj_val *o, struct rd_op *op, size_t k, char *err, size_t errlen)
{
  char where[48];
  snprintf(where, sizeof(where), "ops[%zu].", k);
  if (o->type != RJ_OBJ) {
    snprintf(err, errlen, "ops[%zu]: expected an object", k);
    return -1;
  }
  int64_t v;
  char state[32];
  if (rd_int(o, "id", &op->id, where, err, errlen) ||
      rd_int(o, "seq", &op->seq, where, err, errlen) ||
      rd_str(o, "kind", op->kind, sizeof(op->kind), 0, where, err, errlen) ||
      rd_str(o, "dtype", op->dtype, sizeof(op->dtype), 1, where, err, errlen) ||
      rd_str(o, "op", op->op, sizeof(op->op), 1, where, err, errlen) ||
      rd_str(o, "algo", op->algo, sizeof(op->algo), 1, where, err, errlen) ||
      rd_str(o, "state", state, sizeof(state), 0, where, err, errlen))
    return -1;
  op->state = -1;
  for (int s = 0; s <= RD_FAILED; s++)
    if (strcmp(state, rd_states[s]) == 0) op->state = s;
  if (op->state < 0) {
    snprintf(err, errlen, "%s\"state\": \"%s\" is not queued, started, completed or failed", where,
             state);
    return -1;
  }
  if (rd_int_opt(o, "count", &v, where, err, errlen)) return -1;
  op->count = (uint64_t)v;
  if (rd_int_opt(o, "bytes", &v, where, err, errlen)) return -1;
  op->bytes = (uint64_t)v;
  if (rd_int_opt(o, "root", &v, where, err, errlen)) return -1;
  op->root = (int)v;
  if (!rj_get(o, "root")) op->root = -1;
  if (rd_int_opt(o, "t_queued", &op->t_queued, where, err, errlen) ||
      rd_int_opt(o, "t_started", &op->t_started, where, err, errlen) ||
      rd_int_opt(o, "t_done", &op->t_done, where, err, errlen))
    return -1;
  return 0;
}

/* The optional "world_ranks": one non-negative integer per rank. */
static int
rd_world(const struct rj_val *root, struct rd_dump *d, char *err, size_t errlen)
{
  const struct rj_val *w = rj_get(root, "world_ranks");
  if (!w || w->type == RJ_NULL) return 0;
  if (w->type != RJ_ARR || w->n != (size_t)d->size) {
    snprintf(err, errlen, "\"world_ranks\": expected an array of %d integers (one per rank)",
             d->size);
    return -1;
  }
  if (!(d->world = calloc(w->n, sizeof(*d->world)))) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  for (size_t k = 0; k < w->n; k++) {
    const struct rj_val *v = &w->items[k];
    if (v->type != RJ_NUM || !v->is_int || v->i < 0 || v->i > INT32_MAX) {
      snprintf(err, errlen, "\"world_ranks\"[%zu]: expected a non-negative integer", k);
      return -1;
    }
    d->world[k] = (int)v->i;
  }
  return 0;
}

/* The optional "hosts" (names) and "host_of" (each rank's index in them):
 * both or neither. */
static int
rd_hosts(const struct rj_val *root, struct rd_dump *d, char *err, size_t errlen)
{
  const struct rj_val *h = rj_get(root, "hosts"), *of = rj_get(root, "host_of");
  int has_h = h && h->type != RJ_NULL, has_of = of && of->type != RJ_NULL;
  if (!has_h && !has_of) return 0;
  if (!has_h || !has_of) {
    snprintf(err, errlen, "\"%s\": present without \"%s\"", has_h ? "hosts" : "host_of",
             has_h ? "host_of" : "hosts");
    return -1;
  }
  if (h->type != RJ_ARR || h->n < 1 || h->n > (size_t)d->size) {
    snprintf(err, errlen, "\"hosts\": expected an array of 1 to %d strings", d->size);
    return -1;
  }
  if (of->type != RJ_ARR || of->n != (size_t)d->size) {
    snprintf(err, errlen, "\"host_of\": expected an array of %d integers (one per rank)", d->size);
    return -1;
  }
  d->hosts = calloc(h->n, sizeof(*d->hosts));
  d->host_of = calloc(of->n, sizeof(*d->host_of));
  if (!d->hosts || !d->host_of) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  d->nhosts = (int)h->n;
  for (size_t k = 0; k < h->n; k++) {
    if (h->items[k].type != RJ_STR) {
      snprintf(err, errlen, "\"hosts\"[%zu]: expected a string", k);
      return -1;
    }
    snprintf(d->hosts[k], sizeof(d->hosts[k]), "%s", h->items[k].str);
  }
  for (size_t k = 0; k < of->n; k++) {
    const struct rj_val *v = &of->items[k];
    if (v->type != RJ_NUM || !v->is_int || v->i < 0 || v->i >= d->nhosts) {
      snprintf(err, errlen, "\"host_of\"[%zu]: expected an index of \"hosts\" (0 to %d)", k,
               d->nhosts - 1);
      return -1;
    }
    d->host_of[k] = (int)v->i;
  }
  return 0;
}

/* Fills d from the file at d->path; -1 with err (without the file name). */
static int
rd_load_file(struct rd_dump *d, char *err, size_t errlen)
{
  size_t len = 0;
  char *text = rt_slurp(d->path, &len);
  if (!text) {
    snprintf(err, errlen, "cannot read: %s", strerror(errno));
    return -1;
  }
  struct rj_val *root = rj_parse(text, len, err, errlen);
  free(text);
  if (!root) return -1;
  int rc = -1;
  int64_t version, rank, size, pid = 0;
  if (root->type != RJ_OBJ) {
    snprintf(err, errlen, "not a JSON object");
    goto out;
  }
  if (rd_int(root, "version", &version, "", err, errlen)) goto out;
  if (version != 1) {
    snprintf(err, errlen, "\"version\": %lld is not supported (this tool reads version 1)",
             (long long)version);
    goto out;
  }
  if (rd_int(root, "rank", &rank, "", err, errlen) ||
      rd_int(root, "size", &size, "", err, errlen) ||
      rd_str(root, "comm", d->comm, sizeof(d->comm), 0, "", err, errlen) ||
      rd_str(root, "reason", d->reason, sizeof(d->reason), 1, "", err, errlen) ||
      rd_str(root, "time", d->time, sizeof(d->time), 1, "", err, errlen) ||
      rd_str(root, "error", d->error, sizeof(d->error), 1, "", err, errlen) ||
      rd_int_opt(root, "pid", &pid, "", err, errlen))
    goto out;
  if (size < 1 || size > 1 << 20 || rank < 0 || rank >= size) {
    snprintf(err, errlen, "\"rank\" %lld and \"size\" %lld do not fit", (long long)rank,
             (long long)size);
    goto out;
  }
  d->rank = (int)rank;
  d->size = (int)size;
  d->pid = (long)pid;
  if (rd_world(root, d, err, errlen) || rd_hosts(root, d, err, errlen)) goto out;
  const struct rj_val *ops = rj_get(root, "ops");
  if (!ops || ops->type != RJ_ARR) {
    snprintf(err, errlen, "\"ops\": %s", ops ? "expected an array" : "missing");
    goto out;
  }
  d->ops = calloc(ops->n ? ops->n : 1, sizeof(*d->ops));
  if (!d->ops) {
    snprintf(err, errlen, "out of memory");
    goto out;
  }
  for (size_t k = 0; k < ops->n; k++) {
    if (rd_op_parse(&ops->items[k], &d->ops[k], k, err, errlen)) goto out;
    d->nops++;
  }
  rc = 0;
out:
  rj_free(root);
  return rc;
}

static int
rd_cmp(const void *a, const void *b)
{
  const struct rd_dump *x = a, *y = b;
  int c = strcmp(x->comm, y->comm);
  return c ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

int
rd_load_dir(const char *dir, struct rd_dump **out, int *n, char *err, size_t errlen)
{
  *out = NULL;
  *n = 0;
  DIR *dp = opendir(dir);
  if (!dp) {
    snprintf(err, errlen, "cannot open directory %s: %s", dir, strerror(errno));
    return -1;
  }
  struct rd_dump *dumps = NULL;
  int count = 0, cap = 0;
  struct dirent *e;
  char msg[512];
  while ((e = readdir(dp)) != NULL) {
    size_t len = strlen(e->d_name);
    if (strncmp(e->d_name, "flight-rank", 11) != 0 || len < 5 ||
        strcmp(e->d_name + len - 5, ".json") != 0)
      continue;
    if (count == cap) {
      cap = cap ? cap * 2 : 8;
      struct rd_dump *bigger = realloc(dumps, (size_t)cap * sizeof(*dumps));
      if (!bigger) {
        snprintf(err, errlen, "out of memory");
        goto out_fail;
      }
      dumps = bigger;
    }
    struct rd_dump *d = &dumps[count++];
    memset(d, 0, sizeof(*d));
    snprintf(d->path, sizeof(d->path), "%s/%s", dir, e->d_name);
    if (rd_load_file(d, msg, sizeof(msg)) != 0) {
      snprintf(err, errlen, "%s: %s", d->path, msg);
      goto out_fail;
    }
  }
  closedir(dp);
  if (count == 0) {
    snprintf(err, errlen, "no flight-rank*.json dump in %s", dir);
    free(dumps);
    return -1;
  }
  qsort(dumps, (size_t)count, sizeof(*dumps), rd_cmp);
  for (int i = 1; i < count; i++) {
    if (strcmp(dumps[i].comm, dumps[i - 1].comm) != 0) continue;
    if (dumps[i].rank == dumps[i - 1].rank) {
      snprintf(err, errlen, "%s and %s are both rank %d of communicator %s", dumps[i - 1].path,
               dumps[i].path, dumps[i].rank, dumps[i].comm);
      rd_free(dumps, count);
      return -1;
    }
    if (dumps[i].size != dumps[i - 1].size) {
      snprintf(err, errlen, "%s and %s disagree on the size of communicator %s (%d, %d)",
               dumps[i - 1].path, dumps[i].path, dumps[i].comm, dumps[i - 1].size, dumps[i].size);
      rd_free(dumps, count);
      return -1;
    }
  }
  *out = dumps;
  *n = count;
  return 0;
out_fail:
  closedir(dp);
  rd_free(dumps, count);
  return -1;
}

void
rd_free(struct rd_dump *dumps, int n)
{
  for (int i = 0; dumps && i < n; i++) {
    free(dumps[i].ops);
    free(dumps[i].world);
    free(dumps[i].hosts);
    free(dumps[i].host_of);
  }
  free(dumps);
}
