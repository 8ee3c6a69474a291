/* backoff.c - how a rank waits for another process before it sleeps: the one
 * policy of message waits (net.c) and flat syncs (shm.c).
 *
 * Spin first, at most `spin` polls and BACKOFF_SPIN_NS: ranks that all run
 * finish a handoff in about a microsecond, and a wait still open after the
 * cap means a peer is not running; spinning on would keep it off the core
 * for the rest of a time slice (two ranks squeezed onto one core by other
 * load: an 8-byte allreduce took 400 us spinning out the count, 23 us with
 * the cap). The clock is read only from the 64th poll on: most waits end
 * before it, and a read costs as much as a few polls. At each read the
 * caller may also say that a rank it waits for shares this CPU (crowded):
 * the scheduler can start two ranks on one CPU and leave them there for a
 * tenth of a second, and each handoff then spun its full 20 us before the
 * yield let the peer run (2-rank allreduce of 128 B: 26 us a call).
 *
 * Then yield the core (sched_yield): with a core of its own a waiter yields
 * until BACKOFF_YIELD_NS. A futex wake-up takes 50-100 us on the reference
 * VM, longer than the spin: once one rank of a pair had slept, its peer spun
 * out waiting for it to wake, slept too, and from then on the two woke each
 * other on every call (2-rank allreduce of 512 B-2 KiB: 74-97 us instead of
 * 0.4 for whole runs). A yield costs a syscall when the core is ours and
 * hands it over when a peer shares it. Oversubscribed (spin 0) a waiter
 * yields BACKOFF_YIELDS times: ~5x cheaper than a futex round trip when the
 * peer it waits for shares its core, and no longer, since other ranks want
 * the core too. Then the caller sleeps. A yield that came straight back
 * (within BACKOFF_ALONE_NS) found no one else wanting this core, and is not
 * counted: an oversubscribed job whose other ranks sleep (two of four ranks
 * on two cores ping-pong, the others wait in a barrier) waits as a pair
 * with cores of their own does, up to BACKOFF_YIELD_NS, instead of sleeping
 * through every large message's copy (2 MiB: 330-380 us a message instead
 * of 206). */
#include <sched.h>

#include "util/util.h"

#define BACKOFF_SPIN_NS (20 * 1000LL)
#define BACKOFF_YIELD_NS (500 * 1000LL)
#define BACKOFF_YIELDS 16
#define BACKOFF_ALONE_NS (20 * 1000LL)

void
collie__backoff_init(struct collie__backoff *b, int spin)
{
  *b = (struct collie__backoff){.spin = spin};
}

void
collie__backoff_init_crowded(struct collie__backoff *b, int spin, int (*crowded)(void *), void *arg)
{
  *b = (struct collie__backoff){.spin = spin, .crowded = crowded, .crowded_arg = arg};
}

int
collie__backoff_next(struct collie__backoff *b, int64_t deadline_ns)
{
  if (b->polls < b->spin) {
    if ((b->polls & 63) == 63) {
      int64_t now = collie__now_ns();
      if (!b->until) b->until = now + BACKOFF_SPIN_NS;
      if (now >= b->until || (b->crowded && b->crowded(b->crowded_arg))) b->polls = b->spin - 1;
    }
    b->polls++;
    collie__cpu_relax();
    return 1;
  }
  if (b->spin > 0) {
    int64_t now = collie__now_ns();
    if (!b->yield_until) b->yield_until = now + BACKOFF_YIELD_NS - BACKOFF_SPIN_NS;
    if (now >= b->yield_until || now >= deadline_ns) return 0;
  } else {
    int64_t now = collie__now_ns();
    if (!b->yield_until) b->yield_until = now + BACKOFF_YIELD_NS;
    int alone = b->yielded && now - b->yielded < BACKOFF_ALONE_NS;
    if (!alone) b->yields++;
    if (b->yields > BACKOFF_YIELDS || (alone && now >= b->yield_until) || now >= deadline_ns)
      return 0;
    b->yielded = now;
  }
  sched_yield();
  return 1;
}
