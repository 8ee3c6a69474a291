/*
 * clock_test.c - util/clock.c's coarse clock: the same time base as
 * collie__now_ns() (never ahead of it, behind by at most its lag plus
 * scheduling slack), a lag that is a real tick, and time that moves.
 */
#include <stdint.h>

#include "runner.h"
#include "util/util.h"

TEST_IMPL(coarse_clock_bounds)
{
  int64_t lag = collie__coarse_lag_ns();
  ASSERTF(lag > 0 && lag <= 10 * 1000000, "coarse lag %lld ns, want a tick of 1-10 ms",
          (long long)lag);
  ASSERT(collie__coarse_lag_ns() == lag);
  int64_t first = collie__now_coarse_ns(), last = first;
  for (int i = 0; i < 2000; i++) {
    int64_t before = collie__now_ns();
    int64_t c = collie__now_coarse_ns();
    int64_t after = collie__now_ns();
    ASSERTF(c <= after, "coarse %lld ahead of precise %lld", (long long)c, (long long)after);
    /* A tick may come late on a busy VM: 50 ms of slack, still far below
     * any other clock's offset (REALTIME, or microseconds for nanoseconds). */
    ASSERTF(before - c <= lag + 50 * 1000000LL, "coarse %lld lags precise %lld by more than a tick",
            (long long)c, (long long)before);
    ASSERTF(c >= last, "coarse clock went back: %lld after %lld", (long long)c, (long long)last);
    last = c;
    if (i % 100 == 99) collie__sleep_ns(1000 * 1000);
  }
  ASSERTF(last > first, "coarse clock stood still over 20 sleeps of 1 ms: %lld", (long long)last);
}
