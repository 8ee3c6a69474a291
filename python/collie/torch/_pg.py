"""_pg.py - ProcessGroupCollie: torch.distributed's process group over a
collie communicator (the core: creation, lifetime, issuing, barriers; the
operations are the mixins of _collectives.py and _p2p.py).

torch calls the creator with the group's Store (a PrefixStore over the
TCPStore or FileStore of init_process_group), this rank and size, and the
timeout. The group's communicator meets through that Store (the binding's
KVStore callbacks): no port, directory or variable of collie's own. New
groups get communicators of their own, since torch calls the creator only on
the member ranks (a split of the world would need every rank).

Each operation takes torch's arguments (lists of tensors and an options
object), checks them, and issues one collie call with the tensors' own
memory: blocking for torch's blocking calls, asynchronously otherwise, the
CollieWork holding the tensors until the call ends. Outputs that cannot be
written in place (lists whose tensors are not one block, non-contiguous or
widened tensors) go through a staging tensor copied out at completion.
"""

from __future__ import annotations

import collections
import ctypes
import datetime
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Deque, Iterable, List, Optional, Sequence, Tuple, TypeVar, Union

import torch
import torch.distributed as dist

from .. import _lib
from .._comm import new_comm
from . import _context, _fast
from ._collectives import Collectives
from ._common import (C10D, OWN, SZ, CollieBackendError, blocking_p2p_caller, cpp_work, frame,
                      python_works_held, timeout_ms)
from ._held import HOLDING, flush_held
from ._p2p import PointToPoint
from ._tensors import Unsupported
from ._work import CollieWork, Completer

if TYPE_CHECKING:
    from torch._C._distributed_c10d import Work as _TorchWork

    from .._comm import Comm
    from .._lib import CFunction
    from ._common import Frame, Options
    from ._tensors import Post

_T = TypeVar("_T")

OWN.add(id(globals()))
_TAG_MONITORED = "collie-monitored-barrier"
_log = logging.getLogger("collie")
# A collie.Comm that the next group created on this rank wraps instead of
# making its own: how collie.torch.shrink() hands torch the survivors' comm.
_adopt: List[Comm] = []


def _cuda_of(keep: Iterable[object]) -> Optional[torch.device]:
    """The device of the first CUDA tensor among keep (tensors, or lists of
    them), or None: host calls pay one attribute read per tensor."""
    for k in keep:
        for t in (k if isinstance(k, (list, tuple)) else (k,)):
            if isinstance(t, torch.Tensor) and t.is_cuda:
                return t.device
    return None


# (The mixins' operations are the backend calls torch makes, a list of tensors
# and an options object, not the overloaded convenience forms torch's stubs
# declare on ProcessGroup.)
class ProcessGroupCollie(Collectives, PointToPoint, dist.ProcessGroup):  # type: ignore[misc]
    """torch.distributed.ProcessGroup on collie (CPU and CUDA tensors). Created by
    torch through init_process_group("collie") / new_group(backend="collie")
    after ``import collie.torch``; collie.torch.get_comm(group) gives its
    collie.Comm."""

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: Union[datetime.timedelta, float]) -> None:
        super().__init__(rank, size)  # type: ignore[call-arg,no-untyped-call]  # (torch 1.13's stub: ProcessGroup())
        self._rank, self._size = rank, size  # (pybind's rank()/size() cost ~0.2 us a call)
        if isinstance(timeout, (int, float)):
            timeout = datetime.timedelta(seconds=timeout)
        self._store: Any = store  # torch's Store (None once shut down)
        self._timeout = timeout
        # The communicator's issue lock. With the C++ fast path, the one it
        # takes too (collie.h: one issuer at a time), so that calls issued by
        # either half keep their order.
        fast = _fast.module()
        self._lock = fast.IssueLock() if fast is not None else threading.RLock()
        self._cpp = None  # the FastGroup torch holds (create()), when the fast path is loaded
        self._handed: Deque[CollieWork] = collections.deque()  # Works handed to torch through the FastGroup (_hold)
        self._handed_lock = threading.Lock()
        self._inflight: List[CollieWork] = []  # async Works handed to Python callers, until they have ended
        self._init_p2p()
        self._mb_seq = 0
        self._group_name = ""
        self._group_desc = ""
        name = "torch-group-%d" % id(self)
        # A group made after the default one (new_group) shares its telemetry
        # and world rank numbering, as a split would (torch calls this on the
        # group's members only, so it cannot be a split).
        parent: Optional[Comm] = None
        if dist.is_initialized():
            default = python_group(dist.distributed_c10d._get_default_group())  # type: ignore[no-untyped-call]
            if default is not None and default._h is not None:
                parent = default._comm
        try:
            if _adopt and _adopt[-1].rank == rank and _adopt[-1].size == size:
                self._comm: Comm = _adopt.pop()
            else:
                self._comm = new_comm(name=name, timeout=timeout, store=store, rank=rank, world_size=size,
                                      parent=parent)
        except Exception as e:
            raise CollieBackendError("collie backend: init of rank %d of %d failed: %s" % (rank, size, e),
                                     getattr(e, "code", None)) from e
        self._h: Optional[int] = self._comm.handle
        self._L = _lib.lib()
        self._allreduce = self._L.collie_allreduce
        self._completer = Completer(name)
        self._done = CollieWork(self, None, "blocking call")  # what a blocking torch call gets back
        _context.groups_add(self)

    # ---- identity ----

    def getBackendName(self) -> str:
        return "collie"

    def name(self) -> str:
        return "collie"

    _get_backend_name = getBackendName

    # torch 2.x names its groups through these (destroy_process_group reads
    # group_name; the C++ getter raises for a group without a C++ backend).
    def _set_group_name(self, name: object) -> None:
        self._group_name = str(name)

    def getGroupName(self) -> str:
        return self._group_name

    def _set_group_desc(self, desc: object) -> None:
        self._group_desc = str(desc)

    def getGroupDesc(self) -> str:
        return self._group_desc

    setGroupName = _set_group_name
    setGroupDesc = _set_group_desc
    group_name = property(getGroupName)
    group_desc = property(getGroupDesc)

    @property
    def comm(self) -> Comm:
        """The collie.Comm under this group."""
        return self._comm

    def __repr__(self) -> str:
        return "<ProcessGroupCollie rank %d of %d>" % (self._rank, self._size)

    # ---- errors and lifetime ----

    def _wrap(self, text: str, code: Union[int, str, None] = None) -> CollieBackendError:
        return CollieBackendError(text, code)

    def _failed(self, exc: Optional[BaseException]) -> None:
        pass  # collie poisoned the communicator itself; later calls quote the first error

    def shutdown(self) -> None:
        """Frees the communicator (shared memory, threads, sockets). Waits for
        running operations (each bounded by its deadline). Idempotent;
        destroy_process_group calls it."""
        with self._lock:
            if self._h is None:
                return
            self._flush_p2p(force=True)  # held sends and receives still go out: peers expect them
            if self._cpp is not None:
                self._cpp.detach()  # its later calls come here, and are refused
            self._h = None
        self._completer.stop()
        _context.groups_remove(self)
        try:
            self._comm.finalize()
        finally:
            # Let torch's Store go (rank 0's TCPStore server with it), as
            # Gloo's group does when destroyed: a second init_process_group
            # may bind the same port.
            self._store = None
            self._comm._kv = None
            self._cpp = None  # (it holds this group: the cycle ends here)

    def abort(self, reason: Optional[str] = None) -> None:
        """Fails every running operation here and on the peers, at once
        (reason, when given, ends the peers' errors)."""
        if self._h is not None:
            self._comm.abort(reason)

    # ---- issuing ----

    def _opts(self, opts: Options, from_c10d: bool) -> Optional[_lib.Opts]:
        # torch's Python functions never set a per-call timeout (the group's
        # holds): reading opts.timeout through pybind costs ~0.4 us.
        ms = 0 if from_c10d else timeout_ms(opts)
        ctx = _context.current()
        if not ms and ctx is None:
            return None
        o = _lib.Opts()
        o.timeout_ms = ms
        if ctx is not None:
            o.category, label, phase = ctx
            o.label = label
            o.phase = phase
        return o

    def _issue(self, fn: str, cfn: CFunction, args: Tuple[Any, ...], opts: Options, result: Iterable[Any] = (),
               keep: Sequence[object] = (), posts: Optional[Sequence[Post]] = None) -> _TorchWork:
        if HOLDING:
            flush_held()  # issue order: the held sends and receives came first (_held.py)
        # torch's own blocking calls (dist.all_reduce(t) with async_op False,
        # dist.send, dist.recv) wait on the Work at once and drop it: run those here, as a
        # blocking collie call, instead of handing them to collie's worker
        # thread and back (two thread hops, most of a small call's time).
        f: Optional[Frame] = frame(2)
        while f is not None and id(f.f_globals) in OWN:
            f = f.f_back
        from_c10d = f is not None and f.f_globals is C10D
        o = self._opts(opts, from_c10d)
        dev = _cuda_of(keep)
        if dev is not None:
            # The call is ordered after torch's current stream on the
            # tensors' device (docs/gpu.md): what torch queued there before
            # the call is done when collie reads the tensors.
            if o is None:
                o = _lib.Opts()
            o.cuda_stream = torch.cuda.current_stream(dev).cuda_stream
        # (from_c10d: f is torch's frame)
        if from_c10d and (blocking_p2p_caller(f)
                          or f.f_locals.get("async_op", True) is False):  # type: ignore[union-attr]
            with self._lock:
                h = self._h
                if h is None:
                    raise CollieBackendError("%s: the process group was destroyed" % fn, "invalid usage")
                rc = cfn(h, *args, ctypes.byref(o) if o is not None else None, None)
            if rc != _lib.SUCCESS:
                raise CollieBackendError(self._last_error(rc), rc)
            if posts:
                for p in posts:
                    p()
            return self._done
        w = ctypes.c_void_p()
        with self._lock:
            h = self._h
            if h is None:
                raise CollieBackendError("%s: the process group was destroyed" % fn, "invalid usage")
            rc = cfn(h, *args, ctypes.byref(o) if o is not None else None, ctypes.byref(w))
            if rc != _lib.SUCCESS:
                raise CollieBackendError(self._last_error(rc), rc)
            work = CollieWork(self, w.value, fn, result, (keep, o), posts)
            held = not from_c10d and self._cpp is None and python_works_held()
            if from_c10d or held:
                # torch.distributed's functions hand this Work to Python code,
                # which waits on it (wait() raises the operation's error, as
                # Gloo's does); so do torch 2.x's C++ callers of a Python
                # group (the functional collectives' wait_tensor), keeping
                # its Python object. Held here until it has ended, so that
                # the tensors outlive the operation even if the caller drops
                # it.
                if self._inflight:
                    self._inflight = [x for x in self._inflight if not x._done]
                self._inflight.append(work)
                if held:
                    work.get_future()  # settled by the completer, as cpp_work's are
                return work
        return cpp_work(work)

    def _hold(self, work: CollieWork) -> None:
        """Keeps a Work the FastGroup hands to torch alive until torch has
        its Python object back and the operation has ended (fast.hpp)."""
        with self._handed_lock:
            q = self._handed
            q.append(work)
            if len(q) > 64:
                # Drop every ended one (is_completed settles a finished one),
                # but never the newest few: torch may not have taken them back
                # yet. One that never ends (an isend nobody waits on) stays alone.
                newest = [q.pop() for _ in range(8)][::-1]
                old = [w for w in q if not _ended(w)]
                q.clear()
                q.extend(old + newest)

    def _last_error(self, rc: int) -> str:
        raw: Optional[bytes] = self._L.collie_last_error()
        return raw.decode("utf-8", "replace") if raw else _lib.RESULT_NAMES.get(rc, "error %d" % rc)

    def _root(self, r: int, fn: str) -> int:
        if not 0 <= r < self._size:
            raise CollieBackendError("%s: root rank %d is outside 0..%d (group of %d)" % (fn, r, self._size - 1,
                                                                                       self._size), "invalid argument")
        return r

    def _one(self, tensors: Sequence[_T], fn: str) -> _T:
        if len(tensors) != 1:
            raise Unsupported("%s: the collie backend takes one tensor per call on CPU (got %d)" % (fn, len(tensors)))
        return tensors[0]

    @staticmethod
    def _sizes(values: Sequence[int]) -> ctypes.Array[ctypes.c_size_t]:
        return (SZ * max(len(values), 1))(*values)

    # ---- synchronisation ----

    def barrier(self, opts: Options = None) -> _TorchWork:
        return self._issue("barrier", self._L.collie_barrier, (), opts)

    def monitored_barrier(self, timeout: Union[datetime.timedelta, float, None] = None,
                          wait_all_ranks: bool = False) -> CollieWork:
        """Gloo's monitored barrier, through the group's Store (so a missing
        rank fails the barrier without breaking the group): rank 0 waits for
        every rank's arrival within timeout and raises naming the first rank
        that did not arrive (all of them with wait_all_ranks); the others wait
        for rank 0's verdict and raise the same error."""
        if timeout is None:
            timeout = self._timeout
        if not isinstance(timeout, datetime.timedelta):
            timeout = datetime.timedelta(seconds=float(timeout))
        # The clock starts at the call and counts whole milliseconds, as
        # Gloo's: where none are left before a wait (a timeout of 0, or too
        # short for rank 0 to even wait), rank 0 itself timed out. The
        # messages are Gloo's, word for word (torch's tests and users' log
        # scrapers match them).
        start = time.monotonic()
        deadline = start + timeout.total_seconds()
        limit_ms = int(timeout.total_seconds() * 1000)
        self._mb_seq += 1
        base = "%s/%d" % (_TAG_MONITORED, self._mb_seq)
        me, n, st = self._rank, self._size, self._store
        st.set("%s/arrived/%d" % (base, me), b"1")
        if me == 0:
            verdict = self._monitored_verdict(base, start, deadline, limit_ms, wait_all_ranks)
            st.set("%s/verdict" % base, verdict.encode())
            if verdict:
                raise CollieBackendError(verdict, "timeout")
            return CollieWork(self, None, "monitored_barrier")
        try:
            st.wait(["%s/verdict" % base], timeout + datetime.timedelta(seconds=30))
            verdict = bytes(st.get("%s/verdict" % base)).decode()
        except Exception as e:
            verdict = "rank 0 gave no verdict within the timeout (%s)" % e
        if verdict:
            raise CollieBackendError(
                "Rank %d successfully reached monitoredBarrier, but received errors while waiting for send/recv "
                "from rank 0. Please check rank 0 logs for faulty rank.\n Original exception: \n%s" % (me, verdict),
                "timeout")
        return CollieWork(self, None, "monitored_barrier")

    def _monitored_verdict(self, base: str, start: float, deadline: float, limit_ms: int,
                           wait_all_ranks: bool) -> str:
        """Rank 0's half of monitored_barrier: waits for each rank's arrival
        in turn and returns Gloo's error for the first that did not arrive
        in time (for all of them with wait_all_ranks), or "" when all did."""
        passed: List[int] = []
        missing: List[int] = []
        for q in range(self._size):
            if q == 0:
                continue
            failed = "[Rank 0]: Rank %d failed to pass monitoredBarrier in %d ms" % (q, limit_ms)
            if not wait_all_ranks and limit_ms - int((time.monotonic() - start) * 1000) <= 0:
                why = ("Rank 0 timed out in monitoredBarrier after %d ms.\n%s" %
                       (limit_ms, "Successfully processed ranks: %s" % ", ".join(map(str, passed)) if passed
                        else "No ranks successfully processed in monitoredBarrier."))
                return "%s\n Original exception: \n%s" % (failed, why)
            left = max(deadline - time.monotonic(), 0.001)
            try:
                self._store.wait(["%s/arrived/%d" % (base, q)], datetime.timedelta(seconds=left))
            except Exception as e:
                if not wait_all_ranks:
                    return "%s\n Original exception: \n%s" % (failed, e)
                _log.error("%s", failed)
                missing.append(q)
                continue
            passed.append(q)
        if missing:
            return "[Rank 0]: Ranks %s failed to pass monitoredBarrier in %d ms" % (
                ", ".join(map(str, missing)), limit_ms)
        return ""



def _ended(work: CollieWork) -> bool:
    """True when a Work handed to torch has ended (never issues anything:
    a held isend/irecv is asked only through its issued batch)."""
    if work._done:
        return True
    shared = work._shared
    if shared is not None:
        real = getattr(shared, "real", None)
        return real is not None and real._done
    return work.is_completed()


def python_group(group: object) -> Optional[ProcessGroupCollie]:
    """The ProcessGroupCollie behind group (torch's group object, its C++
    FastGroup, a torch 2.x ProcessGroup holding either, or the
    ProcessGroupWrapper torch 2.x puts around a C++ backend under
    TORCH_DISTRIBUTED_DEBUG=DETAIL), or None."""
    if isinstance(group, ProcessGroupCollie):
        return group
    inner = getattr(group, "collie_group", None)  # a FastGroup
    if isinstance(inner, ProcessGroupCollie):
        return inner
    wrapped = getattr(group, "wrapped_pg", None)  # torch's _ProcessGroupWrapper
    if wrapped is not None and wrapped is not group:
        return python_group(wrapped)
    get = getattr(group, "_get_backend", None)  # torch 2.x: a ProcessGroup holding backends
    if get is not None:
        try:
            b = get(torch.device("cpu"))
        except Exception:
            return None
        if b is not group:
            return python_group(b)
    return None


def create(store: dist.Store, rank: int, size: int, timeout: Union[datetime.timedelta, float]) -> Any:
    """torch's creator function for the "collie" backend: the C++ FastGroup
    over a ProcessGroupCollie when the fast path is loaded, else the
    ProcessGroupCollie."""
    pg = ProcessGroupCollie(store, rank, size, timeout)
    fast = _fast.module()
    if fast is None:
        return pg
    pg._cpp = fast.FastGroup(pg, pg._h, rank, size, pg._lock)
    named = getattr(fast, "named_group", None)  # torch 2.x
    if named is None:
        return pg._cpp
    # torch 2.x takes a ProcessGroup from the creator as the group itself:
    # one that names itself "collie" (torch's own says "custom" for any
    # plugin, as DDP's logging would report), holding the FastGroup for cpu
    # and cuda, as torch would. Under TORCH_DISTRIBUTED_DEBUG=DETAIL, with
    # the collective-checking wrapper torch would put around it.
    backend = pg._cpp
    d: Any = dist  # (these private names differ across torch versions, and in their annotations)
    if d.get_debug_level() == d.DebugLevel.DETAIL:
        td = timeout if isinstance(timeout, datetime.timedelta) else datetime.timedelta(seconds=timeout)
        backend = d.distributed_c10d._create_process_group_wrapper(
            wrapped_pg=backend, store_prefix="collie", store=store, rank=rank, world_size=size, timeout=td)
    return named(store, rank, size, backend)
