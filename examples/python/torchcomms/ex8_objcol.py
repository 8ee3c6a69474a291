#!/usr/bin/env python3
"""torchcomms' object collectives (objcol), on collie.
Run: collierun -n 2 python3 ex8_objcol.py
"""
from typing import Any, List

import torch

import collie
from collie import objcol


def main() -> None:
    comm = collie.new_comm("collie", torch.device("cpu"))
    rank, world_size = comm.get_rank(), comm.get_size()

    gathered: List[Any] = [None] * world_size
    objcol.all_gather_object(comm, gathered, {"rank": rank, "name": f"worker-{rank}"})
    assert [g["rank"] for g in gathered] == list(range(world_size))

    objs: List[Any] = [f"from root {rank}"] if rank == 0 else [None]
    objcol.broadcast_object_list(comm, objs, root=0)
    assert objs == ["from root 0"]
    comm.finalize()


if __name__ == "__main__":
    main()
