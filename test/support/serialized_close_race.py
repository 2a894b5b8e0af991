"""
A process that closes serialized receivers while their thread waits on the subscriptions.

``python test/support/serialized_close_race.py ROUNDS``: a publisher floods a topic; each
round makes a receiver with four subscriptions to it and closes it with a join that times out
at once, so the destroy requests come while the receiving thread is in ``rcl_wait`` or taking.
Prints ``SURVIVED ROUNDS``; exits 0 unless it crashed or a closed receiver reported a failure.
"""

import sys
import threading
import time

import rclpy
from rclpy.context import Context
from rclpy.qos import QoSProfile
from rtgym_ros.ros.serialized import SerializedReceiver
from std_msgs.msg import String


def main() -> int:
    rounds = int(sys.argv[1])
    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node('close_race_publisher', context=context)
    publisher = node.create_publisher(String, 'close_race', 10)
    stop = threading.Event()

    def flood() -> None:
        message = String(data='x' * 1000)
        while not stop.is_set():
            publisher.publish(message)

    flooding = threading.Thread(target=flood, daemon=True)
    flooding.start()
    failures = []
    receivers = []
    for index in range(rounds):
        receiver = SerializedReceiver(context, node_name=f'close_race_{index}',
                                      on_failure=failures.append)
        for _ in range(4):
            receiver.subscribe(String, 'close_race', lambda view: None, QoSProfile(depth=10))
        time.sleep(0.002)
        receiver.close(timeout=0.0)
        receivers.append(receiver)
    stop.set()
    flooding.join()
    for receiver in receivers:  # each returns from its wait within 0.1 s, then ends
        receiver.thread.join(5.0)
        failures.extend(filter(None, [receiver.failure]))
        assert not receiver.thread.is_alive(), 'a receiving thread outlived its close'
    node.destroy_node()
    context.shutdown()
    print(f'SURVIVED {rounds}', flush=True)
    if failures:
        print(f'failures after close: {failures!r}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
