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
    monkeypatch.setattr(agent, '_raise_on_sigterm', lambda: None)  # pytest's handler stays


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
