/*
 * coll.h - the algorithm interface. An algorithm sees one struct collie__call
 * (buffers, counts, dtype, op, root/peer, rank/size, the comm's net, a reduce
 * kernel, scratch space and a deadline) and moves bytes with
 * collie__net_isend/irecv/wait only: it never sees a transport, so every
 * algorithm runs on shm and tcp alike. Each family lives in its own file,
 * opening with an essay on what moves where and what it costs.
 */
#ifndef COLLIE_COLL_H
#define COLLIE_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "collie.h"
#include "reduce/reduce.h"
#include "transport/transport.h"

/* Grow-only staging memory owned by a communicator: allocated on first use
 * and reused, so the hot path does not allocate. */
struct collie__scratch {
  void *buf;
  size_t cap;
};
/* Returns scratch memory of at least n bytes (64-byte aligned), or NULL with
 * the error set (SYSTEM_ERROR) when it cannot grow. */
void *collie__scratch_get(struct collie__scratch *s, size_t n);
void collie__scratch_free(struct collie__scratch *s);

/* One validated operation, as an algorithm sees it. */
struct collie__call {
  int kind;          /* COLLIE_KIND_* */
  uint32_t seq;      /* the comm's sequence number of this operation */
  const void *sendbuf;
  void *recvbuf;     /* broadcast: the buffer */
  size_t count;      /* elements: allreduce/broadcast/reduce count; per-rank for the others */
  collie_dtype_t dtype;
  collie_op_t op;
  size_t esize;      /* bytes per element */
  int root;          /* rooted collectives; p2p: the peer */
  int tag;           /* p2p */
  int rank, size;
  struct collie__net *net;
  collie__reduce_fn reduce; /* kernel for (dtype, op) when the call reduces */
  struct collie__scratch *scratch;
  int64_t deadline_ns;
  uint32_t p2p_seq;  /* p2p: the pair's message counter */
};

/* Algorithm families. needs: COLLIE_ALGO_NEEDS_* bits the call must satisfy. */
struct collie__algo {
  const char *name; /* "ring", "tree": COLLIE_ALGO and logs */
  int id;           /* COLLIE_ALGO_* */
  int kind;         /* COLLIE_KIND_* it implements */
  collie_result_t (*run)(struct collie__call *call);
};

/* ---- select.c ---- */

/* Per-collective forced algorithm ids parsed from COLLIE_ALGO. */
struct collie__algo_table {
  int forced[COLLIE_KIND_COUNT_]; /* COLLIE_ALGO_AUTO: let the model pick */
};
/* Parses "allreduce=ring,broadcast=tree"; an unknown collective or algorithm,
 * or one that does not implement that collective, is INVALID_ARGUMENT naming it. */
collie_result_t collie__algo_parse(const char *spec, struct collie__algo_table *out);
/* Picks the algorithm for call: opts_algo (COLLIE_ALGO_* from the call's opts)
 * first, then the table's forced choice, else the default for the collective.
 * INVALID_ARGUMENT when a named algorithm does not implement this collective. */
collie_result_t collie__algo_select(const struct collie__call *call, int opts_algo,
                                    const struct collie__algo_table *table,
                                    const struct collie__algo **out);

/* ---- the families ---- */
collie_result_t collie__allreduce_ring(struct collie__call *call);
collie_result_t collie__broadcast_tree(struct collie__call *call);
collie_result_t collie__barrier_dissemination(struct collie__call *call);
collie_result_t collie__p2p_send(struct collie__call *call);
collie_result_t collie__p2p_recv(struct collie__call *call);

/* Split [0, count) into `parts` near-equal blocks: block i starts at
 * collie__block_off(count, parts, i) and holds collie__block_len(...) elements. */
static inline size_t
collie__block_len(size_t count, int parts, int i)
{
  return count / (size_t)parts + ((size_t)i < count % (size_t)parts ? 1 : 0);
}
static inline size_t
collie__block_off(size_t count, int parts, int i)
{
  size_t q = count / (size_t)parts, r = count % (size_t)parts;
  return (size_t)i * q + ((size_t)i < r ? (size_t)i : r);
}

#endif /* COLLIE_COLL_H */
