"""
Parameters as rcl gives them to one node: ``--ros-args --params-file F -p k:=v -r __ns:=/r1``.

rcl itself parses the arguments and picks the parameters of the node, through a throw-away rcl
node in a private context (no publisher, no service; gone when the parameters are read). So
the agent's command line, ``ros2 launch`` and ``gym.make(..., robot_config=FILE)`` see the same
values: rcl's scalar typing, sections matched on the node's full name (with ``/*`` and
``/**``), rcl's merge order, aliases refused.
"""

from dataclasses import dataclass
import re
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


@dataclass
class NodeParameters:
    """What a command line says about a node: its name, namespace and parameters."""

    node_name: str
    namespace: str
    parameters: dict[str, Any]

    @property
    def full_name(self) -> str:
        return f'{self.namespace.rstrip("/")}/{self.node_name}'


def read_node_parameters(args: list[str], *, default_node_name: str, namespace: str = '',
                         source: str = 'parameters',
                         domain_id: int | None = None) -> NodeParameters:
    """
    Return the parameters that rcl gives a node called ``default_node_name`` (or its remap).

    :param args: a command line (``sys.argv``); rcl reads its ``--ros-args`` part.
    :param namespace: the node's namespace unless ``args`` remaps it (``-r __ns:=/r1``).
    :param source: what errors name (a file, the command line).
    :param domain_id: the domain of the throw-away node (None: ``ROS_DOMAIN_ID``).
    :raises ValueError: rcl refuses the arguments (the file's YAML, a mixed list, an alias),
        the name or namespace is invalid, or a parameter has no type (``[]``, ``{}``).
    """
    context = Context()
    try:
        rclpy.init(args=args, context=context, domain_id=domain_id,
                   signal_handler_options=SignalHandlerOptions.NO)
    except (_rclpy.RCLError, _rclpy.UnknownROSArgsError) as error:
        raise ValueError(f'{source}: rcl refuses it: {rcl_reason(error)}') from None
    try:
        node = _rcl_node(context, default_node_name, namespace, source=source)
        try:
            with node:
                overrides = node.get_parameters(Parameter)
                name, namespace = node.get_node_name(), node.get_namespace()
        finally:
            node.destroy_when_not_in_use()
    finally:
        context.try_shutdown()
        context.destroy()
    flat = {}
    for parameter_name, parameter in overrides.items():
        if parameter_name in _BUILTIN_PARAMETERS:
            continue
        if parameter.type_ == Parameter.Type.NOT_SET:
            raise ValueError(f'{source}: parameter {_bounded(repr(parameter_name))} has no '
                             'value rcl can type (an empty list [] or mapping {}); ROS nodes '
                             'refuse it too: give it values or remove it')
        flat[parameter_name] = _plain(parameter)
    return NodeParameters(node_name=name, namespace=namespace,
                          parameters=unflatten(flat, source=source))


def _rcl_node(context: Context, name: str, namespace: str, *, source: str) -> Any:
    """
    Create a bare rcl node: what ``rclpy.node.Node`` reads its parameter overrides from.

    Without rosout, parameter services, a ``/parameter_events`` publisher or declared
    parameters: nothing is published while the parameters are read.
    """
    try:
        with context.handle:
            return _rclpy.Node(name, namespace, context.handle, None, True, False,
                               qos_profile_rosout_default.get_c_qos_profile())
    except (ValueError, _rclpy.RCLError) as error:
        reason = rcl_reason(error)
        try:  # the more specific reason, as rclpy.node.Node gives it
            validate_node_name(name)
            validate_namespace(namespace if namespace.startswith('/') else f'/{namespace}')
        except NameValidationException as invalid:
            reason = _bounded(str(invalid).splitlines()[0])
        raise ValueError(f'{source}: cannot name a node {_bounded(repr(name))} in namespace '
                         f'{_bounded(repr(namespace))}: {reason}') from None


def rcl_reason(error: BaseException) -> str:
    """Return what rcl said, without its source locations, bounded in length."""
    text = str(error)
    text = re.sub(r',? at [^,]*\.(c|cpp):\d+', '', text)
    text = text.replace('failed to initialize rcl: ', '')
    found = re.search(r"Couldn't parse params file: .*?\. Error: (.*)", text, re.DOTALL)
    if found:
        text = found.group(1)
    return _bounded(' '.join(text.split()))


def _bounded(text: str) -> str:
    return text if len(text) <= _MAX_REASON else text[:_MAX_REASON - 3] + '...'


def _plain(parameter: Parameter) -> Any:
    """Parameter value as YAML would have given it (lists, not array.array)."""
    value = parameter.value
    if parameter.type_ in (Parameter.Type.BYTE_ARRAY, Parameter.Type.BOOL_ARRAY,
                           Parameter.Type.INTEGER_ARRAY, Parameter.Type.DOUBLE_ARRAY,
                           Parameter.Type.STRING_ARRAY):
        return list(value)
    return value


def unflatten(parameters: dict[str, Any], *, source: str = 'parameters') -> dict[str, Any]:
    """
    Nest dotted names: ``{'a.b': 1, 'a': {'c': 2}}`` -> ``{'a': {'b': 1, 'c': 2}}``.

    rcl accepts ``a: 1`` beside ``a.b: 2`` (two parameters); as one nested config they clash,
    and are refused whichever comes first.
    """
    nested: dict[str, Any] = {}
    for name, value in parameters.items():
        parts = str(name).split('.')
        node = nested
        for depth, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f'{source}: parameter {_bounded(repr(name))} nests under '
                                 f'{_bounded(repr(".".join(parts[:depth + 1])))}, which holds '
                                 'a value')
        leaf = unflatten(value, source=source) if isinstance(value, dict) \
            else _check_list(name, value)
        before = node.get(parts[-1])
        if isinstance(before, dict) and isinstance(leaf, dict):
            merge_nested(before, leaf)
        elif isinstance(before, dict) or (parts[-1] in node and isinstance(leaf, dict)):
            raise ValueError(f'{source}: parameter {_bounded(repr(name))} is given a value '
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
