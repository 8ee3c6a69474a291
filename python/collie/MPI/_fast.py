"""_fast.py - finding and loading collie.MPI's C fast path (_ext/mpi_fast.c,
docs/mpi.md, "Speed").

The build puts the module (_collie_mpi_fast<ext suffix>) next to
libcollie.so (pip install .: both in the package's collie/lib/). When it
loads, Send, Ssend, Recv, Sendrecv, Barrier, Bcast, Reduce, Allreduce,
Allgather, Alltoall and Reduce_scatter_block hand their common case (a
contiguous buffer, a peer in range, a predefined op) to it, and the rest
to the Python code; results and errors are the same either way, only the
cost of a call differs (about 1 us instead of 20).

COLLIE_MPI_FAST: unset or "auto" - use it when it loads (its absence is an
INFO line on the "collie" logger); "0" - never; "1" - required (its absence
or a load failure is an ImportError saying why).
"""

from __future__ import annotations

import importlib.machinery
import logging
import os
from types import ModuleType
from typing import Any, Dict, Optional

from .. import _lib

_NAME = "_collie_mpi_fast"
_state: Dict[str, Optional[ModuleType]] = {}


def _mode() -> str:
    v = os.environ.get("COLLIE_MPI_FAST", "auto").strip().lower()
    if v in ("", "auto"):
        return "auto"
    if v in ("0", "1"):
        return v
    raise ImportError("COLLIE_MPI_FAST=%r: expected 0, 1 or auto" % v)


def _load(in_place: Any) -> Optional[ModuleType]:
    mode = _mode()
    if mode == "0":
        return None
    path = _lib.path()
    where, found = _lib.extension_beside(_NAME)
    if not found:
        why = ("no %s%s next to %s (it is built where Python's headers are installed: Debian's python3-dev)"
               % (_NAME, importlib.machinery.EXTENSION_SUFFIXES[0], path))
        if mode == "1":
            raise ImportError("COLLIE_MPI_FAST=1: " + why)
        logging.getLogger("collie").info("collie.MPI: %s; the Python code serves every call", why)
        return None
    try:
        mod = _lib.load_extension(_NAME, found[0])
    except ImportError as e:
        if mode == "1":
            raise ImportError("COLLIE_MPI_FAST=1: %s does not load: %s" % (found[0], e)) from e
        logging.getLogger("collie").warning("collie.MPI: the fast path %s does not load (%s); the Python code "
                                            "serves every call", found[0], e)
        return None
    mod.setup(in_place)
    return mod


def module(in_place: Any) -> Optional[ModuleType]:
    """The loaded extension, or None (loaded once). in_place: MPI.IN_PLACE."""
    if "mod" not in _state:
        _state["mod"] = _load(in_place)
    return _state["mod"]
