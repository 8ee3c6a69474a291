"""collie.torch - collie as a torch.distributed backend (CPU and CUDA tensors).

    import collie.torch                      # registers the backend "collie"
    import torch.distributed as dist
    dist.init_process_group("collie")        # env://, tcp://, file://, as with gloo

Unchanged torch code then runs on collie: every torch.distributed
collective, point-to-point operation, DistributedDataParallel (its
communication hooks included) and the object collectives built on them.
The group meets through the Store torch hands it (no port or variable of
collie's own); its timeout is collie's per-operation deadline; failures raise
CollieBackendError (a RuntimeError) with collie's message naming the
operation and the peer. docs/torch.md is the guide.

collie's own tools see torch's calls: the flight recorder and
`collie-report hang`, COLLIE_TIMING_LOG, and comms.csv through

    with collie.torch.step(step, epoch):     # one comms.csv row per step
        with collie.torch.category("gradients", label="bucket0"):
            loss.backward()                  # DDP's allreduces are charged to "gradients"

Two functions of torch.distributed are wrapped (for collie groups only;
other backends go straight to torch's own): destroy_process_group, so that
destroying a group frees its communicator at once, and monitored_barrier,
which torch allows only on gloo.
"""

from __future__ import annotations

import atexit
import contextlib
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Tuple, Union

try:
    import torch
    import torch.distributed as dist
except ImportError as e:  # pragma: no cover - depends on the machine
    raise ImportError("collie.torch needs PyTorch with torch.distributed (import torch failed: %s); install "
                      "torch >= 1.13 (Debian: apt-get install python3-torch)" % e) from e

MIN_TORCH = (1, 13)


def _version(v: str) -> Tuple[int, ...]:
    out = []
    for part in v.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


if _version(torch.__version__) < MIN_TORCH:
    raise ImportError("collie.torch needs torch >= %d.%d (this is torch %s)" % (MIN_TORCH + (torch.__version__,)))
if not dist.is_available():
    raise ImportError("collie.torch: this torch was built without torch.distributed")

from .. import PayloadCategory, _exit, register_category  # noqa: E402
from .._comm import registered_categories  # noqa: E402
from .._enums import to_category  # noqa: E402
from . import _context  # noqa: E402
from . import _pg  # noqa: E402
from ._common import CollieBackendError  # noqa: E402
from ._pg import ProcessGroupCollie, create, python_group  # noqa: E402

if TYPE_CHECKING:
    import datetime

    from .._comm import CategoryLike, Comm

BACKEND = "collie"

__all__ = [
    "BACKEND",
    "CollieBackendError",
    "PayloadCategory",
    "ProcessGroupCollie",
    "category",
    "fast_path_loaded",
    "get_comm",
    "python_group",
    "shrink",
    "register_category",
    "step",
    "step_begin",
    "step_end",
]


def _register() -> None:
    plugins = getattr(dist.Backend, "_plugins", {})
    if BACKEND.upper() in plugins:
        return  # a second import (importlib.reload, two copies on sys.path): already there
    try:
        # CUDA tensors take the C library's device path (staged through the host; docs/gpu.md).
        # (torch 1.13: register_backend is unannotated, and has no devices=)
        dist.Backend.register_backend(BACKEND, create,  # type: ignore[call-arg,no-untyped-call]
                                      devices=["cpu", "cuda"])
    except TypeError:  # torch < 2.1: no devices=
        dist.Backend.register_backend(BACKEND, create)  # type: ignore[no-untyped-call]  # (torch 1.13: unannotated)


_register()
from . import _fast  # noqa: E402


@atexit.register
def _shutdown_groups() -> None:
    """At exit, before collie finalizes the communicators left open (its
    own atexit handler, registered earlier, runs after this one): each
    group's C++ half lets go of its communicator first, and the group is shut
    down as destroy_process_group would, so that nothing keeps a freed one.
    A process dying of an uncaught exception aborts them first, telling the
    peers why, rather than wait for them at the closing barrier
    (collie/_exit.py)."""
    why = _exit.cause()
    for pg in reversed(_context.groups()):
        try:
            if why is not None:
                pg.abort(why)
            pg.shutdown()
        except Exception:
            pass


if _fast._mode() == "1":  # (a bad COLLIE_TORCH_FAST raises here, naming it)
    _fast.module()  # required: its absence is an ImportError now, not at init_process_group


# ---- the collie group behind a torch group --------------------------------

def _pg_of(group: object) -> Optional[ProcessGroupCollie]:
    """The ProcessGroupCollie of group (None: the default group)."""
    if group is None or group is getattr(dist.GroupMember, "WORLD", None):
        if not dist.is_initialized():
            raise RuntimeError("collie.torch: torch.distributed is not initialised (call "
                               "dist.init_process_group(\"collie\") first)")
        group = dist.distributed_c10d._get_default_group()  # type: ignore[no-untyped-call]  # (torch 1.13)
    return python_group(group)


def fast_path_loaded() -> bool:
    """True when torch's calls go through the C++ fast path (docs/torch.md,
    "The C++ fast path"); False when the Python backend serves them all."""
    return _fast.module() is not None


def get_comm(group: Optional[dist.ProcessGroup] = None) -> Comm:
    """The collie.Comm under a torch group of the collie backend (None: the
    default group): collie's own API (step_begin, flight_dump, ...) on it."""
    pg = _pg_of(group)
    if pg is None:
        raise RuntimeError("collie.torch.get_comm: %r is not a group of the collie backend" % (group,))
    return pg.comm


# ---- shrink and continue ------------------------------------------------------

_shrinks = [0]


def shrink(timeout: Optional[float] = None) -> Tuple[int, int]:
    """After a collective of the default group failed (a rank died or froze),
    every surviving rank calls this: the survivors agree on who is left
    (collie_comm_shrink) and torch's default group is made anew over just
    them, renumbered in the old order: dist.get_rank() and get_world_size()
    change, and torch.distributed calls, DDP included, go on. Groups made with
    new_group() are destroyed with the old default group; make them again.
    Returns (new rank, new world size). timeout (seconds; None: the group's)
    bounds the wait for a rank that neither calls nor is found dead. torch's
    own store is served by its rank 0: that rank must survive (collie's C
    API, with a file store, survives any rank; docs/reliability.md)."""
    old = _pg_of(None)
    if old is None:
        raise RuntimeError("collie.torch.shrink: the default group is not the collie backend's")
    store, tmo = old._store, old._timeout
    if store is None:
        raise RuntimeError("collie.torch.shrink: the default group was destroyed")
    new = old.comm.shrink(timeout=timeout, name="torch-shrunk")
    _shrinks[0] += 1
    # torch's barrier at init counts in this store: a prefix of its own per shrink.
    prefixed = dist.PrefixStore("collie-shrink-%d/" % _shrinks[0], store)
    dist.destroy_process_group()
    _pg._adopt.append(new)
    try:
        dist.init_process_group("collie", store=prefixed, rank=new.rank, world_size=new.size, timeout=tmo)
    finally:
        if _pg._adopt and _pg._adopt[-1] is new:
            _pg._adopt.pop()
            new.finalize()
    return new.rank, new.size


# ---- telemetry ------------------------------------------------------------

def step_begin(step: int, epoch: int = 0, group: Optional[dist.ProcessGroup] = None) -> None:
    """Opens training step `step` (>= 1) of `epoch` for comms.csv on the
    group's communicator (default group): its operations until step_end()
    are charged to the step."""
    get_comm(group).step_begin(step, epoch)


def step_end(group: Optional[dist.ProcessGroup] = None) -> None:
    get_comm(group).step_end()


@contextlib.contextmanager
def step(step: int, epoch: int = 0, group: Optional[dist.ProcessGroup] = None) -> Iterator[None]:
    """with collie.torch.step(step, epoch): ... - one comms.csv row per step
    (rank 0 writes COLLIE_LOG_DIR/comms.csv; docs/telemetry.md)."""
    c = get_comm(group)
    c.step_begin(step, epoch)
    try:
        yield
    finally:
        c.step_end()


@contextlib.contextmanager
def category(cat: CategoryLike, label: Optional[str] = None, phase: Optional[str] = None) -> Iterator[None]:
    """Charges the collie calls torch makes inside the block to payload
    category `cat` (a collie.PayloadCategory, its name, or a name to
    register), with an optional label (layer or bucket) and phase for the
    timing log. Process-wide while open (DDP issues from autograd's threads);
    blocks nest."""
    if isinstance(cat, str) and cat.upper() not in PayloadCategory.__members__ and cat not in registered_categories:
        raise ValueError("collie.torch.category(%r): not a built-in category (%s); register it with "
                         "collie.torch.register_category(%r) before init_process_group (a communicator's "
                         "comms.csv columns are fixed when it is created)"
                         % (cat, ", ".join(m.lower() for m in PayloadCategory.__members__), cat))
    entry = (to_category(cat), None if label is None else str(label).encode(),
             None if phase is None else str(phase).encode())
    _context.push(entry)
    try:
        yield
    finally:
        _context.pop(entry)


# ---- the two wrapped torch.distributed functions --------------------------

def _wrap_destroy() -> None:
    orig = dist.destroy_process_group
    if getattr(orig, "_collie_wrapped", False):
        return

    def destroy_process_group(group: Optional[dist.ProcessGroup] = None) -> None:
        if group is None or group is getattr(dist.GroupMember, "WORLD", None):
            pgs = list(reversed(_context.groups()))
        else:
            pg = _pg_of(group)
            pgs = [pg] if pg is not None else []
        orig(group)
        for pg in pgs:
            pg.shutdown()

    _install("destroy_process_group", destroy_process_group, orig)


def _install(name: str, fn: Callable[..., Any], orig: Any) -> None:
    """Puts fn in place of torch.distributed's function name (in
    distributed_c10d too), marked as collie's so it is wrapped once."""
    wrapper: Any = fn  # (a function with attributes of ours)
    wrapper._collie_wrapped = True
    wrapper.__doc__ = orig.__doc__
    wrapper.__wrapped__ = orig
    setattr(dist, name, wrapper)
    setattr(dist.distributed_c10d, name, wrapper)


def _wrap_monitored_barrier() -> None:
    orig = dist.monitored_barrier
    if getattr(orig, "_collie_wrapped", False):
        return

    def monitored_barrier(group: Optional[dist.ProcessGroup] = None,
                          timeout: Union[datetime.timedelta, float, None] = None, wait_all_ranks: bool = False) -> Any:
        pg = _pg_of(group) if dist.is_initialized() else None
        if pg is None:
            # (torch 1.13's monitored_barrier is unannotated)
            return orig(group, timeout, wait_all_ranks) if group is not None else orig(  # type: ignore[no-untyped-call]
                timeout=timeout, wait_all_ranks=wait_all_ranks)
        return pg.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)

    _install("monitored_barrier", monitored_barrier, orig)


_wrap_destroy()
_wrap_monitored_barrier()
