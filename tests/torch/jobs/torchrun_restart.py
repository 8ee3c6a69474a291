"""torchrun_restart.py - a 2-worker job for torchrun with the c10d rendezvous
and --max-restarts 1 (test_stack.py's test_torchrun_c10d_restart): on the
first attempt (TORCHELASTIC_RESTART_COUNT 0) rank 1 SIGKILLs itself after
one all_reduce; torchrun then stops rank 0 and starts both again, and the
second attempt runs all_reduce, all_gather and broadcast on the backend
under test (COLLIE_TORCH_TEST_BACKEND, default collie). Each worker prints
  PID <pid> attempt <n> rank <r>
as it starts, and on success
  RESULT attempt <n> rank <r> backend <name> allreduce <list> allgather <list> broadcast <list>
Each line goes out in one write, so that the workers' lines (unbuffered
under run.sh) do not interleave. (torchrun sets RANK, WORLD_SIZE, MASTER_*:
not common.py, which fills them in from collierun's variables.)"""

import datetime
import os
import signal
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
BACKEND = os.environ.get("COLLIE_TORCH_TEST_BACKEND", "collie")
if BACKEND == "collie":
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import collie.torch  # noqa: E402,F401

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def say(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
say("PID %d attempt %d rank %d" % (os.getpid(), attempt, rank))
dist.init_process_group(BACKEND, timeout=datetime.timedelta(seconds=20))
assert dist.get_backend() == BACKEND, dist.get_backend()
total = torch.full((4,), float(rank + 1))
dist.all_reduce(total)
if attempt == 0 and rank == 1:
    say("KILL attempt 0 rank 1")
    os.kill(os.getpid(), signal.SIGKILL)
# On the first attempt rank 0 waits here for the dead rank 1 (an error, or
# torchrun stops it first): it never gets to print RESULT.
gathered = [torch.empty(3) for _ in range(size)]
dist.all_gather(gathered, torch.arange(3.0) + 10 * rank)
b = torch.full((2,), float(rank))
dist.broadcast(b, src=size - 1)
say("RESULT attempt %d rank %d backend %s allreduce %s allgather %s broadcast %s" % (
    attempt, rank, dist.get_backend(), total.tolist(), [g.tolist() for g in gathered], b.tolist()))
dist.destroy_process_group()
