"""
What advances the ``mujoco_sim`` physics, and against which clock.

* ``realtime`` stepping uses ``sim_robot``'s time bases as they are: :class:`WallTime` (a thread
  integrates the node-clock time in ``timestep`` sub-steps) and, with ``publish_clock``,
  :class:`SimTime` (the node owns /clock and paces itself to ``real_time_factor``).
* ``lockstep`` stepping is :class:`Lockstep`: the node owns /clock, starts paused at 0 and
  advances only when asked on ``step_until`` (rosgraph_msgs/Clock, the target sim time), as
  fast as the CPU allows, on the executor thread, so that commands that arrived before a
  request are applied before it steps. At the target it always publishes its sensors stamped
  with that time, then /clock, then waits for the next request; at the start and after a
  reset, /clock comes first (the time may have gone back). While no request comes it says the
  time again (the state too, after a start or reset): ``sim_robot``'s :class:`IdleAnnouncer`.
"""

from typing import Callable, Optional

from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from rosgraph_msgs.msg import Clock
from rtgym_ros.nodes.sim_robot.time_bases import (Guard, IdleAnnouncer, Outbox, Physics,
                                                  publish, SimTime, TimeBase, to_ns, WallTime)

__all__ = ['Lockstep', 'Outbox', 'publish', 'SimTime', 'TimeBase', 'to_ns', 'WallTime']

# Physics steps per lock hold (and per batch of messages sent) on the way to a far target.
_CHUNK = 200


class Lockstep(TimeBase):
    """Own /clock; stay paused between targets; step to each target received on step_until."""

    def __init__(self, node: Node, physics: Physics, *, sample: Callable[[Outbox], None],
                 reset_time: bool, guard: Guard, step_topic: str = 'step_until') -> None:
        """
        Advance on ``step_topic``; ``sample`` appends the sensor messages of the current time.

        :param sample: Called with the lock held to publish the sensors at the current time.
        :param reset_time: Whether :meth:`reset` sets the time back to 0.
        """
        super().__init__(node, physics, guard=guard)
        self._sample = sample
        self._reset_time = reset_time
        self._step_topic = step_topic
        self._clock_pub = node.create_publisher(Clock, '/clock', QoSProfile(depth=10))
        self._announcer = IdleAnnouncer(physics.lock, self._clock_pub, lambda: physics.t)
        self._subscription = None
        self._started = False
        self.requests = 0  # step_until messages received, ignored ones included
        physics.t = 0

    def start(self) -> None:
        """Publish the sensors and /clock at the start time, then take step requests."""
        if self._subscription is not None:
            return
        self._subscription = self._node.create_subscription(
            Clock, self._step_topic, self._guard(self._on_step_until),
            QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        with self._physics.lock:
            self._started = True
            self._publish_now()
        self._start_thread(lambda: self._announcer.run(self._stop))

    def stop(self) -> None:
        """Stop taking requests (a step loop under way ends at its next chunk)."""
        self._stop.set()
        super().stop()

    @property
    def topic_name(self) -> Optional[str]:
        """Return the resolved step_until topic (None before :meth:`start`)."""
        return None if self._subscription is None else self._subscription.topic_name

    def restart(self) -> None:
        """Publish the sensors and /clock at once: the state changed (lock held)."""
        self._physics.restart()
        if self._started:
            self._publish_now()

    def reset(self) -> None:
        """Go back to time 0 with ``reset_time``; publish at once (lock held)."""
        if self._reset_time:
            self._physics.t = 0
        self.restart()

    def _publish_now(self) -> None:
        """
        /clock, then the sensors, at the current time (lock held; only the executor thread).

        /clock first, as sim_robot does: an env clears what it received when its clock goes
        back (reset_simulation with ``reset_time``), so a state sent before the rewound clock
        would be dropped and the env would wait for one that never comes.
        """
        now = Clock(clock=Time(nanoseconds=self._physics.t).to_msg())
        out: Outbox = [(self._clock_pub, now)]
        self._sample(out)
        self._announcer.announce(out)

    def _on_step_until(self, msg: Clock) -> None:
        """Advance to the first physics step boundary at or after ``msg.clock`` (1 ns slack)."""
        self.requests += 1
        self._announcer.on_request()
        physics = self._physics
        target = Time.from_msg(msg.clock).nanoseconds - 1
        while not self._stop.is_set():
            out: Outbox = []
            with physics.lock:
                if physics.t >= target:  # reached, or a repeated or past target: ignored
                    return
                for _ in range(_CHUNK):
                    physics.step(out)
                    if physics.t >= target:
                        break
                reached = physics.t >= target
                if reached:
                    if physics.last_sample != physics.t:
                        self._sample(out)
                    out.append((self._clock_pub,
                                Clock(clock=Time(nanoseconds=physics.t).to_msg())))
            publish(out)
            if reached:
                return
