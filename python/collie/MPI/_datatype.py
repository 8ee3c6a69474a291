"""_datatype.py - MPI's predefined datatypes and their numpy dtypes.

Each Datatype knows its numpy dtype (so buffers are read as typed arrays),
its kind (what reductions MPI allows on it) and collie's dtype where the C
library has one (then reductions run in C; the others run in numpy, see
_comm.py). Transfers move bytes, so every datatype travels. Derived
datatypes (Create_contiguous, Create_vector, ...) are not offered yet.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from . import _errors

# collie_dtype_t values (include/collie.h's order).
_COLLIE = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5,
           "float32": 8, "float64": 9}


class Datatype(_errors.RefusesUnknown):
    """A predefined MPI datatype (mpi4py's MPI.Datatype)."""

    _mpi_class = "Datatype"
    _why_unsupported = "derived datatypes and their calls are not offered yet"

    __slots__ = ("_name", "_np", "_kind", "_collie")

    def __init__(self, name: str, npdtype: Optional[np.dtype[Any]], kind: str) -> None:
        self._name = name
        self._np = npdtype
        self._kind = kind  # int, uint, float, complex, bool, byte, char, pair, null
        self._collie: Optional[int] = None
        if npdtype is not None and kind in ("int", "uint", "float", "byte"):
            key = "uint8" if kind == "byte" else npdtype.name
            self._collie = _COLLIE.get(key)

    # ---- what mpi4py offers ----

    def Get_size(self) -> int:
        """Bytes of data in one element (a pair type's padding excluded)."""
        if self._np is None:
            return 0
        if self._np.fields is not None:
            return sum(int(f[0].itemsize) for f in self._np.fields.values())
        return int(self._np.itemsize)

    def Get_extent(self) -> Tuple[int, int]:
        """(lower bound, extent): the extent is the stride of one element in
        a buffer (a pair type's padding included: DOUBLE_INT is 12 bytes of
        data in 16)."""
        return (0, 0 if self._np is None else int(self._np.itemsize))

    def Get_true_extent(self) -> Tuple[int, int]:
        return self.Get_extent()

    def Get_lb(self) -> int:
        return 0

    def Get_ub(self) -> int:
        return self.Get_extent()[1]

    def Get_name(self) -> str:
        return self._name

    def Commit(self) -> "Datatype":
        return self

    def Free(self) -> None:
        raise _errors.Exception(_errors.ERR_TYPE, "collie.MPI: Datatype.Free: %s is predefined and cannot be freed"
                                % self._name)

    def Is_predefined(self) -> bool:
        return True

    @property
    def size(self) -> int:
        return self.Get_size()

    @property
    def extent(self) -> int:
        return self.Get_extent()[1]

    @property
    def lb(self) -> int:
        return 0

    @property
    def ub(self) -> int:
        return self.Get_extent()[1]

    @property
    def name(self) -> str:
        return self._name

    @property
    def is_predefined(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "<collie.MPI.Datatype %s>" % self._name

    def __bool__(self) -> bool:
        return self._kind != "null"

    def __reduce__(self) -> str:
        return self._name[4:] if self._name.startswith("MPI_") else self._name

    # ---- for the binding ----

    @property
    def np(self) -> np.dtype[Any]:
        if self._np is None:
            raise TypeError("collie.MPI: %s has no data (DATATYPE_NULL)" % self._name)
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
        return obj
    if isinstance(obj, str):
        return from_typecode(obj)
    raise TypeError("collie.MPI: %s = %r is not an MPI datatype (MPI.INT, MPI.DOUBLE, ... or a typecode 'i')"
                    % (what, obj))
