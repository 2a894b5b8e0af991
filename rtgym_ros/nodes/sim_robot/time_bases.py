"""
What advances the ``sim_robot`` physics, and against which clock.

* :class:`WallTime` (``publish_clock: false``): a thread integrates the node-clock time
  elapsed since its last tick in fixed ``1/physics_rate`` sub-steps. It ticks when a sensor
  message is due (``timer_rate`` 0), or at ``timer_rate`` on the steady clock (or, with
  ``ros_timer: true``, on a ROS timer of the node clock); a command is due from its arrival
  on the node clock, and a reset or pause first catches the physics up to its time. Stamps
  come from the node clock (``use_sim_time`` makes it follow someone else's /clock, and a
  paused /clock pauses the physics).
* :class:`SimTime` (``publish_clock: true``): the node owns the clock. One thread advances the
  physics by exactly ``1/physics_rate`` per step, publishes rosgraph_msgs/Clock on /clock at
  ``clock_rate`` (sim Hz) and paces itself to ``real_time_factor`` times wall time (0: as fast
  as possible). Time starts at 0; pause freezes it.
* :class:`Lockstep` (``stepping: lockstep``): the node owns the clock, paused at 0; the
  ``step_until`` callback runs the physics to each target asked, then publishes at once.
"""

import threading
import time
from typing import Any, Callable, List, Optional, Protocol, Tuple

from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.time import Time
from rosgraph_msgs.msg import Clock
from rtgym_ros.ros.clock_reader import ClockReader

# What physics steps have to publish once the lock is released: (publisher, message) pairs.
Outbox = List[Tuple[Any, Any]]
# Wraps a callback so that its exception is logged and the robot goes to its safe state.
Guard = Callable[[Callable[..., Any]], Callable[..., Any]]

# Beyond this backlog (in wall seconds) the sim stops catching up and runs slower instead.
MAX_LAG_S = 0.1
# Physics steps done per lock hold, so callbacks never wait long for the loop.
_CHUNK = 20
# Lockstep: wall seconds without a step request after which /clock is said again.
_IDLE_ANNOUNCE = 0.1
# Ticking on demand: the longest sleep, well under MAX_LAG_S (a slow sensor is no lag).
_MAX_IDLE_NS = int(MAX_LAG_S * 1e9) // 4


def to_ns(seconds: float) -> int:
    """Return ``seconds`` as integer nanoseconds, rounded."""
    return int(round(seconds * 1e9))


def publish(out: Outbox) -> None:
    """Publish each message on its publisher, in order."""
    for publisher, msg in out:
        publisher.publish(msg)


class Physics(Protocol):
    """What a time base drives. ``t``, ``paused``, ``step`` and ``restart`` need ``lock``."""

    lock: threading.Lock
    dt_ns: int
    t: int  # ns of the time base
    paused: bool

    def step(self, out: Outbox) -> None:
        """Advance ``t`` by ``dt_ns``; append what is to be published to ``out``."""

    def restart(self) -> None:
        """Sample at once and forget what is in flight (``t`` jumped)."""

    def next_due(self) -> int:
        """Return the ``t`` of the next step that takes a sample or sends a delayed one."""
        # Needed by WallTime ticking on demand only.


class TimeBase:
    """A thread (or timer) that steps the physics; the node's hooks for reset and pacing."""

    uses_ros_timer = False

    def __init__(self, node: Node, physics: Physics, *, guard: Guard) -> None:
        self._node = node
        self._physics = physics
        self._guard = guard
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        """Start stepping; the node must be spinning."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop stepping and join the thread; harmless to call twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None

    def restart(self) -> None:
        """Restart the schedules at the current time (lock held)."""
        self._physics.restart()

    def reset(self) -> None:
        """Follow a reset of the robot (lock held)."""
        self.restart()

    def reanchor(self) -> None:
        """Start pacing against wall time over: pause, reset, new parameters (lock held)."""

    def catch_up(self) -> None:
        """Step the physics to now before a reset or pause takes effect (no lock)."""

    def now(self) -> int:
        """Return the time base's time now: the time a command arrived at (lock held)."""
        return self._physics.t

    def set_real_time_factor(self, real_time_factor: float) -> None:
        """Pace to ``real_time_factor`` where the time base paces at all (lock held)."""

    def _start_thread(self, target: Callable[[], None]) -> None:
        self._thread = threading.Thread(
            target=self._guard(target), name='sim_robot_physics', daemon=True)
        self._thread.start()


class WallTime(TimeBase):
    """
    Follow the node clock: each tick integrates the time elapsed since the last one.

    Ticking on demand, the thread wakes once per sensor message (each wake-up of a sleeping
    thread costs a few hundred µs of CPU on a VM, more than the physics of its sub-steps), and
    the message goes out at its time, not at the next tick. What comes in between takes
    effect at its own time: a command is queued for the step that reaches its arrival, and a
    reset or a pause catches the physics up first; the sub-steps before either are integrated
    with the state and command of before.
    """

    def __init__(self, node: Node, physics: Physics, *, timer_rate: float, ros_timer: bool,
                 guard: Guard, on_demand: bool = False) -> None:
        """
        Tick at ``timer_rate`` on a thread, or on a ROS timer with ``ros_timer``.

        ``on_demand``: the thread ticks when a message is due instead, at most at
        ``timer_rate``, and at ``timer_rate`` while the node clock follows an external /clock
        (its sim seconds are no wall seconds to sleep).
        """
        super().__init__(node, physics, guard=guard)
        self.uses_ros_timer = ros_timer
        self.on_demand = on_demand and not ros_timer
        """Whether the thread ticks when a message is due (else at ``timer_rate``)."""
        self._period = 1.0 / timer_rate
        self._timer = None
        self._wake = threading.Event()  # a reset: its sample is due at once
        # Two clock reads per tick: Clock.now() builds a Time, tens of µs after a wake-up.
        self._clock = ClockReader(node.get_clock())
        self._ticking = threading.Lock()  # one tick at a time: messages go out in order
        physics.t = self.now()

    def start(self) -> None:
        """Start ticking from now."""
        if self._thread is not None or self._timer is not None:
            return
        with self._physics.lock:
            self._physics.t = self.now()  # start-up time is not lag
            self.restart()
        if self.uses_ros_timer:
            self._timer = self._node.create_timer(self._period, self._guard(self._tick))
        else:
            self._start_thread(self._run_wall_loop)

    def stop(self) -> None:
        """Stop ticking; harmless to call twice."""
        self._stop.set()
        self._wake.set()
        super().stop()
        if self._timer is not None:
            self._node.destroy_timer(self._timer)
            self._timer = None
        self._clock.destroy()

    def restart(self) -> None:
        """Sample at once: wake the thread for it (lock held)."""
        super().restart()
        self._wake.set()

    def catch_up(self) -> None:
        """Integrate the time up to now, as a tick does (no lock held)."""
        with self._ticking:
            self._tick()

    def now(self) -> int:
        """
        Return the node clock's time, in ns: what the ticks integrate up to.

        A command is due from then on: the next tick integrates the steps up to it with the
        command of before, and applies this one at the step that reaches it.
        """
        return self._clock.now_ns()

    def _run_wall_loop(self) -> None:
        """
        Tick on demand or at timer_rate; missed ticks are skipped, not replayed.

        A thread rather than a ROS timer: an rclpy executor wake-up costs ~0.3 ms of CPU, a
        thread's sleep a few µs; and a node without timers can be spun by the events executor.
        """
        period_ns = to_ns(self._period)
        next_tick = time.monotonic_ns()
        while not self._stop.is_set():
            self._wake.clear()
            started = time.monotonic_ns()
            with self._ticking:
                due = self._tick()
            now = time.monotonic_ns()
            if self.on_demand and not self._clock.sim_time:
                # A sensor faster than timer_rate sends several messages a tick.
                pause_ns = max(min(due - self.now(), _MAX_IDLE_NS), started + period_ns - now)
            else:
                next_tick += period_ns
                if next_tick <= now:
                    next_tick = now + period_ns
                pause_ns = next_tick - now
            if pause_ns > 0:
                self._wake.wait(pause_ns / 1e9)

    def _tick(self) -> int:
        """Integrate the node-clock time elapsed since the last tick; say when one is due."""
        physics = self._physics
        now = self.now()
        out: Outbox = []
        with physics.lock:
            lag = now - physics.t
            if lag < -physics.dt_ns:
                # The node clock jumped back (use_sim_time with an external /clock).
                physics.t = now
                self.restart()
            elif lag > to_ns(MAX_LAG_S):
                self._node.get_logger().warning(
                    f'physics fell {lag / 1e9:.3f} s behind the clock; skipping that time',
                    throttle_duration_sec=5.0)
                physics.t = now - physics.dt_ns
            while physics.t + physics.dt_ns <= now:
                physics.step(out)
            due = physics.next_due() if self.on_demand else now
        publish(out)
        return due


class SimTime(TimeBase):
    """Own the clock: step by dt from 0, publish /clock, pace to ``real_time_factor``."""

    def __init__(self, node: Node, physics: Physics, *, clock_rate: float, reset_time: bool,
                 guard: Guard) -> None:
        """Publish /clock at ``clock_rate`` sim Hz; with ``reset_time`` a reset goes to 0."""
        super().__init__(node, physics, guard=guard)
        self._reset_time = reset_time
        self._clock_pub = node.create_publisher(Clock, '/clock', QoSProfile(depth=10))
        self._clock_period_ns = max(to_ns(1.0 / clock_rate), physics.dt_ns)
        self._next_clock = 0
        self._real_time_factor = 1.0
        self.generation = 0
        """Counts resets: what was stepped before one is not published after it."""
        self._reanchor = True
        self._wake = threading.Event()
        physics.t = 0

    def start(self) -> None:
        """Start the sim-time loop."""
        if self._thread is None:
            self._start_thread(self._run_sim_loop)

    def stop(self) -> None:
        """Stop the loop, waking it if it waits in a pause; harmless to call twice."""
        self._stop.set()
        self._wake.set()
        super().stop()

    def restart(self) -> None:
        """Publish the clock at once, too (lock held)."""
        self._next_clock = self._physics.t
        super().restart()

    def reset(self) -> None:
        """Go back to time 0 with ``reset_time``; pace from now (lock held)."""
        if self._reset_time:
            self._physics.t = 0
        self.generation += 1
        self.restart()
        self.reanchor()

    def publish_unless_reset(self, out: Outbox, generation: int) -> None:
        """
        Publish ``out``, made under the lock, unless a reset came since (then it is stale).

        Published under the lock: a message of the old time must not follow the reset.
        """
        with self._physics.lock:
            if generation == self.generation:
                publish(out)

    def reanchor(self) -> None:
        """Start pacing over, and end a paused wait early (lock held)."""
        self._reanchor = True
        self._wake.set()

    def set_real_time_factor(self, real_time_factor: float) -> None:
        """Pace to ``real_time_factor`` sim seconds per wall second, 0: flat out (lock held)."""
        self._real_time_factor = real_time_factor

    def _step(self, out: Outbox) -> None:
        """One physics step, and /clock when it is due (lock held)."""
        self._physics.step(out)
        t = self._physics.t
        if t >= self._next_clock:
            self._next_clock += self._clock_period_ns
            if self._next_clock <= t:
                self._next_clock = t + self._clock_period_ns
            out.append((self._clock_pub, Clock(clock=Time(nanoseconds=t).to_msg())))

    def _run_sim_loop(self) -> None:
        """Step by dt, paced to real_time_factor against the steady wall clock."""
        physics = self._physics
        anchor_wall = anchor_sim = 0
        while not self._stop.is_set():
            with physics.lock:
                paused, rtf = physics.paused, self._real_time_factor
                if self._reanchor:
                    anchor_wall, anchor_sim = time.monotonic_ns(), physics.t
                    self._reanchor = False
                t = physics.t
            if paused:
                self._wake.wait(0.1)
                self._wake.clear()
                continue
            if rtf == 0.0:
                steps = _CHUNK
            else:
                now = time.monotonic_ns()
                target = anchor_sim + int((now - anchor_wall) * rtf)
                if target - t > MAX_LAG_S * 1e9 * rtf:
                    self._node.get_logger().warning(
                        f'cannot keep up with real_time_factor {rtf:g}; running slower',
                        throttle_duration_sec=5.0)
                    anchor_wall, anchor_sim = now, t
                    continue
                steps = min((target - t) // physics.dt_ns, _CHUNK)
                if steps <= 0:
                    wait_s = (t + physics.dt_ns - target) / rtf / 1e9
                    time.sleep(min(max(wait_s, 0.0), 0.01))
                    continue
            out: Outbox = []
            with physics.lock:
                if physics.paused or self._reanchor:
                    continue
                for _ in range(steps):
                    self._step(out)
                generation = self.generation
            # No sleep(0) to hand over the GIL: it halves the speed, and the interpreter's
            # switch interval (5 ms) already lets the executor thread take commands.
            self.publish_unless_reset(out, generation)


class IdleAnnouncer:
    """
    A paused lockstep simulator's voice while no step request comes: /clock is volatile.

    Every ``_IDLE_ANNOUNCE`` s without a request it says the time again, for nodes that came
    late (an env waits for its first /clock before its first reset), as gazebo_ros says
    /clock while paused. After a start or reset, until the next request, it says the very
    messages of that announcement (the state too): an env whose subscription matched just
    after them would wait for them in vain.
    """

    def __init__(self, lock: threading.Lock, clock_pub: Any, now: Callable[[], int]) -> None:
        """Publish on ``clock_pub`` with ``lock`` held; ``now`` is the time in ns (lock held)."""
        self._lock = lock
        self._clock_pub = clock_pub
        self._now = now
        self._last_request = 0.0  # time.monotonic() of the last request
        self._announcement: Optional[Outbox] = None  # since a start or reset, no request since

    def announce(self, out: Outbox) -> None:
        """Publish ``out`` (/clock first) and say it again until a request (lock held)."""
        publish(out)
        self._announcement = out

    def on_request(self) -> None:
        """Note a step request (ignored ones too): no announcement is due for a while."""
        self._last_request = time.monotonic()
        self._announcement = None

    def run(self, stop: threading.Event) -> None:
        """Say the time, or the pending announcement, after a while without a request."""
        while not stop.wait(_IDLE_ANNOUNCE):
            if time.monotonic() - self._last_request < _IDLE_ANNOUNCE:
                continue
            with self._lock:
                if self._announcement is not None:  # the very messages again, no new sample,
                    publish(self._announcement)  # before a request can step past them
                    continue
                now = self._now()
            self._clock_pub.publish(Clock(clock=Time(nanoseconds=now).to_msg()))


class Lockstep(SimTime):
    """
    Own the clock, paused: advance only to the targets asked on ``step_until`` (lockstep).

    A target is a sim time (rosgraph_msgs/Clock). The ``step_until`` callback itself runs the
    physics to it, as fast as the CPU allows, on the executor thread that also takes the
    commands: those that arrived before the request apply to it (arrival order), and no
    hand-over to another thread delays it. On the way JointState goes out at its rate; at the
    target, JointState stamped with the time reached (unless the rate sample is of that very
    time) and then /clock; no /clock in between (``clock_rate`` is for ``publish_clock``). A
    target not ahead of the time is ignored, so a repeated request is harmless. While no
    request comes, :class:`IdleAnnouncer` says the time again (the state too, after a start or
    reset).
    """

    def __init__(self, node: Node, physics: Physics, *, clock_rate: float, reset_time: bool,
                 guard: Guard, step_topic: str = 'step_until') -> None:
        """Start paused at 0; take targets on ``step_topic``."""
        super().__init__(node, physics, clock_rate=clock_rate, reset_time=reset_time,
                         guard=guard)
        self._announcer = IdleAnnouncer(physics.lock, self._clock_pub, lambda: physics.t)
        node.create_subscription(Clock, step_topic, guard(self._on_step_until),
                                 QoSProfile(depth=10))

    def start(self) -> None:
        """Announce the state and /clock at the start time, then start the idle thread."""
        if self._thread is None:
            with self._physics.lock:
                self._announce()
            super().start()

    def reset(self) -> None:
        """Reset as SimTime does, stay paused there, and announce the new state (lock held)."""
        super().reset()
        self._announce()

    def _announce(self) -> None:
        """
        Publish /clock, then JointState, at the current time (lock held).

        /clock first: an env clears what it received when its clock goes back (a reset with
        ``reset_time``), so a state that came before the rewound clock would be dropped.
        """
        t = Clock(clock=Time(nanoseconds=self._physics.t).to_msg())
        out: Outbox = [(self._clock_pub, t)]
        self._physics.sample_now(out)
        self._announcer.announce(out)

    def _on_step_until(self, msg: Clock) -> None:
        target = Time.from_msg(msg.clock).nanoseconds
        physics = self._physics
        self._announcer.on_request()
        while not self._stop.is_set():
            out: Outbox = []
            with physics.lock:
                if physics.t >= target:
                    return  # reached, or a repeated or past target: ignored
                # In chunks, so that the idle thread and stop() never wait long for the lock.
                for _ in range(_CHUNK):
                    physics.step(out)
                    if physics.t >= target:
                        break
                reached = physics.t >= target
                if reached:
                    if physics.last_sample != physics.t:
                        physics.sample_now(out)
                    out.append((self._clock_pub, Clock(clock=Time(nanoseconds=physics.t)
                                                       .to_msg())))
            publish(out)
            if reached:
                return

    def _run_sim_loop(self) -> None:
        """Say the time (the state too, after a start or reset) while no request comes."""
        self._announcer.run(self._stop)
