"""
``rtgym_ros/ros-v1``: a robot described by a ROS 2 params file becomes topics and services.

loader (params file -> typed spec) -> interface (spec -> publishers, subscriptions, slots)
-> env (a RealTimeEnv on that interface, with checked actions and the observation layout).
"""
