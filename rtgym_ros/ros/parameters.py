"""
Parameters as rcl gives them to one node: ``--ros-args --params-file F -p k:=v -r __ns:=/r1``.

rcl itself parses the arguments and picks the parameters of the node, through a throw-away rcl
node in a child process (``rcl_parameters.py``) whose DDS participant discovers no one. So the
agent's command line, ``ros2 launch`` and ``gym.make(..., robot_config=FILE)`` see the same
values: rcl's scalar typing, sections matched on the node's full name (with ``/*`` and
``/**``), rcl's merge order, aliases refused. In this process, the participant's teardown
could block the caller for good (see ``rcl_parameters.py``). The child is a fork of a process
that imported rclpy once (``forked_reads.py``: about 20 ms a read), else a fresh interpreter
(about 0.17 s, most of it rclpy's import).
"""

from dataclasses import dataclass
import os
from pathlib import Path
import pickle
import re
import subprocess
import sys
import tempfile
from typing import Any, Iterator

from rtgym_ros.ros import forked_reads
from rtgym_ros.ros.rcl_parameters import bounded

# Seconds to wait for rcl's answer: an interpreter start, rclpy's import, rcl's parse.
READ_TIMEOUT = 60.0
_READER = Path(__file__).with_name('rcl_parameters.py')
# Lines of the reader's stderr quoted when it fails.
_STDERR_LINES = 5
# Terminal colour codes: Fast DDS colours its log lines, which an error message must not carry.
_ANSI_ESCAPE = re.compile(r'\x1b\[[0-9;]*[A-Za-z]')
# rcl's ROS arguments that take a value (rcl/arguments.c), besides -r/--remap.
_VALUED_ARGS = ('-p', '--param', '--params-file', '-e', '--enclave', '--log-level',
                '--log-file-name', '--log-config-file')


class ParametersUnreadable(RuntimeError):
    """rcl gave no answer: the process reading the parameters failed, or hung and was stopped."""


class ParametersReadTimeout(ParametersUnreadable, TimeoutError):
    """rcl gave no answer within the read's timeout."""


@dataclass
class NodeParameters:
    """What a command line says about a node: its name, namespace and parameters."""

    node_name: str
    namespace: str
    parameters: dict[str, Any]

    @property
    def full_name(self) -> str:
        return f'{self.namespace.rstrip("/")}/{self.node_name}'


def named(name: str) -> list[str]:
    """Return local arguments that give a node exactly ``name`` (over a global __node remap)."""
    return ['--ros-args', '-r', f'__node:={name}']


def remap_args(args: list[str]) -> list[str]:
    """
    Return the remap rules of a command line as rcl reads them, in their order.

    rclpy.init(args=None) applies those of ``sys.argv`` to every node of the process: a
    ``-r __ns:=/r5`` moves the env's node, so its params file is read for the moved node.
    Outside ``--ros-args``, rcl still takes ``NAME:=VALUE`` as a remap rule (deprecated form).
    """
    kept: list[str] = []
    for flag, value in _valued_args(args):
        if flag == ':=':
            kept.append(value)
        elif flag in ('-r', '--remap'):
            kept += ['--ros-args', '-r', value, '--']
    return kept


def params_files(args: list[str]) -> list[str]:
    """Return the ``--params-file`` arguments of a command line, in their order."""
    return [value for flag, value in _valued_args(args) if flag == '--params-file']


def _valued_args(args: list[str]) -> Iterator[tuple[str, str]]:
    """Yield rcl's valued arguments of a command line, and ``(':=', rule)`` outside them."""
    in_ros_args = False
    rest = iter(args[1:])
    for arg in rest:
        if not in_ros_args:
            if arg == '--ros-args':
                in_ros_args = True
            elif ':=' in str(arg):
                yield ':=', str(arg)
        elif arg == '--':
            in_ros_args = False
        elif arg in ('-r', '--remap', *_VALUED_ARGS):
            yield arg, str(next(rest, ''))


def read_node_parameters(args: list[str], *, default_node_name: str, namespace: str = '',
                         source: str = 'parameters', domain_id: int | None = None,
                         node_args: list[str] | None = None, name_files: bool = False,
                         timeout: float = READ_TIMEOUT) -> NodeParameters:
    """
    Return the parameters that rcl gives a node called ``default_node_name`` (or its remap).

    :param args: a command line (``sys.argv``); rcl reads its ``--ros-args`` part.
    :param namespace: the node's namespace unless ``args`` remaps it (``-r __ns:=/r1``).
    :param source: what errors name (a file, the command line).
    :param domain_id: the domain of the throw-away node (None: ``ROS_DOMAIN_ID``).
    :param node_args: the node's own (local) arguments, as ``Node(cli_args=...)`` takes them.
    :param name_files: errors name the params file rcl refused even if ``args`` has only one
        (``source`` does not name it).
    :param timeout: seconds to wait for rcl's answer.
    :raises ValueError: rcl refuses the arguments (the file's YAML, a mixed list, an alias),
        the name or namespace is invalid, or a parameter has no type (``[]``, ``{}``).
    :raises ParametersReadTimeout: no answer within ``timeout`` (a ``TimeoutError``).
    :raises ParametersUnreadable: the child process failed (rclpy not importable there, a
        crash); a ``RuntimeError``.
    """
    with tempfile.TemporaryDirectory(prefix='rtgym_ros_params_') as directory:
        args = [str(arg) for arg in args]
        copies = {}  # what the command line named, by the copy rcl reads (of a pipe)
        for index in range(1, len(args)):
            if args[index - 1] == '--params-file':
                readable = rcl_readable(args[index], directory)
                if readable != args[index]:
                    copies[readable], args[index] = args[index], readable
        request = {'args': args, 'default_node_name': default_node_name,
                   'namespace': namespace, 'source': source, 'domain_id': domain_id,
                   'node_args': node_args, 'name_files': name_files}
        answer = _ask_rcl(request, timeout=timeout)
    if answer[0] == 'error':
        message = answer[1]
        for readable, named in copies.items():
            message = message.replace(readable, named)
        raise ValueError(message)
    _, name, namespace, values = answer
    return NodeParameters(node_name=name, namespace=namespace,
                          parameters=unflatten(values, source=source))


def rcl_readable(path: str, directory: str) -> str:
    """
    Return a path where the reading child finds the bytes ``path`` holds for this process.

    ``/dev/stdin`` and ``/dev/fd/N`` (``--params-file <(cat F)``) are this process's: the child
    inherits neither its descriptors nor its stdin, and a pipe gives its bytes once. They, and
    anything but a regular file, are read once into a copy in ``directory``.
    """
    if os.path.isfile(path) and not os.path.abspath(path).startswith(('/dev/', '/proc/')):
        return path
    try:
        with open(path, 'rb') as stream:
            data = stream.read()
    except OSError:
        return path  # missing or unreadable: as rcl says it
    copy = os.path.join(directory, f'params_file_{len(os.listdir(directory))}.yaml')
    with open(copy, 'wb') as stream:
        stream.write(data)
    return copy


def _ask_rcl(request: dict[str, Any], *, timeout: float) -> tuple:
    """Run the reader in a child process and return its answer, killing it if it hangs."""
    source = request['source']
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE='OFF')
    data = pickle.dumps(request)
    out, err, returncode, timed_out = (forked_reads.run_reader(_READER, data, env, timeout)
                                       or _run_in_a_fresh_interpreter(data, env, timeout))
    try:
        answer = pickle.loads(out)
    except (pickle.UnpicklingError, EOFError, ValueError):
        answer = None
    if answer is not None:
        if err:  # what rcl printed (warnings) reaches the user, as in-process it would
            sys.stderr.write(err.decode(errors='replace'))
        return answer
    if timed_out:
        raise ParametersReadTimeout(
            f'{source}: rcl did not read the parameters within {timeout:g} s (the process '
            'reading them was stopped)')
    said = _ANSI_ESCAPE.sub('', err.decode(errors='replace')).strip().splitlines()
    said = said[-_STDERR_LINES:]
    raise ParametersUnreadable(
        f'{source}: the process reading the parameters through rcl exited with code '
        f'{returncode} and no answer' + (': ' + bounded(' | '.join(said)) if said else ''))


def _run_in_a_fresh_interpreter(data: bytes, env: dict[str, str],
                                timeout: float) -> forked_reads.ReaderRun:
    """Run the reader in a new interpreter with ``data`` on its stdin; kill it if it hangs."""
    child = subprocess.Popen([sys.executable, '-c', forked_reads.BOOT, str(_READER)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
    timed_out = False
    try:
        try:
            out, err = child.communicate(data, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            child.kill()
            out, err = child.communicate()
    finally:
        if child.poll() is None:  # interrupted (Ctrl-C): leave no process behind
            child.kill()
            child.wait()
    return forked_reads.ReaderRun(out, err, child.returncode, timed_out)


def unflatten(parameters: dict[str, Any], *, source: str = 'parameters') -> dict[str, Any]:
    """
    Nest dotted names: ``{'a.b': 1, 'a': {'c': 2}}`` -> ``{'a': {'b': 1, 'c': 2}}``.

    rcl accepts ``a: 1`` beside ``a.b: 2`` (two parameters); as one nested config they clash,
    and are refused whichever comes first. So are names with an empty part (``.a``, ``a.``,
    ``a..b``), which rcl keeps as written and no nested key can stand for.
    """
    nested: dict[str, Any] = {}
    for name, value in parameters.items():
        parts = str(name).split('.')
        if '' in parts:
            raise ValueError(f'{source}: parameter {bounded(repr(name))} has an empty part: a '
                             'dot at its start or end, or two in a row')
        node = nested
        for depth, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f'{source}: parameter {bounded(repr(name))} nests under '
                                 f'{bounded(repr(".".join(parts[:depth + 1])))}, which holds '
                                 'a value')
        leaf = unflatten(value, source=source) if isinstance(value, dict) \
            else _check_list(name, value)
        before = node.get(parts[-1])
        if isinstance(before, dict) and isinstance(leaf, dict):
            merge_nested(before, leaf)
        elif isinstance(before, dict) or (parts[-1] in node and isinstance(leaf, dict)):
            raise ValueError(f'{source}: parameter {bounded(repr(name))} is given a value '
                             'and also nested parameters (a.b beside a)')
        else:
            node[parts[-1]] = leaf
    return nested


def _check_list(name: str, value: Any) -> Any:
    """Refuse lists that mix types ([-10, 2.5]) as rcl does, and say how to fix them."""
    if isinstance(value, list):
        kinds = {type(item).__name__ for item in value}
        if len(kinds) > 1:
            hint = ' (write every number with a decimal point)' if kinds == {'int', 'float'} \
                else ''
            raise ValueError(f'parameter {name!r}: a list must hold one type for rcl and '
                             f'ros2 launch, got {sorted(kinds)}{hint}')
    return value


def merge_nested(into: dict[str, Any], new: dict[str, Any]) -> None:
    for name, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(name), dict):
            merge_nested(into[name], value)
        else:
            into[name] = value
