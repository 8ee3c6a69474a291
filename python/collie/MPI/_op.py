"""_op.py - MPI's reduction operations.

An Op reduces typed numpy arrays (for collectives collie's C library cannot
run: ops it lacks such as LAND or MINLOC, datatypes it lacks such as SHORT,
and Scan/Exscan) and Python objects (the lowercase methods, and calling the
op: MPI.SUM(1, 2) == 3). Where collie has the op and the datatype, the
collective runs in C (Op.collie). Op.Create makes a user op, as mpi4py's:
fn(invec, inoutvec, datatype) computes inoutvec = invec op inoutvec.
"""

from __future__ import annotations

from typing import Any, Callable, FrozenSet, Optional, cast

import numpy as np

from . import _errors
from ._datatype import Datatype

_ARITH = frozenset(("int", "uint", "float", "complex"))
_ORDERED = frozenset(("int", "uint", "float"))
_LOGICAL = frozenset(("int", "uint", "bool"))
_BITWISE = frozenset(("int", "uint", "byte"))
_PAIR = frozenset(("pair",))
_ANY = frozenset(("int", "uint", "float", "complex", "bool", "byte", "char", "pair"))

ArrayFn = Callable[[Any, Any], Any]
ObjFn = Callable[[Any, Any], Any]


def _loc(better: Callable[[Any, Any], Any]) -> ArrayFn:
    """MINLOC/MAXLOC on arrays of (value, index) pairs: the better value;
    on a tie, the lower index (MPI's rule)."""

    def fn(a: Any, b: Any) -> Any:
        out = a.copy()
        take_b = better(b["value"], a["value"]) | ((b["value"] == a["value"]) & (b["index"] < a["index"]))
        out[take_b] = b[take_b]
        return out

    return fn


def _loc_obj(better: Callable[[Any, Any], Any]) -> ObjFn:
    def fn(a: Any, b: Any) -> Any:
        (av, ai), (bv, bi) = a, b
        if better(bv, av) or (bv == av and bi < ai):
            return (bv, bi)
        return (av, ai)

    return fn


class Op(_errors.RefusesUnknown):
    """A reduction operation (mpi4py's MPI.Op)."""

    _mpi_class = "Op"

    __slots__ = ("_name", "_collie", "_kinds", "_arr", "_obj", "_user", "_commute")

    def __init__(self, name: str, collie: Optional[int], kinds: FrozenSet[str], arr: Optional[ArrayFn],
                 obj: Optional[ObjFn], user: Optional[Callable[..., Any]] = None, commute: bool = True) -> None:
        self._name = name
        self._collie = collie
        self._kinds = kinds
        self._arr = arr
        self._obj = obj
        self._user = user
        self._commute = commute

    @classmethod
    def Create(cls, function: Callable[..., Any], commute: bool = False) -> "Op":
        """A user op: function(invec, inoutvec, datatype) stores invec op
        inoutvec into inoutvec (buffer collectives, in rank order); the
        lowercase methods call function(a, b) and use its result."""
        if not callable(function):
            raise TypeError("collie.MPI: Op.Create: function = %r is not callable" % (function,))
        return cls("user op %s" % getattr(function, "__name__", "?"), None, _ANY, None, None, function, bool(commute))

    def Free(self) -> None:
        pass

    def Is_commutative(self) -> bool:
        return self._commute

    @property
    def is_commutative(self) -> bool:
        return self._commute

    @property
    def is_predefined(self) -> bool:
        return self._user is None

    def Get_name(self) -> str:
        return self._name

    def __call__(self, x: Any, y: Any) -> Any:
        """x op y on Python objects (mpi4py's semantics: the lowercase
        methods reduce with this)."""
        if self._user is not None:
            return self._user(x, y)
        if self._obj is None:
            raise TypeError("collie.MPI: %s cannot reduce Python objects" % self._name)
        return self._obj(x, y)

    def __repr__(self) -> str:
        return "<collie.MPI.Op %s>" % self._name

    def __reduce__(self) -> str:
        if self._user is not None:
            raise TypeError("collie.MPI: a user op cannot be pickled")
        return self._name[4:]

    # ---- for the binding ----

    def native(self, dt: Datatype) -> Optional[int]:
        """collie's op code when the C library reduces dt with this op, else None."""
        self.check(dt)
        if self._collie is None or dt.collie is None:
            return None
        return self._collie

    def check(self, dt: Datatype) -> None:
        """MPI.Exception(ERR_OP) naming both when MPI does not define this op
        on dt (BAND on DOUBLE, SUM on C_BOOL, MINLOC on INT)."""
        if dt.kind not in self._kinds:
            raise _errors.Exception(_errors.ERR_OP, "collie.MPI: %s is not defined on %s (MPI allows it on %s)"
                                    % (self._name, dt.name, ", ".join(sorted(self._kinds)) + " datatypes"))

    def reduce_arrays(self, a: Any, b: Any, dt: Datatype) -> Any:
        """a op b, elementwise, on numpy arrays of dt's dtype (a: the lower ranks)."""
        if self._user is not None:
            inout = b.copy()
            self._user(memoryview(cast(Any, np.ascontiguousarray(a))).cast("B"), memoryview(cast(Any, inout)).cast("B"), dt)
            return inout
        assert self._arr is not None
        out = self._arr(a, b)
        return np.asarray(out).astype(a.dtype, copy=False)


def _same(f: Callable[[Any, Any], Any]) -> ArrayFn:
    return lambda a, b: f(a, b)


def _xor(a: Any, b: Any) -> Any:
    return bool(a) != bool(b)


OP_NULL = Op("MPI_OP_NULL", None, frozenset(), None, None)
SUM = Op("MPI_SUM", 0, _ARITH, _same(np.add), lambda a, b: a + b)
PROD = Op("MPI_PROD", 1, _ARITH, _same(np.multiply), lambda a, b: a * b)
MIN = Op("MPI_MIN", 2, _ORDERED, _same(np.minimum), lambda a, b: b if b < a else a)
MAX = Op("MPI_MAX", 3, _ORDERED, _same(np.maximum), lambda a, b: b if b > a else a)
LAND = Op("MPI_LAND", None, _LOGICAL, _same(np.logical_and), lambda a, b: a and b)
LOR = Op("MPI_LOR", None, _LOGICAL, _same(np.logical_or), lambda a, b: a or b)
LXOR = Op("MPI_LXOR", None, _LOGICAL, _same(np.logical_xor), _xor)
BAND = Op("MPI_BAND", 5, _BITWISE, _same(np.bitwise_and), lambda a, b: a & b)
BOR = Op("MPI_BOR", 6, _BITWISE, _same(np.bitwise_or), lambda a, b: a | b)
BXOR = Op("MPI_BXOR", 7, _BITWISE, _same(np.bitwise_xor), lambda a, b: a ^ b)
MINLOC = Op("MPI_MINLOC", None, _PAIR, _loc(lambda x, y: x < y), _loc_obj(lambda x, y: x < y))
MAXLOC = Op("MPI_MAXLOC", None, _PAIR, _loc(lambda x, y: x > y), _loc_obj(lambda x, y: x > y))
REPLACE = Op("MPI_REPLACE", None, _ANY, _same(lambda a, b: b), lambda a, b: b)
NO_OP = Op("MPI_NO_OP", None, _ANY, _same(lambda a, b: a), lambda a, b: a)


def as_op(obj: Any, what: str = "op") -> Op:
    """obj as an Op; TypeError naming it otherwise."""
    if isinstance(obj, Op) and obj is not OP_NULL:
        return obj
    raise TypeError("collie.MPI: %s = %r is not an MPI reduction op (MPI.SUM, MPI.MAX, ..., or Op.Create(fn))"
                    % (what, obj))


def obj_op(obj: Any) -> Callable[[Any, Any], Any]:
    """The function the lowercase reduce/allreduce apply: an Op, or any
    callable of two arguments (mpi4py accepts both)."""
    if isinstance(obj, Op):
        return obj
    if callable(obj):
        return obj  # type: ignore[no-any-return]
    raise TypeError("collie.MPI: op = %r is neither an MPI.Op nor a callable of two arguments" % (obj,))
