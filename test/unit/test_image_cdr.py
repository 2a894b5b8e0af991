"""
Unit tests for rtgym_ros.msgconv.image_cdr: sensor_msgs/msg/Image read from its CDR bytes.

Round trips against rclpy's own serialization (``serialize_message``), and big-endian CDR
from a small encoder here, checked byte for byte against rclpy's little-endian output first.
No node and no DDS.
"""

import struct

from builtin_interfaces.msg import Time
import numpy as np
import pytest
from rclpy.serialization import serialize_message
from rtgym_ros.msgconv.fields import message_stamp
from rtgym_ros.msgconv.image_cdr import decode_image, ImageFrame
from rtgym_ros.msgconv.readers import compile_reader
from sensor_msgs.msg import Image
from std_msgs.msg import Header

KEY = 'observations.camera'
_RNG = np.random.default_rng(7)
# (encoding, dtype, channels): every encoding the readers accept
_ENCODINGS = [('rgb8', np.uint8, 3), ('bgr8', np.uint8, 3), ('8UC3', np.uint8, 3),
              ('rgba8', np.uint8, 4), ('bgra8', np.uint8, 4), ('mono8', np.uint8, 1),
              ('8UC1', np.uint8, 1), ('mono16', np.uint16, 1), ('16UC1', np.uint16, 1),
              ('32FC1', np.float32, 1)]


def _image(height, width, encoding, *, pad=0, frame_id='camera', bigendian=False,
           stamp=(1_700_000_000, 123_456_789), data=None):
    """Make an Image with random bytes, ``pad`` of them after each row."""
    _, dtype, channels = next(e for e in _ENCODINGS if e[0] == encoding)
    step = width * channels * np.dtype(dtype).itemsize + pad
    if data is None:
        data = _RNG.integers(0, 256, step * height, dtype=np.uint8).tobytes()
    return Image(header=Header(stamp=Time(sec=stamp[0], nanosec=stamp[1]), frame_id=frame_id),
                 height=height, width=width, encoding=encoding, is_bigendian=int(bigendian),
                 step=step, data=data)


def _assert_same_fields(frame, msg):
    assert isinstance(frame, ImageFrame)
    assert (frame.header.stamp.sec, frame.header.stamp.nanosec) == \
        (msg.header.stamp.sec, msg.header.stamp.nanosec)
    assert frame.header.frame_id == msg.header.frame_id
    assert (frame.height, frame.width, frame.encoding, frame.is_bigendian, frame.step) == \
        (msg.height, msg.width, msg.encoding, msg.is_bigendian, msg.step)
    assert bytes(frame.data) == bytes(msg.data)


# -- round trips against rclpy's serialization ---------------------------------------------------

@pytest.mark.parametrize('encoding, dtype, channels', _ENCODINGS)
@pytest.mark.parametrize('height, width, pad', [(1, 1, 0), (3, 5, 1), (4, 7, 3), (2, 3, 6)])
def test_round_trip_each_encoding_size_and_padding(encoding, dtype, channels, height, width,
                                                   pad):
    msg = _image(height, width, encoding, pad=pad)
    frame = decode_image(serialize_message(msg))
    _assert_same_fields(frame, msg)
    shape = (height, width, channels) if channels > 1 else (height, width)
    reader = compile_reader(Image, ['data'], key=KEY, shape=shape, encoding=encoding)
    expected = reader.read(msg)
    got = reader.read(frame)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize('length', range(10))
def test_round_trip_every_frame_id_length_shifts_the_fields_after_it(length):
    # frame_id's length moves height, width, encoding, step and data through every alignment.
    msg = _image(2, 3, 'mono16', pad=1, frame_id='f' * length)
    _assert_same_fields(decode_image(serialize_message(msg)), msg)


@pytest.mark.parametrize('frame_id', ['', 'base_link', 'камера/optical', 'x' * 300])
def test_round_trip_frame_ids(frame_id):
    msg = _image(2, 2, 'rgb8', frame_id=frame_id)
    assert decode_image(serialize_message(msg)).header.frame_id == frame_id


@pytest.mark.parametrize('sec, nanosec', [(0, 0), (1, 999_999_999), (-5, 7),
                                          (2**31 - 1, 2**32 - 1)])
def test_round_trip_stamps(sec, nanosec):
    msg = _image(1, 2, 'mono8', stamp=(sec, nanosec))
    frame = decode_image(serialize_message(msg))
    assert (frame.header.stamp.sec, frame.header.stamp.nanosec) == (sec, nanosec)
    assert message_stamp(frame) == message_stamp(msg)


@pytest.mark.parametrize('encoding', ['16UC1', 'mono16', '32FC1'])
def test_big_endian_pixels_decode_as_from_the_message(encoding):
    values = (np.arange(12).reshape(3, 4) * 1000 + 7).astype(
        np.float32 if encoding == '32FC1' else np.uint16)
    rows = values.astype(values.dtype.newbyteorder('>')).reshape(3, -1)
    data = b''.join(row.tobytes() + b'\xab\xcd' for row in rows)
    msg = _image(3, 4, encoding, pad=2, bigendian=True, data=data)
    frame = decode_image(serialize_message(msg))
    assert frame.is_bigendian == 1
    reader = compile_reader(Image, [], key=KEY, shape=(3, 4), encoding=encoding)
    np.testing.assert_array_equal(reader.read(frame), values)


def test_an_empty_image_round_trips():
    msg = Image(encoding='mono8')
    frame = decode_image(serialize_message(msg))
    _assert_same_fields(frame, msg)
    assert len(frame.data) == 0


def test_pixels_are_a_read_only_view_of_the_serialized_bytes():
    msg = _image(480, 640, 'rgb8', pad=64)
    serialized = bytearray(serialize_message(msg))
    frame = decode_image(serialized)
    assert frame.data.readonly
    reader = compile_reader(Image, ['data'], key=KEY, shape=(480, 640, 3), encoding='rgb8')
    image = reader.read(frame)
    assert np.shares_memory(image, np.frombuffer(serialized, np.uint8))
    assert not image.flags.writeable
    serialized[-1] ^= 0xFF  # the last byte is the last row's padding...
    serialized[-65] ^= 0xFF  # ...and this the last pixel's blue: the view shows the change
    assert image[-1, -1, 2] == msg.data[-65] ^ 0xFF


# -- big-endian CDR, and what is refused ---------------------------------------------------------

def _encode(msg, order):
    """Serialize an Image as CDR in byte order ``order``; also return the padding positions."""
    out, padding = bytearray(b'\x00\x00\x00\x00'), []
    out[1] = 0x00 if order == '>' else 0x01

    def align(size):
        while (len(out) - 4) % size:
            padding.append(len(out))
            out.append(0)

    def uint32(value, fmt='I'):
        align(4)
        out.extend(struct.pack(order + fmt, value))

    def sequence(raw):
        uint32(len(raw))
        out.extend(raw)

    uint32(msg.header.stamp.sec, 'i')
    uint32(msg.header.stamp.nanosec)
    sequence(msg.header.frame_id.encode() + b'\0')
    uint32(msg.height)
    uint32(msg.width)
    sequence(msg.encoding.encode() + b'\0')
    out.append(msg.is_bigendian)
    uint32(msg.step)
    sequence(bytes(msg.data))
    return bytes(out), padding


@pytest.mark.parametrize('frame_id', ['', 'a', 'ab', 'abc', 'abcd'])
def test_the_test_encoder_writes_what_rclpy_writes(frame_id):
    msg = _image(3, 2, 'rgb8', pad=1, frame_id=frame_id)
    ours, padding = _encode(msg, '<')
    theirs = bytearray(serialize_message(msg))
    assert len(ours) == len(theirs)
    for index in padding:  # padding bytes are left uninitialized by Fast CDR
        theirs[index] = 0
    assert ours == bytes(theirs)


@pytest.mark.parametrize('frame_id', ['', 'ab', 'abc'])
@pytest.mark.parametrize('kind', [0x00, 0x06])
def test_big_endian_cdr_decodes(frame_id, kind):
    msg = _image(3, 2, 'mono16', pad=3, frame_id=frame_id, stamp=(-2, 5))
    serialized = bytearray(_encode(msg, '>')[0])
    serialized[1] = kind
    _assert_same_fields(decode_image(serialized), msg)


def test_xcdr2_little_endian_decodes_as_cdr():
    msg = _image(2, 2, 'rgb8', frame_id='abc')
    serialized = bytearray(serialize_message(msg))
    serialized[1] = 0x07
    _assert_same_fields(decode_image(serialized), msg)


@pytest.mark.parametrize('kind', [0x02, 0x03, 0x08, 0x09, 0x0a, 0x0b, 0x0100])
def test_other_encapsulations_are_refused(kind):
    serialized = bytearray(serialize_message(_image(1, 1, 'mono8')))
    serialized[0:2] = kind.to_bytes(2, 'big')
    with pytest.raises(ValueError, match=f'got 0x{kind:04x}'):
        decode_image(serialized)


@pytest.mark.parametrize('cut', [0, 3, 4, 10, 20, 30, 47, -1])
def test_truncated_bytes_are_refused(cut):
    serialized = serialize_message(_image(2, 3, 'rgb8', frame_id='cam'))
    with pytest.raises(ValueError, match='needs at least 4 bytes|is truncated'):
        decode_image(serialized[:cut])


def test_a_data_length_beyond_the_bytes_is_refused():
    serialized = bytearray(serialize_message(_image(2, 3, 'mono8')))
    # the data length is the uint32 just before the 6 pixels
    length_at = len(serialized) - 6 - 4
    assert struct.unpack_from('<I', serialized, length_at) == (6,)
    struct.pack_into('<I', serialized, length_at, 7)
    with pytest.raises(ValueError, match=r'data needs 7 bytes'):
        decode_image(serialized)
