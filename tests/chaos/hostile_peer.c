/*
 * hostile_peer.c - a stranger on the machine of a running job
 * (scripts/hostile.sh): while the job's ranks (tests/chaos/steady_rank.c)
 * split and reduce, it keeps connecting to the job's store and to every
 * listening socket of the ranks' processes it can find, and says the wrong
 * things:
 *
 *   store:  garbage; a HELLO with a wrong token; a request before any HELLO;
 *           a HELLO whose token length is a gigabyte; a slow trickle of a
 *           HELLO, one byte per 100 ms; connections that say nothing
 *   ranks:  garbage; a hello with a wrong token; another protocol version;
 *           the right token for a communicator that does not exist (an
 *           insider's mistake); a trickle; silence
 *
 * A rank's listener lives only while a communicator is being set up (a few
 * milliseconds per split), so it polls for them through the kernel's socket
 * diagnostics, and owns one when a rank's /proc/PID/fd holds it. Every answer must
 * be a refusal or a closed connection: one acceptance fails the run. It
 * stops when $CHAOS_DIR/stop appears (at most 300 s) and prints what it did.
 *
 *   hostile_peer NRANKS        (DIR: $CHAOS_DIR; the right token: $COLLIE_JOB_TOKEN)
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HP_MAX_HELD 16 /* trickles and silent connections kept open at once */

static const char *hp_dir;
static long hp_pids[64];
static int hp_npids, hp_nranks, hp_store_port;

/* What happened, per target and kind. */
enum { HP_REFUSED, HP_CLOSED, HP_NO_ANSWER, HP_ACCEPTED, HP_NOCONNECT, HP_NOUTCOMES };
static const char *const hp_outcomes[] = {"refused", "closed", "no answer in 2 s", "ACCEPTED",
                                          "gone before connect"};
static const char *const hp_store_kinds[] = {"garbage", "wrong token", "request before HELLO",
                                             "1 GiB token length"};
static const char *const hp_rank_kinds[] = {"garbage", "wrong token", "other version",
                                            "right token, unknown communicator"};
static long hp_store_count[4][HP_NOUTCOMES], hp_rank_count[4][HP_NOUTCOMES];
static long hp_listeners_seen, hp_trickle_bytes, hp_held_total, hp_gone;

struct hp_held {
  int fd;
  int trickle; /* sends a byte now and then; else silent */
};
static struct hp_held hp_held[HP_MAX_HELD];

static double
hp_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int
hp_exists(const char *name)
{
  char path[1024];
  struct stat st;
  snprintf(path, sizeof(path), "%s/%s", hp_dir, name);
  return stat(path, &st) == 0;
}

static int
hp_connect(int port)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Sends bytes and reads up to want bytes of answer within 2 s: the bytes
 * read, 0 when the peer closed first, -1 when nothing came. */
static int
hp_exchange(int fd, const void *msg, size_t len, unsigned char *ans, size_t want)
{
  if (len && send(fd, msg, len, MSG_NOSIGNAL) < 0) return 0;
  size_t got = 0;
  double until = hp_now() + 2.0;
  while (got < want) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ms = (int)((until - hp_now()) * 1000);
    if (ms <= 0 || poll(&p, 1, ms) <= 0) return got ? (int)got : -1;
    ssize_t n = recv(fd, ans + got, want - got, 0);
    if (n <= 0) return (int)got;
    got += (size_t)n;
  }
  return (int)got;
}

/* ---- The store (docs/bootstrap.md: 32-byte header, then key and value) ---- */

struct hp_store_hdr {
  uint32_t magic;
  uint16_t version, op;
  uint64_t id;
  uint32_t key_len, val_len, status, reserved;
};

static void
hp_attack_store(int kind)
{
  int fd = hp_connect(hp_store_port);
  if (fd < 0) {
    hp_store_count[kind][HP_NOCONNECT]++;
    return;
  }
  unsigned char msg[64 + 64], ans[32];
  struct hp_store_hdr h = {.magic = htole32(0x53434c43u), .version = htole16(2)};
  size_t len = sizeof(h);
  switch (kind) {
  case 0:
    for (size_t i = 0; i < 64; i++) msg[i] = (unsigned char)rand();
    len = 64;
    break;
  case 1:
    h.op = htole16(1);
    h.key_len = htole32(16);
    memcpy(msg, &h, sizeof(h));
    memcpy(msg + sizeof(h), "not-the-token-!!", 16);
    len += 16;
    break;
  case 2:
    h.op = htole16(3); /* GET */
    h.key_len = htole32(4);
    memcpy(msg, &h, sizeof(h));
    memcpy(msg + sizeof(h), "peer", 4);
    len += 4;
    break;
  default:
    h.op = htole16(1);
    h.key_len = htole32(1u << 30);
    memcpy(msg, &h, sizeof(h));
  }
  int n = hp_exchange(fd, msg, len, ans, sizeof(ans));
  close(fd);
  if (n == (int)sizeof(ans)) {
    struct hp_store_hdr r;
    memcpy(&r, ans, sizeof(r));
    /* Only REFUSED (17) or ERROR (18) may answer a stranger. */
    int op = le16toh(r.op);
    hp_store_count[kind][op == 17 || op == 18 ? HP_REFUSED : HP_ACCEPTED]++;
  } else {
    hp_store_count[kind][n < 0 ? HP_NO_ANSWER : HP_CLOSED]++;
  }
}

/* ---- The ranks' listeners (docs/wire.md: the 24-byte hello) ---- */

/* fd: already connected to a rank's listener (hp_listeners). */
static void
hp_attack_rank(int fd, int kind)
{
  const char *tok = getenv("COLLIE_JOB_TOKEN");
  unsigned char msg[24 + 256], ans[1];
  size_t len = 24;
  if (kind == 0) {
    for (size_t i = 0; i < 64; i++) msg[i] = (unsigned char)rand();
    len = 64;
  } else {
    const char *t = kind == 3 && tok ? tok : "not-the-job-token";
    size_t tl = strlen(t) < 256 ? strlen(t) : 255;
    uint32_t magic = htole32(0x6c6c6f63u);
    uint16_t version = htole16(kind == 2 ? 99 : 2), tlen = htole16((uint16_t)tl);
    uint64_t hash = htole64(((uint64_t)rand() << 32) | (uint64_t)rand());
    uint32_t from = htole32(1), to = htole32(0);
    memcpy(msg, &magic, 4);
    memcpy(msg + 4, &version, 2);
    memcpy(msg + 6, &tlen, 2);
    memcpy(msg + 8, &hash, 8);
    memcpy(msg + 16, &from, 4);
    memcpy(msg + 20, &to, 4);
    memcpy(msg + 24, t, tl);
    len += tl;
  }
  int n = hp_exchange(fd, msg, len, ans, 1);
  close(fd);
  if (n == 1)
    hp_rank_count[kind][ans[0] == 'A' ? HP_ACCEPTED : HP_REFUSED]++;
  else
    hp_rank_count[kind][n < 0 ? HP_NO_ANSWER : HP_CLOSED]++;
}

/* ---- Held connections: trickles and silence ---- */

/* Keeps fd (connected) open; closes it when there is no room. */
static void
hp_hold(int fd, int trickle)
{
  if (fd < 0) return;
  for (int i = 0; i < HP_MAX_HELD; i++) {
    if (hp_held[i].fd > 0) continue;
    hp_held[i].fd = fd;
    hp_held[i].trickle = trickle;
    hp_held_total++;
    return;
  }
  close(fd);
}

static void
hp_tend_held(void)
{
  for (int i = 0; i < HP_MAX_HELD; i++) {
    if (hp_held[i].fd <= 0) continue;
    char c;
    ssize_t n = recv(hp_held[i].fd, &c, 1, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) ||
        (hp_held[i].trickle && send(hp_held[i].fd, "c", 1, MSG_NOSIGNAL) != 1)) {
      close(hp_held[i].fd); /* the peer cut it: as it should */
      hp_held[i].fd = 0;
      continue;
    }
    if (hp_held[i].trickle) hp_trickle_bytes++;
  }
}

/* ---- Finding the ranks' listening sockets ---- */

static int
hp_has_inode(const long *inodes, int n, long ino)
{
  for (int i = 0; i < n; i++)
    if (inodes[i] == ino) return 1;
  return 0;
}

/* The socket inodes the ranks' processes hold now. */
static int
hp_rank_inodes(long *inodes, int max)
{
  int ni = 0;
  for (int k = 0; k < hp_npids; k++) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/fd", hp_pids[k]);
    DIR *d = opendir(path);
    if (!d) continue;
    struct dirent *e;
    while ((e = readdir(d)) && ni < max) {
      char link[128], target[64];
      snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
      ssize_t n = readlink(link, target, sizeof(target) - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      long ino;
      if (sscanf(target, "socket:[%ld]", &ino) == 1) inodes[ni++] = ino;
    }
    closedir(d);
  }
  return ni;
}

/* The loopback listeners now, as (port, inode) pairs, through the kernel's
 * socket diagnostics: /proc/net/tcp also lists every TIME_WAIT socket, and
 * after a while of churn reading it took 20 ms, longer than a listener lives. */
static int
hp_diag_listeners(int nl, int *ports, long *inodes, int max)
{
  struct {
    struct nlmsghdr nh;
    struct inet_diag_req_v2 r;
  } req;
  memset(&req, 0, sizeof(req));
  req.nh.nlmsg_len = sizeof(req);
  req.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.r.sdiag_family = AF_INET;
  req.r.sdiag_protocol = IPPROTO_TCP;
  req.r.idiag_states = 1u << 10; /* TCP_LISTEN */
  if (send(nl, &req, sizeof(req), 0) < 0) return 0;
  static char buf[65536];
  int n = 0;
  for (;;) {
    ssize_t len = recv(nl, buf, sizeof(buf), 0);
    if (len <= 0) return n;
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)len);
         h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) return n;
      const struct inet_diag_msg *m = NLMSG_DATA(h);
      if (n < max) {
        ports[n] = ntohs(m->id.idiag_sport);
        inodes[n++] = (long)m->idiag_inode;
      }
    }
  }
}

/* Connections to sockets in LISTEN state that the ranks' processes hold,
 * other than the store's. A listener lives for a millisecond or so, and
 * reading the ranks' descriptors takes about as long: so a new listener is
 * connected to at once, and the connection is kept only when the listener
 * turns out to be a rank's (another process's is left without a byte said). */
static int
hp_listeners(int nl, int *fds, int max)
{
  static long seen[4096], inodes[8192];
  static int nseen;
  int lports[256];
  long linodes[256];
  int nlis = hp_diag_listeners(nl, lports, linodes, 256), np = 0;
  for (int i = 0; i < nlis && np < max; i++) {
    if (lports[i] == hp_store_port || hp_has_inode(seen, nseen, linodes[i])) continue;
    /* Looked at once: a rank's is attacked now, another process's never. */
    if (nseen < 4096) seen[nseen++] = linodes[i];
    int fd = hp_connect(lports[i]);
    if (fd < 0) {
      hp_gone++;
      continue;
    }
    int ni = hp_rank_inodes(inodes, 8192);
    if (hp_has_inode(inodes, ni, linodes[i]))
      fds[np++] = fd;
    else
      close(fd);
  }
  return np;
}

static void
hp_read_pids(void)
{
  hp_npids = 0;
  for (int r = 0; r < hp_nranks && r < 64; r++) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/pid%d", hp_dir, r);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (fscanf(f, "%ld", &hp_pids[hp_npids]) == 1) hp_npids++;
    fclose(f);
  }
}

static void
hp_print(const char *target, const char *const *kinds, long count[][HP_NOUTCOMES])
{
  for (int k = 0; k < 4; k++) {
    printf("  %s, %s:", target, kinds[k]);
    for (int o = 0; o < HP_NOUTCOMES; o++)
      if (count[k][o]) printf(" %s %ld", hp_outcomes[o], count[k][o]);
    printf("\n");
  }
}

int
main(int argc, char **argv)
{
  if (argc != 2 || !(hp_dir = getenv("CHAOS_DIR"))) {
    fprintf(stderr, "usage: CHAOS_DIR=dir hostile_peer NRANKS\n");
    return 2;
  }
  hp_nranks = atoi(argv[1]);
  srand((unsigned)getpid());
  int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) {
    perror("hostile_peer: netlink socket diagnostics");
    return 2;
  }
  double start = hp_now(), last_pids = 0, last_store = 0, last_tend = 0;
  int store_kind = 0, rank_kind = 0, round = 0;
  while (!hp_exists("stop") && hp_now() - start < 300) {
    double now = hp_now();
    if (now - last_pids > 0.2) {
      hp_read_pids();
      if (!hp_store_port) {
        char path[1024], url[256];
        snprintf(path, sizeof(path), "%s/store", hp_dir);
        FILE *f = fopen(path, "r");
        if (f) {
          if (fscanf(f, "%255s", url) == 1) {
            const char *colon = strrchr(url, ':');
            if (!strncmp(url, "tcp://", 6) && colon) hp_store_port = atoi(colon + 1);
          }
          fclose(f);
        }
      }
      last_pids = now;
    }
    int fds[64];
    int np = hp_listeners(nl, fds, 64);
    hp_listeners_seen += np;
    for (int i = 0; i < np; i++) {
      if (round % 5 == 4)
        hp_hold(fds[i], round % 10 == 4);
      else
        hp_attack_rank(fds[i], rank_kind++ % 4);
    }
    if (hp_store_port && now - last_store > 0.05) {
      if (round % 7 == 6)
        hp_hold(hp_connect(hp_store_port), round % 14 == 6);
      else
        hp_attack_store(store_kind++ % 4);
      last_store = now;
    }
    if (now - last_tend > 0.1) {
      hp_tend_held();
      last_tend = now;
    }
    round++;
  }
  for (int i = 0; i < HP_MAX_HELD; i++)
    if (hp_held[i].fd > 0) close(hp_held[i].fd);
  long accepted = 0;
  for (int k = 0; k < 4; k++)
    accepted += hp_store_count[k][HP_ACCEPTED] + hp_rank_count[k][HP_ACCEPTED];
  printf("hostile_peer: %.1f s; the store at port %d; rank listeners seen %ld times; %ld "
         "connections held (trickles sent %ld bytes); %ld listeners gone before a connect\n",
         hp_now() - start, hp_store_port, hp_listeners_seen, hp_held_total, hp_trickle_bytes,
         hp_gone);
  hp_print("store", hp_store_kinds, hp_store_count);
  hp_print("ranks", hp_rank_kinds, hp_rank_count);
  if (accepted) printf("hostile_peer: %ld attack(s) were ACCEPTED\n", accepted);
  return accepted ? 1 : 0;
}
