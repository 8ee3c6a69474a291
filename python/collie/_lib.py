"""_lib.py - finds libcollie.so and declares its C API for ctypes.

This module mirrors include/collie.h: the enum values, the structs the
binding passes (collie_config_t, collie_opts_t, collie_timing_t) and the
signature of every function. ctypes trusts these declarations blindly, so a
signature that drifts from the header corrupts the stack silently: keep them in
the header's order and check them against it when the header changes.

The library is found lazily, at the first call that needs it, so that
``import collie`` works on a machine without the library (to read the docs,
build the enums, run a linter). The search order is documented in
docs/python.md and in LibraryNotFound's message.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import threading
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Tuple, Type, cast

# A function of the loaded library (a ctypes function object: its arguments
# and result as _SIGNATURES declares them).
CFunction = Callable[..., Any]

# ---- enums (the values of include/collie.h) ---------------------------------

SUCCESS = 0
IN_PROGRESS = 1
INVALID_ARGUMENT = 2
INVALID_USAGE = 3
SYSTEM_ERROR = 4
REMOTE_ERROR = 5
TIMEOUT = 6
UNSUPPORTED = 7
INTERNAL_ERROR = 8

RESULT_NAMES: Dict[int, str] = {
    SUCCESS: "success",
    IN_PROGRESS: "operation in progress",
    INVALID_ARGUMENT: "invalid argument",
    INVALID_USAGE: "invalid usage",
    SYSTEM_ERROR: "system error",
    REMOTE_ERROR: "remote error",
    TIMEOUT: "timeout",
    UNSUPPORTED: "unsupported",
    INTERNAL_ERROR: "internal error",
}

# collie_dtype_t, in the header's order: (name, element size in bytes, is_float).
DTYPES: Tuple[Tuple[str, int, bool], ...] = (
    ("int8", 1, False),
    ("uint8", 1, False),
    ("int32", 4, False),
    ("uint32", 4, False),
    ("int64", 8, False),
    ("uint64", 8, False),
    ("float16", 2, True),
    ("bfloat16", 2, True),
    ("float32", 4, True),
    ("float64", 8, True),
)

SPLIT_NONE = -1
CONFIG_MAGIC = 0xC0111E
# collie's version: the C library's, the package's and the wheel's. It is
# written in CMakeLists.txt's project() (the wheel's metadata reads it there),
# and CMake refuses to configure when this line or include/collie.h's
# COLLIE_VERSION_* say otherwise.
VERSION = "0.1.0"
# COLLIE_VERSION_CODE of that version: the binding's collie_config_t.version.
VERSION_CODE = sum(int(p) * f for p, f in zip(VERSION.split("."), (10000, 100, 1)))


# collie_store_callbacks_t's function types.
STORE_SET_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t)
STORE_GET_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_void_p,
                                ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t))
STORE_ADD_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64,
                                ctypes.POINTER(ctypes.c_int64))
STORE_RELEASE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class StoreCallbacks(ctypes.Structure):
    """collie_store_callbacks_t."""

    _fields_ = [
        ("ctx", ctypes.c_void_p),
        ("set", STORE_SET_FN),
        ("get", STORE_GET_FN),
        ("add", STORE_ADD_FN),
        ("release", STORE_RELEASE_FN),
    ]


class Config(ctypes.Structure):
    """collie_config_t."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint),
        ("version", ctypes.c_uint),
        ("rank", ctypes.c_int),
        ("world_size", ctypes.c_int),
        ("store", ctypes.c_char_p),
        ("job_token", ctypes.c_char_p),
        ("timeout_ms", ctypes.c_int64),
        ("transport", ctypes.c_char_p),
        ("store_callbacks", ctypes.POINTER(StoreCallbacks)),
        ("parent", ctypes.c_void_p),
        ("wire", ctypes.c_int),
    ]


def config_init() -> Config:
    """A collie_config_t as COLLIE_CONFIG_INIT initialises it."""
    cfg = Config()
    cfg.size = ctypes.sizeof(Config)
    cfg.magic = CONFIG_MAGIC
    cfg.version = VERSION_CODE
    cfg.rank = -1
    cfg.world_size = 0
    return cfg


class Opts(ctypes.Structure):
    """collie_opts_t."""

    _fields_ = [
        ("timeout_ms", ctypes.c_int64),
        ("category", ctypes.c_int),
        ("label", ctypes.c_char_p),
        ("phase", ctypes.c_char_p),
        ("algorithm", ctypes.c_int),
        ("cuda_stream", ctypes.c_void_p),
        ("wire", ctypes.c_int),
    ]


class TimingRec(ctypes.Structure):
    """collie_timing_t."""

    _fields_ = [
        ("operation", ctypes.c_char_p),
        ("layer_name", ctypes.c_char_p),
        ("phase", ctypes.c_char_p),
        ("message_size_bytes", ctypes.c_uint64),
        ("start_counter", ctypes.c_double),
        ("end_counter", ctypes.c_double),
    ]


# ---- signatures ---------------------------------------------------------------

_R = ctypes.c_int  # collie_result_t
_P = ctypes.c_void_p  # buffers, comm, work
_PP = ctypes.POINTER(ctypes.c_void_p)  # collie_comm_t **, collie_work_t **
_SZ = ctypes.c_size_t
_SZP = ctypes.POINTER(ctypes.c_size_t)
_I = ctypes.c_int
_OPTS = ctypes.POINTER(Opts)

# name: (restype, argtypes); in include/collie.h's order.
_SIGNATURES: Dict[str, Tuple[Optional[Type[Any]], List[Type[Any]]]] = {
    "collie_dtype_size": (_SZ, [_I]),
    "collie_dtype_name": (ctypes.c_char_p, [_I]),
    "collie_op_name": (ctypes.c_char_p, [_I]),
    "collie_result_string": (ctypes.c_char_p, [_I]),
    "collie_last_error": (ctypes.c_char_p, []),
    "collie_setting_known": (_I, [ctypes.c_char_p]),
    "collie_comm_init": (_R, [_PP]),
    "collie_comm_init_config": (_R, [ctypes.POINTER(Config), _PP]),
    "collie_comm_split": (_R, [_P, _I, _I, _PP]),
    "collie_comm_shrink": (_R, [_P, ctypes.POINTER(_I), _I, ctypes.c_int64, _PP]),
    "collie_comm_destroy": (_R, [_P]),
    "collie_comm_abort": (_R, [_P]),
    "collie_comm_abort_reason": (_R, [_P, ctypes.c_char_p]),
    "collie_comm_rank": (_I, [_P]),
    "collie_comm_size": (_I, [_P]),
    "collie_allreduce": (_R, [_P, _P, _P, _SZ, _I, _I, _OPTS, _PP]),
    "collie_allgather": (_R, [_P, _P, _P, _SZ, _I, _OPTS, _PP]),
    "collie_allgatherv": (_R, [_P, _P, _SZ, _P, _SZP, _SZP, _I, _OPTS, _PP]),
    "collie_reduce_scatter": (_R, [_P, _P, _P, _SZ, _I, _I, _OPTS, _PP]),
    "collie_broadcast": (_R, [_P, _P, _SZ, _I, _I, _OPTS, _PP]),
    "collie_reduce": (_R, [_P, _P, _P, _SZ, _I, _I, _I, _OPTS, _PP]),
    "collie_alltoall": (_R, [_P, _P, _P, _SZ, _I, _OPTS, _PP]),
    "collie_alltoallv": (_R, [_P, _P, _SZP, _SZP, _P, _SZP, _SZP, _I, _OPTS, _PP]),
    "collie_gather": (_R, [_P, _P, _P, _SZ, _I, _I, _OPTS, _PP]),
    "collie_scatter": (_R, [_P, _P, _P, _SZ, _I, _I, _OPTS, _PP]),
    "collie_sparse_allreduce": (
        _R,
        [_P, _I, _P, _P, _SZ, _SZ, ctypes.POINTER(ctypes.c_int64), _P, _SZ, ctypes.POINTER(_SZ), _I, _OPTS, _PP],
    ),
    "collie_window_create": (_R, [_P, _P, _SZ, _PP]),
    "collie_window_put": (_R, [_P, _I, _SZ, _P, _SZ]),
    "collie_window_signal": (_R, [_P, _I]),
    "collie_window_wait_signal": (_R, [_P, _I, ctypes.c_uint64, ctypes.c_int64]),
    "collie_window_flush": (_R, [_P]),
    "collie_window_fence": (_R, [_P]),
    "collie_window_free": (_R, [_P]),
    "collie_barrier": (_R, [_P, _OPTS, _PP]),
    "collie_allreduce_init": (_R, [_P, _P, _P, _SZ, _I, _I, _OPTS, _PP]),
    "collie_allgather_init": (_R, [_P, _P, _P, _SZ, _I, _OPTS, _PP]),
    "collie_reduce_scatter_init": (_R, [_P, _P, _P, _SZ, _I, _I, _OPTS, _PP]),
    "collie_broadcast_init": (_R, [_P, _P, _SZ, _I, _I, _OPTS, _PP]),
    "collie_alltoall_init": (_R, [_P, _P, _P, _SZ, _I, _OPTS, _PP]),
    "collie_start": (_R, [_P, _PP]),
    "collie_plan_free": (None, [_P]),
    "collie_send": (_R, [_P, _P, _SZ, _I, _I, _I, _OPTS, _PP]),
    "collie_recv": (_R, [_P, _P, _SZ, _I, _I, _I, _OPTS, _PP]),
    "collie_ssend": (_R, [_P, _P, _SZ, _I, _I, _I, _OPTS, _PP]),
    "collie_recv_status": (_R, [_P, _P, _SZ, _I, _I, _I, _P, _OPTS, _PP]),
    "collie_probe": (_R, [_P, _I, _I, _P, _OPTS]),
    "collie_iprobe": (_R, [_P, _I, _I, ctypes.POINTER(ctypes.c_int), _P, _OPTS]),
    "collie_recv_any": (_R, [_P, _P, _SZ, _I, _I, ctypes.POINTER(ctypes.c_int), _OPTS, _PP]),
    "collie_group_start": (_R, [_P]),
    "collie_group_end": (_R, [_P, _PP]),
    "collie_mem_alloc": (_P, [_P, _SZ]),
    "collie_mem_free": (_R, [_P]),
    "collie_wait": (_R, [_P, ctypes.c_int64]),
    "collie_test": (_R, [_P]),
    "collie_work_free": (None, [_P]),
    "collie_step_begin": (_R, [_P, ctypes.c_int64, ctypes.c_int64]),
    "collie_step_end": (_R, [_P]),
    "collie_category_register": (_R, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]),
    "collie_timing_open": (_R, [_P, ctypes.c_char_p]),
    "collie_timing_flush": (_R, [_P]),
    "collie_timing_close": (_R, [_P]),
    "collie_timing_record": (_R, [_P, ctypes.POINTER(TimingRec)]),
    "collie_timing_log_open": (_R, [ctypes.c_char_p, _I, ctypes.c_int64, ctypes.c_int64, _PP]),
    "collie_timing_log_record": (_R, [_P, ctypes.POINTER(TimingRec), ctypes.c_int64, ctypes.c_int64]),
    "collie_timing_log_flush": (_R, [_P]),
    "collie_timing_log_close": (None, [_P]),
    "collie_wire_bytes": (ctypes.c_uint64, [_I, _I, ctypes.c_uint64]),
    "collie_comms_log_open": (_R, [ctypes.c_char_p, _I, _I, _PP]),
    "collie_comms_log_step_begin": (_R, [_P, ctypes.c_int64, ctypes.c_int64]),
    "collie_comms_log_step_end": (_R, [_P]),
    "collie_comms_log_step": (_R, [_P, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64)]),
    "collie_comms_log_charge": (_R, [_P, _I, _I, _I, ctypes.c_uint64, _PP]),
    "collie_comms_log_done": (_R, [_P, _P, _I, ctypes.c_int64]),
    "collie_comms_log_record": (_R, [_P, _I, _I, _I, ctypes.c_uint64, ctypes.c_int64]),
    "collie_comms_log_close": (None, [_P]),
    "collie_flight_dump": (_R, [_P]),
}

# ---- loading ------------------------------------------------------------------

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None


class LibraryNotFoundError(OSError):
    """libcollie.so could not be loaded (the message lists what was tried).

    collie.LibraryNotFound derives from this and from collie.CollieError."""


def _is_sanitized(build_dir: str) -> bool:
    """True when build_dir was configured with ASan or TSan: such a library
    aborts the process when dlopen'ed into an uninstrumented python."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            text = f.read()
    except OSError:
        return False
    return "COLLIE_SANITIZE:BOOL=ON" in text or "COLLIE_TSAN:BOOL=ON" in text


def bundled() -> str:
    """The library an installed wheel holds inside the package
    (collie/lib/, beside the torch fast path; pip install . from the
    repository root). A source tree has none there."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "libcollie.so.0")


def candidates() -> List[str]:
    """The paths the loader tries, in order, without COLLIE_LIBRARY (which,
    when set, is the only one tried)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out: List[str] = [bundled()]
    for name in ("libcollie.so.0", "libcollie.so"):
        out.append(os.path.join(root, "build", name))
    others: List[Tuple[float, str]] = []
    for d in glob.glob(os.path.join(root, "build-*")):
        lib = os.path.join(d, "libcollie.so.0")
        if os.path.isfile(lib) and not _is_sanitized(d):
            others.append((os.path.getmtime(lib), lib))
    out.extend(lib for _, lib in sorted(others, reverse=True))
    found = ctypes.util.find_library("collie")
    if found:
        out.append(found)
    return out


def _bind(cdll: ctypes.CDLL) -> ctypes.CDLL:
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(cdll, name, None)
        if fn is None:
            continue  # an older library: the call that needs it says so (need())
        fn.restype = restype
        fn.argtypes = argtypes
    return cdll


def lib() -> ctypes.CDLL:
    """The loaded library (loads it at the first call). Raises
    LibraryNotFound naming COLLIE_LIBRARY and every path tried."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried: List[str] = []
        env = os.environ.get("COLLIE_LIBRARY")
        paths = [env] if env else candidates()
        for path in paths:
            if not env and os.path.sep in path and not os.path.exists(path):
                tried.append("%s (absent)" % path)
                continue
            try:
                cdll = ctypes.CDLL(path)
            except OSError as e:
                tried.append("%s (%s)" % (path, e))
                continue
            if not hasattr(cdll, "collie_allreduce"):
                tried.append("%s (not libcollie: no collie_allreduce)" % path)
                continue
            _lib = _bind(cdll)
            _lib._collie_path = path  # type: ignore[attr-defined]  # the binding's note on the CDLL
            return _lib
        from ._errors import LibraryNotFound

        if env:
            msg = "COLLIE_LIBRARY=%s could not be loaded: %s" % (env, "; ".join(tried))
        else:
            msg = (
                "libcollie.so not found; set COLLIE_LIBRARY to its path (e.g. build/libcollie.so), "
                "build it with `cmake -S . -B build && cmake --build build`, or install the package with "
                "its library (`pip install .` in the repository). Tried: %s"
                % ("; ".join(tried) if tried else "nothing (no build tree, find_library('collie') found none)")
            )
        raise LibraryNotFound(msg)


def need(name: str) -> CFunction:
    """The C function name, or CollieError(UNSUPPORTED) when the loaded
    library predates it."""
    fn: Optional[CFunction] = getattr(lib(), name, None)
    if fn is None:
        from ._errors import make_error

        raise make_error(
            UNSUPPORTED, "%s: not in the loaded library %s (too old?)" % (name, lib()._collie_path)
        )
    return fn


_gil_cdll: Optional[ctypes.PyDLL] = None


def gil_function(name: str, restype: Optional[Type[Any]], argtypes: List[Type[Any]]) -> CFunction:
    """name from the library as a function that keeps the GIL during the
    call (ctypes.PyDLL): for calls that never block, where releasing and
    retaking the GIL would cost more than the call. The declaration is the
    caller's (a separate function object from lib()'s)."""
    global _gil_cdll
    need(name)
    if _gil_cdll is None:
        _gil_cdll = ctypes.PyDLL(path())
    fn = getattr(_gil_cdll, name)
    fn.restype, fn.argtypes = restype, argtypes
    return cast(CFunction, fn)


def path() -> str:
    """Path of the loaded library (loads it)."""
    return cast(str, lib()._collie_path)


def extension_beside(name: str) -> Tuple[Optional[str], List[str]]:
    """Where the library in use lies (None: found by the loader's own search,
    a bare soname, so no directory of ours to look in) and the extension
    modules `name` there built for this interpreter (a build directory may
    also hold one built for another Python, which is left out). The C fast
    paths (collie.torch's, collie.MPI's) are looked for so."""
    import importlib.machinery

    p = path()
    where = os.path.dirname(os.path.abspath(p)) if os.path.sep in p else None
    found = [os.path.join(where, name + s) for s in importlib.machinery.EXTENSION_SUFFIXES] if where else []
    return where, [f for f in found if os.path.exists(f)]


def load_extension(name: str, file: str) -> "ModuleType":
    """The extension module `name` loaded from file (ImportError when it
    does not load)."""
    import importlib.machinery
    import importlib.util

    spec = importlib.util.spec_from_loader(name, importlib.machinery.ExtensionFileLoader(name, file))
    assert spec is not None and spec.loader is not None  # (a spec of the loader given)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
