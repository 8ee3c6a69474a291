/*
 * mem_alloc_test.c - collie_mem_alloc / collie_mem_free: bad arguments fail
 * with a message and free nothing; the memory is zeroed, page-aligned and
 * whole; collectives and send/recv whose buffers lie in it (at an offset
 * inside the region, too) deliver every byte over every transport; over shm
 * the large ones are read out of the receiver's mapping (the mapped-read
 * counter moves, and does not with malloc'd buffers); and a region freed and
 * allocated again, its fd number reused, is never served from the peer's
 * stale mapping.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "coll/moves.h"
#include "coll/ref.h"
#include "runner.h"
#include "transport/shm_int.h"

/* Whether this process can take a descriptor of another through a pidfd
 * (the mapping's way in; valgrind 3.19, for one, knows neither syscall). */
static int
pidfd_getfd_works(void)
{
  int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
  if (pidfd < 0) return 0;
  int fd = (int)syscall(SYS_pidfd_getfd, pidfd, 1, 0);
  close(pidfd);
  if (fd < 0) return 0;
  close(fd);
  return 1;
}

static uint64_t
mapped_reads(void)
{
  return atomic_load_explicit(&collie__shm_mem_mapped_reads, memory_order_relaxed);
}

TEST_IMPL(mem_alloc_bad_arguments)
{
  collie_comm_t *comm = test_comm();
  ASSERT(collie_mem_alloc(NULL, 64) == NULL);
  ASSERT(strstr(collie_last_error(), "collie_mem_alloc") != NULL);
  ASSERT(collie_mem_alloc(comm, 0) == NULL);
  ASSERTF(strstr(collie_last_error(), "bytes is 0") != NULL, "%s", collie_last_error());
  ASSERT(collie_mem_alloc(comm, SIZE_MAX) == NULL);
  ASSERTF(strstr(collie_last_error(), "bytes") != NULL, "%s", collie_last_error());
  ASSERT_OK(collie_mem_free(NULL));
  char *heap = malloc(64);
  ASSERT(heap);
  ASSERT(collie_mem_free(heap) == COLLIE_INVALID_ARGUMENT);
  ASSERTF(strstr(collie_last_error(), "not memory from collie_mem_alloc") != NULL, "%s",
          collie_last_error());
  free(heap);

  size_t n = 3 * 4096 + 100;
  unsigned char *m = collie_mem_alloc(comm, n);
  ASSERT(m != NULL);
  ASSERT((uintptr_t)m % (uintptr_t)sysconf(_SC_PAGESIZE) == 0);
  for (size_t i = 0; i < n; i++) ASSERTF(m[i] == 0, "byte %zu of new memory is %u", i, m[i]);
  memset(m, 0x5A, n);
  /* A pointer inside a region is not a region. */
  ASSERT(collie_mem_free(m + 1) == COLLIE_INVALID_ARGUMENT);
  ASSERT_OK(collie_mem_free(m));
  ASSERT(collie_mem_free(m) == COLLIE_INVALID_ARGUMENT);
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Every collective with a send side, and send/recv, with n floats per block,
 * the sources inside collie memory at off floats into their region (and the
 * destinations too when dst_collie). */
static void
mem_collectives(collie_comm_t *comm, size_t n, size_t off, int dst_collie)
{
  int p = test_size(), me = test_rank();
  size_t all = n * (size_t)p;
  float *sreg = collie_mem_alloc(comm, (all + off) * sizeof(float));
  float *dreg = dst_collie ? collie_mem_alloc(comm, all * sizeof(float)) : malloc(all * 4);
  ASSERT(sreg && dreg);
  float *s = sreg + off, *d = dreg;
  char why[256];

  moves_check(comm, s, d, n, NULL);

  ref_fill(s, n, COLLIE_FLOAT32, COLLIE_SUM, me);
  collie_opts_t ring = {.algorithm = COLLIE_ALGO_RING};
  ASSERT_OK(collie_allreduce(comm, s, d, n, COLLIE_FLOAT32, COLLIE_SUM, &ring, NULL));
  ASSERTF(ref_check(d, n, COLLIE_FLOAT32, COLLIE_SUM, p, why, sizeof(why)) < 0,
          "allreduce of %zu: %s", n, why);

  /* send/recv around the ring, sent and received in one group */
  int to = (me + 1) % p, from = (me + p - 1) % p;
  ref_fill_pattern(s, n, COLLIE_FLOAT32, 90 + me);
  ASSERT_OK(collie_group_start(comm));
  ASSERT_OK(collie_send(comm, s, n, COLLIE_FLOAT32, to, 3, NULL, NULL));
  ASSERT_OK(collie_recv(comm, d, n, COLLIE_FLOAT32, from, 3, NULL, NULL));
  ASSERT_OK(collie_group_end(comm, NULL));
  ASSERTF(ref_pattern_diff(d, n, COLLIE_FLOAT32, 90 + from) < 0, "send/recv of %zu wrong", n);

  ASSERT_OK(collie_mem_free(sreg));
  if (dst_collie)
    ASSERT_OK(collie_mem_free(dreg));
  else
    free(dreg);
}

TEST_IMPL(mem_alloc_collectives)
{
  collie_comm_t *comm = test_comm();
  static const size_t counts[] = {1, 4096, 100003, 1 << 20};
  for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
    mem_collectives(comm, counts[k], 0, 0);
    mem_collectives(comm, counts[k], 1027, 1);
  }
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Over shm, a large allgather reads collie memory out of the mapping and
 * malloc'd memory through the kernel. */
TEST_IMPL(mem_alloc_read_in_place)
{
  collie_comm_t *comm = test_comm();
  int p = test_size(), me = test_rank();
  size_t n = 1 << 18; /* 1 MiB per block */
  float *heap = malloc(n * sizeof(float)), *out = malloc(n * (size_t)p * sizeof(float));
  float *mine = collie_mem_alloc(comm, n * sizeof(float));
  ASSERT(heap && out && mine);
  ref_fill_pattern(heap, n, COLLIE_FLOAT32, me);
  uint64_t before = mapped_reads();
  ASSERT_OK(collie_allgather(comm, heap, out, n, COLLIE_FLOAT32, NULL, NULL));
  ASSERTF(mapped_reads() == before, "malloc'd blocks were read from a mapping (%llu reads)",
          (unsigned long long)(mapped_reads() - before));
  ref_fill_pattern(mine, n, COLLIE_FLOAT32, 10 + me);
  ASSERT_OK(collie_allgather(comm, mine, out, n, COLLIE_FLOAT32, NULL, NULL));
  for (int q = 0; q < p; q++)
    ASSERTF(ref_pattern_diff(out + (size_t)q * n, n, COLLIE_FLOAT32, 10 + q) < 0, "block %d wrong",
            q);
  if (pidfd_getfd_works())
    ASSERTF(mapped_reads() > before, "no block of collie memory was read from a mapping");
  else if (me == 0)
    printf("skipped the mapped-read check: no pidfd_getfd here (blocks went through the kernel)\n");
  ASSERT_OK(collie_mem_free(mine));
  free(heap);
  free(out);
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Regions freed and allocated again reuse fd numbers; more of them than a
 * peer keeps mappings of. Each round's bytes must be that round's. */
TEST_IMPL(mem_alloc_reuse_after_free)
{
  collie_comm_t *comm = test_comm();
  int p = test_size(), me = test_rank();
  size_t n = 1 << 16;
  float *out = malloc(n * (size_t)p * sizeof(float));
  ASSERT(out);
  for (int round = 0; round < 20; round++) {
    float *mine = collie_mem_alloc(comm, n * sizeof(float));
    ASSERT(mine);
    ref_fill_pattern(mine, n, COLLIE_FLOAT32, round * p + me);
    ASSERT_OK(collie_allgather(comm, mine, out, n, COLLIE_FLOAT32, NULL, NULL));
    for (int q = 0; q < p; q++)
      ASSERTF(ref_pattern_diff(out + (size_t)q * n, n, COLLIE_FLOAT32, round * p + q) < 0,
              "round %d: block %d holds another round's bytes", round, q);
    /* Everyone has read this round's blocks before anyone frees. */
    ASSERT_OK(collie_barrier(comm, NULL, NULL));
    ASSERT_OK(collie_mem_free(mine));
  }
  free(out);
  ASSERT_OK(collie_comm_destroy(comm));
}
