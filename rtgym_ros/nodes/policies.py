"""
Policies the agent node can run, chosen by a string parameter.

- ``zero``: the default (safe) action, ``random``: uniform in the action space;
- ``pendulum_swingup``, ``cartpole_lqr``: built-in controllers for the shipped sims;
- ``sb3:ALGO:PATH`` (e.g. ``sb3:SAC:pendulum_sac.zip``): a saved Stable-Baselines3 model;
- ``package.module:function``: any callable ``f(obs) -> action``.
"""

from typing import Any, Callable

import gymnasium
import numpy as np

from rtgym_ros.robot.callables import load_callable

Policy = Callable[[Any], np.ndarray]
BUILTIN = ('zero', 'random', 'pendulum_swingup', 'cartpole_lqr')


def make_policy(name: str, env: gymnasium.Env, *, seed: int | None = None) -> Policy:
    """Build the policy called ``name`` for ``env`` (errors say what the choices are)."""
    if name == 'zero':
        default = np.asarray(env.unwrapped.default_action, dtype=np.float32)
        return lambda obs: default
    if name == 'random':
        env.action_space.seed(seed)
        return lambda obs: env.action_space.sample()
    if name in ('pendulum_swingup', 'cartpole_lqr'):
        from rtgym_ros.sim.controllers import make_controller
        return make_controller(name, time_step=env.unwrapped.time_step_duration)
    if name.startswith('sb3:'):
        return _sb3_policy(name)
    if ':' in name:
        return load_callable(name, key='policy')
    raise ValueError(f"policy must be one of {', '.join(BUILTIN)}, 'sb3:ALGO:PATH' or "
                     f"'package.module:function', got {name!r}")


def _sb3_policy(name: str) -> Policy:
    parts = name.split(':', 2)
    if len(parts) != 3 or not parts[1] or not parts[2]:
        raise ValueError(f"policy 'sb3:ALGO:PATH' expected (e.g. sb3:SAC:model.zip), "
                         f'got {name!r}')
    try:
        import stable_baselines3
    except ImportError:
        raise ValueError("policy 'sb3:...' needs stable-baselines3: pip install "
                         "'rtgym_ros[train]'") from None
    algorithm = getattr(stable_baselines3, parts[1], None)
    if algorithm is None:
        raise ValueError(f'policy: stable_baselines3 has no algorithm {parts[1]!r}')
    model = algorithm.load(parts[2], device='cpu')
    return lambda obs: model.predict(obs, deterministic=True)[0]
