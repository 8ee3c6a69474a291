/*
 * backoff_test.c - util/backoff.c's wait policy, round by round: an
 * oversubscribed wait (spin 0) whose yields hand the core to others (each
 * takes longer than 20 us) yields 16 times and then says sleep, and one whose
 * yields come straight back (no one else wants the core) yields on until
 * 0.5 ms, never less unless 16 of them did hand the core over, and stops at
 * once at a deadline that has passed; a wait
 * with a core spins its polls, then yields until 0.5 ms after the spin began
 * (never less), and stops yielding at once at a deadline that has passed.
 */
#include <sched.h>
#include <stdint.h>
#include <unistd.h>

#include "runner.h"
#include "util/util.h"

TEST_IMPL(backoff_rounds)
{
  struct collie__backoff b;
  collie__backoff_init(&b, 0);
  int rounds = 0;
  while (collie__backoff_next(&b, INT64_MAX)) {
    rounds++;
    usleep(50); /* as if another rank ran on this core meanwhile */
  }
  ASSERTF(rounds == 16, "oversubscribed: %d rounds before sleeping, want 16 yields", rounds);
  /* Alone, the yields come straight back and are not counted: the wait
   * ends at 0.5 ms. A loaded machine may still take the core during some of
   * them (CI did: 7 yields over 1 ms); those count, so an end before 0.5 ms
   * is right only after 16 yields that were seen here to take long. */
  collie__backoff_init(&b, 0);
  int64_t t = collie__now_ns(), last = t;
  int handed = 0;
  rounds = 0;
  while (collie__backoff_next(&b, INT64_MAX)) {
    int64_t now = collie__now_ns();
    if (rounds > 0 && now - last > 15 * 1000) handed++;
    last = now;
    rounds++;
  }
  int64_t alone = collie__now_ns() - t;
  ASSERTF(alone >= 480 * 1000 || handed >= 16,
          "oversubscribed, alone: ended after %d yields (%d handed the core over) at %lld ns",
          rounds, handed, (long long)alone);
  collie__backoff_init(&b, 0);
  ASSERT(collie__backoff_next(&b, 0) == 0);

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

/* A wait told that a peer shares its CPU ends its spin at its first clock
 * read (the 64th poll) and yields from there; one told otherwise spins on. */
static int bt_crowded_calls;

static int
bt_crowded_yes(void *arg)
{
  (void)arg;
  bt_crowded_calls++;
  return 1;
}

static int
bt_crowded_no(void *arg)
{
  (void)arg;
  bt_crowded_calls++;
  return 0;
}

TEST_IMPL(backoff_crowded)
{
  struct collie__backoff b;
  collie__backoff_init_crowded(&b, 100000, bt_crowded_yes, NULL);
  for (int i = 0; i < 63; i++) ASSERT(collie__backoff_next(&b, INT64_MAX));
  ASSERTF(bt_crowded_calls == 0 && b.polls == 63, "asked %d times in 63 polls", bt_crowded_calls);
  ASSERT(collie__backoff_next(&b, INT64_MAX));
  ASSERTF(bt_crowded_calls == 1 && b.polls == b.spin, "crowded: spin not ended (polls %d of %d)",
          b.polls, b.spin);
  bt_crowded_calls = 0;
  collie__backoff_init_crowded(&b, 100000, bt_crowded_no, NULL);
  for (int i = 0; i < 64; i++) ASSERT(collie__backoff_next(&b, INT64_MAX));
  ASSERTF(bt_crowded_calls == 1 && b.polls == 64, "not crowded: polls %d, asked %d", b.polls,
          bt_crowded_calls);
}

/* collie__proc_cpu: this process pinned to one CPU reads as running there;
 * a pid that does not exist reads -1. */
TEST_IMPL(proc_cpu_self)
{
  cpu_set_t allowed, one;
  ASSERT(sched_getaffinity(0, sizeof(allowed), &allowed) == 0);
  int c = 0;
  while (c < CPU_SETSIZE && !CPU_ISSET(c, &allowed)) c++;
  CPU_ZERO(&one);
  CPU_SET(c, &one);
  ASSERT(sched_setaffinity(0, sizeof(one), &one) == 0);
  int got = collie__proc_cpu((int)getpid());
  ASSERT(sched_setaffinity(0, sizeof(allowed), &allowed) == 0);
  ASSERTF(got == c, "pinned to CPU %d, /proc says %d", c, got);
  ASSERT(collie__proc_cpu(0x7ffffff0) == -1);
}
