/*
 * netdev.h - the network seam: what a network device gives collie's
 * network transport (netx.c), shaped by what fabrics offer (libfabric's
 * RDM endpoints, NCCL's net plugins) rather than by sockets.
 *
 * A device is one endpoint of this process for one communicator:
 *   listen   opens it and says its address (opaque bytes to publish);
 *   connect  makes a peer's published address reachable (never blocks);
 *   accept   is the transport's: every peer's first message is a hello that
 *            proves the job token (netx.c), so a connectionless device has
 *            nothing to accept;
 *   send/recv_any  untagged messages into receives posted for any source
 *            (the transport's control messages: headers, eager payloads);
 *   tsend/trecv  tagged messages, a receive directed at one peer and tag
 *            (bulk payloads, straight into the caller's buffer);
 *   cancel   withdraws a posted receive (a failed transport's);
 *   gone     tells the device a peer aborted: it sends nothing more;
 *   progress  drives the device (manual progress: nothing moves between
 *            calls) and completes operations: each op's done() runs there;
 *   reg/dereg  memory registration, for devices that need it (need_reg)
 *            and for those that can use it; netx.c keeps a cache;
 *   wait_fd  a descriptor that becomes readable when progress has work,
 *            where the device has one (else -1: the caller naps), with
 *            trywait saying whether sleeping on it now is safe;
 *   close.
 * Operations start in order per peer and kind; completions may come in any
 * order. A device is driven by one thread at a time.
 */
#ifndef COLLIE_TRANSPORT_NETDEV_H
#define COLLIE_TRANSPORT_NETDEV_H

#include <stddef.h>
#include <stdint.h>

#include "collie.h"

#define COLLIE_NETDEV_ADDR_MAX 160

struct collie__netdev;    /* a device's endpoint for one communicator */
struct collie__netdev_mr; /* a registration */

/* One send or receive a device works on. The transport owns it and keeps
 * it, and the memory it names, until done() ran. */
struct collie__netdev_op {
  /* The device's own space (libfabric: its operation context); first, so
   * that a device may hand the op's address to its library as context. */
  uint64_t dev[8];
  /* Called from progress once the operation finished: rc SUCCESS with the
   * bytes moved (a receive: the message's), or the failure and a message
   * (the thread's error text) naming the peer where the device knows it. */
  void (*done)(struct collie__netdev_op *op, collie_result_t rc, size_t len);
  void *arg; /* the transport's */
  int peer;  /* set by the device for a receive from any source, when it knows (-1) */
};

/* What listen needs. */
struct collie__netdev_cfg {
  int rank, size;      /* in the communicator */
  const char *library; /* the device's library (COLLIE_OFI_LIBRARY), or NULL: its default */
  int reg_all;         /* register every buffer, whether or not the provider asks */
};

/* "Try again": the device has no room for the operation now; progress,
 * then start it again. Never an error a caller sees. */
#define COLLIE_NETDEV_AGAIN ((collie_result_t)-1000)

struct collie__netdev_ops {
  const char *name; /* the transport's name: "ofi" */
  /* Whether the device can run in this process (cfg's library loads and a
   * provider answers): 1, else 0 with why in why. *hardware: the provider
   * it would pick drives a network interface of its own (not sockets or
   * shared memory). The first call's answer stands for the process. */
  int (*available)(const struct collie__netdev_cfg *cfg, char *why, size_t len, int *hardware);
  /* The provider's name ("tcp;ofi_rxm"), which every peer must share:
   * addresses of one provider mean nothing to another. */
  const char *(*provider)(const struct collie__netdev *d);
  collie_result_t (*listen)(const struct collie__netdev_cfg *cfg, struct collie__netdev **out,
                            void *addr, size_t *addrlen);
  collie_result_t (*connect)(struct collie__netdev *d, int peer, const void *addr, size_t addrlen);
  collie_result_t (*send)(struct collie__netdev *d, int peer, const void *buf, size_t len,
                          struct collie__netdev_mr *mr, struct collie__netdev_op *op);
  /* Sends len bytes (at most inject_max(d)) untagged to peer without a
   * completion: buf may be reused at return. A failure shows at a later
   * progress, as the device's failure. NULL: the device has none. */
  collie_result_t (*inject)(struct collie__netdev *d, int peer, const void *buf, size_t len);
  size_t (*inject_max)(const struct collie__netdev *d);
  collie_result_t (*recv_any)(struct collie__netdev *d, void *buf, size_t len,
                              struct collie__netdev_mr *mr, struct collie__netdev_op *op);
  collie_result_t (*tsend)(struct collie__netdev *d, int peer, const void *buf, size_t len,
                           uint64_t tag, struct collie__netdev_mr *mr,
                           struct collie__netdev_op *op);
  collie_result_t (*trecv)(struct collie__netdev *d, int peer, void *buf, size_t len, uint64_t tag,
                           struct collie__netdev_mr *mr, struct collie__netdev_op *op);
  collie_result_t (*progress)(struct collie__netdev *d);
  /* Withdraws a posted receive: it never writes its buffer after this
   * returns (its done() may still run, with an error). */
  void (*cancel)(struct collie__netdev *d, struct collie__netdev_op *op);
  /* The transport learned that peer aborted (it sends nothing more). A
   * device may refuse receives directed at it from now on (trecv fails,
   * naming it): some providers misbehave on a receive directed at an
   * endpoint that is closing. NULL: nothing to do. */
  void (*gone)(struct collie__netdev *d, int peer);
  collie_result_t (*reg)(struct collie__netdev *d, void *buf, size_t len,
                         struct collie__netdev_mr **out);
  void (*dereg)(struct collie__netdev *d, struct collie__netdev_mr *mr);
  /* Whether every buffer a message moves must be registered (the
   * provider's FI_MR_LOCAL, or cfg's reg_all). */
  int (*need_reg)(const struct collie__netdev *d);
  int (*wait_fd)(struct collie__netdev *d);
  /* 1: nothing is pending inside the device, sleeping on wait_fd is safe. */
  int (*trywait)(struct collie__netdev *d);
  /* What the device runs on, for messages and logs: "ofi tcp;ofi_rxm on lo". */
  const char *(*describe)(const struct collie__netdev *d);
  /* Frees the endpoint; operations still posted never complete. */
  void (*close)(struct collie__netdev *d);
};

extern const struct collie__netdev_ops collie__ofi_netdev;
/* Whether a libfabric provider name ("tcp;ofi_rxm", "verbs;ofi_rxm",
 * "efa") is made only of software providers (sockets, UDP, shared memory
 * and the utility layers over them): 1, or 0 when it drives hardware.
 * Pure; in every build. */
int collie__ofi_software(const char *prov);

#endif /* COLLIE_TRANSPORT_NETDEV_H */
