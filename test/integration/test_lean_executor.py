"""
The main node's LeanExecutor against rclpy itself.

Timers, posted work, publisher events, and the hand-over to rclpy's own loop when the node gets
entities the lean loop does not serve.

Each test spins a real node in a private context on a SpinThread, as the env does, and talks to
it over real DDS from a second context where it needs a peer.
"""

import threading
import time
from typing import Iterator

import pytest
import rclpy
from rclpy.context import Context
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from rclpy.timer import TimerInfo
from rtgym_ros.ros.deadline import DeadlineTimer, TURN_ROOM
from rtgym_ros.ros.lean_executor import LeanExecutor
from rtgym_ros.ros.runtime import MAIN_EXECUTOR_VARIABLE, make_main_executor
from rtgym_ros.ros.spin import SpinThread
from std_msgs.msg import String

_BOUND = 10.0  # s: generous on a loaded machine; nothing here waits on time otherwise


def _node(name: str, context: Context) -> Node:
    """Make a node as the env's main node is made: no parameter or type-description services."""
    return Node(name, context=context, start_parameter_services=False, parameter_overrides=[
        Parameter('start_type_description_service', Parameter.Type.BOOL, False)])


def _context() -> Context:
    context = Context()
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    return context


@pytest.fixture
def spun() -> Iterator[tuple[Node, LeanExecutor, SpinThread]]:
    context = _context()
    node = _node(f'lean_{time.monotonic_ns()}', context)
    executor = LeanExecutor(context=context)
    executor.add_node(node)
    spinner = SpinThread(executor, context=context, name='lean_test', survive_errors=False)
    yield node, executor, spinner
    spinner.stop(timeout=_BOUND)
    executor.shutdown(timeout_sec=_BOUND)
    node.destroy_node()
    context.try_shutdown()


def _wait(event: threading.Event, what: str) -> None:
    assert event.wait(_BOUND), f'{what} within {_BOUND} s'


def test_a_one_shot_deadline_timer_fires_on_the_spinning_thread(spun):
    node, executor, spinner = spun
    fired = threading.Event()
    threads: list[threading.Thread] = []

    def once() -> None:
        threads.append(threading.current_thread())
        timer.cancel()
        fired.set()

    timer = node.create_timer(3600.0, once, autostart=False)
    timer.timer_period_ns = 20_000_000
    executor.post(timer.reset)  # armed on the executor thread, as DeadlineTimer does
    _wait(fired, 'the re-armed timer fired')
    assert threads == [spinner.thread]
    assert executor.lean, 'a node of timers and publishers is served by the lean loop'
    time.sleep(0.1)
    assert len(threads) == 1, 'a cancelled timer fires no more'


def test_a_timer_callback_gets_timer_info_when_it_asks_for_it(spun):
    node, _, _ = spun
    infos: list[TimerInfo] = []
    fired = threading.Event()

    def with_info(info: TimerInfo) -> None:
        infos.append(info)
        fired.set()

    timer = node.create_timer(0.01, with_info)
    _wait(fired, 'the timer fired')
    timer.cancel()
    assert isinstance(infos[0], TimerInfo)
    assert infos[0].actual_call_time.nanoseconds >= infos[0].expected_call_time.nanoseconds


def test_posted_work_runs_in_order_on_the_spinning_thread(spun):
    _, executor, spinner = spun
    seen: list[tuple[int, threading.Thread]] = []
    done = threading.Event()
    for index in range(50):
        executor.post(lambda i=index: seen.append((i, threading.current_thread())))
    executor.post(done.set)
    _wait(done, 'posted work ran')
    assert [i for i, _ in seen] == list(range(50))
    assert {thread for _, thread in seen} == {spinner.thread}


def test_a_callback_error_ends_the_spin_with_it(spun):
    node, _, spinner = spun
    node.create_timer(0.01, lambda: 1 / 0)
    deadline = time.monotonic() + _BOUND
    while spinner.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert isinstance(spinner.failure, ZeroDivisionError)


def test_publisher_event_handlers_are_served(spun):
    """A subscriber with an incompatible QoS: the publisher's event callback runs (a waitable)."""
    node, executor, _ = spun
    incompatible = threading.Event()
    best_effort = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
    topic = f'/lean_events_{time.monotonic_ns()}'
    node.create_publisher(String, topic, best_effort, event_callbacks=PublisherEventCallbacks(
        incompatible_qos=lambda _: incompatible.set()))
    peer_context = _context()
    peer = _node('lean_events_peer', peer_context)
    try:
        peer.create_subscription(String, topic, lambda _: None,
                                 QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE))
        _wait(incompatible, 'the incompatible-QoS event reached the publisher')
        assert executor.lean
    finally:
        peer.destroy_node()
        peer_context.try_shutdown()


def test_a_node_with_a_subscription_is_spun_by_rclpy_and_posts_still_run(spun):
    node, executor, _ = spun
    topic = f'/lean_sub_{time.monotonic_ns()}'
    got = threading.Event()
    posted = threading.Event()
    subscription = node.create_subscription(String, topic, lambda _: got.set(), 10)
    peer_context = _context()
    peer = _node('lean_sub_peer', peer_context)
    try:
        publisher = peer.create_publisher(String, topic, 10)
        deadline = time.monotonic() + _BOUND
        while not got.is_set() and time.monotonic() < deadline:
            publisher.publish(String(data='hi'))
            time.sleep(0.05)
        assert got.is_set(), 'a subscription on the main node gets its messages'
        assert not executor.lean
        executor.post(posted.set)
        _wait(posted, 'work posted while rclpy spins the node ran')
    finally:
        peer.destroy_node()
        peer_context.try_shutdown()
    node.destroy_subscription(subscription)
    back = threading.Event()
    executor.post(back.set)
    _wait(back, 'work posted after the subscription went ran')
    fired = threading.Event()
    node.create_timer(0.01, fired.set)
    _wait(fired, 'a timer fired')
    assert executor.lean, 'without the subscription the lean loop serves the node again'


def test_stop_ends_the_spin_thread_promptly(spun):
    _, executor, spinner = spun
    started = time.monotonic()
    spinner.stop(timeout=_BOUND)
    assert not spinner.is_alive()
    assert time.monotonic() - started < _BOUND


def test_the_main_executor_is_chosen_by_environment(monkeypatch):
    context = _context()
    try:
        monkeypatch.delenv(MAIN_EXECUTOR_VARIABLE, raising=False)
        assert isinstance(make_main_executor(context), LeanExecutor)
        monkeypatch.setenv(MAIN_EXECUTOR_VARIABLE, 'single')
        assert not isinstance(make_main_executor(context), LeanExecutor)
        monkeypatch.setenv(MAIN_EXECUTOR_VARIABLE, 'fast')
        with pytest.raises(ValueError, match=r"RTGYM_ROS_MAIN_EXECUTOR.*\('lean', 'single'\).*"
                                             r"'fast'"):
            make_main_executor(context)
    finally:
        context.try_shutdown()


def test_next_timer_due_is_rcls_time_until_the_first_running_timer():
    context = _context()
    node = _node(f'lean_due_{time.monotonic_ns()}', context)
    executor = LeanExecutor(context=context)
    executor.add_node(node)
    try:
        assert executor.next_timer_due() is None  # no timer
        stopped = node.create_timer(0.01, lambda: None, autostart=False)
        assert executor.next_timer_due() is None  # a cancelled timer is never due
        slow = node.create_timer(5.0, lambda: None)
        fast = node.create_timer(2.0, lambda: None)
        due = executor.next_timer_due()
        assert due is not None and 1.5 < due <= 2.0
        assert due <= fast.time_until_next_call() * 1e-9 + 1e-3
        fast.cancel()
        assert 4.5 < executor.next_timer_due() <= 5.0
        slow.destroy()  # its handle gone, still listed by the node (a destroy on another thread)
        assert executor.next_timer_due() is None
        assert stopped.is_canceled()
    finally:
        executor.shutdown(timeout_sec=_BOUND)
        node.destroy_node()
        context.try_shutdown()


def test_has_work_says_when_posted_work_waits_for_the_loop():
    context = _context()
    node = _node(f'lean_work_{time.monotonic_ns()}', context)
    executor = LeanExecutor(context=context)
    executor.add_node(node)
    try:
        assert not executor.has_work()
        ran = []
        executor.post(ran.append, 1)  # nobody spins: it waits
        assert executor.has_work()
        executor.spin_once(timeout_sec=0.0)
        assert ran == [1] and not executor.has_work()
    finally:
        executor.shutdown(timeout_sec=_BOUND)
        node.destroy_node()
        context.try_shutdown()


def test_timers_get_their_turn_while_posted_work_keeps_posting_more(spun):
    """A posted time-step start posts the next one before it returns: timers must still fire."""
    node, executor, _ = spun
    fired = threading.Event()
    node.create_timer(0.05, fired.set)
    stop = threading.Event()

    def again() -> None:
        if not stop.is_set():
            executor.post(again)

    executor.post(again)
    try:
        _wait(fired, 'the timer fired while posted work kept coming')
    finally:
        stop.set()


@pytest.mark.parametrize('away, turn, loop_first', [
    (0.02, True, True),  # room for a turn: the loop has the thread while the deadline nears
    (0.02, False, False),  # no turn asked: the deadline is slept on the executor thread
    (0.5 * TURN_ROOM, True, False),  # too near for a turn: slept
])
def test_a_deadline_armed_with_a_turn_gives_the_loop_the_thread_until_it(
        spun, away, turn, loop_first):
    node, executor, spinner = spun
    deadline = DeadlineTimer(node, lead=0.025)
    order: list[str] = []
    fired = threading.Event()
    lateness: list[float] = []

    def on_deadline() -> None:
        lateness.append(deadline.now() - target)
        order.append('deadline')
        fired.set()

    def arm_then_post() -> None:
        nonlocal target
        target = deadline.now() + away
        deadline.arm(target, on_deadline, turn=turn)
        executor.post(order.append, 'loop')  # runs once the loop has the thread back

    target = 0.0
    executor.post(arm_then_post)
    _wait(fired, 'the deadline fired')
    time.sleep(0.05)
    assert order == (['loop', 'deadline'] if loop_first else ['deadline', 'loop'])
    assert lateness[0] >= 0.0  # never early, with or without the turn
    executor.post(deadline.destroy)
