"""collie.distributed's wrappers on torch.distributed (issue 17, item 3):
all_reduce, all_gather, all_gather_into_tensor, reduce_scatter(_tensor),
broadcast and barrier with torch.distributed's signatures plus category=,
label=, phase=, running on torch's process groups whatever the backend, and
rank 0 appending one comms.csv row per step with the wire model's bytes.

test_mfcl_snippet runs the seed's users' training loop (jobs/mfcl_snippet.py)
as a job of its own on gloo and on collie and checks every figure of the
files it wrote against what the calls did. The other tests run in every
session on the backend under test, against the session's comms.csv, each
with step numbers of its own (9xx)."""

import os
import sys
import tempfile
import time

import pytest
import torch
import torch.distributed as dist

from conftest import BACKEND, JOBS, once_per_run, run_job

sys.path.insert(0, JOBS)
import mfcl_check  # noqa: E402
from mfcl_check import HEADER, check_self_consistent  # noqa: E402
from telemetry_columns import comms_rows  # noqa: E402

import collie  # noqa: E402
import collie.distributed as cd  # noqa: E402


# gloo 1.13 has neither all_gather_into_tensor nor reduce_scatter (the
# wrappers make up for the second).
HAS_BASE = BACKEND != "gloo"


def allreduce_wire(nbytes, p):
    return 2 * (p - 1) * nbytes // p


# ---- the seed's users' loop, as a job, on gloo and on collie ---------------------

@once_per_run
@pytest.mark.parametrize("backend", ["gloo", "collie"])
def test_mfcl_snippet(world, backend):
    def job():
        d = tempfile.mkdtemp(prefix="collie-mfcl-")
        t0 = time.monotonic()
        rc, out, _ = run_job("mfcl_snippet.py", 2, args=(backend, d), timeout=60)
        secs = time.monotonic() - t0
        res = {"rc": rc, "out": out}
        try:
            mfcl_check.check(d, backend, 2, secs)
            res["check"] = "ok"
        except (AssertionError, OSError) as e:
            res["check"] = "%s: %r (files: %s)" % (type(e).__name__, e, sorted(os.listdir(d)))
        return res

    res = world.wait_for_rank0(job)
    assert res["rc"] == 0, res["out"][-3000:]
    assert "mfcl ok 0" in res["out"] and "mfcl ok 1" in res["out"], res["out"][-2000:]
    assert res["check"] == "ok", res["check"]


# ---- in the session, on the backend under test -------------------------------------

def test_rows_exact(rank, size):
    """Each wrapper's wire bytes to its column and to its category, on the
    default group; results right; nothing charged outside a step."""
    p = size
    with cd.step(901, epoch=2):
        t = torch.ones(1000)
        cd.all_reduce(t, category=collie.PayloadCategory.MOMENTS_MU)  # 4000 B
        outs = [torch.zeros(10) for _ in range(p)]
        cd.all_gather(outs, torch.full((10,), float(rank)), category="features_allgather")  # 40 B shards
        big = torch.zeros(10 * p)
        if HAS_BASE:
            cd.all_gather_into_tensor(big, torch.full((10,), float(rank)))  # 40 B shards, OTHER
        else:
            cd.all_gather(list(big.chunk(p)), torch.full((10,), float(rank)))  # the same, as gloo 1.13 can
        b = torch.full((50,), float(rank))
        cd.broadcast(b, src=0, category=collie.PayloadCategory.TOPR_INDICES)  # 200 B
        cd.barrier()
    cd.all_reduce(torch.ones(3))  # outside: no row, no bytes
    assert t[0].item() == p and b.sum().item() == 0
    assert [o[0].item() for o in outs] == list(range(p))
    assert big.view(p, 10)[:, 0].tolist() == [float(q) for q in range(p)]
    dist.barrier()
    if rank != 0:
        return
    header, rows = comms_rows([901])
    assert header.startswith(HEADER), header
    assert len(rows) == 1, rows
    r = rows[0]
    assert (int(r["epoch"]), int(r["world_size"])) == (2, p), r
    assert int(r["bytes_all_reduce"]) == allreduce_wire(4000, p), r
    assert int(r["bytes_all_gather"]) == 2 * (p - 1) * 40, r
    assert int(r["bytes_broadcast"]) == 200, r
    assert int(r["bytes_moments_mu"]) == allreduce_wire(4000, p), r
    assert int(r["bytes_features_allgather"]) == (p - 1) * 40, r
    assert int(r["bytes_topr_indices"]) == 200, r
    assert int(r["bytes_other"]) == (p - 1) * 40, r
    check_self_consistent(r)


def test_reduce_scatter_rows(rank, size):
    """On every backend: where the group's backend has no reduce_scatter
    (torch 1.13's gloo), the wrappers reduce and keep this rank's shard,
    and still charge the reduce_scatter's wire-model bytes."""
    p = size
    with cd.step(902):
        out = torch.zeros(25)
        cd.reduce_scatter(out, [torch.full((25,), float(q + 1)) for q in range(p)])  # 100 B shard
        out2 = torch.zeros(5)
        cd.reduce_scatter_tensor(out2, torch.ones(5 * p), op=dist.ReduceOp.SUM)  # 20 B shard, torch's op
    assert out[0].item() == p * (rank + 1) and out2[0].item() == p
    dist.barrier()
    if rank == 0:
        _, rows = comms_rows([902])
        assert int(rows[0]["bytes_reduce_scatter"]) == (p - 1) * 120, rows


def test_subgroup_wire(rank, size):
    """A call on a subgroup is charged with the subgroup's size."""
    g = dist.new_group([0, 1]) if size >= 2 else None
    with cd.step(903):
        if rank < 2 and g is not None:
            t = torch.ones(600)
            cd.all_reduce(t, group=g)  # 2400 B on 2 ranks: 2400 wire bytes
            assert t[0].item() == 2
    dist.barrier()
    if rank == 0:
        _, rows = comms_rows([903])
        assert int(rows[0]["bytes_all_reduce"]) == (2400 if g is not None else 0), rows


def test_async_time_to_wait(rank, size):
    """async_op=True: a Work with torch's wait(); bytes charged at issue; the
    row waits for the wait, and its time reaches it (the collie backend: the
    call's completion, which collie sees itself)."""
    with cd.step(904):
        t = torch.ones(256)
        w = cd.all_reduce(t, async_op=True)
        assert w is not None
    time.sleep(0.05)
    if rank == 0 and BACKEND != "collie":
        _, rows = comms_rows([904], timeout=0.2)
        assert rows == [], ("the row was written before the call's wait", rows)
    assert w.wait() is not False
    assert t[0].item() == size
    assert w.is_completed()
    dist.barrier()
    if rank == 0:
        _, rows = comms_rows([904])
        assert int(rows[0]["bytes_all_reduce"]) == allreduce_wire(1024, size), rows
        if BACKEND != "collie":
            assert float(rows[0]["t_all_reduce_ms"]) >= 50, rows


def test_off_is_torch(rank, size, tmp_path):
    """runtime.comms_log.enabled false: the wrappers are torch's calls (same
    results, same return values) and write nothing; on again, rows again."""
    cd.configure({"runtime": {"comms_log": {"enabled": False}}})
    try:
        with cd.step(905):
            t = torch.ones(8)
            assert cd.all_reduce(t) is None
            w = cd.all_reduce(t, async_op=True)
            assert type(w).__name__ != "TimedWork"  # torch's own Work
            w.wait()
        assert t[0].item() == size * size
    finally:
        cd.configure(None)
    with cd.step(906):
        cd.broadcast(torch.ones(4), src=0)
    dist.barrier()
    if rank == 0:
        _, rows = comms_rows([905, 906], timeout=2)
        assert [int(r["step"]) for r in rows] == [906], rows


def test_errors(rank, size):
    """Wrong calls name what was wrong."""
    with pytest.raises(collie.InvalidArgument, match="timeout"):
        cd.all_reduce(torch.ones(1), timeout=5)
    with pytest.raises(collie.InvalidArgument, match="neither a collie Comm nor a group"):
        cd.all_reduce(torch.ones(1), group="world")
    with pytest.raises(collie.InvalidArgument, match="category"):
        with cd.step(907):
            cd.all_reduce(torch.ones(1), category=-3)
    with pytest.raises(collie.CollieError, match="no step is open"):
        cd.step_end()
    dist.barrier()


def test_ranks_route_to_torch(rank, size):
    assert cd.get_rank() == dist.get_rank() and cd.get_world_size() == dist.get_world_size()
