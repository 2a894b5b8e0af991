"""
An agent process for the Ctrl-C test: steps until SIGINT, then closes the env.

``python test/support/interrupted_agent.py CONFIG NAMESPACE``: prints STEPPING once it drives
the robot, then steps with action 0.75 (the robot may go silent: ``on_stale: wait`` holds a
capture); on KeyboardInterrupt it prints INTERRUPTED and closes, as a user script would.
"""

import sys
import time

import gymnasium as gym
import numpy as np
import rtgym_ros  # noqa: F401


def main() -> int:
    config, namespace = sys.argv[1], sys.argv[2]
    env = gym.make('rtgym_ros/ros-v1', robot_config=config, namespace=namespace)
    try:
        env.reset()
        for step in range(10 ** 9):
            env.step(np.array([0.75], np.float32))
            if step == 5:
                print('STEPPING', flush=True)
    except KeyboardInterrupt:
        print(f'INTERRUPTED {time.time():.3f}', flush=True)
    finally:
        env.close()
        print(f'CLOSED {time.time():.3f}', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
