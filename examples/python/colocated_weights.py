"""colocated_weights.py - the reinforcement-learning pattern: a trainer
process pushes its updated weights to inference processes that share its
GPU (or its host), through collie, after every training step.

    collierun -n 3 python3 examples/python/colocated_weights.py                 # CPU tensors
    collierun -n 3 python3 examples/python/colocated_weights.py --device cuda   # all on GPU 0

Rank 0 trains; ranks 1.. serve. Each process keeps its weights (a list of
bf16 tensors) as views into one flat buffer, as RL stacks bucket them, so
an update is one broadcast per bucket from the trainer's buffer into
everyone's: on one GPU collie's direct path copies it straight from the
trainer's memory into each server's (CUDA IPC), with no copy of its own
and no host staging. Every server checks every tensor after each update.
Prints the time per update and the bytes per second it reached.
"""

import argparse
import time

from _common import communicator, example_device


def value(step, i):
    """Tensor i's value after training step `step` (small integers: exact in bf16)."""
    return float((step * 7 + i) % 50)


def main(comm=None, device=None, size_mb=8, tensors=16, steps=3, bucket_mb=64):
    import torch

    dev = torch.device(example_device(device))
    if dev.type == "cuda":
        torch.cuda.set_device(0)
        dev = torch.device("cuda:0")
    with communicator(comm, "colocated_weights") as comm:
        rank, size = comm.get_rank(), comm.get_size()
        numel = size_mb * (1 << 20) // 2  # bf16
        sizes = [numel // tensors + (1 if i < numel % tensors else 0) for i in range(tensors)]
        flat = torch.zeros(numel, dtype=torch.bfloat16, device=dev)
        weights = list(flat.split(sizes))  # views: the model's parameters
        per = max(1, bucket_mb * (1 << 20) // 2)
        times, bad = [], []
        for step in range(steps):
            if rank == 0:  # a training step changes every weight
                for i, w in enumerate(weights):
                    w.fill_(value(step, i))
            if dev.type == "cuda":
                torch.cuda.synchronize()
            comm.barrier()
            t0 = time.perf_counter()
            for off in range(0, numel, per):
                comm.broadcast(flat[off:off + per], 0)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            for i, w in enumerate(weights):
                if not bool((w == value(step, i)).all()):
                    bad.append((step, i))
        if bad:
            raise AssertionError("rank %d: weights wrong after (step, tensor) %s" % (rank, bad[:5]))
        best = min(times)
        out = {"updates": steps, "tensors_checked": steps * tensors, "best_s": best,
               "bytes_per_s": numel * 2 / best if best > 0 else 0.0}
        if rank == 0:
            print("colocated_weights: %d MiB in %d bf16 tensors to %d inference process%s on %s: "
                  "%.2f ms an update (best of %d), %.2f GB/s" %
                  (size_mb, tensors, size - 1, "" if size == 2 else "es", dev, best * 1e3, steps,
                   out["bytes_per_s"] / 1e9), flush=True)
        return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="cpu (default) or cuda")
    ap.add_argument("--size-mb", type=int, default=8, help="the weights' size (MiB)")
    ap.add_argument("--tensors", type=int, default=16, help="how many tensors they are")
    ap.add_argument("--steps", type=int, default=3, help="updates pushed")
    ap.add_argument("--bucket-mb", type=int, default=64, help="bytes of one broadcast (MiB)")
    a = ap.parse_args()
    main(device=a.device, size_mb=a.size_mb, tensors=a.tensors, steps=a.steps, bucket_mb=a.bucket_mb)
