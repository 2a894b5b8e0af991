"""
The timer slack of the executor thread: how late Linux may end its sleeps and timed waits.

Linux lets an ordinary thread's timed sleep end up to its timer slack (50 µs by default) after
the time asked, so that wake-ups can be grouped. The executor thread sleeps to every deadline
of the time-step: each capture and each action would land that much late, by a varying amount.
A slack of 1 µs ends the sleep on time (median lateness of a 1 kHz capture 29–40 µs with it,
69–87 µs without, on the 2-core test machine: ``benchmarks/step_timing.py --timer-slack``).
The slack is the calling thread's own: the rest of the process keeps the kernel's default.
"""

import ctypes
import functools
import sys

_PR_SET_TIMERSLACK = 29  # <linux/prctl.h>
_PR_GET_TIMERSLACK = 30


@functools.cache
def _prctl():
    if not sys.platform.startswith('linux'):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def set_for_this_thread(seconds: float | None) -> bool:
    """
    Set the calling thread's timer slack to ``seconds`` (None asks nothing).

    :returns: whether it was set; False where the platform has no timer slack (not Linux).
    """
    prctl = _prctl()
    if seconds is None or prctl is None:
        return False
    nanoseconds = max(1, round(seconds * 1e9))  # 0 would mean "the default" to the kernel
    return prctl(_PR_SET_TIMERSLACK, ctypes.c_ulong(nanoseconds), 0, 0, 0) == 0


def of_this_thread() -> float | None:
    """Return the calling thread's timer slack in seconds; None where there is none."""
    prctl = _prctl()
    if prctl is None:
        return None
    nanoseconds = prctl(_PR_GET_TIMERSLACK, 0, 0, 0, 0)
    return None if nanoseconds < 0 else nanoseconds * 1e-9
