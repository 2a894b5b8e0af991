"""
The shipped configs and launch files: they load, validate and agree with the nodes they feed.

Every file is read as rcl reads it for the node it configures (``rtgym_env``, or ``sim_robot``
for config/sim_robot/), by the one params reader gym.make uses; robot configs are validated by
``load_robot_config`` and read once more the way the agent reads them (its command line).
sim_robot and mujoco_sim configs are checked against the parameters the node declares, and
each shipped sim's robot config against the sim's file.
"""

import ast
import importlib
import importlib.util
from pathlib import Path
from typing import Any

from config_types import skip_unless_installed
import numpy as np
import pytest
from rtgym_ros.core.config import resolve_config
from rtgym_ros.nodes.mujoco_sim import NODE_NAME as MUJOCO_NODE_NAME
from rtgym_ros.nodes.mujoco_sim import parameters as mujoco_parameters
from rtgym_ros.nodes.sim_robot import NODE_NAME as SIM_NODE_NAME, parameters as sim_parameters
from rtgym_ros.robot.interface import RosInterface
from rtgym_ros.robot.loader import load_robot_config
from rtgym_ros.robot.params_file import load_params_file
from rtgym_ros.ros.parameters import read_node_parameters
from rtgym_ros.sim import make_model
import yaml

REPO = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO / 'config'
LAUNCH_DIR = REPO / 'launch'
CONFIGS = sorted(CONFIG_DIR.rglob('*.yaml'))
LAUNCH_FILES = sorted(LAUNCH_DIR.glob('*.launch.py'))
SIM_PARAMETERS = {name: default for name, default, _ in sim_parameters.PARAMETERS}
MUJOCO_PARAMETERS = {name: default for name, default, _ in mujoco_parameters.PARAMETERS}
# Robot configs of the shipped sims and the sim_robot params file each one talks to.
SIM_PAIRS = {'robots/pendulum_sim.yaml': 'sim_robot/pendulum.yaml',
             'robots/cartpole_sim.yaml': 'sim_robot/cartpole.yaml'}
MUJOCO_PAIRS = {'robots/mujoco_inverted_pendulum.yaml': 'mujoco_sim/inverted_pendulum.yaml',
                'robots/mujoco_reacher.yaml': 'mujoco_sim/reacher.yaml',
                'robots/mujoco_half_cheetah.yaml': 'mujoco_sim/half_cheetah.yaml'}
# Example configs the docs point at; a rename must not silently drop one.
EXPECTED = ('robots/cartpole_sim.yaml', 'robots/gz_sim_bridge.yaml', 'robots/pendulum_sim.yaml',
            'robots/real_arm.yaml', 'robots/real_arm_forward_command.yaml',
            'robots/turtlebot3_gazebo.yaml', 'sim_robot/cartpole.yaml', 'sim_robot/pendulum.yaml',
            'robots/mujoco_inverted_pendulum.yaml', 'robots/mujoco_reacher.yaml',
            'mujoco_sim/inverted_pendulum.yaml', 'mujoco_sim/reacher.yaml',
            'robots/mujoco_half_cheetah.yaml', 'mujoco_sim/half_cheetah.yaml')


def _relative(path: Path) -> str:
    return path.relative_to(CONFIG_DIR).as_posix()


def _params(path: Path) -> dict[str, Any]:
    """Return the parameters rcl gives the node the file configures."""
    folder = _relative(path).split('/')[0]
    node = {'sim_robot': SIM_NODE_NAME, 'mujoco_sim': MUJOCO_NODE_NAME}.get(folder, 'rtgym_env')
    return load_params_file(path, node_name=node)


def _params_or_none(path: Path) -> dict[str, Any] | None:
    """At collection: a broken file is reported by test_every_yaml_is_a_params_file."""
    try:
        return _params(path)
    except ValueError:
        return None


def _is_robot_config(path: Path) -> bool:
    return 'actions' in (_params_or_none(path) or {})


def _is_sim_config(path: Path) -> bool:
    params = _params_or_none(path) or {}
    return 'model' in params and 'actions' not in params


ROBOT_CONFIGS = [p for p in CONFIGS if _is_robot_config(p)]
SIM_CONFIGS = [p for p in CONFIGS if _is_sim_config(p) and _relative(p).startswith('sim_robot/')]
MUJOCO_CONFIGS = [p for p in CONFIGS
                  if _is_sim_config(p) and _relative(p).startswith('mujoco_sim/')]


def _named_types(path: Path) -> list[tuple[str, str]]:
    """(kind, 'pkg/kind/Type') for every interface type a robot config names."""
    params = _params(path)
    found = []
    for section in ('actions', 'observations'):
        for name in params[section]['names']:
            found.append(('msg', params[section][name]['type']))
    defaults = {'reward': 'std_msgs/msg/Float64', 'termination': 'std_msgs/msg/Bool'}
    for signal, default in defaults.items():
        entry = params.get(signal)
        if isinstance(entry, dict) and 'topic' in entry:
            found.append(('msg', entry.get('type', default)))
    for service in ('reset', 'pause', 'unpause'):
        entry = params.get(service)
        if isinstance(entry, dict) and 'service' in entry:
            found.append(('srv', entry.get('type', 'std_srvs/srv/Empty')))
    return found


NAMED_TYPES = sorted({(path.name, kind, type_name)
                      for path in ROBOT_CONFIGS for kind, type_name in _named_types(path)})


def test_the_example_configs_are_all_there():
    missing = sorted(set(EXPECTED) - {_relative(p) for p in CONFIGS})
    assert not missing, f'config/ lacks {missing}'


@pytest.mark.parametrize('path', CONFIGS, ids=_relative)
def test_every_yaml_is_a_params_file(path):
    document = yaml.safe_load(path.read_text())
    assert isinstance(document, dict) and document, f'{path.name}: not a mapping'
    for node, entry in document.items():
        assert isinstance(entry, dict) and isinstance(entry.get('ros__parameters'), dict), \
            f"{path.name}: {node!r} has no 'ros__parameters' mapping"
    assert _is_robot_config(path) or _is_sim_config(path), \
        f'{path.name} is neither a robot config (actions) nor a simulator config (model)'


@pytest.mark.parametrize('path', ROBOT_CONFIGS, ids=_relative)
def test_robot_config_validates(path):
    skip_unless_installed(path)
    env_config, spec = load_robot_config(path)
    assert spec.actions and spec.observations
    assert spec.action_low.shape == spec.action_high.shape == spec.default_action.shape
    assert np.all(spec.action_low <= spec.default_action)
    assert np.all(spec.default_action <= spec.action_high)
    # The env keys pass the env's own validation too (numbers, ranges).
    resolved = resolve_config(dict(env_config, interface=RosInterface))
    assert resolved.start_obs_capture <= resolved.time_step_duration, \
        f'{path.name}: start_obs_capture after the end of the time-step'


@pytest.mark.parametrize('path', CONFIGS, ids=_relative)
def test_rcl_reads_the_same_parameters(path):
    """What the agent sees from its command line is what gym.make sees from the file."""
    given = read_node_parameters(['agent', '--ros-args', '--params-file', str(path)],
                                 default_node_name='agent')
    assert _typed(given.parameters) == _typed(_params(path))


def _typed(value: Any) -> Any:
    """Values with their types, so that 1 and 1.0 (an int and a double parameter) differ."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


@pytest.mark.parametrize('file_name,kind,type_name', NAMED_TYPES)
def test_named_interface_types_exist(file_name, kind, type_name):
    package = type_name.split('/')[0]
    if importlib.util.find_spec(package) is None:
        pytest.skip(f'{file_name} names {type_name}, whose package {package} is not installed '
                    'here')
    module = importlib.import_module(f'{package}.{kind}')
    assert hasattr(module, type_name.split('/')[-1]), f'{file_name}: {type_name} not found'


@pytest.mark.parametrize('path', SIM_CONFIGS, ids=_relative)
def test_sim_robot_config_matches_declared_parameters(path):
    params = _params(path)
    unknown = sorted(set(params) - set(SIM_PARAMETERS))
    assert not unknown, f'{path.name}: sim_robot declares no {unknown}'
    for name, value in params.items():
        default = SIM_PARAMETERS[name]
        if isinstance(default, (bool, int, float, str)):
            # rclpy refuses an override of another type than the declared default's.
            assert type(value) is type(default), \
                f'{path.name}: {name} must be {type(default).__name__}, got {value!r}'
        else:
            assert isinstance(value, list) and all(type(v) is float for v in value), \
                f'{path.name}: {name} must be a list of doubles, got {value!r}'
        error = sim_parameters.check_option(name, value)
        assert error is None, error


@pytest.mark.parametrize('robot_file,sim_file', sorted(SIM_PAIRS.items()))
def test_sim_robot_config_agrees_with_its_robot_config(robot_file, sim_file):
    sim = {**SIM_PARAMETERS, **_params(CONFIG_DIR / sim_file)}
    _, spec = load_robot_config(CONFIG_DIR / robot_file)
    model = make_model(sim['model'], max_effort=sim['max_effort'] or None)
    (effort,) = spec.actions
    assert effort.topic == sim['command_topic']
    assert effort.size == len(model.joint_names) - (sim['model'] == 'cartpole')  # actuated
    limit = sim['max_effort'] or (model.max_force if sim['model'] == 'cartpole'
                                  else model.max_torque)
    assert np.all(np.abs(effort.low) <= limit) and np.all(np.abs(effort.high) <= limit)
    observations = _params(CONFIG_DIR / robot_file)['observations']
    joints = [observations[name] for name in observations['names']
              if observations[name]['topic'] == sim['joint_states_topic']]
    assert joints, f"{robot_file} does not observe {sim['joint_states_topic']}"
    assert tuple(joints[0]['joint_names']) == tuple(model.joint_names)
    assert spec.reset.service == sim['reset_service']
    assert spec.reset.service_type.__name__ == 'Trigger'
    assert spec.pause.service == sim['pause_service']
    assert spec.pause.service_type.__name__ == 'SetBool'
    assert spec.unpause is not None and spec.unpause.data is False


@pytest.mark.parametrize('path', MUJOCO_CONFIGS, ids=_relative)
def test_mujoco_sim_config_matches_declared_parameters(path):
    params = _params(path)
    unknown = sorted(set(params) - set(MUJOCO_PARAMETERS))
    assert not unknown, f'{path.name}: mujoco_sim declares no {unknown}'
    for name, value in params.items():
        assert type(value) is type(MUJOCO_PARAMETERS[name]), \
            f'{path.name}: {name} must be {type(MUJOCO_PARAMETERS[name]).__name__}, got {value!r}'
        error = mujoco_parameters.check_option(name, value)
        assert error is None, error


@pytest.mark.parametrize('robot_file,sim_file', sorted(MUJOCO_PAIRS.items()))
def test_mujoco_sim_config_agrees_with_its_robot_config(robot_file, sim_file):
    pytest.importorskip('mujoco',
                        reason='mujoco is not installed: pip install "rtgym_ros[mujoco]"')
    from rtgym_ros.sim.mujoco_model import MujocoModel
    sim = {**MUJOCO_PARAMETERS, **_params(CONFIG_DIR / sim_file)}
    env_config, spec = load_robot_config(CONFIG_DIR / robot_file)
    model = MujocoModel(sim['model'])
    (action,) = spec.actions
    assert action.topic == f"{sim['controller']}/commands"
    assert action.size == model.nu
    assert np.array_equal(action.low, model.ctrl_low)
    assert np.array_equal(action.high, model.ctrl_high)
    observations = _params(CONFIG_DIR / robot_file)['observations']
    for name in observations['names']:
        assert observations[name]['topic'] == sim['joint_states_topic']
        assert set(observations[name]['joint_names']) <= set(model.joint_names)
    # The Gymnasium v5 task's time-step: frame_skip physics steps.
    frame_skip = {'half_cheetah': 5}.get(sim['model'], 2)
    assert env_config['time_step_duration'] == pytest.approx(frame_skip * model.timestep)
    for service, name in (('reset', 'reset_world'), ('pause', 'pause_physics'),
                          ('unpause', 'unpause_physics')):
        entry = getattr(spec, service)
        assert entry.service == name and entry.service_type.__name__ == 'Empty'


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file_compiles_and_names_what_exists(path):
    tree = ast.parse(compile(path.read_text(), str(path), 'exec', ast.PyCF_ONLY_AST))
    functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert 'generate_launch_description' in functions
    strings = {n.value for n in ast.walk(tree)
               if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    for name in sorted(s for s in strings if s.endswith('.yaml')):
        assert list(CONFIG_DIR.rglob(name)), f'{path.name} names {name}, not under config/'
    scripts = _console_scripts()
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        for keyword in call.keywords:
            if keyword.arg == 'executable' and isinstance(keyword.value, ast.Constant):
                assert keyword.value.value in scripts, \
                    f'{path.name} runs {keyword.value.value!r}; setup.py has {sorted(scripts)}'


def _console_scripts() -> set[str]:
    tree = ast.parse((REPO / 'setup.py').read_text())
    return {s.value.split('=')[0].strip() for s in ast.walk(tree)
            if isinstance(s, ast.Constant) and isinstance(s.value, str)
            and '=' in s.value and ':' in s.value}


def test_launch_files_exist():
    assert sorted(p.name for p in LAUNCH_FILES) == ['agent.launch.py', 'mujoco_sim.launch.py',
                                                    'sim_demo.launch.py']


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
def test_generate_launch_description(path):
    if importlib.util.find_spec('launch_ros') is None:
        pytest.skip('launch_ros not installed: it comes with a ROS 2 distro (apt/source), '
                    'there is no PyPI wheel of it for this venv')
    from ament_index_python.packages import PackageNotFoundError
    import launch
    spec = importlib.util.spec_from_file_location(path.name.replace('.', '_'), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        description = module.generate_launch_description()
    except PackageNotFoundError:
        pytest.skip('rtgym_ros is not installed in an ament index (colcon build; source '
                    'install/setup.bash): its share/config path cannot be resolved')
    assert isinstance(description, launch.LaunchDescription)
    arguments = {a.name for a in description.get_launch_arguments()}
    assert {'use_sim_time', 'namespace', 'policy'} <= arguments


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_nodes_come_from_checked_arguments(path):
    """With the real launch: the nodes, or a refusal naming the argument before any node."""
    if importlib.util.find_spec('launch_ros') is None:
        pytest.skip('launch_ros not installed (see test_generate_launch_description); '
                    'test/unit/test_launch_files.py runs the files against a stand-in')
    from ament_index_python.packages import PackageNotFoundError
    import launch
    from launch.actions import OpaqueFunction
    from launch_ros.actions import Node
    from rtgym_ros.nodes.launch_logic import LaunchArgumentError
    spec = importlib.util.spec_from_file_location(path.name.replace('.', '_'), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        description = module.generate_launch_description()
        context = launch.LaunchContext()
        for argument in description.get_launch_arguments():
            argument.execute(context)
        function, = [e for e in description.entities if isinstance(e, OpaqueFunction)]
        nodes = function.execute(context)
    except PackageNotFoundError:
        pytest.skip('rtgym_ros is not installed in an ament index (colcon build)')
    assert nodes and all(isinstance(node, Node) for node in nodes)
    context.launch_configurations['episodes'] = '2.0'
    with pytest.raises(LaunchArgumentError, match='episodes must be an integer >= 1'):
        function.execute(context)
