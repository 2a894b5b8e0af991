"""
Observation transforms of a robot config: shapes, bounds, values, layouts and errors.

Messages are built in-process and read through the slot the env would use (no DDS); the
configs go through the loader as a params file, as ``gym.make`` reads them.
"""

import copy
import math
from pathlib import Path
from typing import Any

import gymnasium.spaces as spaces
from nav_msgs.msg import Odometry
import numpy as np
import pytest
from rtgym_ros.robot.env import resolve_robot_config, robot_spaces
from rtgym_ros.robot.loader import load_robot_config
from rtgym_ros.robot.slots import Slot
from rtgym_ros.robot.transforms import compile_transform
from sensor_msgs.msg import Image, LaserScan
import yaml

SCAN = {'topic': 'scan', 'type': 'sensor_msgs/msg/LaserScan', 'field': 'ranges',
        'length': 360, 'nonfinite': 'max', 'low': [0.0], 'high': [3.5]}
ODOM = {'topic': 'odom', 'type': 'nav_msgs/msg/Odometry',
        'fields': ['pose.pose.position.x', 'pose.pose.position.y', 'pose.pose.orientation',
                   'twist.twist.linear.x', 'twist.twist.angular.z'],
        'low': [-10.0, -10.0, -1.0, -1.0, -1.0, -1.0, -0.3, -2.0],
        'high': [10.0, 10.0, 1.0, 1.0, 1.0, 1.0, 0.3, 2.0]}


def robot(**observations: dict) -> dict:
    return {
        'time_step_duration': 0.1,
        'actions': {'names': ['cmd_vel'], 'cmd_vel': {
            'topic': 'cmd_vel', 'type': 'geometry_msgs/msg/Twist',
            'fields': ['linear.x', 'angular.z'], 'low': [-0.2, -2.0], 'high': [0.2, 2.0]}},
        'observations': {'names': list(observations), **observations},
    }


def load(tmp_path: Path, params: dict, **overrides: Any):
    path = tmp_path / 'robot.yaml'
    path.write_text(yaml.safe_dump({'/**': {'ros__parameters': params}}))
    return load_robot_config(path, **overrides)


def slot_of(spec, name: str) -> Slot:
    [slot_spec] = [s for s in spec.observations if s.name == name]
    return Slot(slot_spec, now=lambda: 0.0)


def read(slot: Slot, message: Any) -> np.ndarray:
    slot.store(message)
    return slot.read()


def quaternion(yaw: float) -> tuple[float, float, float, float]:
    return 0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)


# -- laser scans ------------------------------------------------------------------------------


def test_a_360_beam_scan_becomes_36_window_minima(tmp_path):
    _, spec = load(tmp_path, robot(scan=dict(SCAN, transform={'window_min': 10})))
    slot = slot_of(spec, 'scan')
    assert slot.spec.space == spaces.Box(0.0, 3.5, (36,), np.float32)
    ranges = np.linspace(0.2, 3.0, 360)
    ranges[15] = 0.1
    ranges[200] = math.inf  # no return: range_max (nonfinite: max), before the minimum
    value = read(slot, LaserScan(ranges=ranges.tolist(), range_max=3.5))
    expected = ranges.reshape(36, 10).min(axis=1)
    assert value.dtype == np.float32 and value.shape == (36,)
    np.testing.assert_allclose(value, expected, rtol=1e-6)
    assert value[1] == pytest.approx(0.1) and value in slot.spec.space
    assert slot.spec.labels[0] == 'min(ranges[0]..ranges[9])'
    assert slot.spec.labels[35] == 'min(ranges[350]..ranges[359])'


@pytest.mark.parametrize('step, reduce', [('window_mean', np.mean), ('window_max', np.max)])
def test_window_mean_and_max(tmp_path, step, reduce):
    _, spec = load(tmp_path, robot(scan=dict(SCAN, transform={step: 36})))
    slot = slot_of(spec, 'scan')
    ranges = np.random.default_rng(0).uniform(0.0, 3.5, 360)
    value = read(slot, LaserScan(ranges=ranges.tolist(), range_max=3.5))
    np.testing.assert_allclose(value, reduce(ranges.reshape(10, 36), axis=1), rtol=1e-5)
    assert slot.spec.space.shape == (10,)
    assert slot.spec.space.low.tolist() == [0.0] * 10
    assert slot.spec.space.high.tolist() == [3.5] * 10


def test_a_last_window_may_be_shorter():
    transform = compile_transform({'window_mean': 4}, size=10, low=np.zeros(10),
                                  high=np.full(10, 2.0), labels=None, key='t')
    assert transform.size == 3
    values = np.arange(10, dtype=np.float32)
    np.testing.assert_allclose(transform.apply(values), [1.5, 5.5, 8.5])
    assert transform.labels[-1] == 'mean([8]..[9])'


@pytest.mark.parametrize('width', [10, 11, 10**30])
def test_a_window_as_wide_as_the_values_or_wider_is_one_window(width):
    transform = compile_transform({'window_min': width}, size=10, low=np.zeros(10),
                                  high=np.full(10, 2.0), labels=None, key='t')
    assert transform.size == 1
    np.testing.assert_allclose(transform.apply(np.arange(10, 0, -1, dtype=np.float32)), [1.0])
    assert transform.labels == ('min([0]..[9])',)


def test_select_then_stride_then_window_then_scale_and_offset(tmp_path):
    # The front half of the scan (beams 270..359 and 0..89), every 2nd beam, minimum of 5,
    # in units of the maximal range, centred.
    front = list(range(270, 360)) + list(range(0, 90))
    transform = {'select': front, 'stride': 2, 'window_min': 5, 'scale': 1 / 3.5,
                 'offset': -0.5}
    _, spec = load(tmp_path, robot(scan=dict(SCAN, transform=transform)))
    slot = slot_of(spec, 'scan')
    ranges = np.random.default_rng(1).uniform(0.1, 3.5, 360)
    value = read(slot, LaserScan(ranges=ranges.tolist(), range_max=3.5))
    expected = ranges[front][::2].reshape(18, 5).min(axis=1) / 3.5 - 0.5
    np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6)
    assert slot.spec.space.low == pytest.approx(np.full(18, -0.5))
    assert slot.spec.space.high == pytest.approx(np.full(18, 0.5))
    assert slot.spec.labels[0] == '0.285714*min(ranges[270]..ranges[278])-0.5'


# -- odometry ---------------------------------------------------------------------------------


@pytest.mark.parametrize('yaw', [0.0, 0.3, -1.2, math.pi / 2, 3.0, -3.0, math.pi])
def test_odometry_yaw_from_the_orientation_quaternion(tmp_path, yaw):
    _, spec = load(tmp_path, robot(odom=dict(ODOM, transform={'quaternion_to_yaw': 2})))
    slot = slot_of(spec, 'odom')
    assert slot.spec.labels == ('pose.pose.position.x', 'pose.pose.position.y',
                                'yaw(pose.pose.orientation)', 'twist.twist.linear.x',
                                'twist.twist.angular.z')
    space = slot.spec.space
    assert space.shape == (5,)
    assert space.low[[0, 1, 3, 4]].tolist() == [-10.0, -10.0, np.float32(-0.3), -2.0]
    assert space.low[2] <= -math.pi and space.high[2] >= math.pi
    message = Odometry()
    message.pose.pose.position.x, message.pose.pose.position.y = 1.5, -2.0
    (message.pose.pose.orientation.x, message.pose.pose.orientation.y,
     message.pose.pose.orientation.z, message.pose.pose.orientation.w) = quaternion(yaw)
    message.twist.twist.linear.x, message.twist.twist.angular.z = 0.2, -0.5
    value = read(slot, message)
    expected_yaw = math.atan2(math.sin(yaw), math.cos(yaw))
    assert value[[0, 1, 3, 4]].tolist() == pytest.approx([1.5, -2.0, 0.2, -0.5])
    assert abs(math.remainder(value[2] - expected_yaw, 2 * math.pi)) < 1e-6
    assert value in space


def test_yaw_of_a_tilted_quaternion_and_of_two_quaternions():
    # Roll 0.4, pitch -0.2, yaw 1.1 (ZYX): yaw is read whatever the tilt.
    roll, pitch, yaw = 0.4, -0.2, 1.1
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    tilted = [sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy,
              cr * cp * sy - sr * sp * cy, cr * cp * cy + sr * sp * sy]
    labels = [f'{where}.{axis}' for where in ('a', 'b') for axis in 'xyzw'] + ['c']
    transform = compile_transform({'quaternion_to_yaw': [0, 4]}, size=9, low=np.full(9, -1.0),
                                  high=np.full(9, 1.0), labels=labels, key='t')
    value = transform.apply(np.array(tilted + list(quaternion(-2.5)) + [0.7], np.float32))
    assert value.tolist() == pytest.approx([yaw, -2.5, 0.7], abs=1e-6)
    assert transform.labels == ('yaw(a)', 'yaw(b)', 'c')


def test_scale_by_a_negative_or_zero_factor_orders_and_bounds_the_space():
    transform = compile_transform({'scale': [-2.0, 0.0, 1.0]}, size=3,
                                  low=np.array([-1.0, -np.inf, 0.0]),
                                  high=np.array([3.0, np.inf, np.inf]), labels=None, key='t')
    assert transform.low.tolist() == [-6.0, 0.0, 0.0]
    assert transform.high.tolist() == [2.0, 0.0, np.inf]
    assert transform.apply(np.array([1.0, 5.0, 2.0], np.float32)).tolist() == [-2.0, 0.0, 2.0]


def test_negative_select_indices_count_from_the_end():
    transform = compile_transform({'select': [-1, 0]}, size=4, low=np.zeros(4),
                                  high=np.arange(1.0, 5.0), labels=['a', 'b', 'c', 'd'], key='t')
    assert transform.labels == ('d', 'a') and transform.high.tolist() == [4.0, 1.0]
    assert transform.apply(np.arange(4, dtype=np.float32)).tolist() == [3.0, 0.0]


def test_the_observation_space_of_the_env_is_the_transformed_one(tmp_path):
    params = robot(scan=dict(SCAN, transform={'window_min': 10}),
                   odom=dict(ODOM, transform={'quaternion_to_yaw': 2, 'select': [0, 1, 2]}))
    env_config, spec = load(tmp_path, params, act_buf_len=2)
    action_space, layout, space = robot_spaces(resolve_robot_config(env_config), spec)
    assert space['scan'].shape == (36,) and space['odom'].shape == (3,)
    assert space['action_buffer'].shape == (2, 2)
    sample = space.sample()
    assert layout.build({'scan': sample['scan'], 'odom': sample['odom']},
                        [action_space.sample()] * 2) in space


# -- errors name the key ----------------------------------------------------------------------


def odom_with(transform: Any) -> dict:
    return robot(odom=dict(ODOM, transform=transform))


TRANSFORM_ERRORS = {
    'not_a_mapping': (odom_with(5), ['observations.odom.transform must be a mapping']),
    'unknown_step': (odom_with({'downsample': 10}),
                     ["unknown steps ['downsample']", 'quaternion_to_yaw, select']),
    'two_windows': (odom_with({'window_min': 2, 'window_mean': 2}),
                    ['observations.odom.transform', 'window_min, window_mean']),
    'quaternion_too_far': (odom_with({'quaternion_to_yaw': 5}),
                           ['observations.odom.transform.quaternion_to_yaw', 'index 5',
                            'reads 8 values']),
    'not_a_quaternion': (odom_with({'quaternion_to_yaw': 1}),
                         ['observations.odom.transform.quaternion_to_yaw',
                          'must be the x, y, z, w', 'pose.pose.position.y']),
    'overlapping_quaternions': (
        robot(scan=dict(SCAN, transform={'quaternion_to_yaw': [0, 2]})),
        ['observations.scan.transform.quaternion_to_yaw', 'overlap at index 2']),
    'negative_quaternion_index': (odom_with({'quaternion_to_yaw': -1}),
                                  ['quaternion_to_yaw must be an integer >= 0']),
    'select_out_of_range': (odom_with({'select': [0, 8]}),
                            ['observations.odom.transform.select', 'index 8',
                             'out of range for 8 values']),
    'select_after_yaw_counts_the_yaw': (
        odom_with({'quaternion_to_yaw': 2, 'select': [5]}),
        ['observations.odom.transform.select', 'index 5', 'for 5 values']),
    'stride_zero': (odom_with({'stride': 0}), ['observations.odom.transform.stride', '>= 1']),
    'window_not_an_int': (robot(scan=dict(SCAN, transform={'window_min': 2.5})),
                          ['observations.scan.transform.window_min must be an integer']),
    'scale_size': (robot(scan=dict(SCAN, transform={'window_min': 10, 'scale': [1.0, 2.0]})),
                   ['observations.scan.transform.scale must have 1 value or 36', 'got 2']),
    'offset_not_finite': (odom_with({'offset': 'x'}),
                          ['observations.odom.transform.offset must be a list of numbers']),
    'image': (robot(camera={'topic': 'image', 'type': 'sensor_msgs/msg/Image',
                            'encoding': 'mono8', 'shape': [4, 4],
                            'transform': {'scale': 2.0}}),
              ['observations.camera.transform applies to a vector', '[4, 4]']),
    'stale_warn_steps': (robot(odom=dict(ODOM, stale_warn_steps=0)),
                         ['observations.odom.stale_warn_steps', '>= 1']),
}


@pytest.mark.parametrize('case', sorted(TRANSFORM_ERRORS))
def test_transform_errors_name_the_key(tmp_path, case):
    params, expected = TRANSFORM_ERRORS[case]
    with pytest.raises(ValueError) as error:
        load(tmp_path, copy.deepcopy(params))
    for text in expected:
        assert text in str(error.value), f'{text!r} not in {error.value}'


# -- images: two observations never share memory ----------------------------------------------


def test_an_image_read_twice_from_one_message_is_copied(tmp_path):
    params = robot(camera={'topic': 'image', 'type': 'sensor_msgs/msg/Image',
                           'encoding': 'mono8', 'shape': [2, 3]})
    _, spec = load(tmp_path, params)
    slot = slot_of(spec, 'camera')
    message = Image(height=2, width=3, encoding='mono8', step=3, data=bytes(range(6)))
    first = read(slot, message)
    second, third = slot.read(), slot.read()
    assert first.tolist() == second.tolist() == third.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert not np.shares_memory(first, second) and not np.shares_memory(second, third)
    newer = read(slot, Image(height=2, width=3, encoding='mono8', step=3, data=bytes(6)))
    assert newer.tolist() == [[0, 0, 0], [0, 0, 0]] and not np.shares_memory(first, newer)


@pytest.mark.parametrize('high, transform', [
    (3.5, {'scale': 0.3}),  # float32: 3.5 * 0.3 is 1.0500001, above the bound 1.05
    (25.0, {'scale': 1 / 30}),
    (1.1, {'window_mean': 10}),  # float32: the mean of ten 1.1 is 1.1000001
    (0.1, {'window_mean': 7, 'offset': 0.2}),
])
def test_a_scan_at_its_bounds_stays_in_the_transformed_space(tmp_path, high, transform):
    scan = dict(SCAN, length=70, low=[-high], high=[high], transform=transform)
    _, spec = load(tmp_path, robot(scan=scan))
    slot = slot_of(spec, 'scan')
    for end in (high, -high):
        # inf (no return) reads as range_max: the high bound itself, a common value
        value = read(slot, LaserScan(ranges=[end] * 70, range_max=high))
        assert not slot.outside(value), (value[:3], slot.spec.space)
        assert value in slot.spec.space
