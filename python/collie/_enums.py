"""_enums.py - the Python faces of collie_op_t, collie_category_t,
collie_dtype_t and collie_algo_t, plus the converters every call uses.

The values equal the C enums of include/collie.h, so they pass to ctypes as
they are.
"""

from __future__ import annotations

import datetime
import enum
import math
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from ._types import OptTimeout, TensorLike

from . import _lib
from ._errors import InvalidArgument


class ReduceOp(enum.IntEnum):
    """Reduction operations (collie_op_t). PRODUCT is C's COLLIE_PROD (PROD is
    an alias). AVG divides the sum by the size (integers: truncated toward
    zero). BAND/BOR/BXOR need an integer dtype (Unsupported otherwise)."""

    SUM = 0
    PRODUCT = 1
    PROD = 1
    MIN = 2
    MAX = 3
    AVG = 4
    BAND = 5
    BOR = 6
    BXOR = 7

    @staticmethod
    def PREMUL_SUM(factor: float) -> "PremulSum":
        """torchcomms' (and NCCL's) pre-multiplied sum: each rank's
        contribution is multiplied by factor, this rank's own, before the
        sum. Comm.all_reduce, reduce, reduce_scatter and
        reduce_scatter_single take it (on arrays that multiply: numpy,
        torch)."""
        return PremulSum(factor)


class PremulSum:
    """ReduceOp.PREMUL_SUM(factor): a SUM of each rank's array times its
    factor (a real number)."""

    __slots__ = ("factor",)

    def __init__(self, factor: float) -> None:
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor):
            raise InvalidArgument("ReduceOp.PREMUL_SUM: factor = %r must be a finite number" % (factor,))
        self.factor = factor

    def __repr__(self) -> str:
        return "ReduceOp.PREMUL_SUM(%r)" % (self.factor,)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PremulSum) and other.factor == self.factor

    def __hash__(self) -> int:
        return hash(("PREMUL_SUM", self.factor))


class PayloadCategory(enum.IntEnum):
    """Telemetry payload categories (collie_category_t): the comms.csv column
    bytes_<name> a call's bytes are charged to. OTHER is the default."""

    OTHER = 0
    FEATURES_ALLGATHER = 1
    MOMENTS_MU = 2
    MOMENTS_SIGMA_FULL = 3
    MOMENTS_SIGMA_DIAG = 4
    MIXTURE_MU_K = 5
    MIXTURE_SIGMA_K = 6
    THIRD_MOMENT_SKETCH = 7
    TOPR_INDICES = 8


class DType(enum.IntEnum):
    """collie's element types (collie_dtype_t)."""

    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    BFLOAT16 = 7
    FLOAT32 = 8
    FLOAT64 = 9


# collie_algo_t names, in the header's order (COLLIE_ALGO_MAP).
ALGORITHMS = (
    "auto",
    "ring",
    "tree",
    "dissemination",
    "linear",
    "recursive_doubling",
    "rabenseifner",
    "bruck",
    "recursive_halving",
    "scatter_allgather",
    "chain",
    "pairwise",
    "reduce_scatter_gather",
    "shm_flat",
    "hierarchical",
    "cuda_ipc",
    "cuda_pipeline",
    "compressed",
    "topk_allgather",
    "gtopk",
)

# collie_wire_t names (COLLIE_WIRE_*), in the header's order; the aliases
# "fp16" and "bf16" are accepted too.
WIRES = ("default", "native", "float16", "bfloat16")


def to_wire(wire: Union[str, int, None]) -> int:
    """collie_wire_t value of a name ("float16", "bf16") or an int; None: 0,
    the communicator's default."""
    if wire is None:
        return 0
    if isinstance(wire, str):
        name = {"fp16": "float16", "bf16": "bfloat16", "fp32": "native", "float32": "native"}.get(
            wire.lower(), wire.lower()
        )
        if name in WIRES:
            return WIRES.index(name)
    elif not isinstance(wire, bool) and isinstance(wire, int) and 0 <= wire < len(WIRES):
        return int(wire)
    raise InvalidArgument("wire = %r is not one of %s (or fp16, bf16)" % (wire, ", ".join(WIRES)))


# What the calls take as op: a ReduceOp, its value, its name, or (where the
# call says so) ReduceOp.PREMUL_SUM(factor).
OpLike = Union["ReduceOp", int, str, "PremulSum"]


def to_op(op: OpLike) -> int:
    """collie_op_t value of a ReduceOp, an int or a name ("sum", "PRODUCT")."""
    if isinstance(op, PremulSum):
        raise InvalidArgument(
            "op = %r: PREMUL_SUM is taken by all_reduce, reduce, reduce_scatter and reduce_scatter_single" % (op,))
    if isinstance(op, str):
        try:
            return int(ReduceOp[op.upper()])
        except KeyError:
            raise InvalidArgument(
                "op = %r is not a ReduceOp (%s)" % (op, ", ".join(ReduceOp.__members__))
            ) from None
    if isinstance(op, bool) or not isinstance(op, int) or not 0 <= op <= 7:
        raise InvalidArgument("op = %r is not a ReduceOp (%s)" % (op, ", ".join(ReduceOp.__members__)))
    return int(op)


def to_category(cat: Union[PayloadCategory, int, str, None]) -> int:
    """Category id of a PayloadCategory, an int (a registered id) or a name
    (built-in, any case, or a registered one)."""
    if cat is None:
        return 0
    if isinstance(cat, str):
        up = cat.upper()
        if up in PayloadCategory.__members__:
            return int(PayloadCategory[up])
        from ._comm import register_category

        return register_category(cat)
    if isinstance(cat, bool) or not isinstance(cat, int) or cat < 0:
        raise InvalidArgument("category = %r is not a PayloadCategory or a registered category id" % (cat,))
    return int(cat)


def to_algorithm(algo: Union[str, int, None]) -> int:
    """collie_algo_t value of a name ("ring") or an int; None: auto."""
    if algo is None:
        return 0
    if isinstance(algo, str):
        try:
            return ALGORITHMS.index(algo.lower())
        except ValueError:
            raise InvalidArgument(
                "algorithm = %r is not one of %s" % (algo, ", ".join(ALGORITHMS))
            ) from None
    if isinstance(algo, bool) or not isinstance(algo, int) or not 0 <= algo < len(ALGORITHMS):
        raise InvalidArgument("algorithm = %r is not one of %s" % (algo, ", ".join(ALGORITHMS)))
    return int(algo)


def to_ms(timeout: OptTimeout, what: str = "timeout") -> Union[int, None]:
    """Milliseconds (> 0) of a timedelta or a number of seconds; None: None."""
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        secs = timeout.total_seconds()
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        secs = float(timeout)
    else:
        raise InvalidArgument("%s = %r must be a datetime.timedelta or seconds" % (what, timeout))
    if not secs > 0 or math.isinf(secs):
        raise InvalidArgument("%s = %r must be positive and finite" % (what, timeout))
    return max(1, int(math.ceil(secs * 1000)))


def dtype_of(obj: TensorLike) -> DType:
    """The collie DType of an array (numpy, torch CPU tensor, buffer)."""
    from ._buffers import as_buf

    b = as_buf(obj, "dtype_of")
    try:
        return DType(b.dtype)
    finally:
        b.release()


_lib_dtype_names = tuple(n for n, _, _ in _lib.DTYPES)
assert tuple(d.name.lower() for d in DType) == _lib_dtype_names
