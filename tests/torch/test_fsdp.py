"""FullyShardedDataParallel on CPU over the backend under test (issue 16,
item 5: "FSDP where the installed torch supports it on CPU"), against a
serial simulation of every rank's step.

FSDP shards each parameter over the ranks: its forward all-gathers the
shards (all_gather_into_tensor), its backward reduce-scatters the gradients
(reduce_scatter_tensor), so a wrong or misordered collective changes the
trained parameters. Two flavours, each where this torch has it:

- FSDP1 (torch.distributed.fsdp.FullyShardedDataParallel), with one unit
  per Linear layer (several all-gathers and reduce-scatters per step);
- FSDP2 (fully_shard, torch >= 2.4) on a CPU device mesh.

Debian's torch 1.13 on Python 3.11 cannot import torch.distributed.fsdp (its
_shard dataclasses fail there): the tests skip with that reason; they run on
torch 2.x (scripts/gpu_check.sh runs this suite on the device machine's
torch 2.11). Tolerance against the simulation, which sums in its own order:
rtol 1e-5, atol 1e-6. The ranks' full parameters must be bit-identical."""

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from conftest import SIZE

STEPS = 3
LR = 0.05

try:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP1
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    FSDP1_WHY = None
except Exception as e:  # torch 1.13 on Python 3.11: the import itself fails
    FSDP1, FSDP1_WHY = None, "torch.distributed.fsdp does not import on this torch: %s" % e

try:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    FSDP2_WHY = None
except Exception as e:
    fully_shard, FSDP2_WHY = None, "FSDP2 (fully_shard, torch >= 2.4) is not in this torch: %s" % e
if fully_shard is not None and not hasattr(torch.cpu.Stream, "record_event"):
    # torch 2.6's FSDP2 records an event on its all-gather stream, which a
    # CPU stream cannot do: it fails so with gloo too.
    fully_shard, FSDP2_WHY = None, "FSDP2 of torch %s cannot run on CPU (torch.cpu.Stream has no record_event)" % (
        torch.__version__)


def make_model():
    torch.manual_seed(4321)
    # 37 and 91 are not multiples of the world size: FSDP pads the shards.
    return nn.Sequential(nn.Linear(13, 37), nn.ReLU(), nn.Linear(37, 91), nn.ReLU(), nn.Linear(91, 5))


def batch(r, step):
    g = torch.Generator().manual_seed(7919 * step + 31 * r)
    return torch.randn(4, 13, generator=g), torch.randn(4, 5, generator=g)


def simulate(size):
    """Each rank's gradient on one model, averaged (as FSDP's reduce-scatter
    of gradients pre-divided by the world size)."""
    model = make_model()
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=LR)
    for step in range(STEPS):
        grads = []
        for r in range(size):
            model.zero_grad(set_to_none=True)
            x, y = batch(r, step)
            F.mse_loss(model(x), y).backward()
            grads.append([p.grad.clone() for p in params])
        for i, p in enumerate(params):
            p.grad = sum(g[i] for g in grads) / size
        opt.step()
    return [p.detach().clone() for p in params]


def check(full):
    ref = simulate(SIZE)
    assert len(full) == len(ref)
    for got, want in zip(full, ref):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # Every rank holds the same parameters, bit for bit.
    flat = torch.cat([p.reshape(-1) for p in full])
    everyone = [torch.empty_like(flat) for _ in range(SIZE)]
    dist.all_gather(everyone, flat)
    for r, other in enumerate(everyone):
        assert torch.equal(other, flat), "rank %d's parameters differ from this rank's" % r


@pytest.mark.skipif(FSDP1 is None, reason=FSDP1_WHY or "")
def test_fsdp1_matches_simulation():
    model = make_model()
    fsdp = FSDP1(model, auto_wrap_policy=ModuleWrapPolicy({nn.Linear}), device_id=torch.device("cpu"),
                 use_orig_params=True)
    opt = torch.optim.SGD(fsdp.parameters(), lr=LR)
    for step in range(STEPS):
        x, y = batch(dist.get_rank(), step)
        F.mse_loss(fsdp(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    with FSDP1.summon_full_params(fsdp):
        full = [p.detach().clone() for p in fsdp.parameters()]
    check(full)


@pytest.mark.skipif(fully_shard is None, reason=FSDP2_WHY or "")
def test_fsdp2_matches_simulation():
    mesh = init_device_mesh("cpu", (SIZE,))
    model = make_model()
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(STEPS):
        x, y = batch(dist.get_rank(), step)
        F.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    full = [p.full_tensor().detach().clone() for p in model.parameters()]
    check(full)
