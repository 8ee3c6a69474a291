"""collie.timing - the per-rank timing logger, over the C library's.

    from collie.timing import init_timing_logger, get_timing_logger, shutdown_timing_logger
    logger = init_timing_logger(rank, "logs/timing")
    with logger.record_mpi_operation("ALLREDUCE", nbytes, "encoder.layer3", "dense"):
        comm.Allreduce(send, recv)                        # mpi4py, torch.distributed, collie...
    logger.record_timing("COMPRESS", elapsed_ms=1.7, layer_name="encoder.layer3",
                         message_size=4096, iteration=100, epoch=0)
    shutdown_timing_logger()

Rows go to log_dir/timing-rank{rank}.csv (plus the .meta and .categories.csv
sidecars) through the C library's bounded lock-free queue and background
writer (collie_timing_log_open: docs/telemetry.md). No collie communicator is
needed: the process may communicate with mpi4py or torch.distributed only.

- `rank` names the file.
- iteration and epoch are written as given. When the caller gives none, the
  step open on the collie communicator (collie.distributed.step,
  Comm.step_begin, collie.torch.step) supplies them, else the one
  collie.distributed.step opened on torch.distributed, else 0.
- When a collie communicator exists (`group`, the default one, or the first
  created later), collie's own operations are logged too: the communicator
  opens the same directory (collie_timing_open), and a file of the same rank
  is then one log, one writer (its operations' rows and yours interleave
  whole). A communicator whose rank differs from `rank` writes its own file
  (a warning says so).
- Never blocks: a full queue (default 10000 records; `queue=`) drops the
  record and counts it (.meta, and a warning at shutdown). The writer runs
  every second (`flush_ms=`), at shutdown and at interpreter exit. Safe from
  any thread.
- Times are time.monotonic() (CLOCK_MONOTONIC), as the C library's
  start_counter/end_counter: a record_timing(elapsed_ms) row ends now and
  starts elapsed_ms earlier.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
import threading
import time
import warnings
from typing import Any, Dict, Literal, Optional, Tuple, Union

from . import _comm, _lib
from ._errors import InvalidArgument, InvalidUsage, check

__all__ = ["TimingLogger", "init_timing_logger", "get_timing_logger", "shutdown_timing_logger"]

_lock = threading.Lock()
_monotonic = time.monotonic
_logger: Optional[TimingLogger] = None

# collie_timing_t: operation, layer_name, phase (char *), message_size_bytes
# (uint64), start_counter, end_counter (double).
_PACK = struct.Struct("PPPQdd").pack
assert struct.calcsize("PPPQdd") == ctypes.sizeof(_lib.TimingRec)

# str -> (bytes, its address): the names a training loop repeats, kept alive
# so the C struct may point at them; bounded (cleared when full).
_names: Dict[str, Tuple[bytes, Optional[int]]] = {}


_NONE: Tuple[Optional[bytes], Optional[int]] = (None, 0)


def _name(name: str) -> Tuple[bytes, Optional[int]]:
    """(bytes, address) of name; the caller holds the tuple while C reads it."""
    hit = _names.get(name)
    if hit is None:
        if len(_names) >= 4096:
            _names.clear()  # a record in flight on another thread holds its own tuples
        b = str(name).encode()
        hit = _names[name] = (b, ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p).value)
    return hit


class TimingLogger:
    """The process's timing logger (get one with init_timing_logger)."""

    def __init__(self, rank: int, log_dir: Union[str, os.PathLike[str]], queue: int = 0, flush_ms: int = 0) -> None:
        self.rank = rank
        self.log_dir = os.fspath(log_dir)
        self._comm: Optional[_comm.Comm] = None
        self._closed = False
        _lib.need("collie_timing_log_record")
        # The record call holds the GIL (a PyDLL function): it only copies
        # into the lock-free queue, and not releasing and retaking the GIL
        # halves its cost. The struct goes as the bytes struct.pack made.
        self._record_c = _lib.gil_function("collie_timing_log_record", ctypes.c_int,
                                           [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64])
        h = ctypes.c_void_p()
        check(_lib.need("collie_timing_log_open")(os.fsencode(self.log_dir), rank, int(queue), int(flush_ms),
                                                  ctypes.byref(h)))
        self._h: Optional[int] = h.value

    @property
    def comm(self) -> Optional[_comm.Comm]:
        """The collie communicator whose operations also log here (None: none)."""
        return self._comm

    @property
    def path(self) -> str:
        """log_dir/timing-rank{rank}.csv."""
        return os.path.join(self.log_dir, "timing-rank%d.csv" % self.rank)

    def _attach(self, comm: _comm.Comm) -> None:
        comm.timing_open(self.log_dir)
        self._comm = comm
        root_rank = comm._root.get_rank()
        if root_rank != self.rank:
            warnings.warn(
                "collie.timing: init_timing_logger(rank=%d) but this process is rank %d of its collie "
                "communicator, whose operations go to timing-rank%d.csv" % (self.rank, root_rank, root_rank),
                stacklevel=3,
            )

    def _numbers(self, iteration: Optional[int], epoch: Optional[int]) -> Tuple[int, int]:
        if iteration is None or epoch is None:
            c = self._comm
            if c is None and _comm.has_default_comm():
                c = _comm.get_default_comm()
            step = c.current_step if c is not None else None
            if step is None:
                tc = sys.modules.get("collie._torch_calls")  # collie.distributed's step on torch.distributed
                step = tc.current_step() if tc is not None else None
            if iteration is None:
                iteration = step[0] if step else 0
            if epoch is None:
                epoch = step[1] if step else 0
        return int(iteration), int(epoch)

    def record_timing(self, operation: str, elapsed_ms: float, layer_name: Optional[str] = "",
                      message_size: Optional[int] = 0, phase: Optional[str] = "dense",
                      iteration: Optional[int] = None, epoch: Optional[int] = None) -> None:
        """Logs a region of elapsed_ms milliseconds that ends now. Never blocks."""
        end = _monotonic()
        elapsed = elapsed_ms
        if type(elapsed) is not float:
            try:
                elapsed = float(elapsed_ms)
            except (TypeError, ValueError):
                raise InvalidArgument("record_timing: elapsed_ms = %r must be a number" % (elapsed_ms,)) from None
        if not elapsed >= 0:
            raise InvalidArgument("record_timing: elapsed_ms = %r must be >= 0" % (elapsed_ms,))
        self._record("record_timing", operation, end - elapsed / 1000.0, end, layer_name, phase, message_size,
                     iteration, epoch)

    def _record(self, fn: str, operation: str, start: float, end: float, layer_name: Optional[str],
                phase: Optional[str], message_size: Optional[int], iteration: Optional[int],
                epoch: Optional[int]) -> None:
        if self._closed:
            raise InvalidUsage("%s: the timing logger for %s was shut down" % (fn, self.log_dir))
        # The common call (a str operation, int size and numbers, names seen
        # before) takes the branch-free path; anything else is checked and
        # converted on the way. About 1 us a record from Python (docs/python.md).
        o = _names.get(operation)
        if o is None:
            if not isinstance(operation, str) or not operation:
                raise InvalidArgument("%s: operation = %r must be a non-empty str" % (fn, operation))
            o = _name(operation)
        if type(message_size) is not int:
            message_size = 0 if message_size is None else int(message_size)
        if message_size < 0:
            raise InvalidArgument("%s: message_size = %r must be >= 0" % (fn, message_size))
        if type(iteration) is not int or type(epoch) is not int:
            iteration, epoch = self._numbers(iteration, epoch)
        if iteration < 0 or epoch < 0:
            raise InvalidArgument("%s: iteration = %r and epoch = %r must be >= 0" % (fn, iteration, epoch))
        # Packed in one call with the strings' cached addresses (setting a
        # ctypes struct's six fields cost 1.5 us). The locals keep the
        # names' bytes alive until C has copied them.
        la = (_names.get(layer_name) or _name(layer_name)) if layer_name else _NONE
        ph = (_names.get(phase) or _name(phase)) if phase else _NONE
        rc = self._record_c(self._h, _PACK(o[1], la[1], ph[1], message_size, start, end), iteration, epoch)
        if rc:
            check(rc)

    def record_mpi_operation(self, op: str, message_size: Optional[int] = 0, layer_name: Optional[str] = "",
                             phase: Optional[str] = "dense", iteration: Optional[int] = None,
                             epoch: Optional[int] = None) -> _Region:
        """with logger.record_mpi_operation("ALLREDUCE", nbytes, "layer3"): times the block
        (recorded even when it raises)."""
        if not isinstance(op, str) or not op:
            raise InvalidArgument("record_mpi_operation: op = %r must be a non-empty str" % (op,))
        return _Region(self, op, message_size, layer_name, phase, iteration, epoch)

    def flush(self) -> None:
        """Writes what is queued now (blocks on the file write only)."""
        if not self._closed:
            check(_lib.need("collie_timing_log_flush")(self._h))

    def close(self) -> None:
        """Flushes and closes the log (and the communicator's, when this
        logger opened it). Idempotent."""
        if self._closed:
            return
        self._closed = True
        c = self._comm
        if c is not None and c._h is not None:
            c.timing_close()
        _lib.need("collie_timing_log_close")(self._h)
        self._h = None


class _Region:
    """The block record_mpi_operation times (a plain class: a generator
    based context manager cost twice as much)."""

    __slots__ = ("lg", "args", "start")

    def __init__(self, lg: TimingLogger, *args: Any) -> None:
        self.lg, self.args = lg, args

    def __enter__(self) -> TimingLogger:
        self.start = _monotonic()
        return self.lg

    def __exit__(self, *exc: object) -> Literal[False]:
        end = _monotonic()
        op, size, layer, phase, it, ep = self.args
        self.lg._record("record_mpi_operation", op, self.start, end, layer, phase, size, it, ep)
        return False


def _on_new_comm(comm: _comm.Comm) -> None:
    """Logs collie's own operations of the first communicator created."""
    with _lock:
        lg = _logger
    if lg is not None and lg._comm is None and not lg._closed:
        lg._attach(comm)


_comm._new_comm_hooks.append(_on_new_comm)


def init_timing_logger(rank: int, log_dir: Union[str, os.PathLike[str]], group: Optional[_comm.Comm] = None,
                       queue: int = 0, flush_ms: int = 0) -> TimingLogger:
    """Opens (or returns) the process's timing logger writing
    log_dir/timing-rank{rank}.csv (log_dir created with its parents). No
    collie communicator is needed; when there is one (group, else the
    default, else the first created later) its operations log there too.
    queue: records held before dropping (0: COLLIE_TIMING_QUEUE, else
    10000); flush_ms: the writer's period (0: COLLIE_TIMING_FLUSH_MS, else
    1000). Calling it again with the same log_dir returns the same logger;
    another log_dir while one is open is InvalidUsage (shut the first down)."""
    global _logger
    if log_dir is None:
        raise InvalidArgument("init_timing_logger: log_dir is None")
    if isinstance(rank, bool) or not hasattr(rank, "__index__") or rank < 0:
        raise InvalidArgument("init_timing_logger: rank = %r must be an int >= 0 (it names the file)" % (rank,))
    with _lock:
        if _logger is not None:
            if os.path.abspath(_logger.log_dir) == os.path.abspath(os.fspath(log_dir)):
                return _logger
            raise InvalidUsage(
                "init_timing_logger: a logger for %s is open; shutdown_timing_logger() first" % _logger.log_dir
            )
        if group is not None:
            comm: Optional[_comm.Comm] = _comm.resolve(group)
        else:
            comm = _comm.get_default_comm() if _comm.has_default_comm() else None
        lg = TimingLogger(int(rank), log_dir, queue, flush_ms)
        if comm is not None:
            lg._attach(comm)
        _logger = lg
        return lg


def get_timing_logger() -> Optional[TimingLogger]:
    """The logger init_timing_logger opened, or None."""
    return _logger


def shutdown_timing_logger() -> None:
    """Flushes and closes the logger; no logger: nothing. (At interpreter
    exit the C library flushes every open log by itself.)"""
    global _logger
    tc = sys.modules.get("collie._torch_calls")
    if tc is not None and _logger is not None:
        tc.drain_cuda(block=True)  # the rows of CUDA calls still timed by events
    with _lock:
        lg, _logger = _logger, None
    if lg is not None:
        lg.close()
