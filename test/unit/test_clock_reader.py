"""ClockReader reads what rclpy's own Clock.now() reads, on wall time and under sim time."""

import time

from rclpy.clock import Clock, ROSClock
from rclpy.clock_type import ClockType
from rclpy.time import Time
from rtgym_ros.ros.clock_reader import ClockReader


def test_a_ros_clock_without_override_reads_the_system_clock_as_rclpy_does():
    clock = ROSClock()
    reader = ClockReader(clock)
    before = clock.now().nanoseconds
    ours, ours_ns = reader.now(), reader.now_ns()
    after = clock.now().nanoseconds
    assert not reader.sim_time
    assert before * 1e-9 - 1e-6 <= ours <= after * 1e-9 + 1e-6  # one clock, read in between
    assert before <= ours_ns <= after  # in integer ns, exactly
    reader.destroy()


def test_the_reader_follows_the_sim_time_override_both_ways():
    clock = ROSClock()
    reader = ClockReader(clock)
    clock._set_ros_time_is_active(True)  # what rclpy's TimeSource does for use_sim_time
    clock.set_ros_time_override(Time(seconds=12, nanoseconds=345_000_000))
    assert reader.sim_time
    assert reader.now() == clock.now().nanoseconds * 1e-9 == 12.345
    assert reader.now_ns() == 12_345_000_000
    clock._set_ros_time_is_active(False)
    assert not reader.sim_time
    assert abs(reader.now() - time.time()) < 1.0
    assert abs(reader.now_ns() - time.time_ns()) < 1_000_000_000
    reader.destroy()


def test_a_reader_made_under_sim_time_starts_on_it():
    clock = ROSClock()
    clock._set_ros_time_is_active(True)
    clock.set_ros_time_override(Time(seconds=3))
    reader = ClockReader(clock)
    assert reader.sim_time and reader.now() == 3.0 and reader.now_ns() == 3_000_000_000
    reader.destroy()


def test_a_destroyed_reader_still_reads_but_no_longer_follows_the_override():
    clock = ROSClock()
    reader = ClockReader(clock)
    reader.destroy()
    clock._set_ros_time_is_active(True)
    assert not reader.sim_time
    assert reader.now() > 1e9  # still the system clock: the reader was told nothing


def test_a_steady_clock_is_read_through_rcl():
    clock = Clock(clock_type=ClockType.STEADY_TIME)
    reader = ClockReader(clock)
    before = clock.now().nanoseconds
    ours, ours_ns = reader.now(), reader.now_ns()
    after = clock.now().nanoseconds
    assert before * 1e-9 <= ours <= after * 1e-9 and before <= ours_ns <= after
    assert not reader.sim_time
