/*
 * util.h - libc-only helpers shared by every module: clocks, futexes, sockets,
 * small string helpers. Syscalls of the library live here or in src/transport.
 * Nothing in this module knows about communicators.
 */
#ifndef COLLIE_UTIL_H
#define COLLIE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "collie.h"

/* ---- clock.c ---- */

/* Monotonic nanoseconds (CLOCK_MONOTONIC). */
int64_t collie__now_ns(void);
/* CLOCK_MONOTONIC at the kernel's last tick: the same time base, at most
 * collie__coarse_lag_ns() behind collie__now_ns(), for about a quarter of
 * its cost. */
int64_t collie__now_coarse_ns(void);
/* How far the coarse clock may lag (its resolution, clock_getres). */
int64_t collie__coarse_lag_ns(void);
/* Deadline timeout_ms from now; timeout_ms < 0 means "never" (INT64_MAX). */
int64_t collie__deadline_after_ms(int64_t timeout_ms);
/* The same from a time already read (now_ns from collie__now_ns()). */
int64_t collie__deadline_from(int64_t now_ns, int64_t timeout_ms);
/* Milliseconds left until deadline_ns, clamped to [0, INT32_MAX]; for poll(). */
int collie__ms_until(int64_t deadline_ns);
/* Sleeps ns nanoseconds (nanosleep, restarted on EINTR). */
void collie__sleep_ns(int64_t ns);
/* A hint to the CPU inside a spin loop. */
void collie__cpu_relax(void);
/* Asks for the cache line at p in a writable state, ahead of a store to it.
 * __builtin_prefetch(p, 1) is a plain read prefetch on a baseline x86-64
 * build (PREFETCHW needs -mprfchw): the line then arrives shared and the
 * store still waits for the other core to drop it. PREFETCHW has been a
 * no-op hint on the x86 CPUs that lack it, so it needs no CPU check. */
static inline void
collie__prefetch_write(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
  __asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
#else
  __builtin_prefetch(p, 1);
#endif
}
/* Number of online CPUs (>= 1). */
int collie__ncpus(void);

/* ---- proc.c: /proc/<pid>/stat of another process of this host ---- */

/* Reads it into buf (len bytes) and returns its fields from the state on
 * (past the command name), or NULL; *gone is 1 when the process does not
 * exist any more (reaped). */
const char *collie__proc_stat(int pid, char *buf, size_t len, int *gone);
/* The CPU the process last ran on, or -1 when /proc does not say. */
int collie__proc_cpu(int pid);
/* Whether the process has ended: reaped, or a zombie its parent has not
 * waited for yet (a killed rank of a launcher that reaps later). */
int collie__proc_dead(int pid);

/* ---- backoff.c: waiting for another process, before sleeping ---- */

struct collie__backoff {
  int spin;            /* polls allowed; 0: oversubscribed, yield at once */
  int polls, yields;   /* done so far */
  int64_t until;       /* end of the spin (set at the 64th poll) */
  int64_t yield_until; /* end of the yields, with a core of our own */
  int64_t yielded;     /* oversubscribed: when the last yield began (0: none yet) */
  /* Optional: whether a rank this one may wait for last ran on this CPU
   * (the spin then ends at its next clock read: see backoff.c). */
  int (*crowded)(void *arg);
  void *crowded_arg;
};
/* Starts a wait that may spin spin polls (0: ranks outnumber cores). */
void collie__backoff_init(struct collie__backoff *b, int spin);
/* The same, ending the spin early whenever crowded(arg) says a peer shares
 * this rank's CPU. */
void collie__backoff_init_crowded(struct collie__backoff *b, int spin, int (*crowded)(void *),
                                  void *arg);
/* One round between two looks at what the caller waits for: relaxes the CPU
 * or yields it and returns 1, or returns 0 once the caller should sleep (the
 * spin and the yields are over, or deadline_ns passed while yielding). */
int collie__backoff_next(struct collie__backoff *b, int64_t deadline_ns);

/* ---- copy.c ---- */

/* Where collie__copy switches to non-temporal stores. */
#define COLLIE__COPY_NT_MIN ((size_t)4 << 20)
/* memcpy of a block the caller will not read back soon (an output block of a
 * collective); non-temporal from COLLIE__COPY_NT_MIN bytes up on x86-64.
 * The regions must not overlap. */
void collie__copy(void *dst, const void *src, size_t n);
/* The same, non-temporal whatever n (x86-64; memcpy elsewhere). */
void collie__copy_stream(void *dst, const void *src, size_t n);
/* n bytes of an output of `whole` bytes that arrives in parts (a message's
 * chunks, a flat area's pieces): non-temporal when the whole is large. */
static inline void
collie__copy_part(void *dst, const void *src, size_t n, size_t whole)
{
  if (whole >= COLLIE__COPY_NT_MIN)
    collie__copy_stream(dst, src, n);
  else
    memcpy(dst, src, n);
}

/* ---- futex.c ---- */

/* Blocks while *addr == expected, at most until deadline_ns (monotonic);
 * may return early (spuriously, on EINTR, or when woken). addr may be in a
 * MAP_SHARED mapping: the shared (not private) futex is used. */
void collie__futex_wait(uint32_t *addr, uint32_t expected, int64_t deadline_ns);
/* Wakes every waiter on addr. */
void collie__futex_wake_all(uint32_t *addr);
/* Asymmetric fences between processes (membarrier(2)). A process that
 * registered (collie__membarrier_register returned 1) may publish a word
 * and then read another process's word with no fence between them, as long
 * as that process, after storing the word it expects read and before
 * reading the published one, calls collie__membarrier_all(): the kernel
 * then runs a full fence on every CPU running a registered process. The
 * fast side saves a locked instruction per message; the slow side pays a
 * system call and an interrupt per other CPU (microseconds), so it is for
 * a side about to sleep anyway. Register returns 0 where the kernel, a
 * seccomp filter or valgrind lacks the commands; membarrier_all returns 0 on
 * success, -1 with errno set. */
int collie__membarrier_register(void);
int collie__membarrier_all(void);

/* ---- sock.c: TCP helpers. Every function that can block takes a deadline. ---- */

/* Parses "host:port" (host may be "[v6]"); port may be 0. Writes host and
 * port; returns 0, or -1 when malformed. */
int collie__parse_hostport(const char *s, char *host, size_t hostlen, int *port);
/* Listens on host:port (port 0: any free port), backlog large, SO_REUSEADDR,
 * non-blocking. Returns the fd and the bound port, or -1 with errno set. */
int collie__sock_listen(const char *host, int port, int *bound_port);
/* Connects to host:port before deadline_ns, retrying refused connections
 * (the listener may not be up yet). Returns a blocking fd with TCP_NODELAY,
 * or -1 with errno set (ETIMEDOUT at the deadline). */
int collie__sock_connect(const char *host, int port, int64_t deadline_ns);
/* Accepts one connection before deadline_ns on a non-blocking listener. Returns a
 * blocking fd with TCP_NODELAY, or -1 with errno set (ETIMEDOUT). */
int collie__sock_accept(int lfd, int64_t deadline_ns);
/* Sends / receives exactly n bytes before deadline_ns, whatever the fd's
 * blocking mode. Return 0, or -1 with errno set (ETIMEDOUT, ECONNRESET; a clean
 * close during recv gives ECONNRESET). */
int collie__sock_send_all(int fd, const void *buf, size_t n, int64_t deadline_ns);
int collie__sock_recv_all(int fd, void *buf, size_t n, int64_t deadline_ns);
int collie__sock_set_nonblock(int fd, int on);
/* The address other hosts can reach this one at, for a listener: the
 * interface named by ifname when not NULL, else the first non-loopback IPv4
 * address, else 127.0.0.1. Returns 0 or -1. */
int collie__sock_local_addr(const char *ifname, char *out, size_t outlen);

/* ---- misc ---- */

/* FNV-1a 64-bit hash, chainable: pass the previous value as seed (0 to start). */
uint64_t collie__hash64(const void *data, size_t n, uint64_t seed);
/* Fills buf with n bytes from the kernel's random source (getrandom). Returns
 * 0, or -1 with errno. */
int collie__random_bytes(void *buf, size_t n);
/* strdup that returns NULL only on allocation failure; NULL in, NULL out. */
char *collie__strdup(const char *s);
/* Creates directory path and its missing parents (mode 0777 before umask), as
 * mkdir -p. Returns 0 (also when it exists), or -1 with errno. */
int collie__mkdir_p(const char *path);
/* Makes directory path if missing, one level: its parent must exist (errno
 * ENOENT otherwise), so a mistyped log directory is an error rather than a
 * tree of new directories. 0 when path is a directory now; -1 with errno. */
int collie__mkdir_one(const char *path);
/* collie_dtype_size inline, for the per-call paths (the API's checks, the
 * dispatch): a table load instead of a call. 0 for a value that is no
 * dtype. */
static inline size_t
collie__dtype_bytes(collie_dtype_t dtype)
{
  switch (dtype) {
#define COLLIE_XX_(name, size, isf, str)                                                           \
  case COLLIE_##name:                                                                              \
    return size;
    COLLIE_DTYPE_MAP(COLLIE_XX_)
#undef COLLIE_XX_
  default:
    return 0;
  }
}
/* Formats into a fixed buffer, always NUL-terminated, truncating. */
void collie__fmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Whether a (alen bytes) equals b (blen bytes), in time independent of
 * where they differ: secrets (job tokens) are compared with it. */
int collie__equal_ct(const void *a, size_t alen, const void *b, size_t blen);

#endif /* COLLIE_UTIL_H */
