"""
A shorter GIL switch interval while real-time envs live in the process.

The executor thread shares the GIL with the agent. CPython makes a waiting thread wait up to
the switch interval (5 ms by default) before a busy thread hands the GIL over, so a timer that
fires while the agent runs pure Python is late by up to 5 ms. Lowering the interval bounds that
lateness; the cost is more frequent GIL hand-offs for the agent (see README, "GIL").
"""

import sys
import threading

_lock = threading.Lock()
_holders: dict[int, float] = {}
_original: float | None = None


def acquire(owner: object, interval: float | None) -> None:
    """Apply ``interval`` (the smallest asked by any live owner wins); None asks nothing."""
    global _original
    if interval is None:
        return
    with _lock:
        if not _holders:
            _original = sys.getswitchinterval()
        _holders[id(owner)] = interval
        sys.setswitchinterval(min(_holders.values()))


def release(owner: object) -> None:
    """Forget ``owner``'s request; the last one out restores the original interval."""
    with _lock:
        if _holders.pop(id(owner), None) is None:
            return
        if _holders:
            sys.setswitchinterval(min(_holders.values()))
        elif _original is not None:
            sys.setswitchinterval(_original)
