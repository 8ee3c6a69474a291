"""broadcast.py - broadcast from a root, in place; torch tensors too.

    collierun -n 4 /usr/bin/python3 examples/python/broadcast.py
    collierun -n 4 python3 examples/python/broadcast.py --device cuda
"""

import numpy as np

from _common import Arrays, communicator


def main(comm=None, device=None):
    xp = Arrays(device)
    with communicator(comm, "broadcast") as comm:
        rank, size = comm.get_rank(), comm.get_size()
        root = size - 1
        weights = xp.asarray(np.random.default_rng(42).standard_normal(1000).astype(np.float32)) if rank == root \
            else xp.zeros(1000, "float32")
        comm.broadcast(weights, root)
        want = np.random.default_rng(42).standard_normal(1000).astype(np.float32)
        assert np.array_equal(xp.host(weights), want)
        out = {"checksum": float(xp.host(weights).sum())}
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            dev = torch.device(xp.device)
            t = torch.arange(8, dtype=torch.bfloat16, device=dev) if rank == 0 \
                else torch.zeros(8, dtype=torch.bfloat16, device=dev)
            comm.broadcast(t, 0)
            assert torch.equal(t.cpu(), torch.arange(8, dtype=torch.bfloat16))
            out["torch"] = t.float().tolist()
        if rank == 0:
            print("broadcast: rank %d's weights reached %d ranks (checksum %.4f)" % (root, size, out["checksum"]),
                  flush=True)
        return out


if __name__ == "__main__":
    main()
