/*
 * tcp_store_proto.h - the wire format of the tcp store (store_tcp.c), in its
 * own header so that the format is written down in one place and a fuzzer or
 * a test can speak it.
 *
 * Every message, request or reply, is a 32-byte header followed by key_len
 * bytes of key and val_len bytes of value. All integers are little-endian.
 *
 *   client                                   server (rank 0)
 *   HELLO  key = job token          ->
 *                                   <-       OK | REFUSED (wrong token, then close)
 *                                            | ERROR (other protocol version, then close)
 *   SET    key, value               ->
 *                                   <-       OK
 *   GET    key                      ->       (parked until the key is set)
 *                                   <-       OK  value
 *   ADD    key, value = delta (i64) ->
 *                                   <-       OK  value = new counter (i64) | ERROR
 *
 * A reply echoes the request's id. A client sends one request at a time on a
 * connection and drops the connection when it stops waiting (a GET past its
 * deadline), so a late reply can never be read as the answer to a later
 * request; the id is checked as well. A frame with a bad magic, an unknown
 * op or out-of-range lengths makes the server close that connection.
 * ERROR replies carry a collie_result_t in status and a message as value.
 */
#ifndef COLLIE_BOOTSTRAP_TCP_STORE_PROTO_H
#define COLLIE_BOOTSTRAP_TCP_STORE_PROTO_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"

#define COLLIE_STORE_PROTO_MAGIC 0x53434c43u /* "CLCS" on the wire */
#define COLLIE_STORE_PROTO_VERSION 2         /* 2: DELETE_PREFIX */
#define COLLIE_STORE_MAX_TOKEN 255           /* struct collie__launch's token, without its NUL */
#define COLLIE_STORE_MAX_ERRTEXT 512

enum collie__store_op {
  COLLIE_STORE_OP_HELLO = 1,         /* key: job token; no value */
  COLLIE_STORE_OP_SET = 2,           /* key and value */
  COLLIE_STORE_OP_GET = 3,           /* key; no value */
  COLLIE_STORE_OP_ADD = 4,           /* key; value: int64 delta */
  COLLIE_STORE_OP_DELETE_PREFIX = 5, /* key: a prefix; every key starting with it goes; no value
                                        (reply: int64 count removed) */
  COLLIE_STORE_OP_OK = 16,      /* reply; value: GET's value, ADD's new int64 count, else none */
  COLLIE_STORE_OP_REFUSED = 17, /* reply to HELLO: wrong job token */
  COLLIE_STORE_OP_ERROR = 18    /* reply; status: collie_result_t; value: message text */
};

struct collie__store_hdr {
  uint32_t magic;    /* COLLIE_STORE_PROTO_MAGIC */
  uint16_t version;  /* COLLIE_STORE_PROTO_VERSION */
  uint16_t op;       /* enum collie__store_op */
  uint64_t id;       /* request id, chosen by the client, echoed in the reply */
  uint32_t key_len;  /* <= COLLIE_STORE_MAX_KEY (HELLO: <= COLLIE_STORE_MAX_TOKEN); replies: 0 */
  uint32_t val_len;  /* <= COLLIE_STORE_MAX_VALUE */
  uint32_t status;   /* ERROR replies only; else 0 */
  uint32_t reserved; /* 0 */
};

_Static_assert(sizeof(struct collie__store_hdr) == 32, "store header is 32 bytes on the wire");
_Static_assert(offsetof(struct collie__store_hdr, id) == 8, "id at offset 8");
_Static_assert(offsetof(struct collie__store_hdr, key_len) == 16, "key_len at offset 16");
_Static_assert(offsetof(struct collie__store_hdr, reserved) == 28, "reserved at offset 28");
_Static_assert(COLLIE_STORE_MAX_VALUE <= UINT32_MAX, "val_len fits in 32 bits");

/* Converts a header between host and wire order, in place (the same swap both ways). */
static inline void
collie__store_hdr_swap(struct collie__store_hdr *h)
{
  h->magic = htole32(h->magic);
  h->version = htole16(h->version);
  h->op = htole16(h->op);
  h->id = htole64(h->id);
  h->key_len = htole32(h->key_len);
  h->val_len = htole32(h->val_len);
  h->status = htole32(h->status);
  h->reserved = htole32(h->reserved);
}

/* An int64 in wire order (ADD's delta and result). */
static inline void
collie__store_put_i64(unsigned char *p, int64_t v)
{
  uint64_t le = htole64((uint64_t)v);
  for (int i = 0; i < 8; i++) p[i] = ((const unsigned char *)&le)[i];
}

static inline int64_t
collie__store_get_i64(const unsigned char *p)
{
  uint64_t le;
  for (int i = 0; i < 8; i++) ((unsigned char *)&le)[i] = p[i];
  return (int64_t)le64toh(le);
}

#endif /* COLLIE_BOOTSTRAP_TCP_STORE_PROTO_H */
