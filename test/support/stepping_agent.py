"""
A training process for the fault tests: steps ros-v1 with a constant action until told.

``python test/support/stepping_agent.py NAMESPACE ACTION MODE`` with MODE ``run`` (step forever),
``raise`` (raise) or ``stall`` (stop calling step(), stay alive) once a line comes on stdin: the
test first sees the robot driven, however slowly its messages reach it. Prints STEPPING once
the robot is being driven. No signal handling of its own: what happens on SIGINT / an
exception is what the env does for any user script.
"""

from pathlib import Path
import sys
import threading
import time

import gymnasium as gym
import numpy as np

import rtgym_ros  # noqa: F401

CONFIG = Path(__file__).resolve().parents[2] / 'config' / 'robots' / 'pendulum_sim.yaml'


def main() -> None:
    namespace, value, mode = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    env = gym.make('rtgym_ros/ros-v1', robot_config=str(CONFIG), namespace=namespace,
                   ep_max_length=10 ** 9, reset_timeout=30.0)
    env.reset()
    action = np.array([value], np.float32)
    told = threading.Event()
    threading.Thread(target=lambda: sys.stdin.readline() and told.set(), daemon=True).start()
    for step in range(10 ** 9):
        env.step(action)
        if step == 20:
            print('STEPPING', flush=True)
        if told.is_set() and mode == 'raise':
            raise RuntimeError('the training loop crashed')
        if told.is_set() and mode == 'stall':
            time.sleep(3600)


if __name__ == '__main__':
    main()
