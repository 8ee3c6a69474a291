"""colocated_weights.py - issue 39 point 3's benchmark: a trainer pushes
bf16 weights to the inference processes that share its GPU, per update,
three ways, in one run (rank 0 trains; run under collierun, every rank on
GPU 0):

    collierun -n 3 python3 bench/colocated_weights.py [--sizes-mb 100,1000,4000] [--csv F]

- collie: one broadcast of each bucket (--bucket-mb) of the trainer's flat
  weight buffer into every server's (collie's direct path: CUDA IPC, one
  copy per server, no host staging);
- ipc: what RL stacks hand-roll today: the trainer's buffer shared once
  through torch.multiprocessing's CUDA IPC handle (reduce_tensor, sent
  through collie's object broadcast), then per update a barrier and each
  server's copy_ from the shared buffer into its own;
- nccl: torch's backend="nccl" broadcast, only where the NCCL that torch
  loaded allows several ranks per GPU (NCCL_MULTI_RANK_GPU_ENABLE=1, NCCL
  2.30 and later, 2 ranks; else reported as skipped, with the version);
- the copy bound: the trainer copying the buffer within its own process
  (device to device), the bandwidth each way above is compared to.

Each time is the best of --steps updates, the slowest rank's; bytes/s is
the weights' bytes over it. --plain-alloc off makes the buffers with
torch's expandable segments (cuMem allocations), which legacy CUDA IPC
cannot share: collie must then still be right (it checks every server's
weights after every update). --device cpu runs the collie and copy rows
on CPU tensors (a dry run without a GPU).
"""

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes-mb", default="100,1000,4000")
    ap.add_argument("--bucket-mb", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--expandable", action="store_true",
                    help="allocate with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    ap.add_argument("--ways", default="copy,collie,ipc,nccl")
    ap.add_argument("--csv", default=None)
    a = ap.parse_args()
    if a.expandable:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import torch
    import collie

    cuda = a.device == "cuda"
    dev = torch.device("cuda:0" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(0)
    comm = collie.new_comm(name="colocated_bench")
    rank, size = comm.get_rank(), comm.get_size()
    ways = a.ways.split(",")

    def sync():
        if cuda:
            torch.cuda.synchronize()

    from collie import objcol

    def slowest(t):
        every = [None] * size
        objcol.all_gather_object(comm, every, t)
        return max(every)

    rows = []
    for mb in [int(x) for x in a.sizes_mb.split(",")]:
        numel = mb * (1 << 20) // 2
        flat = torch.zeros(numel, dtype=torch.bfloat16, device=dev)
        per = a.bucket_mb * (1 << 20) // 2

        def fill(step):
            if rank == 0:
                flat.fill_(float(step % 50 + 1))

        def check(step, what):
            if rank != 0 and not bool((flat == float(step % 50 + 1)).all()):
                sys.exit("rank %d: %s: weights wrong after update %d" % (rank, what, step))

        def timed(push, what):
            best = None
            for step in range(a.steps):
                fill(step)
                sync()
                comm.barrier()
                t0 = time.perf_counter()
                push()
                sync()
                t = slowest(time.perf_counter() - t0)
                check(step, what)
                best = t if best is None else min(best, t)
            return best

        res = {}
        if "copy" in ways:  # the bound: one device-to-device copy in one process
            other = torch.empty_like(flat)
            best = None
            for _ in range(a.steps):
                sync()
                t0 = time.perf_counter()
                other.copy_(flat)
                sync()
                best = time.perf_counter() - t0 if best is None else min(best, time.perf_counter() - t0)
            res["copy"] = slowest(best)
            del other
        if "collie" in ways:
            def push():
                for off in range(0, numel, per):
                    comm.broadcast(flat[off:off + per], 0)
            res["collie"] = timed(push, "collie")
        if "ipc" in ways and cuda:
            from torch.multiprocessing.reductions import reduce_tensor
            box = [reduce_tensor(flat) if rank == 0 else None]
            # A CUDA IPC handle unpickles to a function call: not weights only.
            objcol.broadcast_object_list(comm, box, 0, weights_only=False)
            shared = flat if rank == 0 else box[0][0](*box[0][1])

            def push():
                comm.barrier()  # the trainer's update is done
                if rank != 0:
                    flat.copy_(shared)
            res["ipc"] = timed(push, "ipc")
            del shared
        if "nccl" in ways and cuda:
            res["nccl"] = nccl_way(torch, flat, numel, size, rank, timed, comm)
        bound = res.get("copy")
        for way, t in res.items():
            if isinstance(t, str):
                rows.append((mb, way, t, "", "", ""))
                continue
            bw = numel * 2 / t
            rows.append((mb, way, "%.3f" % (t * 1e3), "%.2f" % (bw / 1e9),
                         "%.2f" % (bound / t) if bound else "", size - 1))
        del flat
        if cuda:
            torch.cuda.empty_cache()
    if rank == 0:
        print("# colocated weights: 1 trainer, %d inference process(es), %s, bf16, bucket %d MiB%s" %
              (size - 1, torch.cuda.get_device_name(0) if cuda else "cpu", a.bucket_mb,
               ", expandable segments" if a.expandable else ""))
        print("%8s %8s %12s %10s %14s" % ("MiB", "way", "ms/update", "GB/s", "of copy bound"))
        for r in rows:
            print("%8s %8s %12s %10s %14s" % r[:5])
        if a.csv:
            with open(a.csv, "w") as f:
                f.write("mib,way,ms_per_update,gb_per_s,of_copy_bound,servers\n")
                for r in rows:
                    f.write(",".join(str(x) for x in r) + "\n")
    comm.finalize()


def nccl_way(torch, flat, numel, size, rank, timed, comm):
    """torch's nccl broadcast where NCCL takes several ranks per GPU; else why not."""
    import torch.distributed as dist

    v = torch.cuda.nccl.version()
    if size != 2 or tuple(v[:2]) < (2, 30):
        return "skipped: NCCL %s (several ranks on one GPU need 2.30's NCCL_MULTI_RANK_GPU_ENABLE, 2 ranks)" % (
            ".".join(str(x) for x in v))
    os.environ["NCCL_MULTI_RANK_GPU_ENABLE"] = "1"
    os.environ.setdefault("RANK", str(rank))
    os.environ.setdefault("WORLD_SIZE", str(size))
    dist.init_process_group("nccl", device_id=torch.device("cuda:0"))
    try:
        return timed(lambda: dist.broadcast(flat, src=0), "nccl")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
