"""Several robots at once: AsyncVectorEnv with spawn, one namespace and one sim per env."""

import functools

import gymnasium as gym
import numpy as np
from ros_probe import Recorder, REPO, SimProcess, wait_until
from sensor_msgs.msg import JointState

from rtgym_ros.ros_env import RosEnv

CONFIG = str(REPO / 'config' / 'pendulum_sim.yaml')


def test_async_vector_env_with_spawn_drives_each_robot_separately(probe, tmp_path):
    sims = [SimProcess(tmp_path, 'initial_state:=[3.14159, 0.0]', 'command_timeout:=30.0')
            for _ in range(2)]
    try:
        efforts = [Recorder(probe, JointState, f'{sim.ns}/pendulum/joint_states')
                   for sim in sims]
        env_fns = [functools.partial(RosEnv, robot_config=CONFIG, namespace=sim.ns,
                                     node_name=f'env_{index}', reset_timeout=30.0)
                   for index, sim in enumerate(sims)]
        envs = gym.vector.AsyncVectorEnv(env_fns, context='spawn')
        try:
            obs, _ = envs.reset(seed=0)
            assert obs['joints'].shape == (2, 2)
            wait_until(lambda: all(recorder.since(0.0) for recorder in efforts), 20.0,
                       'the probe to hear both sims')
            actions = np.array([[1.0], [-1.0]], np.float32)
            for _ in range(50):
                obs, rewards, terminated, truncated, infos = envs.step(actions)
            assert obs['action_buffer'].shape == (2, 2, 1)
            np.testing.assert_allclose(obs['action_buffer'][:, -1, 0], [1.0, -1.0])
            assert rewards.shape == (2,)
        finally:
            envs.close()
        for recorder, torque in zip(efforts, (1.0, -1.0)):
            applied = {round(m.effort[0], 3) for _, m in recorder.since(0.0) if len(m.effort)}
            assert torque in applied and -torque not in applied  # no cross-talk
        last = [recorder.since(0.0)[-1][1].effort[0] for recorder in efforts]
        assert last == [0.0, 0.0]  # close() stopped both robots
    finally:
        for sim in sims:
            sim.stop()
