"""refs.py - the inputs every rank can compute for every other rank, and the
references the tests check results against (serial torch arithmetic on all
ranks' inputs, in a wide type, then cast). Inputs are small integers (or
quarters), so every dtype holds them and every reduction exactly."""

import functools

import torch
import torch.distributed as dist

R = dist.ReduceOp
BITWISE = ("BAND", "BOR", "BXOR")
UNSIGNED = (torch.uint8, torch.bool)


def op_of(name):
    return getattr(R, name)


def rank_input(dtype, op, r, shape):
    """Rank r's input for an all_reduce of op over dtype (op: a ReduceOp name)."""
    numel = 1
    for d in shape:
        numel *= d
    i = torch.arange(numel, dtype=torch.int64)
    if dtype is torch.bool:
        v = ((i * 3 + r * 5) % 7) < 3
        return v.reshape(shape)
    if op in BITWISE:
        v = (i * 37 + r * 101 + 13) % 256  # 0..255
        if dtype is torch.int8:
            v = v - 128
        elif dtype is torch.int32:
            v = v * 65537 - (1 << 23)
        elif dtype is torch.int64:
            v = v * ((1 << 40) + 1) - (1 << 47)
        return v.to(dtype).reshape(shape)
    if op == "PRODUCT":
        v = (i + 2 * r) % 4 if dtype in UNSIGNED else (i + 2 * r) % 5 - 2
    elif op in ("MIN", "MAX"):
        v = (i * 7 + r * 13) % 101 if dtype in UNSIGNED else (i * 7 + r * 13) % 101 - 50
    else:  # SUM, AVG
        v = (i * 3 + r * 5) % 7 if dtype in UNSIGNED else (i * 3 + r * 5) % 7 - 3
    if dtype.is_floating_point:
        scale = 0.25 if op in ("SUM", "AVG", "MIN", "MAX") else 1.0
        return (v.to(torch.float64) * scale).to(dtype).reshape(shape)
    return v.to(dtype).reshape(shape)


def reduce_ref(tensors, op, dtype):
    """The reduction of tensors (one per rank, same shape) by op, as dtype."""
    if dtype.is_floating_point or dtype.is_complex:
        wide = torch.complex128 if dtype.is_complex else torch.float64
    else:
        wide = torch.int64
    xs = torch.stack([t.to(wide) for t in tensors])
    if op == "SUM":
        out = xs.sum(0)
    elif op == "AVG":
        out = xs.sum(0) / len(tensors)
    elif op == "PRODUCT":
        out = xs.prod(0)
    elif op == "MIN":
        out = xs.amin(0)
    elif op == "MAX":
        out = xs.amax(0)
    else:
        fn = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[op]
        out = functools.reduce(fn, list(xs))
    if dtype is torch.bool:
        return out != 0
    return out.to(dtype)


def pattern(dtype, r, shape, salt=0):
    """A rank-specific tensor for data-movement tests: its values say which
    rank (and salt) made it and where each element sits (exact in dtype)."""
    numel = 1
    for d in shape:
        numel *= d
    i = torch.arange(numel, dtype=torch.int64)
    if dtype is torch.bool:
        return (((i + r + salt) % 3) == 0).reshape(shape)
    if dtype in (torch.int8, torch.uint8):
        v = (i * 3 + r * 17 + salt * 5) % 100
    elif dtype in (torch.float16, torch.bfloat16):
        v = (i + r * 64 + salt * 8) % 256  # exact in bf16's 8 significant bits
    else:
        v = i + r * 1000 + salt * 100000
    if dtype.is_complex:
        return torch.complex(v.to(torch.float32), -v.to(torch.float32) - 0.5).reshape(shape)
    return v.to(dtype).reshape(shape)


def dtname(dtype):
    """A dtype's short name, for test ids: float32, bool, ..."""
    return str(dtype).replace("torch.", "")


def same(a, b):
    """Exact equality of value, dtype and shape (printable on failure)."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
