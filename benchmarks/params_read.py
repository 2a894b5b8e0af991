#!/usr/bin/env python3
"""
Params file reads through rcl: in a fresh interpreter, and in a fork of the fork server.

Each cell is the median of ``--reads`` reads of one robot config, by ``load_params_file`` (the
read alone) or ``load_robot_config`` (the read and every check: what ``gym.make`` does before
its node exists). The two ways alternate read by read; the server starts before the first.

    python3 benchmarks/params_read.py --reads 20
"""

import argparse
from pathlib import Path
import statistics
import time

from rtgym_ros.robot.loader import load_robot_config
from rtgym_ros.robot.params_file import load_params_file
from rtgym_ros.ros import forked_reads

CONFIG = Path(__file__).resolve().parents[1] / 'config' / 'robots' / 'pendulum_sim.yaml'
WAYS = {'fresh interpreter': True, 'fork of the server': False}  # forked_reads._unavailable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--reads', type=int, default=20, help='reads per cell (20)')
    parser.add_argument('--config', type=Path, default=CONFIG, help='the robot config read')
    args = parser.parse_args()
    calls = {'load_params_file': lambda: load_params_file(args.config, node_name='rtgym_env'),
             'load_robot_config': lambda: load_robot_config(args.config)}
    for call in calls.values():
        call()  # this process's imports, and the server's start
    if forked_reads._server is None:
        raise SystemExit('the fork server did not start here: nothing to compare')
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.reads):
        for name, call in calls.items():
            for way, fresh in WAYS.items():
                forked_reads._unavailable = fresh  # the server stays up meanwhile
                started = time.perf_counter()
                call()
                times.setdefault((name, way), []).append(time.perf_counter() - started)
    forked_reads._unavailable = False
    print(f'{args.config.name}, medians of {args.reads} reads (ms)')
    print('| call | ' + ' | '.join(WAYS) + ' |')
    print('|---|' + '---:|' * len(WAYS))
    for name in calls:
        cells = ' | '.join(f'{1000 * statistics.median(times[name, way]):.1f}' for way in WAYS)
        print(f'| `{name}` | {cells} |')


if __name__ == '__main__':
    main()
