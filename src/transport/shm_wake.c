/*
 * shm_wake.c - waking a rank that sleeps on shared memory and sockets at
 * once (issue 20: one wait across transports).
 *
 * A rank whose requests are on shm and tcp at the same time cannot sleep on
 * its futex doorbell (a socket cannot ring it) nor in poll() alone (a shm
 * producer cannot make a socket of this rank readable). So each rank of a
 * segment binds a datagram socket in the abstract namespace, named after
 * the segment and its local index; net.c's wait puts it in one poll() with
 * the tcp sockets, and the rank says so in its sleeping word
 * (COLLIE_SHM_SLEEP_POLL). A producer that finds that value sends the
 * socket one byte instead of a futex wake.
 *
 * No wake-up is lost, by the argument of shm.c's "Wake-ups": the waiter
 * stores its sleeping word, then looks at the rings; the producer
 * publishes, then loads the word. Either the look sees the publish, or the
 * producer sees the word and sends. A byte sent before the waiter reaches
 * poll() stays queued in the socket, so poll() returns at once; where the
 * futex wait compared a doorbell snapshot, the queue does the same job.
 * Stale bytes cost one early return, and are drained after every sleep.
 * If the socket cannot be made (no abstract namespace), the rank keeps the
 * futex and the net takes short turns between transports, as before.
 */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "transport/shm_int.h"
#include "util/util.h"
#include "util/error.h"

/* The abstract address of local index `local` of x's segment. */
static socklen_t
shm_wake_addr(const struct collie__shm_xport *x, int local, struct sockaddr_un *a)
{
  memset(a, 0, sizeof(*a));
  a->sun_family = AF_UNIX;
  /* sun_path[0] = '\0': abstract, gone with the last descriptor. */
  int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "collie-wake%s-%d", x->name, local);
  if (n < 0) n = 0;
  if ((size_t)n > sizeof(a->sun_path) - 2) n = (int)sizeof(a->sun_path) - 2;
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

void
collie__shm_wake_open(struct collie__shm_xport *x)
{
  /* Every local rank's address, made once: a wake is one sendto. */
  x->wake_addr = calloc((size_t)x->nlocal, sizeof(*x->wake_addr));
  x->wake_len = calloc((size_t)x->nlocal, sizeof(*x->wake_len));
  x->wake_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (!x->wake_addr || !x->wake_len || x->wake_fd < 0) {
    collie__shm_wake_close(x);
    return;
  }
  for (int i = 0; i < x->nlocal; i++) x->wake_len[i] = shm_wake_addr(x, i, &x->wake_addr[i]);
  x->wake_bound =
      bind(x->wake_fd, (struct sockaddr *)&x->wake_addr[x->me], x->wake_len[x->me]) == 0;
  if (!x->wake_bound) /* it can still ring the peers that sleep in poll() */
    COLLIE_INFO("SHM", "no wake-up socket (%s): waits on shm and tcp at once take turns",
                strerror(errno));
}

void
collie__shm_wake_close(struct collie__shm_xport *x)
{
  if (x->wake_fd >= 0) close(x->wake_fd);
  x->wake_fd = -1;
  x->wake_bound = 0;
  free(x->wake_addr);
  free(x->wake_len);
  x->wake_addr = NULL;
  x->wake_len = NULL;
}

void
collie__shm_wake_ring(struct collie__shm_xport *x, int local)
{
  /* The waiter only counts bytes. A full queue (EAGAIN) already wakes it;
   * a closed one means it is gone. */
  char b = 1;
  if (x->wake_fd >= 0)
    (void)sendto(x->wake_fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
                 (struct sockaddr *)&x->wake_addr[local], x->wake_len[local]);
}

int
collie__shm_poll_arm(struct collie__xport *xp, struct pollfd *fds, int max, int64_t *until_ns)
{
  struct collie__shm_xport *x = (struct collie__shm_xport *)(void *)xp;
  if (atomic_load_explicit(&x->stopped, memory_order_acquire) || !x->ctrl) return -1;
  if (!x->wake_bound || max < 1) return -2;
  int64_t now = collie__now_ns();
  if (*until_ns > now + SHM_CHECK_NS) *until_ns = now + SHM_CHECK_NS; /* a death rings nothing */
  struct collie__shm_ctrl *c = &x->ctrl[x->me];
  atomic_store_explicit(&c->sleeping, COLLIE_SHM_SLEEP_POLL, memory_order_seq_cst);
  if (x->fence_free && collie__membarrier_all() != 0 && *until_ns > now + SHM_UNFENCED_SLEEP_NS)
    *until_ns = now + SHM_UNFENCED_SLEEP_NS;
  if (collie__shm_look_locked(x)) {
    atomic_store_explicit(&c->sleeping, 0, memory_order_relaxed);
    return -1;
  }
  fds[0].fd = x->wake_fd;
  fds[0].events = POLLIN;
  fds[0].revents = 0;
  return 1;
}

void
collie__shm_poll_done(struct collie__xport *xp, const struct pollfd *fds, int n)
{
  struct collie__shm_xport *x = (struct collie__shm_xport *)(void *)xp;
  char buf[64];
  if (n == 1 && (fds[0].revents & POLLIN))
    while (recv(x->wake_fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
    }
  if (x->ctrl) atomic_store_explicit(&x->ctrl[x->me].sleeping, 0, memory_order_relaxed);
}
