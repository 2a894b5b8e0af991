"""
The ``sim_robot`` node: an embedded simulated robot behind ROS 2 topics, optionally owning /clock.

It plays the role of a real robot's driver so that the env can be exercised end to end without a
simulator install: JointState out at ``sensor_rate``, effort commands in (Float64MultiArray),
a reset service (std_srvs/Trigger) and a pause service (std_srvs/SetBool, true pauses). It can
inject the faults a real robot has: latency and jitter on both paths (queued, so order is kept),
sensor noise and dropped messages. A command watchdog zeroes the applied effort when commands
stop, as a robot-side controller would.

Two time bases (:mod:`.time_bases`): wall time, where a thread or a ROS timer integrates the
node-clock time in ``1/physics_rate`` sub-steps; and sim time (``publish_clock: true``), where
the node owns /clock and paces itself to ``real_time_factor``. In sim time, stamps, latencies
and the command timeout are all in sim time, so a faster-than-real-time sim stays consistent.

Modules: :mod:`.parameters` (the parameter table and its checks), :mod:`.time_bases`,
:mod:`.faults` (injected faults), :mod:`.node` (the node, its model, topics and services).

Run it as ``sim_robot --ros-args --params-file config/sim_robot/pendulum.yaml`` or
``python -m rtgym_ros.nodes.sim_robot --ros-args ...``; ``sim_robot --help`` lists the parameters
and starts nothing.
"""

import sys
from typing import List, Optional

from rclpy.executors import SingleThreadedExecutor
from rtgym_ros.nodes.command_line import format_help, wants_help
from rtgym_ros.nodes.run_node import run_until_stopped
from rtgym_ros.nodes.sim_robot.node import NODE_NAME, SimRobot
from rtgym_ros.nodes.sim_robot.parameters import help_rows
from rtgym_ros.ros.runtime import make_io_executor

__all__ = ['help_text', 'main', 'NODE_NAME', 'SimRobot']


def help_text() -> str:
    """Return ``sim_robot --help``: what the node does and its parameter table."""
    return format_help(
        usage=['sim_robot --ros-args [--params-file FILE] [-p NAME:=VALUE ...] [-r __ns:=/NS]',
               'python -m rtgym_ros.nodes.sim_robot --ros-args ...',
               'sim_robot -h | --help'],
        summary='An embedded simulated robot behind ROS 2 topics: sensor_msgs/JointState out, '
                'std_msgs/Float64MultiArray efforts in, std_srvs reset and pause services, '
                'optionally owning /clock (publish_clock). Runs until SIGINT or SIGTERM (exit '
                '0); exit 1: it could not start (the log names the parameter) or a callback '
                'failed; exit 2: an argument outside --ros-args. Doubles also take integers '
                '(-p real_time_factor:=5).',
        parameters=help_rows(),
        epilog='Examples: config/sim_robot/pendulum.yaml and cartpole.yaml (installed under '
               'share/rtgym_ros/config/sim_robot/); docs/nodes/sim_robot.md in the rtgym_ros '
               'sources.')


def main(args: Optional[List[str]] = None) -> int:
    """
    Run the node until SIGINT or SIGTERM, then tear down in order (ignoring more of them).

    :param args: Command line (with ``--ros-args``); ``None`` reads ``sys.argv``.
    :return: 0 on a clean stop or after ``--help``, 1 when the node could not start or a
        callback failed, 2 for an argument outside ``--ros-args``.
    """
    try:
        if wants_help(sys.argv if args is None else args, prog='sim_robot'):
            print(help_text(), end='')
            return 0
    except ValueError as error:
        print(f'sim_robot: {error}', file=sys.stderr)
        return 2
    # ros_timer ticks on rclpy's Python executor; the thread-driven modes need no executor timer.
    return run_until_stopped(
        args, name=NODE_NAME, make_node=lambda context: SimRobot(context=context),
        make_executor=lambda context, node: (
            SingleThreadedExecutor(context=context) if node.uses_ros_timer
            else make_io_executor(context)))
