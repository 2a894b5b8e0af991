"""
A sensor_msgs/msg/JointState written straight to its serialized (CDR) bytes, and read from them.

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

An env reads the JointStates of its slots the other way (:func:`decode`): rclpy's conversion
of a taken message into a Python one took 80-120 µs of the io thread per message there, right
after a wake-up; reading these fields from the bytes a raw take gives is a fraction of it.

``test_joint_state_cdr.py`` reads random messages written so back with rclpy's own
``deserialize_message``, and reads rclpy's ``serialize_message`` bytes with :func:`decode`.
rclpy's ``serialize_message`` writes the same fields at the same offsets; it leaves its padding
bytes as they were, and its length counts 8-byte alignment for an empty sequence of doubles too
(a few bytes more, never read).
"""

import struct
from typing import Any, Sequence

from rclpy.serialization import deserialize_message
from rtgym_ros.msgconv.cdr import aligned, ORIGIN, read_floats, read_plain, read_string, UINT32
from sensor_msgs.msg import JointState

_ENCAPSULATION = b'\x00\x01\x00\x00'  # CDR, little endian, no options
_STAMP = struct.Struct('<iI')


def _string(text: str) -> bytes:
    raw = text.encode() + b'\0'
    return UINT32.pack(len(raw)) + raw


def _padded(body: bytearray, size: int) -> None:
    body += bytes(aligned(len(body), size) - len(body))


def names_block(frame_id: str, names: Sequence[str]) -> bytes:
    """
    Return the bytes from ``header.frame_id`` to the end of ``name``, for :func:`encode`.

    They do not change from one message of a robot to the next: make them once.
    """
    body = bytearray(_ENCAPSULATION + bytes(_STAMP.size))
    body += _string(frame_id)
    _padded(body, 4)
    body += UINT32.pack(len(names))
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
        body += UINT32.pack(len(values))
        if values:
            _padded(body, 8)
            body += struct.pack(f'<{len(values)}d', *values)
    return bytes(body)


class Stamp:
    """``header.stamp`` of a :class:`JointStateFrame`: ``sec`` and ``nanosec``, plain ints."""

    __slots__ = ('sec', 'nanosec')

    def __init__(self, sec: int, nanosec: int) -> None:
        self.sec = sec
        self.nanosec = nanosec


class FrameHeader:
    """``header`` of a :class:`JointStateFrame`: ``stamp`` and ``frame_id``."""

    __slots__ = ('stamp', 'frame_id')

    def __init__(self, stamp: Stamp, frame_id: str) -> None:
        self.stamp = stamp
        self.frame_id = frame_id


class JointStateFrame:
    """
    The fields of a JointState read from its bytes; the arrays are tuples of Python floats.

    Reads like the message (``header.stamp.sec``, ``name``, ``position``...) for the code that
    reads a JointState slot. Its header is no ``std_msgs`` Header: building one (and its
    stamp) with rclpy's checked setters costs more than reading the whole message. Its arrays
    are no numpy arrays: right after a wake-up each numpy call costs several microseconds, and
    the few values of a robot's joints read as quickly from tuples at the capture.
    """

    __slots__ = ('header', 'name', 'position', 'velocity', 'effort')

    def __init__(self, header: FrameHeader, name: list[str], position: tuple[float, ...],
                 velocity: tuple[float, ...], effort: tuple[float, ...]) -> None:
        self.header = header
        self.name = name
        self.position = position
        self.velocity = velocity
        self.effort = effort

    @classmethod
    def get_fields_and_field_types(cls) -> dict[str, str]:
        """Return the field types of the message this stands for (as message classes do)."""
        return JointState.get_fields_and_field_types()

    def __repr__(self) -> str:
        stamp = self.header.stamp
        return (f'JointStateFrame(stamp {stamp.sec}.{stamp.nanosec:09d}, frame '
                f'{self.header.frame_id!r}, name {self.name}, position {list(self.position)}, '
                f'velocity {list(self.velocity)}, effort {list(self.effort)})')


def decode(serialized: bytes) -> Any:
    """
    Read a serialized JointState: a :class:`JointStateFrame`, or rclpy's message.

    Little-endian CDR (what rmw_fastrtps and rmw_cyclonedds write) is read here; any other
    encapsulation, or bytes that do not hold a whole message, go to rclpy's
    ``deserialize_message``, which reads what the rmw can or raises as a take would.
    """
    frame = read_plain(serialized, _read)
    return frame if frame is not None else deserialize_message(serialized, JointState)


def _read(data: bytes) -> JointStateFrame:
    sec, nanosec = _STAMP.unpack_from(data, ORIGIN)
    offset, frame_id = read_string(data, ORIGIN + _STAMP.size)
    offset = aligned(offset, 4)
    (count,) = UINT32.unpack_from(data, offset)
    offset += 4
    if count > len(data):  # 4 bytes a name at least: a corrupt length, not a huge message
        raise ValueError(f'{count} joint names in {len(data)} bytes')
    names = []
    for _ in range(count):
        offset, name = read_string(data, offset)
        names.append(name)
    arrays = []
    for _ in range(3):
        offset, values = read_floats(data, offset)
        arrays.append(values)
    return JointStateFrame(FrameHeader(Stamp(sec, nanosec), frame_id), names, *arrays)
