"""collie.MPI's C fast path (python/collie/MPI/_ext/mpi_fast.c): it is
loaded where the build made it, and Send, Ssend, Recv, Sendrecv, Barrier,
Bcast, Reduce, Allreduce, Allgather, Alltoall and Reduce_scatter_block give the same results, statuses and errors
through it as through the Python code (the same calls with the fast path
switched off), for every numeric buffer it takes; what it does not take
(mpi4py's list forms, PROC_NULL, the rank itself, formats MPI has no
datatype for, a read-only receive buffer) reaches the Python code's
checks."""

import glob
import os

import numpy as np
import pytest

import collie
from collie import MPI
from collie.MPI import _comm as mpi_comm

W = MPI.COMM_WORLD

DTYPES = ["i1", "u1", "i4", "u4", "i8", "u8", "f4", "f8", "i2", "c16", "?"]


@pytest.fixture
def w():
    W.Barrier()  # every rank makes COMM_WORLD (collective) before a test uses it
    return W


@pytest.fixture(params=["fast", "python"])
def path(request, monkeypatch):
    """Each test runs twice: through the fast path, then with it off."""
    if request.param == "python":
        monkeypatch.setattr(mpi_comm, "_FX", None)
    elif mpi_comm._fx() is None:
        pytest.skip("no fast path in this build")
    return request.param


def test_loaded_where_built():
    lib_dir = os.path.dirname(os.path.abspath(collie.library_path()))
    built = glob.glob(os.path.join(lib_dir, "_collie_mpi_fast.cpython-*"))
    if os.environ.get("COLLIE_MPI_FAST") == "0":
        assert mpi_comm._fx() is None
    elif built:
        assert mpi_comm._fx() is not None, "the fast path was built (%s) but is not loaded" % built
    else:
        pytest.skip("this build has no fast path")


def values(dtype, n, seed):
    a = (np.arange(n) * 7 + seed * 3) % 11 + 1
    return a.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_send_recv_status(w, rank, size, path, dtype):
    if size < 2:
        pytest.skip("needs 2 ranks")
    x = values(dtype, 9, 1)
    st = MPI.Status()
    if rank == 0:
        w.Send(x, 1, tag=3)
        w.Ssend(x[:4], 1, tag=4)
        w.Send(bytearray(b"abc"), 1, tag=5)
    elif rank == 1:
        got = np.zeros(9, dtype)
        w.Recv(got, 0, 3, st)
        assert (st.Get_source(), st.Get_tag(), st.Get_count()) == (0, 3, x.nbytes)
        np.testing.assert_array_equal(got, x)
        room = np.full(9, x[8], dtype)  # a longer buffer: its tail stays as it was
        w.Recv(room, MPI.ANY_SOURCE, MPI.ANY_TAG, st)
        assert (st.source, st.tag, st.Get_count(), st.Get_count(MPI.BYTE)) == (0, 4, 4 * x.itemsize, 4 * x.itemsize)
        np.testing.assert_array_equal(room[:4], x[:4])
        assert (room[4:] == x[8]).all()
        b = bytearray(3)
        w.Recv(b, 0, 5)
        assert b == bytearray(b"abc")


@pytest.mark.parametrize("dtype", DTYPES)
def test_sendrecv_ring(w, rank, size, path, dtype):
    if size < 2:
        pytest.skip("needs 2 ranks")
    right, left = (rank + 1) % size, (rank - 1) % size
    got = np.zeros(6, dtype)
    st = MPI.Status()
    w.Sendrecv(values(dtype, 6, rank), right, 7, got, left, 7, st)
    np.testing.assert_array_equal(got, values(dtype, 6, left))
    assert (st.Get_source(), st.Get_tag(), st.Get_count()) == (left, 7, got.nbytes)


@pytest.mark.parametrize("dtype", DTYPES)
def test_collectives(w, rank, size, path, dtype):
    b = values(dtype, 5, 2) if rank == size - 1 else np.zeros(5, dtype)
    w.Bcast(b, root=size - 1)
    np.testing.assert_array_equal(b, values(dtype, 5, 2))
    if dtype in ("c16", "?"):
        return  # MIN/MAX are not defined on them; SUM of bool is LOR in numpy
    for op, fold in ((MPI.SUM, np.add), (MPI.PROD, np.multiply), (MPI.MIN, np.minimum), (MPI.MAX, np.maximum)):
        want = values(dtype, 5, 0)
        for q in range(1, size):
            want = fold(want, values(dtype, 5, q)).astype(dtype)
        out = np.zeros(5, dtype)
        w.Allreduce(values(dtype, 5, rank), out, op=op)
        np.testing.assert_array_equal(out, want)
        inplace = values(dtype, 5, rank)
        w.Allreduce(MPI.IN_PLACE, inplace, op=op)
        np.testing.assert_array_equal(inplace, want)
        root = size // 2
        red = np.zeros(5, dtype) if rank == root else None
        w.Reduce(values(dtype, 5, rank), red, op=op, root=root)
        if rank == root:
            np.testing.assert_array_equal(red, want)
    w.Barrier()


@pytest.mark.parametrize("dtype", DTYPES)
def test_block_collectives(w, rank, size, path, dtype):
    mine = values(dtype, 3, rank)
    every = np.zeros(3 * size, dtype)
    w.Allgather(mine, every)
    np.testing.assert_array_equal(every, np.concatenate([values(dtype, 3, q) for q in range(size)]))
    blocks = values(dtype, 2 * size, rank)  # block q goes to rank q
    got = np.zeros(2 * size, dtype)
    w.Alltoall(blocks, got)
    np.testing.assert_array_equal(got, np.concatenate([values(dtype, 2 * size, q)[2 * rank:2 * rank + 2]
                                                       for q in range(size)]))
    if dtype in ("c16", "?"):
        return
    for op, fold in ((MPI.SUM, np.add), (MPI.MAX, np.maximum)):
        out = np.zeros(2, dtype)
        w.Reduce_scatter_block(values(dtype, 2 * size, rank), out, op=op)
        want = values(dtype, 2 * size, 0)
        for q in range(1, size):
            want = fold(want, values(dtype, 2 * size, q)).astype(dtype)
        np.testing.assert_array_equal(out, want[2 * rank:2 * rank + 2])


def test_errors_are_the_same(w, rank, size, path):
    """Truncation (collie's error), and the arguments the fast path leaves to
    the Python code: the same exception and message either way."""
    if size < 2:
        pytest.skip("needs 2 ranks")
    d = w.Dup()
    try:
        if rank == 0:
            d.Send(np.zeros(3), 1, tag=1)
        elif rank == 1:
            with pytest.raises(MPI.Exception, match=r"Recv.*truncated.*rank 0 sent 24 bytes.*room for 16") as e:
                d.Recv(np.zeros(2), 0, tag=1)
            assert e.value.Get_error_code() == MPI.ERR_TRUNCATE
    finally:
        d.Free()
    with pytest.raises(MPI.Exception, match="dest = %d is outside" % size):
        w.Send(np.zeros(1), size, 0)
    with pytest.raises(MPI.Exception, match="tag = -5"):
        w.Send(np.zeros(1), 0, -5)
    with pytest.raises(MPI.Exception, match="root = -1"):
        w.Bcast(np.zeros(1), root=-1)
    with pytest.raises(TypeError, match="no MPI datatype for the buffer format"):
        w.Send(np.zeros(2, np.float16), 0, 1)
    with pytest.raises(BufferError, match="read-only"):
        w.Recv(_readonly(), 0, 1)
    with pytest.raises(ValueError, match="sendbuf is 16 bytes but recvbuf is 8"):
        w.Allreduce(np.zeros(2), np.zeros(1))
    with pytest.raises(ValueError, match="sendbuf is 8 bytes but each block of recvbuf is 16"):
        w.Allgather(np.zeros(1), np.zeros(2 * size))
    with pytest.raises(ValueError, match="sendbuf is %d bytes but must be size x recvbuf's" % (8 * size + 8)):
        w.Reduce_scatter_block(np.zeros(size + 1), np.zeros(1))
    with pytest.raises(ValueError, match="not C-contiguous"):
        w.Send(np.zeros((4, 4))[:, 1], 0, 1)


def _readonly():
    a = np.zeros(2)
    a.setflags(write=False)
    return a


def test_what_the_fast_path_leaves(w, rank, size, path):
    """mpi4py's list forms, PROC_NULL and the rank itself: Python's."""
    st = MPI.Status()
    w.Send([np.arange(4, dtype="i"), 2, MPI.INT], MPI.PROC_NULL, 1)
    w.Recv(np.zeros(1), MPI.PROC_NULL, 1, st)
    assert st.Get_source() == MPI.PROC_NULL
    got = np.zeros(3, "i")
    w.Sendrecv([np.arange(3, dtype="i"), MPI.INT], rank, 2, [got, MPI.INT], rank, 2)
    assert got.tolist() == [0, 1, 2]
    r = w.Irecv(got, rank, 3)
    w.Send(np.array([7, 8, 9], "i"), rank, 3)
    r.Wait()
    assert got.tolist() == [7, 8, 9]
    x = np.ones(2, "f8")
    w.Allreduce(MPI.IN_PLACE, [x, MPI.DOUBLE], op=MPI.SUM)
    assert x.tolist() == [size, size]
    x = np.array([rank % 2, 1], "i4")
    w.Allreduce(MPI.IN_PLACE, x, op=MPI.LOR)  # an op collie's C has not: the Python fold
    assert x.tolist() == [int(size > 1), 1]
