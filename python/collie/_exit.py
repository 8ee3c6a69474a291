"""_exit.py - why this process is exiting, for the communicators it leaves.

A process that dies of an uncaught exception must not hold its peers, nor be
held by them: destroying a communicator waits at a closing barrier for every
other rank, which may be busy outside collie for as long as the group's
timeout, and then meets that barrier in its next collective. So collie
notes the exception (sys.excepthook runs before atexit) and, at exit, aborts
the communicators left open instead, telling the peers why: their next
operation fails at once with "... aborted its communicator ..., after: its
process is exiting on an uncaught exception (ValueError: bad batch)".
"""

from __future__ import annotations

import sys
import threading
from types import TracebackType
from typing import Callable, List, Optional, Type

_Hook = Callable[[Type[BaseException], BaseException, Optional[TracebackType]], object]

_cause: List[str] = []
_lock = threading.Lock()


def cause() -> Optional[str]:
    """The peers' explanation when the process is exiting on an uncaught
    exception, else None."""
    with _lock:
        return _cause[0] if _cause else None


def _note(et: Type[BaseException], ev: BaseException) -> None:
    if issubclass(et, SystemExit):  # (an exit, not a failure: Ctrl-C is one)
        return
    what = "%s: %s" % (et.__name__, ev) if str(ev) else et.__name__
    if len(what) > 180:
        what = what[:177] + "..."
    with _lock:
        if not _cause:
            _cause.append("its process is exiting on an uncaught exception (%s)" % what)


def _install() -> None:
    prev: _Hook = sys.excepthook
    if getattr(prev, "_collie_exit_hook", False):
        return

    def hook(et: Type[BaseException], ev: BaseException, tb: Optional[TracebackType]) -> object:
        _note(et, ev)
        return prev(et, ev, tb)

    hook._collie_exit_hook = True  # type: ignore[attr-defined]
    sys.excepthook = hook


_install()
