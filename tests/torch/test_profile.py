"""python3 -m collie.profile --backend BACKEND (and gloo) at 2 ranks (a job of its own,
started by rank 0): the profile file in collie-bench's seed format parsed
back, and its --csv checked against itself and the wall clock: bytes exactly
(the tensor is per rank: AllGather and ReduceScatter move N x ranks), times
positive and within the job's duration, bandwidths consistent with bytes and
time, every result right. Plus the hint when MASTER_ADDR is missing."""

import csv
import os
import re
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import BACKEND, build_dir, job_env, once_per_run

SIZES = (1024, 65536)
ITERS, WARMUP = 3, 1


def _run(args, env, timeout=120):
    t0 = time.monotonic()
    r = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return r.returncode, r.stdout, time.monotonic() - t0


@once_per_run
@pytest.mark.parametrize("backend", sorted({BACKEND, "gloo"}))
def test_profile_file_and_csv(world, backend):
    def job():
        d = tempfile.mkdtemp(prefix="collie-profile-")
        cmd = [os.path.join(build_dir(), "collierun"), "-n", "2", "--timeout", "100", sys.executable, "-m",
               "collie.profile", "--backend", backend, "--sizes", ",".join(map(str, SIZES)), "-n", str(ITERS),
               "-w", str(WARMUP), "--csv", os.path.join(d, "p.csv"), "--profile-dir", d]
        rc, out, secs = _run(cmd, job_env())
        files = [f for f in os.listdir(d) if f.startswith("profile_")]
        text = open(os.path.join(d, files[0])).read() if len(files) == 1 else None
        rows = list(csv.DictReader(open(os.path.join(d, "p.csv")))) if os.path.exists(os.path.join(d, "p.csv")) else []
        return rc, out, secs, files, text, rows

    rc, out, secs, files, text, rows = world.wait_for_rank0(job)
    assert rc == 0, out[-3000:]
    assert len(files) == 1 and re.fullmatch(r"profile_%s_world2_\d{8}_\d{6}\.txt" % backend, files[0]), files
    lines = text.splitlines()
    assert lines[:4] == ["=" * 80, "Configuration: World Size=2", "Backend: %s (torch.distributed)" % backend,
                         "=" * 80], lines[:4]
    blocks = text.split("\n\nTensor Size: ")[1:]
    assert len(blocks) == len(SIZES)
    ops = ("AllReduce", "AllGather", "ReduceScatter")
    lacks_rs = False
    for n, block in zip(SIZES, blocks):
        head, *entries = block.splitlines()
        assert head == "{:,} elements ({:.2f} MB)".format(n, n * 4 / 1048576.0), head
        assert [e.split(":")[0].strip() for e in entries] == list(ops), entries
        for e in entries:
            if "n/a" in e:
                assert backend == "gloo" and e.strip().startswith("ReduceScatter:"), e  # gloo 1.13 lacks it
                lacks_rs = True
                continue
            m = re.fullmatch(r"  (\w+):\s+(\d+\.\d{3}) ms \| AlgBW: (\d+\.\d\d) GB/s \| BusBW: (\d+\.\d\d) GB/s", e)
            assert m, e
    # gloo has reduce_scatter on torch 2.x (not on 1.13): its rows are in the CSV exactly when the file has times.
    want_ops = {"allreduce", "allgather"} | (set() if lacks_rs else {"reduce_scatter"})
    assert {(r["collective"], int(r["count"]) // (1 if r["collective"] == "allreduce" else 2)) for r in rows} == \
        {(o, n) for o in want_ops for n in SIZES}
    total = 0.0
    for r in rows:
        n = int(r["count"]) // (1 if r["collective"] == "allreduce" else 2)
        nbytes = n * 4 * (1 if r["collective"] == "allreduce" else 2)
        assert (r["impl"], r["nranks"], int(r["bytes"]), r["wrong"]) == (backend, "2", nbytes, "0"), r
        t = float(r["time_us"])
        assert t > 0
        total += t * 1e-6 * (ITERS + WARMUP)
        alg, bus = float(r["algbw_GBps"]), float(r["busbw_GBps"])
        assert abs(alg - nbytes / (t * 1e3)) <= 0.002 * alg + 1e-4, r
        factor = 1.0 if r["collective"] == "allreduce" else 0.5  # 2(p-1)/p, (p-1)/p at p = 2
        assert abs(bus - alg * factor) <= 1e-4 + 1e-3 * alg, r
    assert total < secs, "the timed calls add up to %.3f s but the job took %.3f s" % (total, secs)


@once_per_run
def test_profile_master_addr_hint(world):
    def job():
        env = job_env(RANK="0", WORLD_SIZE="2")
        for v in ("MASTER_ADDR", "MASTER_PORT"):
            env.pop(v, None)
        return _run([sys.executable, "-m", "collie.profile", "--backend", BACKEND], env, timeout=60)

    rc, out, _ = world.wait_for_rank0(job)
    assert rc == 2 and "MASTER_ADDR and MASTER_PORT not set" in out and "srun" in out, out
