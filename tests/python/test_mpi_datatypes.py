"""collie.MPI: derived datatypes (every constructor, their bounds as MPI-3.1
section 4.1 defines them, point-to-point, collectives and reductions with
them, the errors) and buffered sends (Attach_buffer, Bsend, Ibsend,
Bsend_init, Detach_buffer). The expected values are worked out from the
MPI standard (the bounds agree with Open MPI's mpi4py). Every rank runs
every test (the collectives need it); at 1 rank the point-to-point tests
send to the rank itself."""

import numpy as np
import pytest

from collie import MPI

W = MPI.COMM_WORLD
D, I, C = MPI.DOUBLE, MPI.INT, MPI.CHAR


@pytest.fixture
def w():
    W.Get_size()  # every rank makes COMM_WORLD (collective) before a test uses it on some ranks only
    return W


def ring(rank, size):
    return (rank + 1) % size, (rank - 1) % size


def vec():
    """vector(3, 2, 4) of DOUBLE: elements 0, 1, 4, 5, 8, 9 of 10 (extent 80 bytes)."""
    return D.Create_vector(3, 2, 4).Commit()


PICK = [0, 1, 4, 5, 8, 9]  # what vec() takes of np.arange(12.)


def pair_struct():
    """struct {int i; double d;}: int at 0, double at 8, as C (and numpy with align=True) lays it out."""
    return MPI.Datatype.Create_struct([1, 1], [0, 8], [I, D]).Commit()


ID = np.dtype([("i", "i4"), ("d", "f8")], align=True)


def records(n, r):
    a = np.zeros(n, ID)
    a["i"] = np.arange(n) + 10 * r
    a["d"] = np.arange(n) / 2 + r
    return a


# ---- constructors and their bounds ------------------------------------------------


def bounds(t):
    return t.Get_size(), t.Get_extent(), t.Get_true_extent()


@pytest.mark.parametrize("make, size, lb_extent, true", [
    # count copies, one extent apart
    (lambda: D.Create_contiguous(3), 24, (0, 24), (0, 24)),
    # vector(3, 2, 4): blocks of 2 at 0, 4, 8 doubles: ub = (2*4 + 2) * 8
    (lambda: D.Create_vector(3, 2, 4), 48, (0, 80), (0, 80)),
    # a negative stride: blocks at 0, -4, -8 doubles
    (lambda: D.Create_vector(3, 2, -4), 48, (-64, 80), (-64, 80)),
    # hvector: stride in bytes
    (lambda: D.Create_hvector(3, 2, 40), 48, (0, 96), (0, 96)),
    # data up to byte 14, the extent rounded up to DOUBLE's alignment (8)
    (lambda: D.Create_hvector(3, 1, 3), 24, (0, 16), (0, 14)),
    # indexed: blocks of 2 at 0 and of 1 at 5 doubles
    (lambda: D.Create_indexed([2, 1], [0, 5]), 24, (0, 48), (0, 48)),
    # hindexed: 2 ints at byte 4, 1 at byte 20: lb is the lowest displacement
    (lambda: I.Create_hindexed([2, 1], [4, 20]), 12, (4, 20), (4, 20)),
    (lambda: I.Create_indexed_block(2, [1, 4]), 16, (4, 20), (4, 20)),
    (lambda: C.Create_hindexed_block(2, [1, 9]), 4, (1, 10), (1, 10)),
    # struct {int; double;}: data 12 bytes, extent 16
    (lambda: MPI.Datatype.Create_struct([1, 1], [0, 8], [I, D]), 12, (0, 16), (0, 16)),
    # struct {double; int;}: data ends at 12, the extent rounded to 16
    (lambda: MPI.Datatype.Create_struct([1, 1], [0, 8], [D, I]), 12, (0, 16), (0, 12)),
    (lambda: MPI.Datatype.Create_struct([1, 1], [0, 4], [I, C]), 5, (0, 8), (0, 5)),
    # a zero-length block counts for nothing (not even its alignment)
    (lambda: MPI.Datatype.Create_struct([0, 1], [0, 4], [D, C]), 1, (4, 1), (4, 1)),
    # resized: the bounds as given, the data where it was
    (lambda: I.Create_resized(-4, 12), 4, (-4, 12), (0, 4)),
    # a resized part's bounds win over the others' data (MPI's lb/ub markers)
    (lambda: MPI.Datatype.Create_struct([1, 1], [0, 12], [D.Create_resized(0, 12), C]), 9, (0, 12), (0, 13)),
    (lambda: D.Create_resized(0, 12).Create_contiguous(2), 16, (0, 24), (0, 20)),
    # nested: a vector of the struct {int; double;}
    (lambda: MPI.Datatype.Create_struct([1, 1], [0, 8], [I, D]).Create_vector(2, 1, 2), 24, (0, 48), (0, 48)),
    # a pair type: 12 bytes of data in an extent of 16
    (lambda: MPI.DOUBLE_INT.Create_contiguous(2), 24, (0, 32), (0, 28)),
    (lambda: D.Create_contiguous(0), 0, (0, 0), (0, 0)),
    (lambda: D.Create_vector(0, 2, 5), 0, (0, 0), (0, 0)),
])
def test_constructor_bounds(make, size, lb_extent, true):
    t = make()
    assert bounds(t) == (size, lb_extent, true)
    lb, ext = lb_extent
    assert (t.size, t.lb, t.ub, t.extent) == (size, lb, lb + ext, ext)
    assert (t.Get_lb(), t.Get_ub()) == (lb, lb + ext)
    assert (t.true_lb, t.true_extent, t.true_ub) == (true[0], true[1], true[0] + true[1])
    assert not t.Is_predefined() and not t.is_predefined
    assert t.Commit() is t  # as mpi4py: Commit returns the datatype
    d = t.Dup()
    assert bounds(d) == bounds(t) and not d.Is_predefined()
    t.Free()
    assert bounds(d) == (size, lb_extent, true)  # a type made from a freed one lives on
    d.Free()


def test_predefined_stay_predefined():
    assert D.Is_predefined() and D.is_predefined and D.Commit() is D
    assert MPI.DOUBLE_INT.Get_true_extent() == (0, 12) and MPI.SHORT_INT.Get_true_extent() == (0, 8)
    d = D.Dup()
    assert not d.Is_predefined() and bounds(d) == (8, (0, 8), (0, 8))
    with pytest.raises(MPI.Exception, match="MPI_DOUBLE is predefined and cannot be freed") as e:
        D.Free()
    assert e.value.Get_error_code() == MPI.ERR_TYPE
    t = D.Create_vector(3, 2, 4)
    assert "Create_vector(3, 2, 4) of MPI_DOUBLE" in repr(t) and t.Get_name() == ""
    t.Set_name("my vector")
    assert t.Get_name() == "my vector" and t.name == "my vector"


# ---- point-to-point -------------------------------------------------------------------


def test_send_recv_vector(w, rank, size):
    """vector(3, 2, 4) of DOUBLE over np.arange(12.) sends elements 0, 1, 4,
    5, 8, 9; a receive into the same type fills those and leaves the gaps."""
    v = vec()
    src = np.arange(12.)
    st = MPI.Status()
    if size == 1:
        r = w.Isend([src, 1, v], 0, 3)
        got = np.full(6, -1.)
        w.Recv(got, 0, 3, st)
        r.Wait()
    elif rank == 0:
        w.Send([src, 1, v], 1, 3)
    elif rank == 1:
        got = np.full(6, -1.)
        w.Recv(got, 0, 3, st)
    if rank == (1 if size > 1 else 0):
        assert got.tolist() == PICK
        assert (st.Get_count(v), st.Get_count(D), st.Get_elements(v), st.Get_elements(D)) == (1, 6, 6, 6)
    # the other way round: 6 contiguous doubles into the vector's places
    dst = np.full(12, -1.)
    if size == 1:
        r = w.Isend(np.arange(6.) + 100, 0, 4)
        w.Recv([dst, 1, v], 0, 4)
        r.Wait()
    elif rank == 0:
        w.Send(np.arange(6.) + 100, 1, 4)
    elif rank == 1:
        w.Recv([dst, 1, v], 0, 4)
    if rank == (1 if size > 1 else 0):
        assert dst.tolist() == [100, 101, -1, -1, 102, 103, -1, -1, 104, 105, -1, -1]
    v.Free()


def test_isend_irecv_ring_struct_and_vector(w, rank, size):
    """Isend/Irecv around the ring: an array of struct {int; double;} (count
    inferred from the buffer) and two vectors, received with Waitall
    (unpacked at the wait)."""
    right, left = ring(rank, size)
    s, v = pair_struct(), vec()
    got = np.zeros(5, ID)
    vbuf = np.full(24, -1.)  # two vectors back to back: elements 0-9 and 10-19 (extent 10 doubles)
    reqs = [w.Irecv([got, s], left, 11), w.Irecv([vbuf, 2, v], left, 12)]
    reqs += [w.Isend([records(5, rank), s], right, 11), w.Isend([np.arange(24.) * (rank + 1), 2, v], right, 12)]
    MPI.Request.Waitall(reqs)
    want = records(5, left)
    assert got["i"].tolist() == want["i"].tolist() and got["d"].tolist() == want["d"].tolist()
    exp = np.full(24, -1.)
    idx = PICK + [10 + p for p in PICK]
    exp[idx] = np.arange(24.)[idx] * (left + 1)
    assert vbuf.tolist() == exp.tolist()


def test_sendrecv_nested_and_shorter_message(w, rank, size):
    """Sendrecv of a vector of the struct (every other record); a shorter
    message into a derived type fills only what came."""
    right, left = ring(rank, size)
    s = pair_struct()
    every_other = s.Create_vector(2, 1, 2).Commit()  # records 0 and 2 of 3 (extent 48)
    out = np.zeros(3, ID)
    st = MPI.Status()
    w.Sendrecv([records(3, rank), 1, every_other], right, 21, [out, 1, every_other], left, 21, st)
    want = records(3, left)
    assert out["i"].tolist() == [want["i"][0], 0, want["i"][2]]
    assert out["d"].tolist() == [want["d"][0], 0, want["d"][2]]
    assert st.Get_count(every_other) == 1 and st.Get_count(s) == 2 and st.Get_elements(every_other) == 4
    v = vec()
    short = np.full(12, -1.)
    w.Sendrecv(np.array([7., 8., 9.]), right, 22, [short, 1, v], left, 22, st)
    assert short.tolist() == [7, 8, -1, -1, 9, -1, -1, -1, -1, -1, -1, -1]
    assert st.Get_count(v) == MPI.UNDEFINED and st.Get_count(D) == 3 and st.Get_elements(v) == 3


def test_persistent_with_derived(w, rank, size):
    """Send_init/Recv_init of a vector: each Start sends the buffer's contents
    of that moment, each Wait unpacks."""
    right, left = ring(rank, size)
    v = vec()
    src, dst = np.zeros(12), np.full(12, -1.)
    sreq, rreq = w.Send_init([src, 1, v], right, 31), w.Recv_init([dst, 1, v], left, 31)
    for k in range(2):
        src[:] = np.arange(12.) + 100 * k + rank
        MPI.Prequest.Startall([rreq, sreq])
        MPI.Request.Waitall([rreq, sreq])
        assert dst[PICK].tolist() == (np.arange(12.) + 100 * k + left)[PICK].tolist()
        assert dst[[2, 3, 6, 7, 10, 11]].tolist() == [-1] * 6
    sreq.Free()
    rreq.Free()


# ---- collectives -----------------------------------------------------------------------


def test_bcast_vector(w, rank, size):
    v = vec()
    buf = np.arange(12.) if rank == 0 else np.full(12, -1.)
    w.Bcast([buf, 1, v], root=0)
    if rank != 0:
        exp = np.full(12, -1.)
        exp[PICK] = PICK
        assert buf.tolist() == exp.tolist()
    b2 = np.arange(12.) * 2 if rank == size - 1 else np.zeros(12)
    w.Ibcast([b2, 1, v], root=size - 1).Wait()  # unpacked at the wait
    assert b2[PICK].tolist() == [2. * p for p in PICK]


def test_gather_scatter_derived(w, rank, size):
    """Gather/Scatter with a vector on either side: each rank's block is
    one vector (6 doubles packed); a vector recvbuf's blocks are one extent
    (10 doubles) apart."""
    v = vec()
    mine = np.arange(12.) + 100 * rank
    flat = np.full(6 * size, -1.) if rank == 0 else None
    w.Gather([mine, 1, v], [flat, 6, D] if rank == 0 else None, root=0)
    spread = np.full(10 * size, -1.) if rank == 0 else None
    w.Gather(mine[PICK].copy(), [spread, 1, v] if rank == 0 else None, root=0)
    if rank == 0:
        assert flat.tolist() == [p + 100 * q for q in range(size) for p in PICK]
        exp = np.full(10 * size, -1.)
        for q in range(size):
            exp[[10 * q + p for p in PICK]] = [p + 100 * q for p in PICK]
        assert spread.tolist() == exp.tolist()
    # Scatter: the root's vectors (10 doubles apart) to every rank's 6 doubles, and back into a vector
    src = np.arange(10. * size) if rank == 0 else None
    got = np.full(6, -1.)
    w.Scatter([src, 1, v] if rank == 0 else None, got, root=0)
    assert got.tolist() == [10 * rank + p for p in PICK]
    into = np.full(12, -1.)
    w.Scatter([np.arange(6. * size), 6, D] if rank == 0 else None, [into, 1, v], root=0)
    exp = np.full(12, -1.)
    exp[PICK] = np.arange(6.) + 6 * rank
    assert into.tolist() == exp.tolist()


def test_gatherv_scatterv_derived(w, rank, size):
    """The v-variants with a vector: counts and displacements in its
    extents (block q at displacement 2q: one extent of gap between blocks,
    left untouched)."""
    v = vec()
    counts, displs = [1] * size, [2 * q for q in range(size)]
    n = 10 * (2 * size - 1)
    big = np.full(n, -1.) if rank == 0 else None
    w.Gatherv((np.arange(6.) + 10 * rank), [big, (counts, displs), v] if rank == 0 else None, root=0)
    if rank == 0:
        exp = np.full(n, -1.)
        for q in range(size):
            exp[[20 * q + p for p in PICK]] = np.arange(6.) + 10 * q
        assert big.tolist() == exp.tolist()
    src = np.arange(float(n)) if rank == 0 else None
    got = np.full(6, -1.)
    w.Scatterv([src, (counts, displs), v] if rank == 0 else None, got, root=0)
    assert got.tolist() == [20 * rank + p for p in PICK]


def test_allgather_alltoall_derived(w, rank, size):
    v = vec()
    mine = np.arange(12.) + 100 * rank
    allv = np.full(6 * size, -1.)
    w.Allgather([mine, 1, v], [allv, 6, D])
    assert allv.tolist() == [p + 100 * q for q in range(size) for p in PICK]
    # Alltoall: block q of the sendbuf (vector q, 10 doubles apart) goes to rank q
    send = np.arange(10. * size) + 1000 * rank
    recv = np.full(6 * size, -1.)
    w.Alltoall([send, 1, v], [recv, 6, D])
    assert recv.tolist() == [10 * rank + p + 1000 * q for q in range(size) for p in PICK]
    # and into vectors on the receiving side (nonblocking: unpacked at the wait)
    back = np.full(10 * size, -1.)
    w.Ialltoall([np.full(6 * size, float(rank)), 6, D], [back, 1, v]).Wait()
    exp = np.full(10 * size, -1.)
    for q in range(size):
        exp[[10 * q + p for p in PICK]] = q
    assert back.tolist() == exp.tolist()


def test_reductions_on_vector_of_double(w, rank, size):
    """Allreduce, Reduce, Scan on a vector of DOUBLE reduce its elements one
    by one; the gaps of the recvbuf stay as they were."""
    v = vec()
    x = np.arange(12.) * (rank + 1)
    tri = size * (size + 1) // 2
    y = np.full(12, -1.)
    w.Allreduce([x, 1, v], [y, 1, v], op=MPI.SUM)
    exp = np.full(12, -1.)
    exp[PICK] = np.array(PICK, float) * tri
    assert y.tolist() == exp.tolist()
    z = np.arange(12.) * (rank + 1)
    w.Allreduce(MPI.IN_PLACE, [z, 1, v], op=MPI.MAX)
    exp = np.arange(12.) * (rank + 1)
    exp[PICK] = np.array(PICK, float) * size
    assert z.tolist() == exp.tolist()
    r = np.full(12, -1.)
    w.Reduce([x, 1, v], [r, 1, v] if rank == 0 else None, op=MPI.SUM, root=0)
    if rank == 0:
        exp = np.full(12, -1.)
        exp[PICK] = np.array(PICK, float) * tri
        assert r.tolist() == exp.tolist()
    s = np.full(12, -1.)
    w.Scan([x, 1, v], [s, 1, v], op=MPI.SUM)  # reduced in numpy, in rank order
    exp = np.full(12, -1.)
    exp[PICK] = np.array(PICK, float) * (rank + 1) * (rank + 2) // 2
    assert s.tolist() == exp.tolist()
    q = np.zeros(12)
    w.Iallreduce([x, 1, v], [q, 1, v], op=MPI.SUM).Wait()
    assert q[PICK].tolist() == [p * tri for p in PICK]


def test_reductions_contiguous_int_and_minloc_pairs(w, rank, size):
    """A contiguous type needs no copy; MINLOC on a contiguous of DOUBLE_INT
    reduces its pairs."""
    c3 = I.Create_contiguous(3).Commit()
    out = np.zeros(6, "i")
    w.Allreduce([np.arange(6, dtype="i") + rank, 2, c3], [out, 2, c3], op=MPI.MAX)
    assert out.tolist() == (np.arange(6) + size - 1).tolist()
    p2 = MPI.DOUBLE_INT.Create_contiguous(2).Commit()
    mine = np.zeros(2, MPI.DOUBLE_INT.np)
    mine["value"] = [abs(rank - 1), -rank]
    mine["index"] = rank
    got = np.zeros(2, MPI.DOUBLE_INT.np)
    w.Allreduce([mine, 1, p2], [got, 1, p2], op=MPI.MINLOC)
    assert got["value"].tolist() == [0 if size > 1 else 1, -(size - 1)]  # the lowest |r - 1|, the lowest -r
    assert got["index"].tolist() == [1 if size > 1 else 0, size - 1]


# ---- errors ----------------------------------------------------------------------------


def test_uncommitted_and_freed_are_errors(w, rank):
    u = D.Create_contiguous(2)
    with pytest.raises(MPI.Exception, match=r"Send: buf: the datatype Create_contiguous\(2\) of MPI_DOUBLE is not "
                       r"committed") as e:
        w.Send([np.zeros(4), 1, u], rank, 1)
    assert e.value.Get_error_code() == MPI.ERR_TYPE
    with pytest.raises(MPI.Exception, match="Allreduce: recvbuf: .* is not committed"):
        w.Allreduce([np.zeros(4), 1, u], [np.zeros(4), 1, u])
    u.Commit()
    u.Free()
    assert not u
    with pytest.raises(MPI.Exception, match=r"Isend: buf: datatype: the datatype .* was freed") as e:
        w.Isend([np.zeros(4), 1, u], rank, 1)
    assert e.value.Get_error_code() == MPI.ERR_TYPE
    with pytest.raises(MPI.Exception, match=r"Datatype.Get_extent: the datatype .* was freed"):
        u.Get_extent()
    with pytest.raises(MPI.Exception, match=r"Datatype.Free: the datatype .* was freed"):
        u.Free()
    with pytest.raises(MPI.Exception, match=r"Datatype.Create_vector: the datatype .* was freed"):
        u.Create_vector(2, 1, 2)


def test_reduction_refusals(w):
    s = pair_struct()
    with pytest.raises(MPI.Exception, match=r"Allreduce: MPI_SUM on the derived datatype Create_struct.*several "
                       r"types \(MPI_INT, MPI_DOUBLE\)") as e:
        w.Allreduce([records(2, 0), s], [np.zeros(2, ID), s], op=MPI.SUM)
    assert e.value.Get_error_code() == MPI.ERR_OP
    with pytest.raises(MPI.Exception, match=r"Reduce: MPI_BAND is not defined on MPI_DOUBLE .*the basic type of "
                       r"the derived datatype Create_vector"):
        w.Reduce([np.zeros(12), 1, vec()], [np.zeros(12), 1, vec()], op=MPI.BAND, root=0)


def test_bad_arguments():
    with pytest.raises(MPI.Exception, match=r"Datatype.Create_contiguous: count = -1 must be >= 0") as e:
        D.Create_contiguous(-1)
    assert e.value.Get_error_code() == MPI.ERR_COUNT
    with pytest.raises(MPI.Exception, match=r"Datatype.Create_vector: blocklength = -2 must be >= 0") as e:
        D.Create_vector(3, -2, 4)
    assert e.value.Get_error_code() == MPI.ERR_ARG
    with pytest.raises(MPI.Exception, match=r"Create_indexed: blocklengths\[1\] = -1 must be >= 0"):
        D.Create_indexed([1, -1], [0, 4])
    with pytest.raises(ValueError, match="Create_hindexed: blocklengths has 2 entries but displacements has 1"):
        D.Create_hindexed([1, 2], [0])
    with pytest.raises(ValueError, match="Create_struct: blocklengths has 1 entries but datatypes has 2"):
        MPI.Datatype.Create_struct([1], [0], [I, D])
    with pytest.raises(TypeError, match=r"Create_struct: datatypes\[1\] = 'x' is not an MPI datatype"):
        MPI.Datatype.Create_struct([1, 1], [0, 8], [I, "x"])
    with pytest.raises(TypeError, match="Create_vector: stride = 1.5 must be an int"):
        D.Create_vector(2, 1, 1.5)
    with pytest.raises(MPI.Exception, match="DATATYPE_NULL has no typemap"):
        MPI.DATATYPE_NULL.Create_contiguous(2)
    with pytest.raises(NotImplementedError, match="Datatype.Get_envelope"):
        vec().Get_envelope()


def test_buffer_too_small_or_not_whole(w, rank):
    v = vec()
    with pytest.raises(ValueError, match=r"Send: buf: count 2 of Create_vector\(3, 2, 4\) of MPI_DOUBLE .* span "
                       r"bytes 0..160 but the buffer has 96"):
        w.Send([np.arange(12.), 2, v], rank, 1)
    with pytest.raises(ValueError, match=r"Send: buf: cannot infer the count: the buffer's 96 bytes are not a whole "
                       r"number of .* \(extent 80 bytes"):
        w.Send([np.arange(12.), v], rank, 1)
    neg = D.Create_vector(2, 1, -2).Commit()  # its data lies before its origin
    with pytest.raises(ValueError, match=r"span bytes -16..8"):
        w.Send([np.arange(4.), 1, neg], rank, 1)


# ---- buffered sends -------------------------------------------------------------------


def test_bsend_needs_an_attached_buffer(w, rank):
    with pytest.raises(MPI.Exception, match=r"Bsend: no buffer is attached for buffered sends \(this one needs 160 "
                       r"bytes = 32 \+ MPI.BSEND_OVERHEAD") as e:
        w.Bsend(np.zeros(4), rank, 1)
    assert e.value.Get_error_code() == MPI.ERR_BUFFER
    with pytest.raises(MPI.Exception, match="Detach_buffer: no buffer is attached"):
        MPI.Detach_buffer()
    mem = bytearray(100 + MPI.BSEND_OVERHEAD)
    MPI.Attach_buffer(mem)
    try:
        with pytest.raises(MPI.Exception, match="Attach_buffer: a buffer of 228 bytes is already attached") as e:
            MPI.Attach_buffer(bytearray(10))
        assert e.value.Get_error_code() == MPI.ERR_BUFFER
        with pytest.raises(MPI.Exception, match=r"Ibsend: the attached buffer lacks room: this send needs 928 bytes "
                           r"\(800 \+ MPI.BSEND_OVERHEAD\) but 228 of its 228 are free") as e:
            w.Ibsend(np.zeros(100), rank, 1)
        assert e.value.Get_error_code() == MPI.ERR_BUFFER
    finally:
        assert MPI.Detach_buffer() is mem


def test_bsend_large_completes_before_the_receive(w, rank, size):
    """A 4 MiB Bsend returns before its receiver receives (which it does only
    after a barrier): no deadlock; Ibsend's request is complete at once;
    Detach_buffer waits for the sends and returns the buffer."""
    right, left = ring(rank, size)
    n = 4 << 20
    mem = np.empty(n + 64 + 2 * MPI.BSEND_OVERHEAD, np.uint8)
    MPI.Attach_buffer(mem)
    out = np.full(n, rank % 251, np.uint8)
    w.Bsend(out, right, 41)
    out[:] = 255  # the message was copied: changing the buffer now changes nothing
    v = vec()
    r = w.Ibsend([np.arange(12.) + rank, 1, v], right, 42)  # 48 bytes, packed
    assert r.Test()
    w.Barrier()
    got = np.zeros(n, np.uint8)
    w.Recv(got, left, 41)
    assert int(got.min()) == int(got.max()) == left % 251
    small = np.zeros(6)
    w.Recv(small, left, 42)
    assert small.tolist() == [p + left for p in PICK]
    assert MPI.Detach_buffer() is mem


def test_bsend_init_started_twice(w, rank, size):
    right, left = ring(rank, size)
    buf = np.zeros(100, "i")
    MPI.Attach_buffer(bytearray(2 * (buf.nbytes + MPI.BSEND_OVERHEAD)))
    sreq = w.Bsend_init(buf, right, 51)
    got = np.zeros(100, "i")
    for k in range(2):
        buf[:] = 10 * rank + k
        sreq.Start()
        sreq.Wait()  # complete at once: the copy is made
        w.Recv(got, left, 51)
        assert got[0] == got[-1] == 10 * left + k
    sreq.Free()
    MPI.Detach_buffer()
