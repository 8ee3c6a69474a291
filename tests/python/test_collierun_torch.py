"""collierun as torch's launcher: unchanged torch.distributed code, started as
`collierun -n 2 /usr/bin/python3 script.py`, initialises with the default
env:// method (RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT that collierun
sets) and all-reduces the right sum; in the same processes a collie
communicator works beside it, so torch's store (MASTER_PORT) and collie's
(COLLIE_STORE) do not take each other's port.

Skipped (not passed) where torch is not installed. Each test launches its own
2-rank job, so only the 1-rank session of tests/python/run.sh runs it."""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

import collie
from conftest import ROOT, build_dir

SCRIPT = textwrap.dedent(
    """
    import os
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")  # init_method env://
    r, n = dist.get_rank(), dist.get_world_size()
    assert (r, n) == (int(os.environ["COLLIE_RANK"]), int(os.environ["COLLIE_WORLD_SIZE"])), (r, n)
    t = torch.tensor([r + 1.0, 10.0 * r])
    dist.all_reduce(t)
    want = [n * (n + 1) / 2, 10.0 * n * (n - 1) / 2]
    assert t.tolist() == want, (t.tolist(), want)
    if os.environ.get("WITH_COLLIE") == "1":
        import numpy as np
        import collie
        c = collie.new_comm(name="beside-torch")
        x = np.full(4, r + 1.0)
        c.all_reduce(x)
        assert np.all(x == n * (n + 1) / 2), x
        c.finalize()
    dist.barrier()
    dist.destroy_process_group()
    print("torch ok rank %d of %d: %s port %s" % (r, n, t.tolist(), os.environ["MASTER_PORT"]), flush=True)
    """
)

# The variables collierun sets for its ranks: this pytest session may itself
# run under collierun, and a nested collierun passes an inherited MASTER_PORT
# and MASTER_ADDR on; the test wants collierun's own choice.
LAUNCHER_VARS = ("COLLIE_RANK", "COLLIE_WORLD_SIZE", "COLLIE_LOCAL_RANK", "COLLIE_LOCAL_SIZE", "COLLIE_STORE",
                 "COLLIE_JOB_TOKEN", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                 "MASTER_ADDR", "MASTER_PORT")

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed"),
    pytest.mark.skipif(os.environ.get("COLLIE_WORLD_SIZE", "1") != "1",
                       reason="launches its own 2-rank jobs (1-rank session only)"),
]


def run_torch_job(tmp_path, with_collie):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env.update(PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1", WITH_COLLIE="1" if with_collie else "0",
               PYTHONPATH=os.path.join(ROOT, "python"), COLLIE_LIBRARY=collie.library_path())
    cmd = [os.path.join(build_dir(), "collierun"), "-n", "2", "--tag-output", "--timeout", "60",
           sys.executable, str(script)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=90, cwd=str(tmp_path))
    assert r.returncode == 0, "%s exited %d\n%s\n%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr)
    # --tag-output: whole lines, "[rank] text", even when the ranks write unbuffered.
    lines = sorted(line for line in r.stdout.splitlines() if "torch ok" in line)
    assert [line.split(":")[0] for line in lines] == ["[0] torch ok rank 0 of 2", "[1] torch ok rank 1 of 2"], r.stdout
    assert all("[3.0, 10.0]" in line for line in lines), r.stdout


def test_torch_env_init_under_collierun(tmp_path):
    run_torch_job(tmp_path, with_collie=False)


def test_torch_and_collie_side_by_side(tmp_path):
    run_torch_job(tmp_path, with_collie=True)
