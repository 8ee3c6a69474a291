#!/usr/bin/env python3
"""torchcomms' window (one-sided put, signal, wait_signal), on collie:
each rank puts its rank into the next rank's window.
Run: collierun -n 2 python3 ex7_window.py
"""
import torch

import collie


def main() -> None:
    device = torch.device("cpu")
    comm = collie.new_comm("collie", device)
    rank, size = comm.get_rank(), comm.get_size()

    buf = torch.zeros(size, dtype=torch.float32)
    win = comm.new_window()
    win.tensor_register(buf)
    right, left = (rank + 1) % size, (rank - 1) % size
    work = win.put(torch.full((1,), float(rank)), right, rank, async_op=True)
    assert work is not None
    work.wait()
    win.signal(right, async_op=False)
    win.wait_signal(left, async_op=False)
    assert buf[left].item() == float(left)
    win.tensor_deregister()
    comm.finalize()


if __name__ == "__main__":
    main()
