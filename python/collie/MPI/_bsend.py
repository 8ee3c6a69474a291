"""_bsend.py - MPI's buffered sends: Attach_buffer, Detach_buffer and the
space Bsend/Ibsend/Bsend_init take in the attached buffer.

As MPI defines it (MPI-3.1 section 3.6), a buffered send completes locally:
its message is copied aside and sent from there, and the program may reuse
its buffer at once, whatever the receiver does. The copy must fit in the
buffer the program attached: each pending buffered send holds its packed
bytes + BSEND_OVERHEAD of it until its send completed, and a send that does
not fit (or finds no buffer attached) raises MPI.Exception (ERR_BUFFER)
naming the sizes. collie.MPI counts that space against the attached
buffer's size but keeps each copy in an array of its own (the attached
memory itself is not written); the sends of the copies are collie's
nonblocking sends, which progress as any (docs/mpi.md). Detach_buffer
waits until every buffered send completed, then returns the buffer.
One buffer is attached at a time, for the whole process (as MPI).
"""

from __future__ import annotations

import threading
from typing import Any, List, Optional, Tuple

from . import _errors
from ._request import Request

# What each buffered send takes beyond its bytes (Open MPI's value, as its mpi4py reports).
BSEND_OVERHEAD = 128

_lock = threading.Lock()
_attached: Optional[Any] = None  # the object the program attached
_size = 0  # its bytes
_used = 0  # bytes the pending buffered sends take
_pending: List[Tuple[Request, int]] = []  # (the send of a copy, the bytes it takes)


def Attach_buffer(buf: Any) -> None:
    """Attaches buf (a writable buffer: bytearray, numpy array, ...) for
    buffered sends; its size bounds the bytes they hold at once. One at a
    time: attaching while one is attached raises MPI.Exception (ERR_BUFFER)."""
    global _attached, _size, _used
    from ._buffer import _acquire

    raw, _ = _acquire(buf, "Attach_buffer: buf", True)
    with _lock:
        if _attached is not None:
            raise _errors.Exception(_errors.ERR_BUFFER, "collie.MPI: Attach_buffer: a buffer of %d bytes is "
                                    "already attached (MPI allows one at a time: Detach_buffer first)" % _size)
        _attached, _size, _used = buf, int(raw.size), 0


def Detach_buffer() -> Any:
    """Waits until every buffered send completed (each within its deadline),
    detaches the buffer and returns it. MPI.Exception (ERR_BUFFER) when none
    is attached; a buffered send that failed raises its error here, once
    the others completed."""
    global _attached, _size, _used
    with _lock:
        if _attached is None:
            raise _errors.Exception(_errors.ERR_BUFFER, "collie.MPI: Detach_buffer: no buffer is attached")
        pending = list(_pending)
    first: Optional[BaseException] = None
    for req, _ in pending:
        try:
            req.Wait()
        except _errors.Exception as e:  # wait for the others, then raise the first failure
            first = first or e
    with _lock:
        buf = _attached
        _attached, _size, _used = None, 0, 0
        del _pending[:]
    if first is not None:
        raise first
    return buf


def _reclaim() -> None:
    """Frees the space of the buffered sends that completed (the caller holds _lock)."""
    global _used
    left = []
    for req, cost in _pending:
        w = req._work
        if w is None or w.is_completed():
            _used -= cost
        else:
            left.append((req, cost))
    _pending[:] = left


def reserve(call: str, nbytes: int) -> int:
    """Takes the space of a buffered send of nbytes (nbytes +
    BSEND_OVERHEAD); MPI.Exception (ERR_BUFFER) naming the sizes when no
    buffer is attached or it has not that much free. Returns the space taken."""
    global _used
    cost = nbytes + BSEND_OVERHEAD
    with _lock:
        if _attached is None:
            raise _errors.Exception(_errors.ERR_BUFFER, "collie.MPI: %s: no buffer is attached for buffered sends "
                                    "(this one needs %d bytes = %d + MPI.BSEND_OVERHEAD; MPI.Attach_buffer first)"
                                    % (call, cost, nbytes))
        if _used + cost > _size:
            _reclaim()
        if _used + cost > _size:
            raise _errors.Exception(_errors.ERR_BUFFER, "collie.MPI: %s: the attached buffer lacks room: this send "
                                    "needs %d bytes (%d + MPI.BSEND_OVERHEAD) but %d of its %d are free (%d pending "
                                    "buffered sends hold the rest until they complete)"
                                    % (call, cost, nbytes, _size - _used, _size, len(_pending)))
        _used += cost
    return cost


def release(cost: int) -> None:
    """Gives back space reserve() took for a send that was not posted."""
    global _used
    with _lock:
        _used -= cost


def track(req: Request, cost: int) -> None:
    """The posted send of a buffered copy: its space is free once it completed."""
    with _lock:
        _pending.append((req, cost))
