"""
``package.module:function`` names in a config: the only code a robot config can reach.

The module is imported and the attribute looked up; nothing is eval'd. A config that names a
callable is trusted input, like a launch file (see docs/configuration.md, "Trust").
"""

import importlib
from typing import Any, Callable

from rtgym_ros.core.validate import short_repr


def load_callable(spec: Any, *, key: str) -> Callable:
    """``'package.module:function'`` -> the function (imported, never eval'd)."""
    if not isinstance(spec, str) or spec.count(':') != 1:
        raise ValueError(f"{key} must be 'package.module:function', got {short_repr(spec)}")
    module_name, attribute = spec.split(':')
    if not module_name or not attribute.isidentifier() or not all(
            part.isidentifier() for part in module_name.split('.')):
        raise ValueError(f"{key} must be 'package.module:function', got {short_repr(spec)}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f'{key}: cannot import module {short_repr(module_name)}: '
                         f'{short_repr(str(error))}') from None
    function = getattr(module, attribute, None)
    if not callable(function):
        raise ValueError(f'{key}: module {short_repr(module_name)} has no callable '
                         f'{short_repr(attribute)}')
    return function
