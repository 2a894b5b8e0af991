"""
Timestamped observation slots: the newest data of a topic, and how old it is.

A subscription callback only stores a reference to the message and its stamp (on the io
thread; an image slot's frame, read from the serialized bytes, on the serialized receiver's
thread); conversion to numpy happens once, at capture, on the executor thread. A condition
variable lets the capture wait, bounded, for data newer than a given time.

Two rules of the real ROS world are kept here:

- several publishers on one ``JointState`` topic (an arm and a gripper on ``/joint_states``):
  a slot read by joint name keeps the newest values of each configured joint, each with its
  own stamp; the slot's stamp is its oldest joint's;
- stamps ahead of the node's clock (clock skew between machines) by more than
  ``stamp_tolerance`` never count as fresh.
"""

import threading
import time
from typing import Any, Callable, Iterable

import numpy as np
from rtgym_ros.msgconv.fields import message_stamp
from rtgym_ros.msgconv.readers import FieldReader
from rtgym_ros.robot.spec import ObservationSlotSpec
from sensor_msgs.msg import JointState

_JOINT_FIELDS = ('position', 'velocity', 'effort')


class Slot:
    """The newest data of one configured topic, with its stamp on the node's clock."""

    def __init__(self, spec: ObservationSlotSpec, *, now: Callable[[], float],
                 stamp_tolerance: float = 0.1) -> None:
        self.spec = spec
        self.name = spec.name
        self._now = now
        self._tolerance = stamp_tolerance
        self._changed = threading.Condition()
        self.message: Any = None
        self.stamp = -np.inf
        self.count = 0
        self._aborted = False
        self._joints = _JointTable(spec.reader.joint_names) if spec.reader.joint_names else None
        self._transform = spec.transform.apply if spec.transform is not None else None
        self._last_read: Any = None  # the message read last (a view on it must not be shared)
        space = spec.space
        self._bounded = np.issubdtype(space.dtype, np.floating) or bool(
            np.any(space.low > np.iinfo(space.dtype).min)
            or np.any(space.high < np.iinfo(space.dtype).max))

    @property
    def reader(self) -> FieldReader:
        return self.spec.reader

    # -- io thread ------------------------------------------------------------------------------

    def store(self, message: Any) -> None:
        """Subscription callback: keep the message (or image frame) and its stamp, unconverted."""
        received = self._now()
        stamp = message_stamp(message) if self.spec.use_header_stamp else None
        # A zero header stamp means the publisher did not set it: use the receive time.
        stamp = stamp if stamp else received
        with self._changed:
            if self._joints is None:
                self.message, self.stamp = message, stamp
            else:
                self.message, self.stamp = self._joints.update(message, stamp)
            self.count += 1
            self._changed.notify_all()

    # -- any thread -----------------------------------------------------------------------------

    def forget_after(self, now: float) -> None:
        """
        Forget data stamped after ``now``: the clock has just gone back to ``now``.

        Data of the old time base is stamped later than that (a receive stamp included). What a
        simulator sent of its new time base before the rewound ``/clock`` (DDS does not order
        messages across topics) is stamped at or before ``now``, and stays.
        """
        with self._changed:
            newest = self._joints.newest() if self._joints is not None else self.stamp
            if newest > now:
                self.message, self.stamp = None, -np.inf
                if self._joints is not None:
                    self._joints.clear()

    def abort(self) -> None:
        """End every wait now (the env is closing), and every later one."""
        with self._changed:
            self._aborted = True
            self._changed.notify_all()

    def snapshot(self) -> tuple[Any, float]:
        with self._changed:
            return self.message, self.stamp

    def age(self, now: float) -> float:
        """Seconds since the data was stamped (inf before the first message)."""
        return now - self.stamp

    def from_the_future(self, now: float) -> bool:
        """Say whether the stamp is ahead of the clock by more than the tolerance."""
        return self.stamp - now > self._tolerance

    def is_stale(self, now: float) -> bool:
        """Say whether the data is older than ``max_age``, or stamped in the future."""
        if self.from_the_future(now):
            return True
        return self.spec.max_age is not None and self.age(now) > self.spec.max_age

    def missing(self) -> list[str]:
        """Return what never arrived: the slot itself, or some of its configured joints."""
        if self._joints is not None:
            return [f'{self.name}.{joint}' for joint in self._joints.unseen()]
        return [] if self.message is not None else [self.name]

    def wait_newer_than(self, time_: float, *, timeout: float) -> bool:
        """Block until data stamped after ``time_`` (and not in the future) is here."""
        return self.wait_for(lambda: time_ < self.stamp <= self._now() + self._tolerance,
                             timeout=timeout)

    def wait_for(self, ready: Callable[[], bool], *, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._aborted or ready(),
                                          timeout=timeout) and not self._aborted

    # -- executor thread -----------------------------------------------------------------------

    def read(self) -> np.ndarray:
        """
        Convert the newest data (transformed), or zeros of the slot's space before any.

        Every call returns an array of its own: a reader that returns a view on the message
        (images) is copied when the same message is read again, so two observations never
        share memory (users keep them; Gymnasium's ``check_env`` checks it).
        """
        message, _ = self.snapshot()
        if message is None:
            space = self.spec.space
            return np.zeros(space.shape, space.dtype)
        value = self.spec.reader.read(message)
        if self._transform is not None:
            return self._transform(value)
        if self.spec.reader.returns_view:
            if message is self._last_read:
                value = value.copy()
            self._last_read = message
        return value

    def outside(self, value: np.ndarray) -> bool:
        """Say whether ``value`` is outside the slot's space (NaN included)."""
        if not self._bounded:
            return False
        space = self.spec.space
        return not bool(np.all((value >= space.low) & (value <= space.high)))

    def clip(self, value: np.ndarray) -> np.ndarray:
        """Return ``value`` clipped into the slot's space; NaN stays NaN (it has no place)."""
        space = self.spec.space
        return np.clip(value, space.low, space.high).astype(space.dtype, copy=False)


class _JointTable:
    """The newest position, velocity and effort of each configured joint, and its stamp."""

    def __init__(self, joint_names: tuple[str, ...]) -> None:
        self.names = joint_names
        self._index = {name: i for i, name in enumerate(joint_names)}
        self._covers: dict[tuple[str, ...], bool] = {}
        self._values = np.zeros((len(_JOINT_FIELDS), len(joint_names)))
        self._stamps = np.full(len(joint_names), -np.inf)
        self._whole: Any = None

    def update(self, message: Any, stamp: float) -> tuple[Any, float]:
        """Take a JointState in; return the message to read and the slot's stamp."""
        names = tuple(message.name)
        covers = self._covers.get(names)
        if covers is None:
            covers = self._covers[names] = set(self.names) <= set(names)
            if len(self._covers) > 16:
                self._covers.clear()
        if covers:  # one publisher with every configured joint: read it as it is
            self._whole = message
            self._stamps[:] = stamp
            return message, stamp
        if self._whole is not None:  # from now on, values come joint by joint
            self._absorb(self._whole, self._stamps.copy())
            self._whole = None
        self._absorb(message, stamp)
        return self._merged(), float(self._stamps.min())

    def _absorb(self, message: Any, stamp: Any) -> None:
        where = [(i, self._index[name]) for i, name in enumerate(message.name)
                 if name in self._index]
        if not where:
            return
        source = np.array([i for i, _ in where])
        target = np.array([j for _, j in where])
        for row, field in enumerate(_JOINT_FIELDS):
            values = np.asarray(getattr(message, field), dtype=np.float64)
            if values.size == len(message.name):  # publishers may leave a field empty
                self._values[row, target] = values[source]
        self._stamps[target] = stamp if np.isscalar(stamp) else np.asarray(stamp)[target]

    def _merged(self) -> JointState:
        merged = JointState()
        merged.name = list(self.names)
        merged.position, merged.velocity, merged.effort = (row.tolist() for row in self._values)
        return merged

    def newest(self) -> float:
        """Return the latest stamp of any joint (-inf before any)."""
        return float(self._stamps.max())

    def unseen(self) -> list[str]:
        return [name for name, stamp in zip(self.names, self._stamps) if stamp == -np.inf]

    def clear(self) -> None:
        self._values[:] = 0.0
        self._stamps[:] = -np.inf
        self._whole = None


def wait_all(slots: Iterable[Slot], ready: Callable[[Slot], Callable[[], bool]], *,
             timeout: float) -> list[Slot]:
    """Wait for ``ready(slot)()`` on every slot with one shared bound; return the late ones."""
    deadline = time.monotonic() + timeout
    return [slot for slot in slots
            if not slot.wait_for(ready(slot), timeout=max(0.0, deadline - time.monotonic()))]


class SignalSlot:
    """
    Reward or termination from a one-number topic, counted per time-step.

    A message counts for the time-step it arrives in: ``take(since)`` returns the newest value
    received after ``since`` (the previous capture), and for a termination topic whether any
    ``true`` arrived since; older values are not reused. ``clear()`` at reset.
    """

    def __init__(self, reader: FieldReader, *, now: Callable[[], float]) -> None:
        self._reader = reader
        self._now = now
        self._lock = threading.Lock()
        self.value: float | None = None
        self.received = -np.inf
        self._any_true_since = -np.inf

    def store(self, message: Any) -> None:
        value = float(self._reader.read(message)[0])
        received = self._now()
        with self._lock:
            self.value, self.received = value, received
            if value:
                self._any_true_since = max(self._any_true_since, received)

    def take(self, since: float) -> tuple[float | None, bool]:
        """Return (newest value received after ``since`` or None, any true after ``since``)."""
        with self._lock:
            fresh = self.value if self.received > since else None
            return fresh, self._any_true_since > since

    def clear(self) -> None:
        with self._lock:
            self.value, self.received, self._any_true_since = None, -np.inf, -np.inf
