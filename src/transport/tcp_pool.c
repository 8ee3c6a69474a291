/*
 * tcp_pool.c - connections kept between communicators. When a communicator
 * closes cleanly, each of its tcp connections is at a frame boundary both
 * ways once the two ends have said BYE; instead of closing it (the side that
 * closes first leaves a socket in the kernel's TIME_WAIT for 60 s: 10^4
 * split/destroy cycles left ~15,000 of them), close() puts it here, keyed by
 * the peer's process (host identity and pid) and the job token, and the next
 * communicator of the same two processes sends its hello on it instead of
 * connecting (tcp_setup.c). A split of a job that has made and destroyed
 * communicators before costs no new connection, and the number of sockets
 * stays that of the most communicators alive at once.
 *
 * A live connection is never shared: a communicator's stream carries only
 * its frames, so one communicator's backpressure (a held header, a full
 * socket) or failure cannot block or poison another (docs/design.md says why).
 *
 * An entry is usable once the peer's BYE for the last communicator has been
 * read (its side is closed too, nothing else is in flight); until then it
 * waits. The hello on a kept connection is checked exactly as on a new one;
 * whatever goes wrong on a kept connection before its ACCEPT (the peer
 * closed it, refused it, or is setting up another communicator on it) makes
 * the connecting side drop it and connect anew, so keeping connections can
 * cost a retry, never a failed setup.
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/tcp_int.h"
#include "transport/tcp_proto.h"
#include "util/util.h"

/* Kept connections per peer process, and in all: more than the
 * communicators a job keeps alive at once between two processes is waste. */
#define TCP_POOL_MAX 64

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct collie__tcp_idle pool[TCP_POOL_MAX];
static int pool_used[TCP_POOL_MAX];
/* The process the entries belong to: a child made by fork() inherits the
 * descriptors but must not talk on its parent's connections. */
static pid_t pool_pid;

/* Under pool_mu. Forgets (and closes, in this process only) what a parent
 * process kept. */
static void
pool_check_owner(void)
{
  pid_t me = getpid();
  if (pool_pid == me) return;
  for (int i = 0; i < TCP_POOL_MAX; i++) {
    if (pool_used[i] && pool[i].fd >= 0) close(pool[i].fd);
    pool_used[i] = 0;
  }
  pool_pid = me;
}

uint64_t
collie__tcp_token_hash(const char *token)
{
  return collie__hash64(token ? token : "", token ? strlen(token) : 0, 0x746370706f6f6cull);
}

static int
pool_same_peer(const struct collie__tcp_idle *e, const char *host, int32_t pid, uint64_t token)
{
  return e->pid == pid && e->token == token && !strncmp(e->host, host, sizeof(e->host));
}

int
collie__tcp_pool_put(const struct collie__tcp_idle *e)
{
  if (e->fd < 0 || e->pid <= 0) return 0;
  pthread_mutex_lock(&pool_mu);
  pool_check_owner();
  int free_slot = -1, same = 0;
  for (int i = 0; i < TCP_POOL_MAX; i++) {
    if (!pool_used[i]) {
      if (free_slot < 0) free_slot = i;
    } else if (pool_same_peer(&pool[i], e->host, e->pid, e->token)) {
      same++;
    }
  }
  int kept = free_slot >= 0 && same < COLLIE_TCP_POOL_PER_PEER;
  if (kept) {
    pool[free_slot] = *e;
    pool_used[free_slot] = 1;
  }
  pthread_mutex_unlock(&pool_mu);
  return kept;
}

int
collie__tcp_idle_read_bye(struct collie__tcp_idle *e)
{
  while (!e->bye) {
    ssize_t n =
        recv(e->fd, (char *)&e->byebuf + e->bye_got, sizeof(e->byebuf) - e->bye_got, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n <= 0) return -1; /* it closed or reset the connection */
    e->bye_got += (uint32_t)n;
    if (e->bye_got < sizeof(e->byebuf)) continue;
    const struct collie__tcp_frame *h = &e->byebuf;
    if (h->version != COLLIE_TCP_PROTO_VERSION || h->type != COLLIE_TCP_FRAME_BYE || h->flags ||
        h->chunk_len || h->slot || h->total_len || h->offset)
      return -1; /* anything but its goodbye (an ABORT, data): not reusable */
    e->bye = 1;
  }
  return 1;
}

int
collie__tcp_pool_take(const char *host, int32_t pid, uint64_t token, struct collie__tcp_idle *out)
{
  int found = 0;
  pthread_mutex_lock(&pool_mu);
  pool_check_owner();
  for (int i = 0; i < TCP_POOL_MAX && !found; i++) {
    if (!pool_used[i] || !pool_same_peer(&pool[i], host, pid, token)) continue;
    int st = collie__tcp_idle_read_bye(&pool[i]);
    if (st < 0) {
      close(pool[i].fd);
      pool_used[i] = 0;
    } else if (st > 0) {
      *out = pool[i];
      pool_used[i] = 0;
      found = 1;
    }
  }
  pthread_mutex_unlock(&pool_mu);
  return found;
}

int
collie__tcp_pool_borrow(const char *host, int32_t pid, uint64_t token, struct collie__tcp_idle *out)
{
  int found = 0;
  pthread_mutex_lock(&pool_mu);
  pool_check_owner();
  for (int i = 0; i < TCP_POOL_MAX && !found; i++) {
    if (!pool_used[i] || !pool_same_peer(&pool[i], host, pid, token)) continue;
    *out = pool[i];
    pool_used[i] = 0;
    found = 1;
  }
  pthread_mutex_unlock(&pool_mu);
  return found;
}

void
collie__tcp_pool_give_back(const struct collie__tcp_idle *e)
{
  if (!collie__tcp_pool_put(e)) close(e->fd);
}

int
collie__tcp_pool_count(void)
{
  int n = 0;
  pthread_mutex_lock(&pool_mu);
  pool_check_owner();
  for (int i = 0; i < TCP_POOL_MAX; i++) n += pool_used[i];
  pthread_mutex_unlock(&pool_mu);
  return n;
}
