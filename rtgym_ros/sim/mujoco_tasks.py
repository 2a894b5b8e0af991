"""
Reward and termination of Gymnasium v5's MuJoCo tasks, on what ``mujoco_sim`` publishes.

A robot config names them as ``rtgym_ros.sim.mujoco_tasks:inverted_pendulum_reward``; each is
called as ``f(obs, action, info)`` with ``obs`` keyed by observation name and ``action`` the
action applied during the time-step (see :mod:`rtgym_ros.sim.tasks`). The observation names
are those of the shipped robot configs:

* ``config/robots/mujoco_inverted_pendulum.yaml``: ``obs['joints']`` = JointState
  ``[slider, hinge]`` with ``fields: [position, velocity]``, i.e. ``[x, theta, x_dot,
  theta_dot]``: InvertedPendulum-v5's observation itself (in float32);
* ``config/robots/mujoco_reacher.yaml``: ``obs['joints']`` = ``[joint0, joint1]`` positions
  then velocities, ``obs['target']`` = ``[target_x, target_y]`` positions. Reacher-v5's
  observation is made of these: :func:`reacher_observation` builds it;
* ``config/robots/mujoco_half_cheetah.yaml``: ``obs['position']`` = qpos without rootx,
  ``obs['velocity']`` = qvel (``rootx`` first): HalfCheetah-v5's observation in two entries.

Values are computed from float32 observations, so a result can differ from Gymnasium's float64
one in the last digits (and, for a pole exactly at the 0.2 rad limit, by that rounding).
"""

import math

import numpy as np

# InvertedPendulum-v5: the pole is "healthy" within this angle (rad).
INVERTED_PENDULUM_ANGLE_LIMIT = 0.2
# HalfCheetah-v5: the weights of the forward velocity and of the squared action.
HALF_CHEETAH_FORWARD_WEIGHT = 1.0
HALF_CHEETAH_CTRL_WEIGHT = 0.1
# reacher.xml: shoulder to elbow, elbow to fingertip (m); both links at the target's height.
REACHER_LINKS = (0.1, 0.11)


def inverted_pendulum_terminated(obs: dict[str, np.ndarray], action: np.ndarray,
                                 info: dict) -> bool:
    """End when a value is not finite or the pole is more than 0.2 rad from upright (v5)."""
    joints = np.asarray(obs['joints'], dtype=np.float64)
    return bool(not np.all(np.isfinite(joints))
                or abs(joints[1]) > INVERTED_PENDULUM_ANGLE_LIMIT)


def inverted_pendulum_reward(obs: dict[str, np.ndarray], action: np.ndarray,
                             info: dict) -> float:
    """Return 1 per time-step while the pole is up, 0 on the terminating one (v5)."""
    return 0.0 if inverted_pendulum_terminated(obs, action, info) else 1.0


def reacher_fingertip(shoulder: float, elbow: float) -> np.ndarray:
    """Return the fingertip's ``(x, y)`` in the world frame for the two joint angles."""
    first, second = REACHER_LINKS
    return np.array([first * math.cos(shoulder) + second * math.cos(shoulder + elbow),
                     first * math.sin(shoulder) + second * math.sin(shoulder + elbow)])


def _reacher_vector(obs: dict[str, np.ndarray]) -> np.ndarray:
    """Return fingertip minus target, ``(x, y)`` (their heights are equal)."""
    joints = np.asarray(obs['joints'], dtype=np.float64)
    target = np.asarray(obs['target'], dtype=np.float64)
    return reacher_fingertip(joints[0], joints[1]) - target[:2]


def reacher_reward(obs: dict[str, np.ndarray], action: np.ndarray, info: dict) -> float:
    """
    Return minus the fingertip's distance to the target, minus the squared action (v5).

    As Reacher-v5, the two terms are also put in ``info``: ``reward_dist``, ``reward_ctrl``.
    """
    reward_dist = -float(np.linalg.norm(_reacher_vector(obs)))
    reward_ctrl = -float(np.sum(np.square(np.asarray(action, dtype=np.float64))))
    info['reward_dist'] = reward_dist
    info['reward_ctrl'] = reward_ctrl
    return reward_dist + reward_ctrl


def reacher_observation(obs: dict[str, np.ndarray]) -> np.ndarray:
    """
    Build Reacher-v5's observation: cos and sin of the joints, target, velocities, vector.

    :return: float64 ``[cos q0, cos q1, sin q0, sin q1, target_x, target_y, q0_dot, q1_dot,
        fingertip_x - target_x, fingertip_y - target_y]``.
    """
    joints = np.asarray(obs['joints'], dtype=np.float64)
    target = np.asarray(obs['target'], dtype=np.float64)
    angles = joints[:2]
    return np.concatenate([np.cos(angles), np.sin(angles), target[:2], joints[2:4],
                           _reacher_vector(obs)])


def half_cheetah_reward(obs: dict[str, np.ndarray], action: np.ndarray, info: dict) -> float:
    """
    Return the forward velocity minus 0.1 times the squared action (HalfCheetah-v5's terms).

    The velocity is rootx's at the end of the time-step: v5 takes the x travelled over the step
    divided by its duration, which the observation alone does not give. As v5, the two terms
    are put in ``info``: ``reward_forward``, ``reward_ctrl``.
    """
    forward = HALF_CHEETAH_FORWARD_WEIGHT * float(np.asarray(obs['velocity'])[0])
    ctrl = -HALF_CHEETAH_CTRL_WEIGHT * float(np.sum(np.square(np.asarray(action, np.float64))))
    info['reward_forward'] = forward
    info['reward_ctrl'] = ctrl
    return forward + ctrl
