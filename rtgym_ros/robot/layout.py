"""
The observation a ``rtgym_ros/ros-v1`` user gets: one object builds it and its space.

The interface hands the env a mapping ``{slot name: array}``; the layout adds the action
buffer and returns a flat ``Dict`` (``observation_layout: dict``, the default; SB3 takes it
as is) or rtgym's ``Tuple`` (``tuple``: the slots in config order, then each buffered action).
"""

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
from rtgym_ros.core.config import ACTION_BUFFER_KEY
from rtgym_ros.robot.spec import ObservationSlotSpec


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
