"""_comm.py - MPI.Comm (Intracomm) over a collie communicator.

Every buffer collective is one collie call on the buffers' bytes (transfers
need no datatype, so every MPI datatype travels) plus, where collie's C
library lacks the op or the datatype (LAND, MINLOC, SHORT, ...) and for
Scan/Exscan, a local numpy reduction of the gathered contributions in rank
order. So each has its nonblocking I* form: the Request's wait runs that
reduction. Point-to-point is collie's, which matches messages by (source,
tag) as MPI does: Recv takes ANY_SOURCE, ANY_TAG and a shorter message
(collie_recv_status), Isend/Irecv are posted and complete in any order,
Probe/Iprobe look without receiving (docs/mpi.md, docs/p2p.md). A derived
datatype arrives here packed (_buffer.py): its bytes travel as any, and the
receiving side's Msg.unpack() runs once the operation completed (the post
of _run, a receive's with the bytes that came). Bsend/Ibsend/Bsend_init copy
the message aside within the attached buffer's space (_bsend.py).
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from .. import _comm as _cc
from .. import _lib
from .._errors import last_error as _last_error
from . import _bsend, _errors, _fast, _pickled
from ._buffer import IN_PLACE, Msg, is_in_place, msg, msgv
from ._datatype import Datatype
from ._op import MAX, MIN, PROD, SUM, Op, as_op
from ._request import Prequest, Request
from ._status import ANY_SOURCE, ANY_TAG, PROC_NULL, UNDEFINED, CStatus, Status, fill

UINT8 = 1  # collie's dtype for bytes
MAX_TAG = 2**31 - 2  # the largest tag a program may use (comm.Get_attr(TAG_UB))

IDENT, CONGRUENT, SIMILAR, UNEQUAL = 0, 1, 2, 3

# The predefined attribute keys (keyvals) of a communicator, as mpi4py's
# MPI.TAG_UB: the values come from comm.Get_attr(key).
TAG_UB, HOST, IO, WTIME_IS_GLOBAL, APPNUM, LASTUSEDCODE, UNIVERSE_SIZE = 0, 1, 2, 3, 4, 5, 6

# The C fast path (_fast.py): the module, None when there is none, False
# before it was looked for (at the first call that could use it).
_FX: Any = False
# The ops it reduces (collie's codes; defined on every numeric datatype).
_FAST_OPS = {SUM: 0, PROD: 1, MIN: 2, MAX: 3}


def _fx() -> Any:
    global _FX
    if _FX is False:
        _FX = _fast.module(IN_PLACE)
    return _FX


_registry_lock = threading.Lock()
_made: List["Comm"] = []  # every communicator collie.MPI created (Finalize frees them)
_finalized = False


def _sizes(values: Sequence[int]) -> Any:
    return (ctypes.c_size_t * max(len(values), 1))(*values)


class Comm(_errors.RefusesUnknown):
    """mpi4py's MPI.Comm / MPI.Intracomm over a collie communicator.

    COMM_WORLD makes its collie communicator at first use, from collie's
    launcher environment (collierun, torchrun, Slurm, Open MPI's and
    MPICH's); without one the process is a world of one, as MPI's singleton
    init. Methods outside collie.MPI's list raise NotImplementedError naming
    themselves."""

    _mpi_class = "Comm"

    def __init__(self, handle: Optional[_cc.Comm] = None, name: str = "MPI_COMM_NULL",
                 maker: Optional[Callable[[], _cc.Comm]] = None, predefined: bool = False) -> None:
        self._h = handle
        self._name = name
        self._maker = maker
        self._predefined = predefined
        self._lock = threading.Lock()

    # ---- the collie communicator ----

    @property
    def _c(self) -> _cc.Comm:
        h = self._h
        if h is not None and h._h is not None:
            return h
        if h is None and self._maker is not None:
            with self._lock:
                if self._h is None:
                    if _finalized:
                        raise _errors.Exception(_errors.ERR_COMM, "collie.MPI: %s: MPI was finalized" % self._name)
                    with _errors.collie_errors("%s (creating the communicator)" % self._name):
                        self._h = self._maker()
                    with _registry_lock:
                        _made.append(self)
                return self._h
        raise _errors.Exception(_errors.ERR_COMM, "collie.MPI: %s: invalid communicator (%s)"
                                % (self._name, "freed or finalized" if h is not None or self._predefined
                                   else "COMM_NULL"))

    @property
    def collie(self) -> _cc.Comm:
        """The collie communicator under this one (collie.Comm), for what
        mpi4py has no call for: marking training steps for comms.csv
        (`with comm.collie.step(it): ...`), the timing log
        (`timing_open(dir)`), a flight-recorder dump (`flight_dump()`),
        docs/mpi.md, "Telemetry". Not in mpi4py: a program that uses it runs
        on collie only."""
        return self._c

    def _wrap(self, sub: Optional[_cc.Comm], name: str) -> "Comm":
        if sub is None:
            return COMM_NULL
        c = Intracomm(sub, name)
        with _registry_lock:
            _made.append(c)
        return c

    # ---- identity and lifetime ----

    def Get_rank(self) -> int:
        return self._c.get_rank()

    def Get_size(self) -> int:
        return self._c.get_size()

    @property
    def rank(self) -> int:
        return self.Get_rank()

    @property
    def size(self) -> int:
        return self.Get_size()

    def Get_name(self) -> str:
        return self._name

    def Set_name(self, name: str) -> None:
        self._name = str(name)

    @property
    def name(self) -> str:
        return self._name

    def Get_attr(self, keyval: int) -> Optional[int]:
        """The predefined attributes: TAG_UB (the largest tag), HOST
        (PROC_NULL: none), IO (ANY_SOURCE: every rank may do I/O),
        WTIME_IS_GLOBAL (0: Wtime is per process), UNIVERSE_SIZE (the
        world's size), LASTUSEDCODE; None for APPNUM (as mpi4py for an
        attribute that is not set)."""
        k = _int(keyval, "Get_attr: keyval")
        self._c  # a live communicator, as MPI requires
        if k == TAG_UB:
            return MAX_TAG
        if k == HOST:
            return PROC_NULL
        if k == IO:
            return ANY_SOURCE
        if k == WTIME_IS_GLOBAL:
            return 0
        if k == UNIVERSE_SIZE:
            return COMM_WORLD.Get_size()
        if k == LASTUSEDCODE:
            return _errors.ERR_LASTCODE
        if k == APPNUM:
            return None
        _errors.unsupported("Comm.Get_attr(%d)" % k, "user attributes (Create_keyval) are not offered")

    def Is_inter(self) -> bool:
        return False

    def Is_intra(self) -> bool:
        return True

    @property
    def is_inter(self) -> bool:
        return False

    @property
    def is_intra(self) -> bool:
        return True

    def Dup(self, info: Any = None) -> "Intracomm":
        """A new communicator of the same ranks in the same order
        (collective), with a context of its own."""
        c = self._c
        with _errors.collie_errors("Comm.Dup"):
            sub = c.split_color(0, c.get_rank(), name="%s.dup" % self._name)
        return self._wrap(sub, "Dup of %s" % self._name)  # type: ignore[return-value]

    Clone = Dup

    def Split(self, color: int = 0, key: int = 0) -> "Comm":
        """MPI_Comm_split: ranks of one color >= 0 form a communicator,
        ordered by key then rank; color UNDEFINED gives COMM_NULL."""
        color, key = _int(color, "Split: color"), _int(key, "Split: key")
        if color != UNDEFINED and color < 0:
            raise _errors.Exception(_errors.ERR_ARG, "collie.MPI: Split: color = %d must be >= 0 or MPI.UNDEFINED"
                                    % color)
        c = self._c
        with _errors.collie_errors("Comm.Split"):
            sub = c.split_color(None if color == UNDEFINED else color, key, name="%s.split" % self._name)
        return self._wrap(sub, "Split of %s" % self._name)

    def Free(self) -> None:
        """Frees the communicator (collective, as MPI_Comm_free); it then
        equals COMM_NULL."""
        if self._predefined:
            raise _errors.Exception(_errors.ERR_COMM, "collie.MPI: Comm.Free: %s is predefined and cannot be freed"
                                    % self._name)
        c = self._c
        with _errors.collie_errors("Comm.Free"):
            c.finalize()
        self._h = None
        with _registry_lock:
            if self in _made:
                _made.remove(self)

    def Compare(self, other: "Comm") -> int:
        if not isinstance(other, Comm):
            raise TypeError("collie.MPI: Comm.Compare: %r is not a communicator" % (other,))
        if self == other:
            return IDENT
        _errors.unsupported("Comm.Compare of two different communicators", "collie.MPI has no groups yet")

    def Abort(self, errorcode: int = 0) -> None:
        """Fails every rank's pending and later operations on this
        communicator (naming this rank) and ends this process with
        errorcode (0 becomes 1, so that the launcher sees a failure)."""
        try:
            self._c.abort("MPI_Abort(errorcode=%d) on rank %d" % (errorcode, self._c.get_rank()))
        finally:
            os._exit(int(errorcode) or 1)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Comm):
            return NotImplemented
        a, b = self._live(), other._live()
        return a is b if (a is not None or b is not None) else (not self._maker and not other._maker)

    def __ne__(self, other: object) -> bool:
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        return self._live() is not None or self._maker is not None

    def _live(self) -> Optional[_cc.Comm]:
        h = self._h
        return h if h is not None and h._h is not None else None

    def __repr__(self) -> str:
        return "<collie.MPI.Intracomm %s>" % self._name

    # ---- helpers ----

    def _root(self, root: int, call: str) -> int:
        root = _int(root, call + ": root")
        n = self._c.get_size()
        if not 0 <= root < n:
            raise _errors.Exception(_errors.ERR_ROOT, "collie.MPI: %s: root = %d is outside 0..%d (communicator of %d)"
                                    % (call, root, n - 1, n))
        return root

    def _peer(self, peer: int, call: str, what: str, any_ok: bool) -> int:
        peer = _int(peer, "%s: %s" % (call, what))
        if peer == PROC_NULL or (any_ok and peer == ANY_SOURCE):
            return peer
        n = self._c.get_size()
        if not 0 <= peer < n:
            raise _errors.Exception(_errors.ERR_RANK, "collie.MPI: %s: %s = %d is outside 0..%d (communicator of %d)"
                                    % (call, what, peer, n - 1, n))
        return peer

    def _run(self, call: str, nb: bool, cfn: Any, *args: Any, keep: Sequence[Any] = (),
             post: Optional[Callable[[], None]] = None) -> Optional[Request]:
        """One collie call (blocking, or a Request when nb), then post()
        once it completed."""
        c = self._c
        with _errors.collie_errors(call):
            w = c._issue(cfn, args, None, nb, list(keep), post)
        return Request(w, call) if nb else None

    def _fast(self, call: str, name: str, *args: Any) -> Any:
        """call through the C fast path (_fast.py): its result (0, or a
        receive's (source, tag, bytes)), or None when the call is not the
        fast path's and the Python code takes it. A failure inside collie
        raises MPI.Exception with collie's message (this thread's last
        error, read before any other collie call)."""
        f = _FX if _FX is not False else _fx()
        c = self._h
        if f is None or c is None:
            return None
        got = getattr(f, name)(c, *args)
        if type(got) is int and got:
            with _errors.collie_errors(call):
                raise c._failed(_last_error(got))
        return got

    def _same_bytes(self, call: str, a: int, an: str, b: int, bn: str) -> None:
        if a != b:
            raise ValueError("collie.MPI: %s: %s is %d bytes but %s is %d (MPI needs them equal)"
                             % (call, an, a, bn, b))

    # ---- blocking and nonblocking collectives ----

    def Barrier(self) -> None:
        if self._fast("Barrier", "barrier") is None:
            self._barrier(False)

    def Ibarrier(self) -> Request:
        return self._barrier(True)  # type: ignore[return-value]

    def _barrier(self, nb: bool) -> Optional[Request]:
        return self._run("Barrier", nb, _lib.lib().collie_barrier)


    def Bcast(self, buf: Any, root: int = 0) -> None:
        if self._fast("Bcast", "bcast", buf, root) is None:
            self._bcast(buf, root, False)

    def Ibcast(self, buf: Any, root: int = 0) -> Request:
        return self._bcast(buf, root, True)  # type: ignore[return-value]

    def _bcast(self, buf: Any, root: int, nb: bool) -> Optional[Request]:
        call = "Ibcast" if nb else "Bcast"
        root = self._root(root, call)
        m = msg(buf, call + ": buf", writable=root != self._c.get_rank())
        return self._run(call, nb, _lib.lib().collie_broadcast, m.ptr, m.nbytes, UINT8, root, keep=[m.raw],
                         post=m.unpack)

    # -- reductions --

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, root: int = 0) -> None:
        if self._fast("Reduce", "reduce", sendbuf, recvbuf, _FAST_OPS.get(op, -1), root) is None:
            self._reduce(sendbuf, recvbuf, op, root, False)

    def Ireduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, root: int = 0) -> Request:
        return self._reduce(sendbuf, recvbuf, op, root, True)  # type: ignore[return-value]

    def _reduce(self, sendbuf: Any, recvbuf: Any, op: Any, root: int, nb: bool) -> Optional[Request]:
        call = "Ireduce" if nb else "Reduce"
        root = self._root(root, call)
        op = as_op(op)
        c = self._c
        at_root = c.get_rank() == root
        if is_in_place(sendbuf) and not at_root:
            raise ValueError("collie.MPI: %s: IN_PLACE is for the root's sendbuf only (this is rank %d, root %d)"
                             % (call, c.get_rank(), root))
        r: Optional[Msg] = msg(recvbuf, call + ": recvbuf", writable=True) if at_root else None
        s_ = r if is_in_place(sendbuf) else msg(sendbuf, call + ": sendbuf")
        assert s_ is not None
        s: Msg = s_
        if r is not None:
            self._same_bytes(call, s.nbytes, "sendbuf", r.nbytes, "recvbuf")
        _derived_op(call, op, s, r)
        code = op.native(s.dt)
        if code is not None:
            return self._run(call, nb, _lib.lib().collie_reduce, s.ptr, r.ptr if r is not None else None, s.count,
                             s.dt.collie, code, root, keep=[s.raw, r.raw if r is not None else None],
                             post=r.unpack if r is not None else None)
        # collie lacks this op or datatype: the root gathers every rank's
        # bytes and reduces them in rank order.
        n = c.get_size()
        tmp = np.empty(n * s.nbytes if at_root else 0, np.uint8)

        def post() -> None:
            if r is not None:
                r.array()[...] = _fold(tmp, s.dt, s.count, op, range(n))
                r.unpack()

        return self._run(call, nb, _lib.lib().collie_gather, s.ptr, tmp.ctypes.data if at_root else None, s.nbytes,
                         UINT8, root, keep=[s.raw, tmp], post=post)

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        if self._fast("Allreduce", "allreduce", sendbuf, recvbuf, _FAST_OPS.get(op, -1)) is None:
            self._allreduce(sendbuf, recvbuf, op, False)

    def Iallreduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> Request:
        return self._allreduce(sendbuf, recvbuf, op, True)  # type: ignore[return-value]

    def _allreduce(self, sendbuf: Any, recvbuf: Any, op: Any, nb: bool, call: str = "") -> Optional[Request]:
        call = call or ("Iallreduce" if nb else "Allreduce")
        op = as_op(op)
        r = msg(recvbuf, call + ": recvbuf", writable=True)
        s = r if is_in_place(sendbuf) else msg(sendbuf, call + ": sendbuf")
        self._same_bytes(call, s.nbytes, "sendbuf", r.nbytes, "recvbuf")
        _derived_op(call, op, s, r)
        code = op.native(s.dt)
        if code is not None:
            return self._run(call, nb, _lib.lib().collie_allreduce, s.ptr, r.ptr, s.count, s.dt.collie, code,
                             keep=[s.raw, r.raw], post=r.unpack)
        return self._gathered(call, nb, s, op, _store(r), "all", [r.raw])

    def _gathered(self, call: str, nb: bool, s: Msg, op: Op, done: Callable[[Any], None], ranks: str,
                  keep: List[Any]) -> Optional[Request]:
        """Every rank's s gathered (allgather of its bytes), then done(result)
        with the rank-ordered reduction: over all ranks ("all"), over ranks
        0..rank ("scan") or 0..rank-1 ("exscan"; rank 0: not called)."""
        c = self._c
        n, me = c.get_size(), c.get_rank()
        tmp = np.empty(n * s.nbytes, np.uint8)
        which = {"all": range(n), "scan": range(me + 1), "exscan": range(me)}[ranks]

        def post() -> None:
            if len(which):
                done(_fold(tmp, s.dt, s.count, op, which))

        return self._run(call, nb, _lib.lib().collie_allgather, s.ptr, tmp.ctypes.data, s.nbytes, UINT8,
                         keep=[s.raw, tmp] + keep, post=post)

    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        if self._fast("Reduce_scatter_block", "reduce_scatter_block", sendbuf, recvbuf,
                      _FAST_OPS.get(op, -1)) is None:
            self._reduce_scatter_block(sendbuf, recvbuf, op, False)

    def Ireduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> Request:
        return self._reduce_scatter_block(sendbuf, recvbuf, op, True)  # type: ignore[return-value]

    def _reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Any, nb: bool) -> Optional[Request]:
        call = "Ireduce_scatter_block" if nb else "Reduce_scatter_block"
        op = as_op(op)
        c = self._c
        n, me = c.get_size(), c.get_rank()
        if is_in_place(sendbuf):
            # MPI: the input is the whole recvbuf; the result goes to its first block.
            whole = msgv(recvbuf, call + ": recvbuf", n, writable=True, block=True)
            cnt = whole.counts[0]
            s = Msg(whole.raw.copy(), whole.dt, cnt * n, 0, None, whole.origin)
            r = Msg(whole.raw, whole.dt, cnt, 0, whole.pk, whole.origin)  # (its unpack: the whole recvbuf's)
        else:
            r = msg(recvbuf, call + ": recvbuf", writable=True)
            s = msg(sendbuf, call + ": sendbuf")
            if s.nbytes != n * r.nbytes:
                raise ValueError("collie.MPI: %s: sendbuf is %d bytes but must be size x recvbuf's = %d x %d"
                                 % (call, s.nbytes, n, r.nbytes))
        _derived_op(call, op, s, r)
        code = op.native(s.dt)
        if code is not None:
            return self._run(call, nb, _lib.lib().collie_reduce_scatter, s.ptr, r.ptr, r.count, s.dt.collie, code,
                             keep=[s.raw, r.raw], post=r.unpack)
        cnt = r.count

        def done(out: Any) -> None:
            r.array()[...] = out[me * cnt:(me + 1) * cnt]
            r.unpack()

        return self._gathered(call, nb, s, op, done, "all", [r.raw])

    def Reduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Optional[Sequence[int]] = None,
                       op: Op = SUM) -> None:
        self._reduce_scatter(sendbuf, recvbuf, recvcounts, op, False)

    def Ireduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Optional[Sequence[int]] = None,
                        op: Op = SUM) -> Request:
        return self._reduce_scatter(sendbuf, recvbuf, recvcounts, op, True)  # type: ignore[return-value]

    def _reduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Optional[Sequence[int]], op: Any,
                        nb: bool) -> Optional[Request]:
        """recvcounts None: each rank's recvbuf says its count (they are
        gathered first, a blocking step)."""
        call = "Ireduce_scatter" if nb else "Reduce_scatter"
        op = as_op(op)
        c = self._c
        n, me = c.get_size(), c.get_rank()
        r = msg(recvbuf, call + ": recvbuf", writable=True)
        if recvcounts is None:
            if is_in_place(sendbuf):
                raise ValueError("collie.MPI: %s: IN_PLACE needs recvcounts (recvbuf holds every rank's input)" % call)
            mine = np.array([r.count], np.int64)
            allc = np.zeros(n, np.int64)
            self._run(call + " (its counts)", False, _lib.lib().collie_allgather, mine.ctypes.data, allc.ctypes.data,
                      8, UINT8, keep=[mine, allc])
            counts = [int(x) for x in allc]
        else:
            counts = [_int(x, "%s: recvcounts[%d]" % (call, q)) for q, x in enumerate(recvcounts)]
            if len(counts) != n or any(x < 0 for x in counts):
                raise ValueError("collie.MPI: %s: recvcounts = %r must be %d counts >= 0 (one per rank)"
                                 % (call, list(recvcounts), n))
            counts = [x * r.per for x in counts]  # a derived type's: in the basic elements it travels as
        total, start = sum(counts), sum(counts[:me])
        if is_in_place(sendbuf):
            if r.count < total:
                raise ValueError("collie.MPI: %s: IN_PLACE: recvbuf has %d elements, the input is %d"
                                 % (call, r.count, total))
            s = Msg(r.raw[r.offset:r.offset + total * r.dt.extent].copy(), r.dt, total, 0, None, r.origin)
            out = Msg(r.raw, r.dt, counts[me], r.displ, r.pk, r.origin)
        else:
            s = msg(sendbuf, call + ": sendbuf")
            if s.count != total:
                raise ValueError("collie.MPI: %s: sendbuf has %d elements but recvcounts sum to %d"
                                 % (call, s.count, total))
            if r.count != counts[me]:
                raise ValueError("collie.MPI: %s: recvbuf has %d elements but recvcounts[%d] = %d"
                                 % (call, r.count, me, counts[me]))
            out = r
        _derived_op(call, op, s, out)
        code = op.native(s.dt)
        if code is not None:
            full = np.empty(s.nbytes, np.uint8)

            def post() -> None:
                out.array()[...] = full.view(s.dt.np)[start:start + counts[me]]
                out.unpack()

            return self._run(call, nb, _lib.lib().collie_allreduce, s.ptr, full.ctypes.data, s.count, s.dt.collie,
                             code, keep=[s.raw, full, out.raw], post=post)

        def done(res: Any) -> None:
            out.array()[...] = res[start:start + counts[me]]
            out.unpack()

        return self._gathered(call, nb, s, op, done, "all", [out.raw])

    def Scan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        self._scan(sendbuf, recvbuf, op, False, False)

    def Iscan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> Request:
        return self._scan(sendbuf, recvbuf, op, False, True)  # type: ignore[return-value]

    def Exscan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        self._scan(sendbuf, recvbuf, op, True, False)

    def Iexscan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> Request:
        return self._scan(sendbuf, recvbuf, op, True, True)  # type: ignore[return-value]

    def _scan(self, sendbuf: Any, recvbuf: Any, op: Any, ex: bool, nb: bool) -> Optional[Request]:
        """Rank i's recvbuf = op over ranks 0..i (Exscan: 0..i-1; rank 0's
        recvbuf is left as it was), computed from an allgather in rank order."""
        call = ("I" if nb else "") + ("Exscan" if ex else "Scan")
        op = as_op(op)
        r = msg(recvbuf, call + ": recvbuf", writable=True)
        s = Msg(r.bytes().copy(), r.dt, r.count, 0) if is_in_place(sendbuf) else msg(sendbuf, call + ": sendbuf")
        self._same_bytes(call, s.nbytes, "sendbuf", r.nbytes, "recvbuf")
        _derived_op(call, op, s, r)
        op.check(s.dt)
        return self._gathered(call, nb, s, op, _store(r), "exscan" if ex else "scan", [r.raw])

    # -- transfers --

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        self._gather(sendbuf, recvbuf, root, False)

    def Igather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Request:
        return self._gather(sendbuf, recvbuf, root, True)  # type: ignore[return-value]

    def _gather(self, sendbuf: Any, recvbuf: Any, root: int, nb: bool) -> Optional[Request]:
        call = "Igather" if nb else "Gather"
        root = self._root(root, call)
        c = self._c
        n = c.get_size()
        if c.get_rank() != root:
            self._not_in_place(sendbuf, call, "sendbuf", root)
            s = msg(sendbuf, call + ": sendbuf")
            return self._run(call, nb, _lib.lib().collie_gather, s.ptr, None, s.nbytes, UINT8, root, keep=[s.raw])
        rv = msgv(recvbuf, call + ": recvbuf", n, writable=True, block=True)
        cb = rv.counts[0] * rv.dt.extent
        if is_in_place(sendbuf):
            sptr, keep = rv.ptr + root * cb, [rv.raw]
        else:
            s = msg(sendbuf, call + ": sendbuf")
            self._same_bytes(call, s.nbytes, "sendbuf", cb, "each block of recvbuf")
            sptr, keep = s.ptr, [s.raw, rv.raw]
        return self._run(call, nb, _lib.lib().collie_gather, sptr, rv.ptr, cb, UINT8, root, keep=keep, post=rv.unpack)

    def _not_in_place(self, buf: Any, call: str, what: str, root: int) -> None:
        if is_in_place(buf):
            raise ValueError("collie.MPI: %s: IN_PLACE as %s is for the root only (this is rank %d, root %d)"
                             % (call, what, self._c.get_rank(), root))

    def Gatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        self._gatherv(sendbuf, recvbuf, root, False)

    def Igatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Request:
        return self._gatherv(sendbuf, recvbuf, root, True)  # type: ignore[return-value]

    def _gatherv(self, sendbuf: Any, recvbuf: Any, root: int, nb: bool) -> Optional[Request]:
        """An alltoallv in which every rank sends only to the root."""
        call = "Igatherv" if nb else "Gatherv"
        root = self._root(root, call)
        c = self._c
        n, me = c.get_size(), c.get_rank()
        zeros = [0] * n
        sc, rc, rd = list(zeros), list(zeros), list(zeros)
        dummy = np.zeros(1, np.uint8)
        keep: List[Any] = [dummy]
        sptr, rptr = dummy.ctypes.data, dummy.ctypes.data
        fin: Optional[Callable[[], None]] = None  # unpacks a derived recvbuf
        if me == root:
            rv = msgv(recvbuf, call + ": recvbuf", n, writable=True)
            rc, rd, rptr = rv.byte_counts(), rv.byte_displs(), rv.ptr
            keep.append(rv.raw)
            fin = rv.unpack
            if is_in_place(sendbuf):
                rc[me] = 0
            else:
                s = msg(sendbuf, call + ": sendbuf")
                self._same_bytes(call, s.nbytes, "sendbuf", rc[me], "recvbuf's block %d" % me)
                sc[root], sptr = s.nbytes, s.ptr
                keep.append(s.raw)
        else:
            self._not_in_place(sendbuf, call, "sendbuf", root)
            s = msg(sendbuf, call + ": sendbuf")
            sc[root], sptr = s.nbytes, s.ptr
            keep.append(s.raw)
        arrs = [_sizes(sc), _sizes(zeros), _sizes(rc), _sizes(rd)]
        return self._run(call, nb, _lib.lib().collie_alltoallv, sptr, arrs[0], arrs[1], rptr, arrs[2], arrs[3], UINT8,
                         keep=keep + arrs, post=fin)

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        self._scatter(sendbuf, recvbuf, root, False)

    def Iscatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Request:
        return self._scatter(sendbuf, recvbuf, root, True)  # type: ignore[return-value]

    def _scatter(self, sendbuf: Any, recvbuf: Any, root: int, nb: bool) -> Optional[Request]:
        call = "Iscatter" if nb else "Scatter"
        root = self._root(root, call)
        c = self._c
        n = c.get_size()
        if c.get_rank() != root:
            self._not_in_place(recvbuf, call, "recvbuf", root)
            r = msg(recvbuf, call + ": recvbuf", writable=True)
            return self._run(call, nb, _lib.lib().collie_scatter, None, r.ptr, r.nbytes, UINT8, root, keep=[r.raw],
                             post=r.unpack)
        sv = msgv(sendbuf, call + ": sendbuf", n, block=True)
        cb = sv.counts[0] * sv.dt.extent
        fin: Optional[Callable[[], None]] = None  # unpacks a derived recvbuf
        if is_in_place(recvbuf):
            rptr, keep = sv.ptr + root * cb, [sv.raw]
        else:
            r = msg(recvbuf, call + ": recvbuf", writable=True)
            self._same_bytes(call, cb, "each block of sendbuf", r.nbytes, "recvbuf")
            rptr, keep, fin = r.ptr, [sv.raw, r.raw], r.unpack
        return self._run(call, nb, _lib.lib().collie_scatter, sv.ptr, rptr, cb, UINT8, root, keep=keep, post=fin)

    def Scatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        self._scatterv(sendbuf, recvbuf, root, False)

    def Iscatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Request:
        return self._scatterv(sendbuf, recvbuf, root, True)  # type: ignore[return-value]

    def _scatterv(self, sendbuf: Any, recvbuf: Any, root: int, nb: bool) -> Optional[Request]:
        """An alltoallv in which only the root sends."""
        call = "Iscatterv" if nb else "Scatterv"
        root = self._root(root, call)
        c = self._c
        n, me = c.get_size(), c.get_rank()
        zeros = [0] * n
        sc, sd, rc = list(zeros), list(zeros), list(zeros)
        dummy = np.zeros(1, np.uint8)
        keep: List[Any] = [dummy]
        sptr, rptr = dummy.ctypes.data, dummy.ctypes.data
        fin: Optional[Callable[[], None]] = None  # unpacks a derived recvbuf
        if me == root:
            sv = msgv(sendbuf, call + ": sendbuf", n)
            sc, sd, sptr = sv.byte_counts(), sv.byte_displs(), sv.ptr
            keep.append(sv.raw)
            if is_in_place(recvbuf):
                sc[me] = 0
            else:
                r = msg(recvbuf, call + ": recvbuf", writable=True)
                self._same_bytes(call, sc[me], "sendbuf's block %d" % me, r.nbytes, "recvbuf")
                rc[root], rptr = r.nbytes, r.ptr
                keep.append(r.raw)
                fin = r.unpack
        else:
            self._not_in_place(recvbuf, call, "recvbuf", root)
            r = msg(recvbuf, call + ": recvbuf", writable=True)
            rc[root], rptr = r.nbytes, r.ptr
            keep.append(r.raw)
            fin = r.unpack
        arrs = [_sizes(sc), _sizes(sd), _sizes(rc), _sizes(zeros)]
        return self._run(call, nb, _lib.lib().collie_alltoallv, sptr, arrs[0], arrs[1], rptr, arrs[2], arrs[3], UINT8,
                         keep=keep + arrs, post=fin)

    def Allgather(self, sendbuf: Any, recvbuf: Any) -> None:
        if self._fast("Allgather", "allgather", sendbuf, recvbuf) is None:
            self._allgather(sendbuf, recvbuf, False)

    def Iallgather(self, sendbuf: Any, recvbuf: Any) -> Request:
        return self._allgather(sendbuf, recvbuf, True)  # type: ignore[return-value]

    def _allgather(self, sendbuf: Any, recvbuf: Any, nb: bool) -> Optional[Request]:
        call = "Iallgather" if nb else "Allgather"
        c = self._c
        n, me = c.get_size(), c.get_rank()
        rv = msgv(recvbuf, call + ": recvbuf", n, writable=True, block=True)
        cb = rv.counts[0] * rv.dt.extent
        if is_in_place(sendbuf):
            sptr, keep = rv.ptr + me * cb, [rv.raw]
        else:
            s = msg(sendbuf, call + ": sendbuf")
            self._same_bytes(call, s.nbytes, "sendbuf", cb, "each block of recvbuf")
            sptr, keep = s.ptr, [s.raw, rv.raw]
        return self._run(call, nb, _lib.lib().collie_allgather, sptr, rv.ptr, cb, UINT8, keep=keep, post=rv.unpack)

    def Allgatherv(self, sendbuf: Any, recvbuf: Any) -> None:
        self._allgatherv(sendbuf, recvbuf, False)

    def Iallgatherv(self, sendbuf: Any, recvbuf: Any) -> Request:
        return self._allgatherv(sendbuf, recvbuf, True)  # type: ignore[return-value]

    def _allgatherv(self, sendbuf: Any, recvbuf: Any, nb: bool) -> Optional[Request]:
        call = "Iallgatherv" if nb else "Allgatherv"
        c = self._c
        n, me = c.get_size(), c.get_rank()
        rv = msgv(recvbuf, call + ": recvbuf", n, writable=True)
        rc, rd = rv.byte_counts(), rv.byte_displs()
        if is_in_place(sendbuf):
            sptr, scount, keep = rv.ptr + rd[me], rc[me], [rv.raw]
        else:
            s = msg(sendbuf, call + ": sendbuf")
            self._same_bytes(call, s.nbytes, "sendbuf", rc[me], "recvbuf's block %d" % me)
            sptr, scount, keep = s.ptr, s.nbytes, [s.raw, rv.raw]
        arrs = [_sizes(rc), _sizes(rd)]
        return self._run(call, nb, _lib.lib().collie_allgatherv, sptr, scount, rv.ptr, arrs[0], arrs[1], UINT8,
                         keep=keep + arrs, post=rv.unpack)

    def Alltoall(self, sendbuf: Any, recvbuf: Any) -> None:
        if self._fast("Alltoall", "alltoall", sendbuf, recvbuf) is None:
            self._alltoall(sendbuf, recvbuf, False)

    def Ialltoall(self, sendbuf: Any, recvbuf: Any) -> Request:
        return self._alltoall(sendbuf, recvbuf, True)  # type: ignore[return-value]

    def _alltoall(self, sendbuf: Any, recvbuf: Any, nb: bool) -> Optional[Request]:
        call = "Ialltoall" if nb else "Alltoall"
        n = self._c.get_size()
        rv = msgv(recvbuf, call + ": recvbuf", n, writable=True, block=True)
        cb = rv.counts[0] * rv.dt.extent
        if is_in_place(sendbuf):
            sptr, keep = rv.ptr, [rv.raw]
        else:
            sv = msgv(sendbuf, call + ": sendbuf", n, block=True)
            self._same_bytes(call, sv.counts[0] * sv.dt.extent, "each block of sendbuf", cb, "each block of recvbuf")
            sptr, keep = sv.ptr, [sv.raw, rv.raw]
        return self._run(call, nb, _lib.lib().collie_alltoall, sptr, rv.ptr, cb, UINT8, keep=keep, post=rv.unpack)

    def Alltoallv(self, sendbuf: Any, recvbuf: Any) -> None:
        self._alltoallv(sendbuf, recvbuf, False)

    def Ialltoallv(self, sendbuf: Any, recvbuf: Any) -> Request:
        return self._alltoallv(sendbuf, recvbuf, True)  # type: ignore[return-value]

    def _alltoallv(self, sendbuf: Any, recvbuf: Any, nb: bool) -> Optional[Request]:
        call = "Ialltoallv" if nb else "Alltoallv"
        n = self._c.get_size()
        rv = msgv(recvbuf, call + ": recvbuf", n, writable=True)
        rc, rd = rv.byte_counts(), rv.byte_displs()
        if is_in_place(sendbuf):
            # MPI: the data to send is in recvbuf, laid out as the receive.
            src: Any = rv.raw.copy()
            sc, sd, sptr = rc, rd, int(src.ctypes.data)
        else:
            sv = msgv(sendbuf, call + ": sendbuf", n)
            src, sc, sd, sptr = sv.raw, sv.byte_counts(), sv.byte_displs(), sv.ptr
        arrs = [_sizes(sc), _sizes(sd), _sizes(rc), _sizes(rd)]
        return self._run(call, nb, _lib.lib().collie_alltoallv, sptr, arrs[0], arrs[1], rv.ptr, arrs[2], arrs[3], UINT8,
                         keep=[src, rv.raw] + arrs, post=rv.unpack)

    # ---- point-to-point: MPI's matching by (source, tag) in collie's C ----

    def _tag(self, tag: int, call: str, recv: bool) -> int:
        """tag checked: 0..MAX_TAG, or ANY_TAG for a receive or probe (recv)."""
        tag = _int(tag, call + ": tag")
        if recv and tag == ANY_TAG:
            return tag
        if not 0 <= tag <= MAX_TAG:
            raise _errors.Exception(_errors.ERR_TAG, "collie.MPI: %s: tag = %d must be in 0..%d%s "
                                    "(comm.Get_attr(MPI.TAG_UB))" % (call, tag, MAX_TAG, " or MPI.ANY_TAG" if recv
                                                                     else ""))
        return tag

    def _done(self, call: str) -> Request:
        """A Request already complete: a nonblocking call with PROC_NULL."""
        return Request(_cc.Work(self._c, None, None), call, st=lambda: (PROC_NULL, ANY_TAG, 0), obj=lambda: None)

    def _local(self, call: str, cfn: Any, *args: Any) -> None:
        """A collie call without a work handle (a probe): cfn(comm, *args, opts=NULL)."""
        c = self._c
        with _errors.collie_errors(call):
            with c._lock:
                h = c._live_handle(call)
                rc = cfn(h, *args, None)
                if rc != _lib.SUCCESS:
                    raise c._failed(_last_error(rc))

    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Sends buf to dest with tag (a standard send: it may wait until dest
        receives a large message)."""
        if self._fast("Send", "send", buf, dest, tag, 0) is None:
            self._send(buf, dest, tag, "Send", False, False)

    def Ssend(self, buf: Any, dest: int, tag: int = 0) -> None:
        """A synchronous send: returns once dest's receive has matched it."""
        if self._fast("Ssend", "send", buf, dest, tag, 1) is None:
            self._send(buf, dest, tag, "Ssend", True, False)

    def Bsend(self, buf: Any, dest: int, tag: int = 0) -> None:
        """A buffered send: buf is copied aside (within the space of the
        buffer MPI.Attach_buffer attached) and sent from there; returns at
        once, whatever dest does. MPI.Exception (ERR_BUFFER) when no buffer
        is attached or it lacks room (_bsend.py)."""
        self._bsend(buf, dest, tag, "Bsend")

    def Rsend(self, buf: Any, dest: int, tag: int = 0) -> None:
        """As Send (a standard send; it needs no receive posted first)."""
        self._send(buf, dest, tag, "Rsend", False, False)

    def Isend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """A nonblocking Send: posted, complete in whatever order the
        messages allow; buf must stay unchanged until the Request completes."""
        return self._send(buf, dest, tag, "Isend", False, True)  # type: ignore[return-value]

    def Issend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """A nonblocking Ssend: the Request completes once dest's receive matched it."""
        return self._send(buf, dest, tag, "Issend", True, True)  # type: ignore[return-value]

    def Ibsend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """As Bsend; the Request is complete at once (the copy is made)."""
        return self._bsend(buf, dest, tag, "Ibsend")

    def Irsend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        return self._send(buf, dest, tag, "Irsend", False, True)  # type: ignore[return-value]

    def _send(self, buf: Any, dest: int, tag: int, call: str, sync: bool, nb: bool) -> Optional[Request]:
        dest = self._peer(dest, call, "dest", False)
        tag = self._tag(tag, call, False)
        m = msg(buf, call + ": buf")
        return self._post_send(call, m, dest, tag, sync, nb)

    def _post_send(self, call: str, m: Msg, dest: int, tag: int, sync: bool, nb: bool) -> Optional[Request]:
        if dest == PROC_NULL:
            return self._done(call) if nb else None
        return self._send_bytes(call, m.ptr, m.nbytes, dest, tag, [m.raw], sync, nb)

    def _bsend(self, buf: Any, dest: int, tag: int, call: str) -> Request:
        dest = self._peer(dest, call, "dest", False)
        tag = self._tag(tag, call, False)
        return self._post_bsend(call, msg(buf, call + ": buf"), dest, tag)

    def _post_bsend(self, call: str, m: Msg, dest: int, tag: int) -> Request:
        """Copies m aside, its space taken in the attached buffer, and posts
        a nonblocking send of the copy (the space is free once it completed);
        a Request complete at once."""
        if dest != PROC_NULL:
            copy = np.array(m.bytes())
            cost = _bsend.reserve(call, copy.size)
            try:
                r = self._send_bytes(call, copy.ctypes.data, copy.size, dest, tag, [copy], False, True)
            except BaseException:
                _bsend.release(cost)
                raise
            assert r is not None
            _bsend.track(r, cost)
        return self._done(call)

    def _to_self(self, peer: int) -> bool:
        """collie's C takes sends and receives to this rank itself only
        async: a blocking one here is posted, then waited for (a standard
        send to itself completes at once; its receive takes it)."""
        return peer == self._c.get_rank()

    def _send_bytes(self, call: str, ptr: int, nbytes: int, dest: int, tag: int, keep: List[Any],
                    sync: bool = False, nb: bool = False) -> Optional[Request]:
        """Sends nbytes at ptr to dest with tag (collie_ssend when sync); a
        Request when nb. keep: what must live until it completed."""
        cfn = _need(call, "collie_ssend") if sync else _lib.lib().collie_send
        if not nb and self._to_self(dest):
            r = self._run(call, True, cfn, ptr, nbytes, UINT8, dest, tag, keep=keep)
            assert r is not None
            r.Wait()
            return None
        return self._run(call, nb, cfn, ptr, nbytes, UINT8, dest, tag, keep=keep)

    def Recv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Optional[Status] = None) -> None:
        """Receives into buf the first message from source (ANY_SOURCE: any
        rank) with tag (ANY_TAG: any). The message may be shorter than buf
        (status.Get_count() says how long); a longer one raises MPI.Exception
        (ERR_TRUNCATE)."""
        got = self._fast("Recv", "recv", buf, source, tag)
        if got is not None:
            if status is not None:
                fill(status, *got)
            return
        self._recv(buf, source, tag, status, "Recv", False)

    def Irecv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """A nonblocking Recv: posted at once, it takes the first message the
        matching gives it; Wait(status) fills status."""
        return self._recv(buf, source, tag, None, "Irecv", True)  # type: ignore[return-value]

    def _recv(self, buf: Any, source: int, tag: int, status: Optional[Status], call: str,
              nb: bool) -> Optional[Request]:
        source = self._peer(source, call, "source", True)
        tag = self._tag(tag, call, True)
        m = msg(buf, call + ": buf", writable=True)
        return self._post_recv(call, m.ptr, m.nbytes, source, tag, [m.raw], status, nb,
                               m.unpack if m.pk is not None else None)

    def _post_recv(self, call: str, ptr: int, nbytes: int, source: int, tag: int, keep: List[Any],
                   status: Optional[Status], nb: bool,
                   unpack: Optional[Callable[[int], None]] = None) -> Optional[Request]:
        """Receives a message of up to nbytes at ptr (collie_recv_status);
        blocking: fills status; nb: a Request whose wait fills it. unpack:
        called with the bytes received once it completed (a derived type's
        Msg.unpack)."""
        if source == PROC_NULL:
            fill(status, PROC_NULL, ANY_TAG, 0)
            return self._done(call) if nb else None
        if not nb and self._to_self(source):
            r = self._post_recv(call, ptr, nbytes, source, tag, keep, None, True, unpack)
            assert r is not None
            st = Status()
            r.Wait(st)
            fill(status, st.source, st.tag, st.Get_count())
            return None
        box = CStatus()
        post: Optional[Callable[[], None]] = None
        if unpack is not None:
            fn = unpack

            def post() -> None:
                fn(int(box.bytes))

        r = self._run(call, nb, _need(call, "collie_recv_status"), ptr, nbytes, UINT8, source, tag,
                      ctypes.byref(box), keep=keep + [box], post=post)
        if r is None:
            fill(status, *box.values())
            return None
        r._st = box.values
        return r

    def Probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Optional[Status] = None) -> bool:
        """Waits until a message from source with tag is here, without
        receiving it; status gets its source, tag and count. The next
        receive from that source and tag takes it. Returns True."""
        got = self._probe("Probe", source, tag, True)
        assert got is not None
        fill(status, *got)
        return True

    def Iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Optional[Status] = None) -> bool:
        """As Probe, looking once: True (status filled) when such a message is here."""
        got = self._probe("Iprobe", source, tag, False)
        if got is None:
            return False
        fill(status, *got)
        return True

    def _probe(self, call: str, source: int, tag: int, block: bool) -> Optional[Tuple[int, int, int]]:
        source = self._peer(source, call, "source", True)
        tag = self._tag(tag, call, True)
        if source == PROC_NULL:
            return PROC_NULL, ANY_TAG, 0
        if not block and source == ANY_SOURCE and self._c.get_size() == 1:
            return None  # no other rank: nothing can come (collie sends to itself only inside Sendrecv)
        box = CStatus()
        if block:
            self._local(call, _need(call, "collie_probe"), source, tag, ctypes.byref(box))
            return box.values()
        flag = ctypes.c_int(0)
        self._local(call, _need(call, "collie_iprobe"), source, tag, ctypes.byref(flag), ctypes.byref(box))
        return box.values() if flag.value else None

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None, source: int = ANY_SOURCE,
                 recvtag: int = ANY_TAG, status: Optional[Status] = None) -> None:
        """Send and Recv together (the receive is posted first, so a ring
        exchange cannot deadlock)."""
        got = self._fast("Sendrecv", "sendrecv", sendbuf, dest, sendtag, recvbuf, source, recvtag)
        if got is not None:
            if status is not None:
                fill(status, *got)
            return
        call = "Sendrecv"
        dest = self._peer(dest, call, "dest", False)
        source = self._peer(source, call, "source", True)
        s = msg(sendbuf, call + ": sendbuf")
        r = msg(recvbuf, call + ": recvbuf", writable=True)
        stag = self._tag(sendtag, call, False)
        rtag = self._tag(recvtag, call, True)
        got = self._exchange(call, s.ptr, s.nbytes, [s.raw], dest, stag, r.ptr, r.nbytes, [r.raw], source, rtag)
        r.unpack(got[2])
        fill(status, *got)

    def _exchange(self, call: str, sptr: int, sn: int, skeep: List[Any], dest: int, stag: int, rptr: int, rn: int,
                  rkeep: List[Any], source: int, rtag: int) -> Tuple[int, int, int]:
        """Sends sn bytes at sptr to dest and receives up to rn at rptr from
        source; what the receive got (source, tag, bytes)."""
        me = self._c.get_rank()
        if dest == me and source in (me, ANY_SOURCE):
            # To itself: a copy (nothing to post).
            if rtag not in (ANY_TAG, stag):
                raise _errors.Exception(_errors.ERR_TAG, "collie.MPI: %s: rank %d sends itself tag %d but receives "
                                        "tag %d: the receive would never complete" % (call, me, stag, rtag))
            if sn > rn:
                raise _errors.Exception(_errors.ERR_TRUNCATE, "collie.MPI: %s: message truncated: rank %d sends "
                                        "itself %d bytes, the receive has room for %d" % (call, me, sn, rn))
            ctypes.memmove(rptr, sptr, sn)
            return me, stag, sn
        req = self._post_recv(call, rptr, rn, source, rtag, rkeep, None, True)
        assert req is not None
        if dest != PROC_NULL:
            self._send_bytes(call, sptr, sn, dest, stag, skeep)
        st = Status()
        req.Wait(st)
        return st.source, st.tag, st.Get_count()

    def Sendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0, source: int = ANY_SOURCE,
                         recvtag: int = ANY_TAG, status: Optional[Status] = None) -> None:
        m = msg(buf, "Sendrecv_replace: buf", writable=True)
        copy = m.bytes().copy()
        self.Sendrecv([copy, m.count, m.dt], dest, sendtag, buf, source, recvtag, status)

    # -- persistent requests: each Start posts the operation anew --

    def Send_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        return self._send_init(buf, dest, tag, "Send_init", False)

    def Ssend_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        return self._send_init(buf, dest, tag, "Ssend_init", True)

    def Bsend_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent Bsend: each Start copies buf aside as Bsend does."""
        call = "Bsend_init"
        dest = self._peer(dest, call, "dest", False)
        tag = self._tag(tag, call, False)
        m = msg(buf, call + ": buf")

        def post() -> Request:
            m.repack()
            return self._post_bsend(call, m, dest, tag)

        return Prequest(post, call)

    def Rsend_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        return self._send_init(buf, dest, tag, "Rsend_init", False)

    def _send_init(self, buf: Any, dest: int, tag: int, call: str, sync: bool) -> Prequest:
        dest = self._peer(dest, call, "dest", False)
        tag = self._tag(tag, call, False)
        m = msg(buf, call + ": buf")

        def post() -> Request:
            m.repack()  # a derived type: the buffer's contents of now
            r = self._post_send(call, m, dest, tag, sync, True)
            assert r is not None
            return r

        return Prequest(post, call)

    def Recv_init(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Prequest:
        call = "Recv_init"
        source = self._peer(source, call, "source", True)
        tag = self._tag(tag, call, True)
        m = msg(buf, call + ": buf", writable=True)

        def post() -> Request:
            r = self._post_recv(call, m.ptr, m.nbytes, source, tag, [m.raw], None, True,
                                m.unpack if m.pk is not None else None)
            assert r is not None
            return r

        return Prequest(post, call)

    # ---- the lowercase (pickled) methods: _pickled.py ----

    barrier = _pickled.barrier
    bcast = _pickled.bcast
    gather = _pickled.gather
    scatter = _pickled.scatter
    allgather = _pickled.allgather
    alltoall = _pickled.alltoall
    reduce = _pickled.reduce
    allreduce = _pickled.allreduce
    send = _pickled.send
    ssend = _pickled.ssend
    recv = _pickled.recv
    sendrecv = _pickled.sendrecv
    isend = _pickled.isend
    issend = _pickled.issend
    irecv = _pickled.irecv
    probe = _pickled.probe
    iprobe = _pickled.iprobe

    # ---- matched probes (MPI.Message): not offered ----

    def _no_message(name: str) -> Callable[..., Any]:  # type: ignore[misc]
        def fn(self: "Comm", *args: Any, **kwargs: Any) -> Any:
            _errors.unsupported("Comm.%s" % name, _errors.NO_MESSAGE)
        fn.__name__ = name
        return fn

    Mprobe = _no_message("Mprobe")
    Improbe = _no_message("Improbe")
    mprobe = _no_message("mprobe")
    improbe = _no_message("improbe")
    del _no_message


class Intracomm(Comm):
    """mpi4py's MPI.Intracomm (every communicator of collie.MPI is one)."""


def _need(call: str, name: str) -> Any:
    """collie's C function name (MPI.Exception when the library predates it)."""
    with _errors.collie_errors(call):
        return _lib.need(name)


def _int(v: Any, what: str) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError("collie.MPI: %s = %r must be an int" % (what, v))
    return int(v.__index__())


def _store(m: Msg) -> Callable[[Any], None]:
    """A function writing a reduction's result into m."""

    def fn(out: Any) -> None:
        m.array()[...] = out
        m.unpack()

    return fn


def _derived_op(call: str, op: Op, *ms: Optional[Msg]) -> None:
    """A reduction on a derived datatype reduces its packed basic elements
    one by one, so MPI.Exception (ERR_OP) naming call, op and the type
    unless they are all of one basic type on which MPI defines op."""
    for m in ms:
        d = m.origin if m is not None else None
        if d is None or m is None or m.count == 0:
            continue
        lay = d.layout(call)
        basic = lay.basic()
        if basic is None:
            raise _errors.Exception(_errors.ERR_OP, "collie.MPI: %s: %s on the derived datatype %s: its basic elements "
                                    "are of several types (%s); collie.MPI reduces a derived datatype only when they "
                                    "are all of one type" % (call, op.Get_name(), d.label, ", ".join(lay.names())))
        try:
            op.check(basic)
        except _errors.Exception as e:
            raise _errors.Exception(_errors.ERR_OP, "collie.MPI: %s: %s (the basic type of the derived datatype %s)"
                                    % (call, e.message.replace("collie.MPI: ", "", 1), d.label)) from None


def _fold(tmp: Any, dt: Datatype, count: int, op: Op, ranks: Sequence[int]) -> Any:
    """op over the given ranks' blocks of tmp (size blocks of count dt's), in
    rank order: ((r0 op r1) op r2) ..."""
    blocks = tmp.view(dt.np).reshape(-1, count) if count else np.zeros((len(tmp) and 1, 0), dt.np)
    acc = None
    for q in ranks:
        b = blocks[q] if count else np.zeros(0, dt.np)
        acc = b.copy() if acc is None else op.reduce_arrays(acc, b, dt)
    return acc


def _world() -> _cc.Comm:
    """The world communicator: from the launcher's environment, or a world of one."""
    r, n = _cc._launcher_rank_size()
    if r is None and not os.environ.get("COLLIE_STORE"):
        return _self_comm("MPI_COMM_WORLD")
    return _cc.new_comm(name="MPI_COMM_WORLD")


def _self_comm(name: str) -> _cc.Comm:
    """A communicator of this process alone (it meets no one: no store)."""
    return _cc.new_comm(name=name, rank=0, world_size=1, hints={"store": None})


COMM_NULL = Comm()
COMM_WORLD = Intracomm(None, "MPI_COMM_WORLD", _world, predefined=True)
COMM_SELF = Intracomm(None, "MPI_COMM_SELF", lambda: _self_comm("MPI_COMM_SELF"), predefined=True)


def finalize_all() -> None:
    """Frees every communicator collie.MPI made, newest first (MPI.Finalize)."""
    global _finalized
    with _registry_lock:
        made = list(_made)
        _made.clear()
        _finalized = True
    first: Optional[BaseException] = None
    for c in reversed(made):
        h = c._h
        if h is not None:
            try:
                h.finalize()
            except Exception as e:
                first = first or e
    if first is not None:
        raise _errors.Exception(_errors.ERR_OTHER, "collie.MPI: Finalize: %s" % first)


def is_finalized() -> bool:
    return _finalized
