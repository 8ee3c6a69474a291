"""_p2p.py - the process group's point-to-point operations (a mixin of
ProcessGroupCollie): blocking send/recv straight to collie, isend/irecv
held and issued together as one collie group, receives from any source."""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple

import torch

from .. import _lib
from ._common import OWN, CollieBackendError, blocking_p2p_caller, frame
from ._held import HOLDING, flush_held
from ._tensors import UINT8, check_cpu, nbytes
from ._work import CollieWork

if TYPE_CHECKING:
    from torch._C._distributed_c10d import Work as _TorchWork

    from ._common import GroupState
    from ._tensors import Post

    # A held isend/irecv: (is_send, tensor, peer, tag, its Work, the batch it waits on).
    HeldP2P = Tuple[bool, torch.Tensor, int, int, CollieWork, "_LazyBatch"]
else:
    GroupState = object

OWN.add(id(globals()))


class PointToPoint(GroupState):
    """send, recv, recv_anysource and torch's coalescing hooks; needs the
    group's _issue, _lock, _h, _L, _size, _rank, _comm, _completer, _one,
    _last_error, and the state _init_p2p sets."""

    def _init_p2p(self) -> None:
        self._p2p = []  # held isend/irecv: (is_send, tensor, peer, tag, Work, _LazyBatch)
        self._coalescing = False  # between _start_coalescing and _end_coalescing

    # ---- point to point ----

    def _peer(self, p: int, fn: str) -> int:
        if not 0 <= p < self._size:
            raise CollieBackendError("%s: peer rank %d is outside 0..%d (group of %d)" % (fn, p, self._size - 1,
                                                                                       self._size),
                                     "invalid argument")
        if p == self._rank:
            raise CollieBackendError("%s: rank %d cannot %s itself" % (fn, p, fn), "invalid argument")
        return p

    # Asynchronous sends and receives (isend, irecv, batch_isend_irecv) are
    # held back and issued together as one collie group of send/recv: collie
    # runs a communicator's operations one at a time in issue order, so an
    # isend issued alone would block the irecv behind it until its peer had
    # received - and a ring of isend-then-irecv whose messages outlast the
    # transport's buffers would wait for ever, where Gloo's threads let it
    # through. The held ones are issued as soon as anything else happens in
    # the process's collie groups (_held.py): any operation on any of them
    # (so issue order holds), a wait or test on any Work. Between
    # _start_coalescing and _end_coalescing (batch_isend_irecv through the
    # fast path, and torch 1.13's) only the end issues them.

    def _p2p_tensor(self, tensors: List[torch.Tensor], fn: str) -> torch.Tensor:
        t = self._one(tensors, fn)
        check_cpu(t, fn)
        if not t.is_contiguous():
            raise CollieBackendError("%s: the tensor must be contiguous (as with Gloo; pass t.contiguous())" % fn,
                                     "invalid argument")
        return t

    def send(self, tensors: List[torch.Tensor], dst: int, tag: int = 0) -> _TorchWork:
        fn = "send"
        t = c = self._p2p_tensor(tensors, fn)
        dst = self._peer(dst, fn)
        if self._is_blocking_caller():
            return self._issue(fn, self._L.collie_send, (c.data_ptr(), nbytes(c), UINT8, dst, int(tag)), None,
                               [t], (t, c))
        return self._p2p_add(True, c, dst, tag, [t])

    def recv(self, tensors: List[torch.Tensor], src: int, tag: int = 0) -> _TorchWork:
        fn = "recv"
        t = c = self._p2p_tensor(tensors, fn)
        src = self._peer(src, fn)
        if self._is_blocking_caller():
            return self._issue(fn, self._L.collie_recv, (c.data_ptr(), nbytes(c), UINT8, src, int(tag)), None,
                               [t], (t, c))
        w = self._p2p_add(False, c, src, tag, [t])
        w._src = src  # source_rank() of a receive, as Gloo's
        return w

    @staticmethod
    def _is_blocking_caller() -> bool:
        return blocking_p2p_caller(frame(2))

    def recv_anysource(self, tensors: List[torch.Tensor], tag: int = 0) -> _TorchWork:
        """dist.recv/irecv with src=None: collie_recv_any, the first message
        with tag from any rank; source_rank() says which."""
        fn = "recv"
        t = self._p2p_tensor(tensors, fn)
        box = ctypes.c_int(-1)
        f = frame(1)
        blocking = blocking_p2p_caller(f)
        w = self._issue(fn, self._L.collie_recv_any, (t.data_ptr(), nbytes(t), UINT8, int(tag), ctypes.byref(box)),
                        None, [t], (t, box))
        if blocking:  # the Work is shared: answer with a completed one of this receive's own
            w = CollieWork(self, None, fn, [t])
        w._src_box = box  # type: ignore[attr-defined]  # (a CollieWork: torch's Python functions call this)
        return w

    def _start_coalescing(self, *args: Any) -> None:
        self._flush_p2p()
        with self._lock:
            self._coalescing = True

    def _end_coalescing(self, *args: Any) -> CollieWork:
        with self._lock:
            self._coalescing = False
            shared = self._flush_p2p(force=True)
        return shared if shared is not None else CollieWork(self, None, "batch_isend_irecv")  # 2.x waits on it

    def _p2p_add(self, is_send: bool, c: torch.Tensor, peer: int, tag: int, result: Sequence[torch.Tensor],
                 post: Optional[Post] = None) -> CollieWork:
        lazy = _LazyBatch(self)
        w = CollieWork(self, None, "isend" if is_send else "irecv", result, (c,), [post] if post else None,
                       shared=lazy)
        with self._lock:
            if self._h is None:
                raise CollieBackendError("%s: the process group was destroyed" % ("send" if is_send else "recv"),
                                         "invalid usage")
            self._p2p.append((is_send, c, peer, int(tag), w, lazy))
            HOLDING[id(self)] = self
            if self._cpp is not None:
                self._cpp.set_held(True)  # every group's collectives now come here, which issues these first
        return w

    def _flush_p2p(self, force: bool = False) -> Optional[CollieWork]:
        """Issues the held sends and receives as one collie group; returns its
        Work (None when nothing was held, or inside _start/_end_coalescing
        unless force)."""
        with self._lock:
            if not self._p2p or (self._coalescing and not force):
                return None
            return self._flush_p2p_locked()

    def _flush_p2p_locked(self) -> Optional[CollieWork]:
        try:
            return self._flush_batch(self._p2p)
        finally:
            if self._cpp is not None:
                self._cpp.set_held(False)  # issued (or failed): collectives after them go the fast way

    def _flush_batch(self, batch: List[HeldP2P]) -> Optional[CollieWork]:
        self._p2p = []
        HOLDING.pop(id(self), None)
        # A group's copies of CUDA tensors are ordered after the legacy
        # default stream only (docs/gpu.md): wait here for torch's current
        # stream on each device, so that what it queued before the calls
        # (a kernel writing a send buffer) is done when collie reads it.
        for dev in {b[1].device for b in batch if b[1].is_cuda}:
            torch.cuda.current_stream(dev).synchronize()  # type: ignore[no-untyped-call]  # (torch 1.13)
        L = self._L
        h = self._h
        w = ctypes.c_void_p()
        text: Optional[str] = "the process group was destroyed"
        rc = L.collie_group_start(h) if h is not None else _lib.INVALID_USAGE
        if rc == _lib.SUCCESS:
            for is_send, c, peer, tag, _, _ in batch:
                fn = L.collie_send if is_send else L.collie_recv
                rc = fn(h, c.data_ptr(), nbytes(c), UINT8, peer, tag, None, None)
                if rc != _lib.SUCCESS:
                    break
            text = self._last_error(rc) if rc != _lib.SUCCESS else None
            rc2 = L.collie_group_end(h, ctypes.byref(w))
            if rc == _lib.SUCCESS and rc2 != _lib.SUCCESS:
                rc, text = rc2, self._last_error(rc2)
        elif h is not None:
            text = self._last_error(rc)
        if rc != _lib.SUCCESS:
            assert text is not None  # (set wherever rc is not SUCCESS)
            err = CollieBackendError("isend/irecv: " + text, rc)
            for b in batch:
                b[5].fail(err)
            return None
        shared = CollieWork(self, w.value, "batch of %d isend/irecv" % len(batch), [], [b[1] for b in batch])
        shared.get_future()  # the completer holds it (and its tensors) until it has ended
        for b in batch:
            b[5].real = shared
        return shared

    # torch 2.x's names
    start_coalescing = _start_coalescing
    end_coalescing = _end_coalescing
    recvAnysource = recv_anysource


class _LazyBatch:
    """What a held isend/irecv's Work waits on: the group it will be issued
    in. Touching it (wait, test) issues the held batch first."""

    def __init__(self, pg: PointToPoint) -> None:
        self._pg = pg
        self.real: Optional[CollieWork] = None
        self._err: Optional[BaseException] = None

    def fail(self, exc: BaseException) -> None:
        self._err = exc

    def _issued(self) -> Optional[CollieWork]:
        if self.real is None and self._err is None:
            flush_held()
        if self.real is None and self._err is None:
            raise CollieBackendError("isend/irecv between _start_coalescing and _end_coalescing: waited on before "
                                     "the batch was issued", "invalid usage")
        return self.real

    @property
    def _h(self) -> Optional[int]:
        r = self._issued()
        return r._h if r is not None else None

    @property
    def _exc(self) -> Optional[BaseException]:
        r = self._issued()
        return r._exc if r is not None else self._err

    def _wait_handle(self, ms: int) -> bool:
        r = self._issued()
        if r is None:
            return True  # failed at issue: _exc has the error
        with r._lock:
            return r._wait_handle(ms)
