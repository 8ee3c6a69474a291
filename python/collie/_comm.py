"""_comm.py - communicators, collectives and work handles over libcollie.

A Comm wraps one collie_comm_t. Every collective method validates its arrays
in Python first (contiguity, writability, dtype, sizes: InvalidArgument before
any communication), then makes one C call with the arrays' own pointers
(zero-copy). async_op=True returns a Work at once; the Work holds every array
(and every ctypes object the C call points at) until the operation has
completed, so a buffer can never be freed or resized under a running
operation, even when the caller drops the Work (the communicator adopts it).

List forms (all_gather, reduce_scatter, gather, scatter, all_gather_v) run
zero-copy when the list's arrays lie back to back in one block in rank order
(views of one array); otherwise they go through one contiguous staging buffer
(copy in before, copy out when the operation completes).

Threading: one thread issues calls on a communicator at a time (the C
contract); a per-communicator lock enforces it. Blocking calls release the
GIL, so other Python threads run meanwhile. abort() may come from any thread.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import datetime
import math
import os
import sys
import threading
import weakref
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Literal, NoReturn, Optional, Sequence,
                    Tuple, TypeVar, Union)

from . import _exit, _lib
from ._backends import Device, check_device, parse_device, resolve_backend
from ._buffers import Buf, Staging, as_buf, as_bufs, contiguous_run, overlaps, release_all
from ._enums import OpLike, PayloadCategory, PremulSum, ReduceOp, to_algorithm, to_category, to_ms, to_op, to_wire
from ._errors import (CollieError, CollieSystemError, InternalError, InvalidArgument, InvalidUsage, RemoteError,
                      Timeout, Unsupported, check, last_error)
from ._options import CommOptions, OpOptions, check_hints, log as _log, op_settings
from ._store import KVStore

if TYPE_CHECKING:
    from ._types import Hints, OptHints, OptTimeout, TensorLike, TensorList, TimeoutLike
    from ._window import Window

# What the calls take, beyond _types' names.
CategoryLike = Union[PayloadCategory, int, str, None]  # a category, its id or its name
AlgorithmLike = Union[str, int, None]  # a name of collie.ALGORITHMS, or its index; None: the model picks
WireLike = Union[str, int, None]  # "float16", "bfloat16", "native"; None: the communicator's
DeviceLike = Any  # a torch.device, or "cpu", "cuda", "cuda:N"; None: any memory
StoreLike = Any  # "tcp://host:port", "file:///dir", or an object with set/get/add/wait (a torch Store)
HintsOrTimeout = Union["Hints", "TimeoutLike", None]  # hints; collie's first order put the timeout there
_T = TypeVar("_T")

_c_size_t_p = ctypes.POINTER(ctypes.c_size_t)

# Registry: every live Comm (finalized at exit in reverse creation order),
# the default communicator, and the settings collie.distributed.configure()
# queued for communicators created afterwards.
_registry_lock = threading.RLock()
_live: List["Comm"] = []
_default: Optional["Comm"] = None
_pending_env: Dict[str, Optional[str]] = {}
_env_lock = threading.Lock()
_new_comm_hooks: List[Callable[["Comm"], None]] = []  # called with each new world Comm (timing logger)


def get_default_comm() -> Comm:
    """The default communicator (the first one new_comm created, or the one
    set_default_comm set). InvalidUsage when there is none."""
    c = _default
    if c is None or c._h is None:
        raise InvalidUsage("no default communicator: call collie.new_comm() first (or pass group=)")
    return c


def has_default_comm() -> bool:
    return _default is not None and _default._h is not None


def set_default_comm(comm: Optional[Comm]) -> None:
    """Makes comm the default communicator (None: no default)."""
    global _default
    if comm is not None and not isinstance(comm, Comm):
        raise InvalidArgument("set_default_comm: %r is not a collie Comm" % (comm,))
    with _registry_lock:
        _default = comm


def resolve(group: Optional[Comm]) -> Comm:
    """group (a Comm) or the default communicator."""
    if group is None:
        return get_default_comm()
    if not isinstance(group, Comm):
        raise InvalidArgument("group = %r is not a collie Comm (or None for the default)" % (group,))
    return group


def register_category(name: str) -> int:
    """Registers a payload category named name (1..32 of [A-Za-z0-9_], not a
    built-in) and returns its id for category=. Register before new_comm:
    a communicator's comms.csv columns are fixed at its creation."""
    if not isinstance(name, str):
        raise InvalidArgument("register_category: name = %r must be a str" % (name,))
    out = ctypes.c_int()
    check(_lib.need("collie_category_register")(name.encode(), ctypes.byref(out)))
    registered_categories[name] = out.value
    return out.value


registered_categories: Dict[str, int] = {}  # name -> id, of the categories registered through this binding


def _env_value(key: str, value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _env_name(key: str) -> str:
    k = str(key).upper()
    return k if k.startswith("COLLIE_") else "COLLIE_" + k


@contextlib.contextmanager
def _environment(overrides: Dict[str, Optional[str]]) -> Iterator[None]:
    """Applies overrides (name -> str, or None to unset) to os.environ for
    the duration of a C init, which reads COLLIE_* there. Serialised: the
    environment is process-wide."""
    with _env_lock:
        saved = {k: os.environ.get(k) for k in overrides}
        try:
            for k, v in overrides.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            yield
        finally:
            # glibc keeps the strings setenv allocated, so pointers the library
            # kept from getenv() (COLLIE_LOG_DIR, ...) stay valid after this.
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def _launcher_rank_size() -> Tuple[Optional[int], Optional[int]]:
    """(rank, size) the launcher set (collierun's, torchrun's, Open MPI's,
    Slurm's variables), or (None, None): torchcomms takes them from there
    when a store object is given without them."""
    for r, n in (("COLLIE_RANK", "COLLIE_WORLD_SIZE"), ("RANK", "WORLD_SIZE"),
                 ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE"),
                 ("SLURM_PROCID", "SLURM_NTASKS")):
        rv, nv = os.environ.get(r), os.environ.get(n)
        if rv and nv:
            try:
                return int(rv), int(nv)
            except ValueError:
                raise InvalidArgument("new_comm: %s = %r and %s = %r must be integers" % (r, rv, n, nv)) from None
    return None, None


def _torchcomm_timeout_ms() -> int:
    """torchcomms' TORCHCOMM_TIMEOUT_SECONDS in ms, else collie's Python
    default, 30 s (COLLIE_TIMEOUT_MS, read by the C library, wins)."""
    raw = os.environ.get("TORCHCOMM_TIMEOUT_SECONDS")
    if not raw:
        return 30000
    try:
        secs = float(raw)
    except ValueError:
        secs = float("nan")
    if not secs > 0 or math.isinf(secs):
        raise InvalidArgument("TORCHCOMM_TIMEOUT_SECONDS = %r must be a number of seconds > 0" % (raw,))
    return max(1, int(math.ceil(secs * 1000)))


# The errors of the communication itself, which abort_process_on_timeout_or_error
# turns into the end of the process.
_FATAL = (Timeout, RemoteError, CollieSystemError, InternalError)

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _abort_setting(given: Optional[bool], env: Dict[str, Optional[str]]) -> bool:
    """abort_process_on_timeout_or_error: given (a bool, or None), else
    COLLIE_ABORT_ON_ERROR (this init's hints, then the environment), else
    TORCHCOMM_ABORT_ON_ERROR, else False."""
    if given is not None:
        if not isinstance(given, bool):
            raise InvalidArgument("new_comm: abort_process_on_timeout_or_error = %r must be a bool" % (given,))
        return given
    for var in ("COLLIE_ABORT_ON_ERROR", "TORCHCOMM_ABORT_ON_ERROR"):
        raw = env.get(var) if var in env else os.environ.get(var)
        if raw is None or raw == "":
            continue
        v = raw.strip().lower()
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
        raise InvalidArgument("%s = %r must be 1 or 0 (true or false)" % (var, raw))
    return False


def new_comm(backend: Optional[str] = None, device: DeviceLike = None, name: Optional[str] = None,
             options: Optional[CommOptions] = None, *, timeout: OptTimeout = None, store: StoreLike = None,
             hints: OptHints = None, abort_process_on_timeout_or_error: Optional[bool] = None,
             enable_reconfigure: bool = False, rank: Optional[int] = None, world_size: Optional[int] = None,
             job_token: Optional[str] = None, parent: Optional[Comm] = None) -> Comm:
    """Creates a world communicator: collective over every rank of the job.

    torchcomms' call works as written: new_comm("ncclx", torch.device("cuda"),
    name="main_comm") (docs/python.md, "Coming from torchcomms"). Rank, size
    and store come from the launcher's environment as in C's
    collie_comm_init (collierun, torchrun, Slurm, Open MPI, MPICH/PMI),
    unless rank and world_size are given (then collie_comm_init_config is
    used).

    - backend: "collie" (None: the same). torchcomms' names of other
      libraries ("nccl", "ncclx", "gloo", "rccl", "rcclx", "xccl") run on
      collie only where COLLIE_BACKEND_ALIASES lists them (or is "all");
      otherwise, and for any other name, InvalidArgument names the valid ones.
    - device: the memory the communicator's tensors are in: "cpu", "cuda"
      (any GPU), "cuda:N", or a torch.device; every call checks its tensors
      against it. None: host and CUDA memory alike.
    - name: a label for get_name() and error messages (default "main_comm").
    - options: a CommOptions (abort_process_on_timeout_or_error, timeout,
      store, name, hints); an argument given directly wins over its field.
    - timeout: datetime.timedelta or seconds: the default deadline of init
      and of every operation on this communicator and its splits. None:
      COLLIE_TIMEOUT_MS when set, else TORCHCOMM_TIMEOUT_SECONDS when set,
      else 30 seconds.
    - store: "tcp://host:port" or "file:///dir" instead of the environment's,
      or a key-value store object with set/get/add/wait (a
      torch.distributed.Store): collie then meets through it and opens no
      port or directory of its own (needs rank and world_size).
    - hints: {setting: value} of COLLIE_* variables for this init, with or
      without the COLLIE_ prefix, any case: {"transport": "tcp",
      "algo": "allreduce=ring", "log_dir": "/tmp/logs"}. Values: str, int,
      bool (1/0), None (unset). A name that is not a collie setting (another
      library's hint) is kept in get_options().hints and ignored, with a
      debug line on the "collie" logger.
    - abort_process_on_timeout_or_error: True: an operation that fails or
      times out ends the process (SIGABRT) after this rank's flight record
      is written, as torchcomms does; False: it raises. None:
      COLLIE_ABORT_ON_ERROR, else TORCHCOMM_ABORT_ON_ERROR, else False.
    - enable_reconfigure: torchcomms' reconfigure() is not collie's; True is
      refused (collie's fault tolerance is Comm.shrink()).
    - job_token: the job's shared secret (default: the launcher's).
    - parent: a Comm of this process that the new one is a group of, made
      apart from it (not every rank of parent takes part): the new one
      shares parent's telemetry (steps, comms.csv, the timing log) and names
      ranks by their rank there, as a split would (needs rank and
      world_size).

    The first communicator created becomes the default one (used by
    collie.distributed, collie.objcol and collie.timing when group=None).
    Errors: InvalidArgument (bad backend, device, environment or hint,
    naming it), Timeout (a rank never arrived), RemoteError,
    CollieSystemError."""
    global _default
    backend = resolve_backend(backend)
    dev = parse_device(device)
    if options is not None:
        if not isinstance(options, CommOptions):
            raise InvalidArgument("new_comm: options = %r is not a collie.CommOptions" % (options,))
        name = options.name if name is None else name
        timeout = options.timeout if timeout is None else timeout
        store = options.store if store is None else store
        merged = dict(options.hints)
        merged.update(check_hints(hints, "new_comm: hints"))
        hints = merged
        if abort_process_on_timeout_or_error is None:
            abort_process_on_timeout_or_error = options.abort_process_on_timeout_or_error
        enable_reconfigure = enable_reconfigure or options.enable_reconfigure
    if name is None:
        name = "main_comm"
    if not isinstance(name, str):
        raise InvalidArgument("new_comm: name = %r must be a str" % (name,))
    if enable_reconfigure:
        raise Unsupported("new_comm: enable_reconfigure = True: collie has no reconfigure(); after a failure, "
                          "the survivors continue with Comm.shrink() (docs/reliability.md)")
    ms = to_ms(timeout, "new_comm: timeout")
    env = {}
    with _registry_lock:
        env.update(_pending_env)
    kept = {}
    if hints is not None:
        if not hasattr(hints, "items"):
            raise InvalidArgument("new_comm: hints = %r must be a dict of COLLIE_* settings" % (hints,))
        for k, v in check_hints(hints, "new_comm: hints").items():
            kept[k] = v
            if not _lib.lib().collie_setting_known(str(k).encode()):
                _log.debug("new_comm: hint %r = %r is not a collie setting (docs/env.md); ignored", k, v)
                continue
            env[_env_name(k)] = None if v is None else _env_value(k, v)
    if ms is None and "COLLIE_TIMEOUT_MS" not in env and not os.environ.get("COLLIE_TIMEOUT_MS"):
        ms = _torchcomm_timeout_ms()
    if ms is not None:
        env["COLLIE_TIMEOUT_MS"] = str(ms)
    abort = _abort_setting(abort_process_on_timeout_or_error, env)
    kv = None
    if store is not None and not isinstance(store, str):
        try:
            kv = KVStore(store)
        except TypeError as e:
            raise InvalidArgument("new_comm: %s" % e) from None
        if rank is None and world_size is None:
            rank, world_size = _launcher_rank_size()
        if rank is None or world_size is None:
            raise InvalidArgument("new_comm: a store object needs rank and world_size (given, or from the "
                                  "launcher's environment: COLLIE_RANK/COLLIE_WORLD_SIZE, RANK/WORLD_SIZE)")
    elif store is not None:
        if not (store.startswith("tcp://") or store.startswith("file://")):
            raise InvalidArgument('new_comm: store = %r must be "tcp://host:port" or "file:///dir"' % (store,))
        env["COLLIE_STORE"] = store
    if job_token is not None:
        env["COLLIE_JOB_TOKEN"] = str(job_token)
    # COLLIE_LIBRARY is the binding's, not the C library's: hide it from the
    # C library's scan for misspelt COLLIE_* variables.
    env.setdefault("COLLIE_LIBRARY", None)
    L = _lib.lib()
    h = ctypes.c_void_p()
    with _environment(env):
        if rank is None and world_size is None:
            rc = L.collie_comm_init(ctypes.byref(h))
        else:
            if rank is None or world_size is None:
                raise InvalidArgument("new_comm: give both rank and world_size, or neither")
            cfg = _lib.config_init()
            cfg.rank = int(rank)
            cfg.world_size = int(world_size)
            if kv is not None:
                cfg.store_callbacks = ctypes.pointer(kv.callbacks)
            if parent is not None:
                if not isinstance(parent, Comm) or parent._h is None:
                    raise InvalidArgument("new_comm: parent = %r is not a live collie Comm" % (parent,))
                cfg.parent = parent._h
            rc = L.collie_comm_init_config(ctypes.byref(cfg), ctypes.byref(h))
    if rc != _lib.SUCCESS:
        exc = last_error(rc)
        if kv is not None and kv.error:
            exc.message = "%s (the store said: %s)" % (exc.message, kv.error)
            exc.args = (exc.message,)
        raise exc
    comm = Comm(_handle_of(h), name, None)
    comm._kv = kv  # the callbacks must outlive the communicator tree
    comm._backend, comm._device, comm._abort_on_error = backend, dev, abort
    comm._options = CommOptions(abort, datetime.timedelta(milliseconds=ms) if ms else None,
                                store, name, kept)
    with _registry_lock:
        if _default is None or _default._h is None:
            _default = comm
    for hook in list(_new_comm_hooks):
        try:
            hook(comm)
        except Exception as e:  # the communicator exists: report, do not lose it
            import warnings

            warnings.warn("collie.new_comm: %s" % e, stacklevel=2)
    return comm


class Work:
    """One operation's handle (torchcomms' / torch.distributed's Work).

    wait(timeout=None) blocks until the operation completes and raises its
    error (a CollieError subclass); with a timeout it raises Timeout when the
    operation is still running then (it goes on: wait again). is_completed()
    never blocks. The arrays of the operation stay referenced until it has
    completed. A Work returned by a blocking call is already complete."""

    __slots__ = ("_comm", "_h", "_keep", "_post", "_exc", "_done", "_src", "__weakref__")

    def __init__(self, comm: Comm, handle: Optional[int], keep: Optional[List[Any]], post: Optional[Callable[[],
                 None]] = None) -> None:
        self._comm = comm
        self._h: Optional[int] = handle
        self._keep = keep
        self._post = post
        self._exc: Optional[CollieError] = None
        self._done = handle is None
        self._src: Optional[ctypes.c_int] = None

    def source_rank(self) -> int:
        """The sender's rank of a completed recv from any source (src=None);
        InvalidUsage before it completed or for any other operation."""
        if self._src is None:
            raise InvalidUsage("source_rank(): only a recv from any source (src=None) has one")
        if not self.is_completed() or self._exc is not None or self._src.value < 0:
            raise InvalidUsage("source_rank(): the recv from any source has not completed successfully")
        return self._src.value

    def _complete(self, exc: Optional[CollieError]) -> None:
        """The operation has finished (exc None: successfully): copy out,
        release the arrays and the handle."""
        self._done = True
        self._exc = exc
        if exc is not None:
            self._comm._failed(exc)  # ends the process where the communicator says so
        post, self._post = self._post, None
        try:
            if exc is None and post is not None:
                post()
        finally:
            keep, self._keep = self._keep, None
            release_all(b for b in keep or () if hasattr(b, "release"))
            h, self._h = self._h, None
            if h:
                _lib.lib().collie_work_free(h)

    def wait(self, timeout: OptTimeout = None) -> bool:
        """Blocks until done (timeout None: the operation's own deadline;
        else a timedelta or seconds). Returns True; raises the operation's
        error, or Timeout when it is still running at timeout."""
        if _capturing():
            raise InvalidUsage("Work.wait: called while the current stream captures a CUDA graph; wait after "
                               "the capture (torchcomms' rule: no wait inside torch.cuda.graph)")
        if self._done:
            if self._exc is not None:
                raise self._exc
            return True
        ms = to_ms(timeout, "Work.wait: timeout")
        L = _lib.lib()
        rc = L.collie_wait(self._h, -1 if ms is None else ms)
        if rc == _lib.SUCCESS:
            self._complete(None)
            return True
        exc = last_error(rc)
        if rc == _lib.TIMEOUT and L.collie_test(self._h) == _lib.IN_PROGRESS:
            raise exc  # only the wait timed out: the operation goes on
        self._complete(exc)
        raise exc

    def wait_blocking(self, timeout: OptTimeout = None) -> bool:
        """torchcomms' name for wait() (collie's wait blocks the calling
        thread; it never enqueues a stream wait)."""
        return self.wait(timeout)

    def is_completed(self) -> bool:
        """True once the operation has finished (successfully or not: wait()
        then returns or raises at once). Never blocks."""
        if self._done:
            return True
        rc = _lib.lib().collie_test(self._h)
        if rc == _lib.IN_PROGRESS:
            return False
        self._complete(None if rc == _lib.SUCCESS else last_error(rc))
        return True

    def is_success(self) -> bool:
        """True when completed without error."""
        return self.is_completed() and self._exc is None

    def exception(self) -> Optional[CollieError]:
        """The operation's error once completed (None: none or not yet)."""
        return self._exc if self.is_completed() else None

    def __del__(self) -> None:
        # Dropped before completion: the communicator keeps the arrays until
        # the operation ends (a zero-copy buffer must outlive the operation).
        try:
            if not self._done and self._h:
                h, keep = self._h, self._keep
                self._h, self._keep, self._done = None, None, True
                if self._comm._h is None:
                    # Finalized: destroy drained every operation, so it has ended.
                    _lib.lib().collie_work_free(h)
                    release_all(b for b in keep or () if hasattr(b, "release"))
                else:
                    self._comm._adopt(h, keep)
        except Exception:
            pass


class _Call:
    """One API call in progress: builds the opts, acquires arrays (released
    if validation fails), then issues the C call and hands everything the
    call points at to the Work."""

    def __init__(self, comm: Comm, fn: str, async_op: bool, timeout: OptTimeout, category: CategoryLike,
                 label: Optional[str], phase: Optional[str], algorithm: AlgorithmLike, wire: WireLike = None) -> None:
        self.comm = comm
        self.fn = fn
        self.async_op = bool(async_op)
        self.keep: List[Any] = []
        self.opts: Optional[Any] = None
        ms = to_ms(timeout, fn + ": timeout")
        given = (ms, category, label, phase, algorithm, wire)
        if any(v is not None for v in given):
            o = _lib.Opts()
            o.timeout_ms = ms or 0
            o.category = to_category(category)
            o.algorithm = to_algorithm(algorithm)
            try:
                o.wire = to_wire(wire)
            except InvalidArgument as e:
                raise InvalidArgument("%s: %s" % (fn, e)) from None
            if label is not None:
                lb = str(label).encode()
                self.keep.append(lb)
                o.label = lb
            if phase is not None:
                ph = str(phase).encode()
                self.keep.append(ph)
                o.phase = ph
            self.opts = o
            self.keep.append(o)

    def __enter__(self) -> "_Call":
        return self

    def __exit__(self, et: object, ev: object, tb: object) -> Literal[False]:
        if et is not None:
            release_all(b for b in self.keep if hasattr(b, "release"))
            self.keep = []
        return False

    def buf(self, obj: TensorLike, what: str, out: bool = False) -> Buf:
        b = as_buf(obj, "%s: %s" % (self.fn, what), out)
        self.keep.append(b)
        self.where(b, what)
        return b

    def bufs(self, objs: Optional[TensorList], what: str, out: bool = False, n: Optional[int] = None) -> List[Buf]:
        bs = as_bufs(objs, "%s: %s" % (self.fn, what), out)
        self.keep.extend(bs)
        for q, b in enumerate(bs):
            self.where(b, "%s[%d]" % (what, q))
        if n is not None and len(bs) != n:
            raise InvalidArgument(
                "%s: %s has %d arrays, expected %d (one per rank of the communicator)" % (self.fn, what, len(bs), n)
            )
        return bs

    def hold(self, obj: _T) -> _T:
        self.keep.append(obj)
        return obj

    def where(self, b: Buf, what: str) -> None:
        """b is in the memory the communicator was made for. A CUDA array
        while torch's current stream captures a CUDA graph: the call is
        given that stream, so that the C library captures it into the graph
        (docs/gpu.md, "CUDA graphs"), or refuses it before any CUDA call."""
        check_device(self.comm._device, b.obj, b.device, "%s: %s" % (self.fn, what))
        if b.device and self.opts is not None and self.opts.cuda_stream:
            return
        if b.device:
            stream = _capturing_stream(b.obj)
            if stream:
                self.options().cuda_stream = stream

    def options(self) -> Any:
        """The call's collie_opts_t, made (zeroed: defaults) where none was."""
        if self.opts is None:
            self.opts = _lib.Opts()
            self.keep.append(self.opts)
        return self.opts

    def premul(self, op: OpLike, obj: Any, what: str) -> Tuple[int, Any]:
        """(op, obj) for a call: a ReduceOp.PREMUL_SUM(factor) becomes a SUM
        of obj times factor (a new array of obj's dtype; obj is not
        changed)."""
        if not isinstance(op, PremulSum):
            return to_op(op), obj
        try:
            scaled = obj * op.factor
        except Exception as e:
            raise InvalidArgument("%s: PREMUL_SUM needs %s to be an array that multiplies (numpy, torch): %s"
                                  % (self.fn, what, e)) from None
        want, got = as_buf(obj, what), as_buf(scaled, what)
        try:
            if want.dtype != got.dtype:
                raise InvalidArgument("%s: PREMUL_SUM(%r) turns %s's %s into %s: give a factor of its dtype"
                                      % (self.fn, op.factor, what, want.dtype_name, got.dtype_name))
        finally:
            release_all([want, got])
        self.keep.append(scaled)
        return int(ReduceOp.SUM), scaled

    def sizes(self, values: Sequence[int]) -> Any:
        arr = (ctypes.c_size_t * max(len(values), 1))(*values)
        self.keep.append(arr)
        return ctypes.cast(arr, _c_size_t_p)

    def same_dtype(self, a: Buf, an: str, b: Buf, bn: str) -> None:
        if a.dtype != b.dtype:
            raise InvalidArgument(
                "%s: %s is %s but %s is %s (one dtype per call)" % (self.fn, an, a.dtype_name, bn, b.dtype_name)
            )

    def count_is(self, b: Buf, bn: str, want: int, why: str) -> None:
        if b.count != want:
            raise InvalidArgument("%s: %s has %d elements, expected %d (%s)" % (self.fn, bn, b.count, want, why))

    def blocks_like(self, blocks: Sequence[Buf], what: str, ref: Buf, refname: str) -> None:
        """Every array of a list form has ref's dtype and element count."""
        for q, b in enumerate(blocks):
            self.same_dtype(b, "%s[%d]" % (what, q), ref, refname)
            self.count_is(b, "%s[%d]" % (what, q), ref.count, "as many as %s" % refname)

    def no_alias(self, a: Buf, an: str, b: Union[Buf, "_Span"], bn: str, allowed_ptr: Optional[int] = None,
                 allowed_text: str = "") -> None:
        """a and b may not overlap, except a starting exactly at allowed_ptr."""
        if overlaps(a, b) and a.ptr != allowed_ptr:
            raise InvalidArgument(
                "%s: %s overlaps %s%s" % (self.fn, an, bn, (": in place, " + allowed_text) if allowed_text else "")
            )

    def plan(self, cfn: Any, *args: Any) -> Plan:
        """A Plan of the collective cfn (a collie_*_init) on these buffers,
        which it keeps acquired until the plan is freed."""
        c = self.comm
        keep, self.keep = self.keep, []
        try:
            return c._plan(cfn, args, self.opts, keep)
        except BaseException:
            release_all(b for b in keep if hasattr(b, "release"))
            raise

    def run(self, cfn: Any, *args: Any, post: Optional[Callable[[], None]] = None) -> Work:
        c = self.comm
        keep, self.keep = self.keep, []
        try:
            return c._issue(cfn, args, self.opts, self.async_op, keep, post)
        except BaseException:
            release_all(b for b in keep if hasattr(b, "release"))
            raise


class Plan:
    """A persistent collective (collie_*_init; torchcomms' *_p_init): made
    once by a Comm's *_p_init method on its arrays, then start()ed as often
    as needed (each start reads the arrays' contents then; an async start's
    Work must complete before the next start). free() (or a with block)
    releases it, and must come before the communicator is finalized."""

    __slots__ = ("_comm", "_h", "_keep")

    def __init__(self, comm: Comm, handle: Optional[int], keep: List[Any]) -> None:
        self._comm = comm
        self._h: Optional[int] = handle
        self._keep = keep

    def start(self, async_op: bool = False) -> Work:
        """Runs the planned collective once; a Work (complete unless async_op)."""
        if self._h is None:
            raise InvalidUsage("start(): the plan was freed")
        c = self._comm
        with c._lock:
            c._live_handle("start")
            if async_op:
                w = ctypes.c_void_p()
                rc = _lib.lib().collie_start(self._h, ctypes.byref(w))
            else:
                rc = _lib.lib().collie_start(self._h, None)
            if rc != _lib.SUCCESS:
                raise last_error(rc)
        return Work(c, w.value, None) if async_op else Work(c, None, None)

    def free(self) -> None:
        """Releases the plan and its arrays (again: nothing)."""
        if self._h is not None:
            _lib.lib().collie_plan_free(self._h)
            self._h = None
            release_all(b for b in self._keep if hasattr(b, "release"))
            self._keep = []

    def __enter__(self) -> "Plan":
        return self

    def __exit__(self, et: object, ev: object, tb: object) -> Literal[False]:
        self.free()
        return False


class OutputHandle:
    """torchcomms' persistent allgather handle (all_gather_p_init(output)):
    the output array, and the timeout and keywords the init was given."""

    __slots__ = ("output", "timeout", "given")

    def __init__(self, output: TensorLike, timeout: OptTimeout, given: Dict[str, Any]) -> None:
        self.output, self.timeout, self.given = output, timeout, given


class Comm:
    """A collie communicator (torchcomms-like). Create with collie.new_comm()
    or Comm.split(); finalize() (or a with block) frees it."""

    def __init__(self, handle: int, name: str, parent: Optional[Comm]) -> None:
        self._h: Optional[int] = handle
        self._name = name
        self._lock = threading.RLock()
        self._orphans: List[Tuple[int, Optional[List[Any]]]] = []  # dropped, unfinished Works
        self._root: Comm = parent._root if parent is not None else self
        self._step: Optional[Tuple[int, int]] = None  # (step, epoch) open on this tree (kept on the root)
        L = _lib.lib()
        self._rank: int = int(L.collie_comm_rank(handle))
        self._size: int = int(L.collie_comm_size(handle))
        self._aborted = False
        self._kv: Optional[KVStore] = parent._kv if parent is not None else None
        # torchcomms' face (new_comm sets a world's; a split inherits them).
        self._backend: str = parent._backend if parent is not None else "collie"
        self._device: Optional[Device] = parent._device if parent is not None else None
        self._abort_on_error: bool = parent._abort_on_error if parent is not None else False
        self._options: CommOptions = parent._options if parent is not None else CommOptions(name=name)
        with _registry_lock:
            _live.append(self)

    # ---- identity ----

    def get_rank(self) -> int:
        """This process's rank in the communicator."""
        return self._rank

    def get_size(self) -> int:
        """Number of ranks."""
        return self._size

    def get_name(self) -> str:
        return self._name

    def get_backend(self) -> str:
        """The backend name new_comm was given ("collie", or the alias it ran)."""
        return self._backend

    def get_device(self) -> DeviceLike:
        """The device new_comm was given (a torch.device or str as passed;
        None: any memory)."""
        return None if self._device is None else self._device.given

    def get_options(self) -> CommOptions:
        """The CommOptions this communicator was made with (hints collie did
        not understand included)."""
        return self._options

    def is_aborted(self) -> bool:
        """True once abort() was called on this communicator."""
        return self._aborted

    def reconfigure(self, *args: Any, **kwargs: Any) -> NoReturn:
        """torchcomms' reconfigure(): not collie's (Unsupported)."""
        raise Unsupported("reconfigure: collie has no reconfigure(); after a failure, the survivors continue "
                          "with Comm.shrink() (docs/reliability.md)")

    def _no_hooks(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise Unsupported("torchcomms' hooks are not offered by collie; its telemetry (comms.csv, the timing "
                          "log, the flight recorder: docs/telemetry.md) records every operation")

    register_pre_hook = register_post_hook = register_abort_hook = _no_hooks

    rank = property(get_rank)
    size = property(get_size)
    name = property(get_name)

    def _failed(self, exc: CollieError) -> CollieError:
        """exc, an operation's error, to raise; with
        abort_process_on_timeout_or_error, a failure of the communication
        itself (a timeout, a peer's or the system's error) ends the process
        instead, once this rank's flight record is written (torchcomms'
        behaviour). Errors in the arguments never do."""
        if self._abort_on_error and isinstance(exc, _FATAL):
            sys.stderr.write("collie: %s: %s; abort_process_on_timeout_or_error is set: aborting the process\n"
                             % (self._name, exc))
            sys.stderr.flush()
            h = self._h
            if h is not None:
                try:
                    _lib.lib().collie_flight_dump(h)
                    _lib.lib().collie_comm_abort(h)  # the peers fail now, naming this rank
                except Exception:
                    pass
            os.abort()
        return exc

    @property
    def handle(self) -> Optional[int]:
        """The collie_comm_t * as an int (for C extensions); None once finalized."""
        return self._h

    def __repr__(self) -> str:
        state = "finalized" if self._h is None else ("aborted" if self._aborted else "live")
        return "<collie.Comm %r rank %d of %d, %s>" % (self._name, self._rank, self._size, state)

    # ---- memory ----

    def mem_alloc(self, nbytes: int) -> "ctypes.Array[ctypes.c_ubyte]":
        """nbytes of zeroed memory from collie_mem_alloc, as a writable ctypes
        byte array (wrap it with numpy.frombuffer). Over shared memory, peers
        read sends from it in place instead of through the kernel
        (docs/performance.md). Freed (collie_mem_free) when the array and
        every view of it are gone; it may outlive the communicator."""
        n = int(nbytes)
        if n <= 0:
            raise InvalidArgument("mem_alloc: nbytes must be > 0, got %r" % (nbytes,))
        ptr = _lib.lib().collie_mem_alloc(self._live_handle("mem_alloc"), n)
        if not ptr:
            raise last_error(_lib.SYSTEM_ERROR)
        buf = (ctypes.c_ubyte * n).from_address(ptr)
        weakref.finalize(buf, _lib.lib().collie_mem_free, ptr)
        return buf

    # ---- lifetime ----

    def _live_handle(self, fn: str) -> int:
        h = self._h
        if h is None:
            raise InvalidUsage("%s: communicator %r was finalized" % (fn, self._name))
        return h

    def _adopt(self, handle: int, keep: Optional[List[Any]]) -> None:
        with self._lock:
            self._orphans.append((handle, keep))

    def _sweep(self, all_done: bool = False) -> None:
        """Frees adopted Works that have finished (all of them: after destroy)."""
        if not self._orphans:
            return
        L = _lib.lib()
        left = []
        for h, keep in self._orphans:
            if all_done or L.collie_test(h) != _lib.IN_PROGRESS:
                L.collie_work_free(h)
                release_all(b for b in keep or () if hasattr(b, "release"))
            else:
                left.append((h, keep))
        self._orphans = left

    def finalize(self) -> None:
        """Frees the communicator (collie_comm_destroy): waits for its pending
        async operations (each bounded by its deadline) and, on a healthy
        communicator, for the other ranks (a closing barrier). Idempotent.
        Finalize splits before their parent."""
        global _default
        with self._lock:
            h, self._h = self._h, None
            if h is None:
                return
            try:
                check(_lib.lib().collie_comm_destroy(h))
            finally:
                self._sweep(all_done=True)
                with _registry_lock:
                    if self in _live:
                        _live.remove(self)
                    if _default is self:
                        _default = None

    destroy = finalize

    def abort(self, reason: Optional[str] = None) -> None:
        """Fails every pending operation on this communicator (and makes the
        peers' fail), never blocks; may be called from any thread. reason,
        when given, ends the peers' errors (", after: <reason>"). Later
        calls raise InvalidUsage; finalize() it afterwards."""
        h = self._h
        if h is None:
            return
        self._aborted = True
        if reason:
            check(_lib.lib().collie_comm_abort_reason(h, reason.encode("utf-8", "replace")))
        else:
            check(_lib.lib().collie_comm_abort(h))

    def __enter__(self) -> "Comm":
        return self

    def __exit__(self, et: object, ev: object, tb: object) -> Literal[False]:
        # Leaving with an exception: the peers may be waiting for this rank in
        # a collective; aborting first makes them fail now instead of at
        # their deadline.
        if et is not None and self._h is not None:
            try:
                name = getattr(et, "__name__", "an exception")
                self.abort("it left a `with` block of its communicator on %s: %s" % (name, ev))
            except Exception:
                pass
        self.finalize()
        return False

    # ---- split ----

    def split(self, ranks: Sequence[int], name: Optional[str] = None, hints: OptHints = None,
              timeout: OptTimeout = None, options: Optional[OpOptions] = None) -> Optional[Comm]:
        """A new communicator of the listed ranks (ordered as listed).
        Collective over this communicator: every rank calls it, with the
        list of its own group (torchcomms: disjoint groups, [[0, 1], [2, 3]]
        split by each rank passing its pair) or with one list that every
        rank passes alike; a rank not in its list (an empty list included)
        gets None. torchcomms' split(ranks, name, hints, timeout): hints
        and timeout are checked; the split inherits this communicator's
        settings (its timeout included). Ranks whose lists overlap without
        agreeing get InvalidUsage naming both sizes."""
        fn = "split"
        op_settings(fn, options, hints, timeout, {})  # refuses bad values, naming them
        try:
            ranks = [int(r) for r in ranks]
        except (TypeError, ValueError):
            raise InvalidArgument("split: ranks = %r must be a list of ints" % (ranks,)) from None
        for r in ranks:
            if not 0 <= r < self._size:
                raise InvalidArgument("%s: rank %d is outside 0..%d (communicator of %d)" % (fn, r, self._size - 1, self._size))
        if len(set(ranks)) != len(ranks):
            raise InvalidArgument("%s: ranks = %r lists a rank twice" % (fn, ranks))
        if self._rank not in ranks:
            return self.split_color(None, 0, name)
        # The group's lowest rank is its color: disjoint groups get distinct
        # colors, and ranks passing the same list get the same one.
        sub = self.split_color(min(ranks), ranks.index(self._rank), name)
        if sub is not None and sub.get_size() != len(ranks):
            got = sub.get_size()
            sub.abort()
            sub.finalize()
            raise InvalidUsage("split: this rank asked for the group %r but the ranks that chose its lowest rank %d "
                               "number %d: every rank of a group must pass the same list" % (ranks, min(ranks), got))
        return sub

    def split_color(self, color: Optional[int], key: Optional[int] = None,
                    name: Optional[str] = None) -> Optional[Comm]:
        """MPI_Comm_split: ranks passing the same color >= 0 form one new
        communicator, ordered by key (default: their rank here); color None
        (or COLLIE_SPLIT_NONE = -1) leaves this rank out and returns None."""
        if color is None:
            color = _lib.SPLIT_NONE
        if key is None:
            key = self._rank
        if name is None:
            name = "%s.split" % self._name
        out = ctypes.c_void_p()
        with self._lock:
            h = self._live_handle("split")
            check(_lib.lib().collie_comm_split(h, int(color), int(key), ctypes.byref(out)))
        if not out.value:
            return None
        return Comm(_handle_of(out), name, self)

    def shrink(self, exclude: Sequence[int] = (), timeout: Optional[float] = None,
               name: Optional[str] = None) -> Comm:
        """Shrink and continue (collie_comm_shrink): after an operation failed
        (a peer died or froze), every surviving rank calls this and gets a new
        communicator of the ranks still alive, in the old order; this one is
        not used again (finalize it). On a healthy communicator, exclude lists
        ranks to leave out (the same list everywhere; they do not call).
        timeout (seconds; None: the communicator's) bounds the wait for a
        rank that neither calls nor is found dead (frozen, or on a lost host).
        Raises RemoteError when this rank was left out, Timeout when the
        decision never came or a member died after it (shrink again)."""
        try:
            exclude = [int(r) for r in exclude]
        except (TypeError, ValueError):
            raise InvalidArgument("shrink: exclude = %r must be a list of ints" % (exclude,)) from None
        if timeout is None:
            tmo = -1
        else:
            if not isinstance(timeout, (int, float)) or timeout < 0:
                raise InvalidArgument("shrink: timeout = %r must be a number of seconds >= 0 (or None)" % (timeout,))
            tmo = int(timeout * 1000)
        if name is None:
            name = "%s.shrink" % self._name
        arr = (ctypes.c_int * max(1, len(exclude)))(*exclude)
        out = ctypes.c_void_p()
        with self._lock:
            h = self._live_handle("shrink")
            check(_lib.lib().collie_comm_shrink(h, arr, len(exclude), tmo, ctypes.byref(out)))
        return Comm(_handle_of(out), name, self)

    # ---- issuing ----

    def _issue(self, cfn: Any, args: Sequence[Any], opts: Any, async_op: bool, keep: List[Any],
               post: Optional[Callable[[], None]]) -> Work:
        with self._lock:
            h = self._live_handle(cfn.__name__)
            self._sweep()
            optp = ctypes.byref(opts) if opts is not None else None
            if async_op:
                w = ctypes.c_void_p()
                rc = cfn(h, *args, optp, ctypes.byref(w))
            else:
                rc = cfn(h, *args, optp, None)
            if rc != _lib.SUCCESS:
                raise self._failed(last_error(rc))
        if async_op and post is not None and opts is not None and opts.cuda_stream and _capturing():
            # Captured: the list form's copy out must be captured after the
            # call, in the graph, not run when the Work completes (at once).
            post()
            post = None
        if async_op:
            return Work(self, w.value, keep, post)
        try:
            if post is not None:
                post()
        finally:
            release_all(b for b in keep if hasattr(b, "release"))
        return Work(self, None, None)

    def _plan(self, cfn: Any, args: Sequence[Any], opts: Any, keep: List[Any]) -> Plan:
        with self._lock:
            h = self._live_handle(cfn.__name__)
            optp = ctypes.byref(opts) if opts is not None else None
            p = ctypes.c_void_p()
            rc = cfn(h, *args, optp, ctypes.byref(p))
            if rc != _lib.SUCCESS:
                raise last_error(rc)
        return Plan(self, p.value, keep)

    def _call(self, fn: str, async_op: bool = False, timeout: OptTimeout = None, hints: HintsOrTimeout = None,
              options: Optional[OpOptions] = None, category: CategoryLike = None, label: Optional[str] = None,
              phase: Optional[str] = None, algorithm: AlgorithmLike = None, wire: WireLike = None) -> _Call:
        if timeout is None and _is_timeout(hints):
            hints, timeout = None, hints  # collie's first order: timeout where torchcomms has hints
        timeout, given = op_settings(fn, options, hints, timeout, {
            "category": category, "label": label, "phase": phase, "algorithm": algorithm, "wire": wire})
        return _Call(self, fn, async_op, timeout, **given)

    # ---- collectives ----
    # Common keyword arguments: async_op (return at once; wait on the Work),
    # timeout (timedelta or seconds; None: the communicator's), and the
    # telemetry options category (PayloadCategory, default OTHER), label
    # (layer or bucket name), phase ("dense", ...), plus algorithm ("ring",
    # ...; None: the cost model picks). all_reduce also takes wire
    # ("float16", "bfloat16", "native"; None: the communicator's default,
    # hints={"wire": ...} at new_comm): float32 SUM/AVG sent as 16-bit floats,
    # summed in float32 (docs/compression.md).

    def all_reduce(self, tensor: TensorLike, op: OpLike = ReduceOp.SUM, async_op: bool = False,
                   hints: HintsOrTimeout = None, timeout: OptTimeout = None, *, options: Optional[OpOptions] = None,
                   category: CategoryLike = None, label: Optional[str] = None, phase: Optional[str] = None,
                   algorithm: AlgorithmLike = None, wire: WireLike = None) -> Work:
        """tensor = op over ranks of tensor, in place, on every rank. wire=
        "float16" or "bfloat16" sends a float32 SUM/AVG as 16-bit floats
        (docs/compression.md)."""
        with self._call("all_reduce", async_op, timeout, hints, options, category, label, phase, algorithm, wire) as c:
            op, src = c.premul(op, tensor, "tensor")
            t = c.buf(tensor, "tensor", out=True)
            s = t if src is tensor else c.buf(src, "tensor")
            return c.run(_lib.lib().collie_allreduce, s.ptr, t.ptr, t.count, t.dtype, op)

    def new_window(self, array: Optional[TensorLike] = None) -> Window:
        """A one-sided window over array (collective: every rank calls it,
        each with its own array of one dtype); see collie.Window. Without
        array (torchcomms' form), the window takes one with
        tensor_register(tensor), collectively too."""
        from ._window import Window

        return Window(self, array)

    def sparse_all_reduce(self, indices: Any, values: TensorLike, dim: int, mode: str = "topk_allgather",
                          timeout: OptTimeout = None, *, options: Optional[OpOptions] = None,
                          category: CategoryLike = None, label: Optional[str] = None, phase: Optional[str] = None,
                          algorithm: AlgorithmLike = None) -> Tuple[Any, Any]:
        """Sparse allreduce (docs/sparse.md): this rank's nnz (index, value)
        pairs of a vector of dim elements (the same nnz on every rank;
        float32 or float64 values). Returns (indices, values), numpy arrays
        sorted by index, the same on every rank. mode "topk_allgather"
        (exact: the union, values of one index summed) or "gtopk" (gTop-k:
        at most nnz entries, the largest magnitudes kept at every merge).
        Blocking. Index bytes go to comms.csv's bytes_topr_indices."""
        import numpy as np

        modes = {"topk_allgather": 0, "allgather": 0, "topk": 0, "gtopk": 1}
        if mode not in modes:
            raise InvalidArgument(
                "sparse_all_reduce: mode = %r is not one of topk_allgather, gtopk" % (mode,))
        with self._call("sparse_all_reduce", False, timeout, None, options, category, label, phase, algorithm) as c:
            v = c.buf(values, "values")
            idx = np.ascontiguousarray(np.asarray(indices), dtype=np.int64).reshape(-1)
            if idx.size != v.count:
                raise InvalidArgument(
                    "sparse_all_reduce: indices has %d elements, values %d (one index per value)"
                    % (idx.size, v.count))
            if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 0:
                raise InvalidArgument("sparse_all_reduce: dim = %r must be an int >= 0" % (dim,))
            cap = v.count if modes[mode] == 1 else v.count * self._size
            names = [d[0] for d in _lib.DTYPES]
            vtype = {names.index("float32"): np.float32, names.index("float64"): np.float64}.get(v.dtype)
            out_i = np.empty(max(cap, 1), dtype=np.int64)
            out_v = np.empty(max(cap, 1), dtype=vtype if vtype is not None else np.float32)
            nout = ctypes.c_size_t(0)
            c.hold((idx, out_i, out_v, nout))
            c.run(_lib.lib().collie_sparse_allreduce, modes[mode], idx.ctypes.data, v.ptr, v.count, int(dim),
                  out_i.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)), out_v.ctypes.data, cap, ctypes.byref(nout),
                  v.dtype)
        n = nout.value
        return out_i[:n].copy(), out_v[:n].copy()

    def all_gather(self, output_list: TensorList, tensor: TensorLike, async_op: bool = False,
                   hints: HintsOrTimeout = None, timeout: OptTimeout = None, *, options: Optional[OpOptions] = None,
                   category: CategoryLike = None, label: Optional[str] = None, phase: Optional[str] = None,
                   algorithm: AlgorithmLike = None) -> Work:
        """output_list[q] = rank q's tensor (size arrays like tensor)."""
        with self._call("all_gather", async_op, timeout, hints, options, category, label, phase, algorithm) as c:
            t = c.buf(tensor, "tensor")
            outs = c.bufs(output_list, "output_list", out=True, n=self._size)
            c.blocks_like(outs, "output_list", t, "tensor")
            if contiguous_run(outs):
                base = outs[0].ptr
                _span(c, t, "tensor", base, t.nbytes * self._size, base + self._rank * t.nbytes,
                      "tensor must be output_list[rank]")
                return c.run(_lib.lib().collie_allgather, t.ptr, base, t.count, t.dtype)
            st = c.hold(Staging(t.count * self._size, t.dtype, like=t, items=outs))
            return c.run(_lib.lib().collie_allgather, t.ptr, st.ptr, t.count, t.dtype,
                         post=lambda: st.copy_out(outs))

    def all_gather_single(self, output: TensorLike, input: TensorLike, async_op: bool = False,
                          hints: HintsOrTimeout = None, timeout: OptTimeout = None, *,
                          options: Optional[OpOptions] = None, category: CategoryLike = None,
                          label: Optional[str] = None, phase: Optional[str] = None,
                          algorithm: AlgorithmLike = None) -> Work:
        """output (size x input's elements) = every rank's input, in rank order.
        In place: input is output's block `rank`."""
        with self._call("all_gather_single", async_op, timeout, hints, options, category, label, phase, algorithm) as c:
            i = c.buf(input, "input")
            o = c.buf(output, "output", out=True)
            c.same_dtype(o, "output", i, "input")
            c.count_is(o, "output", i.count * self._size, "size x input's %d" % i.count)
            c.no_alias(i, "input", o, "output", o.ptr + self._rank * i.nbytes, "input must be output's block rank")
            return c.run(_lib.lib().collie_allgather, i.ptr, o.ptr, i.count, i.dtype)

    # ---- persistent collectives (collie_*_init; torchcomms' *_p_init) ----
    # Each makes a Plan on the arrays given, checked as the plain call checks
    # them; plan.start() runs it (the *_p_exec and *_p_free methods are
    # torchcomms' spelling of start() and free()).

    def all_reduce_p_init(self, tensor: TensorLike, op: OpLike = ReduceOp.SUM, *, hints: OptHints = None,
                          timeout: OptTimeout = None, options: Optional[OpOptions] = None,
                          category: CategoryLike = None, label: Optional[str] = None, phase: Optional[str] = None,
                          algorithm: AlgorithmLike = None) -> Plan:
        with self._call("all_reduce_p_init", False, timeout, hints, options, category, label, phase, algorithm) as c:
            op = to_op(op)
            t = c.buf(tensor, "tensor", out=True)
            return c.plan(_lib.lib().collie_allreduce_init, t.ptr, t.ptr, t.count, t.dtype, op)

    def all_gather_p_init(self, output: TensorLike, input: Optional[TensorLike] = None, hints: OptHints = None,
                          timeout: OptTimeout = None, *, options: Optional[OpOptions] = None,
                          category: CategoryLike = None, label: Optional[str] = None, phase: Optional[str] = None,
                          algorithm: AlgorithmLike = None) -> Union[Plan, "OutputHandle"]:
        """output (size x input's elements) = every rank's input, per start.
        torchcomms' form gives only output (all_gather_p_init(output)) and
        the input to each all_gather_p_exec(handle, input, async_op): then
        the handle is the output and each exec is an all_gather_single."""
        kw = {"category": category, "label": label, "phase": phase, "algorithm": algorithm}
        if input is None:
            timeout, given = op_settings("all_gather_p_init", options, hints, timeout, kw)
            return OutputHandle(output, timeout, given)
        with self._call("all_gather_p_init", False, timeout, hints, options, category, label, phase, algorithm) as c:
            i = c.buf(input, "input")
            o = c.buf(output, "output", out=True)
            c.same_dtype(o, "output", i, "input")
            c.count_is(o, "output", i.count * self._size, "size x input's %d" % i.count)
            return c.plan(_lib.lib().collie_allgather_init, i.ptr, o.ptr, i.count, i.dtype)

    def reduce_scatter_p_init(self, output: TensorLike, input: TensorLike, op: OpLike = ReduceOp.SUM, *,
                              hints: OptHints = None, timeout: OptTimeout = None, options: Optional[OpOptions] = None,
                              category: CategoryLike = None, label: Optional[str] = None, phase: Optional[str] = None,
                              algorithm: AlgorithmLike = None) -> Plan:
        """output = op over ranks of input's block rank, per start."""
        with self._call("reduce_scatter_p_init", False, timeout, hints, options, category, label, phase, algorithm) as c:
            op = to_op(op)
            i = c.buf(input, "input")
            o = c.buf(output, "output", out=True)
            c.same_dtype(o, "output", i, "input")
            c.count_is(i, "input", o.count * self._size, "size x output's %d" % o.count)
            return c.plan(_lib.lib().collie_reduce_scatter_init, i.ptr, o.ptr, o.count, o.dtype, op)

    def broadcast_p_init(self, tensor: TensorLike, root: int, *, hints: OptHints = None, timeout: OptTimeout = None,
                         options: Optional[OpOptions] = None, category: CategoryLike = None,
                         label: Optional[str] = None, phase: Optional[str] = None,
                         algorithm: AlgorithmLike = None) -> Plan:
        with self._call("broadcast_p_init", False, timeout, hints, options, category, label, phase, algorithm) as c:
            t = c.buf(tensor, "tensor", out=True)
            return c.plan(_lib.lib().collie_broadcast_init, t.ptr, t.count, t.dtype, int(root))

    def all_to_all_p_init(self, output: TensorLike, input: TensorLike, *, hints: OptHints = None,
                          timeout: OptTimeout = None, options: Optional[OpOptions] = None,
                          category: CategoryLike = None, label: Optional[str] = None, phase: Optional[str] = None,
                          algorithm: AlgorithmLike = None) -> Plan:
        with self._call("all_to_all_p_init", False, timeout, hints, options, category, label, phase, algorithm) as c:
            i = c.buf(input, "input")
            o = c.buf(output, "output", out=True)
            c.same_dtype(o, "output", i, "input")
            c.count_is(o, "output", i.count, "input's %d" % i.count)
            if i.count % self._size:
                raise InvalidArgument("all_to_all_p_init: input's %d elements do not split into %d blocks"
                                      % (i.count, self._size))
            return c.plan(_lib.lib().collie_alltoall_init, i.ptr, o.ptr, i.count // self._size, i.dtype)

    def all_gather_p_exec(self, plan: Union[Plan, "OutputHandle"], input: Union[TensorLike, bool, None] = None,
                          async_op: bool = False, hints: OptHints = None, timeout: OptTimeout = None, *,
                          options: Optional[OpOptions] = None) -> Work:
        """Runs a persistent allgather: plan.start(async_op) for a Plan of
        all_gather_p_init(output, input); for torchcomms' handle (made from
        output alone), an all_gather_single(output, input) with the settings
        of the init (this call's win). collie's first form,
        all_gather_p_exec(plan, async_op), still works."""
        if isinstance(plan, OutputHandle):
            if input is None or isinstance(input, bool):
                raise InvalidArgument("all_gather_p_exec: torchcomms' handle needs the input array")
            tmo, given = op_settings("all_gather_p_exec", options, hints, timeout, {})
            kw = dict(plan.given)
            kw.update({k: v for k, v in given.items() if v is not None})
            return self.all_gather_single(plan.output, input, async_op, None,
                                          tmo if tmo is not None else plan.timeout, category=kw.get("category"),
                                          label=kw.get("label"), phase=kw.get("phase"),
                                          algorithm=kw.get("algorithm"))
        if not isinstance(plan, Plan):
            raise InvalidArgument("all_gather_p_exec: handle = %r is not one all_gather_p_init made" % (plan,))
        if isinstance(input, bool):
            async_op = input  # collie's first order: (plan, async_op)
        elif input is not None:
            raise InvalidArgument("all_gather_p_exec: this plan was made on its input; call it without one")
        return plan.start(async_op)

    def all_gather_p_free(self, plan: Union[Plan, "OutputHandle"]) -> None:
        if isinstance(plan, Plan):
            plan.free()

    def all_gather_v(self, output_list: TensorList, tensor: TensorLike, async_op: bool = False,
                     hints: HintsOrTimeout = None, timeout: OptTimeout = None, *, options: Optional[OpOptions] = None,
                     category: CategoryLike = None, label: Optional[str] = None, phase: Optional[str] = None,
                     algorithm: AlgorithmLike = None) -> Work:
        """output_list[q] = rank q's tensor, whose sizes may differ per rank;
        output_list[rank] must have tensor's size."""
        with self._call("all_gather_v", async_op, timeout, hints, options, category, label, phase, algorithm) as c:
            t = c.buf(tensor, "tensor")
            outs = c.bufs(output_list, "output_list", out=True, n=self._size)
            for q, o in enumerate(outs):
                c.same_dtype(o, "output_list[%d]" % q, t, "tensor")
            if outs[self._rank].count != t.count:
                raise InvalidArgument(
                    "all_gather_v: output_list[%d] has %d elements but tensor has %d (this rank's block)"
                    % (self._rank, outs[self._rank].count, t.count)
                )
            counts = [o.count for o in outs]
            displs = _prefix(counts)
            cp, dp = c.sizes(counts), c.sizes(displs)
            if contiguous_run(outs):
                base = outs[0].ptr
                _span(c, t, "tensor", base, sum(o.nbytes for o in outs), outs[self._rank].ptr,
                      "tensor must be output_list[rank]")
                return c.run(_lib.lib().collie_allgatherv, t.ptr, t.count, base, cp, dp, t.dtype)
            st = c.hold(Staging(sum(counts), t.dtype, like=t, items=outs))
            return c.run(_lib.lib().collie_allgatherv, t.ptr, t.count, st.ptr, cp, dp, t.dtype,
                         post=lambda: st.copy_out(outs))

    def reduce_scatter(self, output: TensorLike, input_list: TensorList, op: OpLike = ReduceOp.SUM,
                       async_op: bool = False, hints: HintsOrTimeout = None, timeout: OptTimeout = None, *,
                       options: Optional[OpOptions] = None, category: CategoryLike = None, label: Optional[str] = None,
                       phase: Optional[str] = None, algorithm: AlgorithmLike = None) -> Work:
        """output = op over ranks of their input_list[rank] (size arrays like output)."""
        with self._call("reduce_scatter", async_op, timeout, hints, options, category, label, phase, algorithm) as c:
            if isinstance(op, PremulSum):
                input_list = [c.premul(op, x, "input_list[%d]" % q)[1] for q, x in enumerate(input_list)]
            op = to_op(ReduceOp.SUM if isinstance(op, PremulSum) else op)
            o = c.buf(output, "output", out=True)
            ins = c.bufs(input_list, "input_list", n=self._size)
            c.blocks_like(ins, "input_list", o, "output")
            if contiguous_run(ins):
                base = ins[0].ptr
                _span(c, o, "output", base, o.nbytes * self._size, base + self._rank * o.nbytes,
                      "output must be input_list[rank]")
                return c.run(_lib.lib().collie_reduce_scatter, base, o.ptr, o.count, o.dtype, op)
            st = c.hold(Staging(o.count * self._size, o.dtype, like=o, items=ins))
            st.copy_in(ins)
            return c.run(_lib.lib().collie_reduce_scatter, st.ptr, o.ptr, o.count, o.dtype, op)

    def reduce_scatter_single(self, output: TensorLike, input: TensorLike, op: OpLike = ReduceOp.SUM,
                              async_op: bool = False, hints: HintsOrTimeout = None, timeout: OptTimeout = None, *,
                              options: Optional[OpOptions] = None, category: CategoryLike = None,
                              label: Optional[str] = None, phase: Optional[str] = None,
                              algorithm: AlgorithmLike = None) -> Work:
        """output = op over ranks of block `rank` of input (size x output's
        elements). In place: output is input's block rank."""
        with self._call("reduce_scatter_single", async_op, timeout, hints, options, category, label, phase, algorithm) as c:
            op, input = c.premul(op, input, "input")
            o = c.buf(output, "output", out=True)
            i = c.buf(input, "input")
            c.same_dtype(o, "output", i, "input")
            c.count_is(i, "input", o.count * self._size, "size x output's %d" % o.count)
            c.no_alias(o, "output", i, "input", i.ptr + self._rank * o.nbytes, "output must be input's block rank")
            return c.run(_lib.lib().collie_reduce_scatter, i.ptr, o.ptr, o.count, o.dtype, op)

    def broadcast(self, tensor: TensorLike, root: int, async_op: bool = False, hints: HintsOrTimeout = None,
                  timeout: OptTimeout = None, *, options: Optional[OpOptions] = None, category: CategoryLike = None,
                  label: Optional[str] = None, phase: Optional[str] = None, algorithm: AlgorithmLike = None) -> Work:
        """Every rank's tensor = root's tensor, in place."""
        with self._call("broadcast", async_op, timeout, hints, options, category, label, phase, algorithm) as c:
            root = _int(root, "broadcast: root")
            t = c.buf(tensor, "tensor", out=(root != self._rank))
            return c.run(_lib.lib().collie_broadcast, t.ptr, t.count, t.dtype, root)

    def reduce(self, tensor: TensorLike, root: int, op: OpLike = ReduceOp.SUM, async_op: bool = False,
               hints: HintsOrTimeout = None, timeout: OptTimeout = None, *, options: Optional[OpOptions] = None,
               category: CategoryLike = None, label: Optional[str] = None, phase: Optional[str] = None,
               algorithm: AlgorithmLike = None) -> Work:
        """Root's tensor = op over ranks of tensor, in place; other ranks'
        tensors are left unchanged."""
        with self._call("reduce", async_op, timeout, hints, options, category, label, phase, algorithm) as c:
            op, src = c.premul(op, tensor, "tensor")
            root = _int(root, "reduce: root")
            at_root = root == self._rank
            t = c.buf(tensor, "tensor", out=at_root)
            s = t if src is tensor else c.buf(src, "tensor")
            return c.run(_lib.lib().collie_reduce, s.ptr, t.ptr if at_root else None, t.count, t.dtype, op, root)

    def all_to_all_single(self, output: TensorLike, input: TensorLike, async_op: bool = False,
                          hints: HintsOrTimeout = None, timeout: OptTimeout = None, *,
                          options: Optional[OpOptions] = None, category: CategoryLike = None,
                          label: Optional[str] = None, phase: Optional[str] = None,
                          algorithm: AlgorithmLike = None) -> Work:
        """Block q of input goes to rank q, landing in its output block `rank`
        (input and output of equal size, divisible by the size). In place:
        output is input."""
        with self._call("all_to_all_single", async_op, timeout, hints, options, category, label, phase, algorithm) as c:
            i = c.buf(input, "input")
            o = c.buf(output, "output", out=True)
            c.same_dtype(o, "output", i, "input")
            c.count_is(o, "output", i.count, "as many as input")
            if i.count % self._size:
                raise InvalidArgument(
                    "all_to_all_single: input has %d elements, not a multiple of the size %d" % (i.count, self._size)
                )
            c.no_alias(i, "input", o, "output", o.ptr, "output must be input itself")
            return c.run(_lib.lib().collie_alltoall, i.ptr, o.ptr, i.count // self._size, i.dtype)

    def all_to_all(self, output_tensor_list: TensorList, input_tensor_list: TensorList, async_op: bool = False,
                   hints: HintsOrTimeout = None, timeout: OptTimeout = None, *, options: Optional[OpOptions] = None,
                   category: CategoryLike = None, label: Optional[str] = None, phase: Optional[str] = None,
                   algorithm: AlgorithmLike = None) -> Work:
        """output_tensor_list[q] = rank q's input_tensor_list[rank] (torchcomms'
        list form; one dtype, sizes may differ per block as long as each
        pair of ranks agrees). Zero-copy when each list's arrays lie back to
        back in rank order; otherwise staged through one block each way."""
        with self._call("all_to_all", async_op, timeout, hints, options, category, label, phase, algorithm) as c:
            ins = c.bufs(input_tensor_list, "input_tensor_list", n=self._size)
            outs = c.bufs(output_tensor_list, "output_tensor_list", out=True, n=self._size)
            for q in range(self._size):
                c.same_dtype(ins[q], "input_tensor_list[%d]" % q, ins[0], "input_tensor_list[0]")
                c.same_dtype(outs[q], "output_tensor_list[%d]" % q, ins[0], "input_tensor_list[0]")
            if ins[self._rank].count != outs[self._rank].count:
                raise InvalidArgument(
                    "all_to_all: input_tensor_list[%d] has %d elements but output_tensor_list[%d] has %d "
                    "(the block a rank keeps for itself has one size)"
                    % (self._rank, ins[self._rank].count, self._rank, outs[self._rank].count))
            sc, rcn = [b.count for b in ins], [b.count for b in outs]
            for a in ins:
                for b in outs:
                    c.no_alias(b, "output_tensor_list", a, "input_tensor_list")
            dt = ins[0].dtype
            if contiguous_run(ins):
                src = ins[0].ptr
            else:
                st_in = c.hold(Staging(sum(sc), dt, like=ins[0], items=ins))
                st_in.copy_in(ins)
                src = st_in.ptr
            post = None
            if contiguous_run(outs):
                dst = outs[0].ptr
            else:
                st_out = c.hold(Staging(sum(rcn), dt, like=outs[0], items=outs))
                dst = st_out.ptr
                post = lambda: st_out.copy_out(outs)  # noqa: E731
            return c.run(_lib.lib().collie_alltoallv, src, c.sizes(sc), c.sizes(_prefix(sc)), dst,
                         c.sizes(rcn), c.sizes(_prefix(rcn)), dt, post=post)

    def all_to_all_v_single(self, output: TensorLike, input: TensorLike,
                            output_split_sizes: Optional[Sequence[int]] = None,
                            input_split_sizes: Optional[Sequence[int]] = None, async_op: bool = False,
                            hints: HintsOrTimeout = None, timeout: OptTimeout = None, *,
                            options: Optional[OpOptions] = None, category: CategoryLike = None,
                            label: Optional[str] = None, phase: Optional[str] = None,
                            algorithm: AlgorithmLike = None) -> Work:
        """As torch's all_to_all_single with split sizes: input_split_sizes[q]
        rows (first-dimension slices) of input go to rank q, and
        output_split_sizes[q] rows from rank q land in output, in rank order.
        None: equal splits. In place: output is input (equal splits)."""
        with self._call("all_to_all_v_single", async_op, timeout, hints, options, category, label, phase, algorithm) as c:
            i = c.buf(input, "input")
            o = c.buf(output, "output", out=True)
            c.same_dtype(o, "output", i, "input")
            irows, irow = _rows(i, "input")
            orows, orow = _rows(o, "output")
            if irow != orow and i.count and o.count:
                raise InvalidArgument(
                    "all_to_all_v_single: a row of input has %d elements but a row of output has %d" % (irow, orow)
                )
            row = irow or orow
            isp = _splits(input_split_sizes, irows, self._size, "input_split_sizes", "input")
            osp = _splits(output_split_sizes, orows, self._size, "output_split_sizes", "output")
            if isp[self._rank] != osp[self._rank]:
                raise InvalidArgument(
                    "all_to_all_v_single: input_split_sizes[%d] = %d differs from output_split_sizes[%d] = %d "
                    "(the block a rank keeps for itself has one size)" % (self._rank, isp[self._rank], self._rank, osp[self._rank])
                )
            sc = [n * row for n in isp]
            rcn = [n * row for n in osp]
            c.no_alias(i, "input", o, "output", o.ptr if sc == rcn else None, "output must be input itself, with equal splits")
            return c.run(_lib.lib().collie_alltoallv, i.ptr, c.sizes(sc), c.sizes(_prefix(sc)), o.ptr,
                         c.sizes(rcn), c.sizes(_prefix(rcn)), i.dtype)

    def gather(self, output_list: Optional[TensorList], tensor: TensorLike, root: int, async_op: bool = False,
               hints: HintsOrTimeout = None, timeout: OptTimeout = None, *, options: Optional[OpOptions] = None,
               category: CategoryLike = None, label: Optional[str] = None, phase: Optional[str] = None,
               algorithm: AlgorithmLike = None) -> Work:
        """Root's output_list[q] = rank q's tensor; output_list is ignored
        (may be None) on other ranks."""
        with self._call("gather", async_op, timeout, hints, options, category, label, phase, algorithm) as c:
            root = _int(root, "gather: root")
            t = c.buf(tensor, "tensor")
            if root != self._rank:
                return c.run(_lib.lib().collie_gather, t.ptr, None, t.count, t.dtype, root)
            outs = c.bufs(output_list, "output_list", out=True, n=self._size)
            c.blocks_like(outs, "output_list", t, "tensor")
            if contiguous_run(outs):
                base = outs[0].ptr
                _span(c, t, "tensor", base, t.nbytes * self._size, base + root * t.nbytes,
                      "tensor must be output_list[root]")
                return c.run(_lib.lib().collie_gather, t.ptr, base, t.count, t.dtype, root)
            st = c.hold(Staging(t.count * self._size, t.dtype, like=t, items=outs))
            return c.run(_lib.lib().collie_gather, t.ptr, st.ptr, t.count, t.dtype, root,
                         post=lambda: st.copy_out(outs))

    def gather_single(self, output: Optional[TensorLike], input: TensorLike, root: int, async_op: bool = False,
                      hints: HintsOrTimeout = None, timeout: OptTimeout = None, *, options: Optional[OpOptions] = None,
                      category: CategoryLike = None, label: Optional[str] = None, phase: Optional[str] = None,
                      algorithm: AlgorithmLike = None) -> Work:
        """Root's output (size x input's elements) = every rank's input, in
        rank order; output is ignored (may be None) on other ranks."""
        with self._call("gather_single", async_op, timeout, hints, options, category, label, phase, algorithm) as c:
            root = _int(root, "gather_single: root")
            i = c.buf(input, "input")
            if root != self._rank:
                return c.run(_lib.lib().collie_gather, i.ptr, None, i.count, i.dtype, root)
            if output is None:
                raise InvalidArgument("gather_single: output is None at the root (rank %d)" % root)
            o = c.buf(output, "output", out=True)
            c.same_dtype(o, "output", i, "input")
            c.count_is(o, "output", i.count * self._size, "size x input's %d" % i.count)
            c.no_alias(i, "input", o, "output", o.ptr + root * i.nbytes, "input must be output's block root")
            return c.run(_lib.lib().collie_gather, i.ptr, o.ptr, i.count, i.dtype, root)

    def scatter(self, output: TensorLike, input_list: Optional[TensorList], root: int, async_op: bool = False,
                hints: HintsOrTimeout = None, timeout: OptTimeout = None, *, options: Optional[OpOptions] = None,
                category: CategoryLike = None, label: Optional[str] = None, phase: Optional[str] = None,
                algorithm: AlgorithmLike = None) -> Work:
        """output = root's input_list[rank]; input_list is ignored (may be
        None) on other ranks."""
        with self._call("scatter", async_op, timeout, hints, options, category, label, phase, algorithm) as c:
            root = _int(root, "scatter: root")
            o = c.buf(output, "output", out=True)
            if root != self._rank:
                return c.run(_lib.lib().collie_scatter, None, o.ptr, o.count, o.dtype, root)
            ins = c.bufs(input_list, "input_list", n=self._size)
            c.blocks_like(ins, "input_list", o, "output")
            if contiguous_run(ins):
                base = ins[0].ptr
                _span(c, o, "output", base, o.nbytes * self._size, base + root * o.nbytes,
                      "output must be input_list[root]")
                return c.run(_lib.lib().collie_scatter, base, o.ptr, o.count, o.dtype, root)
            st = c.hold(Staging(o.count * self._size, o.dtype, like=o, items=ins))
            st.copy_in(ins)
            return c.run(_lib.lib().collie_scatter, st.ptr, o.ptr, o.count, o.dtype, root)

    def barrier(self, async_op: bool = False, hints: HintsOrTimeout = None, timeout: OptTimeout = None, *,
                options: Optional[OpOptions] = None, category: CategoryLike = None, label: Optional[str] = None,
                phase: Optional[str] = None, algorithm: AlgorithmLike = None) -> Work:
        """Returns once every rank has entered the barrier."""
        with self._call("barrier", async_op, timeout, hints, options, category, label, phase, algorithm) as c:
            return c.run(_lib.lib().collie_barrier)

    def send(self, tensor: TensorLike, dst: int, async_op: bool = False, hints: OptHints = None,
             timeout: OptTimeout = None, *, tag: int = 0, options: Optional[OpOptions] = None,
             category: CategoryLike = None, label: Optional[str] = None, phase: Optional[str] = None,
             algorithm: AlgorithmLike = None) -> Work:
        """Sends tensor to rank dst; matches dst's recv(…, src=this rank, tag)
        in issue order. A blocking send may wait for the matching recv.
        torchcomms' order (tensor, dst, async_op, hints, timeout); collie's
        first one, (tensor, dst, tag, async_op, timeout), still works: an int
        that is not a bool third is the tag."""
        tag, async_op, hints = _p2p_order(tag, async_op, hints)
        with self._call("send", async_op, timeout, hints, options, category, label, phase, algorithm) as c:
            t = c.buf(tensor, "tensor")
            return c.run(_lib.lib().collie_send, t.ptr, t.count, t.dtype, _int(dst, "send: dst"), _int(tag, "send: tag"))

    def recv(self, tensor: TensorLike, src: Optional[int], async_op: bool = False, hints: OptHints = None,
             timeout: OptTimeout = None, *, tag: int = 0, options: Optional[OpOptions] = None,
             category: CategoryLike = None, label: Optional[str] = None, phase: Optional[str] = None,
             algorithm: AlgorithmLike = None) -> Work:
        """Receives into tensor the first message from rank src with tag
        (its size must equal the tensor's). src None: from any rank
        (collie_recv_any); the Work's source_rank() says which (once
        complete). Argument orders as send's."""
        tag, async_op, hints = _p2p_order(tag, async_op, hints)
        with self._call("recv", async_op, timeout, hints, options, category, label, phase, algorithm) as c:
            t = c.buf(tensor, "tensor", out=True)
            if src is None:
                box = c.hold(ctypes.c_int(-1))
                w = c.run(_lib.need("collie_recv_any"), t.ptr, t.count, t.dtype, _int(tag, "recv: tag"),
                          ctypes.byref(box))
                w._src = box
                return w
            return c.run(_lib.lib().collie_recv, t.ptr, t.count, t.dtype, _int(src, "recv: src"), _int(tag, "recv: tag"))

    def batch_op_create(self) -> BatchSendRecv:
        """A batch of sends and receives that progress together
        (collie_group_start/end): .send(t, dst), .recv(t, src), .issue()."""
        return BatchSendRecv(self)

    # ---- telemetry ----

    def step_begin(self, step: int, epoch: int = 0) -> None:
        """Opens training step `step` (>= 1) of `epoch` (>= 0) for comms.csv:
        operations issued until step_end() on this communicator's tree are
        accounted to it (rank 0 writes the row). Local."""
        step, epoch = _int(step, "step_begin: step"), _int(epoch, "step_begin: epoch")
        with self._lock:
            check(_lib.need("collie_step_begin")(self._live_handle("step_begin"), step, epoch))
        self._root._step = (step, epoch)

    def step_end(self) -> None:
        """Closes the open step (its row is written once its operations completed)."""
        with self._lock:
            check(_lib.need("collie_step_end")(self._live_handle("step_end")))
        self._root._step = None

    @contextlib.contextmanager
    def step(self, step: int, epoch: int = 0) -> Iterator["Comm"]:
        """with comm.step(step, epoch): ... (step_begin / step_end)."""
        self.step_begin(step, epoch)
        try:
            yield self
        finally:
            self.step_end()

    @property
    def current_step(self) -> Optional[Tuple[int, int]]:
        """(step, epoch) opened through this binding on this tree, or None."""
        return self._root._step

    def timing_open(self, log_dir: Union[str, "os.PathLike[str]"]) -> None:
        """Opens the tree's timing log: log_dir/timing-rank{i}.csv (created
        with its parents)."""
        with self._lock:
            check(_lib.need("collie_timing_open")(self._live_handle("timing_open"), os.fsencode(log_dir)))

    def timing_flush(self) -> None:
        with self._lock:
            check(_lib.need("collie_timing_flush")(self._live_handle("timing_flush")))

    def timing_close(self) -> None:
        with self._lock:
            check(_lib.need("collie_timing_close")(self._live_handle("timing_close")))

    def timing_record(self, operation: str, start: float, end: float, layer_name: Optional[str] = None,
                      phase: Optional[str] = None, message_size: int = 0) -> None:
        """Queues a user-timed region (monotonic seconds, time.monotonic())
        for the timing log; never blocks; no log open: does nothing."""
        rec = _lib.TimingRec()
        rec.operation = str(operation).encode()
        rec.layer_name = None if layer_name is None else str(layer_name).encode()
        rec.phase = None if phase is None else str(phase).encode()
        rec.message_size_bytes = int(message_size)
        rec.start_counter = float(start)
        rec.end_counter = float(end)
        h = self._live_handle("timing_record")
        check(_lib.need("collie_timing_record")(h, ctypes.byref(rec)))

    def flight_dump(self) -> None:
        """Writes this rank's flight recorder to COLLIE_LOG_DIR (local)."""
        check(_lib.need("collie_flight_dump")(self._live_handle("flight_dump")))


class BatchSendRecv:
    """Sends and receives recorded now and posted together by issue(), so a
    ring exchange cannot deadlock whatever the sizes (NCCL groups)."""

    def __init__(self, comm: Comm) -> None:
        self._comm = comm
        self._ops: List[Tuple[bool, Buf, int, int]] = []  # (is_send, Buf, peer, tag)
        self._issued = False

    def _add(self, is_send: bool, tensor: TensorLike, peer: int, tag: int) -> "BatchSendRecv":
        if self._issued:
            raise InvalidUsage("batch: already issued; create a new one with batch_op_create()")
        fn = "batch.send" if is_send else "batch.recv"
        peer = _int(peer, fn + ": peer")
        tag = _int(tag, fn + ": tag")
        if not 0 <= peer < self._comm._size:
            raise InvalidArgument("%s: peer = %d is outside 0..%d (communicator of %d)"
                                  % (fn, peer, self._comm._size - 1, self._comm._size))
        if tag < 0:
            raise InvalidArgument("%s: tag = %d must be >= 0" % (fn, tag))
        b = as_buf(tensor, fn + ": tensor", not is_send)
        try:
            check_device(self._comm._device, b.obj, b.device, fn + ": tensor")
        except InvalidArgument:
            release_all([b])
            raise
        self._ops.append((is_send, b, peer, tag))
        return self

    def send(self, tensor: TensorLike, dst: int, tag: int = 0) -> "BatchSendRecv":
        return self._add(True, tensor, dst, tag)

    def recv(self, tensor: TensorLike, src: int, tag: int = 0) -> "BatchSendRecv":
        return self._add(False, tensor, src, tag)

    def __len__(self) -> int:
        return len(self._ops)

    def issue(self, async_op: bool = False, options: Optional[OpOptions] = None, *, category: CategoryLike = None,
              label: Optional[str] = None, phase: Optional[str] = None) -> Work:
        """Posts every recorded send and recv at once; blocks until all are
        done, or (async_op) returns one Work for the whole batch. The batch
        runs under the communicator's timeout (a C group has one deadline,
        the communicator's; per-call timeouts do not apply to it). kw:
        category, label, phase (telemetry: the batch is charged to the first
        category given)."""
        if self._issued:
            raise InvalidUsage("batch: already issued; create a new one with batch_op_create()")
        comm = self._comm
        L = _lib.lib()
        with comm._call("batch.issue", async_op, None, None, options, category, label, phase) as c:
            c.keep.extend(b for _, b, _, _ in self._ops)
            self._issued = True
            optp = ctypes.byref(c.opts) if c.opts is not None else None
            with comm._lock:
                h = comm._live_handle("batch.issue")
                check(L.collie_group_start(h))
                for is_send, b, peer, tag in self._ops:
                    fn = L.collie_send if is_send else L.collie_recv
                    rc = fn(h, b.ptr, b.count, b.dtype, peer, tag, optp, None)
                    if rc != _lib.SUCCESS:
                        exc = last_error(rc)
                        # Close the group; what was recorded still runs (peers expect it).
                        L.collie_group_end(h, None)
                        raise comm._failed(exc)
                keep, c.keep = c.keep, []
                if async_op:
                    w = ctypes.c_void_p()
                    rc = L.collie_group_end(h, ctypes.byref(w))
                else:
                    rc = L.collie_group_end(h, None)
                if rc != _lib.SUCCESS:
                    exc = last_error(rc)
                    release_all(b for b in keep if hasattr(b, "release"))
                    raise comm._failed(exc)
            if async_op:
                return Work(comm, w.value, keep)
            release_all(b for b in keep if hasattr(b, "release"))
            return Work(comm, None, None)


# ---- helpers ------------------------------------------------------------------

def _handle_of(out: ctypes.c_void_p) -> int:
    """The handle a successful C call wrote (never NULL then)."""
    if not out.value:
        raise InternalError("a collie call succeeded but returned no handle")
    return int(out.value)


def _capturing_stream(tensor: Any) -> int:
    """The handle of torch's current stream on tensor's device while it
    captures a CUDA graph, else 0 (asks torch only where its CUDA runtime
    was started)."""
    torch = sys.modules.get("torch")
    if torch is None or not _capturing():
        return 0
    dev = getattr(tensor, "device", None)
    try:
        s = torch.cuda.current_stream(dev if getattr(dev, "type", None) == "cuda" else None)
        return int(s.cuda_stream)
    except Exception:
        return 0


def _capturing() -> bool:
    """True while torch's current CUDA stream captures a graph (False
    where torch or its CUDA runtime was never started: asks nothing)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing())
    except Exception:
        return False


def _p2p_order(tag: int, async_op: Any, hints: Any) -> Tuple[int, bool, Any]:
    """(tag, async_op, hints) of a send or recv called in torchcomms' order
    (async_op third) or in collie's first one (tag third, async_op fourth):
    a third argument that is an int but not a bool is a tag."""
    if isinstance(async_op, int) and not isinstance(async_op, bool):
        legacy_async = hints if isinstance(hints, bool) else False
        return async_op, legacy_async, None
    return tag, async_op, hints


def _is_timeout(v: object) -> bool:
    return isinstance(v, (datetime.timedelta, int, float)) and not isinstance(v, bool)


def _int(v: object, what: str) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise InvalidArgument("%s = %r must be an int" % (what, v))
    return int(v.__index__())


def _prefix(counts: Sequence[int]) -> List[int]:
    out, s = [], 0
    for n in counts:
        out.append(s)
        s += n
    return out


class _Span:
    __slots__ = ("ptr", "nbytes", "end")

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.ptr, self.nbytes, self.end = ptr, nbytes, ptr + nbytes


def _span(c: _Call, b: Buf, bn: str, base: int, nbytes: int, allowed: int, text: str) -> None:
    """b may overlap the block [base, base+nbytes) of a list only in place."""
    c.no_alias(b, bn, _Span(base, nbytes), "the list's memory", allowed, text)


def _rows(b: Buf, what: str) -> Tuple[int, int]:
    """(rows, elements per row) of b along its first dimension."""
    if not b.shape:
        return (b.count, 1)
    rows = b.shape[0]
    if rows == 0:
        return (0, 0)
    return (rows, b.count // rows)


def _splits(splits: Optional[Sequence[int]], rows: int, size: int, name: str, arr: str) -> List[int]:
    if splits is None:
        if rows % size:
            raise InvalidArgument(
                "all_to_all_v_single: %s has %d rows, not a multiple of the size %d; pass %s" % (arr, rows, size, name)
            )
        return [rows // size] * size
    try:
        sp = [int(x) for x in splits]
    except (TypeError, ValueError):
        raise InvalidArgument("all_to_all_v_single: %s = %r must be a list of ints" % (name, splits)) from None
    if len(sp) != size:
        raise InvalidArgument("all_to_all_v_single: %s has %d entries, expected %d (one per rank)" % (name, len(sp), size))
    if any(x < 0 for x in sp):
        raise InvalidArgument("all_to_all_v_single: %s = %r has a negative entry" % (name, sp))
    if sum(sp) != rows:
        raise InvalidArgument(
            "all_to_all_v_single: %s sums to %d but %s has %d rows" % (name, sum(sp), arr, rows)
        )
    return sp


@atexit.register
def _finalize_all() -> None:
    """Finalizes communicators the program left open, newest first (splits
    before their parents), so that rank 0's store outlives its peers' use."""
    with _registry_lock:
        live = list(_live)
    # Dying of an uncaught exception: no closing barrier, which would hold
    # this process until every peer came to it (_exit.py).
    why = _exit.cause()
    for c in reversed(live):
        try:
            if why is not None:
                c.abort(why)
            c.finalize()
        except Exception:
            pass
