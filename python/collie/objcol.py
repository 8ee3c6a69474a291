"""collie.objcol - collectives over picklable Python objects.

The signatures follow torch.distributed's object collectives. Each object is
pickled into bytes; the sizes travel first (an int64 collective), then the
bytes (a uint8 collective into one buffer that the per-rank parts view, so
nothing is copied twice). Only the standard library is used: these work
without numpy.

Unpickling runs code chosen by the sender: use these only between ranks of
one job that trust each other, as with torch.distributed.

Every function takes torch.distributed's form (communicator last, as
`group=`: a Comm, or None for the default communicator) and torchcomms' form
(the Comm first, `root=`), and blocks; it is collective over the
communicator. Argument errors raise InvalidArgument before any
communication when every rank can see them; an error only the root can see
(e.g. a wrong-length input list at src) raises there, and the other ranks
then fail at their deadline.
"""

from __future__ import annotations

import array
import functools
import inspect
import pickle
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, Union, overload

from ._comm import Comm, resolve
from ._enums import ReduceOp
from ._errors import InvalidArgument

if TYPE_CHECKING:
    from ._comm import DeviceLike
    from ._types import OptTimeout, TimeoutLike

__all__ = [
    "all_gather_object",
    "gather_object",
    "broadcast_object_list",
    "scatter_object_list",
    "send_object_list",
    "recv_object_list",
]

_HDR = 8  # bytes of the length header in padded blocks

# The communicator the object collectives' own calls go to: a Comm, or one
# whose calls get the timeout= of torchcomms' form (_Timed).
_CommLike = Union[Comm, "_Timed"]


def _dumps(obj: object) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _i64(n: int = 0) -> array.array[int]:
    return array.array("q", [n])


def _check_list(lst: object, n: Optional[int], what: str, fn: str) -> None:
    if not isinstance(lst, list):
        raise InvalidArgument("%s: %s must be a list, got %s" % (fn, what, type(lst).__name__))
    if n is not None and len(lst) != n:
        raise InvalidArgument("%s: %s has %d entries, expected %d (one per rank)" % (fn, what, len(lst), n))


def _block(data: bytes, width: int) -> bytearray:
    """data with its length in front, padded to width bytes."""
    b = bytearray(width)
    b[:_HDR] = len(data).to_bytes(_HDR, "little")
    b[_HDR : _HDR + len(data)] = data
    return b


def _unblock(mv: memoryview) -> Any:
    n = int.from_bytes(mv[:_HDR], "little")
    return pickle.loads(mv[_HDR : _HDR + n])


def _all_gather_object(comm: _CommLike, object_list: List[Any], obj: object) -> None:
    """object_list[q] = rank q's obj, on every rank. object_list must have
    one entry per rank (it is filled in place)."""
    size = comm.get_size()
    _check_list(object_list, size, "object_list", "all_gather_object")
    data = _dumps(obj)
    sizes = array.array("q", [0] * size)
    comm.all_gather_single(sizes, _i64(len(data)))
    buf = bytearray(sum(sizes))
    mv = memoryview(buf)
    parts: List[memoryview] = []
    off = 0
    for n in sizes:
        parts.append(mv[off : off + n])
        off += n
    comm.all_gather_v(parts, data)
    for q, p in enumerate(parts):
        object_list[q] = pickle.loads(p)
    for p in parts:
        p.release()
    mv.release()


def _gather_object(comm: _CommLike, obj: object, object_gather_list: Optional[List[Any]], dst: int) -> None:
    """At dst, object_gather_list[q] = rank q's obj (a list with one entry per
    rank, filled in place); other ranks pass None."""
    size, rank = comm.get_size(), comm.get_rank()
    if rank == dst:
        _check_list(object_gather_list, size, "object_gather_list", "gather_object")
    data = _dumps(obj)
    width = _i64(len(data) + _HDR)
    comm.all_reduce(width, ReduceOp.MAX)
    block = _block(data, width[0])
    if rank != dst:
        comm.gather(None, block, dst)
        return
    assert object_gather_list is not None  # (this rank is dst: _check_list saw a list)
    buf = bytearray(width[0] * size)
    mv = memoryview(buf)
    parts = [mv[q * width[0] : (q + 1) * width[0]] for q in range(size)]
    comm.gather(parts, block, dst)
    for q, p in enumerate(parts):
        object_gather_list[q] = _unblock(p)
        p.release()
    mv.release()


def _broadcast_object_list(comm: _CommLike, object_list: List[Any], src: int) -> None:
    """Every rank's object_list = src's, element by element, in place (every
    rank passes a list of the same length)."""
    _check_list(object_list, None, "object_list", "broadcast_object_list")
    if comm.get_rank() == src:
        data = _dumps(list(object_list))
        n = _i64(len(data))
        comm.broadcast(n, src)
        comm.broadcast(bytearray(data), src)
        return
    n = _i64()
    comm.broadcast(n, src)
    buf = bytearray(n[0])
    comm.broadcast(buf, src)
    objs = pickle.loads(buf)
    if len(objs) != len(object_list):
        raise InvalidArgument(
            "broadcast_object_list: rank %d sent %d objects but object_list here has %d entries"
            % (src, len(objs), len(object_list))
        )
    object_list[:] = objs


def _scatter_object_list(comm: _CommLike, scatter_object_output_list: List[Any],
                         scatter_object_input_list: Optional[List[Any]], src: int) -> None:
    """scatter_object_output_list[0] = src's scatter_object_input_list[rank]
    (the input list, one object per rank, matters only at src)."""
    size, rank = comm.get_size(), comm.get_rank()
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise InvalidArgument("scatter_object_list: scatter_object_output_list must be a list of at least one entry")
    width = _i64()
    if rank == src:
        _check_list(scatter_object_input_list, size, "scatter_object_input_list", "scatter_object_list")
        assert scatter_object_input_list is not None  # (_check_list saw a list)
        datas = [_dumps(o) for o in scatter_object_input_list]
        width[0] = max(len(d) for d in datas) + _HDR
        comm.broadcast(width, src)
        buf = bytearray(width[0] * size)
        for q, d in enumerate(datas):
            buf[q * width[0] : (q + 1) * width[0]] = _block(d, width[0])
        mv = memoryview(buf)
        parts = [mv[q * width[0] : (q + 1) * width[0]] for q in range(size)]
        out = bytearray(width[0])
        comm.scatter(out, parts, src)
        for p in parts:
            p.release()
        mv.release()
    else:
        comm.broadcast(width, src)
        out = bytearray(width[0])
        comm.scatter(out, None, src)
    scatter_object_output_list[0] = _unblock(memoryview(out))


def _send_object_list(comm: _CommLike, object_list: List[Any], dst: int, tag: int) -> None:
    """Sends the objects of object_list to rank dst (its recv_object_list
    with src = this rank receives them)."""
    _check_list(object_list, None, "object_list", "send_object_list")
    data = _dumps(list(object_list))
    comm.send(_i64(len(data)), dst, tag=tag)
    comm.send(data, dst, tag=tag)


def _recv_object_list(comm: _CommLike, object_list: List[Any], src: Optional[int], tag: int) -> int:
    """Receives rank src's send_object_list into object_list, in place (it
    must have as many entries as were sent); src None: from whichever rank
    sends first. Returns the sender's rank."""
    _check_list(object_list, None, "object_list", "recv_object_list")
    n = _i64()
    if src is None:
        src = comm.recv(n, None, tag=tag).source_rank()
    else:
        comm.recv(n, src, tag=tag)
    buf = bytearray(n[0])
    comm.recv(buf, src, tag=tag)
    objs = pickle.loads(buf)
    if len(objs) != len(object_list):
        raise InvalidArgument(
            "recv_object_list: rank %d sent %d objects but object_list has %d entries" % (src, len(objs), len(object_list))
        )
    object_list[:] = objs
    return src


# ---- the two calling conventions ------------------------------------------------
#
# torchcomms passes the communicator first (objcol.all_gather_object(comm,
# object_list, obj), root= for the root); torch.distributed passes it last as
# group= (None: the default communicator) and names the root src/dst. Each
# function takes both: a collie Comm as the first argument (or comm=) selects
# torchcomms' form. timeout applies to each collective of the call;
# weights_only is accepted for torchcomms' sake and has no effect (objects
# are pickled: trust the job's ranks, as with torch.distributed).

_COMM_FORMS = {
    "all_gather_object": "(comm, object_list, obj, timeout=None, weights_only=True)",
    "gather_object": "(comm, obj, root, object_gather_list=None, timeout=None, weights_only=True)",
    "broadcast_object_list": "(comm, object_list, root, timeout=None, weights_only=True)",
    "scatter_object_list": "(comm, root, scatter_object_output_list, scatter_object_input_list=None, "
                           "timeout=None, weights_only=True)",
    "send_object_list": "(comm, object_list, dst, timeout=None, tag=0)",
    "recv_object_list": "(comm, object_list, src, timeout=None, weights_only=True, tag=0)",
}
_TORCH_FORMS = {
    "all_gather_object": "(object_list, obj, group=None)",
    "gather_object": "(obj, object_gather_list=None, dst=0, group=None)",
    "broadcast_object_list": "(object_list, src=0, group=None, device=None)",
    "scatter_object_list": "(scatter_object_output_list, scatter_object_input_list=None, src=0, group=None)",
    "send_object_list": "(object_list, dst, group=None, device=None, tag=0)",
    "recv_object_list": "(object_list, src=None, group=None, device=None, tag=0)",
}


def _signature(text: str) -> inspect.Signature:
    src = "def _f%s: pass" % text
    ns: Dict[str, Any] = {}
    exec(compile(src, "<objcol form>", "exec"), ns)  # noqa: S102 - our own constant texts
    return inspect.signature(ns["_f"])


_SIGS = {name: (_signature(_COMM_FORMS[name]), _signature(_TORCH_FORMS[name])) for name in _COMM_FORMS}


def _bind(fn: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[_CommLike, Dict[str, Any]]:
    """(comm, arguments) of a call in either form; InvalidArgument naming both
    forms when it is neither."""
    comm_sig, torch_sig = _SIGS[fn]
    comm_first = (args and isinstance(args[0], Comm)) or isinstance(kwargs.get("comm"), Comm)
    sig = comm_sig if comm_first else torch_sig
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise InvalidArgument(
            "%s: %s. Its forms: %s%s (torchcomms: the collie Comm first) and %s%s (torch.distributed)"
            % (fn, e, fn, _COMM_FORMS[fn], fn, _TORCH_FORMS[fn])
        ) from None
    bound.apply_defaults()
    a = bound.arguments
    if comm_first:
        comm = a["comm"]
        if a.get("timeout") is not None:
            comm = _Timed(comm, a["timeout"])
        return comm, a
    try:
        return resolve(a["group"]), a
    except InvalidArgument as e:
        raise InvalidArgument(
            "%s: %s. Its forms: %s%s (torchcomms: the collie Comm first) and %s%s (torch.distributed)"
            % (fn, e, fn, _COMM_FORMS[fn], fn, _TORCH_FORMS[fn])
        ) from None


class _Timed:
    """comm whose collectives get timeout= (the object collectives' own calls)."""

    def __init__(self, comm: Comm, timeout: TimeoutLike) -> None:
        self._c, self._t = comm, timeout

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._c, name)
        if name in ("all_gather_single", "all_gather_v", "all_reduce", "gather", "broadcast", "scatter", "send",
                    "recv"):
            return functools.partial(attr, timeout=self._t)
        return attr


@overload
def all_gather_object(comm: Comm, object_list: List[Any], obj: object, timeout: OptTimeout = None,
                      weights_only: bool = True) -> None: ...
@overload
def all_gather_object(object_list: List[Any], obj: object, group: Optional[Comm] = None) -> None: ...
def all_gather_object(*args: Any, **kwargs: Any) -> None:
    """object_list[q] = rank q's obj, on every rank (object_list has one entry
    per rank, filled in place). Forms: all_gather_object(comm, object_list,
    obj, timeout=None) (torchcomms) or all_gather_object(object_list, obj,
    group=None) (torch.distributed)."""
    comm, a = _bind("all_gather_object", args, kwargs)
    return _all_gather_object(comm, a["object_list"], a["obj"])


@overload
def gather_object(comm: Comm, obj: object, root: int, object_gather_list: Optional[List[Any]] = None,
                  timeout: OptTimeout = None, weights_only: bool = True) -> None: ...
@overload
def gather_object(obj: object, object_gather_list: Optional[List[Any]] = None, dst: int = 0,
                  group: Optional[Comm] = None) -> None: ...
def gather_object(*args: Any, **kwargs: Any) -> None:
    """At the root, object_gather_list[q] = rank q's obj (other ranks pass
    None). Forms: gather_object(comm, obj, root, object_gather_list=None,
    timeout=None) or gather_object(obj, object_gather_list=None, dst=0,
    group=None)."""
    comm, a = _bind("gather_object", args, kwargs)
    root = a["root"] if "root" in a else a["dst"]
    return _gather_object(comm, a["obj"], a["object_gather_list"], root)


@overload
def broadcast_object_list(comm: Comm, object_list: List[Any], root: int, timeout: OptTimeout = None,
                          weights_only: bool = True) -> None: ...
@overload
def broadcast_object_list(object_list: List[Any], src: int = 0, group: Optional[Comm] = None,
                          device: DeviceLike = None) -> None: ...
def broadcast_object_list(*args: Any, **kwargs: Any) -> None:
    """Every rank's object_list = the root's, in place (lists of one length
    everywhere). Forms: broadcast_object_list(comm, object_list, root,
    timeout=None) or broadcast_object_list(object_list, src=0, group=None)."""
    comm, a = _bind("broadcast_object_list", args, kwargs)
    root = a["root"] if "root" in a else a["src"]
    return _broadcast_object_list(comm, a["object_list"], root)


@overload
def scatter_object_list(comm: Comm, root: int, scatter_object_output_list: List[Any],
                        scatter_object_input_list: Optional[List[Any]] = None, timeout: OptTimeout = None,
                        weights_only: bool = True) -> None: ...
@overload
def scatter_object_list(scatter_object_output_list: List[Any], scatter_object_input_list: Optional[List[Any]] = None,
                        src: int = 0, group: Optional[Comm] = None) -> None: ...
def scatter_object_list(*args: Any, **kwargs: Any) -> None:
    """scatter_object_output_list[0] = the root's
    scatter_object_input_list[rank]. Forms: scatter_object_list(comm, root,
    scatter_object_output_list, scatter_object_input_list=None, timeout=None)
    or scatter_object_list(scatter_object_output_list,
    scatter_object_input_list=None, src=0, group=None)."""
    comm, a = _bind("scatter_object_list", args, kwargs)
    root = a["root"] if "root" in a else a["src"]
    return _scatter_object_list(comm, a["scatter_object_output_list"], a["scatter_object_input_list"], root)


@overload
def send_object_list(comm: Comm, object_list: List[Any], dst: int, timeout: OptTimeout = None,
                     tag: int = 0) -> None: ...
@overload
def send_object_list(object_list: List[Any], dst: int, group: Optional[Comm] = None, device: DeviceLike = None,
                     tag: int = 0) -> None: ...
def send_object_list(*args: Any, **kwargs: Any) -> None:
    """Sends object_list's objects to rank dst. Forms: send_object_list(comm,
    object_list, dst, timeout=None, tag=0) or send_object_list(object_list,
    dst, group=None, tag=0)."""
    comm, a = _bind("send_object_list", args, kwargs)
    if a["dst"] is None:
        raise InvalidArgument("send_object_list: dst is required")
    return _send_object_list(comm, a["object_list"], a["dst"], a["tag"])


@overload
def recv_object_list(comm: Comm, object_list: List[Any], src: Optional[int], timeout: OptTimeout = None,
                     weights_only: bool = True, tag: int = 0) -> int: ...
@overload
def recv_object_list(object_list: List[Any], src: Optional[int] = None, group: Optional[Comm] = None,
                     device: DeviceLike = None, tag: int = 0) -> int: ...
def recv_object_list(*args: Any, **kwargs: Any) -> int:
    """Receives a send_object_list into object_list, in place; returns the
    sender's rank (src None: whichever rank sends first). Forms:
    recv_object_list(comm, object_list, src, timeout=None, tag=0) or
    recv_object_list(object_list, src=None, group=None, tag=0)."""
    comm, a = _bind("recv_object_list", args, kwargs)
    return _recv_object_list(comm, a["object_list"], a["src"], a["tag"])
