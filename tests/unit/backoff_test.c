/*
 * backoff_test.c - util/backoff.c's wait policy, round by round: an
 * oversubscribed wait (spin 0) yields 16 times and then says sleep; a wait
 * with a core spins its polls, then yields until 0.5 ms after the spin began
 * (never less), and stops yielding at once at a deadline that has passed.
 */
#include <stdint.h>

#include "runner.h"
#include "util/util.h"

TEST_IMPL(backoff_rounds)
{
  struct collie__backoff b;
  collie__backoff_init(&b, 0);
  int rounds = 0;
  while (collie__backoff_next(&b, INT64_MAX)) rounds++;
  ASSERTF(rounds == 16, "oversubscribed: %d rounds before sleeping, want 16 yields", rounds);

  /* 10 polls end well before the 20 us spin cap; then yields to ~0.5 ms. */
  collie__backoff_init(&b, 10);
  int64_t t0 = collie__now_ns();
  for (int i = 0; i < 10; i++) ASSERT(collie__backoff_next(&b, INT64_MAX) == 1);
  rounds = 0;
  while (collie__backoff_next(&b, INT64_MAX)) rounds++;
  int64_t spent = collie__now_ns() - t0;
  ASSERTF(rounds > 0 && spent >= 480 * 1000, "yielded %d times over %lld ns", rounds,
          (long long)spent);

  /* A deadline already past ends the yields before the first. */
  collie__backoff_init(&b, 3);
  for (int i = 0; i < 3; i++) ASSERT(collie__backoff_next(&b, 0) == 1);
  ASSERT(collie__backoff_next(&b, 0) == 0);
}
