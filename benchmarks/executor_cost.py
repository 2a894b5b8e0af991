#!/usr/bin/env python3
"""
CPU per wake-up: a 100 Hz timer under each executor, and the plain ways a thread can wait.

What one wake-up of a thread costs on this machine decides the env's CPU per time-step (see
RESULTS.md, step timing). Each figure is the CPU time of the waking thread
(``time.thread_time``) divided by the wake-ups, over ``--seconds`` of 10 ms waits:

- executors: a node with one 100 Hz timer, three idle 1 Hz ones and the env's main node's
  publishers (an action topic, ``/diagnostics``, rclpy's own ``/parameter_events``), spun by
  ``lean`` (:class:`rtgym_ros.ros.lean_executor.LeanExecutor`, the publishers without QoS
  event handlers, as the env makes them), ``lean+events`` (the same with rclpy's default
  event handlers, two per publisher), ``single`` (rclpy's ``SingleThreadedExecutor``) and
  ``events`` (rclpy's C++ events executor), in turn;
- waits: ``time.sleep(0.01)``, ``threading.Event().wait(0.01)``, and an rcl wait set holding
  one 100 Hz timer, the primitives under the env's threads; and a bare lock that another
  thread releases every 10 ms, acquired with a timeout given by keyword, by position, and
  without one (``step()``'s wait; a C function's keyword arguments cost after a sleep);
- on a clock that ``/clock`` sets (``--parts clock``): a 50 Hz timer on a node whose clock a
  ``TimeSource`` on another node sets, from 1 kHz ``/clock`` messages taken on another thread
  (as the env's io node sets the main node's clock under ``use_sim_time``; another process
  publishes it), spun by ``lean`` and by ``events``: the firings, the spinning thread's
  wake-ups and CPU, the whole process's CPU, and the firings after ``/clock`` jumps 10 s
  back, while it stops, and once it goes on;
- messages (``--parts messages``): a one-joint ``JointState`` at 100 Hz from another
  process (reliable, as ``sim_robot`` sends it), taken raw by a ``sensor_data`` subscription,
  spun by ``events`` (the env's io thread), ``single``, and ``wait set`` (a bare rcl wait set
  holding the subscription alone, taken in Python: the floor): the spinning thread's CPU and
  wake-ups per message, and those of this process's Fast DDS threads (``dds.*``: the
  shared-memory listener that receives the message among them), and what those threads
  cost a second before any publisher runs;
- after a sleep (``--parts cold``): the CPU of a bare sleep to a deadline 10, 1 and 0.1 ms
  away, and of the same small piece of Python run right after it. A thread that slept longer
  wakes to colder caches: on a VM the same code can take several times the CPU, which is why
  the code run per wake-up weighs more at 100 Hz than at 1 kHz.

    python3 benchmarks/executor_cost.py --repeat 3
    python3 benchmarks/executor_cost.py --parts cold --repeat 3
    python3 benchmarks/executor_cost.py --parts clock --repeat 3
    python3 benchmarks/executor_cost.py --parts messages --repeat 3
"""

import _thread
import argparse
import contextlib
import multiprocessing
import os
import resource
import threading
import time
from typing import Any, Callable

from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
import rclpy
from rclpy.context import Context
from rclpy.executors import Executor, SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data, QoSProfile
from rclpy.signals import SignalHandlerOptions
from rclpy.time_source import TimeSource
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
import bench_support  # noqa: I100 - puts this checkout's rtgym_ros first
from rtgym_ros.ros.lean_executor import LeanExecutor  # noqa: I100
from rtgym_ros.ros.publisher_events import drop_event_handlers, without_default_handlers
from rtgym_ros.ros.spin import SpinThread

PERIOD = 0.01  # s between wake-ups


def _events(context: Context) -> Executor:
    from rclpy.experimental.events_executor import EventsExecutor
    return EventsExecutor(context=context)


EXECUTORS: dict[str, Callable[[Context], Executor]] = {
    'lean': lambda context: LeanExecutor(context=context),
    'lean+events': lambda context: LeanExecutor(context=context),
    'single': lambda context: SingleThreadedExecutor(context=context),
    'events': _events,
}
WITHOUT_EVENT_HANDLERS = ('lean',)
"""The rows whose node's publishers have no QoS event handlers, as the env's main node."""


def _spin_for(executor: Any, seconds: float, *,
              until: Callable[[], object] | None = None) -> None:
    """Spin ``executor`` for ``seconds`` of wall time, or until ``until()`` holds."""
    end = time.monotonic() + seconds
    while not (until is not None and until()) and time.monotonic() < end:
        executor.spin_once(timeout_sec=0.1)


def _median(runs: list[dict[str, float]], key: str) -> float:
    """Return the median of one figure over the runs."""
    return float(np.median([run[key] for run in runs]))


def executor_cost(context: Context, name: str, seconds: float) -> float:
    """Return µs of CPU per firing of a 100 Hz timer, the node spun by executor ``name``."""
    node = Node(f'executor_cost_{name.replace("+", "_")}_{os.getpid()}', context=context,
                start_parameter_services=False, parameter_overrides=[
                    Parameter('start_type_description_service', Parameter.Type.BOOL, False)])
    if name in WITHOUT_EVENT_HANDLERS:
        drop_event_handlers(node)
        options = {'event_callbacks': without_default_handlers()}
    else:
        options = {}
    node.create_publisher(Float64MultiArray, 'executor_cost_action', 10, **options)
    node.create_publisher(DiagnosticArray, '/diagnostics', 10, **options)
    executor = EXECUTORS[name](context)
    executor.add_node(node)
    fired = [0]
    node.create_timer(PERIOD, lambda: fired.__setitem__(0, fired[0] + 1))
    for _ in range(3):
        node.create_timer(1.0, lambda: None)
    try:
        _spin_for(executor, 0.3)
        fired[0], cpu = 0, time.thread_time()
        _spin_for(executor, seconds)
        return (time.thread_time() - cpu) / max(fired[0], 1) * 1e6
    finally:
        executor.remove_node(node)
        node.destroy_node()


LOCK_WAITS: dict[str, Callable[[Any], bool]] = {
    'lock released by another thread: acquire(timeout=0.1)': lambda lock: lock.acquire(
        timeout=0.1),
    'lock released by another thread: acquire(True, 0.1)': lambda lock: lock.acquire(True, 0.1),
    'lock released by another thread: acquire()': lambda lock: lock.acquire(),
}
"""step()'s wait on a bare lock: a timeout given by keyword, by position, and none (rtgym's)."""


def lock_wait_cost(context: Context, name: str, seconds: float) -> float:
    """Return µs of CPU per wait of a bare lock that another thread releases every 10 ms."""
    lock, acquire, done = _thread.allocate_lock(), LOCK_WAITS[name], threading.Event()
    lock.acquire()

    def release() -> None:
        due = time.monotonic()
        while not done.is_set():
            due += PERIOD
            time.sleep(max(0.0, due - time.monotonic()))
            with contextlib.suppress(RuntimeError):  # not taken yet: the same wake-up
                lock.release()

    releaser = threading.Thread(target=release, name='releaser')
    releaser.start()
    try:
        acquire(lock)  # the releaser runs
        count = int(seconds / PERIOD)
        cpu = time.thread_time()
        for _ in range(count):
            acquire(lock)
        return (time.thread_time() - cpu) / count * 1e6
    finally:
        done.set()
        releaser.join()


def wait_cost(context: Context, name: str, seconds: float) -> float:
    """Return µs of CPU per 10 ms wait of one kind."""
    node = Node(f'wait_cost_{os.getpid()}', context=context, start_parameter_services=False)
    timer = node.create_timer(PERIOD, lambda: None)
    wait_set = _rclpy.WaitSet(0, 0, 1, 0, 0, 0, context.handle)
    event = threading.Event()

    def rcl_wait() -> None:
        wait_set.clear_entities()
        wait_set.add_timer(timer.handle)
        wait_set.wait(-1)
        timer.handle.call_timer()

    waits = {'time.sleep': lambda: time.sleep(PERIOD), 'Event.wait': lambda: event.wait(PERIOD),
             'rcl wait on a timer': rcl_wait}
    try:
        count = int(seconds / PERIOD)
        cpu = time.thread_time()
        for _ in range(count):
            waits[name]()
        return (time.thread_time() - cpu) / count * 1e6
    finally:
        node.destroy_node()


CLOCK_RATE = 1000.0  # Hz of /clock messages (--parts clock)
CLOCK_TIMER_RATE = 50.0  # Hz of the timer on that clock
CLOCK_EXECUTORS = ('lean', 'events')
CLOCK_PHASE = 0.5  # wall s of each phase after the measured one: back, stopped, going on


def _publish_clock(domain_id: int, back: Any, stopped: Any, end: Any) -> None:
    """Child process: /clock at CLOCK_RATE; 10 s back for each count of ``back``."""
    context = Context()
    rclpy.init(context=context, domain_id=domain_id,
               signal_handler_options=SignalHandlerOptions.NO)
    node = Node(f'clock_feed_{os.getpid()}', context=context, start_parameter_services=False)
    publisher = node.create_publisher(Clock, '/clock', 10)
    period, seconds, went_back = 1.0 / CLOCK_RATE, 100.0, 0
    due = time.monotonic()
    while not end.is_set():
        due += period
        if back.value != went_back:
            seconds, went_back = seconds - 10.0 * (back.value - went_back), back.value
        if not stopped.value:
            seconds += period
        message = Clock()
        message.clock.sec = int(seconds)
        message.clock.nanosec = int(seconds % 1.0 * 1e9)
        publisher.publish(message)
        time.sleep(max(0.0, due - time.monotonic()))
    node.destroy_node()
    context.try_shutdown()


def _stop_feed(process: Any) -> None:
    """Join a feed process told to end; kill it past 10 s: a feed left running skews later runs."""
    process.join(10.0)
    if process.is_alive():
        process.kill()
        process.join()


class _ClockFeed:
    """/clock from another process, taken by a TimeSource on a node spun on its own thread."""

    def __init__(self, context: Context, clock_of: Node) -> None:
        spawn = multiprocessing.get_context('spawn')
        self.back, self.stopped, self._end = spawn.Value('i', 0), spawn.Value('b', False), \
            spawn.Event()
        self._process = spawn.Process(
            target=_publish_clock, name='clock feed',
            args=(context.get_domain_id(), self.back, self.stopped, self._end))
        self._process.start()
        self._io_node = Node(f'clock_io_{os.getpid()}', context=context,
                             start_parameter_services=False)
        self._time_source = TimeSource(node=self._io_node)
        self._time_source.ros_time_is_active = True
        self._time_source.attach_clock(clock_of.get_clock())
        self._spin = SpinThread(_events(context), context=context, name='clock io')
        self._spin.executor.add_node(self._io_node)

    def close(self) -> None:
        self._end.set()
        _stop_feed(self._process)
        self._spin.stop()
        self._spin.executor.remove_node(self._io_node)
        self._spin.executor.shutdown()
        self._time_source.detach_node()
        self._io_node.destroy_node()


def clock_driven_cost(context: Context, name: str, seconds: float) -> dict[str, float]:
    """Spin a node with a CLOCK_TIMER_RATE timer on a /clock-set clock: what it costs, fires."""
    node = Node(f'clock_driven_{name}_{os.getpid()}', context=context,
                start_parameter_services=False)
    feed = _ClockFeed(context, node)
    executor = EXECUTORS[name](context)
    executor.add_node(node)
    fired = [0]
    timer = node.create_timer(1.0 / CLOCK_TIMER_RATE,
                              lambda: fired.__setitem__(0, fired[0] + 1))

    def spin(wall_seconds: float) -> int:
        before = fired[0]
        _spin_for(executor, wall_seconds)
        return fired[0] - before

    try:
        spin(2.0)  # the feed started and discovered, /clock heard, the timer running
        usage, cpu, process = (resource.getrusage(resource.RUSAGE_THREAD), time.thread_time(),
                               time.process_time())
        count = spin(seconds)
        waits = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - usage.ru_nvcsw
        result = {'fired': count, 'wakeups_per_s': waits / seconds,
                  'thread_cpu_ms_per_s': (time.thread_time() - cpu) * 1e3 / seconds,
                  'process_cpu_ms_per_s': (time.process_time() - process) * 1e3 / seconds}
        feed.back.value += 1
        result['after_back'] = spin(CLOCK_PHASE)
        feed.stopped.value = True
        result['stopped'] = spin(CLOCK_PHASE)
        feed.stopped.value = False
        result['going_on'] = spin(CLOCK_PHASE)
        return result
    finally:
        executor.remove_node(node)
        node.destroy_timer(timer)
        feed.close()
        node.destroy_node()


def _clock_table(context: Context, repeat: int, seconds: float) -> None:
    results: dict[str, list[dict[str, float]]] = {name: [] for name in CLOCK_EXECUTORS}
    for _ in range(repeat):
        for name in CLOCK_EXECUTORS:
            results[name].append(clock_driven_cost(context, name, seconds))
    per_phase = int(CLOCK_PHASE * CLOCK_TIMER_RATE)
    print(f'| executor | firings in {seconds:g} s (of {seconds * CLOCK_TIMER_RATE:.0f}) '
          '| spinning thread: wake-ups / s | its CPU (ms / s) | process CPU (ms / s) '
          f'| firings in {CLOCK_PHASE:g} s (of {per_phase}): 10 s back / stopped / going on |')
    print('|---|---:|---:|---:|---:|---|')
    for name, runs in results.items():
        phases = ', '.join(f"{r['after_back']:.0f} / {r['stopped']:.0f} / {r['going_on']:.0f}"
                           for r in runs)
        process = ', '.join(f"{r['process_cpu_ms_per_s']:.0f}" for r in runs)
        print(f"| {name} | {_median(runs, 'fired'):.0f} "
              f"| {_median(runs, 'wakeups_per_s'):.0f} "
              f"| {_median(runs, 'thread_cpu_ms_per_s'):.1f} "
              f"| {_median(runs, 'process_cpu_ms_per_s'):.0f} "
              f'(runs: {process}) | {phases} |')


MESSAGE_RATE = 100.0  # Hz of JointState messages (--parts messages)
MESSAGE_RECEIVERS = ('events', 'single', 'wait set')


def _publish_joint_states(domain_id: int, end: Any) -> None:
    """Child process: a one-joint JointState at MESSAGE_RATE until ``end`` is set."""
    context = Context()
    rclpy.init(context=context, domain_id=domain_id,
               signal_handler_options=SignalHandlerOptions.NO)
    node = Node(f'joint_feed_{os.getpid()}', context=context, start_parameter_services=False)
    publisher = node.create_publisher(JointState, 'executor_cost_joints', QoSProfile(depth=10))
    message = JointState(name=['joint'], position=[0.0], velocity=[0.0], effort=[0.0])
    due = time.monotonic()
    while not end.is_set():
        due += 1.0 / MESSAGE_RATE
        message.position[0] += 0.001
        publisher.publish(message)
        time.sleep(max(0.0, due - time.monotonic()))
    node.destroy_node()
    context.try_shutdown()


class _WaitSetLoop:
    """The least a Python thread can do per message: wait on the subscription alone, take."""

    def __init__(self, context: Context, subscription: Any) -> None:
        self._handle = subscription.handle
        self._msg_type = subscription.msg_type
        self._callback = subscription.callback
        self._wait_set = _rclpy.WaitSet(1, 0, 0, 0, 0, 0, context.handle)

    def spin_once(self, timeout_sec: float) -> None:
        with self._handle:
            self._wait_set.clear_entities()
            self._wait_set.add_subscription(self._handle)
            self._wait_set.wait(int(timeout_sec * 1e9))
            taken = self._handle.take_message(self._msg_type, True)
        if taken is not None:
            self._callback(taken[0])


def _dds_threads() -> tuple[int, int]:
    """CPU ns and voluntary context switches so far of this process's Fast DDS threads."""
    costs = [(cpu, switches) for name, cpu, switches in bench_support.thread_costs().values()
             if bench_support.is_dds_thread(name)]
    return sum(cpu for cpu, _ in costs), sum(switches for _, switches in costs)


def message_cost(context: Context, name: str, seconds: float) -> dict[str, float]:
    """Take the feed's messages with receiver ``name``: its thread's and DDS's cost each."""
    node = Node(f'message_cost_{name.replace(" ", "_")}_{os.getpid()}', context=context,
                start_parameter_services=False)
    received = [0]
    subscription = node.create_subscription(
        JointState, 'executor_cost_joints', lambda _: received.__setitem__(0, received[0] + 1),
        qos_profile_sensor_data, raw=True)
    if name == 'wait set':
        receiver: Any = _WaitSetLoop(context, subscription)
    else:
        receiver = EXECUTORS[name](context)
        receiver.add_node(node)

    try:
        _spin_for(receiver, 10.0, until=lambda: received[0])
        if not received[0]:
            raise RuntimeError(f'{name}: no message from the feed in 10 s')
        _spin_for(receiver, 0.5)  # the receiving thread warm
        usage, cpu, dds = (resource.getrusage(resource.RUSAGE_THREAD), time.thread_time_ns(),
                           _dds_threads())
        received[0] = 0
        _spin_for(receiver, seconds)
        count = max(received[0], 1)
        waits = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - usage.ru_nvcsw
        dds_cpu, dds_waits = (after - before for after, before in zip(_dds_threads(), dds))
        return {'messages': received[0],
                'cpu_us': (time.thread_time_ns() - cpu) / count / 1e3,
                'wakeups': waits / count,
                'dds_cpu_us': dds_cpu / count / 1e3, 'dds_wakeups': dds_waits / count}
    finally:
        if name != 'wait set':
            receiver.remove_node(node)
            receiver.shutdown()
        node.destroy_node()


def _idle_dds(seconds: float) -> tuple[float, float]:
    """Return µs of CPU and wake-ups a second of this process's DDS threads, nothing sent."""
    cpu, waits = _dds_threads()
    time.sleep(seconds)
    after_cpu, after_waits = _dds_threads()
    return (after_cpu - cpu) / seconds / 1e3, (after_waits - waits) / seconds


def _message_table(context: Context, repeat: int, seconds: float) -> None:
    node = Node(f'message_idle_{os.getpid()}', context=context,  # the participant is made
                start_parameter_services=False)
    time.sleep(1.0)  # its first announcements sent
    idle = [_idle_dds(seconds) for _ in range(repeat)]
    node.destroy_node()
    print("this process's DDS threads before any publisher, per second (median, runs): "
          f'{np.median([cpu for cpu, _ in idle]):.0f} µs of CPU '
          f"({', '.join(f'{cpu:.0f}' for cpu, _ in idle)}), "
          f'{np.median([waits for _, waits in idle]):.1f} wake-ups '
          f"({', '.join(f'{waits:.1f}' for _, waits in idle)})")
    spawn = multiprocessing.get_context('spawn')
    end = spawn.Event()
    feed = spawn.Process(target=_publish_joint_states, name='joint feed',
                         args=(context.get_domain_id(), end))
    feed.start()
    results: dict[str, list[dict[str, float]]] = {name: [] for name in MESSAGE_RECEIVERS}
    try:
        time.sleep(2.0)  # the feed's process up and discovered
        for _ in range(repeat):
            for name in MESSAGE_RECEIVERS:
                results[name].append(message_cost(context, name, seconds))
    finally:
        end.set()
        _stop_feed(feed)
    print(f'| receiving {MESSAGE_RATE:g} Hz JointState | messages | spinning thread: CPU (µs) '
          '/ wake-ups per message | DDS threads: CPU (µs) / wake-ups per message | '
          'runs: spinning thread, DDS threads (µs) |')
    print('|---|---:|---:|---:|---|')
    for name, runs in results.items():
        each = ', '.join(f"{r['cpu_us']:.0f} / {r['dds_cpu_us']:.0f}" for r in runs)
        print(f"| {name} | {_median(runs, 'messages'):.0f} | {_median(runs, 'cpu_us'):.0f} / "
              f"{_median(runs, 'wakeups'):.2f} | {_median(runs, 'dds_cpu_us'):.0f} / "
              f"{_median(runs, 'dds_wakeups'):.2f} | {each} |")


COLD_PERIODS = (0.01, 0.001, 0.0001)  # s slept before each wake-up
_TABLE = {'a': 1}


def _small_work() -> int:
    """About a hundred bytecodes, a dict and a few calls: a stand-in for one step's Python."""
    total = 0
    for i in range(50):
        total += _TABLE['a'] * i
    return total + len(str(total)) + max(total, 1)


def after_sleep_cost(period: float, seconds: float) -> tuple[float, float]:
    """Return µs of CPU per wake-up of a sleep to a deadline ``period`` away, and of the work."""
    count = max(int(seconds / period), 100)
    slept = worked = 0
    deadline = time.monotonic()
    for _ in range(count):
        deadline += period
        start = time.thread_time_ns()
        remaining = deadline - time.monotonic()
        if remaining > 0.0:
            time.sleep(remaining)
        woke = time.thread_time_ns()
        _small_work()
        slept += woke - start
        worked += time.thread_time_ns() - woke
    return slept / count / 1e3, worked / count / 1e3


def _cold_table(repeat: int, seconds: float) -> None:
    results: dict[float, list[tuple[float, float]]] = {period: [] for period in COLD_PERIODS}
    for _ in range(repeat):
        for period in COLD_PERIODS:
            results[period].append(after_sleep_cost(period, seconds))
    print('| slept before each wake-up | CPU of the sleep (µs), median | CPU of the same '
          'Python after it (µs), median | runs (sleep / work) |')
    print('|---|---:|---:|---|')
    for period, values in results.items():
        runs = ', '.join(f'{a:.0f}/{b:.0f}' for a, b in values)
        print(f'| {period * 1e3:g} ms | {np.median([a for a, _ in values]):.0f} | '
              f'{np.median([b for _, b in values]):.0f} | {runs} |')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--seconds', type=float, default=2.0, help='per figure (2)')
    parser.add_argument('--repeat', type=int, default=3, help='runs of each (medians)')
    parser.add_argument('--parts', nargs='+', choices=('wakeups', 'cold', 'clock', 'messages'),
                        default=['wakeups'],
                        help='wakeups: executors and waits (default); cold: work after a sleep; '
                        'clock: a timer on a clock that /clock sets; messages: a subscription '
                        'of 100 Hz messages from another process')
    args = parser.parse_args()
    if 'cold' in args.parts:
        print(f'load average before: {os.getloadavg()[0]:.2f}')
        _cold_table(args.repeat, args.seconds)
        print(f'load average after: {os.getloadavg()[0]:.2f}')
        if not {'wakeups', 'clock', 'messages'} & set(args.parts):
            return 0
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    context = Context()
    rclpy.init(context=context, domain_id=1 + os.getpid() % 200,
               signal_handler_options=SignalHandlerOptions.NO)
    print(f'load average before: {os.getloadavg()[0]:.2f}')
    try:
        if 'messages' in args.parts:
            _message_table(context, args.repeat, args.seconds)
        if 'clock' in args.parts:
            _clock_table(context, args.repeat, args.seconds)
        if 'wakeups' not in args.parts:
            print(f'load average after: {os.getloadavg()[0]:.2f}')
            return 0
        rows = [(f'executor: {name}', executor_cost, name) for name in EXECUTORS]
        rows += [(f'wait: {name}', wait_cost, name)
                 for name in ('time.sleep', 'Event.wait', 'rcl wait on a timer')]
        rows += [(f'wait: {name}', lock_wait_cost, name) for name in LOCK_WAITS]
        results: dict[str, list[float]] = {label: [] for label, _, _ in rows}
        for _ in range(args.repeat):  # interleaved, so that drift spreads over every row
            for label, measure, name in rows:
                results[label].append(measure(context, name, args.seconds))
        print('| what wakes every 10 ms | CPU per wake-up (µs), median | runs |')
        print('|---|---:|---|')
        for label, values in results.items():
            runs = ', '.join(f'{v:.0f}' for v in values)
            print(f'| {label} | {np.median(values):.0f} | {runs} |')
        print(f'load average after: {os.getloadavg()[0]:.2f}')
    finally:
        context.try_shutdown()
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
