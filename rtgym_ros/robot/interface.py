"""
``RosInterface``: a RealTimeGymInterface made from a robot config, topics in and out.

Actions are published on the executor thread when a time-step starts, stamped with the node
clock. Sensor subscriptions live on the io node, whose thread only stores messages in slots, so
the capture (executor thread) may wait, bounded, for fresh data. Observation order is the
config's; the env turns it into a Dict (or keeps rtgym's Tuple).

Image slots take their messages serialized, on a thread that copies them with the GIL released
(:mod:`rtgym_ros.ros.serialized`): converting a large image into a Python message holds the GIL
long enough to delay the time-step (90 ms for 50 MB). ``RTGYM_ROS_IMAGE_TAKE=message`` keeps
them on the io node as rclpy messages. JointState slots take theirs raw on the io node and read
the few fields from the bytes (:func:`rtgym_ros.msgconv.joint_state_cdr.decode`), for the same
reason at a smaller scale: robots publish them often. ``RTGYM_ROS_JOINT_STATE_TAKE=message``
takes rclpy messages instead. Actions go out as serialized bytes packed into a template
(:mod:`rtgym_ros.msgconv.serialized_writer`), where one checks out for the group's writer;
``RTGYM_ROS_ACTION_PUBLISH=message`` publishes rclpy messages.
"""

import os
import threading
import time
from typing import Any, Callable

import gymnasium.spaces as spaces
import numpy as np
from rclpy.clock import ClockType
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from rosgraph_msgs.msg import Clock
from rtgym_ros.core.interface import RealTimeGymInterface
from rtgym_ros.core.validate import bound_repr
from rtgym_ros.msgconv.fields import has_header, IMAGE, JOINT_STATE, stamp_message
from rtgym_ros.msgconv.image_cdr import decode_image
from rtgym_ros.msgconv.joint_state_cdr import decode as decode_joint_state
from rtgym_ros.msgconv.serialized_writer import serialized_writer
from rtgym_ros.msgconv.type_names import interface_name
from rtgym_ros.robot.services import build_request, check_response, ServiceCaller
from rtgym_ros.robot.slots import SignalSlot, Slot, wait_all
from rtgym_ros.robot.spec import (ActionGroup, check_one_group_per_topic, ObservationSlotSpec,
                                  physics_steps, RobotSpec, ServiceSpec, SignalSpec)
from rtgym_ros.ros.clock_reader import ClockReader
from rtgym_ros.ros.deadline import SIM_TIME_SLACK
from rtgym_ros.ros.deferred_log import DeferredLog
from rtgym_ros.ros.graph import (describe_publishers, describe_service, GraphWatch,
                                 matchable_subscribers)
from rtgym_ros.ros.publisher_events import without_default_handlers

IMAGE_TAKE_VARIABLE = 'RTGYM_ROS_IMAGE_TAKE'
JOINT_STATE_TAKE_VARIABLE = 'RTGYM_ROS_JOINT_STATE_TAKE'
ACTION_PUBLISH_VARIABLE = 'RTGYM_ROS_ACTION_PUBLISH'
FORMS = ('serialized', 'message')


def message_form(variable: str) -> str:
    """Return how messages of a kind come or go: ``variable``'s value, 'serialized' if unset."""
    choice = os.environ.get(variable, '').strip() or 'serialized'
    if choice not in FORMS:
        raise ValueError(f'{variable} must be one of {FORMS}, found {choice!r}')
    return choice


def _stamps(group: ActionGroup) -> bool:
    """Say whether an action group's messages carry a stamp (``stamp: now``, a header)."""
    return group.stamped and has_header(group.writer.msg_type)


ACTION_MATCH_WAIT = 1.0
"""Seconds reset() waits, at most, for an action topic's known subscribers to be matched."""

_REQUEST_SHORT_NS = round(SIM_TIME_SLACK * 1e9) // 2
"""How far short of its target a lockstep step request asks: the target is reached within
SIM_TIME_SLACK of it, and a simulator that steps to the first step at or past the request stops
at the target's step, not one later."""


REWIND_GRACE = 0.5
"""Seconds of sim time /clock may go on after data of a rewound time base came, before that
data counts (the sensor's own time base went back): a simulator's rewound /clock may come after
its data (DDS does not order topics), but the clock of its old time base no longer moves on."""


_EPOCHS_APART = 1e7
"""Seconds (four months) between a stamp and the clock that no skew explains: two time bases."""


def _other_time_base(age: float) -> str | None:
    """Say so when a stamp ``age`` seconds from the node's clock is of another time base."""
    if abs(age) < _EPOCHS_APART:
        return None
    return ('its stamps and this clock count from different origins: sim time against wall '
            'time? use_sim_time must match the sensor; stamp: receive ignores its stamps')


def _moved_if_ahead(when: float, now: float, delta: float) -> float:
    """
    Move a time of the old base by the clock's jump ``delta``; leave one of the new base.

    The jump callback runs on the thread that set the clock, after it set it: an action sent
    in between is stamped in the new base, at or before ``now``. A time of the old base is
    after ``now`` (the clock went back before it), as data is for :meth:`Slot.forget_after`.
    """
    return when + delta if when > now else when


class RosInterface(RealTimeGymInterface):
    """Publishes action groups, fills observation slots, calls reset/pause services."""

    wants_io_node = True

    def __init__(self, spec: RobotSpec, *, recorder: Any = None) -> None:
        self.spec = spec
        self.recorder = recorder
        """An ``EpisodeRecorder`` (the env records its episodes) or None."""
        self._sent: list[Callable[[Any, Any], None]] = []
        # Read the clock for a stamp only for a stamped group or a recording: right after a
        # wake-up, Clock.now() and to_msg() cost tens of µs per time-step (now_ns, a few).
        self._stamps_actions = any(_stamps(group) for group in spec.actions)
        self.time_step_duration = 0.05
        """The env's T: the bound of the ``newer_than_action`` wait when none is configured."""
        self._node: Node | None = None
        self.last_action = spec.default_action.astype(np.float32)
        """The target last sent (set before it is published; replaced, never changed)."""
        self.default_action = spec.default_action.astype(np.float32)
        """What ``wait()`` stops the robot with: the env's (``set_default_action``)."""
        self._holds = any(group.on_stop == 'hold' for group in spec.actions)
        self._target_lock = threading.Lock()
        self.last_action_time = -np.inf
        self.on_safe_action: Callable[[np.ndarray], None] | None = None
        """Called with each safe action ``send_safe_action_now`` publishes, on its thread,
        just before it is published."""
        self.slots: list[Slot] = []
        self._publishers: list = []
        self._encoders: list = []  # per action group: a SerializedWriter, or None (messages)
        self._signals: dict[str, SignalSlot] = {}
        self._last_capture = -np.inf
        self._jumps_back = 0  # the clock's jumps back that moved its data (io thread)
        self._clock_backs = 0  # every jump back, within a running time-step too (io thread)
        self._resets_rewind = False  # a reset of this env took /clock back: wait for it
        self._backs_at_reset: int | None = None  # when the last reset was asked (sim time)
        self._first_capture_due = False  # of the episode: the reset's jump may come by then
        self._step_target: float | None = None
        self._step_asked: tuple[float, int | None] | None = None  # target, physics steps
        self._step_answer = 'no answer yet'
        self._topics: dict[str, str] = {}
        self._subscriptions: list = []  # the slots' (rclpy), for their matched publishers
        self._graph_watch: GraphWatch | None = None
        self._clients: dict[int, Any] = {}
        self.paused = False
        self._services = ServiceCaller(
            lambda name, type_name: describe_service(
                self._io_node, name, type_name, own=(self._node,)),
            warn=lambda kind, message: self._log.warning(kind, message))
        self.stale_counts = {slot.name: 0 for slot in spec.observations}
        self.stale_runs = {slot.name: 0 for slot in spec.observations}
        """Captures in a row each slot has been stale for (0: fresh at the last capture)."""
        # Lockstep: captures in a row at which each slot's data was at the capture time (2:
        # it keeps up, and the next capture waits for it).
        self._at_targets = {slot.name: 2 for slot in spec.observations}

    # -- wiring -------------------------------------------------------------------------------

    def bind_node(self, node: Node, io_node: Node | None = None) -> None:
        self._node = node
        self._log = DeferredLog(node)
        self._io_node = io_node or node
        self._clock = node.get_clock()
        self._clock_reader = ClockReader(self._clock)
        # Their subscribers of another type or QoS are reported by the graph watch (below).
        self._publishers = [node.create_publisher(group.writer.msg_type, group.topic, group.qos,
                                                  event_callbacks=without_default_handlers())
                            for group in self.spec.actions]
        # Names that differ in the config may resolve to one (cmd_vel and /r1/cmd_vel).
        check_one_group_per_topic(self.spec.actions,
                                  [publisher.topic_name for publisher in self._publishers])
        # A recording keeps the messages sent: they are then built as rclpy messages.
        serialized_actions = self.recorder is None \
            and message_form(ACTION_PUBLISH_VARIABLE) == 'serialized'
        self._encoders = [serialized_writer(group.writer, stamped=_stamps(group))
                          if serialized_actions else None for group in self.spec.actions]
        if self.recorder is not None:
            self.recorder.bind_node(node)
            self._sent = [self.recorder.published(publisher.topic_name, group.writer.msg_type,
                                                  qos=group.qos)
                          for group, publisher in zip(self.spec.actions, self._publishers)]
        # A recorded slot keeps its messages: they then come as rclpy messages.
        recorded = self.recorder is not None
        serialized_images = not recorded and message_form(IMAGE_TAKE_VARIABLE) == 'serialized'
        raw_joint_states = not recorded \
            and message_form(JOINT_STATE_TAKE_VARIABLE) == 'serialized'
        for slot_spec in self.spec.observations:
            slot = Slot(slot_spec, now=self.now,
                        stamp_tolerance=self.spec.options.stamp_tolerance,
                        warn=self._log.warning)
            subscription = None
            kind = interface_name(slot_spec.reader.msg_type)
            if serialized_images and kind == IMAGE:
                subscription = self._subscribe_serialized(slot_spec, slot)
            elif raw_joint_states and kind == JOINT_STATE:
                subscription = self._io_node.create_subscription(
                    slot_spec.reader.msg_type, slot_spec.topic,
                    self._decoded(slot, decode_joint_state), slot_spec.qos, raw=True)
            if subscription is None:
                subscription = self._io_node.create_subscription(
                    slot_spec.reader.msg_type, slot_spec.topic,
                    self._recorded(slot_spec.topic, slot_spec.reader.msg_type, slot.store,
                                   slot_spec.qos), slot_spec.qos)
            self._topics[slot.name] = subscription.topic_name
            self._subscriptions.append(subscription)
            self.slots.append(slot)
        for name in ('reward', 'termination'):
            signal: SignalSpec | None = getattr(self.spec, name)
            if signal is not None and signal.topic is not None:
                value = SignalSlot(signal.reader, now=self.now)
                self._io_node.create_subscription(
                    signal.reader.msg_type, signal.topic,
                    self._recorded(signal.topic, signal.reader.msg_type, value.store, signal.qos),
                    signal.qos)
                self._signals[name] = value
        step = self.spec.step
        if step is not None and step.topic is not None:
            self._step_publisher = node.create_publisher(
                Clock, step.topic, 10, event_callbacks=without_default_handlers())
        for service in (self.spec.reset, self.spec.pause, self.spec.unpause,
                        None if step is None else step.service):
            if service is not None and service.service is not None \
                    and id(service) not in self._clients:
                self._clients[id(service)] = self._io_node.create_client(
                    service.service_type, service.service)
        self._graph_watch = GraphWatch(node, self._publishers, {
            self._topics[slot.name]: (interface_name(slot.reader.msg_type), slot.spec.qos)
            for slot in self.slots})

    def _recorded(self, topic: str, msg_type: type, callback: Callable[[Any], None],
                  qos: QoSProfile) -> Callable[[Any], None]:
        """Return the subscription callback: ``callback``, and the recorder's when recording."""
        if self.recorder is None:
            return callback
        return self.recorder.tap(self._io_node.resolve_topic_name(topic), msg_type, callback,
                                 qos=qos)

    def _decoded(self, slot: Slot, decode: Callable[[Any], Any]) -> Callable[[Any], None]:
        """
        Return a serialized take's callback: store what ``decode`` reads of the bytes.

        Bytes it cannot read are dropped and said (counted, once a second), as the rmw drops a
        message it cannot deserialize on a message take; raised, they would end the taking
        thread, and with it the env.
        """
        store, topic = slot.store, slot.spec.topic

        def take(data: Any) -> None:
            try:
                frame = decode(data)
            except Exception as error:
                self._log.warning(f'{slot.name} unreadable', (
                    f'observations.{slot.name}: a message on {topic} that cannot be read was '
                    f'dropped ({error!r}), as the rmw drops one on a message take'))
                return
            store(frame)
        return take

    def _subscribe_serialized(self, slot_spec: ObservationSlotSpec, slot: Slot) -> Any:
        """Take an image slot's messages serialized: the subscription, or None if not."""
        subscribe = getattr(self._io_node, 'create_serialized_subscription', None)
        if subscribe is None:
            return None
        try:
            return subscribe(slot_spec.reader.msg_type, slot_spec.topic,
                             self._decoded(slot, decode_image), slot_spec.qos)
        except OSError as error:
            self._log.warning('serialized images', f'observations.{slot.name}: image messages '
                              f'are taken as rclpy messages, on the io thread ({error}); set '
                              f'{IMAGE_TAKE_VARIABLE}=message to silence this')
            return None

    def now(self) -> float:
        return self._clock_reader.now()

    def close(self) -> None:
        self._clock_reader.destroy()
        self._log.destroy()
        if self._graph_watch is not None:
            self._graph_watch.destroy()

    def action_subscriber_counts(self) -> dict[str, int]:
        """Return how many subscribers each action topic has now (resolved topic names)."""
        return {p.topic_name: p.get_subscription_count() for p in self._publishers}

    # -- spaces -------------------------------------------------------------------------------

    def get_observation_space(self) -> spaces.Tuple:
        return spaces.Tuple(tuple(slot.space for slot in self.spec.observations))

    def get_action_space(self) -> spaces.Box:
        return spaces.Box(self.spec.action_low.astype(np.float32),
                          self.spec.action_high.astype(np.float32), dtype=np.float32)

    def get_default_action(self) -> np.ndarray:
        return self.spec.default_action.astype(np.float32)

    def get_safe_action(self, default_action: np.ndarray, *,
                        last: np.ndarray | None = None) -> np.ndarray:
        """
        Return the default action, but the values last sent for ``on_stop: hold`` groups.

        :param last: the target to hold instead of the last action published: the env's,
            which knows the action handed over before this one even if not yet published.
        """
        held = self.last_action if last is None else last
        values = np.array(default_action, dtype=np.float32).reshape(-1)
        start = 0
        for group in self.spec.actions:
            if group.on_stop == 'hold':
                values[start:start + group.size] = held[start:start + group.size]
            start += group.size
        return values

    # -- actions ------------------------------------------------------------------------------

    def send_safe_action_now(self, safe_action: np.ndarray) -> bool:
        """
        Any thread: publish ``safe_action`` at once, without the executor thread.

        rclpy publishers may publish from any thread. The one lock shared with the executor
        thread guards the swap of the last target, no call. ``on_stop: hold`` groups get the
        target last sent. Should the executor thread send a newer one between the read and
        this publication, or during it, the hold is sent again from that one: the robot never
        ends on the older target.
        """
        if not self._publishers:
            return False
        held = self.last_action
        values = self.get_safe_action(safe_action, last=held)
        self._safe_action_known(values)
        sent, replaced = self._publish(values)
        if self._holds:
            newer = self.last_action if self.last_action is not sent else replaced
            if newer is not held:
                values = self.get_safe_action(safe_action, last=newer)
                self._safe_action_known(values)
                self._publish(values)
        return True

    def _safe_action_known(self, values: np.ndarray) -> None:
        """
        Tell ``on_safe_action`` of the safe action before it is published.

        A step() that the robot's stop came before must count from the safe action
        (max_delta), however late this thread runs on after the publication.
        """
        if self.on_safe_action is not None:
            self.on_safe_action(values)

    def linger_for_delivery(self, bound: float) -> None:
        """
        Any thread, closing: give the last commands up to ``bound`` s to reach the robot.

        A message published just before its node is destroyed can be lost on the way, even
        on one host (Fast DDS: 17 of 100 lost, none with 0.05 or 0.1 s between:
        ``benchmarks/delivery_at_close.py``). Each action topic with a subscriber is waited
        for until every reliable subscriber acknowledged it (acknowledgements come with DDS
        heartbeats: often later than the bound), a best-effort one for the bound, which is
        all it can be given.
        """
        deadline = time.monotonic() + bound
        for publisher in self._publishers:
            if not publisher.get_subscription_count():
                continue
            left = deadline - time.monotonic()
            if left <= 0.0:
                return
            if publisher.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT:
                time.sleep(left)
            else:
                publisher.wait_for_all_acked(Duration(nanoseconds=int(left * 1e9)))

    def send_control(self, control: np.ndarray | None) -> None:
        """
        Publish each action group's slice of ``control``.

        ``control`` is an action the env checked (shape, finite, bounds: ``RosEnv``) or a safe
        action made from the validated config: it is not checked again here. A group whose
        publication fails, or a recording that fails, keeps no other group from its command
        (a safe action reaches every group it can); the first error is raised after. The
        first time-step after ``wait()`` then unpauses the simulator: the episode goes on.
        """
        if control is None:
            return
        self._publish(control)
        if self.paused:
            self._resume()

    def _resume(self) -> None:
        """Unpause the simulator ``wait()`` paused (with an ``unpause``; never in lockstep)."""
        if self.paused and self.spec.unpause is not None and not self.lockstep:
            self._call(self.spec.unpause, key='unpause')
        self.paused = False

    def _publish(self, control: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Make ``control`` the last target, then publish it; return it and the one before."""
        target = np.array(control, dtype=np.float32)
        jumps = self._jumps_back
        with self._target_lock:  # before publishing: a stop from another thread holds it
            replaced, self.last_action = self.last_action, target
        stamp_ns = self._clock_reader.now_ns() if self._stamps_actions or self._sent else None
        stamp = None  # the stamp as a message, made once some message needs it
        start = 0
        messages = []  # as published; None: its publish() raised (nothing went out to record)
        failed: Exception | None = None
        for group, publisher, encoder in zip(self.spec.actions, self._publishers,
                                             self._encoders):
            values = control[start:start + group.size]
            if encoder is not None:
                message = encoder.encode(values, stamp_ns if group.stamped else None)
            else:
                if stamp is None and stamp_ns is not None:
                    stamp = stamp_message(stamp_ns)
                message = group.writer.build(values, stamp=stamp if group.stamped else None)
            try:
                publisher.publish(message)
            except Exception as error:  # noqa: B902 - rclpy's errors; re-raised below
                failed = failed or error
                message = None
            messages.append(message)
            start += group.size
        self.last_action_time = self.now()
        if self._jumps_back != jumps:  # the clock went back meanwhile: a time of the new base
            self.last_action_time = self.now()
        for record, message in zip(self._sent, messages):  # with messages, never bytes
            if message is not None:
                record(message, stamp)
        if failed is not None:
            raise failed
        return target, replaced

    # -- observations -------------------------------------------------------------------------

    def get_obs_rew_terminated_info(self) -> tuple[dict[str, np.ndarray], float, bool, dict]:
        """Capture: every slot's value by name, the reward, termination and freshness info."""
        jumps = self._jumps_back
        if self._first_capture_due:
            self._first_capture_due = False
            self._learn_whether_resets_rewind(self._backs_at_reset)
        self._wait_for_fresh_messages()
        info = self._freshness_info(count_runs=True)
        values = self._read_slots(info)
        since, self._last_capture = self._last_capture, info['capture_time']
        reward = self._signal_value('reward', values, info, since)
        terminated = bool(self._signal_value('termination', values, info, since))
        if self._jumps_back != jumps:
            # The clock went back during the capture: its time may be of the old base, and
            # the jump callback may have moved the last capture before it was written here.
            # The signals were cleared at the jump: the next capture counts what this one
            # did not take.
            self._last_capture = max((signal.received for signal in self._signals.values()
                                      if signal.received > since), default=-np.inf)
        return values, float(reward), terminated, info

    def _wait_for_fresh_messages(self) -> None:
        """Bounded waits: 'newer than the action' for every slot, 'wait' policy when stale."""
        options = self.spec.options
        if self.lockstep:
            self._wait_for_the_state_at_the_target()
        # Bounded on the node's clock: in a free-running simulator's seconds under sim time
        # (a paused one is waited through), in wall seconds in lockstep, where the clock
        # stands still until the env advances it.
        clock = self.now if self._clock_reader.sim_time and not self.lockstep else None
        if options.newer_than_action:
            bound = options.newer_than_action_timeout
            action_time = self.last_action_time
            wait_all(self.slots, lambda slot: lambda: slot.stamp > action_time
                     and not slot.from_the_future(self.now()),
                     timeout=self.time_step_duration if bound is None else bound, clock=clock)
        now = self.now()
        for slot in self.slots:
            if slot.spec.on_stale == 'wait' and slot.spec.max_age is not None \
                    and slot.is_stale(now):
                # Data from the future does not end the wait: only data no older than max_age
                # and not ahead of the clock.
                slot.wait_newer_than(now - slot.spec.max_age, timeout=slot.spec.wait_timeout,
                                     clock=clock)

    def _wait_for_the_state_at_the_target(self) -> None:
        """
        Lockstep: wait for each slot's data stamped at the capture time, unless it lags.

        The simulator publishes its state, then /clock, at each target: topics are not
        ordered, so the state of this very time may come just after the clock. A topic that
        is not sent at every target (a sensor of a lower rate) would make each capture wait
        out the bound: once it did, it is waited for again only after it was at the capture
        time at two captures in a row (a rate that divides the step's comes back; 30 Hz at
        50 Hz steps, at every fifth, does not).
        """
        bound = self.spec.options.reset_timeout
        target = self.now() - SIM_TIME_SLACK
        waited = [slot for slot in self.slots if self._at_targets[slot.name] >= 2]
        late = wait_all(waited, lambda slot: lambda: slot.stamp >= target, timeout=bound)
        for slot in self.slots:
            at_target = slot.stamp >= target
            self._at_targets[slot.name] = min(self._at_targets[slot.name] + 1, 2) \
                if at_target else 0
        if late:
            self._log.warning('lockstep capture', (
                f'lockstep: no data stamped at the capture time ({self.now():.6f} s) on '
                f'{", ".join(self._topics[slot.name] for slot in late)} within reset_timeout '
                f'{bound} s (wall), captured as it is: in lockstep every observation topic '
                'should be sent at each step target; this one is no longer waited for until it '
                'is at the capture time twice in a row'))

    def _freshness_info(self, *, count_runs: bool = False) -> dict:
        """
        Ages of every slot and the names of stale ones; apply the warn/error policies.

        ``count_runs`` (captures of a time-step, not of a reset): count how many captures in a
        row each slot has been stale, and under ``on_stale: flag`` log a slot stale for
        ``stale_warn_steps`` of them (rate-limited: the frozen data is otherwise silent).
        """
        now = self.now()
        ages = {slot.name: slot.age(now) for slot in self.slots}
        stale, future = [], []
        for slot in self.slots:
            if not slot.is_stale(now):
                if count_runs:
                    self.stale_runs[slot.name] = 0
                continue
            stale.append(slot.name)
            self.stale_counts[slot.name] += 1
            run = self.stale_runs[slot.name] + count_runs
            self.stale_runs[slot.name] = run
            other_base = _other_time_base(ages[slot.name])
            if slot.from_the_future(now):
                future.append(slot.name)
                message = (f'observations.{slot.name} ({slot.spec.topic}) is stamped '
                           f"{-ages[slot.name]:.3f} s ahead of this node's clock "
                           f'({other_base or "clock skew between machines?"}): not fresh')
            else:
                message = (f'observations.{slot.name} ({slot.spec.topic}) is stale: '
                           f'age {ages[slot.name]:.3f} s > max_age {slot.spec.max_age} s'
                           + ('' if other_base is None else f' ({other_base})'))
            if slot.spec.on_stale == 'error':
                raise RuntimeError(message)
            if slot.spec.on_stale in ('warn', 'wait') or slot.name in future:
                self._log.warning(slot.name, message)
            elif run >= slot.spec.stale_warn_steps:
                self._log.warning(f'{slot.name} stale run', (
                    f'observations.{slot.name} ({slot.spec.topic}) has been stale for {run} '
                    f'steps (age {ages[slot.name]:.3f} s > max_age {slot.spec.max_age} s): '
                    'observations and rewards use old data (on_stale: flag)'))
        info = {'obs_ages': ages, 'stale': stale, 'capture_time': now,
                'action_time': self.last_action_time}
        if stale:
            info['stale_steps'] = {name: self.stale_runs[name] for name in stale}
        if future:
            info['future_stamps'] = future
        if self.spec.options.newer_than_action:
            info['newer_than_action'] = {
                slot.name: slot.stamp > self.last_action_time and slot.name not in future
                for slot in self.slots}
        return info

    def _read_slots(self, info: dict) -> dict[str, np.ndarray]:
        """Convert each slot (zeros before its first message); apply its bounds policy."""
        missing = [name for slot in self.slots for name in slot.missing()]
        if missing:
            info['missing'] = missing
        values, outside = {}, []
        for slot in self.slots:
            value = slot.read()
            if slot.outside(value):
                value = self._out_of_bounds(slot, value)
                outside.append(slot.name)
            values[slot.name] = value
        if outside:
            info['out_of_bounds'] = outside
        return values

    def _out_of_bounds(self, slot: Slot, value: np.ndarray) -> np.ndarray:
        """Apply ``out_of_bounds``: 'flag' (as is), 'clip' (NaN stays, flagged), 'error'."""
        space = slot.spec.space
        message = (f'observations.{slot.name} ({slot.spec.topic}) is outside its space '
                   f'[{bound_repr(space.low)}, {bound_repr(space.high)}]: '
                   f'{slot.describe_outside(value)}')
        policy = slot.spec.out_of_bounds
        if policy == 'error':
            raise RuntimeError(message)
        self._log.warning(f'{slot.name} bounds', f'{message} ({policy})')
        return slot.clip(value) if policy == 'clip' else value

    def _signal_value(self, name: str, obs: dict, info: dict, since: float) -> Any:
        """Reward or termination of this time-step (a topic's message counts once)."""
        signal: SignalSpec | None = getattr(self.spec, name)
        if signal is None:
            return False
        if signal.function is not None:
            return signal.function(obs, self.last_action, info)
        if signal.topic is None:
            return signal.constant
        value, any_true = self._signals[name].take(since)
        if name == 'termination':
            return any_true
        if value is None:
            info['reward_missing'] = True
            return signal.constant
        return value

    # -- episodes -----------------------------------------------------------------------------

    def reset(self, seed: int | None = None,
              options: dict | None = None) -> tuple[dict[str, np.ndarray], dict]:
        """Unpause and reset the robot, then wait for messages from after the reset."""
        self._resume()
        timeout = self.spec.options.reset_timeout
        if self.lockstep:
            # A paused simulator announces its reset state once, on a volatile topic: a slot
            # whose subscription is not matched with a publisher yet (discovery) would lose
            # it. Matched, not only in the graph: DDS matches the endpoints after that.
            start = time.monotonic()
            self._services.wait_until(lambda: all(
                subscription.get_publisher_count() for subscription in self._subscriptions),
                timeout)
            timeout = max(0.0, timeout - (time.monotonic() - start))
        counts = {slot.name: slot.count for slot in self.slots}
        baselines = {slot.name: slot.stamp for slot in self.slots}
        jumps, backs = self._jumps_back, self._clock_backs
        may_rewind = self.spec.reset is not None and self._clock_reader.sim_time
        if may_rewind:  # a jump back in the last episode: its reset was applied late
            self._learn_whether_resets_rewind(self._backs_at_reset)
        if self.spec.reset is not None:
            # A request sent again (its answer lost) may be served as well: gz applies each
            # one it got, so the clock goes back once more after the last request went out.
            sent_at = [backs]  # the clock's jumps back as each request went out
            self._call(self.spec.reset, key='reset', seed=seed, options=options,
                       sent=lambda: sent_at.append(self._clock_backs))
            if self._resets_rewind:
                timeout = max(0.0, timeout - self._wait_for_the_rewind(sent_at[-1], timeout))
            since = self.now()
            # What a slot holds once the reset returned is of before it, whatever its stamp
            # says against this node's clock: a /clock that lags the sensors (gazebo_ros
            # sends it at 10 Hz), a sensor clock ahead within stamp_tolerance. Newer data is
            # what comes after it. (Data a simulator sends between its answer and a reset it
            # applies later counts too, unless an earlier reset of this env took the clock
            # back: stamps cannot tell.)
            after = {slot.name: max(since, slot.stamp) for slot in self.slots}
        else:
            # No reset: any message is a valid first observation.
            after = {slot.name: -np.inf for slot in self.slots}
        for signal in self._signals.values():
            signal.clear()
        for name in self.stale_runs:
            self.stale_runs[name] = 0
        deadline = time.monotonic() + timeout
        self._wait_for_first_messages(after, counts, baselines, (jumps, backs), timeout)
        # The robot's data came: its node is discovered (a new env's graph was empty before).
        self._wait_for_action_subscribers(
            min(ACTION_MATCH_WAIT, max(0.0, deadline - time.monotonic())))
        if not self.lockstep:
            self._wait_for_fresh_first_messages(deadline)
        if may_rewind:
            self._resets_rewind = self._resets_rewind or self._clock_backs > backs
            self._backs_at_reset, self._first_capture_due = backs, True
        info = self._freshness_info()
        self._last_capture = info['capture_time']
        return self._read_slots(info), info

    def _learn_whether_resets_rewind(self, backs: int | None) -> None:
        """
        Sim time: the clock went back after the last reset returned: so do its resets.

        gz-sim answers its world control reset, then applies it at its next iteration: the
        old state goes on after the answer, stamped in the old time base, until /clock goes
        back, and no stamp tells it from the new. Once a reset took the clock back, the next
        ones wait for that (:meth:`_wait_for_the_rewind`). reset() learns it from a jump back
        before it returned; this, at the episode's first capture and at the next reset (a
        reset applied later still). ``backs``: the clock's jumps back by the reset's request.
        """
        if backs is None or self._resets_rewind or self._clock_backs == backs:
            return
        self._resets_rewind = True
        self._log.warning('reset rewinds late', (
            '/clock went back after reset() returned: the simulator answers its reset before '
            'it applies it (gz-sim world control does), so the observation reset() returned '
            'may be of before it; later resets wait for /clock to go back (up to '
            f'{REWIND_GRACE} s {self._rewind_grace_clock}, within reset_timeout)'))

    def _wait_for_the_rewind(self, backs: int, timeout: float) -> float:
        """
        Wait for the clock to go back after a reset's answer, as it did at an earlier reset.

        Bounded by REWIND_GRACE of sim time (of wall time in lockstep, where the clock stands
        still), and ``timeout``: a reset that went on without taking the clock back is said
        once, and later resets no longer wait for it. Return the wall seconds waited.
        """
        start = time.monotonic()
        if not self._went_back_within_grace(backs, timeout):
            self._resets_rewind = False
            self._log.warning('reset no rewind', (
                f'/clock did not go back within {REWIND_GRACE} s {self._rewind_grace_clock} '
                'after the reset answered, as it did at an earlier reset: data after the answer '
                'counts, and later resets no longer wait for it'))
        return time.monotonic() - start

    def _went_back_within_grace(self, backs: int, timeout: float) -> bool:
        """
        Wait until the clock went back (past ``backs`` jumps back) or went on REWIND_GRACE.

        Of sim time; of wall time in lockstep, where the clock stands still. At most
        ``timeout`` wall seconds. Return whether it went back.
        """
        if self.lockstep:
            timeout, moved_on = min(timeout, REWIND_GRACE), np.inf
        else:
            moved_on = self.now() + REWIND_GRACE
        self._services.wait_until(
            lambda: self._clock_backs > backs or self.now() > moved_on, timeout)
        return self._clock_backs > backs

    @property
    def _rewind_grace_clock(self) -> str:
        return 'of wall time (lockstep)' if self.lockstep else 'of sim time'

    def _wait_for_fresh_first_messages(self, deadline: float) -> None:
        """
        Under ``on_stale: error`` or ``wait``, wait for a first observation within ``max_age``.

        A message that came a moment before the reset, or a sensor that skipped a beat, would
        otherwise fail the reset ('error') or flag its first observation ('wait'); waited as a
        time-step waits ('wait': ``wait_timeout``), or up to what is left of ``reset_timeout``
        ('error'), before the policy applies. Stamps ahead of the clock or of another time
        base are not waited for: the next message would be the same, and the policy names them.
        """
        now = self.now()
        for slot in self.slots:
            policy, max_age = slot.spec.on_stale, slot.spec.max_age
            if policy not in ('wait', 'error') or max_age is None or not slot.is_stale(now) \
                    or slot.from_the_future(now) or _other_time_base(slot.age(now)):
                continue
            left = max(0.0, deadline - time.monotonic())
            slot.wait_newer_than(now - max_age, timeout=(
                left if policy == 'error' else min(left, slot.spec.wait_timeout)))

    def _wait_for_action_subscribers(self, bound: float) -> None:
        """
        Wait until each action topic's subscribers in the graph are matched, up to ``bound``.

        The graph may learn of a subscriber before DDS has matched our publisher with it: an
        episode's first actions would be lost on the way to a robot that just came up.
        Subscribers of another type or of QoS that cannot match are not waited for (the 1 Hz
        check names them); nor is a topic that nobody subscribes to.
        """
        node = self._node
        wanted = [(publisher, interface_name(group.writer.msg_type))
                  for group, publisher in zip(self.spec.actions, self._publishers)]
        self._services.wait_until(lambda: all(
            publisher.get_subscription_count() >= matchable_subscribers(node, publisher, msg_type)
            for publisher, msg_type in wanted), bound)

    def _wait_for_first_messages(self, after: dict[str, float], counts: dict[str, int],
                                 baselines: dict[str, float], jumps: tuple[int, int],
                                 timeout: float) -> None:
        """
        One ``timeout`` for all slots together; data from before the reset never counts.

        ``after``: each slot's data must be stamped after this (the reset's end, or what the
        slot held then). ``counts`` and ``baselines``: each slot's count and stamp before the
        reset was asked (data of a time base the reset took back may come before its answer);
        ``jumps``: the clock's jumps back by then, those that moved its data and all.
        """
        moves, backs = jumps
        received = {slot.name: slot.count for slot in self.slots}  # since the reset

        def old(slot: Slot) -> bool:
            # Once the clock went back (the old base's data forgotten), data ahead of it is of
            # the old base: the old state, sent until a reset applied after its answer, may
            # come after the rewound /clock. Not stamps of another time base altogether.
            now = self.now()
            return self._jumps_back > moves and slot.from_the_future(now) \
                and not _other_time_base(slot.age(now))
        if self.lockstep:
            # A paused simulator publishes its state on reset, stamped with the time it is
            # at: what messages received since the reset request gave is from after it (all
            # of a JointState's joints, which several publishers may share), unless a jump
            # back forgot it, or it is of the old base.
            def ready(slot: Slot) -> Callable[[], bool]:
                return lambda: slot.message is not None \
                    and slot.given_since(counts[slot.name]) and not old(slot)
        else:
            # Once the clock went back, what a slot holds is of the new time base unless it
            # is old: ``after`` may be of the old base (the jump came after the answer) and
            # the slot empty before.
            def ready(slot: Slot) -> Callable[[], bool]:
                def check() -> bool:
                    if slot.message is None:
                        return False
                    if self._jumps_back > moves:
                        return not old(slot)
                    return slot.stamp > after[slot.name] or slot.stamp < baselines[slot.name]
                return check
        deadline = time.monotonic() + timeout
        silent = wait_all(self.slots, ready, timeout=timeout)
        rewound = [slot for slot in self.slots if slot.stamp < baselines[slot.name]]
        if not silent and rewound and not self.lockstep and self._clock_reader.sim_time:
            # The reset took the time base back (Gazebo's /reset_simulation) and its data came
            # before the /clock that says so: let the clock follow (that clears the slots of
            # the old time base), then take data of the new one. A wall clock never follows:
            # the sensor's own time base went back, and its data counts as it is; so does a
            # /clock that goes on for REWIND_GRACE instead.
            # Whether the clock went back is counted, not read from it: a /clock that lags
            # the sensors (gazebo_ros sends it at 10 Hz) is behind their old stamps anyway.
            if not self._went_back_within_grace(backs, max(0.0, deadline - time.monotonic())):
                # /clock went on: the sensor's own time base went back (a driver or a simulator
                # plugin restarted), and its data counts as it is, as on wall time.
                now = self.now()
                for slot in rewound:
                    self._log.warning(f'{slot.name} rewound', (
                        f'observations.{slot.name} ({self._topics[slot.name]}) is stamped at '
                        f'{slot.stamp:.3f} s, before the {baselines[slot.name]:.3f} s it held '
                        f'when the reset was asked, and /clock ({now:.3f} s) did not go back: '
                        'its own time base went back (a driver or a simulator plugin '
                        f'restarted?); its data counts, {slot.age(now):.3f} s old'))
            else:
                since = self.now() - self.spec.options.stamp_tolerance
                after = {slot.name: since for slot in self.slots}
                silent = wait_all(self.slots, lambda slot: lambda: slot.message is not None
                                  and slot.stamp >= since and not old(slot),
                                  timeout=max(0.0, deadline - time.monotonic()))
        if silent:
            graph = '; '.join(describe_publishers(self._io_node, self._topics[slot.name],
                                                  interface_name(slot.reader.msg_type),
                                                  slot.spec.qos)
                              for slot in silent)
            topics = ', '.join(self._topics[slot.name] for slot in silent)
            bound = self.spec.options.reset_timeout
            if self.lockstep:  # what the messages since the reset request left out
                lacking = [name for slot in silent if slot.count > counts[slot.name]
                           for name in slot.not_given_since(counts[slot.name])]
            else:
                lacking = [name for slot in silent if slot.message is not None
                           for name in slot.missing()]
            if lacking:  # joints by name: some joints, or fields, never came
                raise TimeoutError(
                    f'reset: no complete data on {topics} within reset_timeout {bound} s: '
                    f'messages came without {", ".join(lacking)} (a JointState field left '
                    'empty, or with another number of values than of names, is not given): '
                    f'{graph}')
            now = self.now()
            late = [f'observations.{name} ({age:.3f} s old)' for slot in silent
                    if slot.count > received[slot.name]
                    for name, age in slot.stamped_by(after[slot.name], now)]
            if late:  # messages came; some joints, or all the data, stamped before the reset
                raise TimeoutError(
                    f'reset: no data stamped after the reset on {topics} within reset_timeout '
                    f'{bound} s: messages came, but stamped before it: {", ".join(late)}: a '
                    "publisher that stopped, a sensor clock behind this node's, or another "
                    'time base (sim time against wall time)? stamp: receive stamps a slot on '
                    f'arrival; {graph}')
            heard = [f'observations.{slot.name} ({self._topics[slot.name]}) names '
                     f'{", ".join(slot.reader.joint_names)}; the last message named '
                     f'{", ".join(names) or "no joint"}'
                     for slot in silent if (names := slot.names_heard()) is not None]
            if heard:  # messages came, none of them with a configured joint
                raise TimeoutError(
                    f'reset: no message on {topics} with a configured joint within '
                    f'reset_timeout {bound} s: {"; ".join(heard)} (joint_names must match the '
                    f'names the robot publishes): {graph}')
            raise TimeoutError(
                f'reset: no message on {topics} within reset_timeout {bound} s: {graph}')

    def wait(self) -> None:
        """
        Stop the robot, then pause the simulator if a service is given (rtgym's pause).

        Not in lockstep: the simulator stays paused between the env's step requests, and an
        unpause at the next reset would let it run free until the first one.
        """
        self._publish(self.get_safe_action(self.default_action))
        if self.spec.pause is not None and not self.lockstep:
            self._call(self.spec.pause, key='pause')
            self.paused = True

    def _call(self, service: ServiceSpec, *, key: str, sent: Callable[[], None] = lambda: None,
              **kwargs: Any) -> None:
        """
        Call a configured service or function; ``sent``: as each request goes out.

        The call returns as the answer comes from a simulator stepped on a ``step_until``
        topic: by that convention (``sim_robot``, ``mujoco_sim``) it applies a reset and says
        its ``/clock`` and state before it answers, and a lockstep reset returned at the next
        poll would cost ten time-steps or more (short episodes, as early in training, are
        mostly resets). Otherwise the call returns at the next poll after the answer (up to
        10 ms later), which gives a simulator that answers its reset before it applies it
        (gz sim's world control) that long before the env's first reset looks at the data;
        later resets wait for the rewind they learnt (:meth:`_wait_for_the_rewind`).
        """
        if service.function is not None:
            service.function(self._node, **kwargs)
            return
        self._services.call(service, self._clients[id(service)], key=key, sent=sent,
                            wake_on_answer=self._steps_on_a_topic)

    # -- lockstep -----------------------------------------------------------------------------

    @property
    def lockstep(self) -> bool:
        return self.spec.options.stepping == 'lockstep'

    @property
    def _steps_on_a_topic(self) -> bool:
        """Lockstep on a ``step_until`` topic: the convention of our simulators."""
        step = self.spec.step
        return self.lockstep and step is not None and step.topic is not None

    def advance_to(self, target: float) -> None:
        """
        Executor thread, lockstep: ask the paused simulator to advance to ``target``.

        The env's timers then wait for ``/clock`` to reach it. Never blocks on the simulator:
        a service request is sent and its answer checked when it comes. A service that steps
        by ``step_size`` is asked for enough steps to reach the target (a time-step that is
        no multiple of it ends up to one step late), and for none when the clock is there.
        """
        step = self.spec.step
        if step.topic is not None:
            self._step_target = target
            self._step_asked = (target, None)
            self.resend_step()
            return
        remaining = target - self.now()
        if remaining <= SIM_TIME_SLACK:
            return  # already there (a simulator that overshot): the deadline fires at once
        client = self._clients[id(step.service)]
        if not client.service_is_ready():
            self._services.wait_until(client.service_is_ready, step.service.timeout)
        fields = {}
        if step.steps_field is not None:
            fields[step.steps_field] = physics_steps(remaining, step.step_size)
        request = build_request(step.service.service_type, {**step.service.request, **fields},
                                key='step.request')
        self._step_asked = (target, fields.get(step.steps_field))
        self._step_answer = 'no answer yet'
        future = client.call_async(request)
        future.add_done_callback(self._check_step_answer)

    def describe_advance(self) -> str:
        """Say what the simulator was last asked to do in lockstep (stall messages)."""
        if self._step_asked is None:
            return 'no step request yet'
        target, steps = self._step_asked
        if self.spec.step.topic is not None:
            return (f'the last step request: {self._step_publisher.topic_name} asked for '
                    f't = {target:.9g} s (and again every 0.5 s without /clock)')
        service = self._io_node.resolve_service_name(self.spec.step.service.service)
        asked = f'{steps} physics steps to ' if steps is not None else ''
        return (f'the last step request: {service} asked for {asked}t = {target:.9g} s: '
                f'{self._step_answer}')

    def resend_step(self) -> None:
        """
        Executor thread, lockstep topic: (re)publish the current target.

        Targets are idempotent; a request sent before the simulator's reader matched the
        publisher (discovery is asymmetric) is lost, so the env asks again while it waits.
        """
        if self._step_target is not None:
            # Half the slack short of it: a target held in float seconds near the epoch may lie
            # a few hundred ns past the simulator's step, which would then step once more. Not
            # before 0: a capture at the start of a step at time 0 asks for 0.
            self._step_publisher.publish(Clock(clock=Time(
                nanoseconds=max(0, round(self._step_target * 1e9) - _REQUEST_SHORT_NS),
                clock_type=ClockType.ROS_TIME).to_msg()))

    def _check_step_answer(self, future: Any) -> None:
        try:
            check_response(self.spec.step.service, future.result(), key='step',
                           service=self.spec.step.service.service)
            self._step_answer = 'answered'
        except Exception as error:  # noqa: B902 - logged; the stall check reports the rest
            self._step_answer = f'answered with an error ({error})'
            self._log.warning('step answer', f'{error}')

    def on_clock_back(self, delta: float) -> None:
        """
        Io thread: the clock went back, by a reset or within the running time-step (jitter).

        Counted for reset(): a reset just after another (no step between) takes the clock
        back to within the time-step the first one started; the env then moves nothing
        (:meth:`on_clock_jump` is not called), yet the reset did take it back.
        """
        if delta < 0.0:
            self._clock_backs += 1

    def on_clock_jump(self, delta: float) -> None:
        """Forget data of the old time base when the clock went back (a simulator reset)."""
        if delta < 0.0:
            # Counted first and times moved last: a thread that writes a time it read before
            # the jump, then finds the count unchanged, had its time moved (or read it after).
            self._jumps_back += 1
            now = self.now()  # the rewound time: the jump callback runs once it is set
            for slot in self.slots:
                slot.forget_after(now, jumped_from=now - delta)
            for signal in self._signals.values():
                signal.clear()
            # Times of the old base move with the clock, as the schedule does: a reward or a
            # termination counts from the last capture on, data is newer than the last action.
            self._last_capture = _moved_if_ahead(self._last_capture, now, delta)
            self.last_action_time = _moved_if_ahead(self.last_action_time, now, delta)

    def abort_waits(self) -> None:
        """Any thread (env close): every wait of this interface returns now."""
        self._services.aborted.set()
        for slot in self.slots:
            slot.abort()
