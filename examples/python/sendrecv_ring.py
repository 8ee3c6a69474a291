"""sendrecv_ring.py - pass a message around a ring with send and recv.

    collierun -n 4 /usr/bin/python3 examples/python/sendrecv_ring.py
    collierun -n 4 python3 examples/python/sendrecv_ring.py --device cuda

Rank 0 starts a token; every rank receives it from its left neighbour, adds
its rank and sends it to its right neighbour; rank 0 finally receives the
sum of all ranks. Blocking send may wait for the matching recv, so only
rank 0 sends first and the ring never deadlocks.
"""

import numpy as np

from _common import Arrays, communicator


def main(comm=None, device=None):
    xp = Arrays(device)
    with communicator(comm, "ring") as comm:
        rank, size = comm.get_rank(), comm.get_size()
        token = xp.zeros(1, "int64")
        if size == 1:
            return {"token": 0}
        right, left = (rank + 1) % size, (rank - 1) % size
        if rank == 0:
            comm.send(token, right, tag=7)
            comm.recv(token, left, tag=7)
            assert xp.host(token)[0] == size * (size - 1) // 2, token
            print("ring: token came back as %d after %d hops" % (int(token[0]), size), flush=True)
        else:
            comm.recv(token, left, tag=7)
            token += rank
            comm.send(token, right, tag=7)
        return {"token": int(token[0])}


if __name__ == "__main__":
    main()
