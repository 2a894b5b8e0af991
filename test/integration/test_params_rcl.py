"""
gym.make reads a params file as rcl gives it to a node: differential tests against rclpy itself.

Each case is written to a file and read twice: by a real ``rclpy.node.Node`` started with
``--ros-args --params-file FILE`` in another process (test/support/rcl_params_oracle.py), and by
the params reader behind ``gym.make(..., robot_config=FILE)``. Values and types must agree, or
both must refuse the file (ours with an error naming the file). Where no section applies to the
node, rcl gives it nothing and ours refuses, naming the node and listing the sections.
"""

import json
import math
import os
from pathlib import Path
import re
import subprocess
import sys
import time
from typing import Any

import gymnasium
import numpy as np
import pytest
import rclpy
from rclpy.context import Context
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.signals import SignalHandlerOptions
from ros_probe import CHILD_ENV, REPO, wait_until
from rtgym_ros.core.config import resolve_config
from rtgym_ros.robot.interface import RosInterface
from rtgym_ros.robot.loader import load_robot_config
from rtgym_ros.robot.params_file import COMMAND_LINE, command_line_parameters, load_params_file
import yaml

ORACLE = REPO / 'test' / 'support' / 'rcl_params_oracle.py'


def section(body: str, name: str = '/**') -> str:
    """Return a params file of one section; ``body`` is its parameters, one per line."""
    lines = ''.join(f'    {line}\n' for line in body.strip('\n').split('\n'))
    return f'{name}:\n  ros__parameters:\n{lines}'


# The scalars of issue 9 (item 3) and more of the same kinds: how rcl types each one.
SCALARS = {
    # doubles for rcl, strings for PyYAML (YAML 1.1 wants a dot and a signed exponent)
    '1e9': 1e9, '-1.0e9': -1e9, '2e-2': 0.02, '-.5': -0.5, '+.5': 0.5, '1E9': 1e9,
    'infinity': math.inf, 'nan': math.nan, 'inf': math.inf,
    # strings for rcl, numbers or None for PyYAML
    '1_000': '1_000', '0b11': '0b11', '1:30': '1:30', '~': '~', 'null': 'null',
    '1e400': '1e400', '2001-12-14': '2001-12-14', '0o17': '0o17',
    # booleans for rcl, strings for PyYAML
    'y': True, 'n': False, 'Y': True, 'N': False,
    # the same for both
    '.inf': math.inf, '-.inf': -math.inf, '.nan': math.nan, '.Inf': math.inf, '0x1F': 31,
    '+1': 1, '1.': 1.0, '017': 15, 'True': True, 'TRUE': True, 'on': True, 'off': False,
    'yes': True, 'No': False, 'tRUE': 'tRUE', "'1e9'": '1e9', '"true"': 'true', "''": '',
    '!!str 5': '5', '!!float 5': 5, '5.0 # comment': 5.0, '99999999999999999999': 1e20,
    '9223372036854775807': 9223372036854775807, '-0': 0, "' 5'": ' 5', '12e': '12e',
}

BOMB_MAPPING = section('\n'.join(
    ['l0: &l0 {a: 1, b: 1, c: 1, d: 1, e: 1, f: 1, g: 1, h: 1, i: 1}']
    + [f'l{i}: &l{i} {{a: *l{i - 1}, b: *l{i - 1}, c: *l{i - 1}, d: *l{i - 1}, '
       f'e: *l{i - 1}, f: *l{i - 1}, g: *l{i - 1}, h: *l{i - 1}, i: *l{i - 1}}}'
       for i in range(1, 9)]))
BOMB_LIST = section('\n'.join(
    ['l0: &l0 [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]']
    + [f'l{i}: &l{i} [*l{i - 1}, *l{i - 1}, *l{i - 1}, *l{i - 1}, *l{i - 1}, *l{i - 1}, '
       f'*l{i - 1}, *l{i - 1}, *l{i - 1}]' for i in range(1, 9)]
    + ['actions.effort.low: *l8']))

TWO_ROBOTS = (section('actions.effort.topic: /r2/effort\nactions.effort.high: [0.5]',
                      '/r2/rtgym_env')
              + section('actions.effort.topic: /r1/effort\nactions.effort.high: [50.0]',
                        '/r1/rtgym_env'))

# id: (file text or bytes, node name, namespace)
CASES: dict[str, tuple[str | bytes, str, str]] = {
    **{f'scalar {text}': (section(f'v: {text}'), 'rtgym_env', '') for text in SCALARS},
    # issue 9 item 2: sections are matched on the node's full name
    'two robots, r2': (TWO_ROBOTS, 'rtgym_env', 'r2'),
    'two robots, /r1': (TWO_ROBOTS, 'rtgym_env', '/r1'),
    'two robots, no namespace': (TWO_ROBOTS, 'rtgym_env', ''),
    '/*/rtgym_env, no namespace': (section('a: 1', '/*/rtgym_env'), 'rtgym_env', ''),
    '/*/rtgym_env, r2': (section('a: 1', '/*/rtgym_env'), 'rtgym_env', 'r2'),
    '/*/rtgym_env, a/b': (section('a: 1', '/*/rtgym_env'), 'rtgym_env', 'a/b'),
    '/**/rtgym_env, no namespace': (section('a: 1', '/**/rtgym_env'), 'rtgym_env', ''),
    '/**/rtgym_env, a/b': (section('a: 1', '/**/rtgym_env'), 'rtgym_env', 'a/b'),
    '/r2/*, r2': (section('a: 1', '/r2/*'), 'rtgym_env', 'r2'),
    '/r2/*, r2/sub': (section('a: 1', '/r2/*'), 'rtgym_env', 'r2/sub'),
    '/r2/**, r2/sub': (section('a: 1', '/r2/**'), 'rtgym_env', 'r2/sub'),
    '/*, no namespace': (section('a: 1', '/*'), 'rtgym_env', ''),
    '/*, r2': (section('a: 1', '/*'), 'rtgym_env', 'r2'),
    'rtgym_env without slash, no namespace': (section('a: 1', 'rtgym_env'), 'rtgym_env', ''),
    'rtgym_env without slash, r2': (section('a: 1', 'rtgym_env'), 'rtgym_env', 'r2'),
    'r1/rtgym_env without slash, r1': (section('a: 1', 'r1/rtgym_env'), 'rtgym_env', 'r1'),
    'another node only': (section('a: 1', 'other'), 'rtgym_env', ''),
    'another node and /**': (section('a: 1', 'other') + section('b: 2'), 'rtgym_env', ''),
    'a node name of the file is used': (section('a: 1', 'agent'), 'agent', ''),
    'quoted "/**"': (section('a: 1', '"/**"'), 'rtgym_env', ''),
    'only /**': (section('a: 1\nb: x'), 'rtgym_env', 'r9'),
    'empty /**': ('/**:\n  ros__parameters: {}\n', 'rtgym_env', ''),
    'comments only': ('# nothing here\n', 'rtgym_env', ''),
    # issue 9 item 5: merge order and forms
    'node then /**: /** wins': (section('a: 1\nb: 1', '/r2/rtgym_env') + section('a: 2'),
                                'rtgym_env', 'r2'),
    '/** then node: node wins': (section('a: 2') + section('a: 1\nb: 1', '/r2/rtgym_env'),
                                 'rtgym_env', 'r2'),
    'two /** blocks merge': (section('a: 2\nc: 1') + section('b: 3\nc: 2'), 'rtgym_env', ''),
    # a repeated section name joins its first occurrence: its place in the order is the first
    '/**, node, /** again: node wins': (section('a: 1') + section('a: 2', '/rtgym_env')
                                        + section('a: 3\nb: 3'), 'rtgym_env', ''),
    'node, /**, node again: /** wins': (section('a: 2', '/rtgym_env') + section('a: 1')
                                        + section('a: 5\nb: 1', '/rtgym_env'),
                                        'rtgym_env', ''),
    'exact, /*/, /**': (section('a: 2', '/r2/rtgym_env') + section('a: 3', '/*/rtgym_env')
                        + section('b: 1'), 'rtgym_env', 'r2'),
    # several namespace levels
    '/a/**/rtgym_env, a/b/c': (section('a: 1', '/a/**/rtgym_env'), 'rtgym_env', 'a/b/c'),
    '/*/*, a': (section('a: 1', '/*/*'), 'rtgym_env', '/a'),
    '/*/*, a/b': (section('a: 1', '/*/*'), 'rtgym_env', '/a/b'),
    'nested a: b: rtgym_env:, a/b': ('a:\n  b:\n    rtgym_env:\n      ros__parameters:\n'
                                     '        a: 1\n', 'rtgym_env', '/a/b'),
    'exact, /a/**, /*/*/rtgym_env, a/b': (
        section('v: 1\nw: 1', '/a/b/rtgym_env') + section('v: 2', '/a/**')
        + section('v: 3\nx: 1', '/*/*/rtgym_env'), 'rtgym_env', 'a/b'),
    'nested r1: rtgym_env:': ('r1:\n  rtgym_env:\n    ros__parameters:\n      a: 1\n',
                              'rtgym_env', 'r1'),
    'nested r1: rtgym_env:, r2': ('r1:\n  rtgym_env:\n    ros__parameters:\n      a: 1\n',
                                  'rtgym_env', 'r2'),
    'two ros__parameters in one section': (
        '/**:\n  ros__parameters:\n    a: 1\n  ros__parameters:\n    b: 2\n', 'rtgym_env', ''),
    'dotted and nested merge': (section('a.b: 1\na:\n  c: 2\n  b: 3'), 'rtgym_env', ''),
    'empty mapping inside a mapping': (section('x:\n  b: {}\n  c: 1'), 'rtgym_env', ''),
    'duplicate key': (section('a: 1\na: 2'), 'rtgym_env', ''),
    'anchor and alias': (section('a: &x 1\nb: *x'), 'rtgym_env', ''),
    '<< merge key': ('base: &b\n  a: 1\n' + section('<<: *b\nc: 2'), 'rtgym_env', ''),
    'key beside ros__parameters': ('/**:\n  ros__parameters:\n    a: 1\n  other: 2\n',
                                   'rtgym_env', ''),
    'section without ros__parameters': ('/**:\n  a: 1\n', 'rtgym_env', ''),
    'a key that starts with ros__parameters': ('/**:\n  ros__parameters_x:\n    a: 1\n',
                                               'rtgym_env', ''),
    'alias bomb (mappings)': (BOMB_MAPPING, 'rtgym_env', ''),
    'alias bomb (list)': (BOMB_LIST, 'rtgym_env', ''),
    # deeper than Python's recursion limit lets PyYAML compose, in a section for another node
    'deep mapping for another node, flow': (section('x: ' + '{a: ' * 1000 + '1' + '}' * 1000,
                                                    '/other'), 'rtgym_env', ''),
    'deep mapping for another node, block': (
        section(''.join(f'{"  " * depth}a:\n' for depth in range(1000)) + '  ' * 1000 + 'b: 1',
                '/other'), 'rtgym_env', ''),
    # lists
    'list of doubles rcl types': (section('a: [1e9, -.5, 2e-2]'), 'rtgym_env', ''),
    'list of booleans': (section('a: [true, y, on, n]'), 'rtgym_env', ''),
    'list of strings': (section('a: [a, ~, null, 1_000]'), 'rtgym_env', ''),
    'list of integers': (section('a: [1, 0x10, +3]'), 'rtgym_env', ''),
    'list mixing int and double': (section('a: [-10, 2.5]'), 'rtgym_env', ''),
    'list mixing string and int': (section("a: ['1', 2]"), 'rtgym_env', ''),
    'list mixing int and double, block form': (section('b: 1\na:\n  - 1\n  - 2.5'),
                                               'rtgym_env', ''),
    'nested list': (section('a: [[1, 2], [3]]'), 'rtgym_env', ''),
    'empty list': (section('a: []\nb: 1'), 'rtgym_env', ''),
    'empty mapping': (section('b: 1\na: {}'), 'rtgym_env', ''),
    'no value': (section('a:'), 'rtgym_env', ''),
    # use_sim_time: rclpy logs a wrong type and goes on; the env refuses it (a real bool)
    'use_sim_time y': (section('use_sim_time: y'), 'rtgym_env', ''),
    'use_sim_time quoted false': (section("use_sim_time: 'false'"), 'rtgym_env', ''),
    'use_sim_time 1': (section('use_sim_time: 1'), 'rtgym_env', ''),
    # not a params file
    'a list at the top': ('- a\n- b\n', 'rtgym_env', ''),
    'invalid YAML': (section('a: [unclosed'), 'rtgym_env', ''),
    'bad indentation': (section('b: 1\n  a: 2'), 'rtgym_env', ''),
    'tab indentation': ('/**:\n\tros__parameters:\n\t\ta: 1\n', 'rtgym_env', ''),
    'a control character': (section('b: 1\na: "x\x1by"'), 'rtgym_env', ''),
    # encodings: libyaml reads UTF-16 after its byte order mark (a PowerShell redirect's file)
    'UTF-16LE with BOM': (section('a: café\nb: [1.5]').encode('utf-16'), 'rtgym_env', ''),
    'UTF-16BE with BOM': (b'\xfe\xff' + section('a: 1').encode('utf-16-be'), 'rtgym_env', ''),
    'UTF-16 for another node': (section('a: 1', '/other').encode('utf-16'), 'rtgym_env', ''),
    'UTF-16 cut in a character': (section('a: 1').encode('utf-16') + b'\n', 'rtgym_env', ''),
    'UTF-16 without BOM': (section('a: 1').encode('utf-16-le'), 'rtgym_env', ''),
    'UTF-8 with BOM': (b'\xef\xbb\xbf' + section('a: 1').encode(), 'rtgym_env', ''),
    'Latin-1': (section('a: café').encode('latin-1'), 'rtgym_env', ''),
    'a python tag': (section('a: !!python/name:os.system'), 'rtgym_env', ''),
    'a python tag on a list': (section('a: !!python/object/apply:os.system ["true"]'),
                               'rtgym_env', ''),
}


@pytest.fixture(scope='module')
def rcl(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """Return, per case, its file and what a real rclpy node got from it (one process)."""
    directory = tmp_path_factory.mktemp('params')
    files = {}
    for index, (case_id, (text, node, namespace)) in enumerate(CASES.items()):
        files[case_id] = directory / f'case{index}.yaml'
        files[case_id].write_bytes(text if isinstance(text, bytes) else text.encode())
    request = [{'file': str(files[case_id]), 'node': node, 'namespace': namespace}
               for case_id, (_, node, namespace) in CASES.items()]
    result = subprocess.run([sys.executable, str(ORACLE)], input=json.dumps(request),
                            capture_output=True, text=True, env=CHILD_ENV, timeout=300)
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.returncode == 0 and len(answers) == len(CASES), result.stderr[-3000:]
    return {case_id: (files[case_id], answer) for case_id, answer in zip(CASES, answers)}


def typed(params: dict[str, Any], prefix: str = '') -> dict[str, list]:
    """Flatten our nested parameters to rcl's dotted names, as [type, value] like the oracle."""
    flat = {}
    for name, value in params.items():
        if isinstance(value, dict):
            flat.update(typed(value, f'{prefix}{name}.'))
        elif isinstance(value, list):
            kinds = {_kind(item) for item in value}
            assert len(kinds) == 1, f'{prefix}{name}: {value!r}'
            flat[f'{prefix}{name}'] = [f'{kinds.pop()}_ARRAY', [_encode(v) for v in value]]
        else:
            flat[f'{prefix}{name}'] = [_kind(value), _encode(value)]
    return flat


def _kind(value: Any) -> str:
    return {bool: 'BOOL', int: 'INTEGER', float: 'DOUBLE', str: 'STRING'}[type(value)]


def _encode(value: Any) -> Any:
    return repr(value) if isinstance(value, float) else value


def _without_default_sim_time(params: dict[str, list]) -> dict[str, list]:
    """Every rclpy node declares use_sim_time (false); ours has it only when the file does."""
    return {name: value for name, value in params.items()
            if not (name == 'use_sim_time' and value == ['BOOL', False])}


def read_as_rcl_reads_it(rcl, case_id: str) -> dict[str, Any] | None:
    """
    Read the case's file through gym.make's reader; check it against the oracle's node.

    Return the parameters read, or None where rcl refuses the file or gives the node none
    (and so does ours, with an error naming the file or the node).
    """
    path, answer = rcl[case_id]
    _, node, namespace = CASES[case_id]
    if 'refused' in answer:
        with pytest.raises(ValueError) as error:
            load_params_file(path, node_name=node, namespace=namespace)
        message = str(error.value)
        assert str(path) in message and len(message) < len(str(path)) + 500, message
        return None
    expected = _without_default_sim_time(answer['params'])
    if not expected:
        with pytest.raises(ValueError) as error:
            load_params_file(path, node_name=node, namespace=namespace)
        assert f"no parameters for node '{answer['node']}'" in str(error.value)
        return None
    ours = load_params_file(path, node_name=node, namespace=namespace)
    assert _without_default_sim_time(typed(ours)) == expected
    return ours


@pytest.mark.parametrize('case_id', [case for case in CASES if not case.startswith('scalar ')])
def test_gym_make_reads_what_rcl_gives_the_node(rcl, case_id):
    read_as_rcl_reads_it(rcl, case_id)


@pytest.mark.parametrize('text', list(SCALARS))
def test_scalars_are_typed_as_rcl_types_them(rcl, text):
    """The same as the oracle, and the values the issue (and rcl's parser) name."""
    value = read_as_rcl_reads_it(rcl, f'scalar {text}')['v']
    expected = SCALARS[text]
    assert type(value) is type(expected)
    assert value == expected or (math.isnan(expected) and math.isnan(value))


# rcl names a line, not a key: the error quotes the line, or on a syntax error gives libyaml's
# reason, which rcl drops.
@pytest.mark.parametrize('case_id, refused', [
    ('anchor and alias', r"Will not support aliasing at line 4 \(line 4: 'b: \*x'\)$"),
    ('<< merge key', 'Cannot have a value before ros__parameters'),
    ('key beside ros__parameters',
     r"Cannot have a value before ros__parameters at line 4 \(line 4: 'other: 2'\)$"),
    ('list mixing int and double',
     r"Sequence should be of same type.* at line_num 3 \(line 3: 'a: \[-10, 2.5\]'\)$"),
    ('list mixing int and double, block form', r"Sequence .* \(line 6: '- 2.5'\)$"),
    ('nested list', r"at line 3 \(line 3: 'a: \[\[1, 2\], \[3\]\]'\)$"),
    ('no value', r"No value at line 3 \(line 3: 'a:'\)$"),
    ('empty list', "parameter 'a' has no value rcl can type"),
    ('empty mapping', "parameter 'a' has no value rcl can type"),
    ('invalid YAML', r"Error parsing a event near line 3 \(.*'\]'.* at line 4, column 1\)$"),
    ('bad indentation', r'Error parsing a event near line 3 \(.* at line 4, column 8\)$'),
    ('tab indentation', r'Error parsing a event near line 1 \(.* at line 2, column 1\)$'),
    ('a control character', r'Error parsing a event near line 0 \(character #x001b at line 4: '),
    ('UTF-16 cut in a character', r'not a params file: not UTF-16 text \(byte 68\)'),
    ('Latin-1', r'not a params file: not UTF-8 text \(byte 34\)'),
])
def test_refusals_say_what_rcl_said(rcl, case_id, refused):
    path, answer = rcl[case_id]
    assert 'refused' in answer, answer
    with pytest.raises(ValueError, match=refused):
        load_params_file(path, node_name='rtgym_env')


@pytest.mark.parametrize('bomb', [BOMB_MAPPING, BOMB_LIST], ids=['mappings', 'list'])
def test_alias_bombs_are_refused_at_once(tmp_path, bomb):
    path = tmp_path / 'bomb.yaml'
    path.write_text(bomb)
    assert len(bomb) < 1000
    start = time.monotonic()
    with pytest.raises(ValueError, match='rcl refuses it: Will not support aliasing') as error:
        load_robot_config(path)
    assert time.monotonic() - start < 2.0
    assert len(str(error.value)) < len(str(path)) + 200


def test_a_value_beside_its_nested_names_is_refused_clearly(tmp_path):
    """Refuse ``a: 1`` beside ``a.b: 2``: two parameters for rcl, a clash in a nested config."""
    for text in ('a: 1\na.b: 2', 'a.b: 2\na: 1'):
        path = tmp_path / 'clash.yaml'
        path.write_text(section(text))
        with pytest.raises(ValueError, match=r"parameter 'a(\.b)?' .*(holds a value|also nested)"):
            load_params_file(path, node_name='rtgym_env')


@pytest.mark.parametrize('key', ['.time_step_duration', 'time_step_duration.',
                                 'actions..names', '.'])
def test_a_name_with_an_empty_part_is_refused_naming_it(tmp_path, key):
    """Refuse ``a.``: rcl keeps it as written; nested, it is a key '' no error could name."""
    path = tmp_path / 'empty_part.yaml'
    path.write_text(section(f'time_step_duration: 0.1\n"{key}": 1'))
    with pytest.raises(ValueError, match=rf'^robot_config {re.escape(str(path))}: parameter '
                                         rf"'{re.escape(key)}' has an empty part"):
        load_params_file(path, node_name='rtgym_env')


ROBOT = section("""\
time_step_duration: {T}
watchdog_timeout: {watchdog}
act_in_obs: {act_in_obs}
actions.names: [effort]
actions.effort.topic: effort
actions.effort.type: std_msgs/msg/Float64MultiArray
actions.effort.field: data
actions.effort.low: [-1.0e9, -8.0]
actions.effort.high: [1.0e9, 8.0]
observations.names: [joints]
observations.joints.topic: joint_states
observations.joints.type: sensor_msgs/msg/JointState
observations.joints.joint_names: [j0]
observations.joints.fields: [position]""")


def test_robot_config_with_rcl_numbers_and_booleans(tmp_path):
    """Issue 9 item 3: 2e-2 and -1.0e9 are doubles, n a bool; ~ is a string, refused."""
    path = tmp_path / 'robot.yaml'
    path.write_text(ROBOT.format(T='2e-2', watchdog='0.5', act_in_obs='n'))
    env_config, spec = load_robot_config(path)
    assert env_config['time_step_duration'] == 0.02 and env_config['act_in_obs'] is False
    assert spec.action_low.tolist() == [-1e9, -8.0]
    assert resolve_config(dict(env_config, interface=RosInterface)).time_step_duration == 0.02
    path.write_text(ROBOT.format(T='2e-2', watchdog='~', act_in_obs='n'))
    env_config, _ = load_robot_config(path)
    assert env_config['watchdog_timeout'] == '~'  # rcl's string, not None (no watchdog)
    with pytest.raises(TypeError, match=r"watchdog_timeout'\] must be a number, got '~'"):
        resolve_config(dict(env_config, interface=RosInterface))


def test_gym_make_drives_the_robot_of_its_namespace(tmp_path):
    """Issue 9 item 2: a two-robot file; namespace r2 gets r2's topic and bounds, not r1's."""
    robot = ROBOT.format(T='0.05', watchdog='1.0', act_in_obs='true')
    path = tmp_path / 'robots.yaml'
    path.write_text(robot + TWO_ROBOTS.replace('[0.5]', '[0.5, 1.0]')
                    .replace('[50.0]', '[50.0, 60.0]'))
    env = gymnasium.make('rtgym_ros/ros-v1', robot_config=path, namespace='r2')
    try:
        robot_spec = env.unwrapped.robot
        assert robot_spec.actions[0].topic == '/r2/effort'
        assert env.action_space.high.tolist() == [0.5, 1.0]
        assert np.all(env.action_space.low == [-1e9, -8.0])
        node = env.unwrapped._runtime.node
        assert node.get_fully_qualified_name() == '/r2/rtgym_env'
        assert node.count_publishers('/r2/effort') >= 1  # ours, seen in the local graph
        assert node.count_publishers('/r1/effort') == 0
    finally:
        env.close()


@pytest.mark.parametrize('ros_args, node', [
    (['-r', '__ns:=/r5'], '/r5/rtgym_env'),
    (['-r', 'rtgym_env:__ns:=/r5'], '/r5/rtgym_env'),
    (['-p', 'act_buf_len:=2', '--param', 'ep_max_length:=5', '--remap', '__ns:=/r5'],
     '/r5/rtgym_env'),
    (['-r', '__node:=other'], '/r2/rtgym_env'),  # the env names its node by a local rule
    (['--', '__ns:=/r5'], '/r5/rtgym_env'),  # rcl's deprecated form, outside --ros-args
    (['--', '__ns:=/r6', '--ros-args', '-r', '__ns:=/r5'], '/r6/rtgym_env'),  # the first wins
], ids=lambda value: ' '.join(value) if isinstance(value, list) else value)
def test_the_file_is_read_for_the_node_the_scripts_remaps_make(
        tmp_path, monkeypatch, ros_args, node):
    """``python train.py --ros-args -r __ns:=/r5``: rclpy.init(args=None) moves the env's node."""
    times = {'/r2/rtgym_env': 0.02, '/r5/rtgym_env': 0.05}
    path = tmp_path / 'robots.yaml'
    path.write_text(ROBOT.format(T='0.1', watchdog='1.0', act_in_obs='true') + ''.join(
        section(f'time_step_duration: {time}', name) for name, time in times.items()))
    monkeypatch.setattr(sys, 'argv', ['train.py', '--ros-args', *ros_args])
    env = gymnasium.make('rtgym_ros/ros-v1', robot_config=path, namespace='r2')
    try:
        made = env.unwrapped._runtime.node.get_fully_qualified_name()
        assert env.unwrapped.time_step_duration == times.get(made, 0.1), made
    finally:
        env.close()
    assert made == node  # rcl moved the node as the case says: the case tests what it names


def test_a_second_env_reads_the_file_for_the_name_its_node_gets(tmp_path):
    """``rtgym_env`` is taken: the second env's node is ``rtgym_env_2``, its sections apply."""
    path = tmp_path / 'robot.yaml'
    path.write_text(ROBOT.format(T='0.1', watchdog='1.0', act_in_obs='true')
                    + section('time_step_duration: 0.05', '/rtgym_env_2'))
    with pytest.raises(ValueError, match='ep_max_length'):  # a failed make frees its name
        gymnasium.make('rtgym_ros/ros-v1', robot_config=path, ep_max_length='x')
    first = gymnasium.make('rtgym_ros/ros-v1', robot_config=path)
    try:
        second = gymnasium.make('rtgym_ros/ros-v1', robot_config=path)
        try:
            assert second.unwrapped._runtime.node.get_name() == 'rtgym_env_2'
            assert second.unwrapped.time_step_duration == 0.05
            assert first.unwrapped.time_step_duration == 0.1
        finally:
            second.close()
    finally:
        first.close()
    (tmp_path / 'file').write_text('')
    with pytest.raises(ValueError, match='cannot create the bag'):  # nor after reading the file
        gymnasium.make('rtgym_ros/ros-v1', robot_config=path, record=str(tmp_path / 'file/bag'))
    third = gymnasium.make('rtgym_ros/ros-v1', robot_config=path)
    try:
        assert third.unwrapped._runtime.node.get_name() == 'rtgym_env'
        assert third.unwrapped.time_step_duration == 0.1
    finally:
        third.close()


def test_envs_the_scripts_ns_remap_moves_together_get_names_of_their_own(
        tmp_path, monkeypatch, capfd):
    """``-r __ns:=/r5`` moves both envs to /r5: the second is rtgym_env_2, and says so."""
    path = tmp_path / 'robot.yaml'
    path.write_text(ROBOT.format(T='0.1', watchdog='1.0', act_in_obs='true')
                    + section('time_step_duration: 0.05', '/r5/rtgym_env_2'))
    monkeypatch.setattr(sys, 'argv', ['train.py', '--ros-args', '-r', '__ns:=/r5'])
    first = gymnasium.make('rtgym_ros/ros-v1', robot_config=path, namespace='r1')
    try:
        second = gymnasium.make('rtgym_ros/ros-v1', robot_config=path, namespace='r2')
        try:
            names = [env.unwrapped._runtime.node.get_fully_qualified_name()
                     for env in (first, second)]
            assert names == ['/r5/rtgym_env', '/r5/rtgym_env_2']
            assert second.unwrapped.time_step_duration == 0.05
            said = ''.join(capfd.readouterr())
            assert ('node name /r5/rtgym_env is taken by another env of this process: this one '
                    'is /r5/rtgym_env_2') in said, said
        finally:
            second.close()
    finally:
        first.close()


# The ROS arguments of a training script's own command line, which rclpy.init(args=None) gives
# the env's node: {id: (arguments after --ros-args, node name, namespace)}. EXTRA, EXTRA2 and
# OTHER stand for params files written by the test.
COMMAND_LINES = {
    '-p': (['-p', 'time_step_duration:=0.05'], 'rtgym_env', ''),
    'a later -p wins': (['-p', 'time_step_duration:=0.05', '-p', 'time_step_duration:=0.06'],
                        'rtgym_env', ''),
    'a file after -p wins': (['-p', 'time_step_duration:=0.05', '--params-file', 'EXTRA'],
                             'rtgym_env', ''),
    '-p after a file wins': (['--params-file', 'EXTRA', '-p', 'time_step_duration:=0.05'],
                             'rtgym_env', ''),
    'the later file wins': (['--params-file', 'EXTRA2', '--params-file', 'EXTRA'],
                            'rtgym_env', ''),
    'a file for another node': (['--params-file', 'OTHER'], 'rtgym_env', ''),
    'a file for rtgym_env_2': (['--params-file', 'OTHER'], 'rtgym_env_2', ''),
    '-p for this node': (['-p', 'rtgym_env:ep_max_length:=7', '-p', 'other:act_buf_len:=3'],
                         'rtgym_env', ''),
    '-p for a node in r2': (['-p', 'rtgym_env:ep_max_length:=7'], 'rtgym_env', 'r2'),
    'two --ros-args, a remap': (['-p', 'ep_max_length:=7', '--', '--ros-args', '-r',
                                 '__ns:=/r5', '--params-file', 'OTHER'], 'rtgym_env', ''),
    'values of two types': (['-p', 'ep_max_length:=7', '-p', 'ep_max_length:=x', '-p',
                             'act_buf_len:=x', '-p', 'act_buf_len:=3'], 'rtgym_env', ''),
    'nested and list values': (['-p', 'actions.effort.high:=[1.0, 8.0]', '-p',
                                'use_sim_time:=true'], 'rtgym_env', ''),
}


@pytest.fixture(scope='module')
def command_line_files(tmp_path_factory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp('command_line')
    texts = {'EXTRA': section('time_step_duration: 0.07\nact_buf_len: 2'),
             'EXTRA2': section('time_step_duration: 0.08\nep_max_length: 9'),
             'OTHER': section('ep_max_length: 5', '/other')
             + section('ep_max_length: 6', '/rtgym_env_2')
             + section('act_buf_len: 4', '/r5/rtgym_env')}
    for name, text in texts.items():
        (directory / f'{name}.yaml').write_text(text)
    return {name: str(directory / f'{name}.yaml') for name in texts}


def _command_line(ros_args: list[str], files: dict[str, str]) -> list[str]:
    return ['train.py', '--lr', '0.1', '--ros-args', *[files.get(a, a) for a in ros_args]]


@pytest.fixture(scope='module')
def rcl_command_lines(command_line_files) -> dict[str, dict]:
    """Return, per command line, what a real rclpy node started with it got (one process)."""
    request = [{'args': _command_line(args, command_line_files), 'node': node,
                'namespace': namespace} for args, node, namespace in COMMAND_LINES.values()]
    result = subprocess.run([sys.executable, str(ORACLE)], input=json.dumps(request),
                            capture_output=True, text=True, env=CHILD_ENV, timeout=300)
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.returncode == 0 and len(answers) == len(request), result.stderr[-3000:]
    return dict(zip(COMMAND_LINES, answers))


@pytest.mark.parametrize('case_id', list(COMMAND_LINES))
def test_the_scripts_ros_args_give_the_config_what_rcl_gives_the_node(
        rcl_command_lines, command_line_files, monkeypatch, case_id):
    """``python train.py --ros-args -p k:=v --params-file F``: what the env's node gets."""
    args, node, namespace = COMMAND_LINES[case_id]
    monkeypatch.setattr(sys, 'argv', _command_line(args, command_line_files))
    ours = command_line_parameters(node_name=node, namespace=namespace)
    expected = rcl_command_lines[case_id]['params']
    assert _without_default_sim_time(typed(ours)) == _without_default_sim_time(expected)


@pytest.mark.parametrize('file_value, given, expected', [
    ('1', 'x', 1), ('1', '2.5', 1), ('1', 'true', True), ('1', '2', 2), ('x', '2', 2),
])
def test_a_value_of_another_type_in_one_section_as_params_files_md_says(
        tmp_path, monkeypatch, file_value, given, expected):
    """Of two values of different types, rcl keeps the one of bool, int, double, string first."""
    path = tmp_path / 'a.yaml'
    path.write_text(section(f'a: {file_value}'))
    monkeypatch.setattr(sys, 'argv', ['train.py', '--ros-args', '-p', f'a:={given}'])
    value = command_line_parameters(node_name='rtgym_env', params_file=str(path))['a']
    assert type(value) is type(expected) and value == expected
    path.write_text(section('a: 3') + section('a: 1.5', '/rtgym_env'))  # two sections
    monkeypatch.setattr(sys, 'argv', ['train.py'])
    assert command_line_parameters(node_name='rtgym_env', params_file=str(path)) == {'a': 1.5}


def test_the_scripts_ros_args_configure_the_env_after_its_file(tmp_path, monkeypatch):
    """The file, then the command line in rcl's order, then gym.make's keywords."""
    path = tmp_path / 'robot.yaml'
    path.write_text(ROBOT.format(T='0.1', watchdog='1.0', act_in_obs='true'))
    extra = tmp_path / 'extra.yaml'
    extra.write_text(section('time_step_duration: 0.07\nep_max_length: 9'))
    monkeypatch.setattr(sys, 'argv', ['train.py', '--ros-args', '--params-file', str(extra),
                                      '-p', 'time_step_duration:=0.05'])
    env_config, _ = load_robot_config(path, command_line=True)
    assert env_config['time_step_duration'] == 0.05 and env_config['ep_max_length'] == 9
    assert load_robot_config(path)[0]['time_step_duration'] == 0.1  # as check FILE reads it
    env = gymnasium.make('rtgym_ros/ros-v1', robot_config=path, ep_max_length=3)
    try:
        assert env.unwrapped.time_step_duration == 0.05
        assert env.unwrapped.ep_max_length == 3  # a keyword of gym.make wins, as
        # Node(parameter_overrides=...) wins over the command line
    finally:
        env.close()
    # No robot_config: the command line's files and -p are the config.
    monkeypatch.setattr(sys, 'argv', ['train.py', '--ros-args', '--params-file', str(path),
                                      '-p', 'time_step_duration:=0.05'])
    env = gymnasium.make('rtgym_ros/ros-v1')
    try:
        assert env.unwrapped.time_step_duration == 0.05
        assert env.unwrapped.robot.actions[0].topic == 'effort'
    finally:
        env.close()


def test_parameters_of_the_command_line_for_other_nodes_are_ignored_with_a_warning(
        tmp_path, monkeypatch):
    """``ros2 launch`` gives a Node(parameters=[{...}]) without name= to all its nodes (/**)."""
    path = tmp_path / 'robot.yaml'
    path.write_text(ROBOT.format(T='0.1', watchdog='1.0', act_in_obs='true'))
    launch = tmp_path / 'launch_params_x'  # as launch_ros writes it
    given = {'learning_rate': 0.001, 'time_step_duration': 0.05}
    launch.write_text(yaml.dump({'/**': {'ros__parameters': given}}))
    argv = ['train.py', '--ros-args', '--params-file', str(launch), '-p',
            'qos_overrides./clock.subscription.depth:=5']
    for robot_config, first in ((path, []), (None, ['--params-file', str(path)])):
        monkeypatch.setattr(sys, 'argv', [*argv[:2], *first, *argv[2:]])
        with pytest.warns(UserWarning, match=r"parameters \['learning_rate', 'qos_overrides'\] "
                          'are not env config keys: the env ignores them'):
            env_config, _ = load_robot_config(robot_config, command_line=True)
        assert env_config['time_step_duration'] == 0.05
    with pytest.warns(UserWarning, match='learning_rate'):
        env = gymnasium.make('rtgym_ros/ros-v1', robot_config=path)
    try:
        assert env.unwrapped.time_step_duration == 0.05
    finally:
        env.close()
    path.write_text(ROBOT.format(T='0.1', watchdog='1.0', act_in_obs='true')
                    + section('learning_rate: 0.1'))  # robot_config's own: refused
    with pytest.warns(UserWarning, match=r"\['qos_overrides'\]"), \
            pytest.raises(ValueError, match=r"unknown config keys \['learning_rate'\]"):
        load_robot_config(path, command_line=True)


# ROS arguments rcl refuses: {id: (arguments after --ros-args, what the error quotes)}.
BAD_ROS_ARGS = {
    '-p without :=': (['-p', 'novalue'], "'-p novalue'"),
    'a log level rcl does not know': (['--log-level', 'nonsense'], "'--log-level nonsense'"),
    'a trailing -p': (['-p'], 'trailing -p flag'),
    'an unknown argument': (['--bogus'], "unknown ROS arguments ['--bogus']"),
    'a missing params file': (['--params-file', '/nonexistent/x.yaml'],
                              '/nonexistent/x.yaml: Error opening YAML file'),
    'a relative enclave': (['-e', 'relative'], 'context name must be absolute'),
}


@pytest.mark.parametrize('case_id', list(BAD_ROS_ARGS))
def test_ros_args_rcl_refuses_are_refused_at_load(tmp_path, monkeypatch, case_id):
    """Not later, in the env's rclpy.init: a ValueError before any node, naming the argument."""
    args, quoted = BAD_ROS_ARGS[case_id]
    argv = ['train.py', '--ros-args', *args]
    context = Context()
    with pytest.raises((_rclpy.RCLError, _rclpy.UnknownROSArgsError)):  # rcl refuses them
        rclpy.init(args=argv, context=context, signal_handler_options=SignalHandlerOptions.NO)
    path = tmp_path / 'robot.yaml'
    path.write_text(ROBOT.format(T='0.1', watchdog='1.0', act_in_obs='true'))
    monkeypatch.setattr(sys, 'argv', argv)
    for robot_config in (path, None):
        with pytest.raises(ValueError) as error:
            gymnasium.make('rtgym_ros/ros-v1', robot_config=robot_config).close()
        assert str(error.value).startswith(f'{COMMAND_LINE}: rcl refuses it: ')
        assert quoted in str(error.value)


def test_a_params_file_of_the_scripts_command_line_must_be_a_file(tmp_path, monkeypatch):
    """Each env reads it, and the node reads it again: a pipe would give its bytes once."""
    path = tmp_path / 'robot.yaml'
    path.write_text(ROBOT.format(T='0.1', watchdog='1.0', act_in_obs='true'))
    monkeypatch.setattr(sys, 'argv', ['train.py', '--ros-args', '--params-file', '/dev/null'])
    with pytest.raises(ValueError, match="--params-file '/dev/null' is not a regular file"):
        gymnasium.make('rtgym_ros/ros-v1', robot_config=path).close()


@pytest.mark.parametrize('overrides, refused', [
    ({'namespace': None}, 'namespace must be a string, got None'),
    ({'namespace': 0}, 'namespace must be a string, got 0'),
    ({'node_name': ''}, "cannot name a node '' in namespace ''"),
])
def test_a_name_the_env_would_not_read_the_file_for_is_refused(tmp_path, overrides, refused):
    """The file is read for the node the env makes: namespace=None is no '/None/rtgym_env'."""
    path = tmp_path / 'robot.yaml'
    path.write_text(ROBOT.format(T='0.05', watchdog='1.0', act_in_obs='true'))
    with pytest.raises(ValueError, match=refused):
        gymnasium.make('rtgym_ros/ros-v1', robot_config=path, **overrides).close()


def test_reading_leaves_no_node_thread_or_socket_behind(probe, tmp_path):
    """Each read runs rcl in a child process; no thread, descriptor or node stays behind."""
    path = tmp_path / 'robot.yaml'
    path.write_text(section('a: 1'))
    name = f'params_reader_{os.getpid()}'
    load_params_file(path, node_name=name)  # once: rclpy's logging and type support load

    def counts() -> tuple[int, int]:
        return len(os.listdir('/proc/self/task')), len(os.listdir('/proc/self/fd'))

    before = counts()
    for _ in range(20):
        assert load_params_file(path, node_name=name) == {'a': 1}
    after = counts()
    assert after[0] <= before[0] + 2 and after[1] <= before[1] + 2, (before, after)
    wait_until(lambda: name not in probe.node.get_node_names(), 5.0,
               f'{name} to leave the ROS graph')
