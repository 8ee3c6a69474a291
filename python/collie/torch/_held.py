"""_held.py - the process groups holding isends and irecvs not yet issued,
and the one rule that issues them: any operation on any collie group of the
process, and any wait or test on a Work, issues every group's held ones
first. Without a timer a held receive can never leave alone and block a
send the same rank issues after it (collie runs a communicator's operations
one at a time, in issue order); with one, the receive of an
irecv-compute-isend step left when the compute took longer than the timer."""

from __future__ import annotations

from typing import Any, Dict

# id(group) -> group (a ProcessGroupCollie) while it holds any.
HOLDING: Dict[int, Any] = {}


def flush_held() -> None:
    """Issues every group's held isends and irecvs (those between torch's
    _start_coalescing and _end_coalescing stay until the end)."""
    for g in list(HOLDING.values()):
        g._flush_p2p()
