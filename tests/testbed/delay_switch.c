/*
 * delay_switch.c - the test bed's switch when links need delay, jitter or
 * loss and the kernel has no netem (scripts/testbed.sh --delay/--jitter/
 * --loss): a learning Ethernet switch in user space over the hosts' veth
 * ends, which holds each frame for the link's delay before passing it on.
 *
 *   delay_switch --delay-us D [--jitter-us J] [--loss PCT] [--seed S] IFACE...
 *
 * Each frame from a host is forwarded to the port its destination MAC was
 * last seen on (every other port for broadcast, multicast and unknown
 * destinations) once D +- J microseconds have passed (uniform jitter; a
 * port sends in arrival order, as a real link does, so jitter never
 * reorders), and dropped with probability PCT %. So the one-way latency
 * between two hosts is D. Rate limits stay the kernel's (tbf on the veth
 * ends). Frames travel with their virtio-net header (PACKET_VNET_HDR), so
 * veth's large offloaded segments and unfinished checksums pass whole and
 * are finished by the egress device, as a bridge would. A port holds at
 * most SW_PORT_BYTES in flight (a switch's buffer); beyond that it drops.
 *
 * It runs until SIGTERM or SIGINT, then prints what it forwarded and
 * dropped. Exit status 2 for bad usage or an interface it cannot open.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SW_MAX_PORTS 64
#define SW_MAX_FRAME (65536 + sizeof(struct virtio_net_hdr) + 64)
#define SW_PORT_BYTES (64u << 20)
#define SW_MACS 256

struct sw_frame {
  struct sw_frame *next;
  int64_t due; /* CLOCK_MONOTONIC ns */
  size_t len;
  unsigned char data[]; /* virtio_net_hdr + Ethernet frame */
};

struct sw_port {
  int fd;
  const char *name;
  struct sw_frame *head, *tail;
  size_t queued;
  int64_t last_due;
  unsigned long long sent, dropped_full;
};

static struct sw_port ports[SW_MAX_PORTS];
static int nports;
static struct {
  unsigned char mac[6];
  int port;
} macs[SW_MACS];
static int nmacs;
static volatile sig_atomic_t stop;
static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static int64_t
sw_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t
sw_rand(void)
{
  uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static void
sw_on_signal(int sig)
{
  (void)sig;
  stop = 1;
}

/* The port a MAC was last seen on, or -1; learn records it. */
static int
sw_lookup(const unsigned char *mac)
{
  for (int i = 0; i < nmacs; i++)
    if (!memcmp(macs[i].mac, mac, 6)) return macs[i].port;
  return -1;
}

static void
sw_learn(const unsigned char *mac, int port)
{
  if (mac[0] & 1) return; /* a multicast source is no station */
  for (int i = 0; i < nmacs; i++)
    if (!memcmp(macs[i].mac, mac, 6)) {
      macs[i].port = port;
      return;
    }
  int i = nmacs < SW_MACS ? nmacs++ : (int)(sw_rand() % SW_MACS);
  memcpy(macs[i].mac, mac, 6);
  macs[i].port = port;
}

static int
sw_open(const char *name)
{
  unsigned idx = if_nametoindex(name);
  if (!idx) {
    fprintf(stderr, "delay_switch: no interface %s\n", name);
    return -1;
  }
  int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
  int on = 1, big = 16 << 20;
  struct sockaddr_ll sll = {
      .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL), .sll_ifindex = (int)idx};
  struct packet_mreq mr = {.mr_ifindex = (int)idx, .mr_type = PACKET_MR_PROMISC};
  if (fd < 0 || setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &on, sizeof(on)) != 0 ||
      setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &on, sizeof(on)) != 0 ||
      setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)) != 0 ||
      bind(fd, (struct sockaddr *)&sll, sizeof(sll)) != 0) {
    fprintf(stderr, "delay_switch: cannot open %s: %s\n", name, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
  setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
  return fd;
}

static void
sw_enqueue(struct sw_port *p, const unsigned char *data, size_t len, int64_t due)
{
  if (p->queued + len > SW_PORT_BYTES) {
    p->dropped_full++;
    return;
  }
  struct sw_frame *f = malloc(sizeof(*f) + len);
  if (!f) {
    p->dropped_full++;
    return;
  }
  if (due < p->last_due) due = p->last_due; /* a link keeps its order */
  p->last_due = due;
  f->next = NULL;
  f->due = due;
  f->len = len;
  memcpy(f->data, data, len);
  if (p->tail)
    p->tail->next = f;
  else
    p->head = f;
  p->tail = f;
  p->queued += len;
}

/* Sends port p's frames that are due; returns 0, or -1 when the device is
 * full (try again shortly). */
static int
sw_flush(struct sw_port *p, int64_t now)
{
  while (p->head && p->head->due <= now) {
    struct sw_frame *f = p->head;
    if (send(p->fd, f->data, f->len, 0) < 0) {
      if (errno == EAGAIN || errno == ENOBUFS) return -1;
      p->dropped_full++; /* a frame the device refuses: dropped, as a switch would */
    } else {
      p->sent++;
    }
    p->head = f->next;
    if (!p->head) p->tail = NULL;
    p->queued -= f->len;
    free(f);
  }
  return 0;
}

int
main(int argc, char **argv)
{
  long delay_us = -1, jitter_us = 0;
  double loss = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--delay-us") && i + 1 < argc)
      delay_us = atol(argv[++i]);
    else if (!strcmp(argv[i], "--jitter-us") && i + 1 < argc)
      jitter_us = atol(argv[++i]);
    else if (!strcmp(argv[i], "--loss") && i + 1 < argc)
      loss = atof(argv[++i]);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
      rng = strtoull(argv[++i], NULL, 10);
    else if (argv[i][0] == '-')
      delay_us = -2;
    else if (nports < SW_MAX_PORTS)
      ports[nports++].name = argv[i];
  }
  if (delay_us < 0 || jitter_us < 0 || jitter_us > delay_us || loss < 0 || loss > 100 ||
      nports < 2) {
    fprintf(stderr, "usage: delay_switch --delay-us D [--jitter-us J (<= D)] [--loss PCT] "
                    "[--seed S] IFACE IFACE...\n");
    return 2;
  }
  for (int i = 0; i < nports; i++)
    if ((ports[i].fd = sw_open(ports[i].name)) < 0) return 2;
  prctl(PR_SET_TIMERSLACK, 1UL); /* a 50 us link must not sleep 50 us extra */
  struct sigaction sa = {.sa_handler = sw_on_signal};
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  unsigned char *buf = malloc(SW_MAX_FRAME);
  struct pollfd pfd[SW_MAX_PORTS];
  unsigned long long lost = 0, received = 0;
  if (!buf) return 1;
  const size_t vnet = sizeof(struct virtio_net_hdr);
  while (!stop) {
    int64_t now = sw_now(), next = -1;
    int busy = 0;
    for (int i = 0; i < nports; i++) {
      busy |= sw_flush(&ports[i], now) != 0;
      if (ports[i].head && (next < 0 || ports[i].head->due < next)) next = ports[i].head->due;
    }
    struct timespec ts, *tp = NULL;
    if (next >= 0 || busy) {
      int64_t wait = busy ? 20000 : next - now;
      if (wait < 0) wait = 0;
      ts.tv_sec = (time_t)(wait / 1000000000);
      ts.tv_nsec = (long)(wait % 1000000000);
      tp = &ts;
    }
    for (int i = 0; i < nports; i++) pfd[i] = (struct pollfd){.fd = ports[i].fd, .events = POLLIN};
    int n = ppoll(pfd, (nfds_t)nports, tp, NULL);
    if (n <= 0) continue;
    now = sw_now();
    for (int i = 0; i < nports; i++) {
      if (!(pfd[i].revents & POLLIN)) continue;
      for (int k = 0; k < 64; k++) {
        ssize_t len = recv(ports[i].fd, buf, SW_MAX_FRAME, 0);
        if (len < (ssize_t)(vnet + 14)) break;
        received++;
        const unsigned char *eth = buf + vnet;
        sw_learn(eth + 6, i);
        if (loss > 0 && (double)(sw_rand() % 1000000) < loss * 10000.0) {
          lost++;
          continue;
        }
        int64_t due = now + delay_us * 1000;
        if (jitter_us)
          due += ((int64_t)(sw_rand() % (uint64_t)(2 * jitter_us + 1)) - jitter_us) * 1000;
        int to = (eth[0] & 1) ? -1 : sw_lookup(eth);
        for (int j = 0; j < nports; j++)
          if (j != i && (to < 0 || to == j)) sw_enqueue(&ports[j], buf, (size_t)len, due);
      }
    }
  }
  unsigned long long sent = 0, full = 0;
  for (int i = 0; i < nports; i++) {
    sent += ports[i].sent;
    full += ports[i].dropped_full;
  }
  fprintf(stderr,
          "delay_switch: %llu frames in, %llu out, %llu lost (--loss), %llu dropped (queue full)\n",
          received, sent, lost, full);
  free(buf);
  return 0;
}
