/*
 * tcp_proto.h - the bytes the tcp transport puts on the wire (docs/wire.md
 * walks through them). Everything is little-endian and fixed-size, so two
 * builds can check each other field by field; any change to a layout or to
 * the chunking rule bumps COLLIE_TCP_PROTO_VERSION.
 *
 * A connection starts with a hello from the higher rank (struct
 * collie__tcp_hello followed by token_len bytes of the job token) and a
 * one-byte reply from the lower rank (COLLIE_TCP_REPLY_*). After that both
 * directions carry frames: a struct collie__tcp_frame header, then chunk_len
 * bytes of payload.
 *
 * Chunking rule: a message of total length T is sent as frames at offsets 0,
 * C, 2C, ... each carrying min(C, T - offset) bytes, C = COLLIE_TCP_CHUNK; a
 * zero-length message is one frame with chunk_len 0. The rule is part of the
 * protocol: a receiver that knows which message it expects knows where the
 * next header starts, and may read header and payload in one call.
 */
#ifndef COLLIE_TRANSPORT_TCP_PROTO_H
#define COLLIE_TRANSPORT_TCP_PROTO_H

#include <stdint.h>

#define COLLIE_TCP_PROTO_VERSION                                                                   \
  3u /* 2: the ABORT frame; 3: both sides say BYE, connections are kept */

/* ---- Handshake ---- */

#define COLLIE_TCP_HELLO_MAGIC 0x6c6c6f63u /* "coll" read as little-endian bytes */
#define COLLIE_TCP_TOKEN_MAX 1024u         /* longest job token a hello may carry */

struct collie__tcp_hello {
  uint32_t magic;     /* COLLIE_TCP_HELLO_MAGIC */
  uint16_t version;   /* COLLIE_TCP_PROTO_VERSION */
  uint16_t token_len; /* bytes of token following this header, <= COLLIE_TCP_TOKEN_MAX */
  uint64_t comm_hash; /* which communicator this connection belongs to */
  uint32_t from_rank; /* comm rank of the connecting (higher) rank */
  uint32_t to_rank;   /* comm rank it means to reach */
};
_Static_assert(sizeof(struct collie__tcp_hello) == 24, "tcp hello header is 24 bytes on the wire");

/* The reply byte. Anything but ACCEPT is a refusal, and the acceptor closes. */
enum {
  COLLIE_TCP_REPLY_ACCEPT = 0x41,      /* 'A' */
  COLLIE_TCP_REPLY_BAD_TOKEN = 0x54,   /* 'T': wrong job token */
  COLLIE_TCP_REPLY_BAD_VERSION = 0x56, /* 'V': magic or protocol version differ */
  COLLIE_TCP_REPLY_BAD_COMM = 0x43,    /* 'C': another communicator or another rank */
  COLLIE_TCP_REPLY_DUPLICATE = 0x44,   /* 'D': that rank is already connected */
};

/* ---- Frames ---- */

enum {
  COLLIE_TCP_FRAME_DATA = 1, /* a chunk of a message */
  COLLIE_TCP_FRAME_BYE = 2,  /* clean close: the sender posts nothing more (all other fields 0) */
  /* The sender gave up on a failure of its own (its deadline, a third
   * rank's death, a setup that failed after this channel was up) and says
   * why: chunk_len bytes of text (at most
   * COLLIE_TCP_REASON_MAX, no NUL) follow; all other fields 0; the
   * connection closes after it. */
  COLLIE_TCP_FRAME_ABORT = 3,
};
#define COLLIE_TCP_REASON_MAX 512u

/* Largest payload of one frame: big messages become a stream of frames so
 * that the receiver can check and land each piece as it arrives. */
#define COLLIE_TCP_CHUNK (1u << 20)

struct collie__tcp_frame {
  uint8_t version;    /* COLLIE_TCP_PROTO_VERSION */
  uint8_t type;       /* COLLIE_TCP_FRAME_* */
  uint16_t flags;     /* 0; reserved */
  uint32_t chunk_len; /* payload bytes following this header, <= COLLIE_TCP_CHUNK */
  uint64_t slot;      /* the message's slot (collie__slot) */
  uint64_t total_len; /* the whole message's length */
  uint64_t offset;    /* where this chunk starts in the message */
};
_Static_assert(sizeof(struct collie__tcp_frame) == 32, "tcp frame header is 32 bytes on the wire");
_Static_assert(COLLIE_TCP_CHUNK <= UINT32_MAX, "chunk_len is a u32");

#endif /* COLLIE_TRANSPORT_TCP_PROTO_H */
