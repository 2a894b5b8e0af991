"""
A sensor_msgs/msg/JointState written straight to its serialized (CDR) bytes.

A simulator publishes one per sensor sample. Building the Python message runs its generated
setters (a dozen checks) and ``publish()`` then converts it to C and serializes it: right
after a wake-up, on our 2-core VM, that took about 240 µs of ``sim_robot``'s physics thread
per message. ``Publisher.publish`` also takes the serialized bytes (rcl publishes them as they
are), and these few fields are quick to lay out with ``struct``.

The layout is the one of :mod:`rtgym_ros.msgconv.image_cdr` (CDR, little endian, every field
aligned to its size counting from the end of the 4-byte encapsulation header, strings as a
uint32 length that counts the terminating NUL, then the bytes), with 8-byte doubles::

    int32 header.stamp.sec, uint32 header.stamp.nanosec, string header.frame_id,
    uint32 len(name), string name[], then for position, velocity and effort:
    uint32 len, float64 values[len] (aligned to 8 only when there is one)

``test_joint_state_cdr.py`` reads random messages written so back with rclpy's own
``deserialize_message``. rclpy's ``serialize_message`` writes the same fields at the same
offsets; it leaves its padding bytes as they were, and its length counts 8-byte alignment for an
empty sequence of doubles too (a few bytes more, never read).
"""

import struct
from typing import Sequence

_ORIGIN = 4  # alignment counts from the end of the encapsulation header
_ENCAPSULATION = b'\x00\x01\x00\x00'  # CDR, little endian, no options
_UINT32 = struct.Struct('<I')
_STAMP = struct.Struct('<iI')


def _string(text: str) -> bytes:
    raw = text.encode() + b'\0'
    return _UINT32.pack(len(raw)) + raw


def _padded(body: bytearray, size: int) -> None:
    body += bytes(-(len(body) - _ORIGIN) % size)


def names_block(frame_id: str, names: Sequence[str]) -> bytes:
    """
    Return the bytes from ``header.frame_id`` to the end of ``name``, for :func:`encode`.

    They do not change from one message of a robot to the next: make them once.
    """
    body = bytearray(_ENCAPSULATION + bytes(_STAMP.size))
    body += _string(frame_id)
    _padded(body, 4)
    body += _UINT32.pack(len(names))
    for name in names:
        _padded(body, 4)
        body += _string(name)
    return bytes(body[len(_ENCAPSULATION) + _STAMP.size:])


def encode(stamp_ns: int, names: bytes, position: Sequence[float],
           velocity: Sequence[float], effort: Sequence[float]) -> bytes:
    """
    Return the serialized JointState: stamped ``stamp_ns``, the frame and names of ``names``.

    :param names: what :func:`names_block` made of the frame id and the joint names.
    :param position: the values (plain floats or anything ``struct`` packs as a double).
    """
    sec, nanosec = divmod(stamp_ns, 1_000_000_000)
    body = bytearray(_ENCAPSULATION)
    body += _STAMP.pack(sec, nanosec)
    body += names
    for values in (position, velocity, effort):
        _padded(body, 4)
        body += _UINT32.pack(len(values))
        if values:
            _padded(body, 8)
            body += struct.pack(f'<{len(values)}d', *values)
    return bytes(body)
