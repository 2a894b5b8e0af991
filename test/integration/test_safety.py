"""
The safe action reaches the robot whatever the executor thread is doing (issue: safety path).

Each test holds the executor thread on purpose — a reward function that sleeps 8 s, a capture
that waits 12 s for a silent sensor, a /clock that stops — and checks that close(), Ctrl-C and
the watchdog still put the robot's last command to the safe action long before that ends.
Bounds are far below the blocking time (8 s, 12 s), so a loaded machine cannot flake them.
"""

import _thread
import gc
import os
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace
import warnings

import blocking_tasks
from dummy_interfaces import CountingInterface
from emulated_robots import act, CHILD_ENV, DEFAULT, REPO, robot_params, T, write_config
import numpy as np
import prepro_functions
import pytest
from ros_probe import die_with_parent, RosoutLog, wait_until
from rtgym_ros import DEFAULT_CONFIG_DICT, RealTimeEnv
from rtgym_ros import env as env_module
from sim_clock import SimClock

BOUND = 2.0  # s: the safe action must arrive well within this (the blocking lasts 8-12 s)
AGENT = REPO / 'test' / 'support' / 'interrupted_agent.py'


@pytest.fixture
def blocked_reward():
    blocking_tasks.BLOCK.clear()
    blocking_tasks.BLOCKING.clear()
    yield blocking_tasks
    blocking_tasks.BLOCK.clear()


@pytest.fixture
def ctrl_c():
    """
    Give the test ``interrupt_main`` with Python's Ctrl-C handler installed for its duration.

    A run started in the background by a non-interactive shell (``tools/test &`` in a script)
    inherits SIGINT ignored; Python then keeps it ignored, and ``interrupt_main()`` raises
    nothing: the Ctrl-C these tests make would never come.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield _thread.interrupt_main
    signal.signal(signal.SIGINT, previous)


def _step_in_thread(env, action) -> threading.Thread:
    def run() -> None:
        try:
            env.step(action)
        except Exception:  # the env is closed under it: a clean RuntimeError is expected
            pass
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _block_the_executor(robot, make_env, blocked_reward, *, watchdog: float):
    """Make an env whose reward function now sleeps 8 s inside a step() of another thread."""
    env = make_env(robot, reward={'function': 'blocking_tasks:sleepy_reward'},
                   watchdog_timeout=watchdog)
    env.reset()
    for _ in range(3):
        env.step(act(0.5))
    blocked_reward.BLOCK.set()
    stepping = _step_in_thread(env, act(0.5))
    assert blocked_reward.BLOCKING.wait(5.0), 'the reward function never blocked'
    return env, stepping


def test_close_sends_the_safe_action_while_a_reward_function_blocks(spawn, make_env,
                                                                    blocked_reward):
    robot = spawn()
    env, stepping = _block_the_executor(robot, make_env, blocked_reward, watchdog=30.0)
    closing = time.time()
    start = time.monotonic()
    env.close()
    took = time.monotonic() - start
    commands = robot.wait_last(DEFAULT, timeout=BOUND)
    assert commands[-1]['t'] - closing < BOUND
    assert took < 3 * BOUND, f'close() took {took:.2f} s'
    stepping.join(BOUND)
    assert not stepping.is_alive(), 'step() stayed blocked after close()'


def test_watchdog_acts_while_the_executor_thread_is_blocked(spawn, make_env, blocked_reward):
    robot = spawn()
    env, _ = _block_the_executor(robot, make_env, blocked_reward, watchdog=0.3)
    blocked = time.time()
    commands = robot.wait_last(DEFAULT, timeout=0.3 + T + BOUND)
    assert commands[-1]['t'] - blocked < 0.3 + T + BOUND
    assert env.unwrapped.stalls >= 1


def test_ctrl_c_during_a_blocked_capture_stops_the_robot(spawn, tmp_path):
    # on_stale: wait with a 12 s bound and a sensor gone silent: step() waits on the capture.
    robot = spawn()
    config = write_config(tmp_path / 'robot.yaml', robot_params(
        joints={'max_age': 0.05, 'on_stale': 'wait', 'wait_timeout': 12.0}))
    output = tmp_path / 'agent.log'
    with open(output, 'wb') as out:
        agent = subprocess.Popen([sys.executable, str(AGENT), str(config), robot.ns],
                                 cwd=REPO, env=dict(CHILD_ENV, PYTHONFAULTHANDLER='1'),
                                 stdout=out, stderr=subprocess.STDOUT,
                                 preexec_fn=die_with_parent)
    try:
        wait_until(lambda: 'STEPPING' in output.read_text(), 60.0,
                   lambda: f'the agent to step:\n{output.read_text()}')
        robot.wait_last(0.75)
        robot.control('silent')
        time.sleep(0.5)  # a capture is now waiting for a fresh message, up to 12 s
        interrupted = time.time()
        agent.send_signal(signal.SIGINT)
        commands = robot.wait_last(DEFAULT, timeout=BOUND)
        assert commands[-1]['t'] - interrupted < BOUND
        try:
            code = agent.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            agent.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
            agent.wait(5.0)
            raise AssertionError(f'the agent hung after SIGINT:\n{output.read_text()}') from None
        assert code == 0, output.read_text()
        closed = float(output.read_text().split('CLOSED ')[1].split()[0])
        assert closed - interrupted < 3 * BOUND, output.read_text()
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait(5.0)


@pytest.mark.parametrize('after', [0.1, 0.6])
def test_ctrl_c_while_envs_close_at_exit_stops_every_robot(spawn, make_env, blocked_reward,
                                                           ctrl_c, after):
    # Two envs left open at exit; the first one closed has its executor thread held by a
    # reward function, so its close() waits for it 0.25 s, then tears down for about 1 s. A
    # second Ctrl-C lands in that wait (0.1 s) or in the teardown (0.6 s).
    robots = [spawn(), spawn()]
    envs = [make_env(robot, reward={'function': 'blocking_tasks:sleepy_reward'},
                     watchdog_timeout=30.0) for robot in robots]
    for env in envs:
        env.reset()
    for _ in range(3):
        for env in envs:
            env.step(act(0.5))
    first = [env.unwrapped for env in envs].index(list(env_module._live_envs)[0])
    blocked_reward.BLOCK.set()
    _step_in_thread(envs[first], act(0.5))
    assert blocked_reward.BLOCKING.wait(5.0), 'the reward function never blocked'
    threading.Timer(after, ctrl_c).start()
    with pytest.raises(KeyboardInterrupt):
        env_module.close_all()  # what rtgym_ros runs at exit
    for robot in robots:
        robot.wait_last(DEFAULT, timeout=BOUND)
    # No env is left, and none keeps the garbage collector frozen (nor the GIL's interval).
    assert not env_module._live_envs
    assert gc.get_freeze_count() == 0


def test_close_all_stops_every_robot_before_it_tears_any_node_down(
        spawn, make_env, monkeypatch):
    # DDS can block a node's teardown for good (eProsima/Fast-DDS#6502). Here each env's
    # teardown waits until the test releases it: while the first one closed waits, the robot
    # of the other env must have its safe action too. (No watchdog: it would stop it anyway.)
    robots = [spawn(), spawn()]
    envs = [make_env(robot, watchdog_timeout=30.0) for robot in robots]
    for env in envs:
        env.reset()
    for _ in range(3):
        for env in envs:
            env.step(act(0.5))
    for robot in robots:
        robot.wait_last(0.5)
    released = threading.Event()
    for env in envs:
        runtime = env.unwrapped._runtime
        monkeypatch.setattr(runtime, 'close', lambda timeout, close=runtime.close: (
            released.wait(60.0), close(timeout=timeout)))
    closing = threading.Thread(target=env_module.close_all, daemon=True)
    closing.start()
    try:
        for robot in robots:
            robot.wait_last(DEFAULT, timeout=BOUND)
        assert len(env_module._live_envs) == 1  # one env is closing, the other waits for it
    finally:
        released.set()
        closing.join(30.0)
    assert not closing.is_alive() and not env_module._live_envs


@pytest.mark.parametrize('interruption', [KeyboardInterrupt, SystemExit(143)])
def test_close_all_closes_an_env_whose_close_a_ctrl_c_cut_off_before_it_began(interruption):
    # A Ctrl-C (or SIGTERM: rtgym_ros.stop_signal) lands at a call: at an env's close()
    # itself, before its first line ran. That env has done nothing yet; close_all() calls it
    # again, and closes the others. Every robot was stopped before the first close().
    closed = []
    calls = []

    class Stopping:
        def __init__(self) -> None:
            self._stop_robot = SimpleNamespace(stop_for_good=lambda: calls.append('stop'))

    class Closing(Stopping):
        def __init__(self, interrupted_calls: int = 0) -> None:
            super().__init__()
            self.interrupted_calls = interrupted_calls

        def close(self) -> None:
            calls.append('close')
            if self.interrupted_calls:
                self.interrupted_calls -= 1
                raise interruption
            closed.append(self)
            env_module._live_envs.discard(self)

    class Failing(Stopping):
        calls = 0

        def close(self) -> None:  # a failure of its own is not retried (no endless loop)
            self.calls += 1
            raise RuntimeError('cannot close')

    failing = Failing()
    envs = [Closing(), Closing(interrupted_calls=1), failing, Closing()]
    try:
        for env in envs:
            env_module._live_envs.add(env)
        with pytest.raises((KeyboardInterrupt, SystemExit, RuntimeError)):
            env_module.close_all()
        assert sorted(map(id, closed)) == sorted(id(env) for env in envs if env is not failing)
        assert failing.calls == 1
        assert calls[:4] == ['stop'] * 4 and 'stop' not in calls[4:]
    finally:
        for env in envs:
            env_module._live_envs.discard(env)


def _stepping_at_half(spawn, make_env, **config) -> tuple:
    """Return a robot and an env (watchdog 30 s, far away) that stepped it at 0.5 three times."""
    robot = spawn()
    env = make_env(robot, watchdog_timeout=30.0, **config)
    env.reset()
    for _ in range(3):
        env.step(act(0.5))
    return robot, env


@pytest.fixture
def slow_prepro():
    prepro_functions.SLOW.clear()
    prepro_functions.SLOWING.clear()
    yield prepro_functions
    prepro_functions.SLOW.clear()


@pytest.mark.parametrize('stop', ['close', 'ctrl_c'])
def test_no_action_held_by_the_executor_thread_follows_the_safe_one(spawn, make_env,
                                                                    slow_prepro, ctrl_c, stop):
    # act_prepro_func takes 0.6 s for the action 0.75, on the executor thread: close() (from
    # another thread) or a Ctrl-C sends the safe action while the executor thread holds 0.75.
    # The step() waiting then is step(0.75) itself: it returns once its action went out.
    robot, env = _stepping_at_half(spawn, make_env,
                                   act_prepro_func='prepro_functions:slow_when_told')
    slow_prepro.SLOW.set()
    stopping = []

    def stop_while_held():
        assert slow_prepro.SLOWING.wait(5.0), 'act_prepro_func never slowed down'
        time.sleep(0.1)
        stopping.append(time.time())
        env.close() if stop == 'close' else ctrl_c()

    stopper = threading.Thread(target=stop_while_held)
    stopper.start()
    expected = RuntimeError if stop == 'close' else KeyboardInterrupt
    with pytest.raises(expected):  # close() ends a waiting step() with 'the env is closed'
        env.step(act(0.75))
        env.step(act(0.3))  # if step(0.75) was back before the stop
    stopper.join()
    assert stopping, 'the stop did not happen'
    stopping = stopping[0]
    robot.wait_last(DEFAULT, timeout=BOUND)
    time.sleep(slow_prepro.SLOW_SECONDS + 0.5)  # act_prepro_func has returned since
    after = [c['data'][0] for c in robot.commands() if c['t'] > stopping]
    assert after and set(after) == {DEFAULT}, f'after the stop the robot got {after}'


@pytest.fixture
def clock():
    clock = SimClock(rate=1.0, hz=500.0)
    yield clock
    clock.close()


def _sim_env(**overrides) -> RealTimeEnv:
    config = dict(DEFAULT_CONFIG_DICT, interface=CountingInterface, use_sim_time=True,
                  time_step_duration=0.02, start_obs_capture=0.02, ep_max_length=10 ** 6)
    config.update(overrides)
    return RealTimeEnv(config)


def test_stopped_clock_is_an_error_after_the_stall_bound_and_the_watchdog_acts(clock):
    env = _sim_env(watchdog_timeout=0.3, clock_stall_timeout=0.5, on_clock_stall='error')
    try:
        env.reset()
        for _ in range(5):
            env.step(np.full(2, 0.7, np.float32))
        clock.silent = True
        start = time.monotonic()
        with pytest.raises(TimeoutError, match='/clock has not moved'):
            for _ in range(100):
                env.step(np.full(2, 0.7, np.float32))
        assert time.monotonic() - start < 0.5 + BOUND
        assert env.stalls >= 1  # the wall-clock watchdog fired on the stopped clock
        wait_until(lambda: env.interface.sent[-1].tolist() == [0.0, 0.0], BOUND,
                   'the safe action after the clock stopped')
    finally:
        env.close()


def test_close_from_another_thread_releases_a_step_blocked_on_the_clock(clock):
    env = _sim_env(clock_stall_timeout=0.0)
    try:
        env.reset()
        env.step(np.zeros(2, np.float32))
        clock.silent = True
        errors = []

        def run() -> None:
            try:
                for _ in range(100):
                    env.step(np.zeros(2, np.float32))
            except Exception as error:
                errors.append(error)
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        time.sleep(0.3)
    finally:
        env.close()
    thread.join(BOUND)
    assert not thread.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError), errors
    assert not isinstance(errors[0], (TypeError, AttributeError)), errors


def test_a_stopped_clock_is_logged_once_per_stall_and_the_step_goes_on_after(clock, probe):
    """Log a stopped /clock once per stall (on_clock_stall: warn); step() goes on after it."""
    namespace = f'/clock_stall_{os.getpid()}'
    log = RosoutLog(probe, namespace)
    env = _sim_env(namespace=namespace, clock_stall_timeout=0.5, watchdog_timeout=0.0)
    try:
        env.reset()
        env.step(np.full(2, 0.7, np.float32))
        clock.silent = True
        stepping = _step_in_thread(env, np.full(2, 0.7, np.float32))
        log.wait_for('/clock has not moved', 10.0)
        time.sleep(1.5)  # three more stall bounds
        assert stepping.is_alive(), 'step() returned while /clock stood still'
        stalls = [line for line in log.lines() if '/clock has not moved' in line]
        assert len(stalls) == 1, stalls
        clock.silent = False
        stepping.join(10.0)
        assert not stepping.is_alive(), 'step() did not return once /clock moved'
    finally:
        clock.silent = False
        env.close()
        probe.node.destroy_subscription(log.sub)


def test_close_from_another_thread_releases_a_reset_waiting_for_the_first_clock():
    """
    reset() waiting for a /clock that never comes ends when the env is closed, as step() does.

    Not after ``clock_wait_timeout`` (10 s by default), with an error from the closed context.
    """
    env = _sim_env(clock_wait_timeout=8.0)  # no simulator: /clock never comes
    errors = []

    def run() -> None:
        try:
            env.reset()
        except Exception as error:
            errors.append(error)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(0.3)
    env.close()
    thread.join(BOUND)
    assert not thread.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError), errors
    assert 'closed' in str(errors[0]), errors


def test_a_second_clock_publisher_that_comes_mid_episode_is_reported(clock, probe):
    """Not only at the next reset(): its first message sends the clock back, and that says it."""
    env = _sim_env()
    second = None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            env.reset()
            assert not [w for w in caught if 'publish /clock' in str(w.message)]
            second = SimClock(rate=1.0, start=10.0, hz=100.0)  # far behind the first

            def warned() -> bool:
                env.step(np.full(2, 0.7, np.float32))
                return any('2 nodes publish /clock' in str(w.message) for w in caught)
            wait_until(warned, 10.0, 'the warning about two /clock publishers, mid-episode')
    finally:
        env.close()
        if second is not None:
            second.close()


def test_two_clock_publishers_are_reported(clock, probe):
    second = SimClock(rate=2.0, hz=100.0)
    try:
        wait_until(lambda: probe.node.count_publishers('/clock') >= 2, 10.0,
                   'two /clock publishers')
        # Recorded from the env's start on: the first jump back, on the io thread, may say it
        # before the first reset() does, and it is said once.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            env = _sim_env()
            try:
                def warned() -> bool:
                    env.reset()  # each reset looks: discovery of the second may take a moment
                    return any('2 nodes publish /clock' in str(w.message) for w in caught)
                wait_until(warned, 10.0, 'the warning about two /clock publishers')
            finally:
                env.close()
    finally:
        second.close()


@pytest.fixture
def failing_prepro():
    prepro_functions.FAIL.clear()
    yield prepro_functions.FAIL
    prepro_functions.FAIL.clear()


@pytest.mark.parametrize('call', ['reset', 'step'])
def test_an_obs_prepro_func_that_raises_stops_the_robot(spawn, make_env, failing_prepro, call):
    # obs_prepro_func runs on the user's thread. reset() in mid-episode: the robot still has
    # the last step's action, and reset() disarmed the watchdog. step(): the next time-step
    # runs with the action, the watchdog (30 s here) far away.
    robot, env = _stepping_at_half(spawn, make_env,
                                   obs_prepro_func='prepro_functions:fails_when_told')
    robot.wait_last(0.5)
    failing_prepro.set()
    failed = time.time()
    with pytest.raises(KeyError, match='no such key'):
        env.reset() if call == 'reset' else env.step(act(0.5))
    commands = robot.wait_last(DEFAULT, timeout=BOUND)
    assert commands[-1]['t'] - failed < BOUND
    time.sleep(3 * T)  # nothing follows it
    assert robot.values()[-1] == DEFAULT
