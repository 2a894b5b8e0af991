"""Gymnasium v5's MuJoCo tasks as our task functions, against Gymnasium's own envs; no ROS."""

import numpy as np
import pytest

from rtgym_ros.sim.controllers import INVERTED_PENDULUM_GAIN, inverted_pendulum_lqr
from rtgym_ros.sim.lqr import discrete_lqr
from rtgym_ros.sim.mujoco_model import MujocoModel
from rtgym_ros.sim.mujoco_tasks import (half_cheetah_reward, inverted_pendulum_reward,
                                        inverted_pendulum_terminated, reacher_fingertip,
                                        reacher_observation, reacher_reward)

mujoco = pytest.importorskip('mujoco',
                             reason="mujoco is not installed: pip install 'rtgym_ros[mujoco]'")


def gymnasium_env(env_id: str):
    pytest.importorskip('imageio', reason="Gymnasium's MuJoCo envs need imageio")
    import gymnasium
    return gymnasium.make(env_id)


def pendulum_obs(data) -> dict:
    """Return what the robot config observes: JointState [slider, hinge] pos., velocity."""
    return {'joints': np.concatenate([data.qpos, data.qvel]).astype(np.float32)}


def reacher_obs(data) -> dict:
    """Return what the robot config observes: joints [q0, q1, q0_dot, q1_dot], target."""
    return {'joints': np.concatenate([data.qpos[:2], data.qvel[:2]]).astype(np.float32),
            'target': data.qpos[2:4].astype(np.float32)}


def test_inverted_pendulum_reward_and_termination_are_gymnasiums():
    env = gymnasium_env('InvertedPendulum-v5')
    data = env.unwrapped.data
    env.action_space.seed(0)
    steps = terminations = 0
    for episode in range(20):
        obs, _ = env.reset(seed=episode)
        assert np.array_equal(pendulum_obs(data)['joints'], obs.astype(np.float32))
        done = False
        while not done:
            action = env.action_space.sample()
            obs, reward, terminated, truncated, _ = env.step(action)
            ours = pendulum_obs(data)
            assert inverted_pendulum_terminated(ours, action, {}) is terminated
            assert inverted_pendulum_reward(ours, action, {}) == reward
            steps += 1
            terminations += terminated
            done = terminated or truncated
    assert terminations == 20 and steps > 100  # random actions let the pole fall every time
    env.close()


def test_inverted_pendulum_ends_on_nan():
    obs = {'joints': np.array([0.0, 0.0, np.nan, 0.0], np.float32)}
    assert inverted_pendulum_terminated(obs, np.zeros(1), {}) is True
    assert inverted_pendulum_reward(obs, np.zeros(1), {}) == 0.0
    upright = {'joints': np.array([0.5, -0.19, 3.0, -1.0], np.float32)}
    assert inverted_pendulum_terminated(upright, np.zeros(1), {}) is False
    assert inverted_pendulum_reward(upright, np.zeros(1), {}) == 1.0


def test_reacher_reward_and_observation_are_gymnasiums():
    """
    Check the definition; v5 reads the fingertip off ``xpos``, a hair away from ours.

    After an RK4 step ``xpos`` is the position of the integrator's last stage, not of the final
    ``qpos`` (at most a few mm off, when a joint hits its limit). Ours is the kinematics of the
    state the observation holds.
    """
    env = gymnasium_env('Reacher-v5')
    model, data = env.unwrapped.model, env.unwrapped.data
    exact = mujoco.MjData(model)
    env.action_space.seed(0)
    gaps = []
    for episode in range(5):
        env.reset(seed=episode)
        for _ in range(50):
            action = env.action_space.sample()
            obs, reward, terminated, _, info = env.step(action)
            ours = reacher_obs(data)
            our_info: dict = {}
            our_reward = reacher_reward(ours, action, our_info)
            exact.qpos[:] = data.qpos
            mujoco.mj_kinematics(model, exact)
            vector = exact.body('fingertip').xpos - exact.body('target').xpos
            assert our_info['reward_dist'] == pytest.approx(-np.linalg.norm(vector), abs=1e-6)
            assert our_info['reward_ctrl'] == pytest.approx(info['reward_ctrl'], abs=1e-6)
            assert our_reward == our_info['reward_dist'] + our_info['reward_ctrl']
            gaps.append(abs(our_reward - reward))
            built = reacher_observation(ours)
            assert np.allclose(built[:8], obs[:8], atol=1e-5)
            assert np.allclose(built[8:], vector[:2], atol=1e-6)
            assert not terminated  # Reacher-v5 never terminates; the config has no termination
    gaps = np.array(gaps)
    assert np.mean(gaps < 1e-5) > 0.9 and gaps.max() < 1e-2


def test_half_cheetah_reward_is_gymnasiums_but_for_the_velocity_it_takes():
    """The action term is v5's; the forward term rootx's velocity, v5's x travelled / dt."""
    env = gymnasium_env('HalfCheetah-v5')
    data = env.unwrapped.data
    env.action_space.seed(0)
    obs, _ = env.reset(seed=0)
    ours, theirs = [], []
    for _ in range(400):
        action = env.action_space.sample()
        obs, reward, _, _, info = env.step(action)
        observed = {'position': data.qpos[1:].astype(np.float32),
                    'velocity': data.qvel.astype(np.float32)}
        assert np.array_equal(np.concatenate(list(observed.values())), obs.astype(np.float32))
        terms = {}
        value = half_cheetah_reward(observed, action, terms)
        assert terms['reward_ctrl'] == pytest.approx(info['reward_ctrl'], abs=1e-6)  # v5: float32
        assert terms['reward_forward'] == np.float32(data.qvel[0])
        assert value == pytest.approx(terms['reward_forward'] + terms['reward_ctrl'])
        ours.append(terms['reward_forward'])
        theirs.append(info['reward_forward'])
    # Over many steps the end-of-step velocity averages to the mean one (v5's).
    assert np.mean(ours) == pytest.approx(np.mean(theirs), abs=0.05)
    assert np.corrcoef(ours, theirs)[0, 1] > 0.8
    env.close()


def test_reacher_fingertip_is_where_mujoco_puts_it():
    model = MujocoModel('reacher')
    rng = np.random.default_rng(3)
    fingertip = model.model.body('fingertip').id
    for _ in range(20):
        model.data.qpos[:2] = rng.uniform(-3.0, 3.0, size=2)
        model.mj.mj_kinematics(model.model, model.data)
        expected = model.data.xpos[fingertip][:2]
        assert np.allclose(reacher_fingertip(*model.data.qpos[:2]), expected, atol=1e-12)


# ------------------------------------------------------------------ the demo's controller

def linearized_inverted_pendulum(model: MujocoModel) -> tuple[np.ndarray, np.ndarray]:
    """Central differences of two mj_steps (one 0.04 s time-step) at rest, upright."""
    def advance(state: np.ndarray, ctrl: float) -> np.ndarray:
        model.mj.mj_resetData(model.model, model.data)
        model.data.qpos[:] = state[:2]
        model.data.qvel[:] = state[2:]
        for _ in range(2):
            model.step(np.array([ctrl]))
        return np.concatenate([model.data.qpos, model.data.qvel])

    eps = 1e-6
    a = np.zeros((4, 4))
    for i in range(4):
        step = np.zeros(4)
        step[i] = eps
        a[:, i] = (advance(step, 0.0) - advance(-step, 0.0)) / (2 * eps)
    b = ((advance(np.zeros(4), eps) - advance(np.zeros(4), -eps)) / (2 * eps)).reshape(4, 1)
    return a, b


def test_the_inverted_pendulum_gain_is_the_lqr_of_the_mujoco_model():
    a, b = linearized_inverted_pendulum(MujocoModel('inverted_pendulum'))
    augmented_a = np.zeros((5, 5))
    augmented_a[:4, :4] = a
    augmented_a[:4, 4:] = b  # the action being applied ...
    augmented_b = np.zeros((5, 1))
    augmented_b[4, 0] = 1.0  # ... is the one chosen a time-step before
    gain, _ = discrete_lqr(augmented_a, augmented_b, np.diag([1.0, 1.0, 0.1, 0.1, 0.0]),
                           np.array([[1.0]]))
    assert np.allclose(gain[0], INVERTED_PENDULUM_GAIN, rtol=1e-4)


def test_the_lqr_balances_the_pendulum_through_the_action_delay():
    model = MujocoModel('inverted_pendulum')
    rng = np.random.default_rng(11)
    for _ in range(3):
        model.reset(rng)
        running = np.zeros(1, np.float32)
        total = 0.0
        for _ in range(1000):
            obs = {'joints': np.concatenate([model.position(), model.velocity()]).astype(
                np.float32), 'action_buffer': running.reshape(1, 1)}
            action = inverted_pendulum_lqr(obs)
            assert action.dtype == np.float32 and action.shape == (1,)
            for _ in range(2):  # the running action holds for the time-step
                model.step(running.astype(np.float64))
            running = action
            after = {'joints': np.concatenate([model.position(), model.velocity()])}
            assert not inverted_pendulum_terminated(after, running, {})
            total += inverted_pendulum_reward(after, running, {})
        assert total == 1000.0
        assert abs(model.position()[1]) < 0.02 and abs(model.position()[0]) < 0.1


def test_without_the_lqr_the_pendulum_falls():
    model = MujocoModel('inverted_pendulum')
    model.reset(np.random.default_rng(11))
    for step in range(1000):
        model.step(np.zeros(1))
        if inverted_pendulum_terminated(
                {'joints': np.concatenate([model.position(), model.velocity()])}, None, {}):
            break
    assert step < 999
