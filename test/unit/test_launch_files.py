"""
The launch files' own code, run against a stand-in for ``launch`` and ``launch_ros``.

Neither is installable here (no PyPI wheels), so each test puts small modules in their place
that record what the launch file builds: the declared arguments, the nodes the OpaqueFunction
returns (keyword-checked against launch_ros 0.28's Node and launch 3.7's ExecuteProcess), and
their ``on_exit``. test_configs.py runs the real ``generate_launch_description`` where
``launch_ros`` is installed.
"""

import importlib.util
from pathlib import Path
import subprocess
import sys
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from rtgym_ros.nodes.launch_logic import LaunchArgumentError, LaunchFailure
import yaml

REPO = Path(__file__).resolve().parents[2]
LAUNCH_DIR = REPO / 'launch'
# launch_ros.actions.Node's keywords and those it passes on to launch's ExecuteProcess.
NODE_KEYWORDS = {
    'executable', 'package', 'name', 'namespace', 'exec_name', 'parameters', 'remappings',
    'ros_arguments', 'arguments', 'prefix', 'cwd', 'env', 'additional_env', 'shell',
    'sigterm_timeout', 'sigkill_timeout', 'emulate_tty', 'output', 'output_format',
    'cached_output', 'log_cmd', 'on_exit', 'respawn', 'respawn_delay', 'respawn_max_retries'}


class StandIn:
    """What a launch file built through the stand-in modules."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.modules = self._modules()

    def _modules(self) -> dict[str, ModuleType]:
        nodes = self.nodes

        class LaunchDescription:
            def __init__(self, entities):
                self.entities = list(entities)

            def get_launch_arguments(self):
                return [e for e in self.entities if isinstance(e, DeclareLaunchArgument)]

        class DeclareLaunchArgument:
            def __init__(self, name, *, default_value=None, description=None, choices=None):
                self.name, self.default_value = name, default_value
                self.description, self.choices = description, choices

        class OpaqueFunction:
            def __init__(self, *, function, args=None, kwargs=None):
                self.function = function

        class Shutdown:
            def __init__(self, *, reason='reason not given'):
                self.reason = reason

        class LaunchConfiguration:
            def __init__(self, name):
                self.name = name

            def perform(self, context):
                return context.launch_configurations[self.name]

        class ParameterValue:
            def __init__(self, value, *, value_type=None):
                self.value, self.value_type = value, value_type

        def node(**kwargs):
            unknown = set(kwargs) - NODE_KEYWORDS
            assert not unknown, f'Node() has no keyword {sorted(unknown)}'
            nodes.append(kwargs)
            return kwargs

        def module(name: str, **attributes: Any) -> ModuleType:
            result = ModuleType(name)
            result.__dict__.update(attributes)
            return result

        return {
            'launch': module('launch', LaunchContext=object,
                             LaunchDescription=LaunchDescription),
            'launch.actions': module('launch.actions', DeclareLaunchArgument=DeclareLaunchArgument,
                                     OpaqueFunction=OpaqueFunction, Shutdown=Shutdown),
            'launch.substitutions': module('launch.substitutions',
                                           LaunchConfiguration=LaunchConfiguration),
            'launch_ros': module('launch_ros'),
            'launch_ros.actions': module('launch_ros.actions', Node=node),
            'launch_ros.parameter_descriptions': module('launch_ros.parameter_descriptions',
                                                        ParameterValue=ParameterValue),
            'ament_index_python': module('ament_index_python'),
            'ament_index_python.packages': module(
                'ament_index_python.packages',
                get_package_share_directory=lambda package: str(REPO)),
        }

    def load(self, name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
        """Return ``launch/<name>``'s generate_launch_description() and its OpaqueFunction."""
        for module_name, module in self.modules.items():
            monkeypatch.setitem(sys.modules, module_name, module)
        path = LAUNCH_DIR / name
        spec = importlib.util.spec_from_file_location(name.replace('.', '_'), path)
        launch_file = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(launch_file)
        description = launch_file.generate_launch_description()
        functions = [e for e in description.entities if hasattr(e, 'function')]
        assert len(functions) == 1 and description.entities[-1] is functions[0], \
            'the nodes must come from one OpaqueFunction, after every argument is declared'
        return description, functions[0].function

    def run(self, name: str, monkeypatch: pytest.MonkeyPatch, **arguments: str) -> list:
        """Run the launch file as ros2 launch would, ``name:=value`` for each argument."""
        description, function = self.load(name, monkeypatch)
        configurations = {a.name: a.default_value for a in description.get_launch_arguments()}
        unknown = set(arguments) - set(configurations)
        assert not unknown, f'{name} declares no {sorted(unknown)}'
        configurations.update(arguments)
        return function(SimpleNamespace(launch_configurations=configurations))


@pytest.fixture
def stand_in():
    return StandIn()


def _parameters(node: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """Split a node's parameters into files and one merged dict, ParameterValues unwrapped."""
    files = [p for p in node['parameters'] if isinstance(p, str)]
    merged = {}
    for entry in node['parameters']:
        if isinstance(entry, dict):
            for key, value in entry.items():
                if hasattr(value, 'value_type'):
                    assert value.value_type is str, key
                    value = value.value
                merged[key] = value
    return files, merged


def test_sim_demo_starts_sim_robot_then_the_agent_with_typed_parameters(stand_in, monkeypatch):
    sim_robot, agent = stand_in.run('sim_demo.launch.py', monkeypatch)
    assert (sim_robot['executable'], agent['executable']) == ('sim_robot', 'agent')
    files, values = _parameters(sim_robot)
    assert files == [str(REPO / 'config' / 'sim_robot' / 'pendulum.yaml')]
    assert values == {'publish_clock': False, 'real_time_factor': 1.0}
    files, values = _parameters(agent)
    assert files == [str(REPO / 'config' / 'robots' / 'pendulum_sim.yaml')]
    assert values == {'use_sim_time': False, 'policy': 'pendulum_swingup', 'episodes': 3}
    assert all(Path(f).is_file() for node in (sim_robot, agent) for f in _parameters(node)[0])


def test_sim_demo_passes_checked_values(stand_in, monkeypatch):
    sim_robot, agent = stand_in.run('sim_demo.launch.py', monkeypatch, use_sim_time='True',
                                    real_time_factor='5', episodes='10', namespace='r1',
                                    policy='random')
    assert _parameters(sim_robot)[1] == {'publish_clock': True, 'real_time_factor': 5.0}
    assert _parameters(agent)[1] == {'use_sim_time': True, 'policy': 'random', 'episodes': 10}
    assert sim_robot['namespace'] == agent['namespace'] == 'r1'


@pytest.mark.parametrize('name, value', [
    ('episodes', 'abc'), ('episodes', '2.0'), ('use_sim_time', 'yes'),
    ('real_time_factor', '0'), ('policy', 'swingup'), ('namespace', 'r-1')])
def test_sim_demo_refuses_a_bad_argument_before_any_node(stand_in, monkeypatch, name, value):
    with pytest.raises(LaunchArgumentError, match=name):
        stand_in.run('sim_demo.launch.py', monkeypatch, **{name: value})
    assert stand_in.nodes == []


def test_agent_launch_passes_use_sim_time_only_when_given(stand_in, monkeypatch):
    agent, = stand_in.run('agent.launch.py', monkeypatch)
    files, values = _parameters(agent)
    assert files == [str(REPO / 'config' / 'robots' / 'pendulum_sim.yaml')]
    assert values == {'policy': 'zero', 'episodes': 3}
    stand_in.nodes.clear()
    agent, = stand_in.run('agent.launch.py', monkeypatch, use_sim_time='TRUE', episodes='7')
    assert _parameters(agent)[1] == {'use_sim_time': True, 'policy': 'zero', 'episodes': 7}


@pytest.mark.parametrize('name, value, message', [
    ('robot_config', '/nonexistent.yaml', 'robot_config: no such file: /nonexistent.yaml'),
    ('episodes', 'abc', 'episodes must be an integer >= 1'),
    ('use_sim_time', 'on', 'use_sim_time must be true or false')])
def test_agent_launch_refuses_a_bad_argument_before_the_node(stand_in, monkeypatch, name, value,
                                                             message):
    with pytest.raises(LaunchArgumentError, match=message):
        stand_in.run('agent.launch.py', monkeypatch, **{name: value})
    assert stand_in.nodes == []


@pytest.mark.parametrize('launch_file', ['agent.launch.py', 'sim_demo.launch.py',
                                         'mujoco_sim.launch.py'])
def test_no_node_emulates_a_tty_and_output_is_unbuffered(stand_in, monkeypatch, launch_file):
    for node in stand_in.run(launch_file, monkeypatch):
        assert not node.get('emulate_tty'), node['executable']
        assert node['additional_env'] == {'PYTHONUNBUFFERED': '1'}
        assert node['output'] == 'screen'


def _exit(node: dict[str, Any], returncode: int, *, shutting_down: bool = False) -> Any:
    return node['on_exit'](SimpleNamespace(returncode=returncode),
                           SimpleNamespace(is_shutdown=shutting_down))


@pytest.mark.parametrize('launch_file', ['agent.launch.py', 'sim_demo.launch.py',
                                         'mujoco_sim.launch.py'])
def test_the_agents_exit_ends_or_fails_the_launch(stand_in, monkeypatch, launch_file):
    agent = stand_in.run(launch_file, monkeypatch)[-1]
    shutdown, = _exit(agent, 0)
    assert shutdown.reason == 'agent finished'
    with pytest.raises(LaunchFailure, match='agent exited with code 1'):
        _exit(agent, 1)
    assert _exit(agent, 0, shutting_down=True) is None


def test_sim_robot_ending_first_fails_the_demo(stand_in, monkeypatch):
    sim_robot, _ = stand_in.run('sim_demo.launch.py', monkeypatch)
    with pytest.raises(LaunchFailure, match='sim_robot exited'):
        _exit(sim_robot, 0)
    with pytest.raises(LaunchFailure, match='sim_robot exited with signal SIGKILL'):
        _exit(sim_robot, -9)
    assert _exit(sim_robot, 0, shutting_down=True) is None


def test_mujoco_sim_starts_the_task_then_the_agent_with_typed_parameters(stand_in, monkeypatch):
    sim, agent = stand_in.run('mujoco_sim.launch.py', monkeypatch)
    assert (sim['executable'], agent['executable']) == ('mujoco_sim', 'agent')
    files, values = _parameters(sim)
    assert files == [str(REPO / 'config' / 'mujoco_sim' / 'inverted_pendulum.yaml')]
    assert values == {'publish_clock': False, 'real_time_factor': 1.0}
    files, values = _parameters(agent)
    assert files == [str(REPO / 'config' / 'robots' / 'mujoco_inverted_pendulum.yaml')]
    assert values == {'use_sim_time': False, 'episodes': 3,
                      'policy': 'rtgym_ros.sim.controllers:inverted_pendulum_lqr'}
    assert all(Path(f).is_file() for node in (sim, agent) for f in _parameters(node)[0])


def test_mujoco_sim_takes_launch_booleans_and_passes_the_policy_as_a_string(stand_in,
                                                                            monkeypatch):
    # launch's conditions take 1/0 in any case; a policy such as 1 or on must reach the
    # agent as a string (ParameterValue), not as what YAML makes of it.
    sim, agent = stand_in.run('mujoco_sim.launch.py', monkeypatch, use_sim_time='1',
                              policy='random', task='reacher', namespace='r1')
    assert _parameters(sim)[1] == {'publish_clock': True, 'real_time_factor': 1.0}
    assert _parameters(agent)[1] == {'use_sim_time': True, 'policy': 'random', 'episodes': 3}
    assert all(not isinstance(v, str) or v == 'random' for v in agent['parameters'][1].values())
    assert sim['namespace'] == agent['namespace'] == 'r1'
    stand_in.nodes.clear()
    sim, = stand_in.run('mujoco_sim.launch.py', monkeypatch, agent='FALSE',
                        real_time_factor='0')  # the simulator alone may run flat out
    assert _parameters(sim)[1]['real_time_factor'] == 0.0


@pytest.mark.parametrize('name, value', [
    ('episodes', '0'), ('episodes', '2.0'), ('use_sim_time', 'yes'), ('real_time_factor', '0'),
    ('real_time_factor', 'fast'), ('policy', 'swingup'), ('namespace', 'r-1'),
    ('task', 'pendulum'), ('agent', 'no')])
def test_mujoco_sim_refuses_a_bad_argument_before_any_node(stand_in, monkeypatch, name, value):
    # The agent refuses episodes:=0 (exit 2) and cannot follow a flat-out clock: the launch
    # must start neither mujoco_sim nor the agent with them, and name the argument.
    with pytest.raises(LaunchArgumentError, match=name):
        stand_in.run('mujoco_sim.launch.py', monkeypatch, **{name: value})
    assert stand_in.nodes == []


def test_mujoco_sim_ending_first_fails_the_launch(stand_in, monkeypatch):
    sim, _ = stand_in.run('mujoco_sim.launch.py', monkeypatch)
    with pytest.raises(LaunchFailure, match='mujoco_sim exited'):
        _exit(sim, 0)
    assert _exit(sim, 0, shutting_down=True) is None
    stand_in.nodes.clear()
    sim, = stand_in.run('mujoco_sim.launch.py', monkeypatch, agent='false')
    with pytest.raises(LaunchFailure, match='mujoco_sim exited with code 1'):
        _exit(sim, 1)


@pytest.mark.parametrize('launch_file', ['agent.launch.py', 'sim_demo.launch.py',
                                         'mujoco_sim.launch.py'])
def test_every_argument_is_described_with_a_default(stand_in, monkeypatch, launch_file):
    description, _ = stand_in.load(launch_file, monkeypatch)
    for argument in description.get_launch_arguments():
        assert argument.default_value is not None and argument.description, argument.name


def test_sim_demo_and_tools_demo_take_the_clock_rate_from_one_file(stand_in, monkeypatch):
    sim_robot, _ = stand_in.run('sim_demo.launch.py', monkeypatch, use_sim_time='true')
    files, values = _parameters(sim_robot)
    assert 'clock_rate' not in values
    demo = (REPO / 'tools' / 'demo').read_text()
    code = [line for line in demo.splitlines() if not line.lstrip().startswith('#')]
    assert not [line for line in code if 'clock_rate' in line], 'tools/demo sets its own'
    assert 'sim_config=sim_robot/pendulum.yaml' in demo and '"$share/$sim_config"' in demo
    assert files == [str(REPO / 'config' / 'sim_robot' / 'pendulum.yaml')]
    sim = yaml.safe_load(Path(files[0]).read_text())['/**']['ros__parameters']
    assert sim['clock_rate'] == 250.0 and sim['clock_rate'] <= sim['physics_rate']


@pytest.mark.parametrize('rate', ['0', '0.0', '-1', 'fast'])
def test_tools_demo_refuses_a_real_time_factor_the_agent_cannot_follow(rate):
    result = subprocess.run(['bash', str(REPO / 'tools' / 'demo'), '--sim-time', rate],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert result.stderr == f"--sim-time needs a real-time factor > 0, got '{rate}'\n"
