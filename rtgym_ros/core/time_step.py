"""
One elastic time-step, run as timer callbacks on the executor thread.

Start: send the action, place the step on the schedule, arm a deadline for ``t_co``. At
``t_co``: capture the observation, arm a deadline for ``t_end``. At ``t_end``: signal the
user's thread, which is waiting in ``step()``. An exception in any of these is kept for the
user's thread to re-raise, and the robot is sent its safe action.

Lockstep: right after the action is sent, the paused simulator is asked to advance to ``t_co``
(``advance``), and after the capture to ``t_end``; the deadlines then wait for its clock
(``rtgym_ros.ros.deadline.ClockDeadline``: on the executor thread itself while it comes soon).

Hand-over: right after a time-step completes, the executor thread itself waits a short while
for the next action (a plain event, tens of microseconds) instead of going back to the
executor's loop and being woken through it (hundreds); if the action comes later, it is posted
to the executor as a task.
"""

import _thread
import threading
import time
from typing import Any, Callable, Protocol

from rtgym_ros.core.schedule import ElasticSchedule, StepOutcome
from rtgym_ros.core.timing import Benchmark


_MAX_CHAIN = 0.05  # s of back-to-back steps before the executor gets a turn (other timers)


class DeadlineTimer(Protocol):
    """A one-shot timer on the env's clock: ``rtgym_ros.ros.deadline``, or a fake in tests."""

    armed: bool
    target: float | None

    def now(self) -> float: ...

    def arm(self, target: float, callback: Callable[[], None]) -> None: ...

    def retarget(self, target: float) -> None: ...

    def cancel(self) -> None: ...


class _Signal:
    """
    A one-shot wake-up on a bare lock: threading.Event's set, clear and wait, one C call each.

    The hand-over runs twice per time-step; Event.wait goes through a Condition in Python (a
    new lock, a waiter list) on both threads. Cleared and waited on by one thread only (the
    executor thread); set from any. A wait that returns True consumes the signal.
    """

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._lock.acquire()  # locked: not set

    def notify(self) -> None:
        try:
            self._lock.release()
        except RuntimeError:  # already set
            pass

    def clear(self) -> None:
        self._lock.acquire(False)

    def wait(self, timeout: float) -> bool:
        return self._lock.acquire(timeout=timeout)


class TimeStepRunner:
    """Drives the schedule with a :class:`DeadlineTimer`; one time-step at a time."""

    def __init__(self, *, schedule: ElasticSchedule, timer: DeadlineTimer,
                 send_control: Callable[[Any], None], capture: Callable[[], None],
                 on_start: Callable[[StepOutcome], None], on_error: Callable[[], None],
                 on_complete: Callable[[], None] = lambda: None,
                 bench: Benchmark | None = None, handover_wait: float = 0.0,
                 advance: Callable[[float], None] | None = None) -> None:
        self.schedule = schedule
        self._timer = timer
        self._send_control = send_control
        self._capture = capture
        self._on_start = on_start
        self._on_error = on_error
        self._on_complete = on_complete
        self._bench = bench
        self._advance = advance
        """Lockstep: ask the simulator to advance to a time; the timers then wait for it."""
        self.done = threading.Event()
        self.done.set()
        self.error: BaseException | None = None
        self.handover_wait = handover_wait
        self._handover_lock = threading.Lock()
        self._action_ready = _Signal()
        self._waiting_for_action = False
        self._next_action: tuple | None = None
        self._pending_start: tuple | None = None
        self._chain_started: float | None = None

    def prepare(self) -> None:
        """User thread, before posting :meth:`start`: the step is now running."""
        self.done.clear()

    def hand_over(self, action: Any, post: Callable[..., None]) -> None:
        """User thread: start the next time-step with ``action`` (directly, or as a task)."""
        self.prepare()
        with self._handover_lock:
            if self._waiting_for_action:
                self._next_action = (action,)
                self._action_ready.notify()
                return
        post(self.start, action)

    def release(self) -> None:
        """User thread: no action is coming now; let the executor thread go back to work."""
        self._action_ready.notify()

    def _wait_for_next_action(self) -> None:
        """Executor thread, at t_end: start the next time-step here if its action comes soon."""
        self._action_ready.wait(self.handover_wait)
        with self._handover_lock:
            self._waiting_for_action = False
            pending, self._next_action = self._next_action, None
        if pending is not None:
            self.start(pending[0])

    def start(self, action: Any) -> None:
        """
        Executor thread: send ``action`` and start the time-step.

        Deadlines already past fire at once, so a start can lead, through capture and
        completion, to the next hand-over and start: those run in this loop, not nested.
        """
        self._pending_start = (action,)
        if self._chain_started is not None:
            return  # an outer start() is looping: it picks this one up
        self._chain_started = time.monotonic()
        try:
            while self._pending_start is not None:
                (action,), self._pending_start = self._pending_start, None
                self._start_one(action)
        finally:
            self._chain_started = None

    def _start_one(self, action: Any) -> None:
        try:
            if self._bench:
                self._bench.start_send_control_time()
            self._send_control(action)
            if self._bench:
                self._bench.end_send_control_time()
            self._on_start(self.schedule.begin_step(self._timer.now()))
            if self._advance is not None:
                self._advance(self.schedule.t_co)
            self._timer.arm(self.schedule.t_co, self._capture_now)
        except Exception as error:  # a plain try, not a context manager: runs every step
            self._fail(error)

    def _capture_now(self) -> None:
        try:
            if self._bench:
                self._bench.start_get_obs_time()
            self._capture()
            if self._bench:
                self._bench.end_get_obs_time()
            if self._advance is not None and self.schedule.t_end > self.schedule.t_co:
                self._advance(self.schedule.t_end)
            self._timer.arm(self.schedule.t_end, self._complete)
        except Exception as error:
            self._fail(error)

    def _complete(self) -> None:
        # Listen for the next action before releasing step(): an action handed over from now
        # on comes to this thread directly, none can slip into the executor's task queue.
        listening = self.handover_wait > 0.0 and (
            self._chain_started is None
            or time.monotonic() - self._chain_started < _MAX_CHAIN)
        if listening:
            with self._handover_lock:
                self._waiting_for_action = True
                self._action_ready.clear()
        self.done.set()
        # Hand the GIL to the user's thread now, waiting in step(), rather than after the
        # executor's next round of Python bookkeeping: halves capture-to-return latency.
        time.sleep(0)
        try:
            self._on_complete()
        except Exception as error:
            self._fail(error)
        if listening:
            self._wait_for_next_action()

    def on_clock_jump(self, delta: float) -> None:
        """Executor thread: the clock jumped by ``delta`` s; keep the step's phase, no hang."""
        self.schedule.shift(delta)
        if self._timer.armed:
            self._timer.retarget(self._timer.target + delta)

    def abort(self) -> None:
        """Executor thread: drop the running step (closing); waiters are released."""
        self._timer.cancel()
        self.done.set()

    def _fail(self, error: Exception) -> None:
        """Turn an exception in a step callback into a recorded error and a safe robot."""
        self.error = error  # re-raised in the user's thread by step()/reset()
        self._timer.cancel()
        try:
            self._on_error()
        finally:
            self.done.set()
