"""_datatype.py - MPI's datatypes: the predefined ones with their numpy
dtypes, and the derived ones (Create_contiguous, Create_vector, ...).

Each predefined Datatype knows its numpy dtype (so buffers are read as typed
arrays), its kind (what reductions MPI allows on it) and collie's dtype
where the C library has one (then reductions run in C; the others run in
numpy, see _comm.py).

A derived datatype is a typemap (MPI-3.1 section 4.1): its basic elements,
each a byte offset from the element's origin and a predefined datatype,
with a lower bound and an extent; count elements of it in a buffer lie at
origin + i * extent. _Layout holds the typemap as numpy arrays, and the
constructors compute lb, ub and extent as MPI does (and as Open MPI's
mpi4py reports them): copies of the old type placed at displacements, the
extent rounded up to the strictest alignment of the basic types unless a
resized type fixed the bounds (its lb and ub then win, as MPI's markers).
Transfers move bytes: a derived type travels packed, its basic elements
back to back in typemap order (_buffer.py packs and unpacks), a pair type
(DOUBLE_INT, ...) with its padding as it travels alone. A derived type must
be committed before it is used in communication, and cannot be used once
freed.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _errors

# collie_dtype_t values (include/collie.h's order).
_COLLIE = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5,
           "float32": 8, "float64": 9}

UNDEFINED_COUNT = -32766  # MPI.UNDEFINED (_status.py), for Get_elements

# A datatype's life: predefined; derived and built (usable as an old type,
# not in communication); committed; freed (unusable).
_PREDEFINED, _BUILT, _COMMITTED, _FREED = "predefined", "built", "committed", "freed"


class _Layout:
    """A typemap: offs[j] (bytes from the element's origin) and kinds[j]
    (an index into _BASIC) of each basic element, in typemap order; lb and ub
    (MPI's bounds, extent = ub - lb); tlb and tub (the true bounds: the
    data's first byte and last byte + 1); size (bytes of data,
    MPI_Type_size); psize (bytes one element takes packed: size, plus a pair
    type's padding); align (the strictest alignment of its basic types);
    marked (Create_resized set its bounds, so they stay as set)."""

    __slots__ = ("offs", "kinds", "lb", "ub", "tlb", "tub", "size", "psize", "align", "marked", "_pack")

    def __init__(self, offs: Any, kinds: Any, lb: int, ub: int, size: int, align: int, marked: bool) -> None:
        self.offs, self.kinds = offs, kinds
        self.lb, self.ub, self.size, self.align, self.marked = lb, ub, size, align, marked
        if len(offs):
            self.tlb = int(offs.min())
            self.tub = int((offs + _TSIZE[kinds]).max())
            self.psize = int(_PSIZE[kinds].sum())
        else:
            self.tlb = self.tub = self.psize = 0
        self._pack: Optional[Tuple[int, Any, bool, int, int]] = None

    @property
    def extent(self) -> int:
        return self.ub - self.lb

    def rounded(self) -> "_Layout":
        """MPI's epsilon: the extent rounded up to a multiple of the
        alignment (not for a resized type: its bounds are as set)."""
        if not self.marked and self.align > 1:
            r = (self.ub - self.lb) % self.align
            if r:
                self.ub += self.align - r
        return self

    def basic(self) -> Optional["Datatype"]:
        """The one predefined datatype of every basic element, or None (several, or none)."""
        if len(self.kinds) and bool((self.kinds == self.kinds[0]).all()):
            return _BASIC[int(self.kinds[0])]
        return None

    def names(self) -> List[str]:
        """The names of its basic types, in the order they first come."""
        kinds, first = np.unique(self.kinds, return_index=True)
        return [_BASIC[int(k)].name for k in kinds[np.argsort(first)]]

    def packing(self) -> Tuple[int, Any, bool, int, int]:
        """How one element is packed: (g, units, dense, plo, phi). g is the
        unit of the copy (1, 2, 4 or 8 bytes, the largest dividing every
        offset, size and the extent); units the element's data in units of g
        from its origin, in typemap order; dense when the data is the whole
        extent in order (then no copy is needed); plo..phi the bytes the
        packing reads or writes (a pair's padding included)."""
        if self._pack is None:
            ps = _PSIZE[self.kinds]
            ext = self.extent
            g = 8
            while g > 1 and (bool((self.offs % g).any()) or bool((ps % g).any()) or ext % g):
                g //= 2
            reps = ps // g
            total = int(reps.sum())
            firsts = np.repeat(np.cumsum(reps) - reps, reps)
            units = np.repeat(self.offs // g, reps) + (np.arange(total, dtype=np.int64) - firsts)
            dense = total > 0 and total * g == ext and bool((units == np.arange(total)).all())
            plo = int(self.offs.min()) if total else 0
            phi = int((self.offs + ps).max()) if total else 0
            self._pack = (g, units, dense, plo, phi)
        return self._pack


def _empty() -> _Layout:
    return _Layout(np.zeros(0, np.int64), np.zeros(0, np.int16), 0, 0, 0, 1, False)


def _placed(old: _Layout, disps: Any) -> _Layout:
    """Copies of old at the byte displacements disps (an int64 array), in order."""
    n = len(disps)
    if n == 0:
        return _empty()
    offs = (disps[:, None] + old.offs[None, :]).reshape(-1)
    kinds = np.tile(old.kinds, n)
    return _Layout(offs, kinds, int(disps.min()) + old.lb, int(disps.max()) + old.ub, n * old.size, old.align,
                   old.marked).rounded()


def _runs(starts: Any, lengths: Any, step: int) -> Any:
    """Displacements of blocks: block i is lengths[i] copies, step bytes
    apart, from starts[i] (bytes)."""
    lengths = np.asarray(lengths, np.int64)
    total = int(lengths.sum())
    firsts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(np.asarray(starts, np.int64), lengths) + (np.arange(total, dtype=np.int64) - firsts) * step


def _struct(parts: List[_Layout]) -> _Layout:
    """The typemaps of parts one after the other (MPI_Type_create_struct):
    the bounds of the resized parts where there are some, else of all, the
    extent rounded to the strictest alignment."""
    if not parts:
        return _empty()
    offs = np.concatenate([p.offs for p in parts])
    kinds = np.concatenate([p.kinds for p in parts])
    marked = [p for p in parts if p.marked]
    bounded = marked or parts
    return _Layout(offs, kinds, min(p.lb for p in bounded), max(p.ub for p in bounded), sum(p.size for p in parts),
                   max(p.align for p in parts), bool(marked)).rounded()


def _int(x: Any, call: str, what: str) -> int:
    if isinstance(x, bool) or not hasattr(x, "__index__"):
        raise TypeError("collie.MPI: Datatype.%s: %s = %r must be an int" % (call, what, x))
    return int(x.__index__())


def _count(x: Any, call: str, what: str) -> int:
    """A count or block length: an int >= 0 (MPI.Exception ERR_COUNT / ERR_ARG otherwise, as MPI)."""
    v = _int(x, call, what)
    if v < 0:
        raise _errors.Exception(_errors.ERR_COUNT if what == "count" else _errors.ERR_ARG,
                                "collie.MPI: Datatype.%s: %s = %d must be >= 0" % (call, what, v))
    return v


def _ints(x: Any, call: str, what: str, counts: bool) -> List[int]:
    try:
        vals = list(x)
    except TypeError:
        raise TypeError("collie.MPI: Datatype.%s: %s = %r must be a sequence of ints" % (call, what, x)) from None
    if counts:
        return [_count(v, call, "%s[%d]" % (what, j)) for j, v in enumerate(vals)]
    return [_int(v, call, "%s[%d]" % (what, j)) for j, v in enumerate(vals)]


def _same_length(call: str, a: Sequence[Any], an: str, b: Sequence[Any], bn: str) -> None:
    if len(a) != len(b):
        raise ValueError("collie.MPI: Datatype.%s: %s has %d entries but %s has %d (one per block)"
                         % (call, an, len(a), bn, len(b)))


def _short(s: str) -> str:
    return s if len(s) <= 120 else s[:117] + "..."


class Datatype(_errors.RefusesUnknown):
    """An MPI datatype (mpi4py's MPI.Datatype): a predefined one, or a
    derived one made by its Create_* methods (a typemap: _Layout)."""

    _mpi_class = "Datatype"
    _why_unsupported = ("collie.MPI offers the predefined datatypes and the constructors Create_contiguous, "
                        "Create_vector, Create_hvector, Create_indexed, Create_hindexed, Create_indexed_block, "
                        "Create_hindexed_block, Create_struct, Create_resized and Dup (docs/mpi.md); not "
                        "Create_subarray, Create_darray, decoding (Get_envelope, Get_contents) nor Pack/Unpack")

    __slots__ = ("_name", "_np", "_kind", "_collie", "_lay", "_desc", "_state")

    def __init__(self, name: str, npdtype: Optional[np.dtype[Any]], kind: str, lay: Optional[_Layout] = None,
                 desc: str = "", state: str = _PREDEFINED) -> None:
        self._name = name
        self._np = npdtype
        self._kind = kind  # int, uint, float, complex, bool, byte, char, pair, null; derived
        self._collie: Optional[int] = None
        if npdtype is not None and kind in ("int", "uint", "float", "byte"):
            key = "uint8" if kind == "byte" else npdtype.name
            self._collie = _COLLIE.get(key)
        self._lay = lay  # a predefined one's is made at first use
        self._desc = desc or name
        self._state = state

    # ---- the typemap ----

    def _layout(self, call: str) -> _Layout:
        """The typemap; MPI.Exception (ERR_TYPE) naming call for a freed
        datatype or DATATYPE_NULL."""
        lay = self._lay
        if lay is not None and self._state != _FREED:
            return lay
        if self._state == _FREED:
            raise _errors.Exception(_errors.ERR_TYPE, "collie.MPI: Datatype.%s: the datatype %s was freed "
                                    "(Datatype.Free)" % (call, self.label))
        if self._np is None:
            raise _errors.Exception(_errors.ERR_TYPE, "collie.MPI: Datatype.%s: DATATYPE_NULL has no typemap" % call)
        k = _KIND[self._name]
        lay = _Layout(np.zeros(1, np.int64), np.full(1, k, np.int16), 0, int(self._np.itemsize), int(_MSIZE[k]),
                      int(_ALIGN[k]), False)
        self._lay = lay
        return lay

    def _derive(self, lay: _Layout, what: str) -> "Datatype":
        return Datatype("", None, "derived", lay, _short("%s of %s" % (what, self.label)), _BUILT)

    # ---- constructors (MPI-3.1 section 4.1.2) ----

    def Create_contiguous(self, count: int) -> "Datatype":
        """count copies of this type, one extent apart."""
        call = "Create_contiguous"
        n = _count(count, call, "count")
        old = self._layout(call)
        return self._derive(_placed(old, np.arange(n, dtype=np.int64) * old.extent), "%s(%d)" % (call, n))

    def Create_vector(self, count: int, blocklength: int, stride: int) -> "Datatype":
        """count blocks of blocklength copies, block i starting at i * stride
        extents of this type."""
        call = "Create_vector"
        n, b, s = _count(count, call, "count"), _count(blocklength, call, "blocklength"), _int(stride, call, "stride")
        old = self._layout(call)
        disps = _runs(np.arange(n, dtype=np.int64) * s * old.extent, [b] * n, old.extent)
        return self._derive(_placed(old, disps), "%s(%d, %d, %d)" % (call, n, b, s))

    def Create_hvector(self, count: int, blocklength: int, stride: int) -> "Datatype":
        """As Create_vector with stride in bytes."""
        call = "Create_hvector"
        n, b, s = _count(count, call, "count"), _count(blocklength, call, "blocklength"), _int(stride, call, "stride")
        old = self._layout(call)
        disps = _runs(np.arange(n, dtype=np.int64) * s, [b] * n, old.extent)
        return self._derive(_placed(old, disps), "%s(%d, %d, %d)" % (call, n, b, s))

    def Create_indexed(self, blocklengths: Sequence[int], displacements: Sequence[int]) -> "Datatype":
        """Block i: blocklengths[i] copies from displacements[i] extents of this type."""
        return self._indexed("Create_indexed", blocklengths, displacements, False)

    def Create_hindexed(self, blocklengths: Sequence[int], displacements: Sequence[int]) -> "Datatype":
        """As Create_indexed with displacements in bytes."""
        return self._indexed("Create_hindexed", blocklengths, displacements, True)

    def Create_indexed_block(self, blocklength: int, displacements: Sequence[int]) -> "Datatype":
        """As Create_indexed with one block length for every block."""
        b = _count(blocklength, "Create_indexed_block", "blocklength")
        d = _ints(displacements, "Create_indexed_block", "displacements", False)
        return self._indexed("Create_indexed_block", [b] * len(d), d, False)

    def Create_hindexed_block(self, blocklength: int, displacements: Sequence[int]) -> "Datatype":
        """As Create_hindexed with one block length for every block."""
        b = _count(blocklength, "Create_hindexed_block", "blocklength")
        d = _ints(displacements, "Create_hindexed_block", "displacements", False)
        return self._indexed("Create_hindexed_block", [b] * len(d), d, True)

    def _indexed(self, call: str, blocklengths: Sequence[int], displacements: Sequence[int],
                 in_bytes: bool) -> "Datatype":
        bl = _ints(blocklengths, call, "blocklengths", True)
        d = _ints(displacements, call, "displacements", False)
        _same_length(call, bl, "blocklengths", d, "displacements")
        old = self._layout(call)
        starts = np.asarray(d, np.int64) * (1 if in_bytes else old.extent)
        return self._derive(_placed(old, _runs(starts, bl, old.extent)), "%s(%s, %s)" % (call, bl, d))

    @staticmethod
    def Create_struct(blocklengths: Sequence[int], displacements: Sequence[int],
                      datatypes: Sequence["Datatype"]) -> "Datatype":
        """Block i: blocklengths[i] copies of datatypes[i] from
        displacements[i] bytes (MPI.Datatype.Create_struct, a static method
        as in mpi4py)."""
        call = "Create_struct"
        bl = _ints(blocklengths, call, "blocklengths", True)
        d = _ints(displacements, call, "displacements", False)
        try:
            types = list(datatypes)
        except TypeError:
            raise TypeError("collie.MPI: Datatype.%s: datatypes = %r must be a sequence of datatypes"
                            % (call, datatypes)) from None
        _same_length(call, bl, "blocklengths", d, "displacements")
        _same_length(call, bl, "blocklengths", types, "datatypes")
        parts = []
        for j, t in enumerate(types):
            if not isinstance(t, Datatype):
                raise TypeError("collie.MPI: Datatype.%s: datatypes[%d] = %r is not an MPI datatype" % (call, j, t))
            old = t._layout(call)
            if bl[j]:
                parts.append(_placed(old, d[j] + np.arange(bl[j], dtype=np.int64) * old.extent))
        what = "%s(%s, %s, [%s])" % (call, bl, d, ", ".join(t.label for t in types))
        return Datatype("", None, "derived", _struct(parts), _short(what), _BUILT)

    def Create_resized(self, lb: int, extent: int) -> "Datatype":
        """This type's typemap with lb and extent as given (its elements in a
        buffer are then extent bytes apart)."""
        call = "Create_resized"
        lo, ext = _int(lb, call, "lb"), _int(extent, call, "extent")
        old = self._layout(call)
        lay = _Layout(old.offs, old.kinds, lo, lo + ext, old.size, old.align, True)
        return self._derive(lay, "%s(%d, %d)" % (call, lo, ext))

    def Dup(self) -> "Datatype":
        """A new datatype of the same typemap (committed if this one is; not predefined)."""
        lay = self._layout("Dup")
        state = _BUILT if self._state == _BUILT else _COMMITTED
        return Datatype("", None, "derived", lay, _short("Dup of %s" % self.label), state)

    def Commit(self) -> "Datatype":
        """Makes a derived type usable in communication (MPI requires it);
        returns the datatype itself, as mpi4py."""
        self._layout("Commit")
        if self._state == _BUILT:
            self._state = _COMMITTED
        return self

    def Free(self) -> None:
        """Frees a derived datatype: it can no longer be used (types made
        from it keep working). A predefined one cannot be freed."""
        if self._state == _PREDEFINED:
            raise _errors.Exception(_errors.ERR_TYPE, "collie.MPI: Datatype.Free: %s is predefined and cannot be "
                                    "freed" % self._name)
        self._layout("Free")
        self._state = _FREED
        self._lay = None

    # ---- what it is ----

    def Get_size(self) -> int:
        """Bytes of data in one element (a pair type's padding excluded)."""
        if self._np is None and self._state == _PREDEFINED:
            return 0
        return self._layout("Get_size").size

    def Get_extent(self) -> Tuple[int, int]:
        """(lower bound, extent): the extent is the stride of one element in
        a buffer (a pair type's padding included: DOUBLE_INT is 12 bytes of
        data in 16)."""
        if self._np is None and self._state == _PREDEFINED:
            return (0, 0)
        lay = self._layout("Get_extent")
        return (lay.lb, lay.extent)

    def Get_true_extent(self) -> Tuple[int, int]:
        """(true lower bound, true extent): where the data lies, from its first byte to its last."""
        if self._np is None and self._state == _PREDEFINED:
            return (0, 0)
        lay = self._layout("Get_true_extent")
        return (lay.tlb, lay.tub - lay.tlb)

    def Get_lb(self) -> int:
        return self.Get_extent()[0]

    def Get_ub(self) -> int:
        lb, ext = self.Get_extent()
        return lb + ext

    def Get_name(self) -> str:
        return self._name

    def Set_name(self, name: str) -> None:
        if self._state == _PREDEFINED:
            raise _errors.Exception(_errors.ERR_TYPE, "collie.MPI: Datatype.Set_name: %s is predefined; its name "
                                    "stays" % self._name)
        self._name = str(name)

    def Is_predefined(self) -> bool:
        return self._state == _PREDEFINED

    @property
    def size(self) -> int:
        return self.Get_size()

    @property
    def extent(self) -> int:
        return self.Get_extent()[1]

    @property
    def lb(self) -> int:
        return self.Get_extent()[0]

    @property
    def ub(self) -> int:
        return self.Get_ub()

    @property
    def true_lb(self) -> int:
        return self.Get_true_extent()[0]

    @property
    def true_extent(self) -> int:
        return self.Get_true_extent()[1]

    @property
    def true_ub(self) -> int:
        lb, ext = self.Get_true_extent()
        return lb + ext

    @property
    def name(self) -> str:
        return self._name

    @property
    def is_predefined(self) -> bool:
        return self._state == _PREDEFINED

    def __repr__(self) -> str:
        return "<collie.MPI.Datatype %s%s>" % (self.label, " (freed)" if self._state == _FREED else "")

    def __bool__(self) -> bool:
        return self._kind != "null" and self._state != _FREED

    def __reduce__(self) -> str:
        if self._state != _PREDEFINED:
            raise TypeError("collie.MPI: a derived datatype (%s) cannot be pickled" % self.label)
        return self._name[4:] if self._name.startswith("MPI_") else self._name

    # ---- for the binding ----

    @property
    def label(self) -> str:
        """The name, or for an unnamed derived type what made it
        ("Create_vector(3, 2, 4) of MPI_DOUBLE"), for messages."""
        return self._name or self._desc

    @property
    def is_derived(self) -> bool:
        return self._state != _PREDEFINED

    def layout(self, what: str) -> _Layout:
        """A derived type's typemap for communication: MPI.Exception
        (ERR_TYPE) naming what when it is not committed or was freed."""
        if self._state == _BUILT:
            raise _errors.Exception(_errors.ERR_TYPE, "collie.MPI: %s: the datatype %s is not committed (call its "
                                    "Commit() before using it in communication, as MPI requires)"
                                    % (what, self.label))
        if self._state == _FREED:
            raise _errors.Exception(_errors.ERR_TYPE, "collie.MPI: %s: the datatype %s was freed (Datatype.Free)"
                                    % (what, self.label))
        return self._layout(what)

    def packed_size(self) -> int:
        """Bytes one element takes as it travels (derived: packed)."""
        if self._state == _PREDEFINED:
            return self.extent
        return self._layout("packed_size").psize

    def elements(self, nbytes: int) -> int:
        """Basic elements in nbytes of this derived type packed (Status.Get_elements)."""
        lay = self._layout("Get_elements")
        if lay.psize == 0:
            return 0
        whole, rem = divmod(nbytes, lay.psize)
        ends = np.cumsum(_PSIZE[lay.kinds])
        part = int(np.searchsorted(ends, rem, side="right"))
        if rem and (part == 0 or int(ends[part - 1]) != rem):
            return UNDEFINED_COUNT
        return whole * len(lay.kinds) + part

    @property
    def np(self) -> np.dtype[Any]:
        if self._np is None:
            raise TypeError("collie.MPI: %s has no numpy dtype (%s)" % (self.label, "DATATYPE_NULL" if
                                                                         self._kind == "null" else "a derived type"))
        return self._np

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def collie(self) -> Optional[int]:
        return self._collie


def _pair(value: str) -> np.dtype[Any]:
    """The C struct {value; int;} as numpy lays it out (C alignment)."""
    return np.dtype([("value", value), ("index", "i4")], align=True)


DATATYPE_NULL = Datatype("MPI_DATATYPE_NULL", None, "null")
BYTE = Datatype("MPI_BYTE", np.dtype("B"), "byte")
PACKED = Datatype("MPI_PACKED", np.dtype("B"), "byte")
CHAR = Datatype("MPI_CHAR", np.dtype("S1"), "char")
SIGNED_CHAR = Datatype("MPI_SIGNED_CHAR", np.dtype("b"), "int")
UNSIGNED_CHAR = Datatype("MPI_UNSIGNED_CHAR", np.dtype("B"), "uint")
SHORT = Datatype("MPI_SHORT", np.dtype("h"), "int")
UNSIGNED_SHORT = Datatype("MPI_UNSIGNED_SHORT", np.dtype("H"), "uint")
INT = Datatype("MPI_INT", np.dtype("i"), "int")
UNSIGNED = Datatype("MPI_UNSIGNED", np.dtype("I"), "uint")
LONG = Datatype("MPI_LONG", np.dtype("l"), "int")
UNSIGNED_LONG = Datatype("MPI_UNSIGNED_LONG", np.dtype("L"), "uint")
LONG_LONG = Datatype("MPI_LONG_LONG", np.dtype("q"), "int")
UNSIGNED_LONG_LONG = Datatype("MPI_UNSIGNED_LONG_LONG", np.dtype("Q"), "uint")
FLOAT = Datatype("MPI_FLOAT", np.dtype("f"), "float")
DOUBLE = Datatype("MPI_DOUBLE", np.dtype("d"), "float")
C_BOOL = Datatype("MPI_C_BOOL", np.dtype("?"), "bool")
INT8_T = Datatype("MPI_INT8_T", np.dtype("i1"), "int")
INT16_T = Datatype("MPI_INT16_T", np.dtype("i2"), "int")
INT32_T = Datatype("MPI_INT32_T", np.dtype("i4"), "int")
INT64_T = Datatype("MPI_INT64_T", np.dtype("i8"), "int")
UINT8_T = Datatype("MPI_UINT8_T", np.dtype("u1"), "uint")
UINT16_T = Datatype("MPI_UINT16_T", np.dtype("u2"), "uint")
UINT32_T = Datatype("MPI_UINT32_T", np.dtype("u4"), "uint")
UINT64_T = Datatype("MPI_UINT64_T", np.dtype("u8"), "uint")
C_FLOAT_COMPLEX = Datatype("MPI_C_FLOAT_COMPLEX", np.dtype("F"), "complex")
C_DOUBLE_COMPLEX = Datatype("MPI_C_DOUBLE_COMPLEX", np.dtype("D"), "complex")
FLOAT_INT = Datatype("MPI_FLOAT_INT", _pair("f4"), "pair")
DOUBLE_INT = Datatype("MPI_DOUBLE_INT", _pair("f8"), "pair")
LONG_INT = Datatype("MPI_LONG_INT", _pair("i8"), "pair")
SHORT_INT = Datatype("MPI_SHORT_INT", _pair("i2"), "pair")
TWOINT = Datatype("MPI_2INT", _pair("i4"), "pair")

# Aliases mpi4py has.
BOOL = C_BOOL
SIGNED_SHORT = SHORT
SIGNED_INT = INT
SIGNED_LONG = LONG
SIGNED_LONG_LONG = LONG_LONG
UNSIGNED_INT = UNSIGNED
INT_INT = TWOINT
COMPLEX = C_FLOAT_COMPLEX
DOUBLE_COMPLEX = C_DOUBLE_COMPLEX
C_COMPLEX = C_FLOAT_COMPLEX

PREDEFINED: List[Datatype] = [
    BYTE, PACKED, CHAR, SIGNED_CHAR, UNSIGNED_CHAR, SHORT, UNSIGNED_SHORT, INT, UNSIGNED, LONG, UNSIGNED_LONG,
    LONG_LONG, UNSIGNED_LONG_LONG, FLOAT, DOUBLE, C_BOOL, INT8_T, INT16_T, INT32_T, INT64_T, UINT8_T, UINT16_T,
    UINT32_T, UINT64_T, C_FLOAT_COMPLEX, C_DOUBLE_COMPLEX, FLOAT_INT, DOUBLE_INT, LONG_INT, SHORT_INT, TWOINT,
]

# The basic types of typemaps: every predefined datatype (DATATYPE_NULL
# aside), by index (_Layout.kinds); per index MPI's size, the true upper
# bound, the bytes it travels as (its extent: a pair's padding travels, as
# when it is sent alone) and its alignment.
_BASIC: List[Datatype] = list(PREDEFINED)
_KIND: Dict[str, int] = {dt.name: k for k, dt in enumerate(_BASIC)}


def _data(d: np.dtype[Any]) -> Tuple[int, int]:
    """(bytes of data, true upper bound) of a predefined type's numpy dtype."""
    if d.fields is None:
        return int(d.itemsize), int(d.itemsize)
    f = list(d.fields.values())
    return sum(int(x[0].itemsize) for x in f), max(int(x[1]) + int(x[0].itemsize) for x in f)


_MSIZE = np.array([_data(dt.np)[0] for dt in _BASIC], np.int64)
_TSIZE = np.array([_data(dt.np)[1] for dt in _BASIC], np.int64)
_PSIZE = np.array([dt.np.itemsize for dt in _BASIC], np.int64)
_ALIGN = np.array([dt.np.alignment for dt in _BASIC], np.int64)

# Buffer format characters (struct module / numpy dtype.char) -> datatype,
# as mpi4py infers them.
_BY_CHAR: Dict[str, Datatype] = {
    "?": C_BOOL, "c": CHAR, "S": CHAR, "b": SIGNED_CHAR, "B": UNSIGNED_CHAR, "h": SHORT, "H": UNSIGNED_SHORT,
    "i": INT, "I": UNSIGNED, "l": LONG, "L": UNSIGNED_LONG, "q": LONG_LONG, "Q": UNSIGNED_LONG_LONG,
    "f": FLOAT, "d": DOUBLE, "F": C_FLOAT_COMPLEX, "D": C_DOUBLE_COMPLEX, "Zf": C_FLOAT_COMPLEX,
    "Zd": C_DOUBLE_COMPLEX,
}


def from_typecode(code: str) -> Datatype:
    """The datatype of a buffer format or typecode ('i', 'd', '<f', 'B');
    TypeError naming it when MPI has none collie.MPI offers."""
    c = code.lstrip("@=<>!")
    if c == "S1":
        c = "S"
    dt = _BY_CHAR.get(c)
    if dt is None:
        raise TypeError("collie.MPI: no MPI datatype for the buffer format %r (collie.MPI offers: %s)"
                        % (code, " ".join(sorted(_BY_CHAR))))
    return dt


def from_numpy(dtype: Any) -> Datatype:
    """The datatype of a numpy dtype (numpy.float64 -> DOUBLE, int64 -> LONG)."""
    d = np.dtype(dtype)
    for pair in (FLOAT_INT, DOUBLE_INT, LONG_INT, SHORT_INT, TWOINT):
        if d == pair.np:
            return pair
    if d.kind == "S" and d.itemsize == 1:
        return CHAR
    if d.fields is not None or d.byteorder not in ("=", "|", "<"):
        raise TypeError("collie.MPI: no predefined MPI datatype for the numpy dtype %s" % d)
    return from_typecode(d.char)


def to_numpy(datatype: Datatype) -> np.dtype[Any]:
    """The numpy dtype of a datatype."""
    return as_datatype(datatype, "datatype").np


def as_datatype(obj: Any, what: str) -> Datatype:
    """obj as a Datatype: a Datatype, or a typecode str ('i', 'd')."""
    if isinstance(obj, Datatype):
        if obj._kind == "null":
            raise TypeError("collie.MPI: %s is DATATYPE_NULL" % what)
        if obj._state == _FREED:
            raise _errors.Exception(_errors.ERR_TYPE, "collie.MPI: %s: the datatype %s was freed (Datatype.Free)"
                                    % (what, obj.label))
        return obj
    if isinstance(obj, str):
        return from_typecode(obj)
    raise TypeError("collie.MPI: %s = %r is not an MPI datatype (MPI.INT, MPI.DOUBLE, ... or a typecode 'i')"
                    % (what, obj))
