"""
A robot emulator process for tests: JointState out, commands in, every command logged.

    python test/support/robot_emulator.py --namespace /r1 --log /tmp/r1.jsonl [--joints 1]
        [--rate 200] [--reset-type Trigger] [--reward] [--terminate-above 0.8]
        [--use-sim-time] [--spawn-topic /emulator/spawn]

Each robot, under its namespace (relative topic names):

- ``joint_states`` (sensor_msgs/JointState, header stamped with the robot node's clock) at
  ``rate`` Hz: position = the last command (zeros before one), velocity = how many commands
  arrived since the last reset, effort = how many resets the robot had.
- ``command`` (std_msgs/Float64MultiArray): each one is appended to the log file as a JSON line
  ``{"t": wall receive time, "data": [...]}`` (plus ``"stamp"`` for types with a header).
- ``control`` (std_msgs/String): ``silent`` stops all publishing, ``run`` resumes it,
  ``quit`` stops the robot for good (its node is destroyed).
- ``reward`` (std_msgs/Float64, the sum of the last command) with ``--reward``;
  ``terminated`` (std_msgs/Bool, last command[0] >= x) with ``--terminate-above x``.
- ``reset`` (std_srvs Trigger or Empty): zeroes position and the command count, counts the
  reset and logs ``{"t": ..., "reset": n}``.

``--spawn-topic`` takes more robots while running: a std_msgs/String holding a JSON object with
the same options (``{"namespace": "/r2", "log": "...", "joints": 2, "reset_type": "Empty"}``),
so one process can serve a whole test module. The process uses a private rclpy context and
exits 0 on SIGINT or SIGTERM.
"""

import argparse
import json
import signal
import sys
import threading
import time
from typing import Any, Callable

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from rclpy.utilities import remove_ros_args
from rtgym_ros.ros.spin import SpinThread
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64, Float64MultiArray, String
from std_srvs.srv import Empty, Trigger

SPAWN_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL)
OPTIONS = {'namespace': None, 'log': None, 'joints': 1, 'rate': 200.0, 'reset_type': 'Trigger',
           'reward': False, 'terminate_above': None, 'use_sim_time': False}


class EmulatedRobot:
    """One robot: a node under its namespace, its state, and its command log."""

    def __init__(self, context: Context, *, namespace: str, log: str, joints: int = 1,
                 rate: float = 200.0, reset_type: str = 'Trigger', reward: bool = False,
                 terminate_above: float | None = None, use_sim_time: bool = False,
                 on_quit: Callable[['EmulatedRobot'], None] = lambda robot: None) -> None:
        if reset_type not in ('Trigger', 'Empty'):
            raise ValueError(f'reset_type must be Trigger or Empty, got {reset_type!r}')
        self.node = Node('robot_emulator', namespace=namespace, context=context,
                         start_parameter_services=False,
                         parameter_overrides=[Parameter('use_sim_time', value=use_sim_time)])
        self._lock = threading.Lock()
        self._log = open(log, 'a', buffering=1)
        self._names = [f'j{i}' for i in range(joints)]
        self.position = [0.0] * joints
        self.commands = 0
        self.resets = 0
        self.mode = 'run'
        self._terminate_above = terminate_above
        self._on_quit = on_quit
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self._states = self.node.create_publisher(JointState, 'joint_states', 10)
        self._reward = self.node.create_publisher(Float64, 'reward', 10) if reward else None
        self._terminated = (None if terminate_above is None
                            else self.node.create_publisher(Bool, 'terminated', 10))
        self.node.create_subscription(Float64MultiArray, 'command', self._on_command, reliable)
        self.node.create_subscription(String, 'control', self._on_control, 10)
        self.node.create_service(Trigger if reset_type == 'Trigger' else Empty, 'reset',
                                 self._on_reset)
        self._timer = self.node.create_timer(1.0 / rate, self._publish)

    def _write(self, entry: dict[str, Any]) -> None:
        self._log.write(json.dumps(entry) + '\n')
        self._log.flush()

    def _on_command(self, msg: Float64MultiArray) -> None:
        received = time.time()
        data = [float(v) for v in msg.data]
        entry: dict[str, Any] = {'t': received, 'data': data}
        header = getattr(msg, 'header', None)
        if header is not None:
            entry['stamp'] = header.stamp.sec + header.stamp.nanosec * 1e-9
        with self._lock:
            size = len(self.position)
            self.position = (data + [0.0] * size)[:size]
            self.commands += 1
            self._write(entry)

    def _on_control(self, msg: String) -> None:
        if msg.data in ('run', 'silent'):
            self.mode = msg.data
        elif msg.data == 'quit':
            if self.mode != 'quit':
                self.mode = 'quit'
                self._timer.cancel()
                self._on_quit(self)
        else:
            self.node.get_logger().warning(f'unknown control {msg.data!r}: run, silent, quit')

    def _on_reset(self, request: Any, response: Any) -> Any:
        with self._lock:
            self.position = [0.0] * len(self.position)
            self.commands = 0
            self.resets += 1
            self._write({'t': time.time(), 'reset': self.resets})
        if isinstance(response, Trigger.Response):
            response.success = True
            response.message = f'reset {self.resets}'
        return response

    def _publish(self) -> None:
        if self.mode != 'run':
            return
        with self._lock:
            position, commands, resets = list(self.position), self.commands, self.resets
        size = len(position)
        state = JointState(name=self._names, position=position,
                           velocity=[float(commands)] * size, effort=[float(resets)] * size)
        state.header.stamp = self.node.get_clock().now().to_msg()
        self._states.publish(state)
        if self._reward is not None:
            self._reward.publish(Float64(data=float(sum(position))))
        if self._terminated is not None:
            self._terminated.publish(Bool(data=position[0] >= self._terminate_above))

    def destroy(self) -> None:
        self.node.destroy_node()
        self._log.close()


class Emulator:
    """The robots of one process, spun by one executor in a private context."""

    def __init__(self, spawn_topic: str | None) -> None:
        self.context = Context()
        rclpy.init(context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.robots: list[EmulatedRobot] = []
        self._retired: list[EmulatedRobot] = []
        self._manager = Node('robot_emulator_manager', context=self.context,
                             start_parameter_services=False)
        if spawn_topic:
            self._manager.create_subscription(String, spawn_topic, self._on_spawn, SPAWN_QOS)
        # Robots that quit are destroyed here, between callbacks: an executor's wait set costs
        # time for every entity it holds, and a module's tests spawn many robots.
        self._manager.create_timer(0.1, self._destroy_retired)
        self.executor.add_node(self._manager)

    def add(self, **options: Any) -> None:
        robot = EmulatedRobot(self.context, on_quit=self._retired.append, **options)
        self.robots.append(robot)
        self.executor.add_node(robot.node)

    def _destroy_retired(self) -> None:
        while self._retired:
            robot = self._retired.pop()
            self.executor.remove_node(robot.node)
            self.robots.remove(robot)
            robot.destroy()

    def _on_spawn(self, msg: String) -> None:
        try:
            options = json.loads(msg.data)
            unknown = sorted(set(options) - set(OPTIONS))
            if unknown:
                raise ValueError(f'unknown options {unknown}; expected {sorted(OPTIONS)}')
            self.add(**options)
        except Exception as error:  # a bad request must not take the other robots down
            self._manager.get_logger().error(f'cannot spawn {msg.data!r}: {error!r}')

    def spin(self, stop: threading.Event) -> None:
        # One robot's failing callback must not silence the others: report it, keep spinning.
        spinner = SpinThread(self.executor, context=self.context, name='robot_emulator',
                             on_failure=_report_failure, survive_errors=True)
        while not stop.wait(0.1):
            if not spinner.is_alive():
                break
        spinner.stop(timeout=5.0)
        self.executor.shutdown(timeout_sec=5.0)
        for robot in self.robots:
            robot.destroy()
        self._manager.destroy_node()
        self.context.try_shutdown()


def _report_failure(error: BaseException) -> None:
    print(f'robot_emulator: a callback failed: {error!r}', file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--namespace', help='start one robot under this namespace')
    parser.add_argument('--log', help='command log of that robot (JSON lines)')
    parser.add_argument('--joints', type=int, default=1)
    parser.add_argument('--rate', type=float, default=200.0, help='JointState Hz')
    parser.add_argument('--reset-type', choices=('Trigger', 'Empty'), default='Trigger')
    parser.add_argument('--reward', action='store_true')
    parser.add_argument('--terminate-above', type=float)
    parser.add_argument('--use-sim-time', action='store_true')
    parser.add_argument('--spawn-topic', help='String topic of JSON robot specs to add')
    args = parser.parse_args(remove_ros_args(argv or sys.argv)[1:])
    if bool(args.namespace) != bool(args.log):
        parser.error('--namespace and --log go together')
    if not args.namespace and not args.spawn_topic:
        parser.error('give --namespace/--log, --spawn-topic, or both')

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    emulator = Emulator(args.spawn_topic)
    if args.namespace:
        emulator.add(namespace=args.namespace, log=args.log, joints=args.joints,
                     rate=args.rate, reset_type=args.reset_type, reward=args.reward,
                     terminate_above=args.terminate_above, use_sim_time=args.use_sim_time)
    print('robot_emulator: ready', flush=True)
    emulator.spin(stop)
    return 0


if __name__ == '__main__':
    sys.exit(main())
