"""
``RosInterface``: a RealTimeGymInterface made from a robot config, topics in and out.

Actions are published on the executor thread when a time-step starts, stamped with the node
clock. Sensor subscriptions live on the io node, whose thread only stores messages in slots, so
the capture (executor thread) may wait, bounded, for fresh data. Observation order is the
config's; the env turns it into a Dict (or keeps rtgym's Tuple).

Image slots take their messages serialized, on a thread that copies them with the GIL released
(:mod:`rtgym_ros.ros.serialized`): converting a large image into a Python message holds the GIL
long enough to delay the time-step (90 ms for 50 MB). ``RTGYM_ROS_IMAGE_TAKE=message`` keeps
them on the io node as rclpy messages.
"""

import os
import threading
import time
from typing import Any, Callable

import gymnasium.spaces as spaces
import numpy as np
from rclpy.node import Node

from rtgym_ros.core.interface import RealTimeGymInterface
from rtgym_ros.core.validate import short_repr
from rtgym_ros.msgconv.fields import IMAGE
from rtgym_ros.msgconv.image_cdr import decode_image
from rtgym_ros.msgconv.type_names import interface_name
from rtgym_ros.robot.slots import SignalSlot, Slot, wait_all
from rtgym_ros.robot.spec import ObservationSlotSpec, RobotSpec, ServiceSpec, SignalSpec
from rtgym_ros.ros.deferred_log import DeferredLog


_SERVICE_RETRY = 1.0  # seconds before a service request is sent again
_POLL = 0.01  # s between checks of a service's readiness or answer
IMAGE_TAKE_VARIABLE = 'RTGYM_ROS_IMAGE_TAKE'
IMAGE_TAKES = ('serialized', 'message')


def image_take() -> str:
    """Return how image slots take their messages: ``RTGYM_ROS_IMAGE_TAKE``, 'serialized'."""
    choice = os.environ.get(IMAGE_TAKE_VARIABLE, '').strip() or 'serialized'
    if choice not in IMAGE_TAKES:
        raise ValueError(f'{IMAGE_TAKE_VARIABLE} must be one of {IMAGE_TAKES}, '
                         f'found {choice!r}')
    return choice


class RosInterface(RealTimeGymInterface):
    """Publishes action groups, fills observation slots, calls reset/pause services."""

    wants_io_node = True

    def __init__(self, spec: RobotSpec) -> None:
        self.spec = spec
        self.time_step_duration = 0.05
        """The env's T: the bound of the ``newer_than_action`` wait when none is configured."""
        self._node: Node | None = None
        self.last_action = spec.default_action.astype(np.float32)
        self.last_action_time = -np.inf
        self.slots: list[Slot] = []
        self._publishers: list = []
        self._signals: dict[str, SignalSlot] = {}
        self._last_capture = -np.inf
        self._clients: dict[int, Any] = {}
        self.paused = False
        self._aborted = threading.Event()
        self.stale_counts = {slot.name: 0 for slot in spec.observations}

    # -- wiring -------------------------------------------------------------------------------

    def bind_node(self, node: Node, io_node: Node | None = None) -> None:
        self._node = node
        self._log = DeferredLog(node)
        self._io_node = io_node or node
        self._clock = node.get_clock()
        self._publishers = [node.create_publisher(group.writer.msg_type, group.topic, group.qos)
                            for group in self.spec.actions]
        serialized_images = image_take() == 'serialized'
        for slot_spec in self.spec.observations:
            slot = Slot(slot_spec, now=self.now,
                        stamp_tolerance=self.spec.options.stamp_tolerance)
            if not (serialized_images and self._subscribe_serialized(slot_spec, slot)):
                self._io_node.create_subscription(slot_spec.reader.msg_type, slot_spec.topic,
                                                  slot.store, slot_spec.qos)
            self.slots.append(slot)
        for name in ('reward', 'termination'):
            signal: SignalSpec | None = getattr(self.spec, name)
            if signal is not None and signal.topic is not None:
                value = SignalSlot(signal.reader, now=self.now)
                self._io_node.create_subscription(signal.reader.msg_type, signal.topic,
                                                  value.store, signal.qos)
                self._signals[name] = value
        for service in (self.spec.reset, self.spec.pause, self.spec.unpause):
            if service is not None and service.service is not None \
                    and id(service) not in self._clients:
                self._clients[id(service)] = self._io_node.create_client(
                    service.service_type, service.service)

    def _subscribe_serialized(self, slot_spec: ObservationSlotSpec, slot: Slot) -> bool:
        """Take an image slot's messages serialized; False when it is no image or impossible."""
        subscribe = getattr(self._io_node, 'create_serialized_subscription', None)
        if subscribe is None or interface_name(slot_spec.reader.msg_type) != IMAGE:
            return False
        try:
            subscribe(slot_spec.reader.msg_type, slot_spec.topic,
                      lambda data: slot.store(decode_image(data)), slot_spec.qos)
        except OSError as error:
            self._log.warning('serialized images', f'observations.{slot.name}: image messages '
                              f'are taken as rclpy messages, on the io thread ({error}); set '
                              f'{IMAGE_TAKE_VARIABLE}=message to silence this')
            return False
        return True

    def now(self) -> float:
        return self._clock.now().nanoseconds * 1e-9

    def close(self) -> None:
        self._log.destroy()

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

    def get_safe_action(self, default_action: np.ndarray) -> np.ndarray:
        """Return the default action, but the values last sent for ``on_stop: hold`` groups."""
        values = np.array(default_action, dtype=np.float32).reshape(-1)
        start = 0
        for group in self.spec.actions:
            if group.on_stop == 'hold':
                values[start:start + group.size] = self.last_action[start:start + group.size]
            start += group.size
        return values

    # -- actions ------------------------------------------------------------------------------

    def send_safe_action_now(self, safe_action: np.ndarray) -> bool:
        """
        Any thread: publish ``safe_action`` at once, without the executor thread.

        rclpy publishers may publish from any thread; nothing here takes a lock that an
        interface call on the executor thread could hold.
        """
        if not self._publishers:
            return False
        self.send_control(np.asarray(safe_action, dtype=np.float32).reshape(-1))
        return True

    def send_control(self, control: np.ndarray | None) -> None:
        """
        Publish each action group's slice of ``control``.

        ``control`` is an action the env checked (shape, finite, bounds: ``RosEnv``) or a safe
        action made from the validated config: it is not checked again here.
        """
        if control is None:
            return
        stamp = self._clock.now().to_msg()
        start = 0
        for group, publisher in zip(self.spec.actions, self._publishers):
            publisher.publish(group.writer.build(control[start:start + group.size],
                                                 stamp=stamp if group.stamped else None))
            start += group.size
        self.last_action = np.array(control, dtype=np.float32)
        self.last_action_time = self.now()

    # -- observations -------------------------------------------------------------------------

    def get_obs_rew_terminated_info(self) -> tuple[dict[str, np.ndarray], float, bool, dict]:
        """Capture: every slot's value by name, the reward, termination and freshness info."""
        self._wait_for_fresh_messages()
        info = self._freshness_info()
        values = self._read_slots(info)
        since, self._last_capture = self._last_capture, info['capture_time']
        reward = self._signal_value('reward', values, info, since)
        terminated = bool(self._signal_value('termination', values, info, since))
        return values, float(reward), terminated, info

    def _wait_for_fresh_messages(self) -> None:
        """Bounded waits: 'newer than the action' for every slot, 'wait' policy when stale."""
        options = self.spec.options
        if options.newer_than_action:
            bound = options.newer_than_action_timeout
            action_time = self.last_action_time
            wait_all(self.slots, lambda slot: lambda: slot.stamp > action_time
                     and not slot.from_the_future(self.now()),
                     timeout=self.time_step_duration if bound is None else bound)
        now = self.now()
        for slot in self.slots:
            if slot.spec.on_stale == 'wait' and slot.is_stale(now):
                slot.wait_newer_than(now - slot.spec.max_age, timeout=slot.spec.wait_timeout)

    def _freshness_info(self) -> dict:
        """Ages of every slot and the names of stale ones; apply the warn/error policies."""
        now = self.now()
        ages = {slot.name: slot.age(now) for slot in self.slots}
        stale, future = [], []
        for slot in self.slots:
            if not slot.is_stale(now):
                continue
            stale.append(slot.name)
            self.stale_counts[slot.name] += 1
            if slot.from_the_future(now):
                future.append(slot.name)
                message = (f'observations.{slot.name} ({slot.spec.topic}) is stamped '
                           f"{-ages[slot.name]:.3f} s ahead of this node's clock (clock skew "
                           f'between machines?): not fresh')
            else:
                message = (f'observations.{slot.name} ({slot.spec.topic}) is stale: '
                           f'age {ages[slot.name]:.3f} s > max_age {slot.spec.max_age} s')
            if slot.spec.on_stale == 'error':
                raise RuntimeError(message)
            if slot.spec.on_stale in ('warn', 'wait') or future:
                self._log.warning(slot.name, message)
        info = {'obs_ages': ages, 'stale': stale, 'capture_time': now,
                'action_time': self.last_action_time}
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
                   f'[{short_repr(space.low.tolist())}, {short_repr(space.high.tolist())}]: '
                   f'{short_repr(value.tolist())}')
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
        if self.paused and self.spec.unpause is not None:
            self._call(self.spec.unpause, key='unpause')
        self.paused = False
        if self.spec.reset is not None:
            self._call(self.spec.reset, key='reset', seed=seed, options=options)
            since = self.now()
        else:
            since = -np.inf  # no reset: any message is a valid first observation
        for signal in self._signals.values():
            signal.clear()
        self._wait_for_first_messages(since)
        info = self._freshness_info()
        self._last_capture = info['capture_time']
        return self._read_slots(info), info

    def _wait_for_first_messages(self, since: float) -> None:
        """One reset_timeout for all slots together; data from before the reset never counts."""
        timeout = self.spec.options.reset_timeout
        baselines = {slot.name: slot.stamp for slot in self.slots}
        silent = [slot.spec.topic for slot in wait_all(
            self.slots, lambda slot: lambda: slot.message is not None and (
                slot.stamp > since or slot.stamp < baselines[slot.name]), timeout=timeout)]
        if silent:
            raise TimeoutError(f'reset: no message on {", ".join(silent)} within reset_timeout '
                               f'{timeout} s; is the robot (or simulator) running?')

    def wait(self) -> None:
        """Stop the robot, then pause the simulator if a service is given (rtgym's pause)."""
        self.send_control(self.get_safe_action(self.spec.default_action))
        if self.spec.pause is not None:
            self._call(self.spec.pause, key='pause')
            self.paused = True

    def _call(self, service: ServiceSpec, *, key: str, **kwargs: Any) -> None:
        if service.function is not None:
            service.function(self._node, **kwargs)
            return
        client = self._clients[id(service)]
        deadline = time.monotonic() + service.timeout
        if not self._wait_until(client.service_is_ready, service.timeout):
            raise TimeoutError(f'{key}: service {service.service} is not available '
                               f'(waited {service.timeout} s)')
        request = service.service_type.Request()
        if service.data is not None:
            request.data = service.data
        # A request sent before the server's reply path is matched (a restarted robot) is
        # never answered: ask again every second until the bound.
        while True:
            done = threading.Event()
            future = client.call_async(request)
            future.add_done_callback(lambda _: done.set())
            remaining = deadline - time.monotonic()
            if self._wait_until(done.is_set, max(0.0, min(_SERVICE_RETRY, remaining))):
                break
            client.remove_pending_request(future)
            if remaining <= _SERVICE_RETRY:
                raise TimeoutError(f'{key}: service {service.service} did not answer within '
                                   f'{service.timeout} s')
        response = future.result()
        if hasattr(response, 'success') and not response.success:
            raise RuntimeError(f'{key}: service {service.service} failed: '
                               f'{getattr(response, "message", "")!r}')

    def _wait_until(self, ready: Callable[[], bool], timeout: float) -> bool:
        """Poll ``ready`` for at most ``timeout`` s; give up at once when the env closes."""
        deadline = time.monotonic() + timeout
        while not ready():
            if self._aborted.is_set():
                raise RuntimeError('the env is closing')
            remaining = deadline - time.monotonic()
            if remaining <= 0.0:
                return False
            time.sleep(min(_POLL, remaining))
        return True

    def on_clock_jump(self, delta: float) -> None:
        """Forget data of the old time base when the clock went back (a simulator reset)."""
        if delta < 0.0:
            for slot in self.slots:
                slot.clear()
            for signal in self._signals.values():
                signal.clear()

    def abort_waits(self) -> None:
        """Any thread (env close): every wait of this interface returns now."""
        self._aborted.set()
        for slot in self.slots:
            slot.abort()
