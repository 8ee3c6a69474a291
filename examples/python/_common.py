"""_common.py - shared by the examples: finds the collie package in this
source tree when it is not installed, and opens/closes the communicator an
example runs on (its own, or the caller's when a test passes one in)."""

import contextlib
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_pkg = os.path.join(os.path.dirname(os.path.dirname(_here)), "python")
try:
    import collie  # noqa: F401  (installed or on PYTHONPATH)
except ImportError:
    sys.path.insert(0, _pkg)
    import collie  # noqa: F401


@contextlib.contextmanager
def communicator(comm=None, name="example"):
    """Yields comm, or a new world communicator (finalized at the end) when
    comm is None: run under collierun, e.g. collierun -n 4 python3 file.py."""
    if comm is not None:
        yield comm
        return
    with collie.new_comm(name) as c:
        yield c
