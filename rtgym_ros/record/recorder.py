"""
``EpisodeRecorder``: what a ``ros-v1`` env received and sent, and each step, in one bag.

- Every message of an observation slot and of a reward or termination topic, as received (on
  the io thread, stamped with the node's clock when it arrived), on the topic it came from:
  ``ros2 bag play`` replays the robot's side as the env heard it, between captures too; the
  ages in the step records tell which message a capture used.
- Every action message as published (the time-step's actions and the safe actions), stamped
  when it was sent, on its topic.
- One ``diagnostic_msgs/msg/DiagnosticStatus`` per ``reset()`` and per ``step()``, on
  ``<namespace>/<node name>/steps``, stamped with the capture time of its observation: episode,
  step, reward, terminated, truncated, timed_out, the action and ``info`` (ages, stale slots,
  ...), as ``KeyValue`` pairs (``obs_ages.joints``: ``0.0042``).

Nothing here blocks the caller: :class:`~rtgym_ros.record.bag_writer.BagWriter` queues, and its
thread serializes and writes.
"""

import math
from typing import Any, Callable
import warnings

from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
import numpy as np
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile
from rosbags.rosbag2 import WriterError
from rtgym_ros.record.bag_writer import BagWriter
from rtgym_ros.record.config import RecordSpec

STEPS_TOPIC = '~/steps'
"""Where the step records go in the bag, under the env node's name (``/r1/rtgym_env/steps``)."""
# info keys whose non-empty value means something went wrong in the step.
_PROBLEMS = ('stale', 'missing', 'out_of_bounds', 'future_stamps', 'reward_missing')


def replay_qos(subscription: QoSProfile) -> QoSProfile:
    """
    Return the QoS a player offers a topic this env subscribed to with ``subscription``.

    Reliable, which a best-effort subscriber matches too (a best-effort sensor's data replayed
    best-effort would reach no reliable subscriber); latched (transient local) where the
    subscription asked for it, as then the publisher recorded offered it.
    """
    latched = subscription.durability == DurabilityPolicy.TRANSIENT_LOCAL
    return QoSProfile(depth=max(1, subscription.depth),
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if latched
                      else DurabilityPolicy.VOLATILE)


class EpisodeRecorder:
    """Records one env's episodes into a new rosbag2 (MCAP) directory until ``close()``."""

    def __init__(self, spec: RecordSpec) -> None:
        self.path = spec.path
        try:
            self.bag = BagWriter(spec.path, queue_size=spec.queue_size)
        except (OSError, WriterError) as error:  # created since the config was loaded, no rights
            raise ValueError(f'record.path {str(spec.path)!r}: cannot create the bag: '
                             f'{error}') from None
        self.episode = -1
        self._step = 0
        self._timeouts = 0
        self._clock: Any = None
        self._node_name = ''
        self._steps: int | None = None
        self._tapped: set[str] = set()

    # -- executor thread, when the interface binds its node ---------------------------------

    def bind_node(self, node: Node) -> None:
        """Take the node's clock and name; declare the step records' topic."""
        self._clock = node.get_clock()
        self._node_name = node.get_fully_qualified_name()
        self._steps = self.bag.add_topic(node.resolve_topic_name(STEPS_TOPIC), DiagnosticStatus,
                                         qos=QoSProfile(depth=100))

    def tap(self, topic: str, msg_type: type, callback: Callable[[Any], None], *,
            qos: QoSProfile) -> Callable[[Any], None]:
        """
        Return a subscription callback that calls ``callback``, then records the message.

        A topic is recorded once, by its first subscription (two slots may read one topic).
        ``qos`` is the subscription's: the bag offers the topic as :func:`replay_qos` says.
        """
        if topic in self._tapped:
            return callback
        self._tapped.add(topic)
        topic_id = self.bag.add_topic(topic, msg_type, qos=replay_qos(qos))
        clock, write = self._clock, self.bag.write

        def received(message: Any) -> None:
            callback(message)
            write(topic_id, clock.now().nanoseconds, message)

        return received

    def published(self, topic: str, msg_type: type, *,
                  qos: QoSProfile) -> Callable[[Any, Any], None]:
        """Return ``record(message, stamp)`` for the messages of a publisher of ``qos``."""
        topic_id = self.bag.add_topic(topic, msg_type, qos=qos)
        write = self.bag.write

        def record(message: Any, stamp: Any) -> None:
            write(topic_id, stamp.sec * 1_000_000_000 + stamp.nanosec, message)

        return record

    # -- user thread ------------------------------------------------------------------------

    def reset(self, info: dict, *, timeouts: int) -> None:
        """Record the first observation's step record (step 0 of a new episode)."""
        self.episode += 1
        self._step = 0
        self._timeouts = timeouts
        self._record('reset', [], info, timed_out=False)

    def step(self, action: Any, reward: float, terminated: bool, truncated: bool, info: dict,
             *, timeouts: int) -> None:
        """
        Record a step: its result and the action that the env's step was given.

        ``timeouts`` is the env's count: a time-out since the last record is this step's
        (its observation's time-step started late), unless ``info`` says ``timed_out``.
        """
        self._step += 1
        timed_out = bool(info.get('timed_out', timeouts > self._timeouts))
        self._timeouts = timeouts
        event = 'terminated' if terminated else 'truncated' if truncated else 'step'
        values = [('reward', float(reward)), ('terminated', bool(terminated)),
                  ('truncated', bool(truncated)), ('timed_out', timed_out),
                  ('action', np.array(action, dtype=np.float64).reshape(-1))]
        self._record(event, values, info, timed_out=timed_out)

    def _record(self, event: str, values: list, info: dict, *, timed_out: bool) -> None:
        if self._steps is None:
            return
        head = [('episode', self.episode), ('step', self._step), *values]
        info = dict(info)  # the caller may change it; the writer thread reads it later
        capture = info.get('capture_time')
        if isinstance(capture, float) and math.isfinite(capture):
            time_ns = round(capture * 1e9)
        else:
            time_ns = self._clock.now().nanoseconds
        name, hardware_id = f'rtgym_ros {event}', self._node_name
        self.bag.write_later(self._steps, time_ns, lambda: step_status(
            name=name, hardware_id=hardware_id, event=event, values=head, info=info,
            timed_out=timed_out))

    # -- any thread -------------------------------------------------------------------------

    @property
    def dropped(self) -> dict[str, int]:
        """Messages the bag lost, by topic (the writer thread fell behind)."""
        return self.bag.dropped

    def discard(self) -> None:
        """Remove the bag: the env that would have recorded into it could not be made."""
        self.bag.discard()

    def close(self) -> None:
        """Finish the bag (index, ``metadata.yaml``); warn about anything lost. Idempotent."""
        finished = self.bag.close()
        problems = []
        if not finished:
            problems.append('the writer thread did not finish in time: the bag has no '
                            'metadata.yaml (ros2 bag reindex rebuilds it)')
        if self.bag.failed:
            problems.append(f'{self.bag.failed} message(s) not written, the first because of '
                            f'{self.bag.error!r}')
        dropped = self.bag.dropped
        if dropped:
            problems.append(f'{sum(dropped.values())} message(s) dropped (queue full): '
                            f'{dropped}; raise record.queue_size')
        if problems:
            warnings.warn(f'record {self.path}: ' + '; '.join(problems), RuntimeWarning,
                          stacklevel=2)


def step_status(*, name: str, hardware_id: str, event: str, values: list[tuple[str, Any]],
                info: dict, timed_out: bool) -> DiagnosticStatus:
    """Return a step record: ``values``, then ``info`` flattened (``obs_ages.joints``)."""
    pairs = list(values) + list(flatten(info))
    problems = [key for key in _PROBLEMS if info.get(key)]
    if timed_out:
        problems.insert(0, 'timed out')
    return DiagnosticStatus(
        level=DiagnosticStatus.WARN if problems else DiagnosticStatus.OK, name=name,
        message=event + (f': {", ".join(problems)}' if problems else ''),
        hardware_id=hardware_id,
        values=[KeyValue(key=key, value=text(value)) for key, value in pairs])


def flatten(info: dict, prefix: str = '') -> list[tuple[str, Any]]:
    """Return ``info``'s items, nested mappings as dotted keys (``obs_ages.joints``)."""
    pairs = []
    for key, value in info.items():
        if isinstance(value, dict):
            pairs += flatten(value, f'{prefix}{key}.')
        else:
            pairs.append((f'{prefix}{key}', value))
    return pairs


def text(value: Any) -> str:
    """Write a value as the text of a ``KeyValue``: ``true``, ``0.05``, ``a,b``, ``1.0,-0.5``."""
    if isinstance(value, (bool, np.bool_)):
        return 'true' if value else 'false'
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        return ','.join(text(item) for item in np.asarray(value, dtype=object).reshape(-1))
    return str(value)
