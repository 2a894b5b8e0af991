"""
The agent's and check's parameters are checked as rcl types them, before any env exists.

rcl reads the command line (in a child process, as the nodes do); the env is never made here:
``RosEnv`` is replaced by one that fails, so a parameter let through shows as that failure.
"""

from pathlib import Path

import pytest
from rtgym_ros.nodes import agent, check

REPO = Path(__file__).resolve().parents[2]
PENDULUM = REPO / 'config' / 'robots' / 'pendulum_sim.yaml'


@pytest.fixture(autouse=True)
def no_env(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError('the agent made the env: a parameter was let through')

    monkeypatch.setattr(agent, 'RosEnv', refuse)
    monkeypatch.setattr(agent, '_raise_on_stop_signals', lambda: None)  # pytest's stay


def run(capsys, node: str, *args: str) -> tuple[int, str]:
    code = {'agent': agent, 'check': check}[node].main([node, '--ros-args', *args])
    return code, capsys.readouterr().err


def with_key(tmp_path: Path, line: str) -> str:
    """Return a copy of the pendulum config with ``line`` added to its parameters."""
    text = PENDULUM.read_text()
    assert '  ros__parameters:\n' in text
    path = tmp_path / 'robot.yaml'
    path.write_text(text.replace('  ros__parameters:\n', f'  ros__parameters:\n    {line}\n', 1))
    return str(path)


@pytest.mark.parametrize('node', ['agent', 'check'])
@pytest.mark.parametrize('key, given', [
    ('node_name', ['-p', 'node_name:=foo']),
    ('namespace', ['-p', 'namespace:=r3']),
    ('node_name', 'node_name: foo'),  # a key of the file
    ('namespace', 'namespace: r3'),
])
def test_a_node_name_or_namespace_parameter_is_refused_with_the_way_to_rename(
        capsys, tmp_path, node, key, given):
    config = with_key(tmp_path, given) if isinstance(given, str) else str(PENDULUM)
    args = ['--params-file', config] + (given if isinstance(given, list) else [])
    code, err = run(capsys, node, *args)
    assert code == 2, err
    assert f'{key} cannot be a parameter, got {key}=' in err, err
    assert '-r __node:=NAME -r __ns:=/NS' in err and 'Traceback' not in err


@pytest.mark.parametrize('given, message', [
    ('episodes:=.inf', 'episodes must be an integer, got inf'),
    ('episodes:=2.5', 'episodes must be an integer, got 2.5'),
    ('episodes:=0', 'episodes must be an integer >= 1, got 0'),
    ('episodes:=-1', 'episodes must be an integer >= 1, got -1'),
    ('seed:=abc', "seed must be an integer, got 'abc'"),
    ('seed:=-1', 'seed must be an integer >= 0, got -1'),
    ('policy:=1', 'policy must be a string, got 1 (int)'),
    ('policy:=zer0', 'policy must be one of zero, random, pendulum_swingup, cartpole_lqr, '
                     "'sb3:ALGO:PATH' or 'package.module:function', got 'zer0'"),
    ('timing_csv:=true', 'timing_csv must be a string, got True (bool)'),
    ('timing_plot:=2', 'timing_plot must be a string, got 2 (int)'),
])
def test_an_agent_parameter_of_the_wrong_type_or_range_exits_two_naming_it(
        capsys, given, message):
    code, err = run(capsys, 'agent', '--params-file', str(PENDULUM), '-p', given)
    assert code == 2, err
    assert err == f'agent: invalid parameters: {message}\n'


@pytest.mark.parametrize('key', ['timing_csv', 'timing_plot'])
def test_an_output_file_that_cannot_be_written_exits_two_before_the_run(capsys, tmp_path, key):
    missing = tmp_path / 'no_such_dir' / 'out.csv'
    code, err = run(capsys, 'agent', '--params-file', str(PENDULUM), '-p', f'{key}:={missing}')
    assert (code, err) == (2, f"agent: invalid parameters: {key}: cannot write '{missing}': "
                              f'the directory {missing.parent} is missing or not writable\n')
    code, err = run(capsys, 'agent', '--params-file', str(PENDULUM), '-p', f'{key}:={tmp_path}')
    assert (code, err) == (2, f'agent: invalid parameters: {key} must be a file path, got the '
                              f"directory '{tmp_path}'\n")


def test_check_refuses_the_agent_parameters_the_agent_refuses(capsys, tmp_path):
    code, err = run(capsys, 'check', '--params-file', str(PENDULUM), '-p', 'episodes:=0')
    assert (code, err) == (2, 'check: invalid robot config: episodes must be an integer >= 1, '
                              'got 0\n')
    code = check.main(['check', with_key(tmp_path, 'progress: 1')])
    assert (code, capsys.readouterr().err) == (
        2, 'check: invalid robot config: progress must be true or false, got 1 (int)\n')


def test_a_stop_signal_while_the_env_is_made_exits_zero_without_a_traceback(capsys,
                                                                            monkeypatch):
    # SIGINT/SIGTERM raise KeyboardInterrupt wherever the agent is, also while RosEnv starts
    # its nodes (about a second): it must not escape main() (a traceback, exit 130 or 1; ros2
    # launch would report a failed node on Ctrl-C). The env closes itself when its constructor
    # raises.
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(agent, 'RosEnv', interrupted)
    code, err = run(capsys, 'agent', '--params-file', str(PENDULUM))
    assert code == 0, err
    assert err == 'agent: interrupted before the first episode; the robot was not moved\n'
