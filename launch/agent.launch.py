"""
Run the rtgym_ros agent on a robot config.

    ros2 launch rtgym_ros agent.launch.py
    ros2 launch rtgym_ros agent.launch.py robot_config:=/path/to/robot.yaml policy:=random \
        namespace:=r1 use_sim_time:=true episodes:=10

The robot (a simulator, sim_robot or a real driver) is started separately. Every argument is
checked before the agent starts; the launch exits 1 when an argument is invalid or the agent
exits non-zero. Stop it with SIGINT (Ctrl-C, timeout -s INT), not SIGTERM: see docs/launch.md.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from rtgym_ros.nodes.launch_logic import AGENT, agent_arguments, exit_handler


def _agent(context: LaunchContext) -> list:
    args = agent_arguments(context.launch_configurations)
    parameters = [args.robot_config]
    # use_sim_time is passed only when given: an explicit false would otherwise override a
    # robot config that says true (a Gazebo config run with wall-clock timers).
    if args.use_sim_time is not None:
        parameters.append({'use_sim_time': args.use_sim_time})
    parameters.append({'policy': ParameterValue(args.policy, value_type=str),
                       'episodes': args.episodes})
    return [Node(package='rtgym_ros', executable='agent', output='screen',
                 additional_env={'PYTHONUNBUFFERED': '1'}, namespace=args.namespace,
                 parameters=parameters,
                 on_exit=exit_handler(AGENT, ends_launch=True, shutdown=Shutdown))]


def generate_launch_description() -> LaunchDescription:
    """Declare the arguments; the agent node is built once they are known and checked."""
    default_config = os.path.join(get_package_share_directory('rtgym_ros'), 'config',
                                  'robots', 'pendulum_sim.yaml')
    return LaunchDescription([
        DeclareLaunchArgument(
            'robot_config', default_value=default_config,
            description='Robot config: a ROS 2 params file with the rtgym keys and the robot '
                        'mapping (see the config/ folder of rtgym_ros).'),
        DeclareLaunchArgument(
            'use_sim_time', default_value='',
            description="true or false (any case; 1 or 0) overrides the robot config's "
                        'use_sim_time; empty keeps it.'),
        DeclareLaunchArgument(
            'namespace', default_value='',
            description='Namespace of the agent node; relative topics and services of the '
                        'robot config move under it.'),
        DeclareLaunchArgument(
            'policy', default_value='zero',
            description="zero, random, pendulum_swingup, cartpole_lqr, 'sb3:ALGO:PATH' or "
                        "'package.module:function'."),
        DeclareLaunchArgument('episodes', default_value='3',
                              description='Number of episodes to run, an integer >= 1.'),
        OpaqueFunction(function=_agent),
    ])
