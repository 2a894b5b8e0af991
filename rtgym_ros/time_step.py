"""One elastic time-step, run as timer callbacks on the executor thread.

Start: send the action, place the step on the schedule, arm a deadline for ``t_co``. At
``t_co``: capture the observation, arm a deadline for ``t_end``. At ``t_end``: signal the
user's thread, which is waiting in ``step()``. An exception in any of these is kept for the
user's thread to re-raise, and the robot is sent its safe action.
"""

import contextlib
import threading
import time
from typing import Any, Callable, Iterator

from rtgym_ros.benchmark import PolyakBenchmark
from rtgym_ros.clock import ElasticSchedule, StepOutcome
from rtgym_ros.deadline import DeadlineTimer


class TimeStepRunner:
    """Drives the schedule with a :class:`DeadlineTimer`; one time-step at a time."""

    def __init__(self, *, schedule: ElasticSchedule, timer: DeadlineTimer,
                 send_control: Callable[[Any], None], capture: Callable[[], None],
                 on_start: Callable[[StepOutcome], None], on_error: Callable[[], None],
                 on_complete: Callable[[], None] = lambda: None,
                 bench: PolyakBenchmark | None = None) -> None:
        self.schedule = schedule
        self._timer = timer
        self._send_control = send_control
        self._capture = capture
        self._on_start = on_start
        self._on_error = on_error
        self._on_complete = on_complete
        self._bench = bench
        self.done = threading.Event()
        self.done.set()
        self.error: BaseException | None = None

    def prepare(self) -> None:
        """User thread, before posting :meth:`start`: the step is now running."""
        self.done.clear()

    def start(self, action: Any) -> None:
        """Executor thread: send ``action`` and start the time-step."""
        with self._guard():
            if self._bench:
                self._bench.start_send_control_time()
            self._send_control(action)
            if self._bench:
                self._bench.end_send_control_time()
            self._on_start(self.schedule.begin_step(self._timer.now()))
            self._timer.arm(self.schedule.t_co, self._capture_now)

    def _capture_now(self) -> None:
        with self._guard():
            if self._bench:
                self._bench.start_get_obs_time()
            self._capture()
            if self._bench:
                self._bench.end_get_obs_time()
            self._timer.arm(self.schedule.t_end, self._complete)

    def _complete(self) -> None:
        self.done.set()
        # Hand the GIL to the user's thread now, waiting in step(), rather than after the
        # executor's next round of Python bookkeeping: halves capture-to-return latency.
        time.sleep(0)
        with self._guard():
            self._on_complete()

    def on_clock_jump(self, delta: float) -> None:
        """Executor thread: the clock jumped by ``delta`` s; keep the step's phase, no hang."""
        self.schedule.shift(delta)
        if self._timer.armed:
            self._timer.retarget(self._timer.target + delta)

    def abort(self) -> None:
        """Executor thread: drop the running step (closing); waiters are released."""
        self._timer.cancel()
        self.done.set()

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """Turn an exception in a step callback into a recorded error and a safe robot."""
        try:
            yield
        except Exception as error:  # re-raised in the user's thread by step()/reset()
            self.error = error
            self._timer.cancel()
            try:
                self._on_error()
            finally:
                self.done.set()
