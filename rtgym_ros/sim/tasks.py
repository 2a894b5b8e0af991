"""
Reward and termination functions for the shipped simulated robots.

A robot config names them as ``rtgym_ros.sim.tasks:pendulum_reward``. The signature every such
function has: ``f(obs: dict[str, np.ndarray], action: np.ndarray, info: dict) -> float | bool``,
with ``obs`` keyed by observation name (as configured), ``action`` the action being applied.
"""

import math

import numpy as np

from rtgym_ros.sim.cartpole import CartPole
from rtgym_ros.sim.pendulum import wrap_angle

_TRACK_LIMIT = CartPole().track_limit  # the shipped cart-pole's, as sim_robot runs it
_POLE_LIMIT = 12 * math.pi / 180


def pendulum_reward(obs: dict[str, np.ndarray], action: np.ndarray, info: dict) -> float:
    """Gymnasium Pendulum-v1's cost, negated: upright (angle 0), still, with little torque."""
    theta, theta_dot = wrap_angle(float(obs['joints'][0])), float(obs['joints'][1])
    torque = float(action[0])
    return -(theta ** 2 + 0.1 * theta_dot ** 2 + 0.001 * torque ** 2)


def cartpole_reward(obs: dict[str, np.ndarray], action: np.ndarray, info: dict) -> float:
    """+1 per step while the pole is up and the cart on the track (Gymnasium CartPole)."""
    return 0.0 if cartpole_terminated(obs, action, info) else 1.0


def cartpole_terminated(obs: dict[str, np.ndarray], action: np.ndarray, info: dict) -> bool:
    """End when the pole falls past 12 degrees or the cart leaves the track (as CartPole)."""
    cart_x, pole_angle = float(obs['joints'][0]), float(obs['joints'][1])
    return abs(cart_x) > _TRACK_LIMIT or abs(pole_angle) > _POLE_LIMIT
