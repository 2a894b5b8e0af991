from glob import glob

from setuptools import find_packages, setup

package_name = 'rtgym_ros'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        ('share/' + package_name + '/launch', glob('launch/*.launch.py')),
        ('share/' + package_name + '/config/robots', glob('config/robots/*.yaml')),
        ('share/' + package_name + '/config/sim_robot', glob('config/sim_robot/*.yaml')),
        ('share/' + package_name + '/config/mujoco_sim', glob('config/mujoco_sim/*.yaml')),
    ],
    # ROS 2 itself (rclpy and the message packages) comes from the ROS install or from the
    # pinned PyPI wheels in requirements/ros-kilted.txt; it is deliberately not listed here so
    # that an apt-installed ROS 2 is never shadowed by a second rclpy.
    install_requires=['setuptools', 'numpy', 'gymnasium>=1.0', 'PyYAML'],
    extras_require={
        'test': ['pytest', 'rtgym==0.16'],
        'bench': ['rtgym==0.16'],
        'plot': ['matplotlib'],
        'mujoco': ['mujoco==4.0.0'],
        # Recorded episodes (record: a rosbag2 in MCAP): rosbags writes the bag directory that
        # ros2 bag and Foxglove open, with the message definitions and type hashes.
        'record': ['rosbags>=0.11,<0.12'],
        # torch 2.13 requires setuptools>=77.0.3 and pip would take the newest (80+), which
        # colcon-core refuses (setuptools<80): keep one that both accept, so that installing
        # the extra does not break the colcon build.
        'train': ['stable-baselines3>=2.3', 'torch==2.13.0', 'tqdm', 'rich', 'setuptools<80',
                  'imageio'],  # imageio: Gymnasium's MuJoCo envs (train_sac_inverted_pendulum)
    },
    zip_safe=True,
    maintainer='rtgym_ros developers',
    maintainer_email='dev@rtgym-ros.invalid',
    description='Real-time Gymnasium envs on ROS 2 (rtgym elastic time-step on ROS timers).',
    license='MIT',
    entry_points={
        'console_scripts': [
            'timing_demo = rtgym_ros.nodes.timing_demo:main',
            'sim_robot = rtgym_ros.nodes.sim_robot:main',
            'mujoco_sim = rtgym_ros.nodes.mujoco_sim:main',
            'agent = rtgym_ros.nodes.agent:main',
            'check = rtgym_ros.nodes.check:main',
        ],
    },
)
