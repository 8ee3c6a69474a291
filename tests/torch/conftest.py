"""conftest.py - fixtures of the torch.distributed backend tests.

The tests are written against torch.distributed only. The backend under test
is COLLIE_TORCH_TEST_BACKEND (default "collie", which needs `import
collie.torch` first; "gloo" runs the same suite against PyTorch's own
backend, which is how the suite's references are checked). Tests that gloo
cannot run (an op it lacks) are skipped for gloo with the reason.

Every rank of a collierun job runs the same pytest session, in the same order
(the tests call collectives), so nothing may depend on the rank except
results and the rank's own part of a pattern that every rank agrees on.

Environment (tests/torch/run.sh sets it):
  COLLIE_TORCH_TEST_BACKEND   collie | gloo
  COLLIE_TORCH_TEST_INIT      env (default: init_process_group without an
                              init_method) | tcp://HOST:PORT | file:///PATH
  COLLIE_TORCH_TEST_PG_TIMEOUT  seconds, the default group's timeout (30)
  RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT  (torchrun's; filled in from
                              collierun's COLLIE_* when missing)
  COLLIE_TEST_BUILD_DIR       the build whose collierun the job tests start
  COLLIE_LOG_DIR, COLLIE_TIMING_LOG  telemetry directories (collie only)
"""

import datetime
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
JOBS = os.path.join(HERE, "jobs")

BACKEND = os.environ.get("COLLIE_TORCH_TEST_BACKEND", "collie")
INIT = os.environ.get("COLLIE_TORCH_TEST_INIT", "env")
IS_COLLIE = BACKEND == "collie"
PG_TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("COLLIE_TORCH_TEST_PG_TIMEOUT", "30")))
# The gloo group that keeps the ranks in step between tests and carries the
# harness's own messages. Longer than the default group's timeout, so that a
# rank stuck in a test's collective fails that test before this one gives up.
SYNC_TIMEOUT = datetime.timedelta(seconds=PG_TIMEOUT.total_seconds() + 30)

if not os.environ.get("COLLIE_LOG_DIR"):
    # Plain pytest: keep comms.csv out of the working tree (rank 0 alone
    # writes it, and rank 0 alone reads it back, so a per-rank dir is fine).
    import atexit

    _logs = tempfile.mkdtemp(prefix="collie-torch-logs-")
    os.environ["COLLIE_LOG_DIR"] = _logs
    atexit.register(shutil.rmtree, _logs, True)

import torch.distributed as dist  # noqa: E402

sys.path.insert(0, HERE)
# collie's Python package: the backend, and the wrappers test_wrappers runs on any backend.
sys.path.insert(0, os.path.join(ROOT, "python"))
if IS_COLLIE:
    import collie  # noqa: E402
    import collie.torch  # noqa: E402,F401  (registers the "collie" backend)

    # A category of our own, for test_telemetry: registered before the
    # communicators exist, as docs/telemetry.md requires.
    collie.register_category("gradients")


def free_port():
    """A TCP port that was free a moment ago (bound to port 0, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launcher_env():
    """RANK/WORLD_SIZE/MASTER_* from collierun's COLLIE_* variables when the
    launcher did not set torchrun's (or one rank alone under plain pytest)."""
    env = os.environ
    if "COLLIE_WORLD_SIZE" in env:
        env.setdefault("RANK", env["COLLIE_RANK"])
        env.setdefault("WORLD_SIZE", env["COLLIE_WORLD_SIZE"])
        env.setdefault("LOCAL_RANK", env.get("COLLIE_LOCAL_RANK", env["COLLIE_RANK"]))
        env.setdefault("LOCAL_WORLD_SIZE", env.get("COLLIE_LOCAL_SIZE", env["COLLIE_WORLD_SIZE"]))
        if "MASTER_PORT" not in env:
            # Not under run.sh: a port every rank derives alike from the job's
            # token (fresh for each collierun job).
            token = env.get("COLLIE_JOB_TOKEN", "0")
            env["MASTER_PORT"] = str(20000 + int(re.sub("[^0-9a-f]", "", token.lower())[:8] or "0", 16) % 30000)
    else:
        env.setdefault("RANK", "0")
        env.setdefault("WORLD_SIZE", "1")
        env.setdefault("MASTER_PORT", str(free_port()))
    env.setdefault("MASTER_ADDR", "127.0.0.1")


_launcher_env()
RANK = int(os.environ["RANK"])
SIZE = int(os.environ["WORLD_SIZE"])


def collie_only(why):
    """Skips a test for any backend but collie, saying why."""
    return pytest.mark.skipif(not IS_COLLIE, reason="%s backend: %s" % (BACKEND, why))


SESSION = os.environ.get("COLLIE_TORCH_TEST_SESSION", "")
# Tests that start jobs of their own (independent of the session's init
# method and size) run in one session of run.sh's, or whenever pytest runs
# outside run.sh; COLLIE_TORCH_TEST_ONCE=0 skips them altogether (CI's
# second torch, where they ran on the first).
once_per_run = pytest.mark.skipif(
    SESSION not in ("", "env2") or os.environ.get("COLLIE_TORCH_TEST_ONCE") == "0",
    reason="runs once: in run.sh's env2 session only, and not with COLLIE_TORCH_TEST_ONCE=0 (independent of the "
           "session)")


def needs_ranks(n):
    return pytest.mark.skipif(SIZE < n, reason="needs %d ranks (world size %d)" % (n, SIZE))


def init_kwargs(init=INIT, timeout=PG_TIMEOUT):
    """init_process_group's arguments for an init method spec."""
    kw = {"backend": BACKEND, "timeout": timeout}
    if init != "env":
        kw.update(init_method=init, rank=RANK, world_size=SIZE)
    return kw


class World:
    """The session's process groups: the default one (the backend under
    test) and `sync`, a gloo group for the harness."""

    def __init__(self):
        dist.init_process_group(**init_kwargs())
        self.rank = dist.get_rank()
        self.size = dist.get_world_size()
        assert (self.rank, self.size) == (RANK, SIZE)
        self.sync = dist.new_group(backend="gloo", timeout=SYNC_TIMEOUT)

    def share(self, obj, src=0):
        """obj of rank src, on every rank (over the harness group)."""
        holder = [obj]
        dist.broadcast_object_list(holder, src=src, group=self.sync)
        return holder[0]

    def gather(self, obj):
        """Every rank's obj, in rank order, on every rank."""
        out = [None] * self.size
        dist.all_gather_object(out, obj, group=self.sync)
        return out

    def wait_for_rank0(self, fn):
        """Runs fn() on rank 0 alone while the others wait on the harness
        group (not the default group, whose timeout could be shorter than
        fn); every rank gets rank 0's result, or its exception re-raised."""
        res = None
        if self.rank == 0:
            try:
                res = ("ok", fn())
            except BaseException as e:  # noqa: B902 - carried to the others, re-raised below
                res = ("err", e)
        res = self.share(res)
        if res[0] == "err":
            if self.rank == 0:
                raise res[1]
            pytest.fail("rank 0 failed: %s: %s" % (type(res[1]).__name__, res[1]))
        return res[1]


@pytest.fixture(scope="session")
def world():
    w = World()
    yield w
    try:
        dist.barrier(group=w.sync)
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - the session is over; a broken group says so earlier
        pass


@pytest.fixture
def rank(world):
    return world.rank


@pytest.fixture
def size(world):
    return world.size


@pytest.fixture
def shared_dir(world):
    """A fresh directory, the same path on every rank (rank 0 makes it)."""
    path = world.share(tempfile.mkdtemp(prefix="collie-torch-") if world.rank == 0 else None)
    yield path
    dist.barrier(group=world.sync)
    if world.rank == 0:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def short_group(world):
    """A fresh group of every rank with a short timeout (3 s), for tests that
    break a group on purpose: a group that saw an error is never used again
    (gloo's is unusable after an error)."""
    return dist.new_group(timeout=datetime.timedelta(seconds=3))


@pytest.fixture(autouse=True)
def _ranks_in_step(request, world):
    """After every test: (1) the ranks agree, over the gloo harness group,
    that they all finished the same test; (2) the default group (the backend
    under test) still passes a barrier. When either fails, the ranks are out
    of step or the default group is broken: every rank stops its session with
    the reason instead of failing each later test at its deadline."""
    yield
    me = request.node.nodeid
    try:
        ids = world.gather(me)
    except Exception as e:  # noqa: BLE001
        pytest.exit("rank %d: the harness group failed after %s (%s); stopping" % (world.rank, me, e), returncode=1)
    if len(set(ids)) != 1:
        pytest.exit("rank %d: the ranks are out of step after this test: %s; stopping" % (world.rank, ids),
                    returncode=1)
    try:
        dist.barrier()
        ok = None
    except Exception as e:  # noqa: BLE001
        ok = "%s: %s" % (type(e).__name__, e)
    bad = [(r, s) for r, s in enumerate(world.gather(ok)) if s is not None]
    if bad:
        pytest.exit("the default %s group failed a barrier after %s: %s; stopping" % (BACKEND, me, bad), returncode=1)


# --- jobs: a separate collierun job started from the test (rank 0 only) -----

# Launcher variables that must not leak from the session's job into a job
# that a test starts (its own collierun sets its own).
_LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RUN_ID")


def build_dir():
    d = os.environ.get("COLLIE_TEST_BUILD_DIR")
    return d if d else os.path.join(ROOT, "build")


def job_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCH_VARS and not k.startswith("COLLIE_") or
           k in ("COLLIE_LIBRARY", "COLLIE_TIMEOUT_MS", "COLLIE_TORCH_TEST_BACKEND")}
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "python"), JOBS])
    # A comms.csv of its own: the session's has the extra column of the
    # category it registered, and collie refuses a header that differs.
    env["COLLIE_LOG_DIR"] = tempfile.mkdtemp(prefix="collie-torch-job-")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_job(script, nproc=2, args=(), timeout=40, grace=2, keep_going=False, **extra_env):
    """Runs tests/torch/jobs/SCRIPT under `collierun -n NPROC --tag-output`
    (with --keep-going: a rank's death does not stop the others) and returns
    (exit status, combined output, seconds)."""
    import time

    cmd = [os.path.join(build_dir(), "collierun"), "-n", str(nproc), "--tag-output", "--timeout", str(timeout),
           "--grace", str(grace)] + (["--keep-going"] if keep_going else []) + \
        [sys.executable, os.path.join(JOBS, script)] + [str(a) for a in args]
    env = job_env(**extra_env)
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout + grace + 15)
        out, rc = r.stdout, r.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), "timeout"
    finally:
        shutil.rmtree(env["COLLIE_LOG_DIR"], ignore_errors=True)
    return rc, out, time.monotonic() - t0
