"""Timing figures and slot ages on ``/diagnostics``, so ``rqt_runtime_monitor`` shows them."""

from typing import Callable

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rtgym_ros.ros.publisher_events import without_default_handlers

OK = DiagnosticStatus.OK
WARN = DiagnosticStatus.WARN


class DiagnosticsPublisher:
    """
    Publish ``collect()`` — ``(level, message, {key: value})`` — every ``period`` seconds.

    Steady seconds, under sim time too: a paused simulator or a stopped ``/clock`` is what the
    monitor must see reported, not a status gone stale (the header stamp is the node's clock).
    """

    def __init__(self, node: Node, *, name: str, period: float,
                 collect: Callable[[], tuple[bytes, str, dict[str, object]]]) -> None:
        self._node = node
        self._name = name
        self._collect = collect
        self._publisher = node.create_publisher(DiagnosticArray, '/diagnostics', 10,
                                                event_callbacks=without_default_handlers())
        self._timer = node.create_timer(period, self._publish,
                                        clock=Clock(clock_type=ClockType.STEADY_TIME))

    def _publish(self) -> None:
        try:
            level, message, values = self._collect()
        except Exception as error:  # diagnostics must never take the executor down
            level, message, values = WARN, f'diagnostics failed: {error!r}', {}
        status = DiagnosticStatus(
            level=level, name=self._name, message=message,
            hardware_id=self._node.get_fully_qualified_name(),
            values=[KeyValue(key=str(k), value=str(v)) for k, v in values.items()])
        array = DiagnosticArray(status=[status])
        array.header.stamp = self._node.get_clock().now().to_msg()
        self._publisher.publish(array)

    def destroy(self) -> None:
        self._node.destroy_timer(self._timer)
        self._node.destroy_publisher(self._publisher)
