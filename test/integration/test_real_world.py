"""
Sensors and simulators as ROS really delivers them, against ``rtgym_ros/ros-v1``.

Plain publishers on the probe's node (its own context, over real DDS) play the robot, and a
real ``sim_robot`` process plays a Gazebo-style simulator whose reset takes sim time back.
"""

from contextlib import contextmanager, nullcontext
import os
import re
import threading
import time
from typing import Any, Callable, Iterator

from emulated_robots import next_name, write_config
from geometry_msgs.msg import TwistStamped
import gymnasium as gym
import numpy as np
import pytest
import rclpy
from rclpy.context import Context
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.qos import DurabilityPolicy, qos_profile_sensor_data, QoSProfile, ReliabilityPolicy
from rclpy.serialization import serialize_message
from rclpy.service import Service
from rclpy.signals import SignalHandlerOptions
from rclpy.subscription import Subscription
from rclpy.task import Future
from rclpy.time import Time
from ros_probe import RosoutLog, SimProcess, wait_until
from rosgraph_msgs.msg import Clock
import rtgym_ros  # noqa: F401
from rtgym_ros.msgconv.fields import message_stamp
from rtgym_ros.msgconv.joint_state_cdr import JointStateFrame
from rtgym_ros.robot.interface import ACTION_PUBLISH_VARIABLE, JOINT_STATE_TAKE_VARIABLE
from rtgym_ros.robot.services import RETRY_PERIOD
from rtgym_ros.ros.graph import describe_service
from sensor_msgs.msg import JointState
from sim_clock import SimClock
from std_msgs.msg import Bool, Float64, Float64MultiArray, String
from std_srvs.srv import Empty, Trigger
from trajectory_msgs.msg import JointTrajectory

T = 0.05
LONE_DOMAIN = 211  # no run of this suite uses it (theirs are 1-100)


class Streams:
    """Publishers on the probe's node, each on a timer; the test changes what they send."""

    def __init__(self, probe) -> None:
        self._probe = probe
        self.ns = f'/real_world_{next_name()}'
        self.log = RosoutLog(probe, self.ns)
        self._made: list[tuple[Any, Any]] = []
        self.closing = False

    def joint_states(self, names: list[str], positions: list[float], *, rate: float,
                     stamp_offset: float = 0.0, efforts: list[float] | None = None,
                     stamped: bool = True, qos: Any = 10,
                     clock: Callable[[], float] | None = None, frame_id: str = '',
                     lock: Any = None) -> dict:
        """
        Publish JointState ``names`` at ``rate`` Hz (no efforts: left empty); steer it.

        ``clock``: the stamps' time base in seconds (a simulator's); the probe's clock if None.
        ``lock``: held while a message's values and stamp are read (a reset changes both).
        """
        publisher = self._probe.node.create_publisher(JointState, f'{self.ns}/joint_states',
                                                      qos)
        state = {'positions': positions, 'on': True, 'stamp_offset': stamp_offset}

        def publish() -> None:
            with lock or nullcontext():
                if not state['on'] or self.closing:
                    return
                positions = list(state['positions'])
                stamp = (self._probe.node.get_clock().now().nanoseconds * 1e-9
                         if clock is None else clock())
            message = JointState(name=names, position=positions, effort=efforts or [])
            message.header.frame_id = frame_id
            if stamped:  # else a zero stamp: the env stamps it on arrival
                stamp += state['stamp_offset']
                message.header.stamp.sec = int(stamp)
                message.header.stamp.nanosec = int((stamp - int(stamp)) * 1e9)
            publisher.publish(message)
        self._made.append((publisher, self._probe.node.create_timer(1.0 / rate, publish)))
        return state

    def publisher(self, msg_type: type, topic: str, qos: Any = 10) -> Any:
        publisher = self._probe.node.create_publisher(msg_type, f'{self.ns}/{topic}', qos)
        self._made.append((publisher, None))
        return publisher

    def subscription(self, msg_type: type, topic: str, qos: Any) -> None:
        self._made.append((self._probe.node.create_subscription(
            msg_type, f'{self.ns}/{topic}', lambda message: None, qos), None))

    def service(self, srv_type: type, name: str) -> None:
        self._made.append((self._probe.node.create_service(
            srv_type, f'{self.ns}/{name}', lambda request, response: response), None))

    def close(self) -> None:
        self.closing = True  # a timer callback already under way must not publish any more
        self._probe.node.destroy_subscription(self.log.sub)
        destroy = {Publisher: self._probe.node.destroy_publisher,
                   Subscription: self._probe.node.destroy_subscription,
                   Service: self._probe.node.destroy_service}
        for entity, timer in self._made:
            if timer is not None:
                self._probe.node.destroy_timer(timer)
            destroy[type(entity)](entity)


@pytest.fixture
def probe(fresh_probe):
    """Each test has a probe of its own: envs come and go here (conftest's ``fresh_probe``)."""
    return fresh_probe


@pytest.fixture
def streams(probe):
    made = Streams(probe)
    yield made
    made.close()


def params(joint_names: list[str], **changes: Any) -> dict:
    joints = {'topic': 'joint_states', 'type': 'sensor_msgs/msg/JointState',
              'joint_names': joint_names, 'fields': ['position'],
              'low': [-3.0] * len(joint_names), 'high': [3.0] * len(joint_names),
              'max_age': 0.1, 'on_stale': 'flag'}
    joints.update(changes.pop('joints', {}))
    # clock_wait_timeout: a simulator started with the env may be discovered slowly (loaded).
    result = {'time_step_duration': T, 'start_obs_capture': T, 'reset_timeout': 10.0,
              'clock_wait_timeout': 30.0,
              'actions': {'names': ['cmd'], 'cmd': {
                  'topic': 'command', 'type': 'std_msgs/msg/Float64MultiArray',
                  'field': 'data', 'low': [-1.0], 'high': [1.0]}},
              'observations': {'names': ['joints'], 'joints': joints}}
    result.update(changes)
    return result


@pytest.fixture
def make_env(tmp_path):
    envs = []

    def make(namespace: str, config: dict) -> gym.Env:
        path = write_config(tmp_path / f'robot{len(envs)}.yaml', config)
        envs.append(gym.make('rtgym_ros/ros-v1', robot_config=str(path), namespace=namespace,
                             disable_env_checker=True))
        return envs[-1]

    yield make
    for env in envs:
        env.close()


def reset_error_once_matched(env: gym.Env, *, within: float = 20.0,
                             unmatched: str = 'no message on') -> str:
    """Return the TimeoutError of reset() once it no longer says ``unmatched`` (discovery)."""
    deadline = time.monotonic() + within
    while True:
        with pytest.raises(TimeoutError) as error:
            env.reset()
        if unmatched not in str(error.value) or time.monotonic() > deadline:
            return str(error.value)


def steps(env: gym.Env, count: int) -> list[tuple]:
    return [env.step(np.zeros(1, np.float32)) for _ in range(count)]


# -- several publishers on one JointState topic ------------------------------------------------


def env_subscription(env: gym.Env, topic: str) -> Any:
    """Return the env's subscription to ``topic`` (on its io node)."""
    subscriptions = env.unwrapped._runtime.io_node.subscriptions
    found = [sub for sub in subscriptions if sub.topic_name == topic]
    assert found, f'no subscription to {topic}: {[sub.topic_name for sub in subscriptions]}'
    return found[0]


def test_joint_states_of_an_arm_and_a_gripper_on_one_topic(streams, make_env):
    arm = streams.joint_states(['j0'], [1.0], rate=100.0)
    gripper = streams.joint_states(['g'], [2.0], rate=30.0)
    env = make_env(streams.ns, params(['j0', 'g']))
    obs, info = env.reset()
    results = steps(env, 10)
    assert results[-1][0]['joints'].tolist() == [1.0, 2.0]
    assert not any(info['stale'] for *_, info in results[3:]), [r[4] for r in results]
    arm['positions'] = [1.5]
    gripper['on'] = False  # the gripper's driver dies: its joint, and so the slot, go stale
    later = steps(env, 10)
    assert later[-1][0]['joints'].tolist() == [1.5, 2.0]
    assert later[-1][4]['stale'] == ['joints'] and later[-1][4]['obs_ages']['joints'] > 0.1


@pytest.mark.parametrize('take', ['serialized', 'message'])
def test_joint_states_read_the_same_whichever_take(streams, make_env, monkeypatch, take):
    # A driver's names in its own order, a joint more, efforts given, NaN and a stamp field:
    # read from the raw bytes (joint_state_cdr.decode) as from rclpy's message.
    monkeypatch.setenv(JOINT_STATE_TAKE_VARIABLE, take)
    streams.joint_states(['x', 'j1', 'j0'], [0.25, -1.5, np.nan], efforts=[7.0, 8.0, 9.0],
                         rate=100.0, stamp_offset=-1.0, frame_id='base')
    env = make_env(streams.ns, params(['j0', 'j1'], joints={
        'fields': ['position', 'effort', 'header.stamp.sec'], 'low': [-3.0] * 4 + [0.0],
        'high': [3.0] * 2 + [10.0] * 2 + [4e9]}))
    [slot] = env.unwrapped.interface.slots
    env.reset()
    obs, *_, info = steps(env, 3)[-1]
    values = obs['joints'].tolist()
    assert np.isnan(values[0]) and values[1:4] == [-1.5, 9.0, 8.0], values
    message, stamp = slot.snapshot()
    assert values[4] == pytest.approx(int(stamp), abs=256.0)  # float32 of the seconds
    assert stamp == message_stamp(message) < time.time() - 0.5  # its header's, not arrival's
    assert info['out_of_bounds'] == ['joints'], info  # the NaN
    assert type(message) is (JointStateFrame if take == 'serialized' else JointState), message
    assert message.header.frame_id == 'base'


def test_an_unknown_joint_state_take_is_refused(streams, make_env, monkeypatch):
    monkeypatch.setenv(JOINT_STATE_TAKE_VARIABLE, 'zero_copy')
    refused = f'{JOINT_STATE_TAKE_VARIABLE} must be one of .*serialized.*message.*zero_copy'
    with pytest.raises(ValueError, match=refused):
        make_env(streams.ns, params(['j0']))


@pytest.mark.parametrize('take', ['serialized', 'message'])
def test_a_joint_state_that_cannot_be_read_is_dropped_as_the_rmw_drops_it(
        streams, make_env, monkeypatch, take):
    # rmw_fastrtps drops a message it cannot deserialize on a message take; the raw take must
    # too, and go on: its thread is the env's only way to the robot's state.
    monkeypatch.setenv(JOINT_STATE_TAKE_VARIABLE, take)
    state = streams.joint_states(['j0'], [0.5], rate=100.0)
    bad = streams.publisher(JointState, 'joint_states')
    env = make_env(streams.ns, params(['j0']))
    env.reset()
    corrupt = bytearray(serialize_message(JointState(name=['j0'], position=[9.0])))
    names = corrupt.index(b'\x01\x00\x00\x00\x03\x00\x00\x00j0\x00')  # count, 'j0'
    corrupt[names:names + 4] = b'\xf0\xff\xff\xff'  # more names than bytes follow
    said = 'a message on joint_states that cannot be read was dropped'
    sent = []

    def dropped() -> bool:  # best effort, and matched by discovery in its own time: repeat
        bad.publish(bytes(corrupt))
        sent.append(time.sleep(0.05))
        if take == 'message':  # the rmw drops it without a word
            return len(sent) >= 40
        return any(said in line for line in streams.log.lines())
    wait_until(dropped, 15.0, lambda: f'{said!r} in /rosout, got {streams.log.lines()}')
    state['positions'] = [0.25]  # the slot goes on with the next messages
    for _ in range(40):
        obs, *_ = env.step(np.zeros(1, np.float32))
        if obs['joints'].tolist() == [0.25]:
            break
    assert obs['joints'].tolist() == [0.25]


def test_a_ros_thread_that_dies_ends_the_env_and_the_robot_keeps_the_safe_action(
        streams, make_env, monkeypatch):
    # Any callback of the io thread that raises ends that thread: no data comes any more, so
    # the env must not go on stepping the robot blind on the last observation.
    from rtgym_ros.robot import slots
    failing = threading.Event()
    store = slots.Slot.store

    def store_or_fail(self, message):
        if failing.is_set():
            raise RuntimeError('injected: a callback of the io thread failed')
        store(self, message)
    monkeypatch.setattr(slots.Slot, 'store', store_or_fail)
    streams.joint_states(['j0'], [0.5], rate=100.0)
    sent = []
    probe_node = streams._probe.node
    commands = probe_node.create_subscription(
        Float64MultiArray, f'{streams.ns}/command',
        lambda message: sent.append(message.data[0]), 10)
    try:
        env = make_env(streams.ns, params(['j0']))
        env.reset()
        for _ in range(3):
            env.step(np.full(1, 0.75, np.float32))
        failing.set()
        with pytest.raises(RuntimeError, match=r'thread rtgym_ros:.*_io failed: .*injected.*'
                                               'safe action and gets no other: close the env'):
            for _ in range(40):
                env.step(np.full(1, 0.75, np.float32))
        with pytest.raises(RuntimeError, match='_io failed'):
            env.step(np.full(1, 0.75, np.float32))
        wait_until(lambda: sent and sent[-1] == 0.0, 5.0, lambda: f'the safe action, got {sent}')
        time.sleep(0.3)  # time for an action that would still come
        # reset()'s default action, the agent's, then the safe action and nothing else
        assert re.fullmatch('s*a+s+', ''.join('a' if value == 0.75 else 's' for value in sent)) \
            and set(sent) <= {0.0, 0.75}, sent
    finally:
        probe_node.destroy_subscription(commands)


def test_the_merged_joint_state_carries_the_header_of_its_oldest_part(streams, make_env):
    # joint_state_broadcaster and a gripper driver on /joint_states: the value the slot keeps
    # (and a reader of its header fields sees) is stamped as the slot is, by its oldest part.
    streams.joint_states(['j0'], [1.0], rate=100.0, frame_id='base_link')
    gripper = streams.joint_states(['g'], [2.0], rate=30.0, frame_id='base_link')
    env = make_env(streams.ns, params(['j0', 'g'], joints={
        'fields': ['position', 'header.stamp.sec'], 'low': [-3.0, -3.0, 0.0],
        'high': [3.0, 3.0, 4e9]}))
    [slot] = env.unwrapped.interface.slots

    def check() -> JointState:
        message, stamp = slot.snapshot()
        assert message.header.frame_id == 'base_link', message
        assert message_stamp(message) == stamp, (message.header, stamp)
        return message
    env.reset()
    for obs, *_ in steps(env, 5):
        assert obs['joints'][2] == pytest.approx(int(check().header.stamp.sec), abs=256.0), obs
    gripper['on'] = False  # the slot goes stale with its gripper: so does the header
    steps(env, 10)
    gripper_stamp = message_stamp(check())
    time.sleep(0.1)
    assert message_stamp(check()) == gripper_stamp and slot.stamp == gripper_stamp


@pytest.mark.parametrize('drivers', ['one', 'two'])
def test_a_configured_field_left_empty_is_not_given(streams, make_env, drivers):
    # joint_state_publisher and many drivers leave effort empty, as JointState allows.
    if drivers == 'one':
        streams.joint_states(['j0', 'g'], [1.0, 2.0], rate=100.0)
    else:
        streams.joint_states(['j0'], [1.0], rate=100.0, efforts=[0.5])
        streams.joint_states(['g'], [2.0], rate=100.0)
    env = make_env(streams.ns, params(['j0', 'g'], reset_timeout=0.5, joints={
        'fields': ['position', 'effort'], 'low': [-3.0] * 4, 'high': [3.0] * 4}))
    lacking = 'joints.j0.effort, joints.g.effort' if drivers == 'one' else 'joints.g.effort'
    assert f'messages came without {lacking} ' in reset_error_once_matched(env)


# -- actions as the robot's drivers read them ---------------------------------------------------


@pytest.mark.parametrize('form', ['serialized', 'message'])
def test_actions_arrive_as_built_whichever_form(streams, make_env, probe, monkeypatch, form):
    # A stamped TwistStamped, a JointTrajectory stamped zero and a headerless multi-array, as
    # their drivers' subscriptions receive them: packed bytes (serialized_writer) or messages.
    monkeypatch.setenv(ACTION_PUBLISH_VARIABLE, form)
    streams.joint_states(['j0'], [0.5], rate=100.0)
    groups = {
        'base': {'topic': 'cmd_vel', 'type': 'geometry_msgs/msg/TwistStamped',
                 'fields': ['twist.linear.x', 'twist.angular.z'], 'frame_id': 'odom',
                 'low': [-1.0, -2.0], 'high': [1.0, 2.0]},
        'arm': {'topic': 'arm/joint_trajectory', 'type': 'trajectory_msgs/msg/JointTrajectory',
                'joint_names': ['a1', 'a2'], 'fields': ['positions'], 'stamp': 'zero',
                'low': [-3.0, -3.0], 'high': [3.0, 3.0]},
        'gripper': {'topic': 'gripper/command', 'type': 'std_msgs/msg/Float64MultiArray',
                    'field': 'data', 'low': [0.0], 'high': [1.0], 'default': [0.25]}}
    received = {name: [] for name in groups}
    types = {'base': TwistStamped, 'arm': JointTrajectory, 'gripper': Float64MultiArray}
    subscriptions = [probe.node.create_subscription(
        types[name], f'{streams.ns}/{groups[name]["topic"]}',
        lambda message, name=name: received[name].append((time.time(), message)), 10)
        for name in groups]
    try:
        env = make_env(streams.ns, params(['j0'], actions={'names': list(groups), **groups}))
        wait_until(lambda: all(count == 1 for count in
                               env.unwrapped.interface.action_subscriber_counts().values()),
                   10.0, 'the probe subscribing to every action topic')
        encoders = env.unwrapped.interface._encoders
        assert [encoder is not None for encoder in encoders] == [form == 'serialized'] * 3
        env.reset()
        sent = np.array([0.5, -1.5, 1.25, -2.5, 0.75], np.float32)
        for _ in range(3):
            env.step(sent)
        wait_until(lambda: all(len(got) >= 4 for got in received.values()), 5.0,
                   lambda: f'4 actions on each topic, got {received}')
    finally:
        for subscription in subscriptions:
            probe.node.destroy_subscription(subscription)
    arrived, twist = received['base'][-1]
    assert (twist.twist.linear.x, twist.twist.angular.z) == (0.5, -1.5)
    assert twist.header.frame_id == 'odom'
    assert arrived - 1.0 < message_stamp(twist) <= arrived  # stamped now, on the wall clock
    _, trajectory = received['arm'][-1]
    assert trajectory.joint_names == ['a1', 'a2'] and len(trajectory.points) == 1
    assert list(trajectory.points[0].positions) == [1.25, -2.5]
    assert message_stamp(trajectory) == 0.0
    assert [list(message.data) for _, message in received['gripper']][:2] == [[0.25], [0.75]]


# -- stamps ahead of the clock -----------------------------------------------------------------


def test_stamps_from_the_future_are_never_fresh(streams, make_env):
    sensor = streams.joint_states(['j0'], [1.0], rate=100.0, stamp_offset=3600.0)
    env = make_env(streams.ns, params(['j0'], newer_than_action=True,
                                      newer_than_action_timeout=0.01))
    env.reset()
    results = steps(env, 5)
    sensor['on'] = False
    results += steps(env, 5)
    for *_, info in results:
        assert info['stale'] == ['joints'] and info['future_stamps'] == ['joints'], info
        assert info['newer_than_action'] == {'joints': False}, info


@pytest.mark.parametrize('offset', [
    lambda: 50.0 - time.time(),  # a simulator's time (50 s), read by an env on wall time
    lambda: 1e8,  # wall-clock stamps read by an env on sim time: years ahead
], ids=['sim_stamps_wall_clock', 'far_ahead'])
def test_stamps_of_another_time_base_are_named_as_such(streams, make_env, offset):
    streams.joint_states(['j0'], [1.0], rate=100.0, stamp_offset=offset())
    env = make_env(streams.ns, params(['j0'], joints={'on_stale': 'error'}))
    with pytest.raises(RuntimeError, match='count from different origins: sim time against '
                                           'wall time'):
        env.reset()  # no reset service: any message will do, and it is not fresh
        steps(env, 3)


def test_a_gripper_stamped_ahead_is_not_hidden_by_the_arm(streams, make_env):
    streams.joint_states(['j0'], [1.0], rate=100.0)
    streams.joint_states(['g'], [2.0], rate=30.0, stamp_offset=3600.0)  # its machine's clock
    env = make_env(streams.ns, params(['j0', 'g']))
    env.reset()
    for *_, info in steps(env, 5):
        assert info['stale'] == ['joints'] and info['future_stamps'] == ['joints'], info


def test_on_stale_error_is_not_defeated_by_a_future_stamp(streams, make_env):
    streams.joint_states(['j0'], [1.0], rate=100.0, stamp_offset=3600.0)
    env = make_env(streams.ns, params(['j0'], joints={'on_stale': 'error'}))
    start = time.monotonic()
    with pytest.raises(RuntimeError, match='ahead of this node'):
        env.reset()
    # At once: the reset waits for a late slot to come fresh, not for stamps ahead of the clock
    # (the next would be the same); reset_timeout is 10 s.
    assert time.monotonic() - start < 5.0


# -- observations outside the declared space ---------------------------------------------------


@pytest.mark.parametrize('value', [np.nan, np.inf, 1e39, 10.0])
def test_out_of_space_values_are_flagged(streams, make_env, value):
    streams.joint_states(['j0'], [value], rate=100.0)
    env = make_env(streams.ns, params(['j0']))
    env.reset()
    obs, _, _, _, info = steps(env, 3)[-1]
    assert not env.observation_space.contains(obs)
    assert info['out_of_bounds'] == ['joints'], info


@pytest.mark.parametrize('value, clipped', [(10.0, 3.0), (-1e39, -3.0), (np.inf, 3.0)])
def test_out_of_space_values_clipped(streams, make_env, value, clipped):
    streams.joint_states(['j0'], [value], rate=100.0)
    env = make_env(streams.ns, params(['j0'], joints={'out_of_bounds': 'clip'}))
    env.reset()
    obs, _, _, _, info = steps(env, 3)[-1]
    assert obs['joints'].tolist() == [clipped] and env.observation_space.contains(obs)
    assert info['out_of_bounds'] == ['joints']


def test_nan_cannot_be_clipped_and_stays_flagged(streams, make_env):
    streams.joint_states(['j0'], [np.nan], rate=100.0)
    env = make_env(streams.ns, params(['j0'], joints={'out_of_bounds': 'clip'}))
    env.reset()
    obs, _, _, _, info = steps(env, 3)[-1]
    assert np.isnan(obs['joints'][0]) and info['out_of_bounds'] == ['joints']


def test_out_of_space_error_policy_raises(streams, make_env):
    streams.joint_states(['j0'], [10.0], rate=100.0)
    env = make_env(streams.ns, params(['j0'], joints={'out_of_bounds': 'error'}))
    with pytest.raises(RuntimeError, match='outside its space'):
        env.reset()
        steps(env, 3)


# -- reward and termination topics -------------------------------------------------------------


def test_termination_counts_for_the_time_step_it_arrives_in(streams, make_env):
    streams.joint_states(['j0'], [0.0], rate=100.0)
    done = streams.publisher(Bool, 'done')
    env = make_env(streams.ns, params(['j0'], termination={'topic': 'done'},
                                      ep_max_length=1000))
    env.reset()
    steps(env, 2)
    wait_until(lambda: done.get_subscription_count(), 10.0, 'the env on the done topic')
    # Matched both ways, or the one message is lost: the env's reader sees this publisher too.
    wait_until(lambda: env_subscription(env, f'{streams.ns}/done').get_publisher_count(), 10.0,
               'the env to match the done publisher')
    done.publish(Bool(data=True))
    ended = False
    for _ in range(20):
        if env.step(np.zeros(1, np.float32))[2]:
            ended = True
            break
    assert ended, 'the true on the termination topic ended no episode'
    for _ in range(3):  # the true was consumed: new episodes run on
        env.reset()
        assert not any(r[2] for r in steps(env, 5))


def test_reward_topic_before_during_and_after_its_publisher(streams, make_env):
    streams.joint_states(['j0'], [0.0], rate=100.0)
    reward = streams.publisher(Float64, 'reward')
    env = make_env(streams.ns, params(['j0'], reward={'topic': 'reward', 'default': -1.0}))
    env.reset()
    _, value, _, _, info = env.step(np.zeros(1, np.float32))  # no message yet: no TypeError
    assert value == -1.0 and info['reward_missing'] is True
    wait_until(lambda: reward.get_subscription_count(), 10.0, 'the env on the reward topic')
    stop = threading.Event()

    def publish() -> None:
        while not stop.wait(0.005):
            reward.publish(Float64(data=0.5))
    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    try:
        fresh = steps(env, 10)[-1]
        assert fresh[1] == 0.5 and 'reward_missing' not in fresh[4]
    finally:
        stop.set()
        thread.join(1.0)
    time.sleep(2 * T)
    gone = steps(env, 3)[-1]  # the publisher died: its last value is not returned forever
    assert gone[1] == -1.0 and gone[4]['reward_missing'] is True


# -- a simulator whose reset takes sim time back (Gazebo's /reset_simulation) ------------------


def test_any_number_of_resets_that_rewind_sim_time(tmp_path):
    sim = SimProcess(tmp_path, 'publish_clock:=true', 'reset_time:=true')
    env = None
    try:
        env = gym.make('rtgym_ros/ros-v1', robot_config='config/robots/pendulum_sim.yaml',
                       namespace=sim.ns, use_sim_time=True, ep_max_length=30,
                       disable_env_checker=True)
        for episode in range(5):
            start = time.monotonic()
            obs, info = env.reset()
            took = time.monotonic() - start
            ages = info['obs_ages']['joints']
            assert -0.05 <= ages < 0.1, (episode, info)  # /clock and data race by a tick
            # The first reset also waits for discovery of the reset service.
            assert episode == 0 or took < 3.0, (episode, took)
            for _ in range(30):
                obs, _, terminated, truncated, info = env.step(np.zeros(1, np.float32))
                if terminated or truncated:
                    break
            assert env.unwrapped.now() > 0.5, 'sim time did not move after the reset'
    except AssertionError as error:
        raise AssertionError(f'{error}\nsim_robot:\n{sim.output()}') from None
    finally:
        if env is not None:
            env.close()
        sim.stop()


@pytest.mark.parametrize('wait', ['on_stale', 'newer_than_action'])
def test_capture_waits_last_their_time_in_a_faster_simulator(streams, make_env, wait):
    # The wait's bound is 0.05 s of a simulator running at 5x: 0.01 s of wall time, not 0.05
    # (which would be 0.25 s of sim time, and every time-step 0.27 s long instead of 0.1).
    clock = SimClock(rate=5.0)
    try:
        sensor = streams.joint_states(['j0'], [1.0], rate=100.0, stamped=False)
        waits = ({'joints': {'max_age': 0.01, 'on_stale': 'wait', 'wait_timeout': 0.05}}
                 if wait == 'on_stale' else
                 {'newer_than_action': True, 'newer_than_action_timeout': 0.05})
        env = make_env(streams.ns, params(['j0'], use_sim_time=True, time_step_duration=0.1,
                                          start_obs_capture=0.02, **waits))
        env.reset()
        sensor['on'] = False  # from now on, every capture waits its whole bound
        captures = [step[4]['capture_time'] for step in steps(env, 12)]
        spacing = float(np.median(np.diff(captures[2:])))
        assert spacing == pytest.approx(0.1, abs=0.04), captures
    finally:
        clock.close()


# -- waits that end with a description of the graph --------------------------------------------


def test_reset_timeout_names_the_publishers_of_another_type(streams, make_env):
    from std_msgs.msg import String
    wrong = streams.publisher(String, 'joint_states')
    stop = threading.Event()
    thread = threading.Thread(target=lambda: [wrong.publish(String(data='x'))
                                              for _ in iter(lambda: stop.wait(0.02), True)],
                              daemon=True)
    thread.start()
    try:
        env = make_env(streams.ns, params(['j0'], reset_timeout=4.0))  # discovery, loaded
        with pytest.raises(TimeoutError) as error:
            env.reset()
        message = str(error.value)
        assert f'{streams.ns}/joint_states' in message and 'std_msgs/msg/String' in message
        assert 'expected sensor_msgs/msg/JointState' in message
        streams.log.wait_for('has a publisher of std_msgs/msg/String', 5.0)
    finally:
        stop.set()
        thread.join(1.0)


def test_reset_timeout_names_the_joints_that_came_when_none_is_configured(streams, make_env):
    streams.joint_states(['joint_1', 'joint_2'], [0.0, 0.0], rate=100.0)
    env = make_env(streams.ns, params(['joint1', 'joint2'], reset_timeout=2.0))
    with pytest.raises(TimeoutError) as error:
        env.reset()
    message = str(error.value)
    assert 'with a configured joint' in message, message
    assert 'names joint1, joint2; the last message named joint_1, joint_2' in message, message


def test_reset_timeout_without_any_publisher_says_where_this_node_looks(streams, make_env):
    env = make_env(streams.ns, params(['j0'], reset_timeout=0.5))
    with pytest.raises(TimeoutError, match=r'no node publishes .*joint_states \(domain \d+'):
        env.reset()


def test_missing_reset_service_is_described(streams, make_env):
    streams.joint_states(['j0'], [0.0], rate=100.0)
    env = make_env(streams.ns, params(['j0'], reset={'service': 'reset_world',
                                                     'timeout': 0.5}))
    error = reset_error_once_matched(env, unmatched='it sees no other node')
    # The robot's node is seen (it publishes the sensor), the env's own nodes are not named.
    assert re.search(rf'no node offers {streams.ns}/reset_world \(domain \d+, discovery range '
                     r'\w+; nodes it sees: .*/test_probe_', error), error
    runtime = env.unwrapped._runtime
    seen = error.split('nodes it sees:')[1]
    for own in (runtime.node, runtime.io_node):
        assert f'{own.get_fully_qualified_name()},' not in f'{seen[:-1]},', error


def test_a_node_alone_in_its_domain_says_it_sees_no_other_node():
    context = Context()
    rclpy.init(context=context, domain_id=LONE_DOMAIN,
               signal_handler_options=SignalHandlerOptions.NO)
    try:
        node = Node('alone', namespace='/lone', context=context)
        other = Node('alone_io', namespace='/lone', context=context)
        wait_until(lambda: len(node.get_node_names_and_namespaces()) == 2, 10.0,
                   'the node seeing its twin')
        said = describe_service(node, 'reset_world', 'std_srvs/srv/Empty', own=(other,))
        assert said == (f'no node offers /lone/reset_world (domain {LONE_DOMAIN}, discovery '
                        f'range {os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"]}; it sees no '
                        'other node)'), said
    finally:
        context.try_shutdown()


def test_a_reset_service_of_another_type_is_named(streams, make_env):
    streams.joint_states(['j0'], [0.0], rate=100.0)
    streams.service(Trigger, 'reset_world')  # the env's own Empty client must not count
    env = make_env(streams.ns, params(['j0'], reset={'service': 'reset_world',
                                                     'timeout': 0.5}))
    error = reset_error_once_matched(env, unmatched='no node offers')
    assert f'{streams.ns}/reset_world is offered as std_srvs/srv/Trigger, expected ' \
        'std_srvs/srv/Empty' in error, error


def test_a_best_effort_sensor_and_a_reliable_slot_are_named(streams, make_env):
    streams.joint_states(['j0'], [0.0], rate=100.0, qos=qos_profile_sensor_data)
    env = make_env(streams.ns, params(['j0'], reset_timeout=1.0, joints={'qos': 'reliable'}))
    error = reset_error_once_matched(env, unmatched='no node publishes')
    assert 'publishes with QoS this subscription cannot match (Best effort publisher and ' \
        'reliable subscription): nothing is delivered; qos: sensor_data would match it' \
        in error, error
    line = streams.log.wait_for('publishes with QoS this subscription cannot match (Best '
                                'effort publisher and reliable subscription)', 10.0)
    assert f'] {streams.ns}/joint_states: ' in line, line  # the 1 Hz graph check's warning


def test_a_latched_topic_read_without_transient_local_is_named(streams, make_env):
    latched = streams.publisher(JointState, 'joint_states', QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL))
    latched.publish(JointState(name=['j0'], position=[0.0]))  # once, as /robot_description
    env = make_env(streams.ns, params(['j0'], reset_timeout=1.0))  # sensor_data
    error = reset_error_once_matched(env, unmatched='no node publishes')
    assert 'publishes latched (transient_local): a message published before this ' \
        'subscription joined comes only with qos {preset: reliable, durability: ' \
        'transient_local}' in error, error


def test_a_reliable_driver_and_a_best_effort_action_are_named(streams, make_env):
    streams.joint_states(['j0'], [0.0], rate=100.0)
    streams.subscription(Float64MultiArray, 'command', 10)  # reliable, as most drivers
    config = params(['j0'])
    config['actions']['cmd']['qos'] = 'sensor_data'
    env = make_env(streams.ns, config)
    env.reset()
    streams.log.wait_for(f'the action topic {streams.ns}/command has subscribers with QoS this '
                         'publisher cannot match', 10.0)


ACTION_SUBSCRIBERS = [  # (what, type, QoS) on the action topic; reliable volatile publisher
    ('reliable', Float64MultiArray, QoSProfile(depth=10)),
    ('best effort', Float64MultiArray, qos_profile_sensor_data),
    ('latched: a volatile publisher cannot serve it', Float64MultiArray,
     QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                durability=DurabilityPolicy.TRANSIENT_LOCAL)),
]


def test_reset_waits_for_the_action_subscribers_dds_can_match(streams, make_env, monkeypatch):
    """
    Wait in reset() for the action subscribers that DDS will match, and for no other.

    Which graph subscribers the publisher can match is checked against what DDS matches (rmw's
    own check, differentially). The wait bound is raised to 60 s: waiting for the subscriber
    that never matches would overrun the test's 30 s bound. The wait itself guards the robot's
    first actions, lost while a subscriber that will match is not matched yet.
    """
    from rtgym_ros.robot import interface as interface_module
    from rtgym_ros.ros.graph import matchable_subscribers
    monkeypatch.setattr(interface_module, 'ACTION_MATCH_WAIT', 60.0)
    streams.joint_states(['j0'], [0.0], rate=100.0)
    for _, msg_type, qos in ACTION_SUBSCRIBERS:
        streams.subscription(msg_type, 'command', qos)
    env = make_env(streams.ns, params(['j0'], reset_timeout=60.0))
    interface = env.unwrapped.interface
    topic = f'{streams.ns}/command'
    publisher = next(p for p in interface._publishers if p.topic_name == topic)
    node = interface._node
    # The graph knows them all first: reset() waits for the subscribers it knows (a new env's
    # graph learns a robot's subscriptions apart from its sensor's publisher).
    wait_until(lambda: node.count_subscribers(topic) == len(ACTION_SUBSCRIBERS), 10.0,
               'the graph to hold every subscriber')
    start = time.monotonic()
    env.reset()
    assert time.monotonic() - start < 30.0, 'reset() waited for a subscriber that cannot match'
    assert publisher.get_subscription_count() == 2  # matched when reset() returned
    assert matchable_subscribers(node, publisher, 'std_msgs/msg/Float64MultiArray') == 2
    time.sleep(0.5)  # DDS would match any more within this
    assert publisher.get_subscription_count() == 2


@contextmanager
def another_participant() -> Iterator[Node]:
    """Give a node in a context (a DDS participant) of its own: DDS has one type per topic."""
    context = Context()
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    try:
        yield Node('other_participant', context=context)
    finally:
        context.try_shutdown()


def test_the_action_subscribers_that_rmw_reports_unreachable_are_named(
        streams, make_env, probe):
    """
    Name each action subscriber that rmw's events report the env's publisher cannot reach.

    The env's publishers have no QoS event handlers (rclpy's default ones would log these
    subscribers; the main node's executor would wait on them at every wake-up): the graph
    watch names them. Differentially, a publisher of the same type and QoS with event
    handlers counts the incompatible-QoS events rmw raises for them. A subscriber of another
    type raises no event there (Fast DDS); the graph names it, and so does the watch.
    """
    streams.joint_states(['j0'], [0.0], rate=100.0)
    for _, msg_type, qos in [*ACTION_SUBSCRIBERS, ACTION_SUBSCRIBERS[-1]]:  # two latched
        streams.subscription(msg_type, 'command', qos)
    with another_participant() as node:
        node.create_subscription(String, f'{streams.ns}/command', lambda message: None, 10)
        env = make_env(streams.ns, params(['j0']))
        env.reset()
        _name_the_unreachable_action_subscribers(env, streams, probe)


def _name_the_unreachable_action_subscribers(env: gym.Env, streams: Streams, probe) -> None:
    node = env.unwrapped.interface._node
    assert not list(node.waitables), "the main node's executor waits on event handlers"
    topic = f'{streams.ns}/command'
    qos = next(p for p in node.publishers if p.topic_name == topic).qos_profile
    counts = {'qos': 0}
    witness = probe.node.create_publisher(
        Float64MultiArray, topic, qos, event_callbacks=PublisherEventCallbacks(
            incompatible_qos=lambda event: counts.update(qos=event.total_count)))
    try:
        wait_until(lambda: counts['qos'] >= 2, 10.0, "rmw's incompatible-QoS events")
        streams.log.wait_for(f'subscribes to the action topic {topic} as std_msgs/msg/String',
                             10.0)
        streams.log.wait_for(f'subscribes to the action topic {topic} with QoS this '
                             'publisher cannot match', 10.0)
        time.sleep(1.5)  # one more graph check, and any later event
        named = [line for line in streams.log.lines()
                 if f'subscribes to the action topic {topic}' in line]
        assert counts['qos'] == 2
        assert len([line for line in named if ' with QoS ' in line]) == counts['qos'], named
        assert len([line for line in named if ' as std_msgs/msg/String' in line]) == 1, named
    finally:
        probe.node.destroy_publisher(witness)


def test_a_new_env_waits_for_the_action_subscribers_once_the_robot_is_seen(
        streams, make_env, monkeypatch):
    """
    Wait for the action subscribers once the robot's first data came, not as reset() begins.

    A new env's graph is empty then; by the time the data came the robot's node is
    discovered, and waiting for its subscribers then gets its first actions to it.
    """
    from rtgym_ros.robot.interface import RosInterface
    counts_at_wait: list[int] = []
    wait = RosInterface._wait_for_action_subscribers

    def noting_wait(self, bound: float) -> None:
        counts_at_wait.append(min(slot.count for slot in self.slots))
        wait(self, bound)

    monkeypatch.setattr(RosInterface, '_wait_for_action_subscribers', noting_wait)
    state = streams.joint_states(['j0'], [0.0], rate=100.0)
    state['on'] = False  # the robot's sensor comes up after reset() began
    streams.subscription(Float64MultiArray, 'command', 10)
    env = make_env(streams.ns, params(['j0']))
    sensor_up = threading.Timer(0.5, state.update, kwargs={'on': True})
    sensor_up.start()
    try:
        env.reset()
    finally:
        sensor_up.cancel()
    assert counts_at_wait and counts_at_wait[0] > 0, (
        f'the action subscribers were waited for before the robot was seen: {counts_at_wait}')
    publisher = env.unwrapped.interface._publishers[0]
    assert publisher.get_subscription_count() == 1


def test_an_action_topic_nobody_listens_to_is_warned_about(streams, make_env):
    streams.joint_states(['j0'], [0.0], rate=100.0)
    env = make_env(streams.ns, params(['j0']))
    env.reset()
    streams.log.wait_for(f'nothing subscribes to the action topic {streams.ns}/command', 10.0)


def test_a_sensor_stamped_behind_the_reset_is_named_not_silent(streams, make_env):
    # Its machine's clock is 30 s behind (or it stamps sim time): messages come, none after.
    streams.joint_states(['j0'], [1.0], rate=100.0, stamp_offset=-30.0)
    streams.service(Empty, 'reset_world')
    config = params(['j0'], reset_timeout=1.0, reset={'service': 'reset_world'})
    env = make_env(streams.ns, config)
    error = reset_error_once_matched(env, unmatched='no node offers')
    assert re.search(r'no data stamped after the reset on .*/joint_states .*messages came, '
                     r'but stamped before it: observations\.joints\.j0 \(\d+\.\d+ s old\):'
                     r'.*stamp: receive', error), error
    config['observations']['joints']['stamp'] = 'receive'
    make_env(streams.ns, dict(config, reset_timeout=10.0)).reset()


def test_a_stopped_gripper_is_named_when_the_arm_goes_on(streams, make_env):
    streams.joint_states(['j0'], [1.0], rate=100.0)
    gripper = streams.joint_states(['g'], [2.0], rate=30.0)
    streams.service(Empty, 'reset_world')
    env = make_env(streams.ns, params(['j0', 'g'], reset_timeout=5.0,
                                      reset={'service': 'reset_world'}))
    env.reset()
    gripper['on'] = False  # its driver died: the arm's messages still come
    with pytest.raises(TimeoutError) as error:
        env.reset()
    assert re.search(r'messages came, but stamped before it: observations\.joints\.g '
                     r'\(\d+\.\d+ s old\): a publisher that stopped', str(error.value)), \
        error.value


RESET_BOUND = 30.0  # reset_timeout of the rewinding-reset tests (s)


def rewinding_reset(probe, namespace: str, sensor: dict, *, by: float) -> Service:
    """Serve ``reset_world`` as a sensor that stamps from its own time base: ``by`` s back."""
    def reset(request: Empty.Request, response: Empty.Response) -> Empty.Response:
        sensor['stamp_offset'] -= by
        return response
    return probe.node.create_service(Empty, f'{namespace}/reset_world', reset)


def quick_resets(env: gym.Env, count: int = 2) -> list[dict]:
    """Reset ``count`` times once data came; each within a third of RESET_BOUND; the infos."""
    [slot] = env.unwrapped.interface.slots
    wait_until(lambda: slot.count, 20.0, 'a first message in the slot')
    infos = []
    for _ in range(count):
        start = time.monotonic()
        infos.append(env.reset()[1])
        took = time.monotonic() - start
        assert took < RESET_BOUND / 3, \
            f'reset took {took:.1f} s of reset_timeout {RESET_BOUND} s'
    return infos


def test_a_sensor_time_base_going_back_at_a_reset_on_wall_time_counts_at_once(streams, make_env,
                                                                              probe):
    # A simulator stamping its own time, reset to an earlier time, read by an env on wall
    # time: the env's clock never goes back, so the data of the rewound base counts at once.
    sensor = streams.joint_states(['j0'], [1.0], rate=100.0, stamp_offset=-1000.0)
    service = rewinding_reset(probe, streams.ns, sensor, by=100.0)
    try:
        quick_resets(make_env(streams.ns, params(['j0'], reset_timeout=RESET_BOUND,
                                                 reset={'service': 'reset_world'})))
    finally:
        probe.node.destroy_service(service)


def test_a_sensor_time_base_going_back_at_a_reset_on_sim_time_counts_once_clock_moves_on(
        streams, make_env, probe):
    # A simulator plugin (or a driver) restarted at the reset stamps from 0 again, while
    # /clock goes on: its data counts, as on wall time, once /clock moved on without going
    # back, and the log says so. No wait for the whole reset_timeout.
    clock = SimClock(start=1000.0)
    sensor = streams.joint_states(['j0'], [1.0], rate=100.0, clock=lambda: clock.sim_time)
    service = rewinding_reset(probe, streams.ns, sensor, by=400.0)
    try:
        env = make_env(streams.ns, params(['j0'], use_sim_time=True, reset_timeout=RESET_BOUND,
                                          reset={'service': 'reset_world'}))
        for info in quick_resets(env):
            assert info['stale'] == ['joints'] and info['obs_ages']['joints'] > 300.0, info
        line = streams.log.wait_for('did not go back', 10.0)
        assert re.search(r'observations\.joints \(.*/joint_states\) is stamped at \d+\.\d+ s, '
                         r'before the \d+\.\d+ s it held when the reset was asked, and '
                         r'/clock \(\d+\.\d+ s\) did not go back', line), line
    finally:
        probe.node.destroy_service(service)
        clock.close()


def counting_reset(probe, namespace: str, sensor: dict, *,
                   clock: SimClock | None = None) -> Service:
    """Serve ``reset_world``: the sensor's position counts the requests (``clock`` goes to 0)."""
    def reset(request: Empty.Request, response: Empty.Response) -> Empty.Response:
        sensor['positions'] = [sensor['positions'][0] + 1.0]
        if clock is not None:
            clock.jump(-clock.sim_time)
        return response
    return probe.node.create_service(Empty, f'{namespace}/reset_world', reset)


def test_a_reset_takes_no_data_of_before_it_from_a_sensor_clock_ahead(streams, make_env, probe):
    # The sensor machine's clock is 80 ms ahead of this node's, within stamp_tolerance: the
    # data the slot holds when the reset returns is stamped after that time, yet of before.
    sensor = streams.joint_states(['j0'], [0.0], rate=20.0, stamp_offset=0.08)
    service = counting_reset(probe, streams.ns, sensor)
    try:
        env = make_env(streams.ns, params(['j0'], reset={'service': 'reset_world'}))
        for _ in range(3):
            obs, info = env.reset()  # the state of the last request: one sent again counts
            assert obs['joints'][0] == sensor['positions'][0], (sensor, obs, info)
    finally:
        probe.node.destroy_service(service)


def test_a_rewinding_reset_behind_a_lagging_clock_takes_the_new_data_without_a_wait(
        streams, make_env, probe):
    # gazebo_ros sends /clock at 10 Hz: the sensors' stamps run up to 0.1 s ahead of it, and
    # a reset that takes time back to 0 reaches this node's clock up to 0.1 s after the data.
    clock = SimClock(start=100.0, hz=10.0)
    sensor = streams.joint_states(['j0'], [0.0], rate=50.0, clock=lambda: clock.sim_time + 0.08)
    service = counting_reset(probe, streams.ns, sensor, clock=clock)
    try:
        env = make_env(streams.ns, params(['j0'], use_sim_time=True, reset_timeout=RESET_BOUND,
                                          reset={'service': 'reset_world'}))
        for episode in range(1, 5):
            # The first reset may find the slot empty, and the jump may come after its answer.
            if episode > 1:
                steps(env, 12)  # 0.6 s on: stamps of the new base stay below the old for 0.6 s
            start = time.monotonic()
            obs, info = env.reset()
            took = time.monotonic() - start
            assert obs['joints'][0] == sensor['positions'][0] and info['capture_time'] < 0.3, \
                (sensor, obs, info)
            # The first reset also waits for the discovery of the service.
            assert episode == 1 or took < RESET_BOUND / 3, f'reset took {took:.1f} s'
    finally:
        probe.node.destroy_service(service)
        clock.close()


class AnsweredThenAppliedReset:
    """
    Serve ``reset_world`` as gz-sim's world control does: answer, then reset ``delay`` later.

    gz queues the request, answers it, and applies it at its next iteration: the old state goes
    on after the answer, stamped in the old time base, until /clock goes back. The sensor's
    position counts the resets applied, ``asked`` the requests (a request sent again for a
    lost answer is applied too); ``rewinds()`` says whether a reset takes /clock back to 0.
    ``late_answers``: how many of the next answers come after the client gave up on them.
    Lockstep: gz runs its requests in order, each a number of physics steps: a step request
    that comes before the reset is applied advances the new time, and one the env made before
    it saw /clock go back (a target of the old time base) advances it as far.
    """

    def __init__(self, probe, namespace: str, sensor: dict, clock: SimClock,
                 lock: threading.Lock, *, rewinds: Callable[[], bool] = lambda: True,
                 delay: float = 0.01, late_old_state: bool = False) -> None:
        self._sensor, self._clock, self._rewinds, self._delay = sensor, clock, rewinds, delay
        self._late = probe.node.create_publisher(JointState, f'{namespace}/joint_states', 10) \
            if late_old_state else None
        self._lock = lock  # the sensor's: a message is all of before or all of after a reset
        self._pending = False
        self.asked = 0
        self.late_answers = 0
        self._advance = 0.0  # what step requests asked while the reset was pending
        self._rewound_by = 0.0  # by the last reset
        self._probe = probe
        self.service = probe.node.create_service(Empty, f'{namespace}/reset_world', self._reset)
        self.step_requests = probe.node.create_subscription(
            Clock, f'{namespace}/step_until', self._step_until, 10)

    async def _reset(self, request: Empty.Request, response: Empty.Response) -> Empty.Response:
        with self._lock:
            self._pending = True
            self.asked += 1
            late, self.late_answers = self.late_answers > 0, max(0, self.late_answers - 1)
        later = threading.Timer(self._delay, self._apply)
        later.daemon = True
        later.start()
        if late:  # without blocking the probe's executor: its clock and sensor go on
            answer = Future()
            timer = threading.Timer(RETRY_PERIOD + 0.5, answer.set_result, (None,))
            timer.daemon = True
            timer.start()
            await answer
        return response

    def _apply(self) -> None:
        with self._lock:
            old = JointState(name=['j0'], position=list(self._sensor['positions']))
            old.header.stamp = Time(seconds=self._clock.sim_time).to_msg()
            self._sensor['on'] = self._late is None
            self._sensor['positions'] = [self._sensor['positions'][0] + 1.0]
            if self._rewinds():
                self._rewound_by = self._clock.sim_time
                self._clock.jump(-self._rewound_by)
            self._clock.jump(self._advance)
            self._pending, self._advance = False, 0.0
        if self._late is not None:  # a message of the old state, sent before, comes late
            time.sleep(0.03)
            self._late.publish(old)
            time.sleep(0.03)
            self._sensor['on'] = True

    def _step_until(self, request: Clock) -> None:
        with self._lock:
            advance = Time.from_msg(request.clock).nanoseconds * 1e-9 - self._clock.sim_time
            if advance > 1.0:  # of the old time base
                advance -= self._rewound_by
            if self._pending:
                self._advance += advance
            else:
                self._clock.jump(advance)

    def close(self) -> None:
        self._probe.node.destroy_subscription(self.step_requests)
        self._probe.node.destroy_service(self.service)
        if self._late is not None:
            self._probe.node.destroy_publisher(self._late)


@contextmanager
def answered_then_applied(streams, probe, *, paused: bool = False,
                          **simulator: Any) -> Iterator[AnsweredThenAppliedReset]:
    """Run a 200 Hz /clock from 100 s (``paused``: lockstep), a 200 Hz sensor, gz's reset."""
    clock = SimClock(start=100.0, hz=200.0)
    clock.paused = paused
    lock = threading.Lock()
    sensor = streams.joint_states(['j0'], [0.0], rate=200.0, clock=lambda: clock.sim_time,
                                  lock=lock)
    reset = AnsweredThenAppliedReset(probe, streams.ns, sensor, clock, lock, **simulator)
    try:
        yield reset
    finally:
        reset.close()
        clock.close()


def rewinding(lockstep: bool = False, **changes: Any) -> dict:
    """Return the robot of the gz-style reset tests, on sim time; first capture 0.1 s on."""
    if lockstep:
        changes.update(stepping='lockstep', step={'topic': 'step_until'})
    return params(['j0'], **{'use_sim_time': True, 'reset_timeout': RESET_BOUND,
                             'time_step_duration': 0.1, 'start_obs_capture': 0.1,
                             'reset': {'service': 'reset_world'}, **changes})


@pytest.mark.parametrize('stepping', ['realtime', 'lockstep'])
def test_resets_answered_before_the_clock_goes_back_wait_for_it_once_one_did(
        streams, make_env, probe, stepping):
    # gz answers, then resets at its next iteration: 30 ms of old state after each answer
    # here. A paused gz world (lockstep) says its joint states at every iteration too,
    # stamped with its frozen time.
    lockstep = stepping == 'lockstep'
    with answered_then_applied(streams, probe, paused=lockstep, delay=0.03) as reset:
        env = make_env(streams.ns, rewinding(lockstep))
        obs, _ = env.reset()
        steps(env, 2)
        if obs['joints'][0] < reset.asked:  # it returned before the clock went back: said
            streams.log.wait_for('/clock went back after reset() returned', 10.0)
        for _ in range(3):
            steps(env, 6)
            start = time.monotonic()
            obs, info = env.reset()
            took = time.monotonic() - start
            assert obs['joints'][0] == reset.asked and info['capture_time'] < 0.3, \
                (reset.asked, obs, info)
            assert took < RESET_BOUND / 3, f'reset took {took:.1f} s'


@pytest.mark.parametrize('stepping', ['realtime', 'lockstep'])
def test_the_old_state_that_comes_after_the_rewound_clock_is_not_the_reset_state(
        streams, make_env, probe, stepping):
    # Topics are not ordered: the old state, sent before the reset was applied, may come
    # after the /clock that went back. It is stamped ahead of that clock: of the old base.
    lockstep = stepping == 'lockstep'
    with answered_then_applied(streams, probe, paused=lockstep, late_old_state=True) as reset:
        env = make_env(streams.ns, rewinding(lockstep))
        env.reset()  # may be of before: the env learns that resets take the clock back
        steps(env, 6)
        for _ in range(3):
            obs, info = env.reset()
            assert obs['joints'][0] == reset.asked, (reset.asked, obs, info)
            steps(env, 6)


def test_a_reset_just_after_another_is_taken_as_taking_the_clock_back(streams, make_env, probe):
    # No step between: the clock goes back to within the time-step the first reset started,
    # which moves no schedule; the reset did take it back all the same.
    with answered_then_applied(streams, probe, delay=0.03) as reset:
        env = make_env(streams.ns, rewinding())
        env.reset()
        steps(env, 6)
        for _ in range(3):
            steps(env, 6)
            assert env.reset()[0]['joints'][0] == reset.asked
            obs, info = env.reset()
            assert obs['joints'][0] == reset.asked, (reset.asked, obs, info)
        steps(env, 20)  # 2 s: the log's throttle has flushed
        said = [line for line in streams.log.lines()
                if 'did not go back' in line or 'own time base went back' in line]
        assert said == []


def test_a_reset_applied_after_the_first_capture_is_learnt_by_the_next_reset(
        streams, make_env, probe):
    with answered_then_applied(streams, probe, delay=0.25) as reset:
        env = make_env(streams.ns, rewinding(time_step_duration=T, start_obs_capture=T))
        env.reset()
        for _ in range(3):
            steps(env, 12)  # 0.6 s: the reset was applied within the episode
            obs, info = env.reset()
            assert obs['joints'][0] == reset.asked, (reset.asked, obs, info)


def test_a_reset_that_no_longer_takes_the_clock_back_is_waited_for_a_moment_once_and_said(
        streams, make_env, probe):
    resets = []
    with answered_then_applied(streams, probe, rewinds=lambda: len(resets) < 3) as reset:
        env = make_env(streams.ns, rewinding(time_step_duration=T, start_obs_capture=T))
        for episode in range(1, 5):
            resets.append(episode)
            obs, info = env.reset()
            if episode == 3:  # it waited for the jump a moment, then took what came
                assert obs['joints'][0] == reset.asked, (reset.asked, obs, info)
            steps(env, 12)
        steps(env, 20)  # 1 s: the log's throttle has flushed
        said = [line for line in streams.log.lines() if '/clock did not go back' in line]
        assert len(said) == 1, said  # once: the fourth reset no longer waited


def test_a_reset_sent_again_for_a_lost_answer_waits_for_the_clock_to_go_back_after_it(
        streams, make_env, probe):
    # The first answer comes after the env gave up on it: both requests are applied, the
    # second 0.1 s after its answer. The clock went back once already: the data of the first
    # reset is not the reset state.
    with answered_then_applied(streams, probe, delay=0.1) as reset:
        env = make_env(streams.ns, rewinding())
        for _ in range(2):  # the env learns that its resets take the clock back
            env.reset()
            steps(env, 6)
        asked = reset.asked
        reset.late_answers = 1
        obs, info = env.reset()
        assert reset.asked == asked + 2, 'the request was not sent again'
        assert obs['joints'][0] == reset.asked, (reset.asked, obs, info)
        line = streams.log.wait_for('sent again', 10.0)
        assert re.search(r'reset: service \S*reset_world did not answer within 1 s: the request '
                         r'is sent again \(retry: true\)', line), line


def test_a_joint_never_published_fails_reset_naming_the_topic(streams, make_env):
    streams.joint_states(['j0'], [1.0], rate=100.0)  # nobody publishes joint 'g'
    env = make_env(streams.ns, params(['j0', 'g'], reset_timeout=0.5))
    error = reset_error_once_matched(env)
    assert re.search(r'no complete data on .*/joint_states .*messages came without joints\.g ',
                     error), error


def test_future_stamps_with_wait_and_no_max_age_do_not_crash(streams, make_env):
    streams.joint_states(['j0'], [1.0], rate=100.0, stamp_offset=3600.0)
    config = params(['j0'], joints={'on_stale': 'wait'})
    del config['observations']['joints']['max_age']  # YAML null would be the string 'null'
    env = make_env(streams.ns, config)
    env.reset()
    *_, info = steps(env, 3)[-1]
    assert info['future_stamps'] == ['joints'], info
