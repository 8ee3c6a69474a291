"""Process groups: new_group over a subset (non-members get
NON_GROUP_MEMBER) and over all ranks, new_subgroups, several groups alive
at once, a gloo group beside the default group, destroying a group, and a
second init_process_group after destroy_process_group (in a job of its own,
with the session's init method). For collie: the module's import and
registration."""

import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch.distributed as dist

from conftest import BACKEND, HERE, INIT, ROOT, collie_only, free_port, needs_ranks, run_job
from refs import same


def test_subset_group(rank, size):
    """The even ranks: members see their group rank and size, reduce and
    broadcast among themselves (src is a global rank); the others get
    NON_GROUP_MEMBER, rank -1, and collectives on it are no-ops."""
    members = list(range(0, size, 2))
    g = dist.new_group(members)
    t = torch.full((5,), float(rank + 1))
    b = torch.full((2,), float(rank))
    if rank in members:
        assert g is not dist.GroupMember.NON_GROUP_MEMBER
        assert dist.get_rank(g) == members.index(rank) and dist.get_world_size(g) == len(members)
        assert dist.get_backend(g) == BACKEND
        dist.all_reduce(t, group=g)
        assert same(t, torch.full((5,), float(sum(r + 1 for r in members))))
        dist.broadcast(b, members[-1], group=g)
        assert same(b, torch.full((2,), float(members[-1])))
        outs = [torch.zeros(1) for _ in members]
        dist.all_gather(outs, torch.full((1,), float(rank)), group=g)
        assert [o.item() for o in outs] == [float(r) for r in members]
    else:
        assert g is dist.GroupMember.NON_GROUP_MEMBER
        assert dist.get_rank(g) == -1 and dist.get_world_size(g) == -1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert dist.all_reduce(t, group=g) is None
        assert same(t, torch.full((5,), float(rank + 1)))  # untouched


def test_group_of_all_ranks(rank, size):
    for g in (dist.new_group(), dist.new_group(list(range(size))), dist.new_group(list(reversed(range(size))))):
        assert dist.get_backend(g) == BACKEND
        assert dist.get_rank(g) == rank and dist.get_world_size(g) == size
        t = torch.full((3,), float(rank))
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=g)
        assert same(t, torch.full((3,), float(size - 1)))
        b = torch.full((3,), float(rank))
        dist.broadcast(b, 0, group=g)
        assert same(b, torch.zeros(3))


@needs_ranks(2)
def test_p2p_in_subgroup(rank, size):
    """send/recv on a group of two ranks, peers named by global rank."""
    pair = [0, size - 1]
    g = dist.new_group(pair)
    if rank == 0:
        dist.send(torch.arange(4.0), size - 1, group=g)
    elif rank == size - 1:
        t = torch.zeros(4)
        dist.recv(t, 0, group=g)
        assert same(t, torch.arange(4.0))


def test_groups_used_alternately(rank, size):
    """Even, odd, all and the default group alive at once, used in turns,
    with async ops of one group in flight while others run."""
    evens = list(range(0, size, 2))
    odds = list(range(1, size, 2))
    g_even = dist.new_group(evens)
    g_odd = dist.new_group(odds) if odds else None
    g_all = dist.new_group()
    mine, mine_ranks = (g_even, evens) if rank % 2 == 0 else (g_odd, odds)
    for it in range(3):
        a = torch.full((7,), float(rank + it))
        w = dist.all_reduce(a, group=g_all, async_op=True)
        m = torch.full((3,), float(rank * it))
        dist.all_reduce(m, group=mine)
        d = torch.full((2,), 1.0)
        dist.all_reduce(d)
        w.wait()
        assert same(a, torch.full((7,), float(sum(r + it for r in range(size)))))
        assert same(m, torch.full((3,), float(sum(r * it for r in mine_ranks))))
        assert same(d, torch.full((2,), float(size)))


def test_gloo_group_beside_default(rank, size):
    """A gloo group in a default group of the backend under test."""
    g = dist.new_group(backend="gloo")
    assert dist.get_backend(g) == "gloo"
    t = torch.full((4,), float(rank))
    dist.all_reduce(t, group=g)
    u = torch.full((4,), float(rank))
    dist.all_reduce(u)
    assert same(t, u) and same(t, torch.full((4,), float(size * (size - 1) // 2)))


def test_new_subgroups(rank, size):
    """dist.new_subgroups: torch 1.13 refuses it without CUDA ('Subgroups can
    only be created when CUDA is available') before creating any group; the
    same subgroups made with new_group, one per pair of ranks, then work."""
    if torch.cuda.is_available():
        cur, subs = dist.new_subgroups(group_size=2 if size % 2 == 0 else 1)
        members = list(range(size))[rank - rank % dist.get_world_size(cur):][:dist.get_world_size(cur)]
    else:
        with pytest.raises(ValueError, match="CUDA"):
            dist.new_subgroups()
        subs = [dist.new_group(list(range(i, min(i + 2, size)))) for i in range(0, size, 2)]
        cur = subs[rank // 2]
        members = [r for r in range(size) if r // 2 == rank // 2]
    assert dist.get_rank(cur) == members.index(rank) and dist.get_world_size(cur) == len(members)
    t = torch.full((3,), float(rank))
    dist.all_reduce(t, group=cur)
    assert same(t, torch.full((3,), float(sum(members))))


def test_destroy_subgroup(rank, size):
    g = dist.new_group()
    t = torch.ones(2)
    dist.all_reduce(t, group=g)
    dist.destroy_process_group(g)
    assert dist.is_initialized()
    u = torch.ones(2)
    dist.all_reduce(u)
    assert same(t, u) and same(u, torch.full((2,), float(size)))


@collie_only("collie.torch's own group lookup")
def test_group_under_debug_detail(rank, size):
    """Under TORCH_DISTRIBUTED_DEBUG=DETAIL torch 2.x wraps a C++ backend
    (the fast path's FastGroup) in its ProcessGroupWrapper, which checks each
    collective's shape across ranks over a gloo helper group: calls still
    reach collie, and collie.torch still finds its group behind the wrapper
    (get_comm, step and python_group need it)."""
    import collie.torch as ct

    if not hasattr(dist, "set_debug_level"):
        pytest.skip("this torch has no dist.set_debug_level")
    old = dist.get_debug_level()
    dist.set_debug_level(dist.DebugLevel.DETAIL)
    try:
        g = dist.new_group(backend="collie")
    finally:
        dist.set_debug_level(old)
    assert isinstance(ct.python_group(g), ct.ProcessGroupCollie)
    assert ct.get_comm(g).size == size
    t = torch.full((3,), float(rank + 1))
    dist.all_reduce(t, group=g)
    assert same(t, torch.full((3,), float(size * (size + 1) // 2)))
    try:
        backend = g._get_backend(torch.device("cpu"))
    except (AttributeError, RuntimeError):
        backend = g  # torch 1.13's group, or 2.x's Python backend (torch holds it as the group itself)
    if ct.fast_path_loaded() and int(torch.__version__.split(".")[0]) >= 2:
        assert hasattr(backend, "wrapped_pg"), type(backend)  # torch 2.x wraps a C++ backend
    if hasattr(backend, "wrapped_pg"):  # torch wrapped it: its checks work over collie's group
        with pytest.raises(RuntimeError, match="(?i)mismatch"):
            if rank == 0:
                dist.all_reduce(t, group=g)
            else:
                dist.broadcast(t, src=0, group=g)
    dist.destroy_process_group(g)


def test_reinit_after_destroy(world, tmp_path):
    """A 2-rank job of its own: init_process_group, collectives,
    destroy_process_group, twice in one process, with this session's init
    method (a new port or file for the second round)."""
    how = "env" if INIT == "env" else INIT.split(":", 1)[0]

    def job():
        env = {"COLLIE_TORCH_JOB_PORT": free_port(), "COLLIE_TORCH_JOB_PORT2": free_port(),
               "COLLIE_TORCH_JOB_TCP1": free_port(), "COLLIE_TORCH_JOB_TCP2": free_port(),
               "COLLIE_TORCH_JOB_FILE1": str(tmp_path / "store1"), "COLLIE_TORCH_JOB_FILE2": str(tmp_path / "store2")}
        return run_job("reinit.py", 2, [how], timeout=40, **env)

    rc, out, secs = world.wait_for_rank0(job)
    assert rc == 0, "the job failed (exit %s after %.1f s):\n%s" % (rc, secs, out[-4000:])
    for r in (0, 1):
        for line in ("ROUND 1 OK", "ROUND 2 OK", "DONE"):
            assert "[%d] %s" % (r, line) in out, out[-4000:]


# --- the collie module ------------------------------------------------------


@collie_only("collie.torch's own surface")
def test_collie_module(world):
    import collie.torch as ct

    assert dist.get_backend() == "collie"
    assert isinstance(ct.ProcessGroupCollie, type)
    assert issubclass(ct.ProcessGroupCollie, torch._C._distributed_c10d.ProcessGroup)
    group = dist.distributed_c10d._get_default_group()
    pg = ct.python_group(group)
    assert isinstance(pg, ct.ProcessGroupCollie)
    if ct.fast_path_loaded():
        # torch holds the C++ FastGroup over the Python group; plain calls
        # take the fast path, the others the Python group.
        # (torch 2.x: a ProcessGroup holding the FastGroup as its CPU backend)
        fast = group if hasattr(group, "fast_calls") else group._get_backend(torch.device("cpu"))
        assert type(fast).__name__ == "FastGroup" and fast.collie_group is pg
        before = fast.fast_calls
        dist.all_reduce(torch.ones(3))
        dist.all_reduce(torch.ones(3, dtype=torch.bool))  # bool: the Python group widens it
        assert fast.fast_calls == before + 1
    else:
        assert group is pg
    for name in ("step", "category", "get_comm", "python_group", "fast_path_loaded"):
        assert callable(getattr(ct, name)), name


IMPORT_TWICE = r"""
import importlib, sys
import torch.distributed as dist
import collie.torch
import collie.torch as again
assert again is sys.modules["collie.torch"]
importlib.reload(collie.torch)      # a second execution of the module registers nothing twice
import collie.torch
assert hasattr(collie.torch, "ProcessGroupCollie")
assert "COLLIE" in dist.Backend._plugins or hasattr(dist.Backend, "COLLIE")
print("IMPORT OK")
"""


@collie_only("collie.torch's own surface")
def test_import_twice(world):
    """`import collie.torch` again, and even importlib.reload of it, is
    harmless (torch 1.13's Backend.register_backend asserts on a second
    registration of a name). In a fresh interpreter, on rank 0."""
    def job():
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        r = subprocess.run([sys.executable, "-c", IMPORT_TWICE], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60, cwd=HERE)
        return r.returncode, r.stdout

    rc, out = world.wait_for_rank0(job)
    assert rc == 0 and "IMPORT OK" in out, out[-3000:]
