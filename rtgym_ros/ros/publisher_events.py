"""
Publishers of the env's main node without rclpy's default QoS event handlers.

rclpy gives each publisher two waitables (an incompatible QoS, an incompatible type) whose
only work is a log line when such a subscriber appears. The main node's executor waits on its
waitables at every wake-up of its loop (each deadline under sim time and in lockstep; on wall
time its turns, about once a second), and each costs Python calls there, for an event of
discovery time: 17 µs of CPU per wake-up for the six of an env with one action topic, on a
2-core machine (``benchmarks/executor_cost.py``). The graph watch reports those
subscribers instead, once a second and by node name (:class:`rtgym_ros.ros.graph.GraphWatch`).
"""

from rclpy.event_handler import PublisherEventCallbacks
from rclpy.node import Node


def without_default_handlers() -> PublisherEventCallbacks:
    """``event_callbacks`` for ``create_publisher``: no waitable unless asked for."""
    return PublisherEventCallbacks(use_default_callbacks=False)


def drop_event_handlers(node: Node) -> None:
    """
    Destroy the event handlers of ``node``'s publishers, before its executor spins.

    For the publisher that rclpy's ``Node`` makes itself (``/parameter_events``), with the
    default handlers: nothing of it concerns an env. Its list of handlers is emptied too, as
    ``Node.destroy_publisher`` takes each one it lists off the node again.
    """
    for publisher in node.publishers:
        for handler in publisher.event_handlers:
            node.remove_waitable(handler)
            handler.destroy()
        publisher.event_handlers = []
