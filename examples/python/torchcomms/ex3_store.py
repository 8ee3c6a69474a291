#!/usr/bin/env python3
"""torchcomms' basic usage: a communicator that meets through a
torch.distributed store the program made (here a FileStore), on collie.
Run: collierun -n 2 python3 ex3_store.py /tmp/a-fresh-store-file
"""
import os
import sys
from typing import Optional

import torch
import torch.distributed

import collie


def main(store_path: Optional[str] = None) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    path = store_path or (sys.argv[1] if len(sys.argv) > 1 else "/tmp/torchcomm_test")
    store = torch.distributed.FileStore(path, world)

    device = torch.device("cpu")
    comm = collie.new_comm("collie", device, store=store)
    rank = comm.get_rank()
    world_size = comm.get_size()

    tensor = torch.ones(10, device=device) * rank
    comm.all_reduce(tensor, collie.ReduceOp.SUM, async_op=False)
    print(f"Rank {rank}: {tensor}")
    assert tensor[0].item() == world_size * (world_size - 1) / 2

    comm.finalize()


if __name__ == "__main__":
    main()
