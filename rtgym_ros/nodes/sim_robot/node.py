"""
The ``sim_robot`` node: an embedded simulated robot behind ROS 2 topics, optionally owning /clock.

It plays the role of a real robot's driver so that the env can be exercised end to end without a
simulator install: JointState out at ``sensor_rate``, effort commands in (Float64MultiArray),
a reset service (std_srvs/Trigger) and a pause service (std_srvs/SetBool, true pauses). It can
inject the faults a real robot has: latency and jitter on both paths (queued, so order is kept),
sensor noise and dropped messages. A command watchdog zeroes the applied effort when commands
stop, as a robot-side controller would.

Two time bases:

* wall time (``publish_clock: false``): a thread ticks at ``timer_rate`` on the steady clock
  (or, with ``ros_timer: true``, a ROS timer on the node clock) and integrates the node-clock
  time elapsed since the last tick in fixed ``1/physics_rate`` sub-steps; stamps come from the
  node clock (``use_sim_time`` makes it follow someone else's /clock, and a paused /clock
  pauses the physics).
* sim time (``publish_clock: true``): the node owns the clock. One thread advances the physics
  by exactly ``1/physics_rate`` per step, publishes rosgraph_msgs/Clock on /clock at
  ``clock_rate`` (sim Hz) and paces itself to ``real_time_factor`` times wall time (0: as fast
  as possible). Time starts at 0; pause freezes it. Stamps, latencies and the command timeout
  are all in sim time, so a faster-than-real-time sim stays consistent.

Run it as ``sim_robot --ros-args --params-file config/sim_robot/pendulum.yaml`` or
``python -m rtgym_ros.nodes.sim_robot --ros-args ...``.
"""

import array
from collections import deque
import functools
import signal
import threading
import time
from typing import Any, Callable, List, Optional, Tuple

import numpy as np
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.qos_overriding_options import QoSOverridingOptions
from rclpy.signals import SignalHandlerOptions
from rclpy.time import Time
from rosgraph_msgs.msg import Clock
from rtgym_ros.nodes.signals import ignore_stop_signals, STOP_SIGNALS
from rtgym_ros.nodes.sim_robot.parameters import (check_rates, declare_parameters,
                                                  dynamic_changes, refuse_invalid)
from rtgym_ros.ros.runtime import make_io_executor
from rtgym_ros.ros.spin import SpinThread
from rtgym_ros.sim import make_model
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool, Trigger

NODE_NAME = 'sim_robot'

# Beyond this backlog (in wall seconds) the sim stops catching up and runs slower instead.
_MAX_LAG_S = 0.1
# Physics steps done per lock hold, so callbacks never wait long for the loop.
_CHUNK = 20


def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


class SimRobot(Node):
    """
    The simulated robot node; see the module docstring for its topics and time bases.

    Call :meth:`start` once the node is added to a spinning executor and :meth:`stop` (or
    :meth:`destroy_node`) before the executor is shut down.
    """

    def __init__(self, *, context: Optional[Context] = None, node_name: str = NODE_NAME,
                 **node_kwargs: Any) -> None:
        """
        Declare and validate all parameters, then build the model and the ROS interfaces.

        :param context: The (private) context the node lives in.
        :param node_name: The node name; params files may address it under this name.
        :param node_kwargs: Passed on to :class:`rclpy.node.Node` (namespace, overrides, ...).
        :raises ValueError: When a parameter value is out of range; the message names it.
        """
        super().__init__(node_name, context=context, **node_kwargs)
        values = declare_parameters(self)
        self._options = values
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._wake = threading.Event()
        self._loop_thread: Optional[threading.Thread] = None
        self._timer = None
        self.failure: Optional[BaseException] = None

        max_effort = values['max_effort'] or None
        self._model = make_model(values['model'], max_effort=max_effort)
        self._initial_state = values['initial_state']
        if self._initial_state is not None:
            names = list(self._model.state_names)
            if len(self._initial_state) != len(names):
                raise ValueError(
                    f'initial_state must have {len(names)} values {names} for model '
                    f"'{values['model']}', got {len(self._initial_state)}")
        timer_rate, clock_rate = check_rates(values)
        physics_rate = values['physics_rate']
        self._sim_time = bool(values['publish_clock'])
        self._timer_period = 1.0 / timer_rate

        seed = values['seed']
        streams = np.random.SeedSequence(seed if seed >= 0 else None).spawn(3)
        self._reset_rng, self._sensor_rng, self._delay_rng = (
            np.random.default_rng(s) for s in streams)

        self._dt = 1.0 / physics_rate
        self._dt_ns = _ns(self._dt)
        self._sensor_period_ns = max(_ns(1.0 / values['sensor_rate']), self._dt_ns)
        self._clock_period_ns = max(_ns(1.0 / clock_rate), self._dt_ns)
        self._apply_dynamic(values)

        self._zero = np.zeros(self._model.command_size)
        self._command = self._zero
        self._command_time: Optional[int] = None
        self._commands: deque = deque()
        self._sensors: deque = deque()
        self._paused = False
        self._reanchor = True
        self._t = 0 if self._sim_time else self.get_clock().now().nanoseconds
        self._model.reset(self._reset_rng, state=self._initial_state)
        self._restart_schedule()

        overridable = QoSOverridingOptions.with_default_policies()
        self._joint_pub = self.create_publisher(
            JointState, values['joint_states_topic'], QoSProfile(depth=10),
            qos_overriding_options=overridable)
        # Best effort matches both reliable and best-effort command publishers.
        self._command_sub = self.create_subscription(
            Float64MultiArray, values['command_topic'], self._guarded(self._on_command),
            QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT),
            qos_overriding_options=overridable)
        self._clock_pub = None
        if self._sim_time:
            self._clock_pub = self.create_publisher(Clock, '/clock', QoSProfile(depth=10))
        self._reset_srv = self.create_service(
            Trigger, values['reset_service'], self._guarded(self._on_reset))
        self._pause_srv = self.create_service(
            SetBool, values['pause_service'], self._guarded(self._on_pause))
        self.add_on_set_parameters_callback(refuse_invalid)
        self.add_post_set_parameters_callback(self._parameters_set)

        mode = (f'sim time, /clock at {clock_rate:g} Hz, real_time_factor '
                f"{values['real_time_factor']:g}" if self._sim_time
                else f"wall time, {'ROS timer' if values['ros_timer'] else 'thread'} ticking "
                f'at {timer_rate:g} Hz')
        self.get_logger().info(
            f"{values['model']}: physics {physics_rate:g} Hz, {mode}; JointState at "
            f"{values['sensor_rate']:g} Hz on {self._joint_pub.topic_name}, commands on "
            f'{self._command_sub.topic_name} (timeout {self._timeout_ns / 1e9:g} s)')
        for name, default in (('real_time_factor', 1.0), ('reset_time', False)):
            if not self._sim_time and values[name] != default:
                self.get_logger().warning(f'{name} is ignored without publish_clock')

    # ---------------------------------------------------------------- lifecycle

    @property
    def uses_ros_timer(self) -> bool:
        """Whether the physics ticks on a ROS timer (then the node needs a Python executor)."""
        return not self._sim_time and bool(self._options['ros_timer'])

    def start(self) -> None:
        """Start the physics: the sim-time loop, or the wall-time ticker (thread or timer)."""
        if self._loop_thread is not None or self._timer is not None:
            return
        if self._sim_time:
            loop = self._run_sim_loop
        else:
            with self._lock:
                self._t = self.get_clock().now().nanoseconds  # start-up time is not lag
                self._restart_schedule()
            if self.uses_ros_timer:
                self._timer = self.create_timer(self._timer_period, self._guarded(self._tick))
                return
            loop = self._run_wall_loop
        self._loop_thread = threading.Thread(
            target=self._guarded(loop), name='sim_robot_physics', daemon=True)
        self._loop_thread.start()

    def stop(self) -> None:
        """Stop the physics and join the sim-time loop; harmless to call twice."""
        self._stop_event.set()
        self._wake.set()
        if self._loop_thread is not None:
            self._loop_thread.join(timeout=5.0)
            self._loop_thread = None
        if self._timer is not None:
            self.destroy_timer(self._timer)
            self._timer = None

    def destroy_node(self) -> None:
        """Stop the physics first, so nothing publishes on a destroyed node."""
        self.stop()
        super().destroy_node()

    # ---------------------------------------------------------------- physics

    def _restart_schedule(self) -> None:
        """Sample at once, publish the clock at once, forget in-flight messages."""
        self._next_sample = self._t
        self._next_clock = self._t
        self._commands.clear()
        self._sensors.clear()
        self._command_floor = self._t
        self._sensor_floor = self._t

    def _step(self, out: List[Tuple[Any, Any]]) -> None:
        """One physics step of dt; appends what has to be published to ``out``. Lock held."""
        t = self._t
        while self._commands and self._commands[0][0] <= t:
            self._command_time, self._command = self._commands.popleft()
        fresh = self._command_time is not None and (
            self._timeout_ns == 0 or t - self._command_time < self._timeout_ns)
        effort = self._command if fresh else self._zero
        if not self._paused:
            self._model.step(self._dt, effort)
        self._t = t = t + self._dt_ns
        if t >= self._next_sample:
            self._next_sample += self._sensor_period_ns
            if self._next_sample <= t:
                self._next_sample = t + self._sensor_period_ns
            self._sample(t)
        while self._sensors and self._sensors[0][0] <= t:
            out.append((self._joint_pub, self._sensors.popleft()[1]))
        if self._clock_pub is not None and t >= self._next_clock:
            self._next_clock += self._clock_period_ns
            if self._next_clock <= t:
                self._next_clock = t + self._clock_period_ns
            out.append((self._clock_pub, Clock(clock=Time(nanoseconds=t).to_msg())))

    def _sample(self, t: int) -> None:
        """Measure the state at ``t`` and queue the JointState behind the sensor delay."""
        if self._dropout > 0.0 and self._sensor_rng.random() < self._dropout:
            return
        position = self._model.position()
        velocity = self._model.velocity()
        if self._noise > 0.0:
            position = position + self._sensor_rng.normal(0.0, self._noise, position.shape)
            velocity = velocity + self._sensor_rng.normal(0.0, self._noise, velocity.shape)
        msg = JointState()
        msg.header.stamp = Time(nanoseconds=t).to_msg()
        msg.name = list(self._model.joint_names)
        msg.position = array.array('d', position.tolist())
        msg.velocity = array.array('d', velocity.tolist())
        msg.effort = array.array('d', self._model.effort().tolist())
        due = t + self._delay(self._sensor_latency_ns, self._sensor_jitter_ns)
        # A later measurement never overtakes an earlier one: delays are applied in order.
        self._sensor_floor = max(due, self._sensor_floor)
        self._sensors.append((self._sensor_floor, msg))

    def _delay(self, latency_ns: int, jitter_ns: int) -> int:
        if jitter_ns <= 0:
            return latency_ns
        return latency_ns + int(self._delay_rng.uniform(0.0, jitter_ns))

    def _publish(self, out: List[Tuple[Any, Any]]) -> None:
        for publisher, msg in out:
            publisher.publish(msg)

    def _run_wall_loop(self) -> None:
        """
        Wall time: tick at timer_rate; missed ticks are skipped, not replayed.

        A thread rather than a ROS timer: an rclpy executor wake-up costs ~0.3 ms of CPU, a
        thread's sleep a few µs; and a node without timers can be spun by the events executor.
        """
        period_ns = _ns(self._timer_period)
        next_tick = time.monotonic_ns()
        while not self._stop_event.is_set():
            self._tick()
            next_tick += period_ns
            now = time.monotonic_ns()
            if next_tick <= now:
                next_tick = now + period_ns
            self._stop_event.wait((next_tick - now) / 1e9)

    def _tick(self) -> None:
        """Wall time: integrate the node-clock time elapsed since the last tick."""
        now = self.get_clock().now().nanoseconds
        out: List[Tuple[Any, Any]] = []
        with self._lock:
            lag = now - self._t
            if lag < -self._dt_ns:
                # The node clock jumped back (use_sim_time with an external /clock).
                self._t = now
                self._restart_schedule()
            elif lag > _ns(_MAX_LAG_S):
                self.get_logger().warning(
                    f'physics fell {lag / 1e9:.3f} s behind the clock; skipping that time',
                    throttle_duration_sec=5.0)
                self._t = now - self._dt_ns
            while self._t + self._dt_ns <= now:
                self._step(out)
        self._publish(out)

    def _run_sim_loop(self) -> None:
        """Sim time: step by dt, paced to real_time_factor against the steady wall clock."""
        anchor_wall = anchor_sim = 0
        while not self._stop_event.is_set():
            with self._lock:
                paused, rtf = self._paused, self._rtf
                if self._reanchor:
                    anchor_wall, anchor_sim = time.monotonic_ns(), self._t
                    self._reanchor = False
                t = self._t
            if paused:
                self._wake.wait(0.1)
                self._wake.clear()
                continue
            if rtf == 0.0:
                steps = _CHUNK
            else:
                now = time.monotonic_ns()
                target = anchor_sim + int((now - anchor_wall) * rtf)
                if target - t > _MAX_LAG_S * 1e9 * rtf:
                    self.get_logger().warning(
                        f'cannot keep up with real_time_factor {rtf:g}; running slower',
                        throttle_duration_sec=5.0)
                    anchor_wall, anchor_sim = now, t
                    continue
                steps = min((target - t) // self._dt_ns, _CHUNK)
                if steps <= 0:
                    wait_s = (t + self._dt_ns - target) / rtf / 1e9
                    time.sleep(min(max(wait_s, 0.0), 0.01))
                    continue
            out: List[Tuple[Any, Any]] = []
            with self._lock:
                if self._paused or self._reanchor:
                    continue
                for _ in range(steps):
                    self._step(out)
            # No sleep(0) to hand over the GIL: it halves the speed, and the interpreter's
            # switch interval (5 ms) already lets the executor thread take commands.
            self._publish(out)

    # ---------------------------------------------------------------- callbacks

    def _guarded(self, callback: Callable[..., Any]) -> Callable[..., Any]:
        """Log a callback's exception with the node's logger and go to the safe state."""
        @functools.wraps(callback)
        def wrapper(*args: Any) -> Any:
            try:
                return callback(*args)
            except Exception as error:  # noqa: B902 - re-raised after logging
                self.failure = error
                self.get_logger().fatal(f'{callback.__name__} failed: {error!r}')
                self._safe_state()
                raise
        return wrapper

    def _safe_state(self) -> None:
        with self._lock:
            self._commands.clear()
            self._command = self._zero
            self._command_time = None

    def _on_command(self, msg: Float64MultiArray) -> None:
        values = np.array(msg.data, dtype=np.float64)
        size = self._model.command_size
        if values.shape != (size,):
            self.get_logger().warning(
                f'effort command must have {size} value(s) (one per actuated joint of '
                f'{self._options["model"]}), got {values.size}; keeping the previous command',
                throttle_duration_sec=1.0)
            return
        if not np.all(np.isfinite(values)):
            self.get_logger().warning(
                f'effort command must be finite, got {values.tolist()}; keeping the previous '
                'command', throttle_duration_sec=1.0)
            return
        values = np.clip(values, self._model.command_low, self._model.command_high)
        with self._lock:
            due = self._t + self._delay(self._command_latency_ns, self._command_jitter_ns)
            self._command_floor = max(due, self._command_floor)
            self._commands.append((self._command_floor, values))

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response
                  ) -> Trigger.Response:
        with self._lock:
            state = self._model.reset(self._reset_rng, state=self._initial_state)
            self._command = self._zero
            self._command_time = None
            if self._sim_time and self._options['reset_time']:
                self._t = 0
            self._restart_schedule()
            self._reanchor = True
        self._wake.set()
        response.success = True
        response.message = f'reset to state {np.round(state, 6).tolist()}'
        return response

    def _on_pause(self, request: SetBool.Request, response: SetBool.Response
                  ) -> SetBool.Response:
        with self._lock:
            was_paused, self._paused = self._paused, bool(request.data)
            self._reanchor = True
        self._wake.set()
        response.success = True
        if request.data:
            response.message = 'already paused' if was_paused else 'paused'
        else:
            response.message = 'resumed' if was_paused else 'already running'
        return response

    # ---------------------------------------------------------------- parameters

    def _apply_dynamic(self, values: dict) -> None:
        self._timeout_ns = _ns(values['command_timeout'])
        self._command_latency_ns = _ns(values['command_latency'])
        self._command_jitter_ns = _ns(values['command_jitter'])
        self._sensor_latency_ns = _ns(values['sensor_latency'])
        self._sensor_jitter_ns = _ns(values['sensor_jitter'])
        self._noise = float(values['sensor_noise'])
        self._dropout = float(values['sensor_dropout'])
        self._rtf = float(values['real_time_factor'])

    def _parameters_set(self, parameters: List[Parameter]) -> None:
        changed = dynamic_changes(parameters)
        if changed:
            with self._lock:
                self._options.update(changed)
                self._apply_dynamic(self._options)
                self._reanchor = True


def main(args: Optional[List[str]] = None) -> int:
    """
    Run the node until SIGINT or SIGTERM, then tear down in order (ignoring more of them).

    :param args: Command line (with ``--ros-args``); ``None`` reads ``sys.argv``.
    :return: 0 on a clean stop, 1 when the node could not start or a callback failed.
    """
    context = Context()
    # Our own handlers (below) decide what SIGINT and SIGTERM do, not rclpy's.
    rclpy.init(args=args, context=context, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            signal.signal(signum, lambda *_: stop.set())
    node = None
    executor = None
    spinner = None
    try:
        try:
            node = SimRobot(context=context)
        except Exception as error:  # noqa: B902 - reported as a start failure
            rclpy.logging.get_logger(NODE_NAME).fatal(f'cannot start: {error}')
            return 1
        # The events executor of the kilted wheels does not fire timers.
        executor = (SingleThreadedExecutor(context=context) if node.uses_ros_timer
                    else make_io_executor(context))
        executor.add_node(node)

        spinner = SpinThread(executor, context=context, name='sim_robot_executor',
                             on_failure=lambda _: stop.set())
        node.start()
        while not stop.wait(0.1):
            if node.failure is not None or not spinner.is_alive():
                break
        return 1 if spinner.failure is not None or node.failure is not None else 0
    finally:
        ignore_stop_signals()  # a second Ctrl-C must not cut the teardown short
        if node is not None:
            node.stop()
        if spinner is not None:
            spinner.stop(timeout=5.0)
        if executor is not None:
            executor.shutdown(timeout_sec=5.0)
        if node is not None:
            node.destroy_node()
        context.try_shutdown()
