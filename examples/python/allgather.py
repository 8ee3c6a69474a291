"""allgather.py - all_gather into a list and into one array.

    collierun -n 4 /usr/bin/python3 examples/python/allgather.py
    collierun -n 4 python3 examples/python/allgather.py --device cuda

The list form with views of one array runs zero-copy; with separate arrays
it goes through one staging buffer. all_gather_single gathers into one array.
"""

import numpy as np

from _common import Arrays, communicator


def main(comm=None, n=5, device=None):
    xp = Arrays(device)
    with communicator(comm, "allgather") as comm:
        rank, size = comm.get_rank(), comm.get_size()
        mine = xp.arange(n, "float64") + 100 * rank

        separate = [xp.empty(n, "float64") for _ in range(size)]  # staging path
        comm.all_gather(separate, mine)

        flat = xp.empty(size * n, "float64")
        views = [flat[q * n:(q + 1) * n] for q in range(size)]  # zero-copy path
        comm.all_gather(views, mine)

        single = xp.empty((size, n), "float64")
        comm.all_gather_single(single, mine)

        for q in range(size):
            want = np.arange(n) + 100 * q
            assert np.array_equal(xp.host(separate[q]), want) and np.array_equal(xp.host(views[q]), want)
            assert np.array_equal(xp.host(single[q]), want)
        if rank == 0:
            print("allgather: first element of each rank's block:", single[:, 0].tolist(), flush=True)
        return {"firsts": single[:, 0].tolist()}


if __name__ == "__main__":
    main()
