/* futex.c - sleep on a 32-bit word in shared memory until another process
 * changes it, and the membarrier(2) fences that let the wakers skip theirs.
 * The shm transport's waits end here after a brief spin. */
#include <errno.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

void
collie__futex_wait(uint32_t *addr, uint32_t expected, int64_t deadline_ns)
{
  int64_t left = deadline_ns - collie__now_ns();
  if (left <= 0) return;
  struct timespec ts = {(time_t)(left / 1000000000), (long)(left % 1000000000)};
  /* Shared futex (no FUTEX_PRIVATE_FLAG): the word lives in a MAP_SHARED segment. */
  syscall(SYS_futex, addr, FUTEX_WAIT, expected, &ts, NULL, 0);
}

void
collie__futex_wake_all(uint32_t *addr)
{
  syscall(SYS_futex, addr, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

int
collie__membarrier_register(void)
{
  long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  long need = MEMBARRIER_CMD_GLOBAL_EXPEDITED | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED;
  if (cmds < 0 || (cmds & need) != need) return 0;
  return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
}

int
collie__membarrier_all(void)
{
  return syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0 ? 0 : -1;
}
