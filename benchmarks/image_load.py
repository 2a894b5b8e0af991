#!/usr/bin/env python3
"""
Large images against the time-step: 50 MB rgb8 frames at 5 Hz, ``rtgym_ros/ros-v1`` at 50 Hz.

Two parts (see ``RESULTS.md``):

- **gil**: one subscriber process takes frames in three ways and times each take: rclpy's
  ``take_message`` (a Python message, as the io thread's executor does), the same with
  ``raw=True`` (the CDR bytes), and the serialized take of ``rtgym_ros.ros.serialized`` (ctypes
  into rcl, GIL released). A probe thread that sleeps 0.2 ms in a loop tells whether the GIL
  was held: its longest gap during the takes.
- **steps**: a publisher process sends the frames (and a small *level* topic with each), and an
  env process observes them for 500 steps: the image slot taken serialized (the default), taken
  as messages (``RTGYM_ROS_IMAGE_TAKE=message``, the path before the change), and, for
  reference, an env observing the level alone while another process takes the frames.
  Time-outs and capture spacing error ``|Δt − T|``.

    python3 benchmarks/image_load.py --markdown
    python3 benchmarks/image_load.py --parts steps --repeat 2 --markdown
    python3 benchmarks/image_load.py --shape 2048 2048 3 --quick
"""

import argparse
import array
import json
import math
import os
import resource
import sys
import tempfile
import threading
import time
from typing import Any

import numpy as np
from bench_support import bench_environment, Child  # noqa: I100
from ros_latency import (_base_parameters, _fmt, _progress, _Ros, _run_env_cell, _stats_us,
                         _stop_event, _table, _trivial_action, _write_config, _write_json,
                         CHILD_START_TIMEOUT, WARMUP_STEPS)

PARTS = ('gil', 'steps')
TOPIC_PREFIX = '/rtgym_bench_large'
SHAPE = (4096, 4096, 3)  # rgb8: 50.3 MB
FRAME_RATE = 5.0
ENV_RATE = 50.0
STEPS = 500
QUICK_DIVISOR = 5
GIL_FRAMES = 20  # frames taken per method in the gil part (the first two are left out)
IDLE_WINDOW = 0.05  # s: the probe alone, about as long as a serialized take
PROBE_SLEEP = 0.0002
TAKES = ('message', 'raw', 'serialized')
CELLS = ('serialized', 'message', 'other_process')
BUSY_LOAD = 0.5


class ImageChild(Child):
    """A role of this script in its own process."""

    def __init__(self, role: str, options: dict, *, env: dict[str, str]) -> None:
        super().__init__(role, [sys.executable, os.path.abspath(__file__), '--role', role,
                                '--options', json.dumps(options)], env=env)


def _frame_bytes(shape: list[int]) -> int:
    return math.prod(shape)


# -- child roles ---------------------------------------------------------------------------------

def _camera_qos():
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    return QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)


def role_camera(options: dict) -> int:
    """Publish rgb8 frames of ``shape`` and a Float64 level at ``rate`` from a plain loop."""
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import Image
    from std_msgs.msg import Float64
    stop = _stop_event()
    ros = _Ros('bench_large_camera')
    height, width, channels = options['shape']
    image = Image(height=height, width=width, encoding='rgb8', step=width * channels)
    image.data = array.array('B', bytes(range(256)) * (height * width * channels // 256))
    camera = ros.node.create_publisher(Image, f'{TOPIC_PREFIX}/image', _camera_qos())
    level = ros.node.create_publisher(Float64, f'{TOPIC_PREFIX}/level', QoSProfile(depth=10))
    clock = ros.node.get_clock()
    print('ready', flush=True)
    period = 1.0 / options['rate']
    sent, publish_s = 0, []
    started = time.perf_counter()
    next_time = started
    while not stop.is_set():
        now = time.perf_counter()
        if now < next_time:
            time.sleep(next_time - now)
        image.header.stamp = clock.now().to_msg()
        before = time.perf_counter()
        camera.publish(image)
        publish_s.append(time.perf_counter() - before)
        level.publish(Float64(data=float(sent)))
        sent += 1
        next_time += period
        if time.perf_counter() - next_time > period:  # far behind: skip, do not burst
            next_time = time.perf_counter() + period
    elapsed = time.perf_counter() - started
    ros.close()
    _write_json(options['out'], {'sent': sent, 'elapsed_s': elapsed,
                                 'rate_hz': sent / elapsed if elapsed > 0 else math.nan,
                                 'publish_us': _stats_us(publish_s)})
    return 0


def role_taker(options: dict) -> int:
    """Take the frames as rclpy messages in another process (the reference cell)."""
    from sensor_msgs.msg import Image
    stop = _stop_event()
    ros = _Ros('bench_large_taker')
    count = [0]
    ros.node.create_subscription(Image, f'{TOPIC_PREFIX}/image',
                                 lambda _: count.__setitem__(0, count[0] + 1), _camera_qos())
    ros.spin_in_thread()
    print('ready', flush=True)
    stop.wait()
    ros.close()
    _write_json(options['out'], {'taken': count[0]})
    return 0


class _GilProbe:
    """A thread that sleeps ``PROBE_SLEEP`` in a loop; its longest gap shows a held GIL."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._longest = 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop.is_set():
            time.sleep(PROBE_SLEEP)
            now = time.perf_counter()
            with self._lock:
                self._longest = max(self._longest, now - last)
            last = now

    def longest(self) -> float:
        """Return the longest gap since the last call, and start again."""
        time.sleep(2 * PROBE_SLEEP)  # let a gap that ends now be recorded
        with self._lock:
            longest, self._longest = self._longest, 0.0
        return longest

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def role_gil(options: dict) -> int:
    """Take ``frames`` frames each way; time each take and the probe's longest gap."""
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
    from rtgym_ros.msgconv.image_cdr import decode_image
    from rtgym_ros.ros.serialized import RclSerializedTake, SerializedBuffers
    from sensor_msgs.msg import Image
    ros = _Ros('bench_large_gil')
    rcl = RclSerializedTake()
    print('ready', flush=True)
    results = {}
    for method in options['takes']:
        raw = method != 'message'
        subscription = ros.node.create_subscription(Image, f'{TOPIC_PREFIX}/image',
                                                    lambda _: None, _camera_qos(), raw=raw)
        buffers = SerializedBuffers(rcl)
        wait_set = _rclpy.WaitSet(1, 0, 0, 0, 0, 0, ros.context.handle)
        probe = _GilProbe()
        takes, gaps, faults, kept, idle, decode = [], [], [], None, [], []
        deadline = time.monotonic() + 30.0 + 3.0 * options['frames'] / FRAME_RATE
        while len(takes) < options['frames'] and time.monotonic() < deadline:
            wait_set.clear_entities()
            wait_set.add_subscription(subscription.handle)
            wait_set.wait(500_000_000)
            if not wait_set.get_ready_entities('subscription'):
                continue
            if method == 'serialized':  # a window as long as a take, without one
                probe.longest()
                time.sleep(IDLE_WINDOW)
                idle.append(probe.longest())
            probe.longest()
            faults_before, before = _minor_faults(), time.perf_counter()
            handle = subscription.handle
            if method == 'serialized':
                with handle:
                    view = buffers.take(lambda message: rcl.take(handle.pointer, message))
                decoding = time.perf_counter()
                taken = None if view is None else decode_image(view)
                decode.append(time.perf_counter() - decoding)
            else:
                got = handle.take_message(Image, raw)
                taken = None if got is None else got[0]
            took = time.perf_counter() - before
            if taken is None:
                continue
            takes.append(took)
            gaps.append(probe.longest())
            faults.append(_minor_faults() - faults_before)
            kept = taken  # held until the next frame, as a slot holds it
        probe.close()
        del kept
        ros.node.destroy_subscription(subscription)
        buffers.close()
        skip = 2  # the first takes pay for buffers made once
        results[method] = {'take_us': _stats_us(takes[skip:]),
                           'probe_gap_us': _stats_us(gaps[skip:]),
                           'minor_faults': float(np.median(faults[skip:])) if faults else None,
                           'buffers_made': buffers.made if method == 'serialized' else None}
        if method == 'serialized':
            results[method]['decode_us'] = _stats_us(decode[skip:])
            results['idle'] = {'probe_gap_us': _stats_us(idle[skip:])}
        _progress(f"[gil] {method:<10} take {_fmt(results[method]['take_us'])} µs, "
                  f"probe gap {_fmt(results[method]['probe_gap_us'])} µs")
    ros.close()
    _write_json(options['out'], results)
    return 0


# -- driver --------------------------------------------------------------------------------------

def _steps(args: argparse.Namespace) -> int:
    return max(STEPS // QUICK_DIVISOR if args.quick else STEPS, WARMUP_STEPS + 10)


def _env_config(directory: str, cell: str, shape: list[int]) -> str:
    observations = {}
    if cell != 'other_process':
        observations['camera'] = {'topic': f'{TOPIC_PREFIX}/image',
                                  'type': 'sensor_msgs/msg/Image', 'shape': list(shape),
                                  'encoding': 'rgb8', 'qos': 'reliable'}
    observations['level'] = {'topic': f'{TOPIC_PREFIX}/level', 'type': 'std_msgs/msg/Float64',
                             'fields': ['data']}
    return _write_config(directory, f'large_{cell}', _base_parameters(
        ENV_RATE, _trivial_action(f'{TOPIC_PREFIX}/env_cmd'), observations))


def part_gil(args: argparse.Namespace, directory: str, env: dict) -> dict:
    camera_out = os.path.join(directory, 'gil_camera.json')
    camera = ImageChild('camera', {'shape': args.shape, 'rate': FRAME_RATE,
                                   'out': camera_out}, env=env)
    out = os.path.join(directory, 'gil.json')
    try:
        camera.wait_for('ready', CHILD_START_TIMEOUT)
        frames = GIL_FRAMES // QUICK_DIVISOR + 3 if args.quick else GIL_FRAMES
        child = ImageChild('gil', {'frames': frames, 'takes': list(TAKES), 'out': out},
                           env=env)
        code = child.wait(120.0 + len(TAKES) * 3.0 * frames / FRAME_RATE)
    finally:
        camera.stop()
    if code != 0 or not os.path.exists(out):
        return {'error': f'exit status {code}', 'stderr': child.stderr[-10:]}
    with open(out) as stream:
        return {'takes': json.load(stream)}


def part_steps(args: argparse.Namespace, directory: str, env: dict) -> dict:
    steps = _steps(args)
    runs = []
    for run in range(args.repeat):
        camera_out = os.path.join(directory, f'camera_{run}.json')
        camera = ImageChild('camera', {'shape': args.shape, 'rate': FRAME_RATE,
                                       'out': camera_out}, env=env)
        cells: dict[str, dict] = {}
        try:
            camera.wait_for('ready', CHILD_START_TIMEOUT)
            for cell in args.cells:
                cells[cell] = _run_cell(cell, run, steps, args, directory, env, camera)
        finally:
            camera.stop()
        with open(camera_out) as stream:
            runs.append({'cells': cells, 'publisher': json.load(stream)})
    return {'runs': runs, 'steps': steps}


def _run_cell(cell: str, run: int, steps: int, args: argparse.Namespace, directory: str,
              env: dict, camera: Child) -> dict:
    cell_env = dict(env, RTGYM_ROS_IMAGE_TAKE='message' if cell == 'message' else 'serialized')
    helpers = [camera]
    taker = None
    if cell == 'other_process':
        taker_out = os.path.join(directory, f'taker_{run}.json')
        taker = ImageChild('taker', {'out': taker_out}, env=env)
        helpers.append(taker)
    load = os.getloadavg()[0]
    try:
        if taker is not None:
            taker.wait_for('ready', CHILD_START_TIMEOUT)  # in the try: a taker late is stopped
        result = _run_env_cell(
            f'{cell}_{run}', {'config': _env_config(directory, cell, args.shape),
                              'time_step': 1.0 / ENV_RATE, 'steps': steps, 'agent': 'early',
                              'check_camera_view': False, 'env_checker': False},
            env=cell_env, helpers=helpers, directory=directory)
    finally:
        if taker is not None:
            taker.stop()
    result['load_average'] = [load, os.getloadavg()[0]]
    if taker is not None and os.path.exists(taker_out):
        with open(taker_out) as stream:
            result['taken_by_other_process'] = json.load(stream)['taken']
    if 'clock' in result:
        captures = np.asarray(result['clock']['start_get_obs'])
        result['capture_interval_us'] = _stats_us(np.diff(captures[WARMUP_STEPS:]))
        # where the late captures were, warm-up included (time-outs are counted from step 1)
        intervals = np.diff(captures)
        result['late_captures'] = [[int(i + 1), round(float(intervals[i]) * 1e3, 1)]
                                   for i in np.flatnonzero(intervals > 1.5 / ENV_RATE)]
        for name in ('clock', 'calls', 'gc_long'):
            result.pop(name, None)  # the JSON keeps the figures, not every time-stamp
    note = (f"time-outs {result.get('timeouts')}" if 'error' not in result
            else f"ERROR {result['error']}")
    _progress(f'[steps] run {run + 1} {cell:<14} {note}')
    return result


# -- tables --------------------------------------------------------------------------------------

def _ms(stats: dict | None) -> str:
    if not stats or not stats.get('n'):
        return '–'
    return ' / '.join(f'{stats[k] / 1000:.1f}' for k in ('p50', 'p99', 'max'))


def _percent(value: float | None) -> str:
    return '–' if value is None else f'{value:.1f}'


def format_gil(part: dict, markdown: bool) -> str:
    if 'error' in part:
        return f"error: {part['error']} {' | '.join(part.get('stderr', []))}"
    names = {'message': 'rclpy take_message (a Python message)',
             'raw': 'rclpy take_message, raw=True (bytes)',
             'serialized': 'rcl_take_serialized_message by ctypes, buffers reused',
             'idle': 'no take (the probe alone)'}
    header = ['take of one frame', 'take (ms)', 'longest probe gap (ms)',
              'minor page faults per frame']
    rows = []
    for method, row in part['takes'].items():
        faults = row.get('minor_faults')
        rows.append([names[method], _ms(row.get('take_us')), _ms(row['probe_gap_us']),
                     '–' if faults is None else f'{faults:.0f}'])
    text = _table(header, rows, markdown)
    notes = ['take and probe gap as p50 / p99 / max over the frames (the first two left out); '
             f'the probe thread sleeps {PROBE_SLEEP * 1e3:g} ms in a loop, so a gap as long as '
             'the take means the take held the GIL']
    serialized = part['takes'].get('serialized')
    if serialized:
        notes.append(f"serialized: {serialized['buffers_made']} buffers made in all; reading "
                     f"the fields from the CDR bytes {_fmt(serialized['decode_us'])} µs")
    if 'idle' in part['takes']:
        notes.append(f'no take: the probe alone over {IDLE_WINDOW * 1e3:g} ms windows, same '
                     'process and traffic')
    return text + '\n\n' + '\n'.join(f'- {note}' if markdown else note for note in notes)


def format_steps(part: dict, markdown: bool, shape: list[int]) -> str:
    names = {'serialized': 'camera slot, serialized take (default)',
             'message': 'camera slot, `RTGYM_ROS_IMAGE_TAKE=message` (before)',
             'other_process': 'level only; another process takes the frames'}
    header = ['env at 50 Hz', 'time-outs', 'capture spacing error (ms)',
              'capture interval (ms)', 'get_obs (µs)', 'frames received / sent',
              'CPU io / frames thread (%)', 'load average']
    rows = []
    for run, result in enumerate(part['runs']):
        sent = result['publisher']['rate_hz']
        for cell, row in result['cells'].items():
            name = names[cell] + (f' (run {run + 1})' if len(part['runs']) > 1 else '')
            if 'error' in row:
                rows.append([name, 'error', row['error']] + ['–'] * 5)
                continue
            received = (row['received'].get('camera') if cell != 'other_process'
                        else row.get('taken_by_other_process'))
            expected = sent * row['cpu']['wall_s']
            rows.append([name, str(row['timeouts']), _ms(row['spacing_error_us']),
                         _ms(row['capture_interval_us']), _fmt(row['get_obs_us']),
                         f'{received} / ~{expected:.0f}',
                         ' / '.join(_percent(row['cpu'].get(f'{thread}_cpu_pct'))
                                    for thread in ('io', 'frames')),
                         '{:.2f} → {:.2f}'.format(*row['load_average'])])
    text = _table(header, rows, markdown)
    size = _frame_bytes(shape) / 1e6
    publishers = ', '.join(f"{r['publisher']['rate_hz']:.2f} Hz" for r in part['runs'])
    notes = [f"{part['steps']} steps per env, the first {WARMUP_STEPS} left out of the spacing "
             f'figures (not of the time-outs); frames {shape[0]}×{shape[1]} rgb8 '
             f'({size:.1f} MB) at {FRAME_RATE:g} Hz, achieved {publishers}',
             'spacing, interval: p50 / p99 / max; frames received count the measured window, '
             'sent is the rate achieved times that window']
    return text + '\n\n' + '\n'.join(f'- {note}' if markdown else note for note in notes)


# -- main ----------------------------------------------------------------------------------------

ROLES = {'camera': role_camera, 'taker': role_taker, 'gil': role_gil}


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--parts', nargs='+', choices=PARTS, default=list(PARTS))
    parser.add_argument('--cells', nargs='+', choices=CELLS, default=list(CELLS))
    parser.add_argument('--shape', nargs=3, type=int, default=list(SHAPE),
                        metavar=('H', 'W', 'C'), help='rgb8 frame shape (C must be 3)')
    parser.add_argument('--repeat', type=int, default=1, help='runs of the steps part')
    parser.add_argument('--quick', action='store_true',
                        help=f'divide the number of steps by {QUICK_DIVISOR}')
    parser.add_argument('--json', metavar='PATH', help='write every result to this file')
    parser.add_argument('--markdown', action='store_true', help='print markdown tables')
    parser.add_argument('--role', choices=sorted(ROLES), help=argparse.SUPPRESS)
    parser.add_argument('--options', default='{}', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.shape[2] != 3:
        parser.error('--shape: rgb8 has 3 channels')
    return args


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
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix='rtgym_ros_images_') as directory:
        if 'gil' in args.parts:
            load = os.getloadavg()[0]
            results['gil'] = part_gil(args, directory, env)
            results['gil']['load_average'] = [load, os.getloadavg()[0]]
        if 'steps' in args.parts:
            results['steps'] = part_steps(args, directory, env)
    if args.json:
        meta = {'argv': sys.argv[1:], 'python': sys.version, 'cpus': os.cpu_count(),
                'load_average_before': load_before, 'load_average_after': os.getloadavg()[0]}
        with open(args.json, 'w') as stream:
            json.dump({'meta': meta, 'results': results}, stream, indent=1)
    sections = []
    if 'gil' in results:
        body = format_gil(results['gil'], args.markdown)
        body += '\n\n{}1-minute load average {:.2f} → {:.2f}'.format(
            '- ' if args.markdown else '', *results['gil']['load_average'])
        title = f'GIL held per frame ({args.shape[0]}×{args.shape[1]} rgb8 at {FRAME_RATE:g} Hz)'
        sections.append(f'### {title}\n\n{body}' if args.markdown else f'{title}\n{body}')
    if 'steps' in results:
        body = format_steps(results['steps'], args.markdown, args.shape)
        title = 'ros-v1 at 50 Hz with a large-image slot'
        sections.append(f'### {title}\n\n{body}' if args.markdown else f'{title}\n{body}')
    print('\n\n'.join(sections))
    failed = 'error' in results.get('gil', {}) or any(
        'error' in cell for run in results.get('steps', {}).get('runs', [])
        for cell in run['cells'].values())
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
