"""
rtgym_ros: real-time Gymnasium envs on ROS 2, with rtgym's elastic time-step on ROS timers.

Importing the package registers the env ids:

- ``rtgym_ros/real-time-gym-v1``: any :class:`RealTimeGymInterface`, rtgym-style config dict.
- ``rtgym_ros/ros-v1``: a robot described by a ROS 2 params file (``robot_config=PATH``).
"""

import atexit

from gymnasium.envs.registration import register

from rtgym_ros.config import DEFAULT_CONFIG_DICT
from rtgym_ros.env import close_all, RealTimeEnv
from rtgym_ros.interface import RealTimeGymInterface

__all__ = ['DEFAULT_CONFIG_DICT', 'RealTimeEnv', 'RealTimeGymInterface']
__version__ = '0.1.0'

register(id='rtgym_ros/real-time-gym-v1', entry_point='rtgym_ros.env:RealTimeEnv',
         nondeterministic=True)
register(id='rtgym_ros/ros-v1', entry_point='rtgym_ros.ros_env:RosEnv', nondeterministic=True)

# Close leftover envs before the interpreter tears rclpy down under their executor threads.
atexit.register(close_all)
