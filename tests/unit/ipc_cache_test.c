/*
 * ipc_cache_test.c - the CUDA IPC cache (device/ipc_cache.h) on a CPU, with
 * fake allocations behind its driver hooks: a handle is exported once per
 * allocation and a peer's is opened once, a freed allocation is announced
 * and its mappings closed, the caps evict the least recently used, memory
 * that cannot be shared is reported, a process's own memory is never
 * opened, and freeing the cache closes everything. Also the kernels' launch
 * shape (collie__cuda_grid). A wrong cache leaks device memory, maps a
 * freed buffer, or opens a handle per call (~150 us).
 */
#include <stdio.h>
#include <string.h>

#include "device/cuda.h"
#include "device/ipc_cache.h"
#include "runner.h"
#include "util/error.h"

#define FAKE_ALLOCS 80

struct fake {
  struct {
    uint64_t id;
    uintptr_t base;
    size_t size;
    int alive, shareable;
  } a[FAKE_ALLOCS];
  int n;
  int opens, closes, fail_open;
  uintptr_t next_map;
  void *closed_last;
};

static collie_result_t
fake_describe(void *ctx, const void *p, uint64_t *id, uintptr_t *base, size_t *size, int *ok)
{
  struct fake *f = ctx;
  for (int i = 0; i < f->n; i++)
    if (f->a[i].alive && (uintptr_t)p >= f->a[i].base &&
        (uintptr_t)p < f->a[i].base + f->a[i].size) {
      *id = f->a[i].id;
      *base = f->a[i].base;
      *size = f->a[i].size;
      *ok = f->a[i].shareable;
      return COLLIE_SUCCESS;
    }
  return collie__err(COLLIE_SYSTEM_ERROR, "fake: no allocation at %p", p);
}

static collie_result_t
fake_export(void *ctx, uintptr_t base, unsigned char h[COLLIE_IPC_HANDLE_BYTES])
{
  struct fake *f = ctx;
  memset(h, 0, COLLIE_IPC_HANDLE_BYTES);
  for (int i = 0; i < f->n; i++)
    if (f->a[i].base == base) memcpy(h, &f->a[i].id, sizeof(uint64_t));
  return COLLIE_SUCCESS;
}

static int
fake_alive(void *ctx, uintptr_t base, uint64_t id)
{
  struct fake *f = ctx;
  for (int i = 0; i < f->n; i++)
    if (f->a[i].base == base && f->a[i].id == id) return f->a[i].alive;
  return 0;
}

static collie_result_t
fake_open(void *ctx, const unsigned char h[COLLIE_IPC_HANDLE_BYTES], void **mapped)
{
  struct fake *f = ctx;
  if (f->fail_open) return collie__err(COLLIE_SYSTEM_ERROR, "fake: cuIpcOpenMemHandle refused");
  uint64_t id;
  memcpy(&id, h, sizeof(id));
  f->opens++;
  *mapped = (void *)(f->next_map += 0x100000); /* a new address per mapping */
  return COLLIE_SUCCESS;
}

static void
fake_close(void *ctx, void *mapped)
{
  struct fake *f = ctx;
  f->closes++;
  f->closed_last = mapped;
}

/* A fake allocation of 1 MiB at a distinct base; returns its base. */
static uintptr_t
fake_alloc(struct fake *f, int shareable)
{
  int i = f->n++;
  f->a[i].id = 1000 + (uint64_t)i; /* ids never repeat, as the driver's */
  f->a[i].base = 0x7f0000000000ull + (uintptr_t)i * 0x200000;
  f->a[i].size = 1 << 20;
  f->a[i].alive = 1;
  f->a[i].shareable = shareable;
  return f->a[i].base;
}

static struct collie__ipc_ops
fake_ops(struct fake *f)
{
  struct collie__ipc_ops ops = {f, fake_describe, fake_export, fake_alive, fake_open, fake_close};
  return ops;
}

/* A record as a peer in another process publishes it. */
static void
as_peer(struct collie__ipc_rec *rec)
{
  rec->proc ^= 0x5a5a5a5a5a5a5a5aull;
}

TEST_IMPL(ipc_cache_handles)
{
  struct fake exporter = {0}, importer = {0};
  struct collie__ipc_ops eops = fake_ops(&exporter), iops = fake_ops(&importer);
  struct collie__ipc_cache *ex = collie__ipc_cache_new(&eops, 2);
  struct collie__ipc_cache *im = collie__ipc_cache_new(&iops, 2);
  ASSERT(ex && im);
  uintptr_t a = fake_alloc(&exporter, 1), b = fake_alloc(&exporter, 1);
  struct collie__ipc_rec rec;
  struct collie__ipc_stats st;
  void *out[COLLIE_IPC_BUFS];

  /* The first call exports both allocations; the importer opens both. */
  const void *bufs[2] = {(void *)(a + 256), (void *)(b + 4096)};
  ASSERT(collie__ipc_publish(ex, bufs, 2, &rec) == COLLIE_SUCCESS);
  ASSERT(rec.nbuf == 2 && rec.unshared == 0 && rec.nreleased == 0);
  ASSERT(rec.buf[0].id == 1000 && rec.buf[0].offset == 256);
  ASSERT(rec.buf[1].id == 1001 && rec.buf[1].offset == 4096);
  as_peer(&rec);
  ASSERT(collie__ipc_map(im, 1, &rec, out) == COLLIE_SUCCESS);
  ASSERT(importer.opens == 2);
  ASSERT(out[0] != NULL && out[1] != NULL && out[0] != out[1]);
  char *mapped_a = (char *)out[0] - 256;

  /* Later calls on the same allocations (other offsets) open nothing new. */
  for (int i = 0; i < 10; i++) {
    const void *again[2] = {(void *)(a + 64 * (uintptr_t)i), (void *)(b + 8)};
    ASSERT(collie__ipc_publish(ex, again, 2, &rec) == COLLIE_SUCCESS);
    as_peer(&rec);
    ASSERT(collie__ipc_map(im, 1, &rec, out) == COLLIE_SUCCESS);
    ASSERT((char *)out[0] == mapped_a + 64 * i);
  }
  collie__ipc_stats(ex, &st);
  ASSERTF(st.exports == 2, "exports %llu, expected 2 (one per allocation)",
          (unsigned long long)st.exports);
  collie__ipc_stats(im, &st);
  ASSERT(st.opens == 2 && st.hits == 20 && st.kept_imports == 2);
  ASSERT(importer.opens == 2 && importer.closes == 0);

  /* a is freed: the exporter finds it (one kept allocation checked per
   * call) and announces it; the importer closes its mapping of a only. */
  exporter.a[0].alive = 0;
  int announced = 0;
  for (int i = 0; i < 4 && !announced; i++) {
    const void *only_b[2] = {(void *)b, NULL};
    ASSERT(collie__ipc_publish(ex, only_b, 2, &rec) == COLLIE_SUCCESS);
    announced = rec.nreleased == 1 && rec.released[0] == 1000;
    as_peer(&rec);
    ASSERT(collie__ipc_map(im, 1, &rec, out) == COLLIE_SUCCESS);
    ASSERT(out[1] == NULL);
  }
  ASSERTF(announced, "the freed allocation was never announced");
  ASSERT(importer.closes == 1 && importer.closed_last == mapped_a);
  collie__ipc_stats(ex, &st);
  ASSERT(st.kept_exports == 1);

  /* A new allocation (a new id, even at a reused address) is opened anew. */
  uintptr_t c = fake_alloc(&exporter, 1);
  const void *cb[2] = {(void *)c, NULL};
  ASSERT(collie__ipc_publish(ex, cb, 2, &rec) == COLLIE_SUCCESS);
  as_peer(&rec);
  ASSERT(collie__ipc_map(im, 1, &rec, out) == COLLIE_SUCCESS);
  ASSERT(importer.opens == 3);

  /* Freeing the cache closes every mapping it holds (b and c). */
  collie__ipc_cache_free(im);
  ASSERTF(importer.closes == 3, "closes %d after free, expected 3", importer.closes);
  collie__ipc_cache_free(ex);
  ASSERT(exporter.closes == 0); /* the exporter mapped nothing */
}

TEST_IMPL(ipc_cache_limits)
{
  struct fake exporter = {0}, importer = {0};
  struct collie__ipc_ops eops = fake_ops(&exporter), iops = fake_ops(&importer);
  struct collie__ipc_cache *ex = collie__ipc_cache_new(&eops, 4);
  struct collie__ipc_cache *im = collie__ipc_cache_new(&iops, 4);
  ASSERT(ex && im);
  struct collie__ipc_rec rec;
  struct collie__ipc_stats st;
  void *out[COLLIE_IPC_BUFS];

  /* Memory that cannot be shared is counted, not exported, not an error. */
  uintptr_t u = fake_alloc(&exporter, 0);
  const void *ub[2] = {(void *)u, NULL};
  ASSERT(collie__ipc_publish(ex, ub, 2, &rec) == COLLIE_SUCCESS);
  ASSERT(rec.unshared == 1 && rec.buf[0].id == 0);
  collie__ipc_stats(ex, &st);
  ASSERT(st.exports == 0);

  /* More allocations than the caps: the least recently used go, and an
   * export dropped is announced so that peers close it too. */
  int total = COLLIE_IPC_EXPORTS + 5;
  int announced = 0;
  for (int i = 0; i < total; i++) {
    uintptr_t a = fake_alloc(&exporter, 1);
    const void *ab[2] = {(void *)a, NULL};
    ASSERT(collie__ipc_publish(ex, ab, 2, &rec) == COLLIE_SUCCESS);
    announced += (int)rec.nreleased;
    as_peer(&rec);
    ASSERT(collie__ipc_map(im, 3, &rec, out) == COLLIE_SUCCESS);
  }
  collie__ipc_stats(ex, &st);
  ASSERT(st.kept_exports == COLLIE_IPC_EXPORTS);
  ASSERTF(announced == 5, "announced %d, expected 5 (each export dropped)", announced);
  collie__ipc_stats(im, &st);
  ASSERTF(st.kept_imports <= COLLIE_IPC_IMPORTS, "kept %d mappings of one peer", st.kept_imports);
  ASSERT(importer.opens == total && importer.closes == total - st.kept_imports);

  /* A process's own record is used as it is: nothing opened. */
  uintptr_t own = fake_alloc(&exporter, 1);
  const void *ob[2] = {(void *)(own + 8), NULL};
  ASSERT(collie__ipc_publish(ex, ob, 2, &rec) == COLLIE_SUCCESS);
  int opens = importer.opens;
  ASSERT(collie__ipc_map(im, 2, &rec, out) == COLLIE_SUCCESS);
  ASSERT(out[0] == (void *)(own + 8) && importer.opens == opens);

  /* A handle that will not open is the driver's error, named. */
  uintptr_t bad = fake_alloc(&exporter, 1);
  const void *bb[2] = {(void *)bad, NULL};
  ASSERT(collie__ipc_publish(ex, bb, 2, &rec) == COLLIE_SUCCESS);
  as_peer(&rec);
  importer.fail_open = 1;
  ASSERT(collie__ipc_map(im, 1, &rec, out) == COLLIE_SYSTEM_ERROR);
  ASSERT(strstr(collie__err_msg(), "cuIpcOpenMemHandle") != NULL);
  collie__ipc_cache_free(im);
  collie__ipc_cache_free(ex);
  ASSERT(importer.opens == importer.closes); /* nothing left mapped */
}

/* Records that go to one peer each (sends): a released allocation is
 * announced to the peers it was sent to, in their own next record, never
 * in another peer's; a record that could not be shared (and so is not
 * sent) leaves the announcement for the next. */
TEST_IMPL(ipc_cache_directed)
{
  struct fake exporter = {0}, imp1 = {0}, imp2 = {0};
  struct collie__ipc_ops eops = fake_ops(&exporter), ops1 = fake_ops(&imp1), ops2 = fake_ops(&imp2);
  struct collie__ipc_cache *ex = collie__ipc_cache_new(&eops, 3);
  struct collie__ipc_cache *im1 = collie__ipc_cache_new(&ops1, 3);
  struct collie__ipc_cache *im2 = collie__ipc_cache_new(&ops2, 3);
  ASSERT(ex && im1 && im2);
  struct collie__ipc_rec rec;
  void *out[COLLIE_IPC_BUFS];
  uintptr_t a = fake_alloc(&exporter, 1), b = fake_alloc(&exporter, 1);
  uintptr_t u = fake_alloc(&exporter, 0);
  const void *pa[1] = {(void *)a}, *pb[1] = {(void *)b}, *pu[1] = {(void *)u};

  /* a goes to peer 1 only; then a is freed. */
  ASSERT(collie__ipc_publish_to(ex, 1, pa, 1, &rec) == COLLIE_SUCCESS);
  as_peer(&rec);
  ASSERT(collie__ipc_map(im1, 0, &rec, out) == COLLIE_SUCCESS && imp1.opens == 1);
  exporter.a[0].alive = 0;
  /* Records to peer 2 never carry a: it never had it (the sweep finds a
   * gone within a couple of calls). */
  for (int i = 0; i < 3; i++) {
    ASSERT(collie__ipc_publish_to(ex, 2, pb, 1, &rec) == COLLIE_SUCCESS);
    ASSERTF(rec.nreleased == 0, "a record to peer 2 announced %u releases", rec.nreleased);
    as_peer(&rec);
    ASSERT(collie__ipc_map(im2, 0, &rec, out) == COLLIE_SUCCESS);
  }
  /* A record to peer 1 that cannot be shared carries nothing, and the
   * next one to peer 1 carries a: its mapping is closed. */
  ASSERT(collie__ipc_publish_to(ex, 1, pu, 1, &rec) == COLLIE_SUCCESS);
  ASSERT(rec.unshared == 1 && rec.nreleased == 0);
  ASSERT(collie__ipc_publish_to(ex, 1, pb, 1, &rec) == COLLIE_SUCCESS);
  ASSERTF(rec.nreleased == 1 && rec.released[0] == 1000, "peer 1's record announced %u",
          rec.nreleased);
  as_peer(&rec);
  ASSERT(collie__ipc_map(im1, 0, &rec, out) == COLLIE_SUCCESS);
  ASSERTF(imp1.closes == 1, "peer 1 closed %d mappings, expected a's", imp1.closes);
  /* Announced once: the next record to peer 1 carries nothing. */
  ASSERT(collie__ipc_publish_to(ex, 1, pb, 1, &rec) == COLLIE_SUCCESS);
  ASSERT(rec.nreleased == 0);
  collie__ipc_cache_free(im1);
  collie__ipc_cache_free(im2);
  collie__ipc_cache_free(ex);
  ASSERT(imp1.opens == imp1.closes && imp2.opens == imp2.closes);
}

TEST_IMPL(cuda_grid_shape)
{
  unsigned blocks, threads;
  /* Nothing to do still launches one block (the kernel's loop is empty). */
  collie__cuda_grid(0, 4, 1, 132, &blocks, &threads);
  ASSERT(blocks == 1 && threads == 512);
  /* 16 bytes per thread-step when aligned: 2048 floats = 512 steps = 1 block. */
  collie__cuda_grid(2048, 4, 1, 132, &blocks, &threads);
  ASSERT(blocks == 1);
  collie__cuda_grid(2049, 4, 1, 132, &blocks, &threads);
  ASSERT(blocks == 2);
  /* Unaligned: one element per thread-step. */
  collie__cuda_grid(2048, 4, 0, 132, &blocks, &threads);
  ASSERT(blocks == 4);
  /* Large: at most 4 blocks per multiprocessor; the loop strides the rest. */
  collie__cuda_grid((size_t)1 << 28, 2, 1, 132, &blocks, &threads);
  ASSERT(blocks == 4 * 132);
  collie__cuda_grid((size_t)1 << 28, 8, 1, 0, &blocks, &threads);
  ASSERT(blocks == 4);
}
