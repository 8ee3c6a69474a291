/*
 * ipc_cache.h - the CUDA IPC handles of a communicator's device buffers:
 * what a rank publishes about its buffers of a call, and, per peer, the
 * mappings of theirs that it has opened (issue 21, docs/gpu.md).
 *
 * Opening a handle costs ~150 us, a call's budget many times over, so both
 * sides cache per allocation (the driver's buffer id, unique for the
 * process's life): the exporter keeps each allocation's handle, the
 * importer each peer allocation's mapping. A mapping is closed when its
 * allocation goes (the exporter finds it freed and announces its id in its
 * next record; every peer reads every record of a call), when a cache is
 * full (the least recently used goes), and when the communicator goes.
 *
 * The driver is reached through collie__ipc_ops only, so this file runs on
 * a CPU under test with fake allocations (tests/unit/ipc_cache_test.c).
 */
#ifndef COLLIE_DEVICE_IPC_CACHE_H
#define COLLIE_DEVICE_IPC_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "collie.h"

#define COLLIE_IPC_HANDLE_BYTES 64
#define COLLIE_IPC_BUFS 2     /* buffers per call: send and receive */
#define COLLIE_IPC_ANNOUNCE 6 /* released ids one record carries */
#define COLLIE_IPC_EXPORTS 32 /* allocations whose handles a rank keeps */
#define COLLIE_IPC_IMPORTS 32 /* mappings kept per peer */

/* What the driver does for the cache; each returns 0 or a collie error
 * (message set). ctx is passed back. */
struct collie__ipc_ops {
  void *ctx;
  /* p's allocation: its id, base and size, and whether a handle can be
   * made for it (*shareable; cudaMalloc'd memory can, cuMemCreate'd cannot). */
  collie_result_t (*describe)(void *ctx, const void *p, uint64_t *id, uintptr_t *base, size_t *size,
                              int *shareable);
  collie_result_t (*export_handle)(void *ctx, uintptr_t base,
                                   unsigned char handle[COLLIE_IPC_HANDLE_BYTES]);
  /* 1 while allocation id is still the one at base. */
  int (*alive)(void *ctx, uintptr_t base, uint64_t id);
  collie_result_t (*open)(void *ctx, const unsigned char handle[COLLIE_IPC_HANDLE_BYTES],
                          void **mapped);
  void (*close)(void *ctx, void *mapped);
};

/* One buffer of a call as its rank publishes it. */
struct collie__ipc_buf {
  uint64_t id;     /* its allocation's id; 0: no buffer, or not shareable */
  uint64_t offset; /* from the allocation's base */
  uint64_t ptr;    /* the pointer itself, for a peer in the same process */
  unsigned char handle[COLLIE_IPC_HANDLE_BYTES];
};

/* A rank's record for one call (published in the flat area). */
struct collie__ipc_rec {
  uint64_t proc;     /* the publishing process (collie__ipc_proc_token) */
  uint32_t nbuf;     /* buffers in buf */
  uint32_t unshared; /* buffers that could not be shared (not IPC memory) */
  uint32_t nreleased;
  uint32_t pad_;
  unsigned char device[16]; /* the GPU's UUID (set by the caller: not the cache's) */
  struct collie__ipc_buf buf[COLLIE_IPC_BUFS];
  uint64_t released[COLLIE_IPC_ANNOUNCE]; /* ids gone since the last record */
};

struct collie__ipc_cache;

/* This process's token: its pid and a random word (pids repeat across
 * containers). */
uint64_t collie__ipc_proc_token(void);

/* A cache for a communicator of nranks, NULL (error set) when out of memory. */
struct collie__ipc_cache *collie__ipc_cache_new(const struct collie__ipc_ops *ops, int nranks);
/* Closes every mapping and frees the cache (NULL: nothing). */
void collie__ipc_cache_free(struct collie__ipc_cache *c);

/* Fills rec for the call's buffers (n <= COLLIE_IPC_BUFS; NULL entries
 * publish nothing): exports what is new, takes up to COLLIE_IPC_ANNOUNCE
 * released ids, and checks one kept allocation for having gone. A buffer
 * that cannot be shared counts in rec->unshared (not an error: the call
 * then takes the host path on every rank). Errors: the driver's. */
collie_result_t collie__ipc_publish(struct collie__ipc_cache *c, const void *const *ptrs, int n,
                                    struct collie__ipc_rec *rec);

/* As collie__ipc_publish, for a record that goes to peer alone (a send):
 * rec->released carries the ids released since they were last sent to
 * peer, not the ones other peers were sent. A record with a buffer that
 * cannot be shared (not sent, then) carries none, and peer's wait for the
 * next. Errors: the driver's, out of memory. */
collie_result_t collie__ipc_publish_to(struct collie__ipc_cache *c, int peer,
                                       const void *const *ptrs, int n, struct collie__ipc_rec *rec);

/* Closes what peer's rec announces released, then maps its buffers:
 * out[i] is where buf[i] is in this process (NULL for an empty one).
 * Errors: the driver's (opening a handle). */
collie_result_t collie__ipc_map(struct collie__ipc_cache *c, int peer,
                                const struct collie__ipc_rec *rec, void **out);

/* Counters for tests and logs. */
struct collie__ipc_stats {
  uint64_t exports, opens, closes, hits;
  int kept_exports, kept_imports;
};
void collie__ipc_stats(const struct collie__ipc_cache *c, struct collie__ipc_stats *s);

#endif /* COLLIE_DEVICE_IPC_CACHE_H */
