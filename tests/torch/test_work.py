"""async_op=True: the Work objects torch.distributed hands back: they come
back at once, wait() completes them, is_completed/is_success/exception say
how it went, get_future() and result() carry the output tensors, and
outstanding works complete correctly whatever order they are waited in."""

import datetime
import time

import torch
import torch.distributed as dist

from conftest import IS_COLLIE, collie_only, needs_ranks
from refs import pattern, rank_input, reduce_ref, same


def _check_done(w):
    assert w.is_completed() is True
    assert w.is_success() is True
    try:
        exc = w.exception()
    except TypeError:
        # torch 1.13's binding of Work.exception cannot convert the C++
        # std::exception_ptr gloo's works return ("Unable to convert function
        # return value to a Python type"), even when it is null.
        assert not IS_COLLIE, "collie's Work.exception() must return None after a success"
        return
    assert exc is None


def test_all_reduce_work(rank, size):
    t = rank_input(torch.float32, "SUM", rank, (50,))
    w = dist.all_reduce(t, async_op=True)
    assert isinstance(w, dist.Work)
    assert isinstance(w.is_completed(), bool)
    assert w.wait() is True
    _check_done(w)
    want = reduce_ref([rank_input(torch.float32, "SUM", r, (50,)) for r in range(size)], "SUM", torch.float32)
    assert same(t, want)
    res = w.get_future().wait()
    assert isinstance(res, list) and len(res) == 1 and same(res[0], want)
    assert same(w.get_future().value()[0], want)
    res = w.result()
    assert isinstance(res, list) and len(res) == 1 and same(res[0], want)
    assert w.wait() is True  # waiting again is harmless


@needs_ranks(2)
def test_async_returns_before_peers_join(rank, size):
    """The other ranks join 1 s late: rank 0's async all_reduce returns at
    once, not completed, and completes at wait()."""
    dist.barrier()
    if rank != 0:
        time.sleep(1.0)
    t0 = time.monotonic()
    t = torch.full((16,), float(rank))
    w = dist.all_reduce(t, async_op=True)
    issued = time.monotonic() - t0
    done_at_once = w.is_completed()
    w.wait()
    if rank == 0:
        assert issued < 0.5, "all_reduce(async_op=True) took %.2f s to return" % issued
        assert done_at_once is False
    assert same(t, torch.full((16,), float(size * (size - 1) // 2)))


def test_future_then(rank, size):
    t = torch.full((4,), float(rank + 1))
    fut = dist.all_reduce(t, async_op=True).get_future()
    doubled = fut.then(lambda f: f.value()[0] * 2).wait()
    assert same(doubled, torch.full((4,), float(size * (size + 1))))


def test_wait_with_timeout(rank, size):
    t = torch.ones(3)
    w = dist.all_reduce(t, async_op=True)
    assert w.wait(timeout=datetime.timedelta(seconds=20)) is True
    assert same(t, torch.full((3,), float(size)))


def test_many_outstanding_waited_in_reverse(rank, size):
    """Eight all_reduces in flight, waited last first: all correct."""
    ts = [rank_input(torch.float32, "SUM", rank + 10 * k, (100 + k,)) for k in range(8)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for w in reversed(works):
        w.wait()
    for k, t in enumerate(ts):
        want = reduce_ref([rank_input(torch.float32, "SUM", r + 10 * k, (100 + k,)) for r in range(size)], "SUM",
                          torch.float32)
        assert same(t, want), k
    for w in works:
        _check_done(w)


def test_mixed_outstanding(rank, size):
    """Different collectives in flight at once, waited in reverse order."""
    ar = rank_input(torch.float64, "MAX", rank, (33,))
    bc = pattern(torch.int32, rank, (20,))
    ag_out = [torch.zeros(5) for _ in range(size)]
    a2a_out = torch.zeros(2 * size)
    a2a_in = torch.arange(2.0 * size) + 100 * rank
    red = rank_input(torch.float32, "SUM", rank, (9,))
    works = [dist.all_reduce(ar, op=dist.ReduceOp.MAX, async_op=True),
             dist.broadcast(bc, size - 1, async_op=True),
             dist.all_gather(ag_out, pattern(torch.float32, rank, (5,)), async_op=True),
             dist.all_to_all_single(a2a_out, a2a_in, async_op=True),
             dist.reduce(red, 0, async_op=True),
             dist.barrier(async_op=True)]
    for w in reversed(works):
        w.wait()
    assert same(ar, reduce_ref([rank_input(torch.float64, "MAX", r, (33,)) for r in range(size)], "MAX",
                               torch.float64))
    assert same(bc, pattern(torch.int32, size - 1, (20,)))
    assert all(same(ag_out[r], pattern(torch.float32, r, (5,))) for r in range(size))
    assert same(a2a_out, torch.cat([torch.arange(2.0 * rank, 2.0 * rank + 2) + 100 * j for j in range(size)]))
    if rank == 0:
        assert same(red, reduce_ref([rank_input(torch.float32, "SUM", r, (9,)) for r in range(size)], "SUM",
                                    torch.float32))
    for w in works:
        _check_done(w)


def test_all_gather_future_value(rank, size):
    """The future of an all_gather holds the output tensors (gloo: the list)."""
    outs = [torch.zeros(3) for _ in range(size)]
    w = dist.all_gather(outs, pattern(torch.float32, rank, (3,)), async_op=True)
    res = w.get_future().wait()
    assert len(res) == size and all(same(res[r], pattern(torch.float32, r, (3,))) for r in range(size))
    assert all(same(outs[r], pattern(torch.float32, r, (3,))) for r in range(size))


def test_broadcast_future_value(rank, size):
    t = pattern(torch.int64, rank, (6,))
    w = dist.broadcast(t, 0, async_op=True)
    res = w.get_future().wait()
    assert len(res) == 1 and same(res[0], pattern(torch.int64, 0, (6,)))
    w.wait()  # result() needs a waited work (gloo: "Should call wait() before result()")
    assert same(w.result()[0], pattern(torch.int64, 0, (6,)))


def test_async_barrier(rank, size):
    w = dist.barrier(async_op=True)
    assert isinstance(w, dist.Work)
    w.wait()
    _check_done(w)


@needs_ranks(2)
def test_p2p_works(rank, size):
    """isend/irecv works: wait, is_completed, is_success, and an irecv's
    source_rank()."""
    if rank == 0:
        w = dist.isend(pattern(torch.float32, 0, (7,)), 1)
        assert isinstance(w, dist.Work)
        w.wait()
        assert w.is_completed() and w.is_success()
    elif rank == 1:
        t = torch.zeros(7)
        w = dist.irecv(t, 0)
        assert isinstance(w, dist.Work)
        w.wait()
        assert w.is_completed() and w.is_success()
        assert w.source_rank() == 0
        assert same(t, pattern(torch.float32, 0, (7,)))


@collie_only("gloo 1.13 lacks reduce_scatter and all_gather_into_tensor")
def test_async_collie_only_ops(rank, size):
    out = torch.zeros(4)
    w1 = dist.reduce_scatter(out, [torch.full((4,), float(rank + j)) for j in range(size)], async_op=True)
    big = torch.zeros(4 * size)
    w2 = dist.all_gather_into_tensor(big, torch.full((4,), float(rank)), async_op=True)
    w2.wait()
    w1.wait()
    assert same(out, torch.full((4,), float(sum(r + rank for r in range(size)))))
    assert same(big, torch.arange(float(size)).repeat_interleave(4))
    for w in (w1, w2):
        _check_done(w)
    assert same(w1.get_future().wait()[0], out)

