"""tests/gpu/cuda_graph.py - CUDA-graph capture of collie's calls on a GPU
(issue 35, item 4; docs/gpu.md, "CUDA graphs"), run by scripts/gpu_check.sh
step cuda_graph at 2 and 4 ranks on one GPU:

    collierun -n 2 python3 tests/gpu/cuda_graph.py

1. torchcomms' Example 6 as written (all_reduce, async_op=True, captured
   in torch.cuda.graph; no wait inside), then allreduce, allgather,
   reduce_scatter, broadcast and a send/recv pair captured into one graph
   and replayed 100 times, each replay's inputs written on the stream
   first and every result checked against a reference computed on the CPU.
2. Replayed latency against the uncaptured call: an 8-byte and a 1 MiB
   allreduce, the median of 200 replays (stream-synchronized) against the
   median of 200 blocking calls.
3. What cannot be captured is refused at capture with collie.Unsupported
   (an all_to_all_single), and work.wait() inside a capture with
   InvalidUsage, the capture left intact (the graph replays right after).

Prints one RESULT line per check; exits 1 on the first wrong result.
"""

import statistics
import sys
import time

import torch

import collie

comm = collie.new_comm("collie", torch.device("cuda"), name="graph_check", timeout=60)
rank, size = comm.get_rank(), comm.get_size()
dev = torch.device("cuda:0")
torch.cuda.set_device(dev)
n = 4096


def check(what, got, want):
    if not torch.equal(got.cpu(), want.cpu()):
        bad = (got.cpu() != want.cpu()).nonzero()[:4].flatten().tolist()
        print("RESULT FAIL rank %d %s: first differing at %s: %s vs %s" % (
            rank, what, bad, got.cpu().flatten()[bad].tolist(), want.cpu().flatten()[bad].tolist()), flush=True)
        sys.exit(1)


def val(r, k, m=n, shift=0):
    return ((torch.arange(m, dtype=torch.float32) + r * 7 + k * 3 + shift) % 11) + 1


# 1a. torchcomms' Example 6, as its guide writes it.
tensor = torch.ones(10, device=dev) * rank
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    work = comm.all_reduce(tensor, collie.ReduceOp.SUM, async_op=True)
for _ in range(10):
    graph.replay()
    torch.cuda.current_stream().synchronize()
# Each replay sums the current contents: after k replays, sum(r) * size^(k-1).
want = torch.full((10,), float(sum(range(size))) * size ** 9, device=dev)
check("example 6 after 10 replays", tensor, want)
print("RESULT ok example6 rank %d" % rank, flush=True)

# 1b. Five calls in one graph, 100 replays against the CPU reference.
a = torch.zeros(n, device=dev)
g = torch.zeros(size * n, device=dev)
rsi = torch.zeros(size * n, device=dev)
rso = torch.zeros(n, device=dev)
b = torch.zeros(n, device=dev)
pp = torch.zeros(n, device=dev)
root = size - 1
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph, stream=s):
    comm.all_reduce(a, collie.ReduceOp.SUM, async_op=True)
    comm.all_gather_single(g, a, async_op=True)
    comm.reduce_scatter_single(rso, rsi, collie.ReduceOp.SUM, async_op=True)
    comm.broadcast(b, root, async_op=True)
    if rank == 0:
        comm.send(pp, 1, async_op=True)
    elif rank == 1:
        comm.recv(pp, 0, async_op=True)
for k in range(100):
    a.copy_(val(rank, k))
    rsi.copy_(torch.cat([val(rank, k, shift=q) for q in range(size)]))
    b.copy_(val(rank, k + 1) if rank == root else torch.full((n,), -1.0))
    pp.copy_(val(0, k + 2) if rank == 0 else torch.full((n,), -1.0))
    graph.replay()
    torch.cuda.current_stream().synchronize()
    total = sum(val(r, k) for r in range(size))
    check("replay %d allreduce" % k, a, total)
    check("replay %d allgather" % k, g, torch.cat([total] * size))
    check("replay %d reduce_scatter" % k, rso, sum(val(r, k, shift=rank) for r in range(size)))
    check("replay %d broadcast" % k, b, val(root, k + 1))
    if rank == 1:
        check("replay %d recv" % k, pp, val(0, k + 2))
print("RESULT ok replays 100 rank %d" % rank, flush=True)


# 2. Replayed latency against the uncaptured call.
def median_us(fn, reps=200):
    for _ in range(10):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(ts)


for nbytes in (8, 1 << 20):
    x = torch.ones(nbytes // 4, device=dev)
    plain = median_us(lambda: (comm.all_reduce(x, collie.ReduceOp.SUM, async_op=False),
                               torch.cuda.current_stream().synchronize()))
    gr = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gr):
        comm.all_reduce(x, collie.ReduceOp.SUM, async_op=True)
    replay = median_us(lambda: (gr.replay(), torch.cuda.current_stream().synchronize()))
    print("RESULT latency rank %d allreduce %d B: uncaptured %.1f us, replayed %.1f us (%.2fx)"
          % (rank, nbytes, plain, replay, plain / replay), flush=True)

# 3. Refusals at capture, the capture intact.
x = torch.ones(size * 4, device=dev)
y = torch.zeros(size * 4, device=dev)
gr = torch.cuda.CUDAGraph()
refused = waited = False
with torch.cuda.graph(gr):
    try:
        comm.all_to_all_single(y, x, async_op=True)
    except collie.Unsupported as e:
        refused = "cannot be captured" in str(e)
    w = comm.all_reduce(x, collie.ReduceOp.SUM, async_op=True)
    try:
        w.wait()
    except collie.InvalidUsage:
        waited = True
x.fill_(1)
gr.replay()
torch.cuda.current_stream().synchronize()
check("replay after the refusals", x, torch.full((size * 4,), float(size), device=dev))
if not (refused and waited):
    print("RESULT FAIL rank %d: refused %s, wait refused %s" % (rank, refused, waited), flush=True)
    sys.exit(1)
print("RESULT ok refusals rank %d" % rank, flush=True)
del graph, gr
comm.finalize()
