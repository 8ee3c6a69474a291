/*
 * stage_test.c - the device path's parts a CPU can check (issue 21): the
 * extent of every collective (the bytes staged through the host, so a wrong
 * one corrupts or overruns device memory), the driver loader's refusals,
 * and that a process without the driver keeps the host path (device memory
 * cannot exist there) while a copy says why it cannot run.
 */
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "device/cuda.h"
#include "runner.h"

static struct collie__call
stage_call(int kind, size_t count, int root, const void *sendbuf)
{
  struct collie__call c;
  memset(&c, 0, sizeof(c));
  c.kind = kind;
  c.count = count;
  c.dtype = COLLIE_FLOAT64; /* 8 bytes: extents below are count * 8 */
  c.root = root;
  c.sendbuf = sendbuf;
  return c;
}

static void
stage_expect(const struct collie__call *c, int rank, int size, size_t send, size_t recv)
{
  struct collie__extent e;
  collie__call_extent(c, rank, size, &e);
  ASSERTF(e.send == send && e.recv == recv,
          "%s at rank %d of %d: extent send %zu recv %zu, expected %zu and %zu",
          collie__kind_name(c->kind), rank, size, e.send, e.recv, send, recv);
}

TEST_IMPL(stage_extents)
{
  struct collie__call c;
  /* 4 ranks, 10 elements of 8 bytes. */
  c = stage_call(COLLIE_KIND_ALLREDUCE, 10, 0, NULL);
  stage_expect(&c, 1, 4, 80, 80);
  c = stage_call(COLLIE_KIND_BROADCAST, 10, 2, NULL);
  stage_expect(&c, 1, 4, 80, 80);
  c = stage_call(COLLIE_KIND_ALLGATHER, 10, 0, NULL);
  stage_expect(&c, 3, 4, 80, 320);
  c = stage_call(COLLIE_KIND_REDUCE_SCATTER, 10, 0, NULL);
  stage_expect(&c, 0, 4, 320, 80);
  c = stage_call(COLLIE_KIND_ALLTOALL, 10, 0, NULL);
  stage_expect(&c, 2, 4, 320, 320);
  /* Rooted: the root's side only at the root. */
  c = stage_call(COLLIE_KIND_REDUCE, 10, 2, NULL);
  stage_expect(&c, 2, 4, 80, 80);
  stage_expect(&c, 1, 4, 80, 0);
  c = stage_call(COLLIE_KIND_GATHER, 10, 3, NULL);
  stage_expect(&c, 3, 4, 80, 320);
  stage_expect(&c, 0, 4, 80, 0);
  c = stage_call(COLLIE_KIND_SCATTER, 10, 0, NULL);
  stage_expect(&c, 0, 4, 320, 80);
  stage_expect(&c, 1, 4, 0, 80);
  c = stage_call(COLLIE_KIND_BARRIER, 0, 0, NULL);
  stage_expect(&c, 0, 4, 0, 0);
  /* v-variants: up to the farthest block, whatever the order of the blocks. */
  const size_t counts[4] = {2, 0, 5, 1}, displs[4] = {9, 100, 0, 5};
  c = stage_call(COLLIE_KIND_ALLGATHERV, 5, 0, NULL);
  c.recvcounts = counts;
  c.rdispls = displs;
  stage_expect(&c, 2, 4, 40, 88); /* block 0 ends at 11 elements; block 1 is empty */
  const size_t scounts[4] = {1, 1, 1, 7}, sdispls[4] = {0, 1, 2, 3};
  c = stage_call(COLLIE_KIND_ALLTOALLV, 0, 0, NULL);
  c.sendcounts = scounts;
  c.sdispls = sdispls;
  c.recvcounts = counts;
  c.rdispls = displs;
  stage_expect(&c, 0, 4, 80, 88);
  /* Send and receive: the buffer the call has. */
  static const char buf[1];
  c = stage_call(COLLIE_KIND_P2P, 10, 1, buf);
  stage_expect(&c, 0, 4, 80, 0);
  c = stage_call(COLLIE_KIND_P2P, 10, 1, NULL);
  stage_expect(&c, 0, 4, 0, 80);
}

TEST_IMPL(stage_no_driver)
{
  /* This test process never loads CUDA: no buffer is device memory. */
  ASSERT(!collie__cuda_live());
  double x = 1.0;
  ASSERT(!collie__cuda_is_device(&x, NULL));
  char dst[8];
  ASSERT(collie__cuda_copy(dst, &x, sizeof(x), "copying x") == COLLIE_UNSUPPORTED);
  ASSERTF(strstr(collie_last_error(), "CUDA: copying x: no driver in this process") != NULL,
          "message: %s", collie_last_error());
  /* The loader's refusals name the library and the reason. */
  ASSERT(collie__cuda_open("/nonexistent/libcuda.so.1") == COLLIE_UNSUPPORTED);
  ASSERTF(strstr(collie_last_error(), "CUDA: cannot open the driver /nonexistent/libcuda.so.1") !=
              NULL,
          "message: %s", collie_last_error());
  ASSERT(collie__cuda_open("libc.so.6") == COLLIE_UNSUPPORTED); /* a library, but no driver */
  ASSERTF(strstr(collie_last_error(), "the driver libc.so.6 has no cuGetProcAddress") != NULL,
          "message: %s", collie_last_error());
  /* The host path is unchanged: a collective on host memory runs. */
  collie_comm_t *comm = test_comm();
  double in[3] = {1, 2, 3}, out[3] = {0};
  ASSERT_OK(collie_allreduce(comm, in, out, 3, COLLIE_FLOAT64, COLLIE_SUM, NULL, NULL));
  ASSERT(out[0] == 2 && out[2] == 6); /* two ranks of the same input */
  ASSERT(!collie__cuda_live());
}
