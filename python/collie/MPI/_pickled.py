"""_pickled.py - mpi4py's lowercase methods: Python objects, pickled.

The collectives exchange each rank's pickle length first (a small
collective), then the bytes (a v-variant). send/recv carry a 16-byte header
(the caller's tag, the pickle's length) then the pickle, both with a collie
tag of their own (OBJ_TAG), so recv learns the size (and the tag: ANY_TAG
works here) before it receives. A pair's messages still match in issue
order: a recv for one tag that finds another tag next fails naming both.
reduce/allreduce apply the op to the objects in rank order, as mpi4py's do.
These functions are Comm methods (_comm.py binds them).
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any, List, Optional, Sequence

import numpy as np

from .._comm import _prefix as _displs  # (each block's offset: the sums of the counts before it)
from . import _errors
from ._datatype import BYTE
from ._op import SUM, obj_op
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

def send(self: "Comm", obj: Any, dest: int, tag: int = 0) -> None:
    """Sends obj to dest: a header (tag, length), then the pickle."""
    dest = self._peer(dest, "send", "dest", False)
    tag = self._tag(tag, "send", False)
    if dest == PROC_NULL:
        return
    from ._comm import OBJ_TAG

    data = _dumps(obj)
    self._send_bytes("send", np.array([tag, data.size], np.int64).view(np.uint8), dest, OBJ_TAG)
    self._send_bytes("send", data, dest, OBJ_TAG)


def _check_tag(call: str, src: int, got: int, want: int) -> None:
    if want != ANY_TAG and got != want:
        raise _errors.Exception(_errors.ERR_TAG, "collie.MPI: %s: the next message from rank %d has tag %d, not %d "
                                "(a pair's messages match in issue order until collie has MPI matching; "
                                "docs/mpi.md). That message was consumed." % (call, src, got, want))


def recv(self: "Comm", buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG,
         status: Optional[Status] = None) -> Any:
    """The next object from source (ANY_SOURCE: from whichever rank sends
    first); tag ANY_TAG takes it whatever its tag."""
    from ._comm import OBJ_TAG

    source = self._peer(source, "recv", "source", True)
    if source == PROC_NULL:
        fill(status, PROC_NULL, ANY_TAG, 0)
        return None
    tag = _tag_or_any(self, tag, "recv")
    hdr = np.zeros(2, np.int64)
    src = self._recv_bytes("recv", int(hdr.ctypes.data), 16, source, OBJ_TAG, [hdr])
    data = np.empty(int(hdr[1]), np.uint8)
    self._recv_bytes("recv", int(data.ctypes.data), data.size, src, OBJ_TAG, [data])
    _check_tag("recv", src, int(hdr[0]), tag)
    fill(status, src, int(hdr[0]), data.size)
    return _loads(data)


def _tag_or_any(self: "Comm", tag: int, call: str) -> int:
    if tag == ANY_TAG:
        return ANY_TAG
    return self._tag(tag, call, False)


def sendrecv(self: "Comm", sendobj: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
             source: int = ANY_SOURCE, recvtag: int = ANY_TAG, status: Optional[Status] = None) -> Any:
    """send and recv progressing together."""
    from ._comm import OBJ_TAG

    dest = self._peer(dest, "sendrecv", "dest", False)
    source = self._peer(source, "sendrecv", "source", True)
    stag = self._tag(sendtag, "sendrecv", False)
    rtag = _tag_or_any(self, recvtag, "sendrecv")
    data = _dumps(sendobj)
    shdr = np.array([stag, data.size], np.int64).view(np.uint8)
    rhdr = np.zeros(2, np.int64)
    src = self._exchange("sendrecv", shdr, dest, OBJ_TAG, rhdr.view(np.uint8), source, OBJ_TAG)
    if src == PROC_NULL:
        if dest != PROC_NULL:
            self._send_bytes("sendrecv", data, dest, OBJ_TAG)
        fill(status, PROC_NULL, ANY_TAG, 0)
        return None
    out = np.empty(int(rhdr[1]), np.uint8)
    self._exchange("sendrecv", data, dest, OBJ_TAG, out, src, OBJ_TAG)
    _check_tag("sendrecv", src, int(rhdr[0]), rtag)
    fill(status, src, int(rhdr[0]), out.size)
    return _loads(out)
