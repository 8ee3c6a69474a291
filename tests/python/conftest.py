"""conftest.py - fixtures of the Python binding's tests.

Every rank of a collierun job runs the same pytest session, in the same
order (the tests call collectives), so nothing here may depend on the rank
except results. The session shares one world communicator (`comm`); tests
that break a communicator on purpose make their own (split or new_comm).

Environment (tests/python/run.sh sets it): COLLIE_LIBRARY (the library under
test), COLLIE_TEST_BUILD_DIR (for collierun), COLLIE_LOG_DIR (a scratch dir).
Run alone: COLLIE_LIBRARY=build/libcollie.so build/collierun -n 2
/usr/bin/python3 -m pytest -p no:cacheprovider tests/python
"""

import os
import shutil
import sys
import tempfile

import pytest

if not os.environ.get("COLLIE_LOG_DIR"):
    # comms.csv and flight-recorder dumps go to the working directory by
    # default; keep them out of the source tree when pytest runs directly.
    # Registered before collie is imported, so it runs after collie's own
    # atexit (which finalizes the communicators that write there).
    import atexit

    _logs = tempfile.mkdtemp(prefix="collie-pytest-logs-")
    os.environ["COLLIE_LOG_DIR"] = _logs
    atexit.register(shutil.rmtree, _logs, True)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "python"))

import collie  # noqa: E402
from collie import objcol  # noqa: E402


def build_dir():
    """The build directory whose collierun the subprocess tests use."""
    d = os.environ.get("COLLIE_TEST_BUILD_DIR")
    if d:
        return d
    lib = collie.library_path()
    return os.path.dirname(os.path.abspath(lib))


def launched():
    """True under a launcher (collierun sets COLLIE_WORLD_SIZE)."""
    return bool(os.environ.get("COLLIE_WORLD_SIZE"))


@pytest.fixture(scope="session")
def comm():
    if launched():
        c = collie.new_comm(name="pytest")
    else:  # plain `pytest`: one rank
        c = collie.new_comm(name="pytest", rank=0, world_size=1)
    yield c
    c.finalize()


@pytest.fixture
def rank(comm):
    return comm.get_rank()


@pytest.fixture
def size(comm):
    return comm.get_size()


@pytest.fixture
def shared_dir(comm):
    """A fresh directory, the same path on every rank (rank 0 makes it)."""
    holder = [tempfile.mkdtemp(prefix="collie-py-") if comm.get_rank() == 0 else None]
    objcol.broadcast_object_list(holder, src=0, group=comm)
    yield holder[0]
    comm.barrier()
    if comm.get_rank() == 0:
        shutil.rmtree(holder[0], ignore_errors=True)


@pytest.fixture
def private(comm):
    """A communicator of this rank alone (for tests that poison it)."""
    c = comm.split_color(comm.get_rank(), 0, name="private")
    yield c
    c.finalize()


@pytest.fixture(autouse=True)
def _ranks_in_step(comm):
    """After every test, all ranks meet in a barrier. When a failure left the
    ranks out of step (one skipped a collective the others entered), the
    barrier fails; the rank then aborts the session communicator, which makes
    the others fail at once (RemoteError) instead of at every test's
    deadline, and stops its session with the reason."""
    yield
    try:
        comm.barrier()
    except collie.CollieError as e:
        try:
            comm.abort()
        finally:
            pytest.exit("rank %d: the ranks are out of step after this test (%s); stopping" % (comm.get_rank(), e),
                        returncode=1)
