"""
Embedded simulated robots: plain numpy physics, no ROS, so they can be tested in isolation.

The ``sim_robot`` node (:mod:`rtgym_ros.nodes.sim_robot`) puts one of these behind topics.
Every model offers the same small surface: ``joint_names``, ``state_names``, ``command_size``,
``command_low``/``command_high``, ``state``, ``position()``, ``velocity()``, ``effort()``,
``energy()``, ``reset(rng, *, state=None)`` and ``step(dt, command)``.
"""

from typing import Optional, Union

from rtgym_ros.sim.cartpole import CartPole
from rtgym_ros.sim.pendulum import Pendulum

SimModel = Union[Pendulum, CartPole]

MODELS = {'pendulum': Pendulum, 'cartpole': CartPole}


def make_model(name: str, *, max_effort: Optional[float] = None) -> SimModel:
    """
    Build a model by name, the way the node's ``model`` parameter names it.

    :param name: One of :data:`MODELS`.
    :param max_effort: The actuator limit (torque for the pendulum, force for the cart-pole);
        ``None`` keeps the model's default.
    """
    if name not in MODELS:
        raise ValueError(f'model must be one of {sorted(MODELS)}, got {name!r}')
    if max_effort is None:
        return MODELS[name]()
    if name == 'pendulum':
        return Pendulum(max_torque=max_effort)
    return CartPole(max_force=max_effort)


__all__ = ['CartPole', 'MODELS', 'Pendulum', 'SimModel', 'make_model']
