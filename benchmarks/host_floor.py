#!/usr/bin/env python3
"""
The host's floor: how late a thread that only sleeps wakes, with no env, no ROS, no agent.

Both envs of ``step_timing.py`` sleep to each deadline; a wake-up the host delays makes a late
capture, or a late ``step()`` call, in either. This script sleeps one thread to a grid of
deadlines (``sleep(deadline - now)``, as the envs do) and reports how late it woke, the spacing
of its wake-ups as ``step_timing.py`` reports the captures', the stalls (a run of wake-ups
0.5 ms or more late counts once) and the period at which they recur. ``--parts spin`` reads
the clock in a loop that never sleeps: gaps there mean the host stopped the vCPU itself, not
only a sleeper's wake-up.

    python3 benchmarks/host_floor.py                            # 100 Hz and 1 kHz, 10 s each
    python3 benchmarks/host_floor.py --parts sleep spin --seconds 5
"""

import argparse
import json
import sys
import time

import numpy as np
# bench_support first: it puts this checkout's rtgym_ros on the path
from bench_support import rate_label, STALL  # noqa: I100
from comparison import binomial_cdf
from rtgym_ros.core.timing import capture_spacing_errors  # noqa: I100

SPIN_GAP = 200e-6
"""A gap between two clock reads of the spinning loop this long is the vCPU stopped."""
PERIOD_TOLERANCE = 0.01  # s: an interval within this of a multiple of a period recurs at it


def recurring_period(times: list[float] | np.ndarray, *, shortest: float = 0.05,
                     longest: float = 2.0, significance: float = 0.01
                     ) -> tuple[float, int, int] | None:
    """
    Return the period at which events recur: (period, intervals that fit it, intervals).

    Each interval between two consecutive events from ``shortest`` to ``longest`` s is a
    candidate. An interval fits a period when it is within :data:`PERIOD_TOLERANCE` of a whole
    multiple of it, which a random interval does with probability ``2 * tolerance / period``:
    the candidate whose fits are the least likely by chance wins, if even that chance, times
    the number of candidates tried, is below ``significance``. None: no such period.
    """
    intervals = np.diff(np.asarray(times, dtype=np.float64))
    candidates = sorted(v for v in intervals if shortest <= v <= longest)
    best, best_chance = None, significance / max(1, len(candidates))
    for period in candidates:
        multiples = np.round(intervals / period)
        fits = int(np.sum((multiples >= 1)
                          & (np.abs(intervals - multiples * period) <= PERIOD_TOLERANCE)))
        by_chance = min(1.0, 2.0 * PERIOD_TOLERANCE / period)
        chance = 1.0 - binomial_cdf(fits - 1, intervals.size, by_chance) if fits else 1.0
        if chance < best_chance:
            best, best_chance = (float(period), fits, int(intervals.size)), chance
    return best


def stall_starts(times: np.ndarray, late: np.ndarray) -> np.ndarray:
    """Return the times of the late wake-ups whose previous wake-up was not late: one per stall."""
    first = late & ~np.concatenate(([False], late[:-1]))
    return times[first]


def sleep_to_grid(rate: float, seconds: float) -> dict:
    """Sleep to ``rate`` deadlines a second for ``seconds``; return how late each wake-up was."""
    period = 1.0 / rate
    steps = int(round(seconds * rate))
    wakes = np.empty(steps)
    start = time.perf_counter() + period
    for index in range(steps):
        deadline = start + index * period
        remaining = deadline - time.perf_counter()
        if remaining > 0.0:
            time.sleep(remaining)
        wakes[index] = time.perf_counter()
    lateness = wakes - (start + np.arange(steps) * period)
    stalls = stall_starts(wakes - wakes[0], lateness >= STALL)
    spacing = capture_spacing_errors(wakes, period) * 1e6
    return {'part': 'sleep', 'rate_hz': rate, 'steps': steps,
            'late_us': {'p50': float(np.percentile(lateness, 50) * 1e6),
                        'p99': float(np.percentile(lateness, 99) * 1e6),
                        'max': float(lateness.max() * 1e6)},
            'spacing_us': {'p99': float(np.percentile(spacing, 99)),
                           'max': float(spacing.max())},
            'stalls': [round(float(t), 4) for t in stalls],
            'late_by_more_than_a_step': int(np.sum(lateness > period)),
            'period': recurring_period(stalls)}


def spin(seconds: float) -> dict:
    """Read the clock in a loop for ``seconds``; return the gaps of :data:`SPIN_GAP` or more."""
    gaps = []
    start = previous = time.perf_counter()
    end = start + seconds
    while previous < end:
        now = time.perf_counter()
        if now - previous >= SPIN_GAP:
            gaps.append((previous - start, now - previous))
        previous = now
    times = [t for t, _ in gaps]
    return {'part': 'spin', 'seconds': seconds, 'gaps': len(gaps),
            'max_gap_us': max((g * 1e6 for _, g in gaps), default=0.0),
            'stalls': [round(t, 4) for t in times], 'period': recurring_period(times)}


def _period_text(period: tuple[float, int, int] | None) -> str:
    if period is None:
        return '–'
    return f'{period[0]:.3f} s ({period[1]} of {period[2]} intervals)'


def format_markdown(results: list[dict]) -> str:
    """Return the results as a markdown table: one row per part and rate."""
    lines = ['| part | rate | wake-ups | late p50 / p99 / max (µs) | spacing error p99 / max '
             '(µs) | stalls (≥ 0.5 ms late; spin: gaps ≥ 0.2 ms) | late by more than a step '
             '| stalls recur every |',
             '|---|---|---:|---:|---:|---:|---:|---|']
    for r in results:
        if r['part'] == 'spin':
            lines.append(f"| spin | – | – | – | max gap {r['max_gap_us']:.0f} | {r['gaps']} | – "
                         f"| {_period_text(r['period'])} |")
            continue
        late, spacing = r['late_us'], r['spacing_us']
        lines.append(f"| sleep | {rate_label(r['rate_hz'])} | {r['steps']} "
                     f"| {late['p50']:.0f} / {late['p99']:.0f} / {late['max']:.0f} "
                     f"| {spacing['p99']:.0f} / {spacing['max']:.0f} "
                     f"| {len(r['stalls'])} | {r['late_by_more_than_a_step']} "
                     f"| {_period_text(r['period'])} |")
    return '\n'.join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0].strip())
    parser.add_argument('--parts', nargs='+', choices=('sleep', 'spin'), default=['sleep'])
    parser.add_argument('--rates', nargs='+', type=float, default=[100.0, 1000.0],
                        metavar='HZ', help='sleep: deadlines a second (default: 100 1000)')
    parser.add_argument('--seconds', type=float, default=10.0, help='per rate (default: 10)')
    parser.add_argument('--json', metavar='PATH', help='write every result to this file')
    args = parser.parse_args(argv)
    if any(round(args.seconds * rate) < 2 for rate in args.rates):
        parser.error(f'--seconds times each of --rates must give 2 wake-ups or more, got '
                     f'{args.seconds} s and {args.rates} Hz')
    results = []
    if 'sleep' in args.parts:
        results += [sleep_to_grid(rate, args.seconds) for rate in args.rates]
    if 'spin' in args.parts:
        results.append(spin(args.seconds))
    if args.json:
        with open(args.json, 'w') as stream:
            json.dump(results, stream, indent=1)
    print(format_markdown(results))
    return 0


if __name__ == '__main__':
    sys.exit(main())
