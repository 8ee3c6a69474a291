"""collie.MPI: point-to-point with MPI's matching by (source, tag) (ANY_SOURCE,
ANY_TAG, shorter messages, truncation, probes, nonblocking and persistent
requests, Ssend), Status, PROC_NULL, the pickled lowercase methods,
Dup/Split/Free, the errors (mpi4py's MPI.Exception with collie's message;
TypeError/ValueError for bad arguments) and the calls that raise
NotImplementedError; Finalize and the exit cleanup in a job of their own
(tests/python/jobs/mpi_finalize.py)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import collie
from collie import MPI

from conftest import build_dir

W = MPI.COMM_WORLD


@pytest.fixture
def w():
    W.Get_size()  # every rank makes COMM_WORLD (collective) before a test uses it on some ranks only
    return W


def ring(rank, size):
    return (rank + 1) % size, (rank - 1) % size


# ---- point-to-point ----------------------------------------------------------------

def test_send_recv_status(w, rank, size):
    if size < 2:
        pytest.skip("needs 2 ranks")
    if rank == 0:
        w.Send(np.arange(5, dtype="d"), dest=1, tag=4)
        w.Ssend([np.arange(6, dtype="i"), 3, MPI.INT], dest=1, tag=5)
        MPI.Attach_buffer(bytearray(3 + MPI.BSEND_OVERHEAD))  # a buffered send needs one (test_mpi_datatypes.py)
        w.Bsend(bytearray(b"xyz"), 1, 6)
        w.Rsend([np.arange(4, dtype="h"), (2, 2), MPI.SHORT], 1, 7)
        MPI.Detach_buffer()
    elif rank == 1:
        st = MPI.Status()
        b = np.zeros(5)
        w.Recv(b, source=0, tag=4, status=st)
        np.testing.assert_array_equal(b, np.arange(5))
        assert (st.Get_source(), st.Get_tag(), st.Get_count(MPI.DOUBLE), st.Get_count()) == (0, 4, 5, 40)
        assert (st.source, st.tag, st.count) == (0, 4, 40) and st.Get_count(MPI.INT) == 10
        assert st.Get_count(MPI.DOUBLE_INT) == MPI.UNDEFINED  # 40 bytes are not whole 16-byte pairs
        c = np.zeros(3, "i")
        w.Recv([c, MPI.INT], 0, 5, st)
        assert c.tolist() == [0, 1, 2] and st.Get_tag() == 5
        b3 = bytearray(3)
        w.Recv(b3, MPI.ANY_SOURCE, 6, st)  # collie_recv_any
        assert b3 == bytearray(b"xyz") and st.Get_source() == 0
        h = np.zeros(2, "h")
        w.Recv(h, 0, 7)
        assert h.tolist() == [2, 3]


def test_proc_null(w, rank):
    w.Send(np.zeros(3), MPI.PROC_NULL, 1)
    st = MPI.Status()
    b = np.full(3, 9.0)
    w.Recv(b, MPI.PROC_NULL, 1, st)
    assert (st.Get_source(), st.Get_tag(), st.Get_count()) == (MPI.PROC_NULL, MPI.ANY_TAG, 0)
    assert b.tolist() == [9.0] * 3
    assert w.recv(source=MPI.PROC_NULL) is None
    w.send("x", dest=MPI.PROC_NULL)
    w.Sendrecv(np.zeros(1), MPI.PROC_NULL, 0, b, MPI.PROC_NULL, 0, st)
    assert st.Get_source() == MPI.PROC_NULL
    # TAG_UB is a key, as in mpi4py; the bound is the attribute's value
    ub = MPI.COMM_WORLD.Get_attr(MPI.TAG_UB)
    assert ub >= 32767
    with pytest.raises(MPI.Exception, match="tag = %d must be in 0..%d" % (ub + 1, ub)):
        w.Send(np.zeros(1), rank, ub + 1)
    assert w.Get_attr(MPI.WTIME_IS_GLOBAL) == 0 and w.Get_attr(MPI.UNIVERSE_SIZE) == w.Get_size()


def test_sendrecv_ring(w, rank, size):
    right, left = ring(rank, size)
    got = np.zeros(4, "i")
    st = MPI.Status()
    w.Sendrecv(np.full(4, rank, "i"), right, 3, got, left, 3, st)
    assert got.tolist() == [left] * 4 and (st.Get_source(), st.Get_tag()) == (left, 3)
    buf = np.full(2, rank * 1.5)
    w.Sendrecv_replace(buf, dest=right, sendtag=8, source=left, recvtag=8)
    assert buf.tolist() == [left * 1.5] * 2
    big = np.zeros(200000)
    w.Sendrecv(np.full(200000, float(rank)), right, 9, big, left, 9, st)
    assert st.Get_source() == left and big[0] == big[-1] == left
    # from ANY_SOURCE with ANY_TAG (the receive is posted first, then the send)
    big[:] = -1
    w.Sendrecv(np.full(100000, float(rank)), right, 10, big, MPI.ANY_SOURCE, MPI.ANY_TAG, st)
    assert (st.Get_source(), st.Get_tag(), st.Get_count(MPI.DOUBLE)) == (left, 10, 100000)
    assert big[0] == big[99999] == left and big[100000] == -1  # a shorter message: the rest untouched
    # the pickled form takes any source (headers first): a large object
    got = w.sendrecv(np.full(200000, float(rank)), dest=right, sendtag=4, recvtag=4, status=st)
    assert st.Get_source() == left and got[0] == got[-1] == left


def test_pickled_point_to_point(w, rank, size):
    right, left = ring(rank, size)
    st = MPI.Status()
    got = w.sendrecv({"from": rank, "data": list(range(rank))}, dest=right, sendtag=2, source=left, status=st)
    assert got == {"from": left, "data": list(range(left))} and st.Get_tag() == 2 and st.Get_source() == left
    got = w.sendrecv(np.arange(3) * rank, dest=right)  # mpi4py's defaults: ANY_SOURCE, ANY_TAG
    np.testing.assert_array_equal(got, np.arange(3) * left)
    if size < 2:
        return
    if rank == 0:
        w.send(("a", 1), dest=1, tag=11)
        w.send(b"x" * 100000, dest=1)
        assert w.recv(source=1, tag=12) == "back"
    elif rank == 1:
        assert w.recv(source=0, tag=11, status=st) == ("a", 1)
        assert (st.Get_source(), st.Get_tag()) == (0, 11)
        assert w.recv(status=st) == b"x" * 100000 and st.Get_source() == 0 and st.Get_tag() == 0
        w.send("back", 0, tag=12)


def test_pickled_collectives(w, rank, size):
    root = size - 1
    assert w.bcast({"k": [1, 2]} if rank == root else None, root=root) == {"k": [1, 2]}
    g = w.gather((rank, "r%d" % rank), root=root)
    assert g == ([(q, "r%d" % q) for q in range(size)] if rank == root else None)
    assert w.scatter([q * q for q in range(size)] if rank == root else None, root=root) == rank * rank
    assert w.allgather(rank * 2) == [q * 2 for q in range(size)]
    assert w.alltoall([(rank, q) for q in range(size)]) == [(q, rank) for q in range(size)]
    assert w.allreduce(rank + 1) == size * (size + 1) // 2
    assert w.allreduce([rank]) == list(range(size))  # SUM is +, in rank order
    assert w.allreduce(rank, op=MPI.MAX) == size - 1
    assert w.allreduce((rank % 2, rank), op=MPI.MAXLOC) == ((1, 1) if size > 1 else (0, 0))
    assert w.allreduce((-rank, rank), op=MPI.MINLOC) == (-(size - 1), size - 1)
    assert w.allreduce(str(rank), op=lambda a, b: a + b) == "".join(str(q) for q in range(size))
    assert w.reduce(rank + 2, op=MPI.PROD, root=0) == (np.prod(np.arange(2, size + 2)) if rank == 0 else None)
    w.barrier()
    assert MPI.SUM(2, 3) == 5 and MPI.LXOR(True, True) is False


# ---- matching by (source, tag), nonblocking, probes, persistent ------------------------

def test_tags_out_of_order(w, rank, size):
    """Rank 0 sends tag 31 then 32; rank 1 receives 32 first. Tag 31's
    message is 1 MiB: it must wait aside (collie's unexpected buffer) while
    tag 32 is taken."""
    if size < 2:
        pytest.skip("needs 2 ranks")
    if rank == 0:
        w.Send(np.full(131072, 31.0), dest=1, tag=31)
        w.Send(np.arange(4, dtype="i"), dest=1, tag=32)
        w.send({"t": 41}, dest=1, tag=41)
        w.send({"t": 42}, dest=1, tag=42)
    elif rank == 1:
        st = MPI.Status()
        small = np.zeros(4, "i")
        w.Recv(small, source=0, tag=32, status=st)
        assert small.tolist() == [0, 1, 2, 3] and st.Get_tag() == 32
        big = np.zeros(131072)
        w.Recv(big, 0, 31, st)
        assert big[0] == big[-1] == 31.0 and (st.Get_tag(), st.Get_count(MPI.DOUBLE)) == (31, 131072)
        assert w.recv(source=0, tag=42) == {"t": 42}  # the pickled ones match by tag too
        assert w.recv(source=0, tag=41, status=st) == {"t": 41} and st.Get_tag() == 41


def test_recv_any_tag_shorter_message(w, rank, size):
    """mpi4py's defaults (ANY_SOURCE, ANY_TAG) and a message shorter than the
    buffer: Status says what came."""
    if size < 2:
        pytest.skip("needs 2 ranks")
    if rank == 0:
        w.Send(np.arange(3, dtype="d"), dest=1, tag=7)
        w.Send(bytearray(b"ab"), dest=1, tag=0)
    elif rank == 1:
        st = MPI.Status()
        b = np.full(10, -1.0)
        w.Recv(b, status=st)
        assert (st.Get_source(), st.Get_tag(), st.Get_count(MPI.DOUBLE), st.Get_count()) == (0, 7, 3, 24)
        assert b.tolist() == [0.0, 1.0, 2.0] + [-1.0] * 7
        buf = bytearray(8)
        w.Recv([buf, MPI.BYTE], MPI.ANY_SOURCE, MPI.ANY_TAG, st)
        assert buf[:2] == b"ab" and (st.Get_count(), st.Get_tag()) == (2, 0)


def test_truncation_nonblocking_and_pickled(w, rank, size):
    """A message longer than an Irecv's buffer (and a pickle larger than
    irecv's buffer) fails the wait with MPI.Exception ERR_TRUNCATE; each on a
    Dup of its own (a failed receive poisons its communicator)."""
    if size < 2:
        pytest.skip("needs 2 ranks")
    for what in ("Irecv", "irecv"):
        d = w.Dup()
        try:
            if rank == 0:
                if what == "Irecv":
                    d.Send(np.zeros(8, "i"), 1, tag=2)
                else:
                    d.send(b"y" * 1000, 1, tag=2)
            elif rank == 1:
                r = d.Irecv(np.zeros(4, "i"), 0, 2) if what == "Irecv" else d.irecv(100, source=0, tag=2)
                with pytest.raises(MPI.Exception, match="truncated") as e:
                    r.wait()
                assert e.value.Get_error_code() == MPI.ERR_TRUNCATE and r == MPI.REQUEST_NULL
        finally:
            d.Free()


def test_irecv_isend_ring_large(w, rank, size):
    """Every rank posts two Irecv then two Isend of 1 MiB (to both
    neighbours, different tags), then Waitall: complete in any order."""
    right, left = ring(rank, size)
    n = 131072  # doubles: 1 MiB
    fl, fr = np.zeros(n), np.zeros(n)
    to_r, to_l = np.full(n, rank + 0.25), np.full(n, rank + 0.5)
    reqs = [w.Irecv(fl, left, 1), w.Irecv([fr, MPI.DOUBLE], right, 2), w.Isend(to_r, right, 1),
            w.Isend(to_l, left, tag=2)]
    sts = [MPI.Status()]
    assert MPI.Request.Waitall(reqs, sts) is True
    assert len(sts) == 4  # grown to one status per request, as mpi4py
    assert (sts[0].Get_source(), sts[0].Get_tag(), sts[0].Get_count(MPI.DOUBLE)) == (left, 1, n)
    assert (sts[1].Get_source(), sts[1].Get_tag(), sts[1].Get_count()) == (right, 2, 8 * n)
    assert fl[0] == fl[-1] == left + 0.25 and fr[0] == fr[-1] == right + 0.5
    assert all(r == MPI.REQUEST_NULL for r in reqs)
    # the same exchange with ANY_SOURCE receives and the lowercase requests
    got = np.zeros(n)
    r1 = w.Irecv(got, MPI.ANY_SOURCE, 3)
    s1 = w.Isend(to_r, right, 3)
    st = MPI.Status()
    r1.Wait(st)
    s1.Wait()
    assert st.Get_source() == left and got[-1] == left + 0.25


def test_waitany_testall(w, rank, size):
    """Waitany returns the request whose message came (tag 2 is sent first);
    Testall is False while tag 1's message is not sent (rank 1 sends it only
    after rank 0's go-ahead)."""
    if size < 2:
        pytest.skip("needs 2 ranks")
    if rank == 0:
        a, b = np.zeros(2, "i"), np.zeros(3, "i")
        reqs = [w.Irecv(a, 1, 1), w.Irecv(b, 1, 2)]
        st = MPI.Status()
        assert MPI.Request.Waitany(reqs, st) == 1
        assert st.Get_tag() == 2 and b.tolist() == [7, 8, 9] and reqs[1] == MPI.REQUEST_NULL
        assert MPI.Request.Testall(reqs) is False
        assert MPI.Request.Testany(reqs) == (MPI.UNDEFINED, False)
        w.Send(np.zeros(1, "i"), 1, 3)  # go-ahead
        sts = [MPI.Status(), MPI.Status()]
        while not MPI.Request.Testall(reqs, sts):
            pass
        assert a.tolist() == [5, 6] and sts[0].Get_tag() == 1 and sts[1].Get_source() == MPI.ANY_SOURCE
        assert MPI.Request.Waitany(reqs) == MPI.UNDEFINED  # all null
    elif rank == 1:
        w.Send(np.array([7, 8, 9], "i"), 0, 2)
        w.Recv(np.zeros(1, "i"), 0, 3)
        w.Send(np.array([5, 6], "i"), 0, 1)


def test_probe_then_recv(w, rank, size):
    """Probe reports source, tag and size without receiving; a Recv of the
    probed size from the probed source and tag takes that message. Iprobe
    is False before the message was sent."""
    if size < 2:
        pytest.skip("needs 2 ranks")
    st = MPI.Status()
    if rank == 1:
        assert w.Iprobe(0, 13) is False
        assert w.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, st) is False
        assert w.iprobe(source=0, tag=14) is False
    w.Barrier()  # rank 0 sends only now
    if rank == 0:
        w.Send(np.arange(37, dtype="i"), 1, 13)
        w.send(["obj", 14], 1, 14)
    elif rank == 1:
        assert w.Probe(MPI.ANY_SOURCE, MPI.ANY_TAG, st) is True
        assert (st.Get_source(), st.Get_tag(), st.Get_count(MPI.INT)) == (0, 13, 37)
        b = np.empty(st.Get_count(MPI.INT), "i")
        w.Recv(b, st.Get_source(), st.Get_tag())
        assert b.tolist() == list(range(37))
        while not w.Iprobe(0, 14, st):
            pass
        assert st.Get_tag() == 14 and st.Get_count() > 0
        assert w.probe(0, 14) is True and w.iprobe(0, 14) is True  # still there: probes do not receive
        assert w.recv(source=0, tag=14) == ["obj", 14]
        assert w.Iprobe(0, 14) is False
    assert w.Iprobe(MPI.PROC_NULL, 0, st) is True and st.Get_source() == MPI.PROC_NULL


def test_ssend(w, rank, size):
    """Issend completes only once the receiver matched it: Test is False
    before rank 1 can have received (it receives after the barrier)."""
    if size < 2:
        pytest.skip("needs 2 ranks")
    if rank == 0:
        r = w.Issend(np.arange(4, dtype="d"), 1, 4)
        assert r.Test() is False
        w.Barrier()
        r.Wait()
        w.Ssend(np.arange(2, dtype="d"), 1, 5)
        q = w.issend("pickled", 1, 6)
        assert q.Test() is False
        w.Barrier()
        q.wait()
    else:
        w.Barrier()
        if rank == 1:
            b = np.zeros(4)
            w.Recv(b, 0, 4)
            assert b.tolist() == [0, 1, 2, 3]
            c = np.zeros(2)
            w.Recv(c, 0, 5)
            assert c.tolist() == [0, 1]
        w.Barrier()
        if rank == 1:
            assert w.recv(source=0, tag=6) == "pickled"


def test_persistent_requests(w, rank, size):
    """Send_init/Recv_init (and the Ssend/Bsend/Rsend forms) started twice;
    each Start sends the buffer's contents at that moment."""
    right, left = ring(rank, size)
    out, inn = np.zeros(1000, "i"), np.zeros(1000, "i")
    inits = [w.Send_init, w.Ssend_init, w.Bsend_init, w.Rsend_init]
    if rank % 4 == 2:
        MPI.Attach_buffer(bytearray(2 * (out.nbytes + MPI.BSEND_OVERHEAD)))  # the first may still be pending
    sreq = inits[rank % 4](out, right, 21)
    rreq = w.Recv_init(inn, left, MPI.ANY_TAG)
    assert isinstance(sreq, MPI.Prequest) and sreq != MPI.REQUEST_NULL
    for k in range(2):
        out[:] = rank * 10 + k
        MPI.Prequest.Startall([rreq, sreq])
        with pytest.raises(MPI.Exception, match="still active") as e:
            rreq.Start()
        assert e.value.Get_error_code() == MPI.ERR_REQUEST
        st = MPI.Status()
        MPI.Request.Waitall([sreq], None)
        rreq.Wait(st)
        assert inn[0] == inn[-1] == left * 10 + k and (st.Get_source(), st.Get_tag()) == (left, 21)
        assert rreq and rreq != MPI.REQUEST_NULL  # inactive, not null
    rreq.Free()
    sreq.Free()
    assert rreq == MPI.REQUEST_NULL
    if rank % 4 == 2:
        MPI.Detach_buffer()


def test_pickled_nonblocking(w, rank, size):
    """isend/irecv (waitall returns the objects), an irecv with a buffer for
    a pickle above the 32 KiB default, waitany/testall."""
    right, left = ring(rank, size)
    rr = w.irecv(source=left, tag=8)
    sr = w.isend({"from": rank}, dest=right, tag=8)
    assert MPI.Request.waitall([rr, sr]) == [{"from": left}, None]
    big = np.arange(20000)  # a pickle of 160 KB
    rr = w.irecv(bytearray(200000), source=MPI.ANY_SOURCE, tag=9)
    sr = w.isend(big * rank, right, 9)
    st = MPI.Status()
    idx, obj = MPI.Request.waitany([rr], st)
    assert idx == 0 and st.Get_source() == left
    np.testing.assert_array_equal(obj, big * left)
    flag, objs = MPI.Request.testall([sr, rr])
    while not flag:
        flag, objs = MPI.Request.testall([sr, rr])
    assert objs == [None, None]
    # one rank's request: test() before and after
    if size >= 2 and rank == 0:
        q = w.irecv(source=1, tag=10)
        assert q.test() == (False, None)
        w.send("go", 1, tag=11)
        assert q.wait() == "back"
    elif size >= 2 and rank == 1:
        assert w.recv(source=0, tag=11) == "go"
        w.send("back", 0, tag=10)


# ---- communicators --------------------------------------------------------------------

def test_dup_split_free(w, rank, size):
    d = w.Dup()
    assert d != w and (d.Get_rank(), d.Get_size()) == (rank, size)
    assert d.allreduce(1) == size
    d.Free()
    assert d == MPI.COMM_NULL
    with pytest.raises(MPI.Exception) as e:
        d.Get_rank()
    assert e.value.Get_error_code() == MPI.ERR_COMM
    half = w.Split(color=rank % 2, key=-rank)  # reversed order within each color
    mine = [q for q in range(size) if q % 2 == rank % 2]
    assert half.Get_size() == len(mine)
    assert half.Get_rank() == sorted(mine, reverse=True).index(rank)
    assert half.allgather(rank) == sorted(mine, reverse=True)
    half.Free()
    none = w.Split(MPI.UNDEFINED if rank == 0 else 1, 0)
    if rank == 0:
        assert none == MPI.COMM_NULL
    else:
        assert none.Get_size() == size - 1
        none.Free()
    with pytest.raises(MPI.Exception):
        w.Free()  # predefined
    me = MPI.COMM_SELF
    x = np.array([rank])
    me.Allreduce(MPI.IN_PLACE, x)
    assert x[0] == rank and me.bcast(rank) == rank


# ---- errors --------------------------------------------------------------------------

def test_bad_buffers(w):
    x = np.zeros(4)
    with pytest.raises(ValueError, match="count 10 of MPI_DOUBLE needs 80 bytes but the buffer has 32"):
        w.Allreduce([x, 10, MPI.DOUBLE], np.zeros(10))
    with pytest.raises(TypeError, match="got a list of 5 items"):
        w.Bcast([x, 1, 2, 3, MPI.DOUBLE])
    with pytest.raises(TypeError, match="is not a buffer"):
        w.Allreduce("abc", x)
    with pytest.raises(TypeError, match="'zz'"):
        w.Bcast([x, "zz"])
    with pytest.raises(TypeError, match="not an MPI datatype"):
        w.Bcast([x, 4, np.float64])
    with pytest.raises(ValueError, match="not C-contiguous"):
        w.Bcast(np.zeros((4, 4))[:, 1])
    with pytest.raises(ValueError, match="not a whole number of MPI_DOUBLE"):
        w.Bcast([bytearray(12), MPI.DOUBLE])
    with pytest.raises(BufferError, match="read-only"):
        w.Allreduce(x, np.zeros(4).view().setflags(write=False) or _readonly(4))
    with pytest.raises(ValueError, match="sendbuf is 32 bytes but recvbuf is 24"):
        w.Allreduce(x, np.zeros(3))
    with pytest.raises(ValueError, match="has 3 entries; the communicator has"):
        w.Allgatherv(x, [np.zeros(30), [1, 1, 1] if w.Get_size() != 3 else [1, 1], MPI.DOUBLE])


def _readonly(n):
    a = np.zeros(n)
    a.setflags(write=False)
    return a


def test_bad_ops_and_ranks(w, rank, size):
    x = np.zeros(4)
    with pytest.raises(TypeError, match="not an MPI reduction op"):
        w.Allreduce(x, np.zeros(4), op="sum")
    with pytest.raises(MPI.Exception, match="MPI_BAND is not defined on MPI_DOUBLE") as e:
        w.Allreduce(x, np.zeros(4), op=MPI.BAND)
    assert e.value.Get_error_code() == e.value.error_code == MPI.ERR_OP
    assert "MPI_ERR_OP" in e.value.Get_error_string()
    with pytest.raises(MPI.Exception, match="MPI_MINLOC is not defined on MPI_INT"):
        w.Allreduce(np.zeros(2, "i"), np.zeros(2, "i"), op=MPI.MINLOC)
    with pytest.raises(MPI.Exception, match="MPI_SUM is not defined on MPI_C_BOOL"):
        w.Scan(np.zeros(2, bool), np.zeros(2, bool))
    with pytest.raises(MPI.Exception, match="root = %d is outside" % size) as e:
        w.Bcast(x, root=size)
    assert e.value.error_code == MPI.ERR_ROOT
    with pytest.raises(MPI.Exception, match="dest = %d is outside" % size):
        w.Send(x, size, 0)
    with pytest.raises(MPI.Exception, match="tag = -5"):
        w.Send(x, 0, -5)
    if size > 1 and rank != 0:
        with pytest.raises(ValueError, match="IN_PLACE .* root only"):
            w.Gather(MPI.IN_PLACE, None, root=0)


def test_collie_failure_is_mpi_exception(w, rank, size):
    """A receive shorter than the message (truncation): collie's error
    (naming the peer and both sizes) as MPI.Exception ERR_TRUNCATE, on a
    Dup so the world communicator stays healthy."""
    if size < 2:
        pytest.skip("needs 2 ranks")
    d = w.Dup()
    try:
        if rank == 0:
            d.Send(np.zeros(3), 1, tag=1)
        elif rank == 1:
            with pytest.raises(MPI.Exception) as e:
                d.Recv(np.zeros(2), 0, tag=1)
            msg = str(e.value)
            assert "Recv" in msg and "rank 0" in msg and "24 bytes" in msg and "16 bytes" in msg
            assert "truncated" in msg
            assert e.value.Get_error_code() == MPI.ERR_TRUNCATE
            assert e.value.__cause__ is not None
    finally:
        d.Free()


def test_not_implemented_names_the_call(w):
    with pytest.raises(NotImplementedError, match="MPI.Win"):
        MPI.Win
    assert not hasattr(MPI, "Cartcomm")  # also an AttributeError: hasattr works
    with pytest.raises(NotImplementedError, match="Comm.Create_cart"):
        w.Create_cart([1])
    with pytest.raises(NotImplementedError, match="Comm.Mprobe.*matched probes"):
        w.Mprobe(0)
    with pytest.raises(NotImplementedError, match="Comm.Improbe"):
        w.Improbe(0)
    with pytest.raises(NotImplementedError, match="Comm.mprobe"):
        w.mprobe()
    with pytest.raises(NotImplementedError, match="Datatype.Create_subarray"):
        MPI.INT.Create_subarray([4], [2], [0])
    with pytest.raises(NotImplementedError, match="Request.Cancel"):
        MPI.REQUEST_NULL.Cancel()


@pytest.mark.skipif(os.environ.get("COLLIE_WORLD_SIZE", "1") != "1", reason="launches its own jobs (1-rank session)")
@pytest.mark.parametrize("n", [1, 3])
def test_finalize_and_exit_job(n, tmp_path):
    """Finalize, Is_finalized, use after Finalize; a second run leaves
    COMM_WORLD to the exit cleanup; a singleton run without a launcher is a
    world of one; Abort ends its rank with the code and fails the others'
    operations naming it."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLLIE_RANK", "COLLIE_WORLD_SIZE", "COLLIE_LOCAL_RANK", "COLLIE_LOCAL_SIZE",
                        "COLLIE_STORE", "COLLIE_JOB_TOKEN")}
    env["COLLIE_LIBRARY"] = os.path.abspath(collie.library_path())
    env["PYTHONPATH"] = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                     "python")
    prog = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jobs", "mpi_finalize.py")
    for how in ("finalize", "exit"):
        cmd = [os.path.join(build_dir(), "collierun"), "-n", str(n), "--timeout", "40", sys.executable, prog, how]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=50, cwd=str(tmp_path))
        assert r.returncode == 0, r.stdout + r.stderr
        assert sorted(r.stdout.split("\n"))[1:] == sorted("ok %d %d %s" % (q, n, how) for q in range(n))
    r = subprocess.run([sys.executable, prog, "finalize"], env=env, capture_output=True, text=True, timeout=50,
                       cwd=str(tmp_path))
    assert r.returncode == 0 and r.stdout == "ok 0 1 finalize\n", r.stdout + r.stderr
    if n > 1:
        # Abort(3) on rank 1: its exit status is 3, the others' Barrier fails naming it
        cmd = [os.path.join(build_dir(), "collierun"), "-n", str(n), "--keep-going", "--timeout", "40",
               sys.executable, prog, "abort"]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=50, cwd=str(tmp_path))
        assert r.returncode == 3, r.stdout + r.stderr
        assert sorted(r.stdout.split("\n"))[1:] == sorted("ok %d %d abort" % (q, n) for q in range(n) if q != 1)


def test_to_oneself(w, rank, size):
    """Sends and receives to the rank itself, as MPI programs that loop over
    every rank do: Isend then Recv, Irecv then Send (a blocking standard
    send to oneself completes once its bytes are aside), two tags out of
    order, and the pickled forms."""
    me = rank
    a, b = np.arange(4.0) + me, np.zeros(4)
    r = w.Isend(a, me, tag=3)
    st = MPI.Status()
    w.Recv(b, me, tag=3, status=st)
    r.Wait()
    assert (b == a).all() and st.Get_source() == me and st.Get_tag() == 3 and st.Get_count(MPI.DOUBLE) == 4
    c = np.zeros(4)
    q = w.Irecv(c, me, tag=4)
    w.Send(a * 2, me, tag=4)
    q.Wait()
    assert (c == a * 2).all()
    x, y = np.zeros(1), np.zeros(1)
    w.Send(np.ones(1), me, tag=5)
    w.Send(np.full(1, 2.0), me, tag=6)
    w.Recv(y, me, tag=6)
    w.Recv(x, me, tag=5)
    assert x[0] == 1.0 and y[0] == 2.0
    req = w.isend({"me": me}, dest=me, tag=7)
    assert w.recv(source=me, tag=7) == {"me": me}
    req.wait()
