"""
JointState written straight to CDR bytes and read from them, checked against rclpy's own.

Written bytes are read back by rclpy's deserializer; rclpy's serialized JointStates are read by
``decode`` as rclpy's deserializer reads them.

``sim_robot`` publishes its samples as these bytes. rclpy's ``serialize_message`` leaves its
padding bytes as it found them, and counts 8-byte alignment for an empty double sequence in
the length, so the bytes are compared by what rclpy reads from them, over random messages.
An env's JointState slot reads what a raw take gives with ``decode``.
"""

import math
import random
import struct

from corrupt_bytes import corrupted
import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from rtgym_ros.msgconv.fields import message_stamp
from rtgym_ros.msgconv.joint_state_cdr import decode, encode, JointStateFrame, names_block
from sensor_msgs.msg import JointState


def random_joint_state(rng: random.Random) -> tuple[int, str, list[str], list[list[float]]]:
    count = rng.randint(0, 4)
    names = [''.join(rng.choice('abxyz_/é') for _ in range(rng.randint(0, 9)))
             for _ in range(count)]
    frame_id = ''.join(rng.choice('abc/') for _ in range(rng.randint(0, 7)))
    arrays = [[rng.uniform(-5.0, 5.0) for _ in range(rng.choice([0, count, rng.randint(0, 3)]))]
              for _ in range(3)]
    return rng.randint(0, 2**31 * 10**9 - 1), frame_id, names, arrays


def test_rclpy_reads_every_field_as_written():
    rng = random.Random(3)
    for _ in range(2000):
        stamp_ns, frame_id, names, arrays = random_joint_state(rng)
        written = encode(stamp_ns, names_block(frame_id, names), *arrays)
        expected = JointState(name=names, position=arrays[0], velocity=arrays[1],
                              effort=arrays[2])
        expected.header.frame_id = frame_id
        expected.header.stamp.sec, expected.header.stamp.nanosec = divmod(stamp_ns, 10**9)
        assert deserialize_message(written, JointState) == expected, (stamp_ns, frame_id,
                                                                      names, arrays)
        # rclpy's own bytes are as long, or longer by the alignment it counts for an empty
        # sequence of doubles (at most 4 bytes for each of the three).
        assert 0 <= len(serialize_message(expected)) - len(written) <= 12


def test_a_robots_sample_is_its_stamp_names_and_values():
    written = encode(1_700_000_000_123_456_789, names_block('', ['pendulum_joint']), [0.5],
                     [-1.25], [])
    message = deserialize_message(written, JointState)
    assert (message.header.stamp.sec, message.header.stamp.nanosec) == (1_700_000_000,
                                                                        123_456_789)
    assert message.name == ['pendulum_joint'] and message.header.frame_id == ''
    assert list(message.position) == [0.5] and list(message.velocity) == [-1.25]
    assert list(message.effort) == []


def random_message(rng: random.Random) -> JointState:
    stamp_ns, frame_id, names, arrays = random_joint_state(rng)
    for values in arrays:  # what a driver may send besides numbers
        for i in range(len(values)):
            values[i] = rng.choice([values[i]] * 6 + [math.nan, math.inf, -math.inf, -0.0])
    message = JointState(name=names, position=arrays[0], velocity=arrays[1], effort=arrays[2])
    message.header.frame_id = frame_id
    message.header.stamp.sec, message.header.stamp.nanosec = divmod(stamp_ns, 10**9)
    return message


def fields(message) -> tuple:
    """Return what a JointState slot reads of a message, NaN-safe (arrays as bytes)."""
    stamp = message.header.stamp
    return (stamp.sec, stamp.nanosec, message.header.frame_id, list(message.name),
            *(np.asarray(getattr(message, field), '<f8').tobytes()
              for field in ('position', 'velocity', 'effort')))


def test_decode_reads_what_rclpy_reads_from_rclpys_bytes():
    rng = random.Random(5)
    for _ in range(2000):
        data = serialize_message(random_message(rng))
        frame = decode(data)
        assert isinstance(frame, JointStateFrame)
        assert fields(frame) == fields(deserialize_message(data, JointState)), frame


def test_decode_reads_sim_robots_bytes():
    rng = random.Random(6)
    for _ in range(500):
        stamp_ns, frame_id, names, arrays = random_joint_state(rng)
        data = encode(stamp_ns, names_block(frame_id, names), *arrays)
        assert fields(decode(data)) == fields(deserialize_message(data, JointState))


def test_a_frame_reads_like_the_message_for_the_slot():
    message = JointState(name=['j0'], position=[0.5])
    message.header.stamp.sec, message.header.stamp.nanosec = 12, 500_000_000
    frame = decode(serialize_message(message))
    assert message_stamp(frame) == message_stamp(message) == 12.5  # has_header by its fields
    assert frame.position == (0.5,) and type(frame.position[0]) is float  # immutable, plain
    assert 'j0' in repr(frame) and '12.500000000' in repr(frame)


def test_another_encapsulation_is_left_to_rclpy():
    # Big-endian CDR: rclpy reads it (this rmw swaps the bytes); decode leaves it to rclpy.
    message = JointState(name=['a', 'b'], position=[1.0, -2.0], effort=[3.0, 4.0])
    message.header.stamp.sec, message.header.frame_id = 7, 'base'
    data = serialize_message(message)
    swapped = _big_endian(data, names=2)
    result = decode(swapped)
    assert type(result) is JointState
    assert result == deserialize_message(swapped, JointState) == message


def assert_read_as_rclpy_reads_it(data: bytes) -> None:
    """Check that decode gives what rclpy's deserializer gives, or raises what it raises."""
    try:
        expected = deserialize_message(data, JointState)
    except Exception as error:  # noqa: B902 - whatever rclpy raises, decode raises
        with pytest.raises(type(error), match=str(error)):
            decode(data)
    else:
        assert fields(decode(data)) == fields(expected)


@pytest.mark.parametrize('cut', [5, 13, 20, 40, -9, -1])
def test_bytes_cut_short_are_read_as_rclpy_reads_them(cut):
    # Not a whole message (decode leaves it to rclpy: an error, as a take of it raises), or
    # whole but for padding that rclpy's length counts and no field needs.
    assert_read_as_rclpy_reads_it(
        serialize_message(JointState(name=['a', 'b'], position=[1.0, 2.0]))[:cut])


@pytest.mark.parametrize('count', [0, 2, 2**31, 2**32 - 1])
def test_a_wrong_name_count_is_read_as_rclpy_reads_it(count):
    data = bytearray(serialize_message(JointState(name=['a'], position=[1.0])))
    assert struct.unpack_from('<I', data, 20) == (1,)  # after the stamp and an empty frame id
    struct.pack_into('<I', data, 20, count)
    assert_read_as_rclpy_reads_it(bytes(data))


def test_corrupt_bytes_are_read_as_rclpy_reads_them():
    rng = random.Random(8)
    for _ in range(1500):
        assert_read_as_rclpy_reads_it(corrupted(serialize_message(random_message(rng)), rng))


def _big_endian(data: bytes, *, names: int) -> bytes:
    """Return the message of ``data`` (little-endian CDR, ``names`` names) byte-swapped."""
    out = bytearray(data)
    out[1] = 0x00
    offset = 4

    def swap(size: int, count: int = 1) -> None:
        nonlocal offset
        offset += -(offset - 4) % size
        for _ in range(count):
            out[offset:offset + size] = out[offset:offset + size][::-1]
            offset += size

    def string() -> None:
        nonlocal offset
        offset += -(offset - 4) % 4
        (length,) = struct.unpack_from('<I', data, offset)
        swap(4)
        offset += length
    swap(4, 2)
    string()
    swap(4)
    for _ in range(names):
        string()
    for _ in range(3):
        offset += -(offset - 4) % 4
        (size,) = struct.unpack_from('<I', data, offset)
        swap(4)
        if size:  # an empty sequence of doubles is not aligned to 8
            swap(8, size)
    return bytes(out)
