"""
Little-endian CDR read by hand, for the few message types on the hot paths.

The rules :mod:`rtgym_ros.msgconv.joint_state_cdr` and :mod:`rtgym_ros.msgconv.multi_array_cdr`
share: after the 4-byte encapsulation header, every primitive is aligned to its size counting
from the end of that header; a string is a uint32 length that counts its terminating NUL, then
the bytes; a sequence is a uint32 count, then its elements (doubles aligned to 8 only when there
is one). A reader raises ``struct.error`` or ``ValueError`` on bytes that hold no whole message;
:func:`read_plain` then leaves the bytes to rclpy's deserializer, so what is accepted or refused
is rclpy's.
"""

import struct
from typing import Callable, TypeVar

import numpy as np

ORIGIN = 4  # alignment counts from the end of the encapsulation header
LITTLE_ENDIAN = b'\x00\x01'  # the encapsulation read here (the first two header bytes)
UINT32 = struct.Struct('<I')

Read = TypeVar('Read')


def aligned(offset: int, size: int) -> int:
    """Return ``offset`` moved up to the next multiple of ``size`` counted from the origin."""
    return offset + -(offset - ORIGIN) % size


def read_plain(serialized: bytes, read: Callable[[bytes], Read]) -> Read | None:
    """
    Return ``read(serialized)`` for little-endian CDR, or None.

    None for any other encapsulation, or for bytes in which ``read`` finds no whole message:
    the caller asks rclpy's deserializer.
    """
    try:
        if serialized[:2] == LITTLE_ENDIAN:
            return read(serialized)
    except (struct.error, ValueError, UnicodeDecodeError):
        pass
    return None


def read_string(data: bytes, offset: int) -> tuple[int, str]:
    """
    Return the offset after the string at ``offset`` (aligned first) and the string.

    Up to its first NUL, as rclpy reads it (a C string).
    """
    offset = aligned(offset, 4)
    (length,) = UINT32.unpack_from(data, offset)
    start, end = offset + 4, offset + 4 + length
    if length == 0 or end > len(data) or data[end - 1] != 0:
        raise ValueError(f'no NUL-terminated string of {length} bytes at offset {offset}')
    return end, data[start:data.index(0, start, end)].decode()


def _double_sequence(data: bytes, offset: int) -> tuple[int, int]:
    """Return where the values of the double sequence at ``offset`` start, and their count."""
    offset = aligned(offset, 4)
    (count,) = UINT32.unpack_from(data, offset)
    offset += 4
    return (aligned(offset, 8) if count else offset), count


def read_floats(data: bytes, offset: int) -> tuple[int, tuple[float, ...]]:
    """
    Return the offset after the double sequence at ``offset`` and its values as Python floats.

    For the few values of a sensor sample: no numpy call where a message is taken.
    """
    offset, count = _double_sequence(data, offset)
    if count > len(data):  # 8 bytes a value: a corrupt count, not a huge message
        raise ValueError(f'{count} doubles in {len(data)} bytes')
    return offset + 8 * count, struct.unpack_from(f'<{count}d', data, offset)


def read_doubles(data: bytes, offset: int) -> tuple[int, np.ndarray]:
    """Return the offset after the double sequence at ``offset`` and a read-only view on it."""
    offset, count = _double_sequence(data, offset)
    values = np.frombuffer(data, '<f8', count, offset)  # ValueError past the end
    return offset + 8 * count, values
