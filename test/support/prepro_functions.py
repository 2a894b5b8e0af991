"""
``obs_prepro_func`` and ``act_prepro_func`` for the tests, named in configs by strings.

``prepro_functions:with_speed`` and the like: test/support is on the path of the tests and of
the processes they start.
"""

import threading
import time

import numpy as np

FAIL = threading.Event()
"""Set it, and ``fails_when_told`` raises (at the next observation it is given)."""
SLOW = threading.Event()
"""Set it, and ``slow_when_told`` sleeps ``SLOW_SECONDS`` (once) before it returns."""
SLOWING = threading.Event()
"""Set by ``slow_when_told`` once it has started to sleep."""
SLOW_SECONDS = 0.6


def with_speed(obs: dict) -> dict:
    """Return the Dict observation plus 'speed', |velocity| of the first joint (a new key)."""
    out = dict(obs)
    out['speed'] = np.abs(np.asarray(obs['joints'][1:2], dtype=np.float32))
    return out


def halve(action: np.ndarray) -> np.ndarray:
    """Return half the action (what is published)."""
    return np.asarray(action) * 0.5


def double(action: np.ndarray) -> np.ndarray:
    """Return twice the action: out of bounds for large actions (clipped)."""
    return np.asarray(action) * 2.0


def wrong_shape(action: np.ndarray) -> np.ndarray:
    """Return a command of the wrong size."""
    return np.zeros(5)


def fails(obs: dict) -> dict:
    """Raise, as a function written for another observation does."""
    raise KeyError('no such key')


def halve_in_place(action: np.ndarray) -> np.ndarray:
    """Halve the action where it is and return it, as numpy code often does (``*=``)."""
    action *= 0.5
    return action


def fails_when_told(obs: dict) -> dict:
    """Return the observation as it is, or raise while ``FAIL`` is set."""
    if FAIL.is_set():
        raise KeyError('no such key')
    return obs


def slow_when_told(action: np.ndarray) -> np.ndarray:
    """Return the action as it is; first sleep ``SLOW_SECONDS`` if ``SLOW`` is set."""
    if SLOW.is_set():
        SLOW.clear()
        SLOWING.set()
        time.sleep(SLOW_SECONDS)
    return action
