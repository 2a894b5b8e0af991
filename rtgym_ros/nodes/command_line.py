"""
The command line of a node's console script: ``--help``, and nothing else outside ``--ros-args``.

A node takes its settings as ROS parameters (``--ros-args -p NAME:=VALUE``, ``--params-file``),
which rcl parses. What is left is ours: ``-h``/``--help`` prints the parameters (types,
defaults, descriptions) and exits before anything starts; any other argument is refused, so
``agent --policy random`` is not silently run with the default policy.
"""

from collections.abc import Iterable, Sequence
import textwrap
from typing import Any, NamedTuple

HELP_FLAGS = ('-h', '--help')
_WIDTH = 79


class ParameterHelp(NamedTuple):
    """One line of a node's parameter table."""

    name: str
    kind: str  # the type, and its range where it has one: 'double > 0'
    default: str
    description: str


def own_arguments(args: Sequence[str]) -> list[str]:
    """
    Return the arguments of ``args`` (a full ``sys.argv``) that are not rcl's.

    rcl's part runs from each ``--ros-args`` to the next ``--`` (or the end).
    """
    own = []
    in_ros_args = False
    for arg in args[1:]:
        if arg == '--ros-args':
            in_ros_args = True
        elif in_ros_args and arg == '--':
            in_ros_args = False
        elif not in_ros_args:
            own.append(arg)
    return own


def wants_help(args: Sequence[str], *, prog: str) -> bool:
    """
    Say whether the command line asks for help.

    :param args: The full command line (``sys.argv``).
    :param prog: The console script's name, for the error message.
    :raises ValueError: An argument outside ``--ros-args`` that is not ``-h``/``--help``.
    """
    own = own_arguments(args)
    unknown = [arg for arg in own if arg not in HELP_FLAGS]
    if unknown:
        # rcl's old form of a remap, NAME:=VALUE outside --ros-args: the rule must say so.
        remap = ('; a remap is given as --ros-args -r NAME:=VALUE' if ':=' in unknown[0]
                 else '')
        raise ValueError(
            f'unknown argument {unknown[0]!r}: parameters are given as --ros-args -p '
            f'NAME:=VALUE or --ros-args --params-file FILE{remap} (see {prog} --help)')
    return bool(own)


def type_name(default: Any) -> str:
    """Name the ROS parameter type of ``default`` as the docs do (``double``, ``string``...)."""
    if isinstance(default, bool):
        return 'bool'
    if isinstance(default, int):
        return 'integer'
    if isinstance(default, float):
        return 'double'
    if isinstance(default, str):
        return 'string'
    raise TypeError(f'no ROS parameter type for a default of type {type(default).__name__}')


def default_text(default: Any) -> str:
    """Write ``default`` as it would be given on the command line (``true``, ``''``, ``1.0``)."""
    if isinstance(default, bool):
        return 'true' if default else 'false'
    if isinstance(default, str):
        return repr(default)
    return str(default)


def format_help(*, usage: Iterable[str], summary: str, parameters: Iterable[ParameterHelp],
                epilog: str = '') -> str:
    """
    Lay out a node's ``--help``: usage lines, what it does, one entry per parameter.

    :param usage: Command lines, the first after ``usage:``, the others aligned under it.
    :param summary: A paragraph: what the node does.
    :param parameters: The parameter table.
    :param epilog: A closing paragraph (where the docs are, what else is accepted).
    """
    usage = list(usage)
    lines = [f'usage: {usage[0]}'] + [f'       {line}' for line in usage[1:]]
    lines += ['', *_wrap(summary), '',
              'options:', '  -h, --help  print this help and exit', '',
              'parameters (--ros-args -p NAME:=VALUE, or --ros-args --params-file FILE):']
    for parameter in parameters:
        lines.append(f'  {parameter.name} ({parameter.kind}, default {parameter.default})')
        lines += _wrap(parameter.description, indent=' ' * 6)
    if epilog:
        lines += ['', *_wrap(epilog)]
    return '\n'.join(lines) + '\n'


def _wrap(text: str, *, indent: str = '') -> list[str]:
    # Names such as Stable-Baselines3 or sensor_msgs/JointState stay whole.
    return textwrap.wrap(text, _WIDTH, initial_indent=indent, subsequent_indent=indent,
                         break_on_hyphens=False)
