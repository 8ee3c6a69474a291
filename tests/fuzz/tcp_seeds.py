#!/usr/bin/env python3
"""tcp_seeds.py - writes the seed corpora of fuzz_tcp_handshake and
fuzz_tcp_frames (tests/fuzz/corpus/NAME/) from the wire format of
docs/wire.md, so that the seeds follow the protocol when it changes:

    python3 tests/fuzz/tcp_seeds.py        # rewrites both corpora

Valid handshakes and frames, so the fuzzers start deep, plus the refusals,
the truncated and the oversized ones. The input languages are described at
the head of each fuzzer's .c file.
"""
import os
import struct

VERSION = 2  # COLLIE_TCP_PROTO_VERSION
MAGIC = 0x6C6C6F63
TOKEN = b"fuzz-token"  # the fuzzers' job token
HASH = 0x0123456789ABCDEF  # fuzz_tcp_handshake's comm_hash
CHUNK = 1 << 20
DATA, BYE, ABORT = 1, 2, 3
HERE = os.path.dirname(os.path.abspath(__file__))


def hello(frm, to, token=TOKEN, magic=MAGIC, version=VERSION, comm=HASH, token_len=None):
    n = len(token) if token_len is None else token_len
    return struct.pack("<IHHQII", magic, version, n, comm, frm, to) + token


def frame(typ, chunk=0, slot=0, total=0, off=0, version=VERSION, flags=0):
    return struct.pack("<BBHIQQQ", version, typ, flags, chunk, slot, total, off)


def slot(kind, seq, step):
    return (kind << 56) | (seq << 24) | (step << 8)


S = slot(1, 7, 1)  # allreduce #7 step 1
S2 = slot(5, 8, 0)  # broadcast #8 step 0


# ---- fuzz_tcp_handshake: byte 0 even = the library accepts ----


def conns(*records):
    """Mode 0, then each record: flags, u16 length, bytes."""
    out = b"\x00"
    for flags, data in records:
        out += struct.pack("<BH", flags, len(data)) + data
    return out


def answer(data):
    """Mode 1: the library connects and is answered data."""
    return b"\x01" + data


HANDSHAKE = {
    "empty": conns(),
    "valid_rank1": conns((1, hello(1, 0))),
    "valid_then_frames": conns((0, hello(2, 0) + frame(DATA, 4, S, 4, 0) + b"abcd" + frame(BYE))),
    "wrong_token": conns((1, hello(1, 0, token=b"fuzz-tokeX"))),
    "short_token": conns((1, hello(1, 0, token=b"fuzz"))),
    "empty_token": conns((1, hello(1, 0, token=b""))),
    "bad_magic": conns((1, hello(1, 0, magic=0x12345678))),
    "bad_version": conns((1, hello(1, 0, version=1))),
    "token_too_long": conns((0, hello(1, 0, token=b"x" * 2000))),
    "token_max": conns((1, hello(1, 0, token=b"t" * 1024))),
    "other_comm": conns((1, hello(1, 0, comm=HASH ^ 1))),
    "other_target": conns((1, hello(1, 2))),
    "bad_ranks": conns((1, hello(0, 0)), (1, hello(3, 0)), (1, hello(0xFFFFFFFF, 0))),
    "duplicate": conns((0, hello(2, 0)), (0, hello(2, 0))),
    "truncated": conns((0, hello(1, 0)[:10]), (1, hello(1, 0)[:30]), (2, hello(2, 0)[:24])),
    "closed_at_once": conns((2, hello(1, 0))),
    "many": conns(*[(i % 3, hello(1 + i % 2, 0)[: 4 * i]) for i in range(8)]),
    "crowd": conns(*[(0, b"col")] * 20),
    "accept": answer(b"A"),
    "accept_bye": answer(b"A" + frame(BYE)),
    "refused": answer(b"T"),
    "refused_version": answer(b"V"),
    "refused_comm": answer(b"C"),
    "refused_dup": answer(b"D"),
    "strange_answer": answer(b"\x00"),
    "no_answer": answer(b""),
}


# ---- fuzz_tcp_frames: a program of opcodes ----


def recv(sl, n):
    return b"\x00" + struct.pack("<QI", sl, n)


def send(sl, n):
    return b"\x01" + struct.pack("<QH", sl, n)


def write(data):
    assert len(data) < 65536
    return b"\x02" + struct.pack("<H", len(data)) + data


def zeros(n):
    return b"\x03" + struct.pack("<I", n)


STEP, PEEK, HANGUP, CLOSE, ABORT_OP, DRAIN = b"\x04", b"\x05", b"\x06", b"\x07", b"\x09", b"\x0a"


def tell(n):
    return b"\x08" + struct.pack("<H", n)


def msg(sl, data):
    return frame(DATA, len(data), sl, len(data), 0) + data


REASON = b"timed out waiting for recv from rank 2 (world rank 2, pid 42, 127.0.0.1:4000)"

FRAMES = {
    "one_message": recv(S, 16) + write(msg(S, b"0123456789abcdef")) + STEP,
    "held_then_posted": write(msg(S, b"held")) + STEP + PEEK + recv(S, 4) + STEP,
    "zero_length": recv(S, 0) + write(frame(DATA, 0, S, 0, 0)) + STEP,
    "two_messages": recv(S, 3) + recv(S2, 5) + write(msg(S, b"abc") + msg(S2, b"defgh")) + STEP,
    "two_chunks": recv(S, CHUNK + 10)
    + write(frame(DATA, CHUNK, S, CHUNK + 10, 0))
    + zeros(CHUNK)
    + write(frame(DATA, 10, S, CHUNK + 10, CHUNK) + b"0123456789")
    + STEP,
    "split_header": recv(S, 8)
    + write(msg(S, b"abcdefgh")[:7])
    + STEP
    + write(msg(S, b"abcdefgh")[7:20])
    + STEP
    + write(msg(S, b"abcdefgh")[20:])
    + STEP,
    "bye": write(frame(BYE)) + STEP + HANGUP + STEP,
    "bye_while_posted": recv(S, 4) + write(frame(BYE)) + STEP,
    "data_after_bye": write(frame(BYE) + b"x") + STEP,
    "send_after_bye": write(frame(BYE)) + STEP + STEP + send(S, 10) + STEP,
    "abort": recv(S, 64) + write(frame(ABORT, len(REASON)) + REASON) + STEP,
    "abort_unposted": write(frame(ABORT, len(REASON)) + REASON) + STEP + recv(S, 4) + STEP,
    "abort_cut_short": recv(S, 4) + write(frame(ABORT, 100) + b"partial") + HANGUP + STEP,
    "abort_empty": write(frame(ABORT)) + STEP,
    "abort_too_long": recv(S, 4) + write(frame(ABORT, 600) + b"r" * 600) + STEP,
    "mismatch_slot": recv(S2, 4) + write(msg(S, b"abcd")) + STEP,
    "mismatch_len": recv(S, 5) + write(msg(S, b"abcd")) + STEP,
    "bad_offset": recv(S, 4) + write(frame(DATA, 4, S, 4, 1) + b"abcd") + STEP,
    "bad_chunk": recv(S, 4) + write(frame(DATA, 3, S, 4, 0) + b"abc") + STEP,
    "huge_chunk": recv(S, 4) + write(frame(DATA, 0xFFFFFFFF, S, 0xFFFFFFFFFFFFFFFF, 0)) + STEP,
    "bad_flags": recv(S, 4) + write(frame(DATA, 4, S, 4, 0, flags=1) + b"abcd") + STEP,
    "bad_version": recv(S, 4) + write(frame(DATA, 4, S, 4, 0, version=1) + b"abcd") + STEP,
    "unknown_type": write(frame(9)) + STEP,
    "malformed_bye": write(frame(BYE, 0, S)) + STEP,
    "eof_mid_header": recv(S, 4) + write(msg(S, b"abcd")[:12]) + HANGUP + STEP,
    "eof_mid_payload": recv(S, 4096)
    + write(frame(DATA, 4096, S, 4096, 0) + b"p" * 100)
    + HANGUP
    + STEP,
    "eof_unposted": write(msg(S, b"ab")[:5]) + HANGUP + STEP + PEEK + recv(S, 2) + STEP,
    "sends": send(S, 100) + send(S2, 0) + DRAIN + STEP + write(msg(S, b"ok")) + recv(S, 2) + STEP,
    "send_to_closed": CLOSE + send(S, 5000) + STEP,
    "send_big_undrained": send(S, 65535) * 4 + STEP + DRAIN + STEP,
    "tell": recv(S, 4) + tell(40) + STEP,
    "tell_long": tell(699) + STEP,
    "abort_op": recv(S, 4) + send(S, 4) + ABORT_OP + STEP,
}


def write_corpus(name, seeds):
    d = os.path.join(HERE, "corpus", name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    for k, v in seeds.items():
        with open(os.path.join(d, k), "wb") as f:
            f.write(v)


write_corpus("fuzz_tcp_handshake", HANDSHAKE)
write_corpus("fuzz_tcp_frames", FRAMES)
