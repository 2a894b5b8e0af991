"""
Short full collections of the cyclic garbage collector while real-time envs live.

A process with rclpy, numpy and Gymnasium loaded holds tens of thousands of container objects,
and CPython's full (generation 2) collection walks all of them with the GIL held: about 20 ms
on the 2-core test machine, a time-out for any shorter time-step (one in every sim-time run
of ``tools/demo --sim-time 2``). ``gc.freeze()`` moves the objects alive now to a permanent
generation that collections skip. An env does it when it starts and at each reset, after a
collection, so that no garbage is frozen; the last env to close unfreezes, so that what it
leaves behind can be collected.
"""

import gc
import threading

_lock = threading.Lock()
_holders: set[int] = set()


def acquire(owner: object, enabled: bool) -> None:
    """Freeze for ``owner`` (an env starting); ``enabled`` False asks nothing."""
    if not enabled:
        return
    with _lock:
        _holders.add(id(owner))
    settle(owner)


def settle(owner: object) -> None:
    """Collect the garbage there is, then freeze the rest (between episodes: not real time)."""
    with _lock:
        if id(owner) not in _holders:
            return
    gc.collect()
    gc.freeze()


def release(owner: object) -> None:
    """Forget ``owner``; the last one out unfreezes."""
    with _lock:
        if id(owner) not in _holders:
            return
        _holders.discard(id(owner))
        if _holders:
            return
    gc.unfreeze()
