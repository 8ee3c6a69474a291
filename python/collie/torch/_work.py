"""_work.py - torch's Work over a collie operation, and the thread that
completes futures.

Every operation of the backend is issued to collie asynchronously (the
communicator's worker runs them in issue order), so torch's async_op=True
returns at once and a blocking torch call is the same operation followed by
wait(). A Work completes once: whichever of wait(), is_completed() or the
future's completer sees the end first runs the copy-out steps (staged
outputs), frees the collie handle and settles the future.

Futures (get_future, which DDP's reducer and its communication hooks chain
on) need someone to notice completion without a wait() from the user: the
process group's completer thread, started at the first get_future() of an
unfinished Work, waits on such Works in issue order (in C, without the GIL)
and sets their results, running the hooks' callbacks as Gloo's own threads
do.
"""

from __future__ import annotations

import collections
import threading
from typing import TYPE_CHECKING, Any, Deque, Iterable, List, Optional, Sequence, Union

from torch._C._distributed_c10d import Work as _TorchWork

import torch

from .. import _lib
from ._held import HOLDING, flush_held

if TYPE_CHECKING:
    import ctypes
    import datetime

    from ._p2p import _LazyBatch
    from ._common import GroupState
    from ._tensors import Post

_IN_PROGRESS = _lib.IN_PROGRESS
_SUCCESS = _lib.SUCCESS
_TIMEOUT = _lib.TIMEOUT


def _last_error_text(rc: int) -> str:
    raw = _lib.lib().collie_last_error()
    text = raw.decode("utf-8", "replace") if raw else ""
    return text or _lib.RESULT_NAMES.get(rc, "error %d" % rc)


class CollieWork(_TorchWork):
    """torch.distributed's Work for one collie operation (or a batch of
    send/recv). result() and the future's value are the operation's output
    tensors, as Gloo's."""

    def __init__(self, pg: GroupState, handle: Optional[int], fn: str, result: Iterable[Any] = (), keep: object = (),
                 posts: Optional[Sequence[Post]] = None, shared: Optional[_LazyBatch] = None) -> None:
        super().__init__()
        self._pg = pg
        self._h = handle  # collie_work_t * (int), None once complete
        self._fn = fn
        self._result: List[Any] = list(result)  # (all_gather_coalesced's: lists of tensors)
        self._keep: object = keep  # tensors the C side points at
        self._posts = posts  # callables run on success (copy-outs)
        self._shared = shared  # a batch's common Work (placeholders of _end_coalescing)
        self._lock = threading.Lock()
        self._done = handle is None and shared is None
        self._exc: Optional[BaseException] = None
        self._fut: Optional[torch.futures.Future[List[torch.Tensor]]] = None
        self._src_fut: Optional[torch.futures.Future[None]] = None
        self._src = -1
        self._src_box: Optional[ctypes.c_int] = None  # a receive from any source: ctypes int the C side fills
        if self._done and posts:
            self._run_posts()

    # ---- completion ----

    def _run_posts(self) -> None:
        posts, self._posts = self._posts, None
        for p in posts or ():
            p()

    def _settle(self, exc: Optional[BaseException]) -> None:
        """Called once, under _lock, when the operation has ended. _done is
        set last: wait() and is_completed() read it without the lock, and a
        Work settled by the completer thread must not look done to them
        while its copy-outs still run (all_gather's list outputs read as
        they were: garbage to DDP's parameter check)."""
        h, self._h = self._h, None
        if h:
            _lib.lib().collie_work_free(h)
        if exc is None:
            try:
                self._run_posts()
            except Exception as e:  # a copy-out failed: the operation did not deliver
                exc = self._pg._wrap("%s: copying the result out failed: %s" % (self._fn, e))
        self._exc = exc
        self._keep = None
        self._done = True
        src = self._src_fut
        if src is not None and not src.done():
            src.set_result(None)  # the chained Future then gives the result or raises exc

    def _wait_handle(self, ms: int) -> bool:
        """Waits on the collie handle (ms -1: the operation's own deadline).
        Returns True when done; False when only this wait timed out."""
        if self._shared is not None:
            ok = self._shared._wait_handle(ms)
            if ok and not self._done:
                self._settle(self._shared._exc)
            return ok
        if self._done:
            return True
        L = _lib.lib()
        rc = L.collie_wait(self._h, ms)
        if rc == _SUCCESS:
            self._settle(None)
            return True
        if rc == _TIMEOUT and L.collie_test(self._h) == _IN_PROGRESS:
            return False
        self._settle(self._pg._wrap(_last_error_text(rc), rc))
        self._pg._failed(self._exc)
        return True

    # ---- torch's Work API ----

    def wait(self, timeout: Union[datetime.timedelta, float, None] = None) -> bool:
        """Blocks until the operation completes; raises its error (a
        RuntimeError with collie's message). timeout: a timedelta (0 or None:
        the group's timeout, which the operation enforces itself)."""
        if not self._done:
            if HOLDING:
                flush_held()  # what it waits for may need them (_held.py)
            ms = -1
            if timeout is not None:
                secs = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
                if secs > 0:
                    ms = max(1, int(secs * 1000))
            with self._lock:
                if not self._wait_handle(ms):
                    raise self._pg._wrap("%s: still running after the wait's timeout of %d ms (it goes on; "
                                         "wait again or let the group's timeout end it)" % (self._fn, ms),
                                         _TIMEOUT)
        if self._exc is not None:
            raise self._exc
        return True

    def is_completed(self) -> bool:
        if self._done:
            return True
        if HOLDING:
            flush_held()
        h = self._shared._h if self._shared is not None else self._h
        if h and _lib.lib().collie_test(h) == _IN_PROGRESS:
            return False
        with self._lock:
            self._wait_handle(-1)  # ended: collects the result without waiting
        return True

    def is_success(self) -> bool:
        return self.is_completed() and self._exc is None

    def exception(self) -> Optional[BaseException]:
        return self._exc if self.is_completed() else None

    def result(self) -> List[torch.Tensor]:
        self.wait()
        return self._result

    def source_rank(self) -> int:
        box = self._src_box
        if box is not None:  # a receive from any source: known once it has completed
            if not self.is_completed() or self._exc is not None or box.value < 0:
                raise RuntimeError("source_rank(): the receive from any source has not completed successfully")
            return box.value
        if self._src < 0:
            raise RuntimeError("source_rank() is defined only for a receive")
        return self._src

    _source_rank = source_rank

    def synchronize(self) -> None:
        pass  # CPU tensors: nothing to order against a stream

    def get_future(self) -> torch.futures.Future[List[torch.Tensor]]:
        """A torch.futures.Future set to result() once the operation ends (or
        to its error)."""
        if self._fut is None:
            with self._lock:
                if self._fut is None:
                    # torch 1.13's Future.set_exception stores the exception
                    # as the value (a Python-side unwrap), which C++ callers
                    # (DDP's reducer) then read as tensors and crash on. A
                    # callback that raises marks its Future failed in C++, so
                    # the Future handed out is the one chained on the settled one.
                    src: torch.futures.Future[None] = torch.futures.Future()
                    self._src_fut = src
                    self._fut = src.then(self._future_value)
                    if self._done:
                        src.set_result(None)
                        return self._fut
            self._pg._completer.add(self)
        return self._fut

    def _future_value(self, _src: torch.futures.Future[None]) -> List[torch.Tensor]:
        if self._exc is not None:
            raise self._exc
        return self._result

    def __repr__(self) -> str:
        return "<collie Work %s, %s>" % (self._fn, "done" if self._done else "running")


class Completer:
    """One thread per process group that waits on Works with futures, in
    the order they were asked for, and settles them."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._q: Deque[CollieWork] = collections.deque()
        self._cv = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._stop = False

    def add(self, work: CollieWork) -> None:
        with self._cv:
            self._q.append(work)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="collie-futures-" + self._name, daemon=True)
                self._thread.start()
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._q and not self._stop:
                    self._cv.wait()
                if not self._q:
                    return
                w = self._q.popleft()
            if not w._done:
                with w._lock:
                    w._wait_handle(-1)

    def stop(self, timeout: float = 10.0) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify()
            t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)
