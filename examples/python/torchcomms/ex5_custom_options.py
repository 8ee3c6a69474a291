#!/usr/bin/env python3
"""torchcomms' custom options: a communicator's timeout, abort policy and
hints, then one operation's own options, on collie.
Run: collierun -n 2 python3 ex5_custom_options.py
"""
from datetime import timedelta

import torch

import collie


def main() -> None:
    device = torch.device("cpu")
    comm = collie.new_comm(
        "collie",
        device,
        timeout=timedelta(seconds=60),
        abort_process_on_timeout_or_error=False,
        hints={"is_high_priority_stream": "true", "backend_option": "value"},
    )
    assert comm.get_options().timeout == timedelta(seconds=60)

    options = collie.CommOptions(timeout=timedelta(seconds=30), hints={"transport": "tcp"})
    comm2 = collie.new_comm("collie", device, name="tcp_comm", options=options)

    t = torch.ones(4, device=device)
    opts = collie.AllReduceOptions(timeout=timedelta(seconds=5), hints={"algorithm": "ring"})
    comm2.all_reduce(t, collie.ReduceOp.SUM, False, options=opts)
    comm.all_reduce(t, collie.ReduceOp.MAX, async_op=False, hints={"category": "moments_mu"},
                    timeout=timedelta(seconds=5))
    assert t[0].item() == comm.get_size()

    comm2.finalize()
    comm.finalize()


if __name__ == "__main__":
    main()
