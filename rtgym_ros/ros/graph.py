"""
What the ROS graph holds, in words: for errors and warnings that say why nothing arrives.

"No message on /joint_states" has a dozen causes; the graph tells most of them apart: no
publisher at all, publishers of another type, a service offered under another name, or a
robot on another ROS domain (then this node sees nothing, and the message says which domain
and discovery range it is in).
"""

import os
import time

from rclpy.clock import Clock, ClockType
from rclpy.node import Node

_SHOWN = 6  # publishers or services listed at most


def where(node: Node) -> str:
    """Return this node's domain and discovery range, as a robot on another would differ."""
    context = node.context
    discovery = os.environ.get('ROS_AUTOMATIC_DISCOVERY_RANGE', '') or 'SUBNET (default)'
    return f'domain {context.get_domain_id()}, discovery range {discovery}'


def describe_publishers(node: Node, topic: str, expected_type: str) -> str:
    """Say who publishes ``topic`` (resolved name) and whether their type is the expected one."""
    infos = node.get_publishers_info_by_topic(topic)
    if not infos:
        return f'no node publishes {topic} ({where(node)})'
    listed = [f'{_node_name(i.node_namespace, i.node_name)} ({i.topic_type})'
              for i in infos[:_SHOWN]]
    more = f' and {len(infos) - _SHOWN} more' if len(infos) > _SHOWN else ''
    wrong = sorted({i.topic_type for i in infos if i.topic_type != expected_type})
    verdict = (f'; expected {expected_type}, so {", ".join(wrong)} cannot be read'
               if wrong else '')
    return f'publishers on {topic}: {", ".join(listed)}{more}{verdict}'


def publisher_types(node: Node, topic: str) -> set[str]:
    """Return the message types published on ``topic`` (resolved name)."""
    return {info.topic_type for info in node.get_publishers_info_by_topic(topic)}


def describe_service(node: Node, service: str, expected_type: str) -> str:
    """Say whether ``service`` (resolved against ``node``) is offered, its type, or what is."""
    service = node.resolve_service_name(service)
    # A client's own request topic makes the name known: only servers offer it.
    offered = {name: types for name, types in node.get_service_names_and_types()
               if node.count_services(name) > 0}
    if service in offered:
        types = offered[service]
        if expected_type in types:
            return f'{service} is offered ({expected_type}) but did not answer'
        return f'{service} is offered as {", ".join(types)}, expected {expected_type}'
    base = service.rsplit('/', 1)[-1]
    similar = sorted(name for name in offered if name.rsplit('/', 1)[-1] == base)
    if similar:
        return (f'no node offers {service}; offered with that name elsewhere: '
                f'{", ".join(similar[:_SHOWN])} (a namespace or remapping off?)')
    return f'no node offers {service} ({where(node)})'


def _node_name(namespace: str, name: str) -> str:
    return f'{namespace.rstrip("/")}/{name}'


class GraphWatch:
    """
    Once a second (steady time), warn about a graph that cannot work.

    An action topic that has had no subscriber for ``grace`` seconds (the robot's driver is
    not there, or listens elsewhere), and publishers of another type on an observation topic.
    Each problem is logged once, until it goes away.
    """

    def __init__(self, node: Node, publishers: list, observed: dict[str, str], *,
                 grace: float = 3.0) -> None:
        self._node = node
        self._publishers = publishers
        self._observed = observed
        self._grace = grace
        self._lonely_since: dict[str, float] = {}
        self._reported: set[tuple[str, str]] = set()
        self._timer = node.create_timer(1.0, self._check,
                                        clock=Clock(clock_type=ClockType.STEADY_TIME))

    def _check(self) -> None:
        now = time.monotonic()
        for publisher in self._publishers:
            topic = publisher.topic_name
            if publisher.get_subscription_count():
                self._lonely_since.pop(topic, None)
                self._reported.discard(('lonely', topic))
                continue
            since = self._lonely_since.setdefault(topic, now)
            if now - since >= self._grace and ('lonely', topic) not in self._reported:
                self._reported.add(('lonely', topic))
                self._node.get_logger().warning(
                    f'nothing subscribes to the action topic {topic} (for {now - since:.0f} s, '
                    f'{where(self._node)}): the robot does not hear its commands')
        for topic, expected in self._observed.items():
            for found in publisher_types(self._node, topic) - {expected}:
                if ('type', f'{topic} {found}') not in self._reported:
                    self._reported.add(('type', f'{topic} {found}'))
                    self._node.get_logger().warning(
                        f'{topic} has a publisher of {found}; this env reads {expected} there '
                        '(its messages are not received)')

    def destroy(self) -> None:
        self._node.destroy_timer(self._timer)
