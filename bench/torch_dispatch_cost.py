"""bench/torch_dispatch_cost.py - where the microseconds of a blocking
dist.all_reduce(t) on a Python backend go, layer by layer (issue 16's
"the Python path adds at most 5 us" and "say where the rest goes").

One process, a world of 1 (FileStore), an 8-byte float32 tensor. Rows:

- ctypes collie_allreduce: the C call alone (world of 1: a copy);
- direct path: collie.torch's own code below torch (what dist.all_reduce
  reaches), called from Python without torch;
- null backend: dist.all_reduce on a registered Python backend whose
  allreduce returns a finished Work at once: torch's own price for handing
  a call to any Python backend (its dispatcher, the pybind trampoline, the
  Work's wait);
- collie: dist.all_reduce on collie.torch;
- gloo: dist.all_reduce on gloo (a C++ backend), for scale;
- f_locals: reading a frame's locals the way the direct path does;
- collie, cut short: dist.all_reduce on collie with the backend's allreduce
  replaced by its first steps only (return at once; + the caller's frame
  read; + the direct path's checks), so each line minus the one above is
  what that step costs on this torch and Python.

collie minus null is what collie.torch adds over torch's floor; null minus
nothing is torch's. Best of REPEATS runs of N calls, microseconds per call.
Never run by CI: the numbers depend on the machine.

    python3 bench/torch_dispatch_cost.py [N] [REPEATS]
"""

import ctypes
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import collie.torch  # noqa: E402,F401
from collie import _lib  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
REPEATS = int(sys.argv[2]) if len(sys.argv) > 2 else 5


class NullWork(dist.distributed_c10d.Work if hasattr(dist.distributed_c10d, "Work") else object):
    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True


class NullPG(dist.ProcessGroup):
    """A Python backend that does nothing: torch's floor."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._w = NullWork()

    def allreduce(self, tensors, opts=None):
        return self._w

    def barrier(self, opts=None):
        return self._w

    def getBackendName(self):
        return "nullpy"


def _register_null():
    try:
        dist.Backend.register_backend("nullpy", NullPG, devices=["cpu"])
    except TypeError:
        dist.Backend.register_backend("nullpy", NullPG)


def best(fn):
    for _ in range(min(N, 2000)):
        fn()
    out = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(N):
            fn()
        out.append((time.perf_counter() - t0) / N * 1e6)
    return min(out)


def frame_locals_probe(a, b, c, d=None, e=None, f=None, g=None, h=None):
    x = sys._getframe(0)
    return x.f_locals.get("h", True)


def main():
    _register_null()
    d = tempfile.mkdtemp(prefix="collie-dispatch-")
    dist.init_process_group("gloo", init_method="file://%s/store" % d, rank=0, world_size=1)
    gloo = dist.group.WORLD
    coll = dist.new_group([0], backend="collie")
    null = dist.new_group([0], backend="nullpy")
    t = torch.ones(2)
    pg = collie.torch._pg_of(coll)
    h = ctypes.c_void_p(pg.comm.handle)
    L = _lib.lib()
    f32 = [name for name, _, _ in _lib.DTYPES].index("float32")
    p = t.data_ptr()
    fn = L.collie_allreduce

    rows = [
        ("ctypes collie_allreduce", lambda: fn(h, p, p, 2, f32, 0, None, None)),
        ("direct path (no torch)", lambda: pg._direct_call("all_reduce", pg._allreduce, p, p, 2, f32, 0)),
        ("dist.all_reduce nullpy", lambda: dist.all_reduce(t, group=null)),
        ("dist.all_reduce collie", lambda: dist.all_reduce(t, group=coll)),
        ("dist.all_reduce gloo", lambda: dist.all_reduce(t, group=gloo)),
        ("frame f_locals read", lambda: frame_locals_probe(1, 2, 3)),
        ("python call, nothing", lambda: None),
    ]
    print("torch %s, python %s; world of 1, 8-byte all_reduce, best of %d x %d calls" %
          (torch.__version__, sys.version.split()[0], REPEATS, N))
    res = {}
    for name, call in rows:
        res[name] = best(call)
        print("%-28s %8.2f us" % (name, res[name]), flush=True)
    from collie.torch._common import C10D, OP_BY_ID

    def cut_return(self, tensors, opts=None):
        return self._done

    def cut_frame(self, tensors, opts=None):
        f = sys._getframe(1)
        if f.f_globals is C10D:
            f.f_locals
        return self._done

    def cut_checks(self, tensors, opts=None):
        f = sys._getframe(1)
        if f.f_globals is C10D and len(tensors) == 1:
            loc = f.f_locals
            OP_BY_ID.get(id(loc.get("op")))
            self._direct(loc, tensors[0])
        return self._done

    cls = type(pg)
    full = cls.allreduce
    try:
        for name, v in (("cut: return at once", cut_return), ("cut: + frame read", cut_frame),
                        ("cut: + direct checks", cut_checks), ("cut: none (whole call)", full)):
            cls.allreduce = v
            res[name] = best(lambda: dist.all_reduce(t, group=coll))
            print("%-28s %8.2f us" % (name, res[name]), flush=True)
    finally:
        cls.allreduce = full
    print("torch's floor for a Python backend (nullpy - python call): %.2f us" %
          (res["dist.all_reduce nullpy"] - res["python call, nothing"]))
    print("collie.torch over that floor (collie - nullpy - ctypes): %.2f us" %
          (res["dist.all_reduce collie"] - res["dist.all_reduce nullpy"] - res["ctypes collie_allreduce"]))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
