"""
The ``check`` tool and the checks that keep a trained model and its config together.

``check`` prints a config's resolved values, spaces and layout without a robot and without
the env's node (an autouse fixture makes ``rclpy.node.Node`` fail); ``obs_prepro_func`` and
``act_prepro_func`` come from a config as ``package.module:function``; the agent refuses a
model whose spaces are not its env's before the robot moves.
"""

import copy
from pathlib import Path
import re
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
import pytest
import rclpy.node
from rtgym_ros.nodes import check
from rtgym_ros.nodes.policies import check_model_spaces, make_policy
from rtgym_ros.robot.env import resolve_robot_config, robot_spaces
from rtgym_ros.robot.loader import load_robot_config
import yaml

REPO = Path(__file__).resolve().parents[2]
TURTLEBOT = str(REPO / 'config' / 'robots' / 'turtlebot3_gazebo.yaml')
PENDULUM = str(REPO / 'config' / 'robots' / 'pendulum_sim.yaml')


@pytest.fixture(autouse=True)
def no_ros_nodes(monkeypatch):
    def refuse(self, *args, **kwargs):
        raise AssertionError('check must not create a ROS node')

    monkeypatch.setattr(rclpy.node.Node, '__init__', refuse)


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = check.main(['check', *args])
    out, err = capsys.readouterr()
    return code, out, err


def rows(out: str, key: str) -> list[list[str]]:
    """Return the layout rows of ``key``, split in columns."""
    return [re.split(r'\s{2,}', line.strip()) for line in out.splitlines()
            if line.startswith(f'  {key} ')]


def write(tmp_path: Path, params: dict, name: str = 'robot.yaml') -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({'/**': {'ros__parameters': params}}))
    return str(path)


def pendulum_params() -> dict:
    from rtgym_ros.robot.params_file import load_params_file
    return load_params_file(PENDULUM, node_name='rtgym_env')


# -- check ------------------------------------------------------------------------------------


def test_check_prints_spaces_and_which_index_is_which_value(capsys):
    code, out, err = run(capsys, TURTLEBOT)
    assert code == 0, err
    assert 'as read for the node /rtgym_env' in out
    assert rows(out, 'scan') == [['scan', '0-35',
                                  'min(ranges[0]..ranges[9]) ... min(ranges[350]..ranges[359])',
                                  '0', '3.5']]
    odom = rows(out, 'odom')
    assert [row[1:3] for row in odom] == [
        ['0', 'pose.pose.position.x'], ['1', 'pose.pose.position.y'],
        ['2', 'yaw(pose.pose.orientation)'], ['3', 'twist.twist.linear.x'],
        ['4', 'twist.twist.angular.z']]
    assert odom[2][3:] == ['-3.14159', '3.14159']
    assert rows(out, 'action_buffer[0]')[1][2] == 'cmd_vel: angular.z (the latest action)'
    assert "'scan': Box(0.0, 3.5, (36,), float32)" in out
    # The action groups: index, field, low, high, default.
    assert re.search(r'^\s+1\s+cmd_vel: angular.z\s+-2.84\s+2.84\s+0$', out, re.MULTILINE)
    assert 'cmd_vel: /cmd_vel (geometry_msgs/msg/Twist), 2 value(s), on_stop default' in out
    # Resolved env keys: those of the file, and the defaults marked.
    assert re.search(r'^\s+time_step_duration\s+0.2$', out, re.MULTILINE)
    assert re.search(r'^\s+benchmark\s+False\s+\(default\)$', out, re.MULTILINE)
    assert re.search(r'^\s+wait_on_done\s+True\s+\(default\)$', out, re.MULTILINE)
    assert re.search(r'^\s+reset_timeout\s+10$', out, re.MULTILINE)
    assert re.search(r'^\s+policy\s+zero\s+\(default\)$', out, re.MULTILINE)


@pytest.mark.parametrize('namespace', ['r1', '/r1'])
def test_check_names_the_node_of_a_relative_namespace_as_rcl_does(capsys, namespace):
    # gym.make(..., namespace='r1') makes the node /r1/rtgym_env; check said r1/rtgym_env.
    code, out, err = run(capsys, PENDULUM, '--namespace', namespace)
    assert code == 0, err
    assert out.splitlines()[0] == f'robot config: {PENDULUM}, as read for the node /r1/rtgym_env'


def test_check_takes_the_agents_arguments(capsys):
    code, out, err = run(capsys, '--ros-args', '--params-file', PENDULUM, '-p',
                         'time_step_duration:=0.04', '-p', 'policy:=random', '-p',
                         'act_buf_len:=3', '-r', '__ns:=/r1')
    assert code == 0, err
    assert 'as read for the node /r1/agent' in out
    assert re.search(r'^\s+time_step_duration\s+0.04$', out, re.MULTILINE)
    assert re.search(r'^\s+namespace\s+/r1$', out, re.MULTILINE)
    assert re.search(r'^\s+policy\s+random$', out, re.MULTILINE)
    for row in range(3):
        assert rows(out, f'action_buffer[{row}]')[0][1:3] == ['0', 'effort: data[0]' + (
            ' (the latest action)' if row == 2 else f' (the action {2 - row} step(s) before '
            'the latest)')]
    assert rows(out, 'joints')[0][1:3] == ['0', 'position[pendulum_joint]']


def test_check_tuple_layout_and_obs_prepro_func(capsys, tmp_path):
    params = pendulum_params()
    params.update(observation_layout='tuple', obs_prepro_func='prepro_functions:with_speed',
                  act_buf_len=2)
    params['observation_layout'] = 'dict'
    code, out, err = run(capsys, write(tmp_path, params))
    assert code == 0, err
    assert 'observation space after obs_prepro_func prepro_functions:with_speed' in out
    assert "'speed': Box(-inf, inf, (1,), float32)" in out
    params['observation_layout'] = 'tuple'
    del params['obs_prepro_func']
    code, out, err = run(capsys, write(tmp_path, params, 'tuple.yaml'))
    assert code == 0, err
    assert rows(out, '[0] joints')[1][2] == 'velocity[pendulum_joint]'
    assert rows(out, '[2] action')[0][2] == 'effort: data[0] (the latest action)'
    assert 'the action 1 step(s) before the latest' in rows(out, '[1] action')[0][2]


def test_check_help_and_usage_errors(capsys):
    with pytest.raises(SystemExit) as exited:
        check.main(['check', '--help'])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert 'usage: check' in out and '--ros-args --params-file FILE' in out
    for args in ([], [TURTLEBOT, '--ros-args', '--params-file', TURTLEBOT]):
        with pytest.raises(SystemExit) as exited:
            check.main(['check', *args])
        assert exited.value.code == 2
        assert 'give a robot config' in capsys.readouterr().err


def test_check_names_the_key_of_a_bad_config(capsys, tmp_path):
    params = pendulum_params()
    params['observations']['joints']['transform'] = {'window_min': 0}
    code, out, err = run(capsys, write(tmp_path, params))
    assert code == 2 and out == ''
    assert err.startswith('check: invalid robot config: '
                          'observations.joints.transform.window_min must be an integer >= 1')
    code, _, err = run(capsys, str(tmp_path / 'missing.yaml'))
    assert code == 2 and 'missing.yaml' in err


# -- obs_prepro_func and act_prepro_func from a config -----------------------------------------


def test_prepro_functions_come_from_the_config_by_name(tmp_path):
    params = pendulum_params()
    params.update(obs_prepro_func='prepro_functions:with_speed',
                  act_prepro_func='prepro_functions:halve')
    env_config, spec = load_robot_config(write(tmp_path, params))
    config = resolve_robot_config(env_config)
    assert config.act_prepro_func(np.array([1.0])).tolist() == [0.5]
    _, layout, space = robot_spaces(config, spec)
    assert set(space.spaces) == {'joints', 'action_buffer', 'speed'}
    assert space['speed'] == spaces.Box(-np.inf, np.inf, (1,), np.float32)
    # From a sample: the shapes and dtypes of what it returns, unbounded.
    assert space['joints'] == spaces.Box(-np.inf, np.inf, (2,), np.float32)
    assert layout.space['joints'].high.tolist() == pytest.approx([3.1416, 30.0])
    assert config.obs_prepro_func(layout.space.sample()) in space


@pytest.mark.parametrize('key, value, message', [
    ('obs_prepro_func', 'prepro_functions.with_speed',
     "obs_prepro_func must be 'package.module:function'"),
    ('act_prepro_func', 'no_such_module:f', 'act_prepro_func: cannot import module'),
    ('obs_prepro_func', 'prepro_functions:nothing', 'obs_prepro_func: module'),
    ('obs_prepro_func', 'prepro_functions:fails',
     'obs_prepro_func failed on a sample observation'),
])
def test_bad_prepro_functions_name_the_key(tmp_path, key, value, message):
    params = dict(pendulum_params(), **{key: value})
    with pytest.raises(ValueError, match=re.escape(message)):
        env_config, spec = load_robot_config(write(tmp_path, params))
        robot_spaces(resolve_robot_config(env_config), spec)


# -- a trained model and the agent's env ------------------------------------------------------


class FakeModel:
    """What the agent reads of a Stable-Baselines3 model: its spaces, and predict."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        self.observation_space = observation_space
        self.action_space = action_space


class FakeEnv:
    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        self.observation_space = observation_space
        self.action_space = action_space


def spaces_of(tmp_path: Path, transform: Any = None, **changes: Any) -> FakeEnv:
    params = copy.deepcopy(load_params_file_of(TURTLEBOT))
    if transform is not None:
        params['observations']['scan']['transform'] = transform
    params.update(changes)
    env_config, spec = load_robot_config(write(tmp_path, params, f'{len(changes)}.yaml'))
    action_space, _, space = robot_spaces(resolve_robot_config(env_config), spec)
    return FakeEnv(space, action_space)


def load_params_file_of(path: str) -> dict:
    from rtgym_ros.robot.params_file import load_params_file
    return load_params_file(path, node_name='rtgym_env')


def test_a_model_of_another_observation_space_is_refused_with_the_difference(tmp_path):
    trained = spaces_of(tmp_path, transform={'window_min': 10})
    model = FakeModel(trained.observation_space, trained.action_space)
    check_model_spaces(model, spaces_of(tmp_path, transform={'window_min': 10}), source='m')
    with pytest.raises(ValueError) as error:  # the agent's env reads one beam
        check_model_spaces(model, spaces_of(tmp_path, transform={'select': [0]}), source='m')
    assert 'observation_space' in str(error.value)
    assert "['scan']: shape (36,) in the model, (1,) in the config" in str(error.value)
    with pytest.raises(ValueError, match=r"\['action_buffer'\]: shape \(1, 2\) in the model, "
                                         r'\(2, 2\) in the config'):
        check_model_spaces(model, spaces_of(tmp_path, transform={'window_min': 10},
                                            act_buf_len=2), source='m')
    with pytest.raises(ValueError, match=r"\['scan'\]: bounds differ"):
        check_model_spaces(model, spaces_of(tmp_path, transform={'window_min': 10,
                                                                 'scale': 2.0}), source='m')


def test_the_sb3_policy_checks_the_spaces_before_the_first_step(tmp_path, monkeypatch):
    import sys
    import types
    trained = spaces_of(tmp_path, transform={'window_min': 10})
    loaded = []

    class Algorithm:
        @staticmethod
        def load(path: str, device: str = 'auto') -> FakeModel:
            loaded.append((path, device))
            return FakeModel(trained.observation_space, trained.action_space)

    monkeypatch.setitem(sys.modules, 'stable_baselines3',
                        types.SimpleNamespace(SAC=Algorithm))
    make_policy('sb3:SAC:model.zip', spaces_of(tmp_path, transform={'window_min': 10}))
    with pytest.raises(ValueError, match=r"\['scan'\]: shape \(36,\) in the model, \(360,\)"):
        make_policy('sb3:SAC:model.zip', spaces_of(tmp_path, transform={'stride': 1}))
    assert loaded == [('model.zip', 'cpu')] * 2
