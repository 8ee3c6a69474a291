"""_common.py - what the process group's parts share: the error class, the
facts about torch they read (its module, its ReduceOp objects), the frames
that are the backend's own, and small helpers on tensors and Works."""

from __future__ import annotations

import ctypes
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Protocol, Sequence, Set, Tuple, Union

import torch
import torch.distributed as dist

from .. import _lib
from ._tensors import NATIVE, UINT8, nbytes
from ._work import CollieWork

if TYPE_CHECKING:
    from types import CodeType
    from typing import ContextManager, Iterable, TypeVar

    from torch._C._distributed_c10d import Work as _TorchWork

    from .._comm import Comm
    from .._lib import CFunction
    from ._p2p import HeldP2P
    from ._tensors import Post
    from ._work import Completer

    _T = TypeVar("_T")

    # torch's options object of a call (AllreduceOptions, ReduceOptions, ...;
    # None where a caller passes none), read field by field.
    Options = Any

    class GroupState(Protocol):
        """What the mixins of ProcessGroupCollie (Collectives, PointToPoint)
        use of the group, which defines all of it (the type checker's view:
        at run time the mixins derive from object)."""

        _rank: int
        _size: int
        _lock: ContextManager[object]  # the issue lock (the fast path's IssueLock, or an RLock)
        _h: Optional[int]  # collie_comm_t *, None once shut down
        _L: ctypes.CDLL
        _allreduce: CFunction
        _comm: Comm
        _cpp: Any  # the C++ FastGroup torch holds (fast path), or None
        _done: CollieWork
        _completer: Completer
        _p2p: List[HeldP2P]

        def _issue(self, fn: str, cfn: CFunction, args: Tuple[Any, ...], opts: Options, result: Iterable[Any] = (),
                   keep: Sequence[object] = (), posts: Optional[Sequence[Post]] = None) -> _TorchWork: ...

        def _last_error(self, rc: int) -> str: ...

        def _wrap(self, text: str, code: Union[int, str, None] = None) -> CollieBackendError: ...

        def _failed(self, exc: Optional[BaseException]) -> None: ...

        def _one(self, tensors: Sequence[_T], fn: str) -> _T: ...

        def _root(self, r: int, fn: str) -> int: ...

        @staticmethod
        def _sizes(values: Sequence[int]) -> ctypes.Array[ctypes.c_size_t]: ...

SZ = ctypes.c_size_t
# (torch 1.13's stubs do not declare it)
make_work: Callable[[torch.futures.Future[Any]], _TorchWork] = (
    torch._C._distributed_c10d._create_work_from_future)  # type: ignore[attr-defined]
C10D: Dict[str, Any] = dist.distributed_c10d.__dict__
# The globals of the backend's modules: a frame walk skips their frames to
# find torch's function that called the backend.
OWN: Set[int] = set()
OWN.add(id(globals()))
# torch.distributed's p2p functions that wait on the Work at once (isend and
# irecv return it: they stay asynchronous).
BLOCKING_P2P = frozenset(("send", "recv"))
# torch's ReduceOp members are class attributes: the same objects each time.
OP_BY_ID = {id(getattr(dist.ReduceOp, k)): v for k, v in
            (("SUM", 0), ("PRODUCT", 1), ("MIN", 2), ("MAX", 3), ("AVG", 4), ("BAND", 5), ("BOR", 6), ("BXOR", 7))}


if TYPE_CHECKING:
    _BackendErrorBase = RuntimeError
else:
    _BackendErrorBase = getattr(dist, "DistBackendError", RuntimeError)  # torch >= 2.1


class CollieBackendError(_BackendErrorBase):
    """An operation of the collie backend failed (a RuntimeError, as every
    torch.distributed backend raises). ``code`` is the collie_result_t name
    ("timeout", "remote error", ...); the message is collie's own, naming the
    operation and the peer."""

    def __init__(self, message: str, code: Union[int, str, None] = None) -> None:
        super().__init__(message)
        self.code: Optional[str] = _lib.RESULT_NAMES.get(code, None) if isinstance(code, int) else code


class Frame(Protocol):
    """What the backend reads of a frame (a FrameType, or NO_FRAME)."""

    @property
    def f_globals(self) -> Dict[str, Any]: ...

    @property
    def f_locals(self) -> Dict[str, Any]: ...

    @property
    def f_back(self) -> Optional[Frame]: ...

    @property
    def f_code(self) -> CodeType: ...


class _NoFrame:
    """The caller's frame on a thread with no Python frames (torch's C++
    threads calling the group, e.g. DDP's reducer on a CUDA device thread):
    no torch.distributed function called, so no direct path."""

    f_globals: Dict[str, Any] = {}
    f_locals: Dict[str, Any] = {}
    f_back = None
    f_code = (lambda: None).__code__


NO_FRAME = _NoFrame()


def blocking_p2p_caller(f: Optional[Frame]) -> bool:
    """True when f, the torch.distributed frame that called the group's send
    or recv, waits on its Work at once: dist.send and dist.recv, which call
    the group themselves on torch 1.x and through dist.isend/dist.irecv on
    2.x, but not inside batch_isend_irecv."""
    assert f is not None  # (a frame: its callers' frame() or one they found C10D's)
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


def frame(depth: int) -> Frame:
    """sys._getframe(depth) of the caller, or NO_FRAME where the stack is
    not that deep."""
    try:
        return sys._getframe(depth + 1)
    except ValueError:
        return NO_FRAME


def move(t: torch.Tensor) -> Tuple[int, int]:
    """(collie dtype, count) to move t's bytes: its own dtype when collie has
    it (telemetry and the flight recorder then show it), else bytes."""
    dt = NATIVE.get(t.dtype)
    if dt is None:
        return UINT8, nbytes(t)
    return dt, t.numel()


def block(tensors: Sequence[torch.Tensor]) -> bool:
    """True when tensors lie back to back in one block, in order."""
    if not tensors:
        return False
    p = tensors[0].data_ptr()
    for t in tensors:
        if not t.is_contiguous() or t.data_ptr() != p:
            return False
        p += nbytes(t)
    return True


def timeout_ms(opts: object) -> int:
    t = getattr(opts, "timeout", None)
    if t is None:
        return 0
    secs = t.total_seconds()
    return int(secs * 1000) if secs > 0 else 0  # torch's "unset" is negative


def cpp_work(work: CollieWork) -> _TorchWork:
    """The Work handed to torch's C++ callers (DDP's reducer,
    _broadcast_coalesced, ...): a C++ Work around work's Future, which the
    completer thread settles. They keep only the C++ half of a Work; were it
    the Python subclass, once its Python object was collected their wait()
    would fall through to the base class and wait for ever. (Its wait() does
    not raise - torch's Future-backed Work never does - but their Future's
    value does, which is what DDP reads. The fast path hands torch this Work
    inside one whose wait() raises, fast.hpp's CheckedWork; the Python group
    hands torch the CollieWork itself where torch keeps it alive,
    python_works_held().)"""
    return make_work(work.get_future())


_held: List[bool] = []


def python_works_held() -> bool:
    """True when torch's C++ side keeps the Python object of a Work that a
    Python group returns to it (torch 2.x's PyWorkHolder), so that the
    CollieWork itself, whose wait() raises the operation's error, can go to
    torch's C++ callers (the functional collectives' wait_tensor, under
    DTensor, wait on it). Found out once, on a dummy group of one rank
    registered under a name of its own for one functional all_reduce_."""
    if not _held:
        held = False
        try:
            made: List[object] = []
            C: Any = torch._C._distributed_c10d  # (its private functions: not in every torch's stubs)
            Group: Any = dist.ProcessGroup

            class _Work(C.Work):  # type: ignore[misc]  # (a base typed Any)
                def wait(self, timeout: object = None) -> bool:
                    return True

            class _Group(Group):  # type: ignore[misc]
                def allreduce(self, *args: object) -> object:
                    w = _Work()
                    made.append(w)
                    return w

            name = "collie-probe-%d" % id(made)
            group = _Group(0, 1)  # (torch's registry holds it weakly)
            C._register_process_group(name, group)
            try:
                t = torch.zeros(1)
                torch.ops._c10d_functional.all_reduce_(t, "sum", name)
                held = len(made) == 1 and sys.getrefcount(made[0]) > 2  # (made, and getrefcount's argument)
                torch.ops._c10d_functional.wait_tensor(t)
            finally:
                C._unregister_process_group(name)
        except Exception:  # noqa: BLE001 - an older torch (no functional collectives, or no holder)
            held = False
        _held.append(held)
    return _held[0]


def last_of(pg: GroupState, works: Sequence[_TorchWork], outputs: Sequence[torch.Tensor],
            fn: str) -> _TorchWork:
    """One Work for operations issued in order: they complete in issue order,
    so the last one's end is all of theirs (its result: every output)."""
    if not works:
        return CollieWork(pg, None, fn)
    last = works[-1]
    if isinstance(last, CollieWork):
        # Handed to a caller that holds the Python object (_pg._issue): the
        # last one itself, whose wait() raises the error.
        last._result = list(outputs)
        return last
    fut = last.get_future().then(  # type: ignore[attr-defined]  # (not in torch 1.13's stubs)
        lambda f: (f.value(), list(outputs))[1])
    return make_work(fut)
