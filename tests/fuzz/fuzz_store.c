/*
 * fuzz_store.c - the tcp store's server (store_tcp_server.c) on what a
 * stranger or a broken client may send: each input goes over a fresh
 * connection to a server running in this process, which must answer or
 * close it and go on serving (checked after every input by a real client's
 * set and get). The first 4 bytes may choose to prove the token first, so
 * the fuzzer reaches the frames after HELLO too.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/tcp_store_proto.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

static collie__store_t *fuzz_srv, *fuzz_client;
static int fuzz_port;

static void
fuzz_start(void)
{
  int fd = collie__sock_listen("127.0.0.1", 0, &fuzz_port);
  close(fd);
  char url[64];
  snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", fuzz_port);
  if (collie__store_open(url, 0, 2, "fuzz-token", collie__deadline_after_ms(5000), &fuzz_srv) !=
          COLLIE_SUCCESS ||
      collie__store_open(url, 1, 2, "fuzz-token", collie__deadline_after_ms(5000),
                         &fuzz_client) != COLLIE_SUCCESS)
    abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
  if (!fuzz_srv) fuzz_start();
  int fd = collie__sock_connect("127.0.0.1", fuzz_port, collie__deadline_after_ms(2000));
  if (fd < 0) abort(); /* the server stopped accepting */
  int64_t dl = collie__deadline_after_ms(2000);
  if (n >= 1 && (data[0] & 1)) { /* a valid HELLO first */
    struct collie__store_hdr h = {COLLIE_STORE_PROTO_MAGIC, COLLIE_STORE_PROTO_VERSION,
                                  COLLIE_STORE_OP_HELLO, 1, 10, 0, 0, 0};
    collie__store_hdr_swap(&h);
    (void)collie__sock_send_all(fd, &h, sizeof(h), dl);
    (void)collie__sock_send_all(fd, "fuzz-token", 10, dl);
    data++;
    n--;
  }
  (void)collie__sock_send_all(fd, data, n, dl);
  shutdown(fd, SHUT_WR);
  /* Whatever it answers, until it closes or has nothing more to say. */
  char buf[4096];
  collie__sock_set_nonblock(fd, 1);
  for (int i = 0; i < 50; i++) {
    ssize_t r = recv(fd, buf, sizeof(buf), 0);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) break;
    if (r < 0) collie__sleep_ns(1000000);
  }
  close(fd);
  /* The server still serves the ranks. */
  if (collie__store_set(fuzz_client, "alive", "1", 1, collie__deadline_after_ms(2000)) !=
      COLLIE_SUCCESS)
    abort();
  return 0;
}
