"""_status.py - MPI.Status: what a receive got (source, tag, bytes)."""

from __future__ import annotations

import ctypes
from typing import Any, Optional, Tuple

from . import _errors
from ._datatype import BYTE, Datatype, as_datatype

ANY_SOURCE = -1
ANY_TAG = -1
PROC_NULL = -2
UNDEFINED = -32766


class CStatus(ctypes.Structure):
    """collie_status_t: what collie_recv_status / collie_probe found."""

    _fields_ = [("source", ctypes.c_int), ("tag", ctypes.c_int), ("bytes", ctypes.c_size_t)]

    def values(self) -> Tuple[int, int, int]:
        return int(self.source), int(self.tag), int(self.bytes)


class Status(_errors.RefusesUnknown):
    """mpi4py's MPI.Status. A receive fills it: Get_source(), Get_tag(),
    Get_count(datatype) (elements of datatype; UNDEFINED when the bytes are
    not a whole number of them), Get_error()."""

    _mpi_class = "Status"

    __slots__ = ("source", "tag", "error", "_nbytes", "_cancelled")

    def __init__(self, status: Optional["Status"] = None) -> None:
        self.source = ANY_SOURCE
        self.tag = ANY_TAG
        self.error = _errors.SUCCESS
        self._nbytes = 0
        self._cancelled = False
        if status is not None:
            self.source, self.tag, self.error = status.source, status.tag, status.error
            self._nbytes, self._cancelled = status._nbytes, status._cancelled

    def Get_source(self) -> int:
        return self.source

    def Set_source(self, source: int) -> None:
        self.source = int(source)

    def Get_tag(self) -> int:
        return self.tag

    def Set_tag(self, tag: int) -> None:
        self.tag = int(tag)

    def Get_error(self) -> int:
        return self.error

    def Set_error(self, error: int) -> None:
        self.error = int(error)

    def Get_count(self, datatype: Any = BYTE) -> int:
        """Elements of datatype received (a derived one travels packed: its
        packed bytes, i.e. its size, per element)."""
        dt: Datatype = as_datatype(datatype, "Status.Get_count: datatype")
        per = dt.packed_size()
        if per == 0:
            return 0
        if self._nbytes % per:
            return UNDEFINED
        return self._nbytes // per

    def Get_elements(self, datatype: Any) -> int:
        """Basic elements received: for a derived type, those of its whole
        elements and of the leading part of a partial one (UNDEFINED when
        the message ends inside a basic element)."""
        dt: Datatype = as_datatype(datatype, "Status.Get_elements: datatype")
        if not dt.is_derived:
            return self.Get_count(dt)
        return dt.elements(self._nbytes)

    def Set_elements(self, datatype: Any, count: int) -> None:
        self._nbytes = int(count) * as_datatype(datatype, "Status.Set_elements: datatype").packed_size()

    def Is_cancelled(self) -> bool:
        return self._cancelled

    @property
    def count(self) -> int:
        return self.Get_count(BYTE)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def __repr__(self) -> str:
        return "<collie.MPI.Status source=%d tag=%d bytes=%d>" % (self.source, self.tag, self._nbytes)

    # ---- for the binding ----

    def _set(self, source: int, tag: int, nbytes: int) -> None:
        self.source, self.tag, self.error, self._nbytes = source, tag, _errors.SUCCESS, nbytes


def fill(status: Optional[Status], source: int, tag: int, nbytes: int) -> None:
    """Fills status (a Status the caller passed, or None) after a receive."""
    if status is None:
        return
    if not isinstance(status, Status):
        raise TypeError("collie.MPI: status = %r is not an MPI.Status" % (status,))
    status._set(source, tag, nbytes)
