/*
 * store_serve.c - a job's tcp store served by its launcher (collierun), so
 * that the store outlives every rank: survivors of a world rank 0 that died
 * can still meet in it and shrink (docs/reliability.md). The server is the
 * one rank 0 would run (bootstrap/store_tcp_server.c), in a thread of the
 * launcher's process; the ranks are told not to start theirs
 * (COLLIE_STORE_SERVE=0, core/comm.c).
 */
#include "bootstrap/store_int.h"
#include "core/introspect.h"

collie_result_t
collie__store_serve(const char *url, const char *host, int port, const char *token,
                    struct collie__store_tcp_server **out)
{
  int bound = 0;
  return collie__store_tcp_server_start(url, host, port, token, out, &bound);
}

void
collie__store_serve_stop(struct collie__store_tcp_server *server)
{
  if (server) collie__store_tcp_server_stop(server);
}
