/* futex.c - sleep on a 32-bit word in shared memory until another process
 * changes it. The shm transport's waits end here after a brief spin. */
#include <errno.h>
#include <linux/futex.h>
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
