"""_options.py - torchcomms' option classes: CommOptions for new_comm, and
one class per operation (AllReduceOptions, SendOptions, ...) carrying that
operation's timeout and hints, passed as options= (docs/python.md, "Coming
from torchcomms").

An option object is checked when it is made and whenever a field is set, so
a bad value is refused naming the class and the field
("AllReduceOptions.timeout = 'soon' must be a datetime.timedelta or
seconds"). Hints are a mapping of names to values. Those collie understands
(OP_HINTS) change the call; any other name is kept (torchcomms' own
"is_high_priority_stream", a backend's) and ignored with a debug line on the
"collie" logger, never an error.
"""

from __future__ import annotations

import datetime
import logging
import os
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from ._enums import to_algorithm, to_category, to_ms, to_wire
from ._errors import InvalidArgument

if TYPE_CHECKING:
    from ._types import OptHints, OptTimeout

log = logging.getLogger("collie")
if os.environ.get("COLLIE_DEBUG", "").upper() in ("INFO", "TRACE", "DEBUG") and not log.handlers:
    # The C library logs at COLLIE_DEBUG to stderr; the binding's own lines
    # (ignored hints) go there too rather than nowhere.
    _h = logging.StreamHandler()
    _h.setFormatter(logging.Formatter("collie: %(message)s"))
    log.addHandler(_h)
    log.setLevel(logging.DEBUG)

# The hints an operation understands: name -> what it sets. "wire" is
# all_reduce's alone (the C library refuses it elsewhere, naming the call).
OP_HINTS = {
    "algorithm": "the algorithm (collie.ALGORITHMS), as algorithm=",
    "algo": "the same as algorithm",
    "category": "the telemetry payload category, as category=",
    "label": "the telemetry label (layer or bucket), as label=",
    "phase": "the telemetry phase, as phase=",
    "wire": "all_reduce: what a float32 SUM/AVG sends (float16, bfloat16, native), as wire=",
}


def _check_timeout(value: object, where: str) -> Optional[datetime.timedelta]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (datetime.timedelta, int, float)):
        raise InvalidArgument("%s = %r must be a datetime.timedelta or seconds" % (where, value))
    to_ms(value, where)  # positive and finite
    if isinstance(value, datetime.timedelta):
        return value
    return datetime.timedelta(seconds=float(value))


def check_hints(value: object, where: str) -> Dict[str, Any]:
    """A copy of hints (a mapping of str names to str, int, float, bool or
    None), or InvalidArgument naming where."""
    if value is None:
        return {}
    items = getattr(value, "items", None)
    if not callable(items):
        raise InvalidArgument("%s = %r must be a dict of names to values" % (where, value))
    out: Dict[str, Any] = {}
    for k, v in items():
        if not isinstance(k, str):
            raise InvalidArgument("%s: key %r must be a str" % (where, k))
        if v is not None and not isinstance(v, (str, int, float, bool)):
            raise InvalidArgument("%s[%r] = %r must be a str, int, float, bool or None" % (where, k, v))
        out[k] = v
    return out


class OpOptions:
    """timeout and hints of one operation (torchcomms' *Options classes).
    OpOptions(timeout=timedelta(seconds=5), hints={"algorithm": "ring"}), or
    made empty and filled by attribute: opts.timeout = ...; opts.hints = {...}."""

    __slots__ = ("_timeout", "_hints")
    op = "operation"  # the method these options are for (subclasses name theirs)

    def __init__(self, timeout: OptTimeout = None, hints: OptHints = None) -> None:
        name = type(self).__name__
        self._timeout: Optional[datetime.timedelta] = _check_timeout(timeout, "%s.timeout" % name)
        self._hints: Dict[str, Any] = check_hints(hints, "%s.hints" % name)

    @property
    def timeout(self) -> Optional[datetime.timedelta]:
        """The operation's deadline (None: the communicator's)."""
        return self._timeout

    @timeout.setter
    def timeout(self, value: OptTimeout) -> None:
        self._timeout = _check_timeout(value, "%s.timeout" % type(self).__name__)

    @property
    def hints(self) -> Dict[str, Any]:
        """The hints (a dict; names collie does not know are kept and ignored)."""
        return self._hints

    @hints.setter
    def hints(self, value: OptHints) -> None:
        self._hints = check_hints(value, "%s.hints" % type(self).__name__)

    def __repr__(self) -> str:
        return "%s(timeout=%r, hints=%r)" % (type(self).__name__, self._timeout, self._hints)

    def __eq__(self, other: object) -> bool:
        return (type(other) is type(self) and isinstance(other, OpOptions)
                and (self._timeout, self._hints) == (other._timeout, other._hints))

    __hash__ = None  # type: ignore[assignment]  # mutable


# torchcomms' names, one per operation, written out so that type checkers
# and readers see each class.
class SendOptions(OpOptions):
    """Options of Comm.send."""
    __slots__ = ()
    op = "send"


class RecvOptions(OpOptions):
    """Options of Comm.recv."""
    __slots__ = ()
    op = "recv"


class BatchP2POptions(OpOptions):
    """Options of BatchSendRecv.issue."""
    __slots__ = ()
    op = "batch.issue"


class BroadcastOptions(OpOptions):
    """Options of Comm.broadcast."""
    __slots__ = ()
    op = "broadcast"


class AllReduceOptions(OpOptions):
    """Options of Comm.all_reduce."""
    __slots__ = ()
    op = "all_reduce"


class ReduceOptions(OpOptions):
    """Options of Comm.reduce."""
    __slots__ = ()
    op = "reduce"


class AllGatherOptions(OpOptions):
    """Options of Comm.all_gather (and all_gather_v)."""
    __slots__ = ()
    op = "all_gather"


class AllGatherSingleOptions(OpOptions):
    """Options of Comm.all_gather_single."""
    __slots__ = ()
    op = "all_gather_single"


class ReduceScatterOptions(OpOptions):
    """Options of Comm.reduce_scatter (and reduce_scatter_v)."""
    __slots__ = ()
    op = "reduce_scatter"


class ReduceScatterSingleOptions(OpOptions):
    """Options of Comm.reduce_scatter_single."""
    __slots__ = ()
    op = "reduce_scatter_single"


class AllToAllOptions(OpOptions):
    """Options of Comm.all_to_all."""
    __slots__ = ()
    op = "all_to_all"


class AllToAllSingleOptions(OpOptions):
    """Options of Comm.all_to_all_single."""
    __slots__ = ()
    op = "all_to_all_single"


class AllToAllvSingleOptions(OpOptions):
    """Options of Comm.all_to_all_v_single."""
    __slots__ = ()
    op = "all_to_all_v_single"


class BarrierOptions(OpOptions):
    """Options of Comm.barrier."""
    __slots__ = ()
    op = "barrier"


class ScatterOptions(OpOptions):
    """Options of Comm.scatter."""
    __slots__ = ()
    op = "scatter"


class GatherOptions(OpOptions):
    """Options of Comm.gather (and gather_single)."""
    __slots__ = ()
    op = "gather"


class AllGatherPInitOptions(OpOptions):
    """Options of Comm.all_gather_p_init."""
    __slots__ = ()
    op = "all_gather_p_init"


class AllGatherPExecOptions(OpOptions):
    """Options of Comm.all_gather_p_exec."""
    __slots__ = ()
    op = "all_gather_p_exec"


class SplitOptions(OpOptions):
    """Options of Comm.split."""
    __slots__ = ()
    op = "split"


# Which class each method takes (a method sharing another's class maps to it).
OPTIONS_OF = {cls.op: cls for cls in (
    SendOptions, RecvOptions, BatchP2POptions, BroadcastOptions, AllReduceOptions, ReduceOptions,
    AllGatherOptions, AllGatherSingleOptions, ReduceScatterOptions, ReduceScatterSingleOptions,
    AllToAllOptions, AllToAllSingleOptions, AllToAllvSingleOptions, BarrierOptions, ScatterOptions,
    GatherOptions, AllGatherPInitOptions, AllGatherPExecOptions, SplitOptions)}
OPTIONS_OF.update({"all_gather_v": AllGatherOptions, "reduce_scatter_v": ReduceScatterOptions,
                   "gather_single": GatherOptions})


def op_settings(fn: str, options: object, hints: object, timeout: OptTimeout,
                given: Dict[str, Any]) -> Tuple[OptTimeout, Dict[str, Any]]:
    """The timeout and telemetry/algorithm keywords of a call to fn, from its
    options (fn's class), its hints and its own keywords, in that order of
    precedence (a keyword beats hints= beats options=). given holds the
    call's keywords (category, label, phase, algorithm, wire; None: not
    given) and comes back completed from the hints."""
    merged: Dict[str, Any] = {}
    where = "%s: hints" % fn
    if options is not None:
        want = OPTIONS_OF.get(fn)
        if not isinstance(options, OpOptions) or (want is not None and not isinstance(options, want)):
            raise InvalidArgument("%s: options = %r is not a %s" % (
                fn, options, want.__name__ if want is not None else "collie option object"))
        merged.update(options.hints)
        if timeout is None:
            timeout = options.timeout
        where = "%s: %s.hints" % (fn, type(options).__name__)
    if hints is not None:
        merged.update(check_hints(hints, "%s: hints" % fn))
        where = "%s: hints" % fn
    out = dict(given)
    for k, v in merged.items():
        key = "algorithm" if k == "algo" else k
        if key not in OP_HINTS or v is None:
            log.debug("%s: hint %r = %r is not one collie understands; ignored", fn, k, v)
            continue
        if out.get(key) is not None:
            continue  # the call's own keyword wins
        try:  # refused here, naming the hint, rather than later as a keyword
            if key == "algorithm":
                to_algorithm(v)
            elif key == "wire":
                to_wire(v)
            elif key == "category":
                to_category(v if not isinstance(v, str) or not v.isdigit() else int(v))
        except InvalidArgument as e:
            raise InvalidArgument("%s[%r]: %s" % (where, k, e)) from None
        if key == "category" and isinstance(v, str) and v.isdigit():
            v = int(v)
        out[key] = v
    return timeout, out


class CommOptions:
    """torchcomms' CommOptions, for new_comm(..., options=CommOptions(...)):
    abort_process_on_timeout_or_error (None: COLLIE_ABORT_ON_ERROR, then
    TORCHCOMM_ABORT_ON_ERROR, else False), timeout (None:
    COLLIE_TIMEOUT_MS, then TORCHCOMM_TIMEOUT_SECONDS, else 30 s), store,
    name, hints (COLLIE_* settings by name, {"transport": "tcp"}; other
    names are kept and ignored) and enable_reconfigure (False: collie's
    fault tolerance is Comm.shrink)."""

    __slots__ = ("_abort", "_timeout", "store", "_name", "_hints", "_reconf")

    def __init__(self, abort_process_on_timeout_or_error: Optional[bool] = None, timeout: OptTimeout = None,
                 store: Any = None, name: Optional[str] = None, hints: OptHints = None,
                 enable_reconfigure: bool = False) -> None:
        self.abort_process_on_timeout_or_error = abort_process_on_timeout_or_error
        self._timeout = _check_timeout(timeout, "CommOptions.timeout")
        self.store = store
        self.name = name
        self._hints = check_hints(hints, "CommOptions.hints")
        self.enable_reconfigure = enable_reconfigure

    @property
    def abort_process_on_timeout_or_error(self) -> Optional[bool]:
        return self._abort

    @abort_process_on_timeout_or_error.setter
    def abort_process_on_timeout_or_error(self, value: Optional[bool]) -> None:
        if value is not None and not isinstance(value, bool):
            raise InvalidArgument("CommOptions.abort_process_on_timeout_or_error = %r must be a bool" % (value,))
        self._abort = value

    @property
    def timeout(self) -> Optional[datetime.timedelta]:
        return self._timeout

    @timeout.setter
    def timeout(self, value: OptTimeout) -> None:
        self._timeout = _check_timeout(value, "CommOptions.timeout")

    @property
    def name(self) -> Optional[str]:
        return self._name

    @name.setter
    def name(self, value: Optional[str]) -> None:
        if value is not None and not isinstance(value, str):
            raise InvalidArgument("CommOptions.name = %r must be a str" % (value,))
        self._name = value

    @property
    def hints(self) -> Dict[str, Any]:
        return self._hints

    @hints.setter
    def hints(self, value: OptHints) -> None:
        self._hints = check_hints(value, "CommOptions.hints")

    @property
    def enable_reconfigure(self) -> bool:
        return self._reconf

    @enable_reconfigure.setter
    def enable_reconfigure(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise InvalidArgument("CommOptions.enable_reconfigure = %r must be a bool" % (value,))
        self._reconf = value

    def __repr__(self) -> str:
        return ("CommOptions(abort_process_on_timeout_or_error=%r, timeout=%r, store=%r, name=%r, hints=%r, "
                "enable_reconfigure=%r)" % (self._abort, self._timeout, self.store, self._name, self._hints,
                                            self._reconf))

