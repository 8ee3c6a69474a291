"""collie.MPI under MPI's own launchers (docs/mpi.md: the launch is
collie_comm_init's): Open MPI's mpirun and MPICH's mpiexec start the
ranks, their environment gives collie the rank and size, and COLLIE_STORE
names where rank 0 serves the store. A 3-rank Allreduce through each
launcher this machine has (CI installs Open MPI; MPICH where present)."""

import os
import re
import shutil
import socket
import subprocess
import sys

import pytest

import collie

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = r"""
import sys
from collie import MPI
import numpy as np
c = MPI.COMM_WORLD
x = np.array([c.Get_rank() + 1.0])
c.Allreduce(MPI.IN_PLACE, x)
sys.stdout.write("ok %d %d %d\n" % (c.Get_rank(), c.Get_size(), int(x[0])))  # one write: the ranks share a pipe
sys.stdout.flush()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(os.environ.get("COLLIE_WORLD_SIZE", "1") != "1", reason="launches its own jobs (1-rank session)")
@pytest.mark.parametrize("launcher", ["mpirun.openmpi", "mpiexec.mpich"])
def test_mpi_launcher(launcher, tmp_path):
    if not shutil.which(launcher):
        pytest.skip("%s is not installed" % launcher)
    # (this session runs under collierun: its rank variables, torchrun's names too, must not reach the job)
    torchrun = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("COLLIE_", "OMPI_", "PMI_", "PMIX_")) and k not in torchrun}
    env.update(COLLIE_LIBRARY=os.path.abspath(collie.library_path()), COLLIE_TIMEOUT_MS="20000",
               PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"),
               COLLIE_STORE="tcp://127.0.0.1:%d" % free_port(), COLLIE_LOG_DIR=str(tmp_path))
    prog = tmp_path / "prog.py"
    prog.write_text(PROG)
    if launcher == "mpirun.openmpi":
        cmd = [launcher, "--allow-run-as-root", "--oversubscribe", "-n", "3"]
        for k in ("COLLIE_LIBRARY", "COLLIE_TIMEOUT_MS", "PYTHONPATH", "COLLIE_STORE", "COLLIE_LOG_DIR"):
            cmd += ["-x", k]
    else:
        cmd = [launcher, "-n", "3"]
    r = subprocess.run(cmd + [sys.executable, str(prog)], env=env, capture_output=True, text=True, timeout=60,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    # (a launcher may still join two ranks' lines: read the records, not the lines)
    assert sorted(re.findall(r"ok \d+ \d+ \d+", r.stdout)) == ["ok %d 3 6" % q for q in range(3)], \
        r.stdout + r.stderr
