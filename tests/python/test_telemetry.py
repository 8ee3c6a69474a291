"""Telemetry from Python: collie.distributed's wrappers with payload
categories and steps write comms.csv rows (rank 0) with the wire model's
bytes; configure() switches comms.csv for communicators created after it
(mapping, JSON, YAML); collie.timing writes timing-rank{i}.csv through the C
library, deferred until a communicator exists, with user regions on the
same monotonic clock."""

import csv
import json
import os
import re
import sys
import time

import numpy as np
import pytest

import collie
from collie import PayloadCategory, distributed as dist, timing

from telemetry_columns import HEADER, TIMING_HEADER  # noqa: E402


def read_rows(path):
    with open(path) as f:
        lines = f.read().splitlines()
    return lines[0], list(csv.DictReader(lines))


def test_payload_category_values():
    # The enum mirrors collie_category_t (include/collie.h) and its comms.csv columns.
    names = [c.name for c in sorted(PayloadCategory, key=int)]
    assert names == ["OTHER", "FEATURES_ALLGATHER", "MOMENTS_MU", "MOMENTS_SIGMA_FULL", "MOMENTS_SIGMA_DIAG",
                     "MIXTURE_MU_K", "MIXTURE_SIGMA_K", "THIRD_MOMENT_SKETCH", "TOPR_INDICES"]


def test_comms_csv_rows(comm, rank, size, shared_dir):
    logdir = os.path.join(shared_dir, "comms")
    with collie.new_comm(name="tele", hints={"log_dir": logdir, "comms_log": True}) as c:
        with dist.step(1, 0, group=c):
            x = np.ones(1024, dtype=np.float32)  # 4096 bytes
            dist.all_reduce(x, group=c, category=PayloadCategory.MOMENTS_MU)
            outs = [np.zeros(64, np.float32) for _ in range(size)]
            dist.all_gather(outs, np.ones(64, np.float32), group=c, category=PayloadCategory.FEATURES_ALLGATHER)
            rs = np.zeros(64, np.float32)
            dist.reduce_scatter(rs, [np.ones(64, np.float32) for _ in range(size)], group=c,
                                category="topr_indices")
            dist.broadcast(np.ones(128, np.float32), 0, group=c)  # 512 bytes, OTHER
        assert x[0] == size and rs[0] == size
        with c.step(2, 1):
            y = np.ones(256, dtype=np.float64)
            w = dist.all_reduce(y, group=c, async_op=True, category=PayloadCategory.MIXTURE_SIGMA_K)
            assert isinstance(w, collie.Work)
        w.wait()  # completes after the step ended: still charged to step 2
        assert dist.all_reduce(np.ones(4), group=c) is None  # outside any step: no row
    if rank != 0:
        return  # only rank 0 writes comms.csv (the directory is shared)
    header, rows = read_rows(os.path.join(logdir, "comms.csv"))
    assert header == HEADER
    assert [r["step"] for r in rows] == ["1", "2"] and [r["epoch"] for r in rows] == ["0", "1"]
    r1, r2 = rows
    ar = 2 * (size - 1) * 4096 // size
    ag = (size - 1) * 256
    assert int(r1["world_size"]) == size
    assert int(r1["bytes_all_reduce"]) == ar and int(r1["bytes_moments_mu"]) == ar
    assert int(r1["bytes_all_gather"]) == ag and int(r1["bytes_features_allgather"]) == ag
    assert int(r1["bytes_reduce_scatter"]) == ag and int(r1["bytes_topr_indices"]) == ag
    assert int(r1["bytes_broadcast"]) == 512 and int(r1["bytes_other"]) == 512
    assert int(r1["bytes_total"]) == ar + 2 * ag + 512
    assert float(r1["t_total_ms"]) >= 0 and float(r1["t_all_reduce_ms"]) >= 0
    assert int(r2["bytes_all_reduce"]) == 2 * (size - 1) * 2048 // size == int(r2["bytes_mixture_sigmaK"])


def test_configure_disables_comms_log(comm, rank, shared_dir):
    logdir = os.path.join(shared_dir, "off")
    with pytest.warns(UserWarning, match="created from now on"):  # the session comm exists
        eff = dist.configure({"runtime": {"comms_log": {"enabled": False, "dir": logdir}}, "model": {"lr": 1}})
    try:
        assert eff["COLLIE_COMMS_LOG"] == "0" and eff["COLLIE_LOG_DIR"] == logdir
        assert dist.current_config() == eff
        with collie.new_comm(name="quiet") as c:
            with dist.step(1, group=c):
                dist.all_reduce(np.ones(8), group=c)
        assert not os.path.exists(os.path.join(logdir, "comms.csv"))
    finally:
        assert dist.configure(None) == {}
    assert dist.current_config() == {}


def _config_file_roundtrip(path, logdir, rank, timing_dir=None):
    with pytest.warns(UserWarning):
        eff = dist.configure(path)
    try:
        want = {"COLLIE_COMMS_LOG": "1", "COLLIE_LOG_DIR": logdir}
        if timing_dir:
            want["COLLIE_TIMING_LOG"] = timing_dir
        assert eff == want
        with collie.new_comm(name="configured") as c:
            with dist.step(7, 2, group=c):
                dist.all_reduce(np.ones(16, dtype=np.float32), group=c, category=PayloadCategory.MOMENTS_SIGMA_DIAG)
    finally:
        dist.configure(None)
    if timing_dir:  # every rank: its timing log, opened at init from the configuration
        _, trows = read_rows(os.path.join(timing_dir, "timing-rank%d.csv" % rank))
        assert [r["operation"] for r in trows] == ["ALLREDUCE"] and trows[0]["iteration"] == "7"
    if rank == 0:
        _, rows = read_rows(os.path.join(logdir, "comms.csv"))
        assert [(r["step"], r["epoch"]) for r in rows] == [("7", "2")]
        assert int(rows[0]["bytes_moments_sigma_diag"]) == int(rows[0]["bytes_all_reduce"])


def test_configure_from_json(comm, rank, shared_dir):
    logdir = os.path.join(shared_dir, "json")
    path = os.path.join(shared_dir, "cfg-%d.json" % rank)
    timing_dir = os.path.join(shared_dir, "json-timing")
    with open(path, "w") as f:
        json.dump({"runtime": {"comms_log": {"enabled": True, "dir": logdir},
                               "timing_log": {"enabled": True, "dir": timing_dir}}}, f)
    _config_file_roundtrip(path, logdir, rank, timing_dir)


def test_configure_from_yaml(comm, rank, shared_dir, monkeypatch):
    logdir = os.path.join(shared_dir, "yaml")
    path = os.path.join(shared_dir, "cfg-%d.yaml" % rank)
    with open(path, "w") as f:
        f.write("runtime:\n  comms_log:\n    enabled: true\n    dir: %s\ntraining:\n  epochs: 3\n" % logdir)
    import importlib.util

    if importlib.util.find_spec("yaml") is not None:
        _config_file_roundtrip(path, logdir, rank)
    monkeypatch.setitem(sys.modules, "yaml", None)  # as if PyYAML were not installed
    with pytest.raises(collie.InvalidArgument, match="PyYAML is not installed"):
        dist.configure(path)


def test_configure_errors(tmp_path):
    with pytest.raises(collie.InvalidArgument, match="must be a boolean"):
        dist.configure({"runtime": {"comms_log": {"enabled": "maybe"}}})
    with pytest.raises(collie.InvalidArgument, match="runtime must be a mapping"):
        dist.configure({"runtime": 5})
    with pytest.raises(collie.InvalidArgument, match="mapping or a file path"):
        dist.configure(42)
    with pytest.raises(collie.InvalidArgument, match="cannot read"):
        dist.configure(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(collie.InvalidArgument, match="not valid JSON"):
        dist.configure(str(bad))
    with pytest.raises(collie.InvalidArgument, match="timing_log.dir is missing"):
        dist.configure({"runtime": {"timing_log": {"enabled": True}}})
    assert dist.current_config() == {}


def test_step_errors(comm):
    with pytest.raises(collie.InvalidArgument, match="step"):
        comm.step_begin(0, 0)
    comm.step_begin(5, 0)
    try:
        assert comm.current_step == (5, 0)
        with pytest.raises(collie.InvalidUsage, match="still open"):
            comm.step_begin(6, 0)
    finally:
        comm.step_end()
    assert comm.current_step is None
    with pytest.raises(collie.InvalidUsage):
        comm.step_end()


def test_distributed_wrappers_default_group(comm, rank, size):
    assert dist.is_initialized() and dist.get_rank() == rank and dist.get_world_size() == size
    x = np.full(3, rank, dtype=np.int64)
    assert dist.all_reduce(x, op=collie.ReduceOp.MAX) is None
    assert x[0] == size - 1
    out = np.zeros(size * 2, dtype=np.float32)
    dist.all_gather_into_tensor(out, np.full(2, rank, dtype=np.float32), async_op=True).wait()
    assert list(out[::2]) == list(range(size))
    r = np.zeros(2, dtype=np.float32)
    dist.reduce_scatter_tensor(r, np.ones(2 * size, dtype=np.float32), category=PayloadCategory.TOPR_INDICES)
    assert r[0] == size
    b = np.full(2, rank, dtype=np.int32)
    dist.broadcast(b, src=size - 1, category=PayloadCategory.OTHER)
    assert b[0] == size - 1
    dist.barrier()


def test_timing_logger(comm, rank, size, shared_dir):
    logdir = os.path.join(shared_dir, "timing", "nested")  # created with its parents
    timing.shutdown_timing_logger()
    collie.set_default_comm(None)
    try:
        lg = timing.init_timing_logger(rank, logdir)
        assert lg.comm is None and timing.get_timing_logger() is lg  # no communicator yet
        t_before = time.monotonic()
        lg.record_timing("EARLY", 1.0, "pre", 10)  # written with no communicator at all
        c = collie.new_comm(name="timed")
        try:
            assert lg.comm is c and collie.get_default_comm() is c
            assert timing.init_timing_logger(rank, logdir) is lg  # same dir: the same logger
            with pytest.raises(collie.InvalidUsage, match="shutdown_timing_logger"):
                timing.init_timing_logger(rank, os.path.join(shared_dir, "other"))
            lg.record_timing("COMPRESS", 2.5, layer_name="enc.l3", message_size=4096, phase="sparse")
            x = np.ones(32, dtype=np.float32)
            with lg.record_mpi_operation("WRAPPED", message_size=x.nbytes, layer_name="enc.l4"):
                c.all_reduce(x, label="enc.l4", category=PayloadCategory.MOMENTS_MU)
            with c.step(3, 1):
                lg.record_timing("INSTEP", 0.5, "enc.l5", iteration=3, epoch=1)
                lg.record_timing("GIVEN", 0.5, "enc.l5", iteration=99, epoch=4)  # written as given
                lg.record_timing("STEPPED", 0.5, "enc.l5")  # none given: the open step's
            with pytest.raises(collie.InvalidArgument):
                lg.record_timing("", 1.0)
            with pytest.raises(collie.InvalidArgument):
                lg.record_timing("NEG", -1.0)
            with pytest.raises(RuntimeError):
                with lg.record_mpi_operation("RAISED"):
                    raise RuntimeError("the region is still recorded")
            t_after = time.monotonic()
            path = lg.path
            timing.shutdown_timing_logger()
            assert timing.get_timing_logger() is None
        finally:
            c.finalize()
    finally:
        timing.shutdown_timing_logger()
        collie.set_default_comm(comm)
    assert path == os.path.join(logdir, "timing-rank%d.csv" % rank)
    header, rows = read_rows(path)
    assert header == TIMING_HEADER
    by_op = {r["operation"]: r for r in rows}
    assert set(by_op) >= {"EARLY", "COMPRESS", "WRAPPED", "ALLREDUCE", "INSTEP", "GIVEN", "STEPPED", "RAISED"}
    assert by_op["EARLY"]["layer_name"] == "pre" and by_op["EARLY"]["message_size_bytes"] == "10"
    comp = by_op["COMPRESS"]
    assert (comp["layer_name"], comp["phase"], comp["message_size_bytes"]) == ("enc.l3", "sparse", "4096")
    assert abs(float(comp["elapsed_ms"]) - 2.5) < 0.01
    ar, wr = by_op["ALLREDUCE"], by_op["WRAPPED"]
    assert ar["layer_name"] == "enc.l4" and ar["message_size_bytes"] == "128" and ar["phase"] == "dense"
    # The user's region and collie's own row share the monotonic clock: it contains the operation.
    assert float(wr["start_counter"]) <= float(ar["start_counter"]) + 1e-5
    assert float(ar["end_counter"]) <= float(wr["end_counter"]) + 1e-5
    for r in rows:
        assert t_before - 1.5 <= float(r["start_counter"]) <= float(r["end_counter"]) <= t_after + 1e-3
    assert (by_op["INSTEP"]["iteration"], by_op["INSTEP"]["epoch"]) == ("3", "1")
    assert (by_op["GIVEN"]["iteration"], by_op["GIVEN"]["epoch"]) == ("99", "4")
    assert (by_op["STEPPED"]["iteration"], by_op["STEPPED"]["epoch"]) == ("3", "1")
    assert by_op["COMPRESS"]["iteration"] == "0"
    assert os.path.exists(os.path.join(logdir, "timing-rank%d.meta" % rank))
    _, cats = read_rows(os.path.join(logdir, "timing-rank%d.categories.csv" % rank))
    assert any(r["operation"] == "ALLREDUCE" and r["category"] == "moments_mu" for r in cats)
    comm.barrier()


def test_timing_logger_without_communicator(tmp_path, comm):
    """The timing logger integration guide's calls in a process that has no
    collie communicator (as an mpi4py trainer): the rank given names the
    file, iteration and epoch are written as given."""
    timing.shutdown_timing_logger()
    collie.set_default_comm(None)
    try:
        lg = timing.init_timing_logger(7, str(tmp_path / "alone"), flush_ms=50)
        assert lg.comm is None and lg.path.endswith("timing-rank7.csv")
        lg.record_timing(operation="ALLREDUCE", elapsed_ms=5.234, layer_name="layer1", message_size=110280000,
                         phase="dense", iteration=100, epoch=0)
        with lg.record_mpi_operation("MPI_Allreduce", 4096, "layer2", "dense", iteration=101, epoch=0):
            time.sleep(0.002)
        with pytest.raises(collie.InvalidArgument, match="iteration = -1"):
            lg.record_timing("X", 1.0, iteration=-1)
        with pytest.raises(collie.InvalidArgument, match="rank = -1"):
            timing.init_timing_logger(-1, str(tmp_path / "bad"))
        # The writer runs every 50 ms: the rows reach the disk before
        # shutdown (polled: a loaded machine may delay the writer thread).
        deadline = time.monotonic() + 10
        while True:
            text = ""
            if os.path.exists(lg.path):
                with open(lg.path) as f:
                    text = f.read()
            if text.count("\n") >= 3 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        header, rows = read_rows(lg.path)
        assert header == TIMING_HEADER and len(rows) == 2
        timing.shutdown_timing_logger()
        with pytest.raises(collie.InvalidUsage, match="shut down"):
            lg.record_timing("LATE", 1.0)
    finally:
        timing.shutdown_timing_logger()
        collie.set_default_comm(comm)
    by_op = {r["operation"]: r for r in rows}
    a = by_op["ALLREDUCE"]
    assert (a["iteration"], a["epoch"], a["layer_name"], a["message_size_bytes"]) == ("100", "0", "layer1", "110280000")
    assert abs(float(a["elapsed_ms"]) - 5.234) < 0.002
    m = by_op["MPI_Allreduce"]
    assert m["iteration"] == "101" and float(m["elapsed_ms"]) >= 2.0


def test_flight_dump(comm, rank, shared_dir):
    logdir = os.path.join(shared_dir, "flight")
    os.makedirs(logdir, exist_ok=True)
    with collie.new_comm(name="fr", hints={"log_dir": logdir}) as c:
        c.all_reduce(np.ones(4))
        c.flight_dump()
        dumps = [f for f in os.listdir(logdir) if f.startswith("flight-rank%d-" % rank)]
        assert len(dumps) == 1
        with open(os.path.join(logdir, dumps[0])) as f:
            d = json.load(f)
        assert d["rank"] == rank and d["reason"] == "user"


REGISTER = r"""
import os, sys, csv
import numpy as np
import collie
d = sys.argv[1]
before = collie.new_comm(name="before", rank=0, world_size=1, hints={"log_dir": os.path.join(d, "a")})
cat = collie.register_category("my_sketch")
assert collie.register_category("my_sketch") == cat >= 9
try:
    before.broadcast(np.ones(4), 0, category=cat)
except collie.InvalidArgument as e:
    assert "registered after" in str(e), e
else:
    raise SystemExit("category registered after init was accepted")
try:
    collie.register_category("moments_mu")
except collie.InvalidArgument:
    pass
else:
    raise SystemExit("a built-in name was accepted")
after = collie.new_comm(name="after", rank=0, world_size=1, hints={"log_dir": os.path.join(d, "b")})
with after.step(1, 0):
    after.broadcast(np.ones(4), 0, category="my_sketch")   # by name: the registered id
after.finalize(); before.finalize()
rows = list(csv.DictReader(open(os.path.join(d, "b", "comms.csv"))))
assert rows[0]["bytes_my_sketch"] == "32" and rows[0]["bytes_broadcast"] == "32", rows
print("registered ok")
"""


def test_register_category(tmp_path):
    # In a child process: a registration is process-wide and changes the
    # comms.csv header of every communicator created afterwards.
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("COLLIE_") or k == "COLLIE_LIBRARY"}
    env["PYTHONPATH"] = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                     "python")
    r = subprocess.run([sys.executable, "-c", REGISTER, str(tmp_path)], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "registered ok" in r.stdout, r.stdout + r.stderr


@pytest.mark.skipif(os.environ.get("COLLIE_WORLD_SIZE", "1") != "1",
                    reason="launches its own 2-rank mpirun job (1-rank session only)")
def test_timing_logger_under_mpirun_mpi4py(tmp_path):
    """The integration guide's calls in an mpi4py trainer under Open MPI's
    mpirun, no collie communicator: each rank's file has its own rows with
    the iterations it gave, and the guide's record_timing row as given."""
    import shutil
    import subprocess
    import sys

    mpirun = shutil.which("mpirun")
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        mpirun = None
    if not mpirun:
        pytest.skip("needs Open MPI's mpirun and mpi4py (apt-get install openmpi-bin python3-mpi4py)")
    here = os.path.dirname(os.path.abspath(__file__))
    logs = tmp_path / "logs"
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLLIE_") or k == "COLLIE_LIBRARY"}
    env["PYTHONPATH"] = os.path.join(os.path.dirname(os.path.dirname(here)), "python")
    env["OMPI_MCA_plm_rsh_agent"] = ""  # one host: no ssh
    r = subprocess.run([mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "2", sys.executable,
                        os.path.join(here, "jobs", "timing_guide_mpi4py.py"), str(logs)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    # (The two ranks share the pipe: their lines may interleave.)
    assert sorted(re.findall(r"ok (\d) 2\.0", r.stdout)) == ["0", "1"], r.stdout
    for q in range(2):
        header, rows = read_rows(str(logs / ("timing-rank%d.csv" % q)))
        assert header == TIMING_HEADER
        assert [(x["operation"], x["iteration"], x["epoch"], x["message_size_bytes"]) for x in rows if
                x["message_size_bytes"] == "4000"] == [("ALLREDUCE", str(i), "0", "4000") for i in range(3)]
        guide = [x for x in rows if x["iteration"] == "100"]
        assert len(guide) == 1 and guide[0]["message_size_bytes"] == "110280000"
        assert abs(float(guide[0]["elapsed_ms"]) - 5.234) < 0.002
