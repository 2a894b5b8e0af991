"""
Policies the agent node can run, chosen by a string parameter.

- ``zero``: the default (safe) action, ``random``: uniform in the action space;
- ``pendulum_swingup``, ``cartpole_lqr``: built-in controllers for the shipped sims;
- ``sb3:ALGO:PATH`` (e.g. ``sb3:SAC:pendulum_sac.zip``): a saved Stable-Baselines3 model, whose
  observation and action spaces must be the env's (checked before the first episode);
- ``package.module:function``: any callable ``f(obs) -> action``.

The agent calls ``policy(obs)`` at every step with the observation ``step()`` (or ``reset()``)
returned, and ``policy.reset()`` before every episode when the policy has a ``reset`` method.
"""

from typing import Any, Callable

import gymnasium
import gymnasium.spaces as spaces
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
        return _sb3_policy(name, env)
    if ':' in name:
        return load_callable(name, key='policy')
    raise ValueError(f"policy must be one of {', '.join(BUILTIN)}, 'sb3:ALGO:PATH' or "
                     f"'package.module:function', got {name!r}")


def _sb3_policy(name: str, env: gymnasium.Env) -> Policy:
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
    check_model_spaces(model, env, source=parts[2])
    return lambda obs: model.predict(obs, deterministic=True)[0]


def check_model_spaces(model: Any, env: gymnasium.Env, *, source: str) -> None:
    """
    Refuse a model whose spaces are not the env's, before the robot moves.

    A model trained on another config (no transform, another ``act_buf_len``, an
    ``ObservationWrapper`` around the env) would fail at its first ``predict``, or act on
    values it does not understand; the error says which entry differs.
    """
    for what in ('observation_space', 'action_space'):
        expected = getattr(model, what, None)
        found = getattr(env, what)
        if expected is not None and expected != found:
            raise ValueError(
                f'policy: the model {source} was trained with the {what} {expected}, but the '
                f'robot config makes {found}: {space_difference(expected, found)}. Train it '
                'on this config (transforms and obs_prepro_func in the config, not in '
                'wrappers), or run it with the config it was trained on')


def space_difference(expected: spaces.Space, found: spaces.Space, where: str = '') -> str:
    """Say where two spaces differ first: a key, a shape, a dtype or bounds."""
    label = where or 'the space'
    if isinstance(expected, spaces.Dict) and isinstance(found, spaces.Dict):
        missing = sorted(set(expected.spaces) - set(found.spaces))
        extra = sorted(set(found.spaces) - set(expected.spaces))
        if missing or extra:
            return f'{label}: ' + ', '.join(
                [f'keys {missing} only in the model'] * bool(missing)
                + [f'keys {extra} only in the config'] * bool(extra))
        for key in expected.spaces:
            if expected[key] != found[key]:
                return space_difference(expected[key], found[key], f'{where}[{key!r}]')
    if isinstance(expected, spaces.Tuple) and isinstance(found, spaces.Tuple):
        if len(expected) != len(found):
            return f'{label}: {len(expected)} entries in the model, {len(found)} in the config'
        for index, (a, b) in enumerate(zip(expected, found)):
            if a != b:
                return space_difference(a, b, f'{where}[{index}]')
    if type(expected) is not type(found):
        return f'{label}: {type(expected).__name__} in the model, {type(found).__name__} here'
    for attribute in ('shape', 'dtype'):
        a, b = getattr(expected, attribute, None), getattr(found, attribute, None)
        if a != b:
            return f'{label}: {attribute} {a} in the model, {b} in the config'
    return f'{label}: bounds differ'
