"""
rtgym_ros: real-time Gymnasium envs on ROS 2, with rtgym's elastic time-step on ROS timers.

Importing the package registers the env ids (where Gymnasium is installed):

- ``rtgym_ros/real-time-gym-v1``: any :class:`RealTimeGymInterface`, rtgym-style config dict.
- ``rtgym_ros/ros-v1``: a robot described by a ROS 2 params file (``robot_config=PATH``).

It imports neither rclpy nor Gymnasium's envs: ``rtgym_ros.core`` and ``rtgym_ros.sim`` work
without ROS. :class:`RealTimeEnv` is imported on first use.
"""

import atexit
import sys
from typing import Any

from rtgym_ros.core.config import DEFAULT_CONFIG_DICT
from rtgym_ros.core.interface import RealTimeGymInterface

__all__ = ['DEFAULT_CONFIG_DICT', 'RealTimeEnv', 'RealTimeGymInterface']
__version__ = '0.1.0'


def __getattr__(name: str) -> Any:
    if name == 'RealTimeEnv':
        from rtgym_ros.env import RealTimeEnv
        return RealTimeEnv
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def _register_env_ids() -> None:
    try:
        from gymnasium.envs.registration import register
    except ImportError:  # the ROS-free parts (core, sim) are usable without Gymnasium
        return
    register(id='rtgym_ros/real-time-gym-v1', entry_point='rtgym_ros.env:RealTimeEnv',
             nondeterministic=True)
    register(id='rtgym_ros/ros-v1', entry_point='rtgym_ros.robot.env:RosEnv',
             nondeterministic=True)


def _close_all_envs() -> None:
    """Close leftover envs before the interpreter tears rclpy down under their threads."""
    env_module = sys.modules.get('rtgym_ros.env')
    if env_module is not None:
        env_module.close_all()


_register_env_ids()
atexit.register(_close_all_envs)
