"""
A Gymnasium MuJoCo task in mujoco_sim, and the agent running it, in one launch.

    ros2 launch rtgym_ros mujoco_sim.launch.py
    ros2 launch rtgym_ros mujoco_sim.launch.py task:=reacher policy:=random
    ros2 launch rtgym_ros mujoco_sim.launch.py use_sim_time:=true real_time_factor:=2.0
    ros2 launch rtgym_ros mujoco_sim.launch.py agent:=false   # the simulator alone

task picks mujoco_sim's params file (config/mujoco_sim/) and the agent's robot config
(config/robots/mujoco_*.yaml). With use_sim_time:=true mujoco_sim owns /clock at
real_time_factor and the agent follows it. The launch ends when the agent has run its episodes.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

# task: (its mujoco_sim params file under config/mujoco_sim, its robot config under robots)
TASKS = {'inverted_pendulum': ('inverted_pendulum.yaml', 'mujoco_inverted_pendulum.yaml'),
         'reacher': ('reacher.yaml', 'mujoco_reacher.yaml')}
# The policy each task runs when none is given.
DEFAULT_POLICIES = {'inverted_pendulum': 'rtgym_ros.sim.controllers:inverted_pendulum_lqr',
                    'reacher': 'zero'}


def config_files(config_dir: str, task: str) -> tuple[str, str]:
    """Return the mujoco_sim params file and the robot config of ``task``."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    sim_file, robot_file = TASKS[task]
    return (os.path.join(config_dir, 'mujoco_sim', sim_file),
            os.path.join(config_dir, 'robots', robot_file))


def parse_bool(name: str, value: str) -> bool:
    """Read a launch argument that must be true or false."""
    if value.lower() not in ('true', 'false'):
        raise ValueError(f"{name} must be 'true' or 'false', got {value!r}")
    return value.lower() == 'true'


def node_parameters(config_dir: str, *, task: str, use_sim_time: str, real_time_factor: str,
                    policy: str, episodes: str) -> tuple[list, list]:
    """Return the parameters of mujoco_sim and of the agent, from the launch arguments."""
    sim_file, robot_file = config_files(config_dir, task)
    sim_time = parse_bool('use_sim_time', use_sim_time)
    sim = [sim_file, {'publish_clock': sim_time, 'real_time_factor': float(real_time_factor)}]
    agent = [robot_file, {'use_sim_time': sim_time,
                          'policy': policy or DEFAULT_POLICIES[task],
                          'episodes': int(episodes)}]
    return sim, agent


def _nodes(context: LaunchContext) -> list:
    def arg(name: str) -> str:
        return LaunchConfiguration(name).perform(context)

    config_dir = os.path.join(get_package_share_directory('rtgym_ros'), 'config')
    sim, agent = node_parameters(
        config_dir, task=arg('task'), use_sim_time=arg('use_sim_time'),
        real_time_factor=arg('real_time_factor'), policy=arg('policy'),
        episodes=arg('episodes'))
    namespace = arg('namespace')
    nodes = [Node(package='rtgym_ros', executable='mujoco_sim', output='screen',
                  namespace=namespace, parameters=sim)]
    if parse_bool('agent', arg('agent')):
        nodes.append(Node(package='rtgym_ros', executable='agent', output='screen',
                          emulate_tty=True, namespace=namespace, on_exit=Shutdown(),
                          parameters=agent))
    return nodes


def generate_launch_description() -> LaunchDescription:
    """Declare the arguments; the nodes are built once they are known."""
    return LaunchDescription([
        DeclareLaunchArgument('task', default_value='inverted_pendulum',
                              description=f"Gymnasium task: {', '.join(TASKS)}."),
        DeclareLaunchArgument('use_sim_time', default_value='false',
                              description='mujoco_sim publishes /clock and the agent follows '
                                          'it (true), or both run on wall time (false).'),
        DeclareLaunchArgument('real_time_factor', default_value='1.0',
                              description='With use_sim_time: sim seconds per wall second; '
                                          '0 runs as fast as possible.'),
        DeclareLaunchArgument('policy', default_value='',
                              description='Agent policy (see agent.launch.py); empty: the '
                                          "task's default (inverted_pendulum: an LQR)."),
        DeclareLaunchArgument('episodes', default_value='3',
                              description='Number of episodes to run.'),
        DeclareLaunchArgument('agent', default_value='true',
                              description='Start the agent too (false: the simulator alone).'),
        DeclareLaunchArgument('namespace', default_value='',
                              description='Namespace of both nodes (their topics are relative).'),
        OpaqueFunction(function=_nodes),
    ])
