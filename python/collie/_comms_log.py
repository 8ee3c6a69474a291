"""_comms_log.py - comms.csv without a collie communicator, over the C
library's collie_comms_log_* (docs/telemetry.md): the file, its header, the
step rules and the wire model live in C, so a row written here is a row a
collie communicator would write.

A Charge is one call charged at issue whose time is due at completion. Every
charge is finished exactly once, before the log closes: close() finishes the
ones still open (with the time so far), so a late finish after close is a
no-op instead of a write into freed memory.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from typing import Dict, Optional, Tuple, Union

from . import _lib
from ._errors import check

# collie_collective_t
ALLREDUCE, ALLGATHER, REDUCE_SCATTER, BROADCAST, REDUCE, ALLTOALL, GATHER, SCATTER, SEND_RECV, BARRIER = range(10)


class Charge:
    """One charged call; finish(ns) adds its time (once)."""

    __slots__ = ("log", "ptr", "coll", "t0")

    def __init__(self, log: CommsLog, ptr: int, coll: int, t0: int) -> None:
        self.log, self.ptr, self.coll, self.t0 = log, ptr, coll, t0

    def finish(self, elapsed_ns: Optional[int] = None) -> None:
        """Adds elapsed_ns (default: since the charge) to the call's step."""
        if elapsed_ns is None:
            elapsed_ns = time.perf_counter_ns() - self.t0
        self.log._finish(self, elapsed_ns)


class CommsLog:
    """collie_comms_log_t for rank `rank` of `world_size` (rank 0 writes
    dir/comms.csv). Thread-safe."""

    def __init__(self, directory: Union[str, os.PathLike[str], None], rank: int, world_size: int) -> None:
        self.dir = os.fspath(directory) if directory else "."
        self.rank, self.world_size = rank, world_size
        # Whether a call now would be charged: this rank writes rows and a
        # step is open (only step_begin/step_end below change it), so callers
        # skip the C call when it would do nothing.
        self.charging = False
        self.numbers: Optional[Tuple[int, int]] = None  # (step, epoch) of the open step, as step_begin/step_end left it
        self._lock = threading.Lock()
        self._open: Dict[int, Charge] = {}  # id(Charge) -> Charge not finished yet (rank 0, inside steps)
        h = ctypes.c_void_p()
        check(_lib.need("collie_comms_log_open")(os.fsencode(self.dir), rank, world_size, ctypes.byref(h)))
        self._h: Optional[int] = h.value
        lib = _lib.lib()
        self._charge_c, self._done_c = lib.collie_comms_log_charge, lib.collie_comms_log_done
        self._record_c = lib.collie_comms_log_record
        self._ptr = ctypes.c_void_p()
        self._ptr_ref = ctypes.byref(self._ptr)

    @property
    def path(self) -> str:
        return os.path.join(self.dir, "comms.csv")

    @property
    def closed(self) -> bool:
        return self._h is None

    def step_begin(self, step: int, epoch: int) -> None:
        check(_lib.need("collie_comms_log_step_begin")(self._h, int(step), int(epoch)))
        self.charging = self.rank == 0
        self.numbers = (int(step), int(epoch))

    def step_end(self) -> None:
        check(_lib.need("collie_comms_log_step_end")(self._h))
        self.charging = False
        self.numbers = None

    def step(self) -> Tuple[int, int]:
        """(step, epoch) of the open step; step 0 when none is open."""
        s, e = ctypes.c_int64(), ctypes.c_int64()
        check(_lib.need("collie_comms_log_step")(self._h, ctypes.byref(s), ctypes.byref(e)))
        return s.value, e.value

    def charge(self, coll: int, category: int, group_size: int, size: int) -> Optional[Charge]:
        """Charges a call issued now; returns its Charge (None when nothing
        is due: outside a step, or a rank that writes no rows)."""
        t0 = time.perf_counter_ns()
        with self._lock:
            check(self._charge_c(self._h, coll, category, group_size, size, self._ptr_ref))
            ptr = self._ptr.value
            if ptr is None:
                return None
            c = Charge(self, ptr, coll, t0)
            self._open[id(c)] = c
            return c

    def record(self, coll: int, category: int, group_size: int, size: int, elapsed_ns: int) -> None:
        """A call that completed, elapsed_ns long."""
        check(self._record_c(self._h, coll, category, group_size, size, elapsed_ns))

    def _finish(self, c: Charge, elapsed_ns: int) -> None:
        with self._lock:
            if self._open.pop(id(c), None) is None:
                return  # finished already, or finished by close()
            check(self._done_c(self._h, c.ptr, c.coll, max(0, int(elapsed_ns))))

    def close(self) -> None:
        """Finishes what is open (time so far), writes the rows due, frees."""
        with self._lock:
            if self._h is None:
                return
            now = time.perf_counter_ns()
            for c in self._open.values():
                self._done_c(self._h, c.ptr, c.coll, now - c.t0)
            self._open.clear()
            self.charging = False
            self.numbers = None
            _lib.lib().collie_comms_log_close(self._h)
            self._h = None


def wire_bytes(coll: int, p: int, size: int) -> int:
    """The wire model's bytes (collie_wire_bytes)."""
    return int(_lib.need("collie_wire_bytes")(coll, p, size))
