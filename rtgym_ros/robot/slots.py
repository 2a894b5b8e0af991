"""
Timestamped observation slots: the newest message of a topic, and how old it is.

A subscription callback only stores a reference to the message and its stamp (on the io
thread); conversion to numpy happens once, at capture, on the executor thread. A condition
variable lets the capture wait, bounded, for a message newer than a given time.
"""

import threading
import time
from typing import Any, Callable, Iterable

import numpy as np
from rtgym_ros.msgconv.fields import message_stamp
from rtgym_ros.msgconv.readers import FieldReader
from rtgym_ros.robot.spec import ObservationSlotSpec


class Slot:
    """The newest message of one configured topic, with its stamp on the node's clock."""

    def __init__(self, spec: ObservationSlotSpec, *, now: Callable[[], float]) -> None:
        self.spec = spec
        self.name = spec.name
        self._now = now
        self._changed = threading.Condition()
        self.message: Any = None
        self.stamp = -np.inf
        self.count = 0
        self._aborted = False

    @property
    def reader(self) -> FieldReader:
        return self.spec.reader

    def store(self, message: Any) -> None:
        """Subscription callback: keep the message and its stamp; no conversion here."""
        received = self._now()
        stamp = message_stamp(message) if self.spec.use_header_stamp else None
        with self._changed:
            self.message = message
            # A zero header stamp means the publisher did not set it: use the receive time.
            self.stamp = stamp if stamp else received
            self.count += 1
            self._changed.notify_all()

    def snapshot(self) -> tuple[Any, float]:
        with self._changed:
            return self.message, self.stamp

    def age(self, now: float) -> float:
        """Seconds since the newest message was stamped (inf before the first one)."""
        return now - self.stamp

    def is_stale(self, now: float) -> bool:
        """Say whether the newest message is older than the slot's ``max_age``."""
        return self.spec.max_age is not None and self.age(now) > self.spec.max_age

    def wait_newer_than(self, time: float, *, timeout: float) -> bool:
        """Block until a message stamped after ``time`` is here, at most ``timeout`` (wall) s."""
        with self._changed:
            return self._changed.wait_for(lambda: self.stamp > time or self._aborted,
                                          timeout=timeout) and not self._aborted

    def abort(self) -> None:
        """Any thread: end every wait now (the env is closing), and every later one."""
        with self._changed:
            self._aborted = True
            self._changed.notify_all()

    def read(self) -> np.ndarray:
        """Convert the newest message, or zeros of the slot's space before the first one."""
        message, _ = self.snapshot()
        if message is None:
            space = self.spec.space
            return np.zeros(space.shape, space.dtype)
        return self.spec.reader.read(message)


def wait_all_newer_than(slots: Iterable[Slot], time_: float, *,
                        timeout: float) -> list[Slot]:
    """Wait for every slot to hold a message stamped after ``time_``, with one shared bound."""
    deadline = time.monotonic() + timeout
    return [slot for slot in slots
            if not slot.wait_newer_than(time_, timeout=max(0.0, deadline - time.monotonic()))]


class LatestValue:
    """The newest value of a one-number topic (reward, termination)."""

    def __init__(self, reader: FieldReader) -> None:
        self._reader = reader
        self.value: float | None = None

    def store(self, message: Any) -> None:
        self.value = float(self._reader.read(message)[0])
