"""_store.py - a key-value store object of the caller's as collie's store.

collie_comm_init_config can rendezvous through callbacks instead of opening
a tcp or file store of its own (collie_store_callbacks_t, docs/bootstrap.md).
KVStore turns any object with torch.distributed.Store's methods into those
callbacks:

    set(key: str, value: bytes)
    get(key: str) -> bytes
    add(key: str, delta: int) -> int
    wait(keys: list[str], timeout: datetime.timedelta)   (raises on timeout)

which is what torch hands every process group (a PrefixStore over a TCPStore
or FileStore), so the torch backend meets through torch's own rendezvous.

The callbacks run on the thread that called init or split, with the GIL
taken by ctypes. They never let an exception escape into C (ctypes would
print it and return 0, SUCCESS): a failure becomes a result code, and its
text is kept in ``error`` for the Python caller to add to collie's message.
"""

from __future__ import annotations

import ctypes
import datetime
from typing import Any, List, Optional, Protocol, Union

from . import _lib


class TorchStoreLike(Protocol):
    """torch.distributed.Store's methods, as KVStore calls them."""

    def set(self, key: str, value: Any) -> Any: ...  # (bytes; torch's stubs say str)

    def get(self, key: str) -> Any: ...

    def add(self, key: str, value: int) -> Any: ...

    def wait(self, keys: List[str], timeout: datetime.timedelta) -> Any: ...


class KVStore:
    """Callbacks over store (torch.distributed.Store-like); keep this object
    alive as long as a communicator made with it (the Comm holds it)."""

    def __init__(self, store: TorchStoreLike) -> None:
        for m in ("set", "get", "add", "wait"):
            if not callable(getattr(store, m, None)):
                raise TypeError("store %r has no %s() method (expected set, get, add and wait, as "
                                "torch.distributed.Store)" % (store, m))
        self.store: Any = store  # None once collie has released it (_release)
        self.error: Optional[str] = None  # text of the last callback failure
        self._fns = (
            _lib.STORE_SET_FN(self._set),
            _lib.STORE_GET_FN(self._get),
            _lib.STORE_ADD_FN(self._add),
            _lib.STORE_RELEASE_FN(self._release),
        )
        self.callbacks = _lib.StoreCallbacks(None, *self._fns)
        self.released = 0

    def _fail(self, op: str, key: Union[str, bytes], exc: BaseException) -> int:
        if isinstance(key, bytes):
            key = key.decode("utf-8", "replace")
        text = str(exc) or type(exc).__name__
        self.error = "%s %r: %s" % (op, key, text)
        if "timeout" in text.lower() or "timed out" in text.lower():
            return _lib.TIMEOUT
        return _lib.REMOTE_ERROR

    # The C side passes pointers as ints (NULL as None: ctx always, value and
    # buf only where length or cap is 0, when they are not read).
    def _set(self, ctx: Optional[int], key: bytes, value: int, length: int) -> int:
        try:
            self.store.set(key.decode(), ctypes.string_at(value, length) if length else b"")
            return _lib.SUCCESS
        except BaseException as e:  # noqa: B902 - nothing may reach C
            return self._fail("set", key, e)

    def _get(self, ctx: Optional[int], key: bytes, timeout_ms: int, buf: int, cap: int,
             length: ctypes._Pointer[ctypes.c_size_t]) -> int:
        k = key.decode()
        try:
            # torch reads a zero timeout as "wait for ever": never pass one.
            self.store.wait([k], datetime.timedelta(milliseconds=max(int(timeout_ms), 1)))
        except BaseException as e:  # noqa: B902
            self._fail("get", k, e)
            self.error = "get %r: not set within %d ms (%s)" % (k, timeout_ms, e)
            return _lib.TIMEOUT
        try:
            v = bytes(self.store.get(k))
        except BaseException as e:  # noqa: B902
            return self._fail("get", k, e)
        length[0] = len(v)
        if v and cap:
            ctypes.memmove(buf, v, min(len(v), cap))
        return _lib.SUCCESS

    def _add(self, ctx: Optional[int], key: bytes, delta: int, out: ctypes._Pointer[ctypes.c_int64]) -> int:
        try:
            out[0] = int(self.store.add(key.decode(), int(delta)))
            return _lib.SUCCESS
        except BaseException as e:  # noqa: B902
            return self._fail("add", key, e)

    def _release(self, ctx: Optional[int]) -> None:
        # collie is done with the store: let it go now rather than at the
        # next garbage collection (the callbacks and this object form a
        # cycle), since the store may hold a listening port (torch's
        # TCPStore on rank 0) that a second init wants to bind again.
        self.released += 1
        self.store = None
