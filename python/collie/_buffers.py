"""_buffers.py - turns the arrays users pass into (pointer, count, dtype), zero-copy.

Three kinds of array are accepted, none of which this module imports:
- torch CPU tensors, duck-typed (data_ptr, numel, element_size, dtype,
  is_contiguous, device): the pointer is data_ptr();
- anything with the buffer protocol: numpy arrays, memoryview, bytearray,
  array.array, bytes (inputs only). The pointer comes from
  PyObject_GetBuffer through ctypes.pythonapi, and the buffer stays exported
  until the operation completes: that keeps the memory alive and stops a
  bytearray or numpy array from being resized under a running operation;
- objects with only __array_interface__ (e.g. numpy bfloat16 from ml_dtypes).

Every check (contiguity, writability, dtype, device) happens here, before any
communication, and fails with InvalidArgument naming the argument.
"""

from __future__ import annotations

import ctypes
import sys
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Protocol, Sequence, Tuple, Union

from . import _lib
from ._errors import InvalidArgument

if TYPE_CHECKING:
    from ._types import TensorLike

_DTYPE_BY_NAME: Dict[str, int] = {name: i for i, (name, _, _) in enumerate(_lib.DTYPES)}

# PEP 3118 format characters -> (kind, name-if-unsupported)
_SIGNED = "bhilqn"
_UNSIGNED = "BHILQN"
_FLOATS = {"e": "float16", "f": "float32", "d": "float64"}
_UNSUPPORTED_FMT = {
    "?": "bool",
    "c": "char",
    "g": "longdouble",
    "Zf": "complex64",
    "Zd": "complex128",
    "Zg": "complex256",
    "O": "object",
    "P": "pointer",
}

_PyBUF_RECORDS_RO = 0x0004 | 0x0008 | 0x0010  # FORMAT | ND | STRIDES


class _PyBuffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
        ("strides", ctypes.POINTER(ctypes.c_ssize_t)),
        ("suboffsets", ctypes.POINTER(ctypes.c_ssize_t)),
        ("internal", ctypes.c_void_p),
    ]


_api = ctypes.pythonapi
_api.PyObject_GetBuffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_api.PyObject_GetBuffer.restype = ctypes.c_int
_api.PyBuffer_Release.argtypes = [ctypes.POINTER(_PyBuffer)]
_api.PyBuffer_Release.restype = None
_api.PyBuffer_IsContiguous.argtypes = [ctypes.POINTER(_PyBuffer), ctypes.c_char]
_api.PyBuffer_IsContiguous.restype = ctypes.c_int


def dtype_name(dtype: int) -> str:
    """collie's name of a collie_dtype_t value ("float32")."""
    return _lib.DTYPES[dtype][0]


def dtype_size(dtype: int) -> int:
    return _lib.DTYPES[dtype][1]


class ByteRange(Protocol):
    """A range of memory: a Buf, or the block of a list form (overlaps())."""

    @property
    def ptr(self) -> int: ...

    @property
    def nbytes(self) -> int: ...

    @property
    def end(self) -> int: ...


class Buf:
    """One array as collie sees it: ptr (int address), count (elements),
    dtype (collie_dtype_t value), nbytes, shape (tuple), readonly, and obj
    (the user's object, kept alive). release() ends the buffer export; it is
    called when the operation that uses the buffer has completed."""

    __slots__ = ("obj", "ptr", "count", "dtype", "nbytes", "shape", "readonly", "device", "_view", "__weakref__")

    def __init__(self, obj: Any, ptr: Optional[int], count: int, dtype: int, shape: Tuple[int, ...], readonly: bool,
                 view: Optional[_PyBuffer] = None, device: bool = False) -> None:
        self.device = device  # CUDA memory: the C library stages it; Python never touches its bytes
        self.obj = obj
        self.ptr = ptr or 0
        self.count = count
        self.dtype = dtype
        self.nbytes = count * dtype_size(dtype)
        self.shape = shape
        self.readonly = readonly
        self._view = view

    @property
    def dtype_name(self) -> str:
        return dtype_name(self.dtype)

    @property
    def end(self) -> int:
        return self.ptr + self.nbytes

    def release(self) -> None:
        view, self._view = self._view, None
        if view is not None:
            _api.PyBuffer_Release(ctypes.byref(view))

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # interpreter shutdown: nothing left to release into
            pass


class Staging(Buf):
    """A library-owned contiguous buffer for the list forms whose items are
    not one contiguous block: count elements of dtype. Where like (the
    call's other array) is a CUDA torch tensor, the buffer is a tensor on
    its device and the copies are torch's (queued on torch's current
    stream, which the legacy default stream collie orders its device calls
    after follows unless torch runs per-thread default streams)."""

    __slots__ = ("_mem",)

    def __init__(self, count: int, dtype: int, like: Optional[Buf] = None, items: Iterable[Buf] = ()) -> None:
        nbytes = count * dtype_size(dtype)
        on_device = like is not None and like.device
        if like is not None and on_device and not is_torch(like.obj):
            raise InvalidArgument(
                "a list of CUDA arrays other than torch tensors is not supported by this form; "
                "pass one contiguous array (the *_single form)")
        for b in items:  # refused before any communication
            if b.device != on_device or (on_device and not is_torch(b.obj)):
                raise InvalidArgument(
                    "a list form's arrays must all be CUDA torch tensors or all host arrays, "
                    "as its other argument is (%s)" % ("CUDA" if on_device else "host"))
        if on_device:
            import torch
            assert like is not None  # (on_device)
            self._mem: Any = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=like.obj.device)
            Buf.__init__(self, None, self._mem.data_ptr(), count, dtype, (count,), False, device=True)
            return
        self._mem = ctypes.create_string_buffer(max(nbytes, 1))
        Buf.__init__(self, None, ctypes.addressof(self._mem), count, dtype, (count,), False)

    def _device_parts(self, bufs: Iterable[Buf]) -> Iterator[Tuple[Any, Any]]:
        """(staging slice, the array's bytes) pairs, as uint8 tensors (the
        constructor made sure bufs are CUDA torch tensors)."""
        import torch
        off = 0
        for b in bufs:
            if b.nbytes:
                yield self._mem[off:off + b.nbytes], b.obj.reshape(-1).view(torch.uint8)
            off += b.nbytes

    def copy_in(self, bufs: Iterable[Buf]) -> None:
        """Copies bufs into consecutive parts of the staging buffer."""
        if self.device:
            for part, src in self._device_parts(bufs):
                part.copy_(src)
            return
        off = self.ptr
        for b in bufs:
            if b.nbytes:
                ctypes.memmove(off, b.ptr, b.nbytes)
            off += b.nbytes

    def copy_out(self, bufs: Iterable[Buf]) -> None:
        """Copies consecutive parts of the staging buffer into bufs."""
        if self.device:
            for part, dst in self._device_parts(bufs):
                dst.copy_(part)
            return
        off = self.ptr
        for b in bufs:
            if b.nbytes:
                ctypes.memmove(b.ptr, off, b.nbytes)
            off += b.nbytes


def is_torch(obj: object) -> bool:
    """Duck-typed torch tensor test (no import of torch)."""
    return (
        hasattr(obj, "data_ptr")
        and hasattr(obj, "numel")
        and hasattr(obj, "element_size")
        and hasattr(obj, "is_contiguous")
        and hasattr(obj, "dtype")
    )


def _torch_buf(obj: Any, what: str, writable: bool) -> Buf:
    dev = getattr(obj, "device", None)
    dev_type = getattr(dev, "type", dev if dev is None else str(dev))
    if dev is not None and dev_type not in ("cpu", "cuda"):
        raise InvalidArgument(
            "%s: tensor is on device %s; collie moves CPU and CUDA memory only (use .cpu())" % (what, dev)
        )
    layout = getattr(obj, "layout", None)
    if layout is not None and str(layout) != "torch.strided":
        raise InvalidArgument("%s: tensor layout %s is not supported (only dense, torch.strided)" % (what, layout))
    name = str(obj.dtype)
    if name.startswith("torch."):
        name = name[6:]
    dtype = _DTYPE_BY_NAME.get(name)
    if dtype is None:
        raise InvalidArgument(
            "%s: dtype torch.%s is not supported by collie (supported: %s)" % (what, name, _supported())
        )
    if int(obj.element_size()) != dtype_size(dtype):
        raise InvalidArgument(
            "%s: tensor of torch.%s has element_size %d, expected %d"
            % (what, name, obj.element_size(), dtype_size(dtype))
        )
    if not obj.is_contiguous():
        raise InvalidArgument(
            "%s: tensor is not contiguous (shape %s, strides %s); pass t.contiguous()%s"
            % (what, tuple(obj.shape), tuple(obj.stride()) if hasattr(obj, "stride") else "?",
               " and copy the result back" if writable else "")
        )
    if hasattr(obj, "is_conj") and obj.is_conj():
        raise InvalidArgument("%s: tensor has a lazy conjugate bit; call .resolve_conj()" % what)
    if hasattr(obj, "is_neg") and obj.is_neg():
        raise InvalidArgument("%s: tensor has a lazy negative bit; call .resolve_neg()" % what)
    count = int(obj.numel())
    return Buf(obj, int(obj.data_ptr()), count, dtype, tuple(obj.shape), False, device=dev_type == "cuda")


def _supported() -> str:
    return ", ".join(n for n, _, _ in _lib.DTYPES)


_FMT_CACHE: Dict[Tuple[str, int], int] = {}  # (format, itemsize) -> collie dtype, for the formats that map


def _fmt_dtype(fmt: str, itemsize: int, obj: object, what: str) -> int:
    """collie dtype of a PEP 3118 format, or InvalidArgument naming it."""
    d = _FMT_CACHE.get((fmt, itemsize))
    if d is not None:
        return d
    d = _fmt_dtype_slow(fmt, itemsize, obj, what)
    _FMT_CACHE[(fmt, itemsize)] = d
    return d


def _fmt_dtype_slow(fmt: str, itemsize: int, obj: object, what: str) -> int:
    shown = str(getattr(obj, "dtype", fmt))
    order = ""
    f = fmt or "B"
    if f[0] in "@=<>!":
        order, f = f[0], f[1:]
    if order in (">", "!") and sys.byteorder == "little" or order == "<" and sys.byteorder == "big":
        raise InvalidArgument(
            "%s: dtype %s has non-native byte order; convert it first (e.g. a.astype(a.dtype.newbyteorder('=')))"
            % (what, shown)
        )
    if f in _FLOATS and _FLOATS[f] and itemsize == dtype_size(_DTYPE_BY_NAME[_FLOATS[f]]):
        return _DTYPE_BY_NAME[_FLOATS[f]]
    if len(f) == 1 and (f in _SIGNED or f in _UNSIGNED):
        name = ("int" if f in _SIGNED else "uint") + str(itemsize * 8)
        if name in _DTYPE_BY_NAME:
            return _DTYPE_BY_NAME[name]
        raise InvalidArgument(
            "%s: dtype %s is not supported by collie (supported: %s)"
            % (what, shown if hasattr(obj, "dtype") else name, _supported())
        )
    name = _UNSUPPORTED_FMT.get(f, "format %r" % fmt)
    raise InvalidArgument(
        "%s: dtype %s is not supported by collie (supported: %s)"
        % (what, shown if hasattr(obj, "dtype") else name, _supported())
    )


def _interface_buf(obj: Any, what: str, writable: bool, ai: Optional[Dict[str, Any]] = None,
                   device: bool = False) -> Buf:
    """Objects that expose only __array_interface__ (numpy dtypes with no
    buffer format, such as ml_dtypes.bfloat16), or __cuda_array_interface__
    (CuPy, Numba: device memory, which the C library stages; docs/gpu.md)."""
    if ai is None:
        ai = obj.__array_interface__
    dt = getattr(obj, "dtype", None)
    name = getattr(dt, "name", None) or ai.get("typestr")
    if name not in _DTYPE_BY_NAME:
        raise InvalidArgument("%s: dtype %s is not supported by collie (supported: %s)" % (what, name, _supported()))
    dtype = _DTYPE_BY_NAME[name]
    shape = tuple(ai.get("shape", ()))
    count = 1
    for n in shape:
        count *= n
    strides = ai.get("strides")
    if strides is not None:
        expect, ok = dtype_size(dtype), True
        for n, s in zip(reversed(shape), reversed(strides)):
            if n > 1 and s != expect:
                ok = False
            expect *= n
        if not ok:
            raise InvalidArgument("%s: array is not C-contiguous (shape %s, strides %s)" % (what, shape, tuple(strides)))
    ptr, readonly = ai["data"]
    return Buf(obj, ptr, count, dtype, shape, bool(readonly), device=device)


def as_buf(obj: Union[TensorLike, Buf, bytes], what: str, writable: bool = False) -> Buf:
    """A Buf for obj. what names the argument in errors ("all_reduce: tensor").
    writable: the operation writes into it (an output). Raises InvalidArgument
    for None, non-arrays, non-contiguous, read-only outputs, unsupported
    dtypes and tensors neither on the CPU nor on a CUDA device."""
    if obj is None:
        raise InvalidArgument("%s is None; pass an array" % what)
    if isinstance(obj, Buf):
        return obj
    if is_torch(obj):
        return _torch_buf(obj, what, writable)
    view = _PyBuffer()
    try:
        _api.PyObject_GetBuffer(obj, ctypes.byref(view), _PyBUF_RECORDS_RO)
    except (TypeError, BufferError, ValueError) as e:
        # Device arrays (CuPy, Numba) have no buffer protocol: looked for only
        # here, so host arrays pay nothing for them.
        cai = getattr(obj, "__cuda_array_interface__", None)
        if cai is not None or hasattr(obj, "__array_interface__"):
            b = _interface_buf(obj, what, writable, cai, device=cai is not None)
            if writable and b.readonly:
                raise InvalidArgument("%s: array is read-only, but collie writes the result into it" % what)
            return b
        raise InvalidArgument(
            "%s: %s is not an array (%s); pass a numpy array, a torch CPU tensor or a "
            "buffer-protocol object (bytearray, memoryview, array.array)" % (what, type(obj).__name__, e)
        ) from None
    ok = False
    try:
        fmt = view.format.decode("ascii") if view.format else "B"
        ndim = view.ndim
        shape = tuple(view.shape[i] for i in range(ndim)) if view.shape else ((view.len // max(view.itemsize, 1),) if ndim else ())
        dtype = _fmt_dtype(fmt, view.itemsize, obj, what)
        if view.suboffsets or not _api.PyBuffer_IsContiguous(ctypes.byref(view), b"C"):
            strides = tuple(view.strides[i] for i in range(ndim)) if view.strides else ()
            raise InvalidArgument(
                "%s: array is not C-contiguous (shape %s, strides %s); %s"
                % (what, shape, strides,
                   "write into a contiguous array and copy" if writable else "pass a contiguous copy (np.ascontiguousarray)")
            )
        if writable and view.readonly:
            raise InvalidArgument(
                "%s: %s is read-only, but collie writes the result into it" % (what, type(obj).__name__)
            )
        count = view.len // view.itemsize if view.itemsize else 0
        b = Buf(obj, view.buf, count, dtype, shape, bool(view.readonly), view)
        ok = True
        return b
    finally:
        if not ok:
            _api.PyBuffer_Release(ctypes.byref(view))


def as_bufs(objs: Optional[Sequence[Union[TensorLike, Buf, bytes]]], what: str, writable: bool = False) -> List[Buf]:
    """Bufs for a list of arrays; releases what it took when one fails."""
    if not isinstance(objs, (list, tuple)):
        raise InvalidArgument(
            "%s must be a list of arrays (one per rank), got %s%s"
            % (what, type(objs).__name__, "; for one flat array use the *_single form" if objs is not None else "")
        )
    out: List[Buf] = []
    try:
        for i, o in enumerate(objs):
            out.append(as_buf(o, "%s[%d]" % (what, i), writable))
    except BaseException:
        release_all(out)
        raise
    return out


def release_all(bufs: Iterable[Optional[Buf]]) -> None:
    for b in bufs:
        if b is not None:
            b.release()


def contiguous_run(bufs: Sequence[Buf]) -> bool:
    """True when bufs lie back to back in memory, in order (one block):
    then a list form runs zero-copy on that block."""
    if not bufs:
        return False
    p = bufs[0].ptr
    for b in bufs:
        if b.ptr != p:
            return False
        p += b.nbytes
    return True


def overlaps(a: ByteRange, b: ByteRange) -> bool:
    """True when the byte ranges of a and b intersect (empty ranges never do)."""
    return a.nbytes > 0 and b.nbytes > 0 and a.ptr < b.end and b.ptr < a.end
