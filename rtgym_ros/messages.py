"""
Conversions between ROS 2 messages and numpy, compiled once from a YAML config.

Every mistake a config can make (type string, field path, size, option) is found at load time by
``message_types.load_message_type``, ``compile_reader`` or ``compile_writer``, which raise a
``ValueError`` prefixed with the config key. The objects they return only do per-message work
(attribute reads, ``np.frombuffer`` on array fields), so sensor callbacks can store raw messages
and conversion happens once per observation.

Readers (observations) accept any message whose requested fields are numeric:

- Field paths are dotted (``'pose.pose.position.x'``). A path ending on a nested message expands
  to its numeric leaves in declaration order (``'orientation'`` -> x, y, z, w).
- Fixed-size arrays (``'orientation_covariance'``) have their declared size.
- Sequences (``'data'``, ``'ranges'``, ``'position'``) have a length only the config knows, taken
  from ``length``, else ``len(joint_names)``, else ``shape`` (the values ``shape`` holds that the
  fixed fields do not take, split evenly over the sequence fields). A message with another length
  is a ``ValueError`` at read time.
- sensor_msgs/msg/JointState with ``joint_names``: position, velocity and effort are picked by
  name, in the config's order; the name-to-index map is cached per list of names.
- ``nonfinite``: 'keep', 'zero', or 'max' (the message's ``range_max``; sensor_msgs/msg/LaserScan
  and sensor_msgs/msg/Range) replaces inf and nan in the output.
- Header-stamped types with one payload field (TwistStamped, PoseStamped, ...) also accept paths
  relative to the payload: ``'linear.x'`` means ``'twist.linear.x'``.

``read`` returns float32 of ``reader.shape`` (``(size,)`` unless ``shape`` is given), values in
the order of ``fields``. sensor_msgs/msg/Image readers return the image itself (uint8, uint16 or
float32 of ``shape``), see ``rtgym_ros.message_arrays``.

Writers (actions) set float/double fields of any message type; values are taken in the order of
``fields``, ``length`` consecutive values per sequence field (for joints: field-major, every
joint's position, then every joint's velocity). Tested types:

- std_msgs/msg/Float64, Float32 ('data'); Float64MultiArray, Float32MultiArray ('data', length
  from ``length`` or ``len(joint_names)``).
- geometry_msgs/msg/Twist, TwistStamped ('linear.x', ..., 'angular.z').
- sensor_msgs/msg/JointState (position, velocity, effort; ``name`` from ``joint_names``).
- trajectory_msgs/msg/JointTrajectory: one point with positions, velocities, accelerations or
  effort; ``joint_names`` set on the message; ``time_from_start`` on the point. Leave ``stamp``
  None to keep header.stamp zero, which controllers read as 'start on receipt'.
"""

import array
from collections.abc import Sequence
from dataclasses import dataclass
import functools
import importlib
import importlib.util
import math
import operator
from typing import Any, Callable

from builtin_interfaces.msg import Duration, Time
import numpy as np
from rosidl_parser.definition import AbstractSequence, Array, BasicType, NamespacedType

from rtgym_ros.message_arrays import ImageDecoder
from rtgym_ros.message_types import check_message_class, interface_name

NONFINITE_POLICIES = ('keep', 'zero', 'max')

# rosidl basic type -> numpy dtype for the numeric types a reader accepts; a writer accepts only
# float and double (an action is a float vector, and rounding it silently would hide a mistake).
_NUMERIC = {
    'float': np.float32, 'double': np.float64, 'boolean': np.bool_,
    'int8': np.int8, 'uint8': np.uint8, 'int16': np.int16, 'uint16': np.uint16,
    'int32': np.int32, 'uint32': np.uint32, 'int64': np.int64, 'uint64': np.uint64,
}
_WRITABLE = {'float': 'f', 'double': 'd'}
_JOINT_STATE = 'sensor_msgs/msg/JointState'
_JOINT_TRAJECTORY = 'trajectory_msgs/msg/JointTrajectory'
_IMAGE = 'sensor_msgs/msg/Image'


# ---------------------------------------------------------------------------- stamps


@functools.lru_cache(maxsize=None)
def has_header(msg_type: type) -> bool:
    """Return True if the type has a std_msgs/Header named 'header' (so it carries a stamp)."""
    return msg_type.get_fields_and_field_types().get('header') == 'std_msgs/Header'


def message_stamp(msg: Any) -> float | None:
    """Return header.stamp in seconds, or None for types without a header."""
    if not has_header(type(msg)):
        return None
    stamp = msg.header.stamp
    return stamp.sec + stamp.nanosec * 1e-9


def _duration(seconds: float) -> Duration:
    sec, nanosec = divmod(round(seconds * 1e9), 10**9)
    return Duration(sec=sec, nanosec=nanosec)


# ---------------------------------------------------------------------------- field paths


@dataclass(frozen=True)
class _Leaf:
    """One numeric field: a scalar, a fixed-size array (count) or a sequence (count None)."""

    path: str
    typename: str
    count: int | None
    is_array: bool


@functools.lru_cache(maxsize=None)
def _fields_of(cls: type) -> dict[str, tuple[str, Any]]:
    """Return {field: (type string, rosidl type)} in declaration order."""
    types = cls.get_fields_and_field_types()
    return {name: (types[name], slot) for name, slot in zip(types, cls.SLOT_TYPES)}


def _nested_class(slot: NamespacedType) -> type:
    return getattr(importlib.import_module('.'.join(slot.namespaces)), slot.name)


def _payload_field(cls: type) -> str | None:
    """Return the payload of a header + one message type (TwistStamped -> 'twist'), else None."""
    fields = _fields_of(cls)
    others = [name for name in fields if name != 'header']
    if has_header(cls) and len(others) == 1 and isinstance(fields[others[0]][1], NamespacedType):
        return others[0]
    return None


def _resolve(root: type, path: str, *, key: str) -> list[_Leaf]:
    """Resolve a dotted path to the numeric leaves it names, or explain what is there."""
    payload = _payload_field(root)
    head = path.split('.')[0]
    if payload is not None and head not in _fields_of(root):
        if head in _fields_of(_nested_class(_fields_of(root)[payload][1])):
            path = f'{payload}.{path}'
    parts = path.split('.')
    cls = root
    for depth, part in enumerate(parts):
        fields = _fields_of(cls)
        where = '.'.join(parts[:depth]) or interface_name(root)
        if part not in fields:
            raise ValueError(
                f'{key}: {interface_name(root)} has no field {path!r}: expected one of '
                f'{", ".join(fields)} at {where}, got {part!r}')
        type_string, slot = fields[part]
        if isinstance(slot, NamespacedType):
            cls = _nested_class(slot)
        elif depth < len(parts) - 1:
            raise ValueError(
                f'{key}: {interface_name(root)} has no field {path!r}: '
                f'{".".join(parts[:depth + 1])} is a {type_string}, which has no fields')
        else:
            return [_leaf(path, type_string, slot, key=key)]
    return _expand(cls, path, key=key)


def _expand(cls: type, prefix: str, *, key: str) -> list[_Leaf]:
    leaves = []
    for name, (type_string, slot) in _fields_of(cls).items():
        path = f'{prefix}.{name}'
        if isinstance(slot, NamespacedType):
            leaves += _expand(_nested_class(slot), path, key=key)
        else:
            leaves.append(_leaf(path, type_string, slot, key=key))
    return leaves


def _leaf(path: str, type_string: str, slot: Any, *, key: str) -> _Leaf:
    value_type = slot.value_type if isinstance(slot, (Array, AbstractSequence)) else slot
    if not isinstance(value_type, BasicType) or value_type.typename not in _NUMERIC:
        raise ValueError(
            f'{key}: expected numeric fields, got {path!r} of type {type_string}')
    if isinstance(slot, Array):
        return _Leaf(path, value_type.typename, slot.size, True)
    if isinstance(slot, AbstractSequence):
        return _Leaf(path, value_type.typename, None, True)
    return _Leaf(path, value_type.typename, 1, False)


def _resolve_all(root: type, fields: Sequence[str], *, key: str) -> list[_Leaf]:
    if isinstance(fields, (str, bytes)) or not fields:
        raise ValueError(f'{key}: expected a non-empty list of field paths, got {fields!r}')
    leaves = [leaf for path in fields for leaf in _resolve(root, str(path), key=key)]
    seen = set()
    for leaf in leaves:
        if leaf.path in seen:
            raise ValueError(f'{key}: expected each field once, got {leaf.path!r} twice')
        seen.add(leaf.path)
    return leaves


def _check_joint_names(joint_names: Sequence[str] | None, *, key: str) -> tuple[str, ...] | None:
    if joint_names is None:
        return None
    names = tuple(joint_names) if not isinstance(joint_names, str) else ()
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f'{key}: expected joint_names as a list of names, got {joint_names!r}')
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f'{key}: expected unique joint_names, got {", ".join(twice)} twice')
    return names


def _positive_int(value: Any, what: str, *, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f'{key}: expected {what} to be a positive integer, got {value!r}')
    return int(value)


def _sequence_length(
    leaves: list[_Leaf], *, key: str, length: int | None, joint_names: tuple[str, ...] | None,
    shape: tuple[int, ...] | None,
) -> int:
    """Return the length every sequence field must have (0 when there are none)."""
    sequences = [leaf.path for leaf in leaves if leaf.count is None]
    if not sequences:
        if length is not None:
            raise ValueError(f'{key}: length {length} given, but no field is a sequence')
        return 0
    if length is not None:
        length = _positive_int(length, 'length', key=key)
        if joint_names is not None and len(joint_names) != length:
            raise ValueError(
                f'{key}: expected length == len(joint_names) == {len(joint_names)}, '
                f'got {length}')
        return length
    if joint_names is not None:
        return len(joint_names)
    if shape is not None:
        rest = math.prod(shape) - sum(leaf.count for leaf in leaves if leaf.count is not None)
        if rest > 0 and rest % len(sequences) == 0:
            return rest // len(sequences)
        raise ValueError(
            f'{key}: shape {list(shape)} does not split evenly over the sequence fields '
            f'{", ".join(sequences)} after the fixed-size fields')
    raise ValueError(
        f'{key}: {", ".join(sequences)} has a length known only at run time; '
        f'declare it with length, joint_names or shape')


def _check_shape(shape: Sequence[int] | None, *, key: str) -> tuple[int, ...] | None:
    if shape is None:
        return None
    if isinstance(shape, (str, bytes)) or not shape:
        raise ValueError(f'{key}: expected shape as a list of positive integers, got {shape!r}')
    return tuple(_positive_int(d, 'every shape dimension', key=key) for d in shape)


# ---------------------------------------------------------------------------- readers


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

    def read(self, msg: Any) -> np.ndarray:
        """Return the configured fields of msg as an array of ``shape`` and ``dtype``."""
        raise NotImplementedError


class _ImageReader(FieldReader):

    def __init__(self, msg_type: type, decoder: ImageDecoder) -> None:
        super().__init__(msg_type, size=decoder.size, shape=decoder.shape, dtype=decoder.dtype)
        self._decode = decoder.decode

    def read(self, msg: Any) -> np.ndarray:
        return self._decode(msg)


class _NumericReader(FieldReader):

    def __init__(self, msg_type: type, segments: list[Callable[[Any, np.ndarray], None]], *,
                 size: int, shape: tuple[int, ...], nonfinite: str) -> None:
        super().__init__(msg_type, size=size, shape=shape, dtype=np.float32)
        self._segments = segments
        self._nonfinite = nonfinite
        self._reshape = shape != (size,)

    def read(self, msg: Any) -> np.ndarray:
        out = np.empty(self.size, np.float32)
        for fill in self._segments:
            fill(msg, out)
        if self._nonfinite != 'keep':
            bad = ~np.isfinite(out)
            if bad.any():
                out[bad] = msg.range_max if self._nonfinite == 'max' else 0.0
        return out.reshape(self.shape) if self._reshape else out


def _as_array(value: Any, dtype: type) -> np.ndarray:
    """View an array.array field without copying (np.asarray for numpy arrays and lists)."""
    if isinstance(value, array.array):
        return np.frombuffer(value, dtype)
    return np.asarray(value, dtype)


def _scalar_segment(paths: list[str], start: int) -> Callable[[Any, np.ndarray], None]:
    get = operator.attrgetter(*paths)
    if len(paths) == 1:
        def fill(msg: Any, out: np.ndarray) -> None:
            out[start] = get(msg)
    else:
        stop = start + len(paths)

        def fill(msg: Any, out: np.ndarray) -> None:
            out[start:stop] = get(msg)
    return fill


def _array_segment(leaf: _Leaf, count: int, start: int, *,
                   key: str) -> Callable[[Any, np.ndarray], None]:
    get, dtype, stop = operator.attrgetter(leaf.path), _NUMERIC[leaf.typename], start + count

    def fill(msg: Any, out: np.ndarray) -> None:
        values = _as_array(get(msg), dtype)
        if values.shape != (count,):
            raise ValueError(
                f'{key}: expected {count} values in {leaf.path!r}, got {values.size}')
        out[start:stop] = values
    return fill


class _JointIndex:
    """Map the message's joint order to the config's, cached per tuple of message names."""

    def __init__(self, joint_names: tuple[str, ...], *, key: str) -> None:
        self.joint_names = joint_names
        self._key = key
        self._cache: dict[tuple[str, ...], np.ndarray] = {}

    def __call__(self, names: Sequence[str]) -> np.ndarray:
        names = tuple(names)
        index = self._cache.get(names)
        if index is None:
            index = self._build(names)
            if len(self._cache) >= 16:
                self._cache.clear()
            self._cache[names] = index
        return index

    def _build(self, names: tuple[str, ...]) -> np.ndarray:
        position = {name: i for i, name in enumerate(names)}
        missing = [name for name in self.joint_names if name not in position]
        if missing:
            raise ValueError(
                f'{self._key}: expected joints {", ".join(missing)} in the JointState message, '
                f'got names [{", ".join(names)}]')
        return np.array([position[name] for name in self.joint_names], np.intp)


def _joint_segment(leaf: _Leaf, index: _JointIndex, start: int, *,
                   key: str) -> Callable[[Any, np.ndarray], None]:
    get, stop = operator.attrgetter(leaf.path), start + len(index.joint_names)

    def fill(msg: Any, out: np.ndarray) -> None:
        values = _as_array(get(msg), np.float64)
        if values.size != len(msg.name):
            raise ValueError(
                f'{key}: expected {len(msg.name)} values in {leaf.path!r} (one per name in the '
                f'message), got {values.size}')
        out[start:stop] = values[index(msg.name)]
    return fill


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
    if type_name == _IMAGE:
        return _compile_image_reader(msg_type, fields, key=key, joint_names=joint_names,
                                     nonfinite=nonfinite, shape=shape, length=length,
                                     encoding=encoding, to_rgb=to_rgb)
    if encoding is not None or to_rgb:
        raise ValueError(f'{key}: encoding and to_rgb apply to {_IMAGE} only, got {type_name}')
    if nonfinite == 'max' and 'range_max' not in _fields_of(msg_type):
        raise ValueError(
            f"{key}: nonfinite 'max' uses the message's range_max, which {type_name} lacks")
    leaves = _resolve_all(msg_type, fields, key=key)
    names = _check_joint_names(joint_names, key=key)
    dims = _check_shape(shape, key=key)
    seq_length = _sequence_length(leaves, key=key, length=length, joint_names=names, shape=dims)
    by_name = _JointIndex(names, key=key) if names and type_name == _JOINT_STATE else None
    segments, size = _segments(leaves, seq_length, by_name, key=key)
    dims = dims or (size,)
    if math.prod(dims) != size:
        raise ValueError(f'{key}: expected shape to hold {size} values, got {list(dims)}')
    return _NumericReader(msg_type, segments, size=size, shape=dims, nonfinite=nonfinite)


def _segments(leaves: list[_Leaf], seq_length: int, by_name: _JointIndex | None, *,
              key: str) -> tuple[list[Callable[[Any, np.ndarray], None]], int]:
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
        if by_name is not None and leaf.path in ('position', 'velocity', 'effort'):
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
        raise ValueError(f"{key}: expected fields ['data'] (or none) for {_IMAGE}, got {fields!r}")
    if joint_names is not None or length is not None:
        raise ValueError(f'{key}: joint_names and length do not apply to {_IMAGE}; use shape')
    if nonfinite == 'max':
        raise ValueError(f"{key}: expected nonfinite 'keep' or 'zero' for {_IMAGE}, got 'max'")
    decoder = ImageDecoder(shape, encoding, key=key, to_rgb=to_rgb,
                           nan_to_zero=nonfinite == 'zero')
    return _ImageReader(msg_type, decoder)


# ---------------------------------------------------------------------------- writers


class FieldWriter:
    """Builds messages of one type from vectors of ``size`` floats (built by compile_writer)."""

    def __init__(self, msg_type: type, *, size: int, key: str,
                 prepare: Callable[[Any], Any], scalars: list[tuple], arrays: list[tuple]) -> None:
        self.msg_type = msg_type
        self.size = size
        self._key = key
        self._prepare = prepare
        self._scalars = scalars
        self._arrays = arrays

    def build(self, values: np.ndarray, *, stamp: Time | None = None) -> Any:
        """
        Return a new message holding values, in the order of the configured fields.

        :param values: ``size`` finite numbers (any shape; read in C order).
        :param stamp: header.stamp for types with a header; left zero when None.
        """
        flat = np.asarray(values, dtype=np.float64).reshape(-1)
        if flat.size != self.size:
            raise ValueError(f'{self._key}: expected {self.size} values, got {flat.size}')
        finite = np.isfinite(flat)
        if not finite.all():
            bad = np.flatnonzero(~finite)
            raise ValueError(
                f'{self._key}: expected finite values, got {flat[bad].tolist()} at index '
                f'{bad.tolist()}')
        msg = self.msg_type()
        target = self._prepare(msg)
        if self._scalars:
            items = flat.tolist()
            for parent, attribute, index in self._scalars:
                setattr(target if parent is None else parent(target), attribute, items[index])
        for parent, attribute, start, stop, dtype, typecode in self._arrays:
            setattr(target if parent is None else parent(target), attribute,
                    _pack(flat[start:stop], dtype, typecode))
        if stamp is not None and has_header(self.msg_type):
            msg.header.stamp = stamp
        return msg


def _pack(values: np.ndarray, dtype: type, typecode: str | None) -> Any:
    """Return what the rosidl setter copies fastest: array.array for sequences, else numpy."""
    if typecode is None:
        return values.astype(dtype)
    packed = array.array(typecode)
    packed.frombytes(memoryview(np.ascontiguousarray(values, dtype)).cast('B'))
    return packed


def _prepare(type_name: str, *, names: tuple[str, ...] | None, frame_id: str | None,
             point_type: type | None, time_from_start: float) -> Callable[[Any], Any]:
    """Return a function that sets the config's constant fields and returns the value target."""
    if type_name == _JOINT_TRAJECTORY:
        def prepare(msg: Any) -> Any:
            if frame_id is not None:
                msg.header.frame_id = frame_id
            msg.joint_names = list(names)
            point = point_type(time_from_start=_duration(time_from_start))
            msg.points = [point]
            return point
        return prepare

    def prepare(msg: Any) -> Any:
        if frame_id is not None:
            msg.header.frame_id = frame_id
        if names is not None and type_name == _JOINT_STATE:
            msg.name = list(names)
        return msg
    return prepare


def compile_writer(
    msg_type: type,
    fields: Sequence[str],
    *,
    key: str,
    joint_names: Sequence[str] | None = None,
    time_from_start: float = 0.0,
    length: int | None = None,
    frame_id: str | None = None,
    size: int | None = None,
) -> FieldWriter:
    """
    Check a writer config against the message type and return the writer it describes.

    :param msg_type: message class (see ``load_message_type``).
    :param fields: dotted float/double field paths; JointTrajectory: fields of its one point.
    :param key: config key that prefixes every error, e.g. 'actions.cmd_vel'.
    :param joint_names: JointState, JointTrajectory: the joints (required); other types: the
        sequence length.
    :param time_from_start: JointTrajectory only: seconds from the stamp to reach the point.
    :param length: length of every sequence field (e.g. Float64MultiArray 'data').
    :param frame_id: header.frame_id of every message (types with a header only).
    :param size: total number of values (e.g. from the config's bounds): sequence fields take
        what the fixed-size fields leave, as ``shape`` does for readers.
    """
    type_name = check_message_class(msg_type, key=key)
    names = _check_joint_names(joint_names, key=key)
    if type_name in (_JOINT_STATE, _JOINT_TRAJECTORY) and names is None:
        raise ValueError(f'{key}: expected joint_names for {type_name}, got none')
    if frame_id is not None and (not isinstance(frame_id, str) or not has_header(msg_type)):
        raise ValueError(
            f'{key}: expected frame_id as a string on a type with a header, got {frame_id!r} '
            f'for {type_name}')
    point_type = None
    if type_name == _JOINT_TRAJECTORY:
        point_type = _nested_class(_fields_of(msg_type)['points'][1].value_type)
        if not isinstance(time_from_start, (int, float)) or not 0 <= time_from_start < math.inf:
            raise ValueError(
                f'{key}: expected time_from_start >= 0 seconds, got {time_from_start!r}')
    elif time_from_start != 0.0:
        raise ValueError(
            f'{key}: time_from_start applies to {_JOINT_TRAJECTORY} only, got it for {type_name}')
    leaves = _resolve_all(point_type or msg_type, fields, key=key)
    for leaf in leaves:
        if leaf.typename not in _WRITABLE:
            raise ValueError(
                f'{key}: expected float or double fields to write, got {leaf.path!r} of type '
                f'{leaf.typename}')
    seq_length = _sequence_length(leaves, key=key, length=length, joint_names=names,
                                  shape=None if size is None else (size,))
    scalars, arrays, size = [], [], 0
    for leaf in leaves:
        parent_path, _, attribute = leaf.path.rpartition('.')
        parent = operator.attrgetter(parent_path) if parent_path else None
        if not leaf.is_array:
            scalars.append((parent, attribute, size))
            size += 1
            continue
        count = seq_length if leaf.count is None else leaf.count
        typecode = _WRITABLE[leaf.typename] if leaf.count is None else None
        arrays.append((parent, attribute, size, size + count, _NUMERIC[leaf.typename], typecode))
        size += count
    prepare = _prepare(type_name, names=names, frame_id=frame_id, point_type=point_type,
                       time_from_start=float(time_from_start))
    return FieldWriter(msg_type, size=size, key=key, prepare=prepare, scalars=scalars,
                       arrays=arrays)
