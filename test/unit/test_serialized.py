"""
Unit tests for the buffers of rtgym_ros.ros.serialized: reused only once no view is left.

rcl_take_serialized_message is played by a filler that writes bytes into the buffer it is
given, through rcutils as rmw does; no node and no DDS.
"""

import ctypes
import gc
import os

import numpy as np
import pytest
from rtgym_ros.ros.serialized import RclSerializedTake, SerializedBuffers


class _Filler:
    """Plays rcl_take_serialized_message: writes ``payload`` into the buffer it is given."""

    def __init__(self) -> None:
        rcutils = ctypes.CDLL('librcutils.so', mode=os.RTLD_NOLOAD)
        self._resize = rcutils.rcutils_uint8_array_resize
        self._resize.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.addresses: list[int] = []

    def __call__(self, payload: bytes | None):
        def fill(message) -> bool:
            if payload is None:
                return False
            if message.buffer_capacity < len(payload):
                assert self._resize(ctypes.addressof(message), len(payload)) == 0
            ctypes.memmove(message.buffer, payload, len(payload))
            message.buffer_length = len(payload)
            self.addresses.append(message.buffer)
            return True
        return fill


@pytest.fixture
def buffers():
    made = SerializedBuffers(RclSerializedTake())
    yield made
    made.close()


def test_a_buffer_is_reused_once_no_view_is_left(buffers):
    fill = _Filler()
    for value in range(5):
        view = buffers.take(fill(bytes([value]) * 64))
        assert bytes(view) == bytes([value]) * 64
        del view
    assert buffers.made == 1 and len(set(fill.addresses)) == 1


def test_a_kept_view_is_never_overwritten(buffers):
    fill = _Filler()
    kept = [np.frombuffer(buffers.take(fill(bytes([value]) * 64)), np.uint8)
            for value in range(4)]
    assert buffers.made == 4 and len(set(fill.addresses)) == 4
    for value, array in enumerate(kept):
        assert (array == value).all() and not array.flags.writeable
    del kept[1:]
    gc.collect()
    for value in range(10, 20):  # three buffers back: two kept as spares, one freed
        buffers.take(fill(bytes([value]) * 64))
    assert buffers.made == 4 and (kept[0] == 0).all()


def test_nothing_taken_returns_none_and_keeps_the_buffer(buffers):
    fill = _Filler()
    assert buffers.take(fill(None)) is None
    assert bytes(buffers.take(fill(b'abc'))) == b'abc'
    assert buffers.made == 1


def test_a_failing_take_gives_the_buffer_back(buffers):
    def fail(_):
        raise RuntimeError('rcl_take_serialized_message failed')
    with pytest.raises(RuntimeError, match='failed'):
        buffers.take(fail)
    assert bytes(buffers.take(_Filler()(b'xyz'))) == b'xyz'
    assert buffers.made == 1


def test_at_most_two_spare_buffers_are_kept(buffers):
    fill = _Filler()
    kept = [buffers.take(fill(b'x' * 64)) for _ in range(4)]
    del kept
    gc.collect()
    kept = [buffers.take(fill(b'y' * 64)) for _ in range(4)]
    assert buffers.made == 6 and all(bytes(view) == b'y' * 64 for view in kept)


def test_views_outlive_close(buffers):
    fill = _Filler()
    view = buffers.take(fill(b'kept after close'))
    buffers.close()
    assert bytes(view) == b'kept after close'
    del view  # freed now, not kept for reuse
    gc.collect()
    assert bytes(buffers.take(fill(b'new'))) == b'new'
    assert buffers.made == 2
