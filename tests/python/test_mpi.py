"""collie.MPI (mpi4py's interface): every collective, datatype and buffer
form, IN_PLACE, MINLOC/MAXLOC, Scan/Exscan and the nonblocking forms,
against closed forms of rank and size. Runs on MPI.COMM_WORLD, which
collie.MPI makes from collierun's environment at first use (beside the
session's own communicator). Point-to-point, the pickled methods, the
communicators and the errors are in test_mpi_p2p.py."""

import numpy as np
import pytest

from collie import MPI

W = MPI.COMM_WORLD


@pytest.fixture
def w():
    W.Get_size()  # every rank makes COMM_WORLD (collective) before a test uses it on some ranks only
    return W


def base(n, dtype, r):
    """Rank r's input: i % 5 + r + 1 (small, exact in every dtype)."""
    return (np.arange(n) % 5 + r + 1).astype(dtype)


def total(n, size):
    """sum over ranks of base(n, ., r)."""
    return size * (np.arange(n) % 5 + 1) + size * (size - 1) // 2


def test_world_matches_launcher(w, rank, size):
    assert (w.Get_rank(), w.Get_size()) == (rank, size)
    assert (w.rank, w.size) == (rank, size)
    assert isinstance(w, MPI.Intracomm) and isinstance(w, MPI.Comm)
    assert MPI.COMM_SELF.Get_size() == 1 and MPI.COMM_SELF.Get_rank() == 0
    assert MPI.Is_initialized() and not MPI.Is_finalized()
    MPI.Init()
    MPI.Init()  # idempotent
    assert MPI.Init_thread(MPI.THREAD_MULTIPLE) == MPI.Query_thread() == MPI.THREAD_SERIALIZED
    assert MPI.Init_thread(MPI.THREAD_SINGLE) == MPI.THREAD_SINGLE
    t0 = MPI.Wtime()
    assert MPI.Wtime() >= t0 and 0 < MPI.Wtick() < 1e-3
    assert isinstance(MPI.Get_processor_name(), str) and MPI.Get_processor_name()


# ---- datatypes -------------------------------------------------------------------

INT_TYPES = [("SIGNED_CHAR", "b"), ("UNSIGNED_CHAR", "B"), ("SHORT", "h"), ("UNSIGNED_SHORT", "H"), ("INT", "i"),
             ("UNSIGNED", "I"), ("LONG", "l"), ("UNSIGNED_LONG", "L"), ("LONG_LONG", "q"),
             ("UNSIGNED_LONG_LONG", "Q"), ("INT8_T", "i1"), ("INT16_T", "i2"), ("INT32_T", "i4"),
             ("INT64_T", "i8"), ("UINT8_T", "u1"), ("UINT16_T", "u2"), ("UINT32_T", "u4"), ("UINT64_T", "u8")]
FLOAT_TYPES = [("FLOAT", "f"), ("DOUBLE", "d")]


@pytest.mark.parametrize("name,code", INT_TYPES + FLOAT_TYPES + [("C_BOOL", "?"), ("BYTE", "B"), ("CHAR", "S1")])
def test_datatype_sizes_and_numpy(name, code):
    dt = getattr(MPI, name)
    np_dt = np.dtype(code)
    assert dt.Get_size() == np_dt.itemsize == dt.size
    assert dt.Get_extent() == (0, np_dt.itemsize)
    assert dt.Get_name() == "MPI_" + name
    assert MPI.to_numpy(dt) == np_dt


def test_datatype_pairs_and_inference():
    # C's struct {T value; int index;}: size is the data, extent the stride.
    assert (MPI.FLOAT_INT.Get_size(), MPI.FLOAT_INT.Get_extent()) == (8, (0, 8))
    assert (MPI.DOUBLE_INT.Get_size(), MPI.DOUBLE_INT.Get_extent()) == (12, (0, 16))
    assert (MPI.LONG_INT.Get_size(), MPI.LONG_INT.Get_extent()) == (12, (0, 16))
    assert (MPI.TWOINT.Get_size(), MPI.TWOINT.Get_extent()) == (8, (0, 8))
    assert MPI.BOOL is MPI.C_BOOL
    assert MPI.from_numpy(np.float64) is MPI.DOUBLE
    assert MPI.from_numpy(np.int32) is MPI.INT
    assert MPI.from_numpy(np.int64) is MPI.LONG
    assert MPI.from_numpy(np.uint8) is MPI.UNSIGNED_CHAR
    assert MPI.from_numpy(np.bool_) is MPI.C_BOOL
    assert MPI.from_numpy(MPI.DOUBLE_INT.np) is MPI.DOUBLE_INT


@pytest.mark.parametrize("name,code", INT_TYPES + FLOAT_TYPES)
def test_allreduce_sum_every_type(w, rank, size, name, code):
    """Native (collie) and numpy-reduced (SHORT, 16-bit) types alike, named
    and inferred from the array."""
    x = base(6, code, rank)
    y = np.zeros(6, code)
    w.Allreduce([x, getattr(MPI, name)], [y, getattr(MPI, name)], op=MPI.SUM)
    np.testing.assert_array_equal(y, total(6, size).astype(code))
    z = np.zeros(6, code)
    w.Allreduce(x, z)  # datatype from the array, op SUM by default
    np.testing.assert_array_equal(z, y)


@pytest.mark.parametrize("code", ["i", "h", "d", "B"])
def test_allreduce_every_op(w, rank, size, code):
    x = base(5, code, rank)
    out = {}
    ops = [MPI.SUM, MPI.PROD, MPI.MIN, MPI.MAX]
    if code != "d":
        ops += [MPI.LAND, MPI.LOR, MPI.LXOR, MPI.BAND, MPI.BOR, MPI.BXOR]
    for op in ops:
        y = np.zeros(5, code)
        w.Allreduce(x, y, op=op)
        out[op.Get_name()] = y
    i = np.arange(5) % 5 + 1
    np.testing.assert_array_equal(out["MPI_SUM"], total(5, size).astype(code))
    prod = np.ones(5, np.int64)
    for r in range(size):
        prod = prod * (i + r)
    np.testing.assert_array_equal(out["MPI_PROD"], prod.astype(code))
    np.testing.assert_array_equal(out["MPI_MIN"], i.astype(code))
    np.testing.assert_array_equal(out["MPI_MAX"], (i + size - 1).astype(code))
    if code != "d":
        # One rank: the input itself (MPI applies no op); else 1 or 0.
        logical = i.astype(code) if size == 1 else None
        np.testing.assert_array_equal(out["MPI_LAND"], np.ones(5, code) if logical is None else logical)
        np.testing.assert_array_equal(out["MPI_LOR"], np.ones(5, code) if logical is None else logical)
        np.testing.assert_array_equal(out["MPI_LXOR"], np.full(5, size % 2, code) if logical is None else logical)
        band, bor, bxor = i.copy(), i.copy(), i.copy()
        for r in range(1, size):
            band, bor, bxor = band & (i + r), bor | (i + r), bxor ^ (i + r)
        np.testing.assert_array_equal(out["MPI_BAND"], band.astype(code))
        np.testing.assert_array_equal(out["MPI_BOR"], bor.astype(code))
        np.testing.assert_array_equal(out["MPI_BXOR"], bxor.astype(code))


def test_logical_ops_on_bool(w, rank, size):
    x = np.array([True, rank == 0, rank % 2 == 1, False])
    y = {}
    for op in (MPI.LAND, MPI.LOR, MPI.LXOR):
        y[op.Get_name()] = np.zeros(4, bool)
        w.Allreduce(x, y[op.Get_name()], op=op)
    odd = size // 2  # ranks with rank % 2 == 1
    np.testing.assert_array_equal(y["MPI_LAND"], [True, size == 1, False, False])
    np.testing.assert_array_equal(y["MPI_LOR"], [True, True, odd > 0, False])
    np.testing.assert_array_equal(y["MPI_LXOR"], [size % 2 == 1, True, odd % 2 == 1, False])


@pytest.mark.parametrize("name,value", [("FLOAT_INT", "f4"), ("DOUBLE_INT", "f8"), ("LONG_INT", "i8"),
                                        ("TWOINT", "i4")])
def test_minloc_maxloc(w, rank, size, name, value):
    dt = getattr(MPI, name)
    x = np.zeros(3, dtype=dt.np)
    # value (r - size/2)^2 has its minimum at rank size//2; a tie (constant 7)
    # goes to the lowest index; index is rank + 10.
    x["value"] = [(rank - size // 2) ** 2, 7, rank]
    x["index"] = rank + 10
    mn, mx = np.zeros_like(x), np.zeros_like(x)
    w.Allreduce([x, dt], [mn, dt], op=MPI.MINLOC)
    w.Allreduce([x, dt], [mx, dt], op=MPI.MAXLOC)
    assert [tuple(v) for v in mn.tolist()] == [(0, size // 2 + 10), (7, 10), (0, 10)]
    far = max(range(size), key=lambda r: ((r - size // 2) ** 2, -r))
    assert [tuple(v) for v in mx.tolist()] == [((far - size // 2) ** 2, far + 10), (7, 10), (size - 1, size + 9)]
    red = np.zeros_like(x)
    w.Reduce([x, dt], [red, dt] if rank == size - 1 else None, op=MPI.MINLOC, root=size - 1)
    if rank == size - 1:
        np.testing.assert_array_equal(red, mn)


# ---- buffer forms ------------------------------------------------------------------

def test_buffer_forms_bcast(w, rank, size):
    root = size - 1
    src = np.arange(8, dtype="i") * 3
    forms = [
        lambda a: a,
        lambda a: [a, MPI.INT],
        lambda a: [a, "i"],
        lambda a: (a, 8),
        lambda a: [a, 8, MPI.INT],
        lambda a: [a, (3, 2), MPI.INT],  # 3 elements from element 2
        lambda a: [a, 3, 2, MPI.INT],
        lambda a: [a, 16, MPI.SHORT],  # the same bytes, another datatype
    ]
    for q, form in enumerate(forms):
        a = src.copy() if rank == root else np.full(8, -1, "i")
        w.Bcast(form(a), root=root)
        want = src.copy() if q not in (5, 6) or rank == root else np.full(8, -1, "i")
        if q in (5, 6) and rank != root:
            want[2:5] = src[2:5]
        np.testing.assert_array_equal(a, want, err_msg="form %d" % q)
    b = bytearray(b"hello" if rank == root else b".....")
    w.Bcast(b, root=root)
    assert b == bytearray(b"hello")
    m = np.zeros((2, 3)) + (1 if rank == root else 0)  # a 2-D array travels whole
    w.Bcast(m, root=root)
    assert m.sum() == 6
    c = np.array([b"a", b"b"], dtype="S1") if rank == root else np.array([b"?", b"?"], dtype="S1")
    w.Bcast([c, MPI.CHAR], root=root)
    assert c.tolist() == [b"a", b"b"]


def test_in_place_allreduce_reduce(w, rank, size):
    x = base(4, "d", rank)
    w.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)
    np.testing.assert_array_equal(x, total(4, size))
    y = base(4, "h", rank)
    w.Allreduce(MPI.IN_PLACE, y, op=MPI.MAX)  # numpy path
    np.testing.assert_array_equal(y, (np.arange(4) % 5 + size).astype("h"))
    root = size // 2
    z = base(4, "i", rank)
    keep = z.copy()
    if rank == root:
        w.Reduce(MPI.IN_PLACE, z, op=MPI.SUM, root=root)
        np.testing.assert_array_equal(z, total(4, size))
    else:
        w.Reduce(z, None, op=MPI.SUM, root=root)
        np.testing.assert_array_equal(z, keep)


# ---- the other collectives -------------------------------------------------------------

def test_gather_scatter(w, rank, size):
    root = size - 1
    s = np.full(3, rank * 10, "i")
    r = np.full(3 * size, -1, "i") if rank == root else None
    w.Gather(s, r, root=root)
    if rank == root:
        np.testing.assert_array_equal(r, np.repeat(np.arange(size) * 10, 3))
    # IN_PLACE at the root: its block is already in recvbuf.
    r2 = np.full(3 * size, -1, "i")
    if rank == root:
        r2[3 * root:3 * root + 3] = 77
        w.Gather(MPI.IN_PLACE, [r2, 3, MPI.INT], root=root)
        want = np.repeat(np.arange(size) * 10, 3)
        want[3 * root:] = 77
        np.testing.assert_array_equal(r2, want)
    else:
        w.Gather([s, MPI.INT], None, root=root)
    src = np.arange(2 * size, dtype="d") if rank == root else None
    out = np.zeros(2)
    w.Scatter([src, MPI.DOUBLE] if src is not None else None, out, root=root)
    np.testing.assert_array_equal(out, [2 * rank, 2 * rank + 1])
    if rank == root:
        w.Scatter(src, MPI.IN_PLACE, root=root)
    else:
        w.Scatter(None, out, root=root)
        np.testing.assert_array_equal(out, [2 * rank, 2 * rank + 1])


def test_gatherv_scatterv(w, rank, size):
    counts = [q + 1 for q in range(size)]
    displs = [sum(counts[:q]) + q for q in range(size)]  # a gap of one after each block
    n = displs[-1] + counts[-1] + 1
    s = np.full(rank + 1, rank + 0.5)
    for root in {0, size - 1}:
        r = np.full(n, -1.0)
        w.Gatherv(s, [r, counts, displs, MPI.DOUBLE] if rank == root else None, root=root)
        if rank == root:
            want = np.full(n, -1.0)
            for q in range(size):
                want[displs[q]:displs[q] + q + 1] = q + 0.5
            np.testing.assert_array_equal(r, want)
        src = np.arange(n, dtype="d")
        out = np.zeros(rank + 1)
        w.Scatterv([src, (counts, displs), MPI.DOUBLE] if rank == root else None, out, root=root)
        np.testing.assert_array_equal(out, src[displs[rank]:displs[rank] + rank + 1])
    # (buf, counts): displacements back to back; IN_PLACE at the root.
    r = np.full(sum(counts), -1, "i")
    if rank == 0:
        r[0] = 99
        w.Gatherv(MPI.IN_PLACE, (r, counts), root=0)
        np.testing.assert_array_equal(r, [99] + [q for q in range(1, size) for _ in range(q + 1)])
    else:
        w.Gatherv(np.full(rank + 1, rank, "i"), None, root=0)


def test_allgather_allgatherv(w, rank, size):
    r = np.full(2 * size, -1, "l")
    w.Allgather(np.array([rank, -rank], "l"), r)
    np.testing.assert_array_equal(r, np.array([[q, -q] for q in range(size)]).reshape(-1))
    r2 = np.full(2 * size, -1, "l")
    r2[2 * rank:2 * rank + 2] = [rank, -rank]
    w.Allgather(MPI.IN_PLACE, [r2, MPI.LONG])
    np.testing.assert_array_equal(r2, r)
    counts = [size - q for q in range(size)]
    rv = np.full(sum(counts), -1.0, "f")
    w.Allgatherv(np.full(size - rank, rank, "f"), [rv, counts])
    np.testing.assert_array_equal(rv, np.repeat(np.arange(size), counts).astype("f"))
    rv2 = np.full(sum(counts), -1.0, "f")
    start = sum(counts[:rank])
    rv2[start:start + counts[rank]] = rank
    w.Allgatherv(MPI.IN_PLACE, [rv2, counts, [sum(counts[:q]) for q in range(size)], MPI.FLOAT])
    np.testing.assert_array_equal(rv2, rv)


def test_alltoall_alltoallv(w, rank, size):
    s = np.array([100 * rank + q for q in range(size)], "i")
    r = np.zeros(size, "i")
    w.Alltoall(s, r)
    np.testing.assert_array_equal(r, [100 * q + rank for q in range(size)])
    w.Alltoall(MPI.IN_PLACE, s)
    np.testing.assert_array_equal(s, r)
    # rank r sends q+1 elements to rank q; receives r+1 from each.
    sc = [q + 1 for q in range(size)]
    sbuf = np.concatenate([np.full(q + 1, 10 * rank + q, "d") for q in range(size)])
    rc = [rank + 1] * size
    rbuf = np.zeros(sum(rc))
    w.Alltoallv([sbuf, sc], [rbuf, rc])
    np.testing.assert_array_equal(rbuf, np.repeat([10 * q + rank for q in range(size)], rank + 1))
    inplace = np.concatenate([np.full(2, 10 * rank + q, "d") for q in range(size)])
    w.Alltoallv(MPI.IN_PLACE, [inplace, [2] * size, [2 * q for q in range(size)], MPI.DOUBLE])
    np.testing.assert_array_equal(inplace, np.repeat([10 * q + rank for q in range(size)], 2))


@pytest.mark.parametrize("code", ["d", "h"])
def test_reduce_scatter(w, rank, size, code):
    x = (np.arange(2 * size) + rank).astype(code)
    y = np.zeros(2, code)
    w.Reduce_scatter_block(x, y, op=MPI.SUM)
    col = np.arange(2 * size) * size + size * (size - 1) // 2
    np.testing.assert_array_equal(y, col[2 * rank:2 * rank + 2].astype(code))
    w.Reduce_scatter_block(MPI.IN_PLACE, x, op=MPI.SUM)
    np.testing.assert_array_equal(x[:2], y)
    counts = [q + 1 for q in range(size)]
    start = sum(counts[:rank])
    v = (np.arange(sum(counts)) + rank).astype(code)
    vcol = (np.arange(sum(counts)) * size + size * (size - 1) // 2).astype(code)
    for rc in (counts, None):  # None: each rank's recvbuf says its count
        out = np.zeros(rank + 1, code)
        w.Reduce_scatter(v, out, rc, op=MPI.SUM)
        np.testing.assert_array_equal(out, vcol[start:start + rank + 1])
    w.Reduce_scatter(MPI.IN_PLACE, v, counts, op=MPI.SUM)
    np.testing.assert_array_equal(v[:rank + 1], vcol[start:start + rank + 1])


@pytest.mark.parametrize("code", ["i", "d", "h"])
def test_scan_exscan(w, rank, size, code):
    x = np.array([rank + 1, 2, rank], code)
    s = np.zeros(3, code)
    w.Scan(x, s, op=MPI.SUM)
    np.testing.assert_array_equal(s, [(rank + 1) * (rank + 2) // 2, 2 * (rank + 1), rank * (rank + 1) // 2])
    p = np.zeros(3, code)
    w.Scan(x, p, op=MPI.PROD)
    fact = 1
    for q in range(1, rank + 2):
        fact *= q
    np.testing.assert_array_equal(p, [fact, 2 ** (rank + 1), 0])
    e = np.full(3, -5, code)
    w.Exscan(x, e, op=MPI.MAX)
    if rank == 0:
        np.testing.assert_array_equal(e, [-5, -5, -5])  # left as it was
    else:
        np.testing.assert_array_equal(e, [rank, 2, rank - 1])
    y = x.copy()
    w.Scan(MPI.IN_PLACE, y, op=MPI.SUM)
    np.testing.assert_array_equal(y, s)


def test_nonblocking_collectives(w, rank, size):
    a = base(4, "d", rank)
    b = base(4, "h", rank)  # the numpy path: the reduction runs at Wait
    sc = np.zeros(2, "i")
    g = np.zeros(size, "i")
    reqs = [w.Iallreduce(MPI.IN_PLACE, a), w.Iallreduce(MPI.IN_PLACE, b, op=MPI.SUM),
            w.Iscan(np.array([1, rank], "i"), sc), w.Iallgather(np.array([rank * 3], "i"), g), w.Ibarrier()]
    assert all(isinstance(r, MPI.Request) for r in reqs)
    statuses = [MPI.Status() for _ in reqs]
    MPI.Request.Waitall(reqs, statuses)
    assert all(r == MPI.REQUEST_NULL for r in reqs)
    np.testing.assert_array_equal(a, total(4, size))
    np.testing.assert_array_equal(b, total(4, size).astype("h"))
    np.testing.assert_array_equal(sc, [rank + 1, rank * (rank + 1) // 2])
    np.testing.assert_array_equal(g, np.arange(size) * 3)
    x = np.full(3, rank, "i")
    req = w.Ibcast(x, root=0)
    assert MPI.Request.Waitany([MPI.REQUEST_NULL, req]) == 1
    np.testing.assert_array_equal(x, [0, 0, 0])
    req = w.Ireduce(np.array([rank]), np.zeros(1, "l") if rank == 0 else None, root=0)
    while not req.Test():
        pass
    assert MPI.Request.Testall([req]) and MPI.Request.Waitany([req]) == MPI.UNDEFINED
    assert MPI.REQUEST_NULL.Wait() is True


def test_user_op_and_torch_tensors(w, rank, size):
    """Op.Create (mpi4py's fn(invec, inoutvec, datatype), in rank order: a
    non-commutative op sees ranks left to right) and torch CPU tensors as
    buffers (the seeds' comm.Allreduce(tensor, result, op))."""

    def concat_digits(invec, inoutvec, datatype):
        a = np.frombuffer(invec, dtype="l")
        b = np.frombuffer(inoutvec, dtype="l")
        b[:] = a * 10 + b  # inoutvec = invec op inoutvec

    op = MPI.Op.Create(concat_digits, commute=False)
    x = np.array([rank + 1, 1], "l")
    y = np.zeros(2, "l")
    w.Allreduce(x, y, op=op)
    assert y.tolist() == [int("".join(str(q + 1) for q in range(size))), int("1" * size)]
    op.Free()
    torch = pytest.importorskip("torch")
    t = torch.arange(4, dtype=torch.float32) + rank
    out = torch.zeros(4)
    w.Allreduce(t, out, op=MPI.SUM)
    assert out.tolist() == (torch.arange(4, dtype=torch.float32) * size + size * (size - 1) / 2).tolist()
    w.Bcast(t, root=0)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_every_nonblocking_form(w, rank, size):
    """Each I* collective issued before any wait (their temporaries must
    outlive the call), then checked after one Waitall."""
    n = size
    counts = [q + 1 for q in range(n)]
    tot = sum(counts)
    out = {k: np.full(m, -1, "i") for k, m in [("bcast", 3), ("reduce", 2), ("allreduce", 2), ("gather", n),
                                               ("gatherv", tot), ("scatter", 1), ("scatterv", rank + 1),
                                               ("allgather", n), ("allgatherv", tot), ("alltoall", n),
                                               ("alltoallv", n * (rank + 1)), ("rsb", 1), ("rs", rank + 1),
                                               ("scan", 1), ("exscan", 1)]}
    if rank == 0:
        out["bcast"][:] = [7, 8, 9]
    pair = np.zeros(1, MPI.TWOINT.np)
    pair["value"], pair["index"] = [-rank], [rank]
    pout = np.zeros_like(pair)
    src_v = np.arange(tot, dtype="i")
    reqs = [
        w.Ibcast(out["bcast"], root=0),
        w.Ireduce(np.array([rank, 1], "i"), out["reduce"] if rank == 0 else None, op=MPI.LOR, root=0),
        w.Iallreduce(np.array([rank, 1], "i"), out["allreduce"], op=MPI.MAX),
        w.Igather(np.array([rank * 2], "i"), out["gather"] if rank == 0 else None, root=0),
        w.Igatherv(np.full(rank + 1, rank, "i"), [out["gatherv"], counts] if rank == 0 else None, root=0),
        w.Iscatter(np.arange(n, dtype="i") * 3 if rank == 0 else None, out["scatter"], root=0),
        w.Iscatterv([src_v, counts] if rank == 0 else None, out["scatterv"], root=0),
        w.Iallgather(np.array([rank + 5], "i"), out["allgather"]),
        w.Iallgatherv(np.full(rank + 1, rank, "i"), [out["allgatherv"], counts]),
        w.Ialltoall(np.arange(n, dtype="i") + 10 * rank, out["alltoall"]),
        w.Ialltoallv([np.concatenate([np.full(q + 1, rank, "i") for q in range(n)]), counts],
                     [out["alltoallv"], [rank + 1] * n]),
        w.Ireduce_scatter_block(np.arange(n, dtype="i") + rank, out["rsb"], op=MPI.SUM),
        w.Ireduce_scatter(np.ones(tot, "i"), out["rs"], counts, op=MPI.SUM),
        w.Iscan(np.array([rank + 1], "i"), out["scan"], op=MPI.SUM),
        w.Iexscan(np.array([rank + 1], "i"), out["exscan"], op=MPI.SUM),
        w.Iallreduce([pair, MPI.TWOINT], [pout, MPI.TWOINT], op=MPI.MINLOC),
    ]
    MPI.Request.Waitall(reqs)
    assert out["bcast"].tolist() == [7, 8, 9]
    if rank == 0:
        assert out["reduce"].tolist() == ([1 if size > 1 else 0, 1])
        assert out["gather"].tolist() == [2 * q for q in range(n)]
        assert out["gatherv"].tolist() == [q for q in range(n) for _ in range(q + 1)]
    assert out["allreduce"].tolist() == [n - 1, 1]
    assert out["scatter"].tolist() == [3 * rank]
    start = sum(counts[:rank])
    assert out["scatterv"].tolist() == list(range(start, start + rank + 1))
    assert out["allgather"].tolist() == [q + 5 for q in range(n)]
    assert out["allgatherv"].tolist() == [q for q in range(n) for _ in range(q + 1)]
    assert out["alltoall"].tolist() == [rank + 10 * q for q in range(n)]
    assert out["alltoallv"].tolist() == [q for q in range(n) for _ in range(rank + 1)]
    assert out["rsb"].tolist() == [rank * n + n * (n - 1) // 2]
    assert out["rs"].tolist() == [n] * (rank + 1)
    assert out["scan"].tolist() == [(rank + 1) * (rank + 2) // 2]
    if rank > 0:
        assert out["exscan"].tolist() == [rank * (rank + 1) // 2]
    assert pout.tolist() == [(-(n - 1), n - 1)]
