#!/usr/bin/python3
"""torch_compare.py - gloo and collie side by side through torch.distributed, in one job.

    build/collierun -n 2 /usr/bin/python3 bench/torch_compare.py                 # gloo and collie, 8 B .. 64 MiB
    build/collierun -n 2 /usr/bin/python3 bench/torch_compare.py --backends gloo --max 4K
    build/collierun -n 2 /usr/bin/python3 bench/torch_compare.py --latency       # where the microseconds go
    build/collierun -n 4 /usr/bin/python3 bench/torch_compare.py --ddp           # DDP step times
    build-torch2/collierun -n 2 build-torch2/venv/bin/python bench/torch_compare.py --fsdp   # FSDP2 (--tp: TP)
    torchrun --nproc-per-node 2 bench/torch_compare.py ...                       # the same under torchrun
    sh bench/torch_compare.sh build [args]                                       # at 2 and 4 ranks

One launch of N ranks holds two process groups side by side: the default
group (init_process_group) with the first backend of --backends and a
dist.new_group(backend=...) with the second. Every measurement takes turns
between them, so both see the same machine at nearly the same moment (this
VM is shared and its speed moves between minutes: only the ratios of one run
mean something, as in bench/compare.sh and docs/performance.md).

Sweep (the default mode), per operation and size, through torch.distributed:
all_reduce, all_gather (all_gather_into_tensor, or dist._all_gather_base;
a backend without it, like gloo in torch 1.13, falls back to the list
all_gather into views of one tensor, which the header notes),
reduce_scatter (reduce_scatter_tensor / dist._reduce_scatter_base; gloo in
torch 1.13 has none: n/a), broadcast (root 0), all_to_all
(all_to_all_single) and barrier. float32, out of place. Sizes and bus
bandwidth follow nccl-tests (and bench/compare.sh): size = the largest
buffer of one rank (all_gather: the output; reduce_scatter: the input;
all_to_all: a rank's send buffer); busbw = size / time x 2(n-1)/n for
all_reduce, (n-1)/n for all_gather, reduce_scatter and all_to_all, 1 for
broadcast. Per size: warm-up calls, then --rounds rounds in which each
backend runs a timed loop of back-to-back calls (the backends' order
alternates between rounds); a round's time is the slowest rank's mean per
call, and the line shows the median over rounds. The loops are sized to
--time seconds per size and backend (at most --iters calls per round, at
least one), so large sizes run few iterations. Every (op, size, backend) is
checked once after timing with rank-dependent data; a wrong result prints
CORRECTNESS FAILURE and every rank exits 3.

--latency: the per-call cost of a 2-rank 8-byte all_reduce down the layers:
torch.distributed over gloo and over collie, the collie binding's
Comm.all_reduce (collie.torch.get_comm(group)) with the torch tensor and
with a numpy view of it, ctypes straight to collie_allreduce, and a ctypes
call of collie_comm_rank (the floor of any ctypes call). The difference of
two adjacent lines is what that layer costs, except that collie.torch need
not go through Comm.all_reduce (it has a direct path for blocking calls), so
its line may lie below the binding's. The C library's own figure is
build/bench/latency (collierun -n 2 build/bench/latency).

--fsdp, --tp: the same for FSDP2 and tensor parallelism of a GPT-style
model (torch 2.x; bench/torch_steps.py says how).

--ddp: DistributedDataParallel step time (forward + backward + optimizer
step), median over steps of the slowest rank's time, for a small MLP and a
~25 M-parameter stack of Linear layers, one DDP model per backend (same
initial weights, same data) taking alternate steps, plus the same model
without DDP ("local": the compute alone). At the end the two DDP models must
hold the same parameters (up to float rounding); the largest difference is
printed.

Rank 0 prints. Launchers: torchrun (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT) or collierun; until collierun sets RANK and MASTER_* itself,
RANK/WORLD_SIZE come from COLLIE_RANK/COLLIE_WORLD_SIZE, MASTER_ADDR
defaults to 127.0.0.1 and MASTER_PORT to --master-port, the environment, or
a port derived from the job's COLLIE_JOB_TOKEN (the same on every rank).
Without any launcher it runs as one rank.

collie.torch (python/collie/torch/: the "collie" backend of
torch.distributed) is imported only when collie is among --backends.

Exit status: 0; 2 for bad usage or a backend that cannot be set up; 3 for a
wrong result.
"""

import argparse
import contextlib
import copy
import datetime
import hashlib
import importlib.util
import math
import os
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_steps import compare_params, run_fsdp, run_tp, table_header, time_steps  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ME = "torch_compare"

OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "barrier"]
ALIASES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "reducescatter": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "bcast": "broadcast",
    "alltoall": "all_to_all",
    "all_to_all_single": "all_to_all",
}
KNOWN_BACKENDS = ("gloo", "collie")
MIB = 1 << 20


def die(msg, code=2):
    print("%s: %s" % (ME, msg), file=sys.stderr, flush=True)
    sys.exit(code)


def parse_size(text):
    """Bytes from 8, 4K, 64M, 1G (binary suffixes)."""
    t = str(text).strip()
    mult = 1
    if t and t[-1] in "kKmMgG":
        mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[t[-1].lower()]
        t = t[:-1]
    try:
        v = int(t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError("'%s' is not a size (e.g. 8, 4K, 64M)" % text) from None
    if v < 1:
        raise argparse.ArgumentTypeError("'%s' is not a size >= 1" % text)
    return v


def hsize(b):
    if b >= MIB and b % MIB == 0:
        return "%d MiB" % (b // MIB)
    if b >= 1024 and b % 1024 == 0:
        return "%d KiB" % (b // 1024)
    return "%d B" % b


def busfactor(op, n):
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if op == "broadcast":
        return 1.0
    return 0.0


# ---- launcher environment --------------------------------------------------------

def launcher_env(master_port=None):
    """Makes torch's env:// rendezvous work under torchrun, collierun (today:
    COLLIE_* only) or no launcher. Returns a note on where things came from."""
    e = os.environ
    note = "torchrun-style RANK/WORLD_SIZE"
    if "RANK" not in e or "WORLD_SIZE" not in e:
        if "COLLIE_RANK" in e and "COLLIE_WORLD_SIZE" in e:
            e["RANK"], e["WORLD_SIZE"] = e["COLLIE_RANK"], e["COLLIE_WORLD_SIZE"]
            e.setdefault("LOCAL_RANK", e.get("COLLIE_LOCAL_RANK", e["RANK"]))
            e.setdefault("LOCAL_WORLD_SIZE", e.get("COLLIE_LOCAL_SIZE", e["WORLD_SIZE"]))
            note = "COLLIE_RANK/COLLIE_WORLD_SIZE (collierun)"
        else:
            e["RANK"], e["WORLD_SIZE"], e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"] = "0", "1", "0", "1"
            note = "no launcher: one rank"
    e.setdefault("MASTER_ADDR", "127.0.0.1")
    if master_port:
        e["MASTER_PORT"] = str(master_port)
    elif not e.get("MASTER_PORT"):
        token = e.get("COLLIE_JOB_TOKEN") or e.get("COLLIE_STORE")
        if token:
            # The same on every rank of the job; below the kernel's ephemeral range.
            e["MASTER_PORT"] = str(20000 + int(hashlib.sha256(token.encode()).hexdigest()[:8], 16) % 10000)
            note += ", MASTER_PORT %s derived from the job token" % e["MASTER_PORT"]
        elif e["WORLD_SIZE"] == "1":
            with socket.socket() as s:
                s.bind((e["MASTER_ADDR"], 0))
                e["MASTER_PORT"] = str(s.getsockname()[1])
        else:
            die("MASTER_PORT is not set: pass --master-port PORT (the same on every rank) or set MASTER_PORT")
    return note


def import_collie_torch():
    """import collie.torch (from this tree when collie is not installed), or
    exit with a message saying what failed. Every rank decides alone and
    alike, before any rendezvous, so no rank is left waiting."""
    if importlib.util.find_spec("collie") is None:
        sys.path.insert(0, os.path.join(ROOT, "python"))
    try:
        import collie
        import collie.torch  # noqa: F401  (registers the "collie" backend)
    except Exception as exc:  # ImportError, LibraryNotFound, anything its import raises
        if os.environ.get("RANK", "0") == "0":
            die("--backends includes collie, but 'import collie.torch' failed: %s: %s\n"
                "  collie.torch (python/collie/torch/) is collie's torch.distributed backend; "
                "until it imports, run with --backends gloo" % (type(exc).__name__, exc))
        sys.exit(2)
    return collie


# ---- the job -----------------------------------------------------------------------

class Job:
    """The process groups, one per backend, and the control operations."""

    def __init__(self, args, torch, dist):
        self.args, self.torch, self.dist = args, torch, dist
        td = datetime.timedelta(seconds=args.timeout)
        first = args.backends[0]
        dist.init_process_group(first, init_method="env://", timeout=td)
        self.rank, self.n = dist.get_rank(), dist.get_world_size()
        self.groups = {first: dist.group.WORLD}
        for b in args.backends[1:]:
            self.groups[b] = dist.new_group(backend=b, timeout=td)
        self.collie = None

    def out(self, line=""):
        if self.rank == 0:
            print(line, flush=True)

    def note(self, line):
        if self.rank == 0:
            print("# " + line, flush=True)

    def maxall(self, values):
        """Element-wise max over ranks (on the default group, outside any timing)."""
        t = self.torch.tensor(values, dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return t.tolist()

    def barrier(self, backend):
        self.dist.barrier(group=self.groups[backend])


# ---- sweep ---------------------------------------------------------------------

class Point:
    """One (op, size): the tensors (shared by the backends) and, per backend,
    the call and its check."""

    def __init__(self, job, op, nbytes, variants):
        torch, dist = job.torch, job.dist
        n, rank = job.n, job.rank
        self.op = op
        tot = nbytes // 4
        if op == "barrier":
            self.actual, cnt = 0, 0
        elif op in ("all_reduce", "broadcast"):
            cnt = tot
            self.actual = cnt * 4
        else:
            cnt = tot // n
            self.actual = cnt * n * 4
        self.skip = op != "barrier" and cnt == 0
        if self.skip:
            return
        self.calls, self.checks = {}, {}
        ar = torch.arange(max(cnt * n, 1), dtype=torch.int64)
        for b, g in job.groups.items():
            v = variants.get((op, b))
            if v is None:
                continue
            self.calls[b], self.checks[b] = self._make(torch, dist, op, v, g, ar, cnt, n, rank)

    def _make(self, torch, dist, op, v, g, ar, cnt, n, rank):
        # The tensors are made once per point (see _tensors) and shared.
        t = self._tensors(torch, op, ar, cnt, n, rank)
        if op == "all_reduce":
            buf, inp, want = t

            def call():
                dist.all_reduce(buf, group=g)

            def check():
                buf.copy_(inp)
                dist.all_reduce(buf, group=g)
                ok = torch.equal(buf, want)
                buf.zero_()  # timing runs on zeros: sums stay finite
                return ok
        elif op == "broadcast":
            buf, src = t

            def call():
                dist.broadcast(buf, src=0, group=g)

            def check():
                if rank != 0:
                    buf.fill_(-1.0)
                dist.broadcast(buf, src=0, group=g)
                return torch.equal(buf, src)
        elif op in ("all_gather", "reduce_scatter", "all_to_all"):
            inp, outt, want = t
            if op == "all_to_all":

                def call():
                    dist.all_to_all_single(outt, inp, group=g)
            elif v == "list" and op == "all_gather":
                views = list(outt.chunk(n))

                def call():
                    dist.all_gather(views, inp, group=g)
            elif v == "list":
                chunks = list(inp.chunk(n))

                def call():
                    dist.reduce_scatter(outt, chunks, group=g)
            else:
                fn = getattr(dist, v)

                def call():
                    fn(outt, inp, group=g)

            def check():
                outt.fill_(-1.0)
                call()
                return torch.equal(outt, want)
        else:  # barrier

            def call():
                dist.barrier(group=g)

            def check():
                dist.barrier(group=g)
                return True
        return call, check

    def _tensors(self, torch, op, ar, cnt, n, rank):
        if getattr(self, "_t", None) is not None:
            return self._t
        f32 = torch.float32
        if op == "all_reduce":
            t = (torch.zeros(cnt), (rank + 1 + ar[:cnt] % 7).to(f32), (n * (n + 1) // 2 + n * (ar[:cnt] % 7)).to(f32))
        elif op == "broadcast":
            src = (1 + ar[:cnt] % 11).to(f32)
            t = (src.clone() if rank == 0 else torch.full((cnt,), -1.0), src)
        elif op == "all_gather":
            t = ((rank * 1000 + ar[:cnt] % 97).to(f32), torch.full((cnt * n,), -1.0),
                 torch.cat([(r * 1000 + ar[:cnt] % 97).to(f32) for r in range(n)]))
        elif op == "reduce_scatter":
            blk = ar[rank * cnt:(rank + 1) * cnt]
            t = ((rank + 1 + ar[:cnt * n] % 13).to(f32), torch.full((cnt,), -1.0),
                 (n * (n + 1) // 2 + n * (blk % 13)).to(f32))
        elif op == "all_to_all":
            a = ar[:cnt * n]
            s, j = a // cnt, a % cnt
            t = ((rank * 100 + a // cnt + 10000 * (a % 5)).to(f32), torch.full((cnt * n,), -1.0),
                 (s * 100 + rank + 10000 * ((rank * cnt + j) % 5)).to(f32))
        else:
            t = ()
        self._t = t
        return t


def probe_variants(job, ops):
    """{(op, backend): variant or None (unsupported)}: each backend's way of
    doing each op, tried once with a tiny tensor. The ranks must agree."""
    torch, dist, n = job.torch, job.dist, job.n
    tensor_fn = {
        "all_gather": [f for f in ("all_gather_into_tensor", "_all_gather_base") if hasattr(dist, f)] + ["list"],
        "reduce_scatter": [f for f in ("reduce_scatter_tensor", "_reduce_scatter_base") if hasattr(dist, f)] + ["list"],
    }
    variants, notes = {}, []
    for b, g in job.groups.items():
        for op in ops:
            if op not in tensor_fn:
                variants[(op, b)] = op
                continue
            chosen, why = None, []
            for v in tensor_fn[op]:
                inp = torch.ones(n if op == "reduce_scatter" else 1)
                outt = torch.zeros(1 if op == "reduce_scatter" else n)
                try:
                    if v == "list" and op == "all_gather":
                        dist.all_gather(list(outt.chunk(n)), inp, group=g)
                    elif v == "list":
                        dist.reduce_scatter(outt, list(inp.chunk(n)), group=g)
                    else:
                        getattr(dist, v)(outt, inp, group=g)
                    chosen = v
                    break
                except (RuntimeError, NotImplementedError, AttributeError, ValueError) as exc:
                    why.append("%s: %s" % (v, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
            agree = job.maxall([0.0 if chosen is None else 1.0 + tensor_fn[op].index(chosen),
                                -(0.0 if chosen is None else 1.0 + tensor_fn[op].index(chosen))])
            if agree[0] != -agree[1]:
                die("%s %s: the ranks chose different variants; cannot go on" % (b, op))
            variants[(op, b)] = chosen
            if chosen is None:
                notes.append("%s %s: n/a (%s)" % (b, op, "; ".join(why)))
            elif chosen == "list":
                notes.append("%s %s: the list form %s (%s)" % (
                    b, op, "dist.%s into views of one tensor" % op, "; ".join(why)))
            else:
                notes.append("%s %s: dist.%s" % (b, op, chosen))
            job.barrier(b)
    return variants, notes


def sizes_of(lo, hi, factor):
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    if out and out[-1] != hi:
        out.append(hi)  # the sweep always ends with --max itself
    return out


def run_sweep(job, csv):
    a, n = job.args, job.n
    backends = a.backends
    variants, notes = probe_variants(job, a.ops)
    for line in notes:
        job.note(line)
    job.note("time: slowest rank's mean per call, median of %d rounds (us); busbw GB/s (nccl-tests' factors)"
             % a.rounds)
    head = "%-15s %10s" % ("op", "bytes") + "".join(" %11s" % (b + "_us") for b in backends)
    head += "".join(" %13s" % (b + "_busbw") for b in backends)
    pair = "gloo" in backends and "collie" in backends
    if pair:
        head += " %12s" % "gloo/collie"
    job.out(head)
    if csv:
        csv.write("impl,collective,nranks,bytes,time_us,algbw_GBps,busbw_GBps,time_min_us,time_max_us,"
                  "iters,rounds,variant\n")
    ratios = {}
    for op in a.ops:
        sizes = [0] if op == "barrier" else sizes_of(a.min, a.max, a.factor)
        for nbytes in sizes:
            pt = Point(job, op, nbytes, variants)
            if pt.skip:
                continue
            res = measure(job, pt, first=nbytes == sizes[0])
            line = "%-15s %10d" % (op, pt.actual)
            for b in backends:
                line += " %11s" % ("n/a" if b not in res else "%.2f" % (res[b][0] * 1e6))
            for b in backends:
                if b not in res or op == "barrier":
                    line += " %13s" % ("n/a" if b not in res else "-")
                else:
                    line += " %13.4f" % (pt.actual / res[b][0] / 1e9 * busfactor(op, n))
            if pair:
                if "gloo" in res and "collie" in res:
                    r = res["gloo"][0] / res["collie"][0]
                    ratios.setdefault(op, []).append(r)
                    line += " %11.2fx" % r
                else:
                    line += " %12s" % "n/a"
            job.out(line)
            if csv:
                for b in backends:
                    if b not in res:
                        csv.write("%s,%s,%d,%d,NA,NA,NA,NA,NA,0,0,unsupported\n" % (b, op, n, pt.actual))
                        continue
                    med, lo, hi, iters = res[b]
                    algbw = pt.actual / med / 1e9 if pt.actual else 0.0
                    csv.write("%s,%s,%d,%d,%.3f,%.4f,%.4f,%.3f,%.3f,%d,%d,%s\n" % (
                        b, op, n, pt.actual, med * 1e6, algbw, algbw * busfactor(op, n), lo * 1e6, hi * 1e6,
                        iters, a.rounds, variants[(op, b)]))
                csv.flush()
    if pair and ratios:
        job.out()
        job.note("gloo/collie, geometric mean over sizes (above 1: collie faster)")
        for op, rs in ratios.items():
            gm = math.exp(sum(math.log(r) for r in rs) / len(rs))
            job.out("%-15s %6.2fx   (%d sizes, %.2fx .. %.2fx)" % (op, gm, len(rs), min(rs), max(rs)))


# Untimed calls before an op's first size: its first calls pay for what the
# later sizes find ready (page faults, lazy set-up, caches); 4-rank sweeps
# read their first point slower than the next (docs/performance.md), though
# at 4 ranks on 2 cores the noise between points is as large.
FIRST_POINT_WARMUP = 100


def measure(job, pt, first=False):
    """{backend: (median, min, max seconds per call over rounds, iterations
    per round)} for one point (first: an op's first size, warmed up longer);
    exits 3 on a wrong result."""
    a = job.args
    bs = list(pt.calls)
    if not bs:
        return {}
    warm = a.warmup if pt.actual <= MIB else min(a.warmup, 2)
    if first and pt.actual <= MIB and a.warmup > 0:
        warm = max(warm, FIRST_POINT_WARMUP)
    warm = max(warm, 1)
    est = []
    for b in bs:
        call = pt.calls[b]
        job.barrier(b)
        for _ in range(warm - warm // 2):  # untimed: first-call costs
            call()
        k = max(warm // 2, 1)
        t0 = time.perf_counter()
        for _ in range(k):
            call()
        est.append((time.perf_counter() - t0) / k)
    est = job.maxall(est)
    per_round = a.time / a.rounds
    iters = [max(1, min(a.iters, int(per_round / max(e, 1e-9)))) for e in est]
    times = [[0.0] * len(bs) for _ in range(a.rounds)]
    for r in range(a.rounds):
        order = range(len(bs)) if r % 2 == 0 else reversed(range(len(bs)))
        for i in order:
            call, it = pt.calls[bs[i]], iters[i]
            job.barrier(bs[i])
            t0 = time.perf_counter()
            for _ in range(it):
                call()
            times[r][i] = (time.perf_counter() - t0) / it
    flat = job.maxall([t for row in times for t in row])
    bad = job.maxall([0.0 if pt.checks[b]() else 1.0 for b in bs])
    if any(bad):
        wrong = [b for b, x in zip(bs, bad) if x]
        if job.rank == 0:
            print("CORRECTNESS FAILURE: %s %s bytes %d: wrong result on some rank" % (
                ",".join(wrong), pt.op, pt.actual), file=sys.stderr, flush=True)
        sys.exit(3)
    out = {}
    for i, b in enumerate(bs):
        col = [flat[r * len(bs) + i] for r in range(a.rounds)]
        out[b] = (statistics.median(col), min(col), max(col), iters[i])
    return out


# ---- latency -------------------------------------------------------------------

def run_latency(job, csv):
    a, torch, dist = job.args, job.torch, job.dist
    if job.n != 2:
        job.note("--latency is meant for 2 ranks; this job has %d" % job.n)
    paths = []  # (name, backend whose group the barrier uses, call, check)
    t = torch.zeros(2)  # 8 bytes of float32

    def check_sum(buf, run):
        def check():
            buf.fill_(float(job.rank + 1))
            run()
            return bool((buf == job.n * (job.n + 1) / 2).all())
        return check

    for b in ("gloo", "collie"):
        if b in job.groups:
            g = job.groups[b]
            paths.append(("torch.distributed %s" % b, b, (lambda g=g: dist.all_reduce(t, group=g)),
                          check_sum(t, lambda g=g: dist.all_reduce(t, group=g))))
    missing = []
    if "collie" in job.groups:
        import ctypes

        collie = job.collie
        get_comm = getattr(getattr(collie, "torch", None), "get_comm", None)
        if get_comm is None:
            missing.append("collie.torch.get_comm(group) is missing: the binding and ctypes lines need it")
        else:
            comm = get_comm(job.groups["collie"])
            from collie import _lib

            L = _lib.lib()
            h = ctypes.c_void_p(comm.handle)
            f32 = [name for name, _, _ in _lib.DTYPES].index("float32")
            op_sum = int(collie.ReduceOp.SUM)
            arr = t.numpy()  # the same memory, as numpy
            ptr = t.data_ptr()
            fn, fn_rank = L.collie_allreduce, L.collie_comm_rank

            def c_allreduce():
                rc = fn(h, ptr, ptr, 2, f32, op_sum, None, None)
                if rc:
                    raise RuntimeError("collie_allreduce returned %d" % rc)

            paths += [
                ("binding Comm.all_reduce(torch)", "collie", (lambda: comm.all_reduce(t)),
                 check_sum(t, lambda: comm.all_reduce(t))),
                ("binding Comm.all_reduce(numpy)", "collie", (lambda: comm.all_reduce(arr)),
                 check_sum(t, lambda: comm.all_reduce(arr))),
                ("ctypes collie_allreduce", "collie", c_allreduce, check_sum(t, c_allreduce)),
                ("ctypes collie_comm_rank (no-op)", "collie", (lambda: fn_rank(h)), None),
            ]
    for m in missing:
        job.note(m)
    iters = a.iters
    warm = a.warmup
    names = [p[0] for p in paths]
    for _, b, call, _ in paths:
        job.barrier(b)
        for _ in range(warm):
            call()
    times = [[0.0] * len(paths) for _ in range(a.rounds)]
    for r in range(a.rounds):
        order = range(len(paths)) if r % 2 == 0 else reversed(range(len(paths)))
        for i in order:
            _, b, call, _ = paths[i]
            job.barrier(b)
            t0 = time.perf_counter()
            for _ in range(iters):
                call()
            times[r][i] = (time.perf_counter() - t0) / iters
    flat = job.maxall([x for row in times for x in row])
    bad = job.maxall([0.0 if (chk is None or chk()) else 1.0 for _, _, _, chk in paths])
    if any(bad):
        if job.rank == 0:
            print("CORRECTNESS FAILURE: %s" % ", ".join(nm for nm, x in zip(names, bad) if x),
                  file=sys.stderr, flush=True)
        sys.exit(3)
    med = []
    job.note("8-byte float32 all_reduce (in place), %d ranks: slowest rank's mean per call over %d calls, "
             "median of %d rounds" % (job.n, iters, a.rounds))
    job.out("%-34s %10s %10s %10s  %s" % ("path", "us/call", "min", "max", "above the line below"))
    if csv:
        csv.write("path,nranks,bytes,time_us,time_min_us,time_max_us,iters,rounds\n")
    for i, nm in enumerate(names):
        col = [flat[r * len(paths) + i] for r in range(a.rounds)]
        med.append((statistics.median(col), min(col), max(col)))
    for i, nm in enumerate(names):
        m, lo, hi = med[i]
        # The collie paths go down the layers: each line minus the next is one layer's cost.
        delta = ""
        if i + 1 < len(names) and nm != "torch.distributed gloo":
            delta = "%+.2f" % ((m - med[i + 1][0]) * 1e6)
        job.out("%-34s %10.2f %10.2f %10.2f  %s" % (nm, m * 1e6, lo * 1e6, hi * 1e6, delta))
        if csv:
            csv.write('"%s",%d,%d,%.4f,%.4f,%.4f,%d,%d\n' % (nm, job.n, 0 if "no-op" in nm else 8,
                                                           m * 1e6, lo * 1e6, hi * 1e6, iters, a.rounds))
    if "torch.distributed gloo" in names and "torch.distributed collie" in names:
        g, c = med[names.index("torch.distributed gloo")][0], med[names.index("torch.distributed collie")][0]
        job.out()
        job.note("torch.distributed: gloo/collie %.2fx" % (g / c))
    if "ctypes collie_allreduce" in names:
        job.note("the C library's own figure for the same call: collierun -n 2 build/bench/latency")


# ---- DDP -------------------------------------------------------------------------

def ddp_models(torch, which):
    nn = torch.nn
    out = []
    for name in which:
        if name == "mlp":
            # ~0.1 M parameters: 128 -> 256 -> 256 -> 10.
            d_in, batch = 128, 32
            make = (lambda: nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                                          nn.Linear(256, 10)))
            d_out = 10
        elif name == "25m":
            # 8 x Linear(1792, 1792): 25.7 M parameters, 103 MB of float32 gradients per step.
            d, batch = 1792, 8
            d_in = d_out = d

            def make(d=d):
                layers = []
                for i in range(8):
                    layers.append(nn.Linear(d, d))
                    if i < 7:
                        layers.append(nn.ReLU())
                return nn.Sequential(*layers)
        else:
            die("--ddp-models: unknown model '%s' (known: mlp, 25m)" % name)
        out.append((name, make, d_in, d_out, batch))
    return out


def run_ddp(job, csv):
    a, torch = job.args, job.torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    table_header(job, csv, "DDP's gradient all_reduce")
    for name, make, d_in, d_out, batch in ddp_models(torch, a.ddp_models):
        torch.manual_seed(1234)
        base = make()
        nparams = sum(p.numel() for p in base.parameters())
        runs = []  # (label, module, optimizer, group backend or None)
        for b in a.backends:
            m = copy.deepcopy(base)
            ddp = DDP(m, process_group=job.groups[b], bucket_cap_mb=a.bucket_mb)
            runs.append((b, ddp, torch.optim.SGD(ddp.parameters(), lr=1e-3), b))
        m = copy.deepcopy(base)
        runs.append(("local", m, torch.optim.SGD(m.parameters(), lr=1e-3), None))
        gen = torch.Generator().manual_seed(99 + job.rank)
        data = [(torch.randn(batch, d_in, generator=gen), torch.randn(batch, d_out, generator=gen)) for _ in range(4)]
        loss_fn = torch.nn.MSELoss()
        time_steps(job, csv, name, nparams, batch, runs, data, lambda mod, xy: loss_fn(mod(xy[0]), xy[1]))
        if len(a.backends) == 2:
            compare_params(job, name, a.warmup + a.iters, runs[0], runs[1])
        del runs
        if len(a.ddp_models) > 1:
            job.out()


# ---- main ------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="torch_compare.py",
        description="gloo and collie side by side through torch.distributed, in one job (rank 0 prints).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run under collierun or torchrun, e.g. build/collierun -n 2 /usr/bin/python3 bench/torch_compare.py. "
               "The module's docstring explains the conventions.")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--latency", action="store_true",
                      help="per-call cost of an 8-byte all_reduce through torch.distributed, the collie binding "
                           "and ctypes")
    mode.add_argument("--ddp", action="store_true", help="DistributedDataParallel step time per backend")
    mode.add_argument("--fsdp", action="store_true",
                      help="FSDP2 (fully_shard) step time of a GPT-style model per backend (torch 2.x)")
    mode.add_argument("--tp", action="store_true",
                      help="tensor-parallel (parallelize_module) step time of a GPT-style model per backend "
                           "(torch 2.x)")
    ap.add_argument("--backends", default="gloo,collie",
                    help="comma separated, one or two of gloo, collie (default gloo,collie); the first is the "
                         "default group's, the second a dist.new_group's")
    ap.add_argument("--ops", default=",".join(OPS),
                    help="sweep: comma separated, or 'all' (default all: %s)" % ",".join(OPS))
    ap.add_argument("--min", type=parse_size, default=8, help="sweep: smallest size in bytes (default 8; K/M/G)")
    ap.add_argument("--max", type=parse_size, default=64 * MIB,
                    help="sweep: largest size (default 64M); always measured")
    ap.add_argument("--factor", type=int, default=4, help="sweep: size step factor, an integer >= 2 (default 4)")
    ap.add_argument("--iters", type=int, default=None,
                    help="sweep: most timed calls per round (default 1000; fewer at large sizes, see --time); "
                         "--latency: calls per round (default 2000); --ddp: timed steps (default 10)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="warm-up calls (sweep 6, 2 above 1 MiB, 100 before an op's first size; --latency 200) or steps (--ddp 3)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="timed rounds, the backends taking turns; the median is shown (default 5)")
    ap.add_argument("--time", type=float, default=0.2,
                    help="sweep: seconds of timed calls per (op, size, backend), all rounds together (default 0.2)")
    ap.add_argument("--ddp-models", default="mlp,25m", help="--ddp: models, of mlp and 25m (default both)")
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="--ddp: DDP bucket_cap_mb (default 25)")
    ap.add_argument("--gpt-dim", type=int, default=384,
                    help="--fsdp/--tp: the GPT model's width (default 384: 13.7 M parameters with 6 layers)")
    ap.add_argument("--gpt-layers", type=int, default=6, help="--fsdp/--tp: the GPT model's blocks (default 6)")
    ap.add_argument("--gpt-batch", type=int, default=4,
                    help="--fsdp/--tp: sequences of 64 tokens per rank and step (default 4)")
    ap.add_argument("--csv", help="also write the results as CSV to this file (rank 0); {n} becomes the rank count")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads per rank (default OMP_NUM_THREADS, else 1)")
    ap.add_argument("--master-port", type=int, default=None,
                    help="MASTER_PORT when the launcher sets none (collierun today)")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="seconds before a collective or the rendezvous gives up (default 600)")
    a = ap.parse_args(argv)

    a.backends = [b.strip() for b in a.backends.split(",") if b.strip()]
    if not a.backends or len(a.backends) > 2 or len(set(a.backends)) != len(a.backends):
        ap.error("--backends: give one or two different backends, e.g. gloo,collie")
    for b in a.backends:
        if b not in KNOWN_BACKENDS:
            ap.error("--backends: unknown backend '%s' (known: %s)" % (b, ", ".join(KNOWN_BACKENDS)))
    ops = OPS if a.ops.strip() == "all" else []
    if not ops:
        for o in a.ops.split(","):
            o = ALIASES.get(o.strip(), o.strip())
            if not o:
                continue
            if o not in OPS:
                ap.error("--ops: unknown operation '%s' (known: %s)" % (o, ", ".join(OPS)))
            if o not in ops:
                ops.append(o)
    if not ops:
        ap.error("--ops: no operation given")
    a.ops = ops
    if a.min > a.max:
        ap.error("--min %d is larger than --max %d" % (a.min, a.max))
    if a.max > 1 << 30:
        ap.error("--max: above 1G")
    if a.factor < 2:
        ap.error("--factor: %d is not an integer >= 2" % a.factor)
    steps = a.ddp or a.fsdp or a.tp
    if a.iters is None:
        a.iters = 2000 if a.latency else (10 if steps else 1000)
    if a.warmup is None:
        a.warmup = 200 if a.latency else (3 if steps else 6)
    if (a.fsdp or a.tp) and (a.gpt_dim < 8 or a.gpt_dim % 8 or a.gpt_layers < 1 or a.gpt_batch < 1):
        ap.error("--gpt-dim must be a multiple of 8 (the heads), --gpt-layers and --gpt-batch >= 1")
    if a.iters < 1 or a.warmup < 0 or a.rounds < 1:
        ap.error("--iters and --rounds must be >= 1, --warmup >= 0")
    if a.time <= 0:
        ap.error("--time must be > 0")
    a.ddp_models = [m.strip() for m in a.ddp_models.split(",") if m.strip()]
    if a.ddp and (not a.ddp_models or any(m not in ("mlp", "25m") for m in a.ddp_models)):
        ap.error("--ddp-models: give mlp, 25m or both")
    return a


def git_rev():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=5).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    where = launcher_env(a.master_port)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    # collie-bench's choice too: a benchmark marks no steps, so no comms.csv.
    os.environ.setdefault("COLLIE_COMMS_LOG", "0")
    collie = import_collie_torch() if "collie" in a.backends else None

    import torch
    import torch.distributed as dist

    threads = a.threads or int(os.environ.get("OMP_NUM_THREADS") or 1)
    torch.set_num_threads(threads)
    job = Job(a, torch, dist)
    job.collie = collie
    mode = next(m for m in ("latency", "ddp", "fsdp", "tp", "sweep") if m == "sweep" or getattr(a, m))
    job.note("torch_compare %s: torch %s, %d ranks (%s), %d torch thread(s) per rank, git %s, load %s" % (
        mode, torch.__version__, job.n, where, threads, git_rev(), loadavg()))
    job.note("default group: %s%s" % (a.backends[0], "; dist.new_group: %s" % a.backends[1] if len(a.backends) > 1
                                      else ""))
    if collie is not None:
        job.note("collie: %s (library %s)" % (os.path.dirname(collie.__file__), collie.library_path()))
    csv = None
    if a.csv and job.rank == 0:
        csv = open(a.csv.replace("{n}", str(job.n)), "w")
    t0 = time.time()
    try:
        with csv if csv is not None else contextlib.nullcontext():
            if a.latency:
                run_latency(job, csv)
            elif a.ddp:
                run_ddp(job, csv)
            elif a.fsdp:
                run_fsdp(job, csv)
            elif a.tp:
                run_tp(job, csv)
            else:
                run_sweep(job, csv)
        job.note("done in %.1f s, load %s" % (time.time() - t0, loadavg()))
        dist.barrier()
    finally:
        # The new group first, then the default one.
        for b in a.backends[1:]:
            with contextlib.suppress(Exception):
                dist.destroy_process_group(job.groups[b])
        with contextlib.suppress(Exception):
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
