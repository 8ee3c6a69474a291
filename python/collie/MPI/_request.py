"""_request.py - MPI.Request over a collie Work (nonblocking collectives and
point-to-point) and MPI.Prequest (persistent point-to-point).

A Request completes when its Work does; Wait/Test raise MPI.Exception with
collie's message when the operation failed. A receive's Request fills the
status it is waited with (source, tag, count), and a pickled irecv's
returns the object from wait()/test(). The Work keeps the buffers alive
until the operation completed. REQUEST_NULL is a Request with nothing
pending (Wait returns at once with an empty status).
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple

from .. import _comm as _ccomm
from . import _errors
from ._status import ANY_SOURCE, ANY_TAG, UNDEFINED, Status

# What a completed receive got: (source, tag, bytes).
StatusFn = Callable[[], Tuple[int, int, int]]
_EMPTY: Tuple[int, int, int] = (ANY_SOURCE, ANY_TAG, 0)


class Request(_errors.RefusesUnknown):
    """mpi4py's MPI.Request: Wait, Test, Get_status, Free and the class
    methods Waitall, Testall, Waitany, Testany (and the lowercase wait,
    test, waitall, waitany, testall). A completed request becomes
    REQUEST_NULL (compares equal to it)."""

    _mpi_class = "Request"

    __slots__ = ("_work", "_call", "_st", "_obj")

    def __init__(self, work: Optional[_ccomm.Work] = None, call: str = "", st: Optional[StatusFn] = None,
                 obj: Optional[Callable[[], Any]] = None) -> None:
        self._work = work
        self._call = call
        self._st = st  # a receive's (source, tag, bytes), once complete
        self._obj = obj  # a pickled irecv's object, once complete

    def _clear(self) -> None:
        self._work, self._st, self._obj = None, None, None

    def _finish(self, status: Optional[Status]) -> Any:
        """Waits for the operation (a null request: nothing), fills status,
        makes the request null (a persistent one: inactive); the received
        object of a pickled irecv, else None."""
        w, st, obj = self._work, self._st, self._obj
        self._clear()
        if w is None:
            if status is not None:
                status._set(*_EMPTY)
            return None
        try:
            with _errors.collie_errors(self._call):
                w.wait()
        except _errors.Exception as e:
            if status is not None:
                status._set(*_EMPTY)
                status.error = e.error_code
            raise
        if status is not None:
            status._set(*(st() if st is not None else _EMPTY))
        return obj() if obj is not None else None

    def Wait(self, status: Optional[Status] = None) -> bool:
        """Blocks until the operation completes (its deadline bounds it)."""
        self._finish(status)
        return True

    def Test(self, status: Optional[Status] = None) -> bool:
        """True (and the request is null) once complete; never blocks."""
        w = self._work
        if w is not None and not w.is_completed():
            return False
        self._finish(status)
        return True

    def Free(self) -> None:
        """Drops the request; the operation still completes (collie keeps its
        buffers until it has)."""
        self._clear()

    def Cancel(self) -> None:
        _errors.unsupported("Request.Cancel", "collie cannot cancel a posted operation")

    def Get_status(self, status: Optional[Status] = None) -> bool:
        """True once complete (the request stays as it is); fills status then."""
        w = self._work
        done = w is None or w.is_completed()
        if done and status is not None:
            ok = w is not None and w.exception() is None and self._st is not None
            status._set(*(self._st() if ok and self._st is not None else _EMPTY))
        return done

    # lowercase forms: the received object of a pickled irecv, else None

    def wait(self, status: Optional[Status] = None) -> Any:
        return self._finish(status)

    def test(self, status: Optional[Status] = None) -> Tuple[bool, Any]:
        w = self._work
        if w is not None and not w.is_completed():
            return False, None
        return True, self._finish(status)

    @classmethod
    def Waitall(cls, requests: Sequence["Request"], statuses: Optional[List[Status]] = None) -> bool:
        cls._waitall(requests, statuses)
        return True

    @classmethod
    def _waitall(cls, requests: Sequence["Request"], statuses: Optional[List[Status]]) -> List[Any]:
        if statuses is not None:
            while len(statuses) < len(requests):  # as mpi4py: the list grows to one status per request
                statuses.append(Status())
        out: List[Any] = []
        first: Optional[BaseException] = None
        for q, r in enumerate(requests):
            try:
                out.append(r._finish(statuses[q] if statuses is not None else None))
            except _errors.Exception as e:  # wait for the others, then raise the first failure
                out.append(None)
                first = first or e
        if first is not None:
            raise first
        return out

    @classmethod
    def Testall(cls, requests: Sequence["Request"], statuses: Optional[List[Status]] = None) -> bool:
        if not all(r._work is None or r._work.is_completed() for r in requests):
            return False
        return cls.Waitall(requests, statuses)

    @classmethod
    def Waitany(cls, requests: Sequence["Request"], status: Optional[Status] = None) -> int:
        """Index of a request that completed (the first, in list order, once
        one has); UNDEFINED when all are null."""
        return cls._waitany(requests, status)[0]

    @classmethod
    def _waitany(cls, requests: Sequence["Request"], status: Optional[Status]) -> Tuple[int, Any]:
        import time

        live = [q for q, r in enumerate(requests) if r._work is not None]
        if not live:
            if status is not None:
                status._set(*_EMPTY)
            return UNDEFINED, None
        delay = 1e-5
        while True:
            for q in live:
                done, obj = requests[q].test(status)
                if done:
                    return q, obj
            time.sleep(delay)
            delay = min(delay * 2, 1e-3)

    @classmethod
    def Testany(cls, requests: Sequence["Request"], status: Optional[Status] = None) -> Tuple[int, bool]:
        live = [q for q, r in enumerate(requests) if r._work is not None]
        if not live:
            return UNDEFINED, True
        for q in live:
            if requests[q].Test(status):
                return q, True
        return UNDEFINED, False

    @classmethod
    def waitall(cls, requests: Sequence["Request"], statuses: Optional[List[Status]] = None) -> List[Any]:
        return cls._waitall(requests, statuses)

    @classmethod
    def waitany(cls, requests: Sequence["Request"], status: Optional[Status] = None) -> Tuple[int, Any]:
        return cls._waitany(requests, status)

    @classmethod
    def testall(cls, requests: Sequence["Request"],
                statuses: Optional[List[Status]] = None) -> Tuple[bool, Optional[List[Any]]]:
        if not all(r._work is None or r._work.is_completed() for r in requests):
            return False, None
        return True, cls._waitall(requests, statuses)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Request):
            return self._work is other._work
        return NotImplemented

    def __hash__(self) -> int:
        return id(self._work)

    def __bool__(self) -> bool:
        return self._work is not None

    def __repr__(self) -> str:
        return "<collie.MPI.Request %s>" % ("null" if self._work is None else self._call)


class Prequest(Request):
    """mpi4py's MPI.Prequest, a persistent request (Send_init, Recv_init,
    ...): each Start posts the operation anew (a new Isend or Irecv of the
    same arguments); Wait/Test make it inactive, not null, so it can be
    started again. Free makes it null."""

    _mpi_class = "Prequest"

    __slots__ = ("_post", "_freed")

    def __init__(self, post: Callable[[], Request], call: str) -> None:
        super().__init__(None, call)
        self._post: Optional[Callable[[], Request]] = post
        self._freed = False

    def Start(self) -> None:
        """Posts the operation (the request must be inactive)."""
        if self._post is None:
            raise _errors.Exception(_errors.ERR_REQUEST, "collie.MPI: Prequest.Start: the request was freed")
        if self._work is not None:
            raise _errors.Exception(_errors.ERR_REQUEST, "collie.MPI: Prequest.Start: %s is still active (Wait for "
                                    "it before starting it again)" % self._call)
        r = self._post()
        self._work, self._st, self._obj = r._work, r._st, r._obj

    def start(self) -> None:
        self.Start()

    @classmethod
    def Startall(cls, requests: Sequence["Prequest"]) -> None:
        for r in requests:
            r.Start()

    @classmethod
    def startall(cls, requests: Sequence["Prequest"]) -> None:
        cls.Startall(requests)

    def Free(self) -> None:
        """Drops the request (an active operation still completes)."""
        self._clear()
        self._post = None
        self._freed = True

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Request):
            if self._freed:
                return other._work is None and not isinstance(other, Prequest) or other is self
            return other is self
        return NotImplemented

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        return not self._freed

    def __repr__(self) -> str:
        return "<collie.MPI.Prequest %s, %s>" % (self._call, "freed" if self._freed else
                                                 "active" if self._work is not None else "inactive")


REQUEST_NULL = Request()
