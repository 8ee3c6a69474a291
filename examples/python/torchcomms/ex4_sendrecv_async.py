#!/usr/bin/env python3
"""torchcomms' asynchronous send and receive, on collie: even ranks send
to the next odd one (torchcomms' example is rank 0 to rank 1).
Run: collierun -n 2 python3 ex4_sendrecv_async.py
"""
import torch

import collie


def main() -> None:
    device = torch.device("cpu")
    comm = collie.new_comm("collie", device)
    rank = comm.get_rank()
    world_size = comm.get_size()

    send_tensor = torch.ones(10, device=device) * rank
    recv_tensor = torch.zeros(10, device=device)
    if rank % 2 == 0 and rank + 1 < world_size:
        work = comm.send(send_tensor, dst=rank + 1, async_op=True)
        work.wait()
    elif rank % 2 == 1:
        work = comm.recv(recv_tensor, src=rank - 1, async_op=True)
        work.wait()
        assert recv_tensor[0].item() == rank - 1
    # (an odd world's last rank has no partner)
    comm.finalize()


if __name__ == "__main__":
    main()
