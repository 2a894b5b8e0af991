"""
The ``mujoco_sim`` node: a MuJoCo model behind the topics and services of Gazebo + ros2_control.

The same robot-config shape then works against it and against Gazebo: ``joint_states``
(sensor_msgs/JointState), commands as a ros2_control forward command controller takes them
(``<controller>/commands``, std_msgs/Float64MultiArray, one value per actuator), the MJCF's
sensors (``sensors``, std_msgs/Float64MultiArray), odometry of a floating base (``odom``),
camera images, ``/clock``, and gazebo_ros's world services (``reset_simulation``,
``reset_world``, ``pause_physics``, ``unpause_physics``, std_srvs/Empty).

Two steppings (:mod:`.time_bases`): ``realtime``, on the node clock or on its own /clock at
``real_time_factor``; and ``lockstep``, where it owns /clock, is paused, and advances only to the
targets it receives on ``step_until`` (the rtgym_ros lockstep convention).

Modules: :mod:`.parameters` (the parameter table and its checks), :mod:`.time_bases`,
:mod:`.node` (the node, its physics, outputs and camera); the model, without ROS, is
:mod:`rtgym_ros.sim.mujoco_model`.

Run it as ``mujoco_sim --ros-args --params-file config/mujoco_sim/inverted_pendulum.yaml`` or
``python -m rtgym_ros.nodes.mujoco_sim --ros-args ...``; ``mujoco_sim --help`` lists the
parameters.
"""

import os
import sys
from typing import List, Optional

from rtgym_ros.nodes.command_line import wants_help
from rtgym_ros.nodes.mujoco_sim.node import MujocoSim, NODE_NAME
from rtgym_ros.nodes.mujoco_sim.parameters import help_text
from rtgym_ros.nodes.run_node import run_until_stopped
from rtgym_ros.ros.runtime import make_io_executor

__all__ = ['main', 'MujocoSim', 'NODE_NAME']


def main(args: Optional[List[str]] = None) -> int:
    """
    Run the node until SIGINT or SIGTERM, then tear down in order (ignoring more of them).

    :param args: Command line (program name first, then ``--ros-args`` ...); ``None`` reads
        ``sys.argv``. ``--help`` prints the parameters and returns 0 without starting ROS.
    :return: 0 on a clean stop or ``--help``, 1 when the node could not start or a callback
        failed, 2 for an argument outside ``--ros-args``.
    """
    argv = list(sys.argv if args is None else args)
    try:
        if wants_help(argv, prog=NODE_NAME):
            program = os.path.basename(argv[0]) if argv else NODE_NAME
            print(help_text(NODE_NAME if program in ('', '__main__.py') else program))
            return 0
    except ValueError as error:
        print(f'{NODE_NAME}: {error}', file=sys.stderr)
        return 2
    # No timers: the events executor (least CPU per message) can spin it.
    return run_until_stopped(
        argv, name=NODE_NAME, make_node=lambda context: MujocoSim(context=context),
        make_executor=lambda context, _: make_io_executor(context))
