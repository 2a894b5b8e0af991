#!/usr/bin/env python3
"""
step()'s wait, priced inside one process: the package's, its timeout by keyword, and none.

``step()`` waits for its time-step on a bare lock (:class:`rtgym_ros.core.wakeups.Latch`),
``acquire(True, 0.1)``: the timeout lets the stall monitor check a time-step that does not
complete. Two alternatives are priced against it:

- ``by keyword``: ``acquire(timeout=0.1)``, which goes through CPython's generic keyword
  parser, whose code is cold right after the wait;
- ``without a timeout``: ``acquire()``, rtgym's wait (price only: nothing would end a wait
  for a time-step that never completes).

The differences are a few µs per step, so they are priced in one process
(``in_process.py``): one env, the idle agent (``step()`` called again at once), blocks of
steps with each wait in turn.

    python3 benchmarks/step_wait.py                  # 100 Hz and 1 kHz, about 80 s
    python3 benchmarks/step_wait.py --rates 100 --rounds 40
"""

import argparse
import os
from typing import Any, Callable

from bench_support import join_bench_domain  # puts this checkout's rtgym_ros first
from in_process import rotated_blocks, table_header, table_rows  # noqa: I100
import numpy as np
from rtgym_ros.core.wakeups import Latch
from step_timing import _make_env


def _wait_by_keyword(self: Latch, timeout: float | None = None) -> bool:
    """Wait as the package's ``Latch.wait`` does, with the timeout passed by keyword."""
    if not self._clear.acquire(timeout=-1 if timeout is None else timeout):
        return False
    self.set()
    return True


def _wait_without_timeout(self: Latch, timeout: float | None = None) -> bool:
    """Wait without a timeout, as rtgym does (price only: it may never return)."""
    self._clear.acquire()
    self.set()
    return True


PACKAGE = 'package: acquire(True, 0.1)'
WAITS: dict[str, Callable[..., bool]] = {
    PACKAGE: Latch.wait, 'by keyword: acquire(timeout=0.1)': _wait_by_keyword,
    'without a timeout: acquire()': _wait_without_timeout}


def measure(rate: float, rounds: int, steps: int) -> dict[str, list[float]]:
    """Return µs of the user's thread's CPU per step, block by block, for each wait."""
    join_bench_domain()
    env: Any = _make_env('rtgym_ros', 1.0 / rate, [], [], options={},
                         noting=([], [lambda: 0.0]))
    action = np.zeros(1, dtype=np.float32)

    def using(wait: Callable[..., bool]) -> Callable[[], None]:
        def put() -> None:
            Latch.wait = wait
        return put

    try:
        env.reset()
        for _ in range(int(rate)):  # a second: the env's caches and the host settle
            env.step(action)
        return rotated_blocks(lambda: env.step(action),
                              {name: using(wait) for name, wait in WAITS.items()},
                              rounds=rounds, steps=steps)
    finally:
        env.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--rates', type=float, nargs='+', default=[100.0, 1000.0])
    parser.add_argument('--rounds', type=int, default=20, help='blocks of each wait (20)')
    parser.add_argument('--seconds', type=float, default=0.5, help='per block (0.5)')
    args = parser.parse_args()
    print(f'load average before: {os.getloadavg()[0]:.2f}')
    print(table_header())
    for rate in args.rates:
        results = measure(rate, args.rounds, max(10, int(rate * args.seconds)))
        print('\n'.join(table_rows(rate, results)), flush=True)
    print(f'load average after: {os.getloadavg()[0]:.2f}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
