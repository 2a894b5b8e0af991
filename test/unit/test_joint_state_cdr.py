"""
JointState written straight to CDR bytes, read back by rclpy's own deserializer.

``sim_robot`` publishes its samples as these bytes. rclpy's ``serialize_message`` leaves its
padding bytes as it found them, and counts 8-byte alignment for an empty double sequence in
the length, so the bytes are compared by what rclpy reads from them, over random messages.
"""

import random

from rclpy.serialization import deserialize_message, serialize_message
from rtgym_ros.msgconv.joint_state_cdr import encode, names_block
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
