"""The launch files' decisions without launch: argument checks, and what a node's exit does."""

from pathlib import Path
import re
from types import SimpleNamespace

import pytest
from rtgym_ros.nodes.launch_logic import (
    AGENT, agent_arguments, check_namespace, check_policy, check_robot_config, describe_exit,
    exit_handler, exit_outcome, LaunchArgumentError, LaunchFailure, parse_bool, parse_episodes,
    parse_real_time_factor, sim_demo_arguments, SIM_ROBOT)

REPO = Path(__file__).resolve().parents[2]
ROBOT_CONFIG = REPO / 'config' / 'robots' / 'pendulum_sim.yaml'
AGENT_DEFAULTS = {'robot_config': str(ROBOT_CONFIG), 'use_sim_time': '', 'namespace': '',
                  'policy': 'zero', 'episodes': '3'}
SIM_DEMO_DEFAULTS = {'use_sim_time': 'false', 'real_time_factor': '1.0', 'namespace': '',
                     'policy': 'pendulum_swingup', 'episodes': '3'}


@pytest.mark.parametrize('value, expected', [
    ('1', 1), ('3', 3), (' 12 ', 12), ('007', 7),
    ('9223372036854775807', 9223372036854775807)])
def test_episodes_takes_decimal_integers_from_one(value, expected):
    assert parse_episodes(value) == expected


@pytest.mark.parametrize('value', ['abc', '2.0', '0', '-1', '', '1e3', '3 episodes', '0x10',
                                   '9223372036854775808'])
def test_episodes_refuses_what_is_not_an_integer_from_one(value):
    with pytest.raises(ValueError, match=r'^episodes must be an integer >= 1 and <= '
                                         r'9223372036854775807 \(a ROS integer parameter\), '
                                         r'got '):
        parse_episodes(value)


@pytest.mark.parametrize('value, expected', [
    ('true', True), ('True', True), ('TRUE', True), ('1', True), (' true ', True),
    ('false', False), ('False', False), ('0', False)])
def test_booleans_follow_launch_conditions(value, expected):
    assert parse_bool(value, name='use_sim_time') is expected
    assert parse_bool(value, name='use_sim_time', allow_empty=True) is expected


@pytest.mark.parametrize('value', ['yes', 'no', 'on', 'off', 't', '2', 'truee'])
def test_booleans_refuse_other_yaml_spellings(value):
    with pytest.raises(ValueError, match=r'^use_sim_time must be true or false'):
        parse_bool(value, name='use_sim_time', allow_empty=True)


def test_an_empty_boolean_means_as_configured_only_where_allowed():
    assert parse_bool('', name='use_sim_time', allow_empty=True) is None
    assert parse_bool('  ', name='use_sim_time', allow_empty=True) is None
    with pytest.raises(ValueError, match='use_sim_time must be true or false'):
        parse_bool('', name='use_sim_time')


@pytest.mark.parametrize('value, expected', [('1.0', 1.0), ('2', 2.0), ('0.5', 0.5)])
def test_real_time_factor_takes_positive_numbers(value, expected):
    assert parse_real_time_factor(value) == expected


@pytest.mark.parametrize('value', ['-1', 'nan', 'inf', 'fast', ''])
def test_real_time_factor_refuses_what_the_agent_cannot_follow(value):
    with pytest.raises(ValueError, match=r'^real_time_factor must be a finite number > 0'):
        parse_real_time_factor(value)


@pytest.mark.parametrize('value', ['0', '0.0', '-0'])
def test_real_time_factor_zero_is_refused_and_says_why(value):
    with pytest.raises(ValueError, match='would outrun the agent'):
        parse_real_time_factor(value)


def test_robot_config_names_a_missing_file(tmp_path):
    assert check_robot_config(str(ROBOT_CONFIG)) == str(ROBOT_CONFIG)
    with pytest.raises(ValueError, match='^robot_config: no such file: /nonexistent.yaml$'):
        check_robot_config('/nonexistent.yaml')
    with pytest.raises(ValueError, match=re.escape(f'robot_config: not a file: {tmp_path}')):
        check_robot_config(str(tmp_path))
    with pytest.raises(ValueError, match='^robot_config must name a robot config file'):
        check_robot_config('')


def test_robot_config_relative_paths_become_absolute(tmp_path, monkeypatch):
    (tmp_path / 'robot.yaml').write_text('{}')
    monkeypatch.chdir(tmp_path)
    assert check_robot_config('robot.yaml') == str(tmp_path / 'robot.yaml')


@pytest.mark.parametrize('value', ['', 'r1', '/r1', 'team/r1', '/team/r_1'])
def test_valid_namespaces_pass_unchanged(value):
    assert check_namespace(value) == value


@pytest.mark.parametrize('value, reason', [
    ('r-1', "other than alphanumerics, '_', or '/'"), ('r1/', "must not end with a '/'"),
    ('1r', 'starts with a number'), ('a//b', "repeated '/'")])
def test_invalid_namespaces_are_named_with_the_reason(value, reason):
    with pytest.raises(ValueError, match=f'^namespace {re.escape(repr(value))} is not a valid '
                                         f'ROS namespace: .*{re.escape(reason)}'):
        check_namespace(value)


@pytest.mark.parametrize('value', [
    'zero', 'random', 'pendulum_swingup', 'cartpole_lqr', 'my_pkg.policies:swing',
    'mod:f'])
def test_policies_the_agent_builds_pass(value):
    assert check_policy(value) == value


def test_an_sb3_policy_needs_its_model_file(tmp_path):
    (tmp_path / 'model.zip').write_bytes(b'')
    assert check_policy(f'sb3:SAC:{tmp_path}/model.zip')
    assert check_policy(f'sb3:SAC:{tmp_path}/model')  # SB3 adds .zip
    missing = tmp_path / 'other.zip'
    with pytest.raises(ValueError, match=re.escape(f'policy: no such model file: {missing}')):
        check_policy(f'sb3:SAC:{tmp_path}/other.zip')
    with pytest.raises(ValueError, match=r"^policy 'sb3:ALGO:PATH' expected"):
        check_policy('sb3:SAC')


@pytest.mark.parametrize('value', ['swingup', '', 'a:b:c', 'pkg.mod:', ':f', 'pkg-x.mod:f'])
def test_unknown_policies_are_refused_with_the_choices(value):
    with pytest.raises(ValueError, match=r'^policy must be one of zero, random, .*got'):
        check_policy(value)


def test_agent_launch_defaults_pass():
    args = agent_arguments(AGENT_DEFAULTS)
    assert args.robot_config == str(ROBOT_CONFIG)
    assert args.use_sim_time is None and args.episodes == 3 and args.policy == 'zero'


def test_sim_demo_defaults_pass():
    args = sim_demo_arguments(SIM_DEMO_DEFAULTS)
    assert args.use_sim_time is False and args.real_time_factor == 1.0
    assert args.episodes == 3 and args.policy == 'pendulum_swingup' and args.namespace == ''


@pytest.mark.parametrize('name, value', [
    ('episodes', 'abc'), ('episodes', '2.0'), ('use_sim_time', 'yes'),
    ('robot_config', '/nonexistent.yaml'), ('namespace', 'r-1'), ('policy', 'swingup')])
def test_agent_launch_names_the_bad_argument(name, value):
    with pytest.raises(LaunchArgumentError, match=f'^invalid launch argument: {name}'):
        agent_arguments({**AGENT_DEFAULTS, name: value})


@pytest.mark.parametrize('name, value', [
    ('episodes', 'abc'), ('episodes', '2.0'), ('use_sim_time', ''), ('use_sim_time', 'on'),
    ('real_time_factor', '0'), ('namespace', 'r1/'), ('policy', 'sb3:SAC:/nonexistent.zip')])
def test_sim_demo_names_the_bad_argument(name, value):
    with pytest.raises(LaunchArgumentError, match=f'^invalid launch argument: {name}'):
        sim_demo_arguments({**SIM_DEMO_DEFAULTS, name: value})


def test_every_bad_argument_is_named_at_once():
    with pytest.raises(LaunchArgumentError) as caught:
        sim_demo_arguments({**SIM_DEMO_DEFAULTS, 'episodes': 'abc', 'real_time_factor': '0'})
    message = str(caught.value)
    assert message.startswith('invalid launch arguments: ')
    assert 'episodes must be' in message and 'real_time_factor must be' in message
    assert message.endswith('no node was started')


def test_a_missing_argument_is_named():
    values = dict(AGENT_DEFAULTS)
    del values['policy']
    with pytest.raises(LaunchArgumentError, match='policy is not set'):
        agent_arguments(values)


@pytest.mark.parametrize('returncode, text', [
    (0, 'code 0'), (1, 'code 1'), (2, 'code 2'), (-9, 'signal SIGKILL'), (-2, 'signal SIGINT')])
def test_exits_are_described_with_the_signal_name(returncode, text):
    assert describe_exit(returncode) == text


def test_the_agents_clean_exit_ends_the_launch_cleanly():
    outcome = exit_outcome(AGENT, 0, ends_launch=True, shutting_down=False)
    assert outcome.failure is None and outcome.shutdown == 'agent finished'


@pytest.mark.parametrize('shutting_down', [False, True])
@pytest.mark.parametrize('returncode', [1, 2, -9])
def test_the_agents_failure_fails_the_launch(returncode, shutting_down):
    outcome = exit_outcome(AGENT, returncode, ends_launch=True, shutting_down=shutting_down)
    assert outcome.failure.startswith(f'agent exited with {describe_exit(returncode)}')
    assert outcome.shutdown is None


@pytest.mark.parametrize('returncode', [0, 1, -15])
def test_sim_robot_ending_first_fails_the_launch_and_stops_the_agent(returncode):
    outcome = exit_outcome(SIM_ROBOT, returncode, ends_launch=False, shutting_down=False)
    assert outcome.failure.startswith('sim_robot exited')
    assert outcome.failure.endswith('stops the other nodes')


@pytest.mark.parametrize('process, ends_launch', [(AGENT, True), (SIM_ROBOT, False)])
def test_a_clean_exit_during_shutdown_changes_nothing(process, ends_launch):
    outcome = exit_outcome(process, 0, ends_launch=ends_launch, shutting_down=True)
    assert outcome.failure is None and outcome.shutdown is None


def test_exit_handler_raises_failures_and_returns_the_shutdown_action():
    def shutdown(*, reason):
        return ('shutdown', reason)

    on_agent_exit = exit_handler(AGENT, ends_launch=True, shutdown=shutdown)
    running, stopping = SimpleNamespace(is_shutdown=False), SimpleNamespace(is_shutdown=True)
    assert on_agent_exit(SimpleNamespace(returncode=0), running) == [
        ('shutdown', 'agent finished')]
    assert on_agent_exit(SimpleNamespace(returncode=0), stopping) is None
    with pytest.raises(LaunchFailure, match='^agent exited with code 1'):
        on_agent_exit(SimpleNamespace(returncode=1), running)
    on_sim_exit = exit_handler(SIM_ROBOT, ends_launch=False, shutdown=shutdown)
    with pytest.raises(LaunchFailure, match=r'^sim_robot exited \(code 0\) while the launch'):
        on_sim_exit(SimpleNamespace(returncode=0), running)
    assert on_sim_exit(SimpleNamespace(returncode=0), stopping) is None
