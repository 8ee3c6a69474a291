"""The examples of examples/python: each one's main() on the session's
communicator (at every world size the suite runs), and, in the 1-rank
session, each script as users run it: `collierun -n 4 python3 file.py`,
including the data-parallel training with its telemetry files and its loss
against single-process training on the same data."""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import allgather
import allreduce
import batch_p2p
import broadcast
import colocated_weights
import objects
import sendrecv_ring
import train_dp
from conftest import ROOT, build_dir

EXAMPLES = os.path.join(ROOT, "examples", "python")


def test_allreduce_example(comm, size):
    out = allreduce.main(comm, n=4096)
    assert out == {"sum": size * (size + 1) / 2, "avg": (size + 1) / 2}


def test_sendrecv_ring_example(comm, rank, size):
    out = sendrecv_ring.main(comm)
    if rank == 0:
        assert out["token"] == size * (size - 1) // 2


def test_allgather_example(comm, size):
    assert allgather.main(comm)["firsts"] == [100.0 * q for q in range(size)]


def test_broadcast_example(comm):
    out = broadcast.main(comm)
    assert "checksum" in out
    if "torch" in out:
        assert out["torch"] == list(range(8))


def test_colocated_weights_example(comm, size):
    pytest.importorskip("torch")
    out = colocated_weights.main(comm, size_mb=2, tensors=7, steps=2, bucket_mb=1)
    assert out["updates"] == 2 and out["tensors_checked"] == 14 and out["bytes_per_s"] > 0


def test_objects_example(comm, rank, size):
    out = objects.main(comm)
    assert [d["rank"] for d in out["everyone"]] == list(range(size)) and out["shard"] == "shard-%d" % rank


def test_batch_p2p_example(comm, rank, size):
    out = batch_p2p.main(comm, n=1024)
    assert out == {"from_left": ((rank - 1) % size) * 10 + 2.0, "from_right": ((rank + 1) % size) * 10 + 1.0}


def test_train_dp_matches_single_process(comm, size):
    # Small buckets, so that several all-reduces overlap with the backward pass.
    kw = dict(steps=25, bucket_bytes=4096, verbose=False, batch=256 if 256 % size == 0 else 60 * size)
    dp = train_dp.train(comm, **kw)
    single = train_dp.train(None, **kw)  # the same data and model, one process, no communication
    np.testing.assert_allclose(dp, single, rtol=1e-4)
    assert dp[-1] < dp[0] / 4  # it learns


def test_train_dp_buckets():
    model = train_dp.MLP(32, 64)
    one = train_dp.Buckets(model, 25 << 20)  # the default: everything in one bucket
    assert len(one) == 1 and one.members == [["w2", "b2", "w1", "b1"]]
    small = train_dp.Buckets(model, 4096)
    assert len(small) > 1 and [n for m in small.members for n in m] == ["w2", "b2", "w1", "b1"]
    for name, p in model.params.items():  # gradient views alias their bucket
        v = small.views[name]
        assert v.shape == p.shape and np.shares_memory(v, small.flat[small.of[name]])


# ---- the scripts, launched as users do (only from the 1-rank session) ----------------

def script_env():
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLLIE_RANK", "COLLIE_WORLD_SIZE", "COLLIE_LOCAL_RANK", "COLLIE_LOCAL_SIZE",
                        "COLLIE_STORE", "COLLIE_JOB_TOKEN")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def launch(nproc, script, *args, cwd=None):
    cmd = [os.path.join(build_dir(), "collierun"), "-n", str(nproc), "--timeout", "40", sys.executable,
           os.path.join(EXAMPLES, script)] + list(args)
    r = subprocess.run(cmd, env=script_env(), capture_output=True, text=True, timeout=50, cwd=cwd)
    assert r.returncode == 0, "%s exited %d\n%s\n%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr)
    return r.stdout


only_in_one_rank_session = pytest.mark.skipif(
    os.environ.get("COLLIE_WORLD_SIZE", "1") != "1", reason="launches its own 4-rank jobs (1-rank session only)"
)


@only_in_one_rank_session
@pytest.mark.parametrize(
    "script,expect",
    [
        ("allreduce.py", "allreduce: sum 10, avg 2.5 over 4 ranks"),
        ("sendrecv_ring.py", "ring: token came back as 6 after 4 hops"),
        ("allgather.py", "allgather: first element of each rank's block: [0.0, 100.0, 200.0, 300.0]"),
        ("broadcast.py", "broadcast: rank 3's weights reached 4 ranks"),
        ("objects.py", "objects: gathered"),
        ("batch_p2p.py", "batch_p2p: rank 0 got 32 from the left and 11 from the right"),
    ],
)
def test_script_under_collierun(script, expect, tmp_path):
    assert expect in launch(4, script, cwd=str(tmp_path))


@only_in_one_rank_session
@pytest.mark.parametrize("victim,store,transport", [(2, None, "shm"), (0, None, "shm"), (0, None, "tcp"),
                                                    (0, "file", "shm")])
def test_elastic_script_loses_a_rank_and_goes_on(victim, store, transport, tmp_path, monkeypatch):
    # A rank SIGKILLs itself at step 10; the survivors shrink and finish the
    # 30 steps with exactly the weights of single-process training. collierun
    # serves the tcp store, so rank 0's death is survived with it too (on shm
    # and tcp), as with a file store.
    monkeypatch.setenv("COLLIE_TRANSPORT", transport)
    cmd = [os.path.join(build_dir(), "collierun"), "-n", "4", "--keep-going", "--timeout", "40"]
    if store:
        (tmp_path / "store").mkdir()
        cmd += ["--store", "file://%s" % (tmp_path / "store")]
    cmd += [sys.executable, os.path.join(EXAMPLES, "elastic.py"), "--kill-rank", str(victim), "--kill-step",
            "10", "--json", str(tmp_path / "el.json")]
    r = subprocess.run(cmd, env=script_env(), capture_output=True, text=True, timeout=50, cwd=str(tmp_path))
    # collierun reports the one rank killed on purpose, and only it.
    assert r.returncode != 0 and "rank %d (pid" % victim in r.stderr and "killed by signal 9" in r.stderr, r.stderr
    assert r.stderr.count("exited with status") == 0, r.stderr
    assert "elastic: 30 steps" in r.stdout and "ranks 4 -> 3" in r.stdout, r.stdout + r.stderr
    assert r.stdout.count("shrinking") == 3, r.stdout
    s = subprocess.run([sys.executable, os.path.join(EXAMPLES, "elastic.py"), "--single", "--json",
                        str(tmp_path / "single.json"), "--quiet"], env=script_env(), capture_output=True,
                       text=True, timeout=50)
    assert s.returncode == 0, s.stderr
    el, single = json.load(open(tmp_path / "el.json")), json.load(open(tmp_path / "single.json"))
    assert el["sizes"] == [4] * 10 + [3] * 20
    np.testing.assert_allclose(el["w"], single["w"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(el["losses"], single["losses"], rtol=1e-9)
    assert el["losses"][-1] < el["losses"][0] / 1000  # it learns


@only_in_one_rank_session
def test_train_dp_script_4_ranks_with_telemetry(tmp_path):
    logs = tmp_path / "logs"
    launch(4, "train_dp.py", "--steps", "30", "--bucket-mb", "0.004", "--log-dir", str(logs), "--json",
           str(tmp_path / "dp.json"), "--quiet", cwd=str(tmp_path))
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, "train_dp.py"), "--single", "--steps", "30", "--json",
                        str(tmp_path / "single.json"), "--quiet"], env=script_env(), capture_output=True, text=True,
                       timeout=50)
    assert r.returncode == 0, r.stderr
    dp = json.load(open(tmp_path / "dp.json"))["losses"]
    single = json.load(open(tmp_path / "single.json"))["losses"]
    assert len(dp) == len(single) == 30
    np.testing.assert_allclose(dp, single, rtol=1e-4)
    assert dp[-1] < dp[0] / 4

    with open(logs / "comms.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == list(range(1, 31))
    assert all(r["world_size"] == "4" for r in rows)
    # 4 parameters in >1 bucket plus the loss, all-reduced every step: the wire model's bytes.
    nparams = 32 * 64 + 64 + 64 + 1
    assert all(int(r["bytes_all_reduce"]) == 2 * 3 * (4 * nparams) // 4 + 2 * 3 * 8 // 4 for r in rows) or \
        all(int(r["bytes_all_reduce"]) > 2 * 3 * 4 * nparams // 4 for r in rows)
    assert all(int(r["bytes_other"]) == int(r["bytes_all_reduce"]) for r in rows)
    for q in range(4):
        with open(logs / ("timing-rank%d.csv" % q)) as f:
            trows = list(csv.DictReader(f))
        ops = {(r["operation"], r["layer_name"]) for r in trows}
        assert {("FORWARD", "mlp"), ("BACKWARD", "mlp"), ("OPTIMIZER", "mlp"), ("ALLREDUCE", "bucket0"),
                ("ALLREDUCE", "bucket1"), ("ALLREDUCE", "loss")} <= ops
        assert {r["iteration"] for r in trows} == {str(i) for i in range(1, 31)}


def test_nccl_library_found(rank):
    """python -m collie.nccl finds the NCCL-API library beside the collie
    library in use (the build tree's nccl/ here), as an absolute path to
    give LD_PRELOAD."""
    import collie.nccl

    p = collie.nccl.library_path()
    assert os.path.isabs(p) and os.path.isfile(p) and p.endswith("libcollie-nccl.so"), p
    if rank == 0:
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        out = subprocess.run([sys.executable, "-m", "collie.nccl"], capture_output=True, text=True,
                             timeout=60, env=env)
        assert out.returncode == 0 and out.stdout.strip() == p, (out.returncode, out.stdout, out.stderr)
