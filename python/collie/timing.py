"""collie.timing - the per-rank timing logger, over the C library's.

    from collie.timing import init_timing_logger, get_timing_logger, shutdown_timing_logger
    logger = init_timing_logger(rank, "logs/timing")
    with logger.record_mpi_operation("ALLREDUCE", nbytes, "encoder.layer3", "dense"):
        comm.all_reduce(grad)
    logger.record_timing("COMPRESS", elapsed_ms=1.7, layer_name="encoder.layer3", message_size=4096)
    shutdown_timing_logger()

Rows go to log_dir/timing-rank{i}.csv (plus the .meta and .categories.csv
sidecars) through the C library's bounded lock-free queue and background
writer: the same files and format as collie_timing_record
(docs/telemetry.md), and every collie operation of the communicator's tree is
logged there too. Recording never blocks; a full queue drops and counts.

- The file is opened on the default communicator (or `group`) with
  collie_timing_open. If no communicator exists yet, opening is deferred to
  the first one created (collie.new_comm); records made meanwhile are held
  (up to 10000) and queued then.
- `rank` is informational: the file is named after the rank in the
  communicator's collie_comm_init tree (a warning says so if they differ).
- iteration and epoch of a row come from the step open in the C library
  (collie.distributed.step / Comm.step_begin) when the record is made. The
  iteration/epoch arguments exist for compatibility with older wrappers;
  when given and different from the open step, a warning (once) says that
  the step's values are written.
- Times are time.monotonic() (CLOCK_MONOTONIC), as the C library's
  start_counter/end_counter: a record_timing(elapsed_ms) row ends now and
  starts elapsed_ms earlier.
"""

import contextlib
import os
import threading
import time
import warnings

from . import _comm
from ._errors import InvalidArgument, InvalidUsage

__all__ = ["TimingLogger", "init_timing_logger", "get_timing_logger", "shutdown_timing_logger"]

_MAX_HELD = 10000

_lock = threading.Lock()
_logger = None


class TimingLogger:
    """The process's timing logger (get one with init_timing_logger)."""

    def __init__(self, rank, log_dir, comm):
        self.rank = rank
        self.log_dir = os.fspath(log_dir)
        self._comm = None
        self._held = []  # records made before a communicator existed
        self.dropped = 0  # records dropped while held (the C queue counts its own)
        self._warned_step = False
        self._closed = False
        if comm is not None:
            self._attach(comm)

    @property
    def comm(self):
        """The communicator whose tree logs here (None while deferred)."""
        return self._comm

    @property
    def path(self):
        """log_dir/timing-rank{i}.csv (i: the rank in the init tree; the
        `rank` argument while deferred)."""
        r = self._comm._root.get_rank() if self._comm is not None else self.rank
        return os.path.join(self.log_dir, "timing-rank%d.csv" % r)

    def _attach(self, comm):
        comm.timing_open(self.log_dir)
        self._comm = comm
        root_rank = comm._root.get_rank()
        if self.rank is not None and int(self.rank) != root_rank:
            warnings.warn(
                "collie.timing: init_timing_logger(rank=%s) but this process is rank %d of its communicator; "
                "the file is timing-rank%d.csv" % (self.rank, root_rank, root_rank),
                stacklevel=3,
            )
        held, self._held = self._held, []
        for rec in held:
            self._submit(*rec)

    def _check_step(self, iteration, epoch):
        if self._warned_step or (iteration is None and epoch is None) or self._comm is None:
            return
        cur = self._comm.current_step
        it, ep = cur if cur else (0, None)
        if (iteration is not None and int(iteration) != it) or (epoch is not None and ep is not None and int(epoch) != ep):
            self._warned_step = True
            warnings.warn(
                "collie.timing: iteration/epoch (%s, %s) differ from the open step %s; the timing log "
                "takes them from the step (collie.distributed.step)" % (iteration, epoch, cur),
                stacklevel=4,
            )

    def _submit(self, operation, start, end, layer_name, phase, message_size):
        c = self._comm
        if c is None or c._h is None:
            self.dropped += 1
            return
        c.timing_record(operation, start, end, layer_name, phase, message_size)

    def record_timing(self, operation, elapsed_ms, layer_name="", message_size=0, phase="dense",
                      iteration=None, epoch=None):
        """Logs a region of elapsed_ms milliseconds that ends now. Never blocks."""
        if not isinstance(operation, str) or not operation:
            raise InvalidArgument("record_timing: operation = %r must be a non-empty str" % (operation,))
        try:
            elapsed = float(elapsed_ms)
        except (TypeError, ValueError):
            raise InvalidArgument("record_timing: elapsed_ms = %r must be a number" % (elapsed_ms,)) from None
        if not elapsed >= 0:
            raise InvalidArgument("record_timing: elapsed_ms = %r must be >= 0" % (elapsed_ms,))
        end = time.monotonic()
        self._record(operation, end - elapsed / 1000.0, end, layer_name, phase, message_size, iteration, epoch)

    def _record(self, operation, start, end, layer_name, phase, message_size, iteration, epoch):
        if self._closed:
            raise InvalidUsage("timing logger for %s was shut down" % self.log_dir)
        if message_size is None:
            message_size = 0
        if int(message_size) < 0:
            raise InvalidArgument("record_timing: message_size = %r must be >= 0" % (message_size,))
        rec = (operation, start, end, layer_name or "", phase or "dense", int(message_size))
        if self._comm is None:
            if len(self._held) < _MAX_HELD:
                self._held.append(rec)
            else:
                self.dropped += 1
            return
        self._check_step(iteration, epoch)
        self._submit(*rec)

    @contextlib.contextmanager
    def record_mpi_operation(self, op, message_size=0, layer_name="", phase="dense", iteration=None, epoch=None):
        """with logger.record_mpi_operation("ALLREDUCE", nbytes, "layer3"): times the block
        (recorded even when it raises)."""
        if not isinstance(op, str) or not op:
            raise InvalidArgument("record_mpi_operation: op = %r must be a non-empty str" % (op,))
        start = time.monotonic()
        try:
            yield self
        finally:
            self._record(op, start, time.monotonic(), layer_name, phase, message_size, iteration, epoch)

    def flush(self):
        """Writes what is queued now (blocks on the file write only)."""
        if self._comm is not None and self._comm._h is not None:
            self._comm.timing_flush()

    def close(self):
        """Flushes and closes the log (collie_timing_close). Idempotent."""
        if self._closed:
            return
        self._closed = True
        c = self._comm
        if c is not None and c._h is not None:
            c.timing_close()


def _on_new_comm(comm):
    """Opens a deferred logger on the first communicator created."""
    with _lock:
        lg = _logger
    if lg is not None and lg._comm is None and not lg._closed:
        lg._attach(comm)


_comm._new_comm_hooks.append(_on_new_comm)


def init_timing_logger(rank, log_dir, group=None):
    """Opens (or returns) the process's timing logger writing to log_dir
    (created with its parents). group: the communicator (default: the
    default one, or the first created later). Calling it again with the same
    log_dir returns the same logger; another log_dir while one is open is
    InvalidUsage (shut the first down)."""
    global _logger
    if log_dir is None:
        raise InvalidArgument("init_timing_logger: log_dir is None")
    with _lock:
        if _logger is not None:
            if os.path.abspath(_logger.log_dir) == os.path.abspath(os.fspath(log_dir)):
                return _logger
            raise InvalidUsage(
                "init_timing_logger: a logger for %s is open; shutdown_timing_logger() first" % _logger.log_dir
            )
        if group is not None:
            comm = _comm.resolve(group)
        else:
            comm = _comm.get_default_comm() if _comm.has_default_comm() else None
        _logger = TimingLogger(rank, log_dir, comm)
        return _logger


def get_timing_logger():
    """The logger init_timing_logger opened, or None."""
    return _logger


def shutdown_timing_logger():
    """Flushes and closes the logger (collie_timing_close); no logger: nothing."""
    global _logger
    with _lock:
        lg, _logger = _logger, None
    if lg is not None:
        lg.close()
