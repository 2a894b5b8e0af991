"""
``check``: what a robot config makes, printed without a robot and without the env's node.

    check config/robots/turtlebot3_gazebo.yaml
    check --ros-args --params-file FILE -p time_step_duration:=0.05 -r __ns:=/r1

The first form reads the file as ``gym.make('rtgym_ros/ros-v1', robot_config=FILE)`` does (for
the node ``rtgym_env``, or ``--node-name``); the second takes the agent's arguments and reads
them as the agent does (for the node ``agent``). Printed: every env key with defaults applied,
the robot options, the agent's keys, the action space (per action group: topic, type, field,
low, high, default), the observation space, and its layout: which index of which key is which
message field, joint or transform output. Exit 0, 1 when rcl could not be asked (the child
process failed), or 2 when the config is invalid (the message names the key). rcl reads the
file through a short-lived bare node in a child process, which discovers no one; no env node
is made.
"""

import argparse
from collections.abc import Sequence
import re
import sys
from typing import Any

import gymnasium.spaces as spaces
import numpy as np

from rtgym_ros.core.config import ACTION_BUFFER_KEY, EnvConfig
from rtgym_ros.msgconv.type_names import interface_name
from rtgym_ros.nodes.agent import agent_options
from rtgym_ros.nodes.command_line import own_arguments
from rtgym_ros.robot.env import resolve_robot_config, robot_spaces
from rtgym_ros.robot.layout import ObservationLayout
from rtgym_ros.robot.loader import ENV_KEYS, load_robot_config, refuse_name_parameters
from rtgym_ros.robot.params_file import load_params_file
from rtgym_ros.robot.spec import ROBOT_DEFAULTS, RobotSpec
from rtgym_ros.ros.parameters import ParametersUnreadable, read_node_parameters

_DESCRIPTION = ('Print what a robot config makes: env keys with defaults applied, robot '
                'options, the action and observation spaces, and which observation index is '
                'which message field. No robot needed; no env node is made.')
_EPILOG = """forms:
  check FILE [--node-name NAME] [--namespace NS]
      FILE read as gym.make('rtgym_ros/ros-v1', robot_config=FILE) reads it
      (for the node rtgym_env unless --node-name).
  check --ros-args --params-file FILE [-p key:=value ...] [-r __ns:=/NS] [-r __node:=NAME]
      the agent's arguments, read as the agent reads them (for the node agent).

exit status: 0 printed; 1 rcl could not be asked (the process reading the parameters failed);
2 invalid config (the message names the key) or invalid arguments."""


def main(args: list[str] | None = None) -> int:
    """Print the resolved config, spaces and layout; return the exit status."""
    args = sys.argv if args is None else list(args)
    parser = argparse.ArgumentParser(prog='check', description=_DESCRIPTION, epilog=_EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', nargs='?', metavar='FILE',
                        help='a robot config (a ROS 2 params file)')
    parser.add_argument('--node-name', default=None, metavar='NAME',
                        help='read the sections of this node (default: rtgym_env for FILE, '
                             'agent with --ros-args)')
    parser.add_argument('--namespace', default='', metavar='NS',
                        help="the node's namespace (default: none)")
    # Not rclpy's remove_ros_args: rcl would read the params files, and a pipe reads once.
    options = parser.parse_args(own_arguments(args))
    ros_args = '--ros-args' in args
    if ros_args == (options.config is not None):
        parser.error("give a robot config: check FILE, or the agent's arguments: "
                     'check --ros-args --params-file FILE (not both)')
    try:
        report = _report(args, options, ros_args=ros_args)
    except (ValueError, TypeError, FileNotFoundError) as error:
        print(f'check: invalid robot config: {error}', file=sys.stderr)
        return 2
    except ParametersUnreadable as error:
        print(f'check: {error}', file=sys.stderr)
        return 1
    sys.stdout.write(report)
    return 0


def _report(args: list[str], options: argparse.Namespace, *, ros_args: bool) -> str:
    default_name = 'agent' if ros_args else 'rtgym_env'
    if ros_args:
        given = read_node_parameters(args, default_node_name=options.node_name or default_name,
                                     namespace=options.namespace, source='check --ros-args')
        name, namespace, source = given.node_name, given.namespace, 'the command line'
        parameters = dict(given.parameters)
        given_keys = set(parameters)
        agent = agent_options(parameters)
        refuse_name_parameters(parameters, source='check --ros-args')
        env_config, spec = load_robot_config(node_name=name, namespace=namespace, **parameters)
    else:
        name, namespace = options.node_name or default_name, options.namespace
        source = options.config
        # Read once: a pipe (/dev/stdin, <(cat F)) gives its bytes once.
        file_params = load_params_file(options.config, node_name=name, namespace=namespace)
        refuse_name_parameters(file_params, source=f'robot_config {options.config}')
        given_keys = set(file_params)
        agent = agent_options(file_params)
        env_config, spec = load_robot_config(node_name=name, namespace=namespace, **file_params)
    env_config.update(node_name=name, namespace=namespace)  # as RosEnv gets them
    given_keys |= {'node_name'} if options.node_name or name != default_name else set()
    given_keys |= {'namespace'} if namespace else set()
    config = resolve_robot_config(env_config)
    action_space, layout, observation_space = robot_spaces(config, spec)
    full_name = f'/{namespace.strip("/")}/{name}' if namespace.strip('/') else f'/{name}'
    return describe(config, spec, action_space, layout, observation_space, agent=agent,
                    given=given_keys, header=f'{source}, as read for the node {full_name}')


def describe(config: EnvConfig, spec: RobotSpec, action_space: spaces.Box,
             layout: ObservationLayout, observation_space: spaces.Space, *,
             agent: dict[str, Any], given: set[str], header: str) -> str:
    """Return the report ``check`` prints (plain text, aligned columns)."""
    out = _Text()
    out.line(f'robot config: {header}')
    out.section('env keys ((default): the config does not set it)')
    env_keys = [key for key in ENV_KEYS if key != 'watchdog_timeout'] + ['watchdog_timeout']
    out.table([(key, _value(getattr(config, key)), '' if key in given else '(default)')
               for key in env_keys])
    out.section('robot options')
    out.table([(key, _value(getattr(spec.options, key)),
                '' if key in given else '(default)')
               for key in ROBOT_DEFAULTS if key != 'watchdog_timeout'])
    out.section('agent keys (read by the agent node only)')
    out.table([(key, _value(value), '' if key in given else '(default)')
               for key, value in agent.items()])
    _describe_actions(out, spec, action_space)
    _describe_observations(out, spec, config, layout, observation_space)
    return out.text()


def _describe_actions(out: '_Text', spec: RobotSpec, action_space: spaces.Box) -> None:
    out.section(f'action space: {action_space}')
    rows, start = [], 0
    for group in spec.actions:
        extra = f'on_stop {group.on_stop}'
        if group.max_delta is not None:
            extra += f', max_delta {_value(group.max_delta)}'
        out.line(f'  {group.name}: {group.topic} ({interface_name(group.writer.msg_type)}), '
                 f'{group.size} value(s), {extra}')
        for offset, label in enumerate(group.writer.labels):
            rows.append((start + offset, f'{group.name}: {label}', group.low[offset],
                         group.high[offset], group.default[offset]))
        start += group.size
    out.table([('index', 'value', 'low', 'high', 'default')]
              + [(str(i), label, _number(low), _number(high), _number(default))
                 for i, label, low, high, default in rows])


def _describe_observations(out: '_Text', spec: RobotSpec, config: EnvConfig,
                           layout: ObservationLayout, space: spaces.Space) -> None:
    if config.obs_prepro_func is not None:
        out.section(f'observation space after obs_prepro_func '
                    f'{_value(config.obs_prepro_func)} (computed from a sample): {space}')
        out.line('  the layout below is what obs_prepro_func gets')
    out.section(f'observation space ({layout.kind} layout): {layout.space}')
    for slot in spec.observations:
        details = [f'max_age {slot.max_age}', f'on_stale {slot.on_stale}',
                   f'out_of_bounds {slot.out_of_bounds}']
        if slot.transform is not None:
            details.append('transform ' + ', '.join(f'{step}: {_value(value)}' for step, value
                                                    in slot.transform.steps.items()))
        out.line(f'  {slot.name}: {slot.topic} ({interface_name(slot.reader.msg_type)}), '
                 f'shape {list(slot.space.shape)} {slot.space.dtype}; {"; ".join(details)}')
    rows = []
    for position, slot in enumerate(spec.observations):
        where = slot.name if layout.kind == 'dict' else f'[{position}] {slot.name}'
        if slot.labels is None:  # an image
            rows.append((where, 'all', f'image {list(slot.space.shape)}',
                         _number(slot.space.low.min()), _number(slot.space.high.max())))
            continue
        rows += [(where, i, label, slot.space.low.flat[i], slot.space.high.flat[i])
                 for i, label in enumerate(slot.labels)]
    if layout.act_in_obs:
        action_labels = [f'{group.name}: {label}' for group in spec.actions
                         for label in group.writer.labels]
        low, high = spec.action_low, spec.action_high
        length = config.act_buf_len
        for row in range(length):
            age = 'the latest action' if row == length - 1 else \
                f'the action {length - 1 - row} step(s) before the latest'
            if layout.kind == 'dict':
                where = f'{ACTION_BUFFER_KEY}[{row}]'
            else:
                where = f'[{len(spec.observations) + row}] action'
            rows += [(where, j, f'{label} ({age})', low[j], high[j])
                     for j, label in enumerate(action_labels)]
    out.line('  layout (runs of like values folded into one line):')
    out.table([('key', 'index', 'value', 'low', 'high')] + _fold(rows))


def _fold(rows: list[tuple]) -> list[tuple[str, ...]]:
    """Fold runs (same key, same bounds, labels whose numbers step evenly) into one row."""
    folded: list[tuple[str, ...]] = []
    run: list[tuple] = []

    def flush() -> None:
        if not run:
            return
        where, first, label, low, high = run[0]
        if len(run) == 1 or not isinstance(first, int):
            folded.append((where, str(first), label,
                           low if isinstance(low, str) else _number(low),
                           high if isinstance(high, str) else _number(high)))
        else:
            folded.append((where, f'{first}-{run[-1][1]}', f'{label} ... {run[-1][2]}',
                           _number(low), _number(high)))
        run.clear()

    for row in rows:
        if run and _continues(run, row):
            run.append(row)
        else:
            flush()
            run.append(row)
    flush()
    return folded


def _continues(run: list[tuple], row: tuple) -> bool:
    where, index, label, low, high = row
    last = run[-1]
    if where != last[0] or not isinstance(index, int) or index != last[1] + 1 \
            or low != last[3] or high != last[4]:
        return False
    texts, numbers = _split(label)
    last_texts, last_numbers = _split(last[2])
    if texts != last_texts or not numbers or len(numbers) != len(last_numbers):
        return False
    step = [a - b for a, b in zip(numbers, last_numbers)]
    if not any(step):
        return False
    if len(run) > 1:
        _, before = _split(run[-2][2])
        return step == [a - b for a, b in zip(last_numbers, before)]
    return True


def _split(label: str) -> tuple[list[str], list[int]]:
    parts = re.split(r'(\d+)', label)
    return parts[0::2], [int(number) for number in parts[1::2]]


def _number(value: Any) -> str:
    value = float(value)
    if np.isinf(value):
        return 'inf' if value > 0 else '-inf'
    return f'{value:.6g}'


def _value(value: Any) -> str:
    if callable(value) and hasattr(value, '__module__'):
        return f'{value.__module__}:{getattr(value, "__qualname__", value)}'
    if isinstance(value, np.ndarray):
        return str(value.tolist())
    if isinstance(value, float):
        return _number(value)
    if hasattr(value, '__dataclass_fields__'):  # truncate_on_stale
        return ', '.join(f'{name} {_value(getattr(value, name))}'
                         for name in value.__dataclass_fields__)
    if isinstance(value, tuple):
        return str(list(value))
    if value == '':
        return "''"
    return str(value)


class _Text:
    """Lines, with aligned tables."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def line(self, text: str) -> None:
        self._lines.append(text)

    def section(self, title: str) -> None:
        self._lines += ['', title]

    def table(self, rows: Sequence[Sequence[Any]]) -> None:
        rows = [[str(cell) for cell in row] for row in rows]
        if not rows:
            return
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            cells = (cell.ljust(width) for cell, width in zip(row, widths))
            self._lines.append(('  ' + '  '.join(cells)).rstrip())

    def text(self) -> str:
        return '\n'.join(self._lines) + '\n'


if __name__ == '__main__':
    sys.exit(main())
