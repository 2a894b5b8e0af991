"""
The observation a ``rtgym_ros/ros-v1`` user gets: one object builds it and its space.

The interface hands the env a mapping ``{slot name: array}``; the layout adds the action
buffer and returns a flat ``Dict`` (``observation_layout: dict``, the default; SB3 takes it
as is) or rtgym's ``Tuple`` (``tuple``: the slots in config order, then each buffered action).
"""

from collections.abc import Mapping, Sequence
from typing import Any, Callable

import gymnasium.spaces as spaces
import numpy as np
from rtgym_ros.core.config import ACTION_BUFFER_KEY
from rtgym_ros.core.validate import short_repr
from rtgym_ros.robot.spec import ObservationSlotSpec

_SAMPLE_SEED = 0  # obs_prepro_func's space comes from one sample: the same in every process


class ObservationLayout:
    """Slots (+ the action buffer) as a Dict or an rtgym Tuple, with the matching space."""

    def __init__(self, slots: Sequence[ObservationSlotSpec], action_space: spaces.Box, *,
                 kind: str, act_in_obs: bool, act_buf_len: int) -> None:
        self.kind = kind
        self.names = [slot.name for slot in slots]
        self.act_in_obs = act_in_obs
        entries = {slot.name: slot.space for slot in slots}
        if kind == 'dict':
            if act_in_obs:
                entries[ACTION_BUFFER_KEY] = spaces.Box(
                    np.tile(action_space.low, (act_buf_len, 1)),
                    np.tile(action_space.high, (act_buf_len, 1)), dtype=np.float32)
            self.space: spaces.Space = spaces.Dict(entries)
        else:
            buffered = (action_space,) * act_buf_len if act_in_obs else ()
            self.space = spaces.Tuple((*entries.values(), *buffered))

    def build(self, values: Mapping[str, np.ndarray], actions: Sequence[Any]) -> Any:
        """Return the observation of ``values`` (by slot name) and the buffered ``actions``."""
        if self.kind == 'dict':
            observation = {name: values[name] for name in self.names}
            if self.act_in_obs:
                observation[ACTION_BUFFER_KEY] = np.array(actions, dtype=np.float32)
            return observation
        # Copies: the buffer holds the caller's own action objects, which would otherwise be
        # shared between observations (Gymnasium's checker warns about that).
        buffered = (np.array(a, dtype=np.float32) for a in actions) if self.act_in_obs else ()
        return (*(values[name] for name in self.names), *buffered)


def space_of_output(function: Callable[[Any], Any], space: spaces.Space, *,
                    key: str) -> spaces.Space:
    """
    Return the space of what ``function`` returns for observations of ``space``.

    Computed from one sample (seeded: every process computes the same): a dict becomes a
    ``Dict``, a tuple or list a ``Tuple``, an array or number an unbounded ``Box`` of its shape
    and dtype (integers: the dtype's range). A function cannot declare bounds this way: bounds
    the agent needs belong in the config (``low``, ``high``, ``transform``).
    """
    space.seed(_SAMPLE_SEED)
    try:
        output = function(space.sample())
    except Exception as error:
        raise ValueError(f'{key} failed on a sample observation of {space}: {error!r}') from None
    return _space_of(output, key=key)


def _space_of(value: Any, *, key: str) -> spaces.Space:
    if isinstance(value, Mapping):
        if not all(isinstance(name, str) for name in value):
            raise ValueError(f'{key} must return a dict with string keys, got keys '
                             f'{short_repr(list(value))}')
        return spaces.Dict({name: _space_of(item, key=f'{key}[{name!r}]')
                            for name, item in value.items()})
    if isinstance(value, (tuple, list)):
        return spaces.Tuple(tuple(_space_of(item, key=f'{key}[{i}]')
                                  for i, item in enumerate(value)))
    array = np.asarray(value)
    if np.issubdtype(array.dtype, np.floating):
        return spaces.Box(-np.inf, np.inf, shape=array.shape, dtype=array.dtype)
    if np.issubdtype(array.dtype, np.integer) and array.dtype != np.bool_:
        info = np.iinfo(array.dtype)
        return spaces.Box(info.min, info.max, shape=array.shape, dtype=array.dtype)
    raise ValueError(f'{key} must return numbers, arrays of numbers, or dicts, tuples and '
                     f'lists of them, got {type(value).__name__} {short_repr(value)}')
