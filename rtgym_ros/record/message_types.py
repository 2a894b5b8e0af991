"""
Message definitions for a bag: the text and RIHS01 hash of each recorded type.

A rosbag2 in MCAP stores each topic's type as its ``.msg`` text with its dependencies (the
``ros2msg`` schema Foxglove decodes with) and, in ``metadata.yaml``, its type hash. Both come
from the ``.msg`` files installed beside the Python package of the type
(``PREFIX/share/PKG/msg/TYPE.msg``, a ROS 2 install or the PyPI wheels alike), so they are the
definitions rclpy serializes with; rosbags' own copy of the latest distro's definitions is the
fallback for a type whose files are not installed.
"""

import importlib
import os
from pathlib import Path
import sys
import threading
from typing import Any, Callable, Iterator

from rosbags.typesys import get_types_from_msg, get_typestore, Stores
from rtgym_ros.msgconv.type_names import interface_name

_lock = threading.Lock()
_store = get_typestore(Stores.EMPTY)  # builtin_interfaces only; filled from .msg files
_described: dict[str, tuple[str, str]] = {}


def describe(msg_type: type, *, key: str = 'record') -> tuple[str, str, str]:
    """
    Return ``('pkg/msg/Type', message definition, RIHS01 hash)`` of a message class.

    :raises ValueError: the type's definition, or one it uses, cannot be found.
    """
    name = interface_name(msg_type)
    with _lock:
        if name not in _described:
            _register(name, key=key)
            msgdef, _ = _store.generate_msgdef(name, ros_version=2)
            _described[name] = (msgdef, _store.hash_rihs01(name))
        return (name, *_described[name])


def cdr_size(name: str) -> Callable[[Any], int]:
    """
    Return ``size(message)``: the CDR length of a ROS message of a described type.

    ``serialize_message`` (rmw_fastrtps) returns its size estimate, up to 8 bytes of padding
    longer than the message: ROS decoders ignore them, rosbags' reader does not. A bag holds
    what the wire holds, so the writer cuts them off.
    """
    with _lock:
        msgdef = _store.get_msgdef(name)
    return lambda message: 4 + msgdef.getsize_cdr(0, message, _store)


def typestore() -> Any:
    """Return the rosbags typestore of every type described so far (to decode a bag)."""
    return _store


def _register(name: str, *, key: str) -> None:
    """Add ``name`` and every type it uses to the store (depth first, each once)."""
    if name in _store.fielddefs:
        return
    path = msg_file(name)
    if path is not None:
        types = get_types_from_msg(path.read_text(), name)
    else:
        latest = get_typestore(Stores.LATEST)
        if name not in latest.fielddefs:
            raise ValueError(
                f'{key}: cannot record {name}: its definition ({name}.msg) is not installed '
                f'under the prefix of its Python package, AMENT_PREFIX_PATH or {sys.prefix}, '
                'and rosbags does not know it')
        types = {name: latest.fielddefs[name]}
    _store.register(types)
    for used in _type_names(types[name][1]):
        _register(used, key=key)


def msg_file(name: str) -> Path | None:
    """Return the installed ``.msg`` file of ``pkg/msg/Type``, or None."""
    package, _, type_name = name.split('/')
    relative = Path('share', package, 'msg', f'{type_name}.msg')
    for prefix in _prefixes(package):
        if (prefix / relative).is_file():
            return prefix / relative
    return None


def _prefixes(package: str) -> Iterator[Path]:
    try:
        module = importlib.import_module(package)
    except ImportError:
        module = None
    if module is not None and getattr(module, '__file__', None):
        yield from Path(module.__file__).resolve().parents
    for prefix in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep):
        if prefix:
            yield Path(prefix)
    yield Path(sys.prefix)


def _type_names(tree: Any) -> Iterator[str]:
    """Yield the message type names in a rosbags field tree ('pkg/msg/Type' strings)."""
    if isinstance(tree, str):
        if tree.count('/') == 2:
            yield tree
    elif isinstance(tree, (tuple, list)):
        for item in tree:
            yield from _type_names(item)
