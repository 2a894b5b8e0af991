"""
Image payloads (sensor_msgs/msg/Image) as numpy arrays, decoded without copying.

An image observation is a strided view over ``msg.data``: ``step`` (row padding) becomes the row
stride, so a 640x480 rgb8 frame costs no copy. A copy is made only when the bytes must change:
the message's byte order differs from the machine's (16UC1/32FC1 with ``is_bigendian``), the
channels are reordered (``to_rgb``) or non-finite depth values are replaced.

Views are marked read-only: the same message can be observed twice while its sensor is slower
than the control step, and an in-place edit of one observation would silently change the other.

Supported encodings (names of sensor_msgs/image_encodings.hpp) and what ``decode`` returns:

=========================  =======  ========  ==========================
encoding                   dtype    channels  shape
=========================  =======  ========  ==========================
rgb8, bgr8, 8UC3           uint8    3         (H, W, 3)
rgba8, bgra8               uint8    4         (H, W, 4)
mono8, 8UC1                uint8    1         (H, W) or (H, W, 1)
mono16, 16UC1              uint16   1         (H, W) or (H, W, 1)
32FC1                      float32  1         (H, W) or (H, W, 1)
=========================  =======  ========  ==========================

mono8/8UC1 and mono16/16UC1 have the same memory layout and accept each other's messages.
Channels are returned as the message gives them unless ``to_rgb`` is set, which accepts both the
RGB and the BGR variant (rgb8/bgr8, rgba8/bgra8) and always returns RGB(A) order.
"""

from collections.abc import Sequence
import math
import sys
from typing import Any

import numpy as np

IMAGE_ENCODINGS: dict[str, tuple[np.dtype, int]] = {
    'rgb8': (np.dtype(np.uint8), 3),
    'bgr8': (np.dtype(np.uint8), 3),
    '8UC3': (np.dtype(np.uint8), 3),
    'rgba8': (np.dtype(np.uint8), 4),
    'bgra8': (np.dtype(np.uint8), 4),
    'mono8': (np.dtype(np.uint8), 1),
    '8UC1': (np.dtype(np.uint8), 1),
    'mono16': (np.dtype(np.uint16), 1),
    '16UC1': (np.dtype(np.uint16), 1),
    '32FC1': (np.dtype(np.float32), 1),
}

# Encodings with the same bytes in memory; a reader for one accepts messages in the other.
_SAME_LAYOUT = {'mono8': '8UC1', '8UC1': 'mono8', 'mono16': '16UC1', '16UC1': 'mono16'}
# RGB-family encoding -> its channel-swapped twin and the channel order that makes it RGB(A).
_RGB_TWINS: dict[str, tuple[str, list[int] | None]] = {
    'rgb8': ('bgr8', None),
    'bgr8': ('rgb8', [2, 1, 0]),
    'rgba8': ('bgra8', None),
    'bgra8': ('rgba8', [2, 1, 0, 3]),
}
_MACHINE_IS_BIG_ENDIAN = sys.byteorder == 'big'


class ImageDecoder:
    """
    Turns Image messages of one configured encoding and size into arrays of one shape.

    Built once from the config (which validates everything static), then ``decode`` checks only
    what a message can get wrong: encoding, height, width, step and data length.
    """

    def __init__(
        self,
        shape: Sequence[int] | None,
        encoding: str | None,
        *,
        key: str,
        to_rgb: bool = False,
        nan_to_zero: bool = False,
    ) -> None:
        """
        Validate the static part of the config once.

        :param shape: (H, W, C), or (H, W) for single-channel encodings.
        :param encoding: encoding expected in messages (see the module docstring).
        :param key: config key that prefixes every error message.
        :param to_rgb: accept RGB and BGR messages and return RGB(A) channel order.
        :param nan_to_zero: replace inf/nan by 0 (float encodings only; costs a copy).
        """
        self._key = key
        if encoding not in IMAGE_ENCODINGS:
            raise ValueError(
                f'{key}: sensor_msgs/msg/Image needs an encoding, one of '
                f'{", ".join(IMAGE_ENCODINGS)}; got {encoding!r}')
        self.dtype, self._channels = IMAGE_ENCODINGS[encoding]
        self.shape = self._check_shape(shape, encoding)
        self.size = math.prod(self.shape)
        self._height, self._width = self.shape[0], self.shape[1]
        self._row_bytes = self._width * self._channels * self.dtype.itemsize
        self._orders = self._accepted_encodings(encoding, to_rgb)
        if nan_to_zero and self.dtype.kind != 'f':
            raise ValueError(
                f'{key}: nonfinite replacement needs a float encoding (32FC1), got {encoding!r}')
        self._nan_to_zero = nan_to_zero

    def _check_shape(self, shape: Sequence[int] | None, encoding: str) -> tuple[int, ...]:
        channels = self._channels
        wanted = '[height, width]' if channels == 1 else f'[height, width, {channels}]'
        if shape is None or isinstance(shape, (str, bytes)):
            raise ValueError(f'{self._key}: an image needs shape {wanted}, got {shape!r}')
        dims = tuple(shape)
        ok_rank = len(dims) == 3 or (len(dims) == 2 and channels == 1)
        ok_ints = all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d > 0
                      for d in dims)
        if not (ok_rank and ok_ints) or (len(dims) == 3 and dims[2] != channels):
            raise ValueError(
                f'{self._key}: encoding {encoding!r} has {channels} channel(s), so shape must be '
                f'{wanted} of positive integers, got {list(dims)}')
        return tuple(int(d) for d in dims)

    def _accepted_encodings(self, encoding: str, to_rgb: bool) -> dict[str, list[int] | None]:
        """Map each message encoding this decoder accepts to its channel reordering (or None)."""
        if to_rgb:
            if encoding not in _RGB_TWINS:
                raise ValueError(
                    f'{self._key}: to_rgb needs an RGB or BGR encoding '
                    f'({", ".join(_RGB_TWINS)}), got {encoding!r}')
            twin = _RGB_TWINS[encoding][0]
            return {encoding: _RGB_TWINS[encoding][1], twin: _RGB_TWINS[twin][1]}
        orders: dict[str, list[int] | None] = {encoding: None}
        if encoding in _SAME_LAYOUT:
            orders[_SAME_LAYOUT[encoding]] = None
        return orders

    def decode(self, msg: Any) -> np.ndarray:
        """Return the image as an array of ``self.shape`` and ``self.dtype``."""
        if msg.encoding not in self._orders:
            raise ValueError(
                f'{self._key}: expected image encoding {" or ".join(self._orders)}, '
                f'got {msg.encoding!r}')
        order = self._orders[msg.encoding]
        image = self._view(msg)
        swap = self.dtype.itemsize > 1 and bool(msg.is_bigendian) != _MACHINE_IS_BIG_ENDIAN
        if order is not None:
            image = image[..., order]
        if swap:
            image = image.astype(self.dtype)
        if self._nan_to_zero:
            image = np.nan_to_num(image, nan=0.0, posinf=0.0, neginf=0.0)
        if order is None and not swap and not self._nan_to_zero:
            image.flags.writeable = False
        return image.reshape(self.shape)

    def _view(self, msg: Any) -> np.ndarray:
        """Return a (H, W, C) view over msg.data in the message's byte order."""
        height, width = self._height, self._width
        if msg.height != height or msg.width != width:
            raise ValueError(
                f'{self._key}: expected a {height}x{width} image (height x width), '
                f'got {msg.height}x{msg.width}')
        step = msg.step
        if step < self._row_bytes:
            raise ValueError(
                f'{self._key}: expected step >= {self._row_bytes} bytes for {width} pixels, '
                f'got {step}')
        needed = step * (height - 1) + self._row_bytes
        data = np.frombuffer(msg.data, np.uint8)
        if data.size < needed:
            raise ValueError(
                f'{self._key}: expected at least {needed} bytes of image data '
                f'({height} rows of step {step}), got {data.size}')
        dtype = self.dtype
        if dtype.itemsize > 1 and msg.is_bigendian:
            dtype = dtype.newbyteorder('>')
        elif dtype.itemsize > 1:
            dtype = dtype.newbyteorder('<')
        itemsize = dtype.itemsize
        return np.ndarray(
            (height, width, self._channels), dtype=dtype, buffer=data,
            strides=(step, self._channels * itemsize, itemsize))
