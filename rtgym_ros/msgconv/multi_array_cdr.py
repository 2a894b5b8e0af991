"""
The values of a std_msgs/msg/Float64MultiArray, read from its serialized (CDR) bytes.

``sim_robot`` takes its effort commands so: rclpy's conversion of a taken command into a Python
message (its layout a list of dimension messages) costs more of the simulator's executor thread
than the rest of the command's handling, and the simulator reads only ``data``.

The layout, after the 4-byte encapsulation header (alignment as in
:mod:`rtgym_ros.msgconv.joint_state_cdr`)::

    uint32 len(layout.dim), then per dimension: string label, uint32 size, uint32 stride;
    uint32 layout.data_offset, uint32 len(data), float64 data[len] (aligned to 8 when any)

Little-endian CDR is read here; any other encapsulation, and bytes that do not hold a whole
message, go to rclpy's ``deserialize_message``, which reads what the rmw can or raises.
``test_multi_array_cdr.py`` checks this against rclpy's serializer and deserializer.
"""

import struct

import numpy as np
from rclpy.serialization import deserialize_message
from std_msgs.msg import Float64MultiArray

_ORIGIN = 4  # alignment counts from the end of the encapsulation header
_LITTLE_CDR = b'\x00\x01'
_UINT32 = struct.Struct('<I')


def data_of(serialized: bytes) -> np.ndarray:
    """Return the ``data`` of a serialized Float64MultiArray (float64; a read-only view)."""
    try:
        if serialized[:2] == _LITTLE_CDR:
            return _read_data(serialized)
    except (struct.error, ValueError, UnicodeDecodeError):
        pass
    return np.array(deserialize_message(serialized, Float64MultiArray).data, np.float64)


def _read_data(data: bytes) -> np.ndarray:
    (dimensions,) = _UINT32.unpack_from(data, _ORIGIN)
    if dimensions > len(data):  # 12 bytes a dimension at least: a corrupt length
        raise ValueError(f'{dimensions} dimensions in {len(data)} bytes')
    offset = _ORIGIN + 4
    for _ in range(dimensions):
        offset += -(offset - _ORIGIN) % 4
        (length,) = _UINT32.unpack_from(data, offset)
        start, offset = offset + 4, offset + 4 + length
        if length == 0 or offset > len(data) or data[offset - 1] != 0:
            raise ValueError(f'no NUL-terminated label of {length} bytes at {start - 4}')
        data[start:offset - 1].decode()  # rclpy refuses a label that is no UTF-8
        offset += -(offset - _ORIGIN) % 4
        _UINT32.unpack_from(data, offset + 4)  # size and stride: there, not read
        offset += 8
    offset += -(offset - _ORIGIN) % 4
    (count,) = _UINT32.unpack_from(data, offset + 4)  # after data_offset
    offset += 8
    if count:
        offset += -(offset - _ORIGIN) % 8
    return np.frombuffer(data, '<f8', count, offset)  # ValueError past the end
