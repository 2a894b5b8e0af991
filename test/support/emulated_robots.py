"""
Emulated robots in a robot_emulator process, and ros-v1 envs made for them (integration tests).

One robot_emulator process serves a test module; every test spawns its own robot in it, under
a namespace of its own, with its own command log, so tests cannot hear each other. The env runs
in the test process, configured by a params file written for the test. The fixtures that use
these (``emulator``, ``spawn``, ``make_env``) are in ``test/integration/conftest.py``.
"""

import itertools
import json
import os
from pathlib import Path
import signal
import subprocess
import sys
from typing import Any

import gymnasium as gym
import numpy as np
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from ros_probe import die_with_parent, Probe, wait_until
import rtgym_ros  # noqa: F401  (registers rtgym_ros/ros-v1)
from std_msgs.msg import String
import yaml

REPO = Path(__file__).resolve().parents[2]
EMULATOR = Path(__file__).resolve().parent / 'robot_emulator.py'
# PYTHONFAULTHANDLER: a child that a fatal signal ends (SIGABRT, SIGSEGV) logs every stack.
CHILD_ENV = dict(
    os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST', PYTHONUNBUFFERED='1',
    PYTHONFAULTHANDLER='1',
    PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get('PYTHONPATH')])))
SPAWN_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL)
T = 0.05  # time-step (s): long enough for a noisy 2-core machine, short enough to be fast
DEFAULT = 0.125  # the safe action: inside the bounds, unlike anything the tests step with
RATE = 200.0  # JointState Hz of the emulated robots
_names = itertools.count()


def next_name() -> int:
    """Return a number no other robot, node or env of this process has used."""
    return next(_names)


def f32(value: float) -> float:
    """Return what the robot receives for a float32 action: the float32 value, widened."""
    return float(np.float32(value))


class Emulator:
    """A robot_emulator process that takes robots from a spawn topic."""

    def __init__(self, probe: Probe, log_dir: Path, *args: str) -> None:
        self.spawn_topic = f'/ros_env_test_{os.getpid()}/spawn'
        self.log_path = log_dir / 'robot_emulator.log'
        with open(self.log_path, 'wb') as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(EMULATOR), '--spawn-topic', self.spawn_topic, *args],
                cwd=REPO, env=CHILD_ENV, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent)
        self.spawn_pub = probe.node.create_publisher(String, self.spawn_topic, SPAWN_QOS)

    def output(self) -> str:
        return self.log_path.read_text(errors='replace')

    def stop(self, signum: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        try:
            return self.proc.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5.0)
            raise AssertionError(f'robot_emulator ignored signal {signum}:\n{self.output()}')


class Robot:
    """One emulated robot: its namespace, its command log, its control topic."""

    def __init__(self, probe: Probe, emulator: Emulator, log: Path, **options: Any) -> None:
        self.ns = f'/ros_env_{os.getpid()}_{next(_names)}'
        self.log = log
        self._emulator = emulator
        self.control_pub = probe.node.create_publisher(String, f'{self.ns}/control', 10)
        emulator.spawn_pub.publish(String(data=json.dumps(
            dict(options, namespace=self.ns, log=str(log), rate=options.get('rate', RATE)))))
        try:
            wait_until(lambda: probe.node.count_publishers(f'{self.ns}/joint_states'), 30.0,
                       f'the emulated robot {self.ns}')
            wait_until(lambda: self.control_pub.get_subscription_count(), 30.0,
                       f'the control topic of {self.ns}')
        except AssertionError as error:
            raise AssertionError(f'{error}\nemulator output:\n{emulator.output()}') from None

    def control(self, mode: str) -> None:
        self.control_pub.publish(String(data=mode))

    def entries(self) -> list[dict]:
        if not self.log.exists():
            return []
        lines = self.log.read_text().split('\n')[:-1]  # a line is complete once its \n is
        return [json.loads(line) for line in lines]

    def commands(self) -> list[dict]:
        return [entry for entry in self.entries() if 'data' in entry]

    def values(self) -> list[float]:
        return [entry['data'][0] for entry in self.commands()]

    def wait_commands(self, count: int, timeout: float = 5.0) -> list[dict]:
        return wait_until(lambda: len(self.commands()) >= count and self.commands(), timeout,
                          lambda: f'{count} commands at {self.ns}, got {self.values()}')

    def wait_last(self, value: float, timeout: float = 5.0) -> list[dict]:
        """Wait until the last command the robot received is ``value``."""
        return wait_until(
            lambda: (self.values()[-1:] == [value]) and self.commands(), timeout,
            lambda: f'{value} as the last command at {self.ns}, got {self.values()[-5:]}')


def robot_params(**changes: Any) -> dict:
    """Return a one-joint robot's params: 'command' in, JointState 'joint_states' out."""
    joints = {'topic': 'joint_states', 'type': 'sensor_msgs/msg/JointState',
              'joint_names': ['j0'], 'fields': ['position', 'velocity', 'effort']}
    joints.update(changes.pop('joints', {}))
    params = {
        'time_step_duration': T, 'start_obs_capture': T, 'act_buf_len': 2,
        'reset_timeout': 10.0, 'watchdog_timeout': 1.0,
        'actions': {'names': ['cmd'],
                    'cmd': {'topic': 'command', 'type': 'std_msgs/msg/Float64MultiArray',
                            'field': 'data', 'low': [-1.0], 'high': [1.0],
                            'default': [DEFAULT]}},
        'observations': {'names': ['joints'], 'joints': joints},
    }
    params.update(changes)
    return params


def write_config(path: Path, params: dict) -> Path:
    path.write_text(yaml.safe_dump({'/**': {'ros__parameters': params}}))
    return path


def make_ros_env(robot: 'Robot', config: Path, **overrides: Any) -> gym.Env:
    """Make the env for ``robot`` and wait until the robot hears its commands."""
    env = gym.make('rtgym_ros/ros-v1', robot_config=str(config), namespace=robot.ns,
                   **overrides)
    # Commands sent before the robot's subscription matched would be lost.
    interface = env.unwrapped.interface
    try:
        wait_until(lambda: all(interface.action_subscriber_counts().values()), 30.0,
                   f'the robot at {robot.ns} to subscribe to the commands')
    except BaseException:
        env.close()
        raise
    return env


def act(value: float) -> np.ndarray:
    return np.array([value], dtype=np.float32)
