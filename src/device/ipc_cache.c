/*
 * ipc_cache.c - the handle and mapping caches of ipc_cache.h.
 *
 * Both are small arrays searched linearly: a training job's collectives use
 * a few allocations (torch's caching allocator hands out tensors from a few
 * large segments), so a search is a handful of compares, cheaper than any
 * hash, and the caps bound the worst case.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device/ipc_cache.h"
#include "util/error.h"

struct ipc_export {
  uint64_t id;
  uintptr_t base;
  uint64_t used; /* tick of last use */
  unsigned char handle[COLLIE_IPC_HANDLE_BYTES];
};

struct ipc_import {
  uint64_t id;
  void *mapped;
  uint64_t used;
};

struct collie__ipc_cache {
  struct collie__ipc_ops ops;
  int nranks;
  uint64_t tick;
  struct ipc_export exp[COLLIE_IPC_EXPORTS];
  int nexp;
  int sweep; /* next export checked for having gone */
  /* Released ids not yet announced (a ring: at most COLLIE_IPC_EXPORTS can
   * be pending, one per export slot freed). */
  uint64_t gone[COLLIE_IPC_EXPORTS];
  int ngone;
  /* Directed records (collie__ipc_publish_to), made at the first: which
   * peers each export went to (COLLIE_IPC_EXPORTS x nranks, rows as exp),
   * and per peer its released ids not yet announced to it (nranks x
   * COLLIE_IPC_EXPORTS, oldest first; a full list drops its oldest). */
  unsigned char *sent;
  uint64_t *gone_to;
  int *ngone_to;
  struct ipc_import *imp; /* nranks x COLLIE_IPC_IMPORTS */
  int *nimp;              /* per peer */
  struct collie__ipc_stats stats;
};

uint64_t
collie__ipc_proc_token(void)
{
  static uint64_t token;
  if (!token) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t t = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec;
    token = (uint64_t)getpid() << 32 ^ (t & 0xffffffffu) ^ (t >> 32);
    if (!token) token = 1;
  }
  return token;
}

struct collie__ipc_cache *
collie__ipc_cache_new(const struct collie__ipc_ops *ops, int nranks)
{
  struct collie__ipc_cache *c = calloc(1, sizeof(*c));
  if (c) {
    c->imp = calloc((size_t)nranks * COLLIE_IPC_IMPORTS, sizeof(*c->imp));
    c->nimp = calloc((size_t)nranks, sizeof(*c->nimp));
  }
  if (!c || !c->imp || !c->nimp) {
    if (c) free(c->imp);
    free(c);
    collie__err(COLLIE_SYSTEM_ERROR, "out of memory for the CUDA IPC cache of %d ranks", nranks);
    return NULL;
  }
  c->ops = *ops;
  c->nranks = nranks;
  return c;
}

static void
ipc_close(struct collie__ipc_cache *c, struct ipc_import *e)
{
  c->ops.close(c->ops.ctx, e->mapped);
  c->stats.closes++;
}

void
collie__ipc_cache_free(struct collie__ipc_cache *c)
{
  if (!c) return;
  for (int q = 0; q < c->nranks; q++)
    for (int i = 0; i < c->nimp[q]; i++) ipc_close(c, &c->imp[(size_t)q * COLLIE_IPC_IMPORTS + i]);
  free(c->imp);
  free(c->nimp);
  free(c->sent);
  free(c->gone_to);
  free(c->ngone_to);
  free(c);
}

/* Queues id for peer q's next directed record. */
static void
ipc_gone_to(struct collie__ipc_cache *c, int q, uint64_t id)
{
  uint64_t *g = &c->gone_to[(size_t)q * COLLIE_IPC_EXPORTS];
  int *n = &c->ngone_to[q];
  if (*n == COLLIE_IPC_EXPORTS) { /* full: the oldest is left to the peer's LRU */
    memmove(g, g + 1, (COLLIE_IPC_EXPORTS - 1) * sizeof(*g));
    --*n;
  }
  g[(*n)++] = id;
}

/* Drops export i, to be announced as gone: to every peer in the next
 * record, and to each peer a directed record of it went to. */
static void
ipc_export_drop(struct collie__ipc_cache *c, int i)
{
  if (c->ngone < COLLIE_IPC_EXPORTS) c->gone[c->ngone++] = c->exp[i].id;
  int last = --c->nexp;
  if (c->sent) {
    unsigned char *row = &c->sent[(size_t)i * (size_t)c->nranks];
    for (int q = 0; q < c->nranks; q++)
      if (row[q]) ipc_gone_to(c, q, c->exp[i].id);
    memcpy(row, &c->sent[(size_t)last * (size_t)c->nranks], (size_t)c->nranks);
    memset(&c->sent[(size_t)last * (size_t)c->nranks], 0, (size_t)c->nranks);
  }
  c->exp[i] = c->exp[last];
  if (c->sweep >= c->nexp) c->sweep = 0;
}

static collie_result_t
ipc_export(struct collie__ipc_cache *c, const void *p, struct collie__ipc_buf *b, int *shared)
{
  uint64_t id = 0;
  uintptr_t base = 0;
  size_t size = 0;
  int ok = 0;
  collie_result_t rc = c->ops.describe(c->ops.ctx, p, &id, &base, &size, &ok);
  if (rc != COLLIE_SUCCESS) return rc;
  *shared = ok && id != 0;
  if (!*shared) return COLLIE_SUCCESS;
  b->id = id;
  b->offset = (uint64_t)((uintptr_t)p - base);
  b->ptr = (uint64_t)(uintptr_t)p;
  for (int i = 0; i < c->nexp; i++)
    if (c->exp[i].id == id) {
      c->exp[i].used = c->tick;
      memcpy(b->handle, c->exp[i].handle, sizeof(b->handle));
      return COLLIE_SUCCESS;
    }
  if (c->nexp == COLLIE_IPC_EXPORTS) { /* full: the least recently used goes */
    int lru = 0;
    for (int i = 1; i < c->nexp; i++)
      if (c->exp[i].used < c->exp[lru].used) lru = i;
    ipc_export_drop(c, lru);
  }
  struct ipc_export *e = &c->exp[c->nexp];
  rc = c->ops.export_handle(c->ops.ctx, base, e->handle);
  if (rc != COLLIE_SUCCESS) return rc;
  e->id = id;
  e->base = base;
  e->used = c->tick;
  c->nexp++;
  c->stats.exports++;
  memcpy(b->handle, e->handle, sizeof(b->handle));
  return COLLIE_SUCCESS;
}

collie_result_t
collie__ipc_publish(struct collie__ipc_cache *c, const void *const *ptrs, int n,
                    struct collie__ipc_rec *rec)
{
  memset(rec, 0, sizeof(*rec));
  rec->proc = collie__ipc_proc_token();
  c->tick++;
  /* One kept allocation per call is checked for having been freed (the
   * driver then no longer knows its id at its base); the ones this call
   * uses are alive. */
  if (c->nexp) {
    int i = c->sweep % c->nexp;
    if (!c->ops.alive(c->ops.ctx, c->exp[i].base, c->exp[i].id))
      ipc_export_drop(c, i);
    else
      c->sweep = (i + 1) % c->nexp;
  }
  for (int k = 0; k < n && k < COLLIE_IPC_BUFS; k++) {
    rec->nbuf = (uint32_t)(k + 1);
    if (!ptrs[k]) continue;
    int shared = 0;
    collie_result_t rc = ipc_export(c, ptrs[k], &rec->buf[k], &shared);
    if (rc != COLLIE_SUCCESS) return rc;
    if (!shared) {
      rec->unshared++;
      rec->buf[k].ptr = (uint64_t)(uintptr_t)ptrs[k];
    }
  }
  int m = c->ngone < COLLIE_IPC_ANNOUNCE ? c->ngone : COLLIE_IPC_ANNOUNCE;
  memcpy(rec->released, c->gone, (size_t)m * sizeof(uint64_t));
  rec->nreleased = (uint32_t)m;
  memmove(c->gone, c->gone + m, (size_t)(c->ngone - m) * sizeof(uint64_t));
  c->ngone -= m;
  return COLLIE_SUCCESS;
}

collie_result_t
collie__ipc_publish_to(struct collie__ipc_cache *c, int peer, const void *const *ptrs, int n,
                       struct collie__ipc_rec *rec)
{
  if (!c->sent) {
    c->sent = calloc((size_t)COLLIE_IPC_EXPORTS * (size_t)c->nranks, 1);
    c->gone_to = calloc((size_t)c->nranks * COLLIE_IPC_EXPORTS, sizeof(*c->gone_to));
    c->ngone_to = calloc((size_t)c->nranks, sizeof(*c->ngone_to));
    if (!c->sent || !c->gone_to || !c->ngone_to) {
      free(c->sent);
      free(c->gone_to);
      free(c->ngone_to);
      c->sent = NULL;
      c->gone_to = NULL;
      c->ngone_to = NULL;
      return collie__err(COLLIE_SYSTEM_ERROR,
                         "out of memory for the CUDA IPC cache's records of %d ranks", c->nranks);
    }
  }
  collie_result_t rc = collie__ipc_publish(c, ptrs, n, rec);
  if (rc != COLLIE_SUCCESS) return rc;
  /* The broadcast list is not this record's to carry: every peer that
   * matters hears through its own list. */
  rec->nreleased = 0;
  c->ngone = 0;
  if (rec->unshared) return COLLIE_SUCCESS; /* not sent: the peer's list waits */
  for (int k = 0; k < n && k < COLLIE_IPC_BUFS; k++)
    for (int i = 0; ptrs[k] && i < c->nexp; i++)
      if (c->exp[i].id == rec->buf[k].id) c->sent[(size_t)i * (size_t)c->nranks + (size_t)peer] = 1;
  uint64_t *g = &c->gone_to[(size_t)peer * COLLIE_IPC_EXPORTS];
  int m = c->ngone_to[peer] < COLLIE_IPC_ANNOUNCE ? c->ngone_to[peer] : COLLIE_IPC_ANNOUNCE;
  memcpy(rec->released, g, (size_t)m * sizeof(*g));
  rec->nreleased = (uint32_t)m;
  memmove(g, g + m, (size_t)(c->ngone_to[peer] - m) * sizeof(*g));
  c->ngone_to[peer] -= m;
  return COLLIE_SUCCESS;
}

collie_result_t
collie__ipc_map(struct collie__ipc_cache *c, int peer, const struct collie__ipc_rec *rec,
                void **out)
{
  struct ipc_import *imp = &c->imp[(size_t)peer * COLLIE_IPC_IMPORTS];
  int *n = &c->nimp[peer];
  int same = rec->proc == collie__ipc_proc_token();
  for (uint32_t k = 0; k < rec->nreleased && k < COLLIE_IPC_ANNOUNCE; k++)
    for (int i = 0; i < *n; i++)
      if (imp[i].id == rec->released[k]) {
        ipc_close(c, &imp[i]);
        imp[i] = imp[--*n];
        break;
      }
  for (uint32_t k = 0; k < rec->nbuf && k < COLLIE_IPC_BUFS; k++) {
    const struct collie__ipc_buf *b = &rec->buf[k];
    out[k] = NULL;
    if (!b->ptr) continue;
    if (same || !b->id) { /* this process's own memory: the pointer as it is */
      out[k] = (void *)(uintptr_t)b->ptr;
      continue;
    }
    struct ipc_import *e = NULL;
    for (int i = 0; i < *n && !e; i++)
      if (imp[i].id == b->id) e = &imp[i];
    if (e) {
      c->stats.hits++;
    } else {
      if (*n == COLLIE_IPC_IMPORTS) { /* full: the least recently used goes */
        int lru = 0;
        for (int i = 1; i < *n; i++)
          if (imp[i].used < imp[lru].used) lru = i;
        ipc_close(c, &imp[lru]);
        imp[lru] = imp[--*n];
      }
      void *mapped = NULL;
      collie_result_t rc = c->ops.open(c->ops.ctx, b->handle, &mapped);
      if (rc != COLLIE_SUCCESS) return rc;
      e = &imp[(*n)++];
      e->id = b->id;
      e->mapped = mapped;
      c->stats.opens++;
    }
    e->used = c->tick;
    out[k] = (char *)e->mapped + b->offset;
  }
  return COLLIE_SUCCESS;
}

void
collie__ipc_stats(const struct collie__ipc_cache *c, struct collie__ipc_stats *s)
{
  *s = c->stats;
  s->kept_exports = c->nexp;
  s->kept_imports = 0;
  for (int q = 0; q < c->nranks; q++) s->kept_imports += c->nimp[q];
}
