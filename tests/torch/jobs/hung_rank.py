"""hung_rank.py REPORT_BIN - a 3-rank loop whose rank 1 stops calling (it
sleeps past the group's 3 s timeout) before the third all_reduce. Ranks 0
and 2 time out and their flight recorders dump to COLLIE_LOG_DIR; rank 0
then runs `collie-report hang` on that directory and prints each line of the
verdict as `REPORT <line>`, after `RESULT raised RuntimeError: <message>`."""

import datetime
import glob
import os
import subprocess
import sys
import time

import torch
import torch.distributed as dist

from common import RANK, say

report = sys.argv[1]
dist.init_process_group("collie", timeout=datetime.timedelta(seconds=3))
t = torch.ones(1000)
dist.all_reduce(t)
dist.all_reduce(t)
if RANK == 1:
    time.sleep(7)  # the others give up after 3 s
    os._exit(0)
try:
    dist.all_reduce(t)
    say("RESULT returned")
except RuntimeError as e:  # what torch users catch; the backend's class is a subclass of it
    say("RESULT raised RuntimeError: %s" % " ".join(str(e).split()))
if RANK == 0:
    logs = os.environ["COLLIE_LOG_DIR"]
    deadline = time.monotonic() + 10
    while len(glob.glob(os.path.join(logs, "flight-rank*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    out = subprocess.run([report, "hang", logs], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    for line in out.splitlines():
        say("REPORT " + line)
os._exit(0)
