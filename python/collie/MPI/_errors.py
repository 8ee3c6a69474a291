"""_errors.py - MPI.Exception (mpi4py's shape) and the NotImplementedError
that names an mpi4py call collie.MPI does not offer.

A failed collie call (a collie.CollieError: a peer died, a deadline passed,
collectives mismatched) surfaces as MPI.Exception carrying collie's own
message, which names the operation and the peer. Argument errors found in
Python before any communication raise TypeError / ValueError as mpi4py does.
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, NoReturn

from .. import _lib
from .._errors import CollieError

# The error classes, with Open MPI's values (mpi4py reports the library's).
SUCCESS = 0
ERR_BUFFER = 1
ERR_COUNT = 2
ERR_TYPE = 3
ERR_TAG = 4
ERR_COMM = 5
ERR_RANK = 6
ERR_REQUEST = 7
ERR_ROOT = 8
ERR_GROUP = 9
ERR_OP = 10
ERR_ARG = 13
ERR_UNKNOWN = 14
ERR_TRUNCATE = 15
ERR_OTHER = 16
ERR_INTERN = 17
ERR_PENDING = 18
ERR_IN_STATUS = 19
ERR_UNSUPPORTED_OPERATION = 52
ERR_LASTCODE = 92

_NAMES: Dict[int, str] = {
    SUCCESS: "MPI_SUCCESS: no errors",
    ERR_BUFFER: "MPI_ERR_BUFFER: invalid buffer pointer",
    ERR_COUNT: "MPI_ERR_COUNT: invalid count argument",
    ERR_TYPE: "MPI_ERR_TYPE: invalid datatype",
    ERR_TAG: "MPI_ERR_TAG: invalid tag",
    ERR_COMM: "MPI_ERR_COMM: invalid communicator",
    ERR_RANK: "MPI_ERR_RANK: invalid rank",
    ERR_REQUEST: "MPI_ERR_REQUEST: invalid request",
    ERR_ROOT: "MPI_ERR_ROOT: invalid root",
    ERR_GROUP: "MPI_ERR_GROUP: invalid group",
    ERR_OP: "MPI_ERR_OP: invalid reduce operation",
    ERR_ARG: "MPI_ERR_ARG: invalid argument of some other kind",
    ERR_UNKNOWN: "MPI_ERR_UNKNOWN: unknown error",
    ERR_TRUNCATE: "MPI_ERR_TRUNCATE: message truncated",
    ERR_OTHER: "MPI_ERR_OTHER: known error not in list",
    ERR_INTERN: "MPI_ERR_INTERN: internal error",
    ERR_PENDING: "MPI_ERR_PENDING: pending request",
    ERR_IN_STATUS: "MPI_ERR_IN_STATUS: error code is in status",
    ERR_UNSUPPORTED_OPERATION: "MPI_ERR_UNSUPPORTED_OPERATION: operation not supported",
}

# collie_result_t -> the closest MPI error class.
_FROM_COLLIE: Dict[int, int] = {
    _lib.INVALID_ARGUMENT: ERR_ARG,
    _lib.INVALID_USAGE: ERR_OTHER,
    _lib.SYSTEM_ERROR: ERR_OTHER,
    _lib.REMOTE_ERROR: ERR_OTHER,
    _lib.TIMEOUT: ERR_OTHER,
    _lib.UNSUPPORTED: ERR_UNSUPPORTED_OPERATION,
    _lib.INTERNAL_ERROR: ERR_INTERN,
}


def Get_error_class(errorcode: int) -> int:
    """The error class of an error code (they are the same here)."""
    return int(errorcode)


def Get_error_string(errorcode: int) -> str:
    return _NAMES.get(int(errorcode), "MPI error code %d" % int(errorcode))


class Exception(RuntimeError):
    """mpi4py's MPI.Exception: error_code, Get_error_code(),
    Get_error_class(), Get_error_string(); str() is the message, which for a
    failure inside collie is collie's own (it names the operation and the
    peer). A collie failure keeps the collie.CollieError as __cause__."""

    def __init__(self, ierr: int = SUCCESS, message: str = "") -> None:
        self.error_code = int(ierr)
        self.message = message or Get_error_string(ierr)
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    def __int__(self) -> int:
        return self.error_code

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Exception):
            return self.error_code == other.error_code
        if isinstance(other, int):
            return self.error_code == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.error_code)

    def Get_error_code(self) -> int:
        return self.error_code

    def Get_error_class(self) -> int:
        return Get_error_class(self.error_code)

    def Get_error_string(self) -> str:
        return "%s (%s)" % (Get_error_string(self.error_code), self.message)

    error_class = property(Get_error_class)
    error_string = property(Get_error_string)


def from_collie(e: CollieError, call: str) -> Exception:
    """e, a collie failure of call, as an MPI.Exception."""
    code = _FROM_COLLIE.get(e.code, ERR_OTHER)
    if "message truncated" in e.message:  # collie_recv_status: the message is longer than the buffer
        code = ERR_TRUNCATE
    return Exception(code, "collie.MPI: %s: %s" % (call, e.message))


@contextlib.contextmanager
def collie_errors(call: str) -> Iterator[None]:
    """Turns a collie.CollieError raised inside into MPI.Exception."""
    try:
        yield
    except CollieError as e:
        raise from_collie(e, call) from e


class NotSupported(NotImplementedError, AttributeError):
    """An mpi4py name collie.MPI does not offer (yet). A NotImplementedError
    that is also an AttributeError, so hasattr() and getattr(x, name,
    default) keep working on collie.MPI as they do on mpi4py."""


def unsupported(call: str, why: str = "") -> NoReturn:
    raise NotSupported("collie.MPI: %s is not supported%s" % (call, ": " + why if why else " (docs/mpi.md lists what is)"))


class RefusesUnknown:
    """Base of collie.MPI's classes: an attribute they lack is a call of
    mpi4py's that collie.MPI does not offer, which raises NotSupported
    naming it (an AttributeError too, so hasattr says False)."""

    __slots__ = ()
    _mpi_class = ""  # the name the message gives the class
    _why_unsupported = ""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        unsupported("%s.%s" % (self._mpi_class, name), self._why_unsupported)


NO_MESSAGE = ("matched probes (MPI.Message, MPI_Mprobe) are not offered: Probe then Recv from the probed "
              "source and tag takes the probed message")
