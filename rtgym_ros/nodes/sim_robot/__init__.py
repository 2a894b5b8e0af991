"""The ``sim_robot`` node: an embedded simulated robot behind ROS 2 topics."""

from rtgym_ros.nodes.sim_robot.node import main, NODE_NAME, SimRobot

__all__ = ['main', 'NODE_NAME', 'SimRobot']
