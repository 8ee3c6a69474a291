"""_common.py - what the process group's parts share: the error class, the
facts about torch they read (its module, its ReduceOp objects), the frames
that are the backend's own, and small helpers on tensors and Works."""

import ctypes
import sys

import torch
import torch.distributed as dist

from .. import _lib
from ._tensors import NATIVE, UINT8, nbytes
from ._work import CollieWork

SZ = ctypes.c_size_t
make_work = torch._C._distributed_c10d._create_work_from_future
C10D = dist.distributed_c10d.__dict__
# The globals of the backend's modules: a frame walk skips their frames to
# find torch's function that called the backend.
OWN = set()
OWN.add(id(globals()))
# torch.distributed's p2p functions that wait on the Work at once (isend and
# irecv return it: they stay asynchronous).
BLOCKING_P2P = frozenset(("send", "recv"))
# torch's ReduceOp members are class attributes: the same objects each time.
OP_BY_ID = {id(getattr(dist.ReduceOp, k)): v for k, v in
            (("SUM", 0), ("PRODUCT", 1), ("MIN", 2), ("MAX", 3), ("AVG", 4), ("BAND", 5), ("BOR", 6), ("BXOR", 7))}


class CollieBackendError(getattr(dist, "DistBackendError", RuntimeError)):
    """An operation of the collie backend failed (a RuntimeError, as every
    torch.distributed backend raises). ``code`` is the collie_result_t name
    ("timeout", "remote error", ...); the message is collie's own, naming the
    operation and the peer."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = _lib.RESULT_NAMES.get(code, None) if isinstance(code, int) else code


class _NoFrame:
    """The caller's frame on a thread with no Python frames (torch's C++
    threads calling the group, e.g. DDP's reducer on a CUDA device thread):
    no torch.distributed function called, so no direct path."""

    f_globals = {}
    f_locals = {}
    f_back = None
    f_code = (lambda: None).__code__


NO_FRAME = _NoFrame()


def blocking_p2p_caller(f):
    """True when f, the torch.distributed frame that called the group's send
    or recv, waits on its Work at once: dist.send and dist.recv, which call
    the group themselves on torch 1.x and through dist.isend/dist.irecv on
    2.x, but not inside batch_isend_irecv."""
    if f.f_globals is not C10D:
        return False
    name = f.f_code.co_name
    if name in ("isend", "irecv"):
        f = f.f_back
        if f is None or f.f_globals is not C10D or f.f_code.co_name != name[1:]:
            return False
    elif name not in BLOCKING_P2P:
        return False
    b = f.f_back
    return b is None or b.f_code.co_name != "batch_isend_irecv"


def frame(depth):
    """sys._getframe(depth) of the caller, or NO_FRAME where the stack is
    not that deep."""
    try:
        return sys._getframe(depth + 1)
    except ValueError:
        return NO_FRAME


def move(t):
    """(collie dtype, count) to move t's bytes: its own dtype when collie has
    it (telemetry and the flight recorder then show it), else bytes."""
    dt = NATIVE.get(t.dtype)
    if dt is None:
        return UINT8, nbytes(t)
    return dt, t.numel()


def block(tensors):
    """True when tensors lie back to back in one block, in order."""
    if not tensors:
        return False
    p = tensors[0].data_ptr()
    for t in tensors:
        if not t.is_contiguous() or t.data_ptr() != p:
            return False
        p += nbytes(t)
    return True


def timeout_ms(opts):
    t = getattr(opts, "timeout", None)
    if t is None:
        return 0
    secs = t.total_seconds()
    return int(secs * 1000) if secs > 0 else 0  # torch's "unset" is negative


def cpp_work(work):
    """The Work handed to torch's C++ callers (DDP's reducer,
    _broadcast_coalesced, ...): a C++ Work around work's Future, which the
    completer thread settles. They keep only the C++ half of a Work; were it
    the Python subclass, once its Python object was collected their wait()
    would fall through to the base class and wait for ever. (Its wait() does
    not raise - torch's Future-backed Work never does - but their Future's
    value does, which is what DDP reads.)"""
    return make_work(work.get_future())

def last_of(pg, works, outputs, fn):
    """One Work for operations issued in order: they complete in issue order,
    so the last one's end is all of theirs (its result: every output)."""
    if not works:
        return CollieWork(pg, None, fn)
    fut = works[-1].get_future().then(lambda f: (f.value(), list(outputs))[1])
    return make_work(fut)
