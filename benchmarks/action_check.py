#!/usr/bin/env python3
"""
``ros-v1``'s action check and hand-over, priced: the package's, and the alternatives.

``RosEnv.step()`` checks each action on the user's thread before it goes out: finite, within
the bounds of the action space as the float32 it is applied as, within ``max_delta``. The
package takes a native float32 array as it is and converts any other action to float64s; it
checks an action within the bounds, and within ``max_delta``, with Python floats, and leaves
numpy's checks (non-finite, beyond float32, clipping or refusing) to the rest; it freezes the
checked array (its own copy) in place, which is then the target ``max_delta`` counts from.
The variants:

- ``float64s``: the float32 action converted to float64s first, as the package converts any
  other (here by the caller: one call more than a check that converted it itself);
- ``numpy's checks alone``: numpy's checks for every action, converted to float64s;
- ``a frozen copy``: that target a read-only copy of the checked array, made as the env
  makes the others (``_frozen``);
- ``both``: numpy's checks alone, and a frozen copy.

With ``--max-delta D`` (the effort's ``max_delta``), the variants are instead:

- ``numpy's max_delta check``: numpy's for every action, on the user's thread and on the
  executor thread, which checks the action again against the target at its publication
  (after the package's Python lists are made: a little more than numpy's alone);
- ``all three``: numpy's checks alone, numpy's ``max_delta`` check and a frozen copy.

Every variant gives the same results at every value
(``test_actions_are_checked_as_the_float32_they_are_applied_as``,
``test_max_delta_is_checked_as_the_float32_ramp_it_is_applied_as``).

Two figures, one env on ``config/robots/pendulum_sim.yaml`` against a ``sim_robot`` pendulum:

- the check alone (with the copy for ``a frozen copy``), warm: ``timeit``, best of five;
- the user's thread's CPU per step, in blocks of steps with each variant in turn inside the
  env's process (``in_process.py``), the idle agent's zero action.

    python3 benchmarks/action_check.py                 # 50 Hz, about 2 minutes
    python3 benchmarks/action_check.py --rates 50 100 --rounds 30
    python3 benchmarks/action_check.py --rates 50 100 --max-delta 4.0
"""

import argparse
import os
import tempfile
import timeit
from typing import Any, Callable

from in_process import (beside_one_sim, pendulum_env, rotated_blocks,  # noqa: I100
                        table_header, table_rows)
import numpy as np
from scale import ENV_CONFIG
import yaml

PREFIX = 'action_check'  # the sim's namespace: /action_check_0


def _numpy_checks(self: Any, action: Any) -> tuple[np.ndarray, bool]:
    """Check ``action`` as the package checks one outside the bounds: numpy's checks."""
    values = np.asarray(action, dtype=np.float64)
    if values.shape != self._action_shape:
        raise ValueError(f'action must have shape {self._action_shape}, got {values.shape}')
    return self._checked_closely(values)


def _config(max_delta: float | None, directory: str) -> str:
    """Return the robot config: the pendulum's, with ``max_delta`` on its effort if given."""
    if max_delta is None:
        return ENV_CONFIG
    with open(ENV_CONFIG) as stream:
        config = yaml.safe_load(stream)
    config['/**']['ros__parameters']['actions']['effort']['max_delta'] = [max_delta]
    path = os.path.join(directory, 'pendulum_max_delta.yaml')
    with open(path, 'w') as stream:
        yaml.safe_dump(config, stream)
    return path


def _never_plainly_within(values: list, target: list, deltas: list) -> bool:
    """Leave every ``max_delta`` check to numpy (price only: the package's lists are made)."""
    return False


def measure(rate: float, rounds: int, steps: int, *, max_delta: float | None,
            directory: str) -> tuple[dict[str, float], dict]:
    """Return µs per warm check, and µs of the user's thread per step block by block."""
    import rtgym_ros.robot.env as env_module
    RosEnv = env_module.RosEnv
    package, plainly_within = RosEnv._checked, env_module._plainly_within

    def copied(check: Callable[..., tuple[np.ndarray, bool]]) -> Callable[..., tuple]:
        def frozen_copy(self: Any, action: Any) -> tuple[np.ndarray, bool]:
            """Check ``action`` with ``check``, and return a read-only copy of it."""
            values, replaced = check(self, action)
            return env_module._frozen(values), replaced
        return frozen_copy

    def float64s(self: Any, action: Any) -> tuple[np.ndarray, bool]:
        """Check ``action`` as the package does, once converted to float64s."""
        return package(self, np.asarray(action, dtype=np.float64))

    # name: (the check, the max_delta check in Python floats)
    variants: dict[str, tuple[Callable[..., tuple[np.ndarray, bool]], Callable[..., bool]]]
    if max_delta is None:
        variants = {'package': (package, plainly_within),
                    'float64s': (float64s, plainly_within),
                    "numpy's checks alone": (_numpy_checks, plainly_within),
                    'a frozen copy': (copied(package), plainly_within),
                    'both': (copied(_numpy_checks), plainly_within)}
    else:
        variants = {'package': (package, plainly_within),
                    "numpy's max_delta check": (package, _never_plainly_within),
                    'all three': (copied(_numpy_checks), _never_plainly_within)}
    env = pendulum_env(PREFIX, rate, _config(max_delta, directory))
    unwrapped: Any = env.unwrapped
    action = np.zeros(unwrapped.action_space.shape, dtype=np.float32)

    def using(check: Callable[..., tuple], within: Callable[..., bool]) -> Callable[[], None]:
        def put() -> None:
            RosEnv._checked, env_module._plainly_within = check, within
        return put

    warm = {}
    try:
        for name, variant in variants.items():
            using(*variant)()
            repeats = timeit.repeat(lambda: RosEnv._checked(unwrapped, action), number=20000,
                                    repeat=5)
            warm[name] = min(repeats) / 20000 * 1e6
        using(package, plainly_within)()
        env.reset()
        for _ in range(int(rate)):  # a second: the env's caches and the host settle
            env.step(action)
        blocks = rotated_blocks(lambda: env.step(action),
                                {name: using(*variant) for name, variant in variants.items()},
                                rounds=rounds, steps=steps)
    finally:
        using(package, plainly_within)()
        env.close()
    return warm, blocks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--rates', type=float, nargs='+', default=[50.0])
    parser.add_argument('--rounds', type=int, default=20, help='blocks of each variant (20)')
    parser.add_argument('--seconds', type=float, default=1.0, help='per block (1.0)')
    parser.add_argument('--max-delta', type=float, default=None,
                        help="the effort's max_delta: price the max_delta check instead")
    args = parser.parse_args()
    with beside_one_sim(PREFIX):
        rows = []
        for rate in args.rates:
            with tempfile.TemporaryDirectory() as directory:
                warm, blocks = measure(rate, args.rounds, max(10, int(rate * args.seconds)),
                                       max_delta=args.max_delta, directory=directory)
            if not rows:
                print('| variant | µs per check, warm |\n|---|---:|')
                print('\n'.join(f'| {name} | {us:.1f} |' for name, us in warm.items()))
            rows += table_rows(rate, blocks)
        print(table_header())
        print('\n'.join(rows))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
