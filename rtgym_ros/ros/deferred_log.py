"""
Log lines raised inside a time-step, written a moment later by a timer.

rclpy's logger locates its caller with ``inspect`` on every call (about 1 ms here, 36 ms the
first time in a process), which would make the very step that timed out later still. The
time-step path only counts and keeps the last text; a timer writes one line per kind, with
the count, at most once a period.
"""

import inspect
import threading

from rclpy.clock import Clock, ClockType
from rclpy.node import Node


class DeferredLog:
    """Collect warnings now, log them (collapsed, with counts) every ``period`` seconds."""

    def __init__(self, node: Node, *, period: float = 1.0) -> None:
        self._node = node
        self._period = period
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[int, str]] = {}
        # Wall (steady) time: under use_sim_time a jumping or racing /clock must not turn the
        # throttle into a flood, nor a stopped one into silence.
        self._timer = node.create_timer(period, self.flush,
                                        clock=Clock(clock_type=ClockType.STEADY_TIME))
        # The logger's first call maps every loaded module to its file (inspect.getmodule) and
        # reads this file's source (linecache): ~30 ms. Pay that here, not in a later flush.
        inspect.getframeinfo(inspect.currentframe())

    def warning(self, kind: str, message: str) -> None:
        """Cheap: safe to call on the time-step path."""
        with self._lock:
            count, _ = self._pending.get(kind, (0, ''))
            self._pending[kind] = (count + 1, message)

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
        logger = self._node.get_logger()
        for count, message in pending.values():
            suffix = '' if count == 1 else f' ({count} times in the last {self._period:g} s)'
            logger.warning(message + suffix)

    def destroy(self) -> None:
        self.flush()
        self._node.destroy_timer(self._timer)
