"""
Read a ROS 2 parameters file (``<node>: ros__parameters: ...``) as one nested dict.

The same YAML serves ``ros2 launch``, ``--ros-args --params-file`` and ``gym.make(...,
robot_config=FILE)``. Parameters may be nested mappings or dotted names
(``actions.torque.topic``), as rcl accepts both; they are merged into one nested dict.
Loading is ``yaml.safe_load``: a config can name data, never code to run.
"""

from pathlib import Path
from typing import Any

from rtgym_ros.ros.parameters import merge_nested, unflatten
import yaml

WILDCARD = '/**'


def load_params_file(path: str | Path, *, node_name: str | None = None,
                     default_node_name: str | None = None) -> dict[str, Any]:
    """
    Parameters that apply to ``node_name`` (``/**`` first, the node's own entry wins).

    Without ``node_name``, a file with a single entry applies whatever its name; otherwise the
    entry of ``default_node_name`` (the name the node will get) applies.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise FileNotFoundError(f'robot_config: cannot read {path}: {error.strerror}') from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValueError(f'robot_config: {path} is not valid YAML: {error}') from None
    return params_for_node(document, node_name=node_name, source=str(path),
                           default_node_name=default_node_name)


def params_for_node(document: Any, *, node_name: str | None = None,
                    source: str = 'robot_config',
                    default_node_name: str | None = None) -> dict[str, Any]:
    """Pick and merge the ``ros__parameters`` blocks of a parsed params file."""
    if not isinstance(document, dict) or not document:
        raise ValueError(f'{source}: expected a mapping of node names to '
                         f"'ros__parameters', got {type(document).__name__}")
    blocks = []
    for name, entry in document.items():
        if not isinstance(entry, dict) or 'ros__parameters' not in entry:
            raise ValueError(f"{source}: entry {name!r} has no 'ros__parameters' mapping")
        if _applies(str(name), node_name, single=len(document) == 1,
                    default=default_node_name):
            parameters = entry['ros__parameters']
            if not isinstance(parameters, dict):
                raise ValueError(f'{source}: {name}.ros__parameters must be a mapping, '
                                 f'got {type(parameters).__name__}')
            blocks.append((str(name) != WILDCARD, parameters))
    if not blocks:
        raise ValueError(f'{source}: no entry for node {node_name!r} nor {WILDCARD!r}; '
                         f'entries: {sorted(map(str, document))}')
    merged: dict[str, Any] = {}
    for _, parameters in sorted(blocks, key=lambda block: block[0]):  # '/**' first
        merge_nested(merged, unflatten(parameters))
    return merged


def _applies(entry_name: str, node_name: str | None, *, single: bool,
             default: str | None) -> bool:
    if entry_name == WILDCARD:
        return True
    if node_name is None:
        if single:
            return True
        node_name = default
    if node_name is None:
        return False
    return entry_name.lstrip('/').split('/')[-1] == node_name.lstrip('/').split('/')[-1]
