"""
The nodes' command lines: ``--help`` prints the parameters and starts nothing; stray arguments.

The ``--help`` runs are subprocesses (the console entry points as ``python -m``), but they start
no node and touch no DDS: that is what they check.
"""

import os
from pathlib import Path
import subprocess
import sys

import pytest
from rtgym_ros.nodes import agent
from rtgym_ros.nodes.command_line import (default_text, format_help, own_arguments,
                                          ParameterHelp, type_name, wants_help)
from rtgym_ros.nodes.sim_robot import parameters as sim_parameters
from rtgym_ros.robot.spec import AGENT_DEFAULTS

REPO = Path(__file__).resolve().parents[2]
# Importing rclpy and the package takes ~1 s; a node that started would run until killed.
HELP_TIMEOUT_S = 30.0


@pytest.mark.parametrize('args, own', [
    (['agent'], []),
    (['agent', '--help'], ['--help']),
    (['agent', '--ros-args', '-p', 'policy:=zero'], []),
    (['agent', '--ros-args', '-p', 'policy:=zero', '--', '-h'], ['-h']),
    (['agent', '-x', '--ros-args', '--params-file', 'f.yaml', '--', 'y', '--ros-args', '-p',
      'a:=1'], ['-x', 'y']),
])
def test_own_arguments_are_those_outside_ros_args(args, own):
    assert own_arguments(args) == own


def test_help_is_asked_outside_ros_args_only():
    assert wants_help(['agent', '--help'], prog='agent')
    assert wants_help(['agent', '-h', '--ros-args', '-p', 'a:=1'], prog='agent')
    assert not wants_help(['agent', '--ros-args', '--params-file', 'f.yaml'], prog='agent')
    assert not wants_help(['agent'], prog='agent')


def test_a_stray_argument_is_refused_with_the_way_to_pass_parameters():
    with pytest.raises(ValueError, match=r"^unknown argument '--policy': parameters are given "
                                         r'as --ros-args -p NAME:=VALUE .*\(see agent --help\)'):
        wants_help(['agent', '--policy', 'random'], prog='agent')


def test_rcls_old_remap_form_is_refused_with_the_way_to_remap():
    # rcl still reads NAME:=VALUE outside --ros-args as a remap (deprecated); a parameter given
    # so (policy:=random) would silently become one, so it is refused, saying both ways.
    with pytest.raises(ValueError, match=r"^unknown argument '__ns:=/r1': parameters are given "
                                         r'as .*; a remap is given as --ros-args -r '
                                         r'NAME:=VALUE \(see agent --help\)'):
        wants_help(['agent', '__ns:=/r1'], prog='agent')


@pytest.mark.parametrize('default, kind, text', [
    (True, 'bool', 'true'), (False, 'bool', 'false'), (3, 'integer', '3'),
    (0.5, 'double', '0.5'), ('', 'string', "''"), ('zero', 'string', "'zero'")])
def test_types_and_defaults_are_written_as_ros_users_read_them(default, kind, text):
    assert type_name(default) == kind and default_text(default) == text


def test_a_default_without_a_ros_type_is_an_error():
    with pytest.raises(TypeError, match='no ROS parameter type'):
        type_name([1.0])


def test_help_layout_wraps_descriptions_under_each_parameter():
    text = format_help(usage=['x --ros-args', 'x -h'], summary='Does x.',
                       parameters=[ParameterHelp('rate', 'double > 0', '1.0', 'word ' * 40)],
                       epilog='See the docs.')
    lines = text.splitlines()
    assert lines[:2] == ['usage: x --ros-args', '       x -h']
    assert '  rate (double > 0, default 1.0)' in lines
    body = [line for line in lines if line.startswith('      word')]
    assert len(body) > 1 and all(len(line) <= 79 for line in lines)
    assert lines[-1] == 'See the docs.'


def test_agent_help_describes_every_agent_parameter():
    assert set(agent.DESCRIPTIONS) == set(AGENT_DEFAULTS)
    text = agent.help_text()
    for name, default in AGENT_DEFAULTS.items():
        assert f'  {name} ({type_name(default)}, default {default_text(default)})' in text


def test_sim_robot_help_rows_cover_every_declared_parameter_with_its_range():
    rows = {row.name: row for row in sim_parameters.help_rows()}
    assert set(rows) == {name for name, _, _ in sim_parameters.PARAMETERS} | {'use_sim_time'}
    assert rows['physics_rate'].kind == 'double > 0'
    assert rows['sensor_dropout'].kind == 'double in [0, 1]'
    assert rows['real_time_factor'].kind == 'double >= 0'
    assert rows['initial_state'].kind == 'double array'
    assert rows['initial_state'].default == 'unset'
    assert rows['model'].default == "'pendulum'" and rows['publish_clock'].default == 'false'
    assert 'ros2 param set' in rows['sensor_noise'].description
    assert 'ros2 param set' not in rows['model'].description


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``python -m module args``; a node that started would hit the timeout."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get('PYTHONPATH')])]))
    return subprocess.run([sys.executable, '-m', module, *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=HELP_TIMEOUT_S)


@pytest.mark.parametrize('flag', ['--help', '-h'])
def test_agent_help_exits_zero_listing_its_parameters(flag):
    result = _run('rtgym_ros.nodes.agent', flag)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith('usage: agent ')
    for name in AGENT_DEFAULTS:
        assert f'\n  {name} (' in result.stdout, name
    assert 'invalid' not in result.stderr and 'Traceback' not in result.stderr


@pytest.mark.parametrize('flag', ['--help', '-h'])
def test_sim_robot_help_exits_zero_without_starting_a_simulator(flag):
    result = _run('rtgym_ros.nodes.sim_robot', flag, '--ros-args', '-p', 'publish_clock:=true')
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith('usage: sim_robot ')
    for name, _, _ in sim_parameters.PARAMETERS:
        assert f'\n  {name} (' in result.stdout, name
    assert 'physics' not in result.stderr and result.stderr == ''


@pytest.mark.parametrize('module, prog', [('rtgym_ros.nodes.agent', 'agent'),
                                          ('rtgym_ros.nodes.sim_robot', 'sim_robot'),
                                          ('rtgym_ros.nodes.mujoco_sim', 'mujoco_sim')])
def test_a_stray_argument_exits_two_before_anything_starts(module, prog):
    result = _run(module, '--policy', 'random')
    assert result.returncode == 2
    assert result.stderr.startswith(f"{prog}: unknown argument '--policy'")
    assert 'physics' not in result.stderr and result.stdout == ''


def test_timing_demo_help_lists_its_options_with_defaults_and_starts_nothing():
    import subprocess
    import sys
    result = subprocess.run([sys.executable, '-m', 'rtgym_ros.nodes.timing_demo', '--help'],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    for option in ('--rate', '--steps', '--load'):
        assert option in result.stdout
    assert '(default: 1000)' in result.stdout and 'capture' not in result.stdout


@pytest.mark.parametrize('args', [['--rate', '0'], ['--rate', '-10'], ['--rate', 'nan'],
                                  ['--rate', 'inf'], ['--steps', '0'], ['--steps', '-3']])
def test_timing_demo_refuses_a_rate_or_steps_it_cannot_run_as_a_usage_error(args):
    # Unchecked, --rate 0 is a ZeroDivisionError and the others the env's ValueError:
    # tracebacks and exit 1, after the env's node has started.
    result = _run('rtgym_ros.nodes.timing_demo', *args)
    assert result.returncode == 2, result.stderr
    assert f'argument {args[0]}: ' in result.stderr and 'Traceback' not in result.stderr
    assert result.stdout == ''
