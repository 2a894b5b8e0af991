"""
QoS presets over real DDS: why transient_local needs a reliable preset, what system_default is.

The loader refuses ``{preset: sensor_data, durability: transient_local}``
(test/unit/test_robot_config.py); these tests show the reason on this RMW, and check what
docs/configuration.md says Fast DDS makes of ``system_default``.
"""

import time

import pytest
from rclpy.qos import DurabilityPolicy, qos_profile_sensor_data, QoSProfile, ReliabilityPolicy
from rclpy.utilities import get_rmw_implementation_identifier
from ros_probe import wait_until
from rtgym_ros.robot.qos import MAX_DEPTH, qos_from_config
from std_msgs.msg import String


def test_a_latched_message_reaches_a_late_subscription_only_over_reliable(probe):
    node = probe.node
    latched = qos_from_config({'preset': 'reliable', 'durability': 'transient_local'},
                              key='test', default='reliable')
    publisher = node.create_publisher(String, 'qos_latched', latched)
    publisher.publish(String(data='map'))
    best_effort = QoSProfile(history=qos_profile_sensor_data.history,
                             depth=qos_profile_sensor_data.depth,
                             reliability=ReliabilityPolicy.BEST_EFFORT,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
    received = {'reliable': [], 'best_effort': []}
    subscriptions = [
        node.create_subscription(String, 'qos_latched', received['reliable'].append, latched),
        node.create_subscription(String, 'qos_latched', received['best_effort'].append,
                                 best_effort)]
    try:
        wait_until(lambda: received['reliable'], 10.0,
                   'the latched message on a reliable transient_local subscription')
        time.sleep(1.0)  # the best-effort one had as long, and more
        assert [m.data for m in received['reliable']] == ['map']
        assert received['best_effort'] == [], (
            'a best-effort transient_local subscription got the latched message: the '
            'refusal in rtgym_ros/robot/qos.py is no longer needed on this RMW')
    finally:
        for subscription in subscriptions:
            node.destroy_subscription(subscription)
        node.destroy_publisher(publisher)


@pytest.mark.skipif(get_rmw_implementation_identifier() != 'rmw_fastrtps_cpp',
                    reason='docs/configuration.md describes Fast DDS')
def test_system_default_is_what_the_docs_say_under_fast_dds(probe):
    node = probe.node
    profile = qos_from_config('system_default', key='test', default='reliable')
    publisher = node.create_publisher(String, 'qos_system_default_pub', profile)
    subscription = node.create_subscription(String, 'qos_system_default_sub', lambda _: None,
                                            profile)
    try:
        publishers = wait_until(
            lambda: node.get_publishers_info_by_topic('/qos_system_default_pub'), 5.0,
            'the publisher in the graph')
        subscriptions = wait_until(
            lambda: node.get_subscriptions_info_by_topic('/qos_system_default_sub'), 5.0,
            'the subscription in the graph')
        announced = (publishers[0].qos_profile, subscriptions[0].qos_profile)
        assert [(q.reliability, q.durability) for q in announced] == [
            (ReliabilityPolicy.RELIABLE, DurabilityPolicy.TRANSIENT_LOCAL),
            (ReliabilityPolicy.BEST_EFFORT, DurabilityPolicy.VOLATILE)], announced
    finally:
        node.destroy_subscription(subscription)
        node.destroy_publisher(publisher)


def test_the_largest_depth_the_loader_accepts_is_the_largest_rclpy_accepts(probe):
    node = probe.node
    profile = qos_from_config({'depth': MAX_DEPTH}, key='test', default='reliable')
    publisher = node.create_publisher(String, 'qos_deep', profile)
    subscription = node.create_subscription(String, 'qos_deep', lambda _: None, profile)
    node.destroy_subscription(subscription)
    node.destroy_publisher(publisher)
    with pytest.raises(TypeError):  # what a config would get without the bound
        node.create_publisher(String, 'qos_deep', QoSProfile(depth=MAX_DEPTH + 1))
    with pytest.raises(ValueError, match=f'test.depth must be an integer from 1 to {MAX_DEPTH}'):
        qos_from_config({'depth': MAX_DEPTH + 1}, key='test', default='reliable')
