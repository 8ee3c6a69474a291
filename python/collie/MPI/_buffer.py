"""_buffer.py - mpi4py's buffer arguments, read into typed numpy views.

The forms (mpi4py's documentation, "buffer-like objects"):
  buf                                   any C-contiguous object with the buffer protocol
                                        (numpy array, bytearray, array.array, memoryview),
                                        or a contiguous torch CPU tensor;
                                        the datatype comes from its format (float64 -> DOUBLE)
  [buf, datatype] / [buf, count]        datatype a Datatype or a typecode ('i')
  [buf, count, datatype]                count an int, or (count, displ) in elements
  [buf, count, displ, datatype]
and for the vector ("v") and block arguments of collectives:
  buf / [buf, datatype]                 equal blocks, one per rank
  [buf, counts] / [buf, counts, datatype]              counts a sequence, or one int for every rank
  [buf, (counts, displs)] / [buf, (counts, displs), datatype]
  [buf, counts, displs, datatype]
Tuples and lists are alike. IN_PLACE and None/BOTTOM are told apart by the
callers (where MPI allows them). Counts and displacements are in elements
(a derived datatype's: in its extents).

A derived datatype (committed) travels packed: msg() and msgv() gather its
basic elements, in typemap order, into a contiguous uint8 array (numpy
fancy indexing over a byte- or word-index array made once per call) and
give the callers that array as raw, with the one basic type of its elements
(or BYTE when they are of several) as dt; the callers move those bytes as
any others, and call unpack() once a receive completed, which scatters the
packed bytes back to the typemap's offsets in the user's buffer (the gaps
between them are left as they were). A derived type whose data fills its
extent in order (Create_contiguous of a basic type, Dup) needs no copy.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from . import _errors
from ._datatype import BYTE, Datatype, _Layout, as_datatype, from_numpy, from_typecode


class _Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return "MPI." + self._name

    def __reduce__(self) -> str:
        return self._name


IN_PLACE = _Sentinel("IN_PLACE")
BOTTOM = _Sentinel("BOTTOM")


def is_in_place(x: Any) -> bool:
    return x is IN_PLACE


def is_null(x: Any) -> bool:
    return x is None or x is BOTTOM


def _acquire(obj: Any, what: str, writable: bool) -> Tuple[Any, Any]:
    """(bytes of obj as a flat uint8 numpy array, obj's inferred datatype or
    its format string)."""
    if not isinstance(obj, np.ndarray) and hasattr(obj, "data_ptr") and hasattr(obj, "__array__"):
        obj = _host_tensor(obj, what)
    if isinstance(obj, np.ndarray):
        if not obj.flags.c_contiguous:
            raise ValueError("collie.MPI: %s: the numpy array is not C-contiguous (pass np.ascontiguousarray(x))"
                             % what)
        raw = obj.reshape(-1).view(np.uint8)
        if writable and not obj.flags.writeable:
            raise BufferError("collie.MPI: %s: the array is read-only and this call writes into it" % what)
        return raw, obj.dtype
    if isinstance(obj, (list, tuple, dict, str, int, float)) or obj is None:
        raise TypeError("collie.MPI: %s = %s is not a buffer (a numpy array, bytearray or other object with the "
                        "buffer protocol), nor one of mpi4py's forms [buf, datatype], [buf, count, datatype]"
                        % (what, _short(obj)))
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError("collie.MPI: %s: %s does not expose the buffer protocol (give a numpy array or bytearray)"
                        % (what, type(obj).__name__)) from None
    if not mv.c_contiguous:
        raise ValueError("collie.MPI: %s: the buffer is not C-contiguous" % what)
    if writable and mv.readonly:
        raise BufferError("collie.MPI: %s: the %s is read-only and this call writes into it"
                          % (what, type(obj).__name__))
    raw = np.frombuffer(mv, dtype=np.uint8) if mv.nbytes else np.zeros(0, np.uint8)
    return raw, mv.format


def _host_tensor(t: Any, what: str) -> Any:
    """A torch CPU tensor as a numpy array sharing its memory (as mpi4py
    takes tensors through DLPack); other devices are not offered yet."""
    dev = getattr(getattr(t, "device", None), "type", "cpu")
    if dev != "cpu":
        raise TypeError("collie.MPI: %s: a tensor on %s: collie.MPI takes host memory only (for now)" % (what, dev))
    try:
        arr = np.asarray(t)
    except Exception as e:
        raise TypeError("collie.MPI: %s: the tensor cannot be shared with numpy: %s" % (what, e)) from None
    if arr.size and int(arr.ctypes.data) != int(t.data_ptr()):
        raise TypeError("collie.MPI: %s: the tensor's memory cannot be shared (give a contiguous CPU tensor)" % what)
    return arr


def _short(obj: Any) -> str:
    r = repr(obj)
    return r if len(r) < 60 else r[:57] + "..."


def _datatype_of(inferred: Any, what: str) -> Datatype:
    try:
        if isinstance(inferred, str):
            return from_typecode(inferred)
        return from_numpy(inferred)
    except TypeError as e:
        raise TypeError("%s (%s; name one: [buf, MPI.TYPE])" % (e, what)) from None


def _is_int(x: Any) -> bool:
    return hasattr(x, "__index__") and not isinstance(x, bool)


def _is_type(x: Any) -> bool:
    return isinstance(x, (Datatype, str))


class _Packing:
    """Where a derived datatype's packed bytes lie in the user's buffer:
    user (its bytes, a flat uint8 array), g (the unit of the copy: 1, 2, 4 or
    8 bytes), uidx (the units of user, in packed order) and pidx (their
    places in the packed array; None: back to back from its start)."""

    __slots__ = ("user", "g", "uidx", "pidx", "writable")

    def __init__(self, user: Any, g: int, uidx: Any, pidx: Any, writable: bool) -> None:
        self.user, self.g, self.uidx, self.pidx, self.writable = user, g, uidx, pidx, writable

    def _units(self, raw: Any) -> Any:
        return raw[:raw.size - raw.size % self.g].view(_UNIT[self.g])

    def pack(self, packed: Any) -> None:
        """packed = the typemap's bytes of user."""
        u, p = self._units(self.user), packed.view(_UNIT[self.g])
        if self.pidx is None:
            np.take(u, self.uidx, out=p, mode="clip")  # (indices checked against the buffer when made)
        else:
            p[self.pidx] = u[self.uidx]

    def unpack(self, packed: Any, nbytes: Optional[int] = None) -> None:
        """user's typemap bytes = packed (its first nbytes only, when given:
        a receive of a shorter message); nothing for a buffer only read."""
        if not self.writable:
            return
        u, p = self._units(self.user), packed.view(_UNIT[self.g])
        if self.pidx is not None:
            u[self.uidx] = p[self.pidx]
            return
        if nbytes is None:
            u[self.uidx] = p
            return
        n, rem = divmod(min(nbytes, packed.size), self.g)
        u[self.uidx[:n]] = p[:n]
        if rem:  # a message ending inside a unit
            at = int(self.uidx[n]) * self.g
            self.user[at:at + rem] = packed[n * self.g:n * self.g + rem]


_UNIT = {1: np.dtype("u1"), 2: np.dtype("u2"), 4: np.dtype("u4"), 8: np.dtype("u8")}


class Msg:
    """One buffer argument: count elements of dt, displ elements into the
    bytes raw (a flat uint8 numpy array sharing the caller's memory). For a
    derived datatype (origin): raw is the packed copy (pk says where its
    bytes lie in the caller's buffer; None when the type needs no copy), dt
    the basic type its elements travel as, count how many (per of them for
    each element of origin)."""

    __slots__ = ("raw", "dt", "count", "displ", "pk", "origin", "per")

    def __init__(self, raw: Any, dt: Datatype, count: int, displ: int, pk: Optional[_Packing] = None,
                 origin: Optional[Datatype] = None, per: int = 1) -> None:
        self.raw, self.dt, self.count, self.displ = raw, dt, count, displ
        self.pk, self.origin, self.per = pk, origin, per

    def unpack(self, nbytes: Optional[int] = None) -> None:
        """After a receive into a derived datatype completed: its packed
        bytes (the first nbytes: a shorter message) to the caller's buffer."""
        if self.pk is not None:
            self.pk.unpack(self.raw, nbytes)

    def repack(self) -> None:
        """The caller's buffer's contents of now packed again (a persistent
        send's Start sends them)."""
        if self.pk is not None:
            self.pk.pack(self.raw)

    @property
    def nbytes(self) -> int:
        return self.count * self.dt.extent

    @property
    def offset(self) -> int:
        return self.displ * self.dt.extent

    def bytes(self) -> Any:
        """The message's bytes (a view)."""
        return self.raw[self.offset:self.offset + self.nbytes]

    def array(self) -> Any:
        """The message as a typed numpy view."""
        return self.bytes().view(self.dt.np)

    @property
    def ptr(self) -> int:
        return int(self.raw.ctypes.data) + self.offset


def _unpack(spec: Any, what: str, nmax: int) -> Tuple[Any, List[Any]]:
    if isinstance(spec, (list, tuple)):
        if not 1 <= len(spec) <= nmax:
            raise TypeError("collie.MPI: %s: a buffer argument is buf, [buf, datatype], [buf, count, datatype] "
                            "or [buf, count, displ, datatype]; got a %s of %d items"
                            % (what, type(spec).__name__, len(spec)))
        return spec[0], list(spec[1:])
    return spec, []


def msg(spec: Any, what: str, writable: bool = False) -> Msg:
    """A simple buffer argument (Send, Recv, Bcast, Reduce, a rank's own block)."""
    buf, rest = _unpack(spec, what, 4)
    if is_null(buf):
        if rest and _is_int(rest[0]) and int(rest[0]) == 0:
            given = as_datatype(rest[-1], what + ": datatype") if _is_type(rest[-1]) else None
            if given is not None and given.is_derived:
                return _derived_msg(np.zeros(0, np.uint8), given, 0, 0, what, writable)
            return Msg(np.zeros(0, np.uint8), given or _byte(), 0, 0)
        _errors.unsupported("%s: BOTTOM/None as a buffer with data" % what,
                            "absolute addresses (MPI.Get_address) are not offered: give the buffer, with a derived "
                            "datatype of displacements relative to its start")
    raw, inferred = _acquire(buf, what, writable)
    dt: Optional[Datatype] = None
    count: Optional[int] = None
    displ = 0
    if len(rest) == 1:
        if _is_type(rest[0]):
            dt = as_datatype(rest[0], what + ": datatype")
        else:
            count, displ = _count(rest[0], what)
    elif len(rest) == 2:
        count, displ = _count(rest[0], what)
        dt = as_datatype(rest[1], what + ": datatype")
    elif len(rest) == 3:
        count, _ = _count(rest[0], what)
        displ = _nonneg(rest[1], what + ": displacement")
        dt = as_datatype(rest[2], what + ": datatype")
    if dt is None:
        dt = _datatype_of(inferred, what)
    if dt.is_derived:
        return _derived_msg(raw, dt, count, displ, what, writable)
    ext = dt.extent
    if count is None:
        avail = raw.size - displ * ext
        if avail < 0 or avail % ext:
            raise ValueError("collie.MPI: %s: the buffer's %d bytes are not a whole number of %s (%d bytes each)%s"
                             % (what, raw.size, dt.name, ext, " after the displacement %d" % displ if displ else ""))
        count = avail // ext
    if (count + displ) * ext > raw.size:
        raise ValueError("collie.MPI: %s: count %d%s of %s needs %d bytes but the buffer has %d"
                         % (what, count, " at displacement %d" % displ if displ else "", dt.name,
                            (count + displ) * ext, raw.size))
    return Msg(raw, dt, count, displ)


def _byte() -> Datatype:
    return BYTE


def _wire(lay: _Layout) -> Tuple[Datatype, int]:
    """What a derived type's elements travel as: (the one basic type of its
    elements, how many per element), or (BYTE, packed bytes per element)
    when they are of several types."""
    b = lay.basic()
    if b is None:
        return BYTE, lay.psize
    return b, len(lay.kinds)


def _count_of(raw: Any, dt: Datatype, ext: int, displ: int, what: str) -> int:
    """The count of [buf, datatype] (a derived one): the buffer's bytes over
    the extent, which must divide them (as mpi4py)."""
    avail = raw.size - displ * ext
    if ext <= 0 or avail < 0 or avail % ext:
        raise ValueError("collie.MPI: %s: cannot infer the count: the buffer's %d bytes%s are not a whole number "
                         "of %s (extent %d bytes; give [buf, count, datatype])"
                         % (what, raw.size, " after the displacement %d" % displ if displ else "", dt.label, ext))
    return int(avail // ext)


def _check_span(raw: Any, dt: Datatype, lay: _Layout, first: int, last: int, what: str, which: str) -> None:
    """Elements first..last (in extents from the buffer's start) must lie
    in the buffer: ValueError naming them otherwise."""
    _, _, _, plo, phi = lay.packing()
    a, b = first * lay.extent, last * lay.extent
    lo, hi = min(a, b) + plo, max(a, b) + phi
    if lo < 0 or hi > raw.size:
        raise ValueError("collie.MPI: %s: %s of %s (extent %d, data at bytes %d..%d of each) span bytes %d..%d but "
                         "the buffer has %d" % (what, which, dt.label, lay.extent, plo, phi, lo, hi, raw.size))


def _derived_msg(raw: Any, dt: Datatype, count: Optional[int], displ: int, what: str, writable: bool) -> Msg:
    """count elements of the derived type dt from displ extents into raw,
    packed (see the module's docstring)."""
    lay = dt.layout(what)
    ext = lay.extent
    if count is None:
        count = _count_of(raw, dt, ext, displ, what)
    wire, k = _wire(lay)
    if count == 0 or lay.psize == 0:
        return Msg(np.zeros(0, np.uint8), wire, 0, 0, None, dt, k)
    _check_span(raw, dt, lay, displ, displ + count - 1, what,
                "count %d%s" % (count, " at displacement %d" % displ if displ else ""))
    g, units, dense, _, _ = lay.packing()
    if dense:
        return Msg(raw, wire, count * k, displ * k, None, dt, k)
    origins = (np.arange(displ, displ + count, dtype=np.int64) * ext) // g
    pk = _Packing(raw, g, (origins[:, None] + units[None, :]).reshape(-1), None, writable)
    packed = np.empty(count * lay.psize, np.uint8)
    pk.pack(packed)
    return Msg(packed, wire, count * k, 0, pk, dt, k)


def _nonneg(x: Any, what: str) -> int:
    if not _is_int(x):
        raise TypeError("collie.MPI: %s = %r must be an int" % (what, x))
    v = int(x)
    if v < 0:
        raise ValueError("collie.MPI: %s = %d must be >= 0" % (what, v))
    return v


def _count(x: Any, what: str) -> Tuple[int, int]:
    """A count, or (count, displ)."""
    if isinstance(x, (tuple, list)) and len(x) == 2:
        return _nonneg(x[0], what + ": count"), _nonneg(x[1], what + ": displacement")
    return _nonneg(x, what + ": count"), 0


class MsgV:
    """A vector (or block) argument: counts[q] elements of dt at displs[q]
    (elements) in raw, one block per rank. For a derived datatype (origin),
    as Msg: raw packed (block q at displs[q] packed elements), dt the basic
    type its elements travel as, counts and displs in those."""

    __slots__ = ("raw", "dt", "counts", "displs", "pk", "origin")

    def __init__(self, raw: Any, dt: Datatype, counts: List[int], displs: List[int], pk: Optional[_Packing] = None,
                 origin: Optional[Datatype] = None) -> None:
        self.raw, self.dt, self.counts, self.displs = raw, dt, counts, displs
        self.pk, self.origin = pk, origin

    def unpack(self) -> None:
        """After a receive into a derived datatype completed: its blocks to the caller's buffer."""
        if self.pk is not None:
            self.pk.unpack(self.raw)

    @property
    def ptr(self) -> int:
        return int(self.raw.ctypes.data)

    def block(self, q: int) -> Any:
        """Block q's bytes (a view)."""
        e = self.dt.extent
        return self.raw[self.displs[q] * e:(self.displs[q] + self.counts[q]) * e]

    def uniform(self) -> Optional[int]:
        """The count of every block when they are equal and back to back from 0, else None."""
        return _uniform(self.counts, self.displs)

    def byte_counts(self) -> List[int]:
        return [n * self.dt.extent for n in self.counts]

    def byte_displs(self) -> List[int]:
        return [d * self.dt.extent for d in self.displs]


def _uniform(counts: List[int], displs: List[int]) -> Optional[int]:
    c = counts[0] if counts else 0
    if all(n == c for n in counts) and all(d == q * c for q, d in enumerate(displs)):
        return c
    return None


def _seq(x: Any, what: str, size: int) -> List[int]:
    try:
        vals = list(x)
    except TypeError:
        raise TypeError("collie.MPI: %s = %r must be a sequence of ints" % (what, x)) from None
    if len(vals) != size:
        raise ValueError("collie.MPI: %s has %d entries; the communicator has %d ranks (one per rank)"
                         % (what, len(vals), size))
    return [_nonneg(v, "%s[%d]" % (what, q)) for q, v in enumerate(vals)]


def msgv(spec: Any, what: str, size: int, writable: bool = False, block: bool = False) -> MsgV:
    """A vector argument (Gatherv's recvbuf, Scatterv's sendbuf, Alltoallv's
    both) or, with block=True, a block one (Gather's recvbuf, Alltoall's
    both: equal counts, back to back)."""
    buf, rest = _unpack(spec, what, 4)
    if is_null(buf):
        _errors.unsupported("%s: BOTTOM/None as a buffer" % what,
                            "absolute addresses (MPI.Get_address) are not offered: give the buffer, with a derived "
                            "datatype of displacements relative to its start")
    raw, inferred = _acquire(buf, what, writable)
    dt: Optional[Datatype] = None
    counts_spec: Any = None
    displs_spec: Any = None
    if rest and _is_type(rest[-1]):
        dt = as_datatype(rest[-1], what + ": datatype")
        rest = rest[:-1]
    if len(rest) == 1:
        x = rest[0]
        if isinstance(x, tuple) and len(x) == 2 and not _is_int(x[0]) and not _is_int(x[1]):
            counts_spec, displs_spec = x
        else:
            counts_spec = x
    elif len(rest) == 2:
        counts_spec, displs_spec = rest
    elif rest:
        raise TypeError("collie.MPI: %s: a vector buffer argument is buf, [buf, counts], [buf, counts, datatype], "
                        "[buf, (counts, displs), datatype] or [buf, counts, displs, datatype]" % what)
    if dt is None:
        dt = _datatype_of(inferred, what)
    ext = dt.layout(what).extent if dt.is_derived else dt.extent
    if counts_spec is None:
        total = raw.size
        if size == 0 or ext <= 0 or total % (ext * size):
            raise ValueError("collie.MPI: %s: the buffer's %d bytes do not split into %d equal blocks of %s "
                             "(%d bytes each)" % (what, total, size, dt.label, ext))
        counts = [total // ext // size] * size
    elif _is_int(counts_spec):
        counts = [_nonneg(counts_spec, what + ": count")] * size
    else:
        counts = _seq(counts_spec, what + ": counts", size)
    if displs_spec is None:
        displs, s = [], 0
        for n in counts:
            displs.append(s)
            s += n
    elif _is_int(displs_spec):
        displs = [_nonneg(displs_spec, what + ": displ") + q * counts[0] for q in range(size)]
    else:
        displs = _seq(displs_spec, what + ": displs", size)
    if block and _uniform(counts, displs) is None:
        raise ValueError("collie.MPI: %s: this call takes equal blocks, back to back (counts %r, displs %r); "
                         "use the v-variant for others" % (what, counts, displs))
    if dt.is_derived:
        return _derived_msgv(raw, dt, counts, displs, what, writable)
    for q in range(size):
        end = (displs[q] + counts[q]) * ext
        if end > raw.size:
            raise ValueError("collie.MPI: %s: block %d (count %d at displacement %d of %s) ends at byte %d but "
                             "the buffer has %d" % (what, q, counts[q], displs[q], dt.name, end, raw.size))
    return MsgV(raw, dt, counts, displs)


def _derived_msgv(raw: Any, dt: Datatype, counts: List[int], displs: List[int], what: str, writable: bool) -> MsgV:
    """The blocks of a vector argument of the derived type dt, packed: block
    q's elements at packed element displs[q] (the packed array holds
    elements 0..end-1, those of no block left zero and not unpacked)."""
    lay = dt.layout(what)
    wire, k = _wire(lay)
    wc, wd = [c * k for c in counts], [d * k for d in displs]
    live = [(c, d) for c, d in zip(counts, displs) if c]
    end = max((c + d for c, d in live), default=0)
    if not live or lay.psize == 0:
        return MsgV(np.zeros(end * lay.psize, np.uint8), wire, wc, wd, None, dt)
    for q, (c, d) in enumerate(zip(counts, displs)):
        if c:
            _check_span(raw, dt, lay, d, d + c - 1, what, "block %d (count %d at displacement %d)" % (q, c, d))
    g, units, dense, _, _ = lay.packing()
    if dense:
        return MsgV(raw, wire, wc, wd, None, dt)
    elems = np.unique(np.concatenate([np.arange(d, d + c, dtype=np.int64) for c, d in live]))
    uidx = ((elems * lay.extent // g)[:, None] + units[None, :]).reshape(-1)
    per = lay.psize // g
    pidx = None if len(elems) == end else ((elems * per)[:, None] + np.arange(per)[None, :]).reshape(-1)
    packed = np.zeros(end * lay.psize, np.uint8)
    pk = _Packing(raw, g, uidx, pidx, writable)
    pk.pack(packed)
    return MsgV(packed, wire, wc, wd, pk, dt)
