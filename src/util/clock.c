/* clock.c - monotonic time, deadlines, short sleeps: every wait in collie is
 * bounded by a deadline computed here. */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

int64_t
collie__now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t
collie__now_coarse_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t
collie__coarse_lag_ns(void)
{
  /* Read once: the tick does not change while the process runs. Racing
   * first readers store the same value. */
  static _Atomic int64_t lag;
  int64_t v = atomic_load_explicit(&lag, memory_order_relaxed);
  if (v == 0) {
    struct timespec res;
    v = clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0
            ? (int64_t)res.tv_sec * 1000000000 + res.tv_nsec
            : 10000000; /* 100 Hz, the slowest tick Linux has */
    if (v <= 0) v = 1;
    atomic_store_explicit(&lag, v, memory_order_relaxed);
  }
  return v;
}

int64_t
collie__deadline_after_ms(int64_t timeout_ms)
{
  return collie__deadline_from(collie__now_ns(), timeout_ms);
}

int64_t
collie__deadline_from(int64_t now_ns, int64_t timeout_ms)
{
  if (timeout_ms < 0 || timeout_ms > INT64_MAX / 2000000) return INT64_MAX;
  return now_ns + timeout_ms * 1000000;
}

int
collie__ms_until(int64_t deadline_ns)
{
  int64_t left = deadline_ns - collie__now_ns();
  if (left <= 0) return 0;
  left = (left + 999999) / 1000000;
  return left > INT32_MAX ? INT32_MAX : (int)left;
}

void
collie__sleep_ns(int64_t ns)
{
  if (ns <= 0) return;
  struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void
collie__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

int
collie__ncpus(void)
{
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}
