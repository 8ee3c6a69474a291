"""collie.objcol - collectives over picklable Python objects.

The signatures follow torch.distributed's object collectives. Each object is
pickled into bytes; the sizes travel first (an int64 collective), then the
bytes (a uint8 collective into one buffer that the per-rank parts view, so
nothing is copied twice). Only the standard library is used: these work
without numpy.

Unpickling runs code chosen by the sender: use these only between ranks of
one job that trust each other, as with torch.distributed.

Every function is collective over `group` (a Comm; None: the default
communicator) and blocks. Argument errors raise InvalidArgument before any
communication when every rank can see them; an error only the root can see
(e.g. a wrong-length input list at src) raises there, and the other ranks
then fail at their deadline.
"""

import array
import pickle

from ._comm import resolve
from ._enums import ReduceOp
from ._errors import InvalidArgument

__all__ = [
    "all_gather_object",
    "gather_object",
    "broadcast_object_list",
    "scatter_object_list",
    "send_object_list",
    "recv_object_list",
]

_HDR = 8  # bytes of the length header in padded blocks


def _dumps(obj):
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _i64(n=0):
    return array.array("q", [n])


def _check_list(lst, n, what, fn):
    if not isinstance(lst, list):
        raise InvalidArgument("%s: %s must be a list, got %s" % (fn, what, type(lst).__name__))
    if n is not None and len(lst) != n:
        raise InvalidArgument("%s: %s has %d entries, expected %d (one per rank)" % (fn, what, len(lst), n))


def _block(data, width):
    """data with its length in front, padded to width bytes."""
    b = bytearray(width)
    b[:_HDR] = len(data).to_bytes(_HDR, "little")
    b[_HDR : _HDR + len(data)] = data
    return b


def _unblock(mv):
    n = int.from_bytes(mv[:_HDR], "little")
    return pickle.loads(mv[_HDR : _HDR + n])


def all_gather_object(object_list, obj, group=None):
    """object_list[q] = rank q's obj, on every rank. object_list must have
    one entry per rank (it is filled in place)."""
    comm = resolve(group)
    size = comm.get_size()
    _check_list(object_list, size, "object_list", "all_gather_object")
    data = _dumps(obj)
    sizes = array.array("q", [0] * size)
    comm.all_gather_single(sizes, _i64(len(data)))
    buf = bytearray(sum(sizes))
    mv = memoryview(buf)
    parts, off = [], 0
    for n in sizes:
        parts.append(mv[off : off + n])
        off += n
    comm.all_gather_v(parts, data)
    for q, p in enumerate(parts):
        object_list[q] = pickle.loads(p)
    for p in parts:
        p.release()
    mv.release()


def gather_object(obj, object_gather_list=None, dst=0, group=None):
    """At dst, object_gather_list[q] = rank q's obj (a list with one entry per
    rank, filled in place); other ranks pass None."""
    comm = resolve(group)
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
    buf = bytearray(width[0] * size)
    mv = memoryview(buf)
    parts = [mv[q * width[0] : (q + 1) * width[0]] for q in range(size)]
    comm.gather(parts, block, dst)
    for q, p in enumerate(parts):
        object_gather_list[q] = _unblock(p)
        p.release()
    mv.release()


def broadcast_object_list(object_list, src=0, group=None):
    """Every rank's object_list = src's, element by element, in place (every
    rank passes a list of the same length)."""
    comm = resolve(group)
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


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=0, group=None):
    """scatter_object_output_list[0] = src's scatter_object_input_list[rank]
    (the input list, one object per rank, matters only at src)."""
    comm = resolve(group)
    size, rank = comm.get_size(), comm.get_rank()
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise InvalidArgument("scatter_object_list: scatter_object_output_list must be a list of at least one entry")
    width = _i64()
    if rank == src:
        _check_list(scatter_object_input_list, size, "scatter_object_input_list", "scatter_object_list")
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


def send_object_list(object_list, dst, group=None, tag=0):
    """Sends the objects of object_list to rank dst (its recv_object_list
    with src = this rank receives them)."""
    comm = resolve(group)
    _check_list(object_list, None, "object_list", "send_object_list")
    data = _dumps(list(object_list))
    comm.send(_i64(len(data)), dst, tag)
    comm.send(data, dst, tag)


def recv_object_list(object_list, src, group=None, tag=0):
    """Receives rank src's send_object_list into object_list, in place (it
    must have as many entries as were sent). Returns src."""
    comm = resolve(group)
    _check_list(object_list, None, "object_list", "recv_object_list")
    if src is None:
        raise InvalidArgument("recv_object_list: src is required (collie has no receive from any source)")
    n = _i64()
    comm.recv(n, src, tag)
    buf = bytearray(n[0])
    comm.recv(buf, src, tag)
    objs = pickle.loads(buf)
    if len(objs) != len(object_list):
        raise InvalidArgument(
            "recv_object_list: rank %d sent %d objects but object_list has %d entries" % (src, len(objs), len(object_list))
        )
    object_list[:] = objs
    return src
