"""
The values of a std_msgs/msg/Float64MultiArray, read from its serialized (CDR) bytes.

``sim_robot`` and ``mujoco_sim`` take their commands so: rclpy's conversion of a taken command
into a Python message (its layout a list of dimension messages) costs more of the simulator's
executor thread than the rest of the command's handling, and the simulator reads only ``data``.

The layout, after the 4-byte encapsulation header (the rules of :mod:`rtgym_ros.msgconv.cdr`)::

    uint32 len(layout.dim), then per dimension: string label, uint32 size, uint32 stride;
    uint32 layout.data_offset, uint32 len(data), float64 data[len]

Little-endian CDR is read here; any other encapsulation, and bytes that do not hold a whole
message, go to rclpy's ``deserialize_message``, which reads what the rmw can or raises.
``test_multi_array_cdr.py`` checks this against rclpy's serializer and deserializer.
"""

import numpy as np
from rclpy.serialization import deserialize_message
from rtgym_ros.msgconv.cdr import aligned, ORIGIN, read_doubles, read_plain, read_string, UINT32
from std_msgs.msg import Float64MultiArray


def data_of(serialized: bytes) -> np.ndarray:
    """Return the ``data`` of a serialized Float64MultiArray (float64; a read-only view)."""
    data = read_plain(serialized, _read_data)
    if data is None:
        data = np.array(deserialize_message(serialized, Float64MultiArray).data, np.float64)
    return data


def _read_data(data: bytes) -> np.ndarray:
    (dimensions,) = UINT32.unpack_from(data, ORIGIN)
    if dimensions > len(data):  # 12 bytes a dimension at least: a corrupt length
        raise ValueError(f'{dimensions} dimensions in {len(data)} bytes')
    offset = ORIGIN + 4
    for _ in range(dimensions):
        offset, _label = read_string(data, offset)  # read as rclpy reads it, not kept
        offset = aligned(offset, 4)
        UINT32.unpack_from(data, offset + 4)  # size and stride: there, not read
        offset += 8
    offset = aligned(offset, 4) + 4  # after data_offset
    _, values = read_doubles(data, offset)
    return values
