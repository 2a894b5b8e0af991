"""
The ``mujoco_sim`` node: a MuJoCo model behind the topics and services of Gazebo + ros2_control.

Out: ``joint_states`` (sensor_msgs/JointState), ``sensors`` (std_msgs/Float64MultiArray, the
MJCF's sensors), ``odom`` (nav_msgs/Odometry of a floating base), camera images, ``/clock``.
In: ``<controller>/commands`` (std_msgs/Float64MultiArray, one value per actuator), and in
lockstep ``step_until``. Services as gazebo_ros names them: ``reset_simulation``,
``reset_world``, ``pause_physics``, ``unpause_physics`` (std_srvs/Empty). A command watchdog
gives the actuators 0 when commands stop. Its clocks are in :mod:`.time_bases`, its parameters
in :mod:`.parameters`, the model (no ROS) in :mod:`rtgym_ros.sim.mujoco_model`.
"""

import array
import functools
import queue
import threading
from typing import Any, Callable, List, Optional

from geometry_msgs.msg import Point, Quaternion, Vector3
from nav_msgs.msg import Odometry
import numpy as np
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.qos_overriding_options import QoSOverridingOptions
from rtgym_ros.msgconv import joint_state_cdr, multi_array_cdr
from rtgym_ros.msgconv.fields import stamp_message
from rtgym_ros.nodes.mujoco_sim.parameters import (check_rates, declare_parameters, DOUBLES,
                                                   DYNAMIC, refuse_invalid)
from rtgym_ros.nodes.mujoco_sim.time_bases import (Lockstep, Outbox, SimTime, TimeBase, to_ns,
                                                   WallTime)
from rtgym_ros.sim.mujoco_model import CameraRenderer, MujocoModel
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Empty

NODE_NAME = 'mujoco_sim'


class Outputs:
    """The publishers of the measured state, and the messages of one sample."""

    def __init__(self, node: Node, model: MujocoModel, values: dict) -> None:
        """Create the publishers the model has data for (reliable, keep last 10)."""
        self.model = model
        overridable = QoSOverridingOptions.with_default_policies()
        qos = QoSProfile(depth=10)
        self.joint_pub = None
        if model.joint_names:
            self.joint_pub = node.create_publisher(
                JointState, values['joint_states_topic'], qos,
                qos_overriding_options=overridable)
        # JointStates are published as serialized bytes, as sim_robot's: no Python message.
        self._joint_names = joint_state_cdr.names_block('', model.joint_names)
        self.sensors_pub = None
        if model.sensor_names:
            self.sensors_pub = node.create_publisher(
                Float64MultiArray, values['sensors_topic'], qos,
                qos_overriding_options=overridable)
        self.odom_pub = None
        self._odom_frame = values['odometry_frame']
        if model.free_body is not None:
            self.odom_pub = node.create_publisher(
                Odometry, values['odometry_topic'], qos, qos_overriding_options=overridable)

    def sample(self, t: int, out: Outbox) -> None:
        """Append the messages of the current state, stamped ``t`` (ns), to ``out``."""
        model = self.model
        if self.joint_pub is not None:
            out.append((self.joint_pub, joint_state_cdr.encode(
                t, self._joint_names, model.position().tolist(), model.velocity().tolist(),
                model.effort().tolist())))
        if self.sensors_pub is not None:
            out.append((self.sensors_pub,
                        Float64MultiArray(data=array.array('d', model.sensordata().tolist()))))
        if self.odom_pub is not None:
            position, quaternion, linear, angular = model.odometry()
            msg = Odometry()
            msg.header.stamp = stamp_message(t)
            msg.header.frame_id = self._odom_frame
            msg.child_frame_id = model.free_body
            msg.pose.pose.position = Point(x=position[0], y=position[1], z=position[2])
            msg.pose.pose.orientation = Quaternion(
                x=quaternion[0], y=quaternion[1], z=quaternion[2], w=quaternion[3])
            msg.twist.twist.linear = Vector3(x=linear[0], y=linear[1], z=linear[2])
            msg.twist.twist.angular = Vector3(x=angular[0], y=angular[1], z=angular[2])
            out.append((self.odom_pub, msg))

    def describe(self) -> str:
        """Say what is published where, for the start-up log."""
        model = self.model
        parts = []
        if self.joint_pub is not None:
            parts.append(f'JointState of {list(model.joint_names)} on {self.joint_pub.topic_name}')
        if self.sensors_pub is not None:
            sensors = ', '.join(f'{name}[{dim}]' for name, dim in
                                zip(model.sensor_names, model.sensor_dims))
            parts.append(f'sensors {sensors} on {self.sensors_pub.topic_name}')
        if self.odom_pub is not None:
            parts.append(f'odometry of {model.free_body} on {self.odom_pub.topic_name}')
        return '; '.join(parts) or 'no joints, sensors or floating base to publish'


class Camera:
    """
    Renders on a thread of its own, which owns the OpenGL context, and publishes the images.

    ``submit`` hands over a copy of the data: the physics goes on while a frame renders (a
    frame that comes while one renders is dropped, in real time), or waits for it (lockstep).
    """

    def __init__(self, node: Node, model: MujocoModel, values: dict,
                 guard: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        """
        Start the thread and wait for its context.

        :raises RuntimeError: No OpenGL offscreen backend (the message names ``MUJOCO_GL``).
        :raises ValueError: No such camera.
        """
        self._model = model
        self._options = (values['camera'], values['image_width'], values['image_height'])
        self._pub = node.create_publisher(Image, values['image_topic'], QoSProfile(depth=2))
        self._logger = node.get_logger()
        self._queue: queue.Queue = queue.Queue(maxsize=1)
        self._ready = threading.Event()
        self._error: Optional[BaseException] = None
        self.dropped = 0
        self._thread = threading.Thread(target=guard(self._run), name='mujoco_sim_camera',
                                        daemon=True)
        self._thread.start()
        self._ready.wait(60.0)
        if self._error is not None:
            raise self._error
        if not self._ready.is_set():
            raise RuntimeError('the camera renderer did not start within 60 s')

    @property
    def topic_name(self) -> str:
        """Return the resolved image topic."""
        return self._pub.topic_name

    def submit(self, t: int, *, wait: bool) -> None:
        """Render the model's current state stamped ``t``; ``wait`` until it is published."""
        done = threading.Event() if wait else None
        item = (t, self._model.snapshot(), done)
        if wait:
            self._queue.put(item)
            while not done.wait(1.0):
                if not self._thread.is_alive():
                    raise RuntimeError('the camera thread stopped: no image at this time')
            return
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.dropped += 1
            self._logger.warning('rendering is slower than camera_rate: frames dropped',
                                 throttle_duration_sec=5.0)

    def close(self) -> None:
        """Stop the thread (after the frame it renders) and free the context."""
        if self._thread.is_alive():
            try:
                self._queue.put(None, timeout=10.0)  # after the frame it waits for, if any
            except queue.Full:  # the thread hangs in a frame: it is a daemon, leave it
                return
            self._thread.join(timeout=10.0)

    def _run(self) -> None:
        camera, width, height = self._options
        try:
            renderer = CameraRenderer(self._model, camera, width=width, height=height)
        except Exception as error:  # noqa: B902 - handed to the constructor, which raises it
            self._error = error
            self._ready.set()
            return
        self._ready.set()
        try:
            while True:
                item = self._queue.get()
                if item is None:
                    return
                t, data, done = item
                try:
                    pixels = renderer.render(data)
                    msg = Image(height=height, width=width, encoding='rgb8', is_bigendian=0,
                                step=3 * width, data=pixels.tobytes())
                    msg.header.stamp = stamp_message(t)
                    msg.header.frame_id = camera
                    self._pub.publish(msg)
                finally:
                    if done is not None:
                        done.set()
        finally:
            renderer.close()


class Physics:
    """
    The model stepped by its timestep: the command through the watchdog, samples out.

    The :class:`~rtgym_ros.nodes.sim_robot.time_bases.Physics` a time base drives; ``t`` is
    in ns of that time base.
    """

    def __init__(self, model: MujocoModel, outputs: Outputs, camera: Optional[Camera], *,
                 sensor_rate: float, camera_rate: float, lockstep: bool) -> None:
        """Step ``model``; sample at ``sensor_rate``, render at ``camera_rate`` (sim Hz)."""
        self.lock = threading.Lock()
        self.model = model
        self.outputs = outputs
        self.camera = camera
        self.dt_ns = model.timestep_ns
        self.t = 0
        self.paused = False
        self.timeout_ns = 0  # command watchdog; 0 disables it
        self.last_sample: Optional[int] = None
        self._lockstep = lockstep
        self._sensor_period_ns = max(to_ns(1.0 / sensor_rate), self.dt_ns)
        self._camera_period_ns = max(to_ns(1.0 / camera_rate), self.dt_ns)
        self._next_sample = 0
        self._next_frame = 0
        self._last_frame: Optional[int] = None
        self._zero = np.zeros(model.nu)
        self._command = self._zero
        self._command_time: Optional[int] = None

    def step(self, out: Outbox) -> None:
        """Advance by one timestep; append the messages now due to ``out``."""
        t = self.t
        fresh = self._command_time is not None and (
            self.timeout_ns == 0 or t - self._command_time < self.timeout_ns)
        if not self.paused:
            self.model.step(self._command if fresh else self._zero)
        self.t = t = t + self.dt_ns
        if t >= self._next_sample:
            self.sample(out)
        if self.camera is not None and t >= self._next_frame:
            self._render()

    def sample(self, out: Outbox) -> None:
        """
        Append the sensor messages of now (and in lockstep render a frame of now).

        A sample taken when one is due counts as that one; one taken earlier (at a lockstep
        target) leaves the schedule as it is.
        """
        t = self.t
        if t >= self._next_sample:
            self._next_sample = _next(self._next_sample, self._sensor_period_ns, t)
        self.outputs.sample(t, out)
        self.last_sample = t
        if self._lockstep and self.camera is not None:
            self._render()

    def _render(self) -> None:
        """Render the state of now, once: at a lockstep target it is sent before /clock."""
        t = self.t
        if self._last_frame == t:
            return
        if t >= self._next_frame:
            self._next_frame = _next(self._next_frame, self._camera_period_ns, t)
        self._last_frame = t
        self.camera.submit(t, wait=self._lockstep)

    def restart(self) -> None:
        """Sample and render now: at the next step (lockstep publishes at once itself)."""
        self._next_sample = self.t
        self._next_frame = self.t
        self.last_sample = None
        self._last_frame = None

    def command(self, values: np.ndarray) -> None:
        """Take a command that arrived now."""
        self._command = values
        self._command_time = self.t

    def zero_command(self) -> None:
        """Give the actuators 0 until the next command."""
        self._command = self._zero
        self._command_time = None


def _next(scheduled: int, period: int, now: int) -> int:
    """Return the next due time after ``now``: ``scheduled + period``, or skip missed ones."""
    scheduled += period
    return scheduled if scheduled > now else now + period


class MujocoSim(Node):
    """
    The MuJoCo simulator node; see the module docstring for its topics and services.

    Call :meth:`start` once the node is added to a spinning executor and :meth:`stop` (or
    :meth:`destroy_node`) before the executor is shut down.
    """

    def __init__(self, *, context: Optional[Context] = None, node_name: str = NODE_NAME,
                 **node_kwargs: Any) -> None:
        """
        Declare and validate all parameters, load the model, build the ROS interfaces.

        :param context: The (private) context the node lives in.
        :param node_name: The node name; params files may address it under this name.
        :param node_kwargs: Passed on to :class:`rclpy.node.Node` (namespace, overrides, ...).
        :raises ValueError: A parameter value out of range, an unknown model, a missing or
            malformed MJCF; the message says which.
        :raises ImportError: MuJoCo is not installed (the message names the extra).
        :raises RuntimeError: A camera was asked for and no OpenGL backend works.
        """
        # What stop() needs, before anything can fail: rclpy's context shutdown destroys a
        # node whose constructor raised, too.
        self._time: Optional[TimeBase] = None
        self._camera: Optional[Camera] = None
        super().__init__(node_name, context=context, **node_kwargs)
        values = declare_parameters(self)
        self._options = values
        self.failure: Optional[BaseException] = None

        noise = values['reset_noise']
        model = MujocoModel(values['model'], reset_noise=None if noise < 0.0 else noise,
                            on_warning=self._on_mujoco_warning)
        self.model = model
        rates = check_rates(values, 1.0 / model.timestep)
        seed = values['seed']
        self._reset_rng = np.random.default_rng(seed if seed >= 0 else None)
        lockstep = values['stepping'] == 'lockstep'
        self._owns_clock = lockstep or values['publish_clock']

        self._outputs = Outputs(self, model, values)
        if values['camera']:
            self._camera = Camera(self, model, values, self._guarded)
        self._physics = Physics(model, self._outputs, self._camera,
                                sensor_rate=rates['sensor_rate'],
                                camera_rate=rates.get('camera_rate', 1.0), lockstep=lockstep)
        if lockstep:
            self._time = Lockstep(self, self._physics, sample=self._physics.sample,
                                  reset_time=values['reset_time'], guard=self._guarded)
        elif values['publish_clock']:
            self._time = SimTime(self, self._physics, clock_rate=rates['clock_rate'],
                                 reset_time=values['reset_time'], guard=self._guarded)
        else:
            self._time = WallTime(self, self._physics, timer_rate=rates['timer_rate'],
                                  ros_timer=False, guard=self._guarded)
        self._apply_dynamic(values)
        model.reset(self._reset_rng)
        self._time.restart()

        # Taken raw: only the command's data is read, from the bytes (multi_array_cdr).
        self._command_sub = self.create_subscription(
            Float64MultiArray, f"{values['controller']}/commands",
            self._guarded(self._on_serialized_command),
            QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE),
            qos_overriding_options=QoSOverridingOptions.with_default_policies(), raw=True)
        self._services = [
            self.create_service(Empty, 'reset_simulation',
                                self._guarded(self._on_reset_simulation)),
            self.create_service(Empty, 'reset_world', self._guarded(self._on_reset_world)),
            self.create_service(Empty, 'pause_physics', self._guarded(self._on_pause)),
            self.create_service(Empty, 'unpause_physics', self._guarded(self._on_unpause)),
        ]
        self.add_on_set_parameters_callback(refuse_invalid)
        self.add_post_set_parameters_callback(self._parameters_set)
        self._log_start(values, rates)

    def _log_start(self, values: dict, rates: dict) -> None:
        model = self.model
        if values['stepping'] == 'lockstep':
            mode = 'lockstep: paused at 0, advanced by step_until'
        elif values['publish_clock']:
            mode = (f"sim time, /clock at {rates['clock_rate']:g} Hz, real_time_factor "
                    f"{values['real_time_factor']:g}")
        else:
            mode = f"node clock, physics thread at {rates['timer_rate']:g} Hz"
        self.get_logger().info(
            f'{model.name} ({model.path}): physics {1.0 / model.timestep:g} Hz, {mode}; '
            f"samples at {rates['sensor_rate']:g} Hz: {self._outputs.describe()}; commands "
            f'for {list(model.actuator_names)} on {self._command_sub.topic_name} (timeout '
            f'{self._physics.timeout_ns / 1e9:g} s)'
            + (f'; images of {values["camera"]} on {self._camera.topic_name} at '
               f"{rates['camera_rate']:g} Hz" if self._camera is not None else ''))
        if model.skipped_joints:
            self.get_logger().warning(
                'joints not in JointState (ball joints, or unnamed): '
                f'{list(model.skipped_joints)}')
        ignored = []
        if values['stepping'] == 'lockstep' and values['publish_clock']:
            ignored.append('publish_clock (lockstep always publishes /clock)')
        if not values['publish_clock'] and values['real_time_factor'] != 1.0:
            ignored.append('real_time_factor (realtime with publish_clock only)')
        for what in ignored:
            self.get_logger().warning(f'{what} is ignored')

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start the physics: the sim-time loop, the wall-time thread, or lockstep requests."""
        self._time.start()

    def stop(self) -> None:
        """Stop the physics and the camera; harmless to call twice."""
        if self._time is not None:
            self._time.stop()
        if self._camera is not None:
            self._camera.close()

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
                with self._physics.lock:
                    self._physics.zero_command()
                raise
        return wrapper

    def _on_mujoco_warning(self, message: str) -> None:
        """Log MuJoCo's warnings (compiler, unstable physics) instead of MUJOCO_LOG.TXT."""
        self.get_logger().warning(f'MuJoCo: {message}', throttle_duration_sec=5.0)

    def _on_serialized_command(self, serialized: bytes) -> None:
        self._on_command(multi_array_cdr.data_of(serialized))

    def _on_command(self, data: np.ndarray) -> None:
        """Apply a command's values (its ``data``) from the next step, if they are valid."""
        model = self.model
        values = np.array(data, dtype=np.float64)
        topic = self._command_sub.topic_name
        if values.shape != (model.nu,):
            self.get_logger().warning(
                f'a command on {topic} must have {model.nu} value(s), one per actuator '
                f'{list(model.actuator_names)}, got {values.size}; keeping the previous '
                'command', throttle_duration_sec=1.0)
            return
        if not np.all(np.isfinite(values)):
            self.get_logger().warning(
                f'a command on {topic} must be finite, got {values.tolist()}; keeping the '
                'previous command', throttle_duration_sec=1.0)
            return
        values = model.clip(values)
        with self._physics.lock:
            self._physics.command(values)

    def _reset(self, *, rewind: bool) -> None:
        with self._physics.lock:
            self.model.reset(self._reset_rng)
            self._physics.zero_command()
            if rewind:
                self._time.reset()
            else:
                self._time.restart()
                self._time.reanchor()

    def _on_reset_simulation(self, request: Empty.Request, response: Empty.Response
                             ) -> Empty.Response:
        self._reset(rewind=self._owns_clock)
        return response

    def _on_reset_world(self, request: Empty.Request, response: Empty.Response
                        ) -> Empty.Response:
        self._reset(rewind=False)
        return response

    def _on_pause(self, request: Empty.Request, response: Empty.Response) -> Empty.Response:
        self._set_paused(True)
        return response

    def _on_unpause(self, request: Empty.Request, response: Empty.Response) -> Empty.Response:
        self._set_paused(False)
        return response

    def _set_paused(self, paused: bool) -> None:
        if isinstance(self._time, Lockstep):
            # Paused between requests anyway: pausing too would only make an env wait forever.
            self.get_logger().info(f"{'pause' if paused else 'unpause'}_physics: nothing to "
                                   'do in lockstep (paused between step_until requests)',
                                   once=True)
            return
        with self._physics.lock:
            self._physics.paused = paused
            self._time.reanchor()

    # ---------------------------------------------------------------- parameters

    def _apply_dynamic(self, values: dict) -> None:
        self._physics.timeout_ns = to_ns(values['command_timeout'])
        self._time.set_real_time_factor(float(values['real_time_factor']))

    def _parameters_set(self, parameters: List[Parameter]) -> None:
        changed = {p.name: float(p.value) if p.name in DOUBLES else p.value
                   for p in parameters if p.name in DYNAMIC}
        if changed:
            with self._physics.lock:
                self._options.update(changed)
                self._apply_dynamic(self._options)
                self._time.reanchor()
