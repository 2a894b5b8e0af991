"""
Several robots at once: one namespace and one sim per env, in subprocess vector envs.

Gymnasium's AsyncVectorEnv (spawn) always runs; SB3's SubprocVecEnv (forkserver) runs where
stable-baselines3 is installed (the ``train`` extra) and is skipped, saying so, elsewhere.
"""

import contextlib
import functools
import multiprocessing
from typing import Callable, Iterator

from dummy_interfaces import CountingInterface
import gymnasium as gym
import numpy as np
import pytest
from ros_probe import Recorder, REPO, SimProcess, wait_until
from rtgym_ros import DEFAULT_CONFIG_DICT
from rtgym_ros.robot.env import RosEnv
from sensor_msgs.msg import JointState

CONFIG = str(REPO / 'config' / 'robots' / 'pendulum_sim.yaml')
TORQUES = (1.0, -1.0)


@contextlib.contextmanager
def two_robots(probe, tmp_path) -> Iterator[tuple[list[Callable[[], RosEnv]], list[Recorder]]]:
    """Two sims, a recorder of each one's JointState, and a factory for an env on each."""
    sims = [SimProcess(tmp_path, 'initial_state:=[3.14159, 0.0]', 'command_timeout:=30.0')
            for _ in TORQUES]
    try:
        states = [Recorder(probe, JointState, f'{sim.ns}/pendulum/joint_states')
                  for sim in sims]
        env_fns = [functools.partial(RosEnv, robot_config=CONFIG, namespace=sim.ns,
                                     node_name=f'env_{index}', reset_timeout=30.0)
                   for index, sim in enumerate(sims)]
        yield env_fns, states
    finally:
        for sim in sims:
            sim.stop()


def assert_each_robot_got_its_own_torque_then_zero(states: list[Recorder]) -> None:
    for recorder, torque in zip(states, TORQUES):
        applied = {round(m.effort[0], 3) for _, m in recorder.since(0.0) if len(m.effort)}
        assert torque in applied and -torque not in applied  # no cross-talk
    wait_until(lambda: [r.since(0.0)[-1][1].effort[0] for r in states] == [0.0, 0.0], 5.0,
               'both robots stopped by close()')


def test_async_vector_env_with_spawn_drives_each_robot_separately(probe, tmp_path):
    with two_robots(probe, tmp_path) as (env_fns, states):
        envs = gym.vector.AsyncVectorEnv(env_fns, context='spawn')
        try:
            obs, _ = envs.reset(seed=0)
            assert obs['joints'].shape == (2, 2)
            wait_until(lambda: all(recorder.since(0.0) for recorder in states), 20.0,
                       'the probe to hear both sims')
            actions = np.array([[t] for t in TORQUES], np.float32)
            for _ in range(50):
                obs, rewards, terminated, truncated, infos = envs.step(actions)
            assert obs['action_buffer'].shape == (2, 2, 1)
            np.testing.assert_allclose(obs['action_buffer'][:, -1, 0], TORQUES)
            assert rewards.shape == (2,)
        finally:
            envs.close()
        assert_each_robot_got_its_own_torque_then_zero(states)


def test_sb3_subproc_vec_env_with_forkserver_drives_each_robot_separately(probe, tmp_path):
    vec_env = pytest.importorskip(
        'stable_baselines3.common.vec_env',
        reason="stable-baselines3 is not installed (pip install 'rtgym_ros[train]')")
    with two_robots(probe, tmp_path) as (env_fns, states):
        envs = vec_env.SubprocVecEnv(env_fns, start_method='forkserver')
        try:
            envs.seed(0)
            obs = envs.reset()
            assert obs['joints'].shape == (2, 2)
            wait_until(lambda: all(recorder.since(0.0) for recorder in states), 20.0,
                       'the probe to hear both sims')
            actions = np.array([[t] for t in TORQUES], np.float32)
            for _ in range(50):
                obs, rewards, dones, infos = envs.step(actions)
            np.testing.assert_allclose(obs['action_buffer'][:, -1, 0], TORQUES)
            assert rewards.shape == (2,) and not dones.any()
        finally:
            envs.close()
        assert_each_robot_got_its_own_torque_then_zero(states)


def _make_env_and_report(errors) -> None:
    """Child process: make an env, report what went wrong (or nothing)."""
    try:
        env = gym.make('rtgym_ros/real-time-gym-v1', config=dict(
            DEFAULT_CONFIG_DICT, interface=CountingInterface, time_step_duration=0.02,
            start_obs_capture=0.02))
        env.close()
        errors.put('')
    except Exception as error:
        errors.put(f'{type(error).__name__}: {error}')


def test_an_env_in_a_child_forked_after_ros_started_is_an_error_not_a_hang():
    # AsyncVectorEnv makes (and closes) an env in the parent for the spaces, then starts its
    # workers with the platform's default, fork on Linux, as gym.make_vec(..., 'async') does:
    # rclpy.init() in such a child waits forever.
    gym.make('rtgym_ros/real-time-gym-v1', config=dict(
        DEFAULT_CONFIG_DICT, interface=CountingInterface)).close()
    context = multiprocessing.get_context('fork')
    errors = context.Queue()
    child = context.Process(target=_make_env_and_report, args=(errors,), daemon=True)
    child.start()
    try:
        child.join(timeout=20.0)
        assert not child.is_alive(), 'the forked child hangs making the env'
        error = errors.get(timeout=5.0)
    finally:
        if child.is_alive():
            child.kill()
            child.join(timeout=5.0)
    assert error.startswith('RuntimeError: ')
    assert "context='spawn'" in error and 'fork' in error
