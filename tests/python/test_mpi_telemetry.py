"""collie.MPI programs get collie's telemetry (docs/mpi.md, "Telemetry"):
comms.csv rows for the steps marked with comm.collie.step, every rank's
timing log with a row per operation (the fast path's and the Python
code's alike), and a flight-recorder dump naming the receive that timed
out. One 2-rank job (tests/python/jobs/mpi_telemetry.py), launched from the
1-rank session."""

import csv
import glob
import json
import os
import subprocess
import sys

import pytest

import collie

from conftest import build_dir

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.skipif(os.environ.get("COLLIE_WORLD_SIZE", "1") != "1", reason="launches its own job (1-rank session)")
def test_mpi_program_telemetry(tmp_path):
    logs, timing = tmp_path / "logs", tmp_path / "timing"
    logs.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLLIE_") or k == "COLLIE_LIBRARY"}
    env.update(COLLIE_LIBRARY=os.path.abspath(collie.library_path()), COLLIE_LOG_DIR=str(logs),
               COLLIE_TIMING_LOG=str(timing), COLLIE_TIMEOUT_MS="2000",
               PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
    cmd = [os.path.join(build_dir(), "collierun"), "-n", "2", "--timeout", "40", sys.executable,
           os.path.join(HERE, "jobs", "mpi_telemetry.py")]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=50, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(r.stdout.split("\n"))[1:] == ["ok 0 -", "ok 1 timeout"], r.stdout + r.stderr

    # comms.csv (rank 0): one row per marked step, with the step's bytes by kind
    with open(logs / "comms.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(x["step"], x["epoch"]) for x in rows] == [("1", "0"), ("2", "0"), ("3", "0")]
    for x in rows:
        assert int(x["bytes_all_reduce"]) == 2048  # 2(p-1)/p x 2 KiB at p = 2
        assert int(x["bytes_broadcast"]) == 64
        assert int(x["bytes_send_recv"]) == 4 * 512  # two sends and two receives of 512 B
        assert x["world_size"] == "2"

    # every rank's timing log: each step's operations, in order
    for q in range(2):
        with open(timing / ("timing-rank%d.csv" % q), newline="") as f:
            ops = [(x["iteration"], x["operation"]) for x in csv.DictReader(f)]
        for it in "123":
            mine = [op for i, op in ops if i == it]
            assert mine[0] == "ALLREDUCE" and "BCAST" in mine, (it, mine)
            assert mine.count("SEND") == 2 and mine.count("RECV") == 2, (it, mine)

    # rank 1's flight record, dumped when its receive timed out
    dumps = glob.glob(str(logs / "flight-rank1-*.json"))
    assert dumps, os.listdir(logs)
    with open(dumps[0]) as f:
        dump = json.load(f)
    assert dump["rank"] == 1
    assert "recv" in json.dumps(dump).lower()
