"""
One elastic time-step, run as timer callbacks on the executor thread.

Start: send the action, place the step on the schedule, arm a deadline for ``t_co``. At
``t_co``: capture the observation, arm a deadline for ``t_end`` (none when the capture is at
the end). At ``t_end``: signal the user's thread, which is waiting in ``step()``. An exception
in any of these is kept for the user's thread to re-raise, and the robot is sent its safe
action.

Lockstep: right after the action is sent, the paused simulator is asked to advance to ``t_co``
(``advance``), and after the capture to ``t_end``; the deadlines then wait for its clock
(``rtgym_ros.ros.deadline.ClockDeadline``: on the executor thread itself while it comes soon).

Hand-over: ``step(a)`` offers ``a`` before it waits for the running time-step; at ``t_end`` the
executor thread starts the next time-step with it at once, when the env says the episode goes
on (``may_continue``): no wake-up between the capture and the next action. The user's thread
is released once that action is sent, just before the executor thread sleeps: released
earlier, it would wake only to wait for the GIL the executor thread still holds. An action that
comes after ``t_end`` is waited for a short while on the executor thread itself (a bare lock,
tens of microseconds) instead of going back to the executor's loop and being woken through it
(hundreds); later still, it is posted to the executor as a task.

Back-to-back time-steps keep the executor thread; its loop's turn (the node's other timers)
is taken inside a time-step, while a deadline far enough away is waited for, not between a
capture and the next action (:meth:`TimeStepRunner._keeps_the_thread`).

Completions are counted: a step started from an offer is running while ``done`` still says
the previous one completed, so the user's thread waits for a completion count
(:meth:`rearm`), and the env keeps each completion's result under its count. ``done`` is set
with the count, under the lock ``rearm`` clears it under, and only by the completion the user's
thread awaits.
"""

import threading
import time
from typing import Any, Callable, Protocol

from rtgym_ros.core.schedule import ElasticSchedule, StepStart
from rtgym_ros.core.timing import Benchmark
from rtgym_ros.core.wakeups import Latch, Signal


_DEFAULT_TURN = 0.05  # s of back-to-back steps before the executor's loop gets a turn


def _no_work() -> bool:
    return False


class DeadlineTimer(Protocol):
    """A one-shot timer on the env's clock: ``rtgym_ros.ros.deadline``, or a fake in tests."""

    armed: bool
    target: float | None

    def now(self) -> float: ...

    def arm(self, target: float, callback: Callable[[], None], *, turn: bool = False) -> None: ...

    def retarget(self, target: float) -> None: ...

    def cancel(self) -> None: ...


class TimeStepRunner:
    """Drives the schedule with a :class:`DeadlineTimer`; one time-step at a time."""

    def __init__(self, *, schedule: ElasticSchedule, timer: DeadlineTimer,
                 send_control: Callable[[Any], None], capture: Callable[[], None],
                 on_start: Callable[[StepStart], None], on_error: Callable[[], None],
                 on_complete: Callable[[int], None] = lambda completion: None,
                 bench: Benchmark | None = None, handover_wait: float = 0.0,
                 advance: Callable[[float], None] | None = None,
                 executor_turn: Callable[[], float] = lambda: _DEFAULT_TURN,
                 turn_patience: Callable[[], float] = lambda: 0.0,
                 executor_work: Callable[[], bool] = _no_work,
                 may_continue: Callable[[], bool] = _no_work) -> None:
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
        self._executor_turn = executor_turn
        """Seconds of back-to-back steps before the executor's loop needs the thread back."""
        self._turn_patience = turn_patience
        """Seconds a due turn may wait for a deadline with room for it, before a step's end."""
        self._executor_work = executor_work
        """Whether work waits in the executor's loop now (posted from another thread)."""
        self._may_continue = may_continue
        """At t_end with an offered action: whether the next time-step may start with it."""
        self.done = Latch(is_set=True)
        """Set when the awaited completion came (or the step failed or was dropped)."""
        self._awaited = 0  # the completion the user's thread waits for (prepare, rearm)
        self.error: BaseException | None = None
        self.handover_wait = handover_wait
        self._handover_lock = threading.Lock()
        self._action_ready = Signal()
        self._waiting_for_action = False
        self._next_action: tuple | None = None
        self._pending_start: tuple | None = None
        self._chaining = False
        self._turn_due: float | None = None  # monotonic time the executor's loop needs a turn
        self._turn_overdue = 0.0  # monotonic time past which the turn is taken at a step's end
        self._turn_wanted = False  # in a chain: the next deadline with room gives the loop a turn
        self.completed = 0
        """Time-steps completed (executor thread); the env keeps each result under this count."""
        self._offered: tuple | None = None
        self._taken_at: int | None = None  # the completion at which the offer was started
        self._aborted = False
        self._release_at_arm = False  # the step taken from an offer sets done before its sleep

    def prepare(self) -> None:
        """User thread, before posting :meth:`start`: the step is now running."""
        with self._handover_lock:
            self._awaited = self.completed + 1
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

    def offer(self, action: Any) -> None:
        """User thread, before waiting in step(): the next time-step's action, if it goes on."""
        with self._handover_lock:
            self._offered, self._taken_at = (action,), None

    def withdraw(self) -> int | None:
        """
        User thread, after the wait: take back the offer; say where it was started, if it was.

        :returns: the completion count at which the next time-step started with the offered
            action, or None (not taken: hand it over, or end the episode).
        """
        with self._handover_lock:
            taken_at, self._offered, self._taken_at = self._taken_at, None, None
        return taken_at

    def rearm(self, completion: int) -> None:
        """User thread, before waiting for a time-step started from an offer (``completion``)."""
        with self._handover_lock:
            self._awaited = completion
            self.done.clear()
            if self.completed >= completion or self.error is not None or self._aborted:
                self.done.set()  # it completed, failed or was dropped before the clear

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
        if self._chaining:
            return  # an outer start() is looping: it picks this one up
        self._chaining, self._turn_due = True, None
        try:
            while self._pending_start is not None:
                (action,), self._pending_start = self._pending_start, None
                self._start_one(action)
        finally:
            # The chain ends: the loop gets the thread, whatever turn was wanted in it.
            self._chaining = self._turn_wanted = False

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
            if self._release_at_arm:
                self._release_at_arm = False
                with self._handover_lock:
                    self._release_locked()
            self._timer.arm(self.schedule.t_co, self._capture_now, turn=self._turn_wanted)
        except Exception as error:  # a plain try, not a context manager: runs every step
            self._fail(error)

    def _capture_now(self) -> None:
        try:
            if self._bench:
                self._bench.start_get_obs_time()
            self._capture()
            if self._bench:
                self._bench.end_get_obs_time()
            schedule = self.schedule
            if schedule.t_end <= schedule.t_co:  # captured at the end: no deadline to arm
                self._complete()
                return
            if self._advance is not None:
                self._advance(schedule.t_end)
            self._timer.arm(schedule.t_end, self._complete, turn=self._turn_wanted)
        except Exception as error:
            self._fail(error)

    def _complete(self) -> None:
        completion = self.completed + 1
        try:
            self._on_complete(completion)  # the env keeps this completion's result
        except Exception as error:
            self._fail(error)
            return
        # Take the offered action, or listen for the next one, before releasing step(): an
        # action handed over from now on comes to this thread directly, none can slip into
        # the executor's task queue.
        listening = self.handover_wait > 0.0 and self._keeps_the_thread()
        with self._handover_lock:
            offered, self._offered = self._offered, None
            take = offered is not None and listening and self._may_continue()
            if take:
                self._taken_at = completion
            elif listening:
                self._waiting_for_action = True
                self._action_ready.clear()
            # Counted once its result is kept and the next action is taken or listened for:
            # a rearm() that sees the count goes on as if done had been set here.
            self.completed = completion
            # Set with the count, under the lock, and only for the completion awaited: a user's
            # thread that went on by the count and cleared done for its next wait must not be
            # woken by this one (it would take a result that is gone). With the offered action
            # taken, it is set once that action is sent (_start_one).
            if not take:
                self._release_locked()
        if take:  # the action is sent now, at t_end; step() is released once it went out
            self._release_at_arm = True
            self.start(offered[0])
            return
        # Hand the GIL to the user's thread now, waiting in step(), rather than after the
        # executor's next round of Python bookkeeping: halves capture-to-return latency.
        time.sleep(0)
        if listening:
            self._wait_for_next_action()

    def _release_locked(self) -> None:
        """Set ``done`` if the user's thread awaits the last completion (lock held)."""
        if self.completed >= self._awaited:
            self.done.set()

    def _keeps_the_thread(self) -> bool:
        """
        At ``t_end``: say whether the next time-step may start on this thread.

        Else the executor's loop gets it back. Back-to-back steps hold the executor thread:
        posted work (a clock jump, a call from the user's thread) ends the chain at once. The
        node's other timers (diagnostics, the log flush) get their turn when one is due (asked
        once per chain), inside a time-step: the next deadline far enough away is waited for
        in the executor's loop (``turn``), after the action was sent, where the loop's work
        (milliseconds on a slow host, its code and data cold after a second unused) delays no
        action and no capture. A turn that finds no such deadline within ``turn_patience``
        (time-steps too short for it) is taken here, before the next action, which it may
        then delay.
        """
        if not self._chaining:
            return True  # called from the executor's loop (a timer): the chain starts here
        if self._executor_work():
            return False
        now = time.monotonic()
        if self._turn_due is None:
            self._turn_due = now + self._executor_turn()
            self._turn_overdue = self._turn_due + self._turn_patience()
        if now < self._turn_due:
            return True
        self._turn_wanted = True
        return now < self._turn_overdue

    def on_clock_jump(self, delta: float) -> None:
        """
        Executor thread: the clock jumped by ``delta`` s; keep the step's phase, no hang.

        Lockstep: the simulator was asked for the old target; it is asked for the moved one
        (a simulator that restarted at 0 would otherwise wait for a request, and the env for
        its clock).

        Only a schedule ahead of the clock is of the time before the jump. A step started on
        the new clock before this call (a fast simulator's clock ran past the old schedule
        while this call waited in the executor's queue) stays put.
        """
        if not self.schedule.t_start > self._timer.now():
            return
        self.schedule.shift(delta)
        if self._timer.armed:
            target = self._timer.target + delta
            if self._advance is not None:
                self._advance(target)
            self._timer.retarget(target)

    def abort(self) -> None:
        """Executor thread: drop the running step (closing); waiters are released."""
        self._timer.cancel()
        self._aborted = True
        self.done.set()

    def _fail(self, error: Exception) -> None:
        """Turn an exception in a step callback into a recorded error and a safe robot."""
        self.error = error  # re-raised in the user's thread by step()/reset()
        self._release_at_arm = False
        self._timer.cancel()
        try:
            self._on_error()
        finally:
            self.done.set()
