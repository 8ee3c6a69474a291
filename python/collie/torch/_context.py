"""_context.py - what collie.torch's context managers set for the calls torch
makes: the payload category, label and phase of the calls inside a
``with collie.torch.category(...)`` block, and the live process groups (for
step() and get_comm()).

The category is process-wide while the block is open, not per thread: DDP
issues its allreduces from autograd's threads, which a thread-local setting
on the training loop's thread would miss.
"""

import threading

from . import _fast

_lock = threading.Lock()
_stack = []  # (category id, label bytes or None, phase bytes or None)
_groups = []  # live ProcessGroupCollie, oldest first


def current():
    """The innermost open category block, or None."""
    return _stack[-1] if _stack else None


def push(entry):
    with _lock:
        _stack.append(entry)
        _fast.context_changed(entry)  # the C++ fast path charges its calls to it too


def pop(entry):
    with _lock:
        for i in range(len(_stack) - 1, -1, -1):
            if _stack[i] is entry:
                del _stack[i]
                _fast.context_changed(current())
                return


def groups_add(pg):
    with _lock:
        _groups.append(pg)


def groups_remove(pg):
    with _lock:
        if pg in _groups:
            _groups.remove(pg)


def groups():
    with _lock:
        return list(_groups)
