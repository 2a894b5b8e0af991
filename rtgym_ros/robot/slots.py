"""
Timestamped observation slots: the newest message of a topic, and how old it is.

A subscription callback only stores a reference to the message and its stamp (on the io
thread); conversion to numpy happens once, at capture, on the executor thread. A condition
variable lets the capture wait, bounded, for a message newer than a given time.
"""

import threading
from typing import Any, Callable

import numpy as np

from rtgym_ros.msgconv.fields import message_stamp
from rtgym_ros.msgconv.readers import FieldReader


class Slot:
    """The newest message of one topic, with its stamp in seconds on the node's clock."""

    def __init__(self, name: str, reader: FieldReader, *, now: Callable[[], float],
                 use_header_stamp: bool = True) -> None:
        self.name = name
        self.reader = reader
        self._now = now
        self._use_header_stamp = use_header_stamp
        self._changed = threading.Condition()
        self.message: Any = None
        self.stamp = -np.inf
        self.received = -np.inf
        self.count = 0

    def store(self, message: Any) -> None:
        """Subscription callback: keep the message and its stamp; no conversion here."""
        received = self._now()
        stamp = message_stamp(message) if self._use_header_stamp else None
        with self._changed:
            self.message = message
            self.received = received
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

    def wait_newer_than(self, time: float, *, timeout: float) -> bool:
        """Block until a message stamped after ``time`` is here, at most ``timeout`` (wall) s."""
        with self._changed:
            return self._changed.wait_for(lambda: self.stamp > time, timeout=timeout)

    def read(self) -> np.ndarray:
        """Convert the newest message to the observation array (needs one message at least)."""
        message, _ = self.snapshot()
        if message is None:
            raise LookupError(f'observations.{self.name}: no message received yet')
        return self.reader.read(message)


class LatestValue:
    """The newest value of a one-number topic (reward, termination)."""

    def __init__(self, reader: FieldReader) -> None:
        self._reader = reader
        self.value: float | None = None

    def store(self, message: Any) -> None:
        self.value = float(self._reader.read(message)[0])
