"""_fast.py - the C++ fast path of the backend (_ext/, docs/torch.md, "The C++
fast path"): finding and loading it, and telling it what the Python side
holds.

The build puts the module (_collie_torch_fast<ext suffix>) next to
libcollie.so when the torch it was built for has C++ headers (pip install .:
both in the package's collie/lib/, or a note there of why the build made no
module, which the message of its absence quotes). When it loads,
torch holds a FastGroup (C++) that issues the common case straight into
libcollie and hands the rest to the ProcessGroupCollie; otherwise torch
holds the ProcessGroupCollie itself. Results are the same either way; only
the cost of a call differs.

COLLIE_TORCH_FAST: unset or "auto" - use it when it loads (a module that does
not load, e.g. built for another torch, warns once and is skipped; its
absence is an INFO line on the "collie" logger); "0" - never; "1" - required
(its absence or a load failure is an ImportError saying why).
"""

from __future__ import annotations

import glob
import importlib.machinery
import logging
import os
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Dict, Optional

from .. import _lib

if TYPE_CHECKING:
    from ._context import Entry

_NAME = "_collie_torch_fast"
_state: Dict[str, Optional[ModuleType]] = {}


def _mode() -> str:
    v = os.environ.get("COLLIE_TORCH_FAST", "auto").strip().lower()
    if v in ("", "auto"):
        return "auto"
    if v in ("0", "1"):
        return v
    raise ImportError("COLLIE_TORCH_FAST=%r: expected 0, 1 or auto" % v)


def _load() -> Optional[ModuleType]:
    mode = _mode()
    if mode == "0":
        return None
    path = _lib.path()
    where, found = _lib.extension_beside(_NAME)
    if not found:
        why = _missing(where)
        if mode == "1":
            raise ImportError("COLLIE_TORCH_FAST=1: no %s%s next to %s (%s)" %
                              (_NAME, importlib.machinery.EXTENSION_SUFFIXES[0], path, why))
        logging.getLogger("collie").info("collie.torch: no C++ fast path next to %s (%s); the Python "
                                         "backend serves every call", path, why)
        return None
    # The torch it was built for (a file the build writes beside it): a
    # module built for another torch would crash the process as it loads.
    try:
        with open(os.path.join(where or "", _NAME + ".torch")) as f:
            built_for = f.read().strip()
    except OSError:
        built_for = None
    import torch
    if built_for is not None and built_for != torch.__version__:
        why = "%s was built for torch %s, and this is torch %s" % (found[0], built_for, torch.__version__)
        if mode == "1":
            raise ImportError("COLLIE_TORCH_FAST=1: %s (rebuild collie against this torch)" % why)
        warnings.warn("collie.torch: the C++ fast path is not loaded: %s; the Python backend serves every "
                      "call (rebuild collie against this torch)" % why, RuntimeWarning)
        return None
    try:
        mod = _lib.load_extension(_NAME, found[0])
    except ImportError as e:
        if mode == "1":
            raise ImportError("COLLIE_TORCH_FAST=1: %s does not load: %s" % (found[0], e)) from e
        warnings.warn("collie.torch: the C++ fast path %s does not load (%s); the Python backend serves "
                      "every call (rebuild collie against this torch)" % (found[0], e), RuntimeWarning)
        return None
    return mod


def _missing(where: Optional[str]) -> str:
    """Why there is no fast path in where (the directory of the library in
    use), and how to get one."""
    other = sorted(glob.glob(os.path.join(where, _NAME + ".*"))) if where else []
    modules = [f for f in other if not f.endswith((".torch", ".missing"))]
    if modules:
        return "only %s, built for another Python" % ", ".join(os.path.basename(f) for f in modules)
    if where is None or where != os.path.dirname(_lib.bundled()):
        return "build with torch's C++ headers installed: Debian's libtorch-dev"
    # The library of an installed wheel (pip install .): its build says why
    # it made no fast path (cmake/wheel.cmake).
    try:
        with open(os.path.join(where, _NAME + ".missing")) as f:
            built = "its build: %s" % f.read().strip()
    except OSError:
        built = "its build did not say why"
    import torch
    return ("collie was installed without it; %s. To add it, reinstall collie from its source in this "
            "environment (torch %s, Python 3.11 or later): pip install scikit-build-core, then "
            "pip install --no-build-isolation --force-reinstall --no-deps <collie's source directory>"
            % (built, torch.__version__))


def module() -> Optional[ModuleType]:
    """The loaded extension, or None (loaded once)."""
    if "mod" not in _state:
        _state["mod"] = _load()
    return _state["mod"]


def context_changed(top: Optional[Entry]) -> None:
    """The innermost open collie.torch.category block changed (None: none)."""
    mod = _state.get("mod")
    if mod is None:
        return
    if top is None:
        mod.set_context(False, 0, "", False, "", False)
        return
    cat, label, phase = top
    mod.set_context(True, int(cat), (label or b"").decode("utf-8", "replace"), label is not None,
                    (phase or b"").decode("utf-8", "replace"), phase is not None)
