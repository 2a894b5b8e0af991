"""
What the launch files decide, as plain functions: argument checks, and what a node's exit means.

``launch/agent.launch.py``, ``launch/sim_demo.launch.py`` and ``launch/mujoco_sim.launch.py``
keep only the wiring; the tests call these without ``launch`` installed.

* Arguments: an OpaqueFunction hands every launch argument (a string) to
  :func:`agent_arguments`, :func:`sim_demo_arguments` or :func:`mujoco_sim_arguments` before
  it returns any node, so a bad value ends the launch with a message naming the argument and
  no process started.
* Exits: each node's ``on_exit`` is :func:`exit_handler`. The agent's clean exit ends the launch
  (``ros2 launch`` exits 0); the agent exiting non-zero, or the simulator ending while the launch
  still runs, fails it (``ros2 launch`` exits 1), and the shutdown stops the other node.
  ``launch`` turns only an exception into a non-zero exit code (it has no exit-code action), so
  a failure is raised as :class:`LaunchFailure`; ``launch`` logs it and shuts down.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
import math
import os
import re
import signal
from typing import Any

from rclpy.exceptions import InvalidNamespaceException
from rclpy.validate_namespace import validate_namespace
from rtgym_ros.core.validate import short_repr
from rtgym_ros.nodes.policies import BUILTIN

AGENT = 'agent'
SIM_ROBOT = 'sim_robot'
MUJOCO_SIM = 'mujoco_sim'
# mujoco_sim.launch.py's tasks: (mujoco_sim's params file under config/mujoco_sim, the
# agent's robot config under config/robots).
MUJOCO_TASKS = {'inverted_pendulum': ('inverted_pendulum.yaml', 'mujoco_inverted_pendulum.yaml'),
                'reacher': ('reacher.yaml', 'mujoco_reacher.yaml')}
# The policy each task runs when none is given.
MUJOCO_DEFAULT_POLICIES = {'inverted_pendulum': 'rtgym_ros.sim.controllers:inverted_pendulum_lqr',
                           'reacher': 'zero'}
# launch's own rule for conditions (IfCondition): stripped, any case.
TRUE_WORDS = ('true', '1')
FALSE_WORDS = ('false', '0')
_DECIMAL = re.compile(r'[0-9]+')


class LaunchArgumentError(ValueError):
    """One or more launch arguments are invalid; the message names each of them."""


class LaunchFailure(RuntimeError):
    """A node's exit fails the launch: ``ros2 launch`` logs this and exits 1."""


# ------------------------------------------------------------------------ one argument each


def parse_bool(value: str, *, name: str, allow_empty: bool = False) -> bool | None:
    """
    Read a boolean launch argument as launch's conditions do: ``true``/``1``, ``false``/``0``.

    :param allow_empty: An empty value is allowed and read as None ("as the config says").
    """
    text = value.strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    if allow_empty and not text:
        return None
    empty = '; empty: as the robot config says' if allow_empty else ''
    raise ValueError(f'{name} must be true or false (any case; 1 or 0){empty}, '
                     f'got {short_repr(value)}')


_INT64_MAX = 2**63 - 1  # a ROS integer parameter; rcl reads a longer one as a double


def parse_episodes(value: str) -> int:
    """Read ``episodes``: a decimal integer >= 1 (``2.0`` and ``abc`` are refused)."""
    text = value.strip()
    if not _DECIMAL.fullmatch(text) or not 1 <= int(text) <= _INT64_MAX:
        raise ValueError(f'episodes must be an integer >= 1 and <= {_INT64_MAX} (a ROS integer '
                         f'parameter), got {short_repr(value)}')
    return int(text)


def parse_real_time_factor(value: str) -> float:
    """
    Read ``real_time_factor`` for a launch where the agent follows the sim's /clock: > 0.

    sim_robot alone takes 0 (as fast as possible), but the agent steps in real time against
    that clock, so a flat-out clock runs past its time-steps: every step times out.
    """
    try:
        factor = float(value)
    except ValueError:
        factor = math.nan
    if not math.isfinite(factor) or factor <= 0.0:
        zero = (' (0, as fast as possible, would outrun the agent, which steps in real time '
                'on that clock: run sim_robot alone for that)' if factor == 0.0 else '')
        raise ValueError('real_time_factor must be a finite number > 0 (sim seconds per wall '
                         f'second), got {short_repr(value)}{zero}')
    return factor


def parse_sim_real_time_factor(value: str) -> float:
    """Read ``real_time_factor`` for a simulator alone: a finite number >= 0 (0: flat out)."""
    try:
        factor = float(value)
    except ValueError:
        factor = math.nan
    if not math.isfinite(factor) or factor < 0.0:
        raise ValueError('real_time_factor must be a finite number >= 0 (sim seconds per wall '
                         f'second; 0: as fast as possible), got {short_repr(value)}')
    return factor


def check_task(value: str) -> str:
    """Return ``value`` if it is one of :data:`MUJOCO_TASKS`."""
    if value not in MUJOCO_TASKS:
        raise ValueError(f"task must be one of {', '.join(MUJOCO_TASKS)}, "
                         f'got {short_repr(value)}')
    return value


def check_robot_config(value: str) -> str:
    """Return the robot config's absolute path, or say that the file is missing."""
    if not value.strip():
        raise ValueError('robot_config must name a robot config file, got an empty value')
    path = os.path.abspath(os.path.expanduser(value))
    if not os.path.exists(path):
        raise ValueError(f'robot_config: no such file: {path}')
    if not os.path.isfile(path):
        raise ValueError(f'robot_config: not a file: {path}')
    if not os.access(path, os.R_OK):
        raise ValueError(f'robot_config: cannot read {path}')
    return path


def check_namespace(value: str) -> str:
    """Return ``value`` if it is empty or a valid ROS namespace (relative ones get a ``/``)."""
    if not value:
        return value
    try:
        validate_namespace(value if value.startswith('/') else '/' + value)
    except InvalidNamespaceException as error:
        reason = str(error).splitlines()[0].replace('Invalid namespace: ', '')
        raise ValueError(f'namespace {short_repr(value)} is not a valid ROS namespace: '
                         f'{reason}') from None
    return value


def check_policy(value: str) -> str:
    """
    Check the form of a ``policy`` the agent will build, without importing anything.

    An ``sb3:ALGO:PATH`` file must exist (``.zip`` may be left out, as SB3 allows); a
    ``package.module:function`` is imported by the agent, which names what is wrong with it.
    """
    choices = f"one of {', '.join(BUILTIN)}, 'sb3:ALGO:PATH' or 'package.module:function'"
    if value in BUILTIN:
        return value
    if value.startswith('sb3:'):
        parts = value.split(':', 2)
        if len(parts) != 3 or not parts[1].isidentifier() or not parts[2]:
            raise ValueError(f"policy 'sb3:ALGO:PATH' expected (e.g. sb3:SAC:model.zip), "
                             f'got {short_repr(value)}')
        path = os.path.expanduser(parts[2])
        if not os.path.isfile(path) and not os.path.isfile(path + '.zip'):
            raise ValueError(f'policy: no such model file: {os.path.abspath(path)}')
        return value
    module, _, function = value.partition(':')
    if (value.count(':') == 1 and function.isidentifier() and module
            and all(part.isidentifier() for part in module.split('.'))):
        return value
    raise ValueError(f'policy must be {choices}, got {short_repr(value)}')


# ------------------------------------------------------------------------ all of a launch


@dataclass(frozen=True)
class AgentArguments:
    """The checked arguments of ``agent.launch.py``."""

    robot_config: str
    use_sim_time: bool | None  # None: as the robot config says
    namespace: str
    policy: str
    episodes: int


@dataclass(frozen=True)
class SimDemoArguments:
    """The checked arguments of ``sim_demo.launch.py``."""

    use_sim_time: bool
    real_time_factor: float
    namespace: str
    policy: str
    episodes: int


@dataclass(frozen=True)
class MujocoSimArguments:
    """The checked arguments of ``mujoco_sim.launch.py``."""

    task: str
    use_sim_time: bool
    real_time_factor: float
    policy: str  # the task's default policy when none was given
    episodes: int
    agent: bool
    namespace: str

    def config_files(self, config_dir: str) -> tuple[str, str]:
        """Return the task's mujoco_sim params file and its robot config, in ``config_dir``."""
        sim_file, robot_file = MUJOCO_TASKS[self.task]
        return (os.path.join(config_dir, 'mujoco_sim', sim_file),
                os.path.join(config_dir, 'robots', robot_file))


def agent_arguments(values: Mapping[str, str]) -> AgentArguments:
    """
    Check every argument of ``agent.launch.py`` (its launch configurations).

    :raises LaunchArgumentError: Naming each invalid argument, not only the first.
    """
    return _checked(AgentArguments, values, {
        'robot_config': check_robot_config,
        'use_sim_time': lambda v: parse_bool(v, name='use_sim_time', allow_empty=True),
        'namespace': check_namespace,
        'policy': check_policy,
        'episodes': parse_episodes,
    })


def sim_demo_arguments(values: Mapping[str, str]) -> SimDemoArguments:
    """
    Check every argument of ``sim_demo.launch.py`` (its launch configurations).

    :raises LaunchArgumentError: Naming each invalid argument, not only the first.
    """
    return _checked(SimDemoArguments, values, {
        'use_sim_time': lambda v: parse_bool(v, name='use_sim_time'),
        'real_time_factor': parse_real_time_factor,
        'namespace': check_namespace,
        'policy': check_policy,
        'episodes': parse_episodes,
    })


def mujoco_sim_arguments(values: Mapping[str, str]) -> MujocoSimArguments:
    """
    Check every argument of ``mujoco_sim.launch.py`` (its launch configurations).

    ``real_time_factor:=0`` (flat out) is refused only when the agent runs, as in
    :func:`sim_demo_arguments`; an empty ``policy`` is the task's default.

    :raises LaunchArgumentError: Naming each invalid argument, not only the first.
    """
    try:
        with_agent = parse_bool(str(values.get('agent', 'true')), name='agent')
    except ValueError:
        with_agent = True  # named by the agent argument's own check
    args = _checked(MujocoSimArguments, values, {
        'task': check_task,
        'use_sim_time': lambda v: parse_bool(v, name='use_sim_time'),
        'real_time_factor': (parse_real_time_factor if with_agent
                             else parse_sim_real_time_factor),
        'policy': lambda v: check_policy(v) if v else v,
        'episodes': parse_episodes,
        'agent': lambda v: parse_bool(v, name='agent'),
        'namespace': check_namespace,
    })
    return replace(args, policy=args.policy or MUJOCO_DEFAULT_POLICIES[args.task])


def _checked(cls: type, values: Mapping[str, str],
             checks: Mapping[str, Callable[[str], Any]]) -> Any:
    checked, errors = {}, []
    for name, check in checks.items():
        if name not in values:
            errors.append(f'{name} is not set (is it declared in the launch file?)')
            continue
        try:
            checked[name] = check(str(values[name]))
        except ValueError as error:
            errors.append(str(error))
    if errors:
        raise LaunchArgumentError(
            'invalid launch argument' + ('s: ' if len(errors) > 1 else ': ') + '; '.join(errors)
            + '; no node was started')
    return cls(**checked)


# ------------------------------------------------------------------------ exits


@dataclass(frozen=True)
class ExitOutcome:
    """What one node's exit does to the launch: nothing, end it, or fail it."""

    shutdown: str | None = None  # end the launch (the other nodes get SIGINT) for this reason
    failure: str | None = None  # fail the launch (ros2 launch exits 1) with this message


def describe_exit(returncode: int) -> str:
    """Say how a process ended: ``code 1``, or ``signal SIGKILL`` for a negative code."""
    if returncode < 0:
        try:
            return f'signal {signal.Signals(-returncode).name}'
        except ValueError:
            return f'signal {-returncode}'
    return f'code {returncode}'


def exit_outcome(process: str, returncode: int, *, ends_launch: bool,
                 shutting_down: bool) -> ExitOutcome:
    """
    Decide what a node's exit means for the launch.

    :param process: The node's name, for the messages.
    :param returncode: Its exit code (negative: killed by that signal).
    :param ends_launch: True for the node whose clean exit is the launch's normal end (the
        agent); False for one that must outlive it (sim_robot).
    :param shutting_down: The launch is already stopping (Ctrl-C, another node's exit).
    """
    how = describe_exit(returncode)
    if returncode != 0:
        return ExitOutcome(failure=f'{process} exited with {how}: the launch fails'
                                   + ('' if shutting_down else ' and stops the other nodes'))
    if shutting_down:
        return ExitOutcome()
    if ends_launch:
        return ExitOutcome(shutdown=f'{process} finished')
    return ExitOutcome(failure=f'{process} exited ({how}) while the launch was running: the '
                               'launch fails and stops the other nodes')


def exit_handler(process: str, *, ends_launch: bool,
                 shutdown: Callable[..., Any]) -> Callable[[Any, Any], list | None]:
    """
    Return a launch ``on_exit`` callable ``(ProcessExited, LaunchContext)`` for one node.

    :param shutdown: Builds the action that ends the launch, called with ``reason=``
        (``launch.actions.Shutdown``); passed in so that this module needs no ``launch``.
    :raises LaunchFailure: From the callable, when the exit fails the launch.
    """
    def on_exit(event: Any, context: Any) -> list | None:
        outcome = exit_outcome(process, event.returncode, ends_launch=ends_launch,
                               shutting_down=context.is_shutdown)
        if outcome.failure is not None:
            raise LaunchFailure(outcome.failure)
        if outcome.shutdown is not None:
            return [shutdown(reason=outcome.shutdown)]
        return None

    return on_exit
