"""Read an rclpy clock as float seconds, without rclpy's ``Time`` object per reading."""

import time
from typing import Callable

from rclpy.clock import Clock, JumpThreshold, TimeJump
from rclpy.clock_type import ClockType


class ClockReader:
    """
    A node's clock, read as float seconds: the system clock until ``/clock`` takes over.

    The env reads its clock several times per time-step and the io thread once per message.
    ``Clock.now()`` enters the handle twice and builds a ``Time``; right after a wake-up, with
    cold caches, each such call into rclpy costs microseconds. A ROS clock without its sim-time
    override reads the system clock (rcl's ``RCL_ROS_TIME`` falls back to
    ``CLOCK_REALTIME``), which ``time.time`` reads in one C call; a jump callback tells this
    reader when the override is switched on or off, and under sim time it asks rcl.
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._rcl_now = clock.handle.get_now  # rclpy never destroys a clock's handle early
        self.sim_time = False
        """Whether the clock follows ``/clock`` (a ROS clock with its override on)."""
        self.now: Callable[[], float] = time.time
        """Return the clock's time in seconds."""
        self.now_ns: Callable[[], int] = time.time_ns
        """Return the clock's time in integer nanoseconds (a simulator's step arithmetic)."""
        self._jump_handle = None
        if clock.clock_type == ClockType.ROS_TIME:
            self._jump_handle = clock.create_jump_callback(
                JumpThreshold(min_forward=None, min_backward=None, on_clock_change=True),
                post_callback=self._on_jump)
            self._follow(clock.handle.get_ros_time_override_is_enabled())
        elif clock.clock_type != ClockType.SYSTEM_TIME:
            self.now, self.now_ns = self._rcl_seconds, self._rcl_nanoseconds

    def _on_jump(self, jump: TimeJump) -> None:
        """Read the override's state again: it was switched (on the thread that switched it)."""
        self._follow(self.clock.handle.get_ros_time_override_is_enabled())

    def _follow(self, sim_time: bool) -> None:
        self.now = self._rcl_seconds if sim_time else time.time
        self.now_ns = self._rcl_nanoseconds if sim_time else time.time_ns
        self.sim_time = sim_time

    def _rcl_seconds(self) -> float:
        return self._rcl_now().nanoseconds * 1e-9

    def _rcl_nanoseconds(self) -> int:
        return self._rcl_now().nanoseconds

    def destroy(self) -> None:
        if self._jump_handle is not None:
            self._jump_handle.unregister()
            self._jump_handle = None
