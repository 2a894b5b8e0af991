"""
One-shot deadlines on the node's clock: a ROS timer, and the lockstep wait for ``/clock``.

Timers are what make the schedule follow ``/clock``: under ``use_sim_time`` a paused simulator
stops them and a fast one speeds them up. On wall time every wake-up of the executor costs CPU
and lands late; a deadline nearer than ``lead`` is slept on the executor thread (one wake-up, as
rtgym's ``time.sleep``), a farther one arms the timer ``lead`` early and sleeps the rest.
"""

import threading
import time
from typing import Callable

from rclpy.node import Node
from rtgym_ros.ros.clock_reader import ClockReader

SIM_TIME_SLACK = 1e-6
"""
A sim time is reached within 1 µs of it: /clock counts nanoseconds, but a time near the epoch
(1.7e9 s, a simulator or a recording on wall time) held in float seconds is 2.4e-7 s coarse.
"""
_MIN_WALL_LEAD = 50e-6  # below this, re-arming a timer costs more than sleeping
TURN_ROOM = 4e-3
"""
The least time to a wall-time deadline for the executor's loop to take its turn in the wait.

Half of it goes to the loop (its due timers, cold: milliseconds on a slow host), half
to the sleep after the ROS timer fires. Shorter time-steps leave no room for a turn
(``RosRuntime.turn_patience``).
"""
LAST_STRETCH = 0.0
"""
The default of the env's ``timer_last_stretch``: one sleep per wall-time deadline.

A stretch (say 1 ms) ends a longer sleep that far short of the deadline and sleeps the rest
apart. On this project's VMs a 10 ms sleep ends 50-100 µs late, now and then milliseconds,
and a 1 ms one within tens of µs: the capture lateness drops by tens of µs, for one more
wake-up per deadline, 20-90 µs of the executor thread's CPU per 100 Hz step there, while the
spacing of the captures measured the same with and without it
(benchmarks/STEP_TIMING.md, the last stretch as an option).
"""


def sleep_to(target: float, remaining: float, now: Callable[[], float],
             sleep: Callable[[float], None] = time.sleep, *,
             stretch: float = LAST_STRETCH) -> None:
    """
    Sleep until ``target`` on ``now``'s clock, ``remaining`` s away: the last ``stretch`` apart.

    The second sleep is at most the last stretch: a system clock set back meanwhile must not
    keep the executor thread asleep (the clock's jump callback moves the schedule instead).
    A stretch of 0 sleeps once.
    """
    if stretch > 0.0 and remaining > 2.0 * stretch:
        sleep(remaining - stretch)
        remaining = min(target - now(), stretch)
    if remaining > 0.0:
        sleep(remaining)


class DeadlineTimer:
    """Call one callback once the node's clock reaches a target time."""

    def __init__(self, node: Node, *, lead: float, last_stretch: float = LAST_STRETCH) -> None:
        self._node = node
        self._clock = ClockReader(node.get_clock())
        self._lead = lead
        self._last_stretch = last_stretch
        self._target: float | None = None
        self._callback: Callable[[], None] | None = None
        self._timer = node.create_timer(3600.0, self._on_timer, autostart=False)
        self._timer_running = False  # cancel() only what runs: it is an rcl call

    @property
    def armed(self) -> bool:
        return self._target is not None

    @property
    def target(self) -> float | None:
        return self._target

    def now(self) -> float:
        return self._clock.now()

    def arm(self, target: float, callback: Callable[[], None], *, turn: bool = False) -> None:
        """
        Call ``callback`` at ``target`` (seconds on the node clock); now if already past.

        Must be called on the executor thread. Re-arming replaces the previous deadline.
        ``turn``: the executor's loop is due a turn; on wall time, with at least
        :data:`TURN_ROOM` to go, the ROS timer is armed for half the wait, so the loop runs
        its due work there instead of the thread sleeping through it.
        """
        self._target = target
        self._callback = callback
        self._schedule(turn=turn)

    def retarget(self, target: float) -> None:
        """Move the pending deadline (after a clock jump) without changing its callback."""
        if self._target is not None:
            self._target = target
            self._schedule()

    def cancel(self) -> None:
        self._target = None
        self._callback = None
        self._stop_timer()

    def destroy(self) -> None:
        self.cancel()
        self._node.destroy_timer(self._timer)
        self._clock.destroy()

    def _schedule(self, *, turn: bool = False) -> None:
        clock = self._clock
        sim_time = clock.sim_time
        remaining = self._target - clock.now()
        early = SIM_TIME_SLACK if sim_time else max(self._lead, _MIN_WALL_LEAD)
        if turn and not sim_time and remaining >= TURN_ROOM:
            early = min(early, remaining / 2.0)
        if remaining <= early:
            self._stop_timer()
            if not sim_time and remaining > 0.0:
                sleep_to(self._target, remaining, clock.now,  # on wall time, slept
                         stretch=self._last_stretch)
            self._fire()
            return
        self._timer.timer_period_ns = int((remaining - early) * 1e9)
        self._timer.reset()
        self._timer_running = True

    def _stop_timer(self) -> None:
        if self._timer_running:
            self._timer.cancel()
            self._timer_running = False

    def _on_timer(self) -> None:
        self._stop_timer()
        if self._target is None:
            return
        self._schedule()

    def _fire(self) -> None:
        callback = self._callback
        self._target = None
        self._callback = None
        callback()


class ClockDeadline:
    """
    Lockstep: call one callback once the simulator's ``/clock`` reaches a target; no ROS timer.

    The thread that takes ``/clock`` (the io thread, :meth:`RosRuntime.add_clock_listener`)
    calls :meth:`on_clock` each time it sets the clock. The executor thread that arms a
    deadline first waits for it there, up to ``inline_wait`` wall seconds: a simulator that
    answers within that costs a condition variable, not a wake-up of the executor. Past it,
    :meth:`on_clock` posts the callback to the executor when the clock gets there.

    A ROS timer is armed with a period from a time read just before; if ``/clock`` reaches the
    target in between, the timer waits one period more, for a clock that a paused simulator
    never moves again.
    """

    def __init__(self, *, now: Callable[[], float], post: Callable[..., None],
                 inline_wait: float) -> None:
        self._now = now
        self._post = post
        self._inline_wait = inline_wait
        self._changed = threading.Condition()
        self._target: float | None = None
        self._callback: Callable[[], None] | None = None
        self._generation = 0  # which arm() a posted callback belongs to
        self._posted = -1
        self._waiting = False

    @property
    def armed(self) -> bool:
        return self._target is not None

    @property
    def target(self) -> float | None:
        return self._target

    def now(self) -> float:
        return self._now()

    def arm(self, target: float, callback: Callable[[], None], *, turn: bool = False) -> None:
        """
        Call ``callback`` once the clock reaches ``target``; now if it already has.

        Executor thread. Blocks it for up to ``inline_wait``; re-arming replaces the deadline.
        ``turn`` is not needed: past the inline wait the executor's loop has the thread.
        """
        with self._changed:
            self._generation += 1
            self._target, self._callback = target, callback
            self._waiting = True
            try:
                reached = self._changed.wait_for(self._reached, timeout=self._inline_wait)
            finally:
                self._waiting = False
            if not reached:
                return  # on_clock() posts it
            callback = self._take()
        callback()

    def retarget(self, target: float) -> None:
        """Move the pending deadline (after a clock jump) without changing its callback."""
        if self._target is not None:
            self.arm(target, self._callback)

    def cancel(self) -> None:
        with self._changed:
            self._generation += 1
            self._target = None
            self._callback = None
            self._changed.notify_all()

    def destroy(self) -> None:
        self.cancel()

    def on_clock(self) -> None:
        """Clock thread: the clock was set; wake the waiting executor thread, or post."""
        with self._changed:
            if not self._reached():
                return
            if self._waiting:
                self._changed.notify_all()
                return
            if self._posted == self._generation:
                return
            self._posted = generation = self._generation
        self._post(self._fire_posted, generation)

    def _reached(self) -> bool:
        return self._target is not None and self._now() >= self._target - SIM_TIME_SLACK

    def _fire_posted(self, generation: int) -> None:
        with self._changed:
            if generation != self._generation or self._target is None:
                return  # re-armed, moved or cancelled since
            callback = self._take()
        callback()

    def _take(self) -> Callable[[], None]:
        """Disarm and return the callback (lock held)."""
        callback = self._callback
        self._target = None
        self._callback = None
        return callback
