"""shrink_rank.py - a 4-rank training loop on the collie backend whose rank 2
kills itself (SIGKILL) before step 5's all_reduce. The others' all_reduce
raises RuntimeError; they call collie.torch.shrink() and go on as a 3-rank
default group: the loop's all_reduce, then a DDP step (a model made after
the shrink). Each survivor prints
  SHRUNK <old rank> -> <new rank> of <size>
  SUM <step> <value>            (the all_reduce of ones: the group's size)
  DDP <grad>                    (a weight's gradient, averaged by DDP)
  DONE
Run it under collierun --keep-going (the launcher must let the others go on)."""

import datetime
import os
import signal

import torch
import torch.distributed as dist

import collie.torch
from common import RANK, say

dist.init_process_group("collie", timeout=datetime.timedelta(seconds=30))
step = 0
while step < 8:
    if step == 5 and RANK == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    t = torch.ones(1000)
    try:
        dist.all_reduce(t)
    except RuntimeError as e:
        say("FAILED %d %s" % (step, " ".join(str(e).split())[:200]))
        rank, size = collie.torch.shrink(timeout=10)
        say("SHRUNK %d -> %d of %d" % (RANK, dist.get_rank(), dist.get_world_size()))
        assert (rank, size) == (dist.get_rank(), dist.get_world_size())
        continue  # the step again, on the survivors
    say("SUM %d %g" % (step, t[0].item()))
    step += 1

# DDP on the shrunk group: rank r's input is r + 1, so the mean gradient of
# w in y = w * x (loss = y) is the mean of 1..size.
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1, bias=False))
x = torch.full((1, 1), float(dist.get_rank() + 1))
model(x).sum().backward()
say("DDP %g" % model.module.weight.grad.item())
dist.destroy_process_group()
say("DONE")
