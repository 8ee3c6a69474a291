/*
 * match.h - the net's matching of point-to-point messages by source and tag
 * (match.c), as net.c drives it. The calls for sends and receives are in
 * transport.h ("Point to point, matched by source and tag").
 */
#ifndef COLLIE_MATCH_H
#define COLLIE_MATCH_H

#include "transport/transport.h"

struct collie__match;

/* The matching of net n (rank of size ranks), with unexpected_bytes of
 * buffer for messages that arrive before their receive. NULL when out of
 * memory. */
struct collie__match *collie__match_new(struct collie__net *n, int rank, int size,
                                        size_t unexpected_bytes);
/* What the transports hand unexpected P2P messages to (cfg->sink). */
const struct collie__net_sink *collie__match_sink(struct collie__match *m);
/* After each progress round of the transports, on the driving thread:
 * finishes the messages whose bytes are in, sends acknowledgements of
 * synchronous sends, and starts or stops catching peers' messages. Returns
 * the first failure (a receive too small for its message). */
collie_result_t collie__match_progress(struct collie__match *m);
/* Nonzero while collie__match_progress has something to do: the caller
 * may skip the call when it reads 0. */
int *collie__match_work(struct collie__match *m);
/* For a timeout message: what is buffered or held back that a pending
 * receive might have wanted ("" when nothing). */
void collie__match_describe(const struct collie__match *m, char *buf, size_t len);
/* The net failed: forgets every posted operation without touching it. */
void collie__match_forget(struct collie__match *m);
/* Frees m and every message it holds (NULL: nothing). */
void collie__match_free(struct collie__match *m);

/* From net.c, for match.c. */
/* Starts (on 1) or stops (0) catching peer's P2P messages (catch_p2p). */
void collie__net_catch(struct collie__net *n, int peer, int on);
/* The net's matching. */
struct collie__match *collie__net_match(struct collie__net *n);

#endif /* COLLIE_MATCH_H */
