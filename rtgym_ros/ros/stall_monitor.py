"""
Waiting for a time-step without waiting in silence: a stopped ``/clock`` or a busy executor.

``step()`` waits for the running time-step on the user's thread. Under ``use_sim_time`` a
simulator that stopped publishing ``/clock`` stops the time-step with it; on wall time an
interface call that blocks holds the executor thread. Either way the wait is checked on wall
time: past ``stall_timeout`` seconds without progress it is logged (once per stall), with the
``/clock`` publishers found. A stopped ``/clock`` is raised as ``TimeoutError`` under
``on_clock_stall: error``; a busy executor thread on wall time is only logged (a capture may
wait for a sensor by configuration).
"""

import time
from typing import Callable

from rtgym_ros.core.wakeups import Latch
from rtgym_ros.ros.runtime import RosRuntime, RuntimeClosedError

POLL = 0.1
"""Seconds between checks while waiting; the caller's own first wait lasts as long."""
_NUDGE = 0.5  # s without progress before the first nudge, then every 0.5 s


class StallMonitor:
    """Wait for a time-step's event; say so when neither the clock nor the step moves."""

    def __init__(self, runtime: RosRuntime, *, use_sim_time: bool, stall_timeout: float,
                 on_stall: str) -> None:
        self._runtime = runtime
        self._use_sim_time = use_sim_time
        self._stall_timeout = stall_timeout
        self._on_stall = on_stall
        self.stalled_waits = 0
        """How many waits went past ``stall_timeout`` without progress."""

    def wait(self, done: Latch, *, step_end: float,
             nudge: Callable[[], None] | None = None,
             asked: Callable[[], str] | None = None) -> None:
        """
        Block until ``done``, checking; raise RuntimeClosedError if the runtime closes or dies.

        For a wait that a first ``done.wait(POLL)`` of the caller's did not end. That first
        wait is the caller's own: nearly every time-step completes within it, and a call with
        these arguments would cost the user's thread each step, on code that is cold by then.

        ``step_end`` is the time-step's end on the env clock: on wall time a wait is checked
        from then on (a long time-step is no stall). ``nudge`` is called every half second
        without progress (lockstep: ask the simulator again); ``asked`` says what the
        simulator was asked (lockstep), for the stall's message.
        """
        runtime = self._runtime
        last_clock = runtime.now()
        progress = time.monotonic()  # one poll late: a stall is counted in seconds
        if not self._use_sim_time and step_end == step_end:  # NaN before the first step
            progress += max(0.0, step_end - last_clock)
        reported = False
        while not done.wait(POLL):
            if not runtime.alive():
                raise RuntimeClosedError(runtime.dead_reason())
            if self._stall_timeout <= 0.0:
                continue
            clock = runtime.now()
            if clock != last_clock and self._use_sim_time:
                last_clock, progress, reported = clock, time.monotonic(), False
                continue
            waited = time.monotonic() - progress
            if nudge is not None and waited >= _NUDGE and int(waited / POLL) % 5 == 0:
                nudge()
            if waited > self._stall_timeout and not reported:
                reported = True
                self.stalled_waits += 1
                message = self._describe(waited)
                if asked is not None:
                    message += f'; {asked()}'
                if self._on_stall == 'error' and self._use_sim_time:
                    raise TimeoutError(message)
                runtime.logger.warning(message)

    def _describe(self, waited: float) -> str:
        if not self._use_sim_time:
            return (f'the time-step has not completed for {waited:.1f} s (wall): the executor '
                    'thread is busy, e.g. an interface call or a reward function that blocks')
        publishers = self._runtime.count_publishers('/clock')
        found = ('no node publishes /clock' if publishers == 0
                 else f'{publishers} publisher(s) on /clock')
        return (f'/clock has not moved for {waited:.1f} s (wall) while a time-step waits for '
                f'it: {found} (domain {self._runtime.domain_id}); is the simulator paused '
                'or gone?')
