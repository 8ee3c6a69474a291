/*
 * store_int.h - what the store implementations (store_file.c, store_tcp.c,
 * store_prefix.c, store_user.c) share with store.c, the dispatcher. Only files of
 * src/bootstrap include it.
 */
#ifndef COLLIE_BOOTSTRAP_STORE_INT_H
#define COLLIE_BOOTSTRAP_STORE_INT_H

#include "bootstrap/bootstrap.h"

/* Sets the common header of a freshly allocated store: ops, one reference. */
void collie__store_init(collie__store_t *s, const struct collie__store_ops *ops);

/* Checks that key is a valid store key: 1..COLLIE_STORE_MAX_KEY characters of
 * [A-Za-z0-9_./:-]. what names the operation and store for the message
 * ("store set on file:///x"). Returns SUCCESS or INVALID_ARGUMENT. */
collie_result_t collie__store_check_key(const char *what, const char *key);

/* Checks a value about to be set: len <= COLLIE_STORE_MAX_VALUE and val not NULL
 * when len > 0. Returns SUCCESS or INVALID_ARGUMENT naming the key. */
collie_result_t collie__store_check_value(const char *what, const char *key, const void *val,
                                          size_t len);

/* Parses a counter value as stored by add: an optional '-' and decimal digits,
 * nothing else. Returns 0 and *out, or -1 when the bytes are not an integer. */
int collie__store_parse_counter(const void *val, size_t len, int64_t *out);

/* Opens the file store of url ("file:///abs/dir"); path is the part after
 * "file://". Never blocks long. Errors: INVALID_ARGUMENT (relative or
 * malformed path), SYSTEM_ERROR (directory cannot be created or written). */
collie_result_t collie__store_file_open(const char *url, const char *path, const char *token,
                                        collie__store_t **out);

/* Opens the tcp store of url ("tcp://host:port"); hostport is the part after
 * "tcp://". When serve is set (rank 0's, unless a server runs there already)
 * the server thread starts on host:port first; then every rank connects and
 * says hello with token, retrying until deadline_ns. Errors:
 * INVALID_ARGUMENT, SYSTEM_ERROR (port in use), TIMEOUT, REMOTE_ERROR (token
 * refused, not a collie store). */
collie_result_t collie__store_tcp_open(const char *url, const char *hostport, int serve, int size,
                                       const char *token, int64_t deadline_ns,
                                       collie__store_t **out);

/* A tcp store URL's longest text, NUL included. */
#define COLLIE_STORE_TCP_URL_MAX 600

/* The tcp store's server (store_tcp_server.c): rank 0 runs it in a thread,
 * or collierun for its jobs. */
struct collie__store_tcp_server;
/* Listens on host:port and starts the server thread answering connections that
 * prove token; *bound gets the port. url names the store in messages. Errors:
 * SYSTEM_ERROR (port in use, no memory, no thread). */
collie_result_t collie__store_tcp_server_start(const char *url, const char *host, int port,
                                               const char *token,
                                               struct collie__store_tcp_server **out, int *bound);
/* Stops the thread, closes every connection (clients fail at once) and frees. */
void collie__store_tcp_server_stop(struct collie__store_tcp_server *sv);
/* How many connections that proved the token the server holds (as of its
 * last look, at most a second old): the ranks still alive that use it. */
size_t collie__store_tcp_server_clients(struct collie__store_tcp_server *sv);
/* When it last handled a request (monotonic ns, collie__now_ns), or 0. */
int64_t collie__store_tcp_server_last_request(struct collie__store_tcp_server *sv);
/* How long a connection may take to prove the token (default 10 s) and how
 * many may wait to at once (default 128; the oldest is dropped for a new
 * one), for servers started afterwards: tests shorten them. */
void collie__store_tcp_server_limits(int64_t auth_ms, size_t max_unauthed);

#endif /* COLLIE_BOOTSTRAP_STORE_INT_H */
