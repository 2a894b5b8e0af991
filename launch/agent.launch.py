"""
Run the rtgym_ros agent on a robot config.

    ros2 launch rtgym_ros agent.launch.py
    ros2 launch rtgym_ros agent.launch.py robot_config:=/path/to/robot.yaml policy:=random \
        namespace:=r1 use_sim_time:=true episodes:=10

The robot (a simulator, sim_robot or a real driver) is started separately.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue


def _agent(context: LaunchContext) -> list:
    # use_sim_time is passed only when given: an explicit false would otherwise override a
    # robot config that says true (a Gazebo config run with wall-clock timers).
    use_sim_time = LaunchConfiguration('use_sim_time').perform(context).lower()
    if use_sim_time not in ('', 'true', 'false'):
        raise ValueError(f"use_sim_time must be 'true', 'false' or '' (as the robot config "
                         f'says), got {use_sim_time!r}')
    parameters = [LaunchConfiguration('robot_config').perform(context),
                  {'policy': ParameterValue(LaunchConfiguration('policy'), value_type=str)},
                  {'episodes': int(LaunchConfiguration('episodes').perform(context))}]
    if use_sim_time:
        parameters.insert(1, {'use_sim_time': use_sim_time == 'true'})
    return [Node(package='rtgym_ros', executable='agent', output='screen', emulate_tty=True,
                 namespace=LaunchConfiguration('namespace'), parameters=parameters)]


def generate_launch_description() -> LaunchDescription:
    """Declare the arguments; the agent node is built once they are known."""
    default_config = os.path.join(get_package_share_directory('rtgym_ros'), 'config',
                                  'robots', 'pendulum_sim.yaml')
    return LaunchDescription([
        DeclareLaunchArgument(
            'robot_config', default_value=default_config,
            description='Robot config: a ROS 2 params file with the rtgym keys and the robot '
                        'mapping (see the config/ folder of rtgym_ros).'),
        DeclareLaunchArgument(
            'use_sim_time', default_value='',
            description="'true' or 'false' overrides the robot config's use_sim_time; empty "
                        'keeps it.'),
        DeclareLaunchArgument(
            'namespace', default_value='',
            description='Namespace of the agent node; relative topics and services of the '
                        'robot config move under it.'),
        DeclareLaunchArgument(
            'policy', default_value='zero',
            description="zero, random, pendulum_swingup, cartpole_lqr, 'sb3:ALGO:PATH' or "
                        "'package.module:function'."),
        DeclareLaunchArgument('episodes', default_value='3',
                              description='Number of episodes to run.'),
        OpaqueFunction(function=_agent),
    ])
