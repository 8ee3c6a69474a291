"""allreduce.py - all_reduce, blocking and asynchronous with overlap.

    collierun -n 4 /usr/bin/python3 examples/python/allreduce.py
    collierun -n 4 python3 examples/python/allreduce.py --device cuda

Each rank contributes its rank + 1. The blocking all_reduce sums in place;
the asynchronous one is issued, then the rank computes something else while
collie's worker thread moves the bytes, then waits.
"""

import time

import numpy as np

from _common import Arrays, collie, communicator


def main(comm=None, n=1 << 20, device=None):
    xp = Arrays(device)
    with communicator(comm, "allreduce") as comm:
        rank, size = comm.get_rank(), comm.get_size()
        expect = size * (size + 1) / 2

        x = xp.full(n, rank + 1, "float32")
        comm.all_reduce(x)  # in place, zero-copy: x now holds the sum
        assert np.all(xp.host(x) == expect), x[:4]

        grads = xp.full(n, rank + 1, "float32")
        t0 = time.perf_counter()
        work = comm.all_reduce(grads, collie.ReduceOp.AVG, async_op=True)
        # Overlap: compute while the reduction runs on collie's worker thread.
        # (Do not touch `grads` until wait() returns.)
        busy = float(np.sum(np.sqrt(np.arange(n, dtype=np.float64))))
        work.wait()
        dt = time.perf_counter() - t0
        assert np.allclose(xp.host(grads), expect / size), grads[:4]

        if rank == 0:
            print("allreduce: sum %g, avg %g over %d ranks on %s; async + compute %.2f ms (compute result %.3g)"
                  % (x[0], grads[0], size, xp.device, dt * 1e3, busy), flush=True)
        return {"sum": float(x[0]), "avg": float(grads[0])}


if __name__ == "__main__":
    main()
