#!/usr/bin/env python3
"""
How many 50 Hz ros-v1 envs this machine runs with zero time-outs; and a soak of one env.

Scale: for each size N, N ``sim_robot`` pendulums and N env processes (each
``rtgym_ros/ros-v1`` on ``config/robots/pendulum_sim.yaml`` in its own namespace, zero policy) step
together for ``--duration`` seconds; the sweep stops once two consecutive sizes had time-outs.
Soak (``--soak MINUTES``): one env against one sim; the env's RSS every 10 s and the drift of
its captures from the nominal grid. See ``RESULTS.md``.

    python3 benchmarks/scale.py --markdown
    python3 benchmarks/scale.py --sizes 1 2 4 --duration 10
    python3 benchmarks/scale.py --soak 10 --markdown
"""

import argparse
import json
import math
import os
import resource
import select
import subprocess
import sys
import time
from typing import Any
import warnings

import numpy as np
from bench_support import bench_environment, Child, machine_busy  # noqa: I100
from rtgym_ros.core.timing import capture_spacing_errors
from rtgym_ros.nodes.launch_logic import describe_exit

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV_CONFIG = os.path.join(REPO, 'config', 'robots', 'pendulum_sim.yaml')
SIM_CONFIG = os.path.join(REPO, 'config', 'sim_robot', 'pendulum.yaml')
SIZES = (1, 2, 4, 6, 8, 10, 12)
DURATION = 15.0  # s of stepping per env
SOAK_MINUTES = 10.0
RSS_PERIOD = 10.0  # s between two RSS samples in the soak
WARMUP_STEPS = 20
RESET_TIMEOUT = 15.0  # s: many processes start at once, discovery takes longer than alone
BUSY_LOAD = 0.5
START_TIMEOUT = 60.0


# -- processes -----------------------------------------------------------------------------------


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- the env process -----------------------------------------------------------------------------

def _wait_for_go(timeout: float) -> bool:
    ready, _, _ = select.select([sys.stdin], [], [], timeout)
    return bool(ready) and sys.stdin.readline().strip() == 'go'


def role_env(options: dict) -> int:
    """Step ros-v1 with a zero policy for ``duration`` s after 'go'; write the captures."""
    import gymnasium
    import rtgym_ros  # noqa: F401 - registers the env ids
    overrides = {'namespace': options['namespace'], 'reset_timeout': RESET_TIMEOUT}
    if options.get('episode_steps'):
        overrides['ep_max_length'] = options['episode_steps']
    env = gymnasium.make('rtgym_ros/ros-v1', robot_config=ENV_CONFIG, **overrides)
    unwrapped = env.unwrapped
    time_step = unwrapped.time_step_duration
    action = np.zeros(unwrapped.action_space.shape, np.float32)
    # Written up front, so that the RSS the soak watches is the env's, not this recording's
    # (a list of Python floats grew by ~0.1 MiB/min at 50 Hz and read as a leak).
    capacity = int(options['duration'] / time_step * 1.2) + 1000
    captured = np.full(capacity, np.nan)
    episode_starts: list[int] = []
    warned = _WarningCounter()
    result: dict[str, Any] = {'namespace': options['namespace'], 'time_step_s': time_step}
    try:
        # Warm-up, so that discovery of the sim's services and topics is not in the window:
        # a short episode, then wait() (robot stopped, sim paused) until the driver says go.
        env.reset()
        for _ in range(WARMUP_STEPS):
            env.step(action)
        unwrapped.wait()
        print('ready', flush=True)
        if not _wait_for_go(options['go_timeout']):
            raise TimeoutError('no go from the driver')
        timeouts_before, stalls_before = unwrapped.timeouts, unwrapped.stalls
        with warnings.catch_warnings():
            warnings.simplefilter('always')
            warnings.showwarning = warned.show
            usage = resource.getrusage(resource.RUSAGE_SELF)
            cpu_start, wall_start = usage.ru_utime + usage.ru_stime, time.perf_counter()
            deadline = wall_start + options['duration']
            steps = 0
            while time.perf_counter() < deadline:
                env.reset()
                episode_starts.append(min(steps, capacity))
                while time.perf_counter() < deadline:
                    _, _, terminated, truncated, info = env.step(action)
                    if steps < capacity:
                        captured[steps] = info['capture_time']
                    steps += 1
                    if terminated or truncated:
                        break
            unwrapped.stop()
            usage = resource.getrusage(resource.RUSAGE_SELF)
            cpu_end, wall_end = usage.ru_utime + usage.ru_stime, time.perf_counter()
            print('done', flush=True)
            time.sleep(0.02)
        result.update(
            steps=steps, timeouts=int(unwrapped.timeouts - timeouts_before),
            stalls=int(unwrapped.stalls - stalls_before),
            cpu_s=cpu_end - cpu_start, wall_s=wall_end - wall_start,
            cpu_pct=100.0 * (cpu_end - cpu_start) / (wall_end - wall_start),
            max_rss_mib=usage.ru_maxrss / 1024.0,
            episodes=[captured[start:end].tolist() for start, end in
                      zip(episode_starts, episode_starts[1:] + [min(steps, capacity)])],
            other_warnings=sorted(warned.others)[:5])
    finally:
        env.close()
    with open(options['out'], 'w') as stream:
        json.dump(result, stream)
    return 0


class _WarningCounter:
    """Keeps the first few warnings other than time-outs; a list of every one would grow."""

    def __init__(self) -> None:
        self.others: set[str] = set()

    def show(self, message: Warning | str, *args: Any, **kwargs: Any) -> None:
        text = str(message)
        if 'timed out' not in text and len(self.others) < 5:
            self.others.add(text)


# -- figures -------------------------------------------------------------------------------------

def _stats_us(values: Any) -> dict:
    values = np.asarray(values, dtype=np.float64) * 1e6
    if values.size == 0:
        return {'p50': math.nan, 'p99': math.nan, 'max': math.nan, 'n': 0}
    return {'p50': float(np.percentile(values, 50)), 'p99': float(np.percentile(values, 99)),
            'max': float(values.max()), 'n': int(values.size)}


def spacing_errors(episodes: list[list[float]], time_step: float) -> np.ndarray:
    """|capture spacing - T| within each episode, the run's first WARMUP_STEPS left out."""
    errors = []
    skip = WARMUP_STEPS
    for captures in episodes:
        errors.append(capture_spacing_errors(captures, time_step, warmup=skip))
        skip = max(0, skip - len(captures))
    return np.concatenate(errors) if errors else np.zeros(0)


def drifts(episodes: list[list[float]], time_step: float) -> tuple[np.ndarray, np.ndarray]:
    """Capture k minus (capture 0 + k T), within each episode: all of them, and episode ends."""
    every, ends = [], []
    for captures in episodes:
        times = np.asarray(captures, dtype=np.float64)
        if times.size < 2:
            continue
        drift = times - (times[0] + time_step * np.arange(times.size))
        every.append(drift)
        ends.append(drift[-1])
    return (np.concatenate(every) if every else np.zeros(0)), np.asarray(ends)


def _fmt(stats: dict | None) -> str:
    if not stats or not stats.get('n'):
        return '–'
    return ' / '.join(f'{stats[k]:.0f}' for k in ('p50', 'p99', 'max'))


def _table(header: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ['| ' + ' | '.join(header) + ' |',
                 '|' + '|'.join(['---:'] * len(header)) + '|']
        return '\n'.join(lines + ['| ' + ' | '.join(row) + ' |' for row in rows])
    table = [header] + rows
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return '\n'.join('  '.join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in table)


# -- driver --------------------------------------------------------------------------------------

def _start_sims(prefix: str, count: int, env: dict, sims: list[Child]) -> None:
    """Start ``count`` sims into ``sims``: those started stay there for the caller to stop."""
    for index in range(count):
        namespace = f'/{prefix}_{index}'
        command = [sys.executable, '-m', 'rtgym_ros.nodes.sim_robot', '--ros-args',
                   '--params-file', SIM_CONFIG, '-r', f'__ns:={namespace}']
        sims.append(Child(f'sim {namespace}', command, env=env))
    for sim in sims:
        sim.wait_for('physics', START_TIMEOUT, stderr=True)


def _start_envs(prefix: str, count: int, env: dict, directory: str, envs: list[Child], *,
                duration: float, episode_steps: int | None = None) -> None:
    """Start ``count`` envs into ``envs``, as :func:`_start_sims`; each says 'ready'."""
    for index in range(count):
        options = {'namespace': f'/{prefix}_{index}', 'duration': duration,
                   'go_timeout': START_TIMEOUT + 10.0 * count, 'episode_steps': episode_steps,
                   'out': os.path.join(directory, f'{prefix}_{index}.json')}
        command = [sys.executable, os.path.abspath(__file__), '--role', 'env',
                   '--options', json.dumps(options)]
        child = Child(f"env {options['namespace']}", command, env=env)
        child.out = options['out']
        envs.append(child)
    for child in envs:
        child.wait_for('ready', START_TIMEOUT + 10.0 * count)


def _collect(envs: list[Child], timeout: float) -> list[dict]:
    results = []
    deadline = time.monotonic() + timeout
    for child in envs:
        try:
            child.proc.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.stop()
        try:
            with open(child.out) as stream:
                result = json.load(stream)
        except (OSError, ValueError):
            code = child.proc.poll()
            exited = 'still running' if code is None else describe_exit(code)
            result = {'namespace': child.name, 'error': f'no result ({exited})',
                      'stderr': child.stderr[-5:]}
        result['stderr_unexpected'] = child.unexpected_stderr()
        results.append(result)
    return results


def _cpu_pcts(children: list[Child], before: list[float | None], wall: float) -> list[float]:
    pcts = []
    for child, start in zip(children, before):
        end = child.cpu_seconds()
        if start is not None and end is not None and wall > 0:
            pcts.append(100.0 * (end - start) / wall)
    return pcts


def run_size(size: int, args: argparse.Namespace, env: dict, directory: str) -> dict:
    """N sims and N envs; the window is 'go' until the first env has finished stepping."""
    prefix = f's{size}'
    sims: list[Child] = []
    envs: list[Child] = []
    load_before = os.getloadavg()[0]
    try:
        _start_sims(prefix, size, env, sims)
        _start_envs(prefix, size, env, directory, envs, duration=args.duration)
        sim_cpu = [s.cpu_seconds() for s in sims]
        env_cpu = [e.cpu_seconds() for e in envs]
        busy, started = machine_busy(), time.perf_counter()
        for child in envs:
            child.send('go')
        envs[0].wait_for('done', args.duration + 60.0)
        wall = time.perf_counter() - started
        sim_pcts = _cpu_pcts(sims, sim_cpu, wall)
        env_proc_pcts = _cpu_pcts(envs, env_cpu, wall)
        busy_end = machine_busy()
        ours = sum(p * wall / 100.0 for p in sim_pcts + env_proc_pcts)
        foreign = None if busy is None or busy_end is None else busy_end - busy - ours
        results = _collect(envs, args.duration + 120.0)
    except (RuntimeError, TimeoutError) as error:
        for child in envs + sims:
            child.stop()
        return {'size': size, 'error': str(error), 'load_before': load_before}
    finally:
        for child in sims:
            child.stop()
    sim_errors = [line for sim in sims for line in sim.unexpected_stderr()]
    return summarise_size(size, results, sim_pcts=sim_pcts, wall=wall, foreign_cpu_s=foreign,
                          load_before=load_before, sim_stderr=sim_errors[-10:])


def summarise_size(size: int, results: list[dict], *, sim_pcts: list[float], wall: float,
                   foreign_cpu_s: float | None, load_before: float,
                   sim_stderr: list[str]) -> dict:
    ok = [r for r in results if 'error' not in r]
    per_env = []
    for r in ok:
        errors = spacing_errors(r['episodes'], r['time_step_s'])
        per_env.append({'namespace': r['namespace'], 'steps': r['steps'],
                        'timeouts': r['timeouts'], 'stalls': r['stalls'],
                        'spacing_error_us': _stats_us(errors), 'cpu_pct': r['cpu_pct'],
                        'max_rss_mib': r['max_rss_mib'], 'episodes': len(r['episodes']),
                        'other_warnings': r['other_warnings'],
                        'stderr_unexpected': r['stderr_unexpected']})
    return {
        'size': size, 'envs': per_env, 'failed': [r for r in results if 'error' in r],
        'timeouts': sum(e['timeouts'] for e in per_env),
        'worst_p99_us': max((e['spacing_error_us']['p99'] for e in per_env), default=math.nan),
        'worst_max_us': max((e['spacing_error_us']['max'] for e in per_env), default=math.nan),
        'min_steps': min((e['steps'] for e in per_env), default=0),
        'env_cpu_pct': [e['cpu_pct'] for e in per_env], 'sim_cpu_pct': sim_pcts,
        'window_s': wall, 'foreign_cpu_s': foreign_cpu_s, 'load_before': load_before,
        'sim_stderr': sim_stderr,
    }


def _mean_max(values: list[float]) -> str:
    if not values:
        return '–'
    return f'{np.mean(values):.1f} / {max(values):.1f}'


def format_scale(sizes: list[dict], markdown: bool) -> str:
    header = ['envs + sims', 'time-outs', 'worst capture spacing p99 (µs)',
              'worst max (µs)', 'steps (min per env)', 'env CPU % (mean / max)',
              'sim CPU % (mean / max)', 'total CPU (cores)', 'load average before',
              'failed']
    rows = []
    for s in sizes:
        if 'error' in s:
            rows.append([str(s['size']), 'error', s['error'][:60]] + ['–'] * 7)
            continue
        rows.append([str(s['size']), str(s['timeouts']), f"{s['worst_p99_us']:.0f}",
                     f"{s['worst_max_us']:.0f}", str(s['min_steps']),
                     _mean_max(s['env_cpu_pct']), _mean_max(s['sim_cpu_pct']),
                     f"{(sum(s['env_cpu_pct']) + sum(s['sim_cpu_pct'])) / 100.0:.2f}",
                     f"{s['load_before']:.2f}",
                     str(len(s['failed']))])
    return _table(header, rows, markdown)


def run_scale(args: argparse.Namespace, env: dict, directory: str) -> list[dict]:
    sizes = []
    with_timeouts = 0
    for size in args.sizes:
        _progress(f'[scale] {size} envs + {size} sims, {args.duration:g} s '
                  f'(load {os.getloadavg()[0]:.2f})')
        result = run_size(size, args, env, directory)
        sizes.append(result)
        if 'error' in result:
            _progress(f'[scale] {size}: ERROR {result["error"]}')
            broke = True
        else:
            foreign = result['foreign_cpu_s']
            _progress(f"[scale] {size}: time-outs {result['timeouts']}, worst p99 "
                      f"{result['worst_p99_us']:.0f} µs, env CPU "
                      f"{_mean_max(result['env_cpu_pct'])} %, sim CPU "
                      f"{_mean_max(result['sim_cpu_pct'])} %, foreign CPU "
                      f"{'?' if foreign is None else f'{foreign:.1f}'} s")
            broke = result['timeouts'] > 0 or bool(result['failed'])
        with_timeouts = with_timeouts + 1 if broke else 0
        if with_timeouts >= 2:
            _progress('[scale] time-outs at two consecutive sizes: stop')
            break
    return sizes


def run_soak(args: argparse.Namespace, env: dict, directory: str) -> dict:
    duration = args.soak * 60.0
    sims: list[Child] = []
    envs: list[Child] = []
    samples: list[tuple[float, float | None, float | None]] = []
    try:
        _start_sims('soak', 1, env, sims)
        _start_envs('soak', 1, env, directory, envs, duration=duration,
                    episode_steps=args.soak_episode_steps)
        child = envs[0]
        started = time.perf_counter()
        samples.append((0.0, child.rss_mib(), sims[0].rss_mib()))
        child.send('go')
        next_sample = started + RSS_PERIOD
        while child.proc.poll() is None and 'done' not in child.stdout:
            time.sleep(min(0.5, max(0.0, next_sample - time.perf_counter())))
            if time.perf_counter() >= next_sample and 'done' not in child.stdout:
                samples.append((time.perf_counter() - started, child.rss_mib(),
                                sims[0].rss_mib()))
                next_sample += RSS_PERIOD
                _progress(f'[soak] {samples[-1][0]:5.0f} s  env RSS {samples[-1][1]:.1f} MiB')
        result = _collect(envs, 120.0)[0]
    finally:
        for child in sims + envs:
            child.stop()
    return summarise_soak(result, samples, minutes=args.soak)


def summarise_soak(result: dict, samples: list, *, minutes: float) -> dict:
    if 'error' in result:
        return {'minutes': minutes, 'error': result['error'], 'rss_samples': samples}
    time_step = result['time_step_s']
    every, ends = drifts(result['episodes'], time_step)
    points = [(t, rss) for t, rss, _ in samples if rss is not None and t > 0]
    slope = math.nan
    if len(points) >= 2:
        t, rss = np.asarray(points).T
        slope = float(np.polyfit(t / 60.0, rss, 1)[0])
    return {
        'minutes': minutes, 'steps': result['steps'], 'episodes': len(result['episodes']),
        'timeouts': result['timeouts'], 'stalls': result['stalls'],
        'cpu_pct': result['cpu_pct'], 'rss_samples': samples, 'rss_slope_mib_per_min': slope,
        'rss_first_mib': points[0][1] if points else math.nan,
        'rss_last_mib': points[-1][1] if points else math.nan,
        'drift_abs_us': _stats_us(np.abs(every)), 'drift_end_us': (ends * 1e6).tolist(),
        'spacing_error_us': _stats_us(spacing_errors(result['episodes'], time_step)),
        'other_warnings': result['other_warnings'],
        'stderr_unexpected': result['stderr_unexpected'],
    }


def _end_drift(ends_us: list[float]) -> str:
    """Mean of the episode-end drifts, and the one farthest from zero (signed)."""
    if not ends_us:
        return '–'
    worst = max(ends_us, key=abs)
    return f'{np.mean(ends_us):+.0f} / {worst:+.0f}'


def format_soak(soak: dict, markdown: bool) -> str:
    header = ['minutes', 'steps', 'episodes', 'time-outs', 'env RSS first → last (MiB)',
              'RSS slope (MiB/min)', 'abs drift p50 / p99 / max (µs)',
              'drift at episode end, mean / worst (µs)', 'capture spacing error (µs)',
              'env CPU (%)']
    if 'error' in soak:
        return _table(header, [[f"{soak['minutes']:g}", 'error', soak['error']] + ['–'] * 7],
                      markdown)
    row = [f"{soak['minutes']:g}", str(soak['steps']), str(soak['episodes']),
           str(soak['timeouts']), f"{soak['rss_first_mib']:.1f} → {soak['rss_last_mib']:.1f}",
           f"{soak['rss_slope_mib_per_min']:+.2f}", _fmt(soak['drift_abs_us']),
           _end_drift(soak['drift_end_us']), _fmt(soak['spacing_error_us']),
           f"{soak['cpu_pct']:.1f}"]
    return _table(header, [row], markdown)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--sizes', nargs='+', type=int, default=list(SIZES), metavar='N',
                        help='numbers of env + sim pairs (default: 1 2 4 6 8 10 12)')
    parser.add_argument('--duration', type=float, default=DURATION, metavar='S',
                        help=f'seconds of stepping per size (default: {DURATION:g})')
    parser.add_argument('--soak', type=float, nargs='?', const=SOAK_MINUTES, metavar='MINUTES',
                        help=f'soak one env instead (default {SOAK_MINUTES:g} minutes)')
    parser.add_argument('--soak-episode-steps', type=int, metavar='STEPS',
                        help="episode length in the soak (default: the config's)")
    parser.add_argument('--json', metavar='PATH', help='write every result to this file')
    parser.add_argument('--markdown', action='store_true', help='print a markdown table')
    parser.add_argument('--role', choices=('env',), help=argparse.SUPPRESS)
    parser.add_argument('--options', default='{}', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.sizes):
        parser.error(f'--sizes must be >= 1, got {args.sizes}')
    if args.soak is not None and not args.soak > 0:
        parser.error(f'--soak must be > 0 minutes, got {args.soak}')
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.role == 'env':
        return role_env(json.loads(args.options))
    import tempfile
    env = bench_environment()
    load_before = os.getloadavg()[0]
    mode = f'soak {args.soak:g} min' if args.soak else f"sizes {' '.join(map(str, args.sizes))}"
    _progress(f"{mode}, domain {env['ROS_DOMAIN_ID']}, load average before: {load_before:.2f}")
    if load_before > BUSY_LOAD:
        _progress('warning: the machine is busy; timings will be noisy')
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix='rtgym_ros_scale_') as directory:
        if args.soak:
            results: Any = run_soak(args, env, directory)
            text = format_soak(results, args.markdown)
            failed = 'error' in results
        else:
            results = run_scale(args, env, directory)
            text = format_scale(results, args.markdown)
            failed = any('error' in s for s in results)
    total = time.perf_counter() - started
    load_after = os.getloadavg()[0]
    _progress(f'total {total:.1f} s, load average after: {load_after:.2f}')
    if args.json:
        meta = {'argv': sys.argv[1:], 'python': sys.version, 'cpus': os.cpu_count(),
                'total_s': total, 'load_average_before': load_before,
                'load_average_after': load_after}
        with open(args.json, 'w') as stream:
            json.dump({'meta': meta, 'results': results}, stream, indent=1)
    print(text)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
