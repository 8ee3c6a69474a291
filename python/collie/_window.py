"""_window.py - one-sided windows (docs/windows.md; torchcomms' new_window /
TorchCommWindow): Comm.new_window(array) exposes an array of this rank to
every rank of the communicator; put() copies an array into a peer's window
at an element offset, signal() tells the peer those puts are done, and
wait_signal() waits for a peer's signals (applying its puts meanwhile).

torchcomms' spelling works as well: comm.new_window() then
tensor_register(tensor); put(tensor, dst_rank, offset, async_op);
signal(dst_rank, async_op); wait_signal(peer_rank, async_op) (each waits
for the peer's next signal); tensor_deregister(). The two are told apart by
their arguments' types (collie's put starts with the peer's rank, an int;
collie's wait_signal's second argument is a count, torchcomms' a bool).
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Dict, List, Literal, Optional, Union

from . import _lib
from ._buffers import Buf, as_buf, release_all
from ._enums import to_ms
from ._errors import InvalidArgument, InvalidUsage, Unsupported, last_error

if TYPE_CHECKING:
    from ._comm import Comm
    from ._types import OptHints, OptTimeout, TensorLike


class WindowWork:
    """The Work of an async put, signal or wait_signal: a put's array is
    free once wait() returned (the window's flush); the others are done."""

    __slots__ = ("_win", "_done")

    def __init__(self, win: Optional["Window"]) -> None:
        self._win, self._done = win, win is None

    def wait(self, timeout: OptTimeout = None) -> bool:
        if not self._done and self._win is not None:
            self._win.flush()
        self._done = True
        return True

    def is_completed(self) -> bool:
        return self.wait()


class Window:
    """A window over one array of this rank (numpy, torch CPU tensor,
    anything with the buffer protocol), the same dtype on every rank.
    Offsets count elements of that dtype. An array put() reads must stay
    unchanged until flush() (or fence()); the window keeps it referenced
    until then. free() (or a with block) is collective, as creation is."""

    __slots__ = ("_comm", "_h", "_buf", "_pending", "_waited")

    def __init__(self, comm: Comm, array: Optional[TensorLike]) -> None:
        self._comm = comm
        self._h: Optional[int] = None
        self._pending: List[Buf] = []
        self._waited: Dict[int, int] = {}  # peer -> signals waited for (torchcomms' form)
        self._buf: Optional[Buf] = None
        if array is not None:
            self.tensor_register(array)

    def tensor_register(self, tensor: TensorLike, owning: bool = True) -> None:
        """Makes the window over tensor (collective; torchcomms' second
        step after comm.new_window())."""
        if self._buf is not None:
            raise InvalidUsage("tensor_register: the window already has an array; tensor_deregister() first")
        comm = self._comm
        b = as_buf(tensor, "new_window: array", True)
        comm._call("new_window").where(b, "array")
        h = ctypes.c_void_p()
        with comm._lock:
            rc = _lib.lib().collie_window_create(comm._live_handle("new_window"), b.ptr, b.nbytes, ctypes.byref(h))
        if rc != _lib.SUCCESS:
            release_all([b])
            raise last_error(rc)
        self._buf, self._h, self._waited = b, h.value, {}

    def tensor_deregister(self) -> None:
        """Frees the window (collective), keeping the Window for another
        tensor_register."""
        self.free()

    def get_tensor(self) -> Optional[Any]:
        """The array the window is over (None before tensor_register)."""
        return None if self._buf is None else self._buf.obj

    def get_size(self) -> int:
        """The window's size in bytes (0 before tensor_register)."""
        return 0 if self._buf is None else self._buf.nbytes

    def map_remote_tensor(self, rank: int) -> Any:
        raise Unsupported("map_remote_tensor: collie's windows are reached by put(), not mapped (docs/windows.md)")

    def _live(self, fn: str) -> int:
        if self._h is None:
            raise InvalidUsage("%s: the window has no array (freed, or not yet tensor_register()ed)" % fn)
        return self._h

    def _check(self, rc: int) -> None:
        if rc != _lib.SUCCESS:
            raise self._comm._failed(last_error(rc))

    def put(self, peer: Union[int, TensorLike], offset: Union[int, Any], array: Any = None,
            async_op: Optional[bool] = None, hints: OptHints = None,
            timeout: OptTimeout = None) -> Optional[WindowWork]:
        """put(peer, offset, array): copies array (this window's dtype) into
        peer's window at element offset. torchcomms' put(tensor, dst_rank,
        target_offset_nelems, async_op) does the same and returns a Work
        (async_op False: the array is free again on return)."""
        if isinstance(peer, int) and not isinstance(peer, bool):
            self._put(peer, offset, array)
            return None
        tensor, dst, off = peer, offset, array
        if async_op is None:
            async_op = False
        self._put(dst, off, tensor)
        if async_op:
            return WindowWork(self)
        self.flush()
        return WindowWork(None)

    def _put(self, peer: object, offset: object, array: Any) -> None:
        h = self._live("put")
        assert self._buf is not None
        if isinstance(peer, bool) or not isinstance(peer, int):
            raise InvalidArgument("put: dst_rank = %r must be an int" % (peer,))
        b = as_buf(array, "put: array", False)
        if b.dtype != self._buf.dtype:
            release_all([b])
            raise InvalidArgument("put: array is %s but the window is %s" % (b.dtype_name, self._buf.dtype_name))
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            release_all([b])
            raise InvalidArgument("put: offset = %r must be an int >= 0 (elements)" % (offset,))
        es = self._buf.nbytes // self._buf.count if self._buf.count else 1
        rc = _lib.lib().collie_window_put(h, int(peer), offset * es, b.ptr, b.nbytes)
        if rc != _lib.SUCCESS:
            release_all([b])
            raise self._comm._failed(last_error(rc))
        self._pending.append(b)

    def signal(self, peer: int, async_op: bool = False, hints: OptHints = None,
               timeout: OptTimeout = None) -> WindowWork:
        """Tells peer that this rank's puts to it so far are done."""
        self._check(_lib.lib().collie_window_signal(self._live("signal"), int(peer)))
        return WindowWork(None)

    def wait_signal(self, peer: int, count: Union[int, bool, None] = None, timeout: Any = None,
                    hints: Any = None, *, async_op: Optional[bool] = None) -> WindowWork:
        """wait_signal(peer, count, timeout=None): blocks until peer's signals
        to this rank number at least count (since the window was made);
        timeout in seconds or a timedelta (None: the communicator's).
        torchcomms' wait_signal(peer_rank, async_op): waits for peer's next
        signal."""
        if isinstance(count, bool):  # torchcomms' positional order: (peer, async_op, hints, timeout)
            timeout, hints = hints, timeout
        if count is None or isinstance(count, bool):
            count = self._waited.get(int(peer), 0) + 1
        elif not isinstance(count, int) or count < 0:
            raise InvalidArgument("wait_signal: count = %r must be an int >= 0" % (count,))
        ms = to_ms(timeout, "wait_signal: timeout") or 0
        self._check(_lib.lib().collie_window_wait_signal(self._live("wait_signal"), int(peer), int(count), ms))
        self._waited[int(peer)] = max(self._waited.get(int(peer), 0), int(count))
        return WindowWork(None)

    def flush(self) -> None:
        """Waits until this rank's puts have left: their arrays are free again."""
        self._check(_lib.lib().collie_window_flush(self._live("flush")))
        release_all(self._pending)
        self._pending = []

    def fence(self) -> None:
        """Collective: every rank's puts to this rank so far are in the array."""
        self._check(_lib.lib().collie_window_fence(self._live("fence")))
        release_all(self._pending)
        self._pending = []

    def free(self) -> None:
        if self._h is None:
            return
        h, self._h = self._h, None
        rc = _lib.lib().collie_window_free(h)
        release_all(self._pending + ([self._buf] if self._buf is not None else []))
        self._pending, self._buf = [], None
        self._check(rc)

    def __enter__(self) -> "Window":
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.free()
        return False
