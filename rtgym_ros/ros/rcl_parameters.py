"""
rcl reads the parameters of one node: run as a script in a child process by ``parameters.py``.

A bare rcl node in a private context reads its parameter overrides, the answer goes back on
stdout, and the node and its context are destroyed. The parent starts this process with
``ROS_AUTOMATIC_DISCOVERY_RANGE=OFF``, so its DDS participant discovers no one and no one sees
the node. It runs in a child because destroying a participant can block for good inside Fast
DDS while holding the GIL (eProsima/Fast-DDS#6513): the parent bounds the wait, and once the
answer is out an alarm ends a teardown that does not finish.

Only rclpy and the standard library are imported here: the parent runs this file without
importing rtgym_ros.
"""

import os
import pickle
import re
import signal
import sys
from typing import Any

import rclpy
from rclpy.context import Context
from rclpy.exceptions import NameValidationException
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_rosout_default
from rclpy.signals import SignalHandlerOptions
from rclpy.validate_namespace import validate_namespace
from rclpy.validate_node_name import validate_node_name

# Declared by every rclpy node on its own; not part of a robot config.
_BUILTIN_PARAMETERS = ('start_type_description_service',)
# Longest part of an rcl error message repeated in ours.
_MAX_REASON = 300
# Seconds the node and context get to go once the answer is out (they take milliseconds).
_TEARDOWN_SECONDS = 5


def read(request: dict[str, Any]) -> None:
    """
    Answer ``request`` (the keyword arguments of ``read_node_parameters``) on stdout.

    A ``ValueError`` the parent should raise is answered as ``('error', text)``; anything
    else escapes, and the parent reports the exit code and stderr.
    """
    source = request['source']
    context = Context()
    try:
        rclpy.init(args=request['args'], context=context, domain_id=request['domain_id'],
                   signal_handler_options=SignalHandlerOptions.NO)
    except (_rclpy.RCLError, _rclpy.UnknownROSArgsError) as error:
        files = request['args'].count('--params-file')
        reason = rcl_reason(error, name_file=files > 1 or request['name_files'])
        if isinstance(error, _rclpy.UnknownROSArgsError):  # its text is the list, no more
            reason = f'unknown ROS arguments {reason}'
        _answer(('error', f'{source}: rcl refuses it: {reason}'))
        return
    node = None
    try:
        node = _rcl_node(context, request['default_node_name'], request['namespace'],
                         request['node_args'], source=source)
        with node:
            overrides = node.get_parameters(Parameter)
            name, namespace = node.get_node_name(), node.get_namespace()
        _answer(('ok', name, namespace, _values(overrides, source=source)))
    except ValueError as error:
        _answer(('error', str(error)))
    finally:
        if hasattr(signal, 'alarm'):  # SIGALRM's default action ends the process, GIL or not
            signal.alarm(_TEARDOWN_SECONDS)
        if node is not None:
            node.destroy_when_not_in_use()
        context.try_shutdown()
        context.destroy()


def _answer(answer: tuple) -> None:
    """Send ``('ok', node name, namespace, {dotted name: value})`` or ``('error', text)``."""
    sys.stdout.buffer.write(pickle.dumps(answer))
    sys.stdout.buffer.flush()


def _values(overrides: dict[str, Parameter], *, source: str) -> dict[str, Any]:
    values = {}
    for name, parameter in overrides.items():
        if name in _BUILTIN_PARAMETERS:
            continue
        if parameter.type_ == Parameter.Type.NOT_SET:
            raise ValueError(f'{source}: parameter {bounded(repr(name))} has no value rcl can '
                             'type (an empty list [] or mapping {}); ROS nodes refuse it too: '
                             'give it values or remove it')
        values[name] = _plain(parameter)
    return values


def _rcl_node(context: Context, name: str, namespace: str, node_args: list[str] | None, *,
              source: str) -> Any:
    """
    Create a bare rcl node: what ``rclpy.node.Node`` reads its parameter overrides from.

    Without rosout, parameter services, a ``/parameter_events`` publisher or declared
    parameters: nothing is published while the parameters are read.
    """
    try:
        with context.handle:
            return _rclpy.Node(name, namespace, context.handle, node_args, True, False,
                               qos_profile_rosout_default.get_c_qos_profile())
    except (ValueError, _rclpy.RCLError) as error:
        reason = rcl_reason(error)
        try:  # the more specific reason, as rclpy.node.Node gives it
            validate_node_name(name)
            validate_namespace(namespace if namespace.startswith('/') else f'/{namespace}')
        except NameValidationException as invalid:
            reason = bounded(str(invalid).splitlines()[0])
        raise ValueError(f'{source}: cannot name a node {bounded(repr(name))} in namespace '
                         f'{bounded(repr(namespace))}: {reason}') from None


def rcl_reason(error: BaseException, *, name_file: bool = False) -> str:
    """
    Return what rcl said, without its source locations, bounded in length.

    :param name_file: keep the params file rcl refused (one of several on the command line).
    """
    text = str(error)
    text = re.sub(r',? at [^,]*\.(c|cpp):\d+', '', text)
    text = text.replace('failed to initialize rcl: ', '')
    found = re.search(r"Couldn't parse params file: '--params-file (.*?)'\. Error: (.*)", text,
                      re.DOTALL)
    if found:
        text = f'{found.group(1)}: {found.group(2)}' if name_file else found.group(2)
    return bounded(' '.join(text.split()))


def bounded(text: str) -> str:
    return text if len(text) <= _MAX_REASON else text[:_MAX_REASON - 3] + '...'


def _plain(parameter: Parameter) -> Any:
    """Parameter value as YAML would have given it (lists, not array.array)."""
    value = parameter.value
    if parameter.type_ in (Parameter.Type.BYTE_ARRAY, Parameter.Type.BOOL_ARRAY,
                           Parameter.Type.INTEGER_ARRAY, Parameter.Type.DOUBLE_ARRAY,
                           Parameter.Type.STRING_ARRAY):
        return list(value)
    return value


if __name__ == '__main__':
    read(pickle.load(sys.stdin.buffer))
    os._exit(0)  # the answer is out and rcl is shut down; skip the interpreter's slow exit
