"""A /clock publisher for tests: sim time at a chosen rate, pausable, able to jump back."""

import threading
import time

import rclpy
from rclpy.context import Context
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from rosgraph_msgs.msg import Clock


class SimClock:
    """Publishes /clock from its own thread and private context, like a simulator would."""

    def __init__(self, *, rate: float = 1.0, start: float = 1000.0, hz: float = 1000.0) -> None:
        self.rate = rate
        self.sim_time = start
        self.paused = False
        self.silent = False
        """True: /clock stops (a simulator that hangs or died), not just time."""
        self._hz = hz
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._context = Context()
        rclpy.init(context=self._context, signal_handler_options=SignalHandlerOptions.NO)
        self._node = Node('sim_clock', context=self._context)
        self._publisher = self._node.create_publisher(Clock, '/clock', 10)
        self._thread = threading.Thread(target=self._run, name='sim_clock', daemon=True)
        self._thread.start()

    def jump(self, delta: float) -> None:
        with self._lock:
            self.sim_time += delta

    def _run(self) -> None:
        period = 1.0 / self._hz
        last = time.perf_counter()
        while not self._stop.is_set():
            time.sleep(period)
            now = time.perf_counter()
            with self._lock:
                if not self.paused:
                    self.sim_time += (now - last) * self.rate
                seconds = self.sim_time
            last = now
            if self.silent:
                continue
            message = Clock()
            message.clock.sec = int(seconds)
            message.clock.nanosec = int((seconds - int(seconds)) * 1e9)
            self._publisher.publish(message)

    def publish_once(self, sec: int, nanosec: int = 0) -> None:
        """Publish one /clock message of this time, whatever it is (a broken simulator's)."""
        message = Clock()
        message.clock.sec, message.clock.nanosec = sec, nanosec
        self._publisher.publish(message)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self._node.destroy_node()
        self._context.try_shutdown()
