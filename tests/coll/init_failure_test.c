/* init_failure_test.c - init cannot hang: an unreachable store, a rank that
 * never arrives, a port in use and a wrong job token each end with a clear
 * error within the timeout. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

static double
if_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A listening socket on 127.0.0.1 that never answers the protocol; its port. */
static int
if_bound_port(int *fd_out)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
  ASSERT(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
  *fd_out = fd;
  return ntohs(a.sin_port);
}

static collie_result_t
if_init(int rank, int size, const char *store, const char *token, int64_t timeout_ms,
        collie_comm_t **comm)
{
  collie_config_t cfg = COLLIE_CONFIG_INIT;
  cfg.rank = rank;
  cfg.world_size = size;
  cfg.store = store;
  cfg.job_token = token;
  cfg.timeout_ms = timeout_ms;
  return collie_comm_init_config(&cfg, comm);
}

/* Nobody serves the store (the port is bound but never listened on). */
TEST_IMPL(init_store_unreachable)
{
  int fd, port = if_bound_port(&fd);
  char url[64];
  collie_comm_t *comm = NULL;
  snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
  double t0 = if_now();
  collie_result_t rc = if_init(1, 2, url, "tok", 800, &comm);
  double dt = if_now() - t0;
  ASSERTF(rc == COLLIE_TIMEOUT || rc == COLLIE_REMOTE_ERROR || rc == COLLIE_SYSTEM_ERROR,
          "got %s: %s", collie_result_string(rc), collie_last_error());
  ASSERT(comm == NULL);
  ASSERTF(strstr(collie_last_error(), url + 6), "message does not name the store: %s",
          collie_last_error());
  ASSERTF(dt < 3.0, "gave up after %.2f s with an 0.8 s timeout", dt);
  close(fd);
}

/* The store's port is taken by someone else: rank 0 cannot serve. */
TEST_IMPL(init_port_in_use)
{
  int fd, port = if_bound_port(&fd);
  ASSERT(listen(fd, 4) == 0);
  char url[64];
  collie_comm_t *comm = NULL;
  snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
  double t0 = if_now();
  collie_result_t rc = if_init(0, 2, url, "tok", 800, &comm);
  ASSERTF(rc == COLLIE_SYSTEM_ERROR, "got %s: %s", collie_result_string(rc), collie_last_error());
  ASSERTF(strstr(collie_last_error(), url + 6), "message does not name the address: %s",
          collie_last_error());
  ASSERT(if_now() - t0 < 3.0 && comm == NULL);
  close(fd);
}

/* Rank 1 never calls init: rank 0 fails with TIMEOUT naming it. */
TEST_IMPL(init_rank_never_arrives)
{
  char url[600];
  collie_comm_t *comm = NULL;
  snprintf(url, sizeof(url), "file://%s/lonely", test_dir());
  double t0 = if_now();
  ASSERT_RC(COLLIE_TIMEOUT, "rank 1 never joined", if_init(0, 2, url, "tok", 700, &comm));
  double dt = if_now() - t0;
  ASSERTF(dt >= 0.69 && dt < 3.0, "gave up after %.2f s with a 0.7 s timeout", dt);
  ASSERT(comm == NULL);
}

/* Two ranks of the test, one with the wrong token: it is refused by the store
 * (REMOTE_ERROR naming the token), and rank 0 times out waiting for it. */
TEST_IMPL(init_wrong_token)
{
  static char url[64];
  int r = test_rank();
  collie_comm_t *comm = NULL;
  if (r == 0) {
    int fd, port = if_bound_port(&fd);
    close(fd); /* free it for the store; a race with another process is unlikely */
    snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
    char path[512];
    snprintf(path, sizeof(path), "%s/url", test_dir());
    FILE *f = fopen(path, "w");
    ASSERT(f);
    fputs(url, f);
    fclose(f);
    double t0 = if_now();
    ASSERT_RC(COLLIE_TIMEOUT, "rank 1", if_init(0, 2, url, "right-token", 1500, &comm));
    ASSERT(if_now() - t0 < 4.0);
  } else {
    char path[512];
    snprintf(path, sizeof(path), "%s/url", test_dir());
    for (int i = 0; i < 200 && access(path, F_OK) != 0; i++) usleep(10000);
    usleep(100000); /* let rank 0 start serving */
    FILE *f = fopen(path, "r");
    ASSERT(f && fgets(url, sizeof(url), f));
    fclose(f);
    double t0 = if_now();
    ASSERT_RC(COLLIE_REMOTE_ERROR, "token", if_init(1, 2, url, "wrong-token", 1500, &comm));
    ASSERT(if_now() - t0 < 3.0);
  }
  ASSERT(comm == NULL);
}
