"""_window.py - one-sided windows (docs/windows.md; torchcomms' new_window /
TorchCommWindow): Comm.new_window(array) exposes an array of this rank to
every rank of the communicator; put() copies an array into a peer's window
at an element offset, signal() tells the peer those puts are done, and
wait_signal() waits for a peer's signals (applying its puts meanwhile)."""

import ctypes

from . import _lib
from ._buffers import as_buf, release_all
from ._errors import InvalidArgument, InvalidUsage, last_error


class Window:
    """A window over one array of this rank (numpy, torch CPU tensor,
    anything with the buffer protocol), the same dtype on every rank.
    Offsets count elements of that dtype. An array put() reads must stay
    unchanged until flush() (or fence()); the window keeps it referenced
    until then. free() (or a with block) is collective, as creation is."""

    __slots__ = ("_comm", "_h", "_buf", "_pending")

    def __init__(self, comm, array):
        self._comm = comm
        self._h = None
        self._pending = []
        self._buf = as_buf(array, "new_window: array", True)
        h = ctypes.c_void_p()
        with comm._lock:
            rc = _lib.lib().collie_window_create(comm._live_handle("new_window"), self._buf.ptr, self._buf.nbytes,
                                                 ctypes.byref(h))
        if rc != _lib.SUCCESS:
            release_all([self._buf])
            raise last_error(rc)
        self._h = h.value

    def _live(self, fn):
        if self._h is None:
            raise InvalidUsage("%s: the window was freed" % fn)
        return self._h

    def _check(self, rc, release=()):
        if rc != _lib.SUCCESS:
            raise last_error(rc)

    def put(self, peer, offset, array):
        """Copies array (this window's dtype) into peer's window at element
        offset."""
        h = self._live("put")
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
            raise last_error(rc)
        self._pending.append(b)

    def signal(self, peer):
        self._check(_lib.lib().collie_window_signal(self._live("signal"), int(peer)))

    def wait_signal(self, peer, count, timeout=None):
        """Blocks until peer's signals to this rank number at least count
        (since the window was made); timeout in seconds (None: the
        communicator's)."""
        ms = 0 if timeout is None else max(1, int(timeout * 1000))
        self._check(_lib.lib().collie_window_wait_signal(self._live("wait_signal"), int(peer), int(count), ms))

    def flush(self):
        """Waits until this rank's puts have left: their arrays are free again."""
        self._check(_lib.lib().collie_window_flush(self._live("flush")))
        release_all(self._pending)
        self._pending = []

    def fence(self):
        """Collective: every rank's puts to this rank so far are in the array."""
        self._check(_lib.lib().collie_window_fence(self._live("fence")))
        release_all(self._pending)
        self._pending = []

    def free(self):
        if self._h is None:
            return
        h, self._h = self._h, None
        rc = _lib.lib().collie_window_free(h)
        release_all(self._pending + [self._buf])
        self._pending = []
        self._check(rc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()
        return False
