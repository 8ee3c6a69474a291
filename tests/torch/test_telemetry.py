"""collie's telemetry through the torch backend (collie only):

  collie.torch.step(step, epoch=0, group=None)   context manager: one training step
  collie.torch.category(cat, label=None, phase=None)
                                   context manager: the calls inside are charged to cat
                                   (a collie.PayloadCategory, or a category's name)
  collie.torch.get_comm(group=None) the collie.Comm under a torch group

Rank 0 writes COLLIE_LOG_DIR/comms.csv, one row per step, bytes by the wire
model of docs/telemetry.md; with COLLIE_TIMING_LOG=dir every rank writes
dir/timing-rank{i}.csv, a row per operation. run.sh gives each session fresh
directories; every test here uses step numbers of its own. The conftest
registers the category "gradients" before init (a comms.csv column
bytes_gradients)."""

import csv
import os
import sys
import time

import pytest
import torch
import torch.distributed as dist

from conftest import IS_COLLIE

pytestmark = pytest.mark.skipif(not IS_COLLIE, reason="collie's telemetry (comms.csv, timing logs): collie only")

if IS_COLLIE:
    import collie
    import collie.torch as ct

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
from telemetry_columns import HEADER, TIMING_HEADER, comms_rows, read_csv  # noqa: E402,F401


def allreduce_bytes(nbytes, p):
    return 2 * (p - 1) * nbytes // p


def test_step_rows(rank, size):
    """Three steps of an all_reduce (4096 bytes) and a broadcast (512 bytes):
    rank 0's comms.csv has one row per step with the wire model's bytes."""
    steps = [(101, 3), (102, 3), (103, 4)]
    for s, e in steps:
        with ct.step(s, epoch=e):
            t = torch.ones(1024)
            dist.all_reduce(t)
            b = torch.ones(128)
            dist.broadcast(b, 0)
        assert t[0].item() == size
    dist.all_reduce(torch.ones(64))  # outside any step: no row
    dist.barrier()
    if rank != 0:
        return
    header, rows = comms_rows([s for s, _ in steps])
    assert header.startswith(HEADER), header
    assert [(int(r["step"]), int(r["epoch"])) for r in rows] == steps, rows
    for r in rows:
        assert int(r["world_size"]) == size
        assert int(r["bytes_all_reduce"]) == allreduce_bytes(4096, size), r
        assert int(r["bytes_broadcast"]) == 512, r
        assert int(r["bytes_total"]) == allreduce_bytes(4096, size) + 512, r
        assert int(r["bytes_other"]) == int(r["bytes_total"]), r  # no category: OTHER
        assert float(r["t_total_ms"]) >= 0 and float(r["t_all_reduce_ms"]) >= 0


def test_categories(rank, size):
    """category(...) charges the calls inside to that column: a registered
    category by name, a PayloadCategory member, a built-in by its name;
    nested, the inner one wins until it ends; outside, OTHER."""
    with ct.step(201, epoch=0):
        with ct.category("gradients"):
            dist.all_reduce(torch.ones(1000))  # 4000 bytes
            with ct.category(collie.PayloadCategory.MOMENTS_MU):
                dist.all_reduce(torch.ones(500))  # 2000 bytes
            dist.all_reduce(torch.ones(250))  # gradients again: 1000 bytes
        with ct.category("features_allgather"):
            outs = [torch.zeros(10) for _ in range(size)]
            dist.all_gather(outs, torch.ones(10))  # 40-byte shards
        dist.all_reduce(torch.ones(8))  # OTHER: 32 bytes
    dist.barrier()
    if rank != 0:
        return
    header, rows = comms_rows([201])
    assert header.split(",")[-1] == "bytes_gradients", header
    assert len(rows) == 1, rows
    r = rows[0]
    assert int(r["bytes_gradients"]) == allreduce_bytes(4000, size) + allreduce_bytes(1000, size), r
    assert int(r["bytes_gradients"]) > 0 or size == 1
    assert int(r["bytes_moments_mu"]) == allreduce_bytes(2000, size), r
    assert int(r["bytes_features_allgather"]) == (size - 1) * 40, r
    assert int(r["bytes_other"]) == allreduce_bytes(32, size), r


def test_ddp_steps(rank, size):
    """A DDP training loop, each iteration in a step and its backward pass
    in the 'gradients' category, so the gradients' all_reduces (issued by
    autograd hooks, completed later) are charged to it: one row per step,
    all_reduce bytes all in gradients. (The forward pass stays outside the
    category: DDP's second forward broadcasts its rebuilt bucket order.)"""
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    nparams = sum(p.numel() for p in model.parameters())
    for it in range(3):
        with ct.step(301 + it, epoch=1):
            loss = ddp(torch.randn(4, 8)).pow(2).sum()
            with ct.category("gradients"):
                loss.backward()
            opt.step()
            opt.zero_grad()
    dist.barrier()
    if rank != 0:
        return
    _, rows = comms_rows([301, 302, 303])
    assert [int(r["step"]) for r in rows] == [301, 302, 303], rows
    for r in rows:
        assert int(r["bytes_gradients"]) == int(r["bytes_all_reduce"]) > 0 or size == 1, r
        # at least every gradient once (the wire model of nparams float32)
        assert int(r["bytes_all_reduce"]) >= allreduce_bytes(4 * nparams, size) - 8, r


def test_step_ends_on_exception(rank, size):
    """An exception in the body still ends the step (its row is written) and
    the next step opens; a step inside a step is refused (RuntimeError)."""
    with pytest.raises(ZeroDivisionError):
        with ct.step(401):
            dist.all_reduce(torch.ones(16))
            1 / 0
    with ct.step(402):
        with pytest.raises(RuntimeError):
            with ct.step(499):
                pass
        dist.all_reduce(torch.ones(16))
    dist.barrier()
    if rank != 0:
        return
    _, rows = comms_rows([401, 402, 499], timeout=2.0)
    assert sorted(int(r["step"]) for r in rows) == [401, 402], rows


def test_timing_log(rank, size):
    """With COLLIE_TIMING_LOG set (run.sh does), every rank's
    timing-rank{i}.csv has a row per operation: the step's iteration and
    epoch, the category's label and phase, the caller's buffer size; the
    .categories.csv sidecar names the category."""
    d = os.environ.get("COLLIE_TIMING_LOG")
    if not d:
        pytest.skip("COLLIE_TIMING_LOG is not set (run.sh sets it)")
    with ct.step(501, epoch=2):
        with ct.category("gradients", label="encoder.layer3", phase="sparse"):
            dist.all_reduce(torch.ones(256))  # 1024 bytes
        dist.broadcast(torch.ones(64), 0)  # 256 bytes
    ct.get_comm().timing_flush()
    path = os.path.join(d, "timing-rank%d.csv" % rank)
    deadline = time.monotonic() + 5
    while True:
        header, rows = read_csv(path) if os.path.exists(path) else ("", [])
        mine = [r for r in rows if r["iteration"] == "501"]
        if len(mine) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert header == TIMING_HEADER
    ar = [r for r in mine if r["operation"] == "ALLREDUCE"]
    bc = [r for r in mine if r["operation"] == "BCAST"]
    assert len(ar) == 1 and len(bc) == 1, mine
    assert ar[0]["epoch"] == "2" and ar[0]["layer_name"] == "encoder.layer3" and ar[0]["phase"] == "sparse"
    assert int(ar[0]["message_size_bytes"]) == 1024 and float(ar[0]["elapsed_ms"]) >= 0
    assert bc[0]["phase"] == "dense" and int(bc[0]["message_size_bytes"]) == 256
    _, cats = read_csv(os.path.join(d, "timing-rank%d.categories.csv" % rank))
    match = [c for c in cats if c["start_counter"] == ar[0]["start_counter"] and c["operation"] == "ALLREDUCE"]
    assert match and match[0]["category"] == "gradients", cats[-5:]


def test_get_comm(rank, size):
    """get_comm(group): the collie.Comm under a torch group, of the group's
    rank and size; it works beside torch on the same tensors."""
    c = ct.get_comm()
    assert isinstance(c, collie.Comm)
    assert c.get_rank() == rank and c.get_size() == size
    assert ct.get_comm(dist.group.WORLD).get_size() == size
    t = torch.full((4,), float(rank))
    c.all_reduce(t)
    assert torch.equal(t, torch.full((4,), float(size * (size - 1) // 2)))
    members = list(range(0, size, 2))
    g = dist.new_group(members)
    if rank in members:
        sub = ct.get_comm(g)
        assert sub.get_rank() == members.index(rank) and sub.get_size() == len(members)
