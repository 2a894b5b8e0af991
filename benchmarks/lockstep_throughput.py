#!/usr/bin/env python3
"""
Lockstep throughput: env steps per wall second through topics, beside the same model in-process.

Rows, run in one invocation, repetitions interleaved (medians are reported):

- ``sim_robot lockstep``: ``rtgym_ros/ros-v1`` on ``config/robots/pendulum_sim.yaml`` with
  ``stepping: lockstep`` against a ``sim_robot`` process (``stepping:=lockstep``, physics at
  1 kHz), each in a process of its own, over DDS. A uniformly random policy; the config's
  episodes of 500 steps, resets included in the wall time.
- ``Pendulum in-process``: ``rtgym_ros.sim.Pendulum`` stepped directly at its physics rate for
  the same sim time per env step (20 steps of 1 ms), its state read as the observation.
- ``sim_robot Physics in-process``: the node's ``Physics`` (the same model, the command
  watchdog, JointState messages built at the sensor rate and at each target, never sent).
- ``Gymnasium Pendulum-v1 in-process``: for scale; one step is 0.05 s of its own sim time.
- ``mujoco_sim`` rows (InvertedPendulum-v5, HalfCheetah-v5, the same way) once
  ``rtgym_ros.nodes.mujoco_sim`` and their configs are there; skipped, with the reason, if not.

``--sample-per-step`` has each ROS row's simulator sample at the env's step rate
(``sensor_rate:=1/T``): one JointState per step, the one at its target. The configs sample at
the physics rate (``mujoco_sim``) or at 100 Hz (``sim_robot``), as a real-time env wants;
in lockstep each sample on the way to a target crosses DDS and wakes the env's io thread.

``--trace`` adds one instrumented run of ``sim_robot lockstep`` and prints where the wall time
of a step goes (timestamps at each hand-over, matched across the two processes by the step's
target time on the shared monotonic clock) and the CPU time of each thread per step.

    python3 benchmarks/lockstep_throughput.py --markdown
    python3 benchmarks/lockstep_throughput.py --repeat 5 --trace --json results.json
    python3 benchmarks/lockstep_throughput.py --rows 'mujoco_sim half_cheetah lockstep' \
        --sample-per-step --markdown
"""

import argparse
import atexit
import bisect
import importlib
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from typing import Any, Callable

import numpy as np
import yaml
from bench_support import bench_environment, Child, process_cpu  # noqa: I100

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCKSTEP = {'use_sim_time': True, 'stepping': 'lockstep', 'step': {'topic': 'step_until'}}
ROS_STEPS = 3000
INPROCESS_STEPS = 20000
WARMUP_STEPS = 100
START_TIMEOUT = 60.0

# What each row runs. A ROS row: the simulator's command line and the robot config; an
# in-process row: a function of (steps, seed) that returns the per-step wall times.
ROS_ROWS = {
    'sim_robot lockstep': {
        'module': 'rtgym_ros.nodes.sim_robot', 'params': 'config/sim_robot/pendulum.yaml',
        'sim_args': ['stepping:=lockstep', 'reset_time:=true'],
        'robot': 'config/robots/pendulum_sim.yaml'},
    'mujoco_sim inverted_pendulum lockstep': {
        'module': 'rtgym_ros.nodes.mujoco_sim',
        'params': 'config/mujoco_sim/inverted_pendulum.yaml',
        'sim_args': ['stepping:=lockstep'],
        'robot': 'config/robots/mujoco_inverted_pendulum.yaml'},
    'mujoco_sim half_cheetah lockstep': {
        'module': 'rtgym_ros.nodes.mujoco_sim', 'params': 'config/mujoco_sim/half_cheetah.yaml',
        'sim_args': ['stepping:=lockstep'],
        'robot': 'config/robots/mujoco_half_cheetah.yaml'},
}


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float('nan')


# -- in-process rows -----------------------------------------------------------------------------

def run_pendulum(steps: int, seed: int) -> dict:
    """Step ``rtgym_ros.sim.Pendulum`` 20 x 1 ms per env step; read its state each step."""
    from rtgym_ros.sim import Pendulum
    model = Pendulum(max_torque=2.0)
    rng = np.random.default_rng(seed)
    model.reset(rng, state=[3.0, 0.0])
    actions = rng.uniform(-2.0, 2.0, (steps, 1))
    times = np.empty(steps)
    for k in range(steps):
        start = time.perf_counter()
        for _ in range(20):
            model.step(0.001, actions[k])
        np.concatenate((model.position(), model.velocity())).astype(np.float32)
        times[k] = time.perf_counter() - start
    return {'step_times': times.tolist(), 'wall_s': float(times.sum()), 'time_step_s': 0.02}


def run_physics(steps: int, seed: int) -> dict:
    """Step sim_robot's ``Physics`` as its lockstep loop does, messages built but not sent."""
    from rtgym_ros.nodes.sim_robot import faults
    from rtgym_ros.nodes.sim_robot.node import Physics
    from rtgym_ros.sim import Pendulum
    model = Pendulum(max_torque=2.0)
    rng = np.random.default_rng(seed)
    model.reset(rng, state=[3.0, 0.0])
    injector = faults.FaultInjector(sensor_seed=np.random.SeedSequence(1),
                                    delay_seed=np.random.SeedSequence(2))
    injector.configure(**dict.fromkeys(faults.OPTIONS, 0.0))
    physics = Physics(model, injector, physics_rate=1000.0, sensor_rate=100.0, joint_pub=None)
    physics.timeout_ns = 500_000_000
    actions = rng.uniform(-2.0, 2.0, (steps, 1))
    times = np.empty(steps)
    for k in range(steps):
        start = time.perf_counter()
        out: list = []
        with physics.lock:
            physics.command(actions[k], physics.t)  # in lockstep a command arrives at t
            target = physics.t + 20_000_000
            while physics.t < target:
                physics.step(out)
            physics.sample_now(out)
        times[k] = time.perf_counter() - start
    return {'step_times': times.tolist(), 'wall_s': float(times.sum()), 'time_step_s': 0.02}


def _gymnasium_row(env_id: str) -> Callable[[int, int], dict]:
    def run(steps: int, seed: int) -> dict:
        import gymnasium
        env = gymnasium.make(env_id)
        env.action_space.seed(seed)
        env.reset(seed=seed)
        actions = [env.action_space.sample() for _ in range(steps)]
        times = np.empty(steps)
        wall_start = time.perf_counter()
        for k in range(steps):
            start = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(actions[k])
            times[k] = time.perf_counter() - start
            if terminated or truncated:
                env.reset()
        wall = time.perf_counter() - wall_start
        time_step = float(env.unwrapped.dt)
        env.close()
        return {'step_times': times.tolist(), 'wall_s': wall, 'time_step_s': time_step}
    return run


INPROCESS_ROWS: dict[str, tuple[Callable[[int, int], dict], str | None]] = {
    'Pendulum in-process': (run_pendulum, None),
    'sim_robot Physics in-process': (run_physics, None),
    'Gymnasium Pendulum-v1 in-process': (_gymnasium_row('Pendulum-v1'), None),
    'Gymnasium InvertedPendulum-v5 in-process': (_gymnasium_row('InvertedPendulum-v5'),
                                                 'mujoco'),
    'Gymnasium HalfCheetah-v5 in-process': (_gymnasium_row('HalfCheetah-v5'), 'mujoco'),
}


def skip_reason(name: str) -> str | None:
    """Say why a row cannot run on this machine and branch; None if it can."""
    if name in ROS_ROWS:
        row = ROS_ROWS[name]
        try:
            importlib.import_module(row['module'])
        except ImportError as error:
            return f'{row["module"]} does not import here ({error})'
        for key in ('params', 'robot'):
            if not os.path.exists(os.path.join(REPO, row[key])):
                return f'{row[key]} is missing'
        return None
    needs = INPROCESS_ROWS[name][1]
    if needs is not None and importlib.util.find_spec(needs) is None:
        return f'{needs} is not installed'
    return None


# -- the env process -----------------------------------------------------------------------------

def role_env(options: dict) -> int:
    """Step ros-v1 in lockstep: warm-up, then ``steps`` timed steps; print the result."""
    import gymnasium
    import rtgym_ros  # noqa: F401 - registers the env ids
    trace = _EnvTrace() if options.get('trace') else None
    row = ROS_ROWS[options['row']]
    env = gymnasium.make('rtgym_ros/ros-v1', robot_config=os.path.join(REPO, row['robot']),
                         namespace=options['namespace'], disable_env_checker=True,
                         reset_timeout=20.0, **LOCKSTEP)
    unwrapped = env.unwrapped
    sim_pid = options['sim_pid']
    steps, warmup = options['steps'], WARMUP_STEPS
    env.action_space.seed(options['seed'])
    actions = [env.action_space.sample() for _ in range(steps + warmup)]
    step_times = np.empty(steps)
    reset_times = []
    try:
        env.reset(seed=options['seed'])
        for k in range(warmup):
            _, _, terminated, truncated, _ = env.step(actions[k])
            if terminated or truncated:  # a task that ends (the inverted pendulum falls)
                env.reset()
        timeouts = unwrapped.timeouts
        threads_before = _thread_cpu(os.getpid()), _thread_cpu(sim_pid)
        cpu_start, sim_start = time.process_time(), process_cpu(sim_pid)
        wall_start = time.perf_counter()
        for k in range(steps):
            if trace:
                trace.step = k
                trace.record('step_called')
            start = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(actions[warmup + k])
            step_times[k] = time.perf_counter() - start
            if trace:
                trace.record('step_returned')
            if terminated or truncated:
                start = time.perf_counter()
                env.reset()
                reset_times.append(time.perf_counter() - start)
        wall = time.perf_counter() - wall_start
        cpu_end, sim_end = time.process_time(), process_cpu(sim_pid)
        threads_after = _thread_cpu(os.getpid()), _thread_cpu(sim_pid)
        result = {
            'step_times': step_times.tolist(), 'wall_s': wall,
            'time_step_s': unwrapped.time_step_duration, 'resets': reset_times,
            'timeouts': unwrapped.timeouts - timeouts, 'env_cpu_s': cpu_end - cpu_start,
            'sim_cpu_s': None if sim_start is None or sim_end is None else sim_end - sim_start,
            'env_threads': _thread_delta(threads_before[0], threads_after[0],
                                         _python_threads()),
            'sim_threads_raw': _thread_delta(threads_before[1], threads_after[1], {})}
        if trace:
            result['trace'] = trace.events
    finally:
        env.close()
    print('RESULT ' + json.dumps(result), flush=True)
    return 0


def _thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """CPU seconds of each thread of ``pid`` now, with the thread's name in /proc."""
    cpu = {}
    try:
        tids = os.listdir(f'/proc/{pid}/task')
    except OSError:
        return cpu
    for tid in tids:
        seconds = process_cpu(pid, int(tid))
        try:
            with open(f'/proc/{pid}/task/{tid}/comm') as stream:
                name = stream.read().strip()
        except OSError:
            continue
        if seconds is not None:
            cpu[int(tid)] = (name, seconds)
    return cpu


def _python_threads() -> dict[int, str]:
    return {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}


def _thread_delta(before: dict, after: dict, names: dict[int, str]) -> dict[str, float]:
    """CPU seconds per thread over the window, by Python name (else 'tid comm')."""
    delta = {}
    for tid, (comm, seconds) in after.items():
        name = names.get(tid, f'{tid} {comm}')
        delta[name] = seconds - before.get(tid, (comm, 0.0))[1]
    return delta


# -- tracing -------------------------------------------------------------------------------------

class _Recorder:
    """Timestamps (monotonic ns, the same clock in every process) of named events."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.step = -1

    def record(self, name: str, key: int | None = None) -> None:
        self.events.append((self.step, name, time.monotonic_ns(), key))


def _key(nanoseconds: int) -> int:
    """Match events of one target across processes: its time in µs."""
    return round(nanoseconds / 1000)


def _wrap(owner: Any, name: str, *, before: Callable[..., None] | None = None,
          after: Callable[..., None] | None = None) -> None:
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if before:
            before(*args, **kwargs)
        result = original(*args, **kwargs)
        if after:
            after(*args, **kwargs)
        return result

    setattr(owner, name, wrapper)


class _EnvTrace(_Recorder):
    """Wrap the env's hand-over points: action and step request sent, /clock, capture."""

    def __init__(self) -> None:
        super().__init__()
        from rtgym_ros.robot import interface, slots
        from rtgym_ros.ros import runtime
        ros_interface = interface.RosInterface
        # Before the publish: DDS may deliver the message before publish() returns.
        _wrap(ros_interface, 'send_control', before=lambda *_: self.record('action_sent'))
        _wrap(ros_interface, 'advance_to', before=lambda _, target: self.record(
            'until_sent', _key(round(target * 1e9))))
        _wrap(runtime._ClockSource, 'clock_callback', before=lambda _, msg: self.record(
            'clock_received', _key(msg.clock.sec * 10**9 + msg.clock.nanosec)))
        _wrap(slots.Slot, 'store', before=lambda _, msg: self.record(
            'state_received', _key(msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec)))
        _wrap(ros_interface, 'get_obs_rew_terminated_info',
              before=lambda *_: self.record('capture_start'),
              after=lambda *_: self.record('capture_end'))


def role_sim_trace(ros_args: list[str]) -> int:
    """Run sim_robot with timestamps at its hand-over points; write them on exit."""
    from rclpy.time import Time
    from rosgraph_msgs.msg import Clock
    from rtgym_ros.nodes import sim_robot
    from rtgym_ros.nodes.sim_robot import node, time_bases
    recorder = _Recorder()
    pending: list[int] = []
    threads: dict[int, str] = {}

    def until_received(_: Any, msg: Any) -> None:
        key = _key(Time.from_msg(msg.clock).nanoseconds)
        recorder.record('until_received', key)
        pending.append(key)
        threads.setdefault(threading.get_native_id(), threading.current_thread().name)

    def physics_step(*_: Any) -> None:
        if pending:
            threads.setdefault(threading.get_native_id(), threading.current_thread().name)
            recorder.record('physics_start', pending.pop())
            pending.clear()

    def clock_of(out: list) -> int | None:
        clocks = [msg for _, msg in out if isinstance(msg, Clock)]
        return _key(Time.from_msg(clocks[-1].clock).nanoseconds) if clocks else None

    def publishing(out: list) -> None:
        key = clock_of(out)
        if key is not None:
            recorder.record('physics_done', key)

    def published(out: list) -> None:
        key = clock_of(out)
        if key is not None:
            recorder.record('published', key)

    _wrap(time_bases.Lockstep, '_on_step_until', before=until_received)
    _wrap(node.Physics, 'step', before=physics_step)
    _wrap(time_bases, 'publish', before=publishing, after=published)
    _wrap(node.SimRobot, '_on_command',
          before=lambda *_: recorder.record('command_received', 0))

    def write() -> None:
        with open(os.environ['RTGYM_TRACE_OUT'], 'w') as stream:
            json.dump({'events': recorder.events, 'threads': {**threads, **_python_threads()}},
                      stream)

    atexit.register(write)
    return sim_robot.main(['sim_robot', *ros_args])


# Where one step's wall time goes, in order: (from, to, what); 'sim:' events are the sim's.
SEGMENTS = [
    ('until_sent', 'sim:until_received', 'step_until published, over DDS, sim callback'),
    ('sim:until_received', 'sim:physics_start', 'sim callback to physics start (sim)'),
    ('sim:physics_start', 'sim:physics_done', 'physics steps + JointState built (sim)'),
    ('sim:physics_done', 'sim:published', 'JointState + /clock published (sim)'),
    ('sim:published', 'clock_received', '/clock over DDS, into the env io thread'),
    ('clock_received', 'capture_start', '/clock to capture start (env executor wake-up)'),
    ('capture_start', 'capture_end', 'capture: wait for the state, read, reward (env)'),
    ('capture_end', 'action_sent', 'capture to the next action publish (env executor thread)'),
    ('action_sent', 'next_until_sent', 'action publish to the next step_until publish (env)'),
]
"""The segments of one lockstep cycle, from a step request to the next, in their order."""
USER_SEGMENTS = [
    ('action_sent', 'step_returned', 'action publish to step() returning (-> user thread)'),
    ('step_returned', 'step_called', "step() returned to step() called (the agent's loop)"),
]
"""The user's thread beside the cycle: released once the next action is out, then its loop."""


def _first_after(times: list[int], t: int) -> int | None:
    index = bisect.bisect_left(times, t)
    return times[index] if index < len(times) else None


def summarise_trace(env_events: list, sim_events: list) -> dict:
    """
    Median µs of each segment of a lockstep cycle: one step request to the next.

    The env's executor thread captures at a target, then starts the next time-step with the
    action ``step()`` offered (published, then the next request) and releases ``step()``:
    one cycle spans two calls of ``step()``. Events keyed by a target time (the sim's, and
    ``/clock`` and JointState on the env's io thread) belong to the request for that target:
    the first such event after it (a reset sets the time back to 0, so targets repeat from
    one episode to the next); each unkeyed event of the env, to the first of its kind after
    the event before it in the cycle.
    """
    keyed: dict[tuple[str, int], list[int]] = {}
    plain: dict[str, list[int]] = {}
    requests = []
    for step, name, t, key in env_events:
        if name == 'until_sent':
            if step >= 0:
                requests.append((t, key))
        elif key is None:
            plain.setdefault(name, []).append(t)
        else:
            keyed.setdefault((name, key), []).append(t)
    for _, name, t, key in sim_events:
        if key is not None:
            keyed.setdefault((f'sim:{name}', key), []).append(t)
    for times in (*keyed.values(), *plain.values()):
        times.sort()
    requests.sort()
    spans: dict[str, list[float]] = {what: [] for _, _, what in SEGMENTS + USER_SEGMENTS}
    cycles, state_after_clock, command_latency = [], [], []
    commands = keyed.get(('sim:command_received', 0), [])
    for (sent, key), (next_sent, _) in zip(requests, requests[1:]):
        stamp = {'until_sent': sent, 'next_until_sent': next_sent}
        for name in ('sim:until_received', 'sim:physics_start', 'sim:physics_done',
                     'sim:published', 'clock_received', 'state_received'):
            stamp[name] = _first_after(keyed.get((name, key), []), sent)
        previous = stamp['clock_received']
        for name in ('capture_start', 'capture_end', 'action_sent', 'step_returned',
                     'step_called'):
            stamp[name] = None if previous is None else _first_after(plain.get(name, []),
                                                                     previous)
            previous = stamp[name]
        if stamp['action_sent'] is not None and stamp['action_sent'] > next_sent:
            continue  # no action in this cycle (a capture within the step, or an episode end)
        for start, end, what in SEGMENTS + USER_SEGMENTS:
            if stamp[start] is not None and stamp[end] is not None:
                spans[what].append((stamp[end] - stamp[start]) / 1000.0)
        cycles.append((next_sent - sent) / 1000.0)
        if stamp['state_received'] is not None and stamp['clock_received'] is not None:
            state_after_clock.append((stamp['state_received'] - stamp['clock_received'])
                                     / 1000.0)
        if stamp['action_sent'] is not None:
            command = _first_after(commands, stamp['action_sent'])
            if command is not None:
                command_latency.append((command - stamp['action_sent']) / 1000.0)
    steps = [(returned - called) / 1000.0 for called, returned in _step_calls(env_events)]

    def percentiles(values: list[float]) -> dict:
        return {'p50': _percentile(values, 50), 'p90': _percentile(values, 90),
                'n': len(values)}
    return {'segments_us': {what: percentiles(v) for what, v in spans.items()},
            'cycle_us': percentiles(cycles), 'total_us': percentiles(steps),
            'state_after_clock_us': percentiles(state_after_clock),
            'command_latency_us': percentiles(command_latency)}


def _step_calls(env_events: list) -> list[tuple[int, int]]:
    """Return (called, returned) of each traced ``step()`` call (the user's thread)."""
    calls: dict[int, dict[str, int]] = {}
    for step, name, t, _ in env_events:
        if name in ('step_called', 'step_returned') and step >= 0:
            calls.setdefault(step, {})[name] = t
    return [(c['step_called'], c['step_returned']) for c in calls.values()
            if len(c) == 2]


# -- driver --------------------------------------------------------------------------------------

def _per_step_sampling(row: dict, wanted: bool) -> list[str]:
    """Return the simulator parameter that samples once per env step (its target), if wanted."""
    if not wanted:
        return []
    with open(os.path.join(REPO, row['robot'])) as stream:
        time_step = yaml.safe_load(stream)['/**']['ros__parameters']['time_step_duration']
    return [f'sensor_rate:={1.0 / time_step!r}']


def run_ros_row(name: str, args: argparse.Namespace, env: dict, seed: int, *,
                trace: bool = False) -> dict:
    """Start the simulator and an env process; step; return the env's result."""
    row = ROS_ROWS[name]
    namespace = f'/lockstep_bench_{os.getpid()}_{seed}{"_trace" if trace else ""}'
    ros_args = ['--ros-args', '--params-file', os.path.join(REPO, row['params']),
                '-r', f'__ns:={namespace}']
    for arg in row['sim_args'] + _per_step_sampling(row, args.sample_per_step):
        ros_args += ['-p', arg]
    sim_env = dict(env)
    trace_file = None
    if trace:
        trace_file = tempfile.NamedTemporaryFile(suffix='.json', delete=False).name
        sim_env['RTGYM_TRACE_OUT'] = trace_file
        command = [sys.executable, os.path.abspath(__file__), '--role', 'sim-trace', '--',
                   *ros_args]
    else:
        command = [sys.executable, '-m', row['module'], *ros_args]
    sim = Child(f'sim {name}', command, env=sim_env)
    env_child = None
    try:
        options = {'row': name, 'namespace': namespace, 'steps': args.steps, 'seed': seed,
                   'sim_pid': sim.proc.pid, 'trace': trace}
        env_child = Child(f'env {name}', [sys.executable, os.path.abspath(__file__), '--role',
                                          'env', '--options', json.dumps(options)], env=env)
        env_child.wait(START_TIMEOUT + args.steps / 50.0)
        lines = [line for line in env_child.stdout if line.startswith('RESULT ')]
        if not lines:
            raise RuntimeError(f'env exited {env_child.proc.returncode} without a result: '
                               + ' | '.join(env_child.stderr[-8:]))
        result = json.loads(lines[-1][len('RESULT '):])
    finally:
        if env_child is not None:
            env_child.stop()
        sim.stop()
    if trace_file:
        with open(trace_file) as stream:
            sim_trace = json.load(stream)
        os.unlink(trace_file)
        names = {int(tid): name for tid, name in sim_trace['threads'].items()}
        result['trace_summary'] = summarise_trace(result.pop('trace'), sim_trace['events'])
    else:
        names = {}
    raw = result.pop('sim_threads_raw')
    result['sim_threads'] = {names.get(int(key.split()[0]), key): value
                             for key, value in raw.items()}
    return result


def summarise(name: str, runs: list[dict], failed: list[str]) -> dict:
    """Medians over the repetitions of each figure of a row; the failed runs counted."""
    def median(values: list) -> float:
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else float('nan')

    if not runs:
        return {'row': name, 'runs': 0, 'failed': failed}
    steps_per_s = [len(r['step_times']) / r['wall_s'] for r in runs]
    time_step = runs[0]['time_step_s']
    summary = {
        'row': name, 'runs': len(runs), 'failed': failed, 'time_step_s': time_step,
        'steps_per_s': median(steps_per_s), 'steps_per_s_all': steps_per_s,
        'real_time_factor': median(steps_per_s) * time_step,
        'mean_step_ms': median([1e3 * float(np.mean(r['step_times'])) for r in runs]),
        'p99_step_ms': median([1e3 * _percentile(r['step_times'], 99) for r in runs]),
        'load_before': [r['load_before'] for r in runs]}
    if 'env_cpu_s' in runs[0]:
        count = [len(r['step_times']) for r in runs]
        summary.update(
            env_cpu_us=median([1e6 * r['env_cpu_s'] / n for r, n in zip(runs, count)]),
            sim_cpu_us=median([None if r['sim_cpu_s'] is None else 1e6 * r['sim_cpu_s'] / n
                               for r, n in zip(runs, count)]),
            timeouts=sum(r['timeouts'] for r in runs),
            reset_ms=median([1e3 * float(np.mean(r['resets'])) if r['resets'] else None
                             for r in runs]))
    return summary


def _table(header: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ['| ' + ' | '.join(header) + ' |',
                 '|---|' + '|'.join(['---:'] * (len(header) - 1)) + '|']
        return '\n'.join(lines + ['| ' + ' | '.join(row) + ' |' for row in rows])
    table = [header] + rows
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return '\n'.join('  '.join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in table)


def _fmt(value: Any, spec: str) -> str:
    return '–' if value is None or value != value else format(value, spec)


def format_rows(summaries: list[dict], markdown: bool) -> str:
    header = ['row', 'T (s)', 'steps/s', 'real-time factor', 'env CPU/step (µs)',
              'sim CPU/step (µs)', 'mean step (ms)', 'p99 step (ms)', 'reset (ms)',
              'time-outs', 'failed runs']
    rows = []
    for s in summaries:
        if not s['runs']:
            rows.append([s['row']] + ['–'] * 9 + [str(len(s['failed']))])
            continue
        rows.append([s['row'], f"{s['time_step_s']:g}", _fmt(s['steps_per_s'], '.0f'),
                     _fmt(s['real_time_factor'], '.1f'), _fmt(s.get('env_cpu_us'), '.0f'),
                     _fmt(s.get('sim_cpu_us'), '.0f'), _fmt(s['mean_step_ms'], '.3f'),
                     _fmt(s['p99_step_ms'], '.3f'), _fmt(s.get('reset_ms'), '.1f'),
                     str(s.get('timeouts', '–')), str(len(s['failed']))])
    return _table(header, rows, markdown)


def format_trace(result: dict, markdown: bool) -> str:
    trace = result['trace_summary']
    rows = [[what, _fmt(v['p50'], '.0f'), _fmt(v['p90'], '.0f')]
            for what, v in trace['segments_us'].items()]
    rows.append(['cycle: one step request to the next', _fmt(trace['cycle_us']['p50'], '.0f'),
                 _fmt(trace['cycle_us']['p90'], '.0f')])
    rows.append(['step() total, called to returned', _fmt(trace['total_us']['p50'], '.0f'),
                 _fmt(trace['total_us']['p90'], '.0f')])
    rows.append(['(JointState received after /clock, env io thread)',
                 _fmt(trace['state_after_clock_us']['p50'], '.0f'),
                 _fmt(trace['state_after_clock_us']['p90'], '.0f')])
    rows.append(['(action publish to command received in the sim)',
                 _fmt(trace['command_latency_us']['p50'], '.0f'),
                 _fmt(trace['command_latency_us']['p90'], '.0f')])
    steps = len(result['step_times'])
    threads = []
    for process in ('env', 'sim'):
        for name, seconds in sorted(result[f'{process}_threads'].items(),
                                    key=lambda item: -item[1]):
            if seconds * 1e6 / steps >= 5.0:
                threads.append([f'{process}: {name}', f'{seconds * 1e6 / steps:.0f}'])
    speed = len(result['step_times']) / result['wall_s']
    return '\n\n'.join([
        f'traced run (instrumented: {speed:.0f} steps/s)',
        _table(['segment of one lockstep cycle', 'p50 (µs)', 'p90 (µs)'], rows, markdown),
        _table(['thread', 'CPU per step (µs)'], threads, markdown)])


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--rows', nargs='+', choices=list(ROS_ROWS) + list(INPROCESS_ROWS),
                        default=list(ROS_ROWS) + list(INPROCESS_ROWS))
    parser.add_argument('--steps', type=int, default=ROS_STEPS,
                        help=f'timed env steps per ROS run ({ROS_STEPS})')
    parser.add_argument('--inprocess-steps', type=int, default=INPROCESS_STEPS)
    parser.add_argument('--repeat', type=int, default=3, help='runs of each row (medians)')
    parser.add_argument('--sample-per-step', action='store_true',
                        help='ROS rows: the simulator samples once per env step (sensor_rate '
                             '1/T) instead of at the rate of its config')
    parser.add_argument('--trace', action='store_true',
                        help='one more, instrumented sim_robot run: where a step goes')
    parser.add_argument('--json', help='write every figure there')
    parser.add_argument('--markdown', action='store_true')
    parser.add_argument('--role', choices=('env', 'sim-trace'), help=argparse.SUPPRESS)
    parser.add_argument('--options', help=argparse.SUPPRESS)
    parser.add_argument('ros_args', nargs='*', help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.role == 'env':
        return role_env(json.loads(args.options))
    if args.role == 'sim-trace':
        return role_sim_trace(args.ros_args)
    env = bench_environment()
    os.environ.update(env)  # the in-process rows import rtgym_ros from this checkout too
    rows = []
    for name in args.rows:
        reason = skip_reason(name)
        if reason:
            _progress(f'skipping {name}: {reason}')
        else:
            rows.append(name)
    if os.getloadavg()[0] > 0.5:
        _progress(f'warning: load average {os.getloadavg()[0]:.2f}: the figures will be noisy')
    runs: dict[str, list[dict]] = {name: [] for name in rows}
    failed: dict[str, list[str]] = {name: [] for name in rows}
    for repetition in range(args.repeat):
        for name in rows:
            load = os.getloadavg()[0]
            if name in ROS_ROWS:
                try:
                    result = run_ros_row(name, args, env, seed=repetition)
                except (RuntimeError, TimeoutError) as error:
                    failed[name].append(str(error))
                    _progress(f'[{repetition + 1}/{args.repeat}] {name}: failed: {error}')
                    continue
            else:
                result = INPROCESS_ROWS[name][0](args.inprocess_steps, repetition)
            result['load_before'] = load
            runs[name].append(result)
            speed = len(result['step_times']) / result['wall_s']
            _progress(f'[{repetition + 1}/{args.repeat}] {name}: {speed:.0f} steps/s '
                      f'(load {load:.2f})')
    summaries = [summarise(name, runs[name], failed[name]) for name in rows]
    if args.sample_per_step:
        for summary in summaries:
            if summary['row'] in ROS_ROWS:
                summary['row'] += ', one sample per step'
    print(format_rows(summaries, args.markdown))
    traced = None
    if args.trace:
        try:
            traced = run_ros_row('sim_robot lockstep', args, env, seed=args.repeat, trace=True)
        except (RuntimeError, TimeoutError) as error:
            _progress(f'the traced run failed: {error}')
        else:
            print()
            print(format_trace(traced, args.markdown))
    if args.json:
        with open(args.json, 'w') as stream:
            json.dump({'argv': sys.argv[1:], 'summaries': summaries, 'traced': traced,
                       'cpus': os.cpu_count(), 'python': sys.version}, stream, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
