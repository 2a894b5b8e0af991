"""
Ctrl-C while a node stops: let it finish putting the robot safe instead of dying half-way.

A terminal's Ctrl-C reaches the whole process group, so a node under ``ros2 launch`` gets
SIGINT twice (from the terminal and from launch), and impatient users press it twice. If the
second one interrupted the teardown, the process would exit with rclpy threads still running
("terminate called without an active exception") and, for the agent, maybe before the safe
action went out. Every teardown step is bounded by a timeout, so ignoring further stop signals
cannot hang the process; they stay ignored until it exits, since the interpreter's own
finalization would otherwise turn a late one into death by SIGINT.

The other way round, :func:`die_with_parent` makes a process that starts nodes (a test, an
example) take its children down with it.
"""

import ctypes
import signal
import sys
import threading

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_PR_SET_PDEATHSIG = 1  # from <sys/prctl.h>


def ignore_stop_signals() -> None:
    """From now on this process is stopping: SIGINT and SIGTERM are ignored."""
    if threading.current_thread() is threading.main_thread():  # else Python refuses
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


def die_with_parent() -> None:
    """
    Ask for SIGTERM when the parent process dies: ``Popen(..., preexec_fn=die_with_parent)``.

    A test or a training script that is killed then leaves no orphaned sim behind. Linux only
    (``PR_SET_PDEATHSIG``); elsewhere it does nothing.
    """
    if sys.platform.startswith('linux'):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
