"""Read an rclpy clock as float seconds, without rclpy's ``Time`` object per reading."""

from rclpy.clock import Clock


def clock_seconds(clock: Clock) -> float:
    """
    Return ``clock.now()`` in seconds.

    The env reads its clock several times per time-step and the io thread once per message;
    ``Clock.now()`` builds and checks a ``Time`` on each call, this asks the handle directly.
    """
    with clock.handle:
        return clock.handle.get_now().nanoseconds * 1e-9
