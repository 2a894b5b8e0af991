"""
Run a simulator node until SIGINT or SIGTERM, then tear it down in order.

``sim_robot`` and ``mujoco_sim`` share this: a private context, our own stop handlers (not
rclpy's), the node built (a start failure is one fatal log line and exit 1), spun by a
:class:`~rtgym_ros.ros.spin.SpinThread`, and a bounded teardown that further Ctrl-C cannot
cut short (:func:`~rtgym_ros.nodes.signals.bounded_teardown`).
"""

import signal
import threading
from typing import Any, Callable, List, Optional

import rclpy
from rclpy.context import Context
from rclpy.executors import Executor
from rclpy.signals import SignalHandlerOptions
from rtgym_ros.nodes.signals import bounded_teardown, ignore_stop_signals, stop_signals
from rtgym_ros.ros.spin import SpinThread


def run_until_stopped(args: Optional[List[str]], *, name: str,
                      make_node: Callable[[Context], Any],
                      make_executor: Callable[[Context, Any], Executor]) -> int:
    """
    Build the node, spin it, wait for a stop signal or a failure; return the exit code.

    :return: 0 on a clean stop, 1 when the node could not start or a callback failed.
    """
    context = Context()
    rclpy.init(args=args, context=context, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in stop_signals():
            signal.signal(signum, lambda *_: stop.set())
    node = None
    executor = None
    spinner = None
    start_failure: Optional[Exception] = None
    try:
        try:
            node = make_node(context)
        except Exception as error:  # noqa: B902 - reported as a start failure
            rclpy.logging.get_logger(name).fatal(f'cannot start: {error}')
            # Its traceback holds the half-built node: kept, so that the context's shutdown
            # destroys it (rclpy's destroy_node, in order) within the teardown's bound. Dropped
            # at this return, the node would be freed here, its DDS entities destroyed outside
            # any bound (Fast DDS can hang in that).
            start_failure = error
            return 1
        executor = make_executor(context, node)
        executor.add_node(node)
        spinner = SpinThread(executor, context=context, name=f'{name}_executor',
                             on_failure=lambda _: stop.set())
        node.start()
        while not stop.wait(0.1):
            if node.failure is not None or not spinner.is_alive():
                break
        return 1 if spinner.failure is not None or node.failure is not None else 0
    finally:
        ignore_stop_signals()  # a second Ctrl-C must not cut the teardown short
        with bounded_teardown():
            if node is not None:
                node.stop()
            if spinner is not None:
                spinner.stop(timeout=5.0)
            if executor is not None:
                executor.shutdown(timeout_sec=5.0)
            if node is not None:
                node.destroy_node()
            context.try_shutdown()
            del start_failure  # within the bound: what the node left is freed here
