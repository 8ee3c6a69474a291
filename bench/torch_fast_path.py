"""torch_fast_path.py - collie.torch's C++ fast path against its Python
backend, in one job: two collie groups of the same ranks, one held by torch
as the C++ FastGroup, one as the ProcessGroupCollie alone, taking turns.

    build/collierun -n 2 /usr/bin/python3 bench/torch_fast_path.py
    build/collierun -n 2 /usr/bin/python3 bench/torch_fast_path.py --steps 30

Prints, per group: a blocking 8-byte dist.all_reduce (median of 5 rounds of
--calls calls), an async one waited at once, and the DDP step time
(forward + backward + SGD, slowest rank, median of --steps) of a small MLP
and of a stack of 8 Linear(1024, 1024) (8.4 M parameters). Ratios are
Python/C++ (above 1: the fast path is faster). Needs the fast path built
(docs/torch.md, "The C++ fast path"); exits 2 without it.
"""

import argparse
import copy
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import collie.torch as ct  # noqa: E402
from collie.torch import _fast  # noqa: E402


def python_only_group():
    """A collie group that torch holds as the ProcessGroupCollie itself."""
    saved = _fast._state.get("mod")
    _fast._state["mod"] = None
    try:
        return dist.new_group(backend="collie")
    finally:
        _fast._state["mod"] = saved


def slowest(x):
    t = torch.tensor([x], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def latency(groups, calls, async_wait):
    t = torch.ones(2)
    res = {k: [] for k in groups}
    for _ in range(5):
        for name, g in groups.items():
            dist.barrier(group=g)
            t0 = time.perf_counter()
            if async_wait:
                for _ in range(calls):
                    dist.all_reduce(t, group=g, async_op=True).wait()
            else:
                for _ in range(calls):
                    dist.all_reduce(t, group=g)
            res[name].append(slowest((time.perf_counter() - t0) / calls * 1e6))
    return {k: statistics.median(v) for k, v in res.items()}


def ddp_steps(groups, make, d_in, batch, steps):
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(7)
    base = make()
    runs = {}
    for name, g in groups.items():
        m = DDP(copy.deepcopy(base), process_group=g)
        runs[name] = (m, torch.optim.SGD(m.parameters(), lr=1e-3))
    gen = torch.Generator().manual_seed(11 + dist.get_rank())
    x, y = torch.randn(batch, d_in, generator=gen), torch.randn(batch, d_in, generator=gen)
    times = {k: [] for k in groups}
    for s in range(steps + 3):
        for name in (list(groups) if s % 2 == 0 else list(reversed(list(groups)))):
            m, opt = runs[name]
            dist.barrier(group=groups[name])
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=False)
            torch.nn.functional.mse_loss(m(x), y).backward()
            opt.step()
            if s >= 3:
                times[name].append(slowest(time.perf_counter() - t0))
    params = [list(r[0].parameters()) for r in runs.values()]
    diff = max(float((a - b).abs().max()) for a, b in zip(*params))
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}, diff


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=5000, help="calls per latency round (default 5000)")
    ap.add_argument("--steps", type=int, default=20, help="timed DDP steps (default 20)")
    a = ap.parse_args()
    for k, v in (("RANK", "COLLIE_RANK"), ("WORLD_SIZE", "COLLIE_WORLD_SIZE")):
        os.environ.setdefault(k, os.environ.get(v, "0" if k == "RANK" else "1"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.set_num_threads(1)
    dist.init_process_group("collie")
    if not ct.fast_path_loaded():
        if dist.get_rank() == 0:
            print("torch_fast_path: the C++ fast path is not built/loaded (docs/torch.md)", file=sys.stderr)
        sys.exit(2)
    groups = {"C++": dist.group.WORLD, "Python": python_only_group()}
    me = dist.get_rank() == 0

    def row(label, r, unit, fmt="%.2f"):
        if me:
            print(("%-38s " + fmt + " %s   " + fmt + " %s   %.2fx") % (label, r["C++"], unit, r["Python"], unit,
                                                                     r["Python"] / r["C++"]))

    if me:
        print("# %d ranks, torch %s; C++ fast path vs the Python backend, taking turns" % (dist.get_world_size(),
                                                                                         torch.__version__))
        print("%-38s %-12s %-12s %s" % ("", "C++", "Python", "Python/C++"))
    latency(groups, 200, False)  # warm-up
    row("8 B all_reduce, blocking", latency(groups, a.calls, False), "us")
    row("8 B all_reduce, async + wait", latency(groups, a.calls, True), "us")
    nn = torch.nn
    models = [("DDP step, MLP 0.1 M params", lambda: nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 128)),
               128, 32),
              ("DDP step, 8 x Linear(1024) 8.4 M", lambda: nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(8)]),
               1024, 8)]
    for label, make, d_in, batch in models:
        r, diff = ddp_steps(groups, make, d_in, batch, a.steps)
        row(label, r, "ms")
        if me:
            print("#   largest parameter difference between the two models: %.3g" % diff)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
