"""
The ``sim_robot`` node: the model behind its topics and services, and the command watchdog.

JointState out at ``sensor_rate``, effort commands in (Float64MultiArray), a reset service
(std_srvs/Trigger) and a pause service (std_srvs/SetBool, true pauses). A command watchdog
zeroes the applied effort when commands stop, as a robot-side controller would. The faults it
injects are in :mod:`.faults`, its clocks in :mod:`.time_bases`, its parameters in
:mod:`.parameters`.
"""

import functools
import threading
from typing import Any, Callable, List, Optional

import numpy as np
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.publisher import Publisher
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.qos_overriding_options import QoSOverridingOptions
from rtgym_ros.msgconv import joint_state_cdr, multi_array_cdr
from rtgym_ros.nodes.sim_robot import faults
from rtgym_ros.nodes.sim_robot.parameters import (check_rates, declare_parameters,
                                                  dynamic_changes, refuse_invalid)
from rtgym_ros.nodes.sim_robot.time_bases import (Lockstep, Outbox, SimTime, TimeBase, to_ns,
                                                  WallTime)
from rtgym_ros.sim import make_model
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool, Trigger

NODE_NAME = 'sim_robot'


class Physics:
    """
    The model stepped by ``dt``: due commands through the watchdog, JointState samples out.

    The :class:`~.time_bases.Physics` a time base drives; ``t`` is in ns of that time base.
    """

    def __init__(self, model: Any, injector: faults.FaultInjector, *, physics_rate: float,
                 sensor_rate: float, joint_pub: Publisher) -> None:
        """Step ``model`` at ``physics_rate``, sample at ``sensor_rate`` onto ``joint_pub``."""
        self.lock = threading.Lock()
        self.model = model
        self.faults = injector
        self.dt = 1.0 / physics_rate
        self.dt_ns = to_ns(self.dt)
        self.t = 0
        self.paused = False
        self.timeout_ns = 0  # command watchdog; 0 disables it
        self._sensor_period_ns = max(to_ns(1.0 / sensor_rate), self.dt_ns)
        self._next_sample = 0
        self._joint_pub = joint_pub
        # Samples are published as serialized bytes: no Python JointState is built.
        self._names = joint_state_cdr.names_block('', model.joint_names)
        # Commands are checked once, as they arrive: sub-steps take them as plain floats.
        self._zero = model.checked_command(np.zeros(model.command_size))
        self._command = self._zero
        self._command_time: Optional[int] = None
        self.last_sample: Optional[int] = None
        """``t`` of the last sample taken (delayed or dropped by faults or not)."""

    def step(self, out: Outbox) -> None:
        """Advance by dt; append the JointState messages now due to ``out``."""
        t = self.t
        arrived = self.faults.due_command(t)
        if arrived is not None:
            self._command_time, self._command = arrived
        fresh = self._command_time is not None and (
            self.timeout_ns == 0 or t - self._command_time < self.timeout_ns)
        effort = self._command if fresh else self._zero
        if not self.paused:
            self.model.advance(self.dt, effort)
        self.t = t = t + self.dt_ns
        if t >= self._next_sample:
            self._next_sample += self._sensor_period_ns
            if self._next_sample <= t:
                self._next_sample = t + self._sensor_period_ns
            self._sample(t)
        out.extend((self._joint_pub, msg) for msg in self.faults.due_measurements(t))

    def restart(self) -> None:
        """Sample at once, forget in-flight messages."""
        self._next_sample = self.t
        self.faults.restart(self.t)

    def command(self, values: np.ndarray, arrived: int) -> None:
        """Take an effort command that arrived at ``arrived``; it applies after the delay."""
        self.faults.send_command(max(arrived, self.t), self.model.checked_command(values))

    def zero_command(self) -> None:
        """Apply no effort until the next command."""
        self._command = self._zero
        self._command_time = None

    def next_due(self) -> int:
        """Return the ``t`` of the next step that takes a sample or sends a delayed one."""
        due = self._next_sample
        in_flight = self.faults.next_measurement_due()
        if in_flight is not None and in_flight < due:
            due = in_flight
        steps = max(1, -(-(due - self.t) // self.dt_ns))  # the step that reaches it
        return self.t + steps * self.dt_ns

    def sample_now(self, out: Outbox) -> None:
        """Measure the state now, whatever the rate; the next rate sample is one period on."""
        self._sample(self.t)
        self._next_sample = self.t + self._sensor_period_ns
        out.extend((self._joint_pub, msg) for msg in self.faults.due_measurements(self.t))

    def _sample(self, t: int) -> None:
        """Measure the state at ``t`` and queue the JointState behind the sensor delay."""
        self.last_sample = t
        measured = self.faults.measure(self.model.position(), self.model.velocity())
        if measured is None:
            return
        position, velocity = measured
        msg = joint_state_cdr.encode(t, self._names, position.tolist(), velocity.tolist(),
                                     self.model.effort().tolist())
        self.faults.send_measurement(t, msg)


class SimRobot(Node):
    """
    The simulated robot node; see the package docstring for its topics and time bases.

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
        self.failure: Optional[BaseException] = None

        model = make_model(values['model'], max_effort=values['max_effort'] or None)
        self._initial_state = values['initial_state']
        if self._initial_state is not None:
            names = list(model.state_names)
            if len(self._initial_state) != len(names):
                raise ValueError(
                    f'initial_state must have {len(names)} values {names} for model '
                    f"'{values['model']}', got {len(self._initial_state)}")
        timer_rate, clock_rate = check_rates(values)
        seed = values['seed']
        reset_seed, sensor_seed, delay_seed = np.random.SeedSequence(
            seed if seed >= 0 else None).spawn(3)
        self._reset_rng = np.random.default_rng(reset_seed)

        overridable = QoSOverridingOptions.with_default_policies()
        self._joint_pub = self.create_publisher(
            JointState, values['joint_states_topic'], QoSProfile(depth=10),
            qos_overriding_options=overridable)
        self._physics = Physics(
            model, faults.FaultInjector(sensor_seed=sensor_seed, delay_seed=delay_seed),
            physics_rate=values['physics_rate'], sensor_rate=values['sensor_rate'],
            joint_pub=self._joint_pub)
        self._time: TimeBase
        if values['stepping'] == 'lockstep':
            self._time = Lockstep(self, self._physics, clock_rate=clock_rate,
                                  reset_time=values['reset_time'], guard=self._guarded)
        elif values['publish_clock']:
            self._time = SimTime(self, self._physics, clock_rate=clock_rate,
                                 reset_time=values['reset_time'], guard=self._guarded)
        else:
            self._time = WallTime(self, self._physics, timer_rate=timer_rate,
                                  ros_timer=values['ros_timer'],
                                  on_demand=values['timer_rate'] == 0.0, guard=self._guarded)
        self._apply_dynamic(values)
        model.reset(self._reset_rng, state=self._initial_state)
        self._time.restart()

        # Best effort matches both reliable and best-effort command publishers. In lockstep a
        # reliable one acknowledges each command, so the env knows it is here before a step.
        reliability = (ReliabilityPolicy.RELIABLE if values['stepping'] == 'lockstep'
                       else ReliabilityPolicy.BEST_EFFORT)
        # Taken raw: only the command's data is read, from the bytes (multi_array_cdr).
        self._command_sub = self.create_subscription(
            Float64MultiArray, values['command_topic'],
            self._guarded(self._on_serialized_command),
            QoSProfile(depth=10, reliability=reliability), qos_overriding_options=overridable,
            raw=True)
        self._reset_srv = self.create_service(
            Trigger, values['reset_service'], self._guarded(self._on_reset))
        self._pause_srv = self.create_service(
            SetBool, values['pause_service'], self._guarded(self._on_pause))
        self.add_on_set_parameters_callback(refuse_invalid)
        self.add_post_set_parameters_callback(self._parameters_set)

        if values['stepping'] == 'lockstep':
            mode = 'lockstep: sim time, paused until step_until asks for a time'
        elif values['publish_clock']:
            mode = (f'sim time, /clock at {clock_rate:g} Hz, real_time_factor '
                    f"{values['real_time_factor']:g}")
        elif not self._time.on_demand:
            mode = (f"wall time, {'ROS timer' if values['ros_timer'] else 'thread'} ticking "
                    f'at {timer_rate:g} Hz')
        else:
            mode = (f'wall time, thread ticking when a JointState is due ({timer_rate:g} Hz '
                    'under an external /clock)')
        self.get_logger().info(
            f"{values['model']}: physics {values['physics_rate']:g} Hz, {mode}; JointState at "
            f"{values['sensor_rate']:g} Hz on {self._joint_pub.topic_name}, commands on "
            f'{self._command_sub.topic_name} (timeout {self._physics.timeout_ns / 1e9:g} s)')
        lockstep = values['stepping'] == 'lockstep'
        for name, default in (('real_time_factor', 1.0), ('reset_time', False)):
            ignored = not values['publish_clock'] and not (lockstep and name == 'reset_time')
            if (ignored or (lockstep and name == 'real_time_factor')) \
                    and values[name] != default:
                self.get_logger().warning(f'{name} is ignored without publish_clock'
                                          if not lockstep else f'{name} is ignored in lockstep')

    # ---------------------------------------------------------------- lifecycle

    @property
    def uses_ros_timer(self) -> bool:
        """Whether the physics ticks on a ROS timer (then the node needs a Python executor)."""
        return self._time.uses_ros_timer

    def start(self) -> None:
        """Start the physics: the sim-time loop, or the wall-time ticker (thread or timer)."""
        self._time.start()

    def stop(self) -> None:
        """Stop the physics and join its thread; harmless to call twice, or half-built."""
        time_base = getattr(self, '_time', None)  # a bad parameter stops __init__ before it
        if time_base is not None:
            time_base.stop()

    def destroy_node(self) -> None:
        """Stop the physics first, so nothing publishes on a destroyed node."""
        self.stop()
        super().destroy_node()

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
        with self._physics.lock:
            self._physics.faults.drop_commands()
            self._physics.zero_command()

    def _on_serialized_command(self, serialized: bytes) -> None:
        self._on_command(multi_array_cdr.data_of(serialized))

    def _on_command(self, data: np.ndarray) -> None:
        """Apply an effort command's values (its ``data``) from now, if they are valid."""
        model = self._physics.model
        values = np.array(data, dtype=np.float64)
        if values.shape != (model.command_size,):
            self.get_logger().warning(
                f'effort command must have {model.command_size} value(s) (one per actuated '
                f'joint of {self._options["model"]}), got {values.size}; keeping the previous '
                'command', throttle_duration_sec=1.0)
            return
        if not np.all(np.isfinite(values)):
            self.get_logger().warning(
                f'effort command must be finite, got {values.tolist()}; keeping the previous '
                'command', throttle_duration_sec=1.0)
            return
        values = np.clip(values, model.command_low, model.command_high)
        with self._physics.lock:  # it applies from now, not from the last tick
            self._physics.command(values, self._time.now())

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response
                  ) -> Trigger.Response:
        self._time.catch_up()
        with self._physics.lock:
            state = self._physics.model.reset(self._reset_rng, state=self._initial_state)
            self._physics.zero_command()
            self._time.reset()
        response.success = True
        response.message = f'reset to state {np.round(state, 6).tolist()}'
        return response

    def _on_pause(self, request: SetBool.Request, response: SetBool.Response
                  ) -> SetBool.Response:
        self._time.catch_up()
        with self._physics.lock:
            was_paused, self._physics.paused = self._physics.paused, bool(request.data)
            self._time.reanchor()
        response.success = True
        if request.data:
            response.message = 'already paused' if was_paused else 'paused'
        else:
            response.message = 'resumed' if was_paused else 'already running'
        return response

    # ---------------------------------------------------------------- parameters

    def _apply_dynamic(self, values: dict) -> None:
        self._physics.timeout_ns = to_ns(values['command_timeout'])
        self._physics.faults.configure(**{name: values[name] for name in faults.OPTIONS})
        self._time.set_real_time_factor(float(values['real_time_factor']))

    def _parameters_set(self, parameters: List[Parameter]) -> None:
        changed = dynamic_changes(parameters)
        if changed:
            self._time.catch_up()
            with self._physics.lock:
                self._options.update(changed)
                self._apply_dynamic(self._options)
                self._time.reanchor()
