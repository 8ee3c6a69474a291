"""_pickled.py - mpi4py's lowercase methods: Python objects, pickled.

The collectives exchange each rank's pickle length first (a small
collective), then the bytes (a v-variant). send/isend send the pickle as one
message of the caller's tag, which matches by (source, tag) as any message:
recv probes for it (learning its size), then receives exactly it; irecv
receives into a buffer given or of mpi4py's default 32 KiB. reduce/allreduce
apply the op to the objects in rank order, as mpi4py's do.
These functions are Comm methods (_comm.py binds them).
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any, List, Optional, Sequence

import numpy as np

from .._comm import _prefix as _displs  # (each block's offset: the sums of the counts before it)
from . import _errors
from ._buffer import msg
from ._datatype import BYTE
from ._op import SUM, obj_op
from ._request import Request, StatusFn
from ._status import ANY_SOURCE, ANY_TAG, PROC_NULL, Status, fill

if TYPE_CHECKING:
    from ._comm import Comm

_PROTOCOL = pickle.HIGHEST_PROTOCOL


def _dumps(obj: Any) -> Any:
    return np.frombuffer(pickle.dumps(obj, _PROTOCOL), np.uint8)


def _loads(buf: Any) -> Any:
    return pickle.loads(buf.tobytes())


def _counts(self: "Comm", n: int, nb: int) -> List[int]:
    """Every rank's byte count (an allgather of nb)."""
    out = np.zeros(n, np.int64)
    self.Allgather([np.array([nb], np.int64), 1, "l"], [out, 1, "l"])
    return [int(x) for x in out]


def barrier(self: "Comm") -> None:
    self.Barrier()


def bcast(self: "Comm", obj: Any = None, root: int = 0) -> Any:
    """root's obj, on every rank (a copy, root included)."""
    me = self.Get_rank()
    root = self._root(root, "bcast")
    data = _dumps(obj) if me == root else None
    n = np.array([data.size if data is not None else 0], np.int64)
    self.Bcast([n, 1, "l"], root)
    buf = data if data is not None else np.empty(int(n[0]), np.uint8)
    self.Bcast([buf, BYTE], root)
    return _loads(buf)


def gather(self: "Comm", sendobj: Any, root: int = 0) -> Optional[List[Any]]:
    """root: the list of every rank's sendobj in rank order; others: None."""
    n, me = self.Get_size(), self.Get_rank()
    root = self._root(root, "gather")
    data = _dumps(sendobj)
    lens = np.zeros(n, np.int64)
    self.Gather([np.array([data.size], np.int64), 1, "l"], [lens, 1, "l"] if me == root else None, root)
    if me != root:
        self.Gatherv([data, BYTE], None, root)
        return None
    counts = [int(x) for x in lens]
    displs = _displs(counts)
    out = np.empty(sum(counts), np.uint8)
    self.Gatherv([data, BYTE], [out, counts, displs, BYTE], root)
    return [_loads(out[d:d + c]) for c, d in zip(counts, displs)]


def scatter(self: "Comm", sendobj: Optional[Sequence[Any]] = None, root: int = 0) -> Any:
    """rank q gets root's sendobj[q] (a sequence of size items at root)."""
    n, me = self.Get_size(), self.Get_rank()
    root = self._root(root, "scatter")
    if me == root:
        try:
            items = list(sendobj)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError("collie.MPI: scatter: sendobj = %r at the root must be a sequence of %d items"
                            % (sendobj, n)) from None
        if len(items) != n:
            raise ValueError("collie.MPI: scatter: sendobj has %d items; the communicator has %d ranks"
                             % (len(items), n))
        parts = [_dumps(x) for x in items]
        counts = [p.size for p in parts]
        lens = np.array(counts, np.int64)
        mine = np.zeros(1, np.int64)
        self.Scatter([lens, 1, "l"], [mine, 1, "l"], root)
        blob = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
        out = np.empty(int(mine[0]), np.uint8)
        self.Scatterv([blob, counts, _displs(counts), BYTE], [out, BYTE], root)
        return _loads(out)
    mine = np.zeros(1, np.int64)
    self.Scatter(None, [mine, 1, "l"], root)
    out = np.empty(int(mine[0]), np.uint8)
    self.Scatterv(None, [out, BYTE], root)
    return _loads(out)


def allgather(self: "Comm", sendobj: Any) -> List[Any]:
    """Every rank's sendobj, in rank order, on every rank."""
    n = self.Get_size()
    data = _dumps(sendobj)
    counts = _counts(self, n, data.size)
    displs = _displs(counts)
    out = np.empty(sum(counts), np.uint8)
    self.Allgatherv([data, BYTE], [out, counts, displs, BYTE])
    return [_loads(out[d:d + c]) for c, d in zip(counts, displs)]


def alltoall(self: "Comm", sendobj: Sequence[Any]) -> List[Any]:
    """Item q of each rank's sendobj (size items) goes to rank q; the result
    is the list of what each rank sent this one."""
    n = self.Get_size()
    try:
        items = list(sendobj)
    except TypeError:
        raise TypeError("collie.MPI: alltoall: sendobj = %r must be a sequence of %d items" % (sendobj, n)) from None
    if len(items) != n:
        raise ValueError("collie.MPI: alltoall: sendobj has %d items; the communicator has %d ranks" % (len(items), n))
    parts = [_dumps(x) for x in items]
    sc = [p.size for p in parts]
    rcv = np.zeros(n, np.int64)
    self.Alltoall([np.array(sc, np.int64), 1, "l"], [rcv, 1, "l"])
    rc = [int(x) for x in rcv]
    blob = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
    out = np.empty(sum(rc), np.uint8)
    rd = _displs(rc)
    self.Alltoallv([blob, sc, _displs(sc), BYTE], [out, rc, rd, BYTE])
    return [_loads(out[d:d + c]) for c, d in zip(rc, rd)]


def reduce(self: "Comm", sendobj: Any, op: Any = SUM, root: int = 0) -> Any:
    """root: op over every rank's sendobj, in rank order; others: None."""
    fn = obj_op(op)
    objs = gather(self, sendobj, root)
    if objs is None:
        return None
    acc = objs[0]
    for x in objs[1:]:
        acc = fn(acc, x)
    return acc


def allreduce(self: "Comm", sendobj: Any, op: Any = SUM) -> Any:
    """op over every rank's sendobj, in rank order, on every rank."""
    fn = obj_op(op)
    objs = allgather(self, sendobj)
    acc = objs[0]
    for x in objs[1:]:
        acc = fn(acc, x)
    return acc


# ---- point-to-point ----
# A pickled message is one message of the caller's tag whose bytes are the
# pickle: it matches as any message does. recv probes for it first (so it
# knows the size), then receives exactly the probed message; irecv, posted
# before the size is known, receives into a buffer (mpi4py's: 32 KiB unless
# buf is given).

IRECV_BUFSZ = 1 << 15  # mpi4py's default irecv buffer (mpi4py.rc.irecv_bufsz)


def _psend(self: "Comm", obj: Any, dest: int, tag: int, call: str, sync: bool, nb: bool) -> Optional[Request]:
    dest = self._peer(dest, call, "dest", False)
    tag = self._tag(tag, call, False)
    data = _dumps(obj)
    if dest == PROC_NULL:
        return self._done(call) if nb else None
    return self._send_bytes(call, int(data.ctypes.data), data.size, dest, tag, [data], sync, nb)


def send(self: "Comm", obj: Any, dest: int, tag: int = 0) -> None:
    """Sends obj (pickled) to dest with tag."""
    _psend(self, obj, dest, tag, "send", False, False)


def ssend(self: "Comm", obj: Any, dest: int, tag: int = 0) -> None:
    """As send, returning once dest's receive matched it."""
    _psend(self, obj, dest, tag, "ssend", True, False)


def isend(self: "Comm", obj: Any, dest: int, tag: int = 0) -> Request:
    """A nonblocking send: a Request (the pickle lives until it completed)."""
    return _psend(self, obj, dest, tag, "isend", False, True)  # type: ignore[return-value]


def issend(self: "Comm", obj: Any, dest: int, tag: int = 0) -> Request:
    """A nonblocking synchronous send."""
    return _psend(self, obj, dest, tag, "issend", True, True)  # type: ignore[return-value]


def recv(self: "Comm", buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG,
         status: Optional[Status] = None) -> Any:
    """The first object from source (ANY_SOURCE: any rank) with tag (ANY_TAG:
    any): a probe, then a receive of the probed message's size. buf is not
    needed (accepted and ignored)."""
    return _precv(self, source, tag, status, "recv")


def _precv(self: "Comm", source: int, tag: int, status: Optional[Status], call: str) -> Any:
    source = self._peer(source, call, "source", True)
    tag = self._tag(tag, call, True)
    if source == PROC_NULL:
        fill(status, PROC_NULL, ANY_TAG, 0)
        return None
    got = self._probe(call, source, tag, True)
    assert got is not None
    src, t, n = got
    data = np.empty(n, np.uint8)
    self._post_recv(call, int(data.ctypes.data), n, src, t, [data], status, False)
    return _loads(data)


def irecv(self: "Comm", buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
    """A nonblocking recv; its Request's wait()/test() return the object. The
    pickle is received into buf (a writable buffer, or an int: that many
    bytes; None: 32 KiB, mpi4py's default): a larger one fails the wait with
    MPI.Exception ERR_TRUNCATE, as in mpi4py."""
    call = "irecv"
    source = self._peer(source, call, "source", True)
    tag = self._tag(tag, call, True)
    if buf is None or (isinstance(buf, int) and not isinstance(buf, bool)):
        n = IRECV_BUFSZ if buf is None else int(buf)
        if n < 0:
            raise ValueError("collie.MPI: irecv: buf = %d bytes must be >= 0" % n)
        arr = np.empty(n, np.uint8)
    else:
        arr = msg(buf, call + ": buf", writable=True).bytes()
    r = self._post_recv(call, int(arr.ctypes.data), arr.size, source, tag, [arr], None, True)
    assert r is not None
    st = r._st
    if source != PROC_NULL and st is not None:
        got: StatusFn = st

        def obj() -> Any:
            return _loads(arr[:got()[2]])

        r._obj = obj
    return r


def probe(self: "Comm", source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Optional[Status] = None) -> bool:
    """As Probe (Get_count() is the pickle's bytes). Returns True."""
    return self.Probe(source, tag, status)


def iprobe(self: "Comm", source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Optional[Status] = None) -> bool:
    """As Iprobe: True (status filled) when a message from source with tag is here."""
    return self.Iprobe(source, tag, status)


def sendrecv(self: "Comm", sendobj: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
             source: int = ANY_SOURCE, recvtag: int = ANY_TAG, status: Optional[Status] = None) -> Any:
    """send and recv together: the send is posted (isend), then the recv."""
    call = "sendrecv"
    dest = self._peer(dest, call, "dest", False)
    source = self._peer(source, call, "source", True)
    stag = self._tag(sendtag, call, False)
    rtag = self._tag(recvtag, call, True)
    me = self.Get_rank()
    if dest == me and source in (me, ANY_SOURCE):
        # To itself: a copy (nothing to post).
        if rtag not in (ANY_TAG, stag):
            raise _errors.Exception(_errors.ERR_TAG, "collie.MPI: sendrecv: rank %d sends itself tag %d but "
                                    "receives tag %d: the receive would never complete" % (me, stag, rtag))
        data = _dumps(sendobj)
        fill(status, me, stag, data.size)
        return _loads(data)
    req = _psend(self, sendobj, dest, stag, call, False, True)
    assert req is not None
    out = _precv(self, source, rtag, status, call)
    req.Wait()
    return out
