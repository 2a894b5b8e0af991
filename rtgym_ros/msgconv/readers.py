"""
Readers: the configured fields of a sensor message as a numpy array, compiled once at load.

Every mistake a config can make (field path, size, option) is found by ``compile_reader``,
which raises a ``ValueError`` prefixed with the config key. A reader then only does
per-message work (attribute reads, ``np.frombuffer`` on array fields), so subscription
callbacks store raw messages and conversion happens once per observation, at capture.
"""

import array
from collections.abc import Sequence
import math
import operator
from typing import Any, Callable, NamedTuple

import numpy as np

from rtgym_ros.core.validate import check_fits_in_memory
from rtgym_ros.msgconv.fields import (check_joint_names, check_shape, fields_of, IMAGE,
                                      JOINT_STATE, Leaf, NUMERIC, resolve_all, sequence_length,
                                      value_labels)
from rtgym_ros.msgconv.images import ImageDecoder
from rtgym_ros.msgconv.type_names import check_message_class

NONFINITE_POLICIES = ('keep', 'zero', 'max')

# The (minimum, maximum) range fields that nonfinite 'max' reads: LaserScan's, Range's.
_RANGE_FIELDS = (('range_min', 'range_max'), ('min_range', 'max_range'))

JOINT_ARRAYS = ('position', 'velocity', 'effort')
"""The arrays of a JointState, one value per name (or empty: not given)."""

_FEW_VALUES = 32
"""A reader of at most this many values, of scalar and JointState fields, lists them first."""

_FLOAT32_LIMIT = float(2 ** 128 - 2 ** 103)
"""The least float64 whose float32 is inf: half a float32 step above float32's largest."""


class Segment(NamedTuple):
    """
    How a reader reads some of its fields: into its array, or as a sequence of values.

    ``listed`` is None where the values are cast to their field's own type first (an array
    field of a numeric type): numpy's cast then decides, as a sequence of values would not.
    """

    fill: Callable[[Any, np.ndarray], None]
    listed: Callable[[Any], Sequence[Any]] | None


class FieldReader:
    """
    Reads the configured fields of one message type into a numpy array.

    Built by ``compile_reader``; ``size`` is the number of values, ``shape`` and ``dtype`` those
    of the arrays ``read`` returns (float32 for numeric fields).
    """

    def __init__(self, msg_type: type, *, size: int, shape: tuple[int, ...],
                 dtype: np.dtype) -> None:
        self.msg_type = msg_type
        self.size = size
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self.joint_names: tuple[str, ...] | None = None
        """JointState read by name: the configured joints (their values may come from
        several publishers, see ``rtgym_ros.robot.slots``)."""
        self.joint_fields: tuple[str, ...] = ()
        """JointState read by name: which of position, velocity and effort are read."""
        self.labels: tuple[str, ...] | None = None
        """What each value is (``position[j0]``, ``ranges[3]``), in order; None for images."""
        self.returns_view = False
        """True: ``read`` may return a view on the message's buffer (images), not a copy."""

    def read(self, msg: Any) -> np.ndarray:
        """Return the configured fields of msg as an array of ``shape`` and ``dtype``."""
        raise NotImplementedError


class _ImageReader(FieldReader):

    def __init__(self, msg_type: type, decoder: ImageDecoder) -> None:
        super().__init__(msg_type, size=decoder.size, shape=decoder.shape, dtype=decoder.dtype)
        self._decode = decoder.decode
        self.returns_view = True

    def read(self, msg: Any) -> np.ndarray:
        return self._decode(msg)


class _NumericReader(FieldReader):
    """
    Numeric fields into a float32 array; a few of them as Python floats first.

    A reader of at most ``_FEW_VALUES`` values, all of them scalar or JointState fields, makes
    its array with one numpy call: the capture reads it right after a wake-up, when each numpy
    call costs several microseconds (one or two a field, and the finiteness check, otherwise).
    Values that would not be finite float32s take the numpy path, which applies ``nonfinite``.
    """

    def __init__(self, msg_type: type, segments: list[Segment], *, size: int,
                 shape: tuple[int, ...], nonfinite: str,
                 range_fields: tuple[str, str] | None = None) -> None:
        super().__init__(msg_type, size=size, shape=shape, dtype=np.float32)
        self._fills = [segment.fill for segment in segments]
        self._listings = [segment.listed for segment in segments]
        if size > _FEW_VALUES or None in self._listings:
            self._listings = None
        self._nonfinite = nonfinite
        self._range_fields = range_fields
        self._reshape = shape != (size,)

    def read(self, msg: Any) -> np.ndarray:
        if self._listings is not None:
            values: list[Any] = []
            for listed in self._listings:
                values.extend(listed(msg))
            for value in values:
                if not -_FLOAT32_LIMIT < value < _FLOAT32_LIMIT:
                    break
            else:
                out = np.array(values, np.float32)
                return out.reshape(self.shape) if self._reshape else out
        return self.read_with_numpy(msg)

    def read_with_numpy(self, msg: Any) -> np.ndarray:
        """Read ``msg`` field by field into the array, with the ``nonfinite`` policy."""
        out = np.empty(self.size, np.float32)
        for fill in self._fills:
            fill(msg, out)
        if self._nonfinite != 'keep':
            finite = np.isfinite(out)
            if not finite.all():
                bad = ~finite
                if self._nonfinite == 'zero':
                    out[bad] = 0.0
                else:
                    # REP 117: -inf is a detection too close to measure; +inf, no return
                    # within range (and NaN, no valid one) read as the farthest range.
                    near, far = self._range_fields
                    too_close = np.isneginf(out)
                    out[bad] = getattr(msg, far)
                    out[too_close] = getattr(msg, near)
        return out.reshape(self.shape) if self._reshape else out


def _as_array(value: Any, dtype: type) -> np.ndarray:
    """View an array.array field without copying (np.asarray for numpy arrays and lists)."""
    if isinstance(value, array.array):
        return np.frombuffer(value, dtype)
    return np.asarray(value, dtype)


def _scalar_segment(paths: list[str], start: int) -> Segment:
    get = operator.attrgetter(*paths)
    if len(paths) == 1:
        def fill(msg: Any, out: np.ndarray) -> None:
            out[start] = get(msg)

        def listed(msg: Any) -> tuple[Any, ...]:
            return (get(msg),)
        return Segment(fill, listed)
    stop = start + len(paths)

    def fill_all(msg: Any, out: np.ndarray) -> None:
        out[start:stop] = get(msg)
    return Segment(fill_all, get)


def _array_segment(leaf: Leaf, count: int, start: int, *, key: str) -> Segment:
    get, dtype, stop = operator.attrgetter(leaf.path), NUMERIC[leaf.typename], start + count

    def fill(msg: Any, out: np.ndarray) -> None:
        values = _as_array(get(msg), dtype)
        if values.shape != (count,):
            raise ValueError(
                f'{key}: expected {count} values in {leaf.path!r}, got {values.size}')
        out[start:stop] = values
    return Segment(fill, None)  # its values are cast to the field's dtype first: numpy's


class JointIndex:
    """
    Map the message's joint order to the config's, cached per tuple of message names.

    None for a message that names exactly the configured joints in their order (the usual
    case): its values are read as they are, without a gather.
    """

    def __init__(self, joint_names: tuple[str, ...], *, key: str) -> None:
        self.joint_names = joint_names
        self._key = key
        self._cache: dict[tuple[str, ...], tuple[np.ndarray, tuple[int, ...]]] = {}

    def __call__(self, names: Sequence[str]) -> np.ndarray | None:
        """Return where each configured joint is in ``names``, as an index array."""
        found = self._found(names)
        return None if found is None else found[0]

    def positions(self, names: Sequence[str]) -> tuple[int, ...] | None:
        """Return where each configured joint is in ``names``, as Python ints."""
        found = self._found(names)
        return None if found is None else found[1]

    def _found(self, names: Sequence[str]) -> tuple[np.ndarray, tuple[int, ...]] | None:
        names = tuple(names)
        if names == self.joint_names:
            return None
        found = self._cache.get(names)
        if found is None:
            positions = self._build(names)
            found = (np.array(positions, np.intp), positions)
            if len(self._cache) >= 16:
                self._cache.clear()
            self._cache[names] = found
        return found

    def _build(self, names: tuple[str, ...]) -> tuple[int, ...]:
        position = {name: i for i, name in enumerate(names)}
        missing = [name for name in self.joint_names if name not in position]
        if missing:
            raise ValueError(
                f'{self._key}: expected joints {", ".join(missing)} in the JointState message, '
                f'got names [{", ".join(names)}]')
        return tuple(position[name] for name in self.joint_names)


def _joint_segment(leaf: Leaf, index: JointIndex, start: int, *, key: str) -> Segment:
    get, stop = operator.attrgetter(leaf.path), start + len(index.joint_names)

    def check(given: int, names: Sequence[str]) -> None:
        if given != len(names):
            raise ValueError(
                f'{key}: expected {len(names)} values in {leaf.path!r} (one per name in the '
                f'message), got {given}')

    def fill(msg: Any, out: np.ndarray) -> None:
        values = _as_array(get(msg), np.float64)
        check(values.size, msg.name)
        order = index(msg.name)
        out[start:stop] = values if order is None else values[order]

    def listed(msg: Any) -> Sequence[float]:
        values = get(msg)
        check(len(values), msg.name)
        order = index.positions(msg.name)
        return values if order is None else [values[i] for i in order]
    return Segment(fill, listed)


def compile_reader(
    msg_type: type,
    fields: Sequence[str],
    *,
    key: str,
    joint_names: Sequence[str] | None = None,
    nonfinite: str = 'keep',
    shape: Sequence[int] | None = None,
    length: int | None = None,
    encoding: str | None = None,
    to_rgb: bool = False,
) -> FieldReader:
    """
    Check a reader config against the message type and return the reader it describes.

    :param msg_type: message class (see ``load_message_type``).
    :param fields: dotted field paths, read in this order; for Image: ['data'] or [].
    :param key: config key that prefixes every error, e.g. 'observations.joints'.
    :param joint_names: JointState: joints to pick by name; other types: the sequence length.
    :param nonfinite: 'keep', 'zero' or 'max' (range_max) for inf and nan values.
    :param shape: shape of the arrays read returns; required for images (H, W[, C]).
    :param length: length of every sequence field.
    :param encoding: Image only: the encoding expected in messages.
    :param to_rgb: Image only: accept RGB and BGR and return RGB order.
    """
    type_name = check_message_class(msg_type, key=key)
    if nonfinite not in NONFINITE_POLICIES:
        raise ValueError(
            f'{key}: expected nonfinite in {", ".join(NONFINITE_POLICIES)}, got {nonfinite!r}')
    if type_name == IMAGE:
        return _compile_image_reader(msg_type, fields, key=key, joint_names=joint_names,
                                     nonfinite=nonfinite, shape=shape, length=length,
                                     encoding=encoding, to_rgb=to_rgb)
    if encoding is not None or to_rgb:
        raise ValueError(f'{key}: encoding and to_rgb apply to {IMAGE} only, got {type_name}')
    range_fields = next((pair for pair in _RANGE_FIELDS
                         if set(pair) <= set(fields_of(msg_type))), None)
    if nonfinite == 'max' and range_fields is None:
        raise ValueError(
            f"{key}: nonfinite 'max' uses the message's range_max (max_range), which "
            f'{type_name} lacks')
    leaves = resolve_all(msg_type, fields, key=key)
    names = check_joint_names(joint_names, key=key)
    if type_name == JOINT_STATE and not names \
            and any(leaf.path in JOINT_ARRAYS for leaf in leaves):
        raise ValueError(
            f'{key}.joint_names: {JOINT_STATE} values are picked by joint name (a message may '
            'carry any of the joints, in any order, and several publishers share '
            '/joint_states); expected the joints to read, got none')
    dims = check_shape(shape, key=key)
    seq_length = sequence_length(leaves, key=key, length=length, joint_names=names, shape=dims,
                                 names_joints=type_name == JOINT_STATE)
    by_name = JointIndex(names, key=key) if names and type_name == JOINT_STATE else None
    segments, size = _segments(leaves, seq_length, by_name, key=key)
    dims = dims or (size,)
    if math.prod(dims) != size:
        raise ValueError(f'{key}: expected shape to hold {size} values, got {list(dims)}')
    _check_slot_memory(size, np.dtype(np.float32), key=key)
    reader = _NumericReader(msg_type, segments, size=size, shape=dims, nonfinite=nonfinite,
                            range_fields=range_fields)
    reader.labels = value_labels(leaves, seq_length, names)
    if by_name is not None:
        reader.joint_names = by_name.joint_names
        reader.joint_fields = tuple(leaf.path for leaf in leaves if leaf.path in JOINT_ARRAYS)
    return reader


def _check_slot_memory(size: int, dtype: np.dtype, *, key: str) -> None:
    """Refuse a slot memory cannot hold: its space's low and high and its value, 3 copies."""
    check_fits_in_memory(3 * size * dtype.itemsize, key=key,
                         what=f'{size} values of {dtype}, held 3 times (the observation '
                              "space's low and high, and the slot's value),")


def _segments(leaves: list[Leaf], seq_length: int, by_name: JointIndex | None, *,
              key: str) -> tuple[list[Segment], int]:
    """Group consecutive scalars into one attrgetter call; one segment per array field."""
    segments, size, scalars = [], 0, []
    for leaf in leaves + [None]:
        if leaf is not None and not leaf.is_array:
            scalars.append(leaf.path)
            continue
        if scalars:
            segments.append(_scalar_segment(scalars, size))
            size, scalars = size + len(scalars), []
        if leaf is None:
            break
        count = leaf.count if leaf.count is not None else seq_length
        if by_name is not None and leaf.path in JOINT_ARRAYS:
            segments.append(_joint_segment(leaf, by_name, size, key=key))
        else:
            segments.append(_array_segment(leaf, count, size, key=key))
        size += count
    return segments, size


def _compile_image_reader(msg_type: type, fields: Sequence[str], *, key: str,
                          joint_names: Sequence[str] | None, nonfinite: str,
                          shape: Sequence[int] | None, length: int | None,
                          encoding: str | None, to_rgb: bool) -> FieldReader:
    if isinstance(fields, (str, bytes)) or list(fields) not in ([], ['data']):
        raise ValueError(f"{key}: expected fields ['data'] (or none) for {IMAGE}, got {fields!r}")
    if joint_names is not None or length is not None:
        raise ValueError(f'{key}: joint_names and length do not apply to {IMAGE}; use shape')
    if nonfinite == 'max':
        raise ValueError(f"{key}: expected nonfinite 'keep' or 'zero' for {IMAGE}, got 'max'")
    decoder = ImageDecoder(shape, encoding, key=key, to_rgb=to_rgb,
                           nan_to_zero=nonfinite == 'zero')
    _check_slot_memory(decoder.size, decoder.dtype, key=key)
    return _ImageReader(msg_type, decoder)
