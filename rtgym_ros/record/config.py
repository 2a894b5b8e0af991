"""
The ``record`` key of a robot config: where the episodes' bag goes, checked at load.

``record: {path: episodes}`` (or ``record: episodes``) writes the rosbag2 directory
``episodes/`` (``metadata.yaml`` and ``episodes.mcap``), as ``ros2 bag record -o episodes``
does; ``{time}`` in the path becomes the local time (``2026_05_09-14_03_59``), so that a
params file serves run after run. Like ``ros2 bag record``, it never overwrites.
"""

from dataclasses import dataclass
import importlib.util
from pathlib import Path
import time
from typing import Any

from rtgym_ros.core.validate import check_int, short_repr

RECORD_KEYS = ('path', 'queue_size')
DEFAULT_QUEUE_SIZE = 1000


@dataclass(frozen=True)
class RecordSpec:
    """A checked ``record`` key."""

    path: Path
    """The rosbag2 directory to create (``{time}`` already replaced)."""
    queue_size: int = DEFAULT_QUEUE_SIZE
    """Messages waiting for the writer thread, at most; more are dropped and counted."""


def record_spec(value: Any, *, key: str = 'record') -> RecordSpec | None:
    """Return the checked ``record`` key (None: not recording), or raise ValueError."""
    if value is None or value == '':
        return None
    if isinstance(value, str):
        value = {'path': value}
    if not isinstance(value, dict):
        raise ValueError(f'{key} must be a bag directory or a mapping with path (and '
                         f'queue_size), got {short_repr(value)}')
    unknown = sorted(set(value) - set(RECORD_KEYS))
    if unknown:
        raise ValueError(f'{key} has unknown keys {unknown}; allowed: {", ".join(RECORD_KEYS)}')
    text = value.get('path')
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f'{key}.path must name the bag directory to create, '
                         f'got {short_repr(text)}')
    path = Path(text.replace('{time}', time.strftime('%Y_%m_%d-%H_%M_%S'))).expanduser()
    if path.suffix in ('.mcap', '.db3'):
        bag = path.with_suffix('')
        raise ValueError(f'{key}.path names the rosbag2 directory to create (as ros2 bag record '
                         f'-o does), got the file name {text!r}: give {str(bag)!r}, and the '
                         f'MCAP file is {bag / bag.name}.mcap')
    if path.exists():
        raise ValueError(f'{key}.path {str(path)!r} exists: a bag is never overwritten; give a '
                         "new directory, or put {time} in the path ('run_{time}')")
    queue_size = check_int(value.get('queue_size', DEFAULT_QUEUE_SIZE),
                           key=f'{key}.queue_size', minimum=1)
    if importlib.util.find_spec('rosbags') is None:
        raise ValueError(f"{key} needs the rosbags library: pip install 'rtgym_ros[record]' "
                         '(or pip install rosbags)')
    return RecordSpec(path=path, queue_size=queue_size)
