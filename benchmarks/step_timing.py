#!/usr/bin/env python3
"""
Step timing of rtgym_ros against rtgym 0.16, side by side, under the agent loads of timing_demo.

Each (env, rate, load) cell runs in a fresh subprocess (``--cell``), because rtgym_ros changes
``sys.setswitchinterval`` process-wide while an env lives; the figure is the error of the
spacing between observation captures against the nominal time-step. See ``README.md``.

    python3 benchmarks/step_timing.py --markdown
    python3 benchmarks/step_timing.py --envs rtgym_ros --gil-switch-interval none --markdown
    python3 benchmarks/step_timing.py --envs rtgym_ros --timer-slack none --markdown
    python3 benchmarks/step_timing.py --envs rtgym rtgym_node rtgym_ros --rates 100 --loads sleep
    python3 benchmarks/step_timing.py --loads numpy python --agent-work fixed --markdown
"""

import argparse
import gc
import json
import math
import os
import resource
import subprocess
import sys
import threading
import time
from typing import Callable
import warnings

import numpy as np
from bench_support import (is_dds_thread, join_bench_domain, machine_times,  # noqa: I100
                           rate_label, STALL, thread_costs)
from comparison import count_ratio_interval, median_interval, paired_ratios
from rtgym_ros.core.timing import capture_spacing_errors
from rtgym_ros.nodes.timing_demo import (clock_reading_interface, make_load, numpy_operands,
                                         PYTHON_CHUNK)

ENVS = ('rtgym', 'rtgym_node', 'rtgym_ros')
"""
``rtgym_node``: rtgym's env in a process that also holds a ROS 2 node, spun by rclpy's executor
in a thread of its own (a DDS participant and its threads, as an rtgym_ros env has): what a ROS 2
process costs rtgym. Not in the table by default.
"""
DEFAULT_ENVS = ('rtgym', 'rtgym_ros')
RTGYM_ENVS = ('rtgym', 'rtgym_node')
"""The envs that are rtgym's own env, with its config, interface and schedule."""
ENV_IDS = {'rtgym': 'real-time-gym-ts-v1', 'rtgym_node': 'real-time-gym-ts-v1',
           'rtgym_ros': 'rtgym_ros/real-time-gym-v1'}
LOADS = ('sleep', 'numpy', 'python', 'idle')  # timing_demo's agent loads
DEFAULT_LOADS = ('sleep', 'numpy', 'python')
"""The issue's three agents; ``idle`` (step() called again at once) is asked for by name."""
WORK_UNITS = {'sleep': '', 'numpy': 'matmul', 'python': 'iter', 'idle': ''}
AGENT_WORK = ('wall', 'fixed')
"""
``wall``: a busy agent works T/2 of wall time, and does what work it gets done in it (the
issue's agent). ``fixed``: it does the same count of work units every step, in both envs,
whatever time they take: the CPU per step then differs by the envs' own cost and what they
slow the agent's work down by, not by how much work the agent got done.
"""
CALIBRATION_RUNS = 51  # odd: the median is one of the runs
"""``--agent-work fixed``: the count is the median work of this many T/2 runs, no env."""
WARMUP_STEPS = 20
QUICK_DIVISOR = 5
TERMINATE_MARK = 'terminate called'
PACKAGE_DEFAULT = 'default'  # an rtgym_ros option left at the package's default
OPTIONS = {'gil_switch_interval': 'switch', 'timer_lead': 'lead', 'timer_slack': 'slack',
           'timer_last_stretch': 'stretch'}
"""rtgym_ros config keys settable from the command line, and their names in the env column."""


def default_steps(rate: float) -> int:
    """1000 steps at 100 Hz, 3000 at 1 kHz: about 10 s and 3 s of run."""
    return max(1000, int(round(3 * rate)))


# -- one cell, in its own process ------------------------------------------------------------

def _make_env(env_name: str, time_step: float, captures: list, sends: list, *,
              options: dict, noting: tuple[list, list]):
    import gymnasium

    if env_name in RTGYM_ENVS:
        import rtgym
        config = dict(rtgym.DEFAULT_CONFIG_DICT)
        config['interface'] = _noting_lateness(
            clock_reading_interface(rtgym.RealTimeGymInterface), *noting)
    elif env_name == 'rtgym_ros':
        import rtgym_ros
        config = dict(rtgym_ros.DEFAULT_CONFIG_DICT)
        config['interface'] = _noting_lateness(
            clock_reading_interface(rtgym_ros.RealTimeGymInterface), *noting)
        config['node_name'] = f'step_timing_{os.getpid()}'
        config.update(options)
    else:
        raise ValueError(f'env must be one of {ENVS}, got {env_name!r}')
    config.update(interface_kwargs={'captures': captures, 'sends': sends},
                  time_step_duration=time_step,
                  start_obs_capture=time_step, time_step_timeout_factor=1.0,
                  ep_max_length=10**9, act_buf_len=1, benchmark=False)
    return gymnasium.make(ENV_IDS[env_name], config=config)


STALL_US = STALL * 1e6
MAX_STALLS_LISTED = 100


def _stalls(times: np.ndarray, error_us: np.ndarray) -> list[list[float]]:
    """
    List the gaps off by :data:`STALL_US` or more: [s since the first capture, error in µs].

    In the JSON, to see when stalls come: stalls at one period in both envs are the host's.
    """
    late = np.flatnonzero(error_us >= STALL_US)[:MAX_STALLS_LISTED]
    return [[round(float(times[i + 1] - times[0]), 4), round(float(error_us[i]))] for i in late]


def _summary(captures: list, time_step: float) -> dict:
    times = np.asarray(captures[WARMUP_STEPS:], dtype=np.float64)
    spacing = np.diff(times)
    if spacing.size == 0:
        return {'p50_us': math.nan, 'p99_us': math.nan, 'max_us': math.nan,
                'mean_spacing_us': math.nan, 'samples': 0, 'stalls': []}
    error = capture_spacing_errors(times, time_step) * 1e6
    return {'p50_us': float(np.percentile(error, 50)), 'p99_us': float(np.percentile(error, 99)),
            'max_us': float(error.max()), 'mean_spacing_us': float(spacing.mean() * 1e6),
            'samples': int(spacing.size), 'stalls': _stalls(times, error)}


def _percentiles(values: np.ndarray) -> dict:
    if values.size == 0:
        return {'p50': math.nan, 'p99': math.nan, 'max': math.nan}
    values = values * 1e6
    return {'p50': float(np.percentile(values, 50)), 'p99': float(np.percentile(values, 99)),
            'max': float(values.max())}


def _delays(captures: list, sends: list, returns: list) -> dict:
    """
    Capture -> step() returns it, and step() returns -> its action is sent, in µs.

    Step ``i`` returns capture ``i`` and sends action ``i + 1`` (``reset()`` sent the first).
    """
    count = min(len(returns), len(captures), len(sends) - 1)
    if count <= WARMUP_STEPS:
        return {'obs_to_return_us': _percentiles(np.zeros(0)),
                'return_to_send_us': _percentiles(np.zeros(0))}
    steps = slice(WARMUP_STEPS, count)
    returned = np.asarray(returns[steps])
    return {
        'obs_to_return_us': _percentiles(returned - np.asarray(captures[steps])),
        'return_to_send_us': _percentiles(np.asarray(sends[1:count + 1][steps]) - returned),
    }


LATE_START_CAUSES = ('agent', 'capture', 'env')


def _late_starts(calls: list, captures: list, lateness: list, sends: list,
                 time_step: float) -> dict[str, int]:
    """
    Time-steps that started more than T after the previous one's end, by what made them late.

    Call ``i`` of ``step()`` gives the action that starts time-step ``i + 1`` (``sends[i+1]``);
    time-step ``i`` ended at its capture less that capture's lateness (the capture is at
    ``t_end``). Of the delay, the larger share names the cause: ``agent`` (``step()`` was
    called after that end), ``capture`` (the capture that ends the step was late), else
    ``env`` (both in time; the env's own hand-over or the executor's loop).
    """
    counts = dict.fromkeys(LATE_START_CAUSES, 0)
    count = min(len(calls), len(captures), len(lateness), len(sends) - 1)
    for index in range(WARMUP_STEPS, count):
        end = captures[index] - lateness[index]
        delay = sends[index + 1] - end
        if delay <= time_step:
            continue
        if calls[index] - end >= delay / 2:
            counts['agent'] += 1
        elif lateness[index] >= delay / 2:
            counts['capture'] += 1
        else:
            counts['env'] += 1
    return counts


def _process_costs(before: resource.struct_rusage, after: resource.struct_rusage,
                   steps: int) -> dict:
    """
    CPU and wake-ups of the whole process per step (env threads, agent, DDS threads).

    A wake-up is a voluntary context switch: a thread blocked (sleep, wait, lock) and was woken.
    The agent's own load is in both figures: one sleep per step for ``sleep``, its work for the
    busy loads.
    """
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {'cpu_per_step_us': cpu / steps * 1e6,
            'wakeups_per_step': (after.ru_nvcsw - before.ru_nvcsw) / steps,
            'preemptions_per_step': (after.ru_nivcsw - before.ru_nivcsw) / steps}


THREAD_GROUPS = ('user', 'env', 'dds')
"""The user's thread (``step()`` and the agent), the env's threads, the DDS threads."""


def _thread_costs() -> dict[str, tuple[int, int]]:
    """
    CPU nanoseconds and wake-ups so far of this process's threads, by group.

    DDS threads are Fast DDS's own (named ``dds.*``); every other thread but the user's belongs
    to the env (rtgym_ros's executor, io and watchdog threads; rtgym's background thread;
    rtgym_node's spinning thread).
    """
    user = threading.main_thread().native_id
    threads = thread_costs()
    if not threads:
        return {}
    totals = {group: [0, 0] for group in THREAD_GROUPS}
    for tid, (name, cpu_ns, wakeups) in threads.items():
        group = 'user' if tid == user else 'dds' if is_dds_thread(name) else 'env'
        totals[group][0] += cpu_ns
        totals[group][1] += wakeups
    return {group: (cpu, wakeups) for group, (cpu, wakeups) in totals.items()}


def _thread_split(before: dict, after: dict, steps: int) -> dict:
    """CPU (µs) and wake-ups per step of each thread group; threads that ended are missed."""
    if not before or not after:
        return {}
    return {group: {'cpu_per_step_us': (after[group][0] - before[group][0]) / steps / 1e3,
                    'wakeups_per_step': (after[group][1] - before[group][1]) / steps}
            for group in THREAD_GROUPS}


def _noting_lateness(interface_cls: type, lateness: list, probe: list) -> type:
    """Subclass ``interface_cls``: each capture first notes ``probe[0]()``, how late it is."""

    class NotingLateness(interface_cls):
        def get_obs_rew_terminated_info(self):
            lateness.append(probe[0]())
            return super().get_obs_rew_terminated_info()

    return NotingLateness


def _lateness_probe(env_name: str, env) -> Callable[[], float]:
    """
    Return a call that says how late the running capture is against the env's ``t_co``.

    Both envs sleep to ``t_co``, then capture: what the kernel and the threads add shows here.
    rtgym schedules on ``time.perf_counter``, rtgym_ros on the node's clock (``time.time`` on
    wall time).
    """
    base = env.unwrapped
    if env_name in RTGYM_ENVS:
        return lambda: time.perf_counter() - base._RealTimeEnvTS__t_co
    schedule = base._schedule
    return lambda: time.time() - schedule.t_co


def _spin_a_node() -> Callable[[], None]:
    """Start a ROS 2 node spun in a thread of its own (``rtgym_node``); return its stop."""
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    context = Context()
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node(f'step_timing_{os.getpid()}', context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    thread = threading.Thread(target=executor.spin, name='rtgym_node spin', daemon=True)
    thread.start()

    def stop() -> None:
        executor.shutdown()
        thread.join(5.0)
        node.destroy_node()
        context.try_shutdown()

    return stop


def fixed_load(name: str, count: int) -> Callable[[float], int]:
    """
    Return ``load(seconds)`` that does ``count`` units of ``name``'s work, whatever the time.

    The units are timing_demo's: a 64x64 matrix product, or a chunk of the pure-Python loop
    (``count`` rounded down to whole chunks). The seconds are ignored.
    """
    if name == 'numpy':
        a, b, out = numpy_operands()

        def matmuls(duration: float) -> int:
            for _ in range(count):
                np.matmul(a, b, out=out)
            return count

        return matmuls
    if name == 'python':
        chunks = count // PYTHON_CHUNK

        def loop(duration: float) -> int:
            for _ in range(chunks):
                total = 0
                for i in range(PYTHON_CHUNK):
                    total += i
            return chunks * PYTHON_CHUNK

        return loop
    busy = [load for load, unit in WORK_UNITS.items() if unit]
    raise ValueError(f'a fixed work count needs a busy load, one of {busy}, got {name!r}')


def calibrate(load_name: str, rate: float, runs: int = CALIBRATION_RUNS) -> int:
    """Return the median work ``load_name`` gets done in T/2 with no env: the fixed count."""
    load = make_load(load_name)
    load(0.5 / rate)  # warm-up
    return int(np.median([load(0.5 / rate) for _ in range(runs)]))


def run_cell(env_name: str, rate: float, load_name: str, steps: int, *, options: dict,
             work_count: int | None = None) -> dict:
    """
    Run one env for ``steps`` steps with the agent load between steps; return the figures.

    ``options``: rtgym_ros config keys of :data:`OPTIONS` given on the command line.
    ``work_count``: the agent does this much work per step (``--agent-work fixed``), not T/2
    of wall time.
    """
    join_bench_domain()
    time_step = 1.0 / rate
    load = make_load(load_name) if work_count is None else fixed_load(load_name, work_count)
    captures: list[float] = []
    sends: list[float] = []
    returns: list[float] = []
    calls: list[float] = []
    work: list[int] = []
    switch_before = sys.getswitchinterval()
    lateness: list[float] = []
    probe = [lambda: math.nan]
    stop_node = _spin_a_node() if env_name == 'rtgym_node' else None
    try:
        env = _make_env(env_name, time_step, captures, sends, options=options,
                        noting=(lateness, probe))
    except BaseException:
        if stop_node is not None:
            stop_node()
        raise
    probe[0] = _lateness_probe(env_name, env)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            start = time.perf_counter()
            env.reset()
            switch_during = sys.getswitchinterval()
            ros_config = getattr(env.unwrapped, 'config', None) if env_name == 'rtgym_ros' \
                else None
            caught_in_warmup = 0
            for index in range(steps):
                calls.append(time.perf_counter())
                env.step(np.zeros(1, dtype=np.float32))
                returns.append(time.perf_counter())
                agent_time = time_step / 2
                if index == WARMUP_STEPS - 1:
                    # Read in the agent's time, so that the next step() is called when it would
                    # be: beside DDS's threads the read takes about 0.5 ms (/proc, per thread),
                    # half a 1 kHz step. The idle agent has no time of its own: its next call
                    # comes that much late, within the elasticity of a 1 kHz step.
                    caught_in_warmup = len(caught)
                    threads_before = _thread_costs()
                    usage_before = resource.getrusage(resource.RUSAGE_SELF)
                    agent_time = max(0.0, agent_time - (time.perf_counter() - returns[-1]))
                    if work_count is not None:  # the read stands in for this step's work
                        time.sleep(agent_time)
                        work.append(0)
                        continue
                work.append(load(agent_time))
            usage_after = resource.getrusage(resource.RUSAGE_SELF)
            threads_after = _thread_costs()
            wall = time.perf_counter() - start
            # The last step() started one more time-step on a background thread: let it start
            # (and warn) inside this block, then wait for it to end.
            env.unwrapped.stop()
            time.sleep(min(time_step, 0.01))
    finally:
        env.close()
        if stop_node is not None:
            stop_node()
    del env
    gc.collect()
    messages = [str(w.message) for w in caught]
    timeouts = sum('timed out' in m for m in messages)
    timeouts_after_warmup = sum('timed out' in m for m in messages[caught_in_warmup:])
    others = sorted({m for m in messages if 'timed out' not in m})
    measured_work = work[WARMUP_STEPS:]
    measured_steps = max(1, steps - WARMUP_STEPS)
    return {
        'env': env_name, 'rate_hz': rate, 'time_step_s': time_step, 'load': load_name,
        'steps': steps, 'warmup': WARMUP_STEPS, **_summary(captures, time_step),
        'captures': len(captures), 'timeouts': timeouts,
        'timeouts_after_warmup': timeouts_after_warmup, 'other_warnings': others[:5],
        'wall_s': wall, 'nominal_s': steps * time_step,
        **_process_costs(usage_before, usage_after, measured_steps),
        'threads': _thread_split(threads_before, threads_after, measured_steps),
        **_delays(captures, sends, returns),
        'capture_late_us': _percentiles(np.asarray(lateness[WARMUP_STEPS:])),
        'late_starts': _late_starts(calls, captures, lateness, sends, time_step),
        'work_per_step': float(np.mean(measured_work)) if WORK_UNITS[load_name] else None,
        'work_unit': WORK_UNITS[load_name],
        'agent_work': 'wall' if work_count is None else 'fixed', 'work_count': work_count,
        'options': options if env_name == 'rtgym_ros' else {},
        **{key: getattr(ros_config, key, None) for key in OPTIONS},
        'switch_interval_before': switch_before, 'switch_interval_during': switch_during,
        'switch_interval_after': sys.getswitchinterval(),
    }


# -- driver -----------------------------------------------------------------------------------

def _switch_arg(value: str) -> float | None | str:
    if value.lower() == 'none':
        return None
    if value == PACKAGE_DEFAULT:
        return PACKAGE_DEFAULT
    number = float(value)
    if not number > 0.0:
        raise argparse.ArgumentTypeError(f"must be a positive float or 'none', got {value!r}")
    return number


def _lead_arg(value: str) -> float | str:
    if value == PACKAGE_DEFAULT:
        return PACKAGE_DEFAULT
    number = float(value)
    if not number >= 0.0:
        raise argparse.ArgumentTypeError(f'must be >= 0 s, got {value!r}')
    return number


def _flag(key: str) -> str:
    return '--' + key.replace('_', '-')


def _options(args: argparse.Namespace) -> dict:
    """Return the rtgym_ros options given on the command line (the rest: the package's)."""
    return {key: getattr(args, key) for key in OPTIONS
            if getattr(args, key) != PACKAGE_DEFAULT}


def _rate_arg(value: str) -> float:
    number = float(value)
    if not number > 0.0:
        raise argparse.ArgumentTypeError(f'rate must be > 0 Hz, got {value!r}')
    return number


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--envs', nargs='+', choices=ENVS, default=list(DEFAULT_ENVS),
                        help='default: rtgym rtgym_ros; rtgym_node: rtgym beside a ROS 2 node')
    parser.add_argument('--rates', nargs='+', type=_rate_arg, default=[100.0, 1000.0],
                        metavar='HZ', help='time-step rates in Hz (default: 100 1000)')
    parser.add_argument('--loads', nargs='+', choices=LOADS, default=list(DEFAULT_LOADS),
                        help='default: sleep numpy python; idle: step() called again at once')
    parser.add_argument('--steps', type=int, default=None,
                        help='steps per cell (default: 1000 at 100 Hz, 3000 at 1 kHz)')
    parser.add_argument('--quick', action='store_true',
                        help=f'divide the number of steps by {QUICK_DIVISOR}')
    parser.add_argument('--repeat', type=int, default=1, metavar='K',
                        help='run every cell K times (interleaved); the table shows medians')
    parser.add_argument('--json', metavar='PATH', help='write every result to this file')
    parser.add_argument('--markdown', action='store_true', help='print a markdown table')
    parser.add_argument('--gil-switch-interval', type=_switch_arg, default=PACKAGE_DEFAULT,
                        metavar='S|none', help="rtgym_ros's gil_switch_interval "
                        "(default: the package's; 'none' leaves the interpreter's)")
    parser.add_argument('--timer-lead', type=_lead_arg, default=PACKAGE_DEFAULT, metavar='S',
                        help="rtgym_ros's timer_lead (default: the package's)")
    parser.add_argument('--timer-last-stretch', type=_lead_arg, default=PACKAGE_DEFAULT,
                        metavar='S', help="rtgym_ros's timer_last_stretch (default: the "
                        "package's; 0 sleeps once per deadline)")
    parser.add_argument('--timer-slack', type=_switch_arg, default=PACKAGE_DEFAULT,
                        metavar='S|none', help="rtgym_ros's timer_slack (default: the "
                        "package's; 'none' leaves the kernel's)")
    parser.add_argument('--agent-work', choices=AGENT_WORK, default='wall',
                        help='wall (default): a busy agent works T/2 of wall time; fixed: the '
                        'same count of work every step, in both envs (the median of T/2 on '
                        'this host, measured before the runs)')
    parser.add_argument('--cell', metavar='ENV:RATE:LOAD', help=argparse.SUPPRESS)
    parser.add_argument('--work-count', type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument('--calibrate', metavar='RATE:LOAD', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f'--repeat must be >= 1, got {args.repeat}')
    if args.steps is not None and args.steps <= WARMUP_STEPS + 1:
        parser.error(f'--steps must be > {WARMUP_STEPS + 1} (the first {WARMUP_STEPS} are '
                     f'warm-up), got {args.steps}')
    return args


def _cell_steps(args: argparse.Namespace, rate: float) -> int:
    steps = args.steps if args.steps is not None else default_steps(rate)
    if args.quick:
        steps //= QUICK_DIVISOR
    return max(steps, WARMUP_STEPS + 2)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _child_env() -> dict[str, str]:
    """Return a cell's environment: DDS on the host, BLAS on one thread."""
    child_env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST')
    child_env.setdefault('OPENBLAS_NUM_THREADS', '1')
    child_env.setdefault('OMP_NUM_THREADS', '1')
    return child_env


def _work_counts(args: argparse.Namespace) -> dict[tuple[float, str], int]:
    """``--agent-work fixed``: each busy load's count per rate, measured in a cell's process."""
    if args.agent_work != 'fixed':
        return {}
    counts = {}
    for rate in args.rates:
        for load in args.loads:
            if not WORK_UNITS[load]:
                continue
            done = subprocess.run([sys.executable, os.path.abspath(__file__), '--calibrate',
                                   f'{rate}:{load}'], capture_output=True, text=True,
                                  env=_child_env(), timeout=120.0, check=True)
            counts[rate, load] = int(done.stdout.split()[-1])
            print(f'{rate_label(rate)} {load}: {counts[rate, load]} {WORK_UNITS[load]} per step',
                  file=sys.stderr)
    return counts


def _spawn_cell(args: argparse.Namespace, env_name: str, rate: float, load: str,
                work_count: int | None = None) -> dict:
    steps = _cell_steps(args, rate)
    command = [sys.executable, os.path.abspath(__file__), '--cell', f'{env_name}:{rate}:{load}',
               '--steps', str(steps),
               *(item for key in OPTIONS
                 for item in (_flag(key), str(getattr(args, key)).lower())),
               *(() if work_count is None else ('--work-count', str(work_count)))]
    child_env = _child_env()
    timeout = 60.0 + 3.0 * steps / rate
    cpu_before, own_before = machine_times(), _children_cpu()
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=child_env,
                              timeout=timeout)
    except subprocess.TimeoutExpired as error:
        stderr = error.stderr.decode(errors='replace') if error.stderr else ''
        return {'env': env_name, 'rate_hz': rate, 'load': load, 'steps': steps,
                'error': f'no result within {timeout:.0f} s', 'stderr_tail': stderr[-2000:]}
    lines = [line for line in done.stdout.splitlines() if line.startswith('{')]
    result = json.loads(lines[-1]) if lines else {
        'env': env_name, 'rate_hz': rate, 'load': load, 'steps': steps,
        'error': f'no JSON line on stdout (exit status {done.returncode})'}
    result['returncode'] = done.returncode
    cpu_after = machine_times()
    if cpu_before is not None and cpu_after is not None:
        # CPU the rest of the machine used meanwhile: the cell was not alone if this is large.
        own = _children_cpu() - own_before
        result['foreign_cpu_s'] = round(cpu_after[0] - cpu_before[0] - own, 3)
        result['steal_s'] = round(cpu_after[1] - cpu_before[1], 3)
    result['terminate_called'] = TERMINATE_MARK in done.stderr
    # rtgym_ros also logs every time-out through ROS; anything else on stderr is worth a look.
    unexpected = [line for line in done.stderr.splitlines()
                  if line.strip() and 'timed out' not in line]
    result['stderr_unexpected'] = unexpected[-20:]
    return result


def _cells(args: argparse.Namespace) -> list[tuple[str, float, str]]:
    """Every (env, rate, load), the env order flipped from one (rate, load) to the next."""
    cells = []
    index = 0
    for _ in range(args.repeat):
        for rate in args.rates:
            for load in args.loads:
                envs = args.envs if index % 2 == 0 else list(reversed(args.envs))
                cells += [(env_name, rate, load) for env_name in envs]
                index += 1
    return cells


def _env_label(result: dict) -> str:
    if result['env'] != 'rtgym_ros':
        return result['env']
    notes = [f"{OPTIONS[key]}={'none' if value is None else f'{value:g}'}"
             for key, value in result.get('options', {}).items()]
    return f"rtgym_ros ({', '.join(notes)})" if notes else 'rtgym_ros'


def _work_label(result: dict) -> str:
    if result.get('work_per_step') is None:
        return '–'
    value = result['work_per_step']
    text = f'{value / 1000:.1f}k' if value >= 10000 else f'{value:.0f}'
    return f"{text} {result['work_unit']}"


def _median(results: list[dict], key: str) -> float:
    return float(np.median([r[key] for r in results]))


def _median_range(counts: list[int]) -> str:
    """Format counts over the repeats: their median, and their range when there are several."""
    counts = sorted(counts)
    text = f'{np.median(counts):g}'
    return text if len(counts) == 1 else f'{text} ({counts[0]}–{counts[-1]})'


def _figures(runs: list[dict]) -> list[str]:
    """Format one cell's figures: medians over the repeats, and the time-outs' range."""
    failed = [r for r in runs if 'error' in r]
    if failed:
        return ['error'] * 8 + [failed[0]['error']]
    timeout_text = _median_range([r['timeouts'] for r in runs])
    work = None if runs[0]['work_per_step'] is None else _median(runs, 'work_per_step')
    late = [np.median([r['capture_late_us'][p] for r in runs]) for p in ('p50', 'p99')]
    return [f"{_median(runs, 'p50_us'):.0f}", f"{_median(runs, 'p99_us'):.0f}",
            f"{_median(runs, 'max_us'):.0f}", f'{late[0]:.0f} / {late[1]:.0f}', timeout_text,
            f"{_median(runs, 'cpu_per_step_us'):.0f}", f"{_median(runs, 'wakeups_per_step'):.1f}",
            _work_label({'work_per_step': work, 'work_unit': runs[0]['work_unit']}),
            f"{_median(runs, 'wall_s'):.2f} / {runs[0]['nominal_s']:.2f}"]


def _rows(results: list[dict],
          figures: Callable[[list[dict]], list[str]] = _figures) -> list[list[str]]:
    """One row per (rate, load, env): the cell's label, then ``figures`` of its runs."""
    groups: dict[tuple, list[dict]] = {}
    for result in results:
        key = (result['rate_hz'], LOADS.index(result['load']), ENVS.index(result['env']),
               _env_label(result))
        groups.setdefault(key, []).append(result)
    return [[rate_label(key[0]), groups[key][0]['load'], key[3], *figures(groups[key])]
            for key in sorted(groups)]


HEADER = ['rate', 'agent', 'env', 'p50 (µs)', 'p99 (µs)', 'max (µs)',
          'capture late p50 / p99 (µs)', 'time-outs', 'CPU/step (µs)', 'wake-ups/step',
          'agent work/step', 'wall / nominal (s)']


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ['| ' + ' | '.join(header) + ' |',
             '|' + '|'.join(['---'] * 3 + ['---:'] * (len(header) - 3)) + '|']
    return '\n'.join(lines + ['| ' + ' | '.join(row) + ' |' for row in rows])


def format_markdown(results: list[dict]) -> str:
    return _markdown_table(HEADER, _rows(results))


THREAD_HEADER = ['rate', 'agent', 'env', "user's thread: CPU (µs) / wake-ups",
                 "env's threads: CPU (µs) / wake-ups", 'DDS threads: CPU (µs) / wake-ups']
"""Where a step's CPU and wake-ups go: the user's thread runs ``step()`` and the agent."""


def _thread_figures(runs: list[dict]) -> list[str]:
    """Format one cell's CPU and wake-ups per step of each thread group (medians)."""
    cells = []
    for group in THREAD_GROUPS:
        cpu = np.median([r['threads'][group]['cpu_per_step_us'] for r in runs])
        wakeups = np.median([r['threads'][group]['wakeups_per_step'] for r in runs])
        cells.append(f'{cpu:.0f} / {wakeups:.1f}')
    return cells


def format_thread_markdown(results: list[dict]) -> str:
    """Return the per-thread split of CPU and wake-ups per step (medians) as a markdown table."""
    rows = _rows([r for r in results if r.get('threads')], _thread_figures)
    return _markdown_table(THREAD_HEADER, rows) if rows else ''


LATE_HEADER = ['rate', 'agent', 'env', 'late starts: step() called late', 'capture late',
               'both in time (the env)']
"""Time-steps started more than T after the previous end, by cause (``_late_starts``)."""


def _late_figures(runs: list[dict]) -> list[str]:
    """Format one cell's late starts by cause: median (range) over the repeats."""
    return [_median_range([r['late_starts'][cause] for r in runs])
            for cause in LATE_START_CAUSES]


def format_late_markdown(results: list[dict]) -> str:
    """Return the late starts by cause as a markdown table."""
    rows = _rows([r for r in results if r.get('late_starts')], _late_figures)
    return _markdown_table(LATE_HEADER, rows) if rows else ''


PAIRED_HEADER = ['rate', 'agent', 'against', 'CPU/step, rtgym_ros / it: median (each pair)',
                 'that median: 95 % interval', 'p99, rtgym_ros / it: median (each pair)',
                 'that median: 95 % interval', 'time-outs, all runs: rtgym_ros / it',
                 'their ratio: 95 % interval',
                 'agent work/step, rtgym_ros / it: median (each pair)']
"""
rtgym_ros against each of rtgym's envs, the k-th run of one with the k-th of the other.

The busy agents work T/2 of wall time whichever env: the CPU per step holds what each did in
it, so the agent work ratio says how much of a CPU ratio is the agent's own.
"""


def _ratio_text(ratios: list[float]) -> str:
    each = ', '.join(f'{r:.2f}' for r in ratios)
    return f'{np.nanmedian(ratios):.2f} ({each})' if len(ratios) > 1 else each


def _bound_text(bound: float) -> str:
    """Two decimals; three where two would print a bound other than 1 as 1.00."""
    text = f'{bound:.2f}'
    return f'{bound:.3f}' if text == '1.00' and bound != 1.0 else text


def _verdict(low: float, high: float, below: str) -> str:
    """Say whether an interval of a ratio holds 1 (chance), or lies below or above it."""
    return 'chance' if low <= 1.0 <= high else (below if high < 1.0 else 'more')


def _interval_text(ours: int, theirs: int) -> str:
    """Format the rate ratio's interval, and whether it holds 1 (the counts differ by chance)."""
    interval = count_ratio_interval(ours, theirs)
    if interval is None:
        return '–'
    low, high = interval
    high_text = '∞' if math.isinf(high) else _bound_text(high)
    return f"{_bound_text(low)}–{high_text} ({_verdict(low, high, 'fewer')})"


def _median_interval_text(ratios: list[float]) -> str:
    """Format the interval of the median ratio, or say how many pairs one needs."""
    interval = median_interval(ratios)
    if interval is None:
        return '– (6 pairs or more)'
    low, high = interval
    return f"{_bound_text(low)}–{_bound_text(high)} ({_verdict(low, high, 'less')})"


def paired_rows(results: list[dict]) -> list[list[str]]:
    """
    One row per (rate, load) and rtgym env: rtgym_ros's runs against that env's, pair by pair.

    ``results`` in run order: the k-th run of a cell is paired with the k-th of the other
    env's, its neighbour in time (:func:`_cells` alternates them); a pair with a failed run is
    left out. The median CPU and p99 ratios are given with their distribution-free
    intervals; time-outs are summed over the pairs (each run has the same steps) and their
    ratio given with its exact interval.
    """
    runs: dict[tuple, list[dict]] = {}
    for result in results:
        runs.setdefault((result['rate_hz'], result['load'], result['env']), []).append(result)
    rows = []
    ours_cells = sorted((key for key in runs if key[2] == 'rtgym_ros'),
                        key=lambda key: (key[0], LOADS.index(key[1])))
    for rate, load, _ in ours_cells:
        all_ours = runs[(rate, load, 'rtgym_ros')]
        for baseline in RTGYM_ENVS:
            pairs = [(a, b) for a, b in zip(all_ours, runs.get((rate, load, baseline), []))
                     if 'error' not in a and 'error' not in b]
            if not pairs:
                continue
            ours, theirs = zip(*pairs)
            cpu = paired_ratios([r['cpu_per_step_us'] for r in ours],
                                [r['cpu_per_step_us'] for r in theirs])
            p99 = paired_ratios([r['p99_us'] for r in ours], [r['p99_us'] for r in theirs])
            timeouts = [sum(r['timeouts'] for r in side) for side in (ours, theirs)]
            work = [[r.get('work_per_step') for r in side] for side in (ours, theirs)]
            work_text = ('–' if None in work[0] + work[1]
                         else _ratio_text(paired_ratios(*work)))
            rows.append([rate_label(rate), load, baseline, _ratio_text(cpu),
                         _median_interval_text(cpu), _ratio_text(p99),
                         _median_interval_text(p99), f'{timeouts[0]} / {timeouts[1]}',
                         _interval_text(*timeouts), work_text])
    return rows


def format_paired_markdown(results: list[dict]) -> str:
    """Return rtgym_ros against rtgym's envs, run by run, as a markdown table ('' if none)."""
    rows = paired_rows(results)
    return _markdown_table(PAIRED_HEADER, rows) if rows else ''


def format_text(results: list[dict]) -> str:
    rows = [HEADER] + _rows(results)
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    return '\n'.join('  '.join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in rows)


def _progress(index: int, total: int, result: dict) -> str:
    head = f"[{index}/{total}] {_env_label(result):<10} {rate_label(result['rate_hz']):>7} " \
           f"{result['load']:<6}"
    if 'error' in result:
        return f"{head} ERROR: {result['error']}"
    text = (f"{head} p50 {result['p50_us']:6.0f} µs  p99 {result['p99_us']:6.0f} µs  "
            f"max {result['max_us']:6.0f} µs  late {result['capture_late_us']['p50']:4.0f} µs  "
            f"time-outs {result['timeouts']:4d} "
            f"(env {result.get('late_starts', {}).get('env', 0):3d})  "
            f"cpu {result['cpu_per_step_us']:5.0f} µs  "
            f"wake-ups {result['wakeups_per_step']:4.1f}  "
            f"work {_work_label(result):>12}  wall {result['wall_s']:.2f} s")
    if result.get('foreign_cpu_s') is not None:
        text += f"  foreign cpu {result['foreign_cpu_s']:.2f} s"
    if result.get('returncode') or result.get('terminate_called'):
        text += f"  EXIT {result.get('returncode')} terminate={result.get('terminate_called')}"
    return text


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.cell:
        env_name, rate, load = args.cell.split(':')
        result = run_cell(env_name, float(rate), load, args.steps, options=_options(args),
                          work_count=args.work_count)
        print(json.dumps(result), flush=True)
        return 0
    if args.calibrate:
        rate, load = args.calibrate.split(':')
        print(calibrate(load, float(rate)), flush=True)
        return 0

    counts = _work_counts(args)
    cells = _cells(args)
    results = []
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    print(f'{len(cells)} cells, load average before: {load_before:.2f}', file=sys.stderr)
    if load_before > 0.5:
        print('warning: the machine is busy; timings will be noisy', file=sys.stderr)
    for index, (env_name, rate, load) in enumerate(cells, start=1):
        result = _spawn_cell(args, env_name, rate, load, counts.get((rate, load)))
        results.append(result)
        print(_progress(index, len(cells), result), file=sys.stderr, flush=True)
        for line in result.get('stderr_unexpected', []):
            print(f'    stderr: {line}', file=sys.stderr)
    total = time.perf_counter() - started
    print(f'total {total:.1f} s, load average after: {os.getloadavg()[0]:.2f}', file=sys.stderr)
    if args.json:
        meta = {'argv': sys.argv[1:], 'python': sys.version, 'cpus': os.cpu_count(),
                'total_s': total, 'load_average_before': load_before,
                'work_counts': {f'{rate}:{load}': count for (rate, load), count in counts.items()}}
        with open(args.json, 'w') as stream:
            json.dump({'meta': meta, 'results': results}, stream, indent=1)
    print(format_markdown(results) if args.markdown else format_text(results))
    split = format_thread_markdown(results)
    if split:
        print(f'\nPer step, by thread (medians):\n\n{split}')
    late = format_late_markdown(results)
    if late:
        print(f'\nLate starts (more than T after the previous end), by cause:\n\n{late}')
    paired = format_paired_markdown(results)
    if paired:
        print('\nrtgym_ros against rtgym, run by run (ratios of each pair of neighbouring runs, '
              'each median with its sign-test interval; time-outs summed, their rate ratio '
              f'with its exact interval: "chance" where an interval holds 1):\n\n{paired}')
    failed = [r for r in results
              if 'error' in r or r.get('returncode') or r.get('terminate_called')]
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
