"""
Gymnasium's own checks with their defaults, for both env ids, with a robot running.

``check_env`` makes, resets and closes more envs of the same spec while the checked one lives
(``render_modes``, the close check): their nodes must not share a name, which rcl reports as
``Publisher already registered for node name`` and which silences ``/rosout`` of the env
left behind.
"""

from dummy_interfaces import CountingInterface
from emulated_robots import next_name
import gymnasium as gym
from gymnasium.utils.env_checker import check_env
import numpy as np
import pytest
from rclpy.qos import qos_profile_sensor_data
import rtgym_ros
from rtgym_ros.ros.runtime import RosRuntime
from sensor_msgs.msg import Image

DUPLICATE = 'Publisher already registered for node name'
T = 0.02


def counting_config(**changes) -> dict:
    return dict(rtgym_ros.DEFAULT_CONFIG_DICT, interface=CountingInterface,
                time_step_duration=T, start_obs_capture=T, **changes)


@pytest.mark.parametrize('render_mode', [None, 'human'])
def test_check_env_passes_for_real_time_gym_v1(capfd, render_mode):
    env = gym.make('rtgym_ros/real-time-gym-v1', config=counting_config(),
                   render_mode=render_mode)
    try:
        assert env.unwrapped.render_mode == render_mode
        check_env(env.unwrapped)
    finally:
        env.close()
    output = ''.join(capfd.readouterr())
    assert DUPLICATE not in output
    assert 'is taken by another env of this process: this one is /rtgym_env_2' in output


def test_render_modes_as_gymnasium_declares_them():
    with pytest.raises(ValueError, match=r"render_mode must be None or one of \['human'\]"):
        gym.make('rtgym_ros/real-time-gym-v1', config=counting_config(),
                 render_mode='rgb_array')
    env = gym.make('rtgym_ros/real-time-gym-v1', config=counting_config(), render_mode='human')
    plain = gym.make('rtgym_ros/real-time-gym-v1', config=counting_config())
    try:
        assert env.metadata['render_modes'] == ['human']
        assert env.unwrapped.metadata['render_fps'] == pytest.approx(1 / T)
        env.reset()
        plain.reset()
        assert env.render() is None  # human: the interface draws, nothing is returned
        assert plain.render() == 'rendered'  # as rtgym: what the interface returns
        assert env.unwrapped.interface.calls.count('render') == 1
    finally:
        env.close()
        plain.close()


def test_observations_never_share_the_buffered_actions():
    env = gym.make('rtgym_ros/real-time-gym-v1', config=counting_config(act_buf_len=2))
    try:
        first, _ = env.reset()
        action = np.full(2, 0.5, np.float32)
        second = env.step(action)[0]
        third = env.step(action)[0]
        action[:] = 0.0  # the caller reuses its action array
        assert third[-1].tolist() == [0.5, 0.5] and third[-2].tolist() == [0.5, 0.5]
        assert second[-1] is not third[-2] and first[-1] is not first[-2]
        assert not np.shares_memory(second[-1], third[-2])
    finally:
        env.close()


def test_check_env_passes_for_ros_v1(spawn, make_env, capfd):
    robot = spawn()
    env = make_env(robot)
    check_env(env.unwrapped)
    with pytest.raises(ValueError, match=r"render_mode must be None or one of \['human'\]"):
        env.spec.make(render_mode='rgb_array')
    env.close()
    output = ''.join(capfd.readouterr())
    assert DUPLICATE not in output
    assert f'{robot.ns}/rtgym_env is taken by another env of this process' in output


def test_node_names_are_unique_in_the_process_and_free_again_when_closed(capfd):
    name = f'unique_names_{next_name()}'
    first = RosRuntime(node_name=name)
    second = RosRuntime(node_name=name)
    other_namespace = RosRuntime(node_name=name, namespace='/elsewhere')
    try:
        assert first.node.get_name() == name and first.io_node.get_name() == f'{name}_io'
        assert second.node.get_name() == f'{name}_2'
        assert second.io_node.get_name() == f'{name}_2_io'
        assert other_namespace.node.get_fully_qualified_name() == f'/elsewhere/{name}'
        first.close()
        third = RosRuntime(node_name=name)
        assert third.node.get_name() == name
        third.close()
    finally:
        for runtime in (first, second, other_namespace):
            runtime.close()
    assert DUPLICATE not in ''.join(capfd.readouterr())


def test_a_global_node_remap_does_not_give_both_nodes_one_name(capfd):
    # `agent --ros-args -r __node:=x` must not rename the env's io node to x as well.
    name = f'remapped_{next_name()}'
    runtime = RosRuntime(node_name=name, args=['agent', '--ros-args', '-r', '__node:=other'])
    try:
        assert runtime.node.get_name() == name
        assert runtime.io_node.get_name() == f'{name}_io'
    finally:
        runtime.close()
    assert DUPLICATE not in ''.join(capfd.readouterr())


def test_a_global_node_remap_does_not_rename_the_frames_node(capfd):
    # Image slots are taken on a third node, <name>_frames: `agent --ros-args -r __node:=x`
    # renamed it to x, the env's main node's name, and gave it a /clock subscription under
    # -p use_sim_time:=true though it keeps no clock.
    name = f'remapped_{next_name()}'
    runtime = RosRuntime(node_name=name, args=['agent', '--ros-args', '-r', '__node:=other',
                                               '-p', 'use_sim_time:=true'])
    try:
        receiver = runtime.serialized_receiver()
        receiver.subscribe(Image, 'frames_remap_probe', lambda view: None,
                           qos_profile_sensor_data)
        node = receiver._node
        assert node.get_name() == f'{name}_frames'
        assert node.get_parameter('use_sim_time').value is False
        assert not node.get_subscriptions_info_by_topic('/clock')
    finally:
        runtime.close()
    assert DUPLICATE not in ''.join(capfd.readouterr())
