"""
Fast DDS's shared-memory files that a killed process leaves in ``/dev/shm``.

Each participant maps a segment, ``fastdds_<16 characters>``, beside a lock file (``_el``) that
it holds with ``flock`` while it lives. A process killed by SIGKILL (the suite kills robots and
simulators on purpose) cannot remove them, and Fast DDS does not reclaim them: without a
clean-up each run of the suite would leave a few behind, for good. A lock file that can be
locked again belongs to no live process; ``fastdds shm clean`` removes such segments the same
way, here limited to the files a test run created.
"""

import fcntl
import os
from pathlib import Path
import re
import time
from typing import Iterable

SHM = Path('/dev/shm')
_SEGMENT_LOCK = re.compile(r'fastdds_[0-9a-z]{16}_el')


def segment_locks() -> set[str]:
    """Return the names of the segments' lock files now in ``/dev/shm``."""
    try:
        return {name for name in os.listdir(SHM) if _SEGMENT_LOCK.fullmatch(name)}
    except FileNotFoundError:  # no /dev/shm: not Linux
        return set()


def mapped_segments(pid: int) -> set[str]:
    """Return the lock files of the segments that process ``pid`` has mapped."""
    with open(f'/proc/{pid}/maps') as maps:
        paths = {line.split(maxsplit=5)[-1].strip() for line in maps if str(SHM) in line}
    return {f'{Path(path).name}_el' for path in paths
            if _SEGMENT_LOCK.fullmatch(f'{Path(path).name}_el')}


def is_held(lock_name: str) -> bool:
    """Say whether a live process holds the lock file (it stays held while its owner lives)."""
    try:
        descriptor = os.open(SHM / lock_name, os.O_WRONLY)  # no O_CREAT: gone is not held
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)  # closing the descriptor also releases a lock just taken
    return False


def remove_abandoned(lock_names: Iterable[str], *, older_than: float = 1.0) -> list[str]:
    """
    Remove the segments among ``lock_names`` that no live process holds; return their names.

    :param older_than: seconds a lock file must have existed: a participant that is starting
        creates its lock file an instant before it locks it.
    """
    removed = []
    for lock_name in sorted(lock_names):
        try:
            age = time.time() - (SHM / lock_name).stat().st_mtime
        except FileNotFoundError:
            continue
        if age < older_than or is_held(lock_name):
            continue
        for path in (SHM / lock_name.removesuffix('_el'), SHM / lock_name):
            path.unlink(missing_ok=True)
        removed.append(lock_name.removesuffix('_el'))
    return removed
