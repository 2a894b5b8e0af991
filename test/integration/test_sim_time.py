"""use_sim_time: the env follows /clock (faster, paused, jumping back) and never hangs."""

import threading
import time
from typing import Callable

from diagnostic_msgs.msg import DiagnosticArray
from dummy_interfaces import CountingInterface
from emulated_robots import next_name, write_config
import gymnasium as gym
import numpy as np
import pytest
import rclpy
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.signals import SignalHandlerOptions
from ros_probe import Probe
from rtgym_ros import DEFAULT_CONFIG_DICT, RealTimeEnv
from sensor_msgs.msg import JointState
from sim_clock import SimClock
from std_msgs.msg import Bool, Float64

T = 0.02
LONG_STEP = 0.5  # s: a step() made just after the last returned is in time, whatever the load
ZERO = np.zeros(2, np.float32)


@pytest.fixture
def sim_clock():
    clocks = []

    def make(**kwargs):
        clocks.append(SimClock(**kwargs))
        return clocks[-1]

    yield make
    for clock in clocks:
        clock.close()


@pytest.fixture
def sim_env():
    envs = []

    def make(**overrides):
        config = dict(DEFAULT_CONFIG_DICT, interface=CountingInterface, use_sim_time=True,
                      time_step_duration=T, start_obs_capture=T, ep_max_length=100000,
                      time_step_timeout_factor=5.0)
        config.update(overrides)
        envs.append(RealTimeEnv(config))
        return envs[-1]

    yield make
    for env in envs:
        env.close()


def step_wall_times(env, count: int, *, timeout: float = 10.0) -> list[float]:
    """Wall time of each of ``count`` steps, run in a thread so a hang fails the test instead."""
    finished = threading.Event()
    ends = [time.perf_counter()]

    def run():
        for _ in range(count):
            env.step(ZERO)
            ends.append(time.perf_counter())
        finished.set()

    threading.Thread(target=run, daemon=True).start()
    assert finished.wait(timeout), f'{count} steps did not complete within {timeout} s'
    return list(np.diff(ends))


def wall_time_of_steps(env, count: int, *, timeout: float = 10.0) -> float:
    return sum(step_wall_times(env, count, timeout=timeout))


@pytest.mark.parametrize('rate', [1.0, 2.0])
def test_steps_follow_sim_speed(sim_clock, sim_env, rate):
    clock = sim_clock(rate=rate)
    env = sim_env()
    env.reset()
    env.step(ZERO)
    # The median step: one stall of a loaded machine (the test's own /clock thread starved)
    # costs one step's time, not the verdict.
    per_step = float(np.median(step_wall_times(env, 40)))
    expected = T / rate
    assert expected * 0.7 < per_step < expected * 1.6, per_step
    sim_start = env.now()
    assert sim_start > 999.0  # the node reads /clock, not the wall clock
    assert clock.rate == rate


def test_twice_the_sim_speed_is_about_twice_as_fast_side_by_side(sim_clock, sim_env):
    clock = sim_clock(rate=1.0)
    env = sim_env()
    env.reset()
    env.step(ZERO)
    at_1x = wall_time_of_steps(env, 30)
    clock.rate = 2.0
    env.step(ZERO)
    at_2x = wall_time_of_steps(env, 30)
    assert 1.5 < at_1x / at_2x < 2.6


def test_paused_clock_holds_step_until_resumed(sim_clock, sim_env):
    clock = sim_clock(rate=1.0)
    env = sim_env()
    env.reset()
    env.step(ZERO)
    clock.paused = True
    time.sleep(0.05)
    returned = threading.Event()
    worker = threading.Thread(target=lambda: (env.step(ZERO), env.step(ZERO),
                                              returned.set()))
    worker.start()
    assert not returned.wait(0.5)  # no simulated time passes: the env waits
    clock.paused = False
    assert returned.wait(5.0)
    worker.join(5.0)


def test_clock_jump_back_restarts_schedule_without_hanging(sim_clock, sim_env):
    clock = sim_clock(rate=1.0)
    env = sim_env()
    env.reset()
    for _ in range(3):
        env.step(ZERO)
    clock.jump(-500.0)  # the simulator was reset
    wall = wall_time_of_steps(env, 10)
    assert wall < 2.0  # 10 steps of 20 ms: no wait for the old time to come back
    assert env.now() < 600.0


class RewindingReset(CountingInterface):
    """Its reset takes sim time back when asked, as a simulator's reset may (Gazebo's)."""

    def __init__(self, clock: SimClock) -> None:
        super().__init__()
        self._clock = clock

    def reset(self, seed=None, options=None):
        if options and options.get('rewind'):
            self._clock.jump(-300.0)
            time.sleep(0.2)  # /clock says it meanwhile: the env follows within its reset
        return super().reset(seed, options)


def log_after_a_flush(capfd, env, text: str) -> str:
    """Step until the env's log (written once a second) holds ``text``, or 3 s; return it."""
    err, deadline = '', time.monotonic() + 3.0
    while text not in err and time.monotonic() < deadline:
        wall_time_of_steps(env, 10)
        err += capfd.readouterr().err
    return err


def test_a_jump_back_is_said_unless_a_reset_asked_for_it(sim_clock, sim_env, capfd):
    clock = sim_clock(rate=1.0)
    env = sim_env(interface=RewindingReset, interface_kwargs={'clock': clock})
    env.reset()
    wall_time_of_steps(env, 5)
    for _ in range(2):  # each takes sim time back by 300 s, as asked
        env.reset(options={'rewind': True})
        wall_time_of_steps(env, 5)
    assert env.now() < 500.0, 'the resets did not take the clock back'
    err = log_after_a_flush(capfd, env, 'clock jumped')
    assert 'clock jumped' not in err and 'clock went back' not in err, err
    clock.jump(-100.0)  # no reset asked for it: a simulator restarted, or was reset by another
    err = log_after_a_flush(capfd, env, 'schedule moved with it')
    assert 'clock jumped by -99.9' in err and 'schedule moved with it' in err, err


def test_a_clock_message_before_time_zero_is_ignored_and_logged(sim_clock, sim_env, capfd):
    clock = sim_clock(rate=1.0)
    env = sim_env()
    env.reset()
    for _ in range(10):
        clock.publish_once(-1)  # rclpy's Time cannot hold it
        env.step(ZERO)
    assert wall_time_of_steps(env, 5) < 5.0
    assert 'ignored a time before 0 (-1 s, 0 ns)' in capfd.readouterr().err


def test_a_clock_coarser_than_the_elasticity_is_named_at_time_outs(sim_clock, sim_env, capfd):
    sim_clock(rate=1.0, hz=30.0)  # /clock every 33 ms of sim time; T = 20 ms, elasticity 20 ms
    env = sim_env(time_step_timeout_factor=1.0)
    env.reset()
    step_wall_times(env, 30)
    assert env.timeouts > 0
    deadline = time.monotonic() + 5.0
    err = ''
    while '/clock moves ' not in err and time.monotonic() < deadline:
        time.sleep(0.2)  # the env's log is written once a second
        err += capfd.readouterr().err
    assert '/clock moves ' in err and 'time-steps time out by the clock, not the agent' in err, err


def test_reset_waits_for_the_first_clock_message(sim_env):
    env = sim_env(clock_wait_timeout=0.3)
    with pytest.raises(TimeoutError, match=r'no /clock message arrived within 0\.3 s '
                       r'\(clock_wait_timeout; domain \d+\)'):
        env.reset()


def test_a_due_executor_turn_waits_for_no_room_under_sim_time(sim_clock, sim_env):
    # Deadlines on /clock are ROS timers waited for in the executor's loop; steps chain only
    # when /clock is past them, and no wall-time deadline has room for the turn.
    sim_clock(rate=1.0)
    runner = sim_env()._runner
    assert runner._turn_patience() == 0.0
    wall = RealTimeEnv(dict(DEFAULT_CONFIG_DICT, interface=CountingInterface))
    try:
        assert wall._runner._turn_patience() > 1.0  # wall time: room comes at 250 Hz or less
    finally:
        wall.close()


# -- ros-v1 under sim time: sensors stamped by a simulator, a /clock that moves under them -----


class SimSensor:
    """A JointState stamped with the simulator's time, and a termination topic: a simulator."""

    def __init__(self, clock: SimClock) -> None:
        self.ns = f'/sim_time_{next_name()}'
        self._clock = clock
        self._context = Context()
        rclpy.init(context=self._context, signal_handler_options=SignalHandlerOptions.NO)
        self._node = Node(f'sim_sensor_{next_name()}', context=self._context)
        self.joints = self._node.create_publisher(JointState, f'{self.ns}/joint_states', 10)
        self.done = self._node.create_publisher(Bool, f'{self.ns}/done', 10)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            stamp = self._clock.sim_time  # what the simulator's /clock says, or is about to
            message = JointState(name=['j0'], position=[0.5])
            message.header.stamp.sec = int(stamp)
            message.header.stamp.nanosec = int((stamp - int(stamp)) * 1e9)
            self.joints.publish(message)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self._node.destroy_node()
        self._context.try_shutdown()


@pytest.fixture
def sim_sensor():
    made = []

    def make(clock: SimClock) -> SimSensor:
        made.append(SimSensor(clock))
        return made[-1]

    yield make
    for sensor in made:
        sensor.close()


@pytest.fixture
def ros_env(tmp_path):
    envs = []

    def make(namespace: str, **changes) -> gym.Env:
        joints = {'topic': 'joint_states', 'type': 'sensor_msgs/msg/JointState',
                  'joint_names': ['j0'], 'fields': ['position'], 'low': [-3.0],
                  'high': [3.0], 'max_age': 0.1, 'on_stale': 'flag'}
        joints.update(changes.pop('joints', {}))
        params = {'time_step_duration': 0.05, 'start_obs_capture': 0.05, 'reset_timeout': 10.0,
                  'ep_max_length': 1000,
                  'actions': {'names': ['cmd'], 'cmd': {
                      'topic': 'command', 'type': 'std_msgs/msg/Float64MultiArray',
                      'field': 'data', 'low': [-1.0], 'high': [1.0]}},
                  'observations': {'names': ['joints'], 'joints': joints}}
        params.update(changes)
        path = write_config(tmp_path / f'robot{len(envs)}.yaml', params)
        envs.append(gym.make('rtgym_ros/ros-v1', robot_config=str(path), namespace=namespace,
                             use_sim_time=True, disable_env_checker=True))
        return envs[-1]

    yield make
    for env in envs:
        env.close()


def test_first_reset_reads_sensors_on_sim_time_not_before_the_first_clock(
        sim_clock, sim_sensor, ros_env):
    """
    The first reset() reads its observation on sim time, once /clock came (rclpy: time 0 is unset).

    A simulator's sensors may come before its first /clock (discovery, a latched topic): read
    against a clock still at 0 they look 1000 s ahead, and ``on_stale: error`` refuses them.
    """
    clock = sim_clock(rate=1.0)
    clock.silent = True  # the simulator's /clock is not heard yet
    sensor = sim_sensor(clock)
    env = ros_env(sensor.ns, joints={'on_stale': 'error'})
    heard = threading.Timer(1.0, setattr, (clock, 'silent', False))
    heard.daemon = True
    heard.start()
    _, info = env.reset()
    assert 'future_stamps' not in info and info['stale'] == [], info
    assert -0.05 < info['obs_ages']['joints'] < 0.1, info
    assert info['capture_time'] > 999.0, info


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f'timed out after {timeout} s waiting for {what}'
        time.sleep(0.01)


def env_with_a_done_topic(sim_clock, sim_sensor, ros_env, **changes) -> tuple:
    """Return a 1x /clock, its sensor, and an env reset with ``done`` matched both ways."""
    clock = sim_clock(rate=1.0)
    sensor = sim_sensor(clock)
    env = ros_env(sensor.ns, termination={'topic': 'done'}, **changes)
    env.reset()
    subscription, = (sub for sub in env.unwrapped._runtime.io_node.subscriptions
                     if sub.topic_name == f'{sensor.ns}/done')
    wait_for(lambda: sensor.done.get_subscription_count() and subscription.get_publisher_count(),
             10.0, 'the done topic to match both ways')
    return clock, sensor, env


def assert_a_true_on_done_ends_the_episode(sensor, env) -> None:
    sensor.done.publish(Bool(data=True))
    for _ in range(5):
        if env.step(np.zeros(1, np.float32))[2]:
            return
    raise AssertionError('the true on the termination topic ended no episode')


def test_a_termination_right_after_a_simulator_reset_between_steps_ends_the_episode(
        sim_clock, sim_sensor, ros_env):
    """
    A ``true`` that comes after /clock went back (a reset between steps) counts, as any other.

    Reward and termination messages count from the previous capture on: a capture stamped in
    the old time base must not hide what arrives in the new one.
    """
    clock, sensor, env = env_with_a_done_topic(sim_clock, sim_sensor, ros_env)
    for _ in range(3):
        env.step(np.zeros(1, np.float32))
    clock.jump(-990.0)  # the simulator was reset (Gazebo's /reset_simulation)
    wait_for(lambda: env.unwrapped.now() < 500.0, 5.0, 'the env to follow /clock back')
    assert_a_true_on_done_ends_the_episode(sensor, env)


def test_data_after_a_simulator_reset_between_steps_is_newer_than_the_action(
        sim_clock, sim_sensor, ros_env):
    """
    The action sent before /clock went back is older than anything stamped after it.

    Else ``newer_than_action`` waits out its bound and says false for the first capture of the
    new time base, although its data came after the action.
    """
    clock = sim_clock(rate=1.0)
    sensor = sim_sensor(clock)
    env = ros_env(sensor.ns, newer_than_action=True, newer_than_action_timeout=0.5,
                  time_step_duration=0.1, start_obs_capture=0.05)
    env.reset()
    for _ in range(3):
        env.step(np.zeros(1, np.float32))
    clock.jump(-990.0)  # the simulator was reset within this time-step
    info = env.step(np.zeros(1, np.float32))[4]
    assert info['newer_than_action'] == {'joints': True}, info
    assert info['capture_time'] - info['action_time'] < 0.2, info


def env_newer_than_action_one_step_on(sim_clock, sim_sensor, ros_env, *,
                                      time_step_duration: float = 0.1) -> tuple:
    """
    Return a 1x /clock, an env under ``newer_than_action`` (0.5 s) and its count of sends.

    The env is reset and one step on, and that step's action went out (under sim time the
    executor thread sends it after step() returned).
    """
    clock = sim_clock(rate=1.0)
    sensor = sim_sensor(clock)
    env = ros_env(sensor.ns, newer_than_action=True, newer_than_action_timeout=0.5,
                  time_step_duration=time_step_duration, start_obs_capture=0.05)
    sends = counted_sends(env.unwrapped.interface)
    env.reset()
    env.step(np.zeros(1, np.float32))
    wait_for(lambda: sends() == 2, 5.0, "the first step's action sent")
    return clock, env, sends


def counted_sends(interface) -> Callable[[], int]:
    """Count the interface's sends, each once its action's time is set."""
    publish, sent = interface._publish, []

    def publish_counted(control):
        result = publish(control)
        sent.append(control)
        return result
    interface._publish = publish_counted
    return lambda: len(sent)


def test_an_action_sent_between_the_clock_going_back_and_its_jump_callback_stays_put(
        sim_clock, sim_sensor, ros_env):
    """
    The callback runs after the clock was set: an action sent in between is of the new base.

    Under load the executor thread sends one there; moving it again put it a reset's length
    in the past, and ``newer_than_action`` then waited out its bound.
    """
    clock, env, sends = env_newer_than_action_one_step_on(sim_clock, sim_sensor, ros_env)
    interface = env.unwrapped.interface
    jump_back_and_wait_for_its_callback(clock, interface)
    env.step(np.zeros(1, np.float32))  # an action of the new base, sent after step() returned
    wait_for(lambda: sends() == 3, 5.0, 'the action sent')
    sent = interface.last_action_time
    interface.on_clock_jump(-990.0)  # that jump's callback, had the io thread been held up
    assert interface.last_action_time == sent
    info = env.step(np.zeros(1, np.float32))[4]
    assert info['newer_than_action'] == {'joints': True}, info
    assert 0.0 <= info['capture_time'] - info['action_time'] < 0.2, info


def jump_back_and_wait_for_its_callback(clock: SimClock, interface) -> None:
    """Send /clock 990 s back; return once the env's jump callback ran (on its io thread)."""
    jumps = interface._jumps_back
    clock.jump(-990.0)
    wait_for(lambda: interface._jumps_back > jumps, 5.0, 'the jump callback')


def test_an_action_time_read_just_before_the_clock_went_back_is_not_left_in_the_old_base(
        sim_clock, sim_sensor, ros_env):
    """
    The executor thread reads the action's time, then the io thread runs the jump callback.

    The callback moves times of the old base; one written after it stayed there, and
    ``newer_than_action`` waited out its bound for data that came after the action.
    """
    # Under sim time each step's action is sent on the executor thread after step() returned.
    # The reset's action goes out before the patch; the patch is then for the first step's,
    # whose time-step (long: the second step() comes within it) holds the jump.
    clock = sim_clock(rate=1.0)
    sensor = sim_sensor(clock)
    env = ros_env(sensor.ns, newer_than_action=True, newer_than_action_timeout=0.5,
                  time_step_duration=LONG_STEP, start_obs_capture=0.05)
    env.reset()
    interface = env.unwrapped.interface
    wait_for(lambda: np.isfinite(interface.last_action_time), 5.0, "the reset's action sent")
    publisher, = interface._publishers
    publish, now = publisher.publish, interface.now

    def now_then_jump() -> float:  # the read of the action's time, then the jump
        del interface.now
        read = now()
        jump_back_and_wait_for_its_callback(clock, interface)
        return read

    def publish_once(message) -> None:
        del publisher.publish
        publish(message)
        interface.now = now_then_jump
    publisher.publish = publish_once
    env.step(np.zeros(1, np.float32))  # its action takes the patch
    info = env.step(np.zeros(1, np.float32))[4]
    assert info['capture_time'] < 500.0, info  # the jump came within the first step's
    assert info['newer_than_action'] == {'joints': True}, info
    assert 0.0 <= info['capture_time'] - info['action_time'] < 0.2, info


def test_a_termination_after_a_jump_back_during_a_capture_ends_the_episode(
        sim_clock, sim_sensor, ros_env):
    """
    The clock goes back while the executor thread captures (a simulator reset under load).

    The capture's time is of the old base: kept as the last capture, it hid every reward and
    termination of the new base, as all were older than it.
    """
    # Captured at the step's end: the patch, made once step() returned, is in time for the
    # capture of the time-step that step() started (on the executor thread), whatever the load.
    clock, sensor, env = env_with_a_done_topic(sim_clock, sim_sensor, ros_env,
                                               time_step_duration=LONG_STEP,
                                               start_obs_capture=LONG_STEP)
    env.step(np.zeros(1, np.float32))
    interface = env.unwrapped.interface
    read = interface._read_slots

    def jump_then_read(info: dict) -> dict:  # the capture's time is taken: now the jump
        del interface._read_slots
        jump_back_and_wait_for_its_callback(clock, interface)
        return read(info)
    interface._read_slots = jump_then_read
    assert env.step(np.zeros(1, np.float32))[4]['capture_time'] > 500.0
    assert_a_true_on_done_ends_the_episode(sensor, env)


def test_a_reward_that_came_after_a_jump_back_during_a_capture_counts_once(
        sim_clock, sim_sensor, ros_env, probe):
    """A reward the capture the jump came within took is not taken again by the next one."""
    clock = sim_clock(rate=1.0)
    sensor = sim_sensor(clock)
    env = ros_env(sensor.ns, reward={'topic': 'reward'}, time_step_duration=LONG_STEP,
                  start_obs_capture=LONG_STEP)  # the patch below is in time: see above
    publisher = probe.node.create_publisher(Float64, f'{sensor.ns}/reward', 10)
    try:
        env.reset()
        wait_for(lambda: publisher.get_subscription_count(), 10.0, 'the reward to match')
        env.step(np.zeros(1, np.float32))
        interface = env.unwrapped.interface
        read, reward = interface._read_slots, interface._signals['reward']

        def jump_and_reward_then_read(info: dict) -> dict:
            del interface._read_slots
            jump_back_and_wait_for_its_callback(clock, interface)
            publisher.publish(Float64(data=7.0))
            wait_for(lambda: reward.value == 7.0, 5.0, 'the reward to come')
            return read(info)
        interface._read_slots = jump_and_reward_then_read
        _, taken, *_, info = env.step(np.zeros(1, np.float32))
        assert taken == 7.0, info
        _, again, *_, info = env.step(np.zeros(1, np.float32))
        assert again == 0.0 and info['reward_missing'], (again, info)
    finally:
        probe.node.destroy_publisher(publisher)


def test_a_clock_that_goes_back_a_little_keeps_the_period_as_an_rclpy_timer_does(
        probe, sim_clock, sim_env):
    """
    /clock going back 2 ms now and then (jitter, not a reset) leaves a time-step T long.

    rcl moves a ROS-time timer on a jump back only when the clock went back before the
    timer's last call; an rclpy timer of period T on the same /clock keeps firing every T.
    The env's schedule moved by every jump back, so each step lost the jitter.
    """
    clock = sim_clock(rate=1.0)
    reference = Node(f'sim_time_reference_{next_name()}', context=probe.context,
                     parameter_overrides=[Parameter('use_sim_time', Parameter.Type.BOOL, True)])
    ticks = []
    timer = reference.create_timer(T, lambda: ticks.append(reference.get_clock().now()))
    probe.executor.add_node(reference)
    env = sim_env()
    wait_for(lambda: reference.get_clock().now().nanoseconds > 999e9 and ticks, 10.0,
             'the reference timer to run on /clock')
    stop = threading.Event()

    def jitter() -> None:
        while not stop.wait(0.005):
            back = clock.sim_time - 0.002
            clock.publish_once(int(back), int((back - int(back)) * 1e9))
    thread = threading.Thread(target=jitter, daemon=True)
    try:
        env.reset()
        env.step(ZERO)
        thread.start()
        env.step(ZERO)
        start, ticked = env.now(), len(ticks)
        step_wall_times(env, 50)
        per_step = (env.now() - start) / 50
        per_tick = (env.now() - start) / (len(ticks) - ticked)
    finally:
        stop.set()
        thread.join(1.0)
        probe.executor.remove_node(reference)
        reference.destroy_timer(timer)
        reference.destroy_node()
    assert per_tick == pytest.approx(T, rel=0.1)  # rclpy: the period stays T
    assert per_step == pytest.approx(T, rel=0.1)


def test_diagnostics_go_on_while_the_simulators_clock_stands_still(sim_clock, sim_sensor,
                                                                   ros_env):
    """A paused simulator is what a monitor must see reported, not a status gone stale."""
    clock = sim_clock(rate=1.0)
    sensor = sim_sensor(clock)
    monitor = Probe()  # a node of its own, as a monitor is
    statuses: list = []
    monitor.node.create_subscription(
        DiagnosticArray, '/diagnostics', lambda array: statuses.extend(
            status for status in array.status if status.hardware_id.startswith(sensor.ns)), 50)
    try:
        env = ros_env(sensor.ns, diagnostics_period=0.2)
        env.reset()
        wait_for(lambda: statuses, 20.0, 'a first status on /diagnostics')
        clock.silent = True  # paused: /clock stands still
        time.sleep(0.3)
        before = len(statuses)
        time.sleep(1.0)
        assert len(statuses) - before >= 3, f'{len(statuses) - before} statuses in 1 s'
    finally:
        monitor.close()
