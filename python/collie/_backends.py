"""_backends.py - what new_comm's backend and device arguments mean.

backend: "collie" runs collie. torchcomms' other backend names ("nccl",
"ncclx", "gloo", "rccl", "rcclx", "xccl") name other libraries; a script
that asks for one gets collie only where its user opted in, with
COLLIE_BACKEND_ALIASES (a comma list of those names, or "all"), so that
nobody benchmarks collie believing it is NCCL. Anything else is an error
naming the valid names.

device: which memory the communicator's tensors live in: "cpu", "cuda"
(any GPU) or "cuda:N" (that GPU), as a str or a torch.device; None accepts
either kind (collie's own default). Every call checks its tensors against
it (check_device), naming both.
"""

from __future__ import annotations

import os
from typing import Any, Optional, Tuple

from ._errors import InvalidArgument

BACKEND = "collie"
# torchcomms' backend names, and the library each one is.
ALIASES = {
    "nccl": "NVIDIA's NCCL",
    "ncclx": "Meta's NCCLX",
    "gloo": "Gloo",
    "rccl": "AMD's RCCL",
    "rcclx": "Meta's RCCLX",
    "xccl": "Intel's oneCCL",
}


def enabled_aliases(setting: Optional[str] = None) -> frozenset[str]:
    """The alias names COLLIE_BACKEND_ALIASES (or setting) enables."""
    raw = os.environ.get("COLLIE_BACKEND_ALIASES", "") if setting is None else setting
    names = {n.strip().lower() for n in raw.split(",") if n.strip()}
    if "all" in names:
        return frozenset(ALIASES)
    bad = sorted(names - set(ALIASES))
    if bad:
        raise InvalidArgument(
            "COLLIE_BACKEND_ALIASES = %r names %s, not one of %s (or all)"
            % (raw, ", ".join(bad), ", ".join(sorted(ALIASES))))
    return frozenset(names)


def resolve_backend(backend: object) -> str:
    """The backend name as given (lowercased) when it runs on collie, else
    InvalidArgument saying which names exist and how to opt in."""
    if backend is None:
        return BACKEND
    if not isinstance(backend, str):
        raise InvalidArgument("new_comm: backend = %r must be a str (\"%s\")" % (backend, BACKEND))
    name = backend.strip().lower()
    if name == BACKEND:
        return name
    if name in ALIASES:
        if name in enabled_aliases():
            return name
        raise InvalidArgument(
            "new_comm: backend %r is %s, and this is collie. To run a torchcomms script on collie "
            "unchanged, set COLLIE_BACKEND_ALIASES=%s (or =all); otherwise pass backend \"%s\" "
            "(docs/python.md, \"Coming from torchcomms\")" % (backend, ALIASES[name], name, BACKEND))
    raise InvalidArgument(
        "new_comm: backend = %r is not a backend: collie runs \"%s\", and, with COLLIE_BACKEND_ALIASES, "
        "torchcomms' names %s. (To name the communicator, pass name=%r.)"
        % (backend, BACKEND, ", ".join(sorted(ALIASES)), backend))


class Device:
    """The memory kind a communicator expects: kind "cpu" or "cuda", index
    None (any GPU) or N; given: what the caller passed (get_device())."""

    __slots__ = ("kind", "index", "given")

    def __init__(self, kind: str, index: Optional[int], given: Any) -> None:
        self.kind, self.index, self.given = kind, index, given

    def __str__(self) -> str:
        return self.kind if self.index is None else "%s:%d" % (self.kind, self.index)


def parse_device(device: object) -> Optional[Device]:
    """A Device of a torch.device or a str; None: no check."""
    if device is None:
        return None
    if isinstance(device, str):
        text = device
    elif isinstance(getattr(device, "type", None), str):  # torch.device
        kind, idx = getattr(device, "type"), getattr(device, "index", None)
        text = kind if idx is None else "%s:%s" % (kind, idx)
    else:
        raise InvalidArgument(
            "new_comm: device = %r is not a device: pass a torch.device or \"cpu\", \"cuda\", \"cuda:N\"" % (device,))
    kind, _, idx = text.strip().lower().partition(":")
    if kind not in ("cpu", "cuda"):
        raise InvalidArgument(
            "new_comm: device = %r: collie communicates CPU and CUDA memory (\"cpu\", \"cuda\", \"cuda:N\")"
            % (device,))
    index: Optional[int] = None
    if idx:
        if not idx.isdigit() or kind == "cpu" and int(idx) != 0:
            raise InvalidArgument("new_comm: device = %r has a bad index %r" % (device, idx))
        index = int(idx) if kind == "cuda" else None
    return Device(kind, index, device)


def where_is(obj: object, on_device: bool) -> Tuple[str, Optional[int]]:
    """("cpu", None) or ("cuda", ordinal or None when the array does not say)
    of an array the binding acquired (on_device: its Buf said CUDA)."""
    if not on_device:
        return ("cpu", None)
    dev = getattr(obj, "device", None)
    idx = getattr(dev, "index", None)  # torch
    if idx is None:
        idx = getattr(dev, "id", None)  # CuPy
    return ("cuda", idx if isinstance(idx, int) else None)


def check_device(want: Optional[Device], obj: object, on_device: bool, what: str) -> None:
    """InvalidArgument when an array is not in the memory want names."""
    if want is None:
        return
    kind, idx = where_is(obj, on_device)
    if kind == want.kind and (want.index is None or idx is None or idx == want.index):
        return
    have = kind if idx is None else "%s:%d" % (kind, idx)
    raise InvalidArgument("%s is on %s but the communicator was made for device %s" % (what, have, want))
