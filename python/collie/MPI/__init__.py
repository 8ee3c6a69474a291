"""collie.MPI - mpi4py's interface on collie: `from collie import MPI`.

An mpi4py program runs on collie with its import changed
(`from mpi4py import MPI` -> `from collie import MPI`), launched by
collierun (or torchrun, Slurm, Open MPI's or MPICH's launcher):

    from collie import MPI
    import numpy as np
    comm = MPI.COMM_WORLD
    x = np.full(4, comm.Get_rank(), dtype="d")
    comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)

docs/mpi.md says what is offered; everything else of mpi4py raises
NotImplementedError naming the call. Failures inside collie raise
MPI.Exception carrying collie's message (it names the operation and peer).
"""

from __future__ import annotations

import socket
import time
from typing import Any, Optional, Tuple

from ._bsend import BSEND_OVERHEAD, Attach_buffer, Detach_buffer
from ._buffer import BOTTOM, IN_PLACE
from ._comm import (APPNUM, COMM_NULL, COMM_SELF, COMM_WORLD, CONGRUENT, HOST, IDENT, IO, LASTUSEDCODE, SIMILAR,
                    TAG_UB, UNEQUAL, UNIVERSE_SIZE, WTIME_IS_GLOBAL, Comm,
                    Intracomm, finalize_all, is_finalized)
from ._datatype import (BOOL, BYTE, C_BOOL, C_COMPLEX, C_DOUBLE_COMPLEX, C_FLOAT_COMPLEX, CHAR, COMPLEX,
                        DATATYPE_NULL, DOUBLE, DOUBLE_COMPLEX, DOUBLE_INT, FLOAT, FLOAT_INT, INT, INT8_T, INT16_T,
                        INT32_T, INT64_T, INT_INT, LONG, LONG_INT, LONG_LONG, PACKED, SHORT, SHORT_INT,
                        SIGNED_CHAR, SIGNED_INT, SIGNED_LONG, SIGNED_LONG_LONG, SIGNED_SHORT, TWOINT, UINT8_T,
                        UINT16_T, UINT32_T, UINT64_T, UNSIGNED, UNSIGNED_CHAR, UNSIGNED_INT, UNSIGNED_LONG,
                        UNSIGNED_LONG_LONG, UNSIGNED_SHORT, Datatype, from_numpy, to_numpy)
from ._errors import (ERR_ARG, ERR_BUFFER, ERR_COMM, ERR_COUNT, ERR_GROUP, ERR_IN_STATUS, ERR_INTERN,
                      ERR_LASTCODE, ERR_OP, ERR_OTHER, ERR_PENDING, ERR_RANK, ERR_REQUEST, ERR_ROOT, ERR_TAG,
                      ERR_TRUNCATE, ERR_TYPE, ERR_UNKNOWN, ERR_UNSUPPORTED_OPERATION, SUCCESS, Exception,
                      Get_error_class, Get_error_string, NotSupported, unsupported)
from ._op import BAND, BOR, BXOR, LAND, LOR, LXOR, MAX, MAXLOC, MIN, MINLOC, NO_OP, OP_NULL, PROD, REPLACE, SUM, Op
from ._request import REQUEST_NULL, Prequest, Request
from ._status import ANY_SOURCE, ANY_TAG, PROC_NULL, UNDEFINED, Status

ROOT = -4
KEYVAL_INVALID = -1

THREAD_SINGLE = 0
THREAD_FUNNELED = 1
THREAD_SERIALIZED = 2
THREAD_MULTIPLE = 3

# collie's contract: one thread at a time issues calls on a communicator
# (MPI_THREAD_SERIALIZED).
_THREAD_LEVEL = THREAD_SERIALIZED
_T0 = time.perf_counter()

# MPI's version whose interface this follows.
VERSION = 3
SUBVERSION = 1


def Init() -> None:
    """Nothing to do: the world communicator is made at first use (as
    mpi4py initialises at import). Idempotent."""


def Init_thread(required: int = THREAD_MULTIPLE) -> int:
    """As Init; returns the thread level provided (THREAD_SERIALIZED at most)."""
    return min(int(required), _THREAD_LEVEL)


def Is_initialized() -> bool:
    return True


def Is_finalized() -> bool:
    return is_finalized()


def Finalize() -> None:
    """Frees every communicator collie.MPI made (COMM_WORLD's closing
    barrier included). Idempotent; at exit it happens anyway."""
    finalize_all()


def Query_thread() -> int:
    return _THREAD_LEVEL


def Is_thread_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def Wtime() -> float:
    """Seconds since an arbitrary moment of this process (monotonic)."""
    return time.perf_counter() - _T0


def Wtick() -> float:
    return float(time.get_clock_info("perf_counter").resolution)


def Get_processor_name() -> str:
    return socket.gethostname()


def Get_version() -> Tuple[int, int]:
    return (VERSION, SUBVERSION)


def Get_library_version() -> str:
    from .. import __version__

    return "collie %s (collie.MPI: mpi4py's interface)" % __version__


def Abort(errorcode: int = 0) -> None:
    COMM_WORLD.Abort(errorcode)


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def __getattr__(name: str) -> Any:
    """Any other mpi4py name: NotImplementedError naming it (also an
    AttributeError, so hasattr(MPI, name) is False)."""
    if _dunder(name):
        raise AttributeError(name)
    unsupported("MPI.%s" % name)



__all__ = [
    "APPNUM", "HOST", "IO", "LASTUSEDCODE", "UNIVERSE_SIZE", "WTIME_IS_GLOBAL",
    "ANY_SOURCE", "ANY_TAG", "Attach_buffer", "BSEND_OVERHEAD", "Detach_buffer", "BAND", "BOOL", "BOR", "BOTTOM", "BXOR", "BYTE", "CHAR", "COMM_NULL", "COMM_SELF",
    "COMM_WORLD", "CONGRUENT", "C_BOOL", "C_COMPLEX", "C_DOUBLE_COMPLEX", "C_FLOAT_COMPLEX", "COMPLEX", "Comm",
    "DATATYPE_NULL", "DOUBLE", "DOUBLE_COMPLEX", "DOUBLE_INT", "Datatype", "ERR_ARG", "ERR_BUFFER", "ERR_COMM",
    "ERR_COUNT", "ERR_GROUP", "ERR_INTERN", "ERR_IN_STATUS", "ERR_LASTCODE", "ERR_OP", "ERR_OTHER", "ERR_PENDING",
    "ERR_RANK", "ERR_REQUEST", "ERR_ROOT", "ERR_TAG", "ERR_TRUNCATE", "ERR_TYPE", "ERR_UNKNOWN",
    "ERR_UNSUPPORTED_OPERATION", "Exception", "FLOAT", "FLOAT_INT", "Get_error_class", "Get_error_string", "IDENT",
    "INT", "INT16_T", "INT32_T", "INT64_T", "INT8_T", "INT_INT", "IN_PLACE", "Intracomm", "LAND", "LONG",
    "LONG_INT", "LONG_LONG", "LOR", "LXOR", "MAX", "MAXLOC", "MIN", "MINLOC", "NO_OP", "NotSupported", "OP_NULL",
    "Op", "PACKED", "PROC_NULL", "PROD", "Prequest", "REPLACE", "REQUEST_NULL", "ROOT", "Request", "SHORT", "SHORT_INT",
    "SIGNED_CHAR", "SIGNED_INT", "SIGNED_LONG", "SIGNED_LONG_LONG", "SIGNED_SHORT", "SIMILAR", "SUCCESS", "SUM",
    "Status", "TAG_UB", "THREAD_FUNNELED", "THREAD_MULTIPLE", "THREAD_SERIALIZED", "THREAD_SINGLE", "TWOINT",
    "UINT16_T", "UINT32_T", "UINT64_T", "UINT8_T", "UNDEFINED", "UNEQUAL", "UNSIGNED", "UNSIGNED_CHAR",
    "UNSIGNED_INT", "UNSIGNED_LONG", "UNSIGNED_LONG_LONG", "UNSIGNED_SHORT", "Abort", "Finalize", "Get_library_version",
    "Get_processor_name", "Get_version", "Init", "Init_thread", "Is_finalized", "Is_initialized", "Is_thread_main",
    "Query_thread", "Wtick", "Wtime", "from_numpy", "to_numpy",
]
