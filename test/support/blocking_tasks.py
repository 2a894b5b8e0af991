"""Reward functions that block on demand: an executor thread held by user code, on purpose."""

import threading
import time

import numpy as np

BLOCK = threading.Event()
"""Set it, and the next capture's reward function sleeps ``BLOCK_SECONDS``."""
BLOCKING = threading.Event()
"""Set by the reward function once it has started to sleep."""
BLOCK_SECONDS = 8.0


def sleepy_reward(obs: dict[str, np.ndarray], action: np.ndarray, info: dict) -> float:
    if BLOCK.is_set():
        BLOCK.clear()
        BLOCKING.set()
        time.sleep(BLOCK_SECONDS)
    return 0.0
