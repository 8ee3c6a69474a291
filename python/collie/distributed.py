"""collie.distributed - torch.distributed's collective functions with telemetry.

For training code written against torch.distributed (or against the
in-house telemetry wrappers that mimicked it): the same signatures, plus
``category=PayloadCategory.X`` (the comms.csv column the bytes go to),
``label`` (layer or bucket name for the timing log) and ``phase``. With
async_op=True they return a Work, else None, as torch.distributed does.

Where a call runs:
- ``group`` a collie Comm: on it (collie's own telemetry: comms.csv and the
  timing log from the C library's hooks).
- ``group`` None: on torch.distributed's default group when torch.distributed
  is initialized (any backend: gloo, nccl, collie), else on the default
  collie communicator (the first new_comm() / init() created).
- ``group`` a torch.distributed group: on it.
On torch.distributed each call is timed and its wire-model bytes charged to
comms.csv through the C library's collie_comms_log_* (_torch_calls.py says
how async and CUDA calls are timed); turned off, the functions are the torch
calls.

Telemetry switches:
- ``with step(step, epoch):`` delimits a training step; rank 0 appends its
  row to COLLIE_LOG_DIR/comms.csv (docs/telemetry.md).
- ``configure({"runtime": {"comms_log": {"enabled": True, "dir": "logs"}}})``
  (or a JSON file path; YAML when PyYAML is importable) switches comms.csv
  and its directory. The C library reads these settings when a communicator
  is created, so configure() applies to communicators created after it; call
  it before init()/new_comm(). On torch.distributed it applies from the next
  call.
"""

from __future__ import annotations

import collections.abc
import contextlib
import importlib
import json
import os
import warnings
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, Mapping, Optional, Sequence, Union

from . import _comm
from . import _torch_calls as _tc
from ._comm import CategoryLike, Comm, get_default_comm, new_comm, resolve, set_default_comm
from ._enums import OpLike, PayloadCategory, ReduceOp
from ._errors import InvalidArgument

if TYPE_CHECKING:
    from ._types import OptHints, OptTimeout, TensorLike, TensorList

# A collie Comm, a torch.distributed ProcessGroup, or None: the default one
# (torch.distributed's when it is initialized, else collie's).
GroupLike = Any
# What an async call returns: a collie Work, or torch.distributed's Work.
WorkLike = Any

__all__ = [
    "PayloadCategory",
    "ReduceOp",
    "init",
    "is_initialized",
    "get_rank",
    "get_world_size",
    "destroy",
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "broadcast",
    "barrier",
    "step",
    "step_begin",
    "step_end",
    "configure",
    "current_config",
]


def init(name: str = "main_comm", timeout: OptTimeout = None, store: Any = None, hints: OptHints = None,
         **kw: Any) -> Comm:
    """Creates a communicator (collie.new_comm) and makes it the default one."""
    comm = new_comm(name=name, timeout=timeout, store=store, hints=hints, **kw)
    set_default_comm(comm)
    return comm


def is_initialized() -> bool:
    """True when a default communicator exists."""
    return _comm.has_default_comm()


def get_rank(group: GroupLike = None) -> int:
    """The rank in group (routed as the collectives are)."""
    d = _torch_for("get_rank", group, None)
    return resolve(group).get_rank() if d is None else int(d.get_rank(group))


def get_world_size(group: GroupLike = None) -> int:
    d = _torch_for("get_world_size", group, None)
    return resolve(group).get_size() if d is None else int(d.get_world_size(group))


def destroy(group: Optional[Comm] = None) -> None:
    """Finalizes group (default: the default communicator)."""
    resolve(group).finalize()


def _ret(work: WorkLike, async_op: bool) -> Optional[WorkLike]:
    return work if async_op else None


def _torch_for(fn: str, group: GroupLike, timeout: OptTimeout) -> Any:
    """torch.distributed when the call runs there (group None with torch
    initialized, or a torch group), None for a collie Comm."""
    if isinstance(group, _comm.Comm):
        return None
    d = _tc.torch_dist()
    if d is None or (group is not None and not isinstance(group, d.ProcessGroup)):
        if group is None:
            return None
        raise InvalidArgument(
            "%s: group = %r is neither a collie Comm nor a group of an initialized torch.distributed" % (fn, group)
        )
    if timeout is not None:
        raise InvalidArgument(
            "%s: timeout = %r applies to collie Comms; a torch.distributed group has its own "
            "(init_process_group(timeout=), new_group(timeout=))" % (fn, timeout)
        )
    return d


def _nbytes(t: Any) -> int:
    return int(t.numel() * t.element_size())


def all_reduce(tensor: TensorLike, op: OpLike = ReduceOp.SUM, group: GroupLike = None, async_op: bool = False,
               category: CategoryLike = PayloadCategory.OTHER, label: Optional[str] = None,
               phase: Optional[str] = None, timeout: OptTimeout = None) -> Optional[WorkLike]:
    """tensor = op over ranks of tensor, in place."""
    d = _torch_for("all_reduce", group, timeout)
    if d is None:
        w = resolve(group).all_reduce(tensor, op, async_op, timeout=timeout, category=category, label=label,
                    phase=phase)
        return _ret(w, async_op)
    top = _tc._torch_op(d, op)
    if _tc._state.off:
        return d.all_reduce(tensor, op=top, group=group, async_op=async_op)
    return _tc.call(d, lambda: d.all_reduce(tensor, op=top, group=group, async_op=async_op), _tc.ALLREDUCE, tensor,
                    _nbytes(tensor), group, async_op, category, label, phase)


def all_gather(tensor_list: TensorList, tensor: TensorLike, group: GroupLike = None, async_op: bool = False,
               category: CategoryLike = PayloadCategory.OTHER, label: Optional[str] = None,
               phase: Optional[str] = None, timeout: OptTimeout = None) -> Optional[WorkLike]:
    """tensor_list[q] = rank q's tensor."""
    d = _torch_for("all_gather", group, timeout)
    if d is None:
        w = resolve(group).all_gather(tensor_list, tensor, async_op, timeout=timeout, category=category, label=label,
                                      phase=phase)
        return _ret(w, async_op)
    if _tc._state.off:
        return d.all_gather(tensor_list, tensor, group=group, async_op=async_op)
    return _tc.call(d, lambda: d.all_gather(tensor_list, tensor, group=group, async_op=async_op), _tc.ALLGATHER,
                    tensor, _nbytes(tensor), group, async_op, category, label, phase)


def all_gather_into_tensor(output_tensor: TensorLike, input_tensor: TensorLike, group: GroupLike = None,
                           async_op: bool = False,
                           category: CategoryLike = PayloadCategory.OTHER, label: Optional[str] = None,
                           phase: Optional[str] = None, timeout: OptTimeout = None) -> Optional[WorkLike]:
    """output_tensor (size x input's elements) = every rank's input, in rank order."""
    d = _torch_for("all_gather_into_tensor", group, timeout)
    if d is None:
        w = resolve(group).all_gather_single(output_tensor, input_tensor, async_op, timeout=timeout,
                    category=category,
                                             label=label, phase=phase)
        return _ret(w, async_op)
    fn = getattr(d, "all_gather_into_tensor", None) or d._all_gather_base
    if _tc._state.off:
        return fn(output_tensor, input_tensor, group=group, async_op=async_op)
    return _tc.call(d, lambda: fn(output_tensor, input_tensor, group=group, async_op=async_op), _tc.ALLGATHER,
                    input_tensor, _nbytes(input_tensor), group, async_op, category, label, phase)


def reduce_scatter(output: TensorLike, input_list: TensorList, op: OpLike = ReduceOp.SUM, group: GroupLike = None,
                   async_op: bool = False,
                   category: CategoryLike = PayloadCategory.OTHER, label: Optional[str] = None,
                   phase: Optional[str] = None, timeout: OptTimeout = None) -> Optional[WorkLike]:
    """output = op over ranks of their input_list[rank]."""
    d = _torch_for("reduce_scatter", group, timeout)
    if d is None:
        w = resolve(group).reduce_scatter(output, input_list, op, async_op, timeout=timeout, category=category,
                    label=label,
                                          phase=phase)
        return _ret(w, async_op)
    top = _tc._torch_op(d, op)

    def run() -> WorkLike:
        return _or_allreduce(d, lambda: d.reduce_scatter(output, input_list, op=top, group=group,
                                                         async_op=async_op),
                             output, lambda: input_list, top, group)

    if _tc._state.off:
        return run()
    return _tc.call(d, run, _tc.REDUCE_SCATTER, output, _nbytes(output), group, async_op, category, label, phase)


def reduce_scatter_tensor(output: TensorLike, input: TensorLike, op: OpLike = ReduceOp.SUM, group: GroupLike = None,
                          async_op: bool = False,
                          category: CategoryLike = PayloadCategory.OTHER, label: Optional[str] = None,
                          phase: Optional[str] = None, timeout: OptTimeout = None) -> Optional[WorkLike]:
    """output = op over ranks of block `rank` of input."""
    d = _torch_for("reduce_scatter_tensor", group, timeout)
    if d is None:
        w = resolve(group).reduce_scatter_single(output, input, op, async_op, timeout=timeout, category=category,
                                                 label=label, phase=phase)
        return _ret(w, async_op)
    top = _tc._torch_op(d, op)
    fn = getattr(d, "reduce_scatter_tensor", None) or d._reduce_scatter_base

    def run() -> WorkLike:
        return _or_allreduce(d, lambda: fn(output, input, op=top, group=group, async_op=async_op),
                             output, lambda: [input], top, group)

    if _tc._state.off:
        return run()
    return _tc.call(d, run, _tc.REDUCE_SCATTER, output, _nbytes(output), group, async_op, category, label, phase)


class _DoneWork:
    """The Work of a call that completed before it returned."""

    def wait(self, timeout: OptTimeout = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True


def _or_allreduce(d: Any, call: Callable[[], WorkLike], output: Any, blocks: Callable[[], Sequence[Any]], top: Any,
                  group: GroupLike) -> WorkLike:
    """call(), a torch reduce_scatter; where the group's backend has none
    (torch 1.13's gloo: "does not support reduce_scatter"), what it means
    instead: an all_reduce of every block, of which this rank keeps its
    own. Blocking then (a completed Work for async_op): the caller's
    telemetry still charges the reduce_scatter's wire-model bytes."""
    try:
        return call()
    except RuntimeError as e:
        if "does not support" not in str(e) or "reduce_scatter" not in str(e):
            raise
    import torch

    flat = torch.cat([b.reshape(-1) for b in blocks()])
    d.all_reduce(flat, op=top, group=group)
    n = output.numel()
    me = d.get_rank(group)
    output.copy_(flat[me * n:(me + 1) * n].view_as(output))
    return _DoneWork()


def broadcast(tensor: TensorLike, src: int, group: GroupLike = None, async_op: bool = False,
              category: CategoryLike = PayloadCategory.OTHER, label: Optional[str] = None,
              phase: Optional[str] = None, timeout: OptTimeout = None) -> Optional[WorkLike]:
    """Every rank's tensor = src's tensor, in place (src: a global rank on
    torch.distributed, as torch's; the rank in the Comm on a collie Comm)."""
    d = _torch_for("broadcast", group, timeout)
    if d is None:
        w = resolve(group).broadcast(tensor, src, async_op, timeout=timeout, category=category, label=label,
                    phase=phase)
        return _ret(w, async_op)
    if _tc._state.off:
        return d.broadcast(tensor, src, group=group, async_op=async_op)
    return _tc.call(d, lambda: d.broadcast(tensor, src, group=group, async_op=async_op), _tc.BROADCAST, tensor,
                    _nbytes(tensor), group, async_op, category, label, phase)


def barrier(group: GroupLike = None, async_op: bool = False, timeout: OptTimeout = None) -> Optional[WorkLike]:
    d = _torch_for("barrier", group, timeout)
    if d is None:
        return _ret(resolve(group).barrier(async_op, timeout=timeout), async_op)
    if _tc._state.off:
        return d.barrier(group=group, async_op=async_op)
    return _tc.call(d, lambda: d.barrier(group=group, async_op=async_op), _tc.BARRIER, None, 0, group, async_op,
                    PayloadCategory.OTHER, None, None)


def step_begin(step: int, epoch: int = 0, group: GroupLike = None) -> None:
    """Opens training step `step` (>= 1) of `epoch`: on torch.distributed's
    comms.csv when torch.distributed is initialized (group None or a torch
    group), else on the collie communicator (group, or the default)."""
    d = _torch_for("step_begin", group, None)
    if d is None:
        resolve(group).step_begin(step, epoch)
    else:
        _tc.step_begin(d, step, epoch)


def step_end(group: GroupLike = None) -> None:
    d = _torch_for("step_end", group, None)
    if d is None:
        resolve(group).step_end()
    else:
        _tc.step_end(d)


@contextlib.contextmanager
def step(step: int, epoch: int = 0, group: GroupLike = None) -> Iterator[Optional[Comm]]:
    """with step(step, epoch): every operation issued inside (on a collie
    communicator: its whole tree, whenever it completes; on
    torch.distributed: the calls of these wrappers) is accounted to this
    step in comms.csv, written by rank 0 once the step ended and its
    operations completed. step >= 1, epoch >= 0."""
    d = _torch_for("step", group, None)
    comm = resolve(group) if d is None else None
    step_begin(step, epoch, group)
    try:
        yield comm
    finally:
        step_end(group)


# ---- configuration ----------------------------------------------------------------

_config: Dict[str, Any] = {}


def _load(path: Union[str, bytes, "os.PathLike[str]"]) -> Any:
    path = os.fsdecode(path)
    ext = os.path.splitext(path)[1].lower()
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise InvalidArgument("configure: cannot read %s: %s" % (path, e.strerror)) from None
    yaml: Any
    try:
        yaml = importlib.import_module("yaml")  # optional (PyYAML)
    except ImportError:
        yaml = None
    if ext in (".yaml", ".yml"):
        if yaml is None:
            raise InvalidArgument("configure: %s is YAML but PyYAML is not installed; use a JSON file" % path)
        return yaml.safe_load(text)
    try:
        return json.loads(text)
    except ValueError as e:
        if yaml is None or ext == ".json":
            raise InvalidArgument("configure: %s is not valid JSON: %s" % (path, e)) from None
    try:
        return yaml.safe_load(text)
    except Exception as e:
        raise InvalidArgument("configure: %s is neither JSON nor YAML: %s" % (path, e)) from None


def _section(m: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    v = m.get(key)
    if v is None:
        return {}
    if isinstance(v, bool) and key in ("comms_log", "timing_log"):
        return {"enabled": v}
    if not isinstance(v, collections.abc.Mapping):
        raise InvalidArgument("configure: %s.%s must be a mapping, got %r" % (where, key, v))
    return v


def _bool(v: object, where: str) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.lower() in ("true", "false", "1", "0", "yes", "no", "on", "off"):
        return v.lower() in ("true", "1", "yes", "on")
    raise InvalidArgument("configure: %s = %r must be a boolean" % (where, v))


def configure(config: Union[Mapping[str, Any], str, bytes, "os.PathLike[str]", None]) -> Dict[str, Optional[str]]:
    """Applies a telemetry configuration to communicators created afterwards.

    config: a mapping, or the path of a JSON file (or YAML when PyYAML is
    importable), or None to clear what an earlier configure() set.
    Recognised keys (others are ignored: the file may configure the whole
    training run):

        runtime:
          comms_log:   {enabled: bool, dir: path}   # COLLIE_COMMS_LOG, COLLIE_LOG_DIR
          timing_log:  {enabled: bool, dir: path}   # COLLIE_TIMING_LOG (dir required when enabled)

    These override the environment variables for communicators created after
    the call (explicit new_comm(hints=...) override them in turn). Returns the
    COLLIE_* settings now in effect for new communicators."""
    global _config
    if config is None:
        with _comm._registry_lock:
            _comm._pending_env.clear()
        _config = {}
        _tc.reconfigure()
        return {}
    if isinstance(config, (str, bytes, os.PathLike)):
        config = _load(config)
    if not isinstance(config, collections.abc.Mapping):
        raise InvalidArgument("configure: config must be a mapping or a file path, got %s" % type(config).__name__)
    runtime = _section(config, "runtime", "config")
    env: Dict[str, Optional[str]] = {}
    cl = _section(runtime, "comms_log", "runtime")
    if "enabled" in cl:
        env["COLLIE_COMMS_LOG"] = "1" if _bool(cl["enabled"], "runtime.comms_log.enabled") else "0"
    for key in ("dir", "log_dir"):
        if cl.get(key) is not None:
            env["COLLIE_LOG_DIR"] = os.fspath(cl[key])
    tl = _section(runtime, "timing_log", "runtime")
    if "enabled" in tl or tl.get("dir") is not None:
        on = _bool(tl.get("enabled", True), "runtime.timing_log.enabled")
        d = tl.get("dir") or tl.get("log_dir")
        if on and not d:
            raise InvalidArgument("configure: runtime.timing_log.enabled is true but runtime.timing_log.dir is missing")
        env["COLLIE_TIMING_LOG"] = os.fspath(d) if on and d else None
    with _comm._registry_lock:
        _comm._pending_env.update(env)
        effective = dict(_comm._pending_env)
    if "COLLIE_COMMS_LOG" in env or "COLLIE_LOG_DIR" in env:
        _tc.reconfigure()  # torch.distributed's comms.csv reopens with the new settings at its next use
    with _comm._registry_lock:
        live = [c for c in _comm._live if c._h is not None]
    if live and env:
        warnings.warn(
            "collie.distributed.configure: %d communicator(s) already exist and keep their settings; the "
            "configuration applies to communicators created from now on" % len(live),
            stacklevel=2,
        )
    _config = dict(config)
    return effective


def current_config() -> Dict[str, Optional[str]]:
    """The COLLIE_* settings configure() queued for new communicators."""
    with _comm._registry_lock:
        return dict(_comm._pending_env)


# Re-exported for `from collie.distributed import *` users.
get_default_comm = get_default_comm
