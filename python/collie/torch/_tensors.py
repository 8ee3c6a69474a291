"""_tensors.py - torch tensors as collie sees them: dtype, pointer, count.

Moving bytes needs no dtype: broadcast, gathers, scatters, all-to-all and
send/recv carry any tensor (complex, int16, bool, ...) as bytes. Reductions
need one collie can compute in; the three torch has and collie has not are
mapped so that the result is what torch's own arithmetic gives:

- bool: as uint8, SUM and MAX as BOR, PRODUCT and MIN as BAND (0/1 stay 0/1);
- int16: reduced in an int32 copy and truncated back (sums wrap as int16's
  would: arithmetic mod 2^16 commutes with the truncation);
- complex64/128: SUM and AVG as pairs of floats, as Gloo does; other ops
  have no meaning on complex numbers and are refused.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple

import torch

from .. import _lib

# A step run once an operation has completed (a copy of a staged result into
# the caller's tensor); what it returns is ignored.
Post = Callable[[], object]

_D = {name: i for i, (name, _, _) in enumerate(_lib.DTYPES)}
UINT8 = _D["uint8"]

# torch dtype -> collie dtype, for reductions computed natively.
NATIVE: Dict[torch.dtype, int] = {
    torch.int8: _D["int8"],
    torch.uint8: _D["uint8"],
    torch.int32: _D["int32"],
    torch.int64: _D["int64"],
    torch.float16: _D["float16"],
    torch.bfloat16: _D["bfloat16"],
    torch.float32: _D["float32"],
    torch.float64: _D["float64"],
}
for _n, _c in (("uint32", "uint32"), ("uint64", "uint64")):  # torch >= 2.3
    if hasattr(torch, _n):
        NATIVE[getattr(torch, _n)] = _D[_c]

COMPLEX: Dict[torch.dtype, torch.dtype] = {torch.complex64: torch.float32, torch.complex128: torch.float64}

# collie_op_t values (include/collie.h)
SUM, PROD, MIN, MAX, AVG, BAND, BOR, BXOR = range(8)
OPS = {"SUM": SUM, "PRODUCT": PROD, "MIN": MIN, "MAX": MAX, "AVG": AVG, "BAND": BAND, "BOR": BOR, "BXOR": BXOR}
BOOL_OPS = {SUM: BOR, MAX: BOR, PROD: BAND, MIN: BAND, BAND: BAND, BOR: BOR, BXOR: BXOR}


class Unsupported(RuntimeError):
    pass


def op_of(reduce_op: object, fn: str) -> int:
    """collie_op_t of a torch ReduceOp (1.13's class with .op, or 2.x's)."""
    kind = getattr(reduce_op, "op", reduce_op)
    name = getattr(kind, "name", None) or str(kind).rsplit(".", 1)[-1]
    if name in OPS:
        return OPS[name]
    if name == "PREMUL_SUM":
        raise Unsupported("%s: ReduceOp.PREMUL_SUM is not supported by the collie backend (multiply the "
                          "tensor by the factor, then reduce with SUM)" % fn)
    raise Unsupported("%s: reduce op %s is not supported by the collie backend" % (fn, name))


def reduction_plan(t: torch.Tensor, op: int, fn: str) -> Tuple[torch.Tensor, int, int, Optional[Post]]:
    """How to reduce t with op: (tensor to pass, collie dtype, collie op,
    copy_back or None). copy_back(result) writes a staged result into t."""
    dt = t.dtype
    if dt in NATIVE:
        return t, NATIVE[dt], op, None
    if dt == torch.bool:
        if op == AVG:
            raise Unsupported("%s: ReduceOp.AVG is not defined on bool tensors" % fn)
        return t.view(torch.uint8), UINT8, BOOL_OPS[op], None
    if dt == torch.int16:
        if op == AVG:
            raise Unsupported("%s: ReduceOp.AVG is not supported on int16 by the collie backend" % fn)
        wide = t.to(torch.int32)
        return wide, _D["int32"], op, lambda: t.copy_(wide)  # truncation keeps int16's wrap-around
    if dt in COMPLEX:
        if op not in (SUM, AVG):
            raise Unsupported("%s: only SUM and AVG are defined on complex tensors (got a %s reduction)"
                              % (fn, [k for k, v in OPS.items() if v == op][0]))
        return torch.view_as_real(t), NATIVE[COMPLEX[dt]], op, None
    raise Unsupported("%s: the collie backend cannot reduce %s tensors" % (fn, dt))


def check_cpu(t: object, fn: str, what: str = "tensor") -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s: %s must be a torch.Tensor, got %s" % (fn, what, type(t).__name__))
    # (t.device.type would cost a device object per call; torch 1.13's stubs lack is_cpu)
    if not t.is_cpu and not t.is_cuda:  # type: ignore[attr-defined]
        raise Unsupported("%s: %s is on %s; the collie backend takes CPU and CUDA tensors" % (fn, what, t.device))
    if t.is_sparse:
        raise Unsupported("%s: %s is sparse; the collie backend takes dense tensors" % (fn, what))


def dense(t: torch.Tensor, fn: str, what: str = "tensor", out: bool = False) -> Tuple[torch.Tensor, Optional[Post]]:
    """(c, post): c is t when t is contiguous, else a contiguous copy (as
    Gloo, non-contiguous tensors work); post() copies an output back into t
    once the operation has completed (None when nothing is to copy)."""
    check_cpu(t, fn, what)
    if t.is_contiguous():
        return t, None
    c = t.contiguous()
    return c, ((lambda: t.copy_(c)) if out else None)


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()
