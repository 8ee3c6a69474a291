"""_request.py - MPI.Request over a collie Work (the nonblocking collectives).

A Request completes when its Work does; Wait/Test raise MPI.Exception with
collie's message when the operation failed. REQUEST_NULL is a Request with
nothing pending (Wait returns at once with an empty status).
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from .. import _comm as _ccomm
from . import _errors
from ._status import ANY_SOURCE, ANY_TAG, UNDEFINED, Status


class Request(_errors.RefusesUnknown):
    """mpi4py's MPI.Request: Wait, Test, Free and the class methods Waitall,
    Testall, Waitany, Testany. A completed request becomes REQUEST_NULL
    (compares equal to it)."""

    _mpi_class = "Request"

    __slots__ = ("_work", "_call")

    def __init__(self, work: Optional[_ccomm.Work] = None, call: str = "") -> None:
        self._work = work
        self._call = call

    def _finish(self, status: Optional[Status]) -> None:
        w, self._work = self._work, None
        if status is not None:
            status._set(ANY_SOURCE, ANY_TAG, 0)
        if w is not None:
            with _errors.collie_errors(self._call):
                w.wait()

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
        self._work = None

    def Cancel(self) -> None:
        _errors.unsupported("Request.Cancel", "collective requests cannot be cancelled")

    def Get_status(self, status: Optional[Status] = None) -> bool:
        w = self._work
        done = w is None or w.is_completed()
        if done and status is not None:
            status._set(ANY_SOURCE, ANY_TAG, 0)
        return done

    # lowercase forms (mpi4py's wait()/test() return the received object: None here)
    def wait(self, status: Optional[Status] = None) -> Any:
        self.Wait(status)
        return None

    def test(self, status: Optional[Status] = None) -> Tuple[bool, Any]:
        return self.Test(status), None

    @classmethod
    def Waitall(cls, requests: Sequence["Request"], statuses: Optional[List[Status]] = None) -> bool:
        first: Optional[BaseException] = None
        for q, r in enumerate(requests):
            try:
                r.Wait(statuses[q] if statuses is not None and q < len(statuses) else None)
            except _errors.Exception as e:  # wait for the others, then raise the first failure
                first = first or e
        if first is not None:
            raise first
        return True

    @classmethod
    def Testall(cls, requests: Sequence["Request"], statuses: Optional[List[Status]] = None) -> bool:
        if not all(r._work is None or r._work.is_completed() for r in requests):
            return False
        return cls.Waitall(requests, statuses)

    @classmethod
    def Waitany(cls, requests: Sequence["Request"], status: Optional[Status] = None) -> int:
        """Index of a request that completed (the first, in list order, once
        one has); UNDEFINED when all are null."""
        import time

        live = [q for q, r in enumerate(requests) if r._work is not None]
        if not live:
            if status is not None:
                status._set(ANY_SOURCE, ANY_TAG, 0)
            return UNDEFINED
        delay = 1e-5
        while True:
            for q in live:
                if requests[q].Test(status):
                    return q
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
        cls.Waitall(requests, statuses)
        return [None] * len(requests)

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


REQUEST_NULL = Request()
