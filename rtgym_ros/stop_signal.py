"""
SIGTERM or SIGHUP in a plain training script: the robots get their safe action first.

Python's default action for SIGTERM (``docker stop``, systemd, a job scheduler, ``timeout``) and
for SIGHUP (the terminal or the ssh session of the script closed) ends the process at once: no
``finally``, no ``atexit``, so no env can send its safe action, and a robot without a command
timeout of its own keeps the last command. ``rclpy.init()`` handles SIGTERM by default for a
clean shutdown (SIGHUP it leaves to Python); the env's contexts are made without rclpy's
handlers, which are the process's (Ctrl-C stays the user's). So an env made on the main thread
handles each of the two here, where it still has its default action: the first one raises
``SystemExit(128 + signum)`` (143, 129: the shell's codes for them) in the main thread,
``finally`` blocks and ``atexit`` run, and ``close_all()`` sends each env's safe action. The
default action comes back with it: a second one ends the process at once. After a real hangup
the terminal's stdout and stderr go to /dev/null, where every write would fail (EIO).

A handler the script set, rclpy's included, is left as it is, and so is an ignored SIGHUP
(``nohup``: the script is meant to outlive its terminal). An env made on another thread cannot
set one (Python sets handlers from the main thread only).
"""

import errno
import os
import signal
import termios
import threading
from typing import Any

from rclpy.signals import get_current_signal_handlers_options, SignalHandlerOptions

STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""The signals whose default action would end a script without its envs' safe actions."""


def exit_code(signum: int) -> int:
    """Return the shell's exit code for a process ended by ``signum``."""
    return 128 + signum


def stop_robots_on_stopping_signals() -> tuple[int, ...]:
    """Handle the signals of ``STOPPING_SIGNALS`` as above; return those handled here."""
    if threading.current_thread() is not threading.main_thread():
        return ()
    return tuple(signum for signum in STOPPING_SIGNALS if _handle(signum))


def _handle(signum: int) -> bool:
    current = signal.getsignal(signum)
    if current is _exit_on_signal:
        return True
    if current is not signal.SIG_DFL or _rclpy_handles(signum):
        return False
    signal.signal(signum, _exit_on_signal)
    return True


def _rclpy_handles(signum: int) -> bool:
    """Say whether rclpy's handler runs for ``signum`` (Python sees SIG_DFL in its place)."""
    if signum != signal.SIGTERM:
        return False
    return get_current_signal_handlers_options() in (SignalHandlerOptions.ALL,
                                                     SignalHandlerOptions.SIGTERM)


def _exit_on_signal(signum: int, frame: Any) -> None:
    signal.signal(signum, signal.SIG_DFL)  # a second one ends the process at once
    if signum == signal.SIGHUP:
        silence_a_hung_up_terminal()  # the script's last words must not fail on their way
    raise SystemExit(exit_code(signum))


def silence_a_hung_up_terminal() -> None:
    """
    Send stdout and stderr to /dev/null where they are a terminal that hung up.

    Once the terminal (or ssh session) is gone, every write to it fails with EIO: the messages
    of a clean stop, and Python's last flush, would raise on their way out. A ``kill -HUP``
    leaves a live terminal as it is.
    """
    for fd in (1, 2):
        try:
            termios.tcgetattr(fd)
        except termios.error as error:  # ENOTTY: a pipe or a file; EBADF: closed
            if error.args[0] == errno.EIO:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, fd)
                os.close(devnull)
