"""
The elastic time-step schedule of Real-Time Gym, as pure logic.

The schedule only does arithmetic on times given to it; it never reads a clock. The env feeds
it the node's ROS clock (wall time or ``/clock``), and the unit tests feed it a fake one, so the
rtgym semantics can be checked exactly and without sleeping.
"""

import enum
import math


class StepStart(enum.Enum):
    """How a new time-step was placed relative to the previous one."""

    ELASTIC = 'elastic'
    """Started at the previous ``t_end``: on time, or late but within the elasticity."""
    TIMED_OUT = 'timed_out'
    """Started at ``now`` because the previous step ran past ``t_end + timeout``."""
    RESTARTED = 'restarted'
    """Started at ``now`` after ``wait()``: an expected break, not worth a warning."""


# The members as module constants, for the code that runs every time-step: on Python 3.11 each
# attribute read on an Enum class goes through EnumType.__getattr__'s slot (0.2 µs warm, a
# plain class attribute 0.04), and a NamedTuple per step costs 0.7 µs warm, after a sleep more.
ELASTIC, TIMED_OUT, RESTARTED = StepStart.ELASTIC, StepStart.TIMED_OUT, StepStart.RESTARTED


class ElasticSchedule:
    """
    rtgym 0.16's ``_update_timestamps`` and ``_initialize_time``, without a clock.

    T is ``time_step_duration``, c is ``start_obs_capture`` and the elasticity is
    ``T * time_step_timeout_factor``. A step starting at ``now`` begins at the previous
    ``t_end`` when ``now < t_end + timeout`` (lost time is made up), else at ``now``.
    """

    def __init__(self, *, time_step_duration: float, start_obs_capture: float,
                 time_step_timeout_factor: float) -> None:
        self.time_step_duration = float(time_step_duration)
        self.start_obs_capture = float(start_obs_capture)
        self.time_step_timeout_factor = float(time_step_timeout_factor)
        self.t_start = math.nan
        self.t_co = math.nan
        self.t_end = math.nan
        self.initialized = False
        self.expecting_restart = False
        self.late_by = 0.0
        """Seconds between the previous ``t_end`` and the last step's start (negative: early)."""

    @property
    def time_step_timeout(self) -> float:
        """Elasticity in seconds: how late a step may start and still make up for it."""
        return self.time_step_duration * self.time_step_timeout_factor

    def initialize(self, now: float) -> None:
        """Fake a previous time-step that ends at ``now`` (rtgym does this at first reset)."""
        self.t_start = now - self.time_step_duration
        self.t_co = self.t_start + self.start_obs_capture
        self.t_end = self.t_start + self.time_step_duration
        self.initialized = True

    def expect_restart(self) -> None:
        """Mark that the next time-out is the expected result of ``wait()``."""
        self.expecting_restart = True

    def begin_step(self, now: float) -> StepStart:
        """
        Place the next time-step; ``now`` is read right after the action was sent.

        Says how it was placed; :attr:`late_by` says how late ``now`` was.
        """
        if not self.initialized:
            raise RuntimeError('the schedule must be initialized before the first time-step')
        # Per time-step, after a sleep, with cold caches: locals, no property, no new object.
        t_end = self.t_end
        duration = self.time_step_duration
        if now < t_end + duration * self.time_step_timeout_factor:
            start = ELASTIC
            t_start = t_end
        else:
            # rtgym clears its 'waiting' flag only when the elasticity is actually broken.
            start = RESTARTED if self.expecting_restart else TIMED_OUT
            self.expecting_restart = False
            t_start = now
        self.late_by = now - t_end
        self.t_start = t_start
        self.t_co = t_start + self.start_obs_capture
        self.t_end = t_start + duration
        return start

    def shift(self, delta: float) -> None:
        """Move the whole schedule by ``delta`` seconds (the clock jumped, e.g. a sim reset)."""
        self.t_start += delta
        self.t_co += delta
        self.t_end += delta

    def set_time_step_duration(self, time_step_duration: float,
                               time_step_timeout_factor: float | None = None) -> None:
        """Change it from the next time-step on, as rtgym does."""
        if time_step_timeout_factor is not None:
            self.time_step_timeout_factor = float(time_step_timeout_factor)
        self.time_step_duration = float(time_step_duration)

    def set_start_obs_capture(self, start_obs_capture: float) -> None:
        """Change it from the next time-step on, as rtgym does."""
        self.start_obs_capture = float(start_obs_capture)
