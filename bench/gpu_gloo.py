"""torch's Gloo on CUDA tensors, in collie-bench's columns (issue 21, item 7).

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
(collierun does), every rank on cuda:0 (several ranks per GPU, as collie's
device benchmark runs):

    collierun -n 2 python3 bench/gpu_gloo.py [MAX_BYTES] [CSV]

all_reduce, all_gather_into_tensor, reduce_scatter_tensor and broadcast of
float32 tensors from 8 B to MAX_BYTES (default 1 GiB), sizes x8 apart,
sized and timed as nccl-tests and collie-bench do: size is the largest
buffer of a rank, time the mean over a timed loop after warm-up (loops of
about 0.1 s, at least 1 call, each followed by torch.cuda.synchronize so
the time includes the GPU's part), the max over ranks; busbw = algbw x
2(n-1)/n (allreduce), (n-1)/n (allgather, reduce_scatter), 1 (broadcast).
Gloo stages CUDA tensors through host memory. Rank 0 prints the table and
writes the CSV (impl gloo).
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def busbw_factor(coll, n):
    return {"allreduce": 2.0 * (n - 1) / n, "allgather": (n - 1) / n, "reduce_scatter": (n - 1) / n}.get(coll, 1.0)


def main():
    max_bytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 30
    csv_path = sys.argv[2] if len(sys.argv) > 2 else None
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    # GPU_GLOO_DEVICE=cpu: a dry run of the script on a machine without a GPU.
    on_gpu = os.environ.get("GPU_GLOO_DEVICE", "cuda") == "cuda"
    dev = torch.device("cuda", 0) if on_gpu else torch.device("cpu")
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    rows = []
    csv = open(csv_path, "w") if rank == 0 and csv_path else None
    if csv:
        csv.write("impl,collective,algorithm,transport,nranks,bytes,count,time_us,algbw_GBps,busbw_GBps,wrong\n")
    sizes = []
    b = 8
    while b <= max_bytes:
        sizes.append(b)
        b *= 8
    for coll in ("allreduce", "allgather", "reduce_scatter", "broadcast"):
        for size in sizes:
            shared = coll in ("allgather", "reduce_scatter")
            count = size // 4 // n if shared else size // 4
            if count == 0:
                continue
            nbytes = count * 4 * (n if shared else 1)
            if coll == "allreduce":
                t = torch.ones(count, device=dev)
                fn = lambda: dist.all_reduce(t)
            elif coll == "allgather":
                i, o = torch.ones(count, device=dev), torch.empty(count * n, device=dev)
                fn = lambda: dist.all_gather_into_tensor(o, i)
            elif coll == "reduce_scatter":
                i, o = torch.ones(count * n, device=dev), torch.empty(count, device=dev)
                fn = lambda: dist.reduce_scatter_tensor(o, i)
            else:
                t = torch.ones(count, device=dev)
                fn = lambda: dist.broadcast(t, 0)
            try:
                fn()
                sync()
            except Exception as e:  # noqa: BLE001 - a collective Gloo lacks on CUDA
                if rank == 0:
                    print("# gloo %s on CUDA: %s" % (coll, str(e).splitlines()[0]))
                break
            one = time.perf_counter()
            fn()
            sync()
            one = torch.tensor([time.perf_counter() - one])
            dist.all_reduce(one, op=dist.ReduceOp.MAX)  # every rank the same count of calls
            one = one.item()
            iters = max(1, min(2000, int(0.1 / max(one, 1e-6))))
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
                sync()
            us = torch.tensor([(time.perf_counter() - t0) / iters * 1e6])
            dist.all_reduce(us, op=dist.ReduceOp.MAX)
            us = us.item()
            algbw = nbytes / us / 1e3
            rows.append((coll, nbytes, count, us, algbw, algbw * busbw_factor(coll, n)))
            if rank == 0:
                print("%-15s %12d %12d %12.2f %10.3f %10.3f" % rows[-1], flush=True)
            if csv:  # line by line: a run cut short keeps what it measured
                csv.write("gloo,%s,gloo,cuda,%d,%d,%d,%.3f,%.4f,%.4f,0\n" % ((coll, n) + rows[-1][1:]))
                csv.flush()
    if csv:
        csv.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
