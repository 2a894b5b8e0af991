"""
Wake-ups between the user's thread and the executor thread, on bare locks.

Two of them pass every time-step. ``threading.Event`` goes through a ``Condition`` written in
Python (a new lock and a waiter list per wait, a notify loop per set): about a hundred
bytecodes on each thread. A bare lock does the same in one C call per operation.

The waits pass the timeout by position: ``acquire(timeout=...)`` parses its keywords with
CPython's generic argument parser, and right after a wait that code is cold. Passed by
keyword it cost the user's thread 1 to 5 µs more per ``step()``, at 100 Hz and at 1 kHz, on
this project's 2-core VMs (``benchmarks/step_wait.py``).
"""

import _thread


class Signal:
    """
    A one-shot wake-up: a wait that returns True consumes it.

    Cleared and waited on by one thread only; notified from any.
    """

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._lock.acquire()  # locked: not notified

    def notify(self) -> None:
        try:
            self._lock.release()
        except RuntimeError:  # already notified
            pass

    def clear(self) -> None:
        self._lock.acquire(False)

    def wait(self, timeout: float) -> bool:
        return self._lock.acquire(True, timeout)


class Latch:
    """
    ``threading.Event``'s ``set``, ``clear``, ``is_set`` and ``wait``, on a bare lock.

    The lock is held while the latch is clear. A waiter takes it and gives it back at once, so
    the latch stays set for every other waiter (``is_set`` reads False for that instant).
    Cleared by one thread at a time, the thread that starts the work it then waits for (a
    clear while another thread holds the lock is lost); set and waited on from any.
    """

    def __init__(self, *, is_set: bool = False) -> None:
        self._clear = _thread.allocate_lock()
        if not is_set:
            self._clear.acquire()

    def set(self) -> None:  # noqa: A003 (threading.Event's name)
        try:
            self._clear.release()
        except RuntimeError:  # already set
            pass

    def clear(self) -> None:
        self._clear.acquire(False)

    def is_set(self) -> bool:
        return not self._clear.locked()

    def wait(self, timeout: float | None = None) -> bool:
        if not self._clear.acquire(True, -1 if timeout is None else timeout):
            return False
        self.set()  # give it back (a set() meanwhile already did)
        return True
