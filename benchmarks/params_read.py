#!/usr/bin/env python3
"""
Params file reads: through rcl's child process, and a read made before (its kept answer).

Each cell is the median of ``--reads`` reads of one robot config, by ``load_params_file`` (the
read alone) or ``load_robot_config`` (the read and every check: what ``gym.make`` does before
its node exists). Each child read starts with no kept answer, so rcl reads the file again.

    python3 benchmarks/params_read.py --reads 20
"""

import argparse
from pathlib import Path
import statistics
import time
from typing import Callable

from rtgym_ros.robot.loader import load_robot_config
from rtgym_ros.robot.params_file import load_params_file
from rtgym_ros.ros import parameters
from rtgym_ros.ros.kept_answers import KeptAnswers

CONFIG = Path(__file__).resolve().parents[1] / 'config' / 'robots' / 'pendulum_sim.yaml'


def _median_ms(read: Callable[[], object], *, reads: int, forget: bool) -> float:
    """Median milliseconds of ``reads`` calls of ``read``; ``forget``: no kept answer."""
    times = []
    for _ in range(reads):
        if forget:
            parameters._kept = KeptAnswers()
        started = time.perf_counter()
        read()
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--reads', type=int, default=20, help='reads per cell (20)')
    parser.add_argument('--config', type=Path, default=CONFIG, help='the robot config read')
    args = parser.parse_args()
    calls = {'load_params_file': lambda: load_params_file(args.config, node_name='rtgym_env'),
             'load_robot_config': lambda: load_robot_config(args.config)}
    for call in calls.values():
        call()  # this process's imports and the first answer kept
    print(f'{args.config.name}, medians of {args.reads} reads (ms)')
    print('| call | rcl child | kept answer |')
    print('|---|---:|---:|')
    for name, call in calls.items():
        child = _median_ms(call, reads=args.reads, forget=True)
        kept = _median_ms(call, reads=args.reads, forget=False)
        print(f'| `{name}` | {child:.1f} | {kept:.1f} |')


if __name__ == '__main__':
    main()
