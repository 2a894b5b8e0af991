"""
Ctrl-C while a node stops: let it finish putting the robot safe instead of dying half-way.

A terminal's Ctrl-C reaches the whole process group, so a node under ``ros2 launch`` gets
SIGINT twice (from the terminal and from launch), and impatient users press it twice. If the
second one interrupted the teardown, the process would exit with rclpy threads still running
("terminate called without an active exception") and, for the agent, maybe before the safe
action went out. Every teardown step of ours is bounded by a timeout, and the whole teardown by
:func:`bounded_teardown`: DDS can block for good while it destroys a participant
(eProsima/Fast-DDS#6513), holding the GIL, and then only a watchdog outside Python ends the
process. Stop signals stay ignored until it exits, since the interpreter's own finalization
would otherwise turn a late one into death by SIGINT.

The other way round, :func:`die_with_parent` makes a process that starts nodes (a test, an
example) take its children down with it.
"""

import atexit
from contextlib import contextmanager
import ctypes
import faulthandler
import signal
import sys
import threading
from typing import Any, Iterator

from rtgym_ros.stop_signal import silence_a_hung_up_terminal

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""What ends a node with a clean stop; and SIGHUP, unless it is ignored (:func:`stop_signals`)."""
# Seconds a node's whole teardown may take (its steps wait 5 s at most each).
TEARDOWN_LIMIT = 30.0
_PR_SET_PDEATHSIG = 1  # from <sys/prctl.h>


def stop_signals() -> tuple[int, ...]:
    """
    Return the signals that stop a node cleanly: SIGINT, SIGTERM, and SIGHUP unless ignored.

    By default a hangup (the terminal or the ssh session of ``ros2 run`` closed) ends the
    process at once, and the robot keeps its last command; ``nohup`` ignores it on purpose.
    """
    hangup = () if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN else (signal.SIGHUP,)
    return STOP_SIGNALS + hangup


def ignore_stop_signals() -> None:
    """
    From now on this process is stopping: SIGINT, SIGTERM and SIGHUP stop nothing more.

    A SIGHUP still sends a terminal that hung up to /dev/null: the stop's last messages (the
    agent's summary) would fail on it.
    """
    if threading.current_thread() is threading.main_thread():  # else Python refuses
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, _silence_on_hangup)


def _silence_on_hangup(signum: int, frame: Any) -> None:
    silence_a_hung_up_terminal()


def _ignore_hangups_to_the_end() -> None:
    """
    At exit of a stopping process (SIGHUP silences the terminal): ignore it to the end.

    Python's finalization sets every signal with a Python handler back to its default, and a
    SIGHUP's default ends the process: a second hangup in a node's last milliseconds (its
    teardown done) would turn its clean exit into death by the signal. Registered when this
    module is imported, so that the exit handlers registered later, which may still print,
    run before it with the terminal's silencing in place.
    """
    if signal.getsignal(signal.SIGHUP) is _silence_on_hangup:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)


atexit.register(_ignore_hangups_to_the_end)


@contextmanager
def bounded_teardown(limit: float = TEARDOWN_LIMIT) -> Iterator[None]:
    """
    Exit with code 1, printing every thread's stack, if the block takes over ``limit`` s.

    The robot's stop comes first in the block; what can hang after it is DDS's own teardown.
    faulthandler's watchdog is a C thread, so it fires even while a C call holds the GIL.
    """
    faulthandler.dump_traceback_later(limit, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def die_with_parent() -> None:
    """
    Ask for SIGTERM when the parent process dies: ``Popen(..., preexec_fn=die_with_parent)``.

    A test or a training script that is killed then leaves no orphaned sim behind. Linux only
    (``PR_SET_PDEATHSIG``); elsewhere it does nothing.
    """
    if sys.platform.startswith('linux'):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
