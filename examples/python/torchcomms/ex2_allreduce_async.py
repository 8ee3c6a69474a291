#!/usr/bin/env python3
"""torchcomms' asynchronous AllReduce, on collie (the import changed only).
Run: collierun -n 2 python3 ex2_allreduce_async.py
"""
import torch

from collie import ReduceOp, new_comm


def main() -> None:
    device = torch.device("cpu")
    torchcomm = new_comm("collie", device, name="main_comm")
    rank = torchcomm.get_rank()

    tensor = torch.full((1024,), float(rank + 1), dtype=torch.float32, device=device)
    work = torchcomm.all_reduce(tensor, ReduceOp.SUM, async_op=True)
    print(f"Rank {rank}: Doing other work while AllReduce is in progress...")
    work.wait()
    assert work.is_completed()
    print(f"Rank {rank}: AllReduce completed: {tensor[0].item()}")

    torchcomm.finalize()


if __name__ == "__main__":
    main()
