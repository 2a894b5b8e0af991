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

from rtgym_ros.params_file import unflatten

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
