"""
A service in another process, of a type with nested request fields.

A config's request fields and success check are tested against it.

``python test/support/service_server.py NAMESPACE LOG [--fail]`` serves
``NAMESPACE/change_state`` (lifecycle_msgs/srv/ChangeState: request ``transition.id``,
``transition.label``; response ``success``), appends each request to LOG as a JSON line, and
answers ``success: false`` with ``--fail``. Prints READY once serving; stops on SIGINT/SIGTERM.
"""

import json
import signal
import sys
import threading

from lifecycle_msgs.srv import ChangeState
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from rtgym_ros.ros.spin import SpinThread


def main() -> int:
    namespace, log, fail = sys.argv[1], sys.argv[2], '--fail' in sys.argv[3:]
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    context = Context()
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    node = Node('service_server', namespace=namespace, context=context)

    def serve(request: ChangeState.Request, response: ChangeState.Response):
        with open(log, 'a') as out:
            out.write(json.dumps({'id': request.transition.id,
                                  'label': request.transition.label}) + '\n')
        response.success = not fail
        return response
    node.create_service(ChangeState, 'change_state', serve)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = SpinThread(executor, context=context, name='service_server')
    print('READY', flush=True)
    stop.wait()
    spinner.stop()
    executor.shutdown(timeout_sec=2.0)
    node.destroy_node()
    context.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
