"""test_stack.py - torch 2.x's distributed stack on the backend under test
(issue 36, point 3), each test comparing it with gloo in the same test.

The default group is the session's backend (collie); `gloo_group` is a gloo
group of every rank made beside it, and the gloo device mesh is
`DeviceMesh.from_group(gloo_group, "cpu")` beside `init_device_mesh`'s. Every
test runs the same computation over both and compares the results, and with
a reference computed from every rank's inputs (or a single-process run):

1. DeviceMesh (`test_device_mesh_1d`, `test_device_mesh_2d`): init_device_mesh
   at (size,) and (2, size//2) with mesh_dim_names; its groups are the
   backend's; all_reduce and all_gather_into_tensor over each dimension.
2. DTensor (`test_dtensor_distribute`, `test_dtensor_redistribute`,
   `test_dtensor_2d`): distribute_tensor with Shard(0), Shard(1), Replicate
   (uneven shards included), full_tensor(), and redistribute Partial->Replicate
   (all-reduce), Partial->Shard (reduce-scatter), Shard->Replicate
   (all-gather), Shard(0)->Shard(1) (all-to-all).
3. FSDP2 (`test_fsdp2_mixed_precision_accumulation`): fully_shard with
   MixedPrecisionPolicy(bf16 params, fp32 reduce), gradient accumulation with
   set_requires_gradient_sync(False), against the same training over the gloo
   mesh and a single-process simulation.
4. Tensor parallelism (`test_tensor_parallel_block`): parallelize_module with
   ColwiseParallel/RowwiseParallel on an attention + MLP block, outputs and
   gradients against gloo and the unsharded block.
5. Pipeline parallelism (`test_pipeline_schedules`): PipelineStage with
   ScheduleGPipe and Schedule1F1B, one stage per rank (send/recv), losses and
   gradients against gloo and the unsplit model; `test_pipeline_traced`: the
   `pipeline()` tracing front end (pipe_split) at 2 stages.
6. Functional collectives (`test_functional_collectives`): all_reduce,
   all_gather_tensor, reduce_scatter_tensor, all_to_all_single, wait_tensor,
   eager and in a torch.compile'd function (backend aot_eager).
7. Distributed checkpointing (`test_dcp_fsdp2_reshard`): dcp.save of an FSDP2
   model's sharded state_dict into a directory every rank shares; dcp.load
   into the same world, into the gloo mesh, and resharded into a world of
   size//2 ranks (new_subgroups: 4 -> 2, 2 -> 1).
8. torchrun (`test_torchrun_c10d_restart`, once per run): `python -m
   torch.distributed.run --rdzv-backend c10d --max-restarts 1` of
   jobs/torchrun_restart.py, whose rank 1 SIGKILLs itself on the first
   attempt; the second attempt's collectives are right, exit 0, and no worker
   is left behind.
9. Groups (`test_new_subgroups`, `test_split_group`,
   `test_destroy_and_abort_subgroup`): new_subgroups, split_group (torch
   2.13 refuses it on CPU for every backend: skipped with its error), and
   destroy_process_group / _abort_process_group of a subgroup (a pending
   collective fails, as with gloo).

Tolerances. A sum of two floats is the same in either order, so at 2 ranks
every result is bit-identical to gloo's and to the reference; results that
only move data (gathers, all-to-all, scatter, send/recv, checkpoints) are
bit-identical at any size. Sums over 4 ranks may be ordered differently: rtol
1e-6, atol 1e-6 (TOL). Against single-process references (their own matmul
splits and summation order): rtol 1e-5, atol 1e-6 (REF_TOL), the FSDP2
simulation included (it computes in bf16 from the same bf16 parameters and
accumulates in fp32 as FSDP2 does: only the order of the sum over the ranks
may differ).

Runs in the env2 and env4 sessions (tcp2/file2 skip: the launch method does
not matter here); on torch 1.x every test skips, saying so.
"""

import copy
import datetime
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from conftest import BACKEND, IS_COLLIE, JOBS, PG_TIMEOUT, SESSION, SIZE, free_port, job_env, needs_ranks, once_per_run

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
if TORCH2:
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

# (Marks, not a module-level skip: pytest then still collects the tests, and
# a run of this file alone on torch 1.x passes with every test skipped.)
pytestmark = [
    pytest.mark.skipif(not TORCH2, reason="torch %s has no torch 2.x distributed stack (DeviceMesh, DTensor, "
                       "FSDP2, pipelining, functional collectives)" % torch.__version__),
    pytest.mark.skipif(SESSION in ("tcp2", "file2"),
                       reason="runs in the env2 and env4 sessions (the launch method does not matter here)"),
]

TOL = dict(rtol=1e-6, atol=1e-6)  # sums over more than 2 ranks, against gloo
REF_TOL = dict(rtol=1e-5, atol=1e-6)  # against single-process references
# The backend under test, then gloo (once when they are the same).
BACKENDS = (BACKEND, "gloo") if BACKEND != "gloo" else ("gloo",)


def rand(seed, *shape):
    """A tensor every rank can compute for any seed (a rank's input: seed = rank)."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def same(got, want, summed=False, what=""):
    """Bit-identical, except sums over more than 2 ranks: within TOL."""
    if summed and SIZE > 2:
        torch.testing.assert_close(got, want, **TOL, msg=lambda m: "%s: %s" % (what, m))
    else:
        assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype, got.shape, want.shape)
        assert torch.equal(got, want), "%s: not bit-identical, max diff %g" % (
            what, float((got.double() - want.double()).abs().max()))


def ref_sum(ts):
    """The sum of the ranks' tensors in float64, rounded once."""
    return torch.stack([t.double() for t in ts]).sum(0).to(ts[0].dtype)


@pytest.fixture(scope="module", autouse=True)
def _groups_time_out(world):
    """Groups that torch makes here without a timeout (a 2-D mesh's, new_subgroups')
    get the session's (30 s), not torch's default of 30 minutes: a rank left
    waiting fails its test instead of stalling the session."""
    c10d = dist.distributed_c10d
    saved = c10d.default_pg_timeout
    c10d.default_pg_timeout = PG_TIMEOUT
    yield
    c10d.default_pg_timeout = saved


@pytest.fixture(scope="module")
def gloo_group(world):
    return dist.new_group(backend="gloo", timeout=PG_TIMEOUT)


# The gloo meshes' dimension names. They must differ from the backend's:
# torch compares meshes by ranks, device type and dimension names, not by
# group, and DTensor's sharding cache hands an operation on one mesh the
# output layout (with its mesh) of an earlier operation on an equal one, so
# with equal names one backend's collectives would run on the other's group
# and "vs gloo" would compare a backend with itself.
GLOO = {"w": "w_gloo", "dp": "dp_gloo", "tp": "tp_gloo"}


def collie_ops(mesh):
    """How many operations collie's C++ fast path has run on mesh's groups;
    None where that cannot be counted (the Python group, or gloo under test)."""
    total = 0
    for dim in mesh.mesh_dim_names:
        g = mesh.get_group(dim)
        try:  # (the Python group is torch's group itself, with no backend object: not countable)
            b = g if hasattr(g, "fast_calls") else g._get_backend(torch.device("cpu"))
        except RuntimeError:
            return None
        if not hasattr(b, "fast_calls"):
            return None
        total += b.fast_calls
    return total


def run_counted(mesh, fn):
    """fn()'s result and how many operations collie ran on mesh meanwhile (None: not countable)."""
    before = collie_ops(mesh)
    out = fn()
    return out, None if before is None else collie_ops(mesh) - before


def carried_by(t, mesh):
    """t (a DTensor) lives on mesh itself, not on an equal mesh of the other backend."""
    assert t.device_mesh.mesh_dim_names == mesh.mesh_dim_names, (t.device_mesh.mesh_dim_names, mesh.mesh_dim_names)
    assert all(t.device_mesh.get_group(d) is mesh.get_group(d) for d in mesh.mesh_dim_names)


@pytest.fixture(scope="module")
def meshes(world, gloo_group):
    """(the backend's 1-D mesh of every rank, gloo's)."""
    mine = init_device_mesh("cpu", (SIZE,), mesh_dim_names=("w",))
    gloo = DeviceMesh.from_group(gloo_group, "cpu", mesh_dim_names=(GLOO["w"],))
    return mine, gloo


@pytest.fixture(scope="module")
def meshes2d(world):
    """(the backend's (2, size//2) mesh, gloo's): at 4 ranks."""
    if SIZE < 4 or SIZE % 2:
        pytest.skip("a 2-D mesh (2, size//2) needs 4 ranks (world size %d)" % SIZE)
    shape, names = (2, SIZE // 2), ("dp", "tp")
    mine = init_device_mesh("cpu", shape, mesh_dim_names=names)
    gnames = tuple(GLOO[n] for n in names)
    gloo = init_device_mesh("cpu", shape, mesh_dim_names=gnames, backend_override={n: "gloo" for n in gnames})
    return mine, gloo


# --- 1. DeviceMesh -------------------------------------------------------------

def test_device_mesh_1d(rank, size, meshes):
    mesh, gmesh = meshes
    g, gg = mesh.get_group("w"), gmesh.get_group(GLOO["w"])
    assert dist.get_backend(g) == BACKEND and dist.get_backend(gg) == "gloo"
    assert dist.get_process_group_ranks(g) == dist.get_process_group_ranks(gg) == list(range(size))
    assert mesh.get_local_rank("w") == gmesh.get_local_rank(GLOO["w"]) == rank
    x = rand(rank, 5, 3)
    a, b = x.clone(), x.clone()
    dist.all_reduce(a, group=g)
    dist.all_reduce(b, group=gg)
    ref = ref_sum([rand(r, 5, 3) for r in range(size)])
    same(a, b, summed=True, what="all_reduce vs gloo")
    same(a, ref, summed=True, what="all_reduce vs reference")
    out, gout = torch.empty(size * 5, 3), torch.empty(size * 5, 3)
    dist.all_gather_into_tensor(out, x, group=g)
    dist.all_gather_into_tensor(gout, x, group=gg)
    same(out, gout, what="all_gather_into_tensor vs gloo")
    same(out, torch.cat([rand(r, 5, 3) for r in range(size)]), what="all_gather_into_tensor vs reference")


def test_device_mesh_2d(rank, size, meshes2d):
    mesh, gmesh = meshes2d
    grid = torch.arange(size).view(2, size // 2)
    assert mesh.mesh.tolist() == gmesh.mesh.tolist() == grid.tolist()
    row, col = rank // (size // 2), rank % (size // 2)
    members = {"dp": grid[:, col].tolist(), "tp": grid[row].tolist()}
    for dim in ("dp", "tp"):
        g, gg = mesh.get_group(dim), gmesh.get_group(GLOO[dim])
        assert dist.get_backend(g) == BACKEND and dist.get_backend(gg) == "gloo", dim
        assert dist.get_process_group_ranks(g) == dist.get_process_group_ranks(gg) == members[dim], dim
        assert mesh[dim].get_local_rank() == members[dim].index(rank)
        x = rand(100 * rank + len(dim), 4, 3)
        a, b = x.clone(), x.clone()
        dist.all_reduce(a, group=g)
        dist.all_reduce(b, group=gg)
        ref = ref_sum([rand(100 * r + len(dim), 4, 3) for r in members[dim]])
        same(a, b, what="all_reduce over %s vs gloo" % dim)  # two members: any order is exact
        same(a, ref, what="all_reduce over %s vs reference" % dim)
        out, gout = torch.empty(len(members[dim]) * 4, 3), torch.empty(len(members[dim]) * 4, 3)
        dist.all_gather_into_tensor(out, x, group=g)
        dist.all_gather_into_tensor(gout, x, group=gg)
        same(out, gout, what="all_gather over %s vs gloo" % dim)
        same(out, torch.cat([rand(100 * r + len(dim), 4, 3) for r in members[dim]]), what="all_gather over " + dim)


# --- 2. DTensor ------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(8, 12), (7, 5)], ids=["even", "uneven"])
def test_dtensor_distribute(rank, size, meshes, shape):
    """distribute_tensor takes rank 0's tensor (each rank passes its own:
    the others' are ignored) and gives each rank its chunk; full_tensor()
    gathers it back."""
    mesh, gmesh = meshes
    full = rand(rank, *shape)
    want_full = rand(0, *shape)
    for name, p in {"shard0": Shard(0), "shard1": Shard(1), "replicate": Replicate()}.items():
        d = distribute_tensor(full, mesh, [p])
        gd = distribute_tensor(full, gmesh, [p])
        carried_by(d, mesh)
        carried_by(gd, gmesh)
        local, glocal = d.to_local(), gd.to_local()
        same(local, glocal, what="%s local vs gloo" % name)
        if isinstance(p, Shard):
            chunks = torch.chunk(want_full, size, dim=p.dim)
            want = chunks[rank] if rank < len(chunks) else want_full.narrow(p.dim, 0, 0)
        else:
            want = want_full
        same(local, want.contiguous(), what="%s local vs rank 0's chunk" % name)
        same(d.full_tensor(), gd.full_tensor(), what="%s full_tensor vs gloo" % name)
        same(d.full_tensor(), want_full, what="%s full_tensor" % name)


def _redistribute_cases(size):
    """name: (local input shape, from placement, to placement, reference(list of every rank's local input))."""
    n = 2 * size

    def chunk(t, dim, r):
        chunks = torch.chunk(t, size, dim=dim)  # DTensor's Shard: torch.chunk's, then empty ones
        return chunks[r] if r < len(chunks) else t.narrow(dim, 0, 0)

    return {
        "partial_to_replicate": ((3, n), Partial(), Replicate(), True, lambda xs, r: ref_sum(xs)),
        "partial_to_shard0": ((n, 3), Partial(), Shard(0), True, lambda xs, r: chunk(ref_sum(xs), 0, r)),
        "partial_to_shard1_uneven": ((3, n + 1), Partial(), Shard(1), True,
                                     lambda xs, r: chunk(ref_sum(xs), 1, r).contiguous()),
        "shard0_to_replicate": ((3, 5), Shard(0), Replicate(), False, lambda xs, r: torch.cat(xs)),
        "shard1_to_replicate": ((3, 2), Shard(1), Replicate(), False, lambda xs, r: torch.cat(xs, 1)),
        "shard0_to_shard1": ((2, n), Shard(0), Shard(1), False, lambda xs, r: chunk(torch.cat(xs), 1, r).contiguous()),
        "shard1_to_shard0": ((n, 2), Shard(1), Shard(0), False, lambda xs, r: chunk(torch.cat(xs, 1), 0, r)),
        "replicate_to_shard0": ((n, 3), Replicate(), Shard(0), False, lambda xs, r: chunk(xs[0], 0, r)),
    }


REDISTRIBUTE_CASES = ("partial_to_replicate", "partial_to_shard0", "partial_to_shard1_uneven", "shard0_to_replicate",
                      "shard1_to_replicate", "shard0_to_shard1", "shard1_to_shard0", "replicate_to_shard0")


@pytest.mark.parametrize("case", REDISTRIBUTE_CASES)
def test_dtensor_redistribute(rank, size, meshes, case):
    """redistribute among Partial, Shard and Replicate: Partial->Replicate is
    an all-reduce, Partial->Shard a reduce-scatter, Shard->Replicate an
    all-gather, Shard(0)->Shard(1) an all-to-all (from_local: each rank's own
    input; Replicate: every rank passes rank 0's)."""
    mesh, gmesh = meshes
    cases = _redistribute_cases(size)
    assert set(cases) == set(REDISTRIBUTE_CASES)
    shape, src, dst, summed, ref = cases[case]
    seed = lambda r: 1000 + r if not isinstance(src, Replicate) else 1000  # noqa: E731
    x = rand(seed(rank), *shape)
    got = DTensor.from_local(x, mesh, [src], run_check=False).redistribute(mesh, [dst])
    gref = DTensor.from_local(x, gmesh, [src], run_check=False).redistribute(gmesh, [dst])
    assert got.placements == (dst,)
    carried_by(got, mesh)
    carried_by(gref, gmesh)
    same(got.to_local(), gref.to_local(), summed, what="%s vs gloo" % case)
    want = ref([rand(seed(r), *shape) for r in range(size)], rank)
    same(got.to_local(), want, summed, what="%s vs reference" % case)
    # and back to Replicate: full_tensor()
    same(got.full_tensor(), gref.full_tensor(), summed, what="%s full_tensor vs gloo" % case)


def test_dtensor_2d(rank, size, meshes2d):
    """On the (2, size//2) mesh: [Shard(0), Shard(1)] from rank 0's tensor,
    its full_tensor(), and [Partial, Partial] -> [Replicate, Shard(0)]."""
    mesh, gmesh = meshes2d
    full = rand(rank, 6, 8)
    d = distribute_tensor(full, mesh, [Shard(0), Shard(1)])
    gd = distribute_tensor(full, gmesh, [Shard(0), Shard(1)])
    same(d.to_local(), gd.to_local(), what="2-D shards vs gloo")
    row, col = rank // (size // 2), rank % (size // 2)
    want = torch.chunk(torch.chunk(rand(0, 6, 8), 2, 0)[row], size // 2, 1)[col].contiguous()
    same(d.to_local(), want, what="2-D shard vs rank 0's chunk")
    same(d.full_tensor(), rand(0, 6, 8), what="2-D full_tensor")
    x = rand(500 + rank, 4, 6)
    p = DTensor.from_local(x, mesh, [Partial(), Partial()], run_check=False).redistribute(mesh, [Replicate(), Shard(0)])
    gp = DTensor.from_local(x, gmesh, [Partial(), Partial()], run_check=False).redistribute(
        gmesh, [Replicate(), Shard(0)])
    carried_by(p, mesh)
    carried_by(gp, gmesh)
    same(p.to_local(), gp.to_local(), summed=True, what="2-D partial -> (replicate, shard0) vs gloo")
    want = torch.chunk(ref_sum([rand(500 + r, 4, 6) for r in range(size)]), size // 2, 0)[col]
    same(p.to_local(), want, summed=True, what="2-D partial -> (replicate, shard0) vs reference")


# --- 3. FSDP2 ----------------------------------------------------------------------

FSDP_STEPS, FSDP_ACCUM, FSDP_LR = 3, 2, 0.1


def fsdp_model():
    torch.manual_seed(777)
    # Widths that do not divide by 4 (padded shards); ~1.8k parameters.
    return nn.Sequential(nn.Linear(12, 37), nn.GELU(), nn.Linear(37, 30), nn.LayerNorm(30), nn.Tanh(),
                         nn.Linear(30, 5))


def fsdp_batch(r, step, micro):
    g = torch.Generator().manual_seed(10007 * step + 101 * micro + r)
    return torch.randn(4, 12, generator=g), torch.randn(4, 5, generator=g)


def fsdp_train(mesh, rank):
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    model = fsdp_model()
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    opt = torch.optim.SGD(model.parameters(), lr=FSDP_LR)
    losses = []
    for step in range(FSDP_STEPS):
        for micro in range(FSDP_ACCUM):
            model.set_requires_gradient_sync(micro == FSDP_ACCUM - 1)
            x, y = fsdp_batch(rank, step, micro)
            loss = F.mse_loss(model(x).float(), y)
            loss.backward()
            losses.append(loss.detach())
        opt.step()
        opt.zero_grad(set_to_none=True)
    return [p.full_tensor().detach().clone() for p in model.parameters()], torch.stack(losses)


def fsdp_simulate(size):
    """Every rank's micro-steps on one model: forward and backward in bf16
    (the parameters cast, as FSDP2's all-gather gives them), gradients
    accumulated in fp32 over the micro-steps and averaged over the ranks."""
    model = fsdp_model()
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=FSDP_LR)
    for step in range(FSDP_STEPS):
        total = [torch.zeros_like(p) for p in params]
        for r in range(size):
            low = copy.deepcopy(model).to(torch.bfloat16)
            acc = None
            for micro in range(FSDP_ACCUM):
                x, y = fsdp_batch(r, step, micro)
                low.zero_grad(set_to_none=True)
                F.mse_loss(low(x.to(torch.bfloat16)).float(), y).backward()
                gs = [q.grad.float() for q in low.parameters()]
                acc = gs if acc is None else [a + g for a, g in zip(acc, gs)]
            total = [t + a for t, a in zip(total, acc)]
        for p, t in zip(params, total):
            p.grad = t / size
        opt.step()
    return [p.detach().clone() for p in params]


def test_fsdp2_mixed_precision_accumulation(rank, size, meshes, world):
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # noqa: F401
    except ImportError as e:
        pytest.skip("no FSDP2 in torch %s: %s" % (torch.__version__, e))
    mesh, gmesh = meshes
    (mine, losses), n = run_counted(mesh, lambda: fsdp_train(mesh, rank))
    (ref, glosses), gn = run_counted(mesh, lambda: fsdp_train(gmesh, rank))
    if n is not None:  # each backend carried its own model's all-gathers and reduce-scatters
        assert n > 0 and gn == 0, (n, gn)
    same(losses, glosses, what="losses vs gloo")
    for i, (a, b) in enumerate(zip(mine, ref)):
        # The gradients are averaged (ReduceOp.AVG) over the ranks in fp32.
        same(a, b, summed=True, what="parameter %d vs gloo" % i)
    sim = fsdp_simulate(size)
    for i, (a, b) in enumerate(zip(mine, sim)):
        torch.testing.assert_close(a, b, **REF_TOL, msg=lambda m: "parameter %d vs the simulation: %s" % (i, m))
    init = [p.detach() for p in fsdp_model().parameters()]
    assert max(float((a - b).abs().max()) for a, b in zip(mine, init)) > 1e-2, "the parameters did not move"
    # Every rank holds the same full parameters.
    flat = torch.cat([p.reshape(-1) for p in mine])
    assert len(set(world.gather(flat.numpy().tobytes()))) == 1


# --- 4. Tensor parallelism ------------------------------------------------------------

class Block(nn.Module):
    """A transformer block: causal self-attention (q, k, v, o projections) and
    an MLP, each with a residual. Heads are found from the projections'
    local width, so the block runs sharded by heads as it is."""

    def __init__(self, d=16, heads=4, hidden=24):
        super().__init__()
        self.hd = d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        b, s, _ = x.shape

        def heads(t):
            return t.view(b, s, -1, self.hd).transpose(1, 2)

        a = F.scaled_dot_product_attention(heads(self.q(x)), heads(self.k(x)), heads(self.v(x)), is_causal=True)
        h = x + self.o(a.transpose(1, 2).reshape(b, s, -1))
        return h + self.fc2(F.gelu(self.fc1(h)))


def tp_run(mesh):
    """Forward and backward of the block: (output, input grad, {name: full grad}),
    tensor-parallel over mesh (None: the unsharded block)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    torch.manual_seed(99)
    block = Block()
    if mesh is not None:
        plan = {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(), "o": RowwiseParallel(),
                "fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
        block = parallelize_module(block, mesh, plan)
    x = rand(4242, 2, 5, 16).requires_grad_()
    out = block(x)
    (out * rand(4343, 2, 5, 16)).sum().backward()
    for p in block.parameters():
        if isinstance(p.grad, DTensor):
            carried_by(p.grad, mesh)
    grads = {n: (p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad).clone()
             for n, p in block.named_parameters()}
    return out.detach(), x.grad.clone(), grads


def test_tensor_parallel_block(rank, size, meshes):
    if 4 % size:
        pytest.skip("the block's 4 heads do not divide by %d ranks" % size)
    mesh, gmesh = meshes
    (out, xg, grads), n = run_counted(mesh, lambda: tp_run(mesh))
    (gout, gxg, ggrads), gn = run_counted(mesh, lambda: tp_run(gmesh))
    if n is not None:  # at least the forward's two row-parallel all-reduces ran on collie, and gloo's none
        assert n >= 2 and gn == 0, (n, gn)
    rout, rxg, rgrads = tp_run(None)
    # The row-parallel projections all-reduce partial sums (size summands).
    same(out, gout, summed=True, what="output vs gloo")
    same(xg, gxg, summed=True, what="input grad vs gloo")
    torch.testing.assert_close(out, rout, **REF_TOL)
    torch.testing.assert_close(xg, rxg, **REF_TOL)
    assert set(grads) == set(rgrads) == set(ggrads) and len(grads) == 12
    for n in grads:
        same(grads[n], ggrads[n], summed=True, what="grad of %s vs gloo" % n)
        torch.testing.assert_close(grads[n], rgrads[n], **REF_TOL, msg=lambda m: "grad of %s: %s" % (n, m))


# --- 5. Pipeline parallelism ----------------------------------------------------------

PP_MICRO = 4


def pp_model(size):
    torch.manual_seed(2024)
    layers = []
    for _ in range(size):
        layers += [nn.Linear(8, 8), nn.Tanh()]
    return nn.Sequential(*layers)


def pp_data():
    return rand(31, 8, 8), rand(32, 8, 8)


def pp_run(schedule_cls, group, rank, size):
    """One training step of the model split into one stage per rank over
    group: (the losses on the last stage, this stage's gradients)."""
    from torch.distributed.pipelining import PipelineStage

    model = pp_model(size)
    stage_mod = model[2 * rank: 2 * rank + 2]
    stage = PipelineStage(stage_mod, rank, size, torch.device("cpu"), group=group)
    sched = schedule_cls(stage, n_microbatches=PP_MICRO, loss_fn=F.mse_loss)
    x, y = pp_data()
    losses = []
    if rank == 0:
        sched.step(x)
    elif rank == size - 1:
        sched.step(target=y, losses=losses)
    else:
        sched.step()
    return losses, [p.grad.clone() for p in stage_mod.parameters()]


def pp_reference(size):
    """The whole model on one process, microbatch by microbatch; the grads of
    the mean of the microbatches' losses."""
    model = pp_model(size)
    x, y = pp_data()
    losses = []
    for xm, ym in zip(x.chunk(PP_MICRO), y.chunk(PP_MICRO)):
        loss = F.mse_loss(model(xm), ym)
        losses.append(loss.detach())
        (loss / PP_MICRO).backward()
    return losses, model


@pytest.mark.parametrize("schedule", ["ScheduleGPipe", "Schedule1F1B"])
def test_pipeline_schedules(rank, size, gloo_group, schedule):
    import torch.distributed.pipelining as pipelining

    cls = getattr(pipelining, schedule)
    losses, grads = pp_run(cls, None, rank, size)
    glosses, ggrads = pp_run(cls, gloo_group, rank, size)
    rlosses, rmodel = pp_reference(size)
    stage_ref = [p.grad for p in rmodel[2 * rank: 2 * rank + 2].parameters()]
    if rank == size - 1:
        assert len(losses) == len(glosses) == PP_MICRO
        for a, b, c in zip(losses, glosses, rlosses):
            same(a, b, what="loss vs gloo")
            torch.testing.assert_close(a, c, **REF_TOL)
    for a, b, c in zip(grads, ggrads, stage_ref):
        same(a, b, what="grad vs gloo")  # send/recv only: no reduction
        torch.testing.assert_close(a, c, **REF_TOL)


class _Traced(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(77)
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        from torch.distributed.pipelining import pipe_split

        x = torch.tanh(self.a(x))
        pipe_split()
        return self.b(x)


@pytest.mark.skipif(SIZE != 2, reason="the traced pipeline has 2 stages: runs at 2 ranks")
def test_pipeline_traced(rank, size, gloo_group):
    """pipeline() splits the traced model at pipe_split(); GPipe over the
    backend and over gloo give the same loss and gradients as the whole
    model."""
    from torch.distributed.pipelining import ScheduleGPipe, pipeline

    x, y = rand(61, 4, 8), rand(62, 4, 8)
    results = []
    for group in (None, gloo_group):
        model = _Traced()
        pipe = pipeline(model, mb_args=(x.chunk(2)[0],))
        stage = pipe.build_stage(rank, torch.device("cpu"), group=group)
        sched = ScheduleGPipe(stage, n_microbatches=2, loss_fn=F.mse_loss)
        losses = []
        if rank == 0:
            sched.step(x)
        else:
            sched.step(target=y, losses=losses)
        results.append((losses, [p.grad.clone() for p in stage.submod.parameters()]))
    (losses, grads), (glosses, ggrads) = results
    assert len(losses) == len(glosses) == (2 if rank == 1 else 0)
    for a, b in zip(losses, glosses):
        same(a, b, what="loss vs gloo")
    assert len(grads) == len(ggrads) == 2
    for a, b in zip(grads, ggrads):
        same(a, b, what="grad vs gloo")
    ref = _Traced()
    rlosses = []
    for xm, ym in zip(x.chunk(2), y.chunk(2)):
        loss = F.mse_loss(ref(xm), ym)
        rlosses.append(loss.detach())
        (loss / 2).backward()
    for a, c in zip(losses, rlosses):
        torch.testing.assert_close(a, c, **REF_TOL)
    mine = ref.a if rank == 0 else ref.b
    for a, p in zip(grads, mine.parameters()):
        torch.testing.assert_close(a, p.grad, **REF_TOL)


# --- 6. Functional collectives ---------------------------------------------------------

def funcols(x, group):
    import torch.distributed._functional_collectives as funcol

    a = funcol.all_reduce(x, "sum", group)
    b = funcol.all_gather_tensor(x, 0, group)
    c = funcol.reduce_scatter_tensor(x, "sum", 0, group)
    d = funcol.all_to_all_single(x, None, None, group)
    return tuple(funcol.wait_tensor(t) for t in (a, b, c, d))


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_functional_collectives(rank, size, gloo_group, mode):
    fn = funcols
    if mode == "compiled":
        torch._dynamo.reset()
        fn = torch.compile(funcols, backend="aot_eager", fullgraph=True)
    x = rand(rank, 2 * size, 3)
    mine = fn(x, dist.group.WORLD)
    gloo = fn(x, gloo_group)
    xs = [rand(r, 2 * size, 3) for r in range(size)]
    refs = (ref_sum(xs), torch.cat(xs), ref_sum(xs).chunk(size)[rank],
            torch.cat([t.chunk(size)[rank] for t in xs]))
    for name, a, b, c, summed in zip(("all_reduce", "all_gather_tensor", "reduce_scatter_tensor",
                                      "all_to_all_single"), mine, gloo, refs, (True, False, True, False)):
        same(a, b, summed, what="%s %s vs gloo" % (mode, name))
        same(a, c, summed, what="%s %s vs reference" % (mode, name))


def test_functional_collective_failure_raises(rank, size, world):
    """A functional collective that cannot complete (the last rank never
    calls it, on a group with a 2 s timeout) raises from wait_tensor, over
    the backend as over gloo, instead of handing back an output never
    written (DTensor's full_tensor() waits so). The groups are not used
    again."""
    import torch.distributed._functional_collectives as funcol

    short = datetime.timedelta(seconds=2)
    groups = [dist.new_group(backend=b, timeout=short) for b in BACKENDS]
    outcomes = []
    for g in groups:
        if rank != size - 1:
            try:
                funcol.wait_tensor(funcol.all_gather_tensor(rand(rank, 4), 0, g))
                outcomes.append("returned")
            except RuntimeError as e:
                outcomes.append("RuntimeError: %s" % " ".join(str(e).split())[:300])
        world.gather(None)  # (over the harness's group: the last rank waits here)
    for b, o in zip(BACKENDS, outcomes):
        assert o.startswith("RuntimeError"), "%s: the all_gather %s" % (b, o)
    if IS_COLLIE and outcomes:
        assert re.search("(?i)timed out|timeout", outcomes[0]), outcomes[0]


# --- 7. Distributed checkpointing ----------------------------------------------------

def _sharded_model(mesh, seed):
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(10, 23), nn.Tanh(), nn.Linear(23, 7))  # 23, 7: uneven shards
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def _full_state(model):
    return {k: (v.full_tensor() if isinstance(v, DTensor) else v).detach().clone()
            for k, v in model.state_dict().items()}


def test_dcp_fsdp2_reshard(rank, size, meshes, gloo_group, shared_dir):
    """dcp.save of an FSDP2 model's state_dict (DTensors sharded over every
    rank) into a directory every rank shares; dcp.load into a fresh model
    (other initial values) sharded alike, into one sharded over the gloo
    mesh, and into one sharded over size//2 ranks (new_subgroups: each half
    of the ranks loads the whole checkpoint; at 2 ranks, each rank alone):
    every parameter bit-identical to the saved one."""
    import torch.distributed.checkpoint as dcp

    mesh, gmesh = meshes
    model = _sharded_model(mesh, 1)
    with torch.no_grad():
        for p in model.parameters():  # values of its own, not the initial ones
            p.mul_(3.0).add_(0.25)
    saved = _full_state(model)
    sd = model.state_dict()
    assert all(isinstance(v, DTensor) and v.placements == (Shard(0),) for v in sd.values())
    dcp.save(sd, checkpoint_id=shared_dir)

    half = max(size // 2, 1)
    sub, _ = dist.new_subgroups(group_size=half)
    assert dist.get_backend(sub) == BACKEND and dist.get_world_size(sub) == half
    targets = [("same world", mesh, None), ("gloo mesh", gmesh, gloo_group),
               ("%d of %d ranks" % (half, size), DeviceMesh.from_group(sub, "cpu"), sub)]
    for what, m, pg in targets:
        fresh = _sharded_model(m, 2)
        before = _full_state(fresh)
        state = fresh.state_dict()
        dcp.load(state, checkpoint_id=shared_dir, process_group=pg)
        fresh.load_state_dict(state)
        got = _full_state(fresh)
        assert set(got) == set(saved)
        for k in saved:
            assert not torch.equal(before[k], saved[k]), "%s: %s was already the saved value" % (what, k)
            same(got[k], saved[k], what="%s: %s" % (what, k))
    dist.destroy_process_group(sub)


# --- 8. torchrun with the c10d rendezvous ------------------------------------------------

TORCHRUN_TIMEOUT = 45  # s; the other ranks wait on the harness group (60 s)


def _torchrun_restart():
    env = job_env(COLLIE_TORCH_FAST=os.environ.get("COLLIE_TORCH_FAST", "auto"))
    env.pop("TORCHELASTIC_RESTART_COUNT", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
           "--rdzv-endpoint", "127.0.0.1:%d" % free_port(), "--max-restarts", "1",
           os.path.join(JOBS, "torchrun_restart.py")]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=TORCHRUN_TIMEOUT)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        rc = "timeout after %d s" % TORCHRUN_TIMEOUT
    finally:
        shutil.rmtree(env["COLLIE_LOG_DIR"], ignore_errors=True)
    # Every worker torchrun started is gone (torchrun's own session included).
    pids = [int(x) for x in re.findall(r"PID (\d+) attempt", out)]
    deadline = time.monotonic() + 5
    left = pids
    while left and time.monotonic() < deadline:
        left = [q for q in left if _alive(q)]
        if left:
            time.sleep(0.1)
    try:
        os.killpg(p.pid, 0)
        group_left = True
    except ProcessLookupError:
        group_left = False
    if group_left:
        os.killpg(p.pid, signal.SIGKILL)
    for q in left:
        os.kill(q, signal.SIGKILL)
    return rc, out, left, group_left


def _alive(pid):
    """pid is a live process (not a zombie)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@once_per_run
def test_torchrun_c10d_restart(world):
    """torchrun (torch.distributed.run) with the c10d rendezvous and
    --max-restarts 1 runs jobs/torchrun_restart.py on the backend under test:
    rank 1 SIGKILLs itself on the first attempt, torchrun restarts both
    workers, and the second attempt's collectives are right; exit 0, and no
    worker is left behind."""
    rc, out, left, group_left = world.wait_for_rank0(_torchrun_restart)
    tail = out[-3000:]
    assert not left, "workers still running after torchrun exited: %s" % left
    assert not group_left, "processes left in torchrun's session"
    if BACKEND == "gloo" and rc != 0 and re.search(r"attempt 1.*connectFullMesh failed", out, re.S):
        # The second attempt's default group meets in the same store as the
        # first's, whose keys are still there: gloo may read the dead
        # worker's address (collie numbers each rank's inits in the store,
        # world-inits/<rank>, and meets under the next number).
        pytest.skip("torch %s's torchrun restart: gloo's second attempt read the first attempt's address "
                    "(connectFullMesh failed: Connection refused)" % torch.__version__)
    assert rc == 0, "torchrun: %s\n%s" % (rc, tail)
    starts = set(re.findall(r"PID \d+ attempt (\d) rank (\d)", out))
    assert starts == {(a, r) for a in "01" for r in "01"}, (starts, tail)
    assert "KILL attempt 0 rank 1" in out, tail
    results = re.findall(r"RESULT attempt (\d) rank (\d) backend (\S+) allreduce (\[[^\]]*\]) "
                         r"allgather (\[\[.*?\]\]) broadcast (\[[^\]]*\])", out)
    assert sorted(r[:2] for r in results) == [("1", "0"), ("1", "1")], (results, tail)
    for _, _, backend, total, gathered, b in results:
        assert backend == BACKEND
        assert total == "[3.0, 3.0, 3.0, 3.0]"
        assert gathered == "[[0.0, 1.0, 2.0], [10.0, 11.0, 12.0]]"
        assert b == "[1.0, 1.0]"


# --- 9. Groups: new_subgroups, split_group, destroy and abort ---------------------------

def test_new_subgroups(rank, size, world):
    """new_subgroups(group_size=2) over the backend and over gloo: the
    subgroups are the backend's, hold the expected ranks, and compute alike."""
    if size % 2:
        pytest.skip("group_size 2 needs an even world size")
    cur, subs = dist.new_subgroups(group_size=2)
    gcur, gsubs = dist.new_subgroups(group_size=2, backend="gloo")
    assert len(subs) == len(gsubs) == size // 2  # (the others' are NON_GROUP_MEMBER here)
    assert dist.get_backend(cur) == BACKEND and dist.get_backend(gcur) == "gloo"
    members = [rank - rank % 2, rank - rank % 2 + 1]
    assert dist.get_process_group_ranks(cur) == dist.get_process_group_ranks(gcur) == members
    assert dist.get_rank(cur) == rank % 2
    x = rand(rank, 6)
    a, b = x.clone(), x.clone()
    dist.all_reduce(a, group=cur)
    dist.all_reduce(b, group=gcur)
    same(a, b, what="all_reduce vs gloo")
    same(a, ref_sum([rand(r, 6) for r in members]), what="all_reduce vs reference")
    out, gout = [torch.empty(6) for _ in range(2)], [torch.empty(6) for _ in range(2)]
    dist.all_gather(out, x, group=cur)
    dist.all_gather(gout, x, group=gcur)
    for o, go, r in zip(out, gout, members):
        same(o, go, what="all_gather vs gloo")
        same(o, rand(r, 6), what="all_gather vs reference")
    dist.destroy_process_group(cur)
    dist.destroy_process_group(gcur)


def test_split_group(rank, size, gloo_group):
    """dist.split_group (torch 2.13: split_group(parent_pg=None,
    split_ranks=..., timeout=None, pg_options=None, group_desc=None,
    backend=None)): torch refuses it on CPU for every backend (it needs an
    accelerator, or torchcomms, and a default group bound to a device), so
    the test checks that collie's default group and gloo's group are refused
    alike, then skips with the error. Where torch does split, the subgroups
    must be the backend's and compute right."""
    split = [list(range(0, size, 2)), list(range(1, size, 2))] if size > 1 else [[0]]
    errors = []
    for parent in (None, gloo_group):
        try:
            g = dist.split_group(parent_pg=parent, split_ranks=split)
        except (RuntimeError, ValueError) as e:
            errors.append("%s: %s" % (type(e).__name__, e))
            continue
        mine = next(s for s in split if rank in s)
        assert dist.get_process_group_ranks(g) == mine
        if parent is None:
            assert dist.get_backend(g) == BACKEND
        t = rand(rank, 3)
        dist.all_reduce(t, group=g)
        same(t, ref_sum([rand(r, 3) for r in mine]), what="split group all_reduce")
        dist.destroy_process_group(g)
    if errors:
        assert len(errors) == 2 and errors[0] == errors[1], "refused differently: %s" % errors
        pytest.skip("torch %s cannot split_group on CPU, for %s and gloo alike: %s"
                    % (torch.__version__, BACKEND, errors[0]))


@needs_ranks(2)
def test_destroy_and_abort_subgroup(rank, size, world):
    """A subgroup of every rank over the backend and over gloo:
    destroy_process_group(group) frees collie's (later calls on it are
    refused; gloo's still runs them on torch 2.13) and the default group
    goes on. _abort_process_group(group) on rank 0 while its all_reduce
    waits for the others, who never join it: the others then abort the
    group too, and rank 0's wait() raises - collie's from its own abort,
    naming it (gloo's abort does not reach a pending operation: its wait
    fails at the group's 2 s timeout).
    torch forgets an aborted group; the default group and new groups work."""
    from torch.distributed.distributed_c10d import _abort_process_group

    for backend in BACKENDS:
        g = dist.new_group(backend=backend, timeout=PG_TIMEOUT)
        t = torch.ones(2)
        dist.all_reduce(t, group=g)
        same(t, torch.full((2,), float(size)))
        pg = None
        if backend == "collie":
            import collie.torch

            pg = collie.torch.python_group(g)
            assert pg is not None and pg.comm.size == size
        dist.destroy_process_group(g)
        if pg is not None:
            # Its communicator is freed (the backend's shutdown), and a call
            # is refused (torch 2.13's call logger then raises ValueError
            # naming the group).
            assert pg._h is None
            with pytest.raises((ValueError, RuntimeError)):
                dist.all_reduce(t, group=g)
    outcomes = {}
    for backend in BACKENDS:
        g = dist.new_group(backend=backend, timeout=datetime.timedelta(seconds=2))
        t = torch.ones(2)
        dist.all_reduce(t, group=g)  # the group works
        same(t, torch.full((2,), float(size)))
        w = None
        if rank == 0:
            w = dist.all_reduce(torch.ones(3), group=g, async_op=True)
            _abort_process_group(g)
        world.gather(None)  # (the harness's group): rank 0 has aborted
        if rank != 0:
            _abort_process_group(g)
        if w is not None:
            try:
                w.wait()
                outcomes[backend] = "returned"
            except RuntimeError as e:
                outcomes[backend] = "RuntimeError: " + " ".join(str(e).split())[:300]
        world.gather(None)
        with pytest.raises(ValueError):  # torch forgets an aborted group
            dist.all_reduce(t, group=g)
    if rank == 0:
        for backend, o in outcomes.items():
            assert o.startswith("RuntimeError"), "%s: the pending all_reduce %s after the abort" % (backend, o)
        if IS_COLLIE:
            assert re.search("(?i)abort", outcomes[BACKEND]), outcomes[BACKEND]
    for backend in BACKENDS:  # groups made afterwards work
        g = dist.new_group(backend=backend, timeout=PG_TIMEOUT)
        t = torch.ones(2)
        dist.all_reduce(t, group=g)
        same(t, torch.full((2,), float(size)))
        dist.destroy_process_group(g)
    t = torch.ones(2)
    dist.all_reduce(t)
    same(t, torch.full((2,), float(size)))
