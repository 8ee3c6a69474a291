#!/usr/bin/env python3
"""torchcomms' batched send/recv (batch_op_create) and its collectives
(all_gather, broadcast, all_to_all, scatter, gather, reduce,
reduce_scatter), on collie.
Run: collierun -n 2 python3 ex9_batch_and_collectives.py
"""
import torch

import collie
from collie import ReduceOp


def main() -> None:
    comm = collie.new_comm("collie", torch.device("cpu"), name="main_comm")
    rank, size = comm.get_rank(), comm.get_size()
    right, left = (rank + 1) % size, (rank - 1) % size

    # A ring exchange in one batch: cannot deadlock whatever the sizes.
    out, got = torch.full((8,), float(rank)), torch.zeros(8)
    batch = comm.batch_op_create()
    batch.send(out, right)
    batch.recv(got, left)
    batch.issue(async_op=True).wait()
    assert got[0].item() == left

    t = torch.full((4,), float(rank))
    parts = [torch.zeros(4) for _ in range(size)]
    comm.all_gather(parts, t, async_op=False)
    assert [p[0].item() for p in parts] == [float(q) for q in range(size)]

    b = torch.full((4,), float(rank))
    comm.broadcast(b, 0, async_op=False)
    assert b[0].item() == 0.0

    ins = [torch.full((2,), float(rank * size + q)) for q in range(size)]
    outs = [torch.zeros(2) for _ in range(size)]
    comm.all_to_all(outs, ins, async_op=False)
    assert [o[0].item() for o in outs] == [float(q * size + rank) for q in range(size)]

    s = torch.zeros(3)
    comm.scatter(s, [torch.full((3,), float(q)) for q in range(size)] if rank == 0 else [], 0, async_op=False)
    assert s[0].item() == rank

    g = [torch.zeros(3) for _ in range(size)] if rank == 0 else []
    comm.gather(g, torch.full((3,), float(rank)), 0, async_op=False)
    if rank == 0:
        assert [x[0].item() for x in g] == [float(q) for q in range(size)]

    r = torch.ones(5)
    comm.reduce(r, 0, ReduceOp.SUM, async_op=False)
    if rank == 0:
        assert r[0].item() == size

    rs = torch.zeros(2)
    comm.reduce_scatter(rs, [torch.full((2,), float(q)) for q in range(size)], ReduceOp.SUM, async_op=False)
    assert rs[0].item() == rank * size

    comm.barrier(async_op=False)
    comm.finalize()


if __name__ == "__main__":
    main()
