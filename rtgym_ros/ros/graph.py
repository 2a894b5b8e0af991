"""
What the ROS graph holds, in words: for errors and warnings that say why nothing arrives.

"No message on /joint_states" has a dozen causes; the graph tells most of them apart: no
publisher at all, publishers of another type, publishers whose QoS the subscription cannot
match (rmw's own check) or whose latched message a volatile subscription never gets, a
service offered under another name or type, or a robot on another ROS domain (then this node
sees nothing, and the message says which domain and discovery range it is in).
"""

import os
import time
from typing import Any

from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import (DurabilityPolicy, qos_check_compatible, QoSCompatibility, QoSProfile,
                       ReliabilityPolicy)
from rtgym_ros.msgconv.type_names import interface_name

_SHOWN = 6  # publishers or services listed at most


def where(node: Node) -> str:
    """Return this node's domain and discovery range, as a robot on another would differ."""
    context = node.context
    discovery = os.environ.get('ROS_AUTOMATIC_DISCOVERY_RANGE', '') or 'SUBNET (default)'
    return f'domain {context.get_domain_id()}, discovery range {discovery}'


def describe_publishers(node: Node, topic: str, expected_type: str,
                        qos: QoSProfile | None = None) -> str:
    """
    Say who publishes ``topic`` (resolved name), and why they may not reach a subscription.

    Their type against the expected one, and their QoS against the subscription's ``qos``.
    """
    infos = node.get_publishers_info_by_topic(topic)
    if not infos:
        return f'no node publishes {topic} ({where(node)})'
    listed = [f'{_node_name(i.node_namespace, i.node_name)} ({i.topic_type})'
              for i in infos[:_SHOWN]]
    more = f' and {len(infos) - _SHOWN} more' if len(infos) > _SHOWN else ''
    wrong = sorted({i.topic_type for i in infos if i.topic_type != expected_type})
    verdict = (f'; expected {expected_type}, so {", ".join(wrong)} cannot be read'
               if wrong else '')
    if qos is not None:
        verdict += ''.join(f'; {problem}' for problem in subscription_qos_problems(
            [i for i in infos if i.topic_type == expected_type], qos))
    return f'publishers on {topic}: {", ".join(listed)}{more}{verdict}'


def subscription_qos_problems(publishers: list[Any], qos: QoSProfile) -> list[str]:
    """
    Say which publishers (topic endpoint infos) a subscription with ``qos`` hears nothing from.

    Incompatible QoS, as rmw judges it (nothing is delivered), and latched publishers, whose
    last message only a reliable transient-local subscription gets when it joins late.
    """
    problems = []
    for info in publishers[:_SHOWN]:
        name = _node_name(info.node_namespace, info.node_name)
        offered = info.qos_profile
        incompatible = _incompatible(offered, qos)
        if incompatible:
            fix = ('qos: sensor_data' if offered.reliability == ReliabilityPolicy.BEST_EFFORT
                   and qos.reliability == ReliabilityPolicy.RELIABLE else
                   'durability: volatile')
            problems.append(f'{name} publishes with QoS this subscription cannot match '
                            f'({incompatible}): nothing is delivered; {fix} would match it')
        elif offered.durability == DurabilityPolicy.TRANSIENT_LOCAL and not (
                qos.durability == DurabilityPolicy.TRANSIENT_LOCAL
                and qos.reliability == ReliabilityPolicy.RELIABLE):
            problems.append(f'{name} publishes latched (transient_local): a message published '
                            'before this subscription joined comes only with qos {preset: '
                            'reliable, durability: transient_local}')
    return problems


def matchable_subscribers(node: Node, publisher: Any, msg_type: str) -> int:
    """Return how many subscribers the graph knows that ``publisher`` (of ``node``) can match."""
    offered = _as_offered(node, publisher)
    return sum(1 for info in node.get_subscriptions_info_by_topic(publisher.topic_name)
               if info.topic_type == msg_type and not _incompatible(offered, info.qos_profile))


def _as_offered(node: Node, publisher: Any) -> QoSProfile:
    """
    Return ``publisher``'s QoS as the graph holds it, its system defaults resolved.

    As a subscriber's QoS from the graph is: rmw's check finds a deadline of 0 (the system
    default) offered against an infinite one requested incompatible.
    """
    asked = publisher.qos_profile
    mine = [info.qos_profile for info in node.get_publishers_info_by_topic(publisher.topic_name)
            if (info.node_name, info.node_namespace) == (node.get_name(), node.get_namespace())]
    for qos in mine:
        if (qos.reliability, qos.durability) == (asked.reliability, asked.durability):
            return qos
    return mine[0] if mine else asked


def _incompatible(publisher_qos: QoSProfile, subscription_qos: QoSProfile) -> str | None:
    """Return rmw's reason why the two cannot match, or None (they can, or rmw cannot tell)."""
    compatibility, reason = qos_check_compatible(publisher_qos, subscription_qos)
    if compatibility != QoSCompatibility.ERROR:
        return None
    return reason.removeprefix('ERROR: ').rstrip(';').strip()


def describe_service(node: Node, service: str, expected_type: str,
                     own: tuple[Node, ...] = ()) -> str:
    """
    Say whether ``service`` (resolved against ``node``) is offered, its type, or what is.

    ``own``: the other nodes of the caller, left out where the nodes it sees are named.
    """
    service = node.resolve_service_name(service)
    offered = _servers(node)
    if service in offered:
        types = sorted(offered[service])
        if expected_type in types:
            return f'{service} is offered ({expected_type}) but did not answer'
        return f'{service} is offered as {", ".join(types)}, expected {expected_type}'
    base = service.rsplit('/', 1)[-1]
    similar = sorted(name for name in offered if name.rsplit('/', 1)[-1] == base)
    if similar:
        return (f'no node offers {service}; offered with that name elsewhere: '
                f'{", ".join(similar[:_SHOWN])} (a namespace or remapping off?)')
    return f'no node offers {service} ({where(node)}; {_nodes_seen(node, own)})'


def _nodes_seen(node: Node, own: tuple[Node, ...]) -> str:
    """
    Name the nodes ``node`` sees: none means discovery; the server's node named, its endpoints.

    A server's node that is listed while its service is not: the service is not up yet, or
    its endpoints are not discovered (rmw's graph learns nodes and endpoints apart).
    """
    mine = {_node_name(one.get_namespace(), one.get_name()) for one in (node, *own)}
    others = sorted({_node_name(namespace, name)
                     for name, namespace in node.get_node_names_and_namespaces()} - mine)
    if not others:
        return 'it sees no other node'
    more = f' and {len(others) - _SHOWN} more' if len(others) > _SHOWN else ''
    return f'nodes it sees: {", ".join(others[:_SHOWN])}{more}'


def _servers(node: Node) -> dict[str, set[str]]:
    """
    Return each service name that servers offer, with their types.

    Node by node: the graph's list of all service names also holds the names and types of
    clients (this env's own client among them), which offer nothing.
    """
    servers: dict[str, set[str]] = {}
    for name, namespace in node.get_node_names_and_namespaces():
        try:
            offered = node.get_service_names_and_types_by_node(name, namespace)
        except Exception:  # noqa: B902 - the node left the graph meanwhile (rclpy's errors)
            continue
        for service, types in offered:
            servers.setdefault(service, set()).update(types)
    return servers


def _node_name(namespace: str, name: str) -> str:
    return f'{namespace.rstrip("/")}/{name}'


class GraphWatch:
    """
    Once a second (steady time), warn about a graph that cannot work.

    An action topic that has had no matched subscriber for ``grace`` seconds (the robot's
    driver is not there, listens elsewhere, or with QoS this publisher cannot match), each
    subscriber of an action topic of another type or of QoS it cannot match (rclpy's default
    event handlers would log those: the env's publishers have none), and publishers of another
    type, or of QoS the subscription cannot match, on an observation topic (``observed``:
    topic, its type and QoS). Each problem is logged once, until it goes away.
    """

    def __init__(self, node: Node, publishers: list, observed: dict[str, tuple[str, QoSProfile]],
                 *, grace: float = 3.0) -> None:
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
            matched = publisher.get_subscription_count()
            self._check_subscribers(publisher, topic, matched)
            if matched:
                self._lonely_since.pop(topic, None)
                self._reported.discard(('lonely', topic))
                continue
            since = self._lonely_since.setdefault(topic, now)
            if now - since >= self._grace and ('lonely', topic) not in self._reported:
                self._reported.add(('lonely', topic))
                self._node.get_logger().warning(
                    f'{self._unheard(publisher, topic)} (for {now - since:.0f} s, '
                    f'{where(self._node)}): the robot does not hear its commands')
        for topic, (expected, qos) in self._observed.items():
            infos = self._node.get_publishers_info_by_topic(topic)
            for found in {info.topic_type for info in infos} - {expected}:
                self._warn_once('type', f'{topic} {found}', (
                    f'{topic} has a publisher of {found}; this env reads {expected} there '
                    '(its messages are not received)'))
            for problem in subscription_qos_problems(
                    [info for info in infos if info.topic_type == expected], qos):
                self._warn_once('qos', f'{topic} {problem}', f'{topic}: {problem}')

    def _check_subscribers(self, publisher: Any, topic: str, matched: int) -> None:
        """Warn about each subscriber of ``topic`` that ``publisher`` cannot reach, once."""
        if self._node.count_subscribers(topic) <= matched:
            return  # each one the graph knows is matched
        published = interface_name(publisher.msg_type)
        offered = _as_offered(self._node, publisher)
        for info in self._node.get_subscriptions_info_by_topic(topic):
            name = _node_name(info.node_namespace, info.node_name)
            subscriber = f'{topic} {bytes(info.endpoint_gid).hex()}'  # a node may have several
            if info.topic_type != published:
                self._warn_once('type', subscriber, (
                    f'{name} subscribes to the action topic {topic} as {info.topic_type}; '
                    f'this env publishes {published} there: it receives no actions'))
                continue
            incompatible = _incompatible(offered, info.qos_profile)
            if incompatible:
                fix = ("; set the action's qos to reliable (it matches reliable and "
                       'best-effort subscribers)'
                       if offered.reliability == ReliabilityPolicy.BEST_EFFORT
                       and info.qos_profile.reliability == ReliabilityPolicy.RELIABLE else '')
                self._warn_once('qos', subscriber, (
                    f'{name} subscribes to the action topic {topic} with QoS this publisher '
                    f'cannot match ({incompatible}): it receives no actions{fix}'))

    def _unheard(self, publisher: Any, topic: str) -> str:
        """Say why no subscriber of ``topic`` is matched with ``publisher``."""
        mismatched = []
        offered = _as_offered(self._node, publisher)
        for info in self._node.get_subscriptions_info_by_topic(topic):
            name = _node_name(info.node_namespace, info.node_name)
            incompatible = _incompatible(offered, info.qos_profile)
            if incompatible:
                mismatched.append(f'{name} ({incompatible})')
        if not mismatched:
            return f'nothing subscribes to the action topic {topic}'
        return (f'the action topic {topic} has subscribers with QoS this publisher cannot '
                f'match: {", ".join(mismatched[:_SHOWN])}; set the action\'s qos (reliable '
                'matches reliable and best-effort subscribers)')

    def _warn_once(self, kind: str, what: str, message: str) -> None:
        if (kind, what) not in self._reported:
            self._reported.add((kind, what))
            self._node.get_logger().warning(message)

    def destroy(self) -> None:
        self._node.destroy_timer(self._timer)
