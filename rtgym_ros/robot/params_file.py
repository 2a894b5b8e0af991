"""
Read a robot config, a ROS 2 params file, exactly as rcl reads it for the env's node.

The same YAML serves ``ros2 launch``, ``--ros-args --params-file`` and ``gym.make(...,
robot_config=FILE)``, so one reader serves all three: rcl itself, given the node's name and
namespace (:func:`rtgym_ros.ros.parameters.read_node_parameters`). Scalars are typed as rcl
types them (``1e9`` a double, ``1_000`` and ``~`` strings, ``y`` a bool), sections match the
node's full name (``/r2/rtgym_env``, ``/*/rtgym_env``, ``/**``) and merge in file order, and
what rcl refuses (aliases, ``<<`` merge keys, keys beside ``ros__parameters``, mixed lists) is
refused. Dotted names (``actions.torque.topic``) and nested mappings become one nested dict.
A config names data, never code to run: rcl has no YAML tags that construct objects.
"""

import os
from pathlib import Path
import re
import sys
import tempfile
from typing import Any, Collection
import warnings

from rtgym_ros.ros.parameters import (named, params_files, rcl_readable, read_node_parameters,
                                      remap_args)
from rtgym_ros.ros.rcl_parameters import bounded
import yaml

# What errors call the ROS arguments of the process's own command line.
COMMAND_LINE = 'the --ros-args of the command line (sys.argv)'
# Section names listed in an error message, at most.
_MAX_SECTIONS = 10
# rcl's reasons end with the line (from 1) of the YAML event it refused.
_RCL_LINE = re.compile(r'rcl refuses it: .* at line(?:_num)? (\d+)$')
# On a YAML syntax error rcl names only the line of the last event it read.
_RCL_SYNTAX = 'rcl refuses it: Error parsing a event'
# Line breaks as libyaml counts them.
_LINE_BREAKS = re.compile('\r\n|[\r\n\x85\u2028\u2029]')
# libyaml itself where PyYAML has it: its reason for a syntax error is the one rcl read.
_LOADER = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)


def load_params_file(path: str | Path, *, node_name: str, namespace: str = '',
                     source: str = 'robot_config', domain_id: int | None = None,
                     command_line: bool = False,
                     known: Collection[str] | None = None) -> dict[str, Any]:
    """
    Return the parameters rcl gives the env's node ``namespace/node_name`` from ``path``, nested.

    The node is the one the env's runtime creates: the remap rules of ``sys.argv`` apply to
    it (``-r __ns:=/r5`` moves it), so the file is read for the node's full name after them.
    With ``command_line``, so do the parameters of ``sys.argv``, after the file's
    (:func:`command_line_parameters`, which takes ``known``).

    rcl reads the file for a bare node in a child process, in ``domain_id`` (None:
    ``ROS_DOMAIN_ID``), with discovery off; the child is gone when this returns.

    :raises FileNotFoundError: the file cannot be read (missing, a directory, no permission).
    :raises ValueError: not a text file, rcl refuses it, or no section applies to the node.
    """
    path = Path(path)
    with tempfile.TemporaryDirectory(prefix='rtgym_ros_params_') as directory:
        readable = rcl_readable(str(path), directory)  # a pipe is read once, here
        text = _read_text(Path(readable), shown=path, source=source)
        # The node as the env's runtime makes it: named by a local rule, under the remap rules
        # of this process's command line, which rclpy.init(args=None) applies.
        args = ['rtgym_ros', *remap_args(getattr(sys, 'argv', [])), '--ros-args',
                '--params-file', readable]
        try:
            given = read_node_parameters(args, default_node_name=node_name,
                                         namespace=namespace, node_args=named(node_name),
                                         source=f'{source} {path}', domain_id=domain_id)
        except ValueError as error:
            raise ValueError(f'{error}{_where_refused(str(error), text)}') from None
        if not given.parameters:
            raise ValueError(f'{source} {path}: no parameters for node {given.full_name!r}; '
                             f'the file has sections {section_names(text)} (a section applies '
                             "to the node's full name, /* stands for one namespace level, /** "
                             "for any; rclpy's own start_type_description_service is not "
                             'counted)')
        if not command_line or not has_ros_args(getattr(sys, 'argv', [])):
            return given.parameters
        return command_line_parameters(node_name=node_name, namespace=namespace,
                                       domain_id=domain_id, params_file=readable,
                                       file_parameters=given.parameters, known=known)


def has_ros_args(args: list[str]) -> bool:
    """Return whether a command line (``sys.argv``) has ROS arguments rcl gives a node."""
    return '--ros-args' in args[1:]


def command_line_parameters(*, node_name: str, namespace: str = '',
                            domain_id: int | None = None, params_file: str | None = None,
                            file_parameters: dict[str, Any] | None = None,
                            known: Collection[str] | None = None) -> dict[str, Any]:
    """
    Return the parameters rcl gives the env's node from ``params_file`` and ``sys.argv``, nested.

    The env's node gets the ROS arguments of the process's command line (``python train.py
    --ros-args -p time_step_duration:=0.05 --params-file F``: rclpy.init(args=None) reads
    them); its config gets them too, after ``params_file``, in rcl's order: a later
    ``--params-file`` or ``-p`` wins, and ``-p NODE:name:=value`` applies to NODE only.

    rcl gives ``-p k:=v`` and ``/**`` sections to every node of the process (``ros2 launch``
    writes a ``Node(parameters=[{...}])`` without ``name=`` under ``/**``), and an rclpy node
    ignores those it does not declare: with ``known``, a parameter of the command line that
    is not one of them, nor one of ``file_parameters`` (``params_file``'s), is left out with
    a warning naming it.

    :raises ValueError: rcl refuses an argument (``-p novalue``, ``--log-level nonsense``, a
        params file), or a params file of the command line is not a regular file (a pipe is
        read once, and every env of the process reads it).
    """
    argv = [str(arg) for arg in getattr(sys, 'argv', [])]
    for named_file in params_files(argv):
        if os.path.exists(named_file) and (not os.path.isfile(named_file) or os.path.abspath(
                named_file).startswith(('/dev/', '/proc/'))):  # missing: as rcl says it
            raise ValueError(f'{COMMAND_LINE}: --params-file {bounded(repr(named_file))} is '
                             'not a regular file: the env reads it, and so does every other '
                             'env of the process (a pipe gives its bytes once): give a file, '
                             'or robot_config=')
    first = [] if params_file is None else ['--ros-args', '--params-file', params_file, '--']
    given = read_node_parameters(['rtgym_ros', *first, *argv[1:]],
                                 default_node_name=node_name, namespace=namespace,
                                 node_args=named(node_name), source=COMMAND_LINE,
                                 domain_id=domain_id, name_files=True)
    if known is None:
        return given.parameters
    others = sorted(set(given.parameters) - set(file_parameters or {}) - set(known))
    if others:
        warnings.warn(f'{COMMAND_LINE}: parameters {others} are not env config keys: the env '
                      'ignores them, as an rclpy node ignores parameters it does not declare '
                      '(rcl gives -p k:=v and /** sections to every node of the process); '
                      'give them to your node by name (-p my_node:k:=v, a section /my_node) '
                      'to keep them from the env')
    return {key: value for key, value in given.parameters.items() if key not in others}


def _read_text(path: Path, *, shown: Path, source: str) -> str:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise FileNotFoundError(f'{source}: cannot read {shown}: '
                                f'{error.strerror or error}') from None
    # libyaml's choice: UTF-16 after its byte order mark, else UTF-8.
    encoding = 'UTF-16' if data[:2] in (b'\xff\xfe', b'\xfe\xff') else 'UTF-8'
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as error:
        raise ValueError(f'{source} {shown}: not a params file: not {encoding} text '
                         f'(byte {error.start})') from None
    if '\0' in text:
        raise ValueError(f'{source} {shown}: not a params file: binary data (a NUL byte at '
                         f'{text.index(chr(0))})')
    return text


def _where_refused(reason: str, text: str) -> str:
    """Return the line of ``text`` rcl's ``reason`` names (its key), or libyaml's own reason."""
    if _RCL_SYNTAX in reason:
        try:
            for _ in yaml.parse(text, Loader=_LOADER):
                pass
        except yaml.MarkedYAMLError as error:
            mark = error.problem_mark
            return f' ({error.problem} at line {mark.line + 1}, column {mark.column + 1})'
        except yaml.reader.ReaderError as error:  # a character YAML does not allow
            line = len(_LINE_BREAKS.split(text.split(chr(error.character))[0]))
            return f' (character #x{error.character:04x} at line {line}: {error.reason})'
        except yaml.YAMLError:
            pass
        return ''
    found = _RCL_LINE.search(reason)
    lines = _LINE_BREAKS.split(text.lstrip('\ufeff'))
    if found is None or not 1 <= int(found.group(1)) <= len(lines):
        return ''
    return f' (line {found.group(1)}: {bounded(repr(lines[int(found.group(1)) - 1].strip()))})'


def section_names(text: str) -> list[str]:
    """
    Return the node names of the file's sections, as written (for error messages).

    Empty when PyYAML cannot compose the file, as with mappings nested deeper than Python's
    recursion limit allows PyYAML, which rcl accepts.
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return []
    names: list[str] = []
    _collect_sections(root, [], names)
    if len(names) > _MAX_SECTIONS:
        names = names[:_MAX_SECTIONS] + [f'... {len(names) - _MAX_SECTIONS} more']
    return names


def _collect_sections(node: Any, path: list[str], names: list[str]) -> None:
    if not isinstance(node, yaml.MappingNode) or len(path) > 8:
        return
    for key, value in node.value:
        name = str(key.value)[:100]
        if name.startswith('ros__parameters'):  # rcl compares the first 15 characters
            names.append('/'.join(path))
        else:
            _collect_sections(value, [*path, name], names)
