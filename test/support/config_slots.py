"""One observation slot built from a robot config file, as the env builds it (unit tests)."""

from pathlib import Path
from typing import Callable

from rtgym_ros.robot.loader import load_robot_config
from rtgym_ros.robot.slots import Slot
import yaml


def slot_from_config(tmp_path: Path, name: str, observation: dict, *, now: float = 0.0,
                     warn: Callable[[str, str], None] | None = None) -> Slot:
    """Return the slot ``name`` of a robot config with that one observation and one action."""
    params = {'time_step_duration': 0.1,
              'actions': {'names': ['effort'], 'effort': {
                  'topic': 'effort', 'type': 'std_msgs/msg/Float64MultiArray', 'field': 'data',
                  'low': [-1.0], 'high': [1.0]}},
              'observations': {'names': [name], name: observation}}
    path = tmp_path / 'robot.yaml'
    path.write_text(yaml.safe_dump({'/**': {'ros__parameters': params}}))
    [spec] = load_robot_config(path)[1].observations
    return Slot(spec, now=lambda: now, warn=warn)
