"""Every collective of collie.Comm on numpy arrays: results against a serial
reference, blocking and async, in place and out of place, list forms both
zero-copy (views of one array) and staged (separate arrays), count 0."""

import ctypes
import gc

import numpy as np
import pytest

import collie
from collie import ReduceOp


def contrib(rank, n, dtype=np.float32, base=1):
    """Rank r's input: base + r + i (small integers, exact in every dtype)."""
    return (np.arange(n) % 7 + rank + base).astype(dtype)


def reference(op, size, n, dtype=np.float32):
    xs = [contrib(q, n, dtype).astype(np.float64) for q in range(size)]
    if op == ReduceOp.SUM:
        return sum(xs)
    if op == ReduceOp.PRODUCT:
        out = np.ones(n)
        for x in xs:
            out = out * x
        return out
    if op == ReduceOp.MIN:
        return np.minimum.reduce(xs)
    if op == ReduceOp.MAX:
        return np.maximum.reduce(xs)
    if op == ReduceOp.AVG:
        return sum(xs) / size
    raise AssertionError(op)


@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX, ReduceOp.AVG])
@pytest.mark.parametrize("async_op", [False, True])
def test_all_reduce_ops(comm, rank, size, op, async_op):
    x = contrib(rank, 37, np.float64)
    w = comm.all_reduce(x, op, async_op=async_op)
    assert isinstance(w, collie.Work)
    assert w.wait() is True and w.is_completed()
    np.testing.assert_allclose(x, reference(op, size, 37), rtol=1e-12)


@pytest.mark.parametrize("wire", ["float16", "bf16"])
def test_all_reduce_wire(comm, rank, size, wire):
    """A float32 sum sent as 16-bit floats: within docs/compression.md's
    bound of the exact sum, and every value a value of the wire format."""
    n = 5000
    rng = [np.random.default_rng(1000 + r) for r in range(size)]
    data = [g.uniform(-50, 50, n).astype(np.float32) for g in rng]
    x = data[rank].copy()
    comm.all_reduce(x, wire=wire)
    exact = np.sum([d.astype(np.float64) for d in data], axis=0)
    absum = np.sum([np.abs(d.astype(np.float64)) for d in data], axis=0)
    u = 2.0**-11 if wire == "float16" else 2.0**-8
    bound = u * absum + u * np.abs(exact) + (size - 1) * 2.0**-24 * absum + (size + 1) * 2.0**-25
    assert np.all(np.abs(x.astype(np.float64) - exact) <= bound * 1.0001)
    if wire == "float16":
        assert np.array_equal(x.astype(np.float16).astype(np.float32), x)
    else:
        assert np.all(x.view(np.uint32) & 0xFFFF == 0)


def test_all_reduce_bitwise(comm, rank, size):
    x = np.array([1 << rank, 0xFF, rank], dtype=np.uint32)
    comm.all_reduce(x, ReduceOp.BOR)
    assert x[0] == (1 << size) - 1 and x[1] == 0xFF
    y = np.array([0xF0 | rank], dtype=np.int64)
    comm.all_reduce(y, "band")
    want = 0xF0
    for q in range(size):
        want &= 0xF0 | q
    assert y[0] == want
    z = np.array([1], dtype=np.int8)
    comm.all_reduce(z, ReduceOp.BXOR)
    assert z[0] == size % 2


def test_all_reduce_multidim_and_empty(comm, rank, size):
    x = np.ones((3, 4, 5), dtype=np.float32) * (rank + 1)
    comm.all_reduce(x)
    assert x.shape == (3, 4, 5) and np.all(x == size * (size + 1) / 2)
    e = np.zeros(0, dtype=np.float32)
    comm.all_reduce(e)  # count 0 is valid
    sub = np.ones(10, dtype=np.int32)
    comm.all_reduce(sub[2:5])  # a contiguous view: only it changes
    assert list(sub) == [1, 1] + [size] * 3 + [1] * 5


def test_async_overlap_and_order(comm, rank, size):
    a = np.full(1 << 16, rank + 1, dtype=np.float32)
    b = np.full(7, rank, dtype=np.int64)
    wa = comm.all_reduce(a, async_op=True)
    wb = comm.all_reduce(b, ReduceOp.MAX, async_op=True)
    busy = np.sqrt(np.arange(100000.0)).sum()  # compute meanwhile
    assert busy > 0
    wb.wait()
    wa.wait()
    assert np.all(a == size * (size + 1) / 2) and np.all(b == size - 1)
    # is_completed polls; a dropped Work is adopted by the communicator and
    # its array stays alive until the operation ends.
    c = np.ones(1000, dtype=np.float64)
    w = comm.all_reduce(c, async_op=True)
    while not w.is_completed():
        pass
    assert w.is_success() and w.exception() is None and c[0] == size
    d = np.ones(4096, dtype=np.float32)
    comm.all_reduce(d, async_op=True)  # Work dropped at once
    del d
    comm.barrier()


def test_all_gather_list_forms(comm, rank, size):
    t = contrib(rank, 6, np.int32)
    separate = [np.zeros(6, dtype=np.int32) for _ in range(size)]
    comm.all_gather(separate, t)
    flat = np.zeros((size, 6), dtype=np.int32)
    comm.all_gather(list(flat), t)  # rows of one array: zero-copy
    inplace = np.zeros((size, 6), dtype=np.int32)
    inplace[rank] = t
    comm.all_gather(list(inplace), inplace[rank])  # in place: tensor is output_list[rank]
    w = comm.all_gather([np.zeros(6, np.int32) for _ in range(size)], t, async_op=True)
    w.wait()
    for q in range(size):
        want = contrib(q, 6, np.int32)
        assert np.array_equal(separate[q], want)
        assert np.array_equal(flat[q], want)
        assert np.array_equal(inplace[q], want)


def test_all_gather_async_staged_fills_at_wait(comm, rank, size):
    outs = [np.zeros(3, dtype=np.float64) for _ in range(size)]
    w = comm.all_gather(outs, np.full(3, rank, dtype=np.float64), async_op=True)
    w.wait()
    assert [o[0] for o in outs] == list(range(size))


def test_all_gather_single(comm, rank, size):
    out = np.zeros(size * 4, dtype=np.uint8)
    comm.all_gather_single(out, np.full(4, rank, dtype=np.uint8))
    assert list(out) == [q for q in range(size) for _ in range(4)]
    out2 = np.zeros((size, 4), dtype=np.float32)
    out2[rank] = rank + 0.5
    comm.all_gather_single(out2, out2[rank])  # in place
    assert np.all(out2[:, 0] == np.arange(size) + 0.5)


def test_all_gather_v(comm, rank, size):
    t = np.full(rank + 1, rank, dtype=np.int64)
    outs = [np.zeros(q + 1, dtype=np.int64) for q in range(size)]
    comm.all_gather_v(outs, t)
    flat = np.zeros(size * (size + 1) // 2, dtype=np.int64)
    views, off = [], 0
    for q in range(size):
        views.append(flat[off:off + q + 1])
        off += q + 1
    comm.all_gather_v(views, t, async_op=True).wait()
    flat2 = np.zeros_like(flat)
    views2, off = [], 0
    for q in range(size):
        views2.append(flat2[off:off + q + 1])
        off += q + 1
    views2[rank][:] = rank
    comm.all_gather_v(views2, views2[rank])  # in place: tensor is output_list[rank]
    for q in range(size):
        assert list(outs[q]) == [q] * (q + 1)
        assert list(views[q]) == [q] * (q + 1)
        assert list(views2[q]) == [q] * (q + 1)


@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.MAX])
def test_reduce_scatter(comm, rank, size, op):
    ins = [contrib(rank, 5) + 10 * q for q in range(size)]  # separate arrays: staged
    out = np.zeros(5, dtype=np.float32)
    comm.reduce_scatter(out, ins, op)
    want = [contrib(r, 5) + 10 * rank for r in range(size)]
    np.testing.assert_allclose(out, sum(want) if op == ReduceOp.SUM else np.maximum.reduce(want))
    block = np.stack([contrib(rank, 5) + 10 * q for q in range(size)])
    out2 = np.zeros(5, dtype=np.float32)
    comm.reduce_scatter(out2, list(block), op, async_op=True).wait()  # zero-copy
    np.testing.assert_allclose(out2, out)
    comm.reduce_scatter(block[rank], list(block), op)  # in place
    np.testing.assert_allclose(block[rank], out)


def test_reduce_scatter_single(comm, rank, size):
    inp = np.arange(size * 3, dtype=np.float64) + rank
    out = np.zeros(3, dtype=np.float64)
    comm.reduce_scatter_single(out, inp)
    want = sum(np.arange(size * 3, dtype=np.float64) + q for q in range(size))[rank * 3:(rank + 1) * 3]
    np.testing.assert_allclose(out, want)
    comm.reduce_scatter_single(inp[rank * 3:(rank + 1) * 3], inp, ReduceOp.SUM)  # in place
    np.testing.assert_allclose(inp[rank * 3:(rank + 1) * 3], want)


def test_broadcast_every_root(comm, rank, size):
    for root in range(size):
        x = np.arange(9, dtype=np.int32) * (root + 1) if rank == root else np.zeros(9, dtype=np.int32)
        w = comm.broadcast(x, root, async_op=(root % 2 == 1))
        w.wait()
        assert np.array_equal(x, np.arange(9) * (root + 1))


def test_broadcast_read_only_at_root(comm, rank, size):
    x = np.arange(4, dtype=np.int64)
    if rank == 0:
        x.flags.writeable = False  # only read at the root
    else:
        x[:] = 0
    comm.broadcast(x, 0)
    assert list(x) == [0, 1, 2, 3]


def test_reduce(comm, rank, size):
    for root in range(size):
        x = contrib(rank, 11, np.float64)
        orig = x.copy()
        comm.reduce(x, root, ReduceOp.SUM)
        if rank == root:
            np.testing.assert_allclose(x, reference(ReduceOp.SUM, size, 11))
        else:
            assert np.array_equal(x, orig)  # other ranks' tensors are left alone
    y = np.full(3, rank + 1, dtype=np.int32)
    comm.reduce(y, size - 1, ReduceOp.PRODUCT, async_op=True).wait()
    if rank == size - 1:
        prod = 1
        for q in range(size):
            prod *= q + 1
        assert list(y) == [prod] * 3


def test_all_to_all_single(comm, rank, size):
    inp = np.array([100 * rank + q for q in range(size) for _ in range(2)], dtype=np.int64)
    out = np.zeros_like(inp)
    comm.all_to_all_single(out, inp)
    assert list(out) == [100 * q + rank for q in range(size) for _ in range(2)]
    comm.all_to_all_single(inp, inp, async_op=True).wait()  # in place
    assert np.array_equal(inp, out)


def test_all_to_all_v_single(comm, rank, size):
    # Rank r sends q+1 rows of 2 elements to rank q, so it receives r+1 rows from each.
    in_splits = [q + 1 for q in range(size)]
    out_splits = [rank + 1] * size
    inp = np.concatenate([np.full((q + 1, 2), 10 * rank + q, dtype=np.float32) for q in range(size)])
    out = np.zeros((sum(out_splits), 2), dtype=np.float32)
    comm.all_to_all_v_single(out, inp, out_splits, in_splits)
    want = np.concatenate([np.full((rank + 1, 2), 10 * q + rank, dtype=np.float32) for q in range(size)])
    assert np.array_equal(out, want)
    even = np.arange(size * 3, dtype=np.int32) + 1000 * rank
    even_out = np.zeros_like(even)
    comm.all_to_all_v_single(even_out, even)  # None: equal splits
    assert list(even_out) == [1000 * q + 3 * rank + i for q in range(size) for i in range(3)]


def test_gather(comm, rank, size):
    for root in range(size):
        t = np.full(3, rank * 2, dtype=np.uint64)
        outs = [np.zeros(3, dtype=np.uint64) for _ in range(size)] if rank == root else None
        comm.gather(outs, t, root)
        if rank == root:
            assert [int(o[0]) for o in outs] == [2 * q for q in range(size)]
    flat = np.zeros((size, 3), dtype=np.float32)
    flat[rank] = rank
    comm.gather(list(flat), flat[rank], 0, async_op=True).wait()  # zero-copy and in place at the root
    if rank == 0:
        assert list(flat[:, 0]) == list(range(size))


def test_scatter(comm, rank, size):
    for root in range(size):
        ins = [np.full(4, 10 * q + root, dtype=np.int32) for q in range(size)] if rank == root else None
        out = np.zeros(4, dtype=np.int32)
        comm.scatter(out, ins, root)
        assert list(out) == [10 * rank + root] * 4
    block = np.stack([np.full(2, q, dtype=np.float64) for q in range(size)])
    out = block[0].copy() if rank == 0 else np.zeros(2)
    comm.scatter(block[0] if rank == 0 else out, list(block) if rank == 0 else None, 0)  # in place at root
    if rank != 0:
        assert list(out) == [rank] * 2


def test_barrier(comm):
    comm.barrier()
    comm.barrier(async_op=True).wait()
    comm.barrier(timeout=10)


def test_send_recv(comm, rank, size):
    if size == 1:
        pytest.skip("needs 2 ranks")
    if rank == 0:
        for q in range(1, size):
            comm.send(np.full(5, q, dtype=np.float32), q, tag=3)
        back = np.zeros(5, dtype=np.float32)
        for q in range(1, size):
            comm.recv(back, q, tag=4)
            assert back[0] == q * 2
    else:
        x = np.zeros(5, dtype=np.float32)
        w = comm.recv(x, 0, tag=3, async_op=True)
        w.wait()
        x *= 2
        comm.send(x, 0, tag=4, async_op=True).wait()


def test_batch_ring(comm, rank, size):
    n = 1 << 15  # large enough that unbatched blocking sends could deadlock
    send = np.full(n, rank, dtype=np.float32)
    recv = np.zeros(n, dtype=np.float32)
    b = comm.batch_op_create()
    b.send(send, (rank + 1) % size).recv(recv, (rank - 1) % size)
    assert len(b) == 2
    b.issue()
    assert np.all(recv == (rank - 1) % size)
    b2 = comm.batch_op_create()
    b2.send(send, (rank - 1) % size, tag=9)
    b2.recv(recv, (rank + 1) % size, tag=9)
    w = b2.issue(async_op=True)
    w.wait()
    assert np.all(recv == (rank + 1) % size)
    with pytest.raises(collie.InvalidUsage):
        b2.issue()


def test_split(comm, rank, size):
    evens = list(range(0, size, 2))
    sub = comm.split(evens, "evens")
    if rank % 2:
        assert sub is None
    else:
        assert sub.get_size() == len(evens) and sub.get_rank() == evens.index(rank)
        assert sub.get_name() == "evens"
        x = np.ones(3, dtype=np.int32)
        sub.all_reduce(x)
        assert x[0] == len(evens)
        sub.finalize()
        sub.finalize()  # idempotent
    rev = comm.split(list(reversed(range(size))), "reversed")
    assert rev.get_rank() == size - 1 - rank
    y = np.array([rank], dtype=np.int64)
    rev.broadcast(y, 0)  # rank 0 of rev is world rank size-1
    assert y[0] == size - 1
    rev.finalize()
    halves = comm.split_color(rank % 2, name="halves")
    assert halves.get_size() == len(range(rank % 2, size, 2))
    halves.finalize()


def test_shrink(comm, rank, size):
    # A healthy communicator leaves out its last rank (which does not call);
    # the shrunk one keeps the order and works. Killed ranks: test_examples.py
    # (elastic.py) and the C suite's shrink_* tests.
    with pytest.raises(collie.InvalidArgument, match="exclude = 'x' must be a list of ints"):
        comm.shrink(exclude="x")
    with pytest.raises(collie.InvalidArgument, match="timeout = -1 must be a number of seconds"):
        comm.shrink(timeout=-1)
    with pytest.raises(collie.InvalidArgument, match=r"exclude\[0\] = %d is outside 0..%d" % (size, size - 1)):
        comm.shrink(exclude=[size])
    if size == 1:
        solo = comm.shrink()
        assert solo.get_size() == 1 and solo.get_name() == "%s.shrink" % comm.get_name()
        solo.finalize()
        return
    if rank == size - 1:
        with pytest.raises(collie.InvalidArgument, match="is the calling rank"):
            comm.shrink(exclude=[rank])
    else:
        small = comm.shrink(exclude=[size - 1], timeout=10, name="small")
        assert small.get_size() == size - 1 and small.get_rank() == rank and small.get_name() == "small"
        x = np.ones(3, dtype=np.int32)
        small.all_reduce(x)
        assert x[0] == size - 1
        small.finalize()
    comm.barrier()  # the old one still works for everyone


def test_context_manager_and_new_comm(comm, rank, size):
    with collie.new_comm(name="second", hints={"transport": "tcp"}) as c2:
        assert c2.get_rank() == rank and c2.get_size() == size
        x = np.ones(4, dtype=np.float32)
        c2.all_reduce(x, timeout=20)
        assert x[0] == size
    assert c2.handle is None
    with pytest.raises(collie.InvalidUsage, match="finalized"):
        c2.barrier()
    assert collie.get_default_comm() is comm


def test_mem_alloc(comm, rank, size):
    """Collectives on collie_mem_alloc memory (large enough to be read in
    place over shm), freed when the last view goes."""
    n = 1 << 18
    buf = comm.mem_alloc(n * 4 * size)
    x = np.frombuffer(buf, dtype=np.float32)
    assert x.size == n * size and not x.any()  # zeroed
    x[:n] = contrib(rank, n)
    out = np.zeros(n * size, dtype=np.float32)
    comm.all_gather_single(out, x[:n])
    for q in range(size):
        np.testing.assert_array_equal(out[q * n:(q + 1) * n], contrib(q, n))
    y = x[:n]
    comm.all_reduce(y)
    np.testing.assert_array_equal(y, reference(ReduceOp.SUM, size, n))
    ptr = ctypes.addressof(buf)
    del x, y, buf  # the memory goes with the last reference
    gc.collect()
    assert collie._lib.lib().collie_mem_free(ptr) == collie._lib.INVALID_ARGUMENT  # freed already
    with pytest.raises(collie.InvalidArgument):
        comm.mem_alloc(0)


def test_persistent_plans(comm, rank, size):
    """*_p_init plans started many times (new contents each time, blocking
    and async), torchcomms' all_gather_p_exec/free, and a plan's argument
    errors at init."""
    n = 64
    x = np.zeros(n, np.float32)
    with comm.all_reduce_p_init(x, ReduceOp.SUM) as ar:
        for it in range(5):
            x[:] = contrib(rank, n) + it
            w = ar.start(async_op=bool(it % 2))
            w.wait()
            assert np.array_equal(x, reference(ReduceOp.SUM, size, n) + size * it)
    inp, out = np.zeros(n, np.int32), np.zeros(n * size, np.int32)
    ag = comm.all_gather_p_init(out, inp)
    for it in range(3):
        inp[:] = rank * 100 + it
        comm.all_gather_p_exec(ag, async_op=False)
        assert np.array_equal(out, np.repeat(np.arange(size) * 100 + it, n))
    comm.all_gather_p_free(ag)
    comm.all_gather_p_free(ag)  # freeing again does nothing
    with pytest.raises(collie.InvalidUsage):
        ag.start()
    src, dst = np.zeros(n * size, np.float32), np.zeros(n, np.float32)
    with comm.reduce_scatter_p_init(dst, src, ReduceOp.MAX) as rs, comm.broadcast_p_init(dst, size - 1) as bc:
        src[:] = np.arange(n * size) + rank
        rs.start()
        assert np.array_equal(dst, np.arange(rank * n, rank * n + n) + size - 1)
        dst[:] = rank
        bc.start()
        assert np.all(dst == size - 1)
    a, b = np.arange(n * size, dtype=np.float64) + 1000 * rank, np.zeros(n * size)
    with comm.all_to_all_p_init(b, a) as a2a:
        a2a.start()
        for q in range(size):
            assert np.array_equal(b[q * n:(q + 1) * n], np.arange(rank * n, rank * n + n) + 1000 * q)
    with pytest.raises(collie.InvalidArgument, match="output"):
        comm.all_gather_p_init(np.zeros(n + 1, np.int32), inp)


@pytest.mark.parametrize("mode", ["topk_allgather", "gtopk"])
def test_sparse_all_reduce(comm, rank, size, mode):
    """Every rank the same k indices: both modes give the exact sum, sorted;
    the exact mode also takes ranks whose indices differ (the union)."""
    idx = np.array([7, 2, 40], dtype=np.int64)
    val = np.array([1.0, 2.0, 3.0], dtype=np.float32) * (rank + 1)
    oi, ov = comm.sparse_all_reduce(idx, val, 100, mode=mode)
    tri = size * (size + 1) / 2
    assert list(oi) == [2, 7, 40] and ov.dtype == np.float32
    assert np.allclose(ov, np.array([2.0, 1.0, 3.0]) * tri)
    if mode == "topk_allgather":
        oi, ov = comm.sparse_all_reduce(np.array([rank, 99]), np.array([1.0, 0.5]), 100)
        assert list(oi) == list(range(size)) + [99] and ov.dtype == np.float64
        assert np.allclose(ov, [1.0] * size + [0.5 * size])
    with pytest.raises(collie.InvalidArgument, match="indices\\[0\\] = 100 is outside 0..99"):
        comm.sparse_all_reduce(np.array([100]), np.array([1.0]), 100, mode=mode)
    with pytest.raises(collie.InvalidArgument, match="mode = 'dense' is not one of"):
        comm.sparse_all_reduce(idx, val, 100, mode="dense")


def test_window_put_signal(comm, rank, size):
    """Each rank puts its rank number into every window at its own slot and
    signals; each waits for every signal: every slot filled. A put past the
    peer's window is refused by name."""
    buf = np.full(size, -1, dtype=np.int64)
    with comm.new_window(buf) as w:
        for t in range(size):
            w.put(t, rank, np.array([rank * 10 + t], dtype=np.int64))
            w.signal(t)
        for r in range(size):
            w.wait_signal(r, 1)
        assert list(buf) == [r * 10 + rank for r in range(size)]
        with pytest.raises(collie.InvalidArgument, match="do not fit rank"):
            w.put(0, size, np.zeros(1, dtype=np.int64))
        with pytest.raises(collie.InvalidArgument, match="put: array is float32 but the window is int64"):
            w.put(0, 0, np.zeros(1, dtype=np.float32))
        w.fence()
