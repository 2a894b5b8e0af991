"""
A sensor_msgs/msg/Image read from its serialized (CDR) bytes, pixels left where they are.

rclpy's take of a large image holds the GIL while it builds the Python message: the pixels are
copied into fresh memory three times (about 90 ms for 50 MB on our 2-core VM, see
``benchmarks/image_load.py``). A serialized take hands over the CDR bytes instead
(:mod:`rtgym_ros.ros.serialized`); :func:`decode_image` reads the few header fields from them
and leaves ``data`` a view over the pixels, so :class:`rtgym_ros.msgconv.images.ImageDecoder`
decodes an :class:`ImageFrame` as it decodes a message.

The layout, after the 4-byte encapsulation header (its second byte: 0/1 CDR big/little endian,
6/7 the same for XCDR2, which lays out an Image identically since it has no 8-byte field); every
integer is aligned to its size counting from the end of the encapsulation header, strings are a
uint32 length (the terminating NUL included) and the bytes::

    int32 header.stamp.sec, uint32 header.stamp.nanosec, string header.frame_id,
    uint32 height, uint32 width, string encoding, uint8 is_bigendian, uint32 step,
    uint32 len(data), uint8 data[len]
"""

import struct
from typing import Any

from builtin_interfaces.msg import Time
from sensor_msgs.msg import Image
from std_msgs.msg import Header

_ORIGIN = 4  # alignment counts from the end of the encapsulation header
# Encapsulation kinds whose Image layout is the plain one above -> the byte order's struct prefix.
_ENCAPSULATIONS = {0x00: '>', 0x01: '<', 0x06: '>', 0x07: '<'}
_UINT32 = {order: struct.Struct(f'{order}I') for order in '<>'}
_STAMP = {order: struct.Struct(f'{order}iI') for order in '<>'}
_SIZE = {order: struct.Struct(f'{order}II') for order in '<>'}


class ImageFrame:
    """
    The fields of a sensor_msgs/msg/Image, ``data`` a read-only view over the serialized bytes.

    Reads like the message (``header.stamp``, ``height``, ``width``, ``encoding``,
    ``is_bigendian``, ``step``, ``data``) for the code that reads images: the slots' stamp and the
    image readers. The view keeps the bytes alive as long as any array made from it.
    """

    __slots__ = ('header', 'height', 'width', 'encoding', 'is_bigendian', 'step', 'data')

    def __init__(self, *, header: Header, height: int, width: int, encoding: str,
                 is_bigendian: int, step: int, data: memoryview) -> None:
        self.header = header
        self.height = height
        self.width = width
        self.encoding = encoding
        self.is_bigendian = is_bigendian
        self.step = step
        self.data = data

    @classmethod
    def get_fields_and_field_types(cls) -> dict[str, str]:
        """Return the field types of the message this stands for (as message classes do)."""
        return Image.get_fields_and_field_types()

    def __repr__(self) -> str:
        stamp = self.header.stamp
        return (f'ImageFrame({self.height}x{self.width} {self.encoding!r}, step {self.step}, '
                f'{len(self.data)} bytes, stamp {stamp.sec}.{stamp.nanosec:09d})')


class _Cursor:
    """Reads aligned CDR primitives from a buffer; every read is bounds-checked."""

    def __init__(self, buffer: memoryview, order: str) -> None:
        self.buffer = buffer
        self.order = order
        self.offset = _ORIGIN

    def _align(self, size: int) -> None:
        self.offset += -(self.offset - _ORIGIN) % size

    def _need(self, count: int, what: str) -> None:
        if self.offset + count > len(self.buffer):
            raise ValueError(
                f'serialized sensor_msgs/msg/Image is truncated: {what} needs {count} bytes at '
                f'offset {self.offset}, the message has {len(self.buffer)}')

    def unpack(self, layout: struct.Struct, what: str) -> tuple:
        self._align(4)
        self._need(layout.size, what)
        values = layout.unpack_from(self.buffer, self.offset)
        self.offset += layout.size
        return values

    def byte(self, what: str) -> int:
        self._need(1, what)
        value = self.buffer[self.offset]
        self.offset += 1
        return value

    def sequence(self, what: str) -> memoryview:
        """Return the bytes of a string or a uint8[] field: a uint32 length, then the bytes."""
        (length,) = self.unpack(_UINT32[self.order], f'the length of {what}')
        self._need(length, what)
        view = self.buffer[self.offset:self.offset + length]
        self.offset += length
        return view

    def string(self, what: str) -> str:
        raw = bytes(self.sequence(what))
        if raw.endswith(b'\0'):
            raw = raw[:-1]
        return raw.decode('utf-8', errors='replace')


def decode_image(serialized: Any) -> ImageFrame:
    """
    Read a serialized sensor_msgs/msg/Image; ``data`` stays a view (no pixel is copied).

    :param serialized: the CDR bytes (anything with the buffer protocol), encapsulation header
        first, as ``rclpy.serialization.serialize_message`` or a serialized take gives them.
    :raises ValueError: unknown encapsulation, or fewer bytes than the fields announce.
    """
    buffer = memoryview(serialized).cast('B')
    if len(buffer) < _ORIGIN:
        raise ValueError(f'serialized sensor_msgs/msg/Image needs at least {_ORIGIN} bytes of '
                         f'encapsulation header, got {len(buffer)}')
    kind = buffer[0] << 8 | buffer[1]
    if kind not in _ENCAPSULATIONS:
        raise ValueError(
            f'serialized sensor_msgs/msg/Image: expected the CDR or plain XCDR2 encapsulation '
            f'(0x0000, 0x0001, 0x0006, 0x0007), got 0x{kind:04x}')
    order = _ENCAPSULATIONS[kind]
    cursor = _Cursor(buffer.toreadonly(), order)
    sec, nanosec = cursor.unpack(_STAMP[order], 'header.stamp')
    frame_id = cursor.string('header.frame_id')
    height, width = cursor.unpack(_SIZE[order], 'height and width')
    encoding = cursor.string('encoding')
    is_bigendian = cursor.byte('is_bigendian')
    (step,) = cursor.unpack(_UINT32[order], 'step')
    data = cursor.sequence('data')
    header = Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=frame_id)
    return ImageFrame(header=header, height=height, width=width, encoding=encoding,
                      is_bigendian=is_bigendian, step=step, data=data)
