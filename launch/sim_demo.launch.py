"""
The embedded simulated pendulum and the agent swinging it up, in one launch.

    ros2 launch rtgym_ros sim_demo.launch.py
    ros2 launch rtgym_ros sim_demo.launch.py use_sim_time:=true real_time_factor:=2.0

With use_sim_time:=true sim_robot owns /clock (at the clock_rate of config/sim_robot/
pendulum.yaml, as tools/demo --sim-time) and runs real_time_factor times faster than wall time;
the agent follows that clock. Every argument is checked before a node starts. The launch ends
when the agent has run its episodes (exit 0); it fails (exit 1) and stops the other node when
the agent exits non-zero or sim_robot ends first. Stop it with SIGINT (Ctrl-C, timeout -s INT),
not SIGTERM: see docs/launch.md.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from rtgym_ros.nodes.launch_logic import AGENT, exit_handler, sim_demo_arguments, SIM_ROBOT


def _nodes(context: LaunchContext) -> list:
    args = sim_demo_arguments(context.launch_configurations)
    config = os.path.join(get_package_share_directory('rtgym_ros'), 'config')
    sim_robot = Node(
        package='rtgym_ros', executable='sim_robot', output='screen',
        additional_env={'PYTHONUNBUFFERED': '1'}, namespace=args.namespace,
        parameters=[os.path.join(config, 'sim_robot', 'pendulum.yaml'),
                    {'publish_clock': args.use_sim_time,
                     'real_time_factor': args.real_time_factor}],
        on_exit=exit_handler(SIM_ROBOT, ends_launch=False, shutdown=Shutdown))
    agent = Node(
        package='rtgym_ros', executable='agent', output='screen',
        additional_env={'PYTHONUNBUFFERED': '1'}, namespace=args.namespace,
        parameters=[os.path.join(config, 'robots', 'pendulum_sim.yaml'),
                    {'use_sim_time': args.use_sim_time,
                     'policy': ParameterValue(args.policy, value_type=str),
                     'episodes': args.episodes}],
        on_exit=exit_handler(AGENT, ends_launch=True, shutdown=Shutdown))
    return [sim_robot, agent]


def generate_launch_description() -> LaunchDescription:
    """Declare the arguments; sim_robot (pendulum) and the agent start once they are checked."""
    return LaunchDescription([
        DeclareLaunchArgument('use_sim_time', default_value='false',
                              description='true: sim_robot publishes /clock and the agent '
                                          'follows it; false: both run on wall time (any '
                                          'case; 1 or 0).'),
        DeclareLaunchArgument('real_time_factor', default_value='1.0',
                              description='With use_sim_time: sim seconds per wall second, '
                                          '> 0.'),
        DeclareLaunchArgument('policy', default_value='pendulum_swingup',
                              description='Agent policy (see agent.launch.py).'),
        DeclareLaunchArgument('episodes', default_value='3',
                              description='Number of episodes to run, an integer >= 1.'),
        DeclareLaunchArgument('namespace', default_value='',
                              description='Namespace of both nodes (their topics are relative).'),
        OpaqueFunction(function=_nodes),
    ])
