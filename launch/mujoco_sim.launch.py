"""
A Gymnasium MuJoCo task in mujoco_sim, and the agent running it, in one launch.

    ros2 launch rtgym_ros mujoco_sim.launch.py
    ros2 launch rtgym_ros mujoco_sim.launch.py task:=reacher policy:=random
    ros2 launch rtgym_ros mujoco_sim.launch.py use_sim_time:=true real_time_factor:=2.0
    ros2 launch rtgym_ros mujoco_sim.launch.py agent:=false   # the simulator alone

task picks mujoco_sim's params file (config/mujoco_sim/) and the agent's robot config
(config/robots/mujoco_*.yaml). With use_sim_time:=true mujoco_sim owns /clock at
real_time_factor and the agent follows it. Every argument is checked before a node starts.
The launch ends when the agent has run its episodes (exit 0); it fails (exit 1) and stops the
other node when the agent exits non-zero or mujoco_sim ends first. Stop it with SIGINT
(Ctrl-C, timeout -s INT), not SIGTERM: see docs/launch.md.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from rtgym_ros.nodes.launch_logic import (AGENT, exit_handler, MUJOCO_SIM, mujoco_sim_arguments,
                                          MUJOCO_TASKS)


def _nodes(context: LaunchContext) -> list:
    args = mujoco_sim_arguments(context.launch_configurations)
    sim_file, robot_file = args.config_files(
        os.path.join(get_package_share_directory('rtgym_ros'), 'config'))
    nodes = [Node(package='rtgym_ros', executable='mujoco_sim', output='screen',
                  additional_env={'PYTHONUNBUFFERED': '1'}, namespace=args.namespace,
                  parameters=[sim_file, {'publish_clock': args.use_sim_time,
                                         'real_time_factor': args.real_time_factor}],
                  on_exit=exit_handler(MUJOCO_SIM, ends_launch=not args.agent,
                                       shutdown=Shutdown))]
    if args.agent:
        nodes.append(Node(
            package='rtgym_ros', executable='agent', output='screen',
            additional_env={'PYTHONUNBUFFERED': '1'}, namespace=args.namespace,
            parameters=[robot_file, {'use_sim_time': args.use_sim_time,
                                     'policy': ParameterValue(args.policy, value_type=str),
                                     'episodes': args.episodes}],
            on_exit=exit_handler(AGENT, ends_launch=True, shutdown=Shutdown)))
    return nodes


def generate_launch_description() -> LaunchDescription:
    """Declare the arguments; the nodes are built once they are known and checked."""
    return LaunchDescription([
        DeclareLaunchArgument('task', default_value='inverted_pendulum',
                              description=f"Gymnasium task: {', '.join(MUJOCO_TASKS)}."),
        DeclareLaunchArgument('use_sim_time', default_value='false',
                              description='mujoco_sim publishes /clock and the agent follows '
                                          'it (true), or both run on wall time (false); any '
                                          'case, 1 or 0.'),
        DeclareLaunchArgument('real_time_factor', default_value='1.0',
                              description='With use_sim_time: sim seconds per wall second, '
                                          '> 0; 0 (as fast as possible) with agent:=false '
                                          'only.'),
        DeclareLaunchArgument('policy', default_value='',
                              description='Agent policy (see agent.launch.py); empty: the '
                                          "task's default (inverted_pendulum: an LQR)."),
        DeclareLaunchArgument('episodes', default_value='3',
                              description='Number of episodes to run, an integer >= 1.'),
        DeclareLaunchArgument('agent', default_value='true',
                              description='Start the agent too (false: the simulator alone).'),
        DeclareLaunchArgument('namespace', default_value='',
                              description='Namespace of both nodes (their topics are relative).'),
        OpaqueFunction(function=_nodes),
    ])
