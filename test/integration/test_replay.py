"""
Observation transforms and rtgym's prepro functions over real DDS, and their replay by agent.

A laser scan and odometry, published as a robot publishes them, arrive downsampled and with a
yaw; ``obs_prepro_func`` and ``act_prepro_func`` named in the config run in the env; and the
agent node, built from the same file, runs a model made on the env's spaces unchanged (a
stand-in for Stable-Baselines3 in its own process: this machine has no SB3; the agent reads
only the model's spaces and ``predict``), and refuses one made on another config.
"""

import math
import os
from pathlib import Path
import pickle
import subprocess
import sys
import textwrap
import types

from emulated_robots import act, CHILD_ENV, f32, next_name, REPO, write_config
import gymnasium as gym
from gymnasium.utils.env_checker import check_env
from nav_msgs.msg import Odometry
import numpy as np
import pytest
from ros_probe import SimProcess
import rtgym_ros  # noqa: F401
from rtgym_ros.robot.params_file import load_params_file
from sensor_msgs.msg import LaserScan

PENDULUM = REPO / 'config' / 'robots' / 'pendulum_sim.yaml'
RANGES = np.linspace(0.3, 3.3, 360)
RANGES[123] = 0.15
YAW = 2.5


@pytest.fixture
def mobile_robot(probe):
    """Publish a scan (20 Hz) and odometry (50 Hz) from the probe's node; yield the namespace."""
    namespace = f'/replay_{os.getpid()}_{next_name()}'
    node = probe.node
    scan_pub = node.create_publisher(LaserScan, f'{namespace}/scan', 10)
    odom_pub = node.create_publisher(Odometry, f'{namespace}/odom', 10)

    def scan() -> None:
        message = LaserScan(ranges=RANGES.tolist(), range_max=3.5)
        message.header.stamp = node.get_clock().now().to_msg()
        scan_pub.publish(message)

    def odom() -> None:
        message = Odometry()
        message.header.stamp = node.get_clock().now().to_msg()
        message.pose.pose.position.x, message.pose.pose.position.y = 1.0, 2.0
        message.pose.pose.orientation.z = math.sin(YAW / 2)
        message.pose.pose.orientation.w = math.cos(YAW / 2)
        message.twist.twist.linear.x, message.twist.twist.angular.z = 0.1, -0.2
        odom_pub.publish(message)

    timers = [node.create_timer(0.05, scan), node.create_timer(0.02, odom)]
    yield namespace
    for timer in timers:
        node.destroy_timer(timer)
    node.destroy_publisher(scan_pub)
    node.destroy_publisher(odom_pub)


def mobile_config(tmp_path: Path) -> Path:
    return write_config(tmp_path / 'mobile.yaml', {
        'time_step_duration': 0.05, 'start_obs_capture': 0.05, 'reset_timeout': 10.0,
        'actions': {'names': ['cmd_vel'], 'cmd_vel': {
            'topic': 'cmd_vel', 'type': 'geometry_msgs/msg/Twist',
            'fields': ['linear.x', 'angular.z'], 'low': [-0.2, -2.0], 'high': [0.2, 2.0]}},
        'observations': {
            'names': ['scan', 'odom'],
            'scan': {'topic': 'scan', 'type': 'sensor_msgs/msg/LaserScan', 'field': 'ranges',
                     'length': 360, 'low': [0.0], 'high': [3.5], 'nonfinite': 'max',
                     'max_age': 0.3, 'on_stale': 'flag',
                     'transform': {'window_min': 10}},
            'odom': {'topic': 'odom', 'type': 'nav_msgs/msg/Odometry',
                     'fields': ['pose.pose.position.x', 'pose.pose.position.y',
                                'pose.pose.orientation', 'twist.twist.linear.x',
                                'twist.twist.angular.z'],
                     'max_age': 0.2, 'on_stale': 'flag',
                     'transform': {'quaternion_to_yaw': 2}}}})


def test_a_downsampled_scan_and_a_yaw_over_dds(mobile_robot, tmp_path):
    env = gym.make('rtgym_ros/ros-v1', robot_config=str(mobile_config(tmp_path)),
                   namespace=mobile_robot)
    try:
        assert env.observation_space['scan'].shape == (36,)
        assert env.observation_space['odom'].shape == (5,)
        observations = [env.reset()[0]]
        observations += [env.step(np.zeros(2, np.float32))[0] for _ in range(5)]
        for obs in observations:
            assert obs in env.observation_space
            np.testing.assert_allclose(obs['scan'], RANGES.reshape(36, 10).min(axis=1),
                                       rtol=1e-6)
            assert obs['odom'].tolist() == pytest.approx([1.0, 2.0, YAW, 0.1, -0.2], abs=1e-6)
    finally:
        env.close()


def test_prepro_functions_named_in_the_config(spawn, make_env):
    robot = spawn()
    env = make_env(robot, obs_prepro_func='prepro_functions:with_speed',
                   act_prepro_func='prepro_functions:halve')
    assert set(env.observation_space.spaces) == {'joints', 'action_buffer', 'speed'}
    obs, _ = env.reset()
    assert set(obs) == {'joints', 'action_buffer', 'speed'} and obs in env.observation_space
    for value in (0.5, -0.8, 0.3):
        obs = env.step(act(value))[0]
        assert obs in env.observation_space
        assert obs['action_buffer'][-1].tolist() == [f32(value)]  # the agent's action
    robot.wait_last(f32(f32(0.3) * 0.5))  # the robot gets what act_prepro_func made of it
    assert robot.values()[-3:] == [f32(f32(v) * 0.5) for v in (0.5, -0.8, 0.3)]
    check_env(env.unwrapped)


def test_act_prepro_func_results_are_checked(spawn, make_env):
    robot = spawn()
    env = make_env(robot, act_prepro_func='prepro_functions:double')
    env.reset()
    env.step(act(0.75))  # 1.5 is clipped into [-1, 1]
    env.step(act(0.25))
    robot.wait_last(0.5)
    assert robot.values()[-2:] == [1.0, 0.5]
    assert env.unwrapped.clipped_commands == 1
    wrong = make_env(spawn(), act_prepro_func='prepro_functions:wrong_shape')
    wrong.reset()  # the default action at reset goes through it too: the time-step fails
    with pytest.raises(RuntimeError, match=r'act_prepro_func must return an action of shape '
                                           r'\(1,\), got shape \(5,\)'):
        for _ in range(3):
            wrong.step(act(0.5))


# -- the agent runs a model made on the env ---------------------------------------------------

FAKE_SB3 = '''
"""Stands in for stable_baselines3: Algorithm.load unpickles a FakeModel."""
import pickle

import numpy as np


class FakeModel:
    def __init__(self, observation_space, action_space):
        self.observation_space = observation_space
        self.action_space = action_space
        self.calls = 0

    def predict(self, observation, deterministic=False):
        if observation not in self.observation_space:  # what SB3 would refuse
            raise ValueError(f'Unexpected observation {observation!r}')
        self.calls += 1
        return np.zeros(self.action_space.shape, np.float32), None


class SAC:
    @staticmethod
    def load(path, device='auto'):
        with open(path, 'rb') as handle:
            return pickle.load(handle)
'''


@pytest.fixture
def fake_sb3(tmp_path, monkeypatch):
    """Write the stand-in package; return it, importable here as in the agent's process."""
    folder = tmp_path / 'fake_sb3'
    (folder / 'stable_baselines3').mkdir(parents=True)
    (folder / 'stable_baselines3' / '__init__.py').write_text(textwrap.dedent(FAKE_SB3))
    module = types.ModuleType('stable_baselines3')
    exec(compile(FAKE_SB3, str(folder / 'stable_baselines3' / '__init__.py'), 'exec'),
         module.__dict__)
    monkeypatch.setitem(sys.modules, 'stable_baselines3', module)
    return folder, module


def pendulum_config(tmp_path: Path, name: str, **joints) -> Path:
    params = load_params_file(PENDULUM, node_name='rtgym_env')
    params['observations']['joints'].update(joints)
    params.update(obs_prepro_func='prepro_functions:with_speed', ep_max_length=25)
    return write_config(tmp_path / name, params)


def save_model(fake_sb3, config: Path, path: Path) -> Path:
    """Do what a training script does: make the env from the file, keep the model's spaces."""
    _, module = fake_sb3
    env = gym.make('rtgym_ros/ros-v1', robot_config=str(config))
    try:
        model = module.FakeModel(env.observation_space, env.action_space)
    finally:
        env.close()
    path.write_bytes(pickle.dumps(model))
    return path


def run_agent(fake_sb3, config: Path, model: Path, *args: str) -> subprocess.CompletedProcess:
    folder, _ = fake_sb3
    env = dict(CHILD_ENV, PYTHONPATH=os.pathsep.join(
        [str(folder), str(REPO / 'test' / 'support'), CHILD_ENV['PYTHONPATH']]))
    return subprocess.run(
        [sys.executable, '-m', 'rtgym_ros.nodes.agent', '--ros-args', '--params-file',
         str(config), '-p', f'policy:=sb3:SAC:{model}', '-p', 'episodes:=1', *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_the_agent_runs_a_model_made_on_the_same_config(fake_sb3, tmp_path):
    transform = {'transform': {'scale': [1.0, 0.1]}}
    config = pendulum_config(tmp_path, 'pendulum.yaml', **transform)
    model = save_model(fake_sb3, config, tmp_path / 'model.pkl')
    sim = SimProcess(tmp_path)
    try:
        result = run_agent(fake_sb3, config, model, '-r', f'__ns:={sim.ns}')
    finally:
        sim.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'episode   0 | steps    25' in result.stdout, result.stdout


def test_the_agent_refuses_a_model_made_on_another_config(fake_sb3, tmp_path):
    # Trained with the velocity scaled, run with all of it: refused before the robot moves
    # (no robot runs here: the check comes before the first reset).
    trained = pendulum_config(tmp_path, 'trained.yaml', transform={'scale': [1.0, 0.1]})
    model = save_model(fake_sb3, trained, tmp_path / 'model.pkl')
    other = pendulum_config(tmp_path, 'other.yaml', transform={'select': [0]})
    result = run_agent(fake_sb3, other, model)
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'policy: the model' in result.stderr
    assert "['joints']: shape (2,) in the model, (1,) in the config" in result.stderr
    assert 'Traceback' not in result.stderr
