"""
Action messages as serialized bytes, packed into a template made once per writer.

An action group's message has the same layout at every time-step: its writer fills the same
float fields (the config fixes the length of every sequence, the joint names, the frame), and
only their values and the stamp change. Building the Python message and having ``publish()``
convert it to C and serialize it took 100-200 µs of the executor thread per action on our
2-core VM, between the timer and the publish. ``Publisher.publish`` also takes serialized
bytes, which rcl publishes as they are.

:func:`serialized_writer` finds where each value (and the stamp) lies in rclpy's own
serialization of the writer's message; :meth:`SerializedWriter.encode` then packs a time-step's
values into a copy of those bytes with one ``struct`` call. It is made only when it checks out:
for random values and stamps, rclpy must read from its bytes the message it reads from its own
serialization of ``writer.build()``. Otherwise (a value that is not written as it is, a layout
that changes) there is none, and the writer's messages are published.
"""

import random
import struct
from typing import Any

from builtin_interfaces.msg import Time
import numpy as np
from rclpy.serialization import deserialize_message, serialize_message

from rtgym_ros.msgconv.fields import stamp_message
from rtgym_ros.msgconv.writers import FieldWriter

_ORDERS = {b'\x00\x01': '<', b'\x00\x00': '>'}  # CDR little / big endian
_SEC, _NANOSEC = 0x3A5B7C1D, 0x2B3C4D5E  # a stamp to find (nanosec below 1e9)
_CHECKS = 8
"""Random value vectors and stamps a template must give rclpy's message for."""


class SerializedWriter:
    """Packs a writer's values (and stamp) into its message's serialized bytes."""

    def __init__(self, writer: FieldWriter, layout: struct.Struct, arguments: list[Any],
                 places: list[tuple[int, int]], stamp_places: tuple[int, int] | None) -> None:
        self.writer = writer
        self._layout = layout
        self._arguments = arguments  # the constant bytes between the values, at their places
        self._places = places  # (argument, value index), in the order of the bytes
        self._stamp_places = stamp_places  # (argument of sec, argument of nanosec)

    def encode(self, values: np.ndarray, stamp_ns: int | None = None) -> Any:
        """
        Return the message of ``values`` (stamped ``stamp_ns`` if the group is stamped).

        Serialized bytes; the writer's message when a value does not fit its field (a float
        field and a double beyond its range), which ``publish()`` takes as well.
        """
        items = np.asarray(values).reshape(-1).tolist()
        arguments = self._arguments.copy()
        for argument, index in self._places:
            arguments[argument] = items[index]
        if self._stamp_places is not None:
            sec, nanosec = divmod(stamp_ns or 0, 1_000_000_000)
            arguments[self._stamp_places[0]] = sec
            arguments[self._stamp_places[1]] = nanosec
        try:
            return self._layout.pack(*arguments)
        except (struct.error, OverflowError):
            return self.writer.build(values, stamp=None if self._stamp_places is None
                                     else stamp_message(stamp_ns or 0))


def serialized_writer(writer: FieldWriter, *, stamped: bool) -> SerializedWriter | None:
    """
    Return the serialized writer of ``writer``, or None if its bytes cannot be templated.

    :param stamped: the group stamps its messages (``header.stamp``).
    """
    size = writer.size
    sentinels = [float(np.float32(1.3125 + index / 1024.0)) for index in range(size)]
    data = serialize_message(writer.build(np.array(sentinels), stamp=Time(
        sec=_SEC, nanosec=_NANOSEC) if stamped else None))
    order = _ORDERS.get(bytes(data[:2]))
    if order is None:
        return None
    holes = []  # (offset, format code, what: a value index, or 'sec' / 'nanosec')
    for index, value in enumerate(sentinels):
        found = _only(data, order, (('d', value), ('f', value)))
        if found is None:
            return None
        holes.append((*found, index))
    if stamped:
        for what, code, value in (('sec', 'i', _SEC), ('nanosec', 'I', _NANOSEC)):
            found = _only(data, order, ((code, value),))
            if found is None:
                return None
            holes.append((*found, what))
    candidate = _assemble(writer, data, order, sorted(holes))
    if candidate is None or not _checks_out(candidate, writer, stamped=stamped):
        return None
    return candidate


def _only(data: bytes, order: str, codes: tuple[tuple[str, float], ...]) -> tuple | None:
    """Return (offset, code) of the one place the first code that occurs once packs to."""
    for code, value in codes:
        pattern = struct.pack(order + code, value)
        offset = data.find(pattern)
        if offset >= 0 and data.find(pattern, offset + 1) < 0:
            return offset, code
    return None


def _assemble(writer: FieldWriter, data: bytes, order: str,
              holes: list[tuple[int, str, Any]]) -> SerializedWriter | None:
    """Lay the template out as one struct: constant bytes, then a value, and so on."""
    layout, arguments, places, stamp = [order], [], [], {}
    position = 0
    for offset, code, what in holes:
        if offset < position:
            return None  # two values overlap: not a layout of separate fields
        if offset > position:
            layout.append(f'{offset - position}s')
            arguments.append(bytes(data[position:offset]))
        layout.append(code)
        if isinstance(what, int):
            places.append((len(arguments), what))
        else:
            stamp[what] = len(arguments)
        arguments.append(0)
        position = offset + struct.calcsize(order + code)
    if position < len(data):
        layout.append(f'{len(data) - position}s')
        arguments.append(bytes(data[position:]))
    stamp_places = (stamp['sec'], stamp['nanosec']) if stamp else None
    return SerializedWriter(writer, struct.Struct(''.join(layout)), arguments, places,
                            stamp_places)


def _checks_out(candidate: SerializedWriter, writer: FieldWriter, *, stamped: bool) -> bool:
    """Say whether rclpy reads the candidate's bytes as it reads its own, for random inputs."""
    rng = random.Random(writer.size)
    msg_type = writer.msg_type
    for check in range(_CHECKS):
        values = np.array([0.0 if check == 0 else rng.uniform(-1e3, 1e3)
                           for _ in range(writer.size)], np.float32)
        stamp_ns = rng.randrange(2**31 * 1_000_000_000) if stamped else None
        expected = serialize_message(writer.build(
            values, stamp=None if stamp_ns is None else stamp_message(stamp_ns)))
        encoded = candidate.encode(values, stamp_ns)
        if not isinstance(encoded, bytes) or \
                deserialize_message(encoded, msg_type) != deserialize_message(expected, msg_type):
            return False
    return True
