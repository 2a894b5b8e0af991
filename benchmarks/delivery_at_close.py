#!/usr/bin/env python3
"""
Delivery at close: how often a message published just before its node goes is lost.

What ``close()`` does with the safe action, reduced to rclpy: a receiving process subscribes
(reliable, depth 10); this process, once per round, makes a context and a node, publishes a
hello every 20 ms until the receiver has echoed one (both sides matched, as an env's node that
ran a while is), publishes one ``Float64`` and destroys the node and the context after
``--linger`` seconds. The rounds whose message the receiver never printed are counted. Each
linger given is run as a row, rounds interleaved.

    python3 benchmarks/delivery_at_close.py --rounds 100 --linger 0 0.1
"""

import argparse
import os
import select
import signal
import subprocess
import sys
import time
from typing import Any

RECEIVER = """
import rclpy
import rclpy.executors
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import Float64
rclpy.init()
node = rclpy.create_node('delivery_receiver')
node.create_subscription(Float64, 'delivery_at_close', lambda m: print(int(m.data), flush=True),
                         QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
print('up', flush=True)
try:
    rclpy.spin(node)
except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
    pass
"""


_RECEIVED: set[int] = set()


def _echoed(stream: Any, hello: int, *, timeout: float) -> bool:
    """Read what the receiver printed for ``timeout`` s; say whether ``hello`` is among it."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0.0:
        if not select.select([stream], [], [], left)[0]:
            break
        _RECEIVED.add(int(stream.readline()))
    return hello in _RECEIVED


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--rounds', type=int, default=100, help='rounds per linger')
    parser.add_argument('--linger', type=float, nargs='+', default=[0.0, 0.1],
                        help='seconds between the publish and the node destroyed')
    args = parser.parse_args()
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    import rclpy
    from rclpy.context import Context
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from std_msgs.msg import Float64

    receiver = subprocess.Popen([sys.executable, '-c', RECEIVER], stdout=subprocess.PIPE,
                                text=True, bufsize=1)
    assert receiver.stdout is not None and receiver.stdout.readline().strip() == 'up'
    sent: dict[float, list[int]] = {linger: [] for linger in args.linger}
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    for number in range(args.rounds * len(args.linger)):
        linger = args.linger[number % len(args.linger)]
        context = Context()
        rclpy.init(context=context)
        node = rclpy.create_node(f'delivery_sender_{number}', context=context)
        publisher = node.create_publisher(Float64, 'delivery_at_close', qos)
        hello = -1.0 - number
        while True:
            publisher.publish(Float64(data=hello))
            if _echoed(receiver.stdout, int(hello), timeout=0.02):
                break
        publisher.publish(Float64(data=float(number)))
        time.sleep(linger)
        node.destroy_node()
        rclpy.shutdown(context=context)
        sent[linger].append(number)
    time.sleep(2.0)
    receiver.send_signal(signal.SIGINT)
    received = _RECEIVED | {int(line) for line in receiver.communicate()[0].split()}
    print('| linger (s) | rounds | lost |')
    print('|---|---|---|')
    for linger, numbers in sent.items():
        print(f'| {linger:g} | {len(numbers)} | {len(set(numbers) - received)} |')


if __name__ == '__main__':
    main()
