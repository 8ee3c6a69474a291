"""killed_rank.py MODE - a 2-rank training-like loop whose rank 1 dies before
step 5's all_reduce: MODE exit (os._exit(0): collierun lets the others run
on), kill (SIGKILL on itself: collierun then stops the others with
SIGTERM, which rank 0 ignores so that it can report; run it with a long
--grace) or raise (an uncaught ValueError("bad batch") while rank 0 is busy
outside the backend for 5 s before that all_reduce: rank 1 must exit
without waiting for it). Rank 0 prints one line:
  RESULT raised <seconds> <exception type>: <message>
or RESULT returned (the all_reduce after the death did not fail); in raise
mode rank 0 also prints ENTERED <wall clock> as it enters that all_reduce,
and rank 1 EXITED <wall clock> as the last thing its interpreter does."""

import atexit
import datetime
import os
import signal
import sys
import time

# Registered before the backend's own exit handlers, so it runs after them.
atexit.register(lambda: print("EXITED %.3f" % time.time(), flush=True))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from common import BACKEND, RANK, say  # noqa: E402

mode = sys.argv[1]
if RANK == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
dist.init_process_group(BACKEND, timeout=datetime.timedelta(seconds=30))
t = torch.ones(1000)
for step in range(10):
    if step == 5 and RANK == 1:
        if mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "raise":
            raise ValueError("bad batch")
        os._exit(0)
    if step == 5 and mode == "raise":
        time.sleep(5)  # busy outside the backend (a slow batch, a checkpoint)
        say("ENTERED %.3f" % time.time())
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
