"""torchcomms' calls as its users write them (issue 35): the guide's
examples (examples/python/torchcomms, run in every rank of this session),
new_comm's signature, backend names and device, CommOptions and the
per-operation option classes with their hints, torchcomms' environment
variables, abort_process_on_timeout_or_error, and torchcomms' argument
orders. Every rank runs the same tests in the same order (conftest.py)."""

import datetime
import importlib
import logging
import os
import subprocess
import sys

import pytest

import collie
from collie import objcol

from conftest import ROOT, build_dir, launched

torch = pytest.importorskip("torch")

EXAMPLES = os.path.join(ROOT, "examples", "python", "torchcomms")
sys.path.insert(0, EXAMPLES)
CPU = torch.device("cpu")


def _size():
    return int(os.environ.get("COLLIE_WORLD_SIZE", "1"))


@pytest.fixture
def world(monkeypatch):
    """The launcher's world (as torchrun would set it) even at one rank."""
    if not launched():
        monkeypatch.setenv("COLLIE_RANK", "0")
        monkeypatch.setenv("COLLIE_WORLD_SIZE", "1")
    return _size()


# ---- the guide's examples ---------------------------------------------------

@pytest.mark.parametrize("name", [
    "ex1_allreduce_sync", "ex2_allreduce_async", "ex4_sendrecv_async", "ex5_custom_options",
    "ex7_window", "ex8_objcol", "ex9_batch_and_collectives"])
def test_guide_example(name, world, capsys):
    importlib.import_module(name).main()  # each asserts its own results
    out = capsys.readouterr().out
    if name == "ex1_allreduce_sync":
        assert "After AllReduce: %s" % float(world * (world + 1) / 2) in out


def test_guide_example_store(world, shared_dir, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", str(world))
    importlib.import_module("ex3_store").main(os.path.join(shared_dir, "filestore"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (scripts/gpu_check.sh runs it)")
def test_guide_example_cuda_graph(world):
    importlib.import_module("ex6_cuda_graph").main()


# ---- new_comm: backend, device, name, options ---------------------------------

def test_new_comm_torchcomms_signatures(world, monkeypatch):
    """The spellings torchcomms' examples use, positional and keyword."""
    monkeypatch.setenv("COLLIE_BACKEND_ALIASES", "ncclx,gloo")
    a = collie.new_comm("ncclx", CPU, name="main_comm")
    b = collie.new_comm(backend="gloo", device=CPU, name="second")
    c = collie.new_comm("collie", "cpu")
    try:
        assert a.get_name() == "main_comm" and b.get_name() == "second" and c.get_name() == "main_comm"
        assert a.get_backend() == "ncclx" and c.get_backend() == "collie"
        assert a.get_device() == CPU and c.get_device() == "cpu"
        assert a.get_size() == world
        t = torch.ones(3)
        b.all_reduce(t, collie.ReduceOp.SUM, False)
        assert t.tolist() == [float(world)] * 3
    finally:
        for x in (c, b, a):
            x.finalize()


def test_backend_names_refused(world, monkeypatch):
    monkeypatch.delenv("COLLIE_BACKEND_ALIASES", raising=False)
    with pytest.raises(collie.InvalidArgument, match=r"'ncclx' is Meta's NCCLX.*COLLIE_BACKEND_ALIASES=ncclx"):
        collie.new_comm("ncclx", CPU, name="main_comm")
    with pytest.raises(collie.InvalidArgument, match=r"'mpi' is not a backend: collie runs \"collie\".*gloo"):
        collie.new_comm("mpi", CPU)
    monkeypatch.setenv("COLLIE_BACKEND_ALIASES", "gloo")
    with pytest.raises(collie.InvalidArgument, match="'nccl' is NVIDIA's NCCL"):
        collie.new_comm("nccl", CPU)  # only gloo was opted in
    monkeypatch.setenv("COLLIE_BACKEND_ALIASES", "gloo,infiniband")
    with pytest.raises(collie.InvalidArgument, match="COLLIE_BACKEND_ALIASES = 'gloo,infiniband' names infiniband"):
        collie.new_comm("gloo", CPU)
    with pytest.raises(collie.InvalidArgument, match="backend = 7 must be a str"):
        collie.new_comm(7, CPU)


def test_device_refused_and_checked(world, monkeypatch):
    with pytest.raises(collie.InvalidArgument, match=r"device = datetime.timedelta.*is not a device"):
        collie.new_comm("collie", datetime.timedelta(seconds=1))
    with pytest.raises(collie.InvalidArgument, match="collie communicates CPU and CUDA memory"):
        collie.new_comm("collie", torch.device("meta"))
    with pytest.raises(collie.InvalidArgument, match="bad index"):
        collie.new_comm("collie", "cuda:x")
    c = collie.new_comm("collie", "cuda:0")  # made; checked per call
    try:
        with pytest.raises(collie.InvalidArgument,
                           match="all_reduce: tensor is on cpu but the communicator was made for device cuda:0"):
            c.all_reduce(torch.ones(2), collie.ReduceOp.SUM, False)
        with pytest.raises(collie.InvalidArgument, match=r"all_gather: tensor is on cpu"):
            c.all_gather([torch.ones(1)] * world, torch.ones(1), False)
        with pytest.raises(collie.InvalidArgument, match="batch.send: tensor is on cpu"):
            c.batch_op_create().send(torch.ones(1), 0)
    finally:
        c.finalize()


def test_old_spellings_still_work(world):
    """new_comm() and new_comm(name=...) as before; collie's own keywords."""
    with collie.new_comm() as a, collie.new_comm(name="kw", timeout=20, hints={"transport": "tcp"}) as b:
        assert a.get_name() == "main_comm" and b.get_name() == "kw"
        x = torch.ones(2)
        b.all_reduce(x, collie.ReduceOp.SUM, False, datetime.timedelta(seconds=5))  # collie's order
        assert x[0].item() == world


def test_comm_options(world, capfd):
    opts = collie.CommOptions(abort_process_on_timeout_or_error=False, timeout=datetime.timedelta(seconds=12),
                              name="from_options", hints={"transport": "tcp", "is_high_priority_stream": "true"})
    with collie.new_comm("collie", CPU, options=opts) as c:
        assert c.get_name() == "from_options"
        got = c.get_options()
        assert got.timeout == datetime.timedelta(seconds=12)
        # Kept, and ignored (not a collie setting): no error, no warning variable.
        assert got.hints["is_high_priority_stream"] == "true"
        assert got.abort_process_on_timeout_or_error is False
    # ... and never handed to the C library, which would warn about an unknown variable.
    assert "is not a collie variable" not in capfd.readouterr().err
    with collie.new_comm("collie", CPU, name="kw_wins", options=opts) as c:
        assert c.get_name() == "kw_wins"


@pytest.mark.parametrize("field,value,message", [
    ("timeout", "soon", r"CommOptions.timeout = 'soon' must be a datetime.timedelta or seconds"),
    ("timeout", -1, r"CommOptions.timeout = -1 must be positive"),
    ("abort_process_on_timeout_or_error", "yes", r"abort_process_on_timeout_or_error = 'yes' must be a bool"),
    ("name", 3, r"CommOptions.name = 3 must be a str"),
    ("hints", ["transport"], r"CommOptions.hints = \['transport'\] must be a dict"),
    ("hints", {1: "x"}, r"CommOptions.hints: key 1 must be a str"),
    ("enable_reconfigure", 1, r"enable_reconfigure = 1 must be a bool"),
])
def test_comm_options_refused(field, value, message):
    with pytest.raises(collie.InvalidArgument, match=message):
        collie.CommOptions(**{field: value})
    o = collie.CommOptions()
    with pytest.raises(collie.InvalidArgument, match=message):
        setattr(o, field, value)


def test_enable_reconfigure_refused(world, comm):
    with pytest.raises(collie.Unsupported, match="no reconfigure.*shrink"):
        collie.new_comm("collie", CPU, options=collie.CommOptions(enable_reconfigure=True))
    with pytest.raises(collie.Unsupported, match="no reconfigure.*shrink"):
        comm.reconfigure(1, [])
    with pytest.raises(collie.Unsupported, match="hooks are not offered"):
        comm.register_pre_hook(print)
    with pytest.raises(collie.Unsupported, match="map_remote_tensor"):
        collie.Window(comm, None).map_remote_tensor(0)


OPTION_CLASSES = [
    collie.SendOptions, collie.RecvOptions, collie.BatchP2POptions, collie.BroadcastOptions,
    collie.AllReduceOptions, collie.ReduceOptions, collie.AllGatherOptions, collie.AllGatherSingleOptions,
    collie.ReduceScatterOptions, collie.ReduceScatterSingleOptions, collie.AllToAllOptions,
    collie.AllToAllSingleOptions, collie.AllToAllvSingleOptions, collie.BarrierOptions, collie.ScatterOptions,
    collie.GatherOptions, collie.AllGatherPInitOptions, collie.AllGatherPExecOptions, collie.SplitOptions,
]


@pytest.mark.parametrize("cls", OPTION_CLASSES, ids=lambda c: c.__name__)
def test_option_class(cls):
    o = cls(timeout=datetime.timedelta(seconds=2), hints={"algorithm": "ring", "x": "y"})
    assert o.timeout == datetime.timedelta(seconds=2) and o.hints == {"algorithm": "ring", "x": "y"}
    e = cls()
    assert e.timeout is None and e.hints == {}
    e.timeout = 1.5
    assert e.timeout == datetime.timedelta(seconds=1.5)
    name = cls.__name__
    with pytest.raises(collie.InvalidArgument, match=r"%s.timeout = 'x' must be a datetime.timedelta" % name):
        cls(timeout="x")
    with pytest.raises(collie.InvalidArgument, match=r"%s.timeout = 0 must be positive" % name):
        e.timeout = 0
    with pytest.raises(collie.InvalidArgument, match=r"%s.hints = 5 must be a dict" % name):
        e.hints = 5
    with pytest.raises(collie.InvalidArgument, match=r"%s.hints\['k'\] = \[1\] must be a str" % name):
        cls(hints={"k": [1]})


def test_every_operation_takes_its_options(comm, rank, size):
    """options= on every operation, its timeout and hints applied, the
    wrong class refused naming the right one."""
    T = datetime.timedelta(seconds=10)
    t = torch.full((size * 2,), float(rank + 1))
    comm.all_reduce(t, collie.ReduceOp.SUM, False, options=collie.AllReduceOptions(timeout=T))
    assert t[0].item() == size * (size + 1) / 2
    comm.broadcast(t, 0, False, options=collie.BroadcastOptions(timeout=T))
    comm.reduce(t, 0, collie.ReduceOp.SUM, False, options=collie.ReduceOptions(timeout=T))
    comm.all_gather([torch.zeros(2) for _ in range(size)], torch.ones(2), False,
                    options=collie.AllGatherOptions(timeout=T))
    comm.all_gather_single(torch.zeros(size * 2), torch.ones(2), False,
                           options=collie.AllGatherSingleOptions(timeout=T))
    comm.reduce_scatter(torch.zeros(2), [torch.ones(2) for _ in range(size)], collie.ReduceOp.SUM, False,
                        options=collie.ReduceScatterOptions(timeout=T))
    comm.reduce_scatter_single(torch.zeros(2), torch.ones(size * 2), collie.ReduceOp.SUM, False,
                               options=collie.ReduceScatterSingleOptions(timeout=T))
    comm.all_to_all([torch.zeros(2) for _ in range(size)], [torch.ones(2) for _ in range(size)], False,
                    options=collie.AllToAllOptions(timeout=T))
    comm.all_to_all_single(torch.zeros(size * 2), torch.ones(size * 2), False,
                           options=collie.AllToAllSingleOptions(timeout=T))
    comm.all_to_all_v_single(torch.zeros(size), torch.ones(size), [1] * size, [1] * size, False,
                             options=collie.AllToAllvSingleOptions(timeout=T))
    comm.barrier(False, options=collie.BarrierOptions(timeout=T))
    comm.scatter(torch.zeros(2), [torch.ones(2)] * size if rank == 0 else None, 0, False,
                 options=collie.ScatterOptions(timeout=T))
    comm.gather([torch.zeros(2) for _ in range(size)] if rank == 0 else None, torch.ones(2), 0, False,
                options=collie.GatherOptions(timeout=T))
    b = comm.batch_op_create()
    b.send(torch.ones(1), (rank + 1) % size)
    b.recv(torch.zeros(1), (rank - 1) % size)
    b.issue(False, options=collie.BatchP2POptions(timeout=T))
    if size >= 2:
        if rank == 0:
            comm.send(torch.ones(1), 1, False, options=collie.SendOptions(timeout=T))
        elif rank == 1:
            comm.recv(torch.zeros(1), 0, False, options=collie.RecvOptions(timeout=T))
    with pytest.raises(collie.InvalidArgument, match="all_reduce: options = .*is not a AllReduceOptions"):
        comm.all_reduce(t, collie.ReduceOp.SUM, False, options=collie.BroadcastOptions())
    with pytest.raises(collie.InvalidArgument, match="barrier: options = 'fast' is not a BarrierOptions"):
        comm.barrier(False, options="fast")


def test_hints_change_the_call(comm, rank, size, caplog):
    """algorithm, category, label, phase and wire hints reach the C call:
    a bad value is refused naming the hint (so it was read), and the
    algorithm hint runs that algorithm (the flight recorder says which)."""
    t = torch.ones(8)
    with pytest.raises(collie.InvalidArgument, match=r"all_reduce: hints\['algorithm'\]: algorithm = 'warp'"):
        comm.all_reduce(t, collie.ReduceOp.SUM, False, hints={"algorithm": "warp"})
    with pytest.raises(collie.InvalidArgument,
                       match=r"all_reduce: AllReduceOptions.hints\['wire'\]: wire = 'fp8' is not one of"):
        comm.all_reduce(t, collie.ReduceOp.SUM, False, options=collie.AllReduceOptions(hints={"wire": "fp8"}))
    with pytest.raises(collie.InvalidArgument, match=r"broadcast: hints\['category'\]"):
        comm.broadcast(t, 0, False, hints={"category": -4})
    # Unknown names are ignored with a debug line, never an error.
    with caplog.at_level(logging.DEBUG, logger="collie"):
        comm.all_reduce(t, collie.ReduceOp.SUM, False, hints={"is_high_priority_stream": "true", "zzz": None})
    assert t[0].item() == size
    said = " ".join(r.getMessage() for r in caplog.records if r.name == "collie")
    assert "all_reduce: hint 'is_high_priority_stream' = 'true' is not one collie understands; ignored" in said, said
    # The hint reaches the C library, which checks the algorithm against the collective.
    with pytest.raises(collie.InvalidArgument, match='allreduce has no algorithm "bruck"'):
        comm.all_reduce(t, collie.ReduceOp.SUM, False, hints={"algo": "bruck"})
    comm.all_reduce(t, collie.ReduceOp.SUM, False, hints={"algorithm": "ring", "category": "moments_mu",
                                                         "label": "layer1", "phase": "dense"})
    # A keyword beats the hint.
    comm.all_reduce(t, collie.ReduceOp.SUM, False, hints={"algorithm": "bruck"}, algorithm="auto")


def test_torchcomm_timeout_seconds(world, monkeypatch):
    monkeypatch.delenv("COLLIE_TIMEOUT_MS", raising=False)
    monkeypatch.setenv("TORCHCOMM_TIMEOUT_SECONDS", "7")
    with collie.new_comm("collie", CPU) as c:
        assert c.get_options().timeout == datetime.timedelta(seconds=7)
    monkeypatch.setenv("COLLIE_TIMEOUT_MS", "9000")  # collie's own wins: no override from TORCHCOMM_*
    with collie.new_comm("collie", CPU) as c:
        assert c.get_options().timeout is None
    with collie.new_comm("collie", CPU, timeout=3) as c:  # the argument wins over both
        assert c.get_options().timeout == datetime.timedelta(seconds=3)
    monkeypatch.delenv("COLLIE_TIMEOUT_MS")
    monkeypatch.setenv("TORCHCOMM_TIMEOUT_SECONDS", "soon")
    with pytest.raises(collie.InvalidArgument, match="TORCHCOMM_TIMEOUT_SECONDS = 'soon'"):
        collie.new_comm("collie", CPU)


def test_abort_on_error_settings(world, monkeypatch):
    monkeypatch.setenv("TORCHCOMM_ABORT_ON_ERROR", "true")
    monkeypatch.delenv("COLLIE_ABORT_ON_ERROR", raising=False)
    with collie.new_comm("collie", CPU) as c:
        assert c.get_options().abort_process_on_timeout_or_error is True
    monkeypatch.setenv("COLLIE_ABORT_ON_ERROR", "0")  # collie's own wins
    with collie.new_comm("collie", CPU) as c:
        assert c.get_options().abort_process_on_timeout_or_error is False
    with collie.new_comm("collie", CPU, abort_process_on_timeout_or_error=True) as c:  # the argument wins
        assert c.get_options().abort_process_on_timeout_or_error is True
        # An argument error never ends the process: it raises.
        with pytest.raises(collie.InvalidArgument):
            c.all_reduce(torch.ones(2), "nope", False)
    monkeypatch.delenv("COLLIE_ABORT_ON_ERROR")
    monkeypatch.setenv("TORCHCOMM_ABORT_ON_ERROR", "maybe")
    with pytest.raises(collie.InvalidArgument, match="TORCHCOMM_ABORT_ON_ERROR = 'maybe' must be 1 or 0"):
        collie.new_comm("collie", CPU)


ABORT_JOB = r"""
import sys, torch, collie
comm = collie.new_comm("collie", torch.device("cpu"), abort_process_on_timeout_or_error=True, timeout=2)
if comm.get_rank() == 1:
    import time
    time.sleep(30)          # never joins: rank 0 times out
comm.all_reduce(torch.ones(4), collie.ReduceOp.SUM, async_op=False)
print("NOT REACHED", flush=True)
"""


def test_abort_process_on_timeout(rank, tmp_path):
    """abort_process_on_timeout_or_error=True: the rank whose allreduce
    timed out dies of SIGABRT after writing its flight record, and says why."""
    if rank != 0:
        pytest.skip("rank 0 runs the job")
    script = tmp_path / "job.py"
    script.write_text(ABORT_JOB)
    logs = tmp_path / "logs"
    logs.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COLLIE_RANK", "COLLIE_WORLD", "COLLIE_LOCAL",
                                                                     "COLLIE_STORE", "COLLIE_JOB"))}
    env["COLLIE_LOG_DIR"] = str(logs)
    env["PYTHONPATH"] = os.path.join(ROOT, "python")
    p = subprocess.run([os.path.join(build_dir(), "collierun"), "-n", "2", "--timeout", "60", sys.executable,
                        str(script)], env=env, capture_output=True, text=True, timeout=90)
    out = p.stdout + p.stderr
    assert "NOT REACHED" not in out
    assert "abort_process_on_timeout_or_error is set: aborting the process" in out, out
    assert "signal 6" in out or "SIGABRT" in out or "status 134" in out, out
    assert any(f.startswith("flight") for f in os.listdir(logs)), (os.listdir(logs), out)


# ---- the guide's calls --------------------------------------------------------

def test_main_concepts(comm, rank, size):
    """get_rank/get_size/get_name, split(ranks, name) into disjoint groups,
    the eight reduction ops, async work, finalize."""
    assert comm.get_rank() == rank and comm.get_size() == size and isinstance(comm.get_name(), str)
    half = [r for r in range(size) if (r < size // 2) == (rank < size // 2)] if size > 1 else [0]
    sub = comm.split(half, "half")
    try:
        assert sub.get_name() == "half" and sub.get_size() == len(half)
        assert sub.get_rank() == half.index(rank)
        x = torch.ones(2)
        sub.all_reduce(x, collie.ReduceOp.SUM, False)
        assert x[0].item() == len(half)
    finally:
        sub.finalize()
    assert comm.split([], "nobody") is None

    v = float(rank + 1)
    for op, want in [(collie.ReduceOp.SUM, size * (size + 1) / 2), (collie.ReduceOp.PRODUCT, float(_fact(size))),
                     (collie.ReduceOp.MIN, 1.0), (collie.ReduceOp.MAX, float(size)),
                     (collie.ReduceOp.AVG, (size + 1) / 2),
                     (collie.ReduceOp.PREMUL_SUM(2.0), size * (size + 1.0))]:
        t = torch.full((4,), v)
        w = comm.all_reduce(t, op, async_op=True)
        w.wait_blocking() if op == collie.ReduceOp.MIN else w.wait()
        assert w.is_completed()
        assert t[0].item() == pytest.approx(want), op
    for op, want in [(collie.ReduceOp.BAND, 0 if size > 1 else 1), (collie.ReduceOp.BOR, _or(size)),
                     (collie.ReduceOp.BXOR, _xor(size))]:
        t = torch.full((4,), 1 << rank, dtype=torch.int32)
        comm.all_reduce(t, op, async_op=False)
        assert t[0].item() == want, op


def _fact(n):
    out = 1
    for k in range(2, n + 1):
        out *= k
    return out


def _or(n):
    return (1 << n) - 1


def _xor(n):
    return (1 << n) - 1


def test_premul_sum(comm, rank, size):
    """Each rank's contribution times its own factor; the input of an
    out-of-place call is left as it was; a factor that changes the dtype,
    or an array that cannot multiply, is refused naming it."""
    inp = torch.full((size * 2,), 1.0)
    out = torch.zeros(2)
    comm.reduce_scatter_single(out, inp, collie.ReduceOp.PREMUL_SUM(float(rank + 1)), False)
    assert out[0].item() == size * (size + 1) / 2 and inp[0].item() == 1.0
    r = torch.ones(3)
    comm.reduce(r, 0, collie.ReduceOp.PREMUL_SUM(0.5), False)
    if rank == 0:
        assert r[0].item() == size * 0.5
    with pytest.raises(collie.InvalidArgument, match="PREMUL_SUM.*int32.*float"):
        comm.all_reduce(torch.ones(2, dtype=torch.int32), collie.ReduceOp.PREMUL_SUM(0.5), False)
    with pytest.raises(collie.InvalidArgument, match="PREMUL_SUM needs tensor to be an array that multiplies"):
        comm.all_reduce(bytearray(8), collie.ReduceOp.PREMUL_SUM(2.0), False)
    with pytest.raises(collie.InvalidArgument, match="factor = 'x' must be a finite number"):
        collie.ReduceOp.PREMUL_SUM("x")
    with pytest.raises(collie.InvalidArgument, match="PREMUL_SUM is taken by all_reduce"):
        comm.all_reduce_p_init(torch.ones(2), collie.ReduceOp.PREMUL_SUM(2.0))


def test_torchcomms_argument_orders(comm, rank, size):
    """send/recv(tensor, peer, async_op, hints, timeout) and collie's first
    (tensor, peer, tag, async_op, timeout); split's hints and timeout;
    the persistent allgather's torchcomms form."""
    if size >= 2 and rank < 2:
        peer = 1 - rank
        x = torch.full((3,), float(rank))
        if rank == 0:
            comm.send(x, peer, False, {"label": "p2p"}, datetime.timedelta(seconds=10)).wait()
            comm.send(x, peer, 5, True).wait()  # tag 5, async (collie's first order)
        else:
            comm.recv(x, peer, True, None, 10).wait()
            assert x[0].item() == 0.0
            x.fill_(9)
            comm.recv(x, peer, tag=5, async_op=True).wait()
            assert x[0].item() == 0.0
    sub = comm.split(list(range(size)), "all", {"k": "v"}, datetime.timedelta(seconds=5))
    sub.finalize()
    with pytest.raises(collie.InvalidArgument, match="split: hints = 3 must be a dict"):
        comm.split([0], "x", 3)
    out = torch.zeros(size * 2)
    handle = comm.all_gather_p_init(out)
    for k in range(3):
        w = comm.all_gather_p_exec(handle, torch.full((2,), float(rank + k)), True)
        w.wait()
        assert out.tolist() == [float(q + k) for q in range(size) for _ in range(2)]
    comm.all_gather_p_free(handle)
    with comm.all_gather_p_init(out, torch.ones(2)) as plan:  # collie's form
        comm.all_gather_p_exec(plan, False)
    assert out.tolist() == [1.0] * (size * 2)


def test_gather_single_and_all_to_all_uneven(comm, rank, size):
    out = torch.zeros(size * 2) if rank == 0 else None
    comm.gather_single(out, torch.full((2,), float(rank)), 0, False)
    if rank == 0:
        assert out.tolist() == [float(q) for q in range(size) for _ in range(2)]
    # Block q of rank r has q + r + 1 elements: the pair (r, q) agrees on it.
    ins = [torch.full((q + rank + 1,), float(rank)) for q in range(size)]
    outs = [torch.zeros(rank + q + 1) for q in range(size)]
    comm.all_to_all(outs, ins, False)
    assert [o.tolist() for o in outs] == [[float(q)] * (rank + q + 1) for q in range(size)]
    with pytest.raises(collie.InvalidArgument, match=r"all_to_all: input_tensor_list has 1 arrays, expected %d"
                       % size if size != 1 else "keeps for itself"):
        comm.all_to_all([torch.zeros(1)] * size, [torch.zeros(2)] if size != 1 else [torch.zeros(2)], False)


def test_objcol_torchcomms_module(comm, rank, size):
    """`import collie` gives collie.objcol, as torchcomms.objcol."""
    assert collie.objcol is objcol
    got = [None] * size
    collie.objcol.all_gather_object(comm, got, rank * 10)
    assert got == [q * 10 for q in range(size)]


def test_work_wait_in_capture_refused_without_gpu():
    """The capture checks ask torch only when its CUDA runtime was
    started: on a machine without a GPU nothing is refused."""
    w = collie.Work(None, None, None)
    assert w.wait() is True
