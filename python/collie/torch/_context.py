"""_context.py - what collie.torch's context managers set for the calls torch
makes: the payload category, label and phase of the calls inside a
``with collie.torch.category(...)`` block, and the live process groups (for
step() and get_comm()).

The category is process-wide while the block is open, not per thread: DDP
issues its allreduces from autograd's threads, which a thread-local setting
on the training loop's thread would miss.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, List, Optional, Tuple

from . import _fast

if TYPE_CHECKING:
    from ._pg import ProcessGroupCollie

# An open category block: (category id, label bytes or None, phase bytes or None).
Entry = Tuple[int, Optional[bytes], Optional[bytes]]

_lock = threading.Lock()
_stack: List[Entry] = []
_groups: List[ProcessGroupCollie] = []  # live ProcessGroupCollie, oldest first


def current() -> Optional[Entry]:
    """The innermost open category block, or None."""
    return _stack[-1] if _stack else None


def push(entry: Entry) -> None:
    with _lock:
        _stack.append(entry)
        _fast.context_changed(entry)  # the C++ fast path charges its calls to it too


def pop(entry: Entry) -> None:
    with _lock:
        for i in range(len(_stack) - 1, -1, -1):
            if _stack[i] is entry:
                del _stack[i]
                _fast.context_changed(current())
                return


def groups_add(pg: ProcessGroupCollie) -> None:
    with _lock:
        _groups.append(pg)


def groups_remove(pg: ProcessGroupCollie) -> None:
    with _lock:
        if pg in _groups:
            _groups.remove(pg)


def groups() -> List[ProcessGroupCollie]:
    with _lock:
        return list(_groups)
