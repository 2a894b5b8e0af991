"""Fixtures of the integration tests: emulated robots in another process, and their envs."""

from pathlib import Path
import signal
from typing import Any

from emulated_robots import Emulator, make_ros_env, Robot, robot_params, write_config
import gymnasium as gym
import pytest


@pytest.fixture(scope='module')
def emulator(probe, tmp_path_factory):
    emulator = Emulator(probe, tmp_path_factory.mktemp('emulator'))
    yield emulator
    code = emulator.stop(signal.SIGTERM)
    assert code == 0, f'robot_emulator exited {code} on SIGTERM:\n{emulator.output()}'


@pytest.fixture
def spawn(probe, emulator, tmp_path):
    robots = []

    def spawn(**options: Any) -> Robot:
        robot = Robot(probe, emulator, tmp_path / f'robot{len(robots)}.jsonl', **options)
        robots.append(robot)
        return robot

    yield spawn
    for robot in robots:
        robot.control('quit')


@pytest.fixture
def make_env(tmp_path):
    envs = []

    def make(robot: Robot, *, config: Path | None = None, **changes: Any) -> gym.Env:
        overrides = {key: changes.pop(key) for key in
                     ('use_sim_time', 'node_name', 'observation_layout') if key in changes}
        if config is None:
            config = write_config(tmp_path / f'robot{len(envs)}.yaml', robot_params(**changes))
        env = make_ros_env(robot, config, **overrides)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()
