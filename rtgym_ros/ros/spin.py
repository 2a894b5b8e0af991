"""
Spin an executor in a daemon thread: the one loop the env, the nodes, tests and benchmarks use.

``spin_once`` with a timeout instead of ``spin()``: rclpy's ``Executor.shutdown()`` destroys the
guard condition that would wake a thread about to wait, so the loop must also notice a stop
request on its own; and the events executor's ``spin()`` busy-waits a whole core in the kilted
wheels.
"""

import threading
from typing import Callable

from rclpy.context import Context
from rclpy.executors import Executor, ExternalShutdownException

_POLL = 0.1  # s: the longest a stop request waits to be noticed, unless told otherwise


class SpinThread:
    """A daemon thread that spins ``executor`` until :meth:`stop` or the context shuts down."""

    def __init__(self, executor: Executor, *, context: Context, name: str,
                 on_failure: Callable[[BaseException], None] | None = None,
                 survive_errors: bool = False, poll: float = _POLL) -> None:
        """
        Start spinning.

        :param poll: the longest one wait lasts when nothing wakes it (s). Each wake-up of an
            idle executor costs CPU; an executor that every stop request wakes can wait longer.

        :param on_failure: called on the spinning thread when a callback raised (and the loop
            ends), e.g. to put a robot in its safe state.
        :param survive_errors: keep spinning after a callback raised (report it through
            ``on_failure``), for processes that host several independent nodes.
        """
        self.executor = executor
        self.failure: BaseException | None = None
        self._context = context
        self._on_failure = on_failure
        self._survive_errors = survive_errors
        self._poll = poll
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def is_current(self) -> bool:
        """Say whether the caller runs on the spinning thread."""
        return threading.current_thread() is self.thread

    def is_alive(self) -> bool:
        return self.thread.is_alive()

    def stop(self, *, timeout: float = 5.0) -> None:
        """Ask the loop to end, wake it, and join it (unless called from the thread itself)."""
        self._stop.set()
        try:
            self.executor.wake()
        except Exception:  # an executor already shut down needs no waking
            pass
        if not self.is_current():
            self.thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set() and self._context.ok():
            try:
                self.executor.spin_once(timeout_sec=self._poll)
            except ExternalShutdownException:
                return
            except BaseException as error:  # recorded, reported; waiting callers re-raise it
                if self._on_failure is not None:
                    try:
                        self._on_failure(error)
                    except Exception:
                        pass
                if not self._survive_errors:
                    self.failure = error
                    return
