"""
Parameters given on a command line (``--ros-args --params-file F -p k:=v -r __ns:=/r1``).

rcl itself parses them (into a throw-away node that declares whatever it is given), so a
console script reads exactly what ``ros2 run`` and ``ros2 launch`` would pass to a node:
several params files, ``/**`` and node-specific entries, ``-p`` overrides, remapped name and
namespace.
"""

from dataclasses import dataclass
from typing import Any

import rclpy
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.signals import SignalHandlerOptions

# Declared by every rclpy node on its own; not part of a robot config.
_BUILTIN_PARAMETERS = ('start_type_description_service',)


@dataclass
class NodeParameters:
    """What a command line says about a node: its name, namespace and parameters."""

    node_name: str
    namespace: str
    parameters: dict[str, Any]


def read_node_parameters(args: list[str], *, default_node_name: str) -> NodeParameters:
    """Parameters that rcl would give a node called ``default_node_name`` (or its remap)."""
    context = Context()
    rclpy.init(args=args, context=context, signal_handler_options=SignalHandlerOptions.NO)
    try:
        node = Node(default_node_name, context=context,
                    automatically_declare_parameters_from_overrides=True)
        try:
            flat = {name: _plain(parameter)
                    for name, parameter in node.get_parameters_by_prefix('').items()
                    if name not in _BUILTIN_PARAMETERS
                    and (name != 'use_sim_time' or parameter.value)}
            return NodeParameters(node_name=node.get_name(), namespace=node.get_namespace(),
                                  parameters=unflatten(flat))
        finally:
            node.destroy_node()
    finally:
        context.try_shutdown()


def _plain(parameter: Parameter) -> Any:
    """Parameter value as YAML would have given it (lists, not array.array)."""
    value = parameter.value
    if parameter.type_ in (Parameter.Type.BYTE_ARRAY, Parameter.Type.BOOL_ARRAY,
                           Parameter.Type.INTEGER_ARRAY, Parameter.Type.DOUBLE_ARRAY,
                           Parameter.Type.STRING_ARRAY):
        return list(value)
    return value


def unflatten(parameters: dict[str, Any]) -> dict[str, Any]:
    """``{'a.b': 1, 'a': {'c': 2}}`` -> ``{'a': {'b': 1, 'c': 2}}``."""
    nested: dict[str, Any] = {}
    for name, value in parameters.items():
        parts = str(name).split('.')
        node = nested
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f'parameter {name!r} nests under a key that holds a value')
        leaf = unflatten(value) if isinstance(value, dict) else _check_list(name, value)
        if isinstance(leaf, dict) and isinstance(node.get(parts[-1]), dict):
            merge_nested(node[parts[-1]], leaf)
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
