"""batch_p2p.py - a halo exchange with a batch of sends and receives.

    collierun -n 4 /usr/bin/python3 examples/python/batch_p2p.py
    collierun -n 4 python3 examples/python/batch_p2p.py --device cuda

Every rank sends its edges to both neighbours and receives theirs. Posted
together (collie_group_start/end), the sends and receives progress at once,
so the exchange cannot deadlock however large the messages are.
"""

import numpy as np

from _common import Arrays, communicator


def main(comm=None, n=1 << 16, device=None):
    xp = Arrays(device)
    with communicator(comm, "batch") as comm:
        rank, size = comm.get_rank(), comm.get_size()
        left, right = (rank - 1) % size, (rank + 1) % size
        my_left_edge = xp.full(n, rank * 10 + 1, "float32")
        my_right_edge = xp.full(n, rank * 10 + 2, "float32")
        from_left = xp.zeros(n, "float32")
        from_right = xp.zeros(n, "float32")

        # Messages between two ranks match in the order they were issued (as
        # NCCL's), and their tags must agree: each rank sends "to the left"
        # first and receives "from the right" first, so with 2 ranks (left ==
        # right) or 1 (itself) the orders still pair up.
        batch = comm.batch_op_create()
        batch.send(my_left_edge, left, tag=1)
        batch.send(my_right_edge, right, tag=2)
        batch.recv(from_right, right, tag=1)  # the right neighbour's left edge
        batch.recv(from_left, left, tag=2)  # the left neighbour's right edge
        batch.issue(async_op=True).wait()

        assert np.all(xp.host(from_left) == left * 10 + 2) and np.all(xp.host(from_right) == right * 10 + 1)
        if rank == 0:
            print("batch_p2p: rank 0 got %g from the left and %g from the right" % (from_left[0], from_right[0]),
                  flush=True)
        return {"from_left": float(from_left[0]), "from_right": float(from_right[0])}


if __name__ == "__main__":
    main()
