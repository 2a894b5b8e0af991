"""
What an observation outside its space reads as: counts, NaN named, no list of every pixel.

The message is built at a capture, on the executor thread, every time-step the slot is out of
bounds: for an image it must cost a few numpy passes, not a Python list of the frame.
"""

from pathlib import Path

from config_slots import slot_from_config
import numpy as np
from rtgym_ros.core.validate import bound_repr, short_repr
from rtgym_ros.robot.slots import Slot


def depth_slot(tmp_path: Path, shape: tuple[int, int] = (48, 64)) -> Slot:
    depth = {'topic': 'depth', 'type': 'sensor_msgs/msg/Image', 'encoding': '32FC1',
             'shape': list(shape), 'low': [0.0], 'high': [10.0]}
    return slot_from_config(tmp_path, 'depth', depth)


class _CountingArray(np.ndarray):
    """An array that notes how many elements each ``tolist()`` converted."""

    converted: list[int] = []

    def tolist(self):
        _CountingArray.converted.append(self.size)
        return super().tolist()


def test_nan_and_values_beyond_the_bounds_are_counted_and_nan_is_named(tmp_path):
    slot = depth_slot(tmp_path)
    frame = np.full((48, 64), 2.0, dtype=np.float32)
    frame[0, :5] = np.nan  # no return from the surface
    frame[1, :3] = 12.0  # beyond the sensor's range
    assert slot.outside(frame)
    text = slot.describe_outside(frame)
    assert text.startswith('8 of 3072 values outside (5 NaN): '), text
    assert 'nan' in text and len(text) < 400


def test_values_beyond_the_bounds_without_nan_say_no_nan(tmp_path):
    slot = depth_slot(tmp_path)
    frame = np.full((48, 64), 11.0, dtype=np.float32)
    assert slot.describe_outside(frame).startswith('3072 of 3072 values outside: ')


def test_an_image_is_not_converted_to_a_list_whole(tmp_path):
    slot = depth_slot(tmp_path, shape=(480, 640))
    frame = np.full((480, 640), np.nan, dtype=np.float32).view(_CountingArray)
    _CountingArray.converted.clear()
    text = slot.describe_outside(frame)
    assert text.startswith('307200 of 307200 values outside (307200 NaN)'), text
    assert _CountingArray.converted and max(_CountingArray.converted) <= 81, \
        _CountingArray.converted  # 9 x 9: what the repr shows, and one more to say '...'


def test_short_repr_of_an_array_reads_as_the_repr_of_its_list():
    for value in (np.arange(5.0), np.arange(100.0), np.arange(600.0).reshape(20, 30),
                  np.zeros((3, 4, 5, 6)), np.array(1.5)):
        assert short_repr(value) == short_repr(value.tolist())


def test_a_uniform_bound_reads_as_one_number():
    assert bound_repr(np.full((480, 640), 10.0, dtype=np.float32)) == '10.0'
    assert bound_repr(np.array([-1.0, 2.0])) == '[-1.0, 2.0]'
    assert bound_repr(np.full(3, -np.inf)) == '-inf'


def test_a_few_values_are_outside_exactly_where_numpy_says(tmp_path):
    # A small space is checked in Python (cheaper at a capture): the same answer as the
    # numpy comparison an image gets, NaN, infinities and values at the bounds included.
    joints = {'topic': 'joint_states', 'type': 'sensor_msgs/msg/JointState',
              'joint_names': ['a', 'b', 'c'], 'fields': ['position', 'velocity'],
              'low': [-1.0, -2.0, -3.0, 0.0, 0.0, -0.5], 'high': [1.0, 2.0, 3.0, 5.0, 0.0, 0.5]}
    slot = slot_from_config(tmp_path, 'joints', joints)
    space = slot.spec.space
    rng = np.random.default_rng(7)
    specials = np.array([np.nan, np.inf, -np.inf, -1.0, 1.0, 0.0, 5.0, -0.5, 0.5, 3.0000002],
                        np.float32)
    for _ in range(2000):
        value = np.where(rng.random(6) < 0.3, rng.choice(specials, 6),
                         rng.uniform(-4.0, 6.0, 6)).astype(np.float32)
        if rng.random() < 0.5:  # within bounds but for at most one value
            value = np.clip(value, space.low, space.high)
            value[rng.integers(6)] = rng.choice(specials)
        expected = not bool(np.all((value >= space.low) & (value <= space.high)))
        assert slot.outside(value) == expected, value
