"""_torch_calls.py - collie.distributed's functions when they run on
torch.distributed (any backend: gloo, nccl, collie): the torch call itself,
timed, its wire-model bytes charged to comms.csv through the C library's
collie_comms_log_* (one writer of the format, _comms_log.py).

- Bytes are charged when the call is issued; its time when it completes:
  for a blocking call on CPU tensors, the call's wall time; with
  async_op=True, from issue to the return of work.wait() (or the first
  is_completed() that says True); for CUDA tensors, CUDA events recorded on
  the tensor's current stream before the call and after it (after wait()
  when async), read without blocking at the next step boundary (blocking
  only at close), so the time is the GPU's and the CPU never synchronizes.
- Turned off (runtime.comms_log.enabled false, COLLIE_COMMS_LOG=0) the
  functions call torch directly after one attribute test.
- Rank 0 of the default group writes COLLIE_LOG_DIR/comms.csv (configure()'s
  dir first); the log opens at the first step or charged call, so categories
  registered before that have columns.
- On the collie backend, collie's communicator already accounts for every
  call it runs: step() opens its step and the wrappers hand it category,
  label and phase (collie.torch.category), so the rows and the timing log
  are collie's own, written once (an async call's time then runs to its
  completion rather than to the wait).
- With a timing logger open (collie.timing), each call on another backend
  is a row too: the operation, label, phase and the caller's bytes.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, TypeVar, Union, cast

from . import _comm, timing
from ._comms_log import CommsLog
# (re-exported: collie.distributed passes them to call())
from ._comms_log import (ALLGATHER as ALLGATHER, ALLREDUCE as ALLREDUCE, BARRIER as BARRIER, BROADCAST as BROADCAST,
                         REDUCE_SCATTER as REDUCE_SCATTER)
from ._enums import ReduceOp, to_category
from ._errors import InvalidArgument

if TYPE_CHECKING:
    from ._comm import CategoryLike
    from ._comms_log import Charge

_W = TypeVar("_W")  # what the torch call returns (its Work, or None)

# Timing-log operation names, as collie's own rows (docs/telemetry.md).
_OPNAMES = {ALLREDUCE: "ALLREDUCE", ALLGATHER: "ALLGATHER", REDUCE_SCATTER: "REDUCE_SCATTER",
            BROADCAST: "BCAST", BARRIER: "BARRIER"}


def torch_dist() -> Optional[ModuleType]:
    """torch.distributed when it is imported and initialized, else None."""
    d = sys.modules.get("torch.distributed")
    if d is not None and d.is_available() and d.is_initialized():
        return d
    return None


class _State:
    """The process's comms.csv for torch.distributed calls."""

    def __init__(self) -> None:
        self.off: Optional[bool] = None  # None: not decided yet (decided at the first call)
        self.log: Optional[CommsLog] = None
        self.lock = threading.Lock()
        self.groups: Dict[Any, Tuple[int, bool]] = {}  # group -> (size, writes its own timing rows)
        # [(charge, start event, end event, timing row)] awaiting the GPU
        self.cuda: List[Tuple[_Timed, Any, Any, Optional[int]]] = []
        # device index -> CUDA events already read, recorded again rather than created anew
        self.events: Dict[Optional[int], List[Any]] = {}
        self.ops: Optional[Dict[ReduceOp, Any]] = None  # collie ReduceOp value -> torch ReduceOp


_state = _State()


def settings() -> Tuple[bool, str]:
    """(enabled, directory) for the torch-path comms.csv: configure()'s
    runtime.comms_log first, then COLLIE_COMMS_LOG / COLLIE_LOG_DIR."""
    with _comm._registry_lock:
        pend = dict(_comm._pending_env)
    on = pend.get("COLLIE_COMMS_LOG", os.environ.get("COLLIE_COMMS_LOG", "1"))
    d = pend.get("COLLIE_LOG_DIR") or os.environ.get("COLLIE_LOG_DIR") or "."
    return str(on).strip().lower() not in ("0", "false", "no", "off"), d


def reconfigure() -> None:
    """configure() changed the settings: close the log (rows due are
    written); the next call decides again and opens the new one."""
    close()
    _state.off = None


def _decide() -> bool:
    """Whether comms.csv is off (decided once per configuration)."""
    off = _state.off
    if off is None:
        off = _state.off = not settings()[0]
    return off


def _log(d: ModuleType) -> Optional[CommsLog]:
    """The open log (opening it), or None when comms.csv is off."""
    st = _state
    log = st.log
    if log is not None or _decide():
        return log
    with st.lock:
        if st.log is None:
            st.log = CommsLog(settings()[1], d.get_rank(), d.get_world_size())
        return st.log


def _group(d: ModuleType, group: Any) -> Tuple[int, bool]:
    """(size, runs on the collie backend) of group, cached."""
    g = _state.groups.get(group)
    if g is None:
        try:
            on_collie = d.get_backend(group) == "collie"
        except Exception:
            on_collie = False
        g = _state.groups[group] = (d.get_world_size(group), on_collie)
    return g


def _torch_op(d: ModuleType, op: Any) -> Any:
    if isinstance(op, ReduceOp):
        ops = _state.ops
        if ops is None:
            ops = _state.ops = {m: getattr(d.ReduceOp, m.name, None) for m in ReduceOp}
            ops[ReduceOp.PRODUCT] = d.ReduceOp.PRODUCT
        top = ops[op]
        if top is None:
            raise InvalidArgument("op = %s: this torch has no ReduceOp.%s" % (op.name, op.name))
        return top
    return op


class _Timed:
    """One charged call in flight: its charge and, for the timing log, what
    the row needs. finish() is idempotent."""

    __slots__ = ("charge", "coll", "size", "label", "phase", "row", "t0", "done", "end_mono", "numbers")

    def __init__(self, charge: Optional[Charge], coll: int, size: int, label: Optional[str], phase: Optional[str],
                 row: bool) -> None:
        self.charge, self.coll, self.size = charge, coll, size
        self.label, self.phase, self.row = label, phase, row
        self.t0 = time.perf_counter_ns()
        self.done = False
        self.end_mono: Optional[float] = None  # CUDA: the CPU's clock when the end event was recorded
        # The step open at issue, for the row (which may be written after it ended).
        self.numbers = current_step() if row else None

    def finish(self, elapsed_ns: Optional[int] = None, end_mono: Optional[float] = None) -> None:
        if self.done:
            return
        self.done = True
        if elapsed_ns is None:
            elapsed_ns = time.perf_counter_ns() - self.t0
        if self.charge is not None:
            self.charge.finish(elapsed_ns)
        if self.row:
            _timing_row(self, elapsed_ns, end_mono)


def _timing_row(t: _Timed, elapsed_ns: int, end_mono: Optional[float]) -> None:
    lg = timing._logger
    if lg is None or lg._closed:
        return
    end = time.monotonic() if end_mono is None else end_mono
    it, ep = t.numbers if t.numbers else (None, None)
    try:
        lg._record("collie.distributed", _OPNAMES[t.coll], end - elapsed_ns / 1e9, end, t.label or "",
                   t.phase or "dense", t.size, it, ep)
    except Exception:  # a logger shut down meanwhile: the row is lost, the call is not
        pass


class TimedWork:
    """torch's Work of an async_op=True call, whose wait() (or an
    is_completed() that says True) ends the call's time in comms.csv.
    Everything else is the torch Work's."""

    __slots__ = ("_work", "_timed", "_cuda")

    def __init__(self, work: Any, timed: _Timed, cuda: Optional[Tuple[Any, Any]]) -> None:
        self._work, self._timed, self._cuda = work, timed, cuda

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        r = self._work.wait(*args, **kwargs)
        self._end()
        return r

    def is_completed(self) -> bool:
        c: bool = self._work.is_completed()
        if c and self._cuda is None:
            self._end()
        return c

    def _end(self) -> None:
        t = self._timed
        if t.done:
            return
        if self._cuda is None:
            t.finish()
        else:
            start, stream = self._cuda
            _cuda_end(t, start, stream)
            self._cuda = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)


def _event(stream: Any) -> Any:
    """A timing CUDA event for stream's device: a read one from the pool (an
    event may be recorded again once its time is read, on its own device
    only), else a new one."""
    try:
        return _state.events[getattr(stream, "device_index", None)].pop()  # list.pop is atomic under the GIL
    except (KeyError, IndexError):
        import torch

        return torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]  # (torch 1.13: unannotated)


def _cuda_end(t: _Timed, start: Any, stream: Any) -> None:
    end = _event(stream)
    end.record(stream)
    t.end_mono = time.monotonic()
    with _state.lock:
        _state.cuda.append((t, start, end, getattr(stream, "device_index", None)))
        many = len(_state.cuda) > 4096
    if many:
        drain_cuda(block=True)


def drain_cuda(block: bool = False) -> None:
    """Ends the CUDA-timed calls whose end event the GPU has reached (all of
    them when block)."""
    st = _state
    if not st.cuda:
        return
    with st.lock:
        pending, st.cuda = st.cuda, []
    later = []
    for t, start, end, dev in pending:
        if block:
            end.synchronize()
        if block or end.query():
            t.finish(int(start.elapsed_time(end) * 1e6), t.end_mono)
            pool = st.events.setdefault(dev, [])
            if len(pool) < 256:
                pool += (start, end)
        else:
            later.append((t, start, end, dev))
    if later:
        with st.lock:
            st.cuda[:0] = later


def _in_category(fn: Callable[[], _W], cat: int, label: Optional[str], phase: Optional[str]) -> Callable[[], _W]:
    """fn run inside collie.torch.category: on the collie backend the
    communicator writes the call's timing row itself, with these."""
    ct = sys.modules["collie.torch"]

    def run() -> _W:
        with ct.category(cat, label, phase):
            return fn()

    return run


def call(d: ModuleType, fn: Callable[[], _W], coll: int, tensor: Any, size: int, group: Any, async_op: bool,
         category: CategoryLike, label: Optional[str], phase: Optional[str]) -> Union[_W, TimedWork]:
    """Runs fn() (the torch call, returning its Work or None), charged and
    timed. tensor: the one whose device and stream time the call."""
    if _decide():
        return fn()
    p, on_collie = _group(d, group)
    cat = to_category(category)
    if on_collie:
        # The collie backend's communicator charges and times the call
        # itself (its step is the one step_begin opened), and writes its
        # timing row: it needs only the category, label and phase.
        if cat or label is not None or phase is not None:
            return _in_category(fn, cat, label, phase)()
        return fn()
    log = cast(CommsLog, _log(d))  # (comms.csv is on: _decide() said so above)
    row = timing._logger is not None
    if not log.charging and not row:
        return fn()  # outside a step, or a rank that writes no rows, and no timing log
    cuda = tensor is not None and tensor.is_cuda
    if not (async_op or cuda or row):
        # The common case, a blocking call on the CPU inside a step: charged
        # and timed in one call after it returns (a call that raised is not
        # charged).
        t0 = time.perf_counter_ns()
        w = fn()
        log.record(coll, cat, p, size, time.perf_counter_ns() - t0)
        return w
    # Charged right after the call is issued: every rank issues it before a
    # charge can refuse it (a category registered after the log opened), so
    # a refusal on rank 0 never leaves the others waiting in the collective.
    t = _Timed(None, coll, size, label, phase, row)
    if cuda:
        import torch

        stream = torch.cuda.current_stream(tensor.device)
        start = _event(stream)
        start.record(stream)
        w = fn()
        t.charge = log.charge(coll, cat, p, size) if log.charging else None
        if async_op:
            return TimedWork(w, t, (start, stream))
        _cuda_end(t, start, stream)
        return w
    w = fn()
    t.charge = log.charge(coll, cat, p, size) if log.charging else None
    if async_op:
        return TimedWork(w, t, None)
    t.finish()
    return w


def _default_on_collie(d: ModuleType) -> bool:
    g = _state.groups.get(None)
    if g is not None and g[0] != d.get_world_size():
        _state.groups.clear()  # a new default group since: sizes and backends again
    return _group(d, None)[1]


def step_begin(d: ModuleType, step: int, epoch: int) -> None:
    """Opens the step: on the collie backend its communicator's (whose
    operations it then charges, collie's own comms.csv rows), else the
    torch-path log's."""
    drain_cuda()
    if _decide():
        return
    if _default_on_collie(d):
        sys.modules["collie.torch"].step_begin(step, epoch)
        return
    log = cast(CommsLog, _log(d))  # (on: _decide())
    if (log.rank, log.world_size) != (d.get_rank(), d.get_world_size()):
        close()  # a new process group since the log opened: a log for it
        log = cast(CommsLog, _log(d))
    log.step_begin(step, epoch)


def step_end(d: ModuleType) -> None:
    if _decide():
        return
    if _default_on_collie(d):
        sys.modules["collie.torch"].step_end()
        return
    cast(CommsLog, _log(d)).step_end()  # (on: _decide())
    drain_cuda()


def current_step() -> Optional[Tuple[int, int]]:
    """(step, epoch) of the open torch-path step, or None."""
    log = _state.log
    return None if log is None else log.numbers


def close() -> None:
    """Ends what is pending (waiting for the GPU) and closes the log."""
    drain_cuda(block=True)
    with _state.lock:
        log, _state.log = _state.log, None
        _state.groups.clear()
    if log is not None:
        log.close()


atexit.register(close)
