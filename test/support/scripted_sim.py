"""
A lockstep simulator that misbehaves on cue, run as its own process by the lockstep tests.

Its state is one joint: position = its time, velocity = the last command it got, stamped at
its time. It advances only when asked (``step_until``, a Clock topic, or ``step``, a service
that takes a number of physics steps in ``transition.id``), like a paused Gazebo world, and
offers Empty reset, pause and unpause services. What it does wrong is given as JSON:

- ``dt_ns``: its physics step (1 ms);
- ``drop``: indices of the step requests it ignores;
- ``restart_at``: the index of the step request at which it restarts at time 0 by itself;
- ``free_after_unpause``: after unpause it runs free, 10 physics steps every 10 ms, as a gz
  world does until the next paused step;
- ``state_after``: seconds before its state publisher exists (a bridge that comes up late);
- ``start_ns``: its time at start and after each reset (0), e.g. the epoch of a recorded run.

A ``step_until`` target that repeats the last one is the env asking again (it does after half
a second without ``/clock``): it is served, but is no new request, so that indices name the
env's time-steps however late a request comes.

It prints ``READY`` once its services are up, and logs every call and command to stdout.
It spins a single-threaded executor: rclpy's MultiThreadedExecutor ran this node's callbacks
up to a second after their message came (ros2/rclpy#1452), which the env took for a stall.
"""

import json
import sys
import threading
from typing import Any

from lifecycle_msgs.srv import ChangeState
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from ros_probe import die_with_parent
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Empty


class ScriptedSim:
    """The simulator's state and services (see the module's docstring)."""

    def __init__(self, node: Node, options: dict) -> None:
        self._node = node
        self._dt = int(options.get('dt_ns', 1_000_000))
        self._drop = set(options.get('drop', []))
        self._restart_at = options.get('restart_at')
        self._free_after_unpause = bool(options.get('free_after_unpause', False))
        self._lock = threading.Lock()
        self._start = int(options.get('start_ns', 0))
        self._time_ns = self._start
        self._command = 0.0
        self._requests = 0
        self._last_target: int | None = None
        self._free = False
        self._clock = node.create_publisher(Clock, '/clock', 10)
        self._state: Any = None
        delay = float(options.get('state_after', 0.0))
        if delay > 0.0:
            self._late = node.create_timer(delay, self._create_state_publisher)
        else:
            self._create_state_publisher()
        node.create_subscription(Float64MultiArray, 'cmd', self._on_command, 10)
        node.create_subscription(Clock, 'step_until', self._on_step_until,
                                 QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        node.create_service(ChangeState, 'step', self._on_step)
        for name, handler in (('reset_simulation', self._on_reset),
                              ('pause_physics', self._on_pause),
                              ('unpause_physics', self._on_unpause)):
            node.create_service(Empty, name, handler)
        node.create_timer(0.01, self._run_free)
        node.create_timer(0.2, self._publish_clock)  # a paused gz world keeps publishing it
        with self._lock:
            self._publish()

    def _create_state_publisher(self) -> None:
        if self._state is None:
            self._state = self._node.create_publisher(JointState, 'state', 10)
            print('state publisher', flush=True)

    def _publish(self) -> None:
        """State first, then /clock (lock held)."""
        stamp = Time(nanoseconds=self._time_ns).to_msg()
        if self._state is not None:
            state = JointState(name=['j'], position=[self._time_ns * 1e-9],
                               velocity=[self._command])
            state.header.stamp = stamp
            self._state.publish(state)
        self._clock.publish(Clock(clock=stamp))

    def _publish_clock(self) -> None:
        with self._lock:
            self._clock.publish(Clock(clock=Time(nanoseconds=self._time_ns).to_msg()))

    def _on_command(self, message: Float64MultiArray) -> None:
        self._command = message.data[0]
        print(f'cmd {self._command}', flush=True)

    def _next_request(self, what: str) -> int | None:
        """Count a step request; return its index, or None when it is to be ignored."""
        index, self._requests = self._requests, self._requests + 1
        print(f'{what} (request {index}) at {self._time_ns}', flush=True)
        if index in self._drop:
            return None
        if index == self._restart_at:
            self._time_ns = 0
            self._publish()
            return None
        return index

    def _on_step_until(self, message: Clock) -> None:
        target = Time.from_msg(message.clock).nanoseconds
        with self._lock:
            if target == self._last_target:
                print(f'step_until again to {target} at {self._time_ns}', flush=True)
            elif self._next_request(f'step_until to {target}') is None:
                return
            self._last_target = target
            if self._time_ns >= target:
                return
            while self._time_ns < target:
                self._time_ns += self._dt
            self._publish()

    def _on_step(self, request: ChangeState.Request,
                 response: ChangeState.Response) -> ChangeState.Response:
        with self._lock:
            if self._next_request(f'step {request.transition.id}') is not None:
                self._time_ns += request.transition.id * self._dt
                self._publish()
        response.success = True
        return response

    def _on_reset(self, request: Empty.Request, response: Empty.Response) -> Empty.Response:
        print('reset_simulation', flush=True)
        with self._lock:
            self._time_ns = self._start
            self._publish()
        return response

    def _on_pause(self, request: Empty.Request, response: Empty.Response) -> Empty.Response:
        print('pause_physics', flush=True)
        self._free = False
        return response

    def _on_unpause(self, request: Empty.Request, response: Empty.Response) -> Empty.Response:
        print('unpause_physics', flush=True)
        self._free = self._free_after_unpause
        return response

    def _run_free(self) -> None:
        if self._free:
            with self._lock:
                self._time_ns += 10 * self._dt
                self._publish()


def main() -> None:
    die_with_parent()
    rclpy.init(args=sys.argv)
    node = Node('scripted_sim')
    ScriptedSim(node, json.loads(sys.argv[1]))
    print('READY', flush=True)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except KeyboardInterrupt:
        pass


if __name__ == '__main__':
    main()
