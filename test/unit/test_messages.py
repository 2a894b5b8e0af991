"""Unit tests for rtgym_ros.msgconv.readers: message classes only, no node and no DDS."""

import time
from types import SimpleNamespace
import warnings

from builtin_interfaces.msg import Time
from geometry_msgs.msg import Pose, Twist, TwistStamped
from nav_msgs.msg import Odometry
import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from rtgym_ros.msgconv.fields import has_header, message_stamp
from rtgym_ros.msgconv.readers import compile_reader, FieldReader, JointIndex
from rtgym_ros.msgconv.type_names import load_message_type, load_service_type
from rtgym_ros.msgconv.writers import compile_writer, FieldWriter
from sensor_msgs.msg import Image, Imu, JointState, LaserScan, Range
from std_msgs.msg import (Float32, Float32MultiArray, Float64, Float64MultiArray, Int32, Int64,
                          UInt64)
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

KEY = 'observations.test'


# ---------------------------------------------------------------------------- type loading


def test_load_message_type_returns_the_class():
    assert load_message_type('sensor_msgs/msg/JointState', key=KEY) is JointState
    assert load_message_type('geometry_msgs/msg/TwistStamped', key=KEY) is TwistStamped


def test_load_service_type_returns_the_class():
    assert load_service_type('std_srvs/srv/Trigger', key=KEY) is Trigger


@pytest.mark.parametrize('name, hint', [
    ('std_msgs/Float64', 'did you mean std_msgs/msg/Float64?'),
    ('std_msgs.msg.Float64', "got 'std_msgs.msg.Float64'"),
    ('std_srvs/srv/Trigger', 'that names a service'),
    ('', "got ''"),
])
def test_malformed_message_type_string(name, hint):
    expected = "observations.test: expected a message type 'pkg/msg/Type'"
    with pytest.raises(ValueError, match=expected) as info:
        load_message_type(name, key=KEY)
    assert hint in str(info.value)


def test_malformed_service_type_string():
    with pytest.raises(ValueError, match='that names a message'):
        load_service_type('std_msgs/msg/Float64', key=KEY)


def test_unknown_package_lists_the_importable_ones():
    with pytest.raises(ValueError, match="got 'no_such_msgs'") as info:
        load_message_type('no_such_msgs/msg/Thing', key=KEY)
    text = str(info.value)
    assert text.startswith('observations.test: ')
    listed = text.split('importable msg packages here: ')[1].split(', ')
    assert {'std_msgs', 'sensor_msgs', 'geometry_msgs', 'nav_msgs'} <= set(listed)
    assert 'std_srvs' not in listed  # it has no msg module


def test_package_without_messages():
    with pytest.raises(ValueError, match="got 'std_srvs', which has no msg module"):
        load_message_type('std_srvs/msg/Trigger', key=KEY)


def test_unknown_type_lists_the_types_of_the_package():
    with pytest.raises(ValueError, match="got 'JointStates'") as info:
        load_message_type('sensor_msgs/msg/JointStates', key=KEY)
    listed = str(info.value).split('sensor_msgs/msg has: ')[1].split(', ')
    assert 'JointState' in listed and 'LaserScan' in listed and 'Image' in listed


def test_unknown_service_lists_the_services():
    with pytest.raises(ValueError, match='std_srvs/srv has: Empty, SetBool, Trigger$'):
        load_service_type('std_srvs/srv/Trigger_Request', key=KEY)


# ---------------------------------------------------------------------------- stamps


def test_has_header_and_message_stamp():
    assert has_header(JointState) and has_header(TwistStamped)
    assert not has_header(Twist) and not has_header(Float64)
    msg = JointState()
    msg.header.stamp = Time(sec=12, nanosec=250_000_000)
    assert message_stamp(msg) == pytest.approx(12.25)
    assert message_stamp(Twist()) is None


# ---------------------------------------------------------------------------- writer -> reader


def _roundtrip(msg_type, fields, values, **options):
    writer = compile_writer(msg_type, fields, key='actions.test', **options)
    reader_options = {k: v for k, v in options.items() if k in ('joint_names', 'length')}
    reader = compile_reader(msg_type, fields, key=KEY, **reader_options)
    assert isinstance(writer, FieldWriter) and isinstance(reader, FieldReader)
    assert writer.size == reader.size == len(values)
    msg = writer.build(np.asarray(values))
    assert type(msg) is msg_type
    out = reader.read(msg)
    assert out.dtype == np.float32 and out.shape == (len(values),)
    np.testing.assert_allclose(out, values, rtol=1e-6)
    return msg


@pytest.mark.parametrize('msg_type', [Float64, Float32])
def test_roundtrip_scalar(msg_type):
    msg = _roundtrip(msg_type, ['data'], [0.75])
    assert msg.data == pytest.approx(0.75)


@pytest.mark.parametrize('msg_type, typecode', [(Float64MultiArray, 'd'),
                                                (Float32MultiArray, 'f')])
def test_roundtrip_multi_array(msg_type, typecode):
    msg = _roundtrip(msg_type, ['data'], [0.5, -1.0, 2.0], length=3)
    assert msg.data.typecode == typecode
    _roundtrip(msg_type, ['data'], [1.0, 2.0], joint_names=['a', 'b'])


def test_roundtrip_twist():
    msg = _roundtrip(Twist, ['linear.x', 'angular.z'], [0.4, -0.2])
    assert (msg.linear.x, msg.linear.y, msg.angular.z) == (0.4, 0.0, -0.2)
    _roundtrip(Twist, ['linear', 'angular'], [1, 2, 3, 4, 5, 6])


def test_roundtrip_twist_stamped_long_and_short_paths():
    msg = _roundtrip(TwistStamped, ['linear.x', 'twist.angular.z'], [0.4, -0.2],
                     frame_id='base_link')
    assert (msg.twist.linear.x, msg.twist.angular.z) == (0.4, -0.2)
    assert msg.header.frame_id == 'base_link'
    writer = compile_writer(TwistStamped, ['linear.x'], key='actions.test')
    stamped = writer.build(np.array([1.0]), stamp=Time(sec=3, nanosec=5))
    assert (stamped.header.stamp.sec, stamped.header.stamp.nanosec) == (3, 5)
    assert writer.build(np.array([1.0])).header.stamp.sec == 0


def test_roundtrip_joint_state():
    names = ['shoulder', 'elbow', 'wrist']
    msg = _roundtrip(JointState, ['position', 'velocity'], [1, 2, 3, 4, 5, 6], joint_names=names)
    assert msg.name == names
    assert list(msg.position) == [1, 2, 3] and list(msg.velocity) == [4, 5, 6]
    assert msg.position.typecode == 'd' and len(msg.effort) == 0


def test_roundtrip_joint_trajectory():
    writer = compile_writer(JointTrajectory, ['positions', 'velocities'], key='actions.arm',
                            joint_names=['j1', 'j2'], time_from_start=1.25)
    assert writer.size == 4
    msg = writer.build(np.array([0.1, 0.2, -0.1, -0.2]), stamp=Time(sec=7))
    assert msg.joint_names == ['j1', 'j2'] and len(msg.points) == 1
    point = msg.points[0]
    assert (point.time_from_start.sec, point.time_from_start.nanosec) == (1, 250_000_000)
    assert message_stamp(msg) == 7.0
    reader = compile_reader(JointTrajectoryPoint, ['positions', 'velocities'], key=KEY, length=2)
    np.testing.assert_allclose(reader.read(point), [0.1, 0.2, -0.1, -0.2], rtol=1e-6)
    assert list(point.accelerations) == []


def test_messages_through_the_wire_format():
    """Readers work on what rclpy hands a subscription callback, not only on local messages."""
    names = ['a', 'b', 'c']
    writer = compile_writer(JointState, ['position', 'effort'], key='actions.test',
                            joint_names=names)
    wire = deserialize_message(serialize_message(writer.build(np.arange(6.0))), JointState)
    reader = compile_reader(JointState, ['effort'], key=KEY, joint_names=['c', 'a'])
    np.testing.assert_array_equal(reader.read(wire), [5.0, 3.0])
    pixels = _RNG.integers(0, 65535, (3, 4), dtype=np.uint16)
    image = deserialize_message(serialize_message(_image(pixels, 'mono16', pad=2)), Image)
    reader = compile_reader(Image, ['data'], key=KEY, shape=(3, 4), encoding='mono16')
    np.testing.assert_array_equal(reader.read(image), pixels)


def test_writer_accepts_float32_and_2d_values():
    writer = compile_writer(Float64MultiArray, ['data'], key='actions.test', length=4)
    msg = writer.build(np.arange(4, dtype=np.float32).reshape(2, 2))
    assert list(msg.data) == [0.0, 1.0, 2.0, 3.0]


# ---------------------------------------------------------------------------- readers


def test_joint_state_read_by_name_in_config_order():
    reader = compile_reader(JointState, ['position', 'effort'], key=KEY,
                            joint_names=['elbow', 'shoulder'])
    msg = JointState(name=['shoulder', 'wrist', 'elbow'], position=[1.0, 2.0, 3.0],
                     velocity=[], effort=[10.0, 20.0, 30.0])
    np.testing.assert_array_equal(reader.read(msg), [3.0, 1.0, 30.0, 10.0])
    msg2 = JointState(name=['elbow', 'shoulder'], position=[5.0, 6.0], effort=[7.0, 8.0])
    np.testing.assert_array_equal(reader.read(msg2), [5.0, 6.0, 7.0, 8.0])


def test_joint_state_index_is_built_once_per_name_list(monkeypatch):
    built = []
    original = JointIndex._build

    def counting(self, names):
        built.append(names)
        return original(self, names)
    monkeypatch.setattr(JointIndex, '_build', counting)
    reader = compile_reader(JointState, ['position', 'velocity'], key=KEY,
                            joint_names=['b', 'a'])
    for value in range(3):
        msg = JointState(name=['a', 'b'], position=[value, 1.0], velocity=[2.0, 3.0])
        np.testing.assert_array_equal(reader.read(msg), [1.0, value, 3.0, 2.0])
    assert built == [('a', 'b')]


@pytest.mark.parametrize('size', [{'length': 2}, {'shape': [2]}, {}])
def test_joint_state_values_without_joint_names_are_refused(size):
    # By position, an arm's and a gripper's messages on one /joint_states would each be read
    # as the slot's joints, and a message with its joints in another order misread.
    with pytest.raises(ValueError, match=rf'^{KEY}\.joint_names: .*expected the joints to '
                                         r'read, got none'):
        compile_reader(JointState, ['velocity'], key=KEY, **size)
    assert compile_reader(JointState, ['header.stamp.sec'], key=KEY).size == 1


def test_odometry_paths():
    msg = Odometry()
    msg.pose.pose.position.x, msg.pose.pose.position.y = 1.0, 2.0
    msg.pose.pose.orientation.z, msg.pose.pose.orientation.w = 0.6, 0.8
    msg.twist.twist.linear.x, msg.twist.twist.angular.z = 0.3, -0.4
    reader = compile_reader(Odometry, ['pose.pose.position.x', 'pose.pose.position.y',
                                       'pose.pose.orientation', 'twist.twist.linear.x',
                                       'twist.twist.angular.z'], key=KEY)
    assert reader.size == 8
    np.testing.assert_allclose(reader.read(msg), [1, 2, 0, 0, 0.6, 0.8, 0.3, -0.4], rtol=1e-6)


def test_pose_and_twist_expand_in_declaration_order():
    pose = Pose()
    pose.position.x, pose.position.y, pose.position.z = 1.0, 2.0, 3.0
    pose.orientation.x, pose.orientation.w = 0.5, 0.5
    reader = compile_reader(Pose, ['position', 'orientation'], key=KEY)
    np.testing.assert_allclose(reader.read(pose), [1, 2, 3, 0.5, 0, 0, 0.5])
    twist = Twist()
    twist.angular.y = 9.0
    np.testing.assert_array_equal(compile_reader(Twist, ['angular'], key=KEY).read(twist),
                                  [0, 9, 0])


def test_imu_fields_and_fixed_size_covariance():
    msg = Imu()
    msg.orientation.w = 1.0
    msg.linear_acceleration.z = 9.81
    msg.angular_velocity.x = 0.1
    msg.orientation_covariance[4] = 0.5
    reader = compile_reader(Imu, ['orientation', 'angular_velocity', 'linear_acceleration',
                                  'orientation_covariance'], key=KEY)
    assert reader.size == 4 + 3 + 3 + 9
    out = reader.read(msg)
    np.testing.assert_allclose(out[:10], [0, 0, 0, 1, 0.1, 0, 0, 0, 0, 9.81], rtol=1e-6)
    assert out[10 + 4] == 0.5 and out[10:].sum() == 0.5


def test_float64_multi_array_length_from_shape():
    reader = compile_reader(Float64MultiArray, ['data'], key=KEY, shape=[2, 3])
    assert reader.size == 6 and reader.shape == (2, 3)
    out = reader.read(Float64MultiArray(data=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))
    np.testing.assert_array_equal(out, [[1, 2, 3], [4, 5, 6]])
    assert out.dtype == np.float32


def test_sequence_lengths_inferred_from_shape_split_evenly():
    reader = compile_reader(LaserScan, ['range_max', 'ranges', 'intensities'], key=KEY, shape=[7])
    msg = LaserScan(range_max=9.0, ranges=[1.0, 2.0, 3.0], intensities=[4.0, 5.0, 6.0])
    np.testing.assert_array_equal(reader.read(msg), [9, 1, 2, 3, 4, 5, 6])


def test_large_arrays_are_converted_without_python_loops():
    n = 100_000
    values = np.linspace(-1.0, 1.0, n)
    writer = compile_writer(Float32MultiArray, ['data'], key='actions.test', length=n)
    reader = compile_reader(Float32MultiArray, ['data'], key=KEY, length=n)
    msg = writer.build(values)
    np.testing.assert_allclose(reader.read(msg), values, rtol=1e-6)
    build = min(_mean_seconds(writer.build, values, 20) for _ in range(3))
    read = min(_mean_seconds(reader.read, msg, 20) for _ in range(3))
    assert build < 1e-3 and read < 1e-3, f'build {build * 1e6:.0f} us, read {read * 1e6:.0f} us'


FLOAT32_MAX = float(np.finfo(np.float32).max)
FIRST_INF = float(2 ** 128 - 2 ** 103)  # the least float64 whose float32 is inf
EDGES = [0.0, -0.7, 1e-46, FLOAT32_MAX, np.nextafter(FLOAT32_MAX, np.inf),
         np.nextafter(FIRST_INF, 0.0), FIRST_INF, 1e39, 1.7e308, np.inf, np.nan]
EDGES += [-value for value in EDGES]


def _joint_state(values, names=('a', 'b')):
    return JointState(name=list(names), position=values[:2], velocity=values[2:])


def _joint_arrays(values):
    """Return a JointState-like message with numpy arrays (``[] += array`` broadcasts)."""
    return SimpleNamespace(header=JointState().header, name=['b', 'a'],
                           position=np.array(values[:2]), velocity=np.array(values[2:]))


def _odometry(values):
    msg = Odometry()
    msg.pose.pose.position.x, msg.pose.pose.position.y = values[:2]
    msg.twist.twist.linear.x, msg.twist.twist.angular.z = values[2:]
    return msg


def _range(values):
    return Range(range=values[0], min_range=values[1], max_range=values[2],
                 field_of_view=values[3])


def _edge_readers(policy):
    """Yield readers of a few scalar or JointState values, each with a message setting 4 values."""
    if policy != 'max':  # 'max' reads range_max: Range alone has one
        joints = compile_reader(JointState, ['header.stamp.sec', 'position', 'velocity'],
                                key=KEY, joint_names=['b', 'a'], nonfinite=policy)
        yield joints, _joint_state
        yield joints, lambda values: _joint_state(values, names=('b', 'a'))
        yield joints, _joint_arrays
        yield compile_reader(Odometry, ['pose.pose.position.x', 'pose.pose.position.y',
                                        'twist.twist.linear.x', 'twist.twist.angular.z'],
                             key=KEY, nonfinite=policy), _odometry
    yield compile_reader(Range, ['range', 'min_range', 'max_range', 'field_of_view'], key=KEY,
                         nonfinite=policy), _range


@pytest.mark.parametrize('policy', ['keep', 'zero', 'max'])
def test_a_few_values_are_read_as_numpy_reads_them(policy):
    # Differential: the few values of scalar and JointState fields are listed as Python floats
    # and made an array at once; every value must read as numpy's field-by-field path reads
    # it (the float32 cast, the nonfinite policy at the edge where a float32 overflows).
    rng = np.random.default_rng(3)
    cells = 0
    for reader, make in _edge_readers(policy):
        for _ in range(60):
            values = [float(value) for value in rng.choice(EDGES, 4)]
            if reader.msg_type is Range:  # rclpy's float32 fields refuse a float32 overflow
                values = [value / 1e30 if np.isfinite(value) and abs(value) > FLOAT32_MAX
                          else value for value in values]
            msg = make(values)
            with warnings.catch_warnings(record=True) as numpy_warned:
                warnings.simplefilter('always')
                expected = reader.read_with_numpy(msg)
            with warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter('always')
                out = reader.read(msg)
            assert out.dtype == expected.dtype and out.shape == expected.shape
            np.testing.assert_array_equal(out, expected, err_msg=f'{values}')
            assert [w.category for w in warned] == [w.category for w in numpy_warned]
            cells += 1
    assert cells >= 60


@pytest.mark.parametrize('msg_type, values', [
    (UInt64, [0, 1, 2 ** 24 + 1, 2 ** 53 + 1, 2 ** 62 + 2 ** 38 + 1, 2 ** 64 - 1]),
    (Int64, [-2 ** 63, -(2 ** 24 + 1), -(2 ** 53 + 1), 2 ** 63 - 1]),
])
def test_integer_fields_are_read_as_numpy_reads_them(msg_type, values):
    reader = compile_reader(msg_type, ['data'], key=KEY)
    for value in values:
        msg = msg_type(data=value)
        assert reader.read(msg).tobytes() == reader.read_with_numpy(msg).tobytes(), value


def test_a_few_values_within_float32_are_not_read_field_by_field(monkeypatch):
    reader = compile_reader(JointState, ['header.stamp.sec', 'position', 'velocity'], key=KEY,
                            joint_names=['b', 'a'])
    monkeypatch.setattr(reader, 'read_with_numpy', None)
    out = reader.read(_joint_state([0.5, FLOAT32_MAX, -0.7, 1e-46]))
    np.testing.assert_array_equal(out, np.array([0, FLOAT32_MAX, 0.5, 1e-46, -0.7], np.float32))


def test_a_long_or_typed_reader_reads_with_numpy(monkeypatch):
    # An array field of its own numeric type is cast to it first (numpy's cast decides), and
    # many values cost less as numpy calls: both take numpy's path.
    for reader, msg in (
            (compile_reader(Imu, ['orientation', 'orientation_covariance'], key=KEY), Imu()),
            (compile_reader(JointState, ['position'], key=KEY,
                            joint_names=[f'j{i}' for i in range(33)]),
             JointState(name=[f'j{i}' for i in range(33)], position=[1.0] * 33))):
        called = []
        monkeypatch.setattr(reader, 'read_with_numpy', lambda message: called.append(message))
        reader.read(msg)
        assert called == [msg]


def test_read_returns_a_fresh_array():
    reader = compile_reader(Float64MultiArray, ['data'], key=KEY, length=2)
    msg = Float64MultiArray(data=[1.0, 2.0])
    first = reader.read(msg)
    first[0] = 99.0
    assert reader.read(msg)[0] == 1.0 and msg.data[0] == 1.0


def _scan(ranges, range_max=10.0):
    return LaserScan(range_min=0.1, range_max=range_max, ranges=ranges)


@pytest.mark.parametrize('policy, expected', [
    ('max', [1.0, 10.0, 10.0, np.float32(0.1), 2.0]),  # -inf: too close, range_min
    ('zero', [1.0, 0.0, 0.0, 0.0, 2.0]),
])
def test_laser_scan_nonfinite_replaced(policy, expected):
    reader = compile_reader(LaserScan, ['ranges'], key=KEY, shape=[5], nonfinite=policy)
    out = reader.read(_scan([1.0, np.inf, np.nan, -np.inf, 2.0]))
    np.testing.assert_array_equal(out, expected)


def test_laser_scan_nonfinite_kept():
    reader = compile_reader(LaserScan, ['ranges'], key=KEY, shape=[3])
    out = reader.read(_scan([np.inf, np.nan, 3.0]))
    assert np.isposinf(out[0]) and np.isnan(out[1]) and out[2] == 3.0


def test_laser_scan_max_uses_each_messages_range_max():
    reader = compile_reader(LaserScan, ['ranges'], key=KEY, length=2, nonfinite='max')
    np.testing.assert_array_equal(reader.read(_scan([np.inf, 1.0], range_max=4.0)), [4.0, 1.0])
    np.testing.assert_array_equal(reader.read(_scan([np.inf, 1.0], range_max=6.0)), [6.0, 1.0])


def test_a_scan_too_close_to_measure_reads_as_near_not_as_far():
    # REP 117: -inf is a detection too close to measure, +inf nothing within range_max.
    reader = compile_reader(LaserScan, ['ranges'], key=KEY, length=3, nonfinite='max')
    np.testing.assert_array_equal(reader.read(_scan([-np.inf, np.inf, 1.0])),
                                  [np.float32(0.1), 10.0, 1.0])


def test_a_range_sensor_takes_nonfinite_max_from_its_max_range():
    reader = compile_reader(Range, ['range'], key=KEY, nonfinite='max')
    message = Range(min_range=0.02, max_range=4.0)
    for value, expected in ((np.inf, 4.0), (-np.inf, 0.02), (np.nan, 4.0), (1.5, 1.5)):
        message.range = value
        np.testing.assert_array_equal(reader.read(message), [np.float32(expected)])


# ---------------------------------------------------------------------------- images


def _image(pixels, encoding, *, pad=0, bigendian=False):
    """Pack pixels row by row with pad bytes of 0xAB after each row."""
    height, width = pixels.shape[:2]
    order = '>' if bigendian else '<'
    rows = pixels.astype(pixels.dtype.newbyteorder(order)).reshape(height, -1)
    row_bytes = rows[0].nbytes
    data = bytearray(b'\xab' * ((row_bytes + pad) * height))
    for r in range(height):
        start = r * (row_bytes + pad)
        data[start:start + row_bytes] = rows[r].tobytes()
    return Image(height=height, width=width, encoding=encoding, is_bigendian=int(bigendian),
                 step=row_bytes + pad, data=bytes(data))


_RNG = np.random.default_rng(0)


@pytest.mark.parametrize('encoding, dtype, shape', [
    ('rgb8', np.uint8, (4, 5, 3)),
    ('bgr8', np.uint8, (4, 5, 3)),
    ('rgba8', np.uint8, (4, 5, 4)),
    ('mono8', np.uint8, (4, 5)),
    ('8UC1', np.uint8, (4, 5, 1)),
    ('mono16', np.uint16, (4, 5)),
    ('16UC1', np.uint16, (4, 5)),
    ('32FC1', np.float32, (4, 5)),
])
@pytest.mark.parametrize('pad', [0, 3])
def test_image_encodings(encoding, dtype, shape, pad):
    if np.dtype(dtype).kind == 'f':
        pixels = _RNG.random(shape).astype(dtype)
    else:
        pixels = _RNG.integers(0, np.iinfo(dtype).max, shape, dtype=dtype, endpoint=True)
    reader = compile_reader(Image, ['data'], key=KEY, shape=shape, encoding=encoding)
    assert reader.shape == shape and reader.dtype == dtype and reader.size == pixels.size
    out = reader.read(_image(pixels, encoding, pad=pad))
    assert out.dtype == dtype and out.shape == shape
    np.testing.assert_array_equal(out, pixels)


@pytest.mark.parametrize('encoding, dtype', [('16UC1', np.uint16), ('32FC1', np.float32)])
def test_image_big_endian(encoding, dtype):
    pixels = (np.arange(12).reshape(3, 4) * 1000 + 7).astype(dtype)
    reader = compile_reader(Image, [], key=KEY, shape=(3, 4), encoding=encoding)
    out = reader.read(_image(pixels, encoding, pad=2, bigendian=True))
    assert out.dtype == np.dtype(dtype) and out.dtype.isnative
    np.testing.assert_array_equal(out, pixels)


def test_image_to_rgb_swaps_bgr_and_keeps_rgb():
    pixels = _RNG.integers(0, 255, (2, 3, 3), dtype=np.uint8)
    reader = compile_reader(Image, ['data'], key=KEY, shape=(2, 3, 3), encoding='rgb8',
                            to_rgb=True)
    np.testing.assert_array_equal(reader.read(_image(pixels, 'rgb8')), pixels)
    np.testing.assert_array_equal(reader.read(_image(pixels[..., ::-1], 'bgr8')), pixels)


def test_bgr_kept_as_given_without_to_rgb():
    pixels = _RNG.integers(0, 255, (2, 3, 3), dtype=np.uint8)
    reader = compile_reader(Image, ['data'], key=KEY, shape=(2, 3, 3), encoding='bgr8')
    np.testing.assert_array_equal(reader.read(_image(pixels, 'bgr8')), pixels)
    with pytest.raises(ValueError, match="expected image encoding bgr8, got 'rgb8'"):
        reader.read(_image(pixels, 'rgb8'))


def test_depth_image_nonfinite_zero():
    pixels = np.array([[1.0, np.nan], [np.inf, 2.0]], np.float32)
    reader = compile_reader(Image, ['data'], key=KEY, shape=(2, 2), encoding='32FC1',
                            nonfinite='zero')
    np.testing.assert_array_equal(reader.read(_image(pixels, '32FC1')), [[1, 0], [0, 2]])


def test_vga_rgb8_is_a_read_only_view_and_fast():
    pixels = _RNG.integers(0, 255, (480, 640, 3), dtype=np.uint8)
    msg = _image(pixels, 'rgb8', pad=64)
    reader = compile_reader(Image, ['data'], key=KEY, shape=(480, 640, 3), encoding='rgb8')
    out = reader.read(msg)
    np.testing.assert_array_equal(out, pixels)
    assert np.shares_memory(out, np.frombuffer(msg.data, np.uint8))
    assert not out.flags.writeable
    best = min(_mean_seconds(reader.read, msg, 200) for _ in range(5))
    assert best < 100e-6, f'{best * 1e6:.1f} us per 640x480 read'


def _mean_seconds(function, argument, repeats):
    start = time.perf_counter()
    for _ in range(repeats):
        function(argument)
    return (time.perf_counter() - start) / repeats


def test_image_of_the_wrong_size_at_read():
    reader = compile_reader(Image, ['data'], key=KEY, shape=(4, 5), encoding='mono8')
    with pytest.raises(ValueError, match=r'expected a 4x5 image \(height x width\), got 4x6'):
        reader.read(_image(np.zeros((4, 6), np.uint8), 'mono8'))
    short = _image(np.zeros((4, 5), np.uint8), 'mono8')
    short.data = short.data[:-1]
    with pytest.raises(ValueError, match='expected at least 20 bytes of image data'):
        reader.read(short)


@pytest.mark.parametrize('options, message', [
    ({'shape': (4, 5, 3)}, 'needs an encoding, one of rgb8.*got None'),
    ({'shape': (4, 5), 'encoding': 'rgb8'}, r'shape must be \[height, width, 3\]'),
    ({'shape': (4, 5, 1), 'encoding': 'yuv422'}, "got 'yuv422'"),
    ({'encoding': 'mono8'}, r'needs shape \[height, width\], got None'),
    ({'shape': (4, 5), 'encoding': 'mono8', 'to_rgb': True}, 'to_rgb needs an RGB or BGR'),
    ({'shape': (4, 5), 'encoding': 'mono8', 'nonfinite': 'zero'}, 'needs a float encoding'),
])
def test_image_config_errors(options, message):
    with pytest.raises(ValueError, match=f'^{KEY}: .*{message}'):
        compile_reader(Image, ['data'], key=KEY, **options)


# ---------------------------------------------------------------------------- errors


def test_unknown_field_path_lists_the_fields():
    with pytest.raises(ValueError) as info:
        compile_reader(Odometry, ['pose.pose.positon.x'], key=KEY)
    text = str(info.value)
    assert text.startswith(f"{KEY}: nav_msgs/msg/Odometry has no field 'pose.pose.positon.x'")
    assert 'expected one of position, orientation at pose.pose' in text
    with pytest.raises(ValueError, match='expected one of header, name, position, velocity, '
                                         'effort at sensor_msgs/msg/JointState'):
        compile_reader(JointState, ['positions'], key=KEY, joint_names=['a'])


def test_field_path_through_a_number():
    with pytest.raises(ValueError, match='linear.x is a double, which has no fields'):
        compile_reader(Twist, ['linear.x.y'], key=KEY)


def test_non_numeric_field():
    with pytest.raises(ValueError, match="got 'child_frame_id' of type string"):
        compile_reader(Odometry, ['child_frame_id'], key=KEY)


def test_undeclared_sequence_length():
    with pytest.raises(ValueError, match='ranges has a length known only at run time'):
        compile_reader(LaserScan, ['ranges'], key=KEY)
    with pytest.raises(ValueError, match='data has a length known only at run time'):
        compile_writer(Float64MultiArray, ['data'], key=KEY)


def test_wrong_length_at_read():
    reader = compile_reader(LaserScan, ['ranges'], key=KEY, length=4)
    with pytest.raises(ValueError, match=f"^{KEY}: expected 4 values in 'ranges', got 3$"):
        reader.read(_scan([1.0, 2.0, 3.0]))


def test_joint_state_field_shorter_than_names_at_read():
    reader = compile_reader(JointState, ['velocity'], key=KEY, joint_names=['a'])
    with pytest.raises(ValueError, match="expected 2 values in 'velocity' .*got 0"):
        reader.read(JointState(name=['a', 'b'], position=[1.0, 2.0]))


def test_missing_joint():
    reader = compile_reader(JointState, ['position'], key=KEY, joint_names=['a', 'c', 'd'])
    msg = JointState(name=['a', 'b'], position=[1.0, 2.0])
    with pytest.raises(ValueError, match=r'expected joints c, d in the JointState message, '
                                         r'got names \[a, b\]'):
        reader.read(msg)


def test_writer_config_errors():
    with pytest.raises(ValueError, match='expected joint_names for sensor_msgs/msg/JointState'):
        compile_writer(JointState, ['position'], key=KEY)
    with pytest.raises(ValueError, match="expected float or double fields to write, got 'data'"):
        compile_writer(Int32, ['data'], key=KEY)
    with pytest.raises(ValueError, match='time_from_start applies to trajectory_msgs'):
        compile_writer(Twist, ['linear.x'], key=KEY, time_from_start=0.1)
    with pytest.raises(ValueError, match='expected time_from_start >= 0 seconds'):
        compile_writer(JointTrajectory, ['positions'], key=KEY, joint_names=['a'],
                       time_from_start=-1.0)
    with pytest.raises(ValueError, match="expected frame_id .*got 'map' for geometry_msgs"):
        compile_writer(Twist, ['linear.x'], key=KEY, frame_id='map')
    with pytest.raises(ValueError, match='expected length == len\\(joint_names\\) == 2, got 3'):
        compile_writer(Float64MultiArray, ['data'], key=KEY, joint_names=['a', 'b'], length=3)


def test_reader_config_errors():
    with pytest.raises(ValueError, match="expected each field once, got 'linear.x' twice"):
        compile_reader(Twist, ['linear', 'linear.x'], key=KEY)
    with pytest.raises(ValueError, match="expected a non-empty list of field paths, got 'data'"):
        compile_reader(Float64, 'data', key=KEY)
    with pytest.raises(ValueError, match="nonfinite 'max' uses the message's range_max"):
        compile_reader(Float64, ['data'], key=KEY, nonfinite='max')
    with pytest.raises(ValueError, match="expected nonfinite in keep, zero, max, got 'nan'"):
        compile_reader(Float64, ['data'], key=KEY, nonfinite='nan')
    with pytest.raises(ValueError, match=r'expected shape to hold 3 values, got \[4\]'):
        compile_reader(Twist, ['linear'], key=KEY, shape=[4])
    with pytest.raises(ValueError, match='expected unique joint_names, got a twice'):
        compile_reader(JointState, ['position'], key=KEY, joint_names=['a', 'b', 'a'])
    with pytest.raises(ValueError, match='expected a ROS message class, got'):
        compile_reader(Trigger, ['success'], key=KEY)
    with pytest.raises(ValueError, match=r'shape \[7\] does not split evenly'):
        compile_reader(LaserScan, ['ranges', 'intensities'], key=KEY, shape=[7])


@pytest.mark.parametrize('loader, type_name', [('load_message_type', 'this/msg/Float64'),
                                               ('load_service_type', 'this/srv/Trigger')])
def test_a_type_of_an_ordinary_module_is_refused_without_importing_it(loader, type_name):
    import subprocess
    import sys
    code = ('import sys\n'
            f'from rtgym_ros.msgconv.type_names import {loader}\n'
            'try:\n'
            f"    {loader}('{type_name}', key='k')\n"
            'except ValueError as error:\n'
            '    print(error)\n'
            "print('imported' if 'this' in sys.modules else 'not imported')\n")
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                            timeout=60)
    assert 'expected a ROS interface package' in result.stdout, result
    assert result.stdout.strip().endswith('not imported'), result.stdout
    assert 'Beautiful is better than ugly' not in result.stdout  # this's side effect
