"""
Action messages packed into a serialized template, against rclpy's own serialization.

Every writer the configs can make (the example robot configs' action groups, and the message
kinds drivers take) gets a template, and the bytes it packs are read by rclpy's deserializer as
the message the writer builds, for random values and stamps.
"""

import glob
import os
from pathlib import Path
import random

from builtin_interfaces.msg import Time
from config_types import skip_unless_installed
from geometry_msgs.msg import Twist, TwistStamped, Wrench
import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from rtgym_ros.msgconv.fields import has_header, stamp_message
from rtgym_ros.msgconv.serialized_writer import serialized_writer
from rtgym_ros.msgconv.writers import compile_writer
from rtgym_ros.robot.loader import load_robot_config
from sensor_msgs.msg import JointState
from std_msgs.msg import Float32, Float32MultiArray, Float64, Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WRITERS = {
    'float64': (Float64, ['data'], {}),
    'float32': (Float32, ['data'], {}),
    'multi_array_1': (Float64MultiArray, ['data'], {'length': 1}),
    'multi_array_7': (Float64MultiArray, ['data'], {'length': 7}),
    'float32_multi_array': (Float32MultiArray, ['data'], {'length': 3}),
    'twist': (Twist, ['linear.x', 'angular.z'], {}),
    'twist_all': (Twist, ['linear', 'angular'], {}),
    'twist_stamped': (TwistStamped, ['twist.linear.x', 'twist.angular.z'],
                      {'frame_id': 'base_link'}),
    'wrench': (Wrench, ['force.z', 'torque.x'], {}),
    'joint_state': (JointState, ['position', 'velocity'],
                    {'joint_names': ['shoulder', 'elbow', 'wrist_é']}),
    'joint_trajectory': (JointTrajectory, ['positions', 'velocities'],
                         {'joint_names': ['j1', 'j2'], 'time_from_start': 0.125}),
}


def read(data: bytes, msg_type: type):
    return deserialize_message(data, msg_type)


def assert_packs_what_rclpy_serializes(writer, *, stamped: bool, seed: int) -> None:
    serialized = serialized_writer(writer, stamped=stamped)
    assert serialized is not None, writer.msg_type
    rng = random.Random(seed)
    for _ in range(200):
        values = np.array([rng.choice([rng.uniform(-1e6, 1e6), rng.uniform(-1, 1), 0.0, -0.0])
                           for _ in range(writer.size)], np.float32)
        stamp_ns = rng.randrange(2**31 * 10**9) if stamped else None
        encoded = serialized.encode(values, stamp_ns)
        assert isinstance(encoded, bytes)
        expected = writer.build(values, stamp=None if stamp_ns is None
                                else stamp_message(stamp_ns))
        assert read(encoded, writer.msg_type) == read(serialize_message(expected),
                                                      writer.msg_type), (values, stamp_ns)


@pytest.mark.parametrize('name', WRITERS)
@pytest.mark.parametrize('stamped', [True, False])
def test_every_kind_of_writer_packs_what_rclpy_serializes(name, stamped):
    msg_type, fields, options = WRITERS[name]
    writer = compile_writer(msg_type, fields, key=f'actions.{name}', **options)
    assert_packs_what_rclpy_serializes(writer, stamped=stamped and has_header(msg_type),
                                       seed=len(name))


@pytest.mark.parametrize('path', sorted(glob.glob(os.path.join(REPO, 'config', 'robots',
                                                               '*.yaml'))))
def test_the_example_robots_action_groups_pack_what_rclpy_serializes(path):
    skip_unless_installed(Path(path))
    _, spec = load_robot_config(path)
    for group in spec.actions:
        assert_packs_what_rclpy_serializes(
            group.writer, stamped=group.stamped and has_header(group.writer.msg_type),
            seed=group.size)


def test_a_stamp_goes_where_rclpy_puts_it():
    writer = compile_writer(JointState, ['position'], key='actions.arm', joint_names=['a'])
    data = serialized_writer(writer, stamped=True).encode(np.array([0.5]),
                                                          1_700_000_000_123_456_789)
    message = read(data, JointState)
    assert (message.header.stamp.sec, message.header.stamp.nanosec) == (1_700_000_000,
                                                                        123_456_789)
    assert message.name == ['a'] and list(message.position) == [0.5]


def test_a_value_out_of_a_float_fields_range_gives_the_writers_message():
    # A float32 field cannot hold 1e39: struct refuses to pack it; the writer's message is
    # what publish() gets, and rclpy answers it as it answers any such message.
    writer = compile_writer(Float32MultiArray, ['data'], key='actions.a', length=1)
    result = serialized_writer(writer, stamped=False).encode(np.array([1e39]))
    assert type(result) is Float32MultiArray and np.isinf(result.data[0])


class _ValueDependentWriter:
    """A writer whose message's layout depends on its values: no template can hold it."""

    msg_type = Float64MultiArray
    size = 1

    def build(self, values, *, stamp: Time | None = None) -> Float64MultiArray:
        return Float64MultiArray(data=[float(values[0])] * (1 + int(abs(values[0])) % 3))


class _ScalingWriter(_ValueDependentWriter):
    """A writer that does not write its values as they are."""

    def build(self, values, *, stamp: Time | None = None) -> Float64MultiArray:
        return Float64MultiArray(data=[2.0 * float(values[0])])


class _ClampingWriter(_ValueDependentWriter):
    """A writer that writes its values as they are, but not every value."""

    def build(self, values, *, stamp: Time | None = None) -> Float64MultiArray:
        return Float64MultiArray(data=[min(float(values[0]), 100.0)])


@pytest.mark.parametrize('writer', [_ValueDependentWriter(), _ScalingWriter(),
                                    _ClampingWriter()], ids=type)
def test_no_template_for_a_writer_it_cannot_stand_for(writer):
    assert serialized_writer(writer, stamped=False) is None
