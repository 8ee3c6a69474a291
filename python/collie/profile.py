"""collie.profile - the communication profiler for torch.distributed's
backends (gloo, nccl, collie), in the format collie-bench writes for collie:

    srun python3 -m collie.profile --backend nccl
    collierun -n 4 python3 -m collie.profile --backend gloo --csv gloo.csv
    torchrun --nproc-per-node 8 -m collie.profile --backend collie

profiles AllReduce, AllGather and ReduceScatter of 1,048,576, 4,194,304 and
16,777,216 float32 elements per rank (--sizes, --ops widen it) and rank 0
writes profile_{backend}_world{N}_{YYYYmmdd_HHMMSS}.txt (--profile-dir, else
the working directory), printing the same text:

    ================================================================================
    Configuration: World Size=4
    Backend: nccl (torch.distributed)
    ================================================================================

    Tensor Size: 1,048,576 elements (4.00 MB)
      AllReduce:     0.090 ms | AlgBW: 64.78 GB/s | BusBW: 43.19 GB/s

Conventions are collie-bench's (docs/collie-bench.md, "The seed profile"):
the tensor is per rank; AllGather and ReduceScatter move N x ranks elements,
which is their nccl-tests size; time is the slowest rank's mean over the
timed calls after the warm-up ones; MB are MiB. nccl uses CUDA tensors on the
rank's GPU (LOCAL_RANK % device count), the time including the GPU work
(torch.cuda.synchronize before each clock read); the others CPU tensors.
--csv writes collie-bench's columns (impl = the backend), so collie-report
and the plots read both. An operation the backend lacks (gloo 1.13 has no
reduce_scatter) is a line saying so.

Launchers: RANK/WORLD_SIZE (torchrun, collierun), else Slurm's SLURM_PROCID /
SLURM_NTASKS / SLURM_LOCALID; MASTER_ADDR and MASTER_PORT are required (under
srun, set them: the error says how).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from types import ModuleType
from typing import Any, Callable, List, Optional, Tuple

_OPS = {"allreduce": "AllReduce", "allgather": "AllGather", "reduce_scatter": "ReduceScatter"}
_DEFAULT_SIZES = (1048576, 4194304, 16777216)


class ProfileError(Exception):
    pass


def _env_launch() -> Tuple[int, int, int]:
    """(rank, world size, local rank) from torchrun's variables, else Slurm's."""
    env = os.environ
    if env.get("RANK") and env.get("WORLD_SIZE"):
        rank, size = int(env["RANK"]), int(env["WORLD_SIZE"])
        local = int(env.get("LOCAL_RANK", rank))
    elif env.get("SLURM_PROCID") and env.get("SLURM_NTASKS"):
        rank, size = int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"])
        local = int(env.get("SLURM_LOCALID", 0))
        os.environ.setdefault("RANK", str(rank))
        os.environ.setdefault("WORLD_SIZE", str(size))
    else:
        rank, size, local = 0, 1, 0
        os.environ.setdefault("RANK", "0")
        os.environ.setdefault("WORLD_SIZE", "1")
    if not env.get("MASTER_ADDR") or not env.get("MASTER_PORT"):
        if size == 1:
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", "29500")
        else:
            missing = " and ".join(v for v in ("MASTER_ADDR", "MASTER_PORT") if not env.get(v))
            raise ProfileError(
                "%s not set: torch.distributed needs the address and a free port of rank 0's host. Under srun: "
                "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1) "
                "MASTER_PORT=29500; torchrun and collierun set both" % missing
            )
    return rank, size, local


def _args(argv: List[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python3 -m collie.profile", description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", required=True, choices=("gloo", "nccl", "collie"))
    ap.add_argument("--sizes", default=",".join(str(n) for n in _DEFAULT_SIZES),
                    help="elements per rank, comma-separated (default %(default)s)")
    ap.add_argument("--ops", default=",".join(_OPS), help="of %s (default: all)" % ", ".join(_OPS))
    ap.add_argument("-n", "--iters", type=int, default=5, help="timed calls per point (default 5)")
    ap.add_argument("-w", "--warmup", type=int, default=2, help="untimed calls first (default 2)")
    ap.add_argument("--csv", help="also write collie-bench's CSV columns here (rank 0)")
    ap.add_argument("--profile-dir", default=".", help="where the profile file goes (default: here)")
    ap.add_argument("--timeout", type=float, default=600, help="the group's timeout, seconds")
    a = ap.parse_args(argv)
    try:
        a.sizes = [int(x) for x in a.sizes.split(",") if x]
    except ValueError:
        ap.error("--sizes %r: a comma-separated list of element counts" % a.sizes)
    if not a.sizes or any(n <= 0 for n in a.sizes):
        ap.error("--sizes must be element counts > 0")
    a.ops = [o.strip().lower() for o in a.ops.split(",") if o.strip()]
    bad = [o for o in a.ops if o not in _OPS]
    if bad or not a.ops:
        ap.error("--ops %s: the operations are %s" % (",".join(bad) or "(none)", ", ".join(_OPS)))
    if a.iters < 1 or a.warmup < 0:
        ap.error("--iters must be >= 1 and --warmup >= 0")
    return a


def _call(dist: ModuleType, op: str, p: int, inp: Any, out: Any) -> Callable[[], Any]:
    """The call of one operation on inp (and out)."""
    if op == "allreduce":
        return lambda: dist.all_reduce(inp)
    if op == "allgather":
        fn: Any = getattr(dist, "all_gather_into_tensor", None) or getattr(dist, "_all_gather_base", None)
        views = list(out.chunk(p))
        return (lambda: fn(out, inp)) if fn else (lambda: dist.all_gather(views, inp))
    fn = getattr(dist, "reduce_scatter_tensor", None) or getattr(dist, "_reduce_scatter_base", None)
    return lambda: fn(out, inp)


# Every tensor a measurement handed to the backend, kept until the group is
# destroyed: torch 2.6's Gloo can still hold one in a worker thread when
# destroy_process_group joins that thread with the GIL held, and a tensor
# whose last reference the worker drops needs the GIL to free its Python
# object: a deadlock at exit (seen about once in ten runs of this tool).
_KEEP: List[Any] = []


def _measure(torch: ModuleType, dist: ModuleType, op: str, n: int, p: int, dev: Any, warmup: int,
             iters: int) -> Tuple[Optional[float], Any]:
    """(slowest rank's mean seconds per call, wrong elements) or (None, why)."""
    rank = dist.get_rank()
    t_in: Any
    t_out: Any
    if op == "allreduce":
        t_in, t_out = torch.full((n,), float(rank + 1), device=dev), None
    elif op == "allgather":
        t_in, t_out = torch.full((n,), float(rank + 1), device=dev), torch.empty(n * p, device=dev)
    else:
        t_in, t_out = torch.ones(n * p, device=dev), torch.empty(n, device=dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    fn = _call(dist, op, p, t_in, t_out)
    try:
        fn()  # one call whose result is checked
    except (RuntimeError, TypeError) as e:
        if op != "allgather":
            _KEEP.extend((t_in, t_out))
            return None, " ".join(str(e).split()) or type(e).__name__
        views = list(t_out.chunk(p))  # gloo 1.13 has only the list form: views of one tensor
        fn = lambda: dist.all_gather(views, t_in)  # noqa: E731
        fn()
    sync()
    if op == "allreduce":
        wrong = int((t_in != p * (p + 1) / 2).sum())
    elif op == "allgather":
        want = torch.arange(1, p + 1, device=dev, dtype=t_out.dtype).repeat_interleave(n)
        wrong = int((t_out != want).sum())
    else:
        wrong = int((t_out != p).sum())
    for _ in range(warmup):
        fn()
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    mean = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64, device=dev)
    dist.all_reduce(mean, op=dist.ReduceOp.MAX)
    w = torch.tensor([wrong], dtype=torch.int64, device=dev)
    dist.all_reduce(w)
    _KEEP.extend((t_in, t_out, mean, w, fn))  # (fn: the list form's views too)
    return float(mean.item()), int(w.item())


def _mib(nbytes: int) -> str:
    return "%.2f MB" % (nbytes / 1048576.0)


def main(argv: Optional[List[str]] = None) -> int:
    a = _args(sys.argv[1:] if argv is None else argv)
    try:
        rank, size, local = _env_launch()
    except ProfileError as e:
        print("collie.profile: %s" % e, file=sys.stderr)
        return 2
    import torch
    import torch.distributed as dist

    if a.backend == "collie":
        import collie.torch  # noqa: F401 - registers the backend
    if a.backend == "nccl":
        if not torch.cuda.is_available():
            print("collie.profile: --backend nccl needs CUDA, and torch sees no GPU", file=sys.stderr)
            return 2
        dev = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    else:
        dev = torch.device("cpu")
    dist.init_process_group(a.backend, timeout=datetime.timedelta(seconds=a.timeout))
    p = dist.get_world_size()
    lines = ["=" * 80, "Configuration: World Size=%d" % p, "Backend: %s (torch.distributed)" % a.backend, "=" * 80]
    rows = []
    for n in a.sizes:
        lines += ["", "Tensor Size: {:,} elements ({})".format(n, _mib(n * 4))]
        for op in a.ops:
            secs, wrong = _measure(torch, dist, op, n, p, dev, a.warmup, a.iters)
            name = _OPS[op] + ":"
            if secs is None:
                lines.append("  %-14s n/a (%s: %s)" % (name, a.backend, wrong))
                continue
            nbytes = n * 4 * (1 if op == "allreduce" else p)
            algbw = nbytes / secs / 1e9
            busbw = algbw * (2.0 * (p - 1) / p if op == "allreduce" else (p - 1.0) / p) if p > 1 else 0.0
            lines.append("  %-14s %.3f ms | AlgBW: %.2f GB/s | BusBW: %.2f GB/s" % (name, secs * 1e3, algbw, busbw))
            rows.append("%s,%s,-,%s,%d,%d,%d,%.3f,%.4f,%.4f,%d" % (
                a.backend, op, dev.type, p, nbytes, nbytes // 4, secs * 1e6, algbw, busbw, wrong))
    if rank == 0:
        text = "\n".join(lines) + "\n"
        os.makedirs(a.profile_dir, exist_ok=True)
        stamp = datetime.datetime.now().strftime("%Y%m%d_%H%M%S")
        path = os.path.join(a.profile_dir, "profile_%s_world%d_%s.txt" % (a.backend, p, stamp))
        with open(path, "w") as f:
            f.write(text)
        sys.stdout.write(text)
        print("# wrote %s" % path)
        if a.csv:
            with open(a.csv, "w") as f:
                f.write("impl,collective,algorithm,transport,nranks,bytes,count,time_us,algbw_GBps,busbw_GBps,wrong\n")
                f.write("".join(r + "\n" for r in rows))
    dist.barrier()  # type: ignore[no-untyped-call]  # (torch 1.13: unannotated)
    dist.destroy_process_group()
    _KEEP.clear()
    return 1 if any(int(r.rsplit(",", 1)[1]) > 0 for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
