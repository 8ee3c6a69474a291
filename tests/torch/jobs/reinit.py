"""reinit.py env|tcp|file - two rounds of init_process_group, collectives,
destroy_process_group in one process, with the same init method each round
(a new port or file for the second: env:// gets a new MASTER_PORT). Each
rank prints ROUND <n> OK per round, then DONE. Ports and files come from the
test: COLLIE_TORCH_JOB_PORT2 (env), COLLIE_TORCH_JOB_TCP1/2 (tcp),
COLLIE_TORCH_JOB_FILE1/2 (file)."""

import datetime
import os
import sys

import torch
import torch.distributed as dist

from common import BACKEND, RANK, SIZE, say

how = sys.argv[1]
timeout = datetime.timedelta(seconds=30)
for rnd in (1, 2):
    if how == "env":
        if rnd == 2:
            os.environ["MASTER_PORT"] = os.environ["COLLIE_TORCH_JOB_PORT2"]
        dist.init_process_group(BACKEND, timeout=timeout)
    elif how == "tcp":
        dist.init_process_group(BACKEND, init_method="tcp://127.0.0.1:%s" % os.environ["COLLIE_TORCH_JOB_TCP%d" % rnd],
                                rank=RANK, world_size=SIZE, timeout=timeout)
    else:
        dist.init_process_group(BACKEND, init_method="file://" + os.environ["COLLIE_TORCH_JOB_FILE%d" % rnd],
                                rank=RANK, world_size=SIZE, timeout=timeout)
    assert dist.is_initialized() and dist.get_backend() == BACKEND
    assert dist.get_rank() == RANK and dist.get_world_size() == SIZE
    t = torch.full((10,), float(RANK + rnd))
    dist.all_reduce(t)
    want = float(sum(r + rnd for r in range(SIZE)))
    assert torch.equal(t, torch.full((10,), want)), (rnd, t)
    g = dist.new_group(list(range(SIZE)))
    b = torch.full((3,), float(RANK * 10 + rnd))
    dist.broadcast(b, SIZE - 1, group=g)
    assert torch.equal(b, torch.full((3,), float((SIZE - 1) * 10 + rnd))), (rnd, b)
    dist.barrier()
    say("ROUND %d OK" % rnd)
    dist.destroy_process_group()
    assert not dist.is_initialized()
say("DONE")
