"""_errors.py - collie's exceptions: one class per collie_result_t.

Every failed C call becomes an exception carrying the result code and the
C library's own message (collie_last_error(), which names the argument and
value, or the peer and operation). Argument errors found in Python, before
any communication, raise InvalidArgument with a message of the same kind.
Each class also derives from the closest built-in exception (ValueError,
TimeoutError, ...) so that Pythonic ``except ValueError`` works.
"""

from __future__ import annotations

from typing import Dict, Optional, Type

from . import _lib


class CollieError(Exception):
    """Base of every collie error.

    Attributes: ``code`` (the collie_result_t value, an int), ``message``
    (the detail: collie_last_error() for a C failure)."""

    code: int = _lib.INTERNAL_ERROR

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        if code is not None:
            self.code = code
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        return self.message

    @property
    def code_name(self) -> str:
        """Short description of the code ("invalid argument")."""
        return _lib.RESULT_NAMES.get(self.code, "unknown result %r" % self.code)


class InvalidArgument(CollieError, ValueError):
    """A bad argument: NULL/short buffer, bad dtype/op/root/peer, mismatched
    sizes, non-contiguous or read-only buffer. Raised before any
    communication: the communicator stays usable."""

    code = _lib.INVALID_ARGUMENT


class InvalidUsage(CollieError, RuntimeError):
    """Wrong state: a finalized, aborted or poisoned communicator,
    collectives mismatched across ranks, a step opened twice."""

    code = _lib.INVALID_USAGE


class CollieSystemError(CollieError, OSError):
    """An OS call failed (the message has errno's text)."""

    code = _lib.SYSTEM_ERROR

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        CollieError.__init__(self, message, code)


class RemoteError(CollieError, ConnectionError):
    """A peer failed, vanished or aborted."""

    code = _lib.REMOTE_ERROR

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        CollieError.__init__(self, message, code)


class Timeout(CollieError, TimeoutError):
    """An operation (or a wait) passed its deadline."""

    code = _lib.TIMEOUT

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        CollieError.__init__(self, message, code)


class Unsupported(CollieError, NotImplementedError):
    """A valid request this build cannot do (e.g. BXOR on floats)."""

    code = _lib.UNSUPPORTED


class InternalError(CollieError):
    """A bug in collie."""

    code = _lib.INTERNAL_ERROR


class LibraryNotFound(CollieError, _lib.LibraryNotFoundError):
    """libcollie.so could not be loaded; the message lists COLLIE_LIBRARY and
    every path tried."""

    code = _lib.SYSTEM_ERROR

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        CollieError.__init__(self, message, code)


# A traceback names each class as users import it ("collie.InvalidArgument",
# not "collie._errors.InvalidArgument"); pickle finds them there too.
for _cls in (CollieError, InvalidArgument, InvalidUsage, CollieSystemError, RemoteError, Timeout,
             Unsupported, InternalError, LibraryNotFound):
    _cls.__module__ = "collie"
del _cls

_BY_CODE: Dict[int, Type[CollieError]] = {
    _lib.INVALID_ARGUMENT: InvalidArgument,
    _lib.INVALID_USAGE: InvalidUsage,
    _lib.SYSTEM_ERROR: CollieSystemError,
    _lib.REMOTE_ERROR: RemoteError,
    _lib.TIMEOUT: Timeout,
    _lib.UNSUPPORTED: Unsupported,
    _lib.INTERNAL_ERROR: InternalError,
}


def error_class(code: int) -> Type[CollieError]:
    """The exception class for a collie_result_t value."""
    return _BY_CODE.get(code, CollieError)


def make_error(code: int, message: str) -> CollieError:
    """An exception instance for code with message (no C call)."""
    return error_class(code)(message, code)


def last_error(code: int) -> CollieError:
    """The exception for a failed C call that returned code, with the calling
    thread's collie_last_error() as its message."""
    raw = _lib.lib().collie_last_error()
    msg = raw.decode("utf-8", "replace") if raw else ""
    if not msg:
        msg = _lib.RESULT_NAMES.get(code, "error %d" % code)
    return make_error(code, msg)


def check(code: int) -> None:
    """Raises the exception for code unless it is SUCCESS."""
    if code != _lib.SUCCESS:
        raise last_error(code)


def invalid(message: str) -> InvalidArgument:
    """InvalidArgument for a bad Python-side argument."""
    return InvalidArgument(message)
