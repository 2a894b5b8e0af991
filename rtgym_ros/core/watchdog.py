"""
A wall-clock watchdog on a thread of its own: it acts whatever the executor thread is doing.

The env re-arms it at every time-step start and end (a float written, no lock, no wake-up);
the thread sleeps until the deadline it last read and looks again. Neither a blocked executor
thread (an interface call that hangs) nor a stopped ``/clock`` can keep it from firing.
"""

import threading
import time
from typing import Callable


class Watchdog:
    """Call ``on_expire`` once when ``monotonic()`` passes the armed deadline."""

    def __init__(self, on_expire: Callable[[], None], *, name: str) -> None:
        self._on_expire = on_expire
        self._deadline: float | None = None
        self._armed = threading.Event()
        self._closing = threading.Event()  # ends a sleep at once: close() must not wait for it
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def arm(self, seconds: float) -> None:
        """Fire ``seconds`` (wall) from now unless re-armed or disarmed before."""
        self._deadline = time.monotonic() + seconds
        if not self._armed.is_set():
            self._armed.set()

    def disarm(self) -> None:
        self._deadline = None

    def close(self) -> None:
        self._closed = True
        self._deadline = None
        self._closing.set()
        self._armed.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(1.0)

    def _run(self) -> None:
        while not self._closed:
            deadline = self._deadline
            if deadline is None:
                self._armed.clear()
                if self._deadline is None:  # armed between the read and the clear: go on
                    self._armed.wait()
                continue
            remaining = deadline - time.monotonic()
            if remaining > 0.0:
                self._closing.wait(min(remaining, 0.5))
                continue
            if self._deadline == deadline and not self._closed:
                self._deadline = None
                try:
                    self._on_expire()
                except Exception:  # the watchdog must outlive one failed stop
                    pass
