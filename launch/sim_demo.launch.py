"""
The embedded simulated pendulum and the agent swinging it up, in one launch.

    ros2 launch rtgym_ros sim_demo.launch.py
    ros2 launch rtgym_ros sim_demo.launch.py use_sim_time:=true real_time_factor:=2.0

With use_sim_time:=true sim_robot owns /clock and runs real_time_factor times faster than wall
time (0: as fast as possible), and the agent follows that clock. The launch ends when the agent
has run its episodes.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue


def generate_launch_description() -> LaunchDescription:
    """sim_robot (pendulum) and the agent, on one clock."""
    config = os.path.join(get_package_share_directory('rtgym_ros'), 'config')
    use_sim_time = ParameterValue(LaunchConfiguration('use_sim_time'), value_type=bool)
    namespace = LaunchConfiguration('namespace')
    return LaunchDescription([
        DeclareLaunchArgument('use_sim_time', default_value='false',
                              description='sim_robot publishes /clock and the agent follows '
                                          'it (true), or both run on wall time (false).'),
        DeclareLaunchArgument('real_time_factor', default_value='1.0',
                              description='With use_sim_time: sim seconds per wall second; '
                                          '0 runs as fast as possible.'),
        DeclareLaunchArgument('policy', default_value='pendulum_swingup',
                              description='Agent policy (see agent.launch.py).'),
        DeclareLaunchArgument('episodes', default_value='3',
                              description='Number of episodes to run.'),
        DeclareLaunchArgument('namespace', default_value='',
                              description='Namespace of both nodes (their topics are relative).'),
        Node(package='rtgym_ros', executable='sim_robot', output='screen', namespace=namespace,
             parameters=[os.path.join(config, 'sim_robot', 'pendulum.yaml'),
                         {'publish_clock': use_sim_time,
                          'real_time_factor': ParameterValue(
                              LaunchConfiguration('real_time_factor'), value_type=float)}]),
        Node(package='rtgym_ros', executable='agent', output='screen', emulate_tty=True,
             namespace=namespace, on_exit=Shutdown(),
             parameters=[os.path.join(config, 'robots', 'pendulum_sim.yaml'),
                         {'use_sim_time': use_sim_time,
                          'policy': ParameterValue(LaunchConfiguration('policy'),
                                                   value_type=str),
                          'episodes': ParameterValue(LaunchConfiguration('episodes'),
                                                     value_type=int)}]),
    ])
