"""torch_cuda.py - CUDA tensors through collie's Python paths (issue 21,
item 5; run by scripts/gpu_check.sh under collierun on a GPU machine, every
rank on device 0): collie.torch's backend with torch.distributed's own
calls, the binding's Comm with a CUDA tensor, and a CuPy array through
__cuda_array_interface__ when CuPy is there. Each result is checked against
values computed from the ranks' inputs (small integers: exact). Prints one
line per failure and "torch_cuda: N checks passed"; exit 1 on a failure.

TORCH_CUDA_CHECK_BACKEND=nccl runs the same torch.distributed calls on
torch's own backend="nccl" instead, for libcollie-nccl.so preloaded (issue
39): torch.cuda.nccl.version() must be collie's (2.23), and the calls
NCCL's backend adds (MAX, AVG, premul_sum, reduce, a new_group) are
checked too; the binding's part is skipped.
"""

import os
import sys

import torch
import torch.distributed as dist

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import collie  # noqa: E402
import collie.torch  # noqa: E402,F401

env = os.environ
env.setdefault("RANK", env.get("COLLIE_RANK", "0"))
env.setdefault("WORLD_SIZE", env.get("COLLIE_WORLD_SIZE", "1"))
env.setdefault("MASTER_ADDR", "127.0.0.1")
env.setdefault("MASTER_PORT", "29561")
rank, size = int(env["RANK"]), int(env["WORLD_SIZE"])
dev = torch.device(os.environ.get("TORCH_CUDA_CHECK_DEVICE", "cuda:0"))  # "cpu": a dry run without a GPU
if dev.type == "cuda":
    torch.cuda.set_device(dev)
fails, checks = [], [0]


def check(what, got, want):
    checks[0] += 1
    if not torch.equal(got.cpu(), want.cpu()):
        fails.append(what)
        print("rank %d: FAIL %s: got %s, want %s" % (rank, what, got.flatten()[:6].tolist(),
                                                     want.flatten()[:6].tolist()), flush=True)


def inp(r, n, dtype=torch.float32, shift=0):
    return ((torch.arange(n, dtype=torch.int64) + 3 * r + shift) % 7 + 1).to(dtype)


backend = os.environ.get("TORCH_CUDA_CHECK_BACKEND", "collie")
if backend == "nccl":
    version = torch.cuda.nccl.version()
    checks[0] += 1
    if tuple(version[:2]) != (2, 23):
        fails.append("version")
        print("rank %d: FAIL torch.cuda.nccl.version() = %s: not collie's library (LD_PRELOAD?)" %
              (rank, version), flush=True)
    dist.init_process_group("nccl", device_id=dev)
else:
    dist.init_process_group("collie")
for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int64):
    for n in (1, 1027, 70001):
        t = inp(rank, n, dtype).to(dev)
        dist.all_reduce(t)
        check("all_reduce %s n=%d" % (dtype, n), t, sum(inp(r, n, dtype) for r in range(size)))
n = 4099
t = inp(rank, n).to(dev)
w = dist.all_reduce(t, async_op=True)
w.wait()
check("all_reduce async", t, sum(inp(r, n) for r in range(size)))
for root in range(size):
    t = inp(rank, n).to(dev)
    dist.broadcast(t, src=root)
    check("broadcast root %d" % root, t, inp(root, n))
out = torch.empty(size * n, device=dev)
dist.all_gather_into_tensor(out, inp(rank, n).to(dev))
check("all_gather_into_tensor", out, torch.cat([inp(r, n) for r in range(size)]))
outs = [torch.empty(n, device=dev) for _ in range(size)]
dist.all_gather(outs, inp(rank, n).to(dev))
check("all_gather (list)", torch.cat(outs), torch.cat([inp(r, n) for r in range(size)]))
rs = torch.empty(n, device=dev)
dist.reduce_scatter_tensor(rs, torch.cat([inp(rank, n, shift=q) for q in range(size)]).to(dev))
check("reduce_scatter_tensor", rs, sum(inp(r, n, shift=rank) for r in range(size)))
a2a = torch.empty(size * n, device=dev)
dist.all_to_all_single(a2a, torch.cat([inp(rank, n, shift=10 * q) for q in range(size)]).to(dev))
check("all_to_all_single", a2a, torch.cat([inp(r, n, shift=10 * rank) for r in range(size)]))
# Point to point on CUDA tensors: a ring of isend/irecv, then the same ring
# as one batch_isend_irecv.
if size > 1:
    to, frm = (rank + 1) % size, (rank - 1) % size
    got = torch.zeros(n, device=dev)
    ws = [dist.isend(inp(rank, n).to(dev), to), dist.irecv(got, frm)]
    for w in ws:
        w.wait()
    check("isend/irecv ring", got, inp(frm, n))
    got = torch.zeros(n, device=dev)
    ops = [dist.P2POp(dist.isend, inp(rank, n, shift=5).to(dev), to), dist.P2POp(dist.irecv, got, frm)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    check("batch_isend_irecv ring", got, inp(frm, n, shift=5))
# torch's current stream: a side stream is still busy writing the input when
# all_reduce is called inside it; collie must order its work after that
# stream's (the result would be built from zeros otherwise).
if dev.type == "cuda":
    src = inp(rank, n).to(dev)
    busy = torch.ones(1 << 24, device=dev)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        t = torch.zeros(n, device=dev)
        for _ in range(50):
            busy.mul_(1.000001)
        t.add_(src)
        dist.all_reduce(t)
    side.synchronize()
    check("all_reduce on a busy side stream", t, sum(inp(r, n) for r in range(size)))
    if size > 1:  # the same for a batch_isend_irecv issued inside the side stream
        to, frm = (rank + 1) % size, (rank - 1) % size
        got = torch.zeros(n, device=dev)
        with torch.cuda.stream(side):
            t = torch.zeros(n, device=dev)
            for _ in range(50):
                busy.mul_(1.000001)
            t.add_(src)
            ops = [dist.P2POp(dist.isend, t, to), dist.P2POp(dist.irecv, got, frm)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
        side.synchronize()
        check("batch_isend_irecv on a busy side stream", got, inp(frm, n))
dist.barrier()

if backend == "nccl":
    # What NCCL's backend adds: its other ops, a rooted reduce, a subgroup.
    t = inp(rank, n).to(dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    check("all_reduce max", t, torch.stack([inp(r, n) for r in range(size)]).max(0).values)
    t = (inp(rank, n) * size).to(dev)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    check("all_reduce avg", t, sum(inp(r, n) for r in range(size)))
    t = inp(rank, n).to(dev)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0))
    check("all_reduce premul_sum", t, 2 * sum(inp(r, n) for r in range(size)))
    t = inp(rank, n).to(dev)
    dist.reduce(t, dst=0)
    if rank == 0:
        check("reduce", t, sum(inp(r, n) for r in range(size)))
    evens = dist.new_group([q for q in range(size) if q % 2 == 0])
    if rank % 2 == 0:
        t = inp(rank, n).to(dev)
        dist.all_reduce(t, group=evens)
        check("new_group all_reduce", t, sum(inp(r, n) for r in range(0, size, 2)))
    torch.cuda.synchronize()
    dist.destroy_process_group()
    if rank == 0 or fails:
        print("torch_cuda (backend nccl, collie's library): rank %d of %d: %d checks, %d failed" %
              (rank, size, checks[0], len(fails)))
    sys.exit(1 if fails else 0)

# The binding: a Comm of its own, a CUDA tensor in place.
comm = collie.new_comm(name="cuda_check")
t = inp(rank, n).to(dev)
comm.all_reduce(t)
check("Comm.all_reduce (torch CUDA tensor)", t, sum(inp(r, n) for r in range(size)))
try:
    import cupy
except Exception:  # CuPy is optional
    cupy = None
if cupy is not None:
    with cupy.cuda.Device(0) if dev.type == "cuda" else open(os.devnull):
        a = cupy.asarray(inp(rank, n).numpy())
        comm.all_reduce(a)
        check("Comm.all_reduce (CuPy array)", torch.as_tensor(cupy.asnumpy(a)),
              sum(inp(r, n) for r in range(size)))
comm.destroy()
dist.destroy_process_group()
if rank == 0 or fails:
    print("torch_cuda: rank %d of %d: %d checks, %d failed%s" % (rank, size, checks[0], len(fails),
                                                                 "" if cupy is not None else " (no CuPy)"))
sys.exit(1 if fails else 0)
