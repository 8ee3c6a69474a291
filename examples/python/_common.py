"""_common.py - shared by the examples: finds the collie package in this
source tree when it is not installed, and opens/closes the communicator an
example runs on (its own, or the caller's when a test passes one in), and
the arrays it uses: numpy on the CPU, torch tensors with --device cuda."""

import contextlib
import os
import sys

import numpy as np

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
    with collie.new_comm(name=name) as c:
        yield c


def example_device(device=None):
    """Where an example's arrays live: device when given, else --device DEV
    on the command line, else COLLIE_EXAMPLE_DEVICE, else "cpu"."""
    if device is None and "--device" in sys.argv[1:-1]:
        device = sys.argv[sys.argv.index("--device") + 1]
    return str(device or os.environ.get("COLLIE_EXAMPLE_DEVICE") or "cpu")


class Arrays:
    """The few array operations the examples use: numpy arrays on "cpu",
    torch tensors on a CUDA device ("cuda", "cuda:1"), so that each example
    runs as written on either (collie takes both, zero-copy)."""

    def __init__(self, device=None):
        self.device = example_device(device)
        self.cuda = self.device.startswith("cuda")
        if self.cuda:
            import torch

            self._torch = torch
            self._dev = torch.device(self.device)

    def _dtype(self, name):
        return getattr(self._torch, name) if self.cuda else getattr(np, name)

    def full(self, shape, value, dtype):
        if self.cuda:
            return self._torch.full(_shape(shape), value, dtype=self._dtype(dtype), device=self._dev)
        return np.full(shape, value, dtype=dtype)

    def zeros(self, shape, dtype):
        return self.full(shape, 0, dtype)

    def empty(self, shape, dtype):
        if self.cuda:
            return self._torch.empty(_shape(shape), dtype=self._dtype(dtype), device=self._dev)
        return np.empty(shape, dtype=dtype)

    def arange(self, n, dtype):
        if self.cuda:
            return self._torch.arange(n, dtype=self._dtype(dtype), device=self._dev)
        return np.arange(n, dtype=dtype)

    def asarray(self, a):
        """A numpy array's copy on this device (itself on the CPU)."""
        return self._torch.from_numpy(np.ascontiguousarray(a)).to(self._dev) if self.cuda else a

    def host(self, x):
        """x as a numpy array, for checking."""
        return x.cpu().numpy() if self.cuda else np.asarray(x)


def _shape(shape):
    return tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
