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

size_t
collie__store_serve_clients(struct collie__store_tcp_server *server)
{
  return server ? collie__store_tcp_server_clients(server) : 0;
}

int64_t
collie__store_serve_last_request(struct collie__store_tcp_server *server)
{
  return server ? collie__store_tcp_server_last_request(server) : 0;
}

collie_result_t
collie__store_note_exit(const char *url, const char *token, int world_rank, int world_size,
                        int code, int64_t deadline_ns)
{
  collie__store_t *s = NULL;
  collie_result_t rc =
      collie__store_open_serving(url, world_rank, world_size, token, 0, deadline_ns, &s);
  if (rc != COLLIE_SUCCESS) return rc;
  rc = collie__exit_note_set(s, world_rank, code, deadline_ns);
  collie__store_release(s);
  return rc;
}
