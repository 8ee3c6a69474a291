"""allreduce.py - all_reduce, blocking and asynchronous with overlap.

    collierun -n 4 /usr/bin/python3 examples/python/allreduce.py

Each rank contributes its rank + 1. The blocking all_reduce sums in place;
the asynchronous one is issued, then the rank computes something else while
collie's worker thread moves the bytes, then waits.
"""

import time

import numpy as np

from _common import collie, communicator


def main(comm=None, n=1 << 20):
    with communicator(comm, "allreduce") as comm:
        rank, size = comm.get_rank(), comm.get_size()
        expect = size * (size + 1) / 2

        x = np.full(n, rank + 1, dtype=np.float32)
        comm.all_reduce(x)  # in place, zero-copy: x now holds the sum
        assert np.all(x == expect), x[:4]

        grads = np.full(n, rank + 1, dtype=np.float32)
        t0 = time.perf_counter()
        work = comm.all_reduce(grads, collie.ReduceOp.AVG, async_op=True)
        # Overlap: compute while the reduction runs on collie's worker thread.
        # (Do not touch `grads` until wait() returns.)
        busy = float(np.sum(np.sqrt(np.arange(n, dtype=np.float64))))
        work.wait()
        dt = time.perf_counter() - t0
        assert np.allclose(grads, expect / size), grads[:4]

        if rank == 0:
            print("allreduce: sum %g, avg %g over %d ranks; async + compute %.2f ms (compute result %.3g)"
                  % (x[0], grads[0], size, dt * 1e3, busy), flush=True)
        return {"sum": float(x[0]), "avg": float(grads[0])}


if __name__ == "__main__":
    main()
