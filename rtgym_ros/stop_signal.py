"""
SIGTERM in a plain training script: the robots get their safe action before the process goes.

Python's default action for SIGTERM (``docker stop``, systemd, a job scheduler, ``timeout``)
ends the process at once: no ``finally``, no ``atexit``, so no env can send its safe action,
and a robot without a command timeout of its own keeps the last command. ``rclpy.init()``
handles SIGTERM by default for a clean shutdown; the env's contexts are made without rclpy's
handlers, which are the process's (Ctrl-C stays the user's). So an env made on the main thread
handles it here, where SIGTERM still has its default action: the first SIGTERM raises
``SystemExit(143)`` (128 + 15, the shell's code for it) in the main thread, ``finally`` blocks
and ``atexit`` run, and ``close_all()`` sends each env's safe action. The default action comes
back with it: a second SIGTERM ends the process at once.

A handler the script set, rclpy's included, is left as it is; an env made on another thread
cannot set one (Python sets handlers from the main thread only).
"""

import signal
import threading
from typing import Any

from rclpy.signals import get_current_signal_handlers_options, SignalHandlerOptions

EXIT_CODE = 128 + signal.SIGTERM


def stop_robots_on_sigterm() -> bool:
    """Handle SIGTERM as above if it still has its default action; say whether it is ours."""
    if threading.current_thread() is not threading.main_thread():
        return False
    current = signal.getsignal(signal.SIGTERM)
    if current is _exit_on_sigterm:
        return True
    rclpy_handles = get_current_signal_handlers_options() in (SignalHandlerOptions.ALL,
                                                              SignalHandlerOptions.SIGTERM)
    if current is not signal.SIG_DFL or rclpy_handles:
        return False
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    return True


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    raise SystemExit(EXIT_CODE)
