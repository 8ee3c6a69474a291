#!/usr/bin/env python3
"""torchcomms' quick start (a synchronous AllReduce), on collie.

The one change from torchcomms: `from collie import ...` in place of
`from torchcomms import ...` (and CPU tensors on a machine without GPUs).
Run: collierun -n 2 python3 ex1_allreduce_sync.py
"""
import torch

from collie import ReduceOp, new_comm


def main() -> None:
    device = torch.device("cpu")
    torchcomm = new_comm("collie", device, name="main_comm")

    rank = torchcomm.get_rank()
    world_size = torchcomm.get_size()
    print(f"Rank {rank}/{world_size}: running on {device}")

    tensor = torch.full((1024,), float(rank + 1), dtype=torch.float32, device=device)
    print(f"Rank {rank}: Before AllReduce: {tensor[0].item()}")
    torchcomm.all_reduce(tensor, ReduceOp.SUM, async_op=False)
    print(f"Rank {rank}: After AllReduce: {tensor[0].item()}")
    assert tensor[0].item() == world_size * (world_size + 1) / 2

    torchcomm.finalize()


if __name__ == "__main__":
    main()
