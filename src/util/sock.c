/* sock.c - TCP socket helpers for the store and the tcp transport. Every call
 * that can block takes a deadline and waits in poll(), never forever. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/util.h"

int
collie__parse_hostport(const char *s, char *host, size_t hostlen, int *port)
{
  const char *colon;
  size_t hl;
  if (!s || !*s) return -1;
  if (s[0] == '[') {
    const char *end = strchr(s, ']');
    if (!end || end[1] != ':') return -1;
    hl = (size_t)(end - s - 1);
    s++;
    colon = end + 1;
  } else {
    colon = strrchr(s, ':');
    if (!colon) return -1;
    hl = (size_t)(colon - s);
  }
  if (hl == 0 || hl >= hostlen) return -1;
  memcpy(host, s, hl);
  host[hl] = '\0';
  char *endp;
  errno = 0;
  long p = strtol(colon + 1, &endp, 10);
  if (errno || endp == colon + 1 || *endp || p < 0 || p > 65535) return -1;
  *port = (int)p;
  return 0;
}

int
collie__sock_set_nonblock(int fd, int on)
{
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0) return -1;
  fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
  return fcntl(fd, F_SETFL, fl);
}

static void
sock_tune(int fd)
{
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static struct addrinfo *
sock_resolve(const char *host, int port, int passive)
{
  struct addrinfo hints, *res = NULL;
  char ps[16];
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  snprintf(ps, sizeof(ps), "%d", port);
  int rc = getaddrinfo(host, ps, &hints, &res);
  if (rc != 0) {
    errno = rc == EAI_SYSTEM ? errno : EHOSTUNREACH;
    return NULL;
  }
  return res;
}

int
collie__sock_listen(const char *host, int port, int *bound_port)
{
  struct addrinfo *res = sock_resolve(host, port, 1);
  if (!res) return -1;
  int fd = -1, err = EADDRNOTAVAIL;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1024) == 0) break;
    err = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) {
    errno = err;
    return -1;
  }
  struct sockaddr_storage ss;
  socklen_t sl = sizeof(ss);
  getsockname(fd, (struct sockaddr *)&ss, &sl);
  if (bound_port)
    *bound_port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)&ss)->sin_port);
  collie__sock_set_nonblock(fd, 1);
  return fd;
}

/* One non-blocking connect attempt bounded by deadline_ns; 0 or -1 with errno. */
static int
sock_connect_once(int fd, const struct addrinfo *ai, int64_t deadline_ns)
{
  collie__sock_set_nonblock(fd, 1);
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) return 0;
  if (errno != EINPROGRESS) return -1;
  for (;;) {
    struct pollfd p = {fd, POLLOUT, 0};
    int ms = collie__ms_until(deadline_ns);
    if (ms == 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    int n = poll(&p, 1, ms > 100 ? 100 : ms);
    if (n < 0 && errno != EINTR) return -1;
    if (n > 0) break;
  }
  int err = 0;
  socklen_t el = sizeof(err);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
  if (err) {
    errno = err;
    return -1;
  }
  return 0;
}

int
collie__sock_connect(const char *host, int port, int64_t deadline_ns)
{
  int64_t backoff = 1000000; /* 1 ms, doubling to 100 ms: the listener may not be up yet */
  for (;;) {
    struct addrinfo *res = sock_resolve(host, port, 0);
    int err = errno;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
      int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0) {
        err = errno;
        continue;
      }
      if (sock_connect_once(fd, ai, deadline_ns) == 0) {
        freeaddrinfo(res);
        collie__sock_set_nonblock(fd, 0);
        sock_tune(fd);
        return fd;
      }
      err = errno;
      close(fd);
    }
    if (res) freeaddrinfo(res);
    if (err != ECONNREFUSED && err != ETIMEDOUT && err != EHOSTUNREACH && err != ENETUNREACH &&
        err != ECONNRESET && err != EAGAIN) {
      errno = err;
      return -1;
    }
    if (collie__now_ns() + backoff >= deadline_ns) {
      errno = err == ECONNREFUSED ? ECONNREFUSED : ETIMEDOUT;
      if (collie__now_ns() >= deadline_ns || err != ECONNREFUSED) errno = ETIMEDOUT;
      return -1;
    }
    collie__sleep_ns(backoff);
    if (backoff < 100000000) backoff *= 2;
  }
}

int
collie__sock_accept(int lfd, int64_t deadline_ns)
{
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) {
      collie__sock_set_nonblock(fd, 0);
      sock_tune(fd);
      return fd;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      return -1;
    int ms = collie__ms_until(deadline_ns);
    if (ms == 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    struct pollfd p = {lfd, POLLIN, 0};
    if (poll(&p, 1, ms) < 0 && errno != EINTR) return -1;
  }
}

/* Waits until fd is ready for events or the deadline passes; 0 or -1 (ETIMEDOUT). */
static int
sock_wait(int fd, short events, int64_t deadline_ns)
{
  for (;;) {
    int ms = collie__ms_until(deadline_ns);
    if (ms == 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    struct pollfd p = {fd, events, 0};
    int n = poll(&p, 1, ms);
    if (n > 0) return 0;
    if (n < 0 && errno != EINTR) return -1;
  }
}

int
collie__sock_send_all(int fd, const void *buf, size_t n, int64_t deadline_ns)
{
  const char *p = buf;
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (sock_wait(fd, POLLOUT, deadline_ns) < 0) return -1;
      continue;
    }
    return -1;
  }
  return 0;
}

int
collie__sock_recv_all(int fd, void *buf, size_t n, int64_t deadline_ns)
{
  char *p = buf;
  while (n > 0) {
    ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= (size_t)r;
      continue;
    }
    if (r == 0) {
      errno = ECONNRESET;
      return -1;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (sock_wait(fd, POLLIN, deadline_ns) < 0) return -1;
      continue;
    }
    return -1;
  }
  return 0;
}

int
collie__sock_local_addr(const char *ifname, char *out, size_t outlen)
{
  struct ifaddrs *ifa = NULL, *it;
  int found = 0;
  if (getifaddrs(&ifa) == 0) {
    for (it = ifa; it && !found; it = it->ifa_next) {
      if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET) continue;
      if (ifname ? strcmp(it->ifa_name, ifname) != 0 : (it->ifa_flags & IFF_LOOPBACK) != 0)
        continue;
      if (!(it->ifa_flags & IFF_UP)) continue;
      inet_ntop(AF_INET, &((struct sockaddr_in *)it->ifa_addr)->sin_addr, out, (socklen_t)outlen);
      found = 1;
    }
    freeifaddrs(ifa);
  }
  if (found) return 0;
  if (ifname) {
    errno = ENODEV;
    return -1;
  }
  snprintf(out, outlen, "127.0.0.1");
  return 0;
}
