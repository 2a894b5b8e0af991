"""
The checks every configuration goes through: numbers, integers, booleans, choices, vectors.

One set for the env's config dict, robot configs, the simulators and the nodes, so the same
mistake reads the same everywhere: ``<key> must be <what was expected>, got <what was found>``.
Values in messages are shortened: an error never prints an unbounded value.
"""

from collections.abc import Iterable
import math
import numbers
import os
import reprlib
from typing import Any

import numpy as np

_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 80
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 8
_SHORT.maxlevel = 3
_SHORT_MAX = 200  # characters of a value an error message shows at most


class WrongTypeError(TypeError, ValueError):
    """A value of the wrong type: a TypeError, and a ValueError like every other config error."""


def short_repr(value: Any) -> str:
    """Return ``repr(value)`` bounded in length: error messages never print unbounded values."""
    if isinstance(value, np.ndarray):
        # Only what the repr can show is converted: an image's tolist() takes milliseconds.
        value = value[(slice(0, _SHORT.maxlist + 1),) * value.ndim].tolist()
    text = _SHORT.repr(value)
    return text if len(text) <= _SHORT_MAX else text[:_SHORT_MAX - 5] + ' ...' + text[-1]


def bound_repr(bound: np.ndarray) -> str:
    """Return a space's bound shortly: one number when every element has it (an image's)."""
    if bound.size and bool(np.all(bound == bound.flat[0])):
        return repr(bound.flat[0].item())
    return short_repr(bound)


def is_number(value: Any) -> bool:
    """Say whether ``value`` is a real number (``True``/``False`` are not numbers here)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def check_number(value: Any, *, key: str, minimum: float | None = None,
                 above: float | None = None, maximum: float | None = None,
                 allow_inf: bool = False) -> float:
    """Return ``value`` as a float, or raise ValueError: not a number, NaN, inf, out of range."""
    if not is_number(value) or math.isnan(value):
        raise WrongTypeError(f'{key} must be a number, got {short_repr(value)}')
    finite = 'a number' if allow_inf else 'a finite number'
    if math.isinf(value) and not allow_inf:
        raise ValueError(f'{key} must be {finite}, got {short_repr(value)}')
    if minimum is not None and value < minimum:
        raise ValueError(f'{key} must be {finite} >= {minimum:g}, got {short_repr(value)}')
    if above is not None and value <= above:
        raise ValueError(f'{key} must be {finite} > {above:g}, got {short_repr(value)}')
    if maximum is not None and value > maximum:
        raise ValueError(f'{key} must be {finite} <= {maximum:g}, got {short_repr(value)}')
    return float(value)


def check_int(value: Any, *, key: str, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """Return ``value`` as an int, or raise ValueError (floats such as 2.0 are refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise WrongTypeError(f'{key} must be an integer, got {short_repr(value)}')
    if minimum is not None and value < minimum:
        raise ValueError(f'{key} must be an integer >= {minimum}, got {short_repr(value)}')
    if maximum is not None and value > maximum:
        raise ValueError(f'{key} must be an integer <= {maximum}, got {short_repr(value)}')
    return int(value)


def check_bool(value: Any, *, key: str) -> bool:
    """Return ``value`` if it is a bool; ``'false'``, ``0`` or ``'n'`` are refused, not guessed."""
    if not isinstance(value, (bool, np.bool_)):
        raise WrongTypeError(f'{key} must be true or false, got {short_repr(value)} '
                             f'({type(value).__name__})')
    return bool(value)


def check_string(value: Any, *, key: str) -> str:
    """Return ``value`` if it is a string; rcl types ``-p name:=1`` as an integer, not text."""
    if not isinstance(value, str):
        raise WrongTypeError(f'{key} must be a string, got {short_repr(value)} '
                             f'({type(value).__name__})')
    return value


def check_choice(value: Any, choices: Iterable[Any], *, key: str) -> Any:
    """Return ``value`` if it is one of ``choices``."""
    choices = tuple(choices)
    if isinstance(value, (bool, np.bool_)) or value not in choices:
        listed = ', '.join(str(c) for c in choices)
        raise ValueError(f'{key} must be one of {listed}, got {short_repr(value)}')
    return value


def check_vector(value: Any, *, key: str, size: int | None = None, finite: bool = False,
                 minimum: float | None = None) -> np.ndarray:
    """Return a float64 vector from a number or a list of numbers, checked."""
    if is_number(value):
        value = [value]
    if not isinstance(value, (list, tuple, np.ndarray)) or not all(is_number(v) for v in value):
        raise WrongTypeError(f'{key} must be a list of numbers, got {short_repr(value)}')
    vector = np.asarray(value, dtype=np.float64).reshape(-1)
    if size is not None and vector.size != size:
        raise ValueError(f'{key} must have {size} values, got {vector.size}')
    if finite and not np.all(np.isfinite(vector)):
        raise ValueError(f'{key} must be finite, got {short_repr(vector.tolist())}')
    if minimum is not None and np.any(vector < minimum):
        raise ValueError(f'{key} must be >= {minimum:g}, got {short_repr(vector.tolist())}')
    return vector


def physical_memory() -> int | None:
    """Return the bytes of memory this machine has, or None where the OS does not say."""
    try:
        page_size, pages = os.sysconf('SC_PAGE_SIZE'), os.sysconf('SC_PHYS_PAGES')
    except (AttributeError, OSError, ValueError):
        return None
    return page_size * pages if page_size > 0 and pages > 0 else None  # -1: indeterminate


def check_fits_in_memory(nbytes: int, *, key: str, what: str) -> None:
    """
    Refuse a size this machine cannot hold, naming the key.

    Past memory numpy raises a MemoryError that names no key, or the kernel's OOM killer ends
    the process while the bounds are filled: a typo in a shape must not do either.
    """
    memory = physical_memory()
    if memory is not None and nbytes > memory:
        raise ValueError(f'{key}: {what} take {nbytes / 1e9:.3g} GB, more than the '
                         f'{memory / 1e9:.3g} GB of memory this machine has')
