"""
What a real rclpy node gets from a params file: the reference the params reader is tested on.

Run as a process of its own: reads a JSON list of ``{"file", "node", "namespace"}`` (or
``{"args", ...}``, a whole command line, instead of ``"file"``) on stdin,
and for each starts a node the way ``ros2 run`` would (``--ros-args --params-file FILE``,
``rclpy.node.Node`` with ``automatically_declare_parameters_from_overrides``) in a fresh
context, then prints one JSON line per case: ``{"params": {name: [type, value]}}`` or
``{"refused": "what rcl or rclpy raised"}``. Floats travel as their repr (nan, inf).
"""

import json
import sys

import rclpy
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.signals import SignalHandlerOptions

# Declared by rclpy itself on every node.
BUILTIN = ('start_type_description_service',)


def encode(parameter: Parameter) -> list:
    value = parameter.value
    if isinstance(value, float):
        value = repr(value)
    elif not isinstance(value, (bool, int, str)) and value is not None:
        value = [repr(v) if isinstance(v, float) else v for v in value]
    return [parameter.type_.name, value]


def read(case: dict) -> dict:
    context = Context()
    try:
        args = case.get('args') or ['oracle', '--ros-args', '--params-file', case['file']]
        rclpy.init(args=args, context=context, signal_handler_options=SignalHandlerOptions.NO)
    except Exception as error:  # noqa: B902 - whatever rcl raises is the answer
        return {'refused': f'{type(error).__name__}: {error}'}
    try:
        try:
            node = Node(case['node'], namespace=case['namespace'], context=context,
                        automatically_declare_parameters_from_overrides=True)
        except Exception as error:  # noqa: B902
            return {'refused': f'{type(error).__name__}: {error}'}
        try:
            return {'node': node.get_fully_qualified_name(),
                    'params': {name: encode(parameter) for name, parameter
                               in node.get_parameters_by_prefix('').items()
                               if name not in BUILTIN}}
        finally:
            node.destroy_node()
    finally:
        context.try_shutdown()


def main() -> None:
    for case in json.load(sys.stdin):
        print(json.dumps(read(case)), flush=True)


if __name__ == '__main__':
    main()
