#!/usr/bin/env python3
"""
ROS transport costs of ``rtgym_ros/ros-v1``: action latency, image capture, a 1 kHz stream.

Three measurements in one invocation, each as p50/p99/max (see ``RESULTS.md``):

- **action**: the env's published action, stamped with the node clock, as received by another
  process, against a plain rclpy publisher of the same message on the same QoS;
- **image**: capture cost (``get_obs_duration``) with and without a 640x480 rgb8 camera slot;
- **joints**: step timing with and without a 1 kHz JointState stream (7 joints) observed.

Every env and every publisher runs in a process of its own; the robot configs are written to a
temporary directory at run time.

    python3 benchmarks/ros_latency.py --markdown
    python3 benchmarks/ros_latency.py --quick --parts action
    python3 benchmarks/ros_latency.py --json results.json --markdown
"""

import argparse
import array
import gc
import json
import math
import os
import resource
import signal
import sys
import tempfile
import threading
import time
from typing import Any
import warnings

import numpy as np
from bench_support import bench_environment, Child, machine_busy  # noqa: I100
from rtgym_ros.core.timing import capture_spacing_errors

PARTS = ('action', 'image', 'joints')
WARMUP_STEPS = 20
QUICK_DIVISOR = 5
TOPIC_PREFIX = '/rtgym_bench'
ACTION_RATE = 50.0  # Hz, env and raw publisher alike
ACTION_STEPS = 1000
LATE_MARGIN = 0.002  # s: how long after the end of the time-step the 'late' agent calls step()
TICK_RATE = 10.0  # Hz of the small topic the action envs observe (an env needs one)
IMAGE_RATE = 30.0
IMAGE_SHAPE = (480, 640, 3)
IMAGE_ENV_RATE = 50.0
IMAGE_STEPS = 500
# camera on a reliable reader, camera on the default sensor_data (best-effort) reader, none
IMAGE_CELLS = ('with_image', 'with_image_best_effort', 'without_image')
JOINT_ENV_RATE = 100.0
JOINT_STEPS = 1000
JOINT_COUNT = 7
JOINT_RATES = (10.0, 1000.0)  # the 10 Hz stream is the 'without' baseline of the 1 kHz one
DESERIALISE_REPEATS = 200
CHILD_START_TIMEOUT = 30.0
BUSY_LOAD = 0.5


# -- processes ---------------------------------------------------------------------------------


class RoleChild(Child):
    """A role of this script in its own process."""

    def __init__(self, role: str, options: dict, *, env: dict[str, str]) -> None:
        super().__init__(role, [sys.executable, os.path.abspath(__file__), '--role', role,
                                '--options', json.dumps(options)], env=env)


class ForeignCpu:
    """CPU the rest of the machine used during a cell: busy time less this run's processes."""

    def __init__(self, helpers: list[Child]) -> None:
        self._helpers = helpers
        self._busy = machine_busy()
        self._children = self._reaped()
        self._helper_cpu = [h.cpu_seconds() or 0.0 for h in helpers]
        self._own = time.process_time()

    @staticmethod
    def _reaped() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def seconds(self) -> float | None:
        busy = machine_busy()
        if busy is None or self._busy is None:
            return None
        ours = (self._reaped() - self._children) + (time.process_time() - self._own)
        ours += sum((h.cpu_seconds() or before) - before
                    for h, before in zip(self._helpers, self._helper_cpu))
        return round(busy - self._busy - ours, 2)


# -- statistics ----------------------------------------------------------------------------------

def _stats_us(values: Any) -> dict:
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return {'p50': math.nan, 'p99': math.nan, 'max': math.nan, 'n': 0}
    values = values * 1e6
    return {'p50': float(np.percentile(values, 50)), 'p99': float(np.percentile(values, 99)),
            'max': float(values.max()), 'n': int(values.size)}


def _spacing_error(times: Any, time_step: float) -> dict:
    return _stats_us(capture_spacing_errors(times, time_step, warmup=WARMUP_STEPS))


def _fmt(stats: dict | None, digits: int = 0) -> str:
    if not stats or not stats.get('n'):
        return '–'
    return ' / '.join(f'{stats[k]:.{digits}f}' for k in ('p50', 'p99', 'max'))


# -- child roles: ROS plumbing ---------------------------------------------------------------

class _Ros:
    """A private context and one node (the launch_testing_ros pattern); spun on demand."""

    def __init__(self, name: str) -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.node import Node
        from rclpy.signals import SignalHandlerOptions
        self.context = Context()
        rclpy.init(context=self.context, domain_id=int(os.environ['ROS_DOMAIN_ID']),
                   signal_handler_options=SignalHandlerOptions.NO)
        self.node = Node(name, context=self.context, start_parameter_services=False)
        self._spinner = None

    def spin_in_thread(self) -> None:
        from rclpy.executors import SingleThreadedExecutor
        from rtgym_ros.ros.spin import SpinThread
        executor = SingleThreadedExecutor(context=self.context)
        executor.add_node(self.node)
        self._spinner = SpinThread(executor, context=self.context,
                                   name=f'{self.node.get_name()}_executor')

    def close(self) -> None:
        if self._spinner is not None:
            self._spinner.stop(timeout=5.0)
            self._spinner.executor.shutdown(timeout_sec=5.0)
        self.node.destroy_node()
        self.context.try_shutdown()


def _stop_event() -> threading.Event:
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def _action_qos():
    """Return the env's default command QoS (robot config preset 'reliable')."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
    return QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST,
                      reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


def _write_json(path: str, data: Any) -> None:
    with open(path, 'w') as stream:
        json.dump(data, stream)


def role_receiver(options: dict) -> int:
    """Subscribe to the action topics; timestamp each message first thing in the callback."""
    from geometry_msgs.msg import TwistStamped
    stop = _stop_event()
    ros = _Ros('latency_receiver')
    records: dict[str, list] = {topic: [] for topic in options['topics']}
    for topic, rows in records.items():
        def on_message(msg: TwistStamped, rows: list = rows) -> None:
            mono = time.perf_counter()
            wall_ns = time.time_ns()
            stamp = msg.header.stamp
            rows.append((msg.twist.linear.x, stamp.sec * 10**9 + stamp.nanosec, wall_ns, mono))
        ros.node.create_subscription(TwistStamped, topic, on_message, _action_qos())
    ros.spin_in_thread()
    print('ready', flush=True)
    stop.wait()
    ros.close()
    _write_json(options['out'], records)
    return 0


def role_raw(options: dict) -> int:
    """Publish stamped TwistStamped from a plain rclpy node's timer, at the env's rate."""
    from geometry_msgs.msg import TwistStamped
    stop = _stop_event()
    ros = _Ros('latency_raw')
    publisher = ros.node.create_publisher(TwistStamped, options['topic'], _action_qos())
    clock = ros.node.get_clock()
    deadline = time.monotonic() + 10.0
    while publisher.get_subscription_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the reverse match (reader side) settles too
    calls: list[float] = []
    done = threading.Event()
    count = options['count']

    def tick() -> None:
        if len(calls) >= count:
            done.set()
            return
        called = time.perf_counter()
        msg = TwistStamped()
        msg.header.stamp = clock.now().to_msg()
        msg.twist.linear.x = float(len(calls) + 1)
        publisher.publish(msg)
        calls.append(called)

    ros.node.create_timer(1.0 / options['rate'], tick)
    ros.spin_in_thread()
    while not done.wait(0.1) and not stop.is_set():
        pass
    ros.close()
    _write_json(options['out'], {'calls': calls})
    return 0


def role_stream(options: dict) -> int:
    """Publish at a fixed rate from a plain loop (no executor): ticker, camera or joints."""
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import Image, JointState
    from std_msgs.msg import Float64
    stop = _stop_event()
    ros = _Ros(f"bench_{options['kind']}")
    kind, clock = options['kind'], ros.node.get_clock()
    publishers = []
    if kind == 'ticker':
        publishers.append((ros.node.create_publisher(Float64, options['topic'],
                                                     QoSProfile(depth=10)), Float64()))
    elif kind == 'image':
        height, width, channels = IMAGE_SHAPE
        image = Image(height=height, width=width, encoding='rgb8', step=width * channels)
        image.data = array.array('B', bytes(range(256)) * (height * width * channels // 256))
        publishers.append((ros.node.create_publisher(Image, f'{TOPIC_PREFIX}/image',
                                                     QoSProfile(depth=10)), image))
        publishers.append((ros.node.create_publisher(Float64, f'{TOPIC_PREFIX}/level',
                                                     QoSProfile(depth=10)), Float64()))
    elif kind == 'joints':
        names = [f'j{i}' for i in range(JOINT_COUNT)]
        state = JointState(name=names, effort=[0.0] * JOINT_COUNT)
        publishers.append((ros.node.create_publisher(JointState, f'{TOPIC_PREFIX}/joint_states',
                                                     QoSProfile(depth=10)), state))
    else:
        raise ValueError(f'kind must be ticker, image or joints, got {kind!r}')
    print('ready', flush=True)
    period = 1.0 / options['rate']
    sent = 0
    lateness: list[float] = []
    started = time.perf_counter()
    next_time = started
    while not stop.is_set():
        now = time.perf_counter()
        if now < next_time:
            time.sleep(next_time - now)
            now = time.perf_counter()
        lateness.append(now - next_time)
        stamp = clock.now().to_msg()
        for publisher, msg in publishers:
            if kind == 'joints':
                msg.position = array.array('d', [sent * 1e-3 + i for i in range(JOINT_COUNT)])
                msg.velocity = array.array('d', [float(i) for i in range(JOINT_COUNT)])
            if hasattr(msg, 'header'):
                msg.header.stamp = stamp
            else:
                msg.data = float(sent)
            publisher.publish(msg)
        sent += 1
        next_time += period
        if now - next_time > 10 * period:  # far behind: skip, do not burst
            next_time = now + period
    elapsed = time.perf_counter() - started
    ros.close()
    _write_json(options['out'], {'sent': sent, 'elapsed_s': elapsed,
                                 'rate_hz': sent / elapsed if elapsed > 0 else math.nan,
                                 'lateness_us': _stats_us(lateness)})
    return 0


# -- child role: the env -------------------------------------------------------------------------

def _thread_clocks() -> dict[str, int]:
    """CPU-time clocks of the env's threads: 'rtgym_ros:<node>', '..._io', '..._frames'."""
    found = {}
    for thread in threading.enumerate():
        if thread.name.startswith('rtgym_ros:') and thread.ident is not None:
            suffix = thread.name.rsplit('_', 1)[-1]
            name = suffix if suffix in ('io', 'frames', 'watchdog') else 'executor'
            found[name] = time.pthread_getcpuclockid(thread.ident)
    return found


def _cpu_snapshot() -> dict:
    """Process CPU (getrusage) and each env thread's CPU (ns clocks, not /proc's ticks)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    snapshot = {'process': usage.ru_utime + usage.ru_stime, 'wall': time.perf_counter()}
    for name, clock in _thread_clocks().items():
        snapshot[name] = time.clock_gettime(clock)
    return snapshot


def _cpu_delta(before: dict, after: dict) -> dict:
    wall = after['wall'] - before['wall']
    out = {'wall_s': wall}
    for key in ('process', 'executor', 'io', 'frames'):
        if before.get(key) is not None and after.get(key) is not None:
            out[f'{key}_cpu_s'] = after[key] - before[key]
            out[f'{key}_cpu_pct'] = 100.0 * (after[key] - before[key]) / wall
    return out


def _slot_counts(env: Any) -> dict[str, int]:
    return {slot.name: slot.count for slot in env.unwrapped.interface.slots}


def _deserialise_cost() -> dict:
    """Time rclpy's receive conversion of one frame (CDR -> C -> Python, data copied)."""
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import Image
    height, width, channels = IMAGE_SHAPE
    image = Image(height=height, width=width, encoding='rgb8', step=width * channels)
    image.data = array.array('B', bytes(height * width * channels))
    raw = serialize_message(image)
    costs = []
    for _ in range(DESERIALISE_REPEATS):
        start = time.perf_counter()
        deserialize_message(raw, Image)
        costs.append(time.perf_counter() - start)
    return _stats_us(costs)


class GcPauses:
    """Garbage collections and how long each held the GIL (``gc.callbacks``), per generation."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float, float]] = []
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        now = time.perf_counter()
        if phase == 'start':
            self._started = now
        else:
            self.pauses.append((info['generation'], self._started, now - self._started))

    def close(self) -> None:
        gc.callbacks.remove(self._callback)

    def summary(self, since: float) -> dict:
        """Count and longest pause (ms) of each generation after ``since`` (perf_counter)."""
        out = {}
        for generation in (0, 1, 2):
            durations = [d for g, t, d in self.pauses if g == generation and t >= since]
            out[f'gen{generation}'] = {'count': len(durations),
                                       'max_ms': max(durations, default=0.0) * 1e3}
        return out


def role_env(options: dict) -> int:
    """Run ros-v1 on the given config with a trace benchmark; write what the driver needs."""
    import gymnasium
    import rtgym_ros  # noqa: F401 - registers the env ids
    time_step = options['time_step']
    steps = options['steps']
    mode = options['agent']
    env = gymnasium.make('rtgym_ros/ros-v1', robot_config=options['config'],
                         node_name=f'bench_env_{os.getpid()}', benchmark=True,
                         benchmark_type='trace',
                         disable_env_checker=not options.get('env_checker', True))
    unwrapped = env.unwrapped
    action_value = np.zeros(unwrapped.action_space.shape, np.float32)
    calls: list[float] = []
    result: dict[str, Any] = {'agent': mode, 'steps': steps, 'time_step_s': time_step}
    gc_pauses = GcPauses()
    try:
        time.sleep(1.0)  # discovery: the first published actions must find their readers
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            obs, info = env.reset()
            wall_next = time.time() + time_step + LATE_MARGIN
            for k in range(1, steps + 1):
                if k == WARMUP_STEPS + 1:
                    cpu_before, counts_before = _cpu_snapshot(), _slot_counts(env)
                if mode == 'late':  # the previous time-step is over when step() is called
                    delay = wall_next - time.time()
                    if delay > 0:
                        time.sleep(delay)
                if options.get('action_is_index'):
                    action_value[0] = k
                calls.append(time.perf_counter())
                obs, _, _, _, info = env.step(action_value)
                if mode == 'late':
                    wall_next = info['capture_time'] + time_step + LATE_MARGIN
                else:  # 'early': half a time-step of agent, then step() waits for t_end
                    time.sleep(time_step / 2)
                if WARMUP_STEPS < k <= 2 * WARMUP_STEPS and 'camera' in obs and \
                        options.get('check_camera_view', True):
                    _check_camera_view(result, env, obs['camera'])
            unwrapped.stop()
            cpu_after, counts_after = _cpu_snapshot(), _slot_counts(env)
            time.sleep(min(time_step, 0.01))
        trace = unwrapped.benchmarks()
        result['timeouts'] = int(unwrapped.timeouts)
        result['other_warnings'] = sorted({str(w.message) for w in caught
                                           if 'timed out' not in str(w.message)})[:5]
    finally:
        env.close()
        gc_pauses.close()
    clock = trace['clock']
    result['gc'] = gc_pauses.summary(cpu_before['wall'])
    result['gc_long'] = [p for p in gc_pauses.pauses if p[2] > 0.002]  # (gen, start, s)
    result['calls'] = calls
    result['clock'] = {name: np.asarray(values).tolist() for name, values in clock.items()}
    result['get_obs_us'] = _stats_us(trace['deltas']['get_obs_duration'][WARMUP_STEPS:])
    result['spacing_error_us'] = _spacing_error(clock['start_get_obs'], time_step)
    result['cpu'] = _cpu_delta(cpu_before, cpu_after)
    result['received'] = {name: counts_after[name] - counts_before[name]
                          for name in counts_after}
    if options.get('deserialise'):
        result['deserialise_us'] = _deserialise_cost()
    _write_json(options['out'], result)
    return 0


def _check_camera_view(result: dict, env: Any, image: np.ndarray) -> None:
    """
    Record whether the camera observation is a view over a message's data (no copy).

    The observation's base chain ends on the message's ``array.array`` when it is a view; and
    while the slot still holds the captured frame, the two share memory (the camera is slower
    than the env, so some of the steps checked see the same frame).
    """
    base = image
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    view = result.setdefault('camera_view', {
        'owndata': bool(image.flags.owndata), 'writeable': bool(image.flags.writeable),
        'base': type(base).__module__ + '.' + type(base).__qualname__,
        'shares_message_buffer': False, 'checked': 0})
    slot = next((s for s in env.unwrapped.interface.slots if s.name == 'camera'), None)
    message, _ = slot.snapshot() if slot is not None else (None, None)
    if message is not None:
        view['checked'] += 1
        view['shares_message_buffer'] |= bool(
            np.shares_memory(image, np.frombuffer(message.data, np.uint8)))


# -- robot configs -------------------------------------------------------------------------------

def _write_config(directory: str, name: str, parameters: dict) -> str:
    import yaml
    path = os.path.join(directory, f'{name}.yaml')
    with open(path, 'w') as stream:
        yaml.safe_dump({'/**': {'ros__parameters': parameters}}, stream, sort_keys=False)
    return path


def _base_parameters(rate: float, action: dict, observations: dict) -> dict:
    time_step = 1.0 / rate
    return {'time_step_duration': time_step, 'start_obs_capture': time_step,
            'time_step_timeout_factor': 1.0, 'act_buf_len': 1, 'ep_max_length': 10**9,
            'actions': {'names': ['cmd'], 'cmd': action},
            'observations': {'names': list(observations), **observations}}


def _action_config(directory: str, topic: str) -> str:
    action = {'topic': topic, 'type': 'geometry_msgs/msg/TwistStamped', 'fields': ['linear.x'],
              'low': [0.0], 'high': [1.0e6], 'default': [0.0], 'qos': 'reliable'}
    tick = {'topic': f'{TOPIC_PREFIX}/tick', 'type': 'std_msgs/msg/Float64', 'fields': ['data']}
    return _write_config(directory, topic.rsplit('/', 1)[-1],
                         _base_parameters(ACTION_RATE, action, {'tick': tick}))


def _trivial_action(topic: str) -> dict:
    return {'topic': topic, 'type': 'std_msgs/msg/Float64', 'fields': ['data'], 'low': [-1.0],
            'high': [1.0], 'default': [0.0]}


def _image_config(directory: str, label: str) -> str:
    """'reliable': the camera slot on a reliable reader; 'sensor_data': the package default."""
    observations = {}
    if label != 'without_image':
        observations['camera'] = {'topic': f'{TOPIC_PREFIX}/image',
                                  'type': 'sensor_msgs/msg/Image', 'shape': list(IMAGE_SHAPE),
                                  'encoding': 'rgb8'}
        if label == 'with_image':
            observations['camera']['qos'] = 'reliable'
    observations['level'] = {'topic': f'{TOPIC_PREFIX}/level', 'type': 'std_msgs/msg/Float64',
                             'fields': ['data']}
    return _write_config(directory, label, _base_parameters(
        IMAGE_ENV_RATE, _trivial_action(f'{TOPIC_PREFIX}/image_env_cmd'), observations))


def _joint_config(directory: str) -> str:
    joints = {'topic': f'{TOPIC_PREFIX}/joint_states', 'type': 'sensor_msgs/msg/JointState',
              'joint_names': [f'j{i}' for i in range(JOINT_COUNT)],
              'fields': ['position', 'velocity']}
    return _write_config(directory, 'joints', _base_parameters(
        JOINT_ENV_RATE, _trivial_action(f'{TOPIC_PREFIX}/joint_env_cmd'), {'joints': joints}))


# -- driver: the three parts ---------------------------------------------------------------------

def _steps(args: argparse.Namespace, steps: int) -> int:
    return max(steps // QUICK_DIVISOR if args.quick else steps, WARMUP_STEPS + 10)


def _run_env_cell(label: str, options: dict, *, env: dict, helpers: list[Child],
                  directory: str) -> dict:
    options = dict(options, out=os.path.join(directory, f'{label}.json'))
    foreign = ForeignCpu(helpers)
    child = RoleChild('env', options, env=env)
    timeout = 60.0 + 3.0 * options['steps'] * options['time_step']
    try:
        code = child.wait(timeout)
    except TimeoutError as error:
        return {'label': label, 'error': str(error), 'stderr': child.stderr[-10:]}
    if code != 0 or not os.path.exists(options['out']):
        return {'label': label, 'error': f'exit status {code}', 'stderr': child.stderr[-10:]}
    with open(options['out']) as stream:
        result = json.load(stream)
    result.update(label=label, foreign_cpu_s=foreign.seconds(),
                  stderr_unexpected=child.unexpected_stderr())
    return result


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _cell_note(result: dict) -> str:
    if 'error' in result:
        return f"ERROR {result['error']}"
    note = f"time-outs {result.get('timeouts', 0)}"
    if result.get('foreign_cpu_s') is not None:
        note += f"  foreign cpu {result['foreign_cpu_s']:.2f} s"
    return note


def part_action(args: argparse.Namespace, directory: str, env: dict) -> dict:
    """Raw rclpy publisher, then the env (step() late, then early), one receiver for all."""
    steps = _steps(args, ACTION_STEPS)
    topics = {'raw': f'{TOPIC_PREFIX}/raw_cmd', 'late': f'{TOPIC_PREFIX}/env_late_cmd',
              'early': f'{TOPIC_PREFIX}/env_early_cmd'}
    receiver_out = os.path.join(directory, 'receiver.json')
    receiver = RoleChild('receiver', {'topics': list(topics.values()), 'out': receiver_out},
                         env=env)
    ticker = RoleChild('stream', {'kind': 'ticker', 'rate': TICK_RATE,
                                  'topic': f'{TOPIC_PREFIX}/tick',
                                  'out': os.path.join(directory, 'ticker.json')}, env=env)
    cells: dict[str, dict] = {}
    try:
        receiver.wait_for('ready', CHILD_START_TIMEOUT)
        ticker.wait_for('ready', CHILD_START_TIMEOUT)
        raw_out = os.path.join(directory, 'raw.json')
        foreign = ForeignCpu([receiver, ticker])
        raw = RoleChild('raw', {'topic': topics['raw'], 'count': steps, 'rate': ACTION_RATE,
                                'out': raw_out}, env=env)
        raw.wait(60.0 + 3.0 * steps / ACTION_RATE)
        with open(raw_out) as stream:
            cells['raw'] = dict(json.load(stream), label='raw', foreign_cpu_s=foreign.seconds())
        _progress(f"[action] raw rclpy      {_cell_note(cells['raw'])}")
        for mode in ('late', 'early'):
            config = _action_config(directory, topics[mode])
            cells[mode] = _run_env_cell(
                f'env_{mode}', {'config': config, 'time_step': 1.0 / ACTION_RATE,
                                'steps': steps, 'agent': mode, 'action_is_index': True},
                env=env, helpers=[receiver, ticker], directory=directory)
            _progress(f'[action] env step() {mode:<5}  {_cell_note(cells[mode])}')
    finally:
        ticker.stop()
        receiver.stop()
    with open(receiver_out) as stream:
        received = json.load(stream)
    return _action_figures(cells, {mode: received.get(topic, [])
                                   for mode, topic in topics.items()})


def _action_figures(cells: dict, received: dict) -> dict:
    """Pair each receipt with its send by the index carried in twist.linear.x."""
    rows = {}
    for mode, cell in cells.items():
        if 'error' in cell:
            rows[mode] = {'error': cell['error'], 'stderr': cell.get('stderr', [])}
            continue
        by_index = {int(round(x)): (stamp_ns, wall_ns, mono)
                    for x, stamp_ns, wall_ns, mono in received[mode]}
        calls = cell['calls']
        count = len(calls)
        indices = [k for k in range(WARMUP_STEPS + 1, count + 1) if k in by_index]
        stamp_to_receipt = [(by_index[k][1] - by_index[k][0]) * 1e-9 for k in indices]
        row: dict[str, Any] = {'sent': count - WARMUP_STEPS, 'received': len(indices),
                               'stamp_to_receipt_us': _stats_us(stamp_to_receipt),
                               'foreign_cpu_s': cell.get('foreign_cpu_s')}
        if mode == 'raw':
            row['call'] = 'timer callback entered'
            row['call_to_receipt_us'] = _stats_us([by_index[k][2] - calls[k - 1]
                                                   for k in indices])
        else:
            clock = cell['clock']
            # Trace index 0 is reset(); index k is step k, whose action k is published.
            send = clock['start_send_control']
            if mode == 'late':
                row['call'] = 'step() entered, previous time-step over'
                reference = [calls[k - 1] for k in range(1, count + 1)]
            else:
                row['call'] = 'step() released at the end of the time-step'
                reference = clock['end_step_join'][1:count + 1]
            row['call_to_receipt_us'] = _stats_us([by_index[k][2] - reference[k - 1]
                                                   for k in indices])
            row['call_to_send_control_us'] = _stats_us(
                [send[k] - reference[k - 1] for k in range(WARMUP_STEPS + 1, count + 1)])
            row['send_control_us'] = _stats_us(
                np.subtract(clock['end_send_control'], send)[WARMUP_STEPS + 1:count + 1])
            row['timeouts'] = cell['timeouts']
            row['stderr_unexpected'] = cell.get('stderr_unexpected', [])
        rows[mode] = row
    ratios = {}
    if all('error' not in rows.get(m, {'error': 1}) for m in ('raw', 'late', 'early')):
        for mode in ('late', 'early'):
            for figure in ('stamp_to_receipt_us', 'call_to_receipt_us'):
                for q in ('p50', 'p99'):
                    ratios[f'{mode}/{figure}/{q}'] = rows[mode][figure][q] / rows['raw'][figure][q]
    return {'rows': rows, 'ratios': ratios}


def part_image(args: argparse.Namespace, directory: str, env: dict) -> dict:
    steps = _steps(args, IMAGE_STEPS)
    stream_out = os.path.join(directory, 'image_stream.json')
    stream = RoleChild('stream', {'kind': 'image', 'rate': IMAGE_RATE, 'out': stream_out}, env=env)
    cells = {}
    try:
        stream.wait_for('ready', CHILD_START_TIMEOUT)
        for label in IMAGE_CELLS:
            cells[label] = _run_env_cell(
                label, {'config': _image_config(directory, label),
                        'time_step': 1.0 / IMAGE_ENV_RATE, 'steps': steps, 'agent': 'early',
                        'deserialise': label == 'with_image'},
                env=env, helpers=[stream], directory=directory)
            _progress(f'[image]  {label:<22} {_cell_note(cells[label])}')
    finally:
        stream.stop()
    with open(stream_out) as handle:
        publisher = json.load(handle)
    return {'cells': cells, 'publisher': publisher}


def part_joints(args: argparse.Namespace, directory: str, env: dict) -> dict:
    steps = _steps(args, JOINT_STEPS)
    config = _joint_config(directory)
    cells = {}
    for rate in args.joint_rates:
        label = f'joints_{rate:g}hz'
        stream_out = os.path.join(directory, f'{label}_stream.json')
        stream = RoleChild('stream', {'kind': 'joints', 'rate': rate, 'out': stream_out}, env=env)
        try:
            stream.wait_for('ready', CHILD_START_TIMEOUT)
            time.sleep(0.5)
            cpu_before, wall_before = stream.cpu_seconds(), time.perf_counter()
            cell = _run_env_cell(label, {'config': config, 'time_step': 1.0 / JOINT_ENV_RATE,
                                         'steps': steps, 'agent': 'early'},
                                 env=env, helpers=[stream], directory=directory)
            cpu_after, wall_after = stream.cpu_seconds(), time.perf_counter()
            if cpu_before is not None and cpu_after is not None:
                cell['publisher_cpu_pct'] = 100.0 * (cpu_after - cpu_before) / (
                    wall_after - wall_before)
        finally:
            stream.stop()
        if os.path.exists(stream_out):
            with open(stream_out) as handle:
                cell['publisher'] = json.load(handle)
        cell['stream_rate_hz'] = rate
        cells[label] = cell
        _progress(f'[joints] {rate:g} Hz stream  {_cell_note(cell)}')
    return {'cells': cells}


# -- tables --------------------------------------------------------------------------------------

def _table(header: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ['| ' + ' | '.join(header) + ' |',
                 '|' + '|'.join(['---'] + ['---:'] * (len(header) - 1)) + '|']
        return '\n'.join(lines + ['| ' + ' | '.join(row) + ' |' for row in rows])
    table = [header] + rows
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return '\n'.join('  '.join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in table)


def _ratio(value: float | None) -> str:
    return '–' if value is None or not math.isfinite(value) else f'{value:.2f}×'


def format_action(part: dict, markdown: bool) -> str:
    names = {'raw': 'raw rclpy publisher (timer, 50 Hz)',
             'late': 'ros-v1, step() after the time-step ended',
             'early': 'ros-v1, step() during the time-step'}
    header = ['publisher', '"call" is', 'stamp → receipt (µs)', 'call → receipt (µs)',
              'call → send_control (µs)', 'send_control (µs)', 'received / sent', 'time-outs']
    rows = []
    for mode in ('raw', 'late', 'early'):
        row = part['rows'].get(mode)
        if row is None:
            continue
        if 'error' in row:
            rows.append([names[mode], 'error', row['error']] + ['–'] * 5)
            continue
        rows.append([names[mode], row['call'], _fmt(row['stamp_to_receipt_us']),
                     _fmt(row['call_to_receipt_us']),
                     _fmt(row.get('call_to_send_control_us')), _fmt(row.get('send_control_us')),
                     f"{row['received']} / {row['sent']}", str(row.get('timeouts', '–'))])
    text = _table(header, rows, markdown)
    ratios = part['ratios']
    if ratios:
        lines = []
        for mode in ('late', 'early'):
            lines.append(
                f'env ({mode}) / raw: stamp → receipt p50 '
                f"{_ratio(ratios[f'{mode}/stamp_to_receipt_us/p50'])}, p99 "
                f"{_ratio(ratios[f'{mode}/stamp_to_receipt_us/p99'])}; call → receipt p50 "
                f"{_ratio(ratios[f'{mode}/call_to_receipt_us/p50'])}, p99 "
                f"{_ratio(ratios[f'{mode}/call_to_receipt_us/p99'])} (goal ≤ 1.2×)")
        text += '\n\n' + '\n'.join(f'- {line}' if markdown else line for line in lines)
    return text


def _io_per_message(cell: dict, slot: str | None = None) -> str:
    cpu = cell.get('cpu', {}).get('io_cpu_s')
    received = cell.get('received', {})
    count = received.get(slot) if slot else sum(received.values())
    if cpu is None or not count:
        return '–'
    return f'{cpu / count * 1e6:.0f}'


def _received_text(cell: dict) -> str:
    return ' / '.join(f'{name} {count}' for name, count in cell.get('received', {}).items())


def format_image(part: dict, markdown: bool) -> str:
    header = ['ros-v1 at 50 Hz', 'get_obs (µs)', 'capture spacing error (µs)', 'time-outs',
              'messages received', 'io thread CPU / message (µs)', 'process CPU (%)']
    rows = []
    names = {'with_image': 'camera 640×480 rgb8 (qos reliable) + level',
             'with_image_best_effort': 'camera, default qos sensor_data + level',
             'without_image': 'level only'}
    for label, cell in part['cells'].items():
        if 'error' in cell:
            rows.append([names[label], 'error', cell['error']] + ['–'] * 4)
            continue
        sent = IMAGE_RATE * cell['cpu']['wall_s']
        rows.append([names[label], _fmt(cell['get_obs_us']), _fmt(cell['spacing_error_us']),
                     str(cell['timeouts']), f'{_received_text(cell)} (~{sent:.0f} sent each)',
                     _io_per_message(cell),
                     f"{cell['cpu'].get('process_cpu_pct', math.nan):.1f}"])
    text = _table(header, rows, markdown)
    lines = []
    with_image = part['cells'].get('with_image', {})
    without = part['cells'].get('without_image', {})
    if 'get_obs_us' in with_image and 'get_obs_us' in without:
        extra = {q: with_image['get_obs_us'][q] - without['get_obs_us'][q]
                 for q in ('p50', 'p99')}
        lines.append(f"image capture extra cost: p50 {extra['p50']:+.0f} µs, p99 "
                     f"{extra['p99']:+.0f} µs; max {with_image['get_obs_us']['max']:.0f} µs "
                     f"with the camera, {without['get_obs_us']['max']:.0f} µs without "
                     '(goal ≤ 1000 µs)')
    view = with_image.get('camera_view')
    if view:
        lines.append(f"camera observation: owndata {view['owndata']}, writeable "
                     f"{view['writeable']}, base object {view['base']}, shares the slot's "
                     f"message buffer {view['shares_message_buffer']} (in {view['checked']} "
                     'steps checked)')
    if 'deserialise_us' in with_image:
        lines.append('receive-side copy: rclpy deserialisation of one frame (CDR → Python, '
                     f"data copied) {_fmt(with_image['deserialise_us'])} µs p50 / p99 / max")
    if with_image.get('cpu') and without.get('cpu') and with_image.get('received'):
        images = with_image['received'].get('camera', 0)
        extra_cpu = with_image['cpu']['process_cpu_s'] - without['cpu']['process_cpu_s'] * (
            with_image['cpu']['wall_s'] / without['cpu']['wall_s'])
        if images:
            lines.append(f'receive path, whole process (DDS threads + io thread): '
                         f'{extra_cpu / images * 1e6:.0f} µs of CPU per image '
                         f'({images} images); io thread alone {_io_per_message(with_image)} µs '
                         'per message')
    publisher = part.get('publisher', {})
    if publisher:
        lines.append(f"camera publisher: {publisher['rate_hz']:.1f} Hz achieved")
    if lines:
        text += '\n\n' + '\n'.join(f'- {line}' if markdown else line for line in lines)
    return text


def format_joints(part: dict, markdown: bool) -> str:
    header = ['JointState stream (7 joints)', 'capture spacing error (µs)', 'time-outs',
              'get_obs (µs)', 'received by env / sent', 'env io thread CPU (%)',
              'env process CPU (%)', 'publisher CPU (%)']
    rows = []
    for cell in part['cells'].values():
        name = f"{cell['stream_rate_hz']:g} Hz"
        if 'error' in cell:
            rows.append([name, 'error', cell['error']] + ['–'] * 5)
            continue
        publisher = cell.get('publisher', {})
        sent = publisher.get('sent')
        achieved = f" ({publisher['rate_hz']:.0f} Hz)" if publisher else ''
        rows.append([name, _fmt(cell['spacing_error_us']), str(cell['timeouts']),
                     _fmt(cell['get_obs_us']),
                     f"{cell['received'].get('joints', 0)} / {sent}{achieved}",
                     f"{cell['cpu'].get('io_cpu_pct', math.nan):.1f}",
                     f"{cell['cpu'].get('process_cpu_pct', math.nan):.1f}",
                     f"{cell.get('publisher_cpu_pct', math.nan):.1f}"])
    text = _table(header, rows, markdown)
    notes = ['received by env counts the measured window only (after the warm-up); sent is '
             "the publisher's whole run"]
    for cell in part['cells'].values():
        if 'gc' in cell:
            notes.append(f"{cell['stream_rate_hz']:g} Hz: garbage collections in the env "
                         'process (count, longest pause): ' + ', '.join(
                             f"{name} {g['count']} ({g['max_ms']:.1f} ms)"
                             for name, g in cell['gc'].items()))
    return text + '\n\n' + '\n'.join(f'- {note}' if markdown else note for note in notes)


# -- main ----------------------------------------------------------------------------------------

ROLES = {'receiver': role_receiver, 'raw': role_raw, 'stream': role_stream, 'env': role_env}


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--parts', nargs='+', choices=PARTS, default=list(PARTS))
    parser.add_argument('--quick', action='store_true',
                        help=f'divide the number of steps by {QUICK_DIVISOR}')
    parser.add_argument('--joint-rates', nargs='+', type=float, default=list(JOINT_RATES),
                        metavar='HZ', help='JointState stream rates (default: 10 1000)')
    parser.add_argument('--json', metavar='PATH', help='write every result to this file')
    parser.add_argument('--markdown', action='store_true', help='print markdown tables')
    parser.add_argument('--role', choices=sorted(ROLES), help=argparse.SUPPRESS)
    parser.add_argument('--options', default='{}', help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.role:
        return ROLES[args.role](json.loads(args.options))
    env = bench_environment()
    load_before = os.getloadavg()[0]
    _progress(f"parts {' '.join(args.parts)}, domain {env['ROS_DOMAIN_ID']}, load average "
              f'before: {load_before:.2f}')
    if load_before > BUSY_LOAD:
        _progress('warning: the machine is busy; timings will be noisy')
    started = time.perf_counter()
    results: dict[str, Any] = {}
    runners = {'action': part_action, 'image': part_image, 'joints': part_joints}
    formatters = {'action': format_action, 'image': format_image, 'joints': format_joints}
    titles = {'action': 'Action latency (50 Hz, geometry_msgs/TwistStamped, reliable depth 10)',
              'image': 'Image capture cost (camera at 30 Hz, env at 50 Hz)',
              'joints': 'Step timing under a JointState stream (env at 100 Hz)'}
    with tempfile.TemporaryDirectory(prefix='rtgym_ros_latency_') as directory:
        for part in args.parts:
            load = os.getloadavg()[0]
            results[part] = runners[part](args, directory, env)
            results[part]['load_average'] = [load, os.getloadavg()[0]]
    total = time.perf_counter() - started
    load_after = os.getloadavg()[0]
    _progress(f'total {total:.1f} s, load average after: {load_after:.2f}')
    if args.json:
        meta = {'argv': sys.argv[1:], 'python': sys.version, 'cpus': os.cpu_count(),
                'total_s': total, 'load_average_before': load_before,
                'load_average_after': load_after}
        with open(args.json, 'w') as stream:
            json.dump({'meta': meta, 'results': results}, stream, indent=1)
    sections = []
    for part in args.parts:
        title = titles[part]
        body = formatters[part](results[part], args.markdown)
        body += '\n\n{}1-minute load average {:.2f} → {:.2f}'.format(
            '- ' if args.markdown else '', *results[part]['load_average'])
        sections.append(f'### {title}\n\n{body}' if args.markdown else f'{title}\n{body}')
    print('\n\n'.join(sections))
    failed = any('error' in cell for part in results.values()
                 for cell in (part.get('rows') or part.get('cells') or {}).values())
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
