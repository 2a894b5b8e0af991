"""
Per-slot observation transforms: what a robot config's ``observations.<name>.transform`` says.

A transform is compiled once, at load, from the slot's values as read (size, bounds, labels):
the observation space of the slot is the transform's output space, and every index it uses
is precomputed. At capture it is a few numpy operations on a float32 vector (a gather, a
``reduceat``, a multiply-add), on the executor thread.

The steps run in one fixed order, each on the output of the one before (a params file cannot
hold a list of mappings, so the order cannot come from the file)::

    quaternion_to_yaw -> select -> stride -> window_min | window_mean | window_max
        -> scale -> offset

No ROS here; ``rtgym_ros.robot.loader`` calls :func:`compile_transform`.
"""

from collections.abc import Sequence
from typing import Any

import numpy as np
from rtgym_ros.core.validate import check_int, check_vector, short_repr

STEPS = ('quaternion_to_yaw', 'select', 'stride', 'window_min', 'window_mean', 'window_max',
         'scale', 'offset')
_WINDOWS = {'window_min': np.minimum, 'window_mean': np.add, 'window_max': np.maximum}
_QUATERNION = 'xyzw'


class SlotTransform:
    """A compiled transform: ``apply`` maps a read vector to the slot's observation."""

    def __init__(self, *, in_size: int) -> None:
        self.in_size = in_size
        self.size = in_size
        """Number of values out."""
        self.low = np.empty(0, np.float32)
        self.high = np.empty(0, np.float32)
        self.labels: tuple[str, ...] = ()
        """What each value out is: ``yaw(pose.pose.orientation)``, ``min(ranges[0..9])``."""
        self.steps: dict[str, Any] = {}
        """The configured steps, in the order they run."""
        self._quaternions: np.ndarray | None = None  # (k, 4) indices of x, y, z, w
        self._yaw_at: np.ndarray | None = None  # where each yaw goes in the output
        self._keep_from: np.ndarray | None = None  # the values yaw leaves in place ...
        self._keep_at: np.ndarray | None = None  # ... and where they go
        self._yaw_size = 0
        self._gather: np.ndarray | None = None  # select and stride, as one index array
        self._window: tuple[Any, np.ndarray, np.ndarray | None] | None = None
        self._scale: np.ndarray | None = None
        self._offset: np.ndarray | None = None
        self._in_float64 = False  # window_mean, scale and offset round: computed in float64

    def apply(self, values: np.ndarray) -> np.ndarray:
        """Return the transformed vector (float32, a new array)."""
        if self._quaternions is not None:
            q = values[self._quaternions].astype(np.float64)
            x, y, z, w = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
            out = np.empty(self._yaw_size, np.float32)
            out[self._yaw_at] = np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
            out[self._keep_at] = values[self._keep_from]
            values = out
        if self._gather is not None:
            values = values[self._gather]
        if self._in_float64:
            # As the bounds are computed: float32 arithmetic would round a value at a bound
            # past it (3.5 * 0.3 is 1.0500001 in float32, and the bound is 1.05).
            values = values.astype(np.float64)
        if self._window is not None:
            ufunc, starts, counts = self._window
            values = ufunc.reduceat(values, starts)
            if counts is not None:
                values = values / counts
        if self._scale is not None:
            values = values * self._scale
        if self._offset is not None:
            values = values + self._offset
        return values.astype(np.float32, copy=False)


def compile_transform(config: Any, *, size: int, low: np.ndarray, high: np.ndarray,
                      labels: Sequence[str] | None, key: str) -> SlotTransform:
    """
    Check a slot's ``transform`` mapping; return the transform with its output space.

    :param config: the mapping, e.g. ``{'window_min': 10}``, ``{'quaternion_to_yaw': [2]}``.
    :param size: number of values the slot reads (a vector).
    :param low: bounds of the values read, ``size`` each (-inf/inf where unbounded).
    :param labels: what each value read is (for the layout, and to check quaternions).
    :param key: the config key, e.g. ``observations.scan.transform``.
    """
    if not isinstance(config, dict) or not config:
        raise ValueError(f'{key} must be a mapping of steps ({", ".join(STEPS)}), '
                         f'got {short_repr(config)}')
    unknown = sorted(set(config) - set(STEPS))
    if unknown:
        raise ValueError(f'{key} has unknown steps {unknown}; allowed, in the order they run: '
                         f'{", ".join(STEPS)}')
    windows = [name for name in _WINDOWS if name in config]
    if len(windows) > 1:
        raise ValueError(f'{key}: give one of {", ".join(_WINDOWS)}, got {", ".join(windows)}')
    transform = SlotTransform(in_size=size)
    transform.steps = {name: config[name] for name in STEPS if name in config}
    state = _State(np.asarray(low, np.float64), np.asarray(high, np.float64),
                   list(labels) if labels is not None else [f'[{i}]' for i in range(size)])
    if 'quaternion_to_yaw' in config:
        _quaternion_to_yaw(transform, state, config['quaternion_to_yaw'],
                           named=labels is not None, key=f'{key}.quaternion_to_yaw')
    gather = np.arange(state.size)
    if 'select' in config:
        gather = _select(state, config['select'], key=f'{key}.select')
    if 'stride' in config:
        stride = check_int(config['stride'], key=f'{key}.stride', minimum=1)
        gather = gather[::stride]
    if not np.array_equal(gather, np.arange(state.size)):
        transform._gather = gather
        state.take(gather)
    if windows:
        _window(transform, state, windows[0], config[windows[0]], key=f'{key}.{windows[0]}')
    if 'scale' in config:
        scale = _per_value(config['scale'], state.size, key=f'{key}.scale')
        transform._scale = scale
        state.scale(scale)
    if 'offset' in config:
        offset = _per_value(config['offset'], state.size, key=f'{key}.offset')
        transform._offset = offset
        state.low, state.high = state.low + offset, state.high + offset
        state.labels = [f'{label}{value:+g}' if value else label
                        for label, value in zip(state.labels, offset)]
    if state.size == 0:
        raise ValueError(f'{key} leaves no value')
    transform._in_float64 = ('window_mean' in config or transform._scale is not None
                             or transform._offset is not None)
    transform.size = state.size
    with np.errstate(over='ignore'):  # said below, with the key
        transform.low = state.low.astype(np.float32)
        transform.high = state.high.astype(np.float32)
    overflow = np.flatnonzero((np.isfinite(state.low) & np.isinf(transform.low))
                              | (np.isfinite(state.high) & np.isinf(transform.high)))
    if overflow.size:  # observations are float32: a bound past it is inf, and so the values
        names = ', '.join(state.labels[i] for i in overflow)
        raise ValueError(f'{key}: the transformed bounds of {names} leave float32 '
                         f'(|x| <= {np.finfo(np.float32).max:.4g}): check scale and offset')
    transform.labels = tuple(state.labels)
    return transform


class _State:
    """Bounds and labels of the vector between two steps (at load only)."""

    def __init__(self, low: np.ndarray, high: np.ndarray, labels: list[str]) -> None:
        self.low, self.high, self.labels = low, high, labels

    @property
    def size(self) -> int:
        return len(self.labels)

    def take(self, index: np.ndarray) -> None:
        self.low, self.high = self.low[index], self.high[index]
        self.labels = [self.labels[i] for i in index]

    def scale(self, factor: np.ndarray) -> None:
        with np.errstate(invalid='ignore'):  # 0 * inf: a zero factor gives 0 whatever x is
            ends = np.stack([self.low * factor, self.high * factor])
        ends[:, factor == 0.0] = 0.0
        self.low, self.high = ends.min(axis=0), ends.max(axis=0)
        self.labels = [label if value == 1.0 else f'{value:g}*{label}'
                       for label, value in zip(self.labels, factor)]


def _quaternion_to_yaw(transform: SlotTransform, state: _State, value: Any, *, named: bool,
                       key: str) -> None:
    starts = [value] if not isinstance(value, list) else value
    if not starts:
        raise ValueError(f'{key} must be an index or a list of indices, got []')
    starts = [check_int(start, key=key, minimum=0) for start in starts]
    taken: set[int] = set()
    for start in starts:
        span = set(range(start, start + 4))
        if start + 4 > state.size:
            raise ValueError(f'{key}: a quaternion at index {start} needs values {start} to '
                             f'{start + 3}, but the slot reads {state.size} values')
        if span & taken:
            raise ValueError(f'{key}: quaternions overlap at index {start}: each is 4 values '
                             '(x, y, z, w) from its index')
        taken |= span
        for offset, axis in enumerate(_QUATERNION):
            label = state.labels[start + offset]
            if named and not label.endswith(']') and not label.endswith(f'.{axis}'):
                found = ', '.join(state.labels[start:start + 4])
                raise ValueError(f'{key}: values {start} to {start + 3} must be the x, y, z, w '
                                 f'of a quaternion, got {found}')
    starts.sort()
    yaw_at, keep_from, keep_at, labels, low, high = [], [], [], [], [], []
    position = 0
    for index in range(state.size):
        if index in starts:
            yaw_at.append(position)
            prefix = state.labels[index]
            prefix = prefix[:-2] if prefix.endswith('.x') else f'{prefix}..'
            labels.append(f'yaw({prefix})')
            low.append(-np.pi)
            high.append(np.pi)
        elif index not in taken:
            keep_from.append(index)
            keep_at.append(position)
            labels.append(state.labels[index])
            low.append(state.low[index])
            high.append(state.high[index])
        else:
            continue
        position += 1
    transform._quaternions = np.array([[s, s + 1, s + 2, s + 3] for s in starts], np.intp)
    transform._yaw_at = np.array(yaw_at, np.intp)
    transform._keep_from = np.array(keep_from, np.intp)
    transform._keep_at = np.array(keep_at, np.intp)
    transform._yaw_size = position
    # float32(pi) is a little above pi: the bounds hold every float32 yaw.
    state.low = np.array(low, np.float64)
    state.high = np.array(high, np.float64)
    state.low[transform._yaw_at] = -np.float32(np.pi)
    state.high[transform._yaw_at] = np.float32(np.pi)
    state.labels = labels


def _select(state: _State, value: Any, *, key: str) -> np.ndarray:
    indices = [value] if not isinstance(value, list) else value
    if not indices:
        raise ValueError(f'{key} must be a list of indices, got []')
    checked = []
    for index in indices:
        index = check_int(index, key=key)
        if not -state.size <= index < state.size:
            raise ValueError(f'{key}: index {index} is out of range for {state.size} values')
        checked.append(index % state.size)
    return np.array(checked, np.intp)


def _window(transform: SlotTransform, state: _State, name: str, value: Any, *,
            key: str) -> None:
    # A window wider than the values is one window of them all (and stays within an intp).
    width = min(check_int(value, key=key, minimum=1), max(state.size, 1))
    starts = np.arange(0, state.size, width, dtype=np.intp)
    stops = np.minimum(starts + width, state.size)
    counts = (stops - starts).astype(np.float64)
    ufunc = _WINDOWS[name]
    transform._window = (ufunc, starts, counts if name == 'window_mean' else None)
    if name == 'window_mean':
        low = np.add.reduceat(state.low, starts) / counts
        high = np.add.reduceat(state.high, starts) / counts
    else:
        low, high = ufunc.reduceat(state.low, starts), ufunc.reduceat(state.high, starts)
    op = name.removeprefix('window_')
    state.labels = [f'{op}({state.labels[a]}..{state.labels[b - 1]})' if b - a > 1
                    else f'{op}({state.labels[a]})' for a, b in zip(starts, stops)]
    state.low, state.high = low, high


def _per_value(value: Any, size: int, *, key: str) -> np.ndarray:
    vector = check_vector(value, key=key, finite=True)
    if vector.size not in (1, size):
        raise ValueError(f'{key} must have 1 value or {size} (the values at this step), '
                         f'got {vector.size}')
    return np.broadcast_to(vector, (size,)).astype(np.float64)
