/*
 * wait_test.c - one wait across transports (issue 20, item 4): a rank whose
 * receives are on shm and tcp at once sleeps once, on both, wakes for the
 * first message whichever carries it, and does not burn its core while
 * nothing comes.
 */
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "runner.h"
#include "core/core.h"
#include "core/introspect.h"
#include "util/util.h"

static double
wait_cpu_s(void)
{
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec +
         (double)u.ru_stime.tv_usec * 1e-6;
}

/* Mixed, 3 ranks: 0 and 2 share a host (shm), 1 is on the other (tcp).
 * Rank 0 receives from both in one group while they wait 400 ms, one after
 * the other by turns, before sending: its CPU time over the wait must stay
 * under 1 % of the wall time (taking turns of 50 us between a futex and
 * poll() cost 3-6 % of a core here, one sleep 0.1-0.2 %), and every message
 * arrives. */
TEST_IMPL(wait_across_transports)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  ASSERT(test_size() == 3);
  if (r == 0)
    ASSERT(!strcmp(collie__comm_transport_of(comm, 1), "tcp") &&
           !strcmp(collie__comm_transport_of(comm, 2), "shm"));
  for (int round = 0; round < 2; round++) {
    int first = round == 0 ? 1 : 2; /* which transport's message comes first */
    uint64_t v = 0x1000u * (unsigned)(r + 1) + (unsigned)round;
    ASSERT_OK(collie_barrier(comm, NULL, NULL));
    if (r == 0) {
      uint64_t got[3] = {0, 0, 0};
      double cpu0 = wait_cpu_s();
      int64_t t0 = collie__now_ns();
      collie_work_t *work = NULL;
      ASSERT_OK(collie_group_start(comm));
      ASSERT_OK(collie_recv(comm, &got[1], 1, COLLIE_UINT64, 1, 5, NULL, NULL));
      ASSERT_OK(collie_recv(comm, &got[2], 1, COLLIE_UINT64, 2, 5, NULL, NULL));
      ASSERT_OK(collie_group_end(comm, &work));
      ASSERT_OK(collie_wait(work, -1));
      collie_work_free(work);
      double wall = (double)(collie__now_ns() - t0) * 1e-9, cpu = wait_cpu_s() - cpu0;
      ASSERT(got[1] == 0x2000u + (unsigned)round && got[2] == 0x3000u + (unsigned)round);
      ASSERTF(wall >= 0.35, "round %d: the wait took %.3f s", round, wall);
      ASSERTF(cpu < 0.01 * wall, "round %d: %.3f s of CPU in a %.3f s wait", round, cpu, wall);
    } else {
      usleep(r == first ? 400000 : 600000);
      ASSERT_OK(collie_send(comm, &v, 1, COLLIE_UINT64, 0, 5, NULL, NULL));
    }
  }
  ASSERT_OK(collie_comm_destroy(comm));
}

/* Mixed, 4 ranks: two fake hosts of two ranks on this one machine (one boot
 * id). Every rank counts all four as competing for the machine's cores, so
 * a wait spins only when there are four cores or more; a split of one host's
 * ranks keeps counting the world, as its left-out processes still run. */
TEST_IMPL(spin_counts_the_machine)
{
  collie_comm_t *comm = test_comm();
  int r = test_rank();
  ASSERT(test_size() == 4);
  int want = collie__ncpus() >= 4 ? COLLIE_SPIN_POLLS : 0;
  for (int p = 0; p < 4; p++) ASSERT(collie__comm_machine_ranks(comm, p) == 4);
  ASSERT(collie__comm_machine_ranks(comm, 4) == -1);
  ASSERTF(collie__comm_spin(comm) == want, "spin %d, want %d (%d cpus)", collie__comm_spin(comm),
          want, collie__ncpus());
  collie_comm_t *host = NULL;
  ASSERT_OK(collie_comm_split(comm, r % 2, r, &host));
  ASSERT(collie_comm_size(host) == 2);
  ASSERT(collie__comm_machine_ranks(host, 0) == 4 && collie__comm_machine_ranks(host, 1) == 4);
  ASSERT(collie__comm_spin(host) == want);
  int32_t v = r + 1, sum = 0;
  ASSERT_OK(collie_allreduce(host, &v, &sum, 1, COLLIE_INT32, COLLIE_SUM, NULL, NULL));
  ASSERT(sum == (r % 2 ? 2 + 4 : 1 + 3));
  ASSERT_OK(collie_comm_destroy(host));
  ASSERT_OK(collie_comm_destroy(comm));
}
