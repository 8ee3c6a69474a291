"""report_html_job.py MODE - the jobs test_report_html.py reports on, run
under collierun with COLLIE_LOG_DIR (and COLLIE_TIMING_LOG) set by the test.

steps: 6 training-like steps of 3 kinds of collective in 2 payload
  categories, with message sizes that grow with the step, so every step's
  row of comms.csv differs. The last rank sleeps before each step's
  collectives, so it is the one that arrives last, call after call. One
  all_reduce carries a label with markup and quotes, which the page must
  embed without breaking.
hang: two all_reduces, then rank 1 stops calling (it sleeps past the
  others' timeout and exits): the others time out in the third all_reduce
  and their flight recorders dump to COLLIE_LOG_DIR.
"""

import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "python"))

import collie  # noqa: E402
from collie import PayloadCategory  # noqa: E402

LABEL = 'grad</script><b>"x"</b>'

mode = sys.argv[1]
comm = collie.new_comm(name="report-html")
rank, size = comm.get_rank(), comm.get_size()
if mode == "steps":
    for step in range(1, 7):
        n = 256 * step
        x = np.ones(n, dtype=np.float32)
        y = np.ones(2 * n, dtype=np.float32)
        z = np.arange(n // 4, dtype=np.float32)
        out = [np.empty(n // 4, dtype=np.float32) for _ in range(size)]
        with comm.step(step, (step - 1) // 3):
            if rank == size - 1:
                time.sleep(0.03)  # the straggler
            comm.all_reduce(x, label=LABEL, category=PayloadCategory.MOMENTS_MU)
            if rank == size - 1:
                time.sleep(0.01)
            comm.all_reduce(y, label="grad.w2", category=PayloadCategory.MOMENTS_MU)
            if rank == size - 1:
                time.sleep(0.01)
            comm.broadcast(z, 0, label="params")
            if rank == size - 1:
                time.sleep(0.01)
            comm.all_gather(out, z, label="features", category=PayloadCategory.FEATURES_ALLGATHER)
    comm.finalize()
elif mode == "hang":
    x = np.ones(1000, dtype=np.float32)
    comm.all_reduce(x)
    comm.all_reduce(x)
    if rank == 1:
        time.sleep(4)  # the others give up after COLLIE_TIMEOUT_MS
        os._exit(0)
    try:
        comm.all_reduce(x)
    except collie.CollieError as e:
        print("rank %d: %s" % (rank, e), flush=True)
    os._exit(0)  # the communicator is broken: no finalize
else:
    raise SystemExit("report_html_job.py: unknown mode %r" % mode)
