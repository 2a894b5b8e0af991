"""
Robot configs: a params file in, a validated RobotSpec out, every mistake named by its key.

No rclpy node is created to load a config (an autouse fixture makes ``rclpy.node.Node`` fail):
rcl reads the file through a bare rcl node in a private context that is gone when the
parameters are read (test/integration/test_params_rcl.py compares it with a real node).
"""

import copy
from pathlib import Path
from typing import Any, Callable

from config_types import skip_unless_installed
import gymnasium
import numpy as np
import pytest
import rclpy.node
from rclpy.qos import (DurabilityPolicy, qos_profile_sensor_data, qos_profile_system_default,
                       ReliabilityPolicy)
from rtgym_ros.core.config import resolve_config
from rtgym_ros.robot.env import RosEnv
from rtgym_ros.robot.interface import RosInterface
from rtgym_ros.robot.loader import load_robot_config, RobotSpec
from rtgym_ros.robot.qos import PRESETS
from rtgym_ros.robot.spec import physics_steps
import yaml

CONFIG_DIR = Path(__file__).resolve().parents[2] / 'config'

BASE: dict[str, Any] = {
    'time_step_duration': 0.05,
    'actions': {
        'names': ['effort'],
        'effort': {'topic': 'cmd', 'type': 'std_msgs/msg/Float64MultiArray', 'field': 'data',
                   'low': [-1.0], 'high': [1.0], 'default': [0.0]},
    },
    'observations': {
        'names': ['joints'],
        'joints': {'topic': 'joint_states', 'type': 'sensor_msgs/msg/JointState',
                   'joint_names': ['j0'], 'fields': ['position', 'velocity']},
    },
}


@pytest.fixture(autouse=True)
def no_ros_nodes(monkeypatch):
    def refuse(self, *args, **kwargs):
        raise AssertionError('loading a robot config must not create a ROS node')

    monkeypatch.setattr(rclpy.node.Node, '__init__', refuse)


def write(path: Path, document: Any) -> Path:
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    return path


def params_file(params: dict, node: str = '/**') -> dict:
    return {node: {'ros__parameters': params}}


def flatten(params: dict, prefix: str = '') -> dict:
    """Spell ``{'a': {'b': 1}}`` as ``{'a.b': 1}``, the other form rcl accepts."""
    flat = {}
    for key, value in params.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f'{prefix}{key}.'))
        else:
            flat[f'{prefix}{key}'] = value
    return flat


def summary(spec: RobotSpec) -> dict:
    """Return what a spec says, comparable with ==."""
    return {
        'actions': [(g.name, g.topic, g.size, g.low.tolist(), g.high.tolist(),
                     g.default.tolist()) for g in spec.actions],
        'observations': [(s.name, s.topic, s.space.shape, s.on_stale, s.max_age)
                         for s in spec.observations],
        'options': spec.options,
    }


# -- loading ----------------------------------------------------------------------------------


def test_nested_params_file(tmp_path):
    env_config, spec = load_robot_config(write(tmp_path / 'robot.yaml', params_file(BASE)))
    assert env_config['time_step_duration'] == 0.05
    assert env_config['watchdog_timeout'] == 1.0  # robots get a watchdog by default
    assert not {'actions', 'observations'} & set(env_config)
    [effort] = spec.actions
    assert (effort.name, effort.topic, effort.size) == ('effort', 'cmd', 1)
    assert effort.low.tolist() == [-1.0] and effort.high.tolist() == [1.0]
    assert spec.default_action.tolist() == [0.0]
    [joints] = spec.observations
    assert joints.topic == 'joint_states' and joints.space.shape == (2,)
    assert joints.space.dtype == np.float32
    assert joints.on_stale == 'warn' and joints.max_age is None
    assert spec.reward.constant == 0.0 and spec.termination is None and spec.reset is None
    assert spec.options.action_policy == 'clip'
    assert spec.options.observation_layout == 'dict'


def test_dotted_keys_mean_the_same_as_nested_ones(tmp_path):
    _, nested = load_robot_config(write(tmp_path / 'nested.yaml', params_file(BASE)))
    flat = flatten(BASE)
    assert 'actions.effort.topic' in flat
    _, dotted = load_robot_config(write(tmp_path / 'dotted.yaml', params_file(flat)))
    assert summary(dotted) == summary(nested)
    # Both spellings in one block merge.
    mixed = copy.deepcopy(BASE)
    del mixed['actions']['effort']['topic']
    mixed['actions.effort.topic'] = 'other_cmd'
    _, spec = load_robot_config(write(tmp_path / 'mixed.yaml', params_file(mixed)))
    assert spec.actions[0].topic == 'other_cmd' and spec.actions[0].high.tolist() == [1.0]


def test_wildcard_and_node_entries_merge_the_later_wins(tmp_path):
    """The node's section after '/**' wins (rcl merges in file order: '/**' after it would)."""
    document = {
        '/**': {'ros__parameters': BASE},
        'agent': {'ros__parameters': {'time_step_duration': 0.02,
                                      'actions.effort.high': [2.0],
                                      'observations': {'joints': {'max_age': 0.1}}}},
    }
    path = write(tmp_path / 'robot.yaml', document)
    for namespace in ('', '/'):
        env_config, spec = load_robot_config(path, node_name='agent', namespace=namespace)
        assert env_config['time_step_duration'] == 0.02
        effort = spec.actions[0]
        assert effort.high.tolist() == [2.0] and effort.low.tolist() == [-1.0]
        assert effort.topic == 'cmd'  # kept from '/**'
        assert spec.observations[0].max_age == 0.1
        assert spec.observations[0].topic == 'joint_states'
    # 'agent:' is '/agent', the node in the root namespace only (as for rcl).
    for node_name, namespace in (('other', ''), ('agent', 'ns'), ('agent', '/a/b')):
        env_config, spec = load_robot_config(path, node_name=node_name, namespace=namespace)
        assert env_config['time_step_duration'] == 0.05
        assert spec.actions[0].high.tolist() == [1.0] and spec.observations[0].max_age is None


def test_entry_of_the_env_node_applies_without_node_name(tmp_path):
    document = {'/**': {'ros__parameters': BASE},
                'rtgym_env': {'ros__parameters': {'time_step_duration': 0.02}}}
    env_config, _ = load_robot_config(write(tmp_path / 'robot.yaml', document))
    assert env_config['time_step_duration'] == 0.02


@pytest.mark.parametrize('key, value', [('namespace', 'r2'), ('node_name', 'other')])
def test_the_node_is_not_named_by_the_file(tmp_path, key, value):
    """The file's sections were picked for the node's name: the file cannot rename it."""
    path = write(tmp_path / 'robot.yaml', params_file(dict(BASE, **{key: value})))
    with pytest.raises(ValueError, match=f'{key} cannot be a parameter, got {key}='):
        load_robot_config(path)
    load_robot_config(write(tmp_path / 'ok.yaml', params_file(BASE)), **{key: value})


def test_overrides_win_over_the_file(tmp_path):
    path = write(tmp_path / 'robot.yaml', params_file(dict(BASE, action_policy='clip')))
    observations = copy.deepcopy(BASE['observations'])
    observations['joints']['on_stale'] = 'flag'
    env_config, spec = load_robot_config(
        path, time_step_duration=0.1, action_policy='reject', observation_layout='tuple',
        namespace='/r1', watchdog_timeout=0.3, observations=observations)
    assert env_config['time_step_duration'] == 0.1 and env_config['namespace'] == '/r1'
    assert env_config['watchdog_timeout'] == 0.3
    assert spec.options.action_policy == 'reject'
    assert spec.options.observation_layout == 'tuple'
    assert spec.observations[0].on_stale == 'flag'


# -- one test per config error ----------------------------------------------------------------


def action(params: dict) -> dict:
    return params['actions']['effort']


def observation(params: dict) -> dict:
    return params['observations']['joints']


def joint_action(params: dict) -> None:
    """Make the action group's size come from joint_names, not from its bounds."""
    action(params).update(joint_names=['j0'])


ERRORS: dict[str, tuple[Callable[[dict], Any], list[str]]] = {
    # booleans: true or false only ('false' and 1 would act as True)
    'newer_than_action_string': (lambda p: p.update(newer_than_action='false'),
                                 ['newer_than_action', "'false'"]),
    'to_rgb_number': (lambda p: observation(p).update(to_rgb=1),
                      ['observations.joints.to_rgb', '1']),
    'termination_constant_string': (lambda p: p.update(termination={'constant': 'false'}),
                                    ['termination.constant', "'false'"]),
    'reward_constant_string': (lambda p: p.update(reward={'constant': '1e9x'}),
                               ['reward.constant', "'1e9x'"]),
    # message types
    'unknown_package': (lambda p: action(p).update(type='no_such_pkg/msg/Thing'),
                        ['actions.effort.type', 'no_such_pkg', 'std_msgs', 'sensor_msgs']),
    'unknown_type_in_package': (lambda p: action(p).update(type='std_msgs/msg/Nope'),
                                ['actions.effort.type', "'Nope'", 'Float64MultiArray']),
    'service_as_message': (lambda p: action(p).update(type='std_srvs/srv/Trigger'),
                           ['actions.effort.type', 'std_srvs/srv/Trigger']),
    'type_without_msg': (lambda p: action(p).update(type='std_msgs/Float64'),
                         ['actions.effort.type', 'std_msgs/msg/Float64']),
    'observation_type': (lambda p: observation(p).update(type='sensor_msgs/msg/Nope'),
                         ['observations.joints.type', 'JointState']),
    # field paths
    'unknown_action_field': (lambda p: action(p).update(field='dta'),
                             ['actions.effort', "'dta'", 'layout, data']),
    'unknown_observation_field': (
        lambda p: observation(p).update(fields=['position', 'speed']),
        ['observations.joints', "'speed'", 'position, velocity, effort']),
    'field_below_a_number': (lambda p: observation(p).update(fields=['position.x']),
                             ['observations.joints', 'position.x']),
    'non_numeric_field': (lambda p: observation(p).update(fields=['name']),
                          ['observations.joints', "'name'"]),
    'reward_field': (lambda p: p.update(reward={'topic': 'r', 'field': 'value'}),
                     ['reward', "'value'", 'data']),
    # sizes and bounds
    'low_size': (lambda p: (joint_action(p), action(p).update(low=[-1.0, -1.0])),
                 ['actions.effort.low', 'same length', 'got 2 and 1']),
    'high_size': (lambda p: action(p).update(high=[1.0, 2.0]),
                  ['actions.effort.high', 'same length', 'got 1 and 2']),
    'default_size': (lambda p: action(p).update(default=[0.0, 0.0]),
                     ['actions.effort.default', '1 value', 'got 2']),
    'max_delta_size': (lambda p: action(p).update(max_delta=[0.1, 0.1]),
                       ['actions.effort.max_delta', '1 values', 'got 2']),
    'max_delta_zero': (lambda p: action(p).update(max_delta=[0.0]),
                       ['actions.effort.max_delta', '> 0', '[0.0]']),
    'max_delta_infinite': (lambda p: action(p).update(max_delta=[float('inf')]),
                           ['actions.effort.max_delta', 'finite']),
    'max_delta_text': (lambda p: action(p).update(max_delta='fast'),
                       ['actions.effort.max_delta', 'list of numbers', "'fast'"]),
    'trajectory_point_due_at_its_stamp': (
        lambda p: action(p).update(type='trajectory_msgs/msg/JointTrajectory', field='positions',
                                   joint_names=['j0']),
        ['actions.effort', 'time_from_start 0', 'stamp: now', 'ends in the past',
         'stamp: zero']),
    'stamp_without_header': (lambda p: action(p).update(stamp='zero'),
                             ['actions.effort.stamp', 'std_msgs/msg/Float64MultiArray',
                              'has none']),
    'on_stop': (lambda p: action(p).update(on_stop='brake'),
                ['actions.effort.on_stop', 'default, hold', "'brake'"]),
    'observation_bound_size': (lambda p: observation(p).update(low=[0.0, 0.0, 0.0]),
                               ['observations.joints.low', 'got 3']),
    'low_above_high': (lambda p: action(p).update(low=[2.0], high=[1.0], default=[1.0]),
                       ['actions.effort.low', 'actions.effort.high']),
    'observation_low_above_high': (
        lambda p: observation(p).update(low=[1.0, 1.0], high=[0.0, 0.0]),
        ['observations.joints.low', 'observations.joints.high']),
    'observation_nan_bound': (lambda p: observation(p).update(low=[float('nan'), 0.0]),
                              ['observations.joints.low', 'must be a number', 'index [0]']),
    'observation_bound_of_nothing': (
        lambda p: observation(p).update(low=[0.0, float('inf')]),
        ['observations.joints.low', 'not +inf', 'index [1]']),
    'default_outside_bounds': (lambda p: action(p).update(default=[3.0]),
                               ['actions.effort.default', '[3.0]']),
    'infinite_bound': (lambda p: action(p).update(high=[float('inf')]),
                       ['actions.effort.high', 'finite']),
    'bound_not_numbers': (lambda p: action(p).update(low='minus one'),
                          ['actions.effort.low', 'minus one']),
    'bound_of_booleans': (lambda p: action(p).update(low=[True]),
                          ['actions.effort.low']),
    # missing keys
    'missing_action_topic': (lambda p: action(p).pop('topic'), ['actions.effort.topic']),
    'missing_action_type': (lambda p: action(p).pop('type'), ['actions.effort.type']),
    'missing_action_low': (lambda p: action(p).pop('low'), ['actions.effort.low']),
    'missing_action_high': (lambda p: action(p).pop('high'), ['actions.effort.high']),
    'missing_action_fields': (lambda p: action(p).pop('field'), ['actions.effort.fields']),
    'missing_observation_topic': (lambda p: observation(p).pop('topic'),
                                  ['observations.joints.topic']),
    'missing_observation_type': (lambda p: observation(p).pop('type'),
                                 ['observations.joints.type']),
    'missing_actions': (lambda p: p.pop('actions'), ['actions']),
    'missing_observations': (lambda p: p.pop('observations'), ['observations']),
    # names lists
    'name_without_entry': (lambda p: p['actions'].update(names=['effort', 'other']),
                           ['actions.other', 'actions.names']),
    'entry_without_name': (lambda p: p['observations'].update(other={'topic': 'x'}),
                           ['observations', "['other']", 'observations.names']),
    'empty_names': (lambda p: p['actions'].update(names=[]), ['actions.names']),
    'duplicate_names': (lambda p: p['actions'].update(names=['effort', 'effort']),
                        ['actions.names', 'duplicates']),
    # unknown keys
    'unknown_top_level_key': (lambda p: p.update(time_step=0.1),
                              ["['time_step']", 'time_step_duration']),
    'unknown_action_key': (lambda p: action(p).update(topc='x'),
                           ['actions.effort', "['topc']", 'topic']),
    'unknown_observation_key': (lambda p: observation(p).update(maxage=0.1),
                                ['observations.joints', "['maxage']", 'max_age']),
    'unknown_reward_key': (lambda p: p.update(reward={'topic': 'r', 'kind': 'x'}),
                           ['reward', "['kind']"]),
    'unknown_reset_key': (lambda p: p.update(reset={'service': 'r', 'retries': 3}),
                          ['reset', "['retries']"]),
    # QoS
    'qos_preset': (lambda p: action(p).update(qos='fast'),
                   ['actions.effort.qos.preset', "'fast'", 'sensor_data']),
    'qos_depth_zero': (lambda p: action(p).update(qos={'depth': 0}),
                       ['actions.effort.qos.depth', 'got 0']),
    'qos_depth_too_large': (lambda p: observation(p).update(qos={'depth': 4294967297}),
                            ['observations.joints.qos.depth', 'from 1 to 2147483647',
                             'got 4294967297']),
    'qos_depth_over_int32': (lambda p: action(p).update(qos={'depth': 2 ** 31}),
                             ['actions.effort.qos.depth', 'got 2147483648']),
    'qos_depth_text': (lambda p: observation(p).update(qos={'depth': 'ten'}),
                       ['observations.joints.qos.depth', "'ten'"]),
    'qos_durability': (lambda p: observation(p).update(qos={'durability': 'forever'}),
                       ['observations.joints.qos.durability', 'transient_local']),
    'qos_unknown_key': (lambda p: observation(p).update(qos={'history': 'all'}),
                        ['observations.joints.qos', "['history']"]),
    'qos_latched_sensor_data': (
        lambda p: observation(p).update(qos={'preset': 'sensor_data',
                                             'durability': 'transient_local'}),
        ['observations.joints.qos', 'preset sensor_data', 'best effort', 'transient_local',
         'write {preset: reliable, durability: transient_local}']),
    'qos_latched_default_preset': (
        lambda p: observation(p).update(qos={'durability': 'transient_local'}),
        ['observations.joints.qos', 'preset sensor_data (the default here)', 'best effort',
         '{preset: reliable, durability: transient_local}']),
    'qos_latched_best_effort': (
        lambda p: action(p).update(qos={'preset': 'best_effort', 'depth': 1,
                                        'durability': 'transient_local'}),
        ['actions.effort.qos', 'preset best_effort', 'best effort',
         '{preset: reliable, durability: transient_local}']),
    'qos_latched_reward': (
        lambda p: p.update(reward={'topic': 'r', 'qos': {'preset': 'sensor_data',
                                                         'durability': 'transient_local'}}),
        ['reward.qos', 'preset sensor_data', '{preset: reliable, durability: transient_local}']),
    # policies and options
    'on_stale': (lambda p: observation(p).update(on_stale='panic'),
                 ['observations.joints.on_stale', "'panic'", 'flag']),
    'stamp': (lambda p: observation(p).update(stamp='now'),
              ['observations.joints.stamp', "'now'"]),
    'negative_max_age': (lambda p: observation(p).update(max_age=-1.0),
                         ['observations.joints.max_age']),
    'wait_timeout_text': (lambda p: observation(p).update(wait_timeout='long'),
                          ['observations.joints.wait_timeout']),
    'action_policy': (lambda p: p.update(action_policy='wrap'),
                      ['action_policy', "'wrap'", 'reject']),
    'observation_layout': (lambda p: p.update(observation_layout='list'),
                           ['observation_layout', "'list'", 'tuple']),
    'reset_timeout': (lambda p: p.update(reset_timeout=-1), ['reset_timeout']),
    # reward, termination
    'reward_two_sources': (lambda p: p.update(reward={'topic': 'r', 'constant': 1.0}),
                           ['reward', "['topic', 'constant']"]),
    'termination_two_sources': (
        lambda p: p.update(termination={'topic': 't',
                                        'function': 'rtgym_ros.sim.tasks:cartpole_terminated'}),
        ['termination', "['topic', 'function']"]),
    'reward_not_a_mapping': (lambda p: p.update(reward=1.0), ['reward']),
    # callables
    'callable_with_dot': (
        lambda p: p.update(reward={'function': 'rtgym_ros.sim.tasks.pendulum_reward'}),
        ['reward.function', 'package.module:function']),
    'callable_with_call': (
        lambda p: p.update(reward={'function': 'rtgym_ros.sim.tasks:pendulum_reward()'}),
        ['reward.function', 'package.module:function']),
    'callable_two_colons': (lambda p: p.update(reward={'function': 'a:b:c'}),
                            ['reward.function']),
    'callable_without_module': (lambda p: p.update(reward={'function': ':f'}),
                                ['reward.function']),
    'callable_module_missing': (
        lambda p: p.update(reward={'function': 'rtgym_ros.no_such_module:f'}),
        ['reward.function', 'rtgym_ros.no_such_module']),
    'callable_attribute_missing': (
        lambda p: p.update(termination={'function': 'rtgym_ros.sim.tasks:nope'}),
        ['termination.function', "'nope'"]),
    'callable_not_callable': (
        lambda p: p.update(reward={'function': 'rtgym_ros.robot.loader:STALE_POLICIES'}),
        ['reward.function', "'STALE_POLICIES'"]),
    'reset_callable_missing': (
        lambda p: p.update(reset={'function': 'rtgym_ros.sim.tasks:no_reset'}),
        ['reset.function', "'no_reset'"]),
    # services
    'service_type_not_installed': (
        lambda p: p.update(reset={'service': 'reset',
                                  'type': 'example_interfaces/srv/AddTwoInts'}),
        ['reset.type', "'example_interfaces'"]),
    'service_type_unknown': (
        lambda p: p.update(pause={'service': 'p', 'type': 'std_srvs/srv/Foo'}),
        ['pause.type', 'std_srvs/srv', "'Foo'"]),
    'service_request_field_unknown': (
        lambda p: p.update(reset={'service': 'r', 'type': 'std_srvs/srv/SetBool',
                                  'request': {'dta': True}}),
        ['reset.request.dta', "no field 'dta'"]),
    'service_request_field_type': (
        lambda p: p.update(reset={'service': 'r', 'type': 'std_srvs/srv/SetBool',
                                  'request': {'data': 'yes'}}),
        ['reset.request.data', 'true or false']),
    'service_success_not_a_field': (
        lambda p: p.update(reset={'service': 'r', 'type': 'std_srvs/srv/Trigger',
                                  'success': 'ok'}),
        ['reset.success', "no field 'ok'"]),
    'step_without_lockstep': (
        lambda p: p.update(step={'topic': 'step_until'}),
        ['step applies to stepping: lockstep']),
    'lockstep_without_sim_time': (
        lambda p: p.update(stepping='lockstep', step={'topic': 'step_until'}),
        ['stepping: lockstep needs use_sim_time']),
    'service_and_function': (
        lambda p: p.update(reset={'service': 'r',
                                  'function': 'rtgym_ros.sim.tasks:pendulum_reward'}),
        ['reset', 'service', 'function']),
    'service_neither': (lambda p: p.update(reset={'timeout': 1.0}), ['reset']),
    'set_bool_data': (lambda p: p.update(pause={'service': 'p', 'type': 'std_srvs/srv/SetBool',
                                                'data': 'yes'}),
                      ['pause.data', "'yes'"]),
    'service_timeout': (lambda p: p.update(reset={'service': 'r', 'timeout': -1.0}),
                        ['reset.timeout']),
    # float32 actions: 1e39 would be sent as inf (the default, the bounds of the space)
    'default_beyond_float32': (
        lambda p: action(p).update(low=[-1.0e40], high=[1.0e40], default=[1.0e39]),
        ['actions.effort.low', 'float32', '1e+40']),
    'high_beyond_float32': (lambda p: action(p).update(high=[1.0e39]),
                            ['actions.effort.high', 'float32', '1e+39']),
    # hostile strings
    'type_with_dot_dot': (lambda p: action(p).update(type='../../etc/msg/passwd'),
                          ['actions.effort.type', '../../etc/msg/passwd']),
    'type_with_shell': (lambda p: action(p).update(type='std_msgs/msg/Float64; rm -rf ~'),
                        ['actions.effort.type']),
    'type_of_a_python_module': (lambda p: action(p).update(type='os/msg/system'),
                                ['actions.effort.type', "'os'"]),
    'service_type_of_a_python_module': (
        lambda p: p.update(reset={'service': 'r', 'type': 'os/srv/system'}),
        ['reset.type', 'expected a ROS interface package', "'os'", 'not imported']),
    'topic_with_space': (lambda p: action(p).update(topic='cmd vel'),
                         ['actions.effort.topic', "'cmd vel'"]),
    'topic_with_newline': (lambda p: observation(p).update(topic='joint\nstates'),
                           ['observations.joints.topic']),
    'topic_not_a_string': (lambda p: action(p).update(topic=['cmd']),
                           ['actions.effort.topic']),
    'empty_topic': (lambda p: action(p).update(topic=''), ['actions.effort.topic']),
    'topic_with_an_unknown_substitution': (
        lambda p: action(p).update(topic='{robot}/cmd'),
        ['actions.effort.topic', "'{robot}/cmd'", 'unknown substitution: {robot}']),
    'service_with_space': (lambda p: p.update(reset={'service': 're set'}),
                           ['reset.service', "'re set'"]),
    # a scalar or a mapping where a list goes
    'joint_names_a_number': (lambda p: observation(p).update(joint_names=5),
                             ['observations.joints', 'joint_names as a list', '5']),
    'joint_names_a_mapping': (lambda p: observation(p).update(joint_names={'j0': 1.0}),
                              ['observations.joints', 'joint_names as a list', "{'j0': 1.0}"]),
    'shape_a_number': (lambda p: observation(p).update(shape=2),
                       ['observations.joints', 'shape as a list', '2']),
    'durability_a_list': (
        lambda p: observation(p).update(qos={'preset': 'reliable',
                                             'durability': ['transient_local']}),
        ['observations.joints.qos.durability', "['transient_local']"]),
    # options that would be ignored, or wrap around
    'joint_names_without_a_sequence': (
        lambda p: action(p).update(type='geometry_msgs/msg/Twist', field='linear.x',
                                   joint_names=['a', 'b', 'c']),
        ['actions.effort', 'joint_names given, but no field is a sequence']),
    'time_from_start_past_int32': (
        lambda p: action(p).update(type='trajectory_msgs/msg/JointTrajectory',
                                   joint_names=['j0'], field='positions',
                                   time_from_start=3.0e9),
        ['actions.effort.time_from_start', '<= 2.14748e+09', '3000000000.0']),
    'diagnostics_period_past_a_timer': (lambda p: p.update(diagnostics_period=1.0e12),
                                        ['diagnostics_period', '<= 9.22337e+09']),
    'diagnostics_period_of_nanoseconds': (lambda p: p.update(diagnostics_period=1.0e-9),
                                          ['diagnostics_period', 'at least 0.01 s', '1e-09']),
    'step_size_without_steps_field': (
        lambda p: p.update(use_sim_time=True, stepping='lockstep',
                           step={'service': 's', 'type': 'std_srvs/srv/Trigger',
                                 'step_size': -5.0}),
        ['step.step_size applies with step.steps_field']),
    'steps_field_too_small_for_a_time_step': (
        lambda p: p.update(use_sim_time=True, stepping='lockstep',
                           step={'service': 's', 'type': 'lifecycle_msgs/srv/ChangeState',
                                 'steps_field': 'transition.id', 'step_size': 0.0001}),
        ["step.steps_field 'transition.id'", '500 steps of step_size 0.0001 s',
         'must be an integer <= 255, got 500']),
    # request arrays: rosidl's setters check nothing here (ROS_PYTHON_CHECK_FIELDS unset), and
    # a fixed-size array given fewer values is serialized with whatever memory follows them
    'request_array_short': (
        lambda p: p.update(reset={'service': 'r', 'type': 'sensor_msgs/srv/SetCameraInfo',
                                  'request': {'camera_info': {'k': [1.0]}}}),
        ['reset.request.camera_info.k must have 9 values', 'double[9]', 'got 1']),
    'request_sequence_of_numbers_for_strings': (
        lambda p: p.update(reset={'service': 'r', 'type': 'rcl_interfaces/srv/GetParameters',
                                  'request': {'names': [1.0, 2.0]}}),
        ['reset.request.names[0] must be a string']),
    # sizes past memory: a MemoryError without the key, or the OOM killer, at load
    'length_past_memory': (
        lambda p: p.update(observations={'names': ['ranges'], 'ranges': {
            'topic': 'a', 'type': 'std_msgs/msg/Float32MultiArray', 'field': 'data',
            'length': 2**62}}),
        ['observations.ranges', '4611686018427387904 values of float32', 'of memory']),
    'shape_past_memory': (
        lambda p: p.update(observations={'names': ['ranges'], 'ranges': {
            'topic': 'a', 'type': 'std_msgs/msg/Float32MultiArray', 'field': 'data',
            'shape': [100000, 100000]}}),
        ['observations.ranges', '10000000000 values of float32', 'of memory']),
    'image_past_memory': (
        lambda p: p.update(observations={'names': ['camera'], 'camera': {
            'topic': 'a', 'type': 'sensor_msgs/msg/Image', 'encoding': 'rgb8',
            'shape': [1000000, 1000000, 3]}}),
        ['observations.camera', '3000000000000 values of uint8', 'of memory']),
    'reward_field_a_number': (
        lambda p: p.update(reward={'topic': 'r', 'type': 'std_msgs/msg/Float64', 'field': 1.5}),
        ['reward.field must be a string', '1.5']),
    'two_groups_on_one_topic': (
        lambda p: p.update(actions={
            'names': ['linear', 'angular'],
            'linear': {'topic': 'cmd_vel', 'type': 'geometry_msgs/msg/Twist',
                       'field': 'linear.x', 'low': [-1.0], 'high': [1.0]},
            'angular': {'topic': 'cmd_vel', 'type': 'geometry_msgs/msg/Twist',
                        'field': 'angular.z', 'low': [-1.0], 'high': [1.0]}}),
        ['actions.linear and actions.angular publish on the same topic cmd_vel']),
    'transform_past_float32': (
        lambda p: observation(p).update(low=[0.0, 0.0], high=[1.0, 1.0],
                                        transform={'offset': 1.0e39}),
        ['observations.joints.transform', 'leave float32']),
}


@pytest.mark.parametrize('case', sorted(ERRORS))
def test_config_error_names_the_key(tmp_path, case):
    mutate, expected = ERRORS[case]
    params = copy.deepcopy(BASE)
    mutate(params)
    path = write(tmp_path / 'robot.yaml', params_file(params))
    with pytest.raises(ValueError) as error:
        load_robot_config(path)
    message = str(error.value)
    missing = [text for text in expected if text not in message]
    assert not missing, f'{missing} not in the message: {message}'


@pytest.mark.parametrize('period', [0, 0.0, 0.01, 2.5])
def test_diagnostics_period_is_none_or_a_hundredth_of_a_second_or_more(tmp_path, period):
    path = write(tmp_path / 'robot.yaml', params_file(dict(BASE, diagnostics_period=period)))
    _, spec = load_robot_config(path)
    assert spec.options.diagnostics_period == period


@pytest.mark.parametrize('where, name', [
    ('actions.effort.topic', 'cmd$vel'),
    ('observations.joints.topic', '../joint_states'),
    ('reset.service', 're$et'),
])
def test_invalid_ros_names_are_refused_at_load(tmp_path, where, name):
    params = copy.deepcopy(BASE)
    if where.startswith('actions'):
        action(params)['topic'] = name
    elif where.startswith('observations'):
        observation(params)['topic'] = name
    else:
        params['reset'] = {'service': name}
    with pytest.raises(ValueError, match=where.replace('.', r'\.')):
        load_robot_config(write(tmp_path / 'robot.yaml', params_file(params)))


@pytest.mark.parametrize('key, value, error', [
    ('time_step_duration', 'fast', TypeError),
    ('act_buf_len', 0, ValueError),
    ('watchdog_timeout', -1.0, ValueError),
])
def test_env_keys_are_checked_before_any_node_exists(tmp_path, key, value, error):
    path = write(tmp_path / 'robot.yaml', params_file(dict(BASE, **{key: value})))
    with pytest.raises(error, match=key):
        RosEnv(path)


@pytest.mark.parametrize('key', ['act_in_obs', 'reset_act_buf', 'benchmark', 'wait_on_done',
                                 'last_act_on_reset', 'use_sim_time', 'newer_than_action'])
@pytest.mark.parametrize('value', ['false', '0', 'n', 1, 0, None], ids=repr)
def test_boolean_keywords_of_gym_make_must_be_bools(tmp_path, key, value):
    path = write(tmp_path / 'robot.yaml', params_file(BASE))
    with pytest.raises(ValueError) as error:
        gymnasium.make('rtgym_ros/ros-v1', robot_config=path, **{key: value})
    assert key in str(error.value) and repr(value) in str(error.value)


def test_boolean_from_the_file_is_a_bool_as_rcl_reads_it(tmp_path):
    text = yaml.safe_dump(params_file(BASE)) + '    newer_than_action: y\n    wait_on_done: n\n'
    env_config, spec = load_robot_config(write(tmp_path / 'robot.yaml', text))
    assert spec.options.newer_than_action is True and env_config['wait_on_done'] is False
    quoted = yaml.safe_dump(params_file(BASE)) + "    wait_on_done: 'false'\n"
    env_config, _ = load_robot_config(write(tmp_path / 'quoted.yaml', quoted))
    assert env_config['wait_on_done'] == 'false'  # a string for rcl too: refused by the env
    with pytest.raises(ValueError, match="config\\['wait_on_done'\\] must be true or false"):
        resolve_config(dict(env_config, interface=RosInterface))


# -- the file itself --------------------------------------------------------------------------


def test_invalid_yaml(tmp_path):
    path = write(tmp_path / 'robot.yaml', '/**:\n  ros__parameters:\n    actions: [unclosed\n')
    with pytest.raises(ValueError, match='rcl refuses it: Error parsing') as error:
        load_robot_config(path)
    assert str(path) in str(error.value)


def test_missing_file(tmp_path):
    path = tmp_path / 'no_such_robot.yaml'
    with pytest.raises(FileNotFoundError, match='no_such_robot.yaml'):
        load_robot_config(path)


def test_a_directory_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=f'cannot read {tmp_path}: Is a directory'):
        load_robot_config(tmp_path)


@pytest.mark.parametrize('data, reason', [
    (bytes(range(256)) * 4, 'not UTF-8 text'),  # no bare UnicodeDecodeError
    ('/**:\n  ros__parameters:\n    a: 1\n'.encode() + b'\0\1\2', 'binary data'),
    ('/**:\n  ros__parameters:\n    a: 1\n'.encode('utf-16') + b'\n', 'not UTF-16 text'),
], ids=['bytes', 'nul', 'utf-16 cut in a character'])
def test_a_binary_file_is_named(tmp_path, data, reason):
    path = tmp_path / 'robot.yaml'
    path.write_bytes(data)
    with pytest.raises(ValueError, match=reason) as error:
        load_robot_config(path)
    assert str(path) in str(error.value) and len(str(error.value)) < len(str(path)) + 100


@pytest.mark.parametrize('document, expected', [
    ({'agent': dict(BASE)}, 'rcl refuses it: Sequences can only be values'),
    ({'agent': {'ros__parameters': ['a', 'b']}},
     'rcl refuses it: Cannot have a value before ros__parameters'),
    ({'/**': 'ros__parameters'}, 'rcl refuses it: Cannot have a value before ros__parameters'),
    (['ros__parameters'], 'rcl refuses it: Sequences cannot be key'),
    ('', "no parameters for node '/rtgym_env'"),
    ({'/**': {'ros__parameters': {'start_type_description_service': True}}},
     "the file has sections ['/**'] (a section applies to the node's full name, /* stands for "
     "one namespace level, /** for any; rclpy's own start_type_description_service is not "
     'counted)'),
    ({'/other': {'ros__parameters_x': {'a': 1}}}, "the file has sections ['/other']"),
    ({'/**': {'ros__parameters': {'actions': 5, 'actions.names': ['effort']}}},
     "'actions.names'"),
])
def test_params_file_structure_errors(tmp_path, document, expected):
    path = write(tmp_path / 'robot.yaml', document if document != '' else '# nothing\n')
    with pytest.raises(ValueError) as error:
        load_robot_config(path)
    assert expected in str(error.value)


def test_no_entry_for_the_node(tmp_path):
    document = {'left': {'ros__parameters': BASE},
                'right': {'ros__parameters': copy.deepcopy(BASE)}}  # no YAML alias
    with pytest.raises(ValueError) as error:
        load_robot_config(write(tmp_path / 'robot.yaml', document), node_name='middle')
    assert "'/middle'" in str(error.value) and "['left', 'right']" in str(error.value)


@pytest.mark.parametrize('tag', [
    '!!python/object/apply:os.system ["touch {marker}"]',
    '!!python/object/apply:subprocess.check_call [["touch", "{marker}"]]',
    '!!python/name:os.system',
    '!!python/object/new:type ["X", [], {{}}]',
])
def test_python_tags_are_refused_not_executed(tmp_path, tag):
    """Tags are ignored by rcl: a tagged value is plain data (strings), refused as a reward."""
    marker = tmp_path / 'executed'
    text = (yaml.safe_dump(params_file(BASE)) + '    reward:\n      constant: '
            + tag.format(marker=marker) + '\n')
    path = write(tmp_path / 'robot.yaml', text)
    with pytest.raises(ValueError, match='reward.constant must be a number|rcl refuses it'):
        load_robot_config(path)
    assert not marker.exists(), 'the YAML ran code'


# -- the shipped configs ----------------------------------------------------------------------


def robot_entries() -> list:
    """(file, entry) for every params-file entry in config/ that describes a robot."""
    found = []
    for path in sorted((CONFIG_DIR / 'robots').glob('*.yaml')):
        document = yaml.safe_load(path.read_text())
        for entry, block in (document or {}).items():
            params = block.get('ros__parameters', {}) if isinstance(block, dict) else {}
            if 'actions' in params or any(str(k).startswith('actions.') for k in params):
                found.append(pytest.param(path, entry, id=f'{path.name}:{entry}'))
    return found


def test_shipped_robot_configs_are_found():
    names = {param.values[0].name for param in robot_entries()}
    assert 'pendulum_sim.yaml' in names


@pytest.mark.parametrize('path, entry', robot_entries())
def test_shipped_robot_config_validates(path, entry):
    skip_unless_installed(path)
    env_config, spec = load_robot_config(path, node_name=None if entry == '/**' else entry)
    assert spec.actions and spec.observations
    assert np.all(spec.action_low <= spec.default_action)
    assert np.all(spec.default_action <= spec.action_high)
    resolve_config(dict(env_config, interface=RosInterface, interface_kwargs={'spec': spec}))


# What each preset's reliability is, from rclpy's own profiles: the presets whose reliability is
# best effort are those that cannot carry transient_local. system_default is the RMW's choice
# (docs/configuration.md says what Fast DDS makes of it) and is not refused.
PRESET_RELIABILITY = {
    'sensor_data': qos_profile_sensor_data.reliability,
    'best_effort': ReliabilityPolicy.BEST_EFFORT,
    'reliable': ReliabilityPolicy.RELIABLE,
    'system_default': qos_profile_system_default.reliability,
}


def test_every_preset_has_a_known_reliability():
    assert set(PRESET_RELIABILITY) == set(PRESETS)
    assert qos_profile_sensor_data.reliability == ReliabilityPolicy.BEST_EFFORT
    assert qos_profile_system_default.reliability == ReliabilityPolicy.SYSTEM_DEFAULT


@pytest.mark.parametrize('preset', PRESETS)
def test_transient_local_is_refused_exactly_for_best_effort_presets(tmp_path, preset):
    qos = {'preset': preset, 'durability': 'transient_local'}
    params = copy.deepcopy(BASE)
    observation(params).update(qos=qos)
    path = write(tmp_path / 'robot.yaml', params_file(params))
    if PRESET_RELIABILITY[preset] == ReliabilityPolicy.BEST_EFFORT:
        with pytest.raises(ValueError, match=f'observations.joints.qos: .*got preset {preset}'):
            load_robot_config(path)
    else:
        _, spec = load_robot_config(path)
        profile = spec.observations[0].qos
        assert profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
        assert profile.reliability == PRESET_RELIABILITY[preset]


def test_a_default_applies_to_a_reward_topic_only(tmp_path):
    base = dict(BASE)
    path = write(tmp_path / 'robot.yaml', params_file(dict(
        base, termination={'topic': 'done', 'default': True})))
    with pytest.raises(ValueError, match='termination.default applies to a reward topic only'):
        load_robot_config(path)
    path = write(tmp_path / 'robot2.yaml', params_file(dict(
        base, reward={'topic': 'reward', 'default': -1.0})))
    _, spec = load_robot_config(path)
    assert spec.reward.constant == -1.0


# -- observation bounds -----------------------------------------------------------------------


def observation_slot(tmp_path: Path, slot: dict):
    path = write(tmp_path / 'robot.yaml', params_file(dict(
        BASE, observations={'names': ['x'], 'x': slot})))
    _, spec = load_robot_config(path)
    return spec.observations[0]


def test_one_low_and_high_value_apply_to_every_value_of_the_slot(tmp_path):
    odom = observation_slot(tmp_path, {
        'topic': 'odom', 'type': 'nav_msgs/msg/Odometry', 'low': [-10.0], 'high': [10.0],
        'fields': ['pose.pose.position.x', 'pose.pose.position.y']})
    assert odom.space == gymnasium.spaces.Box(-10.0, 10.0, (2,), np.float32)


def test_one_low_value_does_not_make_a_scan_one_beam_long(tmp_path):
    with pytest.raises(ValueError, match='ranges has a length known only at run time'):
        observation_slot(tmp_path, {'topic': 'scan', 'type': 'sensor_msgs/msg/LaserScan',
                                    'field': 'ranges', 'low': [0.0], 'high': [3.5]})


@pytest.mark.parametrize('encoding, bound, value', [
    ('mono8', 'high', 300.0),
    ('mono8', 'low', -1.0),
    ('mono16', 'low', -1.0),
    ('mono16', 'high', 70000.0),
    ('mono8', 'high', 254.5),
])
def test_image_bounds_must_be_values_of_its_dtype(tmp_path, encoding, bound, value):
    slot = {'topic': 'camera', 'type': 'sensor_msgs/msg/Image', 'shape': [2, 2],
            'encoding': encoding, bound: [value]}
    with pytest.raises(ValueError, match=rf'observations.x.{bound} must be integers of'):
        observation_slot(tmp_path, slot)


def test_one_bound_per_element_of_a_shaped_slot_in_row_major_order(tmp_path):
    grid = observation_slot(tmp_path, {
        'topic': 'grid', 'type': 'std_msgs/msg/Float32MultiArray', 'field': 'data',
        'shape': [2, 3], 'low': [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], 'high': [9.0]})
    assert grid.space.shape == (2, 3)
    assert grid.space.low.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


@pytest.mark.parametrize('duration, step_size, steps', [
    (0.07, 0.01, 7),      # 7.000000000000001 in floats: not 8
    (0.05, 0.001, 50),
    (0.0105, 0.001, 11),  # a part step is one more
    (0.0001, 0.001, 1),   # less than one step still advances one
])
def test_physics_steps_cover_the_duration_without_a_rounding_step(duration, step_size, steps):
    assert physics_steps(duration, step_size) == steps
