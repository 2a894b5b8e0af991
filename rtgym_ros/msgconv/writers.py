"""
Writers: action values into messages of any type with float/double fields, compiled at load.

Values are taken in the order of the configured fields, ``length`` consecutive values per
sequence field (joints: field-major, every joint's position, then every joint's velocity).
The env checks actions once (shape, finite, bounds) before they reach a writer.
"""

import array
from collections.abc import Sequence
import math
import operator
from typing import Any, Callable

from builtin_interfaces.msg import Time
import numpy as np

from rtgym_ros.msgconv.fields import (check_joint_names, duration, fields_of, has_header,
                                      JOINT_STATE, JOINT_TRAJECTORY, Leaf, nested_class, NUMERIC,
                                      resolve_all, sequence_length, value_labels)
from rtgym_ros.msgconv.type_names import check_message_class

_WRITABLE = {'float': 'f', 'double': 'd'}


class FieldWriter:
    """Builds messages of one type from vectors of ``size`` floats (built by compile_writer)."""

    def __init__(self, msg_type: type, *, size: int, prepare: Callable[[Any], Any],
                 scalars: list[tuple], arrays: list[tuple]) -> None:
        self.msg_type = msg_type
        self.size = size
        self.labels: tuple[str, ...] = ()
        """The field each value goes to (``linear.x``, ``positions[shoulder]``), in order."""
        self._prepare = prepare
        self._scalars = scalars
        self._arrays = arrays

    def build(self, values: np.ndarray, *, stamp: Time | None = None) -> Any:
        """
        Return a new message holding values, in the order of the configured fields.

        :param values: ``size`` finite numbers (any shape; read in C order). They are not
            checked here: the env checks each action once (``RosEnv.check_action``).
        :param stamp: header.stamp for types with a header; left zero when None.
        """
        flat = np.asarray(values).reshape(-1)
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
    if type_name == JOINT_TRAJECTORY:
        def prepare(msg: Any) -> Any:
            if frame_id is not None:
                msg.header.frame_id = frame_id
            msg.joint_names = list(names)
            point = point_type(time_from_start=duration(time_from_start))
            msg.points = [point]
            return point
        return prepare

    def prepare(msg: Any) -> Any:
        if frame_id is not None:
            msg.header.frame_id = frame_id
        if names is not None and type_name == JOINT_STATE:
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
    names = check_joint_names(joint_names, key=key)
    _check_header_options(msg_type, type_name, names=names, frame_id=frame_id, key=key)
    point_type = _point_type(msg_type, type_name, time_from_start, key=key)
    leaves = resolve_all(point_type or msg_type, fields, key=key)
    for leaf in leaves:
        if leaf.typename not in _WRITABLE:
            raise ValueError(
                f'{key}: expected float or double fields to write, got {leaf.path!r} of type '
                f'{leaf.typename}')
    seq_length = sequence_length(leaves, key=key, length=length, joint_names=names,
                                 shape=None if size is None else (size,),
                                 names_joints=type_name in (JOINT_STATE, JOINT_TRAJECTORY))
    scalars, arrays, size = _targets(leaves, seq_length)
    prepare = _prepare(type_name, names=names, frame_id=frame_id, point_type=point_type,
                       time_from_start=float(time_from_start))
    writer = FieldWriter(msg_type, size=size, prepare=prepare, scalars=scalars, arrays=arrays)
    writer.labels = value_labels(leaves, seq_length, names)
    return writer


def _check_header_options(msg_type: type, type_name: str, *, names: tuple[str, ...] | None,
                          frame_id: str | None, key: str) -> None:
    if type_name in (JOINT_STATE, JOINT_TRAJECTORY) and names is None:
        raise ValueError(f'{key}: expected joint_names for {type_name}, got none')
    if frame_id is not None and (not isinstance(frame_id, str) or not has_header(msg_type)):
        raise ValueError(
            f'{key}: expected frame_id as a string on a type with a header, got {frame_id!r} '
            f'for {type_name}')


def _point_type(msg_type: type, type_name: str, time_from_start: float, *,
                key: str) -> type | None:
    """Return the point class of a JointTrajectory (fields are the point's), else None."""
    if type_name != JOINT_TRAJECTORY:
        if time_from_start != 0.0:
            raise ValueError(f'{key}: time_from_start applies to {JOINT_TRAJECTORY} only, '
                             f'got it for {type_name}')
        return None
    if not isinstance(time_from_start, (int, float)) or not 0 <= time_from_start < math.inf:
        raise ValueError(
            f'{key}: expected time_from_start >= 0 seconds, got {time_from_start!r}')
    return nested_class(fields_of(msg_type)['points'][1].value_type)


def _targets(leaves: list[Leaf], seq_length: int) -> tuple[list[tuple], list[tuple], int]:
    """Where each value goes: (parent, attribute, index) scalars and array slices."""
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
        arrays.append((parent, attribute, size, size + count, NUMERIC[leaf.typename], typecode))
        size += count
    return scalars, arrays, size
