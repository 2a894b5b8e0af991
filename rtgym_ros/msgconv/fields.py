"""
Field paths of ROS message types: what a config's ``fields`` name, checked at load.

Readers and writers share this: a dotted path resolves to numeric leaves (scalars, fixed-size
arrays, sequences), sequence lengths come from the config, header stamps are read here.
See docs/configuration.md for the path syntax users write.
"""

from collections.abc import Sequence
from dataclasses import dataclass
import functools
import importlib
import math
from typing import Any

from builtin_interfaces.msg import Duration, Time
import numpy as np
from rosidl_parser.definition import AbstractSequence, Array, BasicType, NamespacedType

from rtgym_ros.msgconv.type_names import interface_name

# rosidl basic type -> numpy dtype for the numeric types a reader accepts; a writer accepts only
# float and double (an action is a float vector, and rounding it silently would hide a mistake).
NUMERIC = {
    'float': np.float32, 'double': np.float64, 'boolean': np.bool_,
    'int8': np.int8, 'uint8': np.uint8, 'int16': np.int16, 'uint16': np.uint16,
    'int32': np.int32, 'uint32': np.uint32, 'int64': np.int64, 'uint64': np.uint64,
}
JOINT_STATE = 'sensor_msgs/msg/JointState'
JOINT_TRAJECTORY = 'trajectory_msgs/msg/JointTrajectory'
IMAGE = 'sensor_msgs/msg/Image'


@functools.lru_cache(maxsize=None)
def has_header(msg_type: type) -> bool:
    """Return True if the type has a std_msgs/Header named 'header' (so it carries a stamp)."""
    return msg_type.get_fields_and_field_types().get('header') == 'std_msgs/Header'


def message_stamp(msg: Any) -> float | None:
    """
    Return header.stamp in seconds, or None for types without a header.

    Read from its nanoseconds, as the node's clock is (``ClockReader``): the same time is the
    same float, also where a float's last bit is 2.4e-7 s (a clock at the epoch).
    """
    if not has_header(type(msg)):
        return None
    return header_stamp(msg)


def header_stamp(msg: Any) -> float:
    """
    Return header.stamp in seconds, for a message whose type is known to have a header.

    For the io thread, which checks the type once per slot, not per message as
    ``message_stamp`` does.
    """
    stamp = msg.header.stamp
    return (stamp.sec * 1_000_000_000 + stamp.nanosec) * 1e-9


def stamp_message(stamp_ns: int) -> Time:
    """Return a time in nanoseconds as a ``builtin_interfaces/Time`` (a header's stamp)."""
    sec, nanosec = divmod(stamp_ns, 1_000_000_000)
    return Time(sec=sec, nanosec=nanosec)


def duration(seconds: float) -> Duration:
    sec, nanosec = divmod(round(seconds * 1e9), 10**9)
    return Duration(sec=sec, nanosec=nanosec)


# ---------------------------------------------------------------------------- field paths


@dataclass(frozen=True)
class Leaf:
    """One numeric field: a scalar, a fixed-size array (count) or a sequence (count None)."""

    path: str
    typename: str
    count: int | None
    is_array: bool


@functools.lru_cache(maxsize=None)
def fields_of(cls: type) -> dict[str, tuple[str, Any]]:
    """Return {field: (type string, rosidl type)} in declaration order."""
    types = cls.get_fields_and_field_types()
    return {name: (types[name], slot) for name, slot in zip(types, cls.SLOT_TYPES)}


def nested_class(slot: NamespacedType) -> type:
    return getattr(importlib.import_module('.'.join(slot.namespaces)), slot.name)


def _payload_field(cls: type) -> str | None:
    """Return the payload of a header + one message type (TwistStamped -> 'twist'), else None."""
    fields = fields_of(cls)
    others = [name for name in fields if name != 'header']
    if has_header(cls) and len(others) == 1 and isinstance(fields[others[0]][1], NamespacedType):
        return others[0]
    return None


def _resolve(root: type, path: str, *, key: str) -> list[Leaf]:
    """Resolve a dotted path to the numeric leaves it names, or explain what is there."""
    payload = _payload_field(root)
    head = path.split('.')[0]
    if payload is not None and head not in fields_of(root):
        if head in fields_of(nested_class(fields_of(root)[payload][1])):
            path = f'{payload}.{path}'
    parts = path.split('.')
    cls = root
    for depth, part in enumerate(parts):
        fields = fields_of(cls)
        where = '.'.join(parts[:depth]) or interface_name(root)
        if part not in fields:
            raise ValueError(
                f'{key}: {interface_name(root)} has no field {path!r}: expected one of '
                f'{", ".join(fields)} at {where}, got {part!r}')
        type_string, slot = fields[part]
        if isinstance(slot, NamespacedType):
            cls = nested_class(slot)
        elif depth < len(parts) - 1:
            raise ValueError(
                f'{key}: {interface_name(root)} has no field {path!r}: '
                f'{".".join(parts[:depth + 1])} is a {type_string}, which has no fields')
        else:
            return [_leaf(path, type_string, slot, key=key)]
    return _expand(cls, path, key=key)


def _expand(cls: type, prefix: str, *, key: str) -> list[Leaf]:
    leaves = []
    for name, (type_string, slot) in fields_of(cls).items():
        path = f'{prefix}.{name}'
        if isinstance(slot, NamespacedType):
            leaves += _expand(nested_class(slot), path, key=key)
        else:
            leaves.append(_leaf(path, type_string, slot, key=key))
    return leaves


def _leaf(path: str, type_string: str, slot: Any, *, key: str) -> Leaf:
    value_type = slot.value_type if isinstance(slot, (Array, AbstractSequence)) else slot
    if not isinstance(value_type, BasicType) or value_type.typename not in NUMERIC:
        raise ValueError(
            f'{key}: expected numeric fields, got {path!r} of type {type_string}')
    if isinstance(slot, Array):
        return Leaf(path, value_type.typename, slot.size, True)
    if isinstance(slot, AbstractSequence):
        return Leaf(path, value_type.typename, None, True)
    return Leaf(path, value_type.typename, 1, False)


def resolve_all(root: type, fields: Sequence[str], *, key: str) -> list[Leaf]:
    if isinstance(fields, (str, bytes)) or not fields:
        raise ValueError(f'{key}: expected a non-empty list of field paths, got {fields!r}')
    leaves = [leaf for path in fields for leaf in _resolve(root, str(path), key=key)]
    seen = set()
    for leaf in leaves:
        if leaf.path in seen:
            raise ValueError(f'{key}: expected each field once, got {leaf.path!r} twice')
        seen.add(leaf.path)
    return leaves


def value_labels(leaves: list[Leaf], seq_length: int,
                 joint_names: tuple[str, ...] | None) -> tuple[str, ...]:
    """
    Name each value of the vector the leaves make: ``pose.pose.position.x``, ``ranges[3]``.

    Sequence elements are named by joint when ``joint_names`` gives their length
    (``position[shoulder]``), else by index. Shown by the ``check`` tool; never on a hot path.
    """
    labels: list[str] = []
    for leaf in leaves:
        if not leaf.is_array:
            labels.append(leaf.path)
        elif leaf.count is None and joint_names is not None:
            labels += [f'{leaf.path}[{name}]' for name in joint_names]
        else:
            labels += [f'{leaf.path}[{i}]' for i in range(
                seq_length if leaf.count is None else leaf.count)]
    return tuple(labels)


def check_joint_names(joint_names: Sequence[str] | None, *, key: str) -> tuple[str, ...] | None:
    if joint_names is None:
        return None
    names = tuple(joint_names) if isinstance(joint_names, (list, tuple)) else ()
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f'{key}: expected joint_names as a list of names, got {joint_names!r}')
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f'{key}: expected unique joint_names, got {", ".join(twice)} twice')
    return names


def positive_int(value: Any, what: str, *, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f'{key}: expected {what} to be a positive integer, got {value!r}')
    return int(value)


def sequence_length(
    leaves: list[Leaf], *, key: str, length: int | None, joint_names: tuple[str, ...] | None,
    shape: tuple[int, ...] | None, names_joints: bool = False,
) -> int:
    """
    Return the length every sequence field must have (0 when there are none).

    :param names_joints: ``joint_names`` names the message's joints (JointState,
        JointTrajectory), else it only gives the length of the sequence fields.
    """
    sequences = [leaf.path for leaf in leaves if leaf.count is None]
    if not sequences:
        if length is not None:
            raise ValueError(f'{key}: length {length} given, but no field is a sequence')
        if joint_names is not None and not names_joints:
            raise ValueError(f'{key}: joint_names given, but no field is a sequence (on this '
                             'type joint_names gives the length of sequence fields)')
        return 0
    if length is not None:
        length = positive_int(length, 'length', key=key)
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


def check_shape(shape: Sequence[int] | None, *, key: str) -> tuple[int, ...] | None:
    if shape is None:
        return None
    if not isinstance(shape, (list, tuple)) or not shape:
        raise ValueError(f'{key}: expected shape as a list of positive integers, got {shape!r}')
    return tuple(positive_int(d, 'every shape dimension', key=key) for d in shape)
