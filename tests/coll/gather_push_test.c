/*
 * gather_push_test.c - linear gather's large blocks on one host, which every
 * rank writes into the root's buffer itself (coll/linear.c): blocks at, just
 * below and above the threshold arrive whole for a first and a last root,
 * in place and not; over shm the large ones are written (the peer-write
 * counter moves once per rank, and not for a smaller block); and where a
 * rank may not write the root's memory (the
 * root made itself non-dumpable, the writer lacks CAP_SYS_PTRACE) the blocks
 * still arrive, as messages.
 */
#include <errno.h>
#include <linux/capability.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "coll/ref.h"
#include "runner.h"
#include "transport/shm_int.h"

/* 256 KiB blocks is where the peers start writing. */
#define PUSH_MIN_COUNT ((size_t)65536)

/* Gathers count floats (pattern 300 + rank) to root and checks every block;
 * in place at the root when inplace is set. */
static void
push_gather(collie_comm_t *comm, size_t count, int root, int inplace)
{
  int p = test_size(), me = test_rank();
  collie_opts_t linear = {.algorithm = COLLIE_ALGO_LINEAR};
  float *all = malloc(count * (size_t)p * sizeof(float)), *mine = malloc(count * sizeof(float));
  ASSERT(all && mine);
  memset(all, 0, count * (size_t)p * sizeof(float));
  float *send = inplace && me == root ? all + (size_t)root * count : mine;
  ref_fill_pattern(send, count, COLLIE_FLOAT32, 300 + me);
  ASSERT_OK(collie_gather(comm, send, all, count, COLLIE_FLOAT32, root, &linear, NULL));
  for (int q = 0; q < p && me == root; q++)
    ASSERTF(ref_pattern_diff(all + (size_t)q * count, count, COLLIE_FLOAT32, 300 + q) < 0,
            "gather of %zu floats to root %d%s: block %d wrong", count, root,
            inplace ? " in place" : "", q);
  free(all);
  free(mine);
}

static void
push_sizes(collie_comm_t *comm)
{
  static const size_t counts[] = {PUSH_MIN_COUNT - 1, PUSH_MIN_COUNT, 100003, 1 << 20};
  int roots[2] = {0, test_size() - 1};
  for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
    for (int r = 0; r < 2; r++)
      for (int inplace = 0; inplace < 2; inplace++) push_gather(comm, counts[k], roots[r], inplace);
}

TEST_IMPL(gather_push)
{
  collie_comm_t *comm = test_comm();
  push_sizes(comm);
  ASSERT_OK(collie_comm_destroy(comm));
}

static uint64_t
peer_writes(void)
{
  return atomic_load_explicit(&collie__shm_peer_writes, memory_order_relaxed);
}

/* Over shm a rank writes its block of 256 KiB into the root itself, and
 * sends a smaller one as a message. */
TEST_IMPL(gather_push_writes)
{
  collie_comm_t *comm = test_comm();
  int me = test_rank();
  uint64_t before = peer_writes();
  push_gather(comm, PUSH_MIN_COUNT - 1, 0, 0);
  ASSERTF(peer_writes() == before, "a block below 256 KiB was written into the root");
  push_gather(comm, PUSH_MIN_COUNT, 0, 0);
  if (me == 0)
    ASSERTF(peer_writes() == before, "the root wrote into itself");
  else
    ASSERTF(peer_writes() == before + 1, "rank %d wrote %llu blocks, want 1", me,
            (unsigned long long)(peer_writes() - before));
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Takes CAP_SYS_PTRACE out of this process's effective set, so that the
 * kernel's ptrace check (which process_vm_writev makes) applies to it. */
static void
drop_ptrace_capability(void)
{
  struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct d[2];
  ASSERT(syscall(SYS_capget, &h, d) == 0);
  d[CAP_SYS_PTRACE / 32].effective &= ~(1u << (CAP_SYS_PTRACE % 32));
  ASSERT(syscall(SYS_capset, &h, d) == 0);
}

TEST_IMPL(gather_push_refused)
{
  collie_comm_t *comm = test_comm();
  int me = test_rank();
  /* Rank 0 (the root) shares where a probe may be written. */
  static uint64_t target;
  uint64_t where[2] = {(uint64_t)getpid(), (uint64_t)(uintptr_t)&target};
  ASSERT_OK(collie_broadcast(comm, where, 2, COLLIE_UINT64, 0, NULL, NULL));
  if (me == 0)
    ASSERT(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0);
  else
    drop_ptrace_capability();
  ASSERT_OK(collie_barrier(comm, NULL, NULL));
  if (me != 0) {
    /* The premise: writing the root's memory is refused here. */
    uint64_t v = 7;
    struct iovec l = {.iov_base = &v, .iov_len = sizeof(v)};
    struct iovec r = {.iov_base = (void *)(uintptr_t)where[1], .iov_len = sizeof(v)};
    errno = 0;
    ssize_t n = syscall(SYS_process_vm_writev, (pid_t)where[0], &l, 1UL, &r, 1UL, 0UL);
    ASSERTF(n < 0 && errno == EPERM, "process_vm_writev into the non-dumpable root: %zd (%s)", n,
            strerror(errno));
  }
  for (size_t k = 0; k < 2; k++) push_gather(comm, k ? 100003 : PUSH_MIN_COUNT, 0, (int)k);
  ASSERT_OK(collie_comm_destroy(comm));
}
