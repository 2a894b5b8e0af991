"""
rtgym's semantics without ROS: the elastic schedule, the time-step runner, the config dict.

Nothing here imports rclpy; the env feeds these pieces the ROS clock and timers.
"""
