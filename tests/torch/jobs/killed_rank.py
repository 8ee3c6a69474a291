"""killed_rank.py MODE - a 2-rank training-like loop whose rank 1 dies before
step 5's all_reduce: MODE exit (os._exit(0): collierun lets the others run
on) or kill (SIGKILL on itself: collierun then stops the others with
SIGTERM, which rank 0 ignores so that it can report; run it with a long
--grace). Rank 0 prints one line:
  RESULT raised <seconds> <exception type>: <message>
or RESULT returned (the all_reduce after the death did not fail)."""

import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

from common import BACKEND, RANK, say

mode = sys.argv[1]
if RANK == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
dist.init_process_group(BACKEND, timeout=datetime.timedelta(seconds=30))
t = torch.ones(1000)
for step in range(10):
    if step == 5 and RANK == 1:
        if mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(0)
    t0 = time.monotonic()
    try:
        dist.all_reduce(t)
    except Exception as e:  # noqa: BLE001 - reported, the test judges it
        msg = " ".join(str(e).split())
        # torch users catch RuntimeError: a backend's own subclass of it counts as one.
        kind = "RuntimeError" if isinstance(e, RuntimeError) else type(e).__name__
        say("RESULT raised %.2f %s: %s" % (time.monotonic() - t0, kind, msg))
        os._exit(0)
    if step == 5:
        say("RESULT returned")
        os._exit(0)
