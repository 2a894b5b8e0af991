"""The interface packages a robot config names, for tests that load every shipped config."""

import importlib.util
from pathlib import Path

import pytest
import yaml


def uninstalled_packages(path: Path) -> list[str]:
    """Return the packages of the types ``path`` names (type: keys) that are not installed."""
    names = set()

    def walk(value) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == 'type' and isinstance(item, str) and item.count('/') == 2:
                    names.add(item.split('/')[0])
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
    walk(yaml.safe_load(path.read_text()))
    return sorted(p for p in names if importlib.util.find_spec(p) is None)


def skip_unless_installed(path: Path) -> None:
    """Skip, saying why, when the config names a type whose package is not installed here."""
    missing = uninstalled_packages(path)
    if missing:
        pytest.skip(f'{path.name} names types of {", ".join(missing)}, not installed here '
                    '(a ROS distro has them)')
