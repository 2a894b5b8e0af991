"""A Float64MultiArray's data read from its CDR bytes, as rclpy's deserializer reads it."""

import math
import random

from corrupt_bytes import corrupted
import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from rtgym_ros.msgconv.multi_array_cdr import data_of
from std_msgs.msg import Float64MultiArray, MultiArrayDimension


def random_message(rng: random.Random) -> Float64MultiArray:
    message = Float64MultiArray()
    message.layout.dim = [
        MultiArrayDimension(label=''.join(rng.choice('abxé_') for _ in range(rng.randint(0, 6))),
                            size=rng.randrange(2**32), stride=rng.randrange(2**32))
        for _ in range(rng.choice([0, 0, 1, 2, 3]))]
    message.layout.data_offset = rng.randrange(2**32)
    message.data = [rng.choice([rng.uniform(-1e3, 1e3), math.nan, math.inf, -0.0])
                    for _ in range(rng.choice([0, 1, 1, 2, 7, rng.randint(0, 20)]))]
    return message


def assert_read_as_rclpy_reads_it(data: bytes) -> None:
    """Check that data_of gives what rclpy's deserializer gives, or raises what it raises."""
    try:
        expected = np.array(deserialize_message(data, Float64MultiArray).data, np.float64)
    except Exception as error:  # noqa: B902 - whatever rclpy raises, data_of raises
        with pytest.raises(type(error), match=str(error)):
            data_of(data)
    else:
        got = data_of(data)
        assert got.dtype == np.float64 and got.tobytes() == expected.tobytes(), (got, expected)


def test_data_is_what_rclpy_reads_from_rclpys_bytes():
    rng = random.Random(11)
    for _ in range(2000):
        assert_read_as_rclpy_reads_it(serialize_message(random_message(rng)))


def test_a_command_of_one_effort():
    values = data_of(serialize_message(Float64MultiArray(data=[-1.25])))
    assert values.tolist() == [-1.25] and not values.flags.writeable


def test_corrupt_and_cut_short_bytes_are_read_as_rclpy_reads_them():
    rng = random.Random(12)
    for _ in range(2000):
        assert_read_as_rclpy_reads_it(corrupted(serialize_message(random_message(rng)), rng))


def test_big_endian_bytes_are_left_to_rclpy():
    # One dimension, labelled 'x' (size 2, stride 2), data_offset 0, data [1.5, -2.0].
    body = (b'\x00\x00\x00\x00' + (1).to_bytes(4, 'big') + (2).to_bytes(4, 'big') + b'x\x00'
            + b'\x00\x00' + (2).to_bytes(4, 'big') * 2 + (0).to_bytes(4, 'big')
            + (2).to_bytes(4, 'big') + b'\x00' * 4 + np.array([1.5, -2.0], '>f8').tobytes())
    assert data_of(body).tolist() == [1.5, -2.0] == list(
        deserialize_message(body, Float64MultiArray).data)
