"""torch_nccl.py - torch's own backend="nccl" ProcessGroup on collie's NCCL
library (libcollie-nccl.so preloaded; issue 39), every rank on GPU 0, which
NCCL itself refuses ("Duplicate GPU detected"). Run by scripts/gpu_check.sh
under collierun (it sets torchrun's variables):

  LD_PRELOAD=build-dev/nccl/libcollie-nccl.so collierun -n 2 python3 tests/gpu/torch_nccl.py

The collectives of the repository's torch tests, on CUDA tensors, each
checked against values computed from the ranks' inputs (small integers:
exact); torch.cuda.nccl.version() must be collie's (2.23.4). Prints
"torch_nccl: N checks passed"; exit 1 on a failure.
"""

import datetime
import os
import sys

import torch
import torch.distributed as dist

rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
torch.cuda.set_device(0)
dev = torch.device("cuda:0")
fails, checks = [], [0]


def check(what, got, want):
    checks[0] += 1
    if not torch.equal(got.cpu(), want.cpu()):
        fails.append(what)
        print("rank %d: FAIL %s: got %s, want %s" % (rank, what, got.flatten()[:6].tolist(),
                                                     want.flatten()[:6].tolist()), flush=True)


def inp(r, n, dtype=torch.float32):
    return ((torch.arange(n, dtype=torch.int64) + 3 * r) % 7 + 1).to(dtype)


version = torch.cuda.nccl.version()
checks[0] += 1
if tuple(version[:2]) != (2, 23):
    fails.append("version")
    print("rank %d: FAIL torch.cuda.nccl.version() = %s: not collie's library (LD_PRELOAD?)" %
          (rank, version), flush=True)

dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=60), device_id=dev)
n = 1 << 12
for dtype in (torch.float32, torch.bfloat16, torch.int32):
    t = inp(rank, n, dtype).to(dev)
    dist.all_reduce(t)
    check("all_reduce %s" % dtype, t, sum(inp(q, n, dtype) for q in range(size)))
t = inp(rank, n).to(dev)
dist.all_reduce(t, op=dist.ReduceOp.MAX)
check("all_reduce max", t, torch.stack([inp(q, n) for q in range(size)]).max(0).values)
t = (inp(rank, n) * size).to(dev)
dist.all_reduce(t, op=dist.ReduceOp.AVG)
check("all_reduce avg", t, sum(inp(q, n) for q in range(size)))
t = inp(rank, n).to(dev)
dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0))
check("all_reduce premul_sum", t, 2 * sum(inp(q, n) for q in range(size)))
for root in range(size):
    t = inp(rank, n).to(dev)
    dist.broadcast(t, src=root)
    check("broadcast from %d" % root, t, inp(root, n))
out = torch.empty(n * size, device=dev)
dist.all_gather_into_tensor(out, inp(rank, n).to(dev))
check("all_gather_into_tensor", out, torch.cat([inp(q, n) for q in range(size)]))
outs = [torch.empty(n, device=dev) for _ in range(size)]
dist.all_gather(outs, inp(rank, n).to(dev))
check("all_gather", torch.cat(outs), torch.cat([inp(q, n) for q in range(size)]))
rs = torch.empty(n, device=dev)
dist.reduce_scatter_tensor(rs, torch.cat([inp(rank, n) + b for b in range(size)]).to(dev))
check("reduce_scatter_tensor", rs, sum(inp(q, n) + rank for q in range(size)))
a2a = torch.empty(n * size, device=dev)
dist.all_to_all_single(a2a, torch.cat([inp(rank, n) + 10 * b for b in range(size)]).to(dev))
check("all_to_all_single", a2a, torch.cat([inp(q, n) + 10 * rank for q in range(size)]))
t = inp(rank, n).to(dev)
dist.reduce(t, dst=0)
if rank == 0:
    check("reduce", t, sum(inp(q, n) for q in range(size)))
nxt, prv = (rank + 1) % size, (rank - 1) % size
recv = torch.empty(n, device=dev)
reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, inp(rank, n).to(dev), nxt),
                               dist.P2POp(dist.irecv, recv, prv)])
for q in reqs:
    q.wait()
check("batch_isend_irecv ring", recv, inp(prv, n))
if size > 1:
    if rank == 0:
        dist.send(inp(0, n).to(dev), dst=1)
    elif rank == 1:
        r1 = torch.empty(n, device=dev)
        dist.recv(r1, src=0)
        check("send/recv", r1, inp(0, n))
dist.barrier()
evens = dist.new_group([q for q in range(size) if q % 2 == 0])
if rank % 2 == 0:
    t = inp(rank, n).to(dev)
    dist.all_reduce(t, group=evens)
    check("new_group all_reduce", t, sum(inp(q, n) for q in range(0, size, 2)))
work = dist.all_reduce(inp(rank, n).to(dev), async_op=True)
work.wait()
torch.cuda.synchronize()
dist.destroy_process_group()
if fails:
    sys.exit(1)
if rank == 0:
    print("torch_nccl: %d checks passed on %d ranks, one GPU (NCCL %s)" % (checks[0], size, version),
          flush=True)
