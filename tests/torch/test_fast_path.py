"""The C++ fast path (docs/torch.md, "The C++ fast path"): which calls it
runs and which it hands to the Python group, issue order with held sends,
its Works (timeouts, errors, dropped while running), and how
COLLIE_TORCH_FAST chooses it. Skipped where the fast path is not loaded
(built without torch's C++ headers, or COLLIE_TORCH_FAST=0)."""

import datetime
import os
import shutil
import subprocess
import sysconfig
import sys
import time

import pytest
import torch
import torch.distributed as dist

from conftest import IS_COLLIE, build_dir, needs_ranks, once_per_run

pytestmark = pytest.mark.skipif(not IS_COLLIE, reason="the collie backend's own C++ half")


def _group():
    import collie.torch as ct

    if not ct.fast_path_loaded():
        pytest.skip("the C++ fast path is not loaded (COLLIE_TORCH_FAST=0, or built without torch's headers)")
    return _fast_of(dist.distributed_c10d._get_default_group())


def _fast_of(g):
    """The FastGroup behind torch's group object (torch 2.x: a ProcessGroup
    holding it as its CPU backend)."""
    return g if hasattr(g, "fast_calls") else g._get_backend(torch.device("cpu"))


def _runs_fast(g, call):
    """True when call() ran on the C++ half (its counter moved by one)."""
    before = g.fast_calls
    call()
    after = g.fast_calls
    assert after - before in (0, 1), (before, after)
    return after == before + 1


def test_which_calls_run_in_cpp(rank, size):
    """Plain tensors of native dtypes run in C++ (and give torch's results);
    what needs staging, widening or lists goes to the Python group."""
    g = _group()
    t = torch.full((5,), float(rank + 1))
    assert _runs_fast(g, lambda: dist.all_reduce(t))
    assert torch.equal(t, torch.full((5,), float(size * (size + 1) // 2)))
    b = torch.arange(6, dtype=torch.int64) * (rank + 1)
    assert _runs_fast(g, lambda: dist.broadcast(b, src=size - 1))
    assert torch.equal(b, torch.arange(6, dtype=torch.int64) * size)
    out = torch.empty(3 * size, dtype=torch.bfloat16)
    assert _runs_fast(g, lambda: dist.all_gather_into_tensor(out, torch.full((3,), float(rank), dtype=torch.bfloat16)))
    assert torch.equal(out, torch.arange(size, dtype=torch.bfloat16).repeat_interleave(3))
    rs = torch.empty(2, dtype=torch.int32)
    src = torch.arange(2 * size, dtype=torch.int32)
    assert _runs_fast(g, lambda: dist.reduce_scatter_tensor(rs, src, op=dist.ReduceOp.MAX))
    assert torch.equal(rs, torch.arange(2 * rank, 2 * rank + 2, dtype=torch.int32))
    a2a = torch.empty(size, dtype=torch.int16)  # a move: any dtype, as bytes
    assert _runs_fast(g, lambda: dist.all_to_all_single(a2a, torch.arange(size, dtype=torch.int16) + 10 * rank))
    assert torch.equal(a2a, torch.arange(size, dtype=torch.int16) * 10 + rank)
    assert _runs_fast(g, lambda: dist.barrier())

    # The Python group's cases: bool, int16 and complex reductions, a
    # non-contiguous tensor, PREMUL_SUM-free ops on lists, split sizes.
    bt = torch.tensor([rank == 0, True])
    assert not _runs_fast(g, lambda: dist.all_reduce(bt, op=dist.ReduceOp.MIN))
    assert torch.equal(bt, torch.tensor([size == 1, True]))
    i16 = torch.full((3,), rank + 1, dtype=torch.int16)
    assert not _runs_fast(g, lambda: dist.all_reduce(i16))
    assert torch.equal(i16, torch.full((3,), size * (size + 1) // 2, dtype=torch.int16))
    nc = torch.ones(4, 6)[:, ::2]
    assert not nc.is_contiguous()
    assert not _runs_fast(g, lambda: dist.all_reduce(nc))
    assert torch.equal(nc, torch.full((4, 3), float(size)))
    lst = [torch.empty(2) for _ in range(size)]
    assert not _runs_fast(g, lambda: dist.all_gather(lst, torch.full((2,), float(rank))))
    assert all(torch.equal(x, torch.full((2,), float(r))) for r, x in enumerate(lst))
    splits = [1] * size
    o = torch.empty(size)
    assert not _runs_fast(g, lambda: dist.all_to_all_single(o, torch.full((size,), float(rank)), splits, splits))
    assert torch.equal(o, torch.arange(size, dtype=torch.float32))


@needs_ranks(2)
def test_held_sends_keep_issue_order(rank, size):
    """An isend/irecv the Python group holds (to batch it) sends the next
    collective to the Python group, which issues the held ones first; once
    they went out, collectives run in C++ again."""
    import collie.torch as ct

    g = _group()
    pg = ct.python_group(g)
    peer = 1 - rank if rank < 2 else None
    x = torch.full((4,), float(rank))
    reqs = []
    if peer is not None:
        buf = torch.empty(4)
        pg._start_coalescing()  # held until _end_coalescing, not issued by the all_reduce below
        reqs = [dist.isend(x, peer), dist.irecv(buf, peer)]
    t = torch.ones(3)
    ran_fast = _runs_fast(g, lambda: dist.all_reduce(t))
    if peer is not None:
        pg._end_coalescing()
    for r in reqs:
        r.wait()
    assert torch.equal(t, torch.full((3,), float(size)))
    if peer is not None:
        assert not ran_fast, "a collective issued while sends were held ran in C++, past the Python group"
        assert torch.equal(buf, torch.full((4,), float(peer)))
    assert _runs_fast(g, lambda: dist.all_reduce(t))


@needs_ranks(2)
def test_wait_timeout_then_complete(rank, size):
    """Work.wait(timeout) of a fast call still running raises saying so and
    leaves it running; a later wait() completes it, with the result."""
    from collie.torch import CollieBackendError

    _group()
    dist.barrier()
    t = torch.full((8,), float(rank))
    if rank == 0:
        w = dist.all_reduce(t, async_op=True)
        with pytest.raises(CollieBackendError, match="still running after the wait's timeout") as ei:
            w.wait(datetime.timedelta(milliseconds=50))
        assert ei.value.code == "timeout"
        assert w.is_completed() is False
        assert w.wait() is True
        assert w.exception() is None and w.is_success()
    else:
        time.sleep(0.6)
        w = dist.all_reduce(t, async_op=True)
        w.wait()
    assert torch.equal(t, torch.full((8,), float(sum(range(size)))))
    assert torch.equal(w.result()[0], t)


def test_dropped_work_still_completes(rank, size):
    """A Work dropped while its call runs: the call still completes into
    the tensor (the completer holds it), and the calls after it run in
    order."""
    _group()
    ts = [torch.full((1000,), float(rank + i)) for i in range(20)]
    for t in ts:
        dist.all_reduce(t, async_op=True)  # the Work is dropped at once
    last = torch.ones(1)
    dist.all_reduce(last)
    base = sum(range(size))
    for i, t in enumerate(ts):
        assert torch.equal(t, torch.full((1000,), float(base + size * i))), i


def test_future_of_fast_call(rank, size):
    """get_future() of a fast call (what DDP's reducer and hooks chain on):
    set to the output tensors by the completer, then() chains on it."""
    _group()
    t = torch.full((4,), 2.0)
    fut = dist.all_reduce(t, async_op=True).get_future()
    doubled = fut.then(lambda f: f.value()[0] * 2)
    assert torch.equal(doubled.wait(), torch.full((4,), 4.0 * size))
    assert fut.value()[0] is t or torch.equal(fut.value()[0], t)


def _import_with(env_extra, lib=None):
    import collie

    env = dict(os.environ)
    env.pop("COLLIE_TORCH_FAST", None)  # unset: auto, unless env_extra says
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(collie.__file__)))
    env.update(env_extra)
    if lib is not None:
        env["COLLIE_LIBRARY"] = lib
    code = "import collie.torch as ct; print('LOADED' if ct.fast_path_loaded() else 'PYTHON')"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


@once_per_run
def test_collie_torch_fast_variable(rank, tmp_path):
    """COLLIE_TORCH_FAST: 0 the Python backend; 1 the fast path or an
    ImportError naming what is missing; a bad value is an ImportError naming
    it."""
    _group()
    if rank != 0:
        return
    r = _import_with({"COLLIE_TORCH_FAST": "0"})
    assert r.returncode == 0 and "PYTHON" in r.stdout, r.stderr
    r = _import_with({"COLLIE_TORCH_FAST": "1"})
    assert r.returncode == 0 and "LOADED" in r.stdout, r.stderr
    r = _import_with({"COLLIE_TORCH_FAST": "yes"})
    assert r.returncode != 0 and "COLLIE_TORCH_FAST='yes'" in r.stderr, r.stderr
    # A libcollie.so with no fast path next to it.
    lone = tmp_path / "libcollie.so"
    shutil.copy(os.path.join(build_dir(), "libcollie.so"), lone)
    r = _import_with({"COLLIE_TORCH_FAST": "1"}, str(lone))
    assert r.returncode != 0 and "_collie_torch_fast" in r.stderr and str(tmp_path) in r.stderr, r.stderr
    r = _import_with({}, str(lone))
    assert r.returncode == 0 and "PYTHON" in r.stdout, r.stderr
    # Beside it, a module built for another Python only (a build directory
    # reconfigured for another interpreter keeps the old one): never loaded.
    (tmp_path / "_collie_torch_fast.cpython-39-x86_64-linux-gnu.so").write_bytes(b"not a module")
    r = _import_with({"COLLIE_TORCH_FAST": "1"}, str(lone))
    assert r.returncode != 0 and "built for another Python" in r.stderr and "cpython-39" in r.stderr, r.stderr
    r = _import_with({}, str(lone))
    assert r.returncode == 0 and "PYTHON" in r.stdout and "does not load" not in r.stderr, r.stderr
    # Beside it, a module built for this Python but another torch (the file
    # the build writes says which): never loaded (loading it would crash the
    # process), with a message naming both versions.
    import glob
    mod = glob.glob(os.path.join(build_dir(), "_collie_torch_fast.cpython-3*"))
    mod = [m for m in mod if m.endswith(sysconfig.get_config_var("EXT_SUFFIX"))]
    assert mod, "no fast path module in %s" % build_dir()
    shutil.copy(mod[0], tmp_path / os.path.basename(mod[0]))
    (tmp_path / "_collie_torch_fast.torch").write_text("0.9.9\n")
    r = _import_with({"COLLIE_TORCH_FAST": "1"}, str(lone))
    assert r.returncode != 0 and "built for torch 0.9.9" in r.stderr and torch.__version__ in r.stderr, r.stderr
    r = _import_with({}, str(lone))
    assert r.returncode == 0 and "PYTHON" in r.stdout and "built for torch 0.9.9" in r.stderr, r.stderr
    (tmp_path / "_collie_torch_fast.torch").write_text(torch.__version__ + "\n")
    r = _import_with({"COLLIE_TORCH_FAST": "1"}, str(lone))
    assert r.returncode == 0 and "LOADED" in r.stdout, r.stderr


@needs_ranks(2)
def test_blocking_send_recv_in_cpp(rank, size):
    """dist.send/dist.recv of a plain tensor run in C++ (as bytes, as the
    Python group sends them): a C++ send matches a Python group's irecv and
    the other way round; isend/irecv stay with the Python group."""
    g = _group()
    if rank > 1:
        return
    peer = 1 - rank
    x = torch.arange(5, dtype=torch.float64) + 100 * rank
    got = torch.empty(5, dtype=torch.float64)
    if rank == 0:
        assert _runs_fast(g, lambda: dist.send(x, peer, tag=3))
        assert _runs_fast(g, lambda: dist.recv(got, peer, tag=4))
    else:
        assert _runs_fast(g, lambda: dist.recv(got, peer, tag=3))
        assert _runs_fast(g, lambda: dist.send(x, peer, tag=4))
    assert torch.equal(got, torch.arange(5, dtype=torch.float64) + 100 * peer)
    # One half's send, the other half's receive.
    got2 = torch.empty(5, dtype=torch.float64)
    if rank == 0:
        assert _runs_fast(g, lambda: dist.send(x, peer))
        holder = {}
        assert not _runs_fast(g, lambda: holder.setdefault("w", dist.irecv(got2, peer)))
        holder["w"].wait()
    else:
        holder = {}
        assert not _runs_fast(g, lambda: holder.setdefault("w", dist.irecv(got2, peer)))
        holder["w"].wait()
        assert _runs_fast(g, lambda: dist.send(x, peer))
    assert torch.equal(got2, torch.arange(5, dtype=torch.float64) + 100 * peer)


@needs_ranks(2)
@pytest.mark.parametrize("async_op", [False, True], ids=["blocking", "async"])
def test_errors_are_collie_backend_errors(async_op, rank, size, short_group):
    """A fast call that fails raises what the Python group raises:
    CollieBackendError with collie's message and code, from the call itself
    (blocking) or from wait() and exception() (async)."""
    from collie.torch import CollieBackendError

    _group()
    assert type(_fast_of(short_group)).__name__ == "FastGroup"
    if rank != size - 1:  # the last rank skips the call: the others time out
        t = torch.ones(10)
        with pytest.raises(CollieBackendError) as ei:
            if async_op:
                w = dist.all_reduce(t, group=short_group, async_op=True)
                w.wait()
            else:
                dist.all_reduce(t, group=short_group)
        # timeout where this rank's deadline passed first, remote error where
        # another's abort reached it first
        assert ei.value.code in ("timeout", "remote error") and "allreduce" in str(ei.value), ei.value
        if async_op:
            assert w.is_completed() and not w.is_success()
            exc = w.exception()
            assert isinstance(exc, CollieBackendError) and exc.code == ei.value.code
    dist.barrier()


@needs_ranks(2)
def test_work_queries_never_block(rank, size):
    """While one thread waits on a fast call whose peers have not joined,
    is_completed() answers False at once (it would say True had it waited
    for the end), and a future callback that calls back into its own Work
    (get_future, is_success) does not deadlock with the completer."""
    import threading

    _group()
    dist.barrier()
    t = torch.ones(4)
    if rank == 0:
        w = dist.all_reduce(t, async_op=True)
        waiter = threading.Thread(target=w.wait)
        waiter.start()
        time.sleep(0.1)  # the waiter is inside collie's wait now (or about to be)
        assert w.is_completed() is False
        waiter.join()
        assert w.is_completed() is True
    else:
        time.sleep(1.0)
        dist.all_reduce(t, async_op=True).wait()
    seen = []
    w = dist.all_reduce(torch.ones(2), async_op=True)

    def cb(fut):
        time.sleep(0.05)  # releases the GIL inside the completer's callback
        seen.append((w.get_future() is not None, w.is_success()))
        return fut.value()

    chained = w.get_future().then(cb)
    w.get_future()
    w.is_success()
    chained.wait()
    assert seen == [(True, True)]


def test_polling_a_work_whose_future_is_pending(rank, size):
    """Polling is_completed() of calls whose futures the completer settles,
    their inputs temporaries (the Work holds the last reference): the
    completer lets go of the tensors with no lock of the Work held (it once
    deadlocked, within a few hundred calls, freeing one under its lock while
    the poller held the GIL)."""
    _group()
    out = torch.empty(16 * size)
    for _ in range(1500 if size <= 2 else 200):  # (4 spinning ranks on 2 cores: slow)
        w = dist.all_gather_into_tensor(out, torch.ones(16), async_op=True)
        w.get_future()
        while not w.is_completed():
            pass
    assert torch.equal(out, torch.ones(16 * size))


def test_torch_shutdown_and_abort_reach_collie(rank, size):
    """On a torch whose Backend can be shut down and aborted (2.14 can; 1.13
    and 2.6 cannot, and collie.torch's own destroy_process_group does it
    there), torch's own destroy_process_group and _abort_process_group reach
    the collie group through the FastGroup: its communicator is freed, or
    aborted so that it refuses calls."""
    import collie.torch as ct
    from collie.torch import _fast

    _group()
    if not getattr(_fast.module(), "forwards_shutdown", False):
        pytest.skip("this torch's Backend has no shutdown/abort to forward")
    g = dist.new_group(backend="collie")
    pg = ct.python_group(g)
    dist.all_reduce(torch.ones(2), group=g)
    dist.destroy_process_group.__wrapped__(g)  # torch's own, not collie.torch's wrapper
    assert pg._h is None  # freed by torch's call
    g2 = dist.new_group(backend="collie")
    pg2 = ct.python_group(g2)
    comm = pg2.comm
    dist.distributed_c10d._abort_process_group(g2)
    with pytest.raises(Exception, match="(?i)abort"):
        comm.barrier()
    pg2.shutdown()
    dist.barrier()


@needs_ranks(2)
def test_options_saying_blocking_run_blocking(rank, size):
    """Newer torch tells the backend that the caller waits at once
    (options.asyncOp False, set by dist.all_reduce(t) and others on 2.14):
    the fast path then runs the call blocking without reading the caller's
    frame, so even a call made straight on the group returns done; with
    asyncOp True it returns at once, while a peer is still away."""
    g = _group()
    if not hasattr(dist.AllreduceOptions(), "asyncOp"):
        pytest.skip("this torch's options have no asyncOp")
    t = torch.ones(3)
    for blocking in (True, False):
        dist.barrier()
        opts = dist.AllreduceOptions()
        opts.asyncOp = not blocking
        if rank != 0:
            time.sleep(0.5)  # rank 0's call cannot finish before this rank joins
        before = g.fast_calls
        w = g.allreduce([t], opts)
        assert g.fast_calls == before + 1
        if rank == 0:
            assert w.is_completed() is blocking, blocking
        w.wait()
    assert torch.equal(t, torch.full((3,), float(size * size)))
