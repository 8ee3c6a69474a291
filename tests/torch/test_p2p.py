"""Point-to-point through torch.distributed: send/recv and isend/irecv in a
ring, tags, recv from any source (the returned sender is right),
batch_isend_irecv, and what gloo does with a non-contiguous tensor."""

import time

import pytest
import torch
import torch.distributed as dist

from conftest import IS_COLLIE, needs_ranks
from refs import dtname, pattern, same

pytestmark = needs_ranks(2)

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32,
          torch.int64, torch.bool, torch.complex64]


def _msg(dtype, src, dst, n):
    return pattern(dtype, src, (n,), salt=dst)


@pytest.mark.parametrize("n", [0, 1, 1000, 1 << 18])
def test_send_recv_ring(n, rank, size):
    """Blocking send/recv around the ring (even ranks send first, odd ranks
    receive first), float32 at sizes up to 1 MiB."""
    right, left = (rank + 1) % size, (rank - 1) % size
    got = torch.full((n,), -1.0)
    if rank % 2 == 0:
        dist.send(_msg(torch.float32, rank, right, n), right)
        dist.recv(got, left)
    else:
        dist.recv(got, left)
        dist.send(_msg(torch.float32, rank, right, n), right)
    assert same(got, _msg(torch.float32, left, rank, n))


@pytest.mark.parametrize("dtype", DTYPES, ids=dtname)
def test_send_recv_dtypes(dtype, rank, size):
    """Every dtype goes point to point (gloo moves bytes: bool and bfloat16
    too), rank 0 to the last rank."""
    last = size - 1
    if rank == 0:
        dist.send(_msg(dtype, 0, last, 33), last)
    elif rank == last:
        got = torch.zeros(33, dtype=dtype)
        assert dist.recv(got, 0) == 0
        assert same(got, _msg(dtype, 0, last, 33))


def test_isend_irecv_ring(rank, size):
    """Every rank posts both receives, then both sends, then waits: both
    directions of the ring at once."""
    right, left = (rank + 1) % size, (rank - 1) % size
    from_left, from_right = torch.zeros(100), torch.zeros(100)
    works = [dist.irecv(from_left, left, tag=1), dist.irecv(from_right, right, tag=2)]
    works += [dist.isend(_msg(torch.float32, rank, right, 100), right, tag=1),
              dist.isend(_msg(torch.float32, rank, left, 100), left, tag=2)]
    for w in works:
        assert isinstance(w, dist.Work)
    for w in works:
        w.wait()
    for w in works:
        assert w.is_completed()
    assert same(from_left, _msg(torch.float32, left, rank, 100))
    assert same(from_right, _msg(torch.float32, right, rank, 100))


def test_tags_match_out_of_order(rank, size):
    """Two messages rank 0 -> 1 with tags 5 and 6, received 6 first: each
    receive gets the message of its tag (gloo; collie matches by source and
    tag as MPI does)."""
    if rank == 0:
        ws = [dist.isend(torch.full((4,), 5.0), 1, tag=5), dist.isend(torch.full((4,), 6.0), 1, tag=6)]
        for w in ws:
            w.wait()
    elif rank == 1:
        a, b = torch.zeros(4), torch.zeros(4)
        dist.recv(b, 0, tag=6)
        dist.recv(a, 0, tag=5)
        assert same(a, torch.full((4,), 5.0)) and same(b, torch.full((4,), 6.0))


def test_recv_any_source(rank, size):
    """recv with src=None on rank 0, once per other rank: each returns the
    sender's rank, which matches the data, and every sender comes once."""
    if rank == 0:
        senders = []
        for _ in range(size - 1):
            t = torch.zeros(8)
            src = dist.recv(t)
            assert isinstance(src, int) and 1 <= src < size
            assert same(t, _msg(torch.float32, src, 0, 8)), (src, t)
            senders.append(src)
        assert sorted(senders) == list(range(1, size))
    else:
        dist.send(_msg(torch.float32, rank, 0, 8), 0)


def test_irecv_any_source(rank, size):
    """irecv with src=None: the work's source_rank() is the sender."""
    if rank == size - 1:
        t = torch.zeros(5, dtype=torch.int64)
        w = dist.irecv(t)
        w.wait()
        assert w.source_rank() == 0
        assert same(t, _msg(torch.int64, 0, size - 1, 5))
    elif rank == 0:
        dist.send(_msg(torch.int64, 0, size - 1, 5), size - 1)


def test_batch_isend_irecv_ring(rank, size):
    """A ring exchange in both directions as one batch."""
    right, left = (rank + 1) % size, (rank - 1) % size
    from_left, from_right = torch.zeros(64, dtype=torch.float64), torch.zeros(64, dtype=torch.float64)
    ops = [dist.P2POp(dist.isend, _msg(torch.float64, rank, right, 64), right),
           dist.P2POp(dist.irecv, from_left, left),
           dist.P2POp(dist.isend, _msg(torch.float64, rank, left, 64) + 0.5, left),
           dist.P2POp(dist.irecv, from_right, right)]
    reqs = dist.batch_isend_irecv(ops)
    assert len(reqs) >= 1
    for q in reqs:
        q.wait()
    assert same(from_left, _msg(torch.float64, left, rank, 64))
    assert same(from_right, _msg(torch.float64, right, rank, 64) + 0.5)


def test_batch_isend_irecv_repeated(rank, size):
    """Several batches in a row (the first one of a group is special in
    torch: every rank must take part), then a collective."""
    right, left = (rank + 1) % size, (rank - 1) % size
    for it in range(3):
        got = torch.zeros(10)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.irecv, got, left),
                                       dist.P2POp(dist.isend, _msg(torch.float32, rank, it, 10), right)])
        for q in reqs:
            q.wait()
        assert same(got, _msg(torch.float32, left, it, 10))
    t = torch.ones(3)
    dist.all_reduce(t)
    assert same(t, torch.full((3,), float(size)))


def test_batch_isend_irecv_issued_slowly(rank, size):
    """A batch is one batch however long torch takes between its calls: an
    irecv issued alone (it waits for its peer's send, which waits behind the
    peer's own irecv) would leave both ranks waiting, where Gloo completes.
    The op is wrapped to pause after the irecv (torch 2.x calls a Python
    backend's isend and irecv one by one)."""
    right, left = (rank + 1) % size, (rank - 1) % size

    def slow_irecv(*args, **kwargs):
        w = dist.irecv(*args, **kwargs)
        time.sleep(0.05)
        return w

    got = torch.zeros(10)
    recv = dist.P2POp(dist.irecv, got, left)
    recv.op = slow_irecv  # (P2POp checks its op when made; the batch calls it)
    reqs = dist.batch_isend_irecv([recv, dist.P2POp(dist.isend, _msg(torch.float32, rank, 7, 10), right)])
    for q in reqs:
        q.wait()
    assert same(got, _msg(torch.float32, left, 7, 10))


def test_irecv_compute_isend(rank, size):
    """Post the receive, compute, then send, then wait: the pattern of a
    hand-written pipeline step. With Gloo each starts at once; collie must
    not post the receive alone however long the compute takes (its
    operations run in issue order: the peer's send would then wait behind
    the peer's own lone receive)."""
    right, left = (rank + 1) % size, (rank - 1) % size
    got = torch.zeros(1000)
    r = dist.irecv(got, left)
    time.sleep(0.05)  # the compute
    s = dist.isend(_msg(torch.float32, rank, 3, 1000), right)
    r.wait()
    s.wait()
    assert same(got, _msg(torch.float32, left, 3, 1000))


@needs_ranks(2)
def test_isend_then_other_group(rank, size, short_group):
    """A rank's isend nobody waits on yet must reach its peer when the rank
    goes on to a blocking call on another group - which the peer joins only
    once it has the message (with Gloo the isend starts at once)."""
    x = torch.zeros(8)
    if rank == 0:
        w = dist.isend(_msg(torch.float32, 0, 1, 8), 1, group=short_group)
        t = torch.ones(2)
        dist.all_reduce(t)  # the default group
        w.wait()
    else:
        if rank == 1:
            dist.recv(x, 0, group=short_group)
            assert same(x, _msg(torch.float32, 0, 1, 8))
        t = torch.ones(2)
        dist.all_reduce(t)
    assert same(t, torch.full((2,), float(size)))


def test_send_non_contiguous_refused(rank, size):
    """Gloo refuses to send a non-contiguous tensor (RuntimeError 'input
    tensor has to be contiguous') before communicating; collie must refuse
    too (RuntimeError or ValueError). The receiver then gets a contiguous
    copy, so nothing is left in flight."""
    t = pattern(torch.float32, rank, (4, 3)).t()
    if rank == 0:
        with pytest.raises((RuntimeError, ValueError)):
            dist.send(t, 1)
        dist.send(t.contiguous(), 1)
    elif rank == 1:
        got = torch.zeros(3, 4)
        dist.recv(got, 0)
        assert same(got, pattern(torch.float32, 0, (4, 3)).t())


def test_recv_non_contiguous_refused(rank, size):
    """Gloo refuses to receive into a non-contiguous tensor before
    communicating (RuntimeError); collie must refuse too. Rank 0 sends
    nothing until rank 1 received into a contiguous buffer."""
    if rank == 1:
        out = torch.zeros(4, 3).t()
        with pytest.raises((RuntimeError, ValueError)):
            dist.recv(out, 0)
        got = torch.zeros(3, 4)
        dist.recv(got, 0)
        assert same(got, pattern(torch.float32, 0, (3, 4)))
    elif rank == 0:
        dist.send(pattern(torch.float32, 0, (3, 4)), 1)



@needs_ranks(2)
def test_recv_while_any_source_pending(rank, size):
    """While an irecv from any source is pending, another receive may be
    issued: the first takes rank 1's first message, the second its next."""
    if rank == 0:
        t, u = torch.zeros(4), torch.zeros(4)
        w = dist.irecv(t)
        dist.recv(u, 1)
        w.wait()
        assert w.source_rank() == 1 and same(t, torch.full((4,), 3.0))
        assert same(u, torch.full((4,), 4.0))
    elif rank == 1:
        time.sleep(0.2)
        dist.send(torch.full((4,), 3.0), 0)
        dist.send(torch.full((4,), 4.0), 0)


@pytest.mark.skipif(not IS_COLLIE, reason="collie.torch's own rule")
def test_which_p2p_callers_wait_at_once():
    """Which torch.distributed frames wait on a send/recv's Work at once (the
    direct path takes those), in the shapes of torch 1.x (dist.send calls
    the group) and 2.x (dist.send calls dist.isend, which calls the group),
    on fake frames: a wrong answer either way is a lost direct path or an
    isend that blocks."""
    from types import SimpleNamespace

    from collie.torch._common import C10D, blocking_p2p_caller

    def chain(*names, globals_=C10D):
        f = None
        for name in names:  # outermost first
            f = SimpleNamespace(f_globals=globals_, f_code=SimpleNamespace(co_name=name), f_back=f)
        return f

    assert blocking_p2p_caller(chain("train", "send"))  # 1.x dist.send
    assert blocking_p2p_caller(chain("train", "recv"))
    assert blocking_p2p_caller(chain("train", "send", "isend"))  # 2.x dist.send
    assert blocking_p2p_caller(chain("train", "recv", "irecv"))
    assert blocking_p2p_caller(chain("send"))  # no caller above it
    assert not blocking_p2p_caller(chain("train", "isend"))  # the user's isend
    assert not blocking_p2p_caller(chain("train", "irecv"))
    assert not blocking_p2p_caller(chain("batch_isend_irecv", "isend"))
    assert not blocking_p2p_caller(chain("batch_isend_irecv", "send"))
    assert not blocking_p2p_caller(chain("batch_isend_irecv", "send", "isend"))
    assert not blocking_p2p_caller(chain("train", "recv", "isend"))  # a mismatched pair
    assert not blocking_p2p_caller(chain("train", "send", globals_={}))  # not torch's
    assert not blocking_p2p_caller(chain("all_reduce"))
